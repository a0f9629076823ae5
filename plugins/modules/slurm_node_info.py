#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: slurm_node_info
short_description: Read the state, reason and GPUs of Slurm nodes
version_added: 1.0.0
description:
  - Reads every listed node (or every node of the cluster) with one C(scontrol show node) call and returns, per
    node, the state split into base state and flags, whether it is drained or still draining, who drained it and
    why, whether slurmd answers, and the GPUs Slurm has configured for it (C(Gres)).
  - Returns counts for the whole list, so that a play can refuse to start maintenance while too much of a
    partition is already out of service.
  - Never changes anything.
author:
  - ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.info_module
options:
  nodes:
    description:
      - The Slurm nodes, as a hostlist expression (C(gpu[01-16])). Default, every node C(scontrol) knows.
    type: str
  partition:
    description:
      - Keep only nodes in this partition (C(Partitions=) of C(scontrol show node)).
    type: str
  reason_prefix:
    description:
      - Drains whose reason starts with this prefix are reported as RV(nodes[].ours=true) and counted in
        RV(summary.drained_by_us) rather than in RV(summary.unavailable).
    type: str
    default: "cf-"
  jobs:
    description:
      - Also list the jobs each node still runs (RV(nodes[].jobs)), read with one C(squeue) call for all the nodes;
        what a drain waits for. Pending jobs are not listed.
    type: bool
    default: false
  scontrol_path:
    description: Path of C(scontrol). Default, looked up on E(PATH) and in the sbin directories.
    type: path
  squeue_path:
    description: Path of C(squeue), used by O(jobs). Default, looked up on E(PATH).
    type: path
seealso:
  - module: clusterforge.gpu.slurm_node
  - name: scontrol(1)
    description: Node states and flags.
    link: https://slurm.schedmd.com/scontrol.html
"""

EXAMPLES = r"""
- name: Read the GPU partition before a rolling change
  clusterforge.gpu.slurm_node_info:
    partition: gpu
    reason_prefix: "cf-roll:"
  register: gpu_partition

- name: Refuse to start when more than a quarter of the partition is already out
  ansible.builtin.assert:
    that: gpu_partition.summary.unavailable_percent <= 25
    fail_msg: "{{ gpu_partition.summary.unavailable_nodes | join(', ') }} already out of service"

- name: Wait until gpu07's jobs have finished after a drain (the recap callback prints the jobs left every 30 s)
  clusterforge.gpu.slurm_node_info:
    nodes: gpu07
    jobs: true
  register: gpu07_state
  until: not gpu07_state.nodes[0].draining
  retries: 360
  delay: 10
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
      sample: gpu01
    state:
      description: C(State) as printed.
      type: str
      sample: MIXED+DRAIN
    base:
      description: The base state (IDLE, MIXED, ALLOCATED, DOWN, ...).
      type: str
      sample: MIXED
    flags:
      description: State flags (DRAIN, NOT_RESPONDING, INVALID_REG, ...).
      type: list
      elements: str
      sample: [DRAIN]
    drain:
      description: The DRAIN flag is set.
      type: bool
    drained:
      description: Drained and no jobs left.
      type: bool
    draining:
      description: Drained, with jobs still running.
      type: bool
    responding:
      description: slurmd answers the controller (not DOWN, not NOT_RESPONDING).
      type: bool
    available:
      description: The node can take new jobs (responding and neither drained nor failed, not in maintenance).
      type: bool
    registered:
      description:
        - slurmd has registered with slurmctld and answers it (state not UNKNOWN, not INVAL, neither the
          NOT_RESPONDING nor the INVALID_REG flag); what a node must be after slurmd starts.
      type: bool
    reason:
      description: The reason text, without Slurm's C([user@time]) tag; null when none.
      type: str
    reason_user:
      description: Who set the reason.
      type: str
    reason_time:
      description: When the reason was set.
      type: str
    ours:
      description: The node is drained with a reason starting with O(reason_prefix).
      type: bool
    gres:
      description: C(Gres) as printed.
      type: str
      sample: gpu:h100:8(S:0-1)
    gpus:
      description: The GPU count configured in C(Gres).
      type: int
      sample: 8
    cpus_allocated:
      description: C(CPUAlloc).
      type: int
    partitions:
      description: The partitions of the node.
      type: list
      elements: str
    jobs:
      description:
        - The jobs the node still runs (configuring, running, completing, suspended or stopped), by job id as
          C(squeue) prints it (C(1234), C(1235_7) for an array task); only with O(jobs=true).
      type: list
      elements: str
      sample: ["1234", "1235_7"]
summary:
  description: Counts over RV(nodes).
  returned: always
  type: dict
  contains:
    total:
      description: Nodes listed.
      type: int
    available:
      description: Nodes that can take jobs.
      type: int
    unavailable:
      description: Nodes out of service for a reason that is not ours (drained by others, down, failed).
      type: int
    unavailable_nodes:
      description: Their names.
      type: list
      elements: str
    unavailable_percent:
      description: RV(summary.unavailable) in percent of RV(summary.total) (0 when no node is listed).
      type: float
    drained_by_us:
      description: Names of nodes drained with a reason starting with O(reason_prefix).
      type: list
      elements: str
    gpus:
      description: GPUs configured over all listed nodes.
      type: int
cmd:
  description: The command that was run to read the nodes.
  returned: always
  type: str
  sample: /usr/bin/scontrol show node 'gpu[01-08]'
jobs_cmd:
  description: The C(squeue) command that listed the jobs.
  returned: with O(jobs=true), when a node is listed
  type: str
  sample: /usr/bin/squeue -h -w 'gpu[01-08]' --states=CONFIGURING,RUNNING,COMPLETING,SUSPENDED,STOPPED -o '%i %N'
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import compress, expand
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import gres_count, split_reason, state_flags
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm_nodes import read_nodes, unique_names

# The job states that hold a node: a drained node is DRAINED only once none of its jobs is in one of them.
HOLDING_JOB_STATES = "CONFIGURING,RUNNING,COMPLETING,SUSPENDED,STOPPED"
OUT_OF_SERVICE = ("DOWN", "FAIL", "FAILING", "MAINT", "FUTURE", "POWERED_DOWN", "UNKNOWN", "INVAL")


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def describe(node, prefix):
    """One entry of RV(nodes) from a parsed C(scontrol show node) record."""
    info = state_flags(node.get("State", ""))
    reason, user, when = split_reason(node.get("Reason"))
    responding = info["base"] != "DOWN" and not info["not_responding"]
    out_flags = [f for f in info["flags"] if f in OUT_OF_SERVICE or f in ("FAIL", "INVALID_REG", "POWERED_DOWN")]
    available = responding and not info["drain"] and info["base"] not in OUT_OF_SERVICE and not out_flags
    try:
        gpus = gres_count(node.get("Gres"))
    except ValueError:
        gpus = None
    partitions = [p for p in (node.get("Partitions") or "").split(",") if p and p != "(null)"]
    return {
        "name": node["NodeName"], "state": node.get("State", ""), "base": info["base"], "flags": info["flags"],
        "drain": info["drain"], "drained": info["drained"], "draining": info["draining"],
        "responding": responding, "available": available,
        "registered": (not info["not_responding"] and info["base"] not in ("UNKNOWN", "INVAL")
                       and "INVALID_REG" not in info["flags"]),
        "reason": reason, "reason_user": user, "reason_time": when,
        "ours": bool(info["drain"] and reason and reason.startswith(prefix)),
        "gres": node.get("Gres"), "gpus": gpus, "cpus_allocated": _int(node.get("CPUAlloc")),
        "partitions": partitions,
    }


def summarise(entries):
    unavailable = [e["name"] for e in entries if not e["available"] and not e["ours"]]
    total = len(entries)
    return {
        "total": total,
        "available": sum(1 for e in entries if e["available"]),
        "unavailable": len(unavailable),
        "unavailable_nodes": unavailable,
        "unavailable_percent": round(100.0 * len(unavailable) / total, 1) if total else 0.0,
        "drained_by_us": [e["name"] for e in entries if e["ours"]],
        "gpus": sum(e["gpus"] or 0 for e in entries),
    }


def jobs_by_node(text, names):
    """``squeue -h -o '%i %N'`` output -> {node: [job ids]} for ``names`` (a job of several nodes counts on each)."""
    jobs = dict((name, []) for name in names)
    for line in text.splitlines():
        fields = line.split()
        if len(fields) != 2:
            continue
        job, nodelist = fields
        try:
            nodes = expand(nodelist)
        except ValueError:
            raise ValueError("squeue printed a node list that is not a hostlist: %r" % line)
        for node in nodes:
            if node in jobs and job not in jobs[node]:
                jobs[node].append(job)
    return jobs


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="str"),
            partition=dict(type="str"),
            reason_prefix=dict(type="str", default="cf-"),
            jobs=dict(type="bool", default=False),
            scontrol_path=dict(type="path"),
            squeue_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    names = unique_names(module, params["nodes"]) if params["nodes"] else None
    scontrol = ToolRunner(module, "scontrol", params["scontrol_path"], option="scontrol_path")
    records, read_cmd = read_nodes(module, scontrol, names)
    try:
        entries = [describe(r, params["reason_prefix"]) for r in records]
    except ValueError as e:
        module.fail_json(msg="cannot read the node states: %s" % e, cmd=quote(read_cmd))
    if params["partition"]:
        entries = [e for e in entries if params["partition"] in e["partitions"]]
    result = dict(changed=False, nodes=entries, summary=summarise(entries), cmd=quote(read_cmd))
    if params["jobs"]:
        listed = [e["name"] for e in entries]
        by_node = dict((name, []) for name in listed)
        if listed:
            squeue = ToolRunner(module, "squeue", params["squeue_path"], option="squeue_path")
            rc, out, err = squeue.run(["-h", "-w", compress(listed), "--states=%s" % HOLDING_JOB_STATES,
                                       "-o", "%i %N"], what="squeue")
            result["jobs_cmd"] = quote(squeue.calls[-1])
            try:
                by_node = jobs_by_node(out, listed)
            except ValueError as e:
                module.fail_json(msg="cannot read the jobs: %s" % e, cmd=result["jobs_cmd"])
        for entry in entries:
            entry["jobs"] = by_node[entry["name"]]
    module.exit_json(**result)


if __name__ == "__main__":
    main()
