# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pcie_acs_info's nvswitches (nvidia_driver decides on Fabric Manager with it): NVIDIA class 0680 bridges only."""

import os

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import pcie_acs_info

FIX = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures", "pci")
HGX = open(os.path.join(FIX, "lspci-Dnn-vvv-hgx-switch-sriov-vfio.txt")).read()
# Two NVSwitches of an HGX H100 board as `lspci -D -nn -vvv` prints them (header and first lines of each block),
# and a non-NVIDIA bridge of the same class that must not count.
NVSWITCHES = """0000:05:00.0 Bridge [0680]: NVIDIA Corporation Device [10de:22a3] (rev a1)
\tSubsystem: NVIDIA Corporation Device [10de:1796]
\tControl: I/O- Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR- FastB2B- DisINTx-
\tNUMA node: 0
\tKernel driver in use: nvidia-nvswitch

0000:06:00.0 Bridge [0680]: NVIDIA Corporation Device [10de:22a3] (rev a1)
\tSubsystem: NVIDIA Corporation Device [10de:1796]
\tNUMA node: 0

0000:00:1f.4 Bridge [0680]: Intel Corporation Device [8086:1bc9] (rev 11)
\tSubsystem: Intel Corporation Device [8086:0000]
"""


def run(text, tmp_path):
    (tmp_path / "cmdline").write_text("ro\n")
    tool = Tool([(("lspci",), (0, text, ""))])
    result = run_module(pcie_acs_info, {"proc_root": str(tmp_path), "sysfs_root": str(tmp_path)}, tool)
    return result, tool


def test_nvswitches_found_from_the_same_single_lspci(tmp_path):
    result, tool = run(HGX + "\n" + NVSWITCHES, tmp_path)
    assert result["nvswitches"] == ["0000:05:00.0", "0000:06:00.0"]
    assert tool.calls == [["/usr/bin/lspci", "-D", "-nn", "-vvv"]]


def test_no_nvswitch_on_a_pcie_system(tmp_path):
    result, _tool = run(HGX, tmp_path)
    assert result["nvswitches"] == []
