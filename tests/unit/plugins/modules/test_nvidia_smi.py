"""clusterforge.gpu.nvidia_smi with a scripted nvidia-smi (no GPU needed).

``FakeSmi`` answers exactly the commands the module runs (``--query-gpu=... --format=csv,noheader,nounits``
and ``-i <idx> <setter>``) with the messages of the real tool, and can be told to fail a setter on one GPU
(``fail``) or to accept a setter without changing anything (``stuck``). Every argv is recorded by ``Tool``.
"""

import copy
import json
import os
from unittest import mock

import pytest

from ansible.module_utils import basic
from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import nvidia_smi as module

H100 = {
    "name": "NVIDIA H100 80GB HBM3", "persistence_mode": "Enabled",
    "power.limit": 700.0, "power.default_limit": 700.0, "power.min_limit": 200.0, "power.max_limit": 700.0,
    "enforced.power.limit": 700.0,
    "clocks.max.sm": 1980, "clocks.max.graphics": 1980, "clocks.max.memory": 2619,
    "clocks.applications.graphics": 1980, "clocks.applications.memory": 2619,
    "clocks.default_applications.graphics": 1980, "clocks.default_applications.memory": 2619,
}
BUSES = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]


def uuid(i):
    return "GPU-%08x-0000-4000-8000-%012x" % (0xC0FFEE00 + i, i)


def h100_gpus(count=8, **overrides):
    gpus = []
    for i in range(count):
        gpu = dict(H100)
        gpu.update({"index": i, "uuid": uuid(i), "pci.bus_id": "00000000:%s:00.0" % BUSES[i]})
        gpu.update(overrides)
        gpus.append(gpu)
    return gpus


def _fmt(value):
    if value is None:
        return "[N/A]"
    if isinstance(value, float):
        return "%.2f" % value
    return str(value)


class FakeSmi(object):
    def __init__(self, gpus, fail=None, stuck=(), clamp_lgc_min=None):
        self.gpus = copy.deepcopy(gpus)
        self.fail = dict(fail or {})      # (index, flag) -> (rc, stdout, stderr)
        self.stuck = set(stuck)           # (index, flag): says OK, changes nothing
        self.clamp_lgc_min = clamp_lgc_min
        self.query_rc = None

    def __call__(self, argv, data=None):
        args = argv[1:]
        query = [a for a in args if a.startswith("--query-gpu=")]
        if query:
            if self.query_rc:
                return self.query_rc
            fields = query[0].split("=", 1)[1].split(",")
            assert "--format=csv,noheader,nounits" in args
            lines = [", ".join(_fmt(g.get(f)) for f in fields) for g in self.gpus]
            return 0, "\n".join(lines) + "\n", ""
        if args == ["-q", "-x"]:
            return 0, self.xml(), ""
        assert args[0] == "-i", args
        index = int(args[1])
        flag = args[2]
        value = args[3] if len(args) > 3 else None
        gpu = self.gpus[index]
        bus = gpu["pci.bus_id"]
        if (index, flag) in self.fail:
            return self.fail[(index, flag)]
        change = (index, flag) not in self.stuck
        if flag == "-pm":
            if change:
                gpu["persistence_mode"] = "Enabled" if value == "1" else "Disabled"
            return 0, "%s persistence mode for GPU %s.\nAll done.\n" % (
                "Enabled" if value == "1" else "Disabled", bus), ""
        if flag == "-pl":
            old = gpu["power.limit"]
            if change:
                gpu["power.limit"] = float(value)
            return 0, "Power limit for GPU %s was set to %.2f W from %.2f W.\nAll done.\n" % (bus, float(value), old), ""
        if flag in ("-lgc", "-lmc"):
            low, high = [int(x) for x in value.split(",")]
            top = gpu["clocks.max.sm"] if flag == "-lgc" else gpu["clocks.max.memory"]
            high = min(high, top)
            if flag == "-lgc" and self.clamp_lgc_min:
                low = max(low, self.clamp_lgc_min)
            if flag == "-lgc":
                return 0, 'GPU clocks set to "(gpuClkMin %d, gpuClkMax %d)" for GPU %s\nAll done.\n' % (low, high, bus), ""
            return 0, 'Memory clocks set to "(memClkMin %d, memClkMax %d)" for GPU %s\nAll done.\n' % (low, high, bus), ""
        if flag in ("-rgc", "-rmc"):
            return 0, "All done.\n", ""
        if flag == "-ac":
            mem, gfx = [int(x) for x in value.split(",")]
            if change:
                gpu["clocks.applications.memory"], gpu["clocks.applications.graphics"] = mem, gfx
            return 0, 'Applications clocks set to "(MEM %d, SM %d)" for GPU %s\nAll done.\n' % (mem, gfx, bus), ""
        if flag == "-rac":
            if change:
                gpu["clocks.applications.memory"] = gpu["clocks.default_applications.memory"]
                gpu["clocks.applications.graphics"] = gpu["clocks.default_applications.graphics"]
            return 0, "All done.\n", ""
        raise AssertionError("unexpected nvidia-smi call %r" % (argv,))

    def xml(self):
        """``-q -x`` with each GPU's UUID and SUPPORTED_CLOCKS (the H100's unless the GPU has a ``supported`` key,
        {memory MHz: [graphics MHz]}); ``xml_text`` replaces the whole document."""
        if getattr(self, "xml_text", None):
            return self.xml_text
        parts = ["<?xml version=\"1.0\" ?>", "<nvidia_smi_log>"]
        for gpu in self.gpus:
            pairs = gpu.get("supported", H100_SUPPORTED)
            parts.append('<gpu id="%s"><uuid>%s</uuid><supported_clocks>' % (gpu["pci.bus_id"], gpu["uuid"]))
            for mem, gfx in pairs.items():
                parts.append("<supported_mem_clock><value>%d MHz</value>%s</supported_mem_clock>"
                             % (mem, "".join("<supported_graphics_clock>%d MHz</supported_graphics_clock>" % g
                                             for g in gfx)))
            parts.append("</supported_clocks></gpu>")
        parts.append("</nvidia_smi_log>")
        return "\n".join(parts) + "\n"


# The H100 SXM's one memory clock and its graphics clocks, 1980 down to 345 MHz in steps of 15 (as the emulator).
H100_SUPPORTED = {2619: list(range(1980, 344, -15))}

# --------------------------------------------------------------------------------------------- helpers

SETTERS = ("-pm", "-pl", "-lgc", "-rgc", "-lmc", "-rmc", "-ac", "-rac")


@pytest.fixture
def state_file(tmp_path):
    return str(tmp_path / "etc" / "clusterforge" / "nvidia_smi_state.json")


@pytest.fixture
def warnings():
    seen = []
    with mock.patch.object(basic.AnsibleModule, "warn", lambda self, msg: seen.append(msg)):
        yield seen


def run(fake, args, state_file, **kw):
    tool = Tool(fake, missing=kw.pop("missing", ()))
    args = dict(args)
    args.setdefault("state_file", state_file)
    result = run_module(module, args, tool, **kw)
    return result, tool


def setter_calls(tool):
    return [c[1:] for c in tool.calls if any(a in SETTERS for a in c)]


def queries(tool):
    return tool.count("--query-gpu=")


def read_state(path):
    with open(path) as f:
        return json.load(f)


# ------------------------------------------------------------------------------------ power limit

def test_power_limit_changed_on_every_gpu(state_file):
    fake = FakeSmi(h100_gpus())
    result, tool = run(fake, {"power_limit_watts": 500}, state_file)
    assert result.get("failed") is not True, result
    assert result["changed"] is True
    assert setter_calls(tool) == [["-i", str(i), "-pl", "500"] for i in range(8)]
    assert queries(tool) == 2  # one read before, one read-back after
    assert [g["power.limit"] for g in fake.gpus] == [500.0] * 8
    assert result["gpus"][3]["before"] == {"power_limit_watts": 700}
    assert result["gpus"][3]["after"] == {"power_limit_watts": 500}
    assert result["gpus"][3]["uuid"] == uuid(3)
    assert len(result["cmd"]) == 8 and result["cmd"][0].endswith("nvidia-smi -i 0 -pl 500")
    assert read_state(state_file)["gpus"][uuid(5)]["power_limit_watts"] == 500


def test_unchanged_runs_no_setter_and_keeps_state_file(state_file):
    fake = FakeSmi(h100_gpus())
    run(fake, {"power_limit_watts": 500}, state_file)
    before = os.stat(state_file).st_mtime_ns
    result, tool = run(fake, {"power_limit_watts": 500}, state_file)
    assert result["changed"] is False
    assert setter_calls(tool) == []
    assert queries(tool) == 1
    assert result["cmd"] == []
    assert result["state_file_changed"] is False
    assert os.stat(state_file).st_mtime_ns == before


def test_only_the_gpus_that_differ_are_set(state_file):
    gpus = h100_gpus()
    gpus[1]["power.limit"] = 500.0
    gpus[6]["power.limit"] = 500.0
    result, tool = run(FakeSmi(gpus), {"power_limit_watts": 500}, state_file)
    assert [c[1] for c in setter_calls(tool)] == ["0", "2", "3", "4", "5", "7"]
    assert [g["changed"] for g in result["gpus"]] == [True, False, True, True, True, True, False, True]


def test_check_mode_predicts_and_runs_no_setter(state_file):
    fake = FakeSmi(h100_gpus())
    result, tool = run(fake, {"power_limit_watts": 450}, state_file, check_mode=True)
    assert result["changed"] is True
    assert setter_calls(tool) == []
    assert queries(tool) == 1
    assert result["gpus"][0]["after"] == {"power_limit_watts": 450}
    assert not os.path.exists(state_file)
    assert fake.gpus[0]["power.limit"] == 700.0


def test_check_mode_unchanged(state_file):
    fake = FakeSmi(h100_gpus())
    run(fake, {"power_limit_watts": 450}, state_file)
    result, tool = run(fake, {"power_limit_watts": 450}, state_file, check_mode=True)
    assert result["changed"] is False
    assert setter_calls(tool) == []


def test_diff_only_in_diff_mode(state_file):
    result, _tool = run(FakeSmi(h100_gpus(2)), {"power_limit_watts": 600}, state_file, diff=True)
    key = "GPU 1 %s" % uuid(1)
    assert result["diff"]["before"][key] == {"power_limit_watts": 700}
    assert result["diff"]["after"][key] == {"power_limit_watts": 600}
    result, _tool = run(FakeSmi(h100_gpus(2)), {"power_limit_watts": 600}, state_file + ".2")
    assert "diff" not in result


def test_power_out_of_range_fails_before_any_change(state_file):
    fake = FakeSmi(h100_gpus())
    result, tool = run(fake, {"power_limit_watts": 800}, state_file)
    assert result["failed"] is True
    assert setter_calls(tool) == []
    assert "GPU 0 (%s, 00000000:18:00.0)" % uuid(0) in result["msg"]
    assert "200-700 W" in result["msg"]
    assert not os.path.exists(state_file)


def test_power_out_of_range_on_one_gpu_changes_none(state_file):
    gpus = h100_gpus()
    gpus[5]["power.max_limit"] = 600.0
    result, tool = run(FakeSmi(gpus), {"power_limit_watts": 650}, state_file)
    assert result["failed"] is True
    assert setter_calls(tool) == []
    assert "GPU 5" in result["msg"] and "200-600 W" in result["msg"]
    assert "GPU 4" not in result["msg"]


def test_power_not_supported_fails(state_file):
    gpus = h100_gpus(2)
    gpus[1]["power.min_limit"] = None
    gpus[1]["power.max_limit"] = None
    result, tool = run(FakeSmi(gpus), {"power_limit_watts": 500}, state_file)
    assert result["failed"] is True and "not supported" in result["msg"] and "GPU 1" in result["msg"]
    assert setter_calls(tool) == []


def test_partial_failure_setter_rc_on_gpu3(state_file):
    err = "Failed to set power management limit for GPU 00000000:5D:00.0: Insufficient Permissions\n"
    fake = FakeSmi(h100_gpus(), fail={(3, "-pl"): (4, err, "")})
    result, tool = run(fake, {"power_limit_watts": 500}, state_file)
    assert result["failed"] is True
    assert result["rc"] == 4
    assert result["cmd"].endswith("nvidia-smi -i 3 -pl 500")
    assert result["stdout"] == err
    assert "stderr" in result
    assert "GPU 3" in result["msg"] and "Insufficient Permissions" in result["msg"]
    assert [c[1] for c in setter_calls(tool)] == ["0", "1", "2", "3"]  # nothing after the failure
    assert result["changed"] is True
    # what was applied (and verified) is recorded for the boot unit; GPU 3..7 are not
    recorded = read_state(state_file)["gpus"]
    assert sorted(recorded) == sorted(uuid(i) for i in range(3))


def test_value_did_not_stick_fails_with_setter_output(state_file):
    fake = FakeSmi(h100_gpus(), stuck={(3, "-pl")})
    result, tool = run(fake, {"power_limit_watts": 500}, state_file)
    assert result["failed"] is True
    assert "did not stick" in result["msg"] and "GPU 3" in result["msg"]
    assert result["cmd"].endswith("nvidia-smi -i 3 -pl 500")
    assert result["rc"] == 0
    assert "was set to 500.00 W" in result["stdout"]
    assert queries(tool) == 2
    assert uuid(3) not in read_state(state_file)["gpus"]
    assert read_state(state_file)["gpus"][uuid(4)]["power_limit_watts"] == 500


def test_a_failure_keeps_what_was_applied_and_verified_before_it(state_file):
    # apply stops at GPU 1's power limit; verify still reads back once and records GPU 0's clamped lock
    fake = FakeSmi(h100_gpus(2), fail={(1, "-pl"): (4, "Insufficient Permissions\n", "")}, clamp_lgc_min=345)
    result, tool = run(fake, {"power_limit_watts": 500, "locked_gpu_clocks": {"min": 0, "max": 1980}}, state_file)
    assert result["failed"] is True and result["rc"] == 4 and result["cmd"].endswith("nvidia-smi -i 1 -pl 500")
    assert setter_calls(tool) == [["-i", "0", "-pl", "500"], ["-i", "0", "-lgc", "0,1980"], ["-i", "1", "-pl", "500"]]
    assert queries(tool) == 2
    assert result["gpus"][0]["after"] == {"power_limit_watts": 500, "locked_gpu_clocks": {"min": 345, "max": 1980}}
    assert result["gpus"][1]["after"] == result["gpus"][1]["before"]
    recorded = read_state(state_file)["gpus"]
    assert recorded[uuid(0)]["power_limit_watts"] == 500
    assert recorded[uuid(0)]["locked_gpu_clocks"] == {"min": 345, "max": 1980, "requested_min": 0, "requested_max": 1980}
    assert uuid(1) not in recorded


def test_tool_missing(state_file):
    result, tool = run(FakeSmi(h100_gpus()), {"power_limit_watts": 500}, state_file, missing=("nvidia-smi",))
    assert result["failed"] is True
    assert "nvidia-smi was not found" in result["msg"]
    assert tool.calls == []


def test_nvidia_smi_path_missing(state_file, tmp_path):
    nope = str(tmp_path / "nope")
    result, tool = run(FakeSmi(h100_gpus()), {"power_limit_watts": 500, "nvidia_smi_path": nope}, state_file,
                       missing=(nope,))
    assert result["failed"] is True
    assert "nvidia-smi was not found at %s (nvidia_smi_path)" % nope in result["msg"]
    assert tool.calls == []


def test_query_failure_reports_cmd_rc_output(state_file):
    fake = FakeSmi(h100_gpus())
    msg = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest "
           "NVIDIA driver is installed and running.\n")
    fake.query_rc = (9, msg, "")
    result, _tool = run(fake, {"power_limit_watts": 500}, state_file)
    assert result["failed"] is True
    assert result["rc"] == 9 and result["stdout"] == msg
    assert "--query-gpu=" in result["cmd"]


# ------------------------------------------------------------------------------------ GPU selection

@pytest.mark.parametrize("selector,expected", [
    (["2", "5"], ["2", "5"]),
    ([uuid(4)], ["4"]),
    ([uuid(4).upper().replace("GPU-", "GPU-")], ["4"]),
    (["00000000:5D:00.0"], ["3"]),
    (["0000:5d:00.0", "DB:00.0"], ["3", "7"]),
    (["5d:0.0", " 0000:2a:00.0 "], ["1", "3"]),
    (["5", "5", uuid(5)], ["5"]),
])
def test_subset_of_gpus(state_file, selector, expected):
    result, tool = run(FakeSmi(h100_gpus()), {"power_limit_watts": 500, "gpus": selector}, state_file)
    assert result.get("failed") is not True, result
    assert [c[1] for c in setter_calls(tool)] == expected
    assert [str(g["index"]) for g in result["gpus"]] == expected


def test_unknown_gpu_fails_listing_the_gpus(state_file):
    result, tool = run(FakeSmi(h100_gpus(2)), {"power_limit_watts": 500, "gpus": ["0", "7"]}, state_file)
    assert result["failed"] is True
    assert "'7' not found" in result["msg"] and uuid(1) in result["msg"]
    assert setter_calls(tool) == []


@pytest.mark.parametrize("bad", ["zz:00.0", "00000000:5D:00.9", "0000:5d"])
def test_a_bus_id_that_is_not_one_matches_no_gpu(state_file, bad):
    result, tool = run(FakeSmi(h100_gpus(2)), {"power_limit_watts": 500, "gpus": [bad]}, state_file)
    assert result["failed"] is True and "not found" in result["msg"]
    assert setter_calls(tool) == []


def test_mig_uuid_is_refused_with_a_hint(state_file):
    result, _tool = run(FakeSmi(h100_gpus(2)), {"power_limit_watts": 500,
                                                "gpus": ["MIG-3a8a1b5e-0000-5000-8000-000000000000"]}, state_file)
    assert result["failed"] is True and "parent GPU" in result["msg"]


# ----------------------------------------------------------------------------------- locked clocks

def test_locked_clocks_applied_then_idempotent_from_state_file(state_file):
    fake = FakeSmi(h100_gpus(2))
    result, tool = run(fake, {"locked_gpu_clocks": {"min": 1980, "max": 1980}}, state_file)
    assert result["changed"] is True
    assert setter_calls(tool) == [["-i", "0", "-lgc", "1980,1980"], ["-i", "1", "-lgc", "1980,1980"]]
    assert result["gpus"][0]["before"] == {"locked_gpu_clocks": None}
    assert result["gpus"][0]["after"] == {"locked_gpu_clocks": {"min": 1980, "max": 1980}}
    entry = read_state(state_file)["gpus"][uuid(1)]
    assert entry["locked_gpu_clocks"] == {"min": 1980, "max": 1980, "requested_min": 1980, "requested_max": 1980}
    assert entry["index"] == 1 and entry["pci_bus_id"] == "00000000:2A:00.0"

    result, tool = run(fake, {"locked_gpu_clocks": {"min": 1980, "max": 1980}}, state_file)
    assert result["changed"] is False
    assert setter_calls(tool) == []
    assert result["gpus"][0]["before"] == {"locked_gpu_clocks": {"min": 1980, "max": 1980}}


def test_locked_clocks_record_the_clamped_values(state_file):
    fake = FakeSmi(h100_gpus(1), clamp_lgc_min=345)
    result, _tool = run(fake, {"locked_gpu_clocks": {"min": 0, "max": 1980}}, state_file)
    assert result["gpus"][0]["after"]["locked_gpu_clocks"] == {"min": 345, "max": 1980}
    entry = read_state(state_file)["gpus"][uuid(0)]["locked_gpu_clocks"]
    assert entry == {"min": 345, "max": 1980, "requested_min": 0, "requested_max": 1980}
    # the same request again is not a change although the driver reported other values
    result, tool = run(fake, {"locked_gpu_clocks": {"min": 0, "max": 1980}}, state_file)
    assert result["changed"] is False and setter_calls(tool) == []


def test_locked_clocks_new_request_is_applied(state_file):
    fake = FakeSmi(h100_gpus(1))
    run(fake, {"locked_gpu_clocks": {"min": 1980, "max": 1980}}, state_file)
    result, tool = run(fake, {"locked_gpu_clocks": {"min": 1500, "max": 1800}}, state_file)
    assert result["changed"] is True
    assert setter_calls(tool) == [["-i", "0", "-lgc", "1500,1800"]]


def test_locked_clocks_above_max_fail_before_any_change(state_file):
    result, tool = run(FakeSmi(h100_gpus()), {"locked_gpu_clocks": {"min": 1000, "max": 2100},
                                              "power_limit_watts": 500}, state_file)
    assert result["failed"] is True
    assert "2100" in result["msg"] and "clocks.max.sm=1980" in result["msg"]
    assert setter_calls(tool) == []


def test_locked_memory_clocks_above_max_fail(state_file):
    result, tool = run(FakeSmi(h100_gpus(1)), {"locked_memory_clocks": {"min": 2619, "max": 3201}}, state_file)
    assert result["failed"] is True and "clocks.max.memory=2619" in result["msg"]
    assert setter_calls(tool) == []


def test_locked_memory_clocks_applied(state_file):
    fake = FakeSmi(h100_gpus(1))
    result, tool = run(fake, {"locked_memory_clocks": {"min": 2619, "max": 2619}}, state_file)
    assert setter_calls(tool) == [["-i", "0", "-lmc", "2619,2619"]]
    assert read_state(state_file)["gpus"][uuid(0)]["locked_memory_clocks"]["max"] == 2619


def test_reset_locked_clocks(state_file):
    fake = FakeSmi(h100_gpus(2))
    run(fake, {"locked_gpu_clocks": {"min": 1980, "max": 1980}}, state_file)
    result, tool = run(fake, {"reset_locked_gpu_clocks": True}, state_file)
    assert result["changed"] is True
    assert setter_calls(tool) == [["-i", "0", "-rgc"], ["-i", "1", "-rgc"]]
    assert queries(tool) == 2
    assert result["gpus"][0]["before"] == {"locked_gpu_clocks": {"min": 1980, "max": 1980}}
    assert result["gpus"][0]["after"] == {"locked_gpu_clocks": "reset"}
    assert read_state(state_file)["gpus"][uuid(0)]["locked_gpu_clocks"] is None
    result, tool = run(fake, {"reset_locked_gpu_clocks": True}, state_file)
    assert result["changed"] is False and setter_calls(tool) == []
    assert result["gpus"][0]["before"] == {"locked_gpu_clocks": "reset"}


def test_reset_in_check_mode_predicts_and_writes_nothing(state_file):
    fake = FakeSmi(h100_gpus(2))
    run(fake, {"locked_gpu_clocks": {"min": 1980, "max": 1980}}, state_file)
    recorded = read_state(state_file)
    result, tool = run(fake, {"reset_locked_gpu_clocks": True}, state_file, check_mode=True, diff=True)
    assert result["changed"] is True and result["state_file_changed"] is True
    assert setter_calls(tool) == [] and queries(tool) == 1
    assert result["diff"]["after"]["GPU 1 %s" % uuid(1)] == {"locked_gpu_clocks": "reset"}
    assert read_state(state_file) == recorded


def test_reset_with_no_record_applies_once(state_file):
    fake = FakeSmi(h100_gpus(1))
    result, tool = run(fake, {"reset_locked_memory_clocks": True}, state_file)
    assert setter_calls(tool) == [["-i", "0", "-rmc"]]
    assert result["gpus"][0]["before"] == {"locked_memory_clocks": None}


# The shape of a clock option is Ansible's argument validation: it fails in AnsibleModule(), before nvidia-smi is
# looked up, with Ansible's own messages (a raw option would let every one of these through to the module).
@pytest.mark.parametrize("option,value,needle", [
    ("locked_gpu_clocks", {"min": 1000}, "missing required arguments: max found in locked_gpu_clocks"),
    ("locked_memory_clocks", {"max": 2619}, "missing required arguments: min found in locked_memory_clocks"),
    ("application_clocks", {"memory": 2619}, "missing required arguments: graphics found in application_clocks"),
    ("application_clocks", {"min": 1980, "max": 1980}, "missing required arguments: graphics, memory"),
    ("locked_gpu_clocks", {"min": 1000, "max": 1500, "speed": 1}, "locked_gpu_clocks.speed. Supported parameters "
                                                                  "include: max, min"),
    ("locked_gpu_clocks", {"min": "fast", "max": 1500}, "cannot be converted to an int"),
    ("locked_gpu_clocks", {"min": 1410.5, "max": 1980}, "cannot be converted to an int"),
    ("locked_gpu_clocks", "reset", "dictionary requested, could not parse JSON or key=value"),
    ("locked_gpu_clocks", ["1000", "1500"], "dictionary requested, could not parse JSON or key=value"),
    ("reset_application_clocks", "maybe", "'maybe' is not a valid boolean"),
])
def test_invalid_clock_shapes_fail_in_argument_validation(state_file, option, value, needle):
    result, tool = run(FakeSmi(h100_gpus(1)), {option: value}, state_file)
    assert result["failed"] is True
    assert needle in result["msg"], result["msg"]
    assert tool.calls == []
    assert not os.path.exists(state_file)


@pytest.mark.parametrize("option,reset", [
    ("locked_gpu_clocks", True), ("locked_memory_clocks", True), ("locked_gpu_clocks", False),
])
def test_a_value_and_its_reset_switch_together_are_refused(state_file, option, reset):
    # false counts too: Ansible's mutually_exclusive looks at which options are given (the role leaves it out)
    result, tool = run(FakeSmi(h100_gpus(1)), {option: {"min": 1980, "max": 1980}, "reset_" + option: reset},
                       state_file)
    assert result["failed"] is True
    assert "parameters are mutually exclusive: %s|reset_%s" % (option, option) in result["msg"]
    assert tool.calls == []


def test_application_clocks_and_their_reset_together_are_refused(state_file):
    result, tool = run(FakeSmi(h100_gpus(1)), {"application_clocks": {"memory": 2619, "graphics": 1980},
                                               "reset_application_clocks": True}, state_file)
    assert result["failed"] is True
    assert "mutually exclusive: application_clocks|reset_application_clocks" in result["msg"]
    assert tool.calls == []


def test_clock_values_given_as_strings_are_converted(state_file):
    result, tool = run(FakeSmi(h100_gpus(1)), {"locked_gpu_clocks": {"min": "1410", "max": "1980"}}, state_file)
    assert setter_calls(tool) == [["-i", "0", "-lgc", "1410,1980"]]
    assert result["gpus"][0]["after"] == {"locked_gpu_clocks": {"min": 1410, "max": 1980}}


# What an argument spec cannot express (min <= max, no negative value, a positive max) the module checks before it
# runs anything, with its own messages.
@pytest.mark.parametrize("option,value,needle", [
    # the contract's one reader of a request (module_utils/gpu_settings.py), preflight's messages
    ("locked_gpu_clocks", {"min": 1800, "max": 1500},
     "locked_gpu_clocks: min (1800 MHz) must not be greater than max (1500 MHz)"),
    ("locked_memory_clocks", {"min": 2619, "max": 1593},
     "locked_memory_clocks: min (2619 MHz) must not be greater than max (1593 MHz)"),
    ("locked_gpu_clocks", {"min": -5, "max": 1500}, "locked_gpu_clocks: min must not be negative, got -5"),
    ("locked_gpu_clocks", {"min": 0, "max": 0}, "locked_gpu_clocks: max must be a positive number of MHz, got 0"),
    ("locked_gpu_clocks", {"min": True, "max": 1500},
     "locked_gpu_clocks: min must be a whole number of MHz, got boolean True"),
    ("application_clocks", {"memory": 2619, "graphics": 0},
     "application_clocks: graphics must be a positive number of MHz, got 0"),
    ("application_clocks", {"memory": -1, "graphics": 1980},
     "application_clocks: memory must be a positive number of MHz, got -1"),
])
def test_clock_values_out_of_order_or_range_fail_before_any_call(state_file, option, value, needle):
    result, tool = run(FakeSmi(h100_gpus(1)), {option: value, "power_limit_watts": 500}, state_file)
    assert result["failed"] is True
    assert result["msg"] == needle
    assert tool.calls == []


def test_lowest_locked_min_is_zero(state_file):
    result, tool = run(FakeSmi(h100_gpus(1)), {"locked_gpu_clocks": {"min": 0, "max": 1980}}, state_file)
    assert result.get("failed") is not True, result
    assert setter_calls(tool) == [["-i", "0", "-lgc", "0,1980"]]


def test_reset_switch_false_alone_changes_nothing(state_file):
    result, tool = run(FakeSmi(h100_gpus(1)), {"reset_locked_gpu_clocks": False}, state_file)
    assert result["changed"] is False
    assert setter_calls(tool) == [] and queries(tool) == 1
    assert result["gpus"][0]["before"] == {} and not os.path.exists(state_file)


def test_one_setting_is_required(state_file):
    result, tool = run(FakeSmi(h100_gpus(1)), {"gpus": ["0"]}, state_file)
    assert result["failed"] is True and "one of the following is required" in result["msg"]
    assert tool.calls == []


# --------------------------------------------------------------------------- application clocks

def test_application_clocks_set_and_read_back(state_file):
    fake = FakeSmi(h100_gpus(2))
    result, tool = run(fake, {"application_clocks": {"memory": 2619, "graphics": 1755}}, state_file)
    assert setter_calls(tool) == [["-i", "0", "-ac", "2619,1755"], ["-i", "1", "-ac", "2619,1755"]]
    assert result["gpus"][1]["before"] == {"application_clocks": {"memory": 2619, "graphics": 1980}}
    assert result["gpus"][1]["after"] == {"application_clocks": {"memory": 2619, "graphics": 1755}}
    assert queries(tool) == 2
    result, tool = run(fake, {"application_clocks": {"memory": 2619, "graphics": 1755}}, state_file)
    assert result["changed"] is False and setter_calls(tool) == []


def test_application_clocks_reset_only_where_not_default(state_file):
    gpus = h100_gpus(3)
    gpus[1]["clocks.applications.graphics"] = 1500
    result, tool = run(FakeSmi(gpus), {"reset_application_clocks": True}, state_file)
    assert setter_calls(tool) == [["-i", "1", "-rac"]]
    assert result["gpus"][1]["after"] == {"application_clocks": {"memory": 2619, "graphics": 1980}}
    assert read_state(state_file)["gpus"][uuid(1)]["application_clocks"] is None


def test_application_clocks_above_max_fail(state_file):
    result, tool = run(FakeSmi(h100_gpus(1)), {"application_clocks": {"memory": 3201, "graphics": 1980}}, state_file)
    assert result["failed"] is True and "clocks.max.memory=2619" in result["msg"]
    assert setter_calls(tool) == []


def test_application_clocks_not_supported_fail(state_file):
    gpus = h100_gpus(1, **{"clocks.applications.graphics": None, "clocks.applications.memory": None})
    result, tool = run(FakeSmi(gpus), {"application_clocks": {"memory": 2619, "graphics": 1980}}, state_file)
    assert result["failed"] is True and "not supported" in result["msg"]
    assert setter_calls(tool) == []


# --------------------------------------------------------------------------- persistence and mixes

def test_persistence_only_where_disabled(state_file, warnings):
    gpus = h100_gpus(4)
    gpus[2]["persistence_mode"] = "Disabled"
    result, tool = run(FakeSmi(gpus), {"persistence_mode": True}, state_file)
    assert setter_calls(tool) == [["-i", "2", "-pm", "1"]]
    assert result["gpus"][2]["before"] == {"persistence_mode": False}
    assert result["gpus"][2]["after"] == {"persistence_mode": True}
    assert warnings == []


def test_all_settings_in_order_and_one_read_back(state_file):
    gpus = h100_gpus(1, persistence_mode="Disabled")
    result, tool = run(FakeSmi(gpus), {
        "persistence_mode": True, "power_limit_watts": 600, "application_clocks": {"memory": 2619, "graphics": 1755},
        "locked_gpu_clocks": {"min": 1755, "max": 1755}, "locked_memory_clocks": {"min": 2619, "max": 2619},
    }, state_file)
    assert result.get("failed") is not True, result
    assert [c[2] for c in setter_calls(tool)] == ["-pm", "-pl", "-ac", "-lgc", "-lmc"]
    assert queries(tool) == 2
    entry = read_state(state_file)["gpus"][uuid(0)]
    assert entry["persistence_mode"] is True and entry["power_limit_watts"] == 600
    assert entry["application_clocks"] == {"memory": 2619, "graphics": 1755}


def test_persistence_disabled_warns_when_other_settings_change(state_file, warnings):
    gpus = h100_gpus(2, persistence_mode="Disabled")
    run(FakeSmi(gpus), {"power_limit_watts": 400}, state_file)
    assert any("persistence mode is disabled" in w for w in warnings)


def test_state_file_written_atomically_0644_with_directory(state_file):
    run(FakeSmi(h100_gpus(1)), {"power_limit_watts": 500}, state_file)
    assert oct(os.stat(state_file).st_mode & 0o777) == "0o644"
    data = read_state(state_file)
    assert data["version"] == 1
    assert list(data["gpus"]) == [uuid(0)]
    assert [n for n in os.listdir(os.path.dirname(state_file)) if n != "nvidia_smi_state.json"] == []


def test_state_file_only_change_counts_and_keeps_other_gpus(state_file):
    os.makedirs(os.path.dirname(state_file))
    other = {"GPU-other": {"index": 9, "power_limit_watts": 300}}
    with open(state_file, "w") as f:
        json.dump({"version": 1, "gpus": other}, f)
    # live value already right, but nothing recorded for the boot unit yet: the file changes
    result, tool = run(FakeSmi(h100_gpus(1)), {"power_limit_watts": 700}, state_file)
    assert setter_calls(tool) == []
    assert result["changed"] is True and result["state_file_changed"] is True
    data = read_state(state_file)["gpus"]
    assert data["GPU-other"] == other["GPU-other"]
    assert data[uuid(0)]["power_limit_watts"] == 700


def test_unreadable_state_file_is_ignored_with_a_warning(state_file, warnings):
    os.makedirs(os.path.dirname(state_file))
    with open(state_file, "w") as f:
        f.write("{not json")
    result, tool = run(FakeSmi(h100_gpus(1)), {"locked_gpu_clocks": {"min": 1980, "max": 1980}}, state_file)
    assert any(w.startswith("ignoring the state file: %s cannot be read" % state_file) for w in warnings)
    assert setter_calls(tool) == [["-i", "0", "-lgc", "1980,1980"]]
    assert read_state(state_file)["gpus"][uuid(0)]["locked_gpu_clocks"]["max"] == 1980


def test_check_mode_never_writes_state_file_for_locks(state_file):
    result, tool = run(FakeSmi(h100_gpus(2)), {"locked_gpu_clocks": {"min": 1980, "max": 1980}}, state_file,
                       check_mode=True)
    assert result["changed"] is True and result["state_file_changed"] is True
    assert setter_calls(tool) == []
    assert not os.path.exists(os.path.dirname(state_file))


# ------------------------------------------------------------------------------ documentation vs argument spec

class _Captured(Exception):
    pass


def _argument_spec():
    seen = {}

    def fake(**kwargs):
        seen.update(kwargs)
        raise _Captured()

    with mock.patch.object(module, "AnsibleModule", fake):
        with pytest.raises(_Captured):
            module.main()
    return seen


def test_documentation_matches_the_argument_spec():
    """The part of ansible-test's validate-modules that a unit run can check: types, suboptions, defaults, rules."""
    import yaml

    doc = yaml.safe_load(module.DOCUMENTATION)["options"]
    spec = _argument_spec()

    def compare(doc_options, spec_options, where):
        assert sorted(doc_options) == sorted(spec_options), where
        for name, d in doc_options.items():
            s = spec_options[name]
            assert d.get("type", "str") == s.get("type", "str"), (where, name)
            assert d.get("elements") == s.get("elements"), (where, name)
            assert d.get("default") == s.get("default"), (where, name)
            assert bool(d.get("required")) == bool(s.get("required")), (where, name)
            if "suboptions" in d or "options" in s:
                compare(d["suboptions"], s["options"], "%s.%s" % (where, name))

    compare(doc, spec["argument_spec"], "options")
    assert spec["mutually_exclusive"] == [["locked_gpu_clocks", "reset_locked_gpu_clocks"],
                                          ["locked_memory_clocks", "reset_locked_memory_clocks"],
                                          ["application_clocks", "reset_application_clocks"]]
    for option, reset_option in module.CLOCK_OPTIONS:
        assert "O(%s)" % option in " ".join(doc[reset_option]["description"])
    assert set(spec["required_one_of"][0]) == set(doc) - set(["gpus", "state_file", "nvidia_smi_path"])
    assert spec["supports_check_mode"] is True


# ------------------------------------------------------------------------------------ replaced GPUs

def test_the_record_of_a_replaced_gpu_is_dropped_and_an_absent_gpus_kept(state_file, warnings):
    """A GPU replaced in its slot (or a system disk moved to other hardware: the scale lab's clones) leaves a record
    the boot unit could never apply; it is dropped when the file is written. A GPU missing from an empty slot (off
    the bus) keeps its record: it may come back."""
    gpus = h100_gpus(3)
    run(FakeSmi(gpus), {"power_limit_watts": 500}, state_file)
    assert sorted(read_state(state_file)["gpus"]) == [uuid(0), uuid(1), uuid(2)]
    new = h100_gpus(3)
    new[1]["uuid"] = "GPU-0a0a0a0a-1111-2222-3333-444444444444"   # slot of GPU 1 now holds another GPU
    del new[2]                                                     # GPU 2 fell off the bus: its slot is empty
    result, _tool = run(FakeSmi(new), {"power_limit_watts": 500}, state_file)
    assert result["state_file_changed"] is True
    recorded = read_state(state_file)["gpus"]
    assert sorted(recorded) == sorted([uuid(0), uuid(2), "GPU-0a0a0a0a-1111-2222-3333-444444444444"])
    assert any("the record of GPU %s at 00000000:%s:00.0 is dropped" % (uuid(1), BUSES[1]) in w and
               "GPU-0a0a0a0a-1111-2222-3333-444444444444" in w for w in warnings), warnings
    # check mode writes nothing
    again = h100_gpus(3)
    again[0]["uuid"] = "GPU-0b0b0b0b-1111-2222-3333-444444444444"
    before = read_state(state_file)
    result, _tool = run(FakeSmi(again), {"power_limit_watts": 500}, state_file, check_mode=True)
    assert result["changed"] is True and read_state(state_file) == before


# ------------------------------------------------------------------ supported clock pairs (recorded H200)

R580 = os.path.join(os.path.dirname(__file__), os.pardir, "module_utils", "fixtures", "nvidia_smi", "r580")


def recorded_h200():
    """The lent H200's GPU as its own --query-gpu state line and -q -x (driver 580.159.04) describe it."""
    with open(os.path.join(R580, "q-x-h200.xml")) as f:
        xml = f.read()
    gpu = dict(H100, **{"name": "NVIDIA H200", "index": 0, "uuid": "GPU-20925cba-6a8d-6b08-86fc-cd87ffd86d29",
                        "pci.bus_id": "00000000:00:06.0", "clocks.max.memory": 3201,
                        "clocks.applications.memory": 3201, "clocks.default_applications.memory": 3201})
    fake = FakeSmi([gpu])
    fake.xml_text = xml
    return fake


def xml_reads(tool):
    return sum(1 for c in tool.calls if c[1:] == ["-q", "-x"])


def test_application_clocks_h100_memory_value_refused_on_h200(state_file):
    fake = recorded_h200()
    result, tool = run(fake, {"application_clocks": {"memory": 2619, "graphics": 1980}}, state_file)
    assert result["failed"] is True
    assert "memory 2619 MHz is not supported by GPU 0" in result["msg"]
    assert "its memory clocks are 3201, 2201 MHz" in result["msg"]
    assert setter_calls(tool) == [] and xml_reads(tool) == 1
    assert not os.path.exists(state_file)


def test_application_clocks_unsupported_graphics_refused_in_check_mode(state_file):
    fake = recorded_h200()
    result, tool = run(fake, {"application_clocks": {"memory": 3201, "graphics": 1972}}, state_file, check_mode=True)
    assert result["failed"] is True
    assert "graphics 1972 MHz is not supported with memory 3201 MHz" in result["msg"]
    assert setter_calls(tool) == []


def test_application_clocks_supported_pair_on_h200_applies(state_file):
    fake = recorded_h200()
    result, tool = run(fake, {"application_clocks": {"memory": 2201, "graphics": 1980}}, state_file)
    assert result.get("failed") is not True, result
    assert setter_calls(tool) == [["-i", "0", "-ac", "2201,1980"]]


def test_application_clocks_converged_reads_no_supported_list(state_file):
    fake = recorded_h200()
    for _run in range(2):  # the first run records the pair in the state file; neither reads the list
        result, tool = run(fake, {"application_clocks": {"memory": 3201, "graphics": 1980}}, state_file)
        assert setter_calls(tool) == [] and xml_reads(tool) == 0
    assert result["changed"] is False


def test_application_clocks_unlisted_pairs_left_to_the_driver(state_file, warnings):
    gpus = h100_gpus(1, supported={})
    result, tool = run(FakeSmi(gpus), {"application_clocks": {"memory": 2619, "graphics": 1755}}, state_file)
    assert result.get("failed") is not True and setter_calls(tool) == [["-i", "0", "-ac", "2619,1755"]]


def test_application_clocks_memory_clock_listed_without_graphics_clocks(state_file):
    gpus = h100_gpus(1, supported={2619: []})
    result, tool = run(FakeSmi(gpus), {"application_clocks": {"memory": 2619, "graphics": 1755}}, state_file)
    assert result["failed"] is True and "no graphics clock is listed with it" in result["msg"]
    assert setter_calls(tool) == []
