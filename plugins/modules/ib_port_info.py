#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ib_port_info
short_description: Report InfiniBand HCA port state, physical state, rate and link layer
description:
  - Reports every HCA port from one C(ibstat) call, or from sysfs
    (C(/sys/class/infiniband/<dev>/ports/<n>/{state,phys_state,rate,link_layer})).
  - Returns RV(active_ports) (C(<hca>:<port>) for ports that are C(Active) and C(LinkUp) with the wanted link
    layer), the list the C(nccl) role writes into C(NCCL_IB_HCA).
  - Optionally checks every port of the wanted link layer against O(expected_rate_gbps). It never changes
    anything.
version_added: "1.0.0"
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.INFO_MODULE
options:
  source:
    description:
      - Where to read the ports from.
      - C(auto) uses C(ibstat) when it is installed (or O(ibstat_path) is set), else sysfs.
    type: str
    choices: [auto, ibstat, sysfs]
    default: auto
  ibstat_path:
    description: Path to C(ibstat). By default it is looked up on C(PATH) and in the sbin directories.
    type: path
  sysfs_root:
    description: Root of sysfs. Change it only for tests.
    type: path
    default: /sys
  link_layer:
    description:
      - Which ports count for RV(active_ports) and the rate check. C(any) takes every port.
    type: str
    choices: [InfiniBand, Ethernet, any]
    default: InfiniBand
  expected_rate_gbps:
    description:
      - Expected port rate in Gb/s (400 for NDR 4x, 200 for HDR 4x). Ports of the wanted link layer that are not
        Active/LinkUp or run at another rate are listed in RV(mismatched_ports).
    type: int
  fail_on_mismatch:
    description: Fail when RV(mismatched_ports) is not empty. Needs O(expected_rate_gbps).
    type: bool
    default: false
notes:
  - C(Initializing) means no subnet manager has swept the port; C(Down)/C(Polling) means no cable or peer.
seealso:
  - module: clusterforge.gpu.ibdiagnet
"""

EXAMPLES = r"""
- name: Read HCA ports
  clusterforge.gpu.ib_port_info:
  register: __nccl_register_ib

- name: Every NDR port must be up at 400 Gb/s
  clusterforge.gpu.ib_port_info:
    expected_rate_gbps: 400
    fail_on_mismatch: true

- name: Use the active ports for NCCL
  ansible.builtin.set_fact:
    __nccl_ib_hca: "{{ __nccl_register_ib.active_ports | join(',') }}"
"""

RETURN = r"""
ports:
  description: Every HCA port.
  returned: always
  type: list
  elements: dict
  contains:
    ca:
      description: HCA name.
      type: str
      sample: mlx5_0
    port:
      description: Port number.
      type: int
      sample: 1
    state:
      description: Logical state (Down, Initializing, Armed, Active).
      type: str
      sample: Active
    physical_state:
      description: Physical state (LinkUp, Polling, Disabled, ...).
      type: str
      sample: LinkUp
    rate_gbps:
      description: Link rate in Gb/s.
      type: int
      sample: 400
    link_layer:
      description: InfiniBand or Ethernet.
      type: str
      sample: InfiniBand
    ca_type:
      description: HCA type (ibstat), or the sysfs hca_type.
      type: str
      returned: when known
      sample: MT4129
    firmware:
      description: Firmware version.
      type: str
      returned: when known
      sample: 28.41.1000
    base_lid:
      description: Base LID.
      type: int
      returned: when known
      sample: 128
    roce_v2_ipv4_gid_index:
      description:
        - Ethernet (RoCE) ports only, read from sysfs whatever O(source) is. The lowest GID index whose type is
          C(RoCE v2) and whose GID carries an IPv4 address (C(::ffff:a.b.c.d)), the index C(NCCL_IB_GID_INDEX)
          takes; null when the port has none (no IPv4 address on its interface).
      type: int
      returned: for Ethernet ports
      sample: 3
    port_guid:
      description: Port GUID.
      type: str
      returned: when known (ibstat)
      sample: "0x58a2e10300a7820e"
    name:
      description: C(<ca>:<port>).
      type: str
      sample: "mlx5_0:1"
active_ports:
  description: C(<ca>:<port>) of the ports that are Active and LinkUp with the wanted link layer.
  returned: always
  type: list
  elements: str
  sample: ["mlx5_0:1", "mlx5_1:1"]
mismatched_ports:
  description: Ports of the wanted link layer that are not Active/LinkUp at O(expected_rate_gbps).
  returned: always
  type: list
  elements: dict
  sample: [{"name": "mlx5_3:1", "state": "Down", "physical_state": "Polling", "rate_gbps": 10}]
source:
  description: Where the data came from (ibstat or sysfs).
  returned: always
  type: str
  sample: ibstat
cmd:
  description: The ibstat command, when ibstat was used.
  returned: when source is ibstat
  type: str
  sample: /usr/sbin/ibstat
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils import infiniband


def read_sysfs(root):
    ports = infiniband.read_sysfs_ports(os.path.join(root, "class", "infiniband"))
    for port in ports:
        del port["counters"]  # none asked for
    return ports


def _gid_table(directory):
    """{index: text} of a sysfs GID directory; unset entries fail to read (EINVAL) and are left out."""
    table = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return table
    for name in names:
        if name.isdigit():
            value = infiniband.read_sysfs_text(os.path.join(directory, name))
            if value:
                table[int(name)] = value
    return table


def add_roce_gid_indexes(root, ports):
    """Set roce_v2_ipv4_gid_index on every Ethernet port, from sysfs (ibstat does not show GIDs)."""
    for port in ports:
        if (port.get("link_layer") or "").lower() != "ethernet":
            continue
        pp = os.path.join(root, "class", "infiniband", port["ca"], "ports", str(port["port"]))
        port["roce_v2_ipv4_gid_index"] = infiniband.roce_v2_ipv4_gid_index(
            _gid_table(os.path.join(pp, "gid_attrs", "types")), _gid_table(os.path.join(pp, "gids")))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="str", choices=["auto", "ibstat", "sysfs"], default="auto"),
            ibstat_path=dict(type="path"),
            sysfs_root=dict(type="path", default="/sys"),
            link_layer=dict(type="str", choices=["InfiniBand", "Ethernet", "any"], default="InfiniBand"),
            expected_rate_gbps=dict(type="int"),
            fail_on_mismatch=dict(type="bool", default=False),
        ),
        required_if=[("fail_on_mismatch", True, ("expected_rate_gbps",))],
        supports_check_mode=True,
    )
    p = module.params
    result = dict(changed=False)
    source = p["source"]
    runner = None
    if source in ("auto", "ibstat"):
        runner = ToolRunner(module, "ibstat", p["ibstat_path"], required=(source == "ibstat"), option="ibstat_path")
        if source == "auto":
            source = "ibstat" if runner.available else "sysfs"
    if source == "ibstat":
        rc, out, err = runner.run([], what="ibstat")
        result["cmd"] = quote([runner.bin])
        ports = infiniband.parse_ibstat(out)
        if not ports and out.strip():
            module.fail_json(msg="could not parse any port from ibstat output", stdout=out, stderr=err,
                             cmd=result["cmd"], rc=rc)
    else:
        base = os.path.join(p["sysfs_root"], "class", "infiniband")
        if not os.path.isdir(base):
            module.fail_json(msg="%s does not exist: no RDMA devices, or the ib_core/mlx5_ib modules are not "
                                 "loaded" % base)
        ports = read_sysfs(p["sysfs_root"])
    for port in ports:
        port["name"] = "%s:%s" % (port["ca"], port["port"])
    add_roce_gid_indexes(p["sysfs_root"], ports)

    def wanted(port):
        return p["link_layer"] == "any" or (port.get("link_layer") or "").lower() == p["link_layer"].lower()

    def healthy(port):
        return port.get("state") == "Active" and port.get("physical_state") == "LinkUp"

    active = [port["name"] for port in ports if wanted(port) and healthy(port)]
    mismatched = []
    if p["expected_rate_gbps"] is not None:
        for port in ports:
            if wanted(port) and (not healthy(port) or port.get("rate_gbps") != p["expected_rate_gbps"]):
                mismatched.append(dict((k, port.get(k)) for k in
                                       ("name", "state", "physical_state", "rate_gbps", "link_layer")))
    result.update(ports=ports, active_ports=active, mismatched_ports=mismatched, source=source)
    if p["expected_rate_gbps"] is not None and not [x for x in ports if wanted(x)]:
        if p["fail_on_mismatch"]:
            module.fail_json(msg="no %s port found to check against expected_rate_gbps" % p["link_layer"], **result)
        module.warn("no %s port found to check against expected_rate_gbps" % p["link_layer"])
    if p["fail_on_mismatch"] and mismatched:
        module.fail_json(
            msg="%d port(s) not Active/LinkUp at %s Gb/s: %s" % (
                len(mismatched), p["expected_rate_gbps"],
                ", ".join("%s (%s/%s, %s Gb/s)" % (m["name"], m["state"], m["physical_state"], m["rate_gbps"])
                          for m in mismatched)),
            **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
