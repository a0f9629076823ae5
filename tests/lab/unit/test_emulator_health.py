"""The TEST EMULATORS behind the node health check's new checks, run as subprocesses and read through the health
check's own parsers (roles/slurm_compute/files/clusterforge_health/, the program's package, installed and
imported as the role installs it), so the emulators cannot drift from what the check reads: dmesg (Xids and SXids), nvidia-smi's nvlink -s/-e,
its PCIe link width, MIG mode and clock event reasons, and dcgmi health incidents with a DCGM error code."""

import importlib
import json
import os
import re
import subprocess
import sys
import types

import pytest
import yaml

from conftest import EMULATORS, ROOT

DMESG = os.path.join(EMULATORS, "dmesg")
NVIDIA_SMI = os.path.join(EMULATORS, "nvidia-smi")
DCGMI = os.path.join(EMULATORS, "dcgmi")
FILES = os.path.join(ROOT, "roles", "slurm_compute", "files")
# util-linux dmesg: "[%5lu.%06lu] " then the message
STAMP = re.compile(r"^\[[ \d]{5,}\.\d{6}\] \S")


@pytest.fixture(scope="module")
def hc(tmp_path_factory):
    """The health check's package, installed as the role installs it (the program, its package's modules as
    roles/slurm_compute/vars/main.yml lists them, and beside them the modules they import, as
    roles/slurm_compute/tasks/config.yml names them), its modules as attributes by name."""
    folder = tmp_path_factory.mktemp("hc")
    with open(os.path.join(FILES, "slurm_healthcheck.py")) as handle:
        (folder / "slurm-healthcheck").write_text(handle.read())
    with open(os.path.join(ROOT, "roles", "slurm_compute", "tasks", "config.yml")) as handle:
        installed = re.findall(r"/clusterforge_(\w+)\.py", handle.read())
    assert "healthcheck" in installed and "dcgm" in installed, installed
    for name in installed:
        with open(os.path.join(ROOT, "plugins", "module_utils", name + ".py")) as handle:
            (folder / ("clusterforge_%s.py" % name)).write_text(handle.read())
    with open(os.path.join(ROOT, "roles", "slurm_compute", "vars", "main.yml")) as handle:
        modules = yaml.safe_load(handle)["__slurm_compute_healthcheck_package"]
    (folder / "clusterforge_health").mkdir()
    for name in modules:
        with open(os.path.join(FILES, "clusterforge_health", name + ".py")) as handle:
            (folder / "clusterforge_health" / (name + ".py")).write_text(handle.read())
    saved_path, saved_modules = list(sys.path), set(sys.modules)
    sys.path.insert(0, str(folder))
    try:
        return types.SimpleNamespace(**dict((name, importlib.import_module("clusterforge_health." + name))
                                            for name in modules if name != "__init__"))
    finally:
        sys.path[:] = saved_path
        for key in set(sys.modules) - saved_modules:
            if key.startswith("clusterforge_"):
                del sys.modules[key]


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ, CLUSTERFORGE_EMU_STATE_DIR=str(tmp_path / "state"),
             CLUSTERFORGE_EMU_RUN_DIR=str(tmp_path / "run"))
    for name in ("CLUSTERFORGE_EMU_UPTIME", "CLUSTERFORGE_EMU_GPU_COUNT", "CLUSTERFORGE_EMU_DCGM_GPUS"):
        e.pop(name, None)
    return e


def emu(tool, env, *args):
    p = subprocess.run([sys.executable, tool] + [str(a) for a in args], env=env, capture_output=True, text=True,
                       timeout=60, check=False)
    return p.returncode, p.stdout, p.stderr


def ok(tool, env, *args):
    rc, out, err = emu(tool, env, *args)
    assert rc == 0, (args, rc, out, err)
    return out


def test_emulator_file_headers():
    for path in (DMESG, NVIDIA_SMI, DCGMI):
        with open(path) as handle:
            lines = handle.read().splitlines()
        assert lines[0] == "#!/usr/bin/env python3"
        assert lines[1].startswith("# ClusterForge TEST EMULATOR of %s: not the real tool. Test-only; installed only "
                                   "into lab and molecule containers." % os.path.basename(path))
        assert os.access(path, os.X_OK), path


# ------------------------------------------------------------------------------------------------ dmesg

def test_dmesg_prints_a_boot_in_the_kernels_format(env):
    out = ok(DMESG, env)
    lines = out.splitlines()
    assert lines and all(STAMP.match(line) for line in lines), out
    assert lines[0].startswith("[    0.000000] Linux version ")
    assert any("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07" in line for line in lines)
    assert ok(DMESG, env, "-k") == out


def test_dmesg_injected_xids_and_sxids_read_as_the_check_reads_them(env, hc):
    env["CLUSTERFORGE_EMU_UPTIME"] = "86400.5"
    ok(DMESG, env, "--emu-xid", "0", "79")
    ok(DMESG, env, "--emu-xid", "3", "48")
    ok(DMESG, env, "--emu-xid", "7", "94", "Contained: SM (0x1). RST: No, D-RST: No")
    ok(DMESG, env, "--emu-sxid", "1", "24007", "fatal")
    ok(DMESG, env, "--emu-sxid", "0", "20009", "nonfatal", "Link 28 RX Short Error Rate")
    lines = ok(DMESG, env).splitlines()
    injected = lines[-5:]
    assert all(STAMP.match(line) for line in injected)
    stamps = [float(hc.check_xid.DMESG_LINE_RE.match(line).group(1)) for line in injected]
    assert stamps == sorted(stamps) and len(set(stamps)) == 5 and stamps[0] == 86400.5  # each after the one before
    xids = [hc.check_xid.XID_RE.search(line) for line in injected[:3]]
    assert [(m.group(1), m.group(2)) for m in xids] == [
        ("0000:18:00", "79"), ("0000:5d:00", "48"), ("0000:db:00", "94")]
    assert injected[0].endswith("NVRM: Xid (PCI:0000:18:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen "
                                "off the bus.")
    assert hc.check_xid._xid_detail(xids[2].group(3)) == "Contained: SM (0x1). RST: No, D-RST: No"
    sxids = [hc.check_xid.SXID_RE.search(line) for line in injected[3:]]
    assert [(m.group(1), m.group(3), m.group(4)) for m in sxids] == [
        ("nvidia-nvswitch1", "24007", "Fatal"), ("nvidia-nvswitch0", "20009", "Non-fatal")]


def test_dmesg_state_survives_and_is_reset(env):
    ok(DMESG, env, "--emu-line", "mlx5_core 0000:0c:00.0: Port module event: module 0, Cable unplugged")
    assert "Cable unplugged" in ok(DMESG, env)
    ok(DMESG, env, "--emu-reset")
    assert "Cable unplugged" not in ok(DMESG, env)


@pytest.mark.parametrize("args", [["--emu-xid", "9", "79"], ["--emu-xid", "0", "x"], ["--emu-sxid", "0", "1", "maybe"],
                                  ["--emu-what"], ["-T"]])
def test_dmesg_refuses_what_it_does_not_emulate(env, args):
    rc, out, err = emu(DMESG, env, *args)
    assert rc != 0 and out == "" and err


# ------------------------------------------------------------------------------------------------ nvidia-smi

def test_nvlink_status_and_errors_of_an_hgx_h100(env, hc):
    status = hc.check_nvlink.parse_nvlink_status(ok(NVIDIA_SMI, env, "nvlink", "-s"))
    assert len(status) == 8 and all(len(links) == 18 and all(links.values()) for _i, _u, links in status)
    assert status[0][1].startswith("GPU-")
    ok(NVIDIA_SMI, env, "--emu-nvlink-down", "2", "4")
    ok(NVIDIA_SMI, env, "--emu-nvlink-down", "5", "all")
    ok(NVIDIA_SMI, env, "--emu-nvlink-up", "5", "0")
    status = dict((i, links) for i, _u, links
                  in hc.check_nvlink.parse_nvlink_status(ok(NVIDIA_SMI, env, "nvlink", "--status")))
    assert [n for n, up in status["2"].items() if not up] == [4]
    assert sum(status["5"].values()) == 1 and status["5"][0]
    text = ok(NVIDIA_SMI, env, "nvlink", "-s", "-i", "2")
    assert text.splitlines()[5] == "\t Link 4: <inactive>" and text.splitlines()[1] == "\t Link 0: 26.562 GB/s"
    errors = hc.check_nvlink.parse_nvlink_errors(ok(NVIDIA_SMI, env, "nvlink", "-e"))
    assert len(errors) == 8 and {len(links) for links in errors.values()} == {18}
    first = errors[sorted(errors)[0]]["0"]
    assert first == {"Replay Errors": 0, "Recovery Errors": 0, "CRC Errors": 0}
    ok(NVIDIA_SMI, env, "--emu-nvlink-errors", "1", "7", "crc", "12")
    ok(NVIDIA_SMI, env, "--emu-nvlink-errors", "1", "7", "crc", "3")
    ok(NVIDIA_SMI, env, "--emu-nvlink-errors", "1", "7", "replay", "2")
    text = ok(NVIDIA_SMI, env, "nvlink", "-e", "-i", "1")
    assert "\t Link 7: CRC Errors: 15\n" in text and "\t Link 7: Replay Errors: 2\n" in text
    assert list(hc.check_nvlink.parse_nvlink_errors(text).values())[0]["7"] == {
        "Replay Errors": 2, "Recovery Errors": 0, "CRC Errors": 15}


@pytest.mark.parametrize("args", [["nvlink"], ["nvlink", "-s", "-x"], ["--emu-nvlink-down", "0", "18"],
                                  ["--emu-nvlink-errors", "0", "1", "bad", "1"], ["--emu-pcie-width", "0", "12"],
                                  ["--emu-mig", "0", "yes"], ["--emu-throttle", "0", "hw_idle", "1"]])
def test_nvidia_smi_refuses_bad_nvlink_and_injection_arguments(env, args):
    assert emu(NVIDIA_SMI, env, *args)[0] != 0


def extras(env, hc, prefix="clocks_event_reasons"):
    fields = hc.check_gpu.EXTRA_FIELDS + ["%s.%s" % (prefix, name) for name, _label in hc.check_gpu.THROTTLE_REASONS]
    out = ok(NVIDIA_SMI, env, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits")
    return [[c.strip() for c in line.split(",")] for line in out.splitlines()]


def test_the_health_checks_query_of_pcie_mig_and_clock_events(env, hc):
    rows = extras(env, hc)
    assert rows[0] == ["0", "16", "16", "Disabled", "Not Active", "Not Active", "Not Active"]
    assert len(rows) == 8
    ok(NVIDIA_SMI, env, "--emu-pcie-width", "1", "8")
    ok(NVIDIA_SMI, env, "--emu-mig", "2", "1")
    ok(NVIDIA_SMI, env, "--emu-throttle", "3", "sw_thermal_slowdown", "1")
    ok(NVIDIA_SMI, env, "--emu-throttle", "4", "hw_power_brake_slowdown", "1")
    ok(NVIDIA_SMI, env, "--emu-temp", "5", "90")
    rows = extras(env, hc)
    assert rows[1][1:3] == ["8", "16"]
    assert rows[2][3] == "Enabled"
    assert rows[3][4:] == ["Not Active", "Not Active", "Active"]
    assert rows[4][4:] == ["Active", "Not Active", "Not Active"]  # a power brake is a HW slowdown
    assert rows[5][4:] == ["Active", "Active", "Not Active"]  # so is a hot GPU's thermal slowdown
    assert extras(env, hc, "clocks_throttle_reasons") == rows  # the names before driver R535
    out = ok(NVIDIA_SMI, env, "--query-gpu=clocks_event_reasons.active", "--format=csv,noheader")
    assert out.splitlines()[:6] == ["0x0000000000000001", "0x0000000000000001", "0x0000000000000001",
                                    "0x0000000000000020", "0x0000000000000088", "0x0000000000000048"]
    ok(NVIDIA_SMI, env, "--emu-throttle", "3", "sw_thermal_slowdown", "0")
    assert extras(env, hc)[3][4:] == ["Not Active", "Not Active", "Not Active"]


def test_the_xml_report_shows_the_injected_width_mig_and_reasons(env):
    from ansible_collections.clusterforge.gpu.plugins.module_utils import nvidia_smi as smi
    ok(NVIDIA_SMI, env, "--emu-mig", "0", "1")
    ok(NVIDIA_SMI, env, "--emu-throttle", "1", "hw_thermal_slowdown", "1")
    ok(NVIDIA_SMI, env, "--emu-pcie-width", "2", "4")
    xml = ok(NVIDIA_SMI, env, "-q", "-x")
    gpus = smi.parse_xml(xml)["gpus"]
    assert gpus[0]["mig_enabled"] is True and gpus[1]["mig_enabled"] is False
    assert gpus[1]["clock_event_reasons"]["hw_thermal_slowdown"] is True
    assert gpus[1]["clock_event_reasons"]["hw_slowdown"] is True
    assert gpus[0]["clock_event_reasons"]["hw_slowdown"] is False
    assert "<current_link_width>4x</current_link_width>" in xml


def test_faults_survive_a_reboot_and_an_old_state_file_still_reads(env, hc, tmp_path):
    ok(NVIDIA_SMI, env, "--emu-nvlink-down", "0", "1")
    state = json.loads(ok(NVIDIA_SMI, env, "--emu-state"))
    path = state["paths"]["state"]
    # a state file written before these injections existed (the lab keeps /var/lib/clusterforge-emu)
    for gpu in state["hardware"]["gpus"]:
        for key in ("nvlink_down", "nvlink_errors", "pcie_width", "mig", "throttle"):
            gpu.pop(key, None)
    with open(path, "w") as handle:
        json.dump(state["hardware"], handle)
    assert extras(env, hc)[0] == ["0", "16", "16", "Disabled", "Not Active", "Not Active", "Not Active"]
    assert all(all(links.values()) for _i, _u, links
               in hc.check_nvlink.parse_nvlink_status(ok(NVIDIA_SMI, env, "nvlink", "-s")))


# ------------------------------------------------------------------------------------------------ dcgmi

def test_dcgmi_health_incidents_with_a_code_carry_dcgms_message(env, hc):
    ok(DCGMI, env, "health", "-s", "a")
    ok(DCGMI, env, "--emu-health", "0", "power", "warn", "12")
    ok(DCGMI, env, "--emu-health", "2", "memory", "fail", "4")
    ok(DCGMI, env, "--emu-health", "3", "nvlink", "fail", "14")
    ok(DCGMI, env, "--emu-health", "4", "pcie", "warn")  # no code: the emulator's own message
    body = json.loads(ok(DCGMI, env, "health", "-c", "-j"))["body"]
    incidents = dict(((i["entity"], i["system"]), i) for i in hc.check_dcgm._dcgm_incidents(body))
    assert hc.check_dcgm.dcgm_codes(incidents[("0", "Power system")]["text"]) == [12]
    assert incidents[("0", "Power system")]["text"] == (
        "Detected clocks event due to power violation in GPU 0. Monitor the power conditions. This GPU can still "
        "perform workload.")
    assert hc.check_dcgm.dcgm_codes(incidents[("2", "Memory system")]["text"]) == [4]
    assert hc.check_dcgm.dcgm_codes(incidents[("3", "NVLINK system")]["text"]) == [14]
    assert hc.check_dcgm.dcgm_codes(incidents[("4", "PCIe system")]["text"]) == [3]
    # the plain table wraps the message at 54 characters, as DCGM 4.6.1 does (fixture health-c-warning-power)
    table = ok(DCGMI, env, "health", "-c")
    assert "|                           | Detected clocks event due to power violation in GPU 0.   |\n" \
           "|                           | Monitor the power conditions. This GPU can still         |\n" \
           "|                           | perform workload.                                        |\n" in table


def test_dcgmi_refuses_a_code_of_another_system(env):
    rc, out, _err = emu(DCGMI, env, "--emu-health", "0", "memory", "fail", "12")
    assert rc != 0 and "codes: 3 pcie, 4 memory" in out
