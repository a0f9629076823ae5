#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: slurm_maintenance_info
short_description: Read which Slurm nodes run no job and are out of service for maintenance
version_added: "1.0.0"
description:
  - Reads the listed nodes with one C(scontrol show node) call and the reservations with one
    C(scontrol -o show reservation) call, and tells, per node, whether it may take tests that load it fully
    (DCGM diagnostics of level 2 and more, NCCL, ib_write_bw), and why not.
  - "A node is selected when Slurm runs no job on it and none can start: a drained node with no job left
    (C(IDLE+DRAIN), C(DOWN+DRAIN): what C(sinfo) calls DRAINED, never DRAINING), or an idle node that is not
    drained inside an active reservation with the C(MAINT) flag (C(scontrol create reservation flags=maint ...))."
  - "Never selected, each with the reason in RV(nodes[].why): a node that runs or completes jobs (also when it is
    drained, since its jobs finish first), one Slurm has not heard from (C(NOT_RESPONDING), C(UNKNOWN), C(FUTURE))
    or powers or reboots, a C(DOWN) or C(FAIL) node without C(DRAIN), a node in service, and an idle node whose
    maintenance reservation ends within O(min_remaining_minutes)."
  - Who drained a node does not change whether it is selected; RV(nodes[].ours) tells whether the drain is the
    caller's (its reason starts with O(reason_prefix)), and the caller decides whose drains it resumes.
  - Never changes anything. clusterforge.gpu.validate's deep checks (playbooks/health_deep.yml) use it to choose
    their nodes.
author:
  - ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.info_module
options:
  nodes:
    description:
      - The Slurm nodes, as a hostlist expression (C(gpu[01-16])). Default, every node C(scontrol) knows.
      - An unknown node fails the module.
    type: str
  min_remaining_minutes:
    description:
      - An idle node in a maintenance reservation is selected only while the reservation has at least this many
        minutes left (its C(EndTime)), so that a long diagnostic does not run on when jobs may start again.
        Drained nodes are not bounded by time.
    type: int
    default: 0
  reason_prefix:
    description:
      - Drains whose reason starts with this prefix are reported as RV(nodes[].ours=true). The default is the prefix
        the deep checks own.
    type: str
    default: "cf-deep:"
  scontrol_path:
    description: Path of C(scontrol). Default, looked up on E(PATH) and in the sbin directories.
    type: path
notes:
  - Slurm prints reservation times in the controller's local time; run the module on a host in the same time zone
    (the controller, with C(delegate_to)).
  - "Nodes in an active maintenance reservation carry the state flag C(MAINT) (Slurm 21.08 and before) or
    C(MAINTENANCE) (22.05 and later); a node with that flag counts as in a maintenance reservation even when the
    reservation read does not list it."
seealso:
  - module: clusterforge.gpu.slurm_node_info
  - module: clusterforge.gpu.slurm_node
  - name: Slurm advanced reservations
    description: The MAINT flag and reservation states.
    link: https://slurm.schedmd.com/reservations.html
"""

EXAMPLES = r"""
- name: Which GPU nodes may take the deep checks now
  clusterforge.gpu.slurm_maintenance_info:
    nodes: "{{ groups['gpu_nodes'] | clusterforge.gpu.hostlist_compress }}"
    min_remaining_minutes: 30
  delegate_to: "{{ groups['slurm_controller'][0] }}"
  run_once: true
  register: maintenance

- name: Say which and why
  ansible.builtin.debug:
    msg: >-
      {{ maintenance.nodes | map(attribute='name')
         | zip(maintenance.nodes | map(attribute='why')) | map('join', ': ') }}
  run_once: true
"""

RETURN = r"""
nodes:
  description: One entry per node, in the order C(scontrol) printed them.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Slurm node name.
      type: str
      sample: gpu02
    state:
      description: C(State) as printed.
      type: str
      sample: IDLE+DRAIN
    base:
      description: The base state (IDLE, DOWN, MIXED, ...).
      type: str
      sample: IDLE
    flags:
      description: State flags (DRAIN, MAINTENANCE, RESERVED, NOT_RESPONDING, ...).
      type: list
      elements: str
      sample: [DRAIN]
    drain:
      description: The DRAIN flag is set.
      type: bool
    reason:
      description: The reason text, without Slurm's C([user@time]) tag; null when none.
      type: str
      sample: "cf-deep: burn-in: new node"
    reason_user:
      description: Who set the reason.
      type: str
    reason_time:
      description: When the reason was set.
      type: str
    ours:
      description: The node is drained with a reason that starts with O(reason_prefix).
      type: bool
    gpus:
      description: The GPU count configured in C(Gres); null when C(Gres) cannot be read.
      type: int
      sample: 8
    selected:
      description:
        - The node runs no job and none can start on it (drained, or idle in an active maintenance reservation).
      type: bool
    kind:
      description: Why it is selected, V(drained) or V(maintenance); null when not selected.
      type: str
      sample: drained
    reservation:
      description: The maintenance reservation that holds the node; null when none.
      type: str
    why:
      description: One line saying why the node is selected or not.
      type: str
      sample: "drained, no job left (IDLE+DRAIN; reason: cf-deep: burn-in: new node)"
selected:
  description: The names of the selected nodes, in the order of RV(nodes).
  returned: always
  type: list
  elements: str
  sample: [gpu02, gpu05]
reservations:
  description: Every reservation C(scontrol) printed.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: C(ReservationName).
      type: str
    flags:
      description: C(Flags), upper case.
      type: list
      elements: str
      sample: [MAINT, SPEC_NODES]
    nodes:
      description: The expanded C(Nodes) hostlist (empty for C(Nodes=ALL), see RV(reservations[].all_nodes)).
      type: list
      elements: str
    all_nodes:
      description: The reservation holds every node (C(Nodes=ALL)).
      type: bool
    state:
      description: C(State) as printed (ACTIVE, INACTIVE); null when Slurm did not print it.
      type: str
    active:
      description: The reservation is active now.
      type: bool
    maint:
      description: It has the C(MAINT) flag.
      type: bool
    start_time:
      description: C(StartTime) as printed.
      type: str
    end_time:
      description: C(EndTime) as printed.
      type: str
    remaining_seconds:
      description: Seconds until C(EndTime) (negative once past); null when C(EndTime) is not a time.
      type: int
reason_prefix:
  description: O(reason_prefix), as used.
  returned: always
  type: str
  sample: "cf-deep:"
cmd:
  description: The two commands that were run.
  returned: always
  type: list
  elements: str
  sample: ["/usr/bin/scontrol show node 'gpu[01-08]'", "/usr/bin/scontrol -o show reservation"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm_maintenance import (
    NO_RESERVATIONS_RE,
    deep_candidates,
    parse_scontrol_reservations,
)
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm_nodes import read_nodes, unique_names
from ansible_collections.clusterforge.gpu.plugins.module_utils.healthcheck import DEEP_REASON_PREFIX


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="str"),
            min_remaining_minutes=dict(type="int", default=0),
            reason_prefix=dict(type="str", default=DEEP_REASON_PREFIX),
            scontrol_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not (params["reason_prefix"] or "").strip():
        module.fail_json(msg="reason_prefix must not be empty: it would make every drain look like the caller's")
    if params["min_remaining_minutes"] < 0:
        module.fail_json(msg="min_remaining_minutes must be 0 or more, got %s" % params["min_remaining_minutes"])
    names = unique_names(module, params["nodes"]) if params["nodes"] else None
    scontrol = ToolRunner(module, "scontrol", params["scontrol_path"], option="scontrol_path")
    records, node_cmd = read_nodes(module, scontrol, names)
    rc, out, err = scontrol.run(["-o", "show", "reservation"], check_rc=False)
    res_cmd = scontrol.calls[-1]
    if rc != 0 and not NO_RESERVATIONS_RE.search(out + "\n" + err):
        scontrol.fail(res_cmd, rc, out, err, what="scontrol show reservation")
    try:
        entries, reservations = deep_candidates(records, parse_scontrol_reservations(out),
                                                min_remaining_seconds=60 * params["min_remaining_minutes"],
                                                reason_prefix=params["reason_prefix"])
    except ValueError as e:
        module.fail_json(msg="cannot read the node states: %s" % e, cmd=[quote(node_cmd), quote(res_cmd)])
    module.exit_json(changed=False, nodes=entries, selected=[e["name"] for e in entries if e["selected"]],
                     reservations=reservations, reason_prefix=params["reason_prefix"],
                     cmd=[quote(node_cmd), quote(res_cmd)])


if __name__ == "__main__":
    main()
