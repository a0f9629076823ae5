# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ibdiagnet module with recorded ibdiagnet2 output."""

import os

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import ibdiagnet

FIX = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures", "infiniband")
ERRORS = open(os.path.join(FIX, "ibdiagnet2-ndr-speed-errors.txt")).read()
CLEAN = ERRORS.replace("-I- Speed / Width checks                0          2",
                       "-I- Speed / Width checks                0          0")


def tool(text=ERRORS, rc=0, err=""):
    return Tool([(("ibdiagnet",), (rc, text, err))])


@pytest.mark.parametrize("rate,lane", [("edr", "25"), ("hdr", "50"), ("ndr", "100"), ("xdr", "200")])
def test_lane_speed_per_expected_rate(rate, lane):
    t = tool(CLEAN)
    r = run_module(ibdiagnet, {"expected_rate": rate}, t)
    assert t.calls == [["/usr/bin/ibdiagnet", "--ls", lane, "--lw", "4x"]]
    assert r["lane_speed"] == int(lane) and r["cmd"] == "/usr/bin/ibdiagnet --ls %s --lw 4x" % lane


def test_no_expected_rate_no_ls():
    t = tool(CLEAN)
    r = run_module(ibdiagnet, {"output_dir": "/tmp/ibd", "extra_args": ["-P", "all=1"]}, t)
    assert t.calls == [["/usr/bin/ibdiagnet", "-o", "/tmp/ibd", "-P", "all=1"]] and r["lane_speed"] is None


def test_errors_over_allowance_fail_naming_stages_and_first_errors():
    r = run_module(ibdiagnet, {"expected_rate": "ndr"}, tool())
    assert r["failed"] and r["changed"] is False
    assert "2 error(s) (allowed 0)" in r["msg"] and "Speed / Width checks (2)" in r["msg"]
    assert "Unexpected actual link speed 50" in r["msg"]
    assert r["error_stages"] == ["Speed / Width checks"] and r["total_errors"] == 2


def test_errors_within_allowance_pass():
    r = run_module(ibdiagnet, {"expected_rate": "ndr", "max_errors": 2}, tool())
    assert not r.get("failed") and r["changed"] is False and r["total_errors"] == 2
    assert len(r["stages"]) == 6 and r["log_file"] == "/var/tmp/ibdiagnet2/ibdiagnet2.log"


def test_clean_run_passes_and_returns_messages():
    r = run_module(ibdiagnet, {"expected_rate": "ndr"}, tool(CLEAN))
    assert not r.get("failed") and r["total_errors"] == 0 and r["total_warnings"] == 1
    assert r["messages"][0]["level"] == "warning" and r["format"] == "ibdiagnet2"


def test_warnings_limit():
    r = run_module(ibdiagnet, {"max_warnings": 0}, tool(CLEAN))
    assert r["failed"] and "1 warning(s) (allowed 0) in stage(s) Discovery (1)" in r["msg"]
    assert not run_module(ibdiagnet, {"max_warnings": 1}, tool(CLEAN)).get("failed")


def test_rc_nonzero_is_tool_failure():
    r = run_module(ibdiagnet, {"expected_rate": "hdr"}, tool("-E- Failed to open port\n", 1, "umad: no device"))
    assert r["failed"] and r["rc"] == 1 and "tool failed to run" in r["msg"]
    assert r["cmd"] == "/usr/bin/ibdiagnet --ls 50 --lw 4x" and r["stderr"] == "umad: no device"


def test_no_summary_fails():
    text = open(os.path.join(FIX, "ibdiagnet2-truncated-no-summary.txt")).read()
    r = run_module(ibdiagnet, {}, tool(text))
    assert r["failed"] and "no stage summary" in r["msg"]


def test_check_mode_still_runs_readonly_and_never_changed():
    t = tool(CLEAN)
    r = run_module(ibdiagnet, {"expected_rate": "ndr"}, t, check_mode=True)
    assert len(t.calls) == 1 and r["changed"] is False


def test_missing_tool():
    r = run_module(ibdiagnet, {}, Tool([], missing=("ibdiagnet",)))
    assert r["failed"] and "ibdiagnet was not found" in r["msg"]


def test_link_width_option():
    t = tool(CLEAN)
    run_module(ibdiagnet, {"expected_rate": "ndr", "link_width": "2x"}, t)
    assert t.calls[0][-2:] == ["--lw", "2x"]


def test_invalid_rate_rejected():
    r = run_module(ibdiagnet, {"expected_rate": "qdr"}, tool())
    assert r["failed"] and "expected_rate" in r["msg"]
