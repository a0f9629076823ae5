# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pcie_acs_info with recorded lspci output and a fake proc/sysfs tree."""

import os

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import pcie_acs_info

FIX = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures", "pci")


def load(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


@pytest.fixture
def roots(tmp_path):
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cmdline").write_text("BOOT_IMAGE=/vmlinuz-6.8 root=/dev/sda2 ro intel_iommu=on iommu=pt\n")
    groups = tmp_path / "sys" / "kernel" / "iommu_groups"
    for n in range(12):
        (groups / str(n)).mkdir(parents=True)
    return {"proc_root": str(proc), "sysfs_root": str(tmp_path / "sys")}


def lspci_tool(text):
    return Tool([(("lspci",), (0, text, ""))])


def test_report_acs_paths_iommu(roots):
    tool = lspci_tool(load("lspci-vvv-pex890xx-one-port-acs-enabled-with-gpu-nic.txt"))
    r = run_module(pcie_acs_info, roots, tool)
    assert r["changed"] is False
    assert [b["bdf"] for b in r["bridges"]] == ["0000:39:00.0", "0000:39:01.0"]
    assert r["acs_enabled_bridges"] == ["0000:39:00.0"] and r["acs_enabled"] is True
    assert r["gpu_nic_acs_enabled_bridges"] == ["0000:39:00.0"]
    assert r["bridges"][0]["acs_ctl"]["SrcValid"] is True and r["bridges"][0]["acs_ctl_value"] == "001d"
    assert r["gpus"] == [{"bdf": "0000:3b:00.0", "description": "NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)",
                          "driver": "nvidia", "upstream_bridges": ["0000:38:00.0", "0000:39:01.0"]}]
    assert [n["bdf"] for n in r["nics"]] == ["0000:3a:00.0"]
    assert r["iommu"]["enabled"] and r["iommu"]["groups"] == 12 and r["iommu"]["passthrough"]
    assert r["iommu"]["cmdline"] == {"intel_iommu": "on", "iommu": "pt"}
    assert r["vfio_in_use"] is False and r["sriov_in_use"] is False and r["access_denied"] is False
    assert tool.calls == [["/usr/bin/lspci", "-D", "-nn", "-vvv"]]
    assert r["cmd"] == "/usr/bin/lspci -D -nn -vvv"


def test_vfio_and_sriov_in_use(roots):
    r = run_module(pcie_acs_info, roots, lspci_tool(load("lspci-Dnn-vvv-hgx-switch-sriov-vfio.txt")))
    assert r["vfio_in_use"] and r["vfio_devices"] == ["0000:1d:00.1"]
    assert r["sriov_in_use"] and r["sriov"]["vfs_in_use"] == 2
    assert [n["bdf"] for n in r["nics"]] == ["0000:1d:00.0"]  # VFs are not listed as NICs
    assert r["nics"][0]["upstream_bridges"] == ["0000:18:01.0", "0000:19:00.0", "0000:1a:02.0"]


def test_no_iommu(tmp_path):
    (tmp_path / "cmdline").write_text("ro quiet\n")
    r = run_module(pcie_acs_info, {"proc_root": str(tmp_path), "sysfs_root": str(tmp_path / "nosys")},
                   lspci_tool(load("lspci-vvv-pex890xx-one-port-acs-enabled-with-gpu-nic.txt")))
    assert r["iommu"]["enabled"] is False and r["iommu"]["groups"] == 0 and r["iommu"]["requested"] is False


def test_check_mode_runs_the_read(roots):
    tool = lspci_tool(load("lspci-vvv-pex890xx-one-port-acs-enabled-with-gpu-nic.txt"))
    r = run_module(pcie_acs_info, roots, tool, check_mode=True)
    assert r["changed"] is False and len(r["bridges"]) == 2 and len(tool.calls) == 1


def test_access_denied_warns(roots):
    r = run_module(pcie_acs_info, roots, lspci_tool(load("lspci-vvv-nonroot-access-denied.txt")))
    assert not r.get("failed") and r["access_denied"] is True
    assert r["bridges"] == []


def test_missing_lspci(roots):
    r = run_module(pcie_acs_info, roots, Tool([], missing=("lspci",)))
    assert r["failed"] and "lspci was not found" in r["msg"]


def test_lspci_rc_nonzero(roots):
    r = run_module(pcie_acs_info, roots, Tool([(("lspci",), (2, "", "lspci: Unable to load libkmod"))]))
    assert r["failed"] and r["rc"] == 2 and "libkmod" in r["stderr"]
