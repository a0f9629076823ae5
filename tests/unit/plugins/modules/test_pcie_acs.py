# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pcie_acs with scripted lspci/setpci replies (a fake register file that lspci output is rendered from)."""

import os

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import pcie_acs
from ansible_collections.clusterforge.gpu.plugins.module_utils import pci

FIX = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures", "pci")
BASE = open(os.path.join(FIX, "lspci-vvv-pex890xx-one-port-acs-enabled-with-gpu-nic.txt")).read()
ENABLED = "ACSCtl:\tSrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"
DISABLED = "ACSCtl:\tSrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-"
# An extra root port with ACS on bus 50 leading nowhere interesting (not on a GPU/NIC path).
ROOT_PORT = """50:01.0 PCI bridge: Intel Corporation Device 352a (rev 04) (prog-if 00 [Normal decode])
\tBus: primary=50, secondary=51, subordinate=51, sec-latency=0
\tCapabilities: [170 v1] Access Control Services
\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-
\t\t%s
\tKernel driver in use: pcieport
"""


class FakePci(object):
    """lspci output rendered from a register map; setpci reads/writes it."""

    def __init__(self, regs=None, root_port=False, fail_write=(), stuck=(), extra=""):
        self.regs = dict(regs or {"0000:39:00.0": 0x1D, "0000:39:01.0": 0x00})
        if root_port:
            self.regs.setdefault("0000:50:01.0", 0x1D)
        self.root_port = root_port
        self.fail_write = set(fail_write)
        self.stuck = set(stuck)
        self.extra = extra

    def lspci(self):
        blocks = BASE.split("\n\n")
        out = []
        for b in blocks:
            bdf = "0000:" + b.split(" ", 1)[0]
            if bdf in self.regs:
                flags = pci.format_acs_flags(pci.decode_acs_ctl(self.regs[bdf]))
                b = b.replace(ENABLED, "ACSCtl:\t" + flags).replace(DISABLED, "ACSCtl:\t" + flags)
            out.append(b)
        text = "\n\n".join(out)
        if self.root_port:
            flags = pci.format_acs_flags(pci.decode_acs_ctl(self.regs["0000:50:01.0"]))
            text += "\n" + ROOT_PORT % ("ACSCtl:\t" + flags)
        return text + self.extra

    def __call__(self, argv, data):
        tool = os.path.basename(argv[0])
        if tool == "lspci":
            assert argv[1:] == ["-D", "-nn", "-vvv"]
            return 0, self.lspci(), ""
        assert tool == "setpci" and argv[1] == "-s"
        bdf, reg = argv[2], argv[3]
        if bdf not in self.regs:
            return 1, "", "setpci: %s: Instance #0 of Extended capability 000d not found" % bdf
        if "=" in reg:
            if bdf in self.fail_write:
                return 1, "", "setpci: Unable to write to /sys/bus/pci/devices/%s/config: Permission denied" % bdf
            if bdf not in self.stuck:
                self.regs[bdf] = int(reg.split("=")[1], 16)
            return 0, "", ""
        return 0, "%04x\n" % self.regs[bdf], ""


def writes(tool):
    return [c for c in tool.calls if os.path.basename(c[0]) == "setpci" and "=" in c[-1]]


def test_disable_changes_only_enabled_bridge_and_reads_back():
    fake = FakePci()
    tool = Tool(fake)
    r = run_module(pcie_acs, {}, tool)
    assert not r.get("failed"), r
    assert r["changed"] is True
    assert [b["bdf"] for b in r["bridges"]] == ["0000:39:00.0"]
    assert r["bridges"][0]["before"] == "001d" and r["bridges"][0]["after"] == "0000"
    assert r["unchanged"] == ["0000:39:01.0"]
    assert writes(tool) == [["/usr/bin/setpci", "-s", "0000:39:00.0", "ECAP_ACS+0x6.w=0000"]]
    assert ["/usr/bin/setpci", "-s", "0000:39:00.0", "ECAP_ACS+0x6.w"] in tool.calls
    assert tool.count("lspci") == 1
    assert fake.regs["0000:39:00.0"] == 0


def test_second_run_is_idempotent():
    fake = FakePci()
    run_module(pcie_acs, {}, Tool(fake))
    tool = Tool(fake)
    r = run_module(pcie_acs, {}, tool)
    assert r["changed"] is False and r["bridges"] == []
    assert tool.count("setpci") == 0 and tool.count("lspci") == 1


def test_check_mode_reports_but_writes_nothing():
    fake = FakePci(root_port=True)
    tool = Tool(fake)
    r = run_module(pcie_acs, {}, tool, check_mode=True)
    assert r["changed"] is True
    assert sorted(b["bdf"] for b in r["bridges"]) == ["0000:39:00.0", "0000:50:01.0"]
    assert tool.count("setpci") == 0 and r["commands"] == []
    assert fake.regs["0000:39:00.0"] == 0x1D


def test_diff_shows_before_after_per_bridge():
    r = run_module(pcie_acs, {}, Tool(FakePci()), check_mode=True, diff=True)
    assert r["diff"]["before"] == ("0000:39:00.0 001d (SrcValid+ TransBlk- ReqRedir+ CmpltRedir+ UpstreamFwd+ "
                                   "EgressCtrl- DirectTrans-)\n")
    assert r["diff"]["after"].startswith("0000:39:00.0 0000 (SrcValid- TransBlk-")


def test_no_diff_without_diff_mode():
    r = run_module(pcie_acs, {}, Tool(FakePci()), check_mode=True)
    assert "diff" not in r


def test_scope_gpu_nic_paths_skips_unrelated_root_port():
    fake = FakePci(root_port=True)
    tool = Tool(fake)
    r = run_module(pcie_acs, {"scope": "gpu_nic_paths"}, tool)
    assert [b["bdf"] for b in r["bridges"]] == ["0000:39:00.0"]
    assert fake.regs["0000:50:01.0"] == 0x1D
    assert all("0000:50:01.0" not in c for c in tool.calls)


def test_scope_all_includes_root_port():
    fake = FakePci(root_port=True)
    r = run_module(pcie_acs, {"scope": "all"}, Tool(fake))
    assert sorted(b["bdf"] for b in r["bridges"]) == ["0000:39:00.0", "0000:50:01.0"]
    assert fake.regs["0000:50:01.0"] == 0


VFIO_BLOCK = "\n3c:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)\n\tKernel driver in use: vfio-pci\n"
SRIOV_BLOCK = ("\n3d:00.0 Infiniband controller: Mellanox Technologies MT2910 Family [ConnectX-7]\n"
               "\tCapabilities: [180 v1] Single Root I/O Virtualization (SR-IOV)\n"
               "\t\tIOVCtl:\tEnable+ Migration- Interrupt- MSE+ ARIHierarchy+ 10BitTagReq-\n"
               "\t\tInitial VFs: 16, Total VFs: 16, Number of VFs: 4, Function Dependency Link: 00\n"
               "\tKernel driver in use: mlx5_core\n")


@pytest.mark.parametrize("extra,needle", [(VFIO_BLOCK, "vfio-pci (0000:3c:00.0)"),
                                          (SRIOV_BLOCK, "4 SR-IOV virtual function(s)")])
def test_refuses_on_vfio_or_sriov(extra, needle):
    fake = FakePci(extra=extra)
    tool = Tool(fake)
    r = run_module(pcie_acs, {}, tool)
    assert r["failed"] and needle in r["msg"] and "force=true" in r["msg"]
    assert tool.count("setpci") == 0 and fake.regs["0000:39:00.0"] == 0x1D


def test_refusal_also_in_check_mode():
    r = run_module(pcie_acs, {}, Tool(FakePci(extra=VFIO_BLOCK)), check_mode=True)
    assert r["failed"] and "refusing" in r["msg"]


@pytest.mark.parametrize("extra", [VFIO_BLOCK, SRIOV_BLOCK])
def test_force_overrides_refusal(extra):
    fake = FakePci(extra=extra)
    r = run_module(pcie_acs, {"force": True}, Tool(fake))
    assert not r.get("failed") and r["changed"] and fake.regs["0000:39:00.0"] == 0


def test_vfio_host_already_disabled_is_ok():
    fake = FakePci(regs={"0000:39:00.0": 0, "0000:39:01.0": 0}, extra=VFIO_BLOCK)
    r = run_module(pcie_acs, {}, Tool(fake))
    assert not r.get("failed") and r["changed"] is False and r["vfio_devices"] == ["0000:3c:00.0"]


def test_enable_restores_value_masked_by_capability():
    fake = FakePci(regs={"0000:39:00.0": 0, "0000:39:01.0": 0}, root_port=True)
    fake.regs["0000:50:01.0"] = 0
    tool = Tool(fake)
    r = run_module(pcie_acs, {"state": "enabled", "acs_ctl_value": "005f"}, tool)
    assert r["changed"]
    after = dict((b["bdf"], b["after"]) for b in r["bridges"])
    # switch ports advertise DirectTrans (005f), the root port does not (001f)
    assert after == {"0000:39:00.0": "005f", "0000:39:01.0": "005f", "0000:50:01.0": "001f"}
    assert fake.regs["0000:50:01.0"] == 0x1F
    # enabling is never refused for VFIO (it is the safe direction) and is idempotent
    tool2 = Tool(fake)
    assert run_module(pcie_acs, {"state": "enabled", "acs_ctl_value": "005f"}, tool2)["changed"] is False
    assert tool2.count("setpci") == 0


def test_enable_default_value_is_001d():
    fake = FakePci(regs={"0000:39:00.0": 0, "0000:39:01.0": 0x1D})
    r = run_module(pcie_acs, {"state": "enabled"}, Tool(fake))
    assert [b["bdf"] for b in r["bridges"]] == ["0000:39:00.0"] and fake.regs["0000:39:00.0"] == 0x1D


@pytest.mark.parametrize("value", ["xyz", "0080", "12345"])
def test_bad_acs_ctl_value_rejected_before_any_command(value):
    tool = Tool(FakePci())
    r = run_module(pcie_acs, {"state": "enabled", "acs_ctl_value": value}, tool)
    assert r["failed"] and "acs_ctl_value" in r["msg"] and tool.calls == []


def test_read_back_mismatch_fails_with_cmd_and_rc():
    fake = FakePci(stuck={"0000:39:00.0"})
    r = run_module(pcie_acs, {}, Tool(fake))
    assert r["failed"] and "Failed to set ACS control on 0000:39:00.0" in r["msg"]
    assert r["cmd"] == "/usr/bin/setpci -s 0000:39:00.0 ECAP_ACS+0x6.w"
    assert r["rc"] == 0 and r["stdout"].strip() == "001d"
    assert r["changed"] is True


def test_partial_failure_stops_and_reports_done_bridges():
    fake = FakePci(regs={"0000:39:00.0": 0x1D, "0000:39:01.0": 0x1D}, fail_write={"0000:39:01.0"})
    tool = Tool(fake)
    r = run_module(pcie_acs, {}, tool)
    assert r["failed"] and r["rc"] == 1 and "Permission denied" in r["stderr"]
    assert r["cmd"] == "/usr/bin/setpci -s 0000:39:01.0 ECAP_ACS+0x6.w=0000"
    assert r["changed"] is True and [b["bdf"] for b in r["bridges"]] == ["0000:39:00.0"]
    assert fake.regs == {"0000:39:00.0": 0, "0000:39:01.0": 0x1D}


def test_lspci_missing_fails_cleanly():
    tool = Tool(FakePci(), missing=("lspci",))
    r = run_module(pcie_acs, {}, tool)
    assert r["failed"] and "lspci was not found" in r["msg"] and tool.calls == []


def test_setpci_missing_fails_before_writing():
    tool = Tool(FakePci(), missing=("setpci",))
    r = run_module(pcie_acs, {}, tool)
    assert r["failed"] and "setpci was not found" in r["msg"] and tool.count("setpci") == 0


def test_setpci_missing_does_not_matter_when_nothing_to_do():
    r = run_module(pcie_acs, {}, Tool(FakePci(regs={"0000:39:00.0": 0, "0000:39:01.0": 0}), missing=("setpci",)))
    assert not r.get("failed") and r["changed"] is False


def test_lspci_failure_reports_cmd_rc_stderr():
    r = run_module(pcie_acs, {}, Tool(lambda argv, data: (1, "", "pcilib: Cannot open /proc/bus/pci")))
    assert r["failed"] and r["rc"] == 1 and r["cmd"] == "/usr/bin/lspci -D -nn -vvv"
    assert "Cannot open" in r["stderr"]


def test_access_denied_fails():
    text = open(os.path.join(FIX, "lspci-vvv-nonroot-access-denied.txt")).read()
    r = run_module(pcie_acs, {}, Tool(lambda argv, data: (0, text, "")))
    assert r["failed"] and "access denied" in r["msg"]


def test_custom_tool_paths_used():
    fake = FakePci()
    seen = []

    def handler(argv, data):
        seen.append(argv[0])
        return fake(argv, data)
    r = run_module(pcie_acs, {"lspci_path": "/opt/pciutils/lspci", "setpci_path": "/opt/pciutils/setpci"},
                   Tool(handler))
    assert r["changed"] and set(seen) == {"/opt/pciutils/lspci", "/opt/pciutils/setpci"}


def test_custom_tool_path_that_does_not_exist_fails_naming_the_option():
    tool = Tool(FakePci(), missing=("/opt/pciutils/setpci",))
    r = run_module(pcie_acs, {"setpci_path": "/opt/pciutils/setpci"}, tool)
    assert r["failed"] and "setpci was not found at /opt/pciutils/setpci (setpci_path)" in r["msg"]
    assert tool.count("setpci") == 0
