# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lspci/setpci/ibstat/ibdiagnet TEST EMULATORS, run as subprocesses and read through the real parsers,
so the emulators cannot drift from the formats the modules parse; plus pcie_acs end to end on the emulators."""

import os
import re
import subprocess
import sys

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.module_utils import infiniband as ib
from ansible_collections.clusterforge.gpu.plugins.module_utils import pci
from ansible_collections.clusterforge.gpu.plugins.modules import ibdiagnet as ibdiagnet_module
from ansible_collections.clusterforge.gpu.plugins.modules import ib_port_info
from ansible_collections.clusterforge.gpu.plugins.modules import pcie_acs
from ansible_collections.clusterforge.gpu.plugins.modules import pcie_acs_info
from ansible_collections.clusterforge.gpu.tests.formats.pci import parse_lspci_acs

EMULATORS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "emulators")
HEADER2 = "# ClusterForge TEST EMULATOR of %s: not the real tool. Test-only; installed only into lab and molecule containers."


@pytest.fixture
def emu(tmp_path, monkeypatch):
    env = dict(os.environ)
    env["CLUSTERFORGE_EMU_STATE_DIR"] = str(tmp_path / "state")
    env["CLUSTERFORGE_EMU_RUN_DIR"] = str(tmp_path / "run")
    env.pop("CLUSTERFORGE_EMU_IB_PROFILE", None)

    def run(tool, *args, **kw):
        e = dict(env)
        e.update(kw.get("env", {}))
        p = subprocess.run([sys.executable, os.path.join(EMULATORS, tool)] + list(args), env=e,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
        return p.returncode, p.stdout, p.stderr
    run.env = env
    run.tmp = tmp_path
    return run


@pytest.mark.parametrize("tool", ["lspci", "setpci", "ibstat", "ibdiagnet"])
def test_emulator_headers_and_exec_bit(tool):
    path = os.path.join(EMULATORS, tool)
    with open(path) as f:
        lines = f.read().splitlines()
    assert lines[0] == "#!/usr/bin/env python3"
    assert lines[1] == HEADER2 % tool
    assert os.access(path, os.X_OK)


def test_lspci_tree_parses_as_hgx(emu):
    rc, out, err = emu("lspci", "-D", "-nn", "-vvv")
    assert rc == 0, err
    devs = pci.parse_lspci_vvv(out)
    gpus = [d for d in devs if pci.device_kind(d) == "gpu"]
    nics = [d for d in devs if pci.device_kind(d) == "nic"]
    assert len(gpus) == 8 and len(nics) == 8
    assert all((g["vendor_id"], g["device_id"]) == ("10de", "2330") for g in gpus)
    assert all((n["vendor_id"], n["device_id"]) == ("15b3", "1021") for n in nics)
    bridges = pci.acs_bridges(devs)
    switch_dsp = [b for b in bridges if "PEX890xx" in b["description"]]
    assert len(switch_dsp) == 16 and all(b["acs_ctl_value"] == "001d" for b in switch_dsp)
    # every GPU sits behind root port -> switch upstream port -> switch downstream port
    for g in gpus:
        assert len(pci.upstream_bridges(devs, g["bdf"])) == 3
    assert not any(d["access_denied"] for d in devs)


def test_lspci_filters_and_plain_format(emu):
    rc, out, dummy = emu("lspci", "-d", "::0604")
    lines = out.splitlines()
    assert rc == 0 and len(lines) == 25 and all(" PCI bridge: " in line for line in lines)
    assert lines[0].startswith("16:01.0 ")  # no domain without -D
    rc, out, dummy = emu("lspci", "-nn", "-d", "10de:")
    assert len(out.splitlines()) == 8 and "3D controller [0302]: NVIDIA Corporation GH100 [H100 SXM5 80GB] [10de:2330] (rev a1)" in out
    rc, out, dummy = emu("lspci", "-vvv", "-s", "1a:00.0")
    devs = parse_lspci_acs(out)
    assert [d["bdf"] for d in devs] == ["0000:1a:00.0"] and devs[0]["acs_enabled"]
    rc, out, err = emu("lspci", "-Q")
    assert rc != 0 and "invalid option" in err


def test_setpci_read_write_and_no_acs_error(emu):
    assert emu("setpci", "-s", "0000:1a:00.0", "ECAP_ACS+0x6.w") == (0, "001d\n", "")
    assert emu("setpci", "-s", "1a:00.0", "ECAP_ACS+0x4.w")[1] == "005f\n"
    assert emu("setpci", "-s", "0000:1a:00.0", "ECAP_ACS+0x6.w=0000")[0] == 0
    assert emu("setpci", "-s", "0000:1a:00.0", "ECAP_ACS+0x6.w")[1] == "0000\n"
    rc, out, err = emu("setpci", "-s", "0000:1b:00.0", "ECAP_ACS+0x6.w")
    assert rc == 1 and "Extended capability 000d not found" in err
    rc, out, err = emu("setpci", "-s", "0000:77:00.0", "ECAP_ACS+0x6.w")
    assert rc == 0 and "No devices selected" in err
    # lspci shows what setpci wrote
    devs = parse_lspci_acs(emu("lspci", "-vvv", "-s", "1a:00.0")[1])
    assert devs[0]["acs_ctl_value"] == "0000" and not devs[0]["acs_enabled"]


def test_acs_registers_are_volatile_but_injections_persist(emu):
    emu("setpci", "-s", "0000:1a:00.0", "ECAP_ACS+0x6.w=0000")
    emu("lspci", "--emu-vfio", "0000:1b:00.0")
    # a container restart empties the tmpfs run dir; the state dir survives
    for name in os.listdir(str(emu.tmp / "run")):
        os.remove(str(emu.tmp / "run" / name))
    assert emu("setpci", "-s", "0000:1a:00.0", "ECAP_ACS+0x6.w")[1] == "001d\n"
    devs = pci.parse_lspci_vvv(emu("lspci", "-D", "-vvv")[1])
    assert pci.vfio_devices(devs) == ["0000:1b:00.0"]


def test_lspci_injections_sriov_vfio_reset(emu):
    assert emu("lspci", "--emu-sriov", "4")[0] == 0
    assert emu("lspci", "--emu-vfio", "1d:00.2")[0] == 0
    devs = pci.parse_lspci_vvv(emu("lspci", "-D", "-nn", "-vvv")[1])
    assert pci.sriov_summary(devs)["vfs_in_use"] == 4
    assert pci.vfio_devices(devs) == ["0000:1d:00.2"]
    emu("setpci", "-s", "0000:1a:00.0", "ECAP_ACS+0x6.w=0000")
    assert emu("lspci", "--emu-reset")[0] == 0
    devs = pci.parse_lspci_vvv(emu("lspci", "-D", "-nn", "-vvv")[1])
    assert pci.sriov_summary(devs)["vfs_in_use"] == 0 and pci.vfio_devices(devs) == []
    assert emu("setpci", "-s", "0000:1a:00.0", "ECAP_ACS+0x6.w")[1] == "001d\n"


@pytest.mark.parametrize("profile,rate", [(None, 400), ("ndr", 400), ("hdr", 200)])
def test_ibstat_profiles(emu, profile, rate):
    env = {"CLUSTERFORGE_EMU_IB_PROFILE": profile} if profile else {}
    rc, out, err = emu("ibstat", env=env)
    assert rc == 0, err
    assert "\n\tCA type: MT4129\n" in out and "\n\t\tRate: %d\n" % rate in out  # real TAB layout
    ports = ib.parse_ibstat(out)
    assert [p["ca"] for p in ports] == ["mlx5_%d" % i for i in range(8)]
    assert all((p["state"], p["physical_state"], p["rate_gbps"], p["link_layer"]) ==
               ("Active", "LinkUp", rate, "InfiniBand") for p in ports)


def test_a_node_identity_gives_its_own_hca_guids(emu):
    """Clones of one node image (the scale lab) each have their own port GUIDs; without an identity file, the lab's."""
    plain = re.findall(r"Port GUID: (0x[0-9a-f]{16})", emu("ibstat", env={"CLUSTERFORGE_EMU_IDENTITY_FILE": "/nonexistent"})[1])
    guids = {}
    for name in ("gpu17", "gpu18"):
        path = emu.tmp / name
        path.write_text(name + "\n")
        guids[name] = re.findall(r"Port GUID: (0x[0-9a-f]{16})", emu("ibstat", env={"CLUSTERFORGE_EMU_IDENTITY_FILE": str(path)})[1])
    assert plain[0] == "0x946dae03003c1a20" and len(plain) == 8
    assert len(set(plain + guids["gpu17"] + guids["gpu18"])) == 24


def test_ibstat_injection_and_single_ca(emu):
    emu("ibstat", "--emu-port-down", "mlx5_3")
    emu("ibstat", "--emu-port-rate", "mlx5_2", "200")
    ports = dict((p["ca"], p) for p in ib.parse_ibstat(emu("ibstat")[1]))
    assert (ports["mlx5_3"]["state"], ports["mlx5_3"]["physical_state"], ports["mlx5_3"]["rate_gbps"]) == (
        "Down", "Polling", 10)
    assert ports["mlx5_2"]["rate_gbps"] == 200
    one = ib.parse_ibstat(emu("ibstat", "mlx5_3", "1")[1])
    assert len(one) == 1 and one[0]["ca"] == "mlx5_3" and one[0]["state"] == "Down"
    assert emu("ibstat", "mlx5_9")[0] != 0
    emu("ibstat", "--emu-reset")
    assert all(p["state"] == "Active" for p in ib.parse_ibstat(emu("ibstat")[1]))


def test_ibdiagnet_clean_and_speed_errors(emu, tmp_path):
    rc, out, err = emu("ibdiagnet", "--ls", "100", "--lw", "4x", "-o", str(tmp_path / "ibd"))
    assert rc == 0, err
    r = ib.parse_ibdiagnet(out)
    assert r["format"] == "ibdiagnet2" and r["summary_found"] and r["total_errors"] == 0
    assert "Speed / Width checks" in [s["name"] for s in r["stages"]]
    assert r["log_file"] == str(tmp_path / "ibd" / "ibdiagnet2.log") and os.path.exists(r["log_file"])
    emu("ibstat", "--emu-port-rate", "mlx5_2", "200")
    r = ib.parse_ibdiagnet(emu("ibdiagnet", "--ls", "100", "--lw", "4x", "-o", str(tmp_path / "ibd"))[1])
    speed = [s for s in r["stages"] if s["name"] == "Speed / Width checks"][0]
    assert speed["errors"] == 1 and r["total_errors"] == 1
    assert any("mlx5_2" in m["text"] and "Unexpected actual link speed 50" in m["text"] for m in r["messages"])


def test_ibdiagnet_hdr_profile_against_ndr_expectation(emu, tmp_path):
    env = {"CLUSTERFORGE_EMU_IB_PROFILE": "hdr"}
    r = ib.parse_ibdiagnet(emu("ibdiagnet", "--ls", "50", "--lw", "4x", "-o", str(tmp_path), env=env)[1])
    assert r["total_errors"] == 0
    r = ib.parse_ibdiagnet(emu("ibdiagnet", "--ls", "100", "--lw", "4x", "-o", str(tmp_path), env=env)[1])
    assert r["total_errors"] == 8
    # the screen shows at most 5 per type, the Summary counts all
    assert sum(1 for m in r["messages"] if "Unexpected actual link speed" in m["text"]) == 5


def test_ibdiagnet_injected_errors_and_reset(emu, tmp_path):
    emu("ibdiagnet", "--emu-errors", "3")
    r = ib.parse_ibdiagnet(emu("ibdiagnet", "-o", str(tmp_path))[1])
    assert [s["errors"] for s in r["stages"] if s["name"] == "Port Counters"] == [3] and r["total_errors"] == 3
    emu("ibdiagnet", "--emu-reset")
    assert ib.parse_ibdiagnet(emu("ibdiagnet", "-o", str(tmp_path))[1])["total_errors"] == 0
    rc, out, dummy = emu("ibdiagnet", "--ls", "42")
    assert rc != 0 and "-E-" in out


def test_ibdiagnet_fails_when_all_ports_down(emu, tmp_path):
    for i in range(8):
        emu("ibstat", "--emu-port-down", "mlx5_%d" % i)
    rc, out, dummy = emu("ibdiagnet", "-o", str(tmp_path))
    assert rc == 1 and "-E-" in out


def emulator_handler(emu):
    def handler(argv, data):
        return emu(os.path.basename(argv[0]), *argv[1:])
    return handler


def test_pcie_acs_end_to_end_on_emulators(emu):
    tool = Tool(emulator_handler(emu))
    r = run_module(pcie_acs, {"scope": "gpu_nic_paths"}, tool)
    assert not r.get("failed"), r
    assert r["changed"] and len(r["bridges"]) == 20  # 4 root ports + 16 switch downstream ports
    assert tool.count("lspci") == 1 and tool.count("ECAP_ACS+0x6.w=0000") == 20
    # the NVMe root port is not on a GPU/NIC path and was left alone
    assert emu("setpci", "-s", "0000:16:01.0", "ECAP_ACS+0x6.w")[1] == "001d\n"
    tool2 = Tool(emulator_handler(emu))
    r2 = run_module(pcie_acs, {"scope": "gpu_nic_paths"}, tool2)
    assert r2["changed"] is False and tool2.count("setpci") == 0 and tool2.count("lspci") == 1
    info = run_module(pcie_acs_info, {"proc_root": str(emu.tmp), "sysfs_root": str(emu.tmp)},
                      Tool(emulator_handler(emu)))
    assert info["gpu_nic_acs_enabled_bridges"] == [] and info["acs_enabled_bridges"] == ["0000:16:01.0"]


def test_pcie_acs_refuses_on_emulated_vfio_then_force(emu):
    emu("lspci", "--emu-sriov", "2")
    r = run_module(pcie_acs, {}, Tool(emulator_handler(emu)))
    assert r["failed"] and "SR-IOV" in r["msg"]
    r = run_module(pcie_acs, {"force": True}, Tool(emulator_handler(emu)))
    assert r["changed"] and len(r["bridges"]) == 21


def test_ib_modules_on_emulators(emu):
    emu("ibstat", "--emu-port-down", "mlx5_3")
    r = run_module(ib_port_info, {"expected_rate_gbps": 400}, Tool(emulator_handler(emu)))
    assert r["active_ports"] == ["mlx5_%d:1" % i for i in range(8) if i != 3]
    assert [m["name"] for m in r["mismatched_ports"]] == ["mlx5_3:1"]
    r = run_module(ibdiagnet_module, {"expected_rate": "ndr", "output_dir": str(emu.tmp / "ibd")},
                   Tool(emulator_handler(emu)))
    assert not r.get("failed") and r["total_errors"] == 0
    emu("ibstat", "--emu-port-rate", "mlx5_5", "200")
    r = run_module(ibdiagnet_module, {"expected_rate": "ndr", "output_dir": str(emu.tmp / "ibd")},
                   Tool(emulator_handler(emu)))
    assert r["failed"] and "Speed / Width checks (1)" in r["msg"] and "mlx5_5" in r["msg"]
