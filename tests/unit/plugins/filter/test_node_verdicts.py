# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deep checks' filters (validation_loopback_plan, validation_loopback_results, validation_node_verdicts), fed
with what playbooks/health_deep.yml records on a node: the collection's modules run in-process against the hardware
TEST EMULATORS (nvidia-smi, dcgmi, ibstat), ib_write_bw runs the perftest emulator as a loopback (server and client
on the node), and the nccl-tests emulator runs as a subprocess. Faults are injected as the lab does (--emu-* flags,
CLUSTERFORGE_EMU_* variables); every failure must name its node and check, and only our own drains are resumed."""

import copy
import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from conftest import EMULATORS
from cf_module_helper import Tool, run_main, run_module

from ansible_collections.clusterforge.gpu.plugins.filter import validation
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.validation_judge import DEEP_REQUIRED_CHECKS
from ansible_collections.clusterforge.gpu.plugins.modules import dcgm_diag as dcgm_diag_module
from ansible_collections.clusterforge.gpu.plugins.modules import ib_port_info as ib_port_info_module
from ansible_collections.clusterforge.gpu.plugins.modules import ib_write_bw as ib_write_bw_module
from ansible_collections.clusterforge.gpu.plugins.modules import nvidia_smi_info as nvidia_smi_info_module

FILTERS = validation.FilterModule().filters()
FILTER_DIR = os.path.dirname(validation.__file__)
NAMES = ("validation_node_verdicts", "validation_loopback_plan", "validation_loopback_results",
         "validation_ib_line_rate")
HCAS = ["mlx5_%d" % i for i in range(8)]
THRESHOLDS = {"nccl_single_node_busbw_gbps": 370, "nccl_multi_node_busbw_gbps": 385}
EMU_KEYS = ("CLUSTERFORGE_EMU_NCCL_BUSBW_GBPS", "CLUSTERFORGE_EMU_NCCL_WRONG", "CLUSTERFORGE_EMU_IB_GBPS",
            "CLUSTERFORGE_EMU_IB_DEGRADE", "CLUSTERFORGE_EMU_IB_LINK", "CLUSTERFORGE_EMU_SEED",
            "CLUSTERFORGE_EMU_IB_PROFILE", "CLUSTERFORGE_EMU_GPU_COUNT", "CLUSTERFORGE_EMU_DCGM_GPUS")


class Node(object):
    """One emulated GPU node, measured the way the deep_check phase measures it."""

    def __init__(self, root, name):
        self.name = name
        self.root = root / name
        self.root.mkdir(parents=True, exist_ok=True)
        self.env = dict((k, v) for k, v in os.environ.items() if k not in EMU_KEYS and not k.startswith("SLURM_"))
        self.env.update(CLUSTERFORGE_EMU_STATE_DIR=str(self.root / "state"),
                        CLUSTERFORGE_EMU_RUN_DIR=str(self.root / "run"), LC_ALL="C")

    def emu(self, tool, *args, **env):
        run_env = dict(self.env)
        run_env.update(env)
        proc = subprocess.run([sys.executable, os.path.join(EMULATORS, tool)] + [str(a) for a in args], env=run_env,
                              capture_output=True, text=True, timeout=120, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    def module(self, module, args):
        def handler(argv, data):
            return self.emu(os.path.basename(argv[0]), *argv[1:])
        return run_module(module, args, Tool(handler))

    def loopback(self, plan, monkeypatch, timeout=120, **env):
        """ib_write_bw's server, then its client to the node itself, each with every planned HCA at once."""
        bindir = self.root / "bin"
        bindir.mkdir(exist_ok=True)
        tool = bindir / "ib_write_bw"
        if not tool.exists():
            tool.write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (sys.executable, os.path.join(EMULATORS, "ib_write_bw")))
            tool.chmod(0o755)
        with monkeypatch.context() as m:
            m.setenv("PATH", "%s:%s" % (bindir, os.environ.get("PATH", "")))
            for key in EMU_KEYS:
                m.delenv(key, raising=False)
            for key, value in list(self.env.items()) + list(env.items()):
                if key.startswith("CLUSTERFORGE_EMU_"):
                    m.setenv(key, value)
            tests = [{"hca": t["hca"], "port": t["port"]} for t in plan]
            server = run_main(ib_write_bw_module, {"mode": "server", "tests": tests, "timeout": timeout})
            assert not server.get("failed"), server
            return run_main(ib_write_bw_module, {"mode": "client", "peer": "127.0.0.1", "tests": tests,
                                                 "timeout": timeout})

    def record(self, monkeypatch, dcgm_level=2, gpus=8, **loopback_env):
        """What deep_check records: the node's results in validation_judge's form, and its loopback entries."""
        smi = self.module(nvidia_smi_info_module, {"topology": False})
        ib = self.module(ib_port_info_module, {"expected_rate_gbps": 400})
        plan = FILTERS["validation_loopback_plan"](ib, None, 18515, 400)
        client = self.loopback(plan, monkeypatch, **loopback_env)
        rc, out, _err = self.emu("all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-g", len(smi["gpus"]),
                                 "-c", "1")
        node = {"expected": {"gpu_count": gpus, "ib_rate_gbps": 400, "ib_port_count": 8}, "idle": True,
                "nvidia_smi_info": smi, "dcgm_diag": self.module(dcgm_diag_module, {"level": dcgm_level}),
                "ib_port_info": ib, "nccl_local": FILTERS["nccl_tests_results"](out) if out.strip() else None}
        return node, plan, FILTERS["validation_loopback_results"](client, plan, self.name, 120)


def measure(nodes):
    """{name: (node, plan, entries)} -> the judge's input."""
    return {"cluster": "cflab", "generated_at": "2026-11-25T08:00:00Z",
            "nodes": dict((name, rec[0]) for name, rec in nodes.items()),
            "ib_write_bw": [e for rec in nodes.values() for e in rec[2]]}


def verdicts(nodes, states, **kwargs):
    report = FILTERS["validation_judge"](measure(nodes), THRESHOLDS)
    info = {}
    for name, (drain, reason) in states.items():
        info[name] = {"drain": drain, "reason": reason,
                      "loopback_hcas": [t["hca"] for t in nodes[name][2]] if name in nodes else None}
    out = FILTERS["validation_node_verdicts"](report, info, **kwargs)
    json.dumps(out, allow_nan=False)
    return report, out


def by_node(out):
    return dict((n["node"], n) for n in out["nodes"])


@pytest.fixture(scope="module")
def mp():
    patcher = pytest.MonkeyPatch()
    yield patcher
    patcher.undo()


@pytest.fixture(scope="module")
def healthy(tmp_path_factory, mp):
    root = tmp_path_factory.mktemp("deep")
    return dict((name, Node(root, name).record(mp)) for name in ("gpu01", "gpu02", "gpu03"))


# ------------------------------------------------------------------------------------------------ loopback plan

def test_loopback_plan_one_test_per_infiniband_hca_each_on_its_port(tmp_path):
    ib = Node(tmp_path, "gpu01").module(ib_port_info_module, {"expected_rate_gbps": 400})
    plan = FILTERS["validation_loopback_plan"](ib, None, 18515, 400)
    assert [t["hca"] for t in plan] == HCAS
    assert [t["port"] for t in plan] == list(range(18515, 18523))
    assert all(t["line_rate_gbits"] == 400 for t in plan)
    # The HCAs named, in that order, from another base port.
    plan = FILTERS["validation_loopback_plan"](ib, ["mlx5_3", "mlx5_0"], 20000)
    assert plan == [{"hca": "mlx5_3", "port": 20000, "line_rate_gbits": 400.0},
                    {"hca": "mlx5_0", "port": 20001, "line_rate_gbits": 400.0}]


def test_loopback_plan_rates_roce_and_nothing_known():
    ports = {"ports": [
        {"ca": "mlx5_0", "port": 1, "state": "Down", "rate_gbps": 10, "link_layer": "InfiniBand"},
        {"ca": "mlx5_0", "port": 2, "state": "Active", "rate_gbps": 200, "link_layer": "InfiniBand"},
        {"ca": "mlx5_bond_0", "port": 1, "state": "Active", "rate_gbps": 100, "link_layer": "Ethernet"},
    ]}
    # The bond is Ethernet beside InfiniBand: not the fabric. The active port's rate counts.
    assert FILTERS["validation_loopback_plan"](ports) == [{"hca": "mlx5_0", "port": 18515, "line_rate_gbits": 200.0}]
    roce = {"ports": [{"ca": "mlx5_0", "port": 1, "state": "Active", "rate_gbps": 400, "link_layer": "Ethernet"},
                      {"ca": "mlx5_1", "port": 1, "state": "Active", "rate_gbps": None, "link_layer": "Ethernet"}]}
    assert FILTERS["validation_loopback_plan"](roce, None, 18515, 400) == [
        {"hca": "mlx5_0", "port": 18515, "line_rate_gbits": 400.0},
        {"hca": "mlx5_1", "port": 18516, "line_rate_gbits": 400.0}]
    assert FILTERS["validation_loopback_plan"](None) == []
    assert FILTERS["validation_loopback_plan"]({"skipped": True, "ports": []}) == []
    assert FILTERS["validation_loopback_plan"](None, ["mlx5_0"]) == [
        {"hca": "mlx5_0", "port": 18515, "line_rate_gbits": None}]


@pytest.mark.parametrize("args, message", [
    ((None, "mlx5_0"), "validation_loopback_plan: hcas must be a list of HCA names, got str"),
    ((None, ["mlx5_0", "mlx5_0"]), "validation_loopback_plan: an HCA is named twice in mlx5_0, mlx5_0"),
    ((None, None, 0), "validation_loopback_plan: base_port must be a TCP port, got 0"),
    ((None, ["a", "b"], 65535), "validation_loopback_plan: 2 HCAs from base_port 65535 run past port 65535"),
])
def test_loopback_plan_rejects(args, message):
    with pytest.raises(AnsibleFilterError, match="^%s$" % message):
        FILTERS["validation_loopback_plan"](*args)


def test_ib_line_rate_from_the_port_else_the_profile(tmp_path):
    """The one line-rate rule of every ib_write_bw test (the fabric rounds through either launcher, the loopback)."""
    ib = Node(tmp_path, "gpu01").module(ib_port_info_module, {"expected_rate_gbps": 400})
    assert [FILTERS["validation_ib_line_rate"](ib, hca, 200) for hca in HCAS] == [400.0] * 8
    ports = {"ports": [
        {"ca": "mlx5_0", "port": 1, "state": "Down", "rate_gbps": 10, "link_layer": "InfiniBand"},
        {"ca": "mlx5_0", "port": 2, "state": "Active", "rate_gbps": 200, "link_layer": "InfiniBand"},
        {"ca": "mlx5_1", "port": 1, "state": "Down", "rate_gbps": 100, "link_layer": "InfiniBand"},
        {"ca": "mlx5_2", "port": 1, "state": "Active", "rate_gbps": None, "link_layer": "Ethernet"},
    ]}
    rate = FILTERS["validation_ib_line_rate"]
    # the active port's rate; the first port's when none is active; the profile's when the port has none
    assert rate(ports, "mlx5_0", 400) == 200.0
    assert rate(ports, "mlx5_1", 400) == 100.0
    assert rate(ports, "mlx5_2", "400") == 400.0
    # an HCA ib_port_info did not find, ib_port_info skipped or not run: the profile's, else nothing
    assert rate(ports, "mlx5_7", 400) == 400.0
    assert rate({"skipped": True, "ports": ports["ports"]}, "mlx5_0", 400) == 400.0
    assert rate(None, "mlx5_0", 400) == 400.0
    assert rate(None, "mlx5_0") is None
    # the same rule as the loopback plan's
    plan = FILTERS["validation_loopback_plan"](ports, ["mlx5_0", "mlx5_1", "mlx5_2"], 18515, 400)
    assert [t["line_rate_gbits"] for t in plan] == [rate(ports, h, 400) for h in ("mlx5_0", "mlx5_1", "mlx5_2")]


@pytest.mark.parametrize("args, message", [
    ((None, ""), "validation_ib_line_rate: an HCA name is required"),
    ((None, "mlx5_0", "fast"), "validation_ib_line_rate: rate_gbps must be a number, got 'fast'"),
])
def test_ib_line_rate_rejects(args, message):
    with pytest.raises(AnsibleFilterError, match="^%s$" % message):
        FILTERS["validation_ib_line_rate"](*args)


def test_loopback_results_say_why_a_test_has_no_result():
    plan = [{"hca": "mlx5_0", "port": 18515, "line_rate_gbits": 400},
            {"hca": "mlx5_1", "port": 18516, "line_rate_gbits": 400}]
    client = {"failed": True, "msg": "ib_write_bw client to 127.0.0.1 failed: mlx5_1: no result within 120 s",
              "tests": [{"hca": "mlx5_0", "rc": 0, "timed_out": False, "result": {"ok": True, "bw_peak_gbits": 390.0},
                         "stderr": ""},
                        {"hca": "mlx5_1", "rc": None, "timed_out": True, "result": None, "stderr": ""}]}
    entries = FILTERS["validation_loopback_results"](client, plan, "gpu02", 120)
    assert entries[0] == {"client": "gpu02", "server": "gpu02", "hca": "mlx5_0", "line_rate_gbits": 400.0, "rc": 0,
                          "msg": None, "result": {"ok": True, "bw_peak_gbits": 390.0}}
    assert entries[1]["msg"] == "no result within 120 s" and entries[1]["result"] is None
    failed = FILTERS["validation_loopback_results"](
        {"tests": [{"hca": "mlx5_0", "rc": 1, "stderr": "Couldn't allocate MR\n Couldn't get context for the device"}]},
        plan[:1], "gpu02")
    assert failed[0]["rc"] == 1 and failed[0]["msg"] == "Couldn't get context for the device"
    skipped = FILTERS["validation_loopback_results"]({"skipped": True, "skip_reason": "Conditional result was False"},
                                                     plan, "gpu02")
    assert [e["msg"] for e in skipped] == ["the ib_write_bw loopback was skipped (Conditional result was False)"] * 2
    never = FILTERS["validation_loopback_results"](None, plan, "gpu02")
    assert [e["msg"] for e in never] == ["the ib_write_bw loopback client did not run"] * 2
    with pytest.raises(AnsibleFilterError, match="must be validation_loopback_plan's list"):
        FILTERS["validation_loopback_results"](None, "mlx5_0", "gpu02")


# ------------------------------------------------------------------------------------------------ verdicts

def test_healthy_nodes_pass_and_only_our_drain_is_resumed(healthy):
    report, out = verdicts(healthy, {"gpu01": (True, "cf-deep: burn-in: new node"),
                                     "gpu02": (True, "admin: fan swap, ticket 4711"),
                                     "gpu03": (False, None)})
    assert report["ok"], report["failures"]
    assert out["ok"] and out["passed"] == ["gpu01", "gpu02", "gpu03"] and out["failed"] == []
    assert out["resume"] == ["gpu01"] and out["relabel"] == [] and out["drain"] == []
    nodes = by_node(out)
    assert [nodes[n]["action"] for n in ("gpu01", "gpu02", "gpu03")] == ["resume", "keep", "none"]
    assert nodes["gpu01"]["owned"] and not nodes["gpu02"]["owned"] and not nodes["gpu03"]["owned"]
    assert nodes["gpu01"]["message"] == ("gpu01: passed gpu.count, dcgm.diag, nccl.single_node, ib.write_bw (8)")
    assert out["reason_prefix"] == "cf-deep:" and out["required"] == list(DEEP_REQUIRED_CHECKS)


def test_dcgm_level_2_fault_fails_the_node_names_the_test_and_relabels_only_ours(tmp_path, healthy, monkeypatch):
    bad = Node(tmp_path, "gpu02")
    assert bad.emu("dcgmi", "--emu-fail", "memory", "3")[0] == 0
    nodes = dict(healthy, gpu02=bad.record(monkeypatch))
    for reason, action in (("cf-deep: burn-in: new node", "relabel"), ("cf-health: gpu: 7 of 8 GPUs", "keep")):
        _report, out = verdicts(nodes, {"gpu01": (True, "cf-deep: burn-in: new node"), "gpu02": (True, reason)})
        node = by_node(out)["gpu02"]
        assert not out["ok"] and out["failed"] == ["gpu02"] and out["resume"] == ["gpu01"]
        assert node["action"] == action
        assert node["problems"][0]["check"] == "dcgm.diag"
        assert node["problems"][0]["why"].startswith(
            "DCGM diagnostic level 2: memory failed on GPU 3 (00000000:5D:00.0")
        assert out["failures"] == [node["message"]] and node["message"].startswith("gpu02: failed dcgm.diag: DCGM")
    assert out["relabel"] == []
    _report, out = verdicts(nodes, {"gpu02": (True, "cf-deep: burn-in: new node")})
    reason = out["relabel"][0]["reason"]
    assert out["relabel"][0]["node"] == "gpu02"
    assert reason.startswith("cf-deep: dcgm.diag: DCGM diagnostic level 2: memory failed on GPU 3 (00000000:5D:00.0")
    assert len(reason) <= 200 and "\n" not in reason and reason.endswith("...")


def test_a_reason_is_one_line_without_double_quotes(tmp_path, healthy, monkeypatch):
    # DCGM's software test quotes a command ("nvidia-smi -i <gpuId> -pm 1 "): scontrol strips a quote at either end.
    bad = Node(tmp_path, "gpu02")
    assert bad.emu("dcgmi", "--emu-fail", "software", "0")[0] == 0
    _report, out = verdicts(dict(healthy, gpu02=bad.record(monkeypatch)), {"gpu02": (True, "cf-deep: x")})
    node = by_node(out)["gpu02"]
    assert '"' in node["problems"][0]["why"]
    assert node["new_reason"].startswith("cf-deep: dcgm.diag: DCGM diagnostic level 2: software failed on GPU 0")
    assert '"' not in node["new_reason"] and "\\" not in node["new_reason"] and len(node["new_reason"]) <= 200


def test_a_failing_node_in_a_maintenance_reservation_gets_drained(tmp_path, healthy, monkeypatch):
    bad = Node(tmp_path, "gpu03")
    nodes = dict(healthy, gpu03=bad.record(monkeypatch, CLUSTERFORGE_EMU_IB_DEGRADE="0.5"))
    _report, out = verdicts(nodes, {"gpu03": (False, None)})
    node = by_node(out)["gpu03"]
    assert node["action"] == "drain" and out["drain"] == [{"node": "gpu03", "reason": node["new_reason"]}]
    assert node["problems"][0]["check"] == "ib.write_bw"
    assert node["new_reason"] == "cf-deep: ib.write_bw: mlx5_0: ib_write_bw 194.2 Gb/s < 380.0 Gb/s (95% of 400)"
    assert len(node["problems"]) == 8  # every HCA, each named


def test_a_missing_gpu_and_wrong_nccl_data_are_named(tmp_path, healthy, monkeypatch):
    bad = Node(tmp_path, "gpu02")
    assert bad.emu("nvidia-smi", "--emu-drop-gpu", "5")[0] == 0
    record = bad.record(monkeypatch)
    nodes = dict(healthy, gpu02=record)
    _report, out = verdicts(nodes, {"gpu02": (True, "cf-deep: x")})
    checks = [p["check"] for p in by_node(out)["gpu02"]["problems"]]
    assert checks[0] == "gpu.count" and by_node(out)["gpu02"]["problems"][0]["why"].startswith("7 of 8 GPUs visible")
    rc, text, _err = bad.emu("all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-g", "8", "-c", "1",
                             CLUSTERFORGE_EMU_NCCL_WRONG="1")
    assert rc != 0
    wrong = copy.deepcopy(healthy["gpu01"])
    wrong[0]["nccl_local"] = FILTERS["nccl_tests_results"](text)
    _report, out = verdicts(dict(healthy, gpu01=wrong), {"gpu01": (True, "cf-deep: x")})
    assert [p["check"] for p in by_node(out)["gpu01"]["problems"]] == ["nccl.single_node"]


def test_missing_measurements_fail_and_are_named(healthy):
    # gpu04 recorded nothing (unreachable, or failed before recording).
    _report, out = verdicts(healthy, {"gpu04": (True, "cf-deep: burn-in: new node")})
    node = by_node(out)["gpu04"]
    assert not node["ok"] and node["action"] == "relabel"
    nothing = "not run (nothing recorded for the node: not reached, or its checks stopped)"
    assert node["problems"] == [{"check": c, "why": nothing} for c in DEEP_REQUIRED_CHECKS]
    assert node["new_reason"] == "cf-deep: gpu.count: " + nothing
    assert node["message"] == "gpu04: failed: gpu.count, dcgm.diag, nccl.single_node, ib.write_bw: " + nothing
    # A node whose DCGM diagnostic was not run (dcgmi missing), and one with fewer loopbacks than planned.
    partial = copy.deepcopy(healthy["gpu01"])
    partial[0]["dcgm_diag"] = None
    nodes = dict(healthy, gpu01=partial)
    report = FILTERS["validation_judge"](measure(nodes), THRESHOLDS)
    out = FILTERS["validation_node_verdicts"](report, {"gpu01": {"drain": True, "reason": "cf-deep: x",
                                                                 "loopback_hcas": HCAS + ["mlx5_8"]}})
    problems = by_node(out)["gpu01"]["problems"]
    assert problems[0] == {"check": "dcgm.diag",
                           "why": "not run: no DCGM diagnostic (DCGM not installed or diagnostic disabled)"}
    assert problems[1] == {"check": "ib.write_bw", "why": "no loopback result for mlx5_8"}
    # No HCA at all: the loopback cannot pass.
    out = FILTERS["validation_node_verdicts"](report, {"gpu02": {"drain": True, "reason": "cf-deep: x",
                                                                 "loopback_hcas": []}})
    assert by_node(out)["gpu02"]["problems"][0] == {
        "check": "ib.write_bw", "why": "no HCA to test (no InfiniBand port found)"}
    # Without the loopback among the required checks, that node passes.
    out = FILTERS["validation_node_verdicts"](report, {"gpu02": {"drain": True, "reason": "cf-deep: x",
                                                                 "loopback_hcas": []}},
                                              None, ["gpu.count", "dcgm.diag", "nccl.single_node"])
    assert out["ok"] and out["resume"] == ["gpu02"]
    # loopback=False (validate_deep_ib_loopback false, the deep_decide phase) is that same list, from the filter's own
    # DEEP_REQUIRED_CHECKS; loopback=True is the default.
    nodes = {"gpu02": {"drain": True, "reason": "cf-deep: x", "loopback_hcas": []}}
    assert FILTERS["validation_node_verdicts"](report, nodes, loopback=False) == out
    assert out["required"] == [c for c in DEEP_REQUIRED_CHECKS if c != "ib.write_bw"]
    assert (FILTERS["validation_node_verdicts"](report, nodes, loopback=True)
            == FILTERS["validation_node_verdicts"](report, nodes))
    # An explicit required list wins over loopback.
    assert FILTERS["validation_node_verdicts"](report, nodes, None, list(DEEP_REQUIRED_CHECKS), False)["required"] \
        == list(DEEP_REQUIRED_CHECKS)
    # read as Ansible reads a boolean: "no" from -e is false; anything else is refused
    assert FILTERS["validation_node_verdicts"](report, nodes, loopback="no") == out
    with pytest.raises(AnsibleFilterError, match="loopback must be a boolean"):
        FILTERS["validation_node_verdicts"](report, nodes, loopback="maybe")


def test_another_failing_check_of_the_node_fails_it(healthy):
    nodes = copy.deepcopy(healthy)
    nodes["gpu01"][0]["nvidia_smi_info"]["gpus"][2]["ecc"]["volatile_uncorrectable"] = 4
    _report, out = verdicts(nodes, {"gpu01": (True, "cf-deep: x"), "gpu02": (True, "cf-deep: x")})
    assert out["failed"] == ["gpu01"] and out["resume"] == ["gpu02"]
    problem = by_node(out)["gpu01"]["problems"][0]
    assert problem["check"] == "gpu.health" and problem["why"].startswith("GPU2 (00000000:3A:00.0")
    # A node name that is the start of another's (gpu1, gpu10) owns none of the other's checks.
    report = {"checks": [{"id": "gpu.count", "subject": "gpu10", "status": "fail", "message": "gpu10: 0 of 8"}]}
    out = FILTERS["validation_node_verdicts"](report, {"gpu1": {"drain": False}}, None, [])
    assert out["ok"]


def test_a_reason_prefix_of_our_own(healthy):
    _report, out = verdicts(healthy, {"gpu01": (True, "site-deep: burn-in")}, reason_prefix="site-deep:")
    assert out["resume"] == ["gpu01"] and out["reason_prefix"] == "site-deep:"


@pytest.mark.parametrize("args, message", [
    (([], {}), "validation_node_verdicts expects the report of validation_judge"),
    (({"checks": []}, []), "validation_node_verdicts: nodes must be a dict of node -> "),
    (({"checks": []}, {}, " "), "validation_node_verdicts: reason_prefix must not be empty"),
    (({"checks": []}, {}, None, "gpu.count"), "validation_node_verdicts: required must be a list of check ids"),
    (({"checks": []}, {"gpu01": {"loopback_hcas": "mlx5_0"}}), "validation_node_verdicts: nodes\\[gpu01\\]"),
])
def test_verdicts_reject(args, message):
    with pytest.raises(AnsibleFilterError, match="^%s" % message):
        FILTERS["validation_node_verdicts"](*args)


# ------------------------------------------------------------------------------------------- docs and Ansible

@pytest.mark.parametrize("name", NAMES)
def test_docs_beside_the_filter(name):
    assert name in FILTERS
    with open(os.path.join(FILTER_DIR, name + ".yml")) as f:
        doc = yaml.safe_load(f)
    assert set(doc) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}
    assert doc["DOCUMENTATION"]["name"] == name
    assert "_input" in doc["DOCUMENTATION"]["options"]
    assert "clusterforge.gpu.%s" % name in doc["EXAMPLES"]
    assert "_value" in doc["RETURN"]
    assert isinstance(yaml.safe_load(doc["EXAMPLES"]), list)


def test_the_filters_in_a_playbook_run(healthy, tmp_path):
    """Through Ansible's templating (2.19 lazy containers) the verdicts are plain data a task can loop over."""
    playbook_bin = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(playbook_bin):
        pytest.skip("ansible-playbook not installed beside this Python")
    repo_root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
    (tmp_path / "measured.json").write_text(json.dumps(measure(healthy)))
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "name": "Verdicts", "hosts": "localhost", "gather_facts": False,
        "vars": {
            "measured": "{{ lookup('ansible.builtin.file', 'measured.json') | from_json }}",
            "report": "{{ measured | clusterforge.gpu.validation_judge(thresholds) }}",
            "thresholds": THRESHOLDS,
            "states": {"gpu01": {"drain": True, "reason": "cf-deep: burn-in: new", "loopback_hcas": HCAS},
                       "gpu02": {"drain": True, "reason": "admin: fan", "loopback_hcas": HCAS}},
            "verdicts": "{{ report | clusterforge.gpu.validation_node_verdicts(states) }}",
        },
        "tasks": [
            {"name": "Write the verdicts", "ansible.builtin.copy": {
                "content": "{{ verdicts | to_nice_json }}", "dest": str(tmp_path / "verdicts.json"), "mode": "0644"}},
            {"name": "Plan", "ansible.builtin.assert": {"that": [
                "(none | clusterforge.gpu.validation_loopback_plan(['mlx5_0'], 18515, 400))[0].port == 18515",
                "verdicts.resume == ['gpu01']"]}},
        ],
    }]))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(repo_root, ".cache", "collections"),
               ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    proc = subprocess.run([playbook_bin, str(tmp_path / "play.yml")], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(str(tmp_path / "verdicts.json")) as f:
        out = json.load(f)
    assert out["resume"] == ["gpu01"] and [n["action"] for n in out["nodes"]] == ["resume", "keep"]
