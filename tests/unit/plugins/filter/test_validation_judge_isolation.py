# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The judge's nccl.isolation check (what nccl_isolate named behind a multi-node miss) and the ib_write_bw entries
the fabric_ib phase gives it (with the module's message when a test did not run)."""

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_common import ValidationError
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.validation_judge import validation_judge

NCCL_SLOW = """#  Rank  0 Group  0 Pid  101 on gpu01 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)
  8589934592    2147483648     float     sum      -1   120000   71.58  134.20       0   119000   72.18  135.30       0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 134.2
#
"""


def run(nodes, busbw, passed, rnd=1, rc=0, ok=True, problems=None):
    return {"round": rnd, "nodes": nodes, "passed": passed, "busbw_gbps": busbw, "rc": rc, "ok": ok,
            "problems": problems or [], "cmd": "srun -N %d -w %s ..." % (len(nodes), ",".join(nodes))}


def measured(isolation, multi=True):
    out = {"cluster": "c", "nodes": {}, "ib_write_bw": [], "nccl_isolation": isolation,
           "nccl_multi": {"nodes": ["gpu01", "gpu02", "gpu03", "gpu04"], "rc": 0, "result": NCCL_SLOW} if multi
           else None}
    return out


def isolation_checks(report):
    return [c for c in report["checks"] if c["id"] == "nccl.isolation"]


def test_no_search_no_check():
    report = validation_judge(measured(None))
    assert isolation_checks(report) == []
    assert [c["status"] for c in report["checks"] if c["id"] == "nccl.multi_node"] == ["fail"]


def test_a_culprit_is_named_with_its_bus_bandwidth():
    found = {"needed": True, "threshold_gbps": 346.5, "rounds": 3, "culprits": ["gpu04"], "pairs": [],
             "unresolved": [], "suspects": ["gpu03", "gpu04"],
             "evidence": {"gpu04": run(["gpu01", "gpu04"], 96.2, False, rnd=3)}}
    report = validation_judge(measured(found))
    checks = isolation_checks(report)
    assert len(checks) == 1
    check = checks[0]
    assert check["status"] == "fail" and check["subject"] == "gpu04" and check["category"] == "nccl"
    assert check["measured"] == 96.2 and check["threshold"] == 346.5 and check["expected"] == 385
    assert check["message"] == ("gpu04: slows the multi-node NCCL run down: all_reduce_perf with gpu01 (which passes "
                                "elsewhere) busbw 96.2 GB/s < 346.5 GB/s (90% of 385); gpu04 passes in no run (found "
                                "in 3 round(s) of runs after the run across all nodes)")
    assert check["message"] in report["failures"] and report["ok"] is False


def test_a_culprit_whose_run_failed_names_the_failure():
    found = {"needed": True, "rounds": 1, "culprits": ["gpu03"], "pairs": [], "unresolved": [],
             "evidence": {"gpu03": run(["gpu01", "gpu03"], None, False, rc=1, ok=False,
                                       problems=["exit status 1: srun: error: gpu03: task 1: Exited with exit code 1"])}}
    check = isolation_checks(validation_judge(measured(found)))[0]
    assert check["measured"] is None
    assert "all_reduce_perf with gpu01 (which passes elsewhere) failed (exit status 1: srun: error: gpu03: task 1: " \
           "Exited with exit code 1)" in check["message"]


def test_two_culprits_and_a_pair():
    found = {"needed": True, "rounds": 4, "culprits": ["gpu02", "gpu07"], "pairs": [["gpu03", "gpu05"]],
             "unresolved": [],
             "evidence": {"gpu02": run(["gpu01", "gpu02"], 150.0, False), "gpu07": run(["gpu07", "gpu08"], 10.5, False),
                          "gpu03,gpu05": run(["gpu03", "gpu05"], 200.0, False)}}
    report = validation_judge(measured(found, multi=False))
    checks = isolation_checks(report)
    assert [(c["subject"], c["status"], c["measured"]) for c in checks] == [
        ("gpu02", "fail", 150.0), ("gpu07", "fail", 10.5), ("gpu[03,05]", "fail", 200.0)]
    assert checks[2]["message"].startswith("gpu[03,05]: this pair misses the multi-node NCCL threshold although each "
                                           "node passes with others (a link or route between them): all_reduce_perf "
                                           "busbw 200.0 GB/s < 346.5 GB/s")


def test_unresolved_sets_fail_with_the_reason():
    found = {"needed": True, "rounds": 2, "culprits": [], "pairs": [],
             "unresolved": [{"nodes": ["gpu01", "gpu02", "gpu03", "gpu04"],
                             "reason": "every half and every pairing of its quarters reaches the threshold"}],
             "evidence": {}}
    check = isolation_checks(validation_judge(measured(found)))[0]
    assert check["subject"] == "gpu[01-04]" and check["status"] == "fail"
    assert check["message"] == ("gpu[01-04]: the multi-node NCCL miss could not be narrowed to a node or pair: every "
                                "half and every pairing of its quarters reaches the threshold (found in 2 round(s) "
                                "of runs after the run across all nodes)")


def test_nothing_named_is_a_skip_and_not_needed_is_nothing():
    found = {"needed": True, "rounds": 0, "culprits": [], "pairs": [], "unresolved": [], "evidence": {}}
    checks = isolation_checks(validation_judge(measured(found)))
    assert [(c["status"], c["subject"]) for c in checks] == [("skip", "multi-node")]
    assert isolation_checks(validation_judge(measured(dict(found, needed=False)))) == []


def test_a_failed_or_skipped_search():
    failed = {"failed": True, "msg": "srun was not found on this host; install it or set srun_path"}
    check = isolation_checks(validation_judge(measured(failed)))[0]
    assert check["status"] == "fail" and check["message"] == (
        "multi-node: the isolation of the NCCL miss failed: srun was not found on this host; install it or set "
        "srun_path")
    skipped = {"skipped": True, "skip_reason": "Conditional result was False"}
    check = isolation_checks(validation_judge(measured(skipped)))[0]
    assert check["status"] == "skip"


def test_malformed_input():
    with pytest.raises(ValidationError, match="nccl_isolation.culprits must be a list"):
        validation_judge(measured({"needed": True, "culprits": "gpu01"}))


def test_ib_write_bw_entry_with_the_modules_message():
    m = measured(None, multi=False)
    m["ib_write_bw"] = [
        {"client": "gpu01", "server": "gpu02", "hca": "mlx5_0", "line_rate_gbits": 400, "rc": None, "result": None,
         "msg": "mlx5_0: no result within 120 s"},
        {"client": "gpu02", "server": "gpu03", "hca": "mlx5_0", "line_rate_gbits": 400, "rc": 1, "result": None,
         "msg": "ib_write_bw was not found on this host; install it or set ib_write_bw_path"},
        {"client": "gpu03", "server": "gpu01", "hca": "mlx5_0", "line_rate_gbits": 400, "rc": 1, "result": None},
    ]
    report = validation_judge(m)
    messages = [c["message"] for c in report["checks"] if c["id"] == "ib.write_bw"]
    assert messages == [
        "gpu01->gpu02 mlx5_0: ib_write_bw failed: mlx5_0: no result within 120 s",
        "gpu02->gpu03 mlx5_0: ib_write_bw failed with exit status 1: ib_write_bw was not found on this host; "
        "install it or set ib_write_bw_path",
        "gpu03->gpu01 mlx5_0: ib_write_bw failed with exit status 1"]
