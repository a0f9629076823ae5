# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

import os

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils.perf import parse_nccl_tests, parse_perftest

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "perf")

ROW_KEYS = {"size_bytes", "count", "type", "redop", "root", "time_oop_us", "algbw_oop", "busbw_oop", "wrong_oop",
            "time_ip_us", "algbw_ip", "busbw_ip", "wrong_ip", "error_oop", "error_ip"}


def read(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


# ------------------------------------------------------------------------------------------------- nccl-tests

def test_nccl_no_check_with_info_lines():
    result = parse_nccl_tests(read("all_reduce_perf-8x-h100-nocheck-nccl-info.txt"))
    rows = result["rows"]
    assert len(rows) == 6
    assert set(rows[0]) == ROW_KEYS
    assert [r["size_bytes"] for r in rows] == [8, 16, 65536, 1048576, 16777216, 134217728]
    last = rows[-1]
    assert last == {"size_bytes": 134217728, "count": 33554432, "type": "float", "redop": "sum", "root": -1,
                    "time_oop_us": 636.5, "algbw_oop": 210.87, "busbw_oop": 369.02, "wrong_oop": None,
                    "time_ip_us": 634.2, "algbw_ip": 211.63, "busbw_ip": 370.35, "wrong_ip": None,
                    "error_oop": None, "error_ip": None}
    assert result["avg_busbw_gbps"] == pytest.approx(112.097)
    assert result["max_busbw_gbps"] == pytest.approx(370.35)
    assert result["out_of_bounds"] == 0
    assert result["passed"] is True
    header = result["header"]
    assert (header["nThread"], header["nGpus"], header["minBytes"], header["maxBytes"]) == (1, 8, 8, 134217728)
    assert (header["warmup_iters"], header["iters"], header["agg_iters"], header["validation"]) == (5, 20, 1, 0)
    assert header["step"] == 2 and header["step_kind"] == "factor"
    assert "unalign" not in header
    assert header["nccl_version"] == "2.18.5+cuda12.2"
    assert header["ranks"] == 8 and header["hosts"] == ["node17"]
    assert header["devices"][3] == {"rank": 3, "group": 0, "pid": 41022, "host": "node17", "device": 3,
                                    "busid": "0x5d", "name": "NVIDIA H100 80GB HBM3"}
    assert header["concluded"] is False


def test_nccl_wrong_values_fail():
    result = parse_nccl_tests(read("all_reduce_perf-wrong-failed.txt"))
    assert [(r["wrong_oop"], r["wrong_ip"]) for r in result["rows"]] == [(0, 0), (4, 2), (6, 0)]
    assert result["out_of_bounds"] == 12
    assert result["out_of_bounds_status"] == "FAILED"
    assert result["wrong_total"] == 12
    assert result["passed"] is False
    assert result["header"]["hosts"] == ["gpu01", "gpu02"]
    # busbw == algbw with 1 GPU per process and 2 ranks: factor 2*(n-1)/n = 1
    assert all(r["busbw_oop"] == r["algbw_oop"] for r in result["rows"])


def test_nccl_old_layout_error_column_no_root():
    text = ("#                                                     out-of-place                       in-place\n"
            "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
            "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
            "     1048576        262144   float     sum    135.3    7.75   15.02  7e-07    132.7    7.90   15.31  7e-07\n"
            "  4294967296    1073741824   float     sum    43557   98.61  191.05  1e-06    43440   98.87  191.56  1e-06\n"
            "# Out of bounds values : 0 OK\n"
            "# Avg bus bandwidth    : 113.289\n")
    result = parse_nccl_tests(text)
    assert len(result["rows"]) == 2
    row = result["rows"][1]
    assert row["root"] is None
    assert row["wrong_oop"] is None and row["error_oop"] == pytest.approx(1e-06)
    assert row["time_oop_us"] == 43557.0 and row["busbw_ip"] == 191.56
    assert result["avg_busbw_gbps"] == pytest.approx(113.289)


def test_nccl_truncated_without_header_or_summary():
    text = read("all_reduce_perf-8x-h100-nocheck-nccl-info.txt")
    table = [line for line in text.splitlines() if line.startswith("   ") and "float" in line]
    cut = "\n".join(table[:4]) + "\n   134217728      33554432     float     sum      -1    636.5  21"
    result = parse_nccl_tests(cut)
    assert len(result["rows"]) == 4            # the cut row is dropped, not half-parsed
    assert result["rows"][0]["root"] == -1     # 13 columns: root column inferred
    assert result["avg_busbw_gbps"] is None
    assert result["out_of_bounds"] is None
    assert result["passed"] is None


def test_nccl_crlf_and_tabs():
    text = read("all_reduce_perf-wrong-failed.txt").replace("\n", "\r\n").replace("     float", "\tfloat")
    result = parse_nccl_tests(text)
    assert len(result["rows"]) == 3
    assert result["out_of_bounds"] == 12


def test_nccl_empty_and_garbage():
    assert parse_nccl_tests("")["rows"] == []
    result = parse_nccl_tests("mpirun: command not found\nsome text 1 2 3\n")
    assert result["rows"] == [] and result["max_busbw_gbps"] is None


def test_nccl_other_collective_root_column():
    text = ("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong \n"
            "     1048576        262144     float    none       0    20.51   51.13   44.74       0    19.90   52.70   46.11       0\n")
    row = parse_nccl_tests(text)["rows"][0]
    assert row["redop"] == "none" and row["root"] == 0 and row["busbw_ip"] == 46.11


# ---------------------------------------------------------------------------------------------------- perftest

def test_perftest_ib_all_sizes_mbsec_with_tabs():
    result = parse_perftest(read("ib_write_bw-ndr-ib-all-sizes-mbsec-tabs.txt"))
    assert result["test"] == "RDMA_Write BW Test"
    assert result["bw_unit"] == "MB/sec"
    assert [r["bytes"] for r in result["rows"]] == [2, 4, 1024, 65536, 8388608]
    last = result["rows"][-1]
    expected = (5000, 46123.90, 46121.07, 0.005765)
    assert (last["iterations"], last["bw_peak"], last["bw_avg"], last["msg_rate_mpps"]) == expected
    # perftest MB/sec is MiB/s: 46121.07 * 1048576 * 8 / 1e9 = 386.89 Gb/s
    assert last["bw_avg_gbps"] == pytest.approx(386.89, abs=0.01)
    assert result["bw_avg_largest"] == 46121.07
    assert result["link"] == {"device": "mlx5_0", "link_type": "IB", "transport": "IB", "connection_type": "RC",
                              "mtu": 4096, "gid_index": None, "qps": 1}
    assert result["info"]["rdma_cm QPs"] == "OFF"
    assert result["info"]["CQ Moderation"] == "100"
    assert result["local"]["LID"] == "0x2c" and result["remote"]["RKey"] == "0x1fff00"


def test_perftest_read_bw_gbits_banner_ignored():
    result = parse_perftest(read("ib_read_bw-hdr-gbits.txt"))
    assert result["test"] == "RDMA_Read BW Test"
    assert result["bw_unit"] == "Gb/sec"
    assert result["rows"] == [{"bytes": 65536, "iterations": 1000, "bw_peak": 193.11, "bw_avg": 192.87,
                               "msg_rate_mpps": 0.367872, "bw_peak_gbps": 193.11, "bw_avg_gbps": 192.87}]
    assert result["info"]["Outstand reads"] == "16"
    assert result["link"]["qps"] == 2 and result["link"]["device"] == "mlx5_2"


def test_perftest_server_side_has_no_rows():
    text = read("ib_write_bw-ndr-ib-all-sizes-mbsec-tabs.txt")
    server = text[:text.index(" #bytes")]
    result = parse_perftest(server)
    assert result["rows"] == [] and result["bw_unit"] is None and result["bw_avg_largest"] is None
    assert result["link"]["link_type"] == "IB"


def test_perftest_truncated_row_and_warning_lines():
    text = read("ib_read_bw-hdr-gbits.txt").replace(
        " 65536      1000             193.11             192.87             0.367872\n",
        " Conflicting CPU frequency values detected: 1200.535000 != 1251.336000. CPU Frequency is not max.\n"
        " 65536      1000             193.11             192.87             0.367872\n 131072     1000   19")
    result = parse_perftest(text)
    assert [r["bytes"] for r in result["rows"]] == [65536]


def test_perftest_empty():
    result = parse_perftest("")
    assert result["rows"] == [] and result["link"]["mtu"] is None and result["test"] is None
