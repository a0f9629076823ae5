# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm, nccl-tests and perftest parsers over the real outputs in $CLUSTERFORGE_SAMPLES (default ../shared/fixtures).

Every file in slurm/, nccl-tests/ and perftest/ is a test case. The expected values below were read off each sample
by hand (see fixtures/PROVENANCE.md); a new sample without expectations must still parse to something non-empty.
"""

import os

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import compress, expand
from ansible_collections.clusterforge.gpu.plugins.module_utils.perf import parse_nccl_tests, parse_perftest
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import (
    gres_count, parse_gres, parse_scontrol_nodes, parse_sinfo, state_flags,
)
from ansible_collections.clusterforge.gpu.tests.formats.slurm import parse_slurmd_gres

try:
    from conftest import SAMPLES
except ImportError:  # conftest is registered as tests.conftest; fall back to the same default
    SAMPLES = os.environ.get("CLUSTERFORGE_SAMPLES", os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
        "shared", "fixtures"))

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.skipif(not os.path.isdir(SAMPLES), reason="no samples directory at %s" % SAMPLES),
]


def files(sub):
    path = os.path.join(SAMPLES, sub)
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def read(sub, name):
    with open(os.path.join(SAMPLES, sub, name)) as f:
        return f.read()


# ---------------------------------------------------------------------------------------------------- slurm/

def _scontrol_a40(text):
    nodes = parse_scontrol_nodes(text)
    assert [n["NodeName"] for n in nodes] == ["esc8000a-1"]
    node = nodes[0]
    assert len(node) == 37
    assert node["Gres"] == "gpu:a40:1(S:0,2,4,6,8,10)"
    assert parse_gres(node["Gres"]) == [{"name": "gpu", "type": "a40", "count": 1, "sockets": "0,2,4,6,8,10",
                                         "index": None}]
    assert node["State"] == "IDLE+DYNAMIC_NORM"
    info = state_flags(node["State"])
    assert info["base"] == "IDLE" and info["flags"] == ["DYNAMIC_NORM"] and not info["drain"]
    assert node["OS"] == "Linux 5.15.0-142-generic #152-Ubuntu SMP Mon May 19 10:54:31 UTC 2025"
    assert node["CoresPerSocket"] == "1" and node["CPUSpecList"] == "11" and node["Partitions"] == "tn"
    assert node["Version"] == "25.05.2" and node["AllocTRES"] == ""
    assert node["CfgTRES"] == "cpu=11,mem=240G,billing=11,gres/gpu=1"
    assert node["Comment"] == '{"namespace":"slurm","podName":"slurm-compute-esc8000a-1"}'
    assert "Reason" not in node


def _scontrol_grep_gres_mig(text):
    nodes = parse_scontrol_nodes(text)
    assert nodes == [{"Gres": "gpu:3g.40gb:8(S:0-1),gpu:2g.20gb:8(S:0-1),gpu:1g.10gb:16(S:0-1)"}]
    gres = parse_gres(nodes[0]["Gres"])
    assert [(g["type"], g["count"], g["sockets"]) for g in gres] == [("3g.40gb", 8, "0-1"), ("2g.20gb", 8, "0-1"),
                                                                     ("1g.10gb", 16, "0-1")]
    assert gres_count(nodes[0]["Gres"]) == 32


def _sinfo_gres_idle(text):
    rows = parse_sinfo(text, ["nodes", "gres", "gresused"])
    assert rows == [{"nodes": "2", "gres": "gpu:8", "gresused": "gpu:(null):0(IDX:N/A)"}]
    assert gres_count(rows[0]["gres"]) == 8
    assert parse_gres(rows[0]["gresused"]) == [{"name": "gpu", "type": None, "count": 0, "sockets": None,
                                                "index": None}]


def _sinfo_gresused_allocated(text):
    rows = parse_sinfo(text, "Nodes GresUsed")
    assert [(r["Nodes"], r["GresUsed"]) for r in rows] == [("98", "gpu:0"), ("3", "gpu:2"), ("1", "gpu:1")]
    assert sum(int(r["Nodes"]) * gres_count(r["GresUsed"]) for r in rows) == 7


def _sinfo_default_dgx(text):
    rows = parse_sinfo(text)
    assert [(r["partition"], r["state"], r["nodes"], r["nodelist"]) for r in rows] == [
        ("batch*", "alloc", "1", "dgx1"), ("batch*", "idle", "8", "dgx[2-9]")]
    for row in rows:
        assert len(expand(row["nodelist"])) == int(row["nodes"])
        assert not state_flags(row["state"])["drain"]
    assert compress([h for r in rows for h in expand(r["nodelist"])]) == "dgx[1-9]"


def _sinfo_default_slinky(text):
    rows = parse_sinfo(text)
    assert len(rows) == 1
    row = rows[0]
    assert (row["partition"], row["avail"], row["timelimit"], row["state"]) == ("tn*", "up", "infinite", "idle")
    assert expand(row["nodelist"]) == ["esc8000a-0", "esc8000a-1", "esc8000b-0"]
    assert int(row["nodes"]) == 3
    assert compress(expand(row["nodelist"])) == row["nodelist"]


def _slurmd_g_stackhpc(text):
    records = parse_slurmd_gres(text)
    assert len(records) == 10
    assert {r["node"] for r in records} == {"io-io-gpu-02"}
    types = [r["Type"] for r in records]
    assert types.count("nvidia_h100_80gb_hbm3") == 2
    assert types.count("nvidia_h100_80gb_hbm3_4g.40gb") == 2
    assert types.count("nvidia_h100_80gb_hbm3_1g.10gb") == 6
    assert records[0]["File"] == "/dev/nvidia0" and records[0]["Index"] == "0"
    assert records[2]["File"] == "/dev/nvidia-caps/nvidia-cap291"
    # The hard-wrapped lines are joined back into one Flags value.
    assert all(r["Flags"] == "HAS_FILE,HAS_TYPE,ENV_NVML,ENV_RSMI,ENV_ONEAPI,ENV_OPENCL,ENV_DEFAULT" for r in records)
    assert sum(int(r["Count"]) for r in records) == 10


SLURM = {
    "scontrol-show-node-a40-gres-slurm25.05-slinky.txt": _scontrol_a40,
    "scontrol-show-node-grep-gres-dgx-a100-mig-deepops.txt": _scontrol_grep_gres_mig,
    "sinfo-Format-nodes-gres-gresused-idle-slurm21.08.5-vpenso.txt": _sinfo_gres_idle,
    "sinfo-Format-nodes-gresused-allocated-slurm20.11.8-vpenso.txt": _sinfo_gresused_allocated,
    "sinfo-default-9x-dgx-alloc-idle-deepops.txt": _sinfo_default_dgx,
    "sinfo-default-slinky-a40.txt": _sinfo_default_slinky,
    "slurmd-G-gres-autodetect-nvml-2x-h100-plus-mig-stackhpc.txt": _slurmd_g_stackhpc,
}


@pytest.mark.parametrize("name", files("slurm"))
def test_slurm_sample(name):
    text = read("slurm", name)
    check = SLURM.get(name)
    if check is not None:
        check(text)
    elif name.startswith("scontrol"):
        assert parse_scontrol_nodes(text)
    elif name.startswith("slurmd"):
        assert parse_slurmd_gres(text)
    else:
        assert parse_sinfo(text, ["c%d" % i for i in range(8)])


# ----------------------------------------------------------------------------------------------- nccl-tests/

# name -> (rows, avg busbw, max busbw, largest size, busbw_oop at largest size, layout extras)
NCCL = {
    "all_reduce_perf-2node-16gpu-nccltests2.18.3-new-header-spcx.txt":
        (24, 17.8413, 39.85, 8589934592, 35.08,
         {"root": -1, "wrong": 0, "ranks": 16, "hosts": ["R6KD-CX8aaS-GPU-14", "R6KD-CX8aaS-GPU-15"],
          "nccl_version": "2.30.3+cuda13.0", "nccl_tests_version": "2.18.3", "concluded": True, "first_size": 1024}),
    "all_reduce_perf-2x-dgx-a100-8x-cx6-hdr-k8s-deepops.txt":
        (30, 53.7098, 188.70, 4294967296, 188.53,
         {"root": None, "error": 5e-07, "ranks": 0, "concluded": False, "first_size": 8}),
    "all_reduce_perf-4x-dgx-a100-ib-deepops.txt":
        (13, 113.289, 191.56, 4294967296, 191.05,
         {"root": None, "error": 1e-06, "ranks": 0, "concluded": False, "first_size": 1048576}),
    "all_reduce_perf-dgx-roce-k8s-deepops.txt":
        (29, 7.76739, 22.92, 2147483648, 22.92,
         {"root": None, "error": 5e-07, "ranks": 0, "concluded": False, "first_size": 8}),
}


@pytest.mark.parametrize("name", files("nccl-tests"))
def test_nccl_tests_sample(name):
    result = parse_nccl_tests(read("nccl-tests", name))
    rows = result["rows"]
    assert rows, "no rows parsed"
    # Always true of nccl-tests output: sizes grow, count * wordsize == size for float, busbw >= algbw,
    # and the printed average is the mean of every out-of-place and in-place busbw.
    sizes = [r["size_bytes"] for r in rows]
    assert sizes == sorted(sizes)
    assert all(r["count"] * 4 == r["size_bytes"] for r in rows if r["type"] == "float")
    assert all(r["busbw_oop"] >= r["algbw_oop"] for r in rows)
    assert result["avg_busbw_gbps"] is not None
    mean = sum(r[k] for r in rows for k in ("busbw_oop", "busbw_ip")) / (2.0 * len(rows))
    assert result["avg_busbw_gbps"] == pytest.approx(mean, abs=0.01)
    assert result["out_of_bounds"] == 0 and result["passed"] is True
    if name not in NCCL:
        return
    count, avg, peak, largest, busbw_largest, extra = NCCL[name]
    assert len(rows) == count
    assert result["avg_busbw_gbps"] == pytest.approx(avg)
    assert result["max_busbw_gbps"] == pytest.approx(peak)
    assert rows[-1]["size_bytes"] == largest and rows[-1]["busbw_oop"] == pytest.approx(busbw_largest)
    assert rows[0]["size_bytes"] == extra["first_size"]
    assert all(r["root"] == extra["root"] for r in rows)
    if "wrong" in extra:
        assert all(r["wrong_oop"] == extra["wrong"] and r["wrong_ip"] == extra["wrong"] for r in rows)
    if "error" in extra:
        assert all(r["wrong_oop"] is None for r in rows)
        assert rows[-1]["error_oop"] == pytest.approx(extra["error"])
    header = result["header"]
    assert header["ranks"] == extra["ranks"]
    assert header["concluded"] is extra["concluded"]
    for key in ("hosts", "nccl_version", "nccl_tests_version"):
        if key in extra:
            assert header[key] == extra[key]
    if extra["ranks"]:
        assert (header["nThread"], header["nGpus"], header["minBytes"], header["maxBytes"]) == (1, 1, 1024, 8589934592)
        assert header["iters"] == 20 and header["warmup_iters"] == 1 and header["unalign"] == 0
        assert header["devices"][15]["busid"] == "0000:f9:00" and header["devices"][15]["name"] == "NVIDIA Graphics Device"


# ------------------------------------------------------------------------------------------------- perftest/

# name -> (rows, unit, bw_avg at the largest size, bw_peak there, link)
PERFTEST = {
    "ib_write_bw-roce-cx5-client-deepops.txt":
        (1, "Gb/sec", 92.40, 92.42, {"device": "mlx5_0", "link_type": "Ethernet", "transport": "IB",
                                     "connection_type": "RC", "mtu": 4096, "gid_index": 3, "qps": 1}),
}


@pytest.mark.parametrize("name", files("perftest"))
def test_perftest_sample(name):
    result = parse_perftest(read("perftest", name))
    assert result["rows"], "no rows parsed"
    assert result["bw_unit"] in ("Gb/sec", "MB/sec")
    assert all(r["bw_peak"] >= r["bw_avg"] > 0 for r in result["rows"])
    if name not in PERFTEST:
        return
    count, unit, avg, peak, link = PERFTEST[name]
    assert len(result["rows"]) == count
    assert result["bw_unit"] == unit
    largest = max(result["rows"], key=lambda r: r["bytes"])
    assert (largest["bytes"], largest["iterations"]) == (65536, 5000)
    assert largest["bw_avg"] == pytest.approx(avg) and largest["bw_peak"] == pytest.approx(peak)
    assert largest["msg_rate_mpps"] == pytest.approx(0.176230)
    assert result["bw_avg_largest_gbps"] == pytest.approx(avg)
    assert result["link"] == link
    assert result["test"] == "RDMA_Write BW Test"
    assert result["info"]["rdma_cm QPs"] == "ON" and result["info"]["Data ex. method"] == "rdma_cm"
    assert result["local"]["GID"] == "00:00:00:00:00:00:00:00:00:00:255:255:10:10:11:12"
    assert result["remote"]["QPN"] == "0x025d"
