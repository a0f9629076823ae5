# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the nccl-tests and perftest emulators and read their output with the collection's parsers, so that the
emulators cannot drift from the formats the parsers (and the roles) expect."""

import os
import subprocess
import sys

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils.perf import parse_nccl_tests, parse_perftest

# tests/conftest.py defines EMULATORS too, but pytest registers it as "tests.conftest", not importable as "conftest".
EMULATORS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "emulators")
ENV_KEYS = ("CLUSTERFORGE_EMU_NCCL_BUSBW_GBPS", "CLUSTERFORGE_EMU_NCCL_WRONG", "CLUSTERFORGE_EMU_NCCL_LATENCY_US",
            "CLUSTERFORGE_EMU_IB_GBPS", "CLUSTERFORGE_EMU_IB_DEGRADE", "CLUSTERFORGE_EMU_IB_LINK", "CLUSTERFORGE_EMU_SEED")


def emulate(tool, *args, **env):
    path = os.path.join(EMULATORS, tool)
    clean = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
    clean.update(env)
    proc = subprocess.run([path] + list(args), env=clean, capture_output=True, text=True, timeout=60, check=False)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.mark.parametrize("tool", ["all_reduce_perf", "ib_write_bw"])
def test_emulator_files_are_marked_and_executable(tool):
    path = os.path.join(EMULATORS, tool)
    assert os.access(path, os.X_OK)
    with open(path) as f:
        first, second = f.readline(), f.readline()
    assert first == "#!/usr/bin/env python3\n"
    assert second.startswith("# ClusterForge TEST EMULATOR of %s" % tool)
    assert "not the real tool" in second


# ------------------------------------------------------------------------------------------------ all_reduce_perf

def test_all_reduce_default_profile_8x_h100():
    rc, out, err = emulate("all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8")
    assert rc == 0, err
    result = parse_nccl_tests(out)
    rows = result["rows"]
    assert len(rows) == 31                                    # 8 B .. 8 GiB, factor 2
    assert rows[0]["size_bytes"] == 8 and rows[-1]["size_bytes"] == 8 * 1024 ** 3
    assert all(r["type"] == "float" and r["redop"] == "sum" and r["root"] == -1 for r in rows)
    assert all(r["count"] * 4 == r["size_bytes"] for r in rows)
    assert all(r["wrong_oop"] == 0 and r["wrong_ip"] == 0 for r in rows)
    big = rows[-1]
    assert 355 <= big["busbw_oop"] <= 375                     # PRACTICE.md 5: 8x H100 Ring ~370 GB/s
    assert big["busbw_oop"] == pytest.approx(big["algbw_oop"] * 2 * 7 / 8, abs=0.02)
    assert rows[0]["busbw_oop"] < 1                           # latency-bound small messages
    busbw = [r["busbw_oop"] for r in rows]
    assert busbw[:-6] == sorted(busbw[:-6])                   # grows with size until it plateaus
    assert result["passed"] is True and result["out_of_bounds"] == 0
    header = result["header"]
    assert header["nGpus"] == 8 and header["ranks"] == 8 and header["concluded"] is True
    assert header["minBytes"] == 8 and header["maxBytes"] == 8 * 1024 ** 3
    mean = sum(r[k] for r in rows for k in ("busbw_oop", "busbw_ip")) / (2 * len(rows))
    assert result["avg_busbw_gbps"] == pytest.approx(mean, rel=1e-3)


def test_all_reduce_profile_from_env():
    rc, out, _err = emulate("all_reduce_perf", "-b", "1G", "-e", "4G", "-f", "2", "-g", "8",
                            CLUSTERFORGE_EMU_NCCL_BUSBW_GBPS="190")
    assert rc == 0
    rows = parse_nccl_tests(out)["rows"]
    assert [r["size_bytes"] for r in rows] == [1024 ** 3, 2 * 1024 ** 3, 4 * 1024 ** 3]
    assert all(180 <= r["busbw_oop"] <= 192 for r in rows)


def test_all_reduce_wrong_injection_fails_like_nccl_tests():
    rc, out, _err = emulate("all_reduce_perf", "-b", "1M", "-e", "64M", "-f", "4", "-g", "8",
                            CLUSTERFORGE_EMU_NCCL_WRONG="1")
    assert rc == 1
    result = parse_nccl_tests(out)
    assert result["passed"] is False
    assert result["out_of_bounds"] > 0 and result["out_of_bounds_status"] == "FAILED"
    assert result["wrong_total"] == result["out_of_bounds"]
    assert result["rows"][0]["wrong_oop"] == 0 and result["rows"][-1]["wrong_oop"] > 0


def test_all_reduce_no_check_prints_na():
    rc, out, _err = emulate("all_reduce_perf", "-b", "1M", "-e", "1M", "-g", "8", "-c", "0")
    assert rc == 0
    result = parse_nccl_tests(out)
    assert len(result["rows"]) == 1
    assert result["rows"][0]["wrong_oop"] is None and result["header"]["validation"] == 0


def test_all_reduce_single_gpu_has_zero_busbw():
    rc, out, _err = emulate("all_reduce_perf", "-b", "1M", "-e", "4M", "-f", "2")
    assert rc == 0
    rows = parse_nccl_tests(out)["rows"]
    assert len(rows) == 3 and all(r["busbw_oop"] == 0 for r in rows)


def test_all_reduce_bad_arguments():
    rc, _out, err = emulate("all_reduce_perf", "-b", "x1")
    assert rc == 1 and "invalid" in err
    rc, _out, err = emulate("all_reduce_perf", "-Q")
    assert rc == 1 and "invalid" in err


# ---------------------------------------------------------------------------------------------------- ib_write_bw

def test_ib_write_bw_client_default_ndr():
    rc, out, err = emulate("ib_write_bw", "-d", "mlx5_0", "-F", "--report_gbits", "10.0.0.1")
    assert rc == 0, err
    result = parse_perftest(out)
    assert result["bw_unit"] == "Gb/sec"
    assert len(result["rows"]) == 1
    row = result["rows"][0]
    assert row["bytes"] == 65536 and row["iterations"] == 5000
    assert 0.95 * 400 <= row["bw_avg"] <= 0.98 * 400          # ~96-98% of NDR line rate
    assert row["bw_peak"] >= row["bw_avg"]
    assert row["msg_rate_mpps"] == pytest.approx(row["bw_avg"] * 1e9 / 8 / 65536 / 1e6, rel=1e-3)
    assert result["link"]["device"] == "mlx5_0" and result["link"]["link_type"] == "IB"
    assert result["link"]["mtu"] == 4096 and result["link"]["gid_index"] is None
    assert result["test"] == "RDMA_Write BW Test"


def test_ib_write_bw_all_sizes_mbsec_roce_degraded():
    rc, out, _err = emulate("ib_write_bw", "-a", "-x", "3", "-R", "10.0.0.1", CLUSTERFORGE_EMU_IB_LINK="Ethernet",
                            CLUSTERFORGE_EMU_IB_GBPS="100", CLUSTERFORGE_EMU_IB_DEGRADE="0.5")
    assert rc == 0
    result = parse_perftest(out)
    assert result["bw_unit"] == "MB/sec"
    assert [r["bytes"] for r in result["rows"]] == [2 ** n for n in range(1, 24)]
    largest = result["rows"][-1]
    assert 0.45 * 100 <= largest["bw_avg_gbps"] <= 0.5 * 100
    assert result["link"]["link_type"] == "Ethernet" and result["link"]["gid_index"] == 3
    assert result["info"]["rdma_cm QPs"] == "ON"
    assert "GID" in result["local"]


def test_ib_write_bw_degrade_is_proportional():
    _rc, out, _err = emulate("ib_write_bw", "--report_gbits", "-s", "1048576", "h")
    _rc, slow, _err = emulate("ib_write_bw", "--report_gbits", "-s", "1048576", "h", CLUSTERFORGE_EMU_IB_DEGRADE="0.25")
    full = parse_perftest(out)["bw_avg_largest"]
    degraded = parse_perftest(slow)["bw_avg_largest"]
    assert degraded == pytest.approx(full * 0.75, rel=0.01)


def test_ib_write_bw_server_side_prints_header_only():
    rc, out, _err = emulate("ib_write_bw", "-d", "mlx5_3")
    assert rc == 0
    result = parse_perftest(out)
    assert result["rows"] == [] and result["link"]["device"] == "mlx5_3"
    assert "Waiting for client to connect" in out


def test_emulators_run_with_the_current_python_too():
    # The lab installs them into containers with whatever python3 is there; they must not need a venv.
    rc = subprocess.run([sys.executable, os.path.join(EMULATORS, "ib_write_bw"), "--report_gbits", "h"],
                        capture_output=True, timeout=60, check=False).returncode
    assert rc == 0
