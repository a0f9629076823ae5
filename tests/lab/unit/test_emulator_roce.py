# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mlnx_qos TEST EMULATOR (and ibstat's Ethernet link layer), run as subprocesses and read through the real
parser, so the emulator cannot drift from the format roce_qos parses; plus roce_qos and ib_port_info end to end on
the emulators and their fake sysfs tree, as the nccl role's molecule scenario uses them."""

import os
import subprocess
import sys

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.module_utils import roce
from ansible_collections.clusterforge.gpu.plugins.modules import ib_port_info
from ansible_collections.clusterforge.gpu.plugins.modules import roce_qos

EMULATORS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "emulators")
HEADER2 = "# ClusterForge TEST EMULATOR of mlnx_qos: not the real tool. Test-only; installed only into lab and molecule containers."
WANT = [0, 0, 0, 1, 0, 0, 0, 0]


@pytest.fixture
def emu(tmp_path):
    env = dict(os.environ)
    env["CLUSTERFORGE_EMU_STATE_DIR"] = str(tmp_path / "state")
    env.pop("CLUSTERFORGE_EMU_IB_PROFILE", None)

    def run(tool, *args):
        p = subprocess.run([sys.executable, os.path.join(EMULATORS, tool)] + [str(a) for a in args], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
        return p.returncode, p.stdout, p.stderr
    run.sysfs = str(tmp_path / "sys")
    return run


def test_header_and_exec_bit():
    path = os.path.join(EMULATORS, "mlnx_qos")
    with open(path) as f:
        assert f.read().splitlines()[1] == HEADER2
    assert os.access(path, os.X_OK)


def test_defaults_parse_as_a_nic_out_of_the_box(emu):
    rc, out, _err = emu("mlnx_qos", "-i", "ens1f0np0")
    assert rc == 0
    assert roce.parse_mlnx_qos(out) == {"dcbx_mode": "OS controlled", "trust": "pcp", "pfc": [0] * 8}
    assert "dscp2prio mapping:" not in out and "\tbuffer      " in out


def test_set_prints_the_new_state_and_keeps_it_per_interface(emu):
    rc, out, _err = emu("mlnx_qos", "-i", "ens2f0np0", "--trust", "dscp", "--pfc", "0,0,0,1,0,0,0,0")
    assert rc == 0 and roce.parse_mlnx_qos(out)["pfc"] == WANT
    _rc, out, _err = emu("mlnx_qos", "-i", "ens2f0np0")
    assert roce.parse_mlnx_qos(out) == {"dcbx_mode": "OS controlled", "trust": "dscp", "pfc": WANT}
    assert "\tprio:3 dscp:31,30,29,28,27,26,25,24," in out
    _rc, out, _err = emu("mlnx_qos", "-i", "ens1f0np0")
    assert roce.parse_mlnx_qos(out)["trust"] == "pcp"
    emu("mlnx_qos", "--trust=pcp", "-i", "ens2f0np0")
    _rc, out, _err = emu("mlnx_qos", "-i", "ens2f0np0")
    assert roce.parse_mlnx_qos(out) == {"dcbx_mode": "OS controlled", "trust": "pcp", "pfc": WANT}


@pytest.mark.parametrize("args, rc", [
    (["-i", "eth9"], 1), (["-i", "ens1f0np0", "--trust", "cos"], 2), (["-i", "ens1f0np0", "--pfc", "1,0"], 2),
    (["--trust", "dscp"], 2), (["-i", "ens1f0np0", "--bogus"], 2),
])
def test_bad_arguments_fail_like_a_tool(emu, args, rc):
    code, out, err = emu("mlnx_qos", *args)
    assert code == rc and out == "" and err


def test_fake_sysfs_is_what_ib_port_info_and_roce_qos_read(emu, tmp_path):
    assert emu("mlnx_qos", "--emu-sysfs", emu.sysfs)[0] == 0
    assert roce.read_ecn(emu.sysfs, "ens4f0np0", 3) == {"np": False, "rp": False}
    ndev = os.path.join(emu.sysfs, "class", "infiniband", "mlx5_3", "ports", "1", "gid_attrs", "ndevs", "0")
    with open(ndev) as f:
        assert f.read().strip() == "ens4f0np0"
    # ECN files already there are kept (drift injected by a test survives another --emu-sysfs)
    with open(os.path.join(emu.sysfs, "class/net/ens4f0np0/ecn/roce_np/enable/3"), "w") as f:
        f.write("1\n")
    emu("mlnx_qos", "--emu-sysfs", emu.sysfs)
    assert roce.read_ecn(emu.sysfs, "ens4f0np0", 3) == {"np": True, "rp": False}
    # ibstat in RoCE mode: Ethernet ports, and the GID index NCCL_IB_GID_INDEX takes from the fake tree
    assert emu("ibstat", "--emu-link-layer", "Ethernet")[0] == 0
    r = run_module(ib_port_info, {"link_layer": "Ethernet", "sysfs_root": emu.sysfs},
                   Tool(lambda argv, data: emu("ibstat", *argv[1:])))
    assert not r.get("failed") and len(r["active_ports"]) == 8
    assert {p["roce_v2_ipv4_gid_index"] for p in r["ports"]} == {3}
    assert emu("ibstat", "--emu-link-layer", "InfiniBand")[0] == 0
    r = run_module(ib_port_info, {"link_layer": "Ethernet", "sysfs_root": emu.sysfs},
                   Tool(lambda argv, data: emu("ibstat", *argv[1:])))
    assert r["active_ports"] == []


def test_roce_qos_on_the_emulator_sets_repairs_and_then_changes_nothing(emu):
    emu("mlnx_qos", "--emu-sysfs", emu.sysfs)
    tool = Tool(lambda argv, data: emu("mlnx_qos", *argv[1:]))
    args = {"interfaces": ["ens1f0np0", "ens2f0np0"], "sysfs_root": emu.sysfs}
    first = run_module(roce_qos, args, tool)
    assert not first.get("failed") and first["changed"]
    assert [i["after"] for i in first["interfaces"]] == [{"trust": "dscp", "pfc": WANT, "ecn": {"np": True, "rp": True}}] * 2
    second = run_module(roce_qos, args, tool)
    assert second["changed"] is False and second["cmd"] == []
    # drift: trust pcp and PFC off with the tool's own flags, ECN off in the file
    emu("mlnx_qos", "-i", "ens2f0np0", "--trust", "pcp", "--pfc", "0,0,0,0,0,0,0,0")
    with open(roce.ecn_path(emu.sysfs, "ens2f0np0", "rp", 3), "w") as f:
        f.write("0\n")
    third = run_module(roce_qos, args, tool)
    assert third["changed"] and [i["changes"] for i in third["interfaces"]] == [[], ["trust", "pfc", "ecn_rp"]]
    assert third["interfaces"][1]["after"] == {"trust": "dscp", "pfc": WANT, "ecn": {"np": True, "rp": True}}
    # the boot unit's command, run on the emulator, sets the same state from scratch
    emu("mlnx_qos", "--emu-reset")
    assert emu("mlnx_qos", *third["interfaces"][0]["boot_argv"][1:])[0] == 0
    assert roce.parse_mlnx_qos(emu("mlnx_qos", "-i", "ens1f0np0")[1])["pfc"] == WANT
