# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Decision logic of the slurm_compute health check, run as a program with fake nvidia-smi, dcgmi and scontrol
on PATH (the fakes print recorded-format output and log every call)."""

import ast
import json
import os
import stat
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TEMPLATE = os.path.join(ROOT, "roles", "slurm_compute", "templates", "usr", "libexec", "clusterforge",
                        "slurm-healthcheck.j2")

FAKE = """#!/bin/sh
# fake {name}: logs its arguments, prints $FAKE_DIR/{name}.out (or {name}.<subcommand>.out), exits with {name}.rc
echo "$*" >> "$FAKE_DIR/{name}.calls"
if [ "$1" = update ]; then exit 0; fi
if [ "$1 $2" = "health -s" ]; then : > "$FAKE_DIR/dcgmi.watches"; echo "Health monitor systems set successfully."; exit 0; fi
if [ "{name}" = dcgmi ] && [ -f "$FAKE_DIR/dcgmi.needs-watches" ] && [ ! -f "$FAKE_DIR/dcgmi.watches" ]; then
  echo "Error: Health watches not enabled. Please enable watches. "; exit 255
fi
[ -f "$FAKE_DIR/{name}.out" ] && cat "$FAKE_DIR/{name}.out"
exit $(cat "$FAKE_DIR/{name}.rc" 2>/dev/null || echo 0)
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
                       "syslog": False}
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

    def calls(self, name):
        path = self.dir / (name + ".calls")
        return path.read_text().splitlines() if path.exists() else []

    def updates(self):
        return [c for c in self.calls("scontrol") if c.startswith("update")]

    def run(self, *extra):
        cfg = self.dir / "healthcheck.json"
        cfg.write_text(json.dumps(self.config))
        env = dict(os.environ, FAKE_DIR=str(self.dir), PATH=str(self.bin) + ":/usr/bin:/bin")
        proc = subprocess.run([sys.executable, str(self.script), "--config", str(cfg)] + list(extra),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env,
                              check=False)
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


def test_owner_lists_match_preflight():
    from ansible_collections.clusterforge.gpu.plugins.plugin_utils import preflight_slurm
    assert _script_tuple("OTHER_OWNERS") == tuple(p for p, who in preflight_slurm.OTHER_REASON_OWNERS)
    assert _script_tuple("SLURM_REASONS") == preflight_slurm.SLURM_REASONS
