"""tests/tools/side_by_side.sh, which `make test` runs: every stream runs to its end, a failed one fails the whole,
and the end of the output names what failed (CI keeps only the tail of the output), without the lines of tasks that
merely retried or of results that say failed: False."""

import os
import re
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "tests", "tools", "side_by_side.sh")

MAKEFILE = """\
broken:
\t@echo "broken: lint failed"
\t@echo "FAILED - RETRYING: [cf-slurm-ctl]: Wait until it runs (20 retries left)."
\t@echo "changed: [localhost] => (item={'failed': False, 'started': True})"
\t@echo "FAILED tests/unit/test_x.py::test_y - AssertionError: boom"
\t@echo "1 failed, 10 passed in 2.00s"
\t@echo "localhost : ok=3 changed=0 unreachable=0 failed=0 skipped=1"
\t@false
fine:
\t@sleep 1; echo "the other stream ran to its end"
"""


def run(tmp_path):
    (tmp_path / "Makefile").write_text(MAKEFILE)
    # as a plain shell runs it, not with the flags of the make that runs this test (make test-unit)
    env = dict((k, v) for k, v in os.environ.items() if k not in ("MAKE", "MAKEFLAGS", "MFLAGS", "MAKELEVEL"))
    return subprocess.run(["bash", SCRIPT, "broken", "fine"], cwd=str(tmp_path), capture_output=True, text=True,
                          check=False, timeout=60, env=env)


def test_a_failed_stream_fails_the_whole_and_the_other_runs_to_its_end(tmp_path):
    proc = run(tmp_path)
    assert proc.returncode == 1
    assert "fine: the other stream ran to its end" in proc.stdout
    assert proc.stderr.rstrip().endswith("side_by_side: failed: broken")
    assert (tmp_path / ".cache" / "side_by_side" / "fine.log").read_text() == "fine: the other stream ran to its end\n"


def test_the_end_of_the_output_names_what_failed_and_nothing_else(tmp_path):
    summary = run(tmp_path).stderr.split("side_by_side: what failed in broken", 1)[1]
    assert "broken: broken: lint failed" in summary
    assert "broken: FAILED tests/unit/test_x.py::test_y - AssertionError: boom" in summary
    assert "broken: 1 failed, 10 passed in 2.00s" in summary
    assert re.search(r"broken: make(\[\d+\])?: \*\*\* \[Makefile:", summary), summary
    assert "RETRYING" not in summary and "'failed': False" not in summary and "failed=0" not in summary
    assert "fine:" not in summary
