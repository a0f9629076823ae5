# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's Slurm node-state program (roles/monitoring/files/clusterforge-slurm-metrics): node states
and drain owners from `scontrol --oneliner show node` (recorded outputs), the textfile it writes for node-exporter,
and what it does when scontrol fails or hangs. It runs as the role installs it: beside a copy of the collection's
Slurm parser, with no Ansible on the host."""

import os
import re
import shutil
import stat
import subprocess
import sys
import time

import pytest
import yaml
from ansible.template import trust_as_template
from role_files import load_script, role_templar

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = os.path.join(ROOT, "roles", "monitoring")
PROGRAM = os.path.join(ROLE, "files", "clusterforge-slurm-metrics")
PARSER = os.path.join(ROOT, "plugins", "module_utils", "slurm.py")
FIXTURES = os.path.join(ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "slurm")
PROMTOOL = shutil.which("promtool")


METRICS = load_script("cf_slurm_metrics_program", PROGRAM)


def _fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


def _samples(text):
    """{(name, frozenset(labels)): value} of a Prometheus text exposition, checking every line's syntax."""
    out = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        match = re.match(r'^([a-z_:][a-z0-9_:]*)(\{([a-z_]+="(?:[^"\\\n]|\\.)*")(,[a-z_]+="(?:[^"\\\n]|\\.)*")*\})? '
                         r'(-?[0-9.e+]+)$', line)
        assert match, line
        labels = frozenset(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', match.group(2) or ""))
        out[(match.group(1), labels)] = float(match.group(5))
    return out


# --------------------------------------------------------------------------------------------- states and owners

@pytest.mark.parametrize("state, want", [
    ("IDLE", "idle"), ("ALLOCATED", "allocated"), ("MIXED", "mixed"), ("COMPLETING", "completing"),
    ("RESERVED", "reserved"), ("IDLE+DYNAMIC_NORM", "idle"),
    ("IDLE+DRAIN", "drained"), ("MIXED+DRAIN", "draining"), ("ALLOCATED+DRAIN", "draining"),
    ("DOWN+DRAIN+NOT_RESPONDING", "drained"), ("DOWN", "down"), ("DOWN+NOT_RESPONDING", "down"),
    ("IDLE+NOT_RESPONDING", "down"), ("FAIL", "down"), ("FUTURE", "other"), ("", "other"),
])
def test_each_node_counts_in_one_state(state, want):
    assert METRICS.node_state(state) == want


@pytest.mark.parametrize("reason, owner", [
    ("cf-health: gpu 3 uncorrectable ECC [root@2025-01-01T00:00:00]", "cf-health"),
    ("cf-roll:r20250101 kernel 6.8 [root@2025-01-01T00:00:00]", "cf-roll"),
    ("admin: fan check [alice@2025-01-01T00:00:00]", "admin"),
    ("NHC: check_hw_ib: no IB port is ACTIVE", "NHC"),
    ("Not responding [slurm@2025-01-01T00:00:00]", "other"),
    ("bad DIMM B3 state=replace [alice@2024-04-30T17:15:02]", "other"),
    (None, "none"), ("none", "none"), ("", "none"),
])
def test_the_owner_of_a_drain_is_its_reasons_prefix(reason, owner):
    assert METRICS.reason_owner(reason) == owner


def test_recorded_one_line_output():
    nodes = METRICS.slurm.parse_scontrol_nodes(_fixture("scontrol-o-show-node-2-nodes.txt"))
    counts, drained = METRICS.summarise(nodes)
    assert counts == dict.fromkeys(METRICS.STATES, 0) | {"draining": 1, "idle": 1}
    assert drained == [("gpu01", "cf-roll")]


def test_recorded_slurm_24_11_output_from_the_lab():
    nodes = METRICS.slurm.parse_scontrol_nodes(_fixture("scontrol-show-node-24.11-2-nodes-drain.txt"))
    counts, drained = METRICS.summarise(nodes)
    assert sum(counts.values()) == 2
    assert [name for name, _owner in drained] == ["gpu02"] and drained[0][1] == "cf-roll"


def test_drains_set_by_others_are_counted_with_their_owner():
    nodes = METRICS.slurm.parse_scontrol_nodes(_fixture("scontrol-show-node-3-nodes-drain-reasons.txt"))
    counts, drained = METRICS.summarise(nodes)
    assert counts["draining"] == 1 and counts["drained"] == 1 and counts["idle"] == 1
    assert drained == [("gpu01", "cf-roll"), ("gpu02", "other")]


# --------------------------------------------------------------------------------------------- the textfile

def test_the_textfile_has_every_state_the_drained_nodes_and_the_run_time():
    text = METRICS.render(dict.fromkeys(METRICS.STATES, 0) | {"drained": 2, "idle": 6}, [("gpu01", "cf-health"),
                          ("gpu07", "admin")], 1735689600.5, 0.042)
    samples = _samples(text)
    for state in METRICS.STATES:
        assert ("clusterforge_slurm_nodes", frozenset({("state", state)})) in samples
    assert samples[("clusterforge_slurm_nodes", frozenset({("state", "drained")}))] == 2
    assert samples[("clusterforge_slurm_node_drained", frozenset({("node", "gpu01"), ("reason_owner", "cf-health")}))] == 1
    assert samples[("clusterforge_slurm_node_drained", frozenset({("node", "gpu07"), ("reason_owner", "admin")}))] == 1
    assert samples[("clusterforge_slurm_metrics_last_run_timestamp_seconds", frozenset())] == 1735689600.5
    assert samples[("clusterforge_slurm_metrics_duration_seconds", frozenset())] == 0.042
    for name in ("clusterforge_slurm_nodes", "clusterforge_slurm_node_drained",
                 "clusterforge_slurm_metrics_last_run_timestamp_seconds", "clusterforge_slurm_metrics_duration_seconds"):
        assert "# TYPE %s gauge" % name in text and "# HELP %s " % name in text


def test_label_values_are_escaped():
    text = METRICS.render(dict.fromkeys(METRICS.STATES, 0), [('we"ird\\node', "other")], 0, 0)
    assert 'clusterforge_slurm_node_drained{node="we\\"ird\\\\node",reason_owner="other"} 1' in text


@pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian package prometheus) not installed")
def test_promtool_reads_the_textfile():
    text = METRICS.render(dict.fromkeys(METRICS.STATES, 1), [("gpu01", "cf-health")], time.time(), 0.1)
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    # exit 0: no finding; 3: lint findings only. A parse error exits 1.
    assert proc.returncode in (0, 3) and "error while linting" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


# --------------------------------------------------------------------------------------------- as installed

def _exe(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def installed(tmp_path):
    """The program and the parser as the role installs them (/usr/libexec/clusterforge), a fake scontrol, and the
    textfile directory."""
    libexec = tmp_path / "libexec"
    libexec.mkdir()
    shutil.copy(PROGRAM, libexec / "clusterforge-slurm-metrics")
    shutil.copy(PARSER, libexec / "clusterforge_slurm.py")
    textfile = tmp_path / "node-exporter"
    textfile.mkdir()
    scontrol = tmp_path / "scontrol"
    _exe(scontrol, '#!/bin/sh\necho "$*" >> "%s/scontrol.calls"\n[ -f "%s/hang" ] && sleep 30\n'
                   'cat "%s/nodes.txt"\nexit $(cat "%s/rc" 2>/dev/null || echo 0)\n' % ((tmp_path,) * 4))
    (tmp_path / "nodes.txt").write_text(_fixture("scontrol-o-show-node-2-nodes.txt"))
    return tmp_path


def _run(tmp, *extra):
    # -I: no PYTHONPATH, no user site: the program finds its parser beside itself, as on a node without Ansible.
    argv = [sys.executable, "-I", str(tmp / "libexec" / "clusterforge-slurm-metrics"),
            "--output", str(tmp / "node-exporter" / "clusterforge_slurm.prom"), "--scontrol", str(tmp / "scontrol")]
    return subprocess.run(argv + list(extra), capture_output=True, text=True, timeout=60, check=False)


def test_writes_the_textfile_from_one_scontrol_call(installed):
    proc = _run(installed)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (installed / "scontrol.calls").read_text().splitlines() == ["--oneliner show node"]
    out = installed / "node-exporter" / "clusterforge_slurm.prom"
    assert stat.S_IMODE(out.stat().st_mode) == 0o644
    samples = _samples(out.read_text())
    assert samples[("clusterforge_slurm_node_drained", frozenset({("node", "gpu01"), ("reason_owner", "cf-roll")}))] == 1
    assert samples[("clusterforge_slurm_nodes", frozenset({("state", "idle")}))] == 1
    assert abs(samples[("clusterforge_slurm_metrics_last_run_timestamp_seconds", frozenset())] - time.time()) < 60
    # nothing but the .prom file is left in the directory node-exporter reads
    assert sorted(p.name for p in (installed / "node-exporter").iterdir()) == ["clusterforge_slurm.prom"]


def test_a_failing_scontrol_leaves_the_last_file_so_it_grows_stale(installed):
    assert _run(installed).returncode == 0
    out = installed / "node-exporter" / "clusterforge_slurm.prom"
    before = out.read_text()
    (installed / "rc").write_text("1")
    proc = _run(installed)
    assert proc.returncode == 1
    assert "rc 1" in proc.stderr and "left as it was" in proc.stderr
    assert out.read_text() == before


def test_a_hanging_scontrol_is_given_up_on(installed):
    (installed / "hang").write_text("")
    start = time.monotonic()
    proc = _run(installed, "--timeout", "1")
    assert proc.returncode == 1 and "no answer within 1 s" in proc.stderr
    assert time.monotonic() - start < 20
    assert not (installed / "node-exporter" / "clusterforge_slurm.prom").exists()


def test_refuses_an_output_node_exporter_would_not_read(installed):
    proc = subprocess.run([sys.executable, "-I", str(installed / "libexec" / "clusterforge-slurm-metrics"),
                           "--output", str(installed / "x.txt")], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "must end in .prom" in proc.stderr


# --------------------------------------------------------------------------------------------- the role installs it

def test_the_role_installs_the_program_beside_the_collections_parser():
    with open(os.path.join(ROLE, "tasks", "config.yml")) as f:
        tasks = yaml.safe_load(f)
    (task,) = [t for t in tasks if t.get("name", "").startswith("Install the Slurm node-state program")]
    templar = role_templar(ROOT, "monitoring", role_path=ROLE)
    # the program's name is the basename of __monitoring_slurm_metrics_program, the path its unit runs
    items = {templar.template(trust_as_template(i["dest"])): i for i in task["loop"]}
    # under the names the fixture `installed` gives them (the tests above run the program so, finding its parser)
    assert sorted(items) == ["clusterforge-slurm-metrics", "clusterforge_slurm.py"]
    beside = "{{ __monitoring_libexec_dir }}/{{ __monitoring_slurm_metrics_program | basename }}"
    assert templar.template(trust_as_template(beside)) == templar.template(
        trust_as_template("{{ __monitoring_slurm_metrics_program }}"))
    # the parser is the collection's own, found from the role's path
    src = templar.template(trust_as_template(items["clusterforge_slurm.py"]["src"]))
    assert os.path.samefile(src, PARSER), src
    assert os.path.isfile(os.path.join(ROLE, "files", items["clusterforge-slurm-metrics"]["src"]))
    assert items["clusterforge-slurm-metrics"]["mode"] == "0755"
