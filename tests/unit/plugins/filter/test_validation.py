# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation filters, fed with real module results: the collection's modules run in-process against the
hardware TEST EMULATORS (nvidia-smi, dcgmi, lspci/setpci, ibstat, ibdiagnet), and the nccl-tests and perftest
emulators run as subprocesses, one emulated node per state directory. Faults are injected the way the lab does
(--emu-* flags and CLUSTERFORGE_EMU_* variables), and every failure must name its node, GPU, port, pair or path."""

import copy
import json
import os
import re
import shutil
import subprocess
import sys

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from conftest import EMULATORS
from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.filter import validation
from ansible_collections.clusterforge.gpu.plugins.modules import dcgm_diag as dcgm_diag_module
from ansible_collections.clusterforge.gpu.plugins.modules import ib_port_info as ib_port_info_module
from ansible_collections.clusterforge.gpu.plugins.modules import ibdiagnet as ibdiagnet_module
from ansible_collections.clusterforge.gpu.plugins.modules import nvidia_smi as nvidia_smi_module
from ansible_collections.clusterforge.gpu.plugins.modules import nvidia_smi_info as nvidia_smi_info_module
from ansible_collections.clusterforge.gpu.plugins.modules import pcie_acs as pcie_acs_module
from ansible_collections.clusterforge.gpu.plugins.modules import pcie_acs_info as pcie_acs_info_module
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.validation_judge import CHECK_KEYS
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_thresholds import DEFAULT_THRESHOLDS

FILTERS = validation.FilterModule().filters()
FILTER_DIR = os.path.dirname(validation.__file__)
PERF_FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "module_utils", "fixtures", "perf")
NAMES = ("nccl_tests_results", "perftest_results", "dd_results", "checkpoint_estimate", "validation_judge",
         "validation_html", "validation_node_verdicts", "validation_loopback_plan", "validation_loopback_results",
         "validation_ib_line_rate", "validation_held_nodes", "storage_aggregate", "validation_ib_client_results",
         "validation_ib_round_results", "validation_deep_selection_lines", "validation_deep_states",
         "validation_deep_outcome_lines", "validation_node_record")
# The emulators' environment knobs: a test sets the ones it wants, nothing leaks in from the caller.
EMU_KEYS = ("CLUSTERFORGE_EMU_NCCL_BUSBW_GBPS", "CLUSTERFORGE_EMU_NCCL_WRONG", "CLUSTERFORGE_EMU_NCCL_LATENCY_US",
            "CLUSTERFORGE_EMU_IB_GBPS", "CLUSTERFORGE_EMU_IB_DEGRADE", "CLUSTERFORGE_EMU_IB_LINK",
            "CLUSTERFORGE_EMU_SEED", "CLUSTERFORGE_EMU_IB_PROFILE", "CLUSTERFORGE_EMU_GPU_COUNT",
            "CLUSTERFORGE_EMU_DCGM_GPUS")
# nvidia-smi emulator: GPU slot -> PCI bus (its profile), as nvidia_smi_info reports it.
SMI_BUSES = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
# What gpu_tuning manages on every node (its variables, read by the gpu_tuning_settings filter).
SETTINGS = {"gpus": None, "persistence_mode": True, "power_limit_watts": 700,
            "locked_gpu_clocks": {"min": 1980, "max": 1980}}
PROFILE = {"ib_rate_gbps": 400, "ib_ports_per_node": 8}
EXPECTED = {"gpu_count": 8, "gpu_settings": SETTINGS, "acs_must_be_disabled": True, "ib_rate_gbps": 400,
            "ib_port_count": 8}
# GNU coreutils dd summary lines (the last line dd writes to stderr).
DD_WRITE = ("8192+0 records in\n8192+0 records out\n"
            "8589934592 bytes (8.6 GB, 8.0 GiB) copied, 3.91562 s, 2.2 GB/s\n")
DD_READ = ("8192+0 records in\n8192+0 records out\n"
           "8589934592 bytes (8.6 GB, 8.0 GiB) copied, 2.86411 s, 3.0 GB/s\n")
DD_SLOW = ("1024+0 records in\n1024+0 records out\n"
           "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 2.50127 s, 429 MB/s\n")
STORAGE_PATH = "/lustre/validate"


def fixture(name):
    with open(os.path.join(PERF_FIXTURES, name)) as f:
        return f.read()


class Node(object):
    """One emulated GPU node: its own emulator state (hardware faults) and run (volatile settings) directories."""

    def __init__(self, root, name):
        self.name = name
        self.root = root / name
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "cmdline").write_text("BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on iommu=pt\n")
        # nor Slurm's: under srun the emulators would play one task of a multi-node job
        self.env = dict((k, v) for k, v in os.environ.items() if k not in EMU_KEYS and not k.startswith("SLURM_"))
        self.env.update(CLUSTERFORGE_EMU_STATE_DIR=str(self.root / "state"),
                        CLUSTERFORGE_EMU_RUN_DIR=str(self.root / "run"), LC_ALL="C")
        self.state_file = str(self.root / "nvidia_smi_state.json")

    def emu(self, tool, *args, **env):
        run_env = dict(self.env)
        run_env.update(env)
        proc = subprocess.run([sys.executable, os.path.join(EMULATORS, tool)] + [str(a) for a in args], env=run_env,
                              capture_output=True, text=True, timeout=120, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    def ok(self, tool, *args, **env):
        rc, out, err = self.emu(tool, *args, **env)
        assert rc == 0, (tool, args, rc, out, err)
        return out

    def module(self, module, args):
        def handler(argv, data):
            return self.emu(os.path.basename(argv[0]), *argv[1:])
        return run_module(module, args, Tool(handler))

    # -- what the validation playbook gathers on each node
    def tune(self, **settings):
        """What the gpu_tuning role leaves behind (its nvidia_smi task, recording in the node's state file): by
        default persistence on, the 700 W limit, SM clocks locked at 1980 MHz."""
        args = dict((k, v) for k, v in (settings or SETTINGS).items() if v is not None)
        args["state_file"] = self.state_file
        result = self.module(nvidia_smi_module, args)
        assert not result.get("failed"), result
        return result

    def nvidia_smi_info(self):
        return self.module(nvidia_smi_info_module, {"state_file": self.state_file})

    def dcgm_diag(self):
        return self.module(dcgm_diag_module, {"level": 2})

    def disable_acs(self):
        result = self.module(pcie_acs_module, {"scope": "gpu_nic_paths"})
        assert not result.get("failed"), result

    def pcie_acs_info(self):
        return self.module(pcie_acs_info_module, {"proc_root": str(self.root), "sysfs_root": str(self.root)})

    def ib_port_info(self):
        return self.module(ib_port_info_module, {"expected_rate_gbps": 400})

    def ibdiagnet(self):
        return self.module(ibdiagnet_module, {"expected_rate": "ndr", "output_dir": str(self.root / "ibdiagnet2")})

    def nccl(self, *args, **env):
        rc, out, err = self.emu("all_reduce_perf", *(args or ("-b", "8", "-e", "8G", "-f", "2", "-g", "8")), **env)
        assert out.strip(), err
        return FILTERS["nccl_tests_results"](out)

    def ib_write_bw(self, peer, hca="mlx5_0", **env):
        out = self.ok("ib_write_bw", "-d", hca, "-a", "-F", "--CPU-freq", peer, **env)
        return FILTERS["perftest_results"](out)

    def results(self):
        """The node as the validate role records it: its measuring tasks' results through validation_node_record."""
        return FILTERS["validation_node_record"](
            {"nvidia_smi_info": self.nvidia_smi_info(), "dcgm_diag": self.dcgm_diag(),
             "pcie_acs_info": self.pcie_acs_info(), "ib_port_info": self.ib_port_info(),
             "nccl_tests": {"changed": False, "result": self.nccl()},
             "storage_probe": {"changed": True, "measured": {
                 "path": STORAGE_PATH, "write": FILTERS["dd_results"](DD_WRITE),
                 "read": FILTERS["dd_results"](DD_READ)}}},
            True, EXPECTED["gpu_count"], SETTINGS, PROFILE, acs_require_disabled=True, storage_path=STORAGE_PATH)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """Two healthy, tuned nodes (ACS disabled on GPU/NIC paths) and everything measured on them, once."""
    root = tmp_path_factory.mktemp("lab")
    nodes = {}
    for name in ("gpu01", "gpu02"):
        node = Node(root, name)
        node.tune()
        node.disable_acs()
        nodes[name] = node
    measured = {
        "cluster": "cflab",
        "generated_at": "2026-11-21T23:40:00Z",
        "nodes": dict((name, node.results()) for name, node in nodes.items()),
        "ibdiagnet": nodes["gpu01"].ibdiagnet(),
        "ib_write_bw": [
            {"client": "gpu01", "server": "gpu02", "hca": "mlx5_0", "line_rate_gbits": 400,
             "result": nodes["gpu01"].ib_write_bw("gpu02", "mlx5_0")},
            {"client": "gpu02", "server": "gpu01", "hca": "mlx5_4", "line_rate_gbits": 400,
             "result": nodes["gpu02"].ib_write_bw("gpu01", "mlx5_4")},
        ],
        "nccl_multi": {"nodes": ["gpu01", "gpu02"],
                       "result": nodes["gpu01"].nccl("-b", "8", "-e", "8G", "-f", "2", "-g", "8", "-t", "2",
                                                     CLUSTERFORGE_EMU_NCCL_BUSBW_GBPS="385")},
        "storage_aggregate": {"path": STORAGE_PATH, "nodes": 2, "write_gbytes_per_s": 40.0, "read_gbytes_per_s": 52.5},
        "slurm_smoke": {"nodes_expected": ["gpu01", "gpu02"], "nodes_ran": ["gpu02", "gpu01"], "rc": 0, "job_id": "12"},
        "models": [{"name": "gpt-175b", "parameters_billion": 175}, {"name": "llama-70b", "parameters_billion": 70}],
        "checkpoint_interval_minutes": 30,
    }
    return {"root": root, "nodes": nodes, "measured": measured}


@pytest.fixture
def measured(lab):
    return copy.deepcopy(lab["measured"])


def fresh_node(tmp_path, name, tune=True):
    node = Node(tmp_path, name)
    if tune:
        node.tune()
    return node


def judge(measured, thresholds=None):
    report = FILTERS["validation_judge"](measured, thresholds or {})
    json.dumps(report, allow_nan=False)  # serialisable, strictly
    return report


def failed(report):
    return sorted((c["id"], c["subject"]) for c in report["checks"] if c["status"] == "fail")


def checks(report, check_id, subject=None):
    return [c for c in report["checks"] if c["id"] == check_id and (subject is None or c["subject"] == subject)]


def only(report, check_id, subject):
    found = checks(report, check_id, subject)
    assert len(found) == 1, (check_id, subject, [c["subject"] for c in checks(report, check_id)])
    return found[0]


def assert_fails(report, expected):
    """Exactly the expected (id, subject) checks fail, each failure message is in report.failures."""
    assert failed(report) == sorted(expected), failed(report)
    assert report["ok"] is False
    assert report["summary"]["fail"] == len(expected)
    messages = [c["message"] for c in report["checks"] if c["status"] == "fail"]
    assert report["failures"] == messages


def gpu_subject(node, index):
    bus = "00000000:%s:00.0" % SMI_BUSES[index]
    return re.compile(r"^%s GPU%d \(%s, GPU-[0-9a-f-]+\)$" % (node, index, re.escape(bus)))


# ---------------------------------------------------------------------------------------------------- all pass

def test_filters_registered():
    assert set(FILTERS) == set(NAMES)


SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}


def record(results=None, **kwargs):
    base = dict.fromkeys(("nvidia_smi_info", "dcgm_diag", "pcie_acs_info", "ib_port_info", "nccl_tests",
                          "storage_probe"), SKIPPED)
    base.update(results or {})
    args = dict(idle=True, gpu_count=8, gpu_settings=SETTINGS, profile=PROFILE)
    args.update(kwargs)
    return FILTERS["validation_node_record"](base, **args)


def test_node_record_a_skipped_task_measured_nothing_and_no_ib_is_expected_without_its_ports():
    node = record()
    for key in ("nvidia_smi_info", "dcgm_diag", "pcie_acs_info", "ib_port_info", "nccl_local", "storage"):
        assert node[key] is None, key
    assert node["expected"]["ib_rate_gbps"] is None and node["expected"]["ib_port_count"] is None
    assert node["expected"] == {"gpu_count": 8, "gpu_settings": SETTINGS, "acs_must_be_disabled": False,
                                "bios_enabled": False, "bios_settings": {}, "bios_require_known": False,
                                "ib_rate_gbps": None, "ib_port_count": None}
    assert node["idle"] is True and node["bios_state"] is None and node["bios_error"] is None


def test_node_record_ib_figures_where_the_ports_were_read():
    ports = {"changed": False, "ports": []}
    assert record({"ib_port_info": ports})["expected"]["ib_port_count"] == 8
    node = record({"ib_port_info": ports}, ib_ports_per_node=4)
    assert (node["expected"]["ib_rate_gbps"], node["expected"]["ib_port_count"]) == (400, 4)
    assert node["ib_port_info"] is ports


@pytest.mark.parametrize("disable, require, expected", [
    (False, False, False), (True, False, True), (False, "yes", True), ("no", True, True)])
def test_node_record_acs_must_be_disabled_where_pcie_acs_disables_or_requires_it(disable, require, expected):
    node = record(acs_disable=disable, acs_require_disabled=require)
    assert node["expected"]["acs_must_be_disabled"] is expected


def test_node_record_a_run_that_returned_nothing_is_its_error_and_the_judge_fails_it(measured):
    node = record({"nccl_tests": {"failed": True, "msg": "all_reduce_perf timed out after 600 s"},
                   "storage_probe": {"changed": False, "msg": "write: No space left on device"}},
                  storage_path=STORAGE_PATH)
    assert node["nccl_local"] == {"error": "all_reduce_perf timed out after 600 s"}
    assert node["storage"] == {"path": STORAGE_PATH, "error": "write: No space left on device"}
    assert record({"nccl_tests": {"changed": False}})["nccl_local"] == {"error": "no result"}
    assert record({"storage_probe": {"measured": None}})["storage"]["error"] == "the test returned nothing"
    # the judge fails both, with the module's message
    measured["nodes"]["gpu01"]["nccl_local"] = node["nccl_local"]
    measured["nodes"]["gpu01"]["storage"] = node["storage"]
    report = judge(measured)
    messages = " ".join(report["failures"])
    assert "all_reduce_perf timed out after 600 s" in messages and "No space left on device" in messages


@pytest.mark.parametrize("results, kwargs, words", [
    ([], {}, "measuring tasks' results by module"),
    (None, {"profile": {"ib_rate_gbps": 400}}, "profile"),
    (None, {"bios_settings": ["acs"]}, "bios_settings"),
    (None, {"acs_disable": "maybe"}, "acs_disable")])
def test_node_record_refuses_what_it_cannot_read(results, kwargs, words):
    with pytest.raises(AnsibleFilterError, match=words):
        if results is None:
            record(**kwargs)
        else:
            FILTERS["validation_node_record"](results, True, 8, SETTINGS, PROFILE, **kwargs)


def test_healthy_cluster_passes_every_check(measured):
    report = judge(measured)
    assert report["ok"] is True, report["failures"]
    assert report["failures"] == []
    assert report["cluster"] == "cflab" and report["generated_at"] == "2026-11-21T23:40:00Z"
    assert report["summary"] == {"pass": len(report["checks"]), "fail": 0, "skip": 0}
    assert all(set(c) == set(CHECK_KEYS) for c in report["checks"])
    per_id = {}
    for c in report["checks"]:
        per_id[c["id"]] = per_id.get(c["id"], 0) + 1
    assert per_id == {
        "gpu.count": 2, "gpu.health": 16, "gpu.persistence": 16, "gpu.power_limit": 16, "gpu.clocks": 16,
        "dcgm.diag": 2, "pcie.acs": 2, "ib.port": 16, "ib.port_count": 2, "ib.fabric": 1, "ib.write_bw": 2,
        "nccl.single_node": 2, "nccl.multi_node": 1, "storage.write": 2, "storage.read": 2,
        "storage.aggregate_write": 1, "storage.aggregate_read": 1, "slurm.smoke": 1, "checkpoint.stall": 2,
    }
    single = only(report, "nccl.single_node", "gpu01")
    assert single["category"] == "nccl" and single["unit"] == "GB/s"
    assert single["threshold"] == pytest.approx(333.0) and single["expected"] == 370
    assert 355 <= single["measured"] <= 375
    assert single["message"] == ("gpu01: all_reduce_perf busbw %.1f GB/s >= 333.0 GB/s (90%% of 370)"
                                 % single["measured"])
    multi = only(report, "nccl.multi_node", "gpu[01-02]")
    assert multi["threshold"] == pytest.approx(346.5) and multi["expected"] == 385
    pair = only(report, "ib.write_bw", "gpu01->gpu02 mlx5_0")
    assert pair["threshold"] == pytest.approx(380.0) and 380 <= pair["measured"] <= 400 and pair["unit"] == "Gb/s"
    assert gpu_subject("gpu02", 3).match(checks(report, "gpu.health")[11]["subject"])
    assert only(report, "ib.port", "gpu02 mlx5_7:1")["measured"] == 400
    write = only(report, "storage.write", "gpu01:%s" % STORAGE_PATH)
    assert write["measured"] == pytest.approx(8589934592 / 3.91562 / 1e9)
    # bandwidth chart rows: NCCL per node + multi-node, each ib_write_bw pair, storage per node and aggregate
    labels = [b["label"] for b in report["bandwidth"]]
    assert labels == ["gpu01 NCCL", "gpu01:/lustre/validate write", "gpu01:/lustre/validate read",
                      "gpu02 NCCL", "gpu02:/lustre/validate write", "gpu02:/lustre/validate read",
                      "gpu01->gpu02 mlx5_0 ib_write_bw", "gpu02->gpu01 mlx5_4 ib_write_bw",
                      "gpu[01-02] NCCL multi-node", "aggregate /lustre/validate (2 nodes) write",
                      "aggregate /lustre/validate (2 nodes) read"]
    assert all(set(b) == {"label", "group", "unit", "measured", "threshold", "status"} for b in report["bandwidth"])
    assert [e["name"] for e in report["checkpoint"]] == ["gpt-175b", "llama-70b"]
    assert report["thresholds"] == DEFAULT_THRESHOLDS


# ------------------------------------------------------------------------------------------- each failure named

def test_dropped_gpu_is_named(measured, tmp_path):
    node = fresh_node(tmp_path, "gpu02")
    node.ok("nvidia-smi", "--emu-drop-gpu", "5")
    measured["nodes"]["gpu02"]["nvidia_smi_info"] = node.nvidia_smi_info()
    report = judge(measured)
    assert_fails(report, [("gpu.count", "gpu02")])
    count = only(report, "gpu.count", "gpu02")
    assert count["measured"] == 7 and count["expected"] == 8
    assert count["message"].startswith("gpu02: 7 of 8 GPUs visible to nvidia-smi; visible: 00000000:18:00.0")
    assert "00000000:AB:00.0" not in count["message"]
    assert len(checks(report, "gpu.health")) == 15


def test_dropped_gpu_named_by_address_when_lspci_still_sees_it(measured, tmp_path):
    node = fresh_node(tmp_path, "gpu02")
    node.ok("nvidia-smi", "--emu-drop-gpu", "5")
    measured["nodes"]["gpu02"]["nvidia_smi_info"] = node.nvidia_smi_info()
    # lspci's view with the addresses nvidia-smi's profile uses (the two emulators model different slots)
    measured["nodes"]["gpu02"]["pcie_acs_info"]["gpus"] = [
        {"bdf": "0000:%s:00.0" % bus.lower(), "description": "NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)",
         "upstream_bridges": []} for bus in SMI_BUSES]
    message = only(judge(measured), "gpu.count", "gpu02")["message"]
    assert message.endswith("on the PCI bus but not in nvidia-smi: 0000:ab:00.0")


def test_dropped_gpu_named_when_lspci_prints_no_domain(measured, tmp_path):
    node = fresh_node(tmp_path, "gpu02")
    node.ok("nvidia-smi", "--emu-drop-gpu", "5")
    measured["nodes"]["gpu02"]["nvidia_smi_info"] = node.nvidia_smi_info()
    # plain lspci (no -D) prints 1b:00.0; nvidia-smi prints 00000000:1B:00.0: the same addresses
    measured["nodes"]["gpu02"]["pcie_acs_info"]["gpus"] = [
        {"bdf": "%s:00.0" % bus.lower(), "description": "NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)",
         "upstream_bridges": []} for bus in SMI_BUSES]
    message = only(judge(measured), "gpu.count", "gpu02")["message"]
    assert message.endswith("on the PCI bus but not in nvidia-smi: ab:00.0")


def test_gpu_health_problems_name_each_gpu(measured, tmp_path):
    node = fresh_node(tmp_path, "gpu01")
    node.ok("nvidia-smi", "--emu-ecc", "2", "4")
    node.ok("nvidia-smi", "--emu-row-remap-pending", "6", "1")
    node.ok("nvidia-smi", "--emu-temp", "1", "91")
    measured["nodes"]["gpu01"]["nvidia_smi_info"] = node.nvidia_smi_info()
    report = judge(measured)
    failing = [c for c in report["checks"] if c["status"] == "fail"]
    assert [c["id"] for c in failing] == ["gpu.health"] * 3
    assert [gpu_subject("gpu01", i).match(c["subject"]) is not None for i, c in zip((1, 2, 6), failing)] == [True] * 3
    assert "hw_slowdown" in failing[0]["message"] and "91 C" in failing[0]["message"]
    assert "4 volatile uncorrectable ECC error(s)" in failing[1]["message"]
    assert "row remap pending" in failing[2]["message"]
    assert report["ok"] is False and len(report["failures"]) == 3


def test_untuned_node_fails_persistence_power_and_clocks_per_gpu(measured, tmp_path):
    node = fresh_node(tmp_path, "gpu02", tune=False)
    node.ok("nvidia-smi", "-pl", "500")
    measured["nodes"]["gpu02"]["nvidia_smi_info"] = node.nvidia_smi_info()
    report = judge(measured)
    assert sorted(set(failed(report))) == sorted(
        [(cid, c["subject"]) for cid in ("gpu.persistence", "gpu.power_limit", "gpu.clocks")
         for c in checks(report, cid) if c["subject"].startswith("gpu02 ")])
    assert len(failed(report)) == 24
    gpu3 = [c for c in report["checks"] if c["subject"].startswith("gpu02 GPU3 ")]
    by_id = dict((c["id"], c) for c in gpu3)
    assert by_id["gpu.persistence"]["message"].endswith("persistence mode disabled (expected enabled)")
    assert "persistence mode not recorded as applied" in by_id["gpu.persistence"]["message"]
    assert by_id["gpu.power_limit"]["measured"] == 500 and by_id["gpu.power_limit"]["expected"] == 700
    assert by_id["gpu.clocks"]["expected"] == 1980 and by_id["gpu.clocks"]["measured"] < 1980
    assert gpu_subject("gpu02", 3).match(by_id["gpu.clocks"]["subject"])
    # gpu_tuning applies the limit (recorded); a drift within the 1 W tolerance is a pass
    node.tune(power_limit_watts=700)
    node.ok("nvidia-smi", "-pl", "699.5")
    measured["nodes"]["gpu02"]["nvidia_smi_info"] = node.nvidia_smi_info()
    measured["nodes"]["gpu02"]["expected"]["gpu_settings"] = {"power_limit_watts": 700}
    report = judge(measured)
    assert report["ok"] is True, report["failures"]
    assert not checks(report, "gpu.persistence", "gpu02 GPU0 (00000000:18:00.0, %s)"
                      % measured["nodes"]["gpu02"]["nvidia_smi_info"]["gpus"][0]["uuid"])


def test_dcgm_failure_names_test_and_gpu(measured, tmp_path):
    node = fresh_node(tmp_path, "gpu02", tune=False)
    node.ok("dcgmi", "--emu-fail", "memory", "3")
    diag = node.dcgm_diag()
    assert diag["failed"] is True  # the playbook registers it with failed_when: false
    measured["nodes"]["gpu02"]["dcgm_diag"] = diag
    report = judge(measured)
    assert_fails(report, [("dcgm.diag", "gpu02")])
    message = only(report, "dcgm.diag", "gpu02")["message"]
    uuid = measured["nodes"]["gpu02"]["nvidia_smi_info"]["gpus"][3]["uuid"]
    assert message.startswith("gpu02: DCGM diagnostic level 2: memory failed on GPU 3 (00000000:5D:00.0, %s): "
                              "A memory mismatch was detected on GPU 3" % uuid)


def test_dcgm_warnings_are_named_in_the_pass(measured, tmp_path):
    """dcgm_diag returns DCGM's warnings as diag_warnings (Ansible keeps a module's `warnings` for itself)."""
    node = fresh_node(tmp_path, "gpu02", tune=False)
    diag = node.dcgm_diag()
    diag.update(result="warn", diag_warnings=["pcie (GPU 1): PCIe replay count above the limit"])
    measured["nodes"]["gpu02"]["dcgm_diag"] = diag
    report = judge(measured)
    check = only(report, "dcgm.diag", "gpu02")
    assert check["status"] == "pass"
    assert "passed with warnings" in check["message"] and "PCIe replay count above the limit" in check["message"]


def test_dcgm_timeout_is_a_failure_not_a_skip(measured):
    measured["nodes"]["gpu01"]["dcgm_diag"] = {
        "failed": True, "changed": False, "msg": "dcgmi diag -r 2 timed out after 600 seconds", "result": None,
        "tests": [], "gpus": {}, "failed_tests": [], "cmd": "/usr/bin/timeout -k 30 630 /usr/bin/dcgmi diag -r 2 -j",
        "rc": 124}
    report = judge(measured)
    assert_fails(report, [("dcgm.diag", "gpu01")])
    assert "timed out after 600 seconds" in only(report, "dcgm.diag", "gpu01")["message"]


def test_acs_enabled_names_every_bridge(measured, tmp_path):
    node = fresh_node(tmp_path, "gpu02", tune=False)  # boot state: ACS control 001d on root and switch ports
    info = node.pcie_acs_info()
    measured["nodes"]["gpu02"]["pcie_acs_info"] = info
    report = judge(measured)
    assert_fails(report, [("pcie.acs", "gpu02")])
    check = only(report, "pcie.acs", "gpu02")
    assert check["measured"] == 20 and check["expected"] == 0
    for bdf in info["gpu_nic_acs_enabled_bridges"]:
        assert bdf in check["message"]
    assert "0000:1a:00.0 (ACSCtl 001d, above 0000:1b:00.0)" in check["message"]
    assert "0000:16:01.0" not in check["message"]  # the NVMe root port is no GPU/NIC path
    # a node that may keep ACS (VFIO) is not judged on it
    measured["nodes"]["gpu02"]["expected"]["acs_must_be_disabled"] = False
    report = judge(measured)
    assert report["ok"] is True
    assert only(report, "pcie.acs", "gpu02")["status"] == "skip"


def test_acs_disabled_pass_mentions_bridges_off_path(measured):
    message = only(judge(measured), "pcie.acs", "gpu01")["message"]
    assert message == ("gpu01: ACS disabled on all 20 bridge(s) on GPU/NIC paths "
                       "(still enabled off those paths: 0000:16:01.0)")


def test_port_down_and_wrong_rate_are_named(measured, tmp_path):
    node = fresh_node(tmp_path, "gpu02", tune=False)
    node.ok("ibstat", "--emu-port-down", "mlx5_3")
    node.ok("ibstat", "--emu-port-rate", "mlx5_5", "200")
    measured["nodes"]["gpu02"]["ib_port_info"] = node.ib_port_info()
    measured["ibdiagnet"] = node.ibdiagnet()
    report = judge(measured)
    assert_fails(report, [("ib.port", "gpu02 mlx5_3:1"), ("ib.port", "gpu02 mlx5_5:1"), ("ib.fabric", "fabric")])
    down = only(report, "ib.port", "gpu02 mlx5_3:1")["message"]
    assert down == "gpu02 mlx5_3:1: state Down/Polling (expected Active/LinkUp); rate 10 Gb/s (expected 400 Gb/s)"
    assert only(report, "ib.port", "gpu02 mlx5_5:1")["message"] == "gpu02 mlx5_5:1: rate 200 Gb/s (expected 400 Gb/s)"
    fabric = only(report, "ib.fabric", "fabric")
    assert fabric["message"].startswith("fabric: ibdiagnet reports 1 error(s) in Speed / Width checks (1); first: ")
    assert "mlx5_5" in fabric["message"] and "Unexpected actual link speed 50" in fabric["message"]
    count = only(report, "ib.port_count", "gpu02")
    assert count["status"] == "pass" and count["message"] == "gpu02: 8 of 8 HCA port(s) found (7 active)"


def test_degraded_pair_is_named(measured, lab):
    result = lab["nodes"]["gpu02"].ib_write_bw("gpu01", "mlx5_4", CLUSTERFORGE_EMU_IB_DEGRADE="0.5")
    measured["ib_write_bw"][1]["result"] = result
    report = judge(measured)
    assert_fails(report, [("ib.write_bw", "gpu02->gpu01 mlx5_4")])
    check = only(report, "ib.write_bw", "gpu02->gpu01 mlx5_4")
    assert 185 <= check["measured"] <= 200
    assert check["message"] == ("gpu02->gpu01 mlx5_4: ib_write_bw %.1f Gb/s < 380.0 Gb/s (95%% of 400)"
                                % check["measured"])
    row = [b for b in report["bandwidth"] if b["label"] == "gpu02->gpu01 mlx5_4 ib_write_bw"][0]
    assert row["status"] == "fail" and row["threshold"] == 380.0 and row["group"] == "InfiniBand"


def test_low_busbw_is_named(measured, lab):
    measured["nodes"]["gpu02"]["nccl_local"] = lab["nodes"]["gpu02"].nccl(
        "-b", "8", "-e", "8G", "-f", "2", "-g", "8", CLUSTERFORGE_EMU_NCCL_BUSBW_GBPS="200")
    report = judge(measured)
    assert_fails(report, [("nccl.single_node", "gpu02")])
    check = only(report, "nccl.single_node", "gpu02")
    assert 190 <= check["measured"] <= 201
    assert check["message"] == "gpu02: all_reduce_perf busbw %.1f GB/s < 333.0 GB/s (90%% of 370)" % check["measured"]


def test_wrong_data_fails_even_at_full_bandwidth(measured, lab):
    result = lab["nodes"]["gpu01"].nccl("-b", "8", "-e", "8G", "-f", "2", "-g", "8", CLUSTERFORGE_EMU_NCCL_WRONG="1")
    assert result["ok"] is False and result["busbw_peak_gbps"] > 350
    measured["nccl_multi"]["result"] = result
    report = judge(measured)
    assert_fails(report, [("nccl.multi_node", "gpu[01-02]")])
    message = only(report, "nccl.multi_node", "gpu[01-02]")["message"]
    assert message.startswith("gpu[01-02]: all_reduce_perf failed: ")
    assert "wrong elements" in message and "FAILED" in message


def test_missing_smoke_node_is_named(measured):
    measured["slurm_smoke"].update(nodes_ran=["gpu01"], rc=1)
    report = judge(measured)
    assert_fails(report, [("slurm.smoke", "slurm job 12")])
    assert only(report, "slurm.smoke", "slurm job 12")["message"] == "slurm job 12: exit status 1; did not run on gpu02"


def test_slow_storage_is_named(measured):
    measured["nodes"]["gpu02"]["storage"]["write"] = FILTERS["dd_results"](DD_SLOW)
    measured["storage_aggregate"]["read_gbytes_per_s"] = 1.5
    report = judge(measured)
    subject = "gpu02:%s" % STORAGE_PATH
    aggregate = "aggregate %s (2 nodes)" % STORAGE_PATH
    assert_fails(report, [("storage.write", subject), ("storage.aggregate_read", aggregate)])
    assert only(report, "storage.write", subject)["message"] == "gpu02:/lustre/validate: dd write 0.43 GB/s < 1.00 GB/s"
    assert only(report, "storage.aggregate_read", aggregate)["message"] == (
        "aggregate /lustre/validate (2 nodes): read 1.50 GB/s < 2.00 GB/s")


def test_checkpoint_stall_too_high_is_named(measured):
    measured["storage_aggregate"]["write_gbytes_per_s"] = 4.0
    report = judge(measured)
    assert_fails(report, [("checkpoint.stall", "gpt-175b"), ("checkpoint.stall", "llama-70b")])
    check = only(report, "checkpoint.stall", "gpt-175b")
    # 2.8e12 B / 4 GB/s = 700 s per checkpoint, twice an hour: 1400 s = 38.9 % of the hour
    assert check["measured"] == pytest.approx(1400 / 36.0)
    assert check["threshold"] == 5.0 and check["unit"] == "%"
    assert check["message"] == ("gpt-175b: a 2.80 TB checkpoint every 30 min takes 700.0 s at 4.00 GB/s: "
                                "38.89% of training time > 5.00%")
    assert report["checkpoint"][0]["checkpoint_bytes"] == 2.8e12


def test_thresholds_change_the_verdict_and_defaults_fill_in(measured):
    report = judge(measured, {"nccl_single_node_busbw_gbps": 450, "checkpoint_max_stall_percent": 3})
    assert sorted(set(cid for cid, _s in failed(report))) == ["checkpoint.stall", "nccl.single_node"]
    assert only(report, "nccl.single_node", "gpu01")["threshold"] == pytest.approx(405.0)
    assert report["thresholds"]["nccl_multi_node_busbw_gbps"] == 385
    assert report["thresholds"]["nccl_single_node_busbw_gbps"] == 450


@pytest.mark.parametrize("thresholds, match", [
    ({"nccl_single_node_busbw": 370}, "unknown threshold key.*nccl_single_node_busbw"),
    ({"storage_write_gbytes_per_s": 1}, "unknown threshold key"),
    ({"nccl_min_fraction": 90}, "fraction"),
    ({"ib_write_bw_min_fraction": 0}, "positive number"),
    ({"checkpoint_max_stall_percent": "lots"}, "positive number"),
    ({"bytes_per_parameter": True}, "positive number"),
    (["nccl_min_fraction"], "thresholds must be a dict"),
])
def test_bad_thresholds_are_rejected(measured, thresholds, match):
    with pytest.raises(AnsibleFilterError, match=match):
        FILTERS["validation_judge"](measured, thresholds)


# --------------------------------------------------------------------------------------- not measured -> skip

def test_not_measured_is_skipped_never_passed(measured):
    for node in measured["nodes"].values():
        node.update(dcgm_diag=None, nccl_local=None, storage=None, ib_port_info=None)
        node["expected"].update(ib_port_count=None, gpu_settings=dict(SETTINGS, power_limit_watts=None))
    measured.update(ibdiagnet=None, ib_write_bw=[], nccl_multi=None, storage_aggregate=None, slurm_smoke=None)
    report = judge(measured)
    assert report["ok"] is True
    skipped = set(c["id"] for c in report["checks"] if c["status"] == "skip")
    assert skipped == {"dcgm.diag", "nccl.single_node", "storage.write", "storage.read", "ib.port", "ib.port_count",
                       "ib.fabric", "ib.write_bw", "nccl.multi_node", "storage.aggregate_write",
                       "storage.aggregate_read", "slurm.smoke", "checkpoint.stall"}
    assert not [c for c in report["checks"] if c["id"] in skipped and c["status"] != "skip"]
    assert not checks(report, "gpu.power_limit")
    assert only(report, "dcgm.diag", "gpu01")["message"] == (
        "gpu01: no DCGM diagnostic (DCGM not installed or diagnostic disabled)")
    assert only(report, "nccl.multi_node", "multi-node")["message"] == (
        "multi-node: multi-node NCCL test was not measured")
    assert only(report, "checkpoint.stall", "gpt-175b")["message"] == (
        "gpt-175b: no aggregate storage write bandwidth measured")
    assert report["checkpoint"] == [] and report["bandwidth"] == [
        b for b in report["bandwidth"] if b["label"].endswith("NCCL")]
    assert report["summary"]["skip"] == len([c for c in report["checks"] if c["status"] == "skip"])


def test_busy_node_stress_tests_are_skipped_saying_why(measured):
    node = measured["nodes"]["gpu02"]
    node.update(idle=False, dcgm_diag=None, nccl_local=None, storage=None)
    report = judge(measured)
    assert report["ok"] is True
    why = "not run: the node was running Slurm jobs (stress tests run on idle nodes only)"
    assert only(report, "dcgm.diag", "gpu02")["message"] == "gpu02: " + why
    assert only(report, "nccl.single_node", "gpu02")["message"] == "gpu02: single-node NCCL test " + why
    assert only(report, "storage.write", "gpu02")["message"] == "gpu02: storage write bandwidth " + why
    assert [c["status"] for c in report["checks"] if c["subject"] == "gpu02"
            and c["category"] in ("dcgm", "nccl", "storage")] == ["skip"] * 4


def test_commands_that_failed_without_output_are_failures(measured):
    measured["ib_write_bw"][0].update(result=None, rc=1)
    measured["nccl_multi"].update(result=FILTERS["nccl_tests_results"](""), rc=1)
    report = judge(measured)
    assert_fails(report, [("ib.write_bw", "gpu01->gpu02 mlx5_0"), ("nccl.multi_node", "gpu[01-02]")])
    assert report["failures"] == ["gpu01->gpu02 mlx5_0: ib_write_bw failed with exit status 1",
                                  "gpu[01-02]: all_reduce_perf failed: exit status 1; no result rows in the output"]


def test_nccl_output_cut_short_is_not_ok(lab):
    rc, out, _err = lab["nodes"]["gpu01"].emu("all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8")
    cut = out[:out.index("# Out of bounds")]
    result = FILTERS["nccl_tests_results"](cut)
    assert rc == 0 and len(result["rows"]) == 31
    assert result["ok"] is False
    assert result["problems"] == ["no 'Out of bounds values' summary: the test did not finish"]


def test_expected_booleans_as_text(measured):
    measured["nodes"]["gpu01"]["expected"].update(gpu_settings=dict(SETTINGS, persistence_mode="yes"),
                                                  acs_must_be_disabled="false")
    report = judge(measured)
    assert report["ok"] is True
    assert only(report, "pcie.acs", "gpu01")["status"] == "skip"
    measured["nodes"]["gpu01"]["expected"]["gpu_settings"]["persistence_mode"] = "sometimes"
    with pytest.raises(AnsibleFilterError, match="gpu01 expected.gpu_settings: gpu_tuning_persistence_mode: must be a "
                                                 "boolean, got string 'sometimes'"):
        judge(measured)


def test_nothing_measured_passes_nothing():
    report = judge({"cluster": "empty"})
    assert report["summary"]["pass"] == 0 and report["summary"]["fail"] == 0 and report["summary"]["skip"] > 0
    assert all(c["status"] == "skip" and c["message"] for c in report["checks"])
    assert report["cluster"] == "empty" and report["generated_at"] is None


def test_skipped_and_failed_tasks(measured):
    node = measured["nodes"]["gpu01"]
    node["nvidia_smi_info"] = {"skipped": True, "changed": False, "skip_reason": "Conditional result was False",
                               "false_condition": "cluster_gpu_count_per_node > 0"}
    node["ib_port_info"] = {"failed": True, "changed": False,
                            "msg": "/sys/class/infiniband does not exist: no RDMA devices, or the ib_core/mlx5_ib "
                                   "modules are not loaded"}
    report = judge(measured)
    assert_fails(report, [("ib.port", "gpu01"), ("ib.port_count", "gpu01")])
    count = only(report, "gpu.count", "gpu01")
    assert count["status"] == "skip" and "skipped (Conditional result was False)" in count["message"]
    assert [c["status"] for c in checks(report, "gpu.health", "gpu01")] == ["skip"]
    assert "no RDMA devices" in only(report, "ib.port", "gpu01")["message"]


def test_raw_outputs_are_accepted_where_results_are_expected(measured, lab):
    rc, out, _err = lab["nodes"]["gpu01"].emu("all_reduce_perf", "-b", "1G", "-e", "8G", "-f", "2", "-g", "8")
    measured["nodes"]["gpu01"]["nccl_local"] = out
    measured["nodes"]["gpu01"]["storage"]["read"] = DD_READ
    measured["nodes"]["gpu02"]["storage"]["read"] = "dd: failed to open '/lustre/validate/f': Permission denied\n"
    report = judge(measured)
    assert rc == 0 and only(report, "nccl.single_node", "gpu01")["status"] == "pass"
    assert only(report, "storage.read", "gpu01:/lustre/validate")["status"] == "pass"
    assert_fails(report, [("storage.read", "gpu02:/lustre/validate")])
    assert "Permission denied" in report["failures"][0]


# ----------------------------------------------------------------------------------------- benchmark parsers

def test_nccl_results_from_the_emulator(lab):
    result = lab["nodes"]["gpu01"].nccl()
    assert len(result["rows"]) == 31 and result["ok"] is True and result["problems"] == []
    largest = result["rows"][-1]
    assert largest["size_bytes"] == 8 * 1024 ** 3
    assert result["busbw_peak_gbps"] == largest["busbw_oop"]
    slow = lab["nodes"]["gpu01"].nccl("-b", "8", "-e", "8G", "-f", "2", "-g", "8",
                                      CLUSTERFORGE_EMU_NCCL_BUSBW_GBPS="200")
    assert 190 <= slow["busbw_peak_gbps"] <= 201 and slow["ok"] is True


def test_nccl_results_use_the_largest_size_out_of_place():
    result = FILTERS["nccl_tests_results"](fixture("all_reduce_perf-8x-h100-nocheck-nccl-info.txt"))
    assert result["busbw_peak_gbps"] == 369.02          # largest size, out-of-place (in-place shows 370.35)
    assert result["max_busbw_gbps"] == 370.35
    assert result["ok"] is True


def test_nccl_results_wrong_data_and_empty():
    wrong = FILTERS["nccl_tests_results"](fixture("all_reduce_perf-wrong-failed.txt"))
    assert wrong["ok"] is False
    assert wrong["problems"] == ["12 wrong elements", "out of bounds values: 12 FAILED"]
    empty = FILTERS["nccl_tests_results"]("bash: all_reduce_perf: command not found\n")
    assert empty["ok"] is False and empty["busbw_peak_gbps"] is None
    assert empty["problems"] == ["no result rows in the output"]
    again = FILTERS["nccl_tests_results"](wrong)       # already parsed: kept, not recomputed
    assert again == wrong
    with pytest.raises(AnsibleFilterError, match="nccl_tests_results"):
        FILTERS["nccl_tests_results"](42)


def test_perftest_results_convert_mib_per_second_to_gbits():
    result = FILTERS["perftest_results"](fixture("ib_write_bw-ndr-ib-all-sizes-mbsec-tabs.txt"))
    assert result["bw_unit"] == "MB/sec"
    largest = max(result["rows"], key=lambda r: r["bytes"])
    # perftest's MB is 2^20 bytes: 46121.07 MB/sec * 1048576 * 8 / 1e9 = 386.89 Gb/s
    assert result["bw_peak_gbits"] == pytest.approx(largest["bw_avg"] * 1048576 * 8 / 1e9, abs=0.001)
    assert result["bw_peak_gbits"] == pytest.approx(386.892, abs=0.001)
    gbits = FILTERS["perftest_results"](fixture("ib_read_bw-hdr-gbits.txt"))
    assert gbits["bw_unit"] == "Gb/sec" and gbits["bw_peak_gbits"] == 192.87 and gbits["ok"] is True
    assert FILTERS["perftest_results"]("")["ok"] is False


def test_perftest_results_from_the_emulator_in_both_units(lab):
    node = lab["nodes"]["gpu01"]
    mib = node.ib_write_bw("gpu02")
    gbits = FILTERS["perftest_results"](node.ok("ib_write_bw", "-d", "mlx5_0", "-a", "--report_gbits", "gpu02"))
    assert mib["bw_unit"] == "MB/sec" and gbits["bw_unit"] == "Gb/sec"
    assert mib["rows"][-1]["bytes"] == 2 ** 23
    assert mib["bw_peak_gbits"] == pytest.approx(gbits["bw_peak_gbits"], abs=0.05)
    assert 385 <= mib["bw_peak_gbits"] <= 392
    half = node.ib_write_bw("gpu02", CLUSTERFORGE_EMU_IB_DEGRADE="0.5")
    assert half["bw_peak_gbits"] == pytest.approx(mib["bw_peak_gbits"] / 2, rel=0.01)


@pytest.mark.parametrize("text, nbytes, seconds", [
    ("1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.23456 s, 870 MB/s", 1073741824, 1.23456),
    ("16384+0 records in\n16384+0 records out\n17179869184 bytes (17 GB, 16 GiB) copied, 6.01 s, 2.9 GB/s\n",
     17179869184, 6.01),
    ("1073741824 bytes (1.1 GB) copied, 9.42 s, 114 MB/s", 1073741824, 9.42),    # coreutils < 8.24
    ("512 bytes copied, 0.000301 s, 1.7 MB/s", 512, 0.000301),
    ("4096 bytes (4.1 kB, 4.0 KiB) copied, 0.0102 s, 402 kB/s", 4096, 0.0102),
    ("1 byte copied, 0.5 s, 2 B/s", 1, 0.5),
    ("1061158912 bytes (1.1 GB, 1012 MiB) copied, 1 s, 1.1 GB/s\r2122317824 bytes (2.1 GB, 2.0 GiB) copied, 2 s, "
     "1.1 GB/s\r\n2048+0 records in\n2048+0 records out\n2147483648 bytes (2.1 GB, 2.0 GiB) copied, 2.03 s, 1.1 GB/s\n",
     2147483648, 2.03),                                                            # status=progress
    ("1073741824 Bytes (1,1 GB, 1,0 GiB) kopiert, 1,5 s, 716 MB/s", None, None),  # German locale: not dd's C output
])
def test_dd_results(text, nbytes, seconds):
    if nbytes is None:
        with pytest.raises(AnsibleFilterError, match="no 'N bytes ... copied"):
            FILTERS["dd_results"](text)
        return
    result = FILTERS["dd_results"](text)
    assert result == {"bytes": nbytes, "seconds": seconds, "gbytes_per_s": nbytes / seconds / 1e9}


@pytest.mark.parametrize("text, match", [
    ("dd: error writing '/lustre/validate/f': No space left on device\n", "no 'N bytes ... copied"),
    ("", "no 'N bytes ... copied"),
    (None, "no dd output"),
    (12, "expects the text dd printed"),
    ("0 bytes copied, 0 s, Infinity B/s", "zero duration"),
])
def test_dd_results_errors(text, match):
    with pytest.raises(AnsibleFilterError, match=match):
        FILTERS["dd_results"](text)


def test_dd_results_read_real_gnu_dd(tmp_path):
    dd = shutil.which("dd")
    if dd is None:
        pytest.skip("no dd on this machine")
    proc = subprocess.run([dd, "if=/dev/zero", "of=%s" % (tmp_path / "f"), "bs=1M", "count=16", "conv=fsync"],
                          capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"), timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    result = FILTERS["dd_results"]({"stderr": proc.stderr, "rc": 0})   # a registered result works too
    assert result["bytes"] == 16 * 1024 * 1024 and result["seconds"] > 0 and result["gbytes_per_s"] > 0


# ---------------------------------------------------------------------------------------------- checkpoints

def test_checkpoint_estimate_175b():
    (est,) = FILTERS["checkpoint_estimate"]([{"name": "gpt-175b", "parameters_billion": 175}], 40, 30)
    assert est["checkpoint_bytes"] == 2.8e12                       # 175e9 params x 16 B (Adam, mixed precision)
    assert est["write_seconds"] == pytest.approx(70.0)
    assert est["stall_seconds_per_hour"] == pytest.approx(140.0)
    assert est["stall_percent"] == pytest.approx(140.0 / 36.0)
    assert est["name"] == "gpt-175b" and est["parameters_billion"] == 175
    (bf16,) = FILTERS["checkpoint_estimate"]([{"name": "w", "parameters_billion": "7"}], "2.5", 60,
                                             bytes_per_parameter=2)
    assert bf16["checkpoint_bytes"] == 14e9 and bf16["write_seconds"] == pytest.approx(5.6)
    assert bf16["parameters_billion"] == 7.0
    assert FILTERS["checkpoint_estimate"]([], 1, 1) == []


@pytest.mark.parametrize("args, match", [
    (([{"name": "m", "parameters_billion": 1}], 0, 30), "write_gbytes_per_s .* must be a positive number"),
    (([{"name": "m", "parameters_billion": 1}], -2, 30), "write_gbytes_per_s"),
    (([{"name": "m", "parameters_billion": 1}], 10, 0), "interval_minutes .* must be a positive number"),
    (([{"name": "m", "parameters_billion": 1}], 10, None), "interval_minutes"),
    (([{"name": "m", "parameters_billion": 0}], 10, 30), r"models\[0\] \(m\) parameters_billion"),
    (([{"name": "m"}], 10, 30), "parameters_billion"),
    ((["gpt"], 10, 30), r"models\[0\] must be a dict"),
    (({"name": "m", "parameters_billion": 1}, 10, 30), "expects a list"),
    (([{"name": "m", "parameters_billion": 1}], 10, 30, 0), "bytes_per_parameter"),
])
def test_checkpoint_estimate_rejects_bad_input(args, match):
    with pytest.raises(AnsibleFilterError, match=match):
        FILTERS["checkpoint_estimate"](*args)


# ------------------------------------------------------------------------------------------------------ HTML

def test_html_names_the_failure_escaped_with_inline_svg(measured, lab):
    degraded = lab["nodes"]["gpu02"].ib_write_bw("gpu01", "mlx5_4", CLUSTERFORGE_EMU_IB_DEGRADE="0.5")
    measured["ib_write_bw"][1]["result"] = degraded
    measured["models"].append({"name": "<b>moe & co</b>", "parameters_billion": 1})
    report = judge(measured)
    page = FILTERS["validation_html"](report)
    assert page.startswith("<!DOCTYPE html>\n") and page.rstrip().endswith("</html>")
    assert "<title>ClusterForge validation: cflab at 2026-11-21T23:40:00Z</title>" in page
    assert '<div class="banner fail">FAIL</div>' in page
    assert "gpu02-&gt;gpu01 mlx5_4" in page and "gpu02->gpu01" not in page
    assert "&lt;b&gt;moe &amp; co&lt;/b&gt;" in page and "<b>moe" not in page
    assert page.count("<svg") == 4                          # NCCL, storage per node, InfiniBand, storage aggregate
    assert page.count("<rect") == len(report["bandwidth"])
    assert page.count("<line") == len([b for b in report["bandwidth"] if b["threshold"] is not None])
    lowered = page.lower()
    for banned in ("<script", "http:", "https:", "<link", "url(", "@import", "src="):
        assert banned not in lowered
    rows = re.findall(r'<tr class="(pass|fail|skip)">', page)
    assert rows[0] == "fail" and rows.count("fail") == 1 and len(rows) == len(report["checks"])
    assert "1 failed" in page and "%d passed" % report["summary"]["pass"] in page
    assert "gpt-175b" in page and "2.80" in page            # checkpoint table, TB
    long_path = "/lustre/projects/validation/scratch/of/a/long/path"
    measured["nodes"]["gpu01"]["storage"]["path"] = long_path
    page = FILTERS["validation_html"](judge(measured))
    label = "gpu01:%s write" % long_path
    assert "<title>%s: " % label in page                    # whole in the tooltip
    assert ">%s\u2026</text>" % label[:45] in page          # cut on the chart


def test_html_of_a_passing_and_of_an_empty_report(measured):
    page = FILTERS["validation_html"](judge(measured))
    assert '<div class="banner pass">PASS</div>' in page and "<h2>Failures</h2>" not in page
    empty = FILTERS["validation_html"](judge({"cluster": "x"}))
    assert "PASS (nothing was measured)" in empty and "<svg" not in empty and "No bandwidth was measured." in empty
    with pytest.raises(AnsibleFilterError, match="validation_html expects the report"):
        FILTERS["validation_html"]({"cluster": "x"})


# ------------------------------------------------------------------------------------------- docs and Ansible

@pytest.mark.parametrize("name", NAMES)
def test_docs_beside_the_filter(name):
    with open(os.path.join(FILTER_DIR, name + ".yml")) as f:
        doc = yaml.safe_load(f)
    assert set(doc) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}
    assert doc["DOCUMENTATION"]["name"] == name
    assert "_input" in doc["DOCUMENTATION"]["options"]
    assert "clusterforge.gpu.%s" % name in doc["EXAMPLES"]
    assert "_value" in doc["RETURN"]


def test_judge_and_html_in_a_playbook_run(measured, tmp_path):
    """Through Ansible's templating (2.19 lazy containers and tagged values) the report is still plain JSON."""
    playbook_bin = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(playbook_bin):
        pytest.skip("ansible-playbook not installed beside this Python")
    repo_root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
    collections_path = os.path.join(repo_root, ".cache", "collections")  # conftest.py makes the link
    (tmp_path / "measured.json").write_text(json.dumps(measured))
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "name": "Judge", "hosts": "localhost", "gather_facts": False,
        "vars": {
            "measured": "{{ lookup('ansible.builtin.file', 'measured.json') | from_json }}",
            "report": "{{ measured | clusterforge.gpu.validation_judge({'nccl_min_fraction': 0.9}) }}",
        },
        "tasks": [
            {"name": "Write the report", "ansible.builtin.copy": {
                "content": "{{ report | to_nice_json }}", "dest": str(tmp_path / "report.json"), "mode": "0644"}},
            {"name": "Write the page", "ansible.builtin.copy": {
                "content": "{{ report | clusterforge.gpu.validation_html }}", "dest": str(tmp_path / "report.html"),
                "mode": "0644"}},
            {"name": "dd", "ansible.builtin.assert": {"that": [
                "(lines | clusterforge.gpu.dd_results).bytes == 512",
                "(models | clusterforge.gpu.checkpoint_estimate(40, 30))[0].checkpoint_bytes == 2800000000000"]},
             "vars": {"lines": "512 bytes copied, 0.5 s, 1.0 kB/s",
                      "models": [{"name": "gpt-175b", "parameters_billion": 175}]}},
        ],
    }]))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_CONFIG=str(tmp_path / "none.cfg"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_HOME=str(tmp_path / "home"), ANSIBLE_NOCOLOR="1")
    argv = [playbook_bin, "-i", "localhost,", "-c", "local", "-e", "ansible_python_interpreter=%s" % sys.executable,
            str(tmp_path / "play.yml")]
    proc = subprocess.run(argv, env=env,
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["ok"] is True and report["summary"]["fail"] == 0
    assert report == judge(measured)
    assert (tmp_path / "report.html").read_text() == FILTERS["validation_html"](report)


def test_ibdiagnet_that_could_not_run_is_a_failure(measured, tmp_path):
    node = fresh_node(tmp_path, "gpu01", tune=False)
    for hca in range(8):
        node.ok("ibstat", "--emu-port-down", "mlx5_%d" % hca)
    diag = node.ibdiagnet()
    assert diag["failed"] is True and not diag.get("stages")
    measured["ibdiagnet"] = diag
    report = judge(measured)
    assert_fails(report, [("ib.fabric", "fabric")])
    assert only(report, "ib.fabric", "fabric")["message"].startswith("fabric: ibdiagnet failed: ")


def registered_with_failed_when_false(result):
    """A module result as measure.yml registers it: its reads have ``failed_when: false`` (one tool's failure must
    not stop the other measurements), and Ansible then sets ``failed`` and ``failed_when_result`` to false on the
    result (TaskExecutor): only the message and the missing data tell that the module failed."""
    registered = dict(result)
    registered.update(failed=False, failed_when_result=False)
    return registered


def test_module_failures_registered_with_failed_when_false_are_failures_naming_why(measured, tmp_path):
    """The lab's hung nvidia-smi showed "0 of 8 GPUs visible": the judge read ``failed`` only, which the task's
    failed_when had set to false. Each measured module that failed is a failure with its message, as registered."""
    hung = "no answer in 120 s: /usr/bin/nvidia-smi -q -x"
    node = measured["nodes"]["gpu01"]
    node["nvidia_smi_info"] = registered_with_failed_when_false(
        {"changed": False, "msg": hung, "cmd": "/usr/bin/nvidia-smi -q -x", "rc": None, "stdout": "", "stderr": "",
         "timed_out": True, "time_limit_seconds": 120})
    node["dcgm_diag"] = registered_with_failed_when_false(
        {"changed": False, "msg": "dcgmi diag -r 1 timed out after 300 seconds", "result": None, "tests": [],
         "gpus": {}, "failed_tests": [], "metadata": {}, "output_format": None, "rc": None})
    node["ib_port_info"] = registered_with_failed_when_false(
        {"changed": False, "msg": "/sys/class/infiniband does not exist: no RDMA devices, or the ib_core/mlx5_ib "
                                  "modules are not loaded"})
    node["pcie_acs_info"] = registered_with_failed_when_false(
        {"changed": False, "msg": "no answer in 60 s: /usr/bin/lspci -D -vvv"})
    gpu02 = fresh_node(tmp_path, "gpu02", tune=False)
    for hca in range(8):
        gpu02.ok("ibstat", "--emu-port-down", "mlx5_%d" % hca)
    measured["ibdiagnet"] = registered_with_failed_when_false(gpu02.ibdiagnet())
    report = judge(measured)
    assert_fails(report, [("dcgm.diag", "gpu01"), ("gpu.count", "gpu01"), ("ib.fabric", "fabric"),
                          ("ib.port", "gpu01"), ("ib.port_count", "gpu01"), ("pcie.acs", "gpu01")])
    assert only(report, "gpu.count", "gpu01")["message"] == "gpu01: nvidia_smi_info failed: " + hung
    assert "timed out after 300 seconds" in only(report, "dcgm.diag", "gpu01")["message"]
    assert "no RDMA devices" in only(report, "ib.port", "gpu01")["message"]
    assert "no answer in 60 s" in only(report, "pcie.acs", "gpu01")["message"]
    assert only(report, "ib.fabric", "fabric")["message"].startswith("fabric: ibdiagnet failed: ")
    # A module that succeeded is judged as before, failed_when or not.
    measured["nodes"]["gpu02"]["nvidia_smi_info"] = registered_with_failed_when_false(
        measured["nodes"]["gpu02"]["nvidia_smi_info"])
    assert ("gpu.count", "gpu02") not in failed(judge(measured))


def test_a_node_in_scope_that_was_never_measured_fails_naming_it(measured):
    """A GPU node that failed before validation (site.yml's hung nvidia-smi) has no measurements: the lab's run said
    "Validation passed" without it. In scope (nodes_expected), it fails gpu.count, named; out of scope it is absent."""
    measured["nodes_expected"] = "gpu[01-03]"
    report = judge(measured)
    assert_fails(report, [("gpu.count", "gpu03")])
    assert only(report, "gpu.count", "gpu03")["message"] == (
        "gpu03: not measured: the node failed or was unreachable earlier in this run, so nothing of it was judged")
    measured["nodes_expected"] = ["gpu01", "gpu02"]
    assert judge(measured)["ok"] is True
    assert judge({"cluster": "none", "nodes_expected": ["gpu01"]})["failures"] == [
        "gpu01: not measured: the node failed or was unreachable earlier in this run, so nothing of it was judged"]


def test_smoke_nodes_as_slurm_hostlists_and_registered_dd_task(measured):
    measured["slurm_smoke"].update(nodes_expected="gpu[01-03]", nodes_ran="gpu[01-02],gpu07")
    measured["nodes"]["gpu01"]["storage"]["write"] = {"changed": True, "rc": 0, "stderr": DD_SLOW, "stdout": ""}
    report = judge(measured)
    assert_fails(report, [("slurm.smoke", "slurm job 12"), ("storage.write", "gpu01:/lustre/validate")])
    assert only(report, "slurm.smoke", "slurm job 12")["message"] == (
        "slurm job 12: did not run on gpu03; ran on unexpected node(s) gpu07")
    measured_write = only(report, "storage.write", "gpu01:/lustre/validate")["measured"]
    assert measured_write == pytest.approx(1073741824 / 2.50127 / 1e9)


@pytest.mark.parametrize("lock", [{"min": 1500, "max": 1980}, {"min": "1500", "max": "1980"}])
def test_clocks_locked_to_a_range_pass_anywhere_in_it_and_fail_outside(measured, tmp_path, lock):
    """gpu_tuning_locked_gpu_clocks is {min, max} (digits from -e too): the judge takes the range the module recorded."""
    node = fresh_node(tmp_path, "gpu02", tune=False)
    node.tune(locked_gpu_clocks={"min": 1500, "max": 1980})  # the emulator runs the SM clock at the lock's minimum
    measured["nodes"]["gpu02"]["nvidia_smi_info"] = node.nvidia_smi_info()
    measured["nodes"]["gpu02"]["expected"]["gpu_settings"] = {"locked_gpu_clocks": lock}
    report = judge(measured)
    gpu0 = [c for c in checks(report, "gpu.clocks") if c["subject"].startswith("gpu02 GPU0 ")][0]
    assert gpu0["status"] == "pass" and gpu0["measured"] == 1500 and gpu0["expected"] == [1500, 1980], gpu0
    assert gpu0["message"].endswith("locked at 1500-1980 MHz")
    node.ok("nvidia-smi", "-lgc", "1005,1005")  # changed behind gpu_tuning's back: the record no longer holds
    measured["nodes"]["gpu02"]["nvidia_smi_info"] = node.nvidia_smi_info()
    report = judge(measured)
    gpu0 = [c for c in checks(report, "gpu.clocks") if c["subject"].startswith("gpu02 GPU0 ")][0]
    assert gpu0["status"] == "fail" and "expected locked at 1500-1980 MHz" in gpu0["message"], gpu0


def test_a_malformed_clock_expectation_is_an_error_not_a_guess(measured):
    measured["nodes"]["gpu02"]["expected"]["gpu_settings"] = {"locked_gpu_clocks": ["t"]}
    with pytest.raises(AnsibleFilterError, match=r"gpu02 expected.gpu_settings: gpu_tuning_locked_gpu_clocks: must be "
                                                 r"a dict \{min: MHz, max: MHz\}"):
        judge(measured)
