"""The slurm_compute health check (root) writes its state and metrics files through a new, unpredictable temporary
file in the target's directory and an atomic rename: a name planted there beforehand is never written through."""

import os
import stat
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FILES = os.path.join(ROOT, "roles", "slurm_compute", "files")
PROGRAM = os.path.join(FILES, "slurm_healthcheck.py")
# The program's package: metrics.py writes every file it replaces (the state, the record, the metrics file).
PACKAGE = os.path.join(FILES, "clusterforge_health")
METRICS = os.path.join(PACKAGE, "metrics.py")


def _write_atomically():
    with open(METRICS) as f:
        text = f.read()
    start = text.index("def write_atomically(")
    source = text[start:text.index("\n\n\ndef ", start)]
    namespace = {"os": os, "tempfile": tempfile}
    exec(compile(source, METRICS, "exec"), namespace)  # pylint: disable=exec-used
    return namespace["write_atomically"]


def test_the_old_predictable_temporary_names_are_gone():
    paths = [PROGRAM] + [os.path.join(PACKAGE, n) for n in sorted(os.listdir(PACKAGE)) if n.endswith(".py")]
    assert METRICS in paths
    for path in paths:
        with open(path) as f:
            text = f.read()
        assert ".tmp\" % (" not in text and "%d.tmp" not in text, path


def test_a_link_planted_at_any_temporary_name_is_not_written_through(tmp_path):
    write_atomically = _write_atomically()
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    target = tmp_path / "textfile" / "clusterforge_healthcheck.prom"
    target.parent.mkdir()
    # the names the earlier version used (<path>.<pid>.tmp) for a range of pids, as a user could plant them
    for pid in range(os.getpid() - 5, os.getpid() + 5):
        os.symlink(str(victim), "%s.%d.tmp" % (target, pid))
    assert write_atomically(str(target), "metric 1\n") is None
    assert target.read_text() == "metric 1\n" and not target.is_symlink()
    assert victim.read_text() == "keep me\n"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644
    assert write_atomically(str(target), "metric 2\n", mode=0o600) is None
    assert target.read_text() == "metric 2\n" and stat.S_IMODE(os.stat(target).st_mode) == 0o600
    # no temporary file left behind
    assert sorted(p.name for p in target.parent.iterdir() if not p.is_symlink()) == ["clusterforge_healthcheck.prom"]


def test_a_failed_write_leaves_no_temporary_file(tmp_path):
    write_atomically = _write_atomically()
    target = tmp_path / "d" / "state.json"
    target.mkdir(parents=True)          # a directory where the file goes: the rename fails
    problem = write_atomically(str(target), "{}\n")
    assert problem and list(target.parent.iterdir()) == [target]
