# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A synthetic cluster for the validation report at scale: the *measured* input of validation_judge for N GPU nodes
(module results in the shapes nvidia_smi_info, dcgm_diag, pcie_acs_info and ib_port_info return; nccl-tests,
perftest and dd results as their parsers return them), with faults injected on chosen nodes, run through the real
judge. Deterministic for a given seed.

``synth_report()`` -> (report, truth): truth names the nodes that must show as failing, the check ids failing on
each (a slow ib_write_bw pair fails on its client and its server), the cluster-wide check ids that fail, and the
nodes marked busy (their stress tests skipped).

Used by tests/unit/plugins/module_utils/test_validation_report_scale.py and tests/report/test_report_render.py.
"""

import random

from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import compress
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.validation_judge import validation_judge

BUSES = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
EXPECTED = {"gpu_count": 8, "acs_must_be_disabled": True, "ib_rate_gbps": 400, "ib_port_count": 8,
            "gpu_settings": {"gpus": None, "persistence_mode": True, "power_limit_watts": 700,
                             "locked_gpu_clocks": {"min": 1980, "max": 1980}}}
# What gpu_tuning's nvidia_smi task records on every GPU for those settings (nvidia_smi_info's gpus[].applied).
APPLIED = {"persistence_mode": True, "power_limit_watts": 700,
           "locked_gpu_clocks": {"min": 1980, "max": 1980, "requested_min": 1980, "requested_max": 1980}}
STORAGE_PATH = "/lustre/validate"

# Fault -> the check id it fails.
FAULTS = {
    "ecc": "gpu.health",
    "gpu_missing": "gpu.count",
    "clocks": "gpu.clocks",
    "power": "gpu.power_limit",
    "persistence": "gpu.persistence",
    "dcgm": "dcgm.diag",
    "acs": "pcie.acs",
    "ib_port_down": "ib.port",
    "nccl_slow": "nccl.single_node",
    "storage_slow": "storage.write",
    "pair_slow": "ib.write_bw",
}
CLUSTER_FAULTS = {"fabric": "ib.fabric", "nccl_multi": "nccl.multi_node", "slurm": "slurm.smoke"}

# About 3% of 512 nodes: 14 faulty nodes (one of them the client of a slow ib_write_bw pair, which fails its
# server too: 15 failing nodes), two faults on one node, and four busy nodes whose stress tests are skipped.
DEFAULT_FAULTS = {
    5: ["ecc"], 41: ["gpu_missing"], 77: ["clocks"], 113: ["power"], 149: ["persistence"], 185: ["dcgm"],
    221: ["acs"], 257: ["ib_port_down"], 293: ["nccl_slow"], 329: ["storage_slow"], 365: ["pair_slow"],
    401: ["ecc", "nccl_slow"], 437: ["clocks"], 473: ["dcgm"],
}
DEFAULT_BUSY = (20, 220, 300, 500)


def node_name(index, width=3):
    return "gpu%0*d" % (width, index + 1)


def _uuid(rng):
    parts = (rng.getrandbits(32), rng.getrandbits(16), rng.getrandbits(16), rng.getrandbits(16), rng.getrandbits(48))
    return "GPU-%08x-%04x-%04x-%04x-%012x" % parts


def _gpus(rng, faults):
    gpus = []
    for index, bus in enumerate(BUSES):
        gpus.append({
            "index": index, "pci_bus_id": "00000000:%s:00.0" % bus, "uuid": _uuid(rng), "name": "NVIDIA H100 80GB HBM3",
            "ecc": {"mode": "Enabled", "volatile_uncorrectable": 0, "aggregate_uncorrectable": 0},
            "retired_pages_pending": False, "remapped_rows_pending": False, "remapped_rows_failure": False,
            "clock_event_reasons": {"gpu_idle": True, "hw_slowdown": False, "hw_thermal_slowdown": False,
                                    "sw_thermal_slowdown": False, "hw_power_brake_slowdown": False},
            "temperature_c": rng.randint(31, 44), "persistence_mode": True, "power_limit_w": 700.0,
            "enforced_power_limit_w": 700.0, "sm_clock_mhz": 1980, "applied": dict(APPLIED),
        })
    if "ecc" in faults:
        gpus[3]["ecc"]["volatile_uncorrectable"] = 2
    if "clocks" in faults:
        gpus[5]["sm_clock_mhz"] = 1410
        gpus[5]["clock_event_reasons"]["sw_power_cap"] = True
    if "power" in faults:
        gpus[2]["power_limit_w"] = 500.0
        gpus[2]["enforced_power_limit_w"] = 500.0
    if "persistence" in faults:
        gpus[0]["persistence_mode"] = False
    if "gpu_missing" in faults:
        del gpus[6]
    return {"changed": False, "gpu_count": len(gpus), "gpus": gpus, "driver_version": "570.133.20"}


def _dcgm(faults):
    tests = [{"name": name, "status": "pass", "details": []} for name in
             ("Deployment", "Memory", "Diagnostic", "PCIe", "Targeted Stress", "Targeted Power")]
    diag = {"changed": False, "cmd": "dcgmi diag -r 2 -j", "result": "pass", "tests": tests, "failed_tests": [],
            "diag_warnings": []}
    if "dcgm" in faults:
        tests[1]["status"] = "fail"
        tests[1]["details"] = [{"gpu": 4, "message": "Memory test found 3 miscompares on GPU 4"}]
        diag.update(result="fail", failed_tests=[{"name": "Memory", "gpus": ["4"]}])
    return diag


def _acs(faults):
    bridges = []
    for index, bus in enumerate(BUSES):
        bridges.append({"bdf": "0000:%02x:01.0" % (int(bus, 16) - 2), "acs_enabled": False, "on_gpu_nic_path": True,
                        "acs_ctl_value": "0000", "upstream_of": ["0000:%s:00.0" % bus.lower()]})
        if "acs" in faults and index == 1:
            bridges[-1].update(acs_enabled=True, acs_ctl_value="001d")
    enabled = [b["bdf"] for b in bridges if b["acs_enabled"]]
    return {"changed": False, "bridges": bridges, "gpu_nic_acs_enabled_bridges": enabled,
            "gpus": [{"bdf": "0000:%s:00.0" % bus.lower()} for bus in BUSES]}


def _ib_ports(faults):
    ports = []
    for hca in range(8):
        ports.append({"ca": "mlx5_%d" % hca, "port": 1, "state": "Active", "physical_state": "LinkUp",
                      "rate_gbps": 400, "link_layer": "InfiniBand"})
    if "ib_port_down" in faults:
        ports[4].update(state="Down", physical_state="Polling", rate_gbps=None)
    return {"changed": False, "ports": ports}


def _nccl(busbw):
    return {"ok": True, "busbw_peak_gbps": busbw, "problems": [],
            "header": {"test": "all_reduce_perf", "validation": 1}}


def synth_measured(count=512, faults=None, busy=None, cluster_faults=(), seed=19, width=3):
    """The measured input of validation_judge for ``count`` nodes; ``faults`` maps a node index to fault names
    (FAULTS), ``busy`` lists node indexes marked busy, ``cluster_faults`` names CLUSTER_FAULTS."""
    faults = DEFAULT_FAULTS if faults is None else faults
    busy = DEFAULT_BUSY if busy is None else busy
    rng = random.Random(seed)
    names = [node_name(i, width) for i in range(count)]
    nodes = {}
    for index, name in enumerate(names):
        mine = faults.get(index, [])
        node = {
            "expected": dict(EXPECTED),
            "nvidia_smi_info": _gpus(rng, mine),
            "pcie_acs_info": _acs(mine),
            "ib_port_info": _ib_ports(mine),
        }
        if index in busy:
            node.update(idle=False, dcgm_diag=None, nccl_local=None, storage={"path": STORAGE_PATH})
        else:
            write = 0.42 if "storage_slow" in mine else round(rng.gauss(2.2, 0.15), 3)
            busbw = round(rng.uniform(240, 290), 1) if "nccl_slow" in mine else round(rng.gauss(362, 3.5), 1)
            node.update(idle=True, dcgm_diag=_dcgm(mine), nccl_local=_nccl(busbw),
                        storage={"path": STORAGE_PATH, "write": {"gbytes_per_s": write},
                                 "read": {"gbytes_per_s": round(rng.gauss(3.0, 0.2), 3)}})
        nodes[name] = node
    pairs = []
    for index, name in enumerate(names):
        if count < 2:
            break
        slow = "pair_slow" in faults.get(index, [])
        bw = round(rng.uniform(180, 220), 2) if slow else round(rng.gauss(391, 2.5), 2)
        pairs.append({"client": name, "server": names[(index + 1) % count], "hca": "mlx5_%d" % (index % 8),
                      "line_rate_gbits": 400, "result": {"bw_peak_gbits": bw, "bw_average_gbits": bw - 1}})
    ibdiagnet = {"changed": False, "stages": [{"name": "Discovery", "errors": 0, "warnings": 0},
                                              {"name": "Links Check", "errors": 0, "warnings": 2}],
                 "total_errors": 0, "total_warnings": 2, "messages": []}
    if "fabric" in cluster_faults:
        ibdiagnet["stages"][1]["errors"] = 3
        ibdiagnet["total_errors"] = 3
        ibdiagnet["messages"] = [{"level": "error", "text": "Link at %s mlx5_0 port 1 is at 200 Gb/s" % names[0]}]
    multi = round(rng.uniform(300, 320), 1) if "nccl_multi" in cluster_faults else 371.5
    ran = names[:-2] if "slurm" in cluster_faults else list(reversed(names))
    return {
        "cluster": "synth%d" % count,
        "generated_at": "2026-11-25T10:00:00Z",
        "nodes": nodes,
        "ibdiagnet": ibdiagnet,
        "ib_write_bw": pairs,
        "nccl_multi": {"nodes": compress(names), "result": _nccl(multi)},
        "storage_aggregate": {"path": STORAGE_PATH, "nodes": count, "write_gbytes_per_s": 180.0,
                              "read_gbytes_per_s": 240.0},
        "slurm_smoke": {"nodes_expected": compress(names), "nodes_ran": ran, "rc": 0, "job_id": "4711"},
        "models": [{"name": "gpt-175b", "parameters_billion": 175}, {"name": "llama-405b", "parameters_billion": 405}],
        "checkpoint_interval_minutes": 30,
    }


def synth_report(count=512, faults=None, busy=None, cluster_faults=(), seed=19, width=3):
    """(report, truth) for ``count`` nodes: the report of the real validation_judge and what it must show."""
    faults = DEFAULT_FAULTS if faults is None else faults
    busy = DEFAULT_BUSY if busy is None else busy
    measured = synth_measured(count, faults, busy, cluster_faults, seed, width)
    report = validation_judge(measured)
    names = [node_name(i, width) for i in range(count)]
    failing = {}
    for index, kinds in faults.items():
        for kind in kinds:
            failing.setdefault(names[index], set()).add(FAULTS[kind])
            if kind == "pair_slow":
                failing.setdefault(names[(index + 1) % count], set()).add(FAULTS[kind])
    truth = {
        "nodes": names,
        "failing": failing,
        "cluster_failing": set(CLUSTER_FAULTS[k] for k in cluster_faults),
        "busy": [names[i] for i in busy],
    }
    return report, truth
