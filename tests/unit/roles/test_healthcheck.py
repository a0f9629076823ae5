# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Decision logic of the slurm_compute health check, run as a program with fake nvidia-smi, dcgmi and scontrol
on PATH (the fakes print recorded-format output and log every call); its time budget, with fakes that hang; and
the epilog and systemd unit that run it after each job."""

import ast
import configparser
import json
import os
import re
import shlex
import stat
import subprocess
import sys
import time

import jinja2
import pytest
import yaml

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "slurm_compute")
TEMPLATE = os.path.join(ROLE, "templates", "usr", "libexec", "clusterforge", "slurm-healthcheck.j2")
EPILOG = os.path.join(ROLE, "templates", "etc", "slurm", "epilog.d", "90-cf-healthcheck.j2")
UNIT = os.path.join(ROLE, "templates", "etc", "systemd", "system", "clusterforge-healthcheck.service.j2")
HC_PATH = "/usr/libexec/clusterforge/slurm-healthcheck"
DCGMI_EMULATOR = os.path.join(ROOT, "tests", "lab", "emulators", "dcgmi")
# Slurm's client commands: Slurm's prolog/epilog guide says prolog and epilog scripts must call none of them.
SLURM_COMMANDS = re.compile(r"\b(scontrol|sinfo|squeue|srun|sbatch|salloc|scancel|sacct|sacctmgr|sstat|sprio|sshare|"
                            r"sreport|sdiag|strigger|sbcast|sattach|scrontab)\b")

FAKE = """#!/bin/sh
# fake {name}: logs its arguments, prints $FAKE_DIR/{name}.out (or {name}.<subcommand>.out: the first argument,
# "apps" for nvidia-smi's --query-compute-apps), exits with {name}.rc (or {name}.<subcommand>.rc);
# hangs (a child sleep, its pid in {name}.sleep.pid) when {name}.hang or {name}.<first argument>.hang exists
echo "$*" >> "$FAKE_DIR/{name}.calls"
if [ -f "$FAKE_DIR/{name}.hang" ] || [ -f "$FAKE_DIR/{name}.$1.hang" ]; then
  sleep 30 & echo $! > "$FAKE_DIR/{name}.sleep.pid"; wait; exit 0
fi
if [ "$1" = update ]; then exit 0; fi
if [ "$1 $2" = "health -s" ]; then : > "$FAKE_DIR/dcgmi.watches"; echo "Health monitor systems set successfully."; exit 0; fi
if [ "{name}" = dcgmi ] && [ -f "$FAKE_DIR/dcgmi.needs-watches" ] && [ ! -f "$FAKE_DIR/dcgmi.watches" ]; then
  echo "Error: Health watches not enabled. Please enable watches. "; exit 255
fi
case "$1" in --query-compute-apps*) sub=apps ;; --query-gpu*) sub=gpu ;; *) sub="$1" ;; esac
out="$FAKE_DIR/{name}.out"; rc="$FAKE_DIR/{name}.rc"
[ -f "$FAKE_DIR/{name}.$sub.out" ] && out="$FAKE_DIR/{name}.$sub.out"
[ -f "$FAKE_DIR/{name}.$sub.rc" ] && rc="$FAKE_DIR/{name}.$sub.rc"
[ -f "$out" ] && cat "$out"
exit $(cat "$rc" 2>/dev/null || echo 0)
"""

HEALTHY_GPU = "{i}, 0, [N/A], No, 34"
NODE_IDLE = ("NodeName=gpu01 Arch=x86_64 CoresPerSocket=2 CPUAlloc=0 CPUTot=2 Gres=gpu:h100:8 NodeAddr=gpu01 "
             "State=IDLE ThreadsPerCore=1 CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s")
DCGM_HEALTHY = {"body": {"Overall Health": {"value": "Healthy"}}, "header": ["Health Monitor Report"]}
DCGM_FAIL = {"body": {"Overall Health": {"value": "Failure"},
                      "GPU": {"children": {"2": {"value": "Failure", "children": {"Errors": {"children": {
                          "Memory": {"value": "Failure", "overflow": ["A DBE has occurred"]}}}}}}}},
             "header": ["Health Monitor Report"]}


def node_line(state, reason=None):
    text = NODE_IDLE.replace("State=IDLE", "State=" + state)
    if reason is not None:
        text += " Reason=%s [root@2025-01-01T10:00:00]" % reason
    return text + "\n"


class Node(object):
    def __init__(self, tmp_path):
        self.dir = tmp_path
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.script = tmp_path / "slurm-healthcheck"
        with open(TEMPLATE) as handle:
            text = handle.read().replace("{{ ansible_managed | comment }}", "# rendered for the test")
        self.script.write_text(text)
        self.mounts = tmp_path / "mounts"
        self.mounts.write_text("proc /proc proc rw 0 0\n")
        self.config = {"node_name": "gpu01", "gpu_count": 8, "mounts_file": str(self.mounts), "dcgm": "auto",
                       "syslog": False, "state_dir": str(tmp_path / "state")}
        self.gpus(8)
        self.node("IDLE")

    def tool(self, name, out=None, rc=0):
        path = self.bin / name
        path.write_text(FAKE.format(name=name))
        path.chmod(path.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
        if out is not None:
            (self.dir / (name + ".out")).write_text(out)
        (self.dir / (name + ".rc")).write_text(str(rc))

    def gpus(self, count, change=None):
        rows = [HEALTHY_GPU.format(i=i) for i in range(count)]
        if change:
            for index, row in change.items():
                rows[index] = row
        self.tool("nvidia-smi", "\n".join(rows) + "\n")

    def node(self, state, reason=None):
        self.tool("scontrol", node_line(state, reason))

    def dcgm(self, doc, rc=0):
        self.tool("dcgmi", json.dumps(doc, indent=1) + "\n", rc)

    def sub(self, name, sub, out, rc=0):
        """Output and exit status of one subcommand of a fake (dcgmi diag, nvidia-smi's compute-apps query)."""
        (self.dir / ("%s.%s.out" % (name, sub))).write_text(out)
        (self.dir / ("%s.%s.rc" % (name, sub))).write_text(str(rc))

    def diag(self, fail=None):
        """`dcgmi diag -r 1 -j` as the lab's DCGM emulator prints it (DCGM 4.x JSON), optionally failing
        (test, gpu)."""
        env = dict(os.environ, CLUSTERFORGE_EMU_STATE_DIR=str(self.dir / "emu-state"),
                   CLUSTERFORGE_EMU_RUN_DIR=str(self.dir / "emu-run"))
        env.pop("CLUSTERFORGE_EMU_DCGM_GPUS", None)
        if fail:
            subprocess.run([sys.executable, DCGMI_EMULATOR, "--emu-fail", fail[0], str(fail[1])], env=env, check=True,
                           capture_output=True)
        proc = subprocess.run([sys.executable, DCGMI_EMULATOR, "diag", "-r", "1", "-j"], env=env, check=False,
                              capture_output=True, text=True)
        self.sub("dcgmi", "diag", proc.stdout, proc.returncode)
        return proc

    def calls(self, name):
        path = self.dir / (name + ".calls")
        return path.read_text().splitlines() if path.exists() else []

    def updates(self):
        return [c for c in self.calls("scontrol") if c.startswith("update")]

    def hang(self, name, subcommand=None):
        (self.dir / (name + ("." + subcommand if subcommand else "") + ".hang")).write_text("")

    def run(self, *extra, **kw):
        cfg = self.dir / "healthcheck.json"
        cfg.write_text(json.dumps(self.config))
        env = dict(os.environ, FAKE_DIR=str(self.dir), PATH=str(self.bin) + ":/usr/bin:/bin")
        argv = kw.get("argv") or [sys.executable, str(self.script)]
        began = time.monotonic()
        proc = subprocess.run(argv + ["--config", str(cfg)] + list(extra),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env,
                              check=False, timeout=120)
        proc.wall = time.monotonic() - began
        return proc


@pytest.fixture
def node(tmp_path):
    return Node(tmp_path)


def test_healthy_idle_node_is_left_alone(node):
    proc = node.run()
    assert proc.returncode == 0, proc.stderr
    assert node.updates() == []
    assert "healthy" in proc.stdout
    assert node.calls("nvidia-smi")[0].startswith("--query-gpu=index,ecc.errors.uncorrected.volatile.total")


def test_missing_gpu_drains_with_cf_health_reason(node):
    node.gpus(7)
    proc = node.run()
    assert proc.returncode == 1
    assert node.updates() == ["update NodeName=gpu01 State=DRAIN Reason=cf-health: GPU count 7 < 8"]


@pytest.mark.parametrize("row, reason", [
    ("3, 2, [N/A], No, 34", "GPU 3 uncorrectable ECC errors 2"),
    ("3, 0, Yes, No, 34", "GPU 3 retired pages pending"),
    ("3, 0, [N/A], Yes, 34", "GPU 3 row remap pending"),
    ("3, 0, [N/A], No, 91", "GPU 3 temperature 91 C > 85 C"),
])
def test_gpu_faults_drain(node, row, reason):
    node.gpus(8, {3: row})
    assert node.run().returncode == 1
    assert node.updates() == ["update NodeName=gpu01 State=DRAIN Reason=cf-health: " + reason]


def test_thresholds_come_from_the_configuration(node):
    node.gpus(8, {1: "1, 2, [N/A], No, 88"})
    node.config.update(max_temperature_c=90, max_ecc_uncorrectable=5)
    assert node.run().returncode == 0
    assert node.updates() == []


def test_admin_drain_is_never_overwritten(node):
    node.node("IDLE+DRAIN", "bad DIMM, ticket 4711")
    node.gpus(7)
    assert node.run().returncode == 1
    assert node.updates() == []


def test_admin_drain_is_never_resumed(node):
    node.node("IDLE+DRAIN", "bad DIMM, ticket 4711")
    assert node.run().returncode == 0
    assert node.updates() == []


def test_own_drain_is_resumed_when_healthy(node):
    node.node("IDLE+DRAIN", "cf-health: GPU count 7 < 8")
    assert node.run().returncode == 0
    assert node.updates() == ["update NodeName=gpu01 State=RESUME"]


def test_own_drain_with_same_reason_is_unchanged(node):
    node.node("MIXED+DRAIN", "cf-health: GPU count 7 < 8")
    node.gpus(7)
    assert node.run().returncode == 1
    assert node.updates() == []


def test_own_drain_reason_follows_the_current_fault(node):
    node.node("IDLE+DRAIN", "cf-health: GPU count 7 < 8")
    node.gpus(8, {0: "0, 1, [N/A], No, 34"})
    node.run()
    assert node.updates() == ["update NodeName=gpu01 State=DRAIN Reason=cf-health: GPU 0 uncorrectable ECC errors 1"]


def test_down_node_not_drained_gets_drained(node):
    node.node("DOWN*", "Not responding")
    node.gpus(6)
    node.run()
    # DOWN with someone else's reason but no DRAIN flag: draining adds our reason (the base state stays DOWN).
    assert node.updates() == ["update NodeName=gpu01 State=DRAIN Reason=cf-health: GPU count 6 < 8"]


def test_dcgm_failure_drains(node):
    node.dcgm(DCGM_FAIL)
    assert node.run().returncode == 1
    assert node.calls("dcgmi") == ["health -c -j"]
    assert node.updates() == ["update NodeName=gpu01 State=DRAIN Reason=cf-health: dcgmi health Failure (GPU 2 Memory Failure)"]


def test_dcgm_healthy_and_warning_pass(node):
    node.dcgm({"body": {"Overall Health": {"value": "Warning"}}})
    assert node.run().returncode == 0
    node.dcgm(DCGM_HEALTHY)
    assert node.run().returncode == 0
    assert node.updates() == []


def test_dcgm_warning_fails_when_configured(node):
    node.dcgm({"body": {"Overall Health": {"value": "Warning"}}})
    node.config["dcgm_fail_on_warning"] = True
    assert node.run().returncode == 1
    assert node.updates()[0].startswith("update NodeName=gpu01 State=DRAIN Reason=cf-health: dcgmi health Warning")


def test_dcgm_watches_are_set_when_missing(node):
    node.dcgm(DCGM_HEALTHY)
    (node.dir / "dcgmi.needs-watches").write_text("")
    assert node.run().returncode == 0
    assert node.calls("dcgmi") == ["health -c -j", "health -s a", "health -c -j"]
    assert node.updates() == []


def test_dcgm_error_drains(node):
    node.dcgm({}, rc=255)
    (node.dir / "dcgmi.out").write_text("Error: unable to establish a connection to the specified host: localhost\n")
    assert node.run().returncode == 1
    assert node.updates()[0].startswith("update NodeName=gpu01 State=DRAIN Reason=cf-health: dcgmi health -c failed (rc 255)")


def test_dcgm_absent_is_skipped_unless_required(node):
    assert node.run().returncode == 0
    node.config["dcgm"] = True
    assert node.run().returncode == 1
    assert node.updates() == ["update NodeName=gpu01 State=DRAIN Reason=cf-health: dcgmi not found"]


def test_missing_lustre_mount_drains(node):
    node.config["lustre_mounts"] = ["/lustre/scratch"]
    assert node.run().returncode == 1
    assert node.updates() == ["update NodeName=gpu01 State=DRAIN Reason=cf-health: Lustre not mounted at /lustre/scratch"]
    node.mounts.write_text("10.0.0.1@o2ib:/scratch /lustre/scratch lustre rw,flock 0 0\n")
    node.node("IDLE")
    (node.dir / "scontrol.calls").unlink()
    assert node.run().returncode == 0
    assert node.updates() == []


def test_nvidia_smi_failure_drains(node):
    node.tool("nvidia-smi", "Failed to initialize NVML: Driver/library version mismatch\n", rc=18)
    assert node.run().returncode == 1
    assert node.updates() == ["update NodeName=gpu01 State=DRAIN Reason=cf-health: nvidia-smi failed (rc 18): "
                              "Failed to initialize NVML: Driver/library version mismatch"]


def test_node_without_gpus_skips_gpu_checks(node):
    node.config["gpu_count"] = 0
    node.tool("nvidia-smi", "", rc=9)
    assert node.run().returncode == 0
    assert node.calls("nvidia-smi") == []


def test_dry_run_and_epilog_modes(node):
    node.gpus(7)
    proc = node.run("--dry-run")
    assert proc.returncode == 1 and node.updates() == [] and "(dry run)" in proc.stdout
    assert node.run("--epilog").returncode == 0
    assert node.updates() == ["update NodeName=gpu01 State=DRAIN Reason=cf-health: GPU count 7 < 8"]


def test_multiple_faults_are_joined_and_bounded(node):
    node.gpus(4, {i: "%d, 9, Yes, Yes, 99" % i for i in range(4)})
    node.run()
    update = node.updates()[0]
    reason = update.split("Reason=", 1)[1]
    assert reason.startswith("cf-health: GPU count 4 < 8; GPU 0 uncorrectable ECC errors 9;")
    assert len(reason) <= 200 and reason.endswith("...")


# --- a prefix the check cannot own: it never resumes and never drains, whatever its configuration says -------------
@pytest.mark.parametrize("prefix", ["", "   ", "cf-", "cf-roll:", "cf-roll:x", "c", "NHC", "Kill"])
@pytest.mark.parametrize("reason", ["cf-roll:123", "cf-roll:20250101T000000Z FAILED dcgm-diag: level 1",
                                    "bad DIMM, ticket 4711", "NHC: check_hw_ib failed", "Kill task failed"])
def test_foreign_or_empty_prefix_never_resumes(node, prefix, reason):
    node.config["reason_prefix"] = prefix
    node.node("IDLE+DRAIN", reason)
    proc = node.run()
    assert node.updates() == []
    assert proc.returncode == 2
    assert "refusing to drain or resume" in proc.stderr


@pytest.mark.parametrize("prefix", ["", "cf-"])
def test_foreign_or_empty_prefix_never_drains(node, prefix):
    node.config["reason_prefix"] = prefix
    node.gpus(7)
    proc = node.run()
    assert node.updates() == []
    assert proc.returncode == 2
    assert "faults (not acted on): GPU count 7 < 8" in proc.stderr


def test_refused_prefix_from_the_epilog_exits_0(node):
    # a failing epilog would drain the node with a generic reason that nobody owns
    node.config["reason_prefix"] = "cf-"
    node.node("IDLE+DRAIN", "cf-roll:123")
    proc = node.run("--epilog")
    assert proc.returncode == 0
    assert node.updates() == []
    assert "refusing" in proc.stderr


def test_missing_prefix_in_configuration_is_refused(node):
    node.config["reason_prefix"] = None
    node.node("IDLE+DRAIN", "anything")
    assert node.run().returncode == 2
    assert node.updates() == []


def test_own_prefix_still_resumes_only_its_own(node):
    node.config["reason_prefix"] = "site-hc:"
    node.node("IDLE+DRAIN", "cf-roll:123")
    assert node.run().returncode == 0
    assert node.updates() == []
    node.node("IDLE+DRAIN", "site-hc: GPU count 7 < 8")
    assert node.run().returncode == 0
    assert node.updates() == ["update NodeName=gpu01 State=RESUME"]


def _script_tuple(name):
    with open(TEMPLATE) as handle:
        text = handle.read()
    tree = ast.parse(text.replace("{{ ansible_managed | comment }}", ""))
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and getattr(stmt.targets[0], "id", None) == name:
            return ast.literal_eval(stmt.value)
    raise AssertionError(name + " not found in the health check")


_script_constant = _script_tuple


def test_owner_lists_match_preflight():
    from ansible_collections.clusterforge.gpu.plugins.plugin_utils import preflight_slurm
    assert _script_tuple("OTHER_OWNERS") == tuple(p for p, who in preflight_slurm.OTHER_REASON_OWNERS)
    assert _script_tuple("SLURM_REASONS") == preflight_slurm.SLURM_REASONS


# --- the time budget: slurmd kills HealthCheckProgram after 60 s, so a run ends by itself within its budget --------
BUDGET = 3  # a small budget, so that a hung tool shows within a test


def _timing(proc):
    """The --timing JSON line (the last line of stdout)."""
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _alive(pid):
    """The process exists and is not a zombie (this test's container may not reap orphans)."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _budget_node(node, **config):
    node.config.update(budget_seconds=BUDGET, command_timeout_seconds=20, **config)
    node.dcgm(DCGM_HEALTHY)
    return node


def test_hung_nvidia_smi_drains_within_the_budget(node):
    _budget_node(node)
    node.hang("nvidia-smi")
    proc = node.run("--timing")
    assert proc.wall < BUDGET, (proc.wall, proc.stdout, proc.stderr)
    assert proc.returncode == 1, proc.stderr
    # a hung nvidia-smi is a fault (a GPU that fell off the bus); the check it left no time for is named too
    assert len(node.updates()) == 1
    assert re.match(r"^update NodeName=gpu01 State=DRAIN Reason=cf-health: nvidia-smi: no answer within \d+ s; "
                    r"dcgmi health not run: time budget spent$", node.updates()[0]), node.updates()
    assert node.calls("dcgmi") == []
    timing = _timing(proc)
    assert timing["not_finished"] == ["nvidia-smi", "dcgmi health"]
    assert [c["outcome"] for c in timing["commands"]] == ["no answer", "not run", "rc 0", "rc 0"]
    # the hung tool was killed with what it started (its own process group), not left running
    assert not _alive(int((node.dir / "nvidia-smi.sleep.pid").read_text()))


def test_hung_dcgmi_drains_within_the_budget(node):
    _budget_node(node)
    node.hang("dcgmi")
    proc = node.run()
    assert proc.wall < BUDGET, (proc.wall, proc.stdout, proc.stderr)
    assert proc.returncode == 1
    assert len(node.updates()) == 1
    assert re.match(r"^update NodeName=gpu01 State=DRAIN Reason=cf-health: dcgmi health: no answer within \d+ s$",
                    node.updates()[0]), node.updates()
    assert "not finished: dcgmi health" in proc.stdout
    assert not _alive(int((node.dir / "dcgmi.sleep.pid").read_text()))


@pytest.mark.parametrize("gpus, status, summary", [(8, 2, "healthy"), (7, 2, "GPU count 7 < 8")])
def test_hung_scontrol_ends_within_the_budget_and_changes_nothing(node, gpus, status, summary):
    # e.g. the run at slurmd start, before the node registered, or slurmctld unreachable: not a fault of the node
    _budget_node(node)
    node.gpus(gpus)
    node.hang("scontrol")
    proc = node.run()
    assert proc.wall < BUDGET, (proc.wall, proc.stdout, proc.stderr)
    assert proc.returncode == status
    assert node.calls("scontrol") == ["show node -o gpu01"]
    assert re.search(r"scontrol show node gpu01: no answer within \d+ s \(slurmctld busy or unreachable, or slurmd "
                     r"has not registered yet\); faults \(not acted on\): %s" % ("none" if gpus == 8 else summary),
                     proc.stderr), proc.stderr
    assert proc.stdout.startswith("cf-health: gpu01: %s; state ?; action none; not finished: scontrol show node; "
                                  % summary), proc.stdout
    assert not _alive(int((node.dir / "scontrol.sleep.pid").read_text()))


def test_hung_scontrol_update_ends_within_the_budget(node):
    _budget_node(node)
    node.gpus(7)
    node.hang("scontrol", "update")
    proc = node.run()
    assert proc.wall < BUDGET, (proc.wall, proc.stdout, proc.stderr)
    assert proc.returncode == 1
    assert node.updates() == ["update NodeName=gpu01 State=DRAIN Reason=cf-health: GPU count 7 < 8"]
    assert re.search(r"scontrol update \(drain\): no answer within \d+ s", proc.stderr), proc.stderr
    assert "not finished: scontrol update" in proc.stdout


def test_every_command_gets_the_time_left_in_its_share(node):
    """min(the command timeout, the time left): the hardware checks end at checks_end, which keeps the smaller of
    the timeout and half the budget for scontrol; every command is given what is left of its share."""
    _budget_node(node)
    node.hang("nvidia-smi")
    timing = _timing(node.run("--timing"))
    grace, margin = _script_constant("KILL_GRACE"), _script_constant("END_MARGIN")
    assert timing["budget_seconds"] == BUDGET and timing["command_timeout_seconds"] == 20
    assert timing["end_seconds"] == BUDGET - margin
    assert timing["checks_end_seconds"] == pytest.approx(BUDGET - margin - min(20, (BUDGET - margin) / 2.0))
    ends = {"checks": timing["checks_end_seconds"], "slurm": timing["end_seconds"]}
    for command in timing["commands"]:
        left = ends[command["phase"]] - command["start_seconds"] - grace
        assert command["limit_seconds"] == pytest.approx(max(min(20, left), 0), abs=0.01), command
        assert command["limit_seconds"] < 20
        assert command["start_seconds"] + command["elapsed_seconds"] <= timing["end_seconds"]
    smi = timing["commands"][0]
    assert smi["outcome"] == "no answer" and smi["elapsed_seconds"] == pytest.approx(smi["limit_seconds"], abs=0.3)
    assert timing["elapsed_seconds"] < BUDGET


def test_the_command_timeout_applies_while_the_budget_has_time(node):
    node.config.update(budget_seconds=40, command_timeout_seconds=1)
    node.dcgm(DCGM_HEALTHY)
    node.hang("nvidia-smi")
    node.hang("dcgmi")
    proc = node.run("--timing")
    timing = _timing(proc)
    assert [(c["command"].split()[0], c["limit_seconds"], c["outcome"]) for c in timing["commands"][:2]] == \
        [("nvidia-smi", 1.0, "no answer"), ("dcgmi", 1.0, "no answer")]
    assert node.updates() == ["update NodeName=gpu01 State=DRAIN Reason=cf-health: nvidia-smi: no answer within 1 s; "
                              "dcgmi health: no answer within 1 s"]
    assert proc.wall < 4


def test_an_unfinished_check_never_resumes_the_checks_own_drain(node):
    _budget_node(node)
    node.node("IDLE+DRAIN", "cf-health: GPU count 7 < 8")
    node.hang("nvidia-smi")
    assert node.run().returncode == 1
    assert len(node.updates()) == 1 and "State=RESUME" not in node.updates()[0]
    assert node.updates()[0].startswith("update NodeName=gpu01 State=DRAIN Reason=cf-health: nvidia-smi: no answer")


def test_each_run_reports_its_own_time(node):
    node.dcgm(DCGM_HEALTHY)
    proc = node.run("--timing")
    assert proc.returncode == 0
    summary, timing_line = proc.stdout.strip().splitlines()
    match = re.match(r"^cf-health: gpu01: healthy; state IDLE; action none; (\d+\.\d\d) s of a 40 s budget$", summary)
    assert match, summary
    timing = json.loads(timing_line)
    assert float(match.group(1)) == pytest.approx(timing["elapsed_seconds"], abs=0.01)
    assert 0 < timing["elapsed_seconds"] < proc.wall
    assert timing["budget_seconds"] == 40 and timing["not_finished"] == [] and timing["status"] == 0
    assert [c["command"].split()[:2] for c in timing["commands"]] == [
        ["nvidia-smi", "--query-gpu=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
                       "remapped_rows.pending,temperature.gpu"], ["dcgmi", "health"], ["scontrol", "show"]]
    assert all(c["outcome"] == "rc 0" for c in timing["commands"])
    # defaults: the hardware checks share the first 19.75 s, scontrol gets its whole 20 s timeout
    grace = _script_constant("KILL_GRACE")
    assert timing["checks_end_seconds"] == 19.75 and timing["end_seconds"] == 39.5
    for command in timing["commands"][:2]:
        assert command["limit_seconds"] == pytest.approx(19.75 - command["start_seconds"] - grace, abs=0.01)
    assert timing["commands"][2]["limit_seconds"] == 20


@pytest.mark.parametrize("value", ["forty", 0, 60, 600, True])
def test_a_budget_the_check_cannot_keep_falls_back_to_the_default(node, value):
    node.config["budget_seconds"] = value
    proc = node.run("--timing")
    assert proc.returncode == 0
    assert "budget_seconds %r" % (value,) in proc.stderr and "using 40 s" in proc.stderr
    assert _timing(proc)["budget_seconds"] == 40


# --- after each job: the epilog starts a systemd unit, and runs no Slurm command itself ---------------------------
def render(path, **variables):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["comment"] = lambda text: "\n".join("# " + line for line in text.splitlines())
    env.filters["quote"] = shlex.quote
    with open(path) as handle:
        return env.from_string(handle.read()).render(ansible_managed="Ansible managed", **variables)


ROLE_VARS = {"slurm_compute_healthcheck_path": HC_PATH, "slurm_compute_epilog_dir": "/etc/slurm/epilog.d"}


def _unit_name():
    """The unit file name the role installs (tasks/config.yml)."""
    with open(os.path.join(ROLE, "tasks", "config.yml")) as handle:
        tasks = yaml.safe_load(handle)
    dests = [t["ansible.builtin.template"]["dest"] for t in tasks if "ansible.builtin.template" in t
             and t["ansible.builtin.template"]["src"] == "etc/systemd/system/clusterforge-healthcheck.service.j2"]
    assert len(dests) == 1 and dests[0].startswith("/etc/systemd/system/"), dests
    return os.path.basename(dests[0])


def test_the_epilog_calls_no_slurm_command_and_does_not_run_the_check_itself():
    text = render(EPILOG, **ROLE_VARS)
    assert "{{" not in text and "{%" not in text
    assert not SLURM_COMMANDS.search(text), SLURM_COMMANDS.search(text).group(0)
    # not through the health check either (it calls scontrol): the epilog only asks systemd to run it
    assert HC_PATH not in text and "slurm-healthcheck" not in text
    commands = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert commands == ['PATH="${PATH:+$PATH:}/usr/bin:/bin:/usr/sbin:/sbin"', "export PATH",
                        "timeout 10 systemctl start --no-block %s >/dev/null 2>&1 || true" % _unit_name(), "exit 0"]


@pytest.mark.parametrize("systemctl_rc", [0, 1])
def test_the_epilog_queues_the_unit_and_returns_at_once(tmp_path, systemctl_rc):
    epilog = tmp_path / "90-cf-healthcheck"
    epilog.write_text(render(EPILOG, **ROLE_VARS))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "systemctl"
    fake.write_text('#!/bin/sh\necho "$*" >> "%s/systemctl.calls"\nexit %d\n' % (tmp_path, systemctl_rc))
    fake.chmod(0o755)
    began = time.monotonic()
    proc = subprocess.run(["/bin/sh", str(epilog)], env={"PATH": "%s:/usr/bin:/bin" % bin_dir},
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, timeout=30, check=False)
    assert time.monotonic() - began < 2
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""
    assert (tmp_path / "systemctl.calls").read_text().splitlines() == ["start --no-block " + _unit_name()]


def _unit(**variables):
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str
    parser.read_string(render(UNIT, **dict(ROLE_VARS, **variables)))
    return parser


def test_the_unit_runs_the_same_program_once_per_start_within_slurmds_limit():
    unit = _unit()
    assert unit.sections() == ["Unit", "Service"]  # no [Install]: it runs only when started
    service = unit["Service"]
    assert service["Type"] == "oneshot"
    assert shlex.split(service["ExecStart"]) == [HC_PATH]  # what slurmd runs as HealthCheckProgram, as slurmd does
    assert int(service["TimeoutStartSec"]) <= 60
    assert service["SuccessExitStatus"].split() == ["1"]
    # every job end starts it: systemd's default start rate limit would refuse a sixth start within 10 s
    assert unit["Unit"]["StartLimitIntervalSec"] == "0"
    assert "RemainAfterExit" not in service  # inactive after each run, so the next start runs again


def test_the_unit_drains_a_faulty_node_with_the_checks_own_reason(node):
    service = _unit(slurm_compute_healthcheck_path=str(node.script))["Service"]
    node.gpus(7)
    proc = node.run(argv=[sys.executable] + shlex.split(service["ExecStart"]))
    assert proc.returncode == 1  # SuccessExitStatus: the check drained the node itself
    assert str(proc.returncode) in service["SuccessExitStatus"].split()
    assert node.updates() == ["update NodeName=gpu01 State=DRAIN Reason=cf-health: GPU count 7 < 8"]


# --- DCGM level 1 diagnostic (dcgm_diag_level 1) ---

def test_the_diagnostic_is_off_by_default(node):
    node.dcgm(DCGM_HEALTHY)
    node.diag(("software", 3))
    proc = node.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert node.calls("dcgmi") == ["health -c -j"]
    assert not any(c.startswith("--query-compute-apps") for c in node.calls("nvidia-smi"))


def test_a_passing_level_1_diagnostic_on_an_idle_node_changes_nothing(node):
    node.dcgm(DCGM_HEALTHY)
    assert node.diag().returncode == 0
    node.sub("nvidia-smi", "apps", "")
    node.config["dcgm_diag_level"] = 1
    proc = node.run("--timing")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert node.calls("dcgmi") == ["health -c -j", "diag -r 1 -j"]
    assert "--query-compute-apps=pid --format=csv,noheader" in node.calls("nvidia-smi")
    assert node.updates() == []
    timing = json.loads(proc.stdout.strip().splitlines()[-1])
    assert [c["command"].split()[:2] for c in timing["commands"]] == [
        ["nvidia-smi", "--query-gpu=index,ecc.errors.uncorrected.volatile.total,retired_pages.pending,"
                       "remapped_rows.pending,temperature.gpu"], ["dcgmi", "health"],
        ["nvidia-smi", "--query-compute-apps=pid"], ["dcgmi", "diag"], ["scontrol", "show"]]
    assert all(c["phase"] == "checks" for c in timing["commands"][:4])


def test_a_failing_level_1_diagnostic_drains_naming_test_gpu_and_dcgms_message(node):
    node.dcgm(DCGM_HEALTHY)
    assert node.diag(("software", 3)).returncode != 0
    node.sub("nvidia-smi", "apps", "")
    node.config["dcgm_diag_level"] = 1
    proc = node.run()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    (update,) = node.updates()
    assert update.startswith("update NodeName=gpu01 State=DRAIN Reason=cf-health: dcgmi diag -r 1: software failed "
                             "on GPU 3: Persistence Mode: Persistence mode for GPU 3 is disabled."), update


def test_the_diagnostic_never_runs_beside_a_job(node):
    node.dcgm(DCGM_HEALTHY)
    node.diag(("software", 3))
    node.sub("nvidia-smi", "apps", "41234\n41240\n")
    node.config["dcgm_diag_level"] = 1
    proc = node.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert node.calls("dcgmi") == ["health -c -j"]
    assert "dcgmi diag not run: 2 GPU process(es) running" in proc.stdout
    assert node.updates() == []


def test_unknown_gpu_processes_skip_the_diagnostic(node):
    node.dcgm(DCGM_HEALTHY)
    node.diag(("software", 3))
    node.sub("nvidia-smi", "apps", "Failed to initialize NVML: Unknown Error\n", 255)
    node.config["dcgm_diag_level"] = 1
    proc = node.run()
    assert node.calls("dcgmi") == ["health -c -j"]
    assert "dcgmi diag not run: GPU processes unknown (nvidia-smi rc 255)" in proc.stdout


@pytest.mark.parametrize("out, rc, reason", [
    ("Error: unable to establish a connection to the specified host: localhost\n", 255,
     "dcgmi diag -r 1 failed (rc 255): Error: unable to establish a connection"),
    ('{"DCGM Diagnostic": {"runtime_error": "A required file could not be found", "test_categories": []}}\n', 226,
     "dcgmi diag -r 1: A required file could not be found"),
    ('{"DCGM Diagnostic": {"test_categories": []}}\n', 226, "dcgmi diag -r 1 failed (rc 226) without a failing test"),
])
def test_a_diagnostic_that_cannot_run_drains(node, out, rc, reason):
    node.dcgm(DCGM_HEALTHY)
    node.sub("dcgmi", "diag", out, rc)
    node.sub("nvidia-smi", "apps", "")
    node.config["dcgm_diag_level"] = 1
    proc = node.run()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert node.updates()[0].startswith("update NodeName=gpu01 State=DRAIN Reason=cf-health: " + reason), node.updates()


def test_a_hung_diagnostic_drains_within_the_budget(node):
    node.dcgm(DCGM_HEALTHY)
    node.sub("nvidia-smi", "apps", "")
    node.hang("dcgmi", "diag")
    node.config.update(dcgm_diag_level=1, budget_seconds=10, command_timeout_seconds=4)
    proc = node.run()
    assert proc.wall < 10, proc.wall
    assert re.match(r"^update NodeName=gpu01 State=DRAIN Reason=cf-health: dcgmi diag: no answer within \d+ s$",
                    node.updates()[0]), node.updates()


# --- the run's record ---

@pytest.mark.parametrize("env, source", [({}, "manual"), ({"SLURMD_NODENAME": "gpu01"}, "slurmd"),
                                         ({"CF_HEALTHCHECK_SOURCE": "epilog", "SLURMD_NODENAME": "gpu01"}, "epilog")])
def test_each_run_records_its_summary_per_caller(node, monkeypatch, env, source):
    for name in ("SLURMD_NODENAME", "CF_HEALTHCHECK_SOURCE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    node.gpus(8, {2: "2, 3, [N/A], No, 34"})
    began = time.time()
    proc = node.run()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    records = sorted(p.name for p in (node.dir / "state").iterdir())
    assert records == ["healthcheck-%s.json" % source], records
    record = json.loads((node.dir / "state" / records[0]).read_text())
    assert record["source"] == source and record["node"] == "gpu01" and record["status"] == 1
    assert record["faults"] == ["GPU 2 uncorrectable ECC errors 3"] and record["action"].startswith("drain")
    assert began <= record["finished_at"] <= time.time()


def test_a_record_that_cannot_be_written_changes_nothing(node):
    (node.dir / "state").write_text("not a directory")
    proc = node.run()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cannot write" in proc.stderr and node.updates() == []


def test_the_unit_names_its_runs_epilog():
    with open(UNIT) as handle:
        text = handle.read()
    assert "\nEnvironment=CF_HEALTHCHECK_SOURCE=epilog\n" in text
