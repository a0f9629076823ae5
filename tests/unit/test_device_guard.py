"""tests/device/guard.py, the read-only guard in front of nvidia-smi and dcgmi on a lent GPU machine: every read the
device check needs passes, every setter is refused (the machine's GPU settings are not ours to change)."""

import importlib.util
import os

import pytest

GUARD = os.path.join(os.path.dirname(__file__), os.pardir, "device", "guard.py")
SPEC = importlib.util.spec_from_file_location("cf_device_guard", GUARD)
guard = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(guard)

READS = [[], ["--version"], ["-L"], ["-q"], ["-q", "-x"], ["-q", "-d", "SUPPORTED_CLOCKS"], ["-i", "0", "-q", "-x"],
         ["--query-gpu=index,uuid", "--format=csv,noheader,nounits"], ["--help-query-gpu"],
         ["--query-compute-apps=pid", "--format=csv,noheader"], ["topo", "-m"], ["nvlink", "-s"],
         ["nvlink", "-e", "-i", "0"]]
SETTERS = [["-pm", "1"], ["-i", "0", "-pm", "1"], ["-pl", "700"], ["-i", "0", "-lgc", "1980,1980"], ["-rgc"],
           ["-ac", "2619,1980"], ["-rac"], ["-lmc", "2619,2619"], ["-rmc"], ["-r"], ["--gpu-reset"], ["-mig", "1"],
           ["-e", "0"], ["-c", "0"], ["nvlink", "-r"], ["topo", "-m", "-x"], ["-i", "0;reboot"], ["-q", "-pl", "1"]]


@pytest.mark.parametrize("args", READS)
def test_reads_pass(args):
    assert guard.smi_allowed(args)


@pytest.mark.parametrize("args", SETTERS)
def test_setters_are_refused(args):
    assert not guard.smi_allowed(args)


def test_dcgmi_level_1_and_health_check_only():
    assert guard.dcgmi_allowed(["diag", "-r", "1", "-j", "--timeout", "300"])
    assert guard.dcgmi_allowed(["health", "-c", "-j"]) and guard.dcgmi_allowed(["-v"])
    for args in (["diag", "-r", "3", "-j"], ["health", "-s", "a"], ["config", "--set", "-P", "400"], ["diag"]):
        assert not guard.dcgmi_allowed(args), args
