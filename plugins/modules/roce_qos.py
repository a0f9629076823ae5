#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: roce_qos
short_description: Set trust mode, PFC and ECN on RoCEv2 interfaces with mlnx_qos
version_added: "1.0.0"
description:
  - The host side of a lossless RoCEv2 fabric. For every interface of O(interfaces) it reads the trust mode and the
    PFC state with one C(mlnx_qos -i <iface>) and ECN from sysfs
    (C(<sysfs_root>/class/net/<iface>/ecn/roce_np|roce_rp/enable/<priority>)), then changes only what differs
    from the wanted state, with C(mlnx_qos -i <iface> --trust <trust>) and/or C(--pfc 0,0,0,1,0,0,0,0), and ECN by
    writing C(1) to the sysfs files. After a change it reads the interface again and fails when the NIC did not keep
    the wanted state.
  - PFC is enabled on O(pfc_priority) only; ECN, when O(ecn=true), is enabled for the notification and reaction
    points on that priority. ECN that is on is never turned off.
  - None of these settings survives a reboot or a driver reload. RV(interfaces[].boot_argv) and
    RV(interfaces[].ecn_files) are what a boot unit runs to set them again (the C(nccl) role renders them into
    C(clusterforge-roce-qos.service)).
  - C(mlnx_qos) is looked up on C(PATH) and in the sbin directories (or taken from O(mlnx_qos_path)); when it is
    missing the module fails before anything is read, naming the package that provides it.
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads every interface and reports what would change and the commands it would run; changes nothing.
  diff_mode:
    support: full
    details:
      - Shows each interface's trust, PFC and ECN before and after (predicted in check mode).
options:
  interfaces:
    description: The network interfaces of the RoCE ports (C(/sys/class/infiniband/<hca>/ports/<n>/gid_attrs/ndevs/0)).
    type: list
    elements: str
    required: true
  trust:
    description: Trust mode. C(dscp) for routed RoCEv2 (the usual choice), C(pcp) for VLAN priorities.
    type: str
    choices: [dscp, pcp]
    default: dscp
  pfc_priority:
    description: The lossless priority. PFC is enabled on this priority and disabled on the others.
    type: int
    choices: [0, 1, 2, 3, 4, 5, 6, 7]
    default: 3
  ecn:
    description:
      - Enable ECN (DCQCN) on O(pfc_priority) for the notification point (C(roce_np)) and the reaction point
        (C(roce_rp)). An interface without these sysfs files fails the module before anything is changed.
      - V(false) leaves ECN as it is.
    type: bool
    default: true
  mlnx_qos_path:
    description: Path to C(mlnx_qos). By default it is looked up on C(PATH) and in the sbin directories.
    type: path
  sysfs_root:
    description: Root of sysfs. Change it only for tests.
    type: path
    default: /sys
  timeout_seconds:
    description: Time limit of each C(mlnx_qos) run; at the limit the run is killed and the module fails.
    type: int
    default: 60
notes:
  - Needs root. The switch ports must have the same PFC priority and ECN marking, or RoCE stays lossy.
seealso:
  - module: clusterforge.gpu.ib_port_info
"""

EXAMPLES = r"""
- name: Lossless RoCE on priority 3, trust DSCP, ECN on
  clusterforge.gpu.roce_qos:
    interfaces: [ens1f0np0, ens2f0np0]
    trust: dscp
    pfc_priority: 3
  register: __nccl_register_roce_qos

- name: What would change (no change is made)
  clusterforge.gpu.roce_qos:
    interfaces: [ens1f0np0]
  check_mode: true
  diff: true
"""

RETURN = r"""
interfaces:
  description: Each interface of O(interfaces), in order.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The interface.
      type: str
      sample: ens1f0np0
    before:
      description: The state read first (C(trust), C(pfc) as 8 values 0/1 by priority, C(ecn) C({np, rp}), null where unknown).
      type: dict
      sample: {"trust": "pcp", "pfc": [0, 0, 0, 0, 0, 0, 0, 0], "ecn": {"np": false, "rp": false}}
    after:
      description: The state read back after a change; the wanted state in check mode; RV(interfaces[].before) when nothing changed.
      type: dict
      sample: {"trust": "dscp", "pfc": [0, 0, 0, 1, 0, 0, 0, 0], "ecn": {"np": true, "rp": true}}
    changes:
      description: What differed (C(trust), C(pfc), C(ecn_np), C(ecn_rp)).
      type: list
      elements: str
      sample: ["trust", "pfc"]
    boot_argv:
      description: The whole C(mlnx_qos) command that sets this interface's trust and PFC (for a boot unit).
      type: list
      elements: str
      sample: ["/usr/bin/mlnx_qos", "-i", "ens1f0np0", "--trust", "dscp", "--pfc", "0,0,0,1,0,0,0,0"]
    ecn_files:
      description: The sysfs files that must hold C(1) (empty with O(ecn=false)).
      type: list
      elements: str
      sample: ["/sys/class/net/ens1f0np0/ecn/roce_np/enable/3", "/sys/class/net/ens1f0np0/ecn/roce_rp/enable/3"]
cmd:
  description: The commands run to change something (or that would be run, in check mode), shell-quoted.
  returned: always
  type: list
  elements: str
  sample: ["/usr/bin/mlnx_qos -i ens1f0np0 --trust dscp --pfc 0,0,0,1,0,0,0,0"]
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils import roce


def _read(module, runner, sysfs_root, iface, priority, timeout):
    rc, out, err = runner.run(["-i", iface], what="mlnx_qos -i %s" % iface, timeout_seconds=timeout)
    try:
        state = roce.parse_mlnx_qos(out)
    except ValueError as e:
        module.fail_json(msg="%s: %s" % (iface, e), cmd=quote([runner.bin, "-i", iface]), rc=rc, stdout=out, stderr=err)
    state = {"trust": state["trust"], "pfc": state["pfc"], "ecn": roce.read_ecn(sysfs_root, iface, priority)}
    return state


def _wanted(before, change, trust, pfc):
    after = {"trust": trust if change["trust"] else before["trust"], "pfc": pfc if change["pfc"] else before["pfc"],
             "ecn": dict(before["ecn"])}
    for point in change["ecn"]:
        after["ecn"][point] = True
    return after


def main():
    module = AnsibleModule(
        argument_spec=dict(
            interfaces=dict(type="list", elements="str", required=True),
            trust=dict(type="str", choices=list(roce.TRUST_STATES), default="dscp"),
            pfc_priority=dict(type="int", choices=list(range(roce.PRIORITIES)), default=3),
            ecn=dict(type="bool", default=True),
            mlnx_qos_path=dict(type="path"),
            sysfs_root=dict(type="path", default="/sys"),
            timeout_seconds=dict(type="int", default=roce.TIME_LIMIT_SECONDS),
        ),
        supports_check_mode=True,
    )
    p = module.params
    ifaces = []
    for name in p["interfaces"]:
        name = (name or "").strip()
        try:
            roce.mlnx_qos_set_args(name)
        except ValueError as e:
            module.fail_json(msg="interfaces: %s" % e)
        if name not in ifaces:
            ifaces.append(name)
    if not ifaces:
        module.fail_json(msg="interfaces is empty: no RoCE interface to configure")
    if p["timeout_seconds"] <= 0:
        module.fail_json(msg="timeout_seconds must be a positive number of seconds, got %s" % p["timeout_seconds"])
    runner = ToolRunner(module, roce.TOOL, p["mlnx_qos_path"], required=False, option="mlnx_qos_path")
    if not runner.available:
        module.fail_json(msg="mlnx_qos not found on this host (looked on PATH and in /sbin, /usr/sbin, /usr/local/sbin); "
                             + roce.TOOL_PACKAGE_HINT)
    trust, prio, timeout = p["trust"], p["pfc_priority"], p["timeout_seconds"]
    pfc = roce.pfc_for_priority(prio)

    # Read everything, and refuse what cannot be set, before changing anything.
    results, changes = [], []
    for iface in ifaces:
        before = _read(module, runner, p["sysfs_root"], iface, prio, timeout)
        if p["ecn"]:
            absent = [roce.ecn_path(p["sysfs_root"], iface, point, prio) for point in roce.ECN_POINTS
                      if before["ecn"][point] is None]
            if absent:
                module.fail_json(msg="%s: ECN cannot be set: %s missing or unreadable (not an mlx5 RoCE interface?); "
                                     "set ecn: false to leave ECN alone" % (iface, ", ".join(absent)))
        change = roce.plan(before, trust, pfc, p["ecn"])
        changes.append(change)
        results.append({
            "name": iface, "before": before,
            "changes": ([k for k in ("trust", "pfc") if change[k] is not None] + ["ecn_%s" % x for x in change["ecn"]]),
            "boot_argv": [runner.bin] + roce.mlnx_qos_set_args(iface, trust, pfc),
            "ecn_files": [roce.ecn_path(p["sysfs_root"], iface, point, prio) for point in roce.ECN_POINTS] if p["ecn"] else [],
        })

    cmds = []
    for result, change in zip(results, changes):
        iface, before = result["name"], result["before"]
        if roce.plan_is_empty(change):
            result["after"] = before
            continue
        if change["trust"] is not None or change["pfc"] is not None:
            cmds.append([runner.bin] + roce.mlnx_qos_set_args(iface, change["trust"], change["pfc"]))
        if module.check_mode:
            result["after"] = _wanted(before, change, trust, pfc)
            continue
        if change["trust"] is not None or change["pfc"] is not None:
            runner.run(roce.mlnx_qos_set_args(iface, change["trust"], change["pfc"]), what="mlnx_qos -i %s" % iface,
                       timeout_seconds=timeout)
        for point in change["ecn"]:
            path = roce.ecn_path(p["sysfs_root"], iface, point, prio)
            try:
                with open(path, "w") as f:
                    f.write("1\n")
            except (IOError, OSError) as e:
                module.fail_json(msg="%s: cannot enable ECN: writing 1 to %s failed: %s" % (iface, path, e),
                                 interfaces=results, cmd=[quote(c) for c in cmds])
        after = _read(module, runner, p["sysfs_root"], iface, prio, timeout)
        result["after"] = after
        left = roce.plan(after, trust, pfc, p["ecn"])
        if not roce.plan_is_empty(left):
            module.fail_json(msg="%s: the NIC did not keep the wanted QoS (still differs: %s); read back %s"
                                 % (iface, ", ".join(k for k in ("trust", "pfc", "ecn") if left[k]), after),
                             interfaces=results, cmd=[quote(c) for c in cmds], changed=True)

    changed = any(r["changes"] for r in results)
    out = dict(changed=changed, interfaces=results, cmd=[quote(c) for c in cmds])
    if module._diff:
        out["diff"] = {"before": dict((r["name"], r["before"]) for r in results if r["changes"]),
                       "after": dict((r["name"], r["after"]) for r in results if r["changes"])}
    module.exit_json(**out)


if __name__ == "__main__":
    main()
