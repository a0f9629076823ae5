#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: pcie_acs
short_description: Disable (or re-enable) PCIe Access Control Services on PCI bridges at runtime
description:
  - Reads every PCI bridge's ACS control register with one C(lspci -D -nn -vvv) call, then writes only the
    bridges that differ from the requested state with C(setpci -s <BDF> ECAP_ACS+0x6.w=<value>), reads each
    one back with C(setpci -s <BDF> ECAP_ACS+0x6.w) and fails if the value did not stick.
  - C(ECAP_ACS) lets setpci resolve the capability offset per device, as NVIDIA's NCCL guide recommends,
    instead of a fixed offset for one switch model.
  - ACS on PCIe switch ports redirects GPU<->NIC and GPU<->GPU peer-to-peer traffic to the root complex, which
    breaks or slows GPUDirect RDMA; training nodes therefore run with ACS disabled.
  - B(Runtime only.) The setting is lost on reboot, PCIe hotplug or reset. Run the module from a boot-time unit
    (the C(pcie_acs) role does this) or disable ACS in firmware.
  - ACS is what isolates devices in separate IOMMU groups. With C(state=disabled) the module refuses to change
    anything on a host where a device is bound to C(vfio-pci) or SR-IOV virtual functions are in use, unless
    O(force=true).
version_added: "1.0.0"
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the state with lspci and reports exactly the bridges and values it would write; runs no setpci.
  diff_mode:
    support: full
    details:
      - Shows each changed bridge's ACS control register and flags before and after.
options:
  state:
    description:
      - C(disabled) writes C(0000) to the ACS control register of every in-scope bridge where it is not
        C(0000).
      - C(enabled) writes O(acs_ctl_value), masked with each bridge's ACS capability bits, to every in-scope
        bridge where the register differs.
    type: str
    choices: [disabled, enabled]
    default: disabled
  scope:
    description:
      - C(all) acts on every PCI bridge with the ACS capability.
      - C(gpu_nic_paths) acts only on bridges upstream of a GPU (NVIDIA display/3D class) or a NIC
        (Mellanox network or InfiniBand class); the path comes from the bridges' bus ranges in lspci.
    type: str
    choices: [all, gpu_nic_paths]
    default: all
  acs_ctl_value:
    description:
      - The ACS control value (4 hex digits) that C(state=enabled) restores.
      - The default C(001d) is SrcValid+ReqRedir+CmpltRedir+UpstreamFwd, what Linux sets on downstream ports
        when an IOMMU is active. Bits the bridge does not advertise in ACSCap are dropped for that bridge.
      - Ignored with C(state=disabled).
    type: str
    default: "001d"
  force:
    description:
      - Disable ACS even when devices are bound to C(vfio-pci) or SR-IOV virtual functions are in use, which
        removes the DMA isolation between them.
    type: bool
    default: false
  lspci_path:
    description: Path to C(lspci). By default it is looked up on C(PATH) and in the sbin directories.
    type: path
  setpci_path:
    description: Path to C(setpci). By default it is looked up on C(PATH) and in the sbin directories.
    type: path
notes:
  - Needs root; lspci prints C(<access denied>) for extended capabilities otherwise, and the module fails.
  - One C(lspci) call per run; two C(setpci) calls (write, read back) per bridge that changes; none when
    nothing changes, so a second run reports no change.
  - On a setpci failure the module stops at that bridge; the result lists the bridges already written
    (RV(bridges)) and reports C(changed=true) if there were any.
seealso:
  - module: clusterforge.gpu.pcie_acs_info
  - name: NCCL troubleshooting, PCI Access Control Services
    description: Why ACS must be off for GPUDirect.
    link: https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html#pci-access-control-services-acs
"""

EXAMPLES = r"""
- name: Disable ACS on every bridge (bare-metal training node)
  clusterforge.gpu.pcie_acs:
    state: disabled

- name: Disable ACS only between GPUs and NICs, preview first
  clusterforge.gpu.pcie_acs:
    state: disabled
    scope: gpu_nic_paths
  check_mode: true
  diff: true

- name: Restore the kernel's default ACS control on the switch ports
  clusterforge.gpu.pcie_acs:
    state: enabled
    acs_ctl_value: "001d"
"""

RETURN = r"""
bridges:
  description: The bridges that were changed (or would be, in check mode).
  returned: always
  type: list
  elements: dict
  contains:
    bdf:
      description: PCI address with domain.
      type: str
      sample: "0000:1a:00.0"
    before:
      description: ACS control register before.
      type: str
      sample: "001d"
    after:
      description: ACS control register after (requested value in check mode).
      type: str
      sample: "0000"
    on_gpu_nic_path:
      description: Whether a GPU or NIC lies below this bridge.
      type: bool
      sample: true
unchanged:
  description: In-scope ACS-capable bridges that already had the requested value.
  returned: always
  type: list
  elements: str
  sample: ["0000:16:01.0"]
commands:
  description: The setpci commands run (writes and read-backs); empty in check mode.
  returned: always
  type: list
  elements: str
  sample: ["/usr/bin/setpci -s 0000:1a:00.0 ECAP_ACS+0x6.w=0000", "/usr/bin/setpci -s 0000:1a:00.0 ECAP_ACS+0x6.w"]
vfio_devices:
  description: Devices bound to vfio-pci.
  returned: always
  type: list
  elements: str
  sample: []
sriov_vfs_in_use:
  description: Number of SR-IOV virtual functions in use.
  returned: always
  type: int
  sample: 0
cmd:
  description: The lspci command that read the state.
  returned: always
  type: str
  sample: "/usr/bin/lspci -D -nn -vvv"
"""

import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils import pci

LSPCI_ARGS = ["-D", "-nn", "-vvv"]
ACS_CTL_REG = "ECAP_ACS+0x6.w"


def describe(value):
    return "%s (%s)" % (value, pci.format_acs_flags(pci.decode_acs_ctl(value)))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["disabled", "enabled"], default="disabled"),
            scope=dict(type="str", choices=["all", "gpu_nic_paths"], default="all"),
            acs_ctl_value=dict(type="str", default="001d"),
            force=dict(type="bool", default=False),
            lspci_path=dict(type="path"),
            setpci_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    raw = p["acs_ctl_value"].strip().lower()
    raw = raw[2:] if raw.startswith("0x") else raw
    if not re.match(r"^[0-9a-f]{1,4}$", raw) or int(raw, 16) & ~0x7F:
        module.fail_json(msg="acs_ctl_value must be a 16-bit hex word using only ACS control bits 0x01-0x40, "
                             "got %r" % p["acs_ctl_value"])
    requested = int(raw, 16)

    lspci = ToolRunner(module, "lspci", p["lspci_path"], option="lspci_path")
    rc, out, err = lspci.run(LSPCI_ARGS, what="lspci")
    cmd = quote([lspci.bin] + LSPCI_ARGS)
    devices = pci.parse_lspci_vvv(out)
    if any(d["access_denied"] for d in devices):
        module.fail_json(msg="lspci could not read extended configuration space (<access denied>); run as root",
                         cmd=cmd)

    bridges = pci.acs_bridges(devices)
    if p["scope"] == "gpu_nic_paths":
        bridges = [b for b in bridges if b["on_gpu_nic_path"]]

    plan = []
    unchanged = []
    for b in bridges:
        if b["acs_ctl_value"] is None:
            # Capability header without an ACSCtl line: the register is unknown; do not guess.
            module.warn("%s has the ACS capability but lspci printed no ACSCtl line; skipped" % b["bdf"])
            continue
        current = int(b["acs_ctl_value"], 16)
        if p["state"] == "disabled":
            target = 0
        else:
            cap = int(b["acs_cap_value"], 16) if b["acs_cap_value"] else 0x7F
            target = requested & cap
        if current == target:
            unchanged.append(b["bdf"])
        else:
            plan.append({"bdf": b["bdf"], "before": b["acs_ctl_value"], "after": pci.acs_value_to_hex(target),
                         "on_gpu_nic_path": b["on_gpu_nic_path"]})

    vfio = pci.vfio_devices(devices)
    vfs = pci.sriov_summary(devices)["vfs_in_use"]
    result = dict(changed=False, bridges=[], unchanged=unchanged, commands=[], vfio_devices=vfio,
                  sriov_vfs_in_use=vfs, cmd=cmd)

    if plan and p["state"] == "disabled" and (vfio or vfs) and not p["force"]:
        why = []
        if vfio:
            why.append("devices bound to vfio-pci (%s)" % ", ".join(vfio))
        if vfs:
            why.append("%d SR-IOV virtual function(s) in use" % vfs)
        module.fail_json(
            msg="refusing to disable ACS on %d bridge(s): this host uses %s. ACS is what isolates these devices "
                "in their own IOMMU groups; disabling it lets them reach each other's DMA. Set force=true if the "
                "node is single-tenant and that is intended." % (len(plan), " and ".join(why)),
            **result)

    if plan and module._diff:
        result["diff"] = {
            "before_header": "ACSCtl", "after_header": "ACSCtl",
            "before": "".join("%s %s\n" % (b["bdf"], describe(b["before"])) for b in plan),
            "after": "".join("%s %s\n" % (b["bdf"], describe(b["after"])) for b in plan),
        }

    if module.check_mode or not plan:
        result["changed"] = bool(plan)
        result["bridges"] = plan
        module.exit_json(**result)

    setpci = ToolRunner(module, "setpci", p["setpci_path"], option="setpci_path")
    done = []
    for b in plan:
        write = ["-s", b["bdf"], "%s=%s" % (ACS_CTL_REG, b["after"])]
        wcmd = [setpci.bin] + write
        result["commands"].append(quote(wcmd))
        rc, wout, werr = setpci.run(write, check_rc=False)
        if rc != 0:
            result.update(changed=bool(done), bridges=done)
            setpci.fail(wcmd, rc, wout, werr, what="setpci write to %s" % b["bdf"], **_extra(result))
        read = ["-s", b["bdf"], ACS_CTL_REG]
        rcmd = [setpci.bin] + read
        result["commands"].append(quote(rcmd))
        rc, rout, rerr = setpci.run(read, check_rc=False)
        value = (rout or "").strip().lower()
        done.append(b)  # written, even if the read-back below disagrees
        if rc != 0 or value != b["after"]:
            result.update(changed=True, bridges=done)
            module.fail_json(
                msg="Failed to set ACS control on %s: read back %r, expected %r (rc=%s) %s"
                    % (b["bdf"], value, b["after"], rc, (rerr or "").strip()),
                rc=rc, stdout=rout, stderr=rerr, **dict(_extra(result), cmd=quote(rcmd), lspci_cmd=cmd))
    result.update(changed=True, bridges=done)
    module.exit_json(**result)


def _extra(result):
    """Result keys to carry into a failure, without clashing with fail()'s own cmd/rc/stdout/stderr."""
    return dict((k, v) for k, v in result.items() if k not in ("cmd", "rc", "stdout", "stderr", "msg"))


if __name__ == "__main__":
    main()
