#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pcie_acs_info
short_description: Report PCIe Access Control Services (ACS) state, IOMMU, VFIO and SR-IOV use
description:
  - Reads C(lspci -D -nn -vvv) once and reports every PCI bridge that has the ACS extended capability, with its
    ACS capability and control flags and whether ACS is enabled (ACS control register not C(0000)).
  - Tells which bridges lie upstream of GPUs (NVIDIA C(10de), display or 3D class) and NICs (Mellanox C(15b3)
    network or InfiniBand class, or any InfiniBand controller). The path is computed from the bus ranges
    (the C(Bus) line with primary, secondary and subordinate bus numbers) that C(lspci -vvv) prints for every
    bridge, so no second command is needed.
  - Reports the IOMMU state from C(/proc/cmdline) and C(/sys/kernel/iommu_groups), devices bound to
    C(vfio-pci), and SR-IOV virtual functions in use; these are the reasons to keep ACS enabled.
  - Reading extended configuration space needs root. Without it lspci prints C(<access denied>); the module
    then warns and the ACS data is incomplete.
version_added: "1.0.0"
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.INFO_MODULE
options:
  lspci_path:
    description: Path to C(lspci). By default it is looked up on C(PATH) and in the sbin directories.
    type: path
  proc_root:
    description: Root of the proc filesystem to read C(cmdline) from. Change it only for tests.
    type: path
    default: /proc
  sysfs_root:
    description: Root of sysfs to read C(kernel/iommu_groups) from. Change it only for tests.
    type: path
    default: /sys
notes:
  - Runs exactly one C(lspci) command per run.
seealso:
  - module: clusterforge.gpu.pcie_acs
"""

EXAMPLES = r"""
- name: Read ACS state
  clusterforge.gpu.pcie_acs_info:
  register: __pcie_acs_register_info

- name: Fail when ACS is still on between GPUs and NICs
  ansible.builtin.assert:
    that: __pcie_acs_register_info.gpu_nic_acs_enabled_bridges | length == 0
    fail_msg: "ACS enabled on {{ __pcie_acs_register_info.gpu_nic_acs_enabled_bridges | join(', ') }}"
"""

RETURN = r"""
bridges:
  description: Every PCI bridge with the ACS capability.
  returned: always
  type: list
  elements: dict
  contains:
    bdf:
      description: PCI address with domain.
      type: str
      sample: "0000:1a:00.0"
    description:
      description: Device description as lspci prints it.
      type: str
      sample: "Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0) (prog-if 00 [Normal decode])"
    acs_cap:
      description: ACS capability flags.
      type: dict
      sample: {"SrcValid": true, "TransBlk": true, "ReqRedir": true, "CmpltRedir": true, "UpstreamFwd": true,
               "EgressCtrl": false, "DirectTrans": true}
    acs_ctl:
      description: ACS control flags.
      type: dict
      sample: {"SrcValid": true, "TransBlk": false, "ReqRedir": true, "CmpltRedir": true, "UpstreamFwd": true,
               "EgressCtrl": false, "DirectTrans": false}
    acs_cap_value:
      description: The capability flags as a hex word.
      type: str
      sample: "005f"
    acs_ctl_value:
      description: The control register as C(setpci -s BDF ECAP_ACS+0x6.w) prints it.
      type: str
      sample: "001d"
    acs_enabled:
      description: Whether any ACS control flag is set.
      type: bool
      sample: true
    upstream_of:
      description: GPUs and NICs below this bridge.
      type: list
      elements: str
      sample: ["0000:1b:00.0"]
    on_gpu_nic_path:
      description: Whether a GPU or NIC lies below this bridge.
      type: bool
      sample: true
acs_enabled_bridges:
  description: BDFs of the bridges with ACS enabled.
  returned: always
  type: list
  elements: str
  sample: ["0000:1a:00.0", "0000:1a:01.0"]
gpu_nic_acs_enabled_bridges:
  description: BDFs of the bridges with ACS enabled that lie upstream of a GPU or NIC.
  returned: always
  type: list
  elements: str
  sample: ["0000:1a:00.0"]
acs_enabled:
  description: Whether any bridge has ACS enabled.
  returned: always
  type: bool
  sample: true
gpus:
  description: GPUs found, each with the bridges above it (root first).
  returned: always
  type: list
  elements: dict
  sample: [{"bdf": "0000:1b:00.0", "description": "NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)",
            "upstream_bridges": ["0000:18:01.0", "0000:19:00.0", "0000:1a:00.0"]}]
nics:
  description: NICs found (virtual functions excluded), each with the bridges above it.
  returned: always
  type: list
  elements: dict
  sample: [{"bdf": "0000:1d:00.0", "description": "Mellanox Technologies MT2910 Family [ConnectX-7]",
            "upstream_bridges": ["0000:18:01.0", "0000:19:00.0", "0000:1a:02.0"]}]
iommu:
  description: IOMMU state.
  returned: always
  type: dict
  contains:
    enabled:
      description: Whether the kernel created IOMMU groups.
      type: bool
      sample: true
    groups:
      description: Number of entries in C(/sys/kernel/iommu_groups).
      type: int
      sample: 120
    passthrough:
      description: Whether C(iommu=pt) is on the kernel command line.
      type: bool
      sample: true
    requested:
      description: Whether C(intel_iommu=on) or C(amd_iommu=on) is on the kernel command line.
      type: bool
      sample: true
    cmdline:
      description: The IOMMU and ACS related kernel parameters.
      type: dict
      sample: {"intel_iommu": "on", "iommu": "pt"}
vfio_devices:
  description: Devices bound to C(vfio-pci).
  returned: always
  type: list
  elements: str
  sample: []
vfio_in_use:
  description: Whether any device is bound to C(vfio-pci).
  returned: always
  type: bool
  sample: false
sriov:
  description: SR-IOV use.
  returned: always
  type: dict
  contains:
    vfs_in_use:
      description: Number of virtual functions in use.
      type: int
      sample: 0
    physical_functions:
      description: Devices with the SR-IOV capability.
      type: list
      elements: dict
      sample: [{"bdf": "0000:1d:00.0", "total_vfs": 16, "num_vfs": 0, "enabled": false}]
    virtual_functions:
      description: Virtual function BDFs seen.
      type: list
      elements: str
      sample: []
sriov_in_use:
  description: Whether any SR-IOV virtual function is in use.
  returned: always
  type: bool
  sample: false
nvswitches:
  description:
    - BDFs of the NVIDIA NVSwitches (vendor C(10de), class C(0680) bridge), which need Fabric Manager; read from the
      same C(lspci) output, so they are found before any NVIDIA driver is installed.
  returned: always
  type: list
  elements: str
  sample: ["0000:05:00.0", "0000:06:00.0"]
access_denied:
  description: Whether lspci printed C(<access denied>) (not run as root); the ACS data is then incomplete.
  returned: always
  type: bool
  sample: false
cmd:
  description: The lspci command that was run.
  returned: always
  type: str
  sample: "/usr/bin/lspci -D -nn -vvv"
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils import pci

LSPCI_ARGS = ["-D", "-nn", "-vvv"]


def read_iommu(module):
    cmdline = ""
    path = os.path.join(module.params["proc_root"], "cmdline")
    try:
        with open(path) as f:
            cmdline = f.read()
    except (IOError, OSError) as e:
        module.warn("could not read %s: %s" % (path, e))
    groups_dir = os.path.join(module.params["sysfs_root"], "kernel", "iommu_groups")
    try:
        count = len(os.listdir(groups_dir))
    except (IOError, OSError):
        count = 0
    return pci.iommu_state(cmdline, count)


def gather(lspci):
    """Run lspci once and build the report (shared with pcie_acs through the same pci helpers)."""
    rc, out, err = lspci.run(LSPCI_ARGS, what="lspci")
    devices = pci.parse_lspci_vvv(out)
    return devices, quote([lspci.bin] + LSPCI_ARGS)


def device_entries(devices, kind):
    return [{"bdf": d["bdf"], "description": d["description"], "driver": d["driver"],
             "upstream_bridges": pci.upstream_bridges(devices, d["bdf"])}
            for d in devices if d.get("bdf") and not d.get("is_vf") and pci.device_kind(d) == kind]


def main():
    module = AnsibleModule(
        argument_spec=dict(
            lspci_path=dict(type="path"),
            proc_root=dict(type="path", default="/proc"),
            sysfs_root=dict(type="path", default="/sys"),
        ),
        supports_check_mode=True,
    )
    lspci = ToolRunner(module, "lspci", module.params["lspci_path"], option="lspci_path")
    devices, cmd = gather(lspci)
    denied = any(d["access_denied"] for d in devices)
    if denied:
        module.warn("lspci could not read extended configuration space (<access denied>): run as root; "
                    "ACS data is incomplete")
    bridges = pci.acs_bridges(devices)
    sriov = pci.sriov_summary(devices)
    vfio = pci.vfio_devices(devices)
    enabled = [b["bdf"] for b in bridges if b["acs_enabled"]]
    module.exit_json(
        changed=False,
        bridges=bridges,
        acs_enabled_bridges=enabled,
        gpu_nic_acs_enabled_bridges=[b["bdf"] for b in bridges if b["acs_enabled"] and b["on_gpu_nic_path"]],
        acs_enabled=bool(enabled),
        gpus=device_entries(devices, "gpu"),
        nics=device_entries(devices, "nic"),
        iommu=read_iommu(module),
        vfio_devices=vfio,
        vfio_in_use=bool(vfio),
        sriov=sriov,
        sriov_in_use=sriov["vfs_in_use"] > 0,
        access_denied=denied,
        nvswitches=[d["bdf"] for d in devices
                    if d.get("bdf") and d.get("vendor_id") == pci.NVIDIA_VENDOR and d.get("class_code") == "0680"],
        cmd=cmd,
    )


if __name__ == "__main__":
    main()
