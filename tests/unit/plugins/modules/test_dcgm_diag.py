"""dcgm_diag module tests: scripted dcgmi replies in the real DCGM 3/4 formats."""

import json
import os

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.module_utils import dcgm as dcgm_module_utils
from ansible_collections.clusterforge.gpu.plugins.modules import dcgm_diag

FIX = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures", "dcgm")


def fixture(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


def diag_json(results, warn_test=None):
    """A DCGM 4.x document: results = {test: {gpu: status}}."""
    cats = {}
    order = {"software": "Deployment", "memory": "Hardware", "pcie": "Integration", "targeted_power": "Stress"}
    for test, per_gpu in results.items():
        res = []
        for gpu, status in per_gpu.items():
            entry = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu, "status": status}
            if status != "Pass":
                entry["warnings"] = [{"warning": "%s problem on GPU %d" % (test, gpu), "error_id": 7}]
            res.append(entry)
        summary = "Fail" if "Fail" in per_gpu.values() else ("Warn" if "Warn" in per_gpu.values() else "Pass")
        cats.setdefault(order[test], []).append({"name": test, "results": res, "test_summary": {"status": summary}})
    doc = {"DCGM Diagnostic": {"test_categories": [{"category": c, "tests": t} for c, t in cats.items()]},
           "metadata": {"version": "4.4.2", "Driver Version Detected": "580.105.08"}}
    return json.dumps(doc, indent="\t")


ALL_PASS = diag_json({"software": {0: "Pass", 1: "Pass"}, "memory": {0: "Pass", 1: "Pass"},
                      "pcie": {0: "Pass", 1: "Pass"}})


def run(args, handler, **kw):
    tool = Tool(handler)
    return run_module(dcgm_diag, args, tool, **kw), tool


def reply(rc, out, err=""):
    return lambda argv, data: (rc, out, err)


def test_pass_returns_per_test_and_per_gpu_results():
    result, tool = run({"level": 2}, reply(0, ALL_PASS))
    assert "failed" not in result and result["changed"] is False
    assert tool.calls == [["/usr/bin/dcgmi", "diag", "-r", "2", "-j"]]
    assert result["result"] == "pass" and result["output_format"] == "json"
    assert result["gpus"] == {"0": {"software": "pass", "memory": "pass", "pcie": "pass"},
                              "1": {"software": "pass", "memory": "pass", "pcie": "pass"}}
    assert [t["name"] for t in result["tests"]] == ["software", "memory", "pcie"]
    assert result["metadata"]["dcgm_version"] == "4.4.2"
    assert "diag_warnings" not in result


def test_the_host_engine_address_is_passed(tmp_path, monkeypatch):
    """The host option, else the address the dcgm role recorded on the node (its root-only socket)."""
    result, tool = run({"level": 1, "host": "unix:///run/nvidia-dcgm/nv-hostengine.sock"}, reply(0, ALL_PASS))
    assert "failed" not in result
    assert tool.calls == [["/usr/bin/dcgmi", "diag", "--host", "unix:///run/nvidia-dcgm/nv-hostengine.sock",
                           "-r", "1", "-j"]]
    record = tmp_path / "dcgm-hostengine"
    record.write_text("unix:///run/dcgm/he.sock\n")
    monkeypatch.setattr(dcgm_module_utils, "HOSTENGINE_FILE", str(record))
    result, tool = run({"level": 1}, reply(0, ALL_PASS))
    assert tool.calls == [["/usr/bin/dcgmi", "diag", "--host", "unix:///run/dcgm/he.sock", "-r", "1", "-j"]]
    record.chmod(0o646)
    result, tool = run({"level": 1}, reply(0, ALL_PASS))
    assert result["failed"] is True and "only root may write" in result["msg"] and tool.calls == []


def test_fail_names_test_and_gpu():
    result, _tool = run({"level": 2}, reply(226, fixture("diag-r2-j-dcgm4-memory-fail-gpu1.json.txt")))
    assert result["failed"] is True
    assert result["msg"] == "DCGM diagnostic level 2 failed: memory on GPU 1"
    assert result["failed_tests"] == [{"name": "memory", "gpus": ["1"]}]
    assert result["gpus"]["1"]["memory"] == "fail" and result["rc"] == 226
    assert any("A memory mismatch" in w for w in result["diag_warnings"])


def test_multiple_failures_listed():
    out = diag_json({"memory": {0: "Pass", 3: "Fail"}, "pcie": {0: "Fail", 3: "Pass"}})
    result, _tool = run({"level": 2}, reply(226, out))
    assert result["failed"] and "memory on GPU 3" in result["msg"] and "pcie on GPU 0" in result["msg"]


def test_warn_passes_with_warnings():
    out = diag_json({"software": {0: "Pass"}, "targeted_power": {0: "Warn"}})
    result, _tool = run({"level": 3}, reply(0, out))
    assert "failed" not in result and result["result"] == "warn"
    assert result["diag_warnings"] == ["targeted_power (GPU 0): targeted_power problem on GPU 0"]


def test_json_fallback_to_table():
    table = fixture("diag-r2-dcgm3-mixed-gpus.txt")
    result, tool = run({"level": 2}, reply(226, table))
    assert len(tool.calls) == 1  # the diagnostic is never run twice
    assert result["output_format"] == "table"
    assert result["failed"] and result["failed_tests"] == [{"name": "PCIe", "gpus": ["2"]}]


def test_table_mode_without_json_flag():
    table = fixture("diag-r2-dcgm3-mixed-gpus.txt").replace("Fail - GPU: 2   ", "Pass - GPU: 2   ")
    result, tool = run({"level": 2, "json_output": False}, reply(0, table))
    assert tool.calls == [["/usr/bin/dcgmi", "diag", "-r", "2"]]
    assert "failed" not in result and result["result"] == "warn" and result["output_format"] == "table"


def test_all_gpus_failure_without_ids():
    table = fixture("diag-r2-dcgm3-mixed-gpus.txt").replace("Pass - All", "Fail - All")
    result, _tool = run({"level": 2, "json_output": False}, reply(226, table))
    assert "GPU Memory on all GPUs" in result["msg"]


def test_gpus_option_builds_entity_list():
    result, tool = run({"level": 1, "gpus": ["0", "1"]}, reply(0, ALL_PASS))
    assert tool.calls[0] == ["/usr/bin/dcgmi", "diag", "-r", "1", "-i", "0,1", "-j"]
    assert result["cmd"] == "/usr/bin/dcgmi diag -r 1 -i 0,1 -j"


def test_nonzero_rc_without_results_fails_with_output():
    out = "Error: Unable to complete diagnostic for group 0. Return: (-40) : Host engine connection invalid/disconnected\n"
    result, _tool = run({"level": 1}, reply(255, out))
    assert result["failed"] and result["rc"] == 255 and "Host engine connection" in result["msg"]
    assert result["stdout"] == out


def test_runtime_error_json_fails():
    out = json.dumps({"DCGM Diagnostic": {"runtime_error": "Error: Unable to complete diagnostic for entities 9.",
                                          "version": "4.4.2"}})
    result, _tool = run({"level": 1, "gpus": ["9"]}, reply(253, out))
    assert result["failed"] and "entities 9" in result["msg"]


def test_timeout_probes_version_and_wraps_with_coreutils_timeout():
    def handler(argv, data):
        if argv[-1] == "-v":
            return 0, "Version : 4.4.2\nBuild ID : 7\n", ""
        return 0, ALL_PASS, ""
    result, tool = run({"level": 3, "timeout": 900}, handler)
    assert "failed" not in result
    assert tool.calls[0] == ["/usr/bin/dcgmi", "-v"]
    assert tool.calls[1] == ["/usr/bin/timeout", "-k", "30", "960", "/usr/bin/dcgmi", "diag", "-r", "3", "-j",
                             "--timeout", "900"]


def test_timeout_not_passed_to_old_dcgm():
    def handler(argv, data):
        if argv[-1] == "-v":
            return 0, "Version : 2.4.7\n", ""
        return 0, ALL_PASS, ""
    _result, tool = run({"level": 1, "timeout": 60}, handler)
    assert "--timeout" not in tool.calls[1] and tool.calls[1][0] == "/usr/bin/timeout"


def test_timeout_expired_fails():
    def handler(argv, data):
        if argv[-1] == "-v":
            return 0, "Version : 4.4.2\n", ""
        return 124, "", ""
    result, _tool = run({"level": 3, "timeout": 10}, handler)
    assert result["failed"] and "timed out after 10 seconds" in result["msg"] and result["rc"] == 124


def test_check_mode_runs_nothing():
    result, tool = run({"level": 3}, reply(0, ALL_PASS), check_mode=True)
    assert tool.calls == []
    assert result["skipped"] is True and result["changed"] is False and result["result"] is None
    assert "not run" in result["msg"] and result["cmd"] == "/usr/bin/dcgmi diag -r 3 -j"


def test_dcgmi_missing_fails_even_in_check_mode():
    tool = Tool(reply(0, ALL_PASS), missing=["dcgmi"])
    result = run_module(dcgm_diag, {"level": 1}, tool, check_mode=True)
    assert result["failed"] and "dcgmi was not found" in result["msg"] and tool.calls == []


@pytest.mark.parametrize("args,needle", [({"level": 5}, "value of level must be one of"),
                                         ({"timeout": 0}, "timeout must be a positive"),
                                         ({"gpus": []}, "non-empty list")])
def test_bad_input_runs_nothing(args, needle):
    result, tool = run(args, reply(0, ALL_PASS))
    assert result["failed"] and needle in result["msg"] and tool.calls == []


def test_unparseable_output_fails():
    result, _tool = run({"level": 1}, reply(0, "something unexpected\n"))
    assert result["failed"] and "produced no test results" in result["msg"]
