#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: slurm_node
short_description: Drain and resume Slurm nodes without touching other people's drains
version_added: 1.0.0
description:
  - Drains (C(scontrol update State=DRAIN Reason=...)) or resumes (C(State=RESUME)) Slurm nodes for rolling
    maintenance, the way NHC does it - reasons belong to whoever set them.
  - Reads the state of every listed node with one C(scontrol show node <hostlist>) call, decides per node, then
    changes all nodes that need it with one C(scontrol update NodeName=<hostlist>) call.
  - O(state=drained) never uses C(State=DOWN), which would kill running jobs. Running jobs finish; with O(wait=true)
    the module waits until each node it drained has no jobs left (C(sinfo) state C(drain), not C(drng)).
  - A node already drained with the same reason is left unchanged. A node drained, down or failed with another
    reason is left alone and reported in RV(skipped); its reason is never overwritten. The one exception is Slurm's
    own C(Not responding) on a DOWN node, which Slurm clears itself once slurmd answers and nobody owns, so a drain
    covers it.
  - The ownership rule is C(reason_action) in the collection's module_utils/slurm.py. The health check of
    clusterforge.gpu.slurm_compute follows the same rule.
  - O(state=resumed) resumes only nodes whose drain reason starts with O(reason_prefix) (this collection's drains),
    unless O(force=true). Nodes drained by someone else stay drained and are reported in RV(skipped).
  - Unknown node names fail the module before anything is changed.
author:
  - ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the node states and reports what would change; runs no C(scontrol update) and does not wait.
  diff_mode:
    support: full
    details:
      - Shows the state and reason of each listed node before and after (predicted in check mode).
options:
  nodes:
    description:
      - The Slurm nodes, as a hostlist expression (C(gpu[01-16]), C(gpu01,gpu07)).
      - The clusterforge.gpu.hostlist_compress filter turns a list of inventory names into one.
    type: str
    required: true
  state:
    description:
      - V(drained) sets C(State=DRAIN) with O(reason) on the listed nodes that are not drained yet.
      - V(resumed) sets C(State=RESUME) on the listed nodes drained with a reason starting with O(reason_prefix)
        (or on every drained node with O(force=true)).
    type: str
    required: true
    choices: [drained, resumed]
  reason:
    description:
      - "The reason Slurm records with the drain, for example C(cf-roll: kernel 6.8 upgrade)."
      - Required with O(state=drained), and it must start with O(reason_prefix) so that a later O(state=resumed)
        recognises the drain as ours.
      - Not used with O(state=resumed).
    type: str
  reason_prefix:
    description:
      - Ownership marker. Only drains whose reason starts with this prefix are resumed (without O(force)).
      - "Use a narrower prefix such as C(cf-roll:) or C(cf-health:) so that one workflow does not resume another's drains."
      - An empty prefix matches every reason, which is the same as O(force=true).
    type: str
    default: "cf-"
  adopt:
    description:
      - With O(state=drained), a node already drained with another reason that starts with O(reason_prefix) (an
        earlier run of the same workflow, for example a rolling change that stopped on a failed health check) gets
        the new O(reason) and counts as drained by this task (it is waited for), instead of being skipped.
      - Drains whose reason does not start with O(reason_prefix) are never adopted.
      - Also used to record why a node stays drained (C(cf-roll:<run> FAILED <check>)) over this run's own reason.
    type: bool
    default: false
    version_added: 1.0.0
  force:
    description:
      - With O(state=resumed), also resume nodes drained by someone else (any reason).
      - Has no effect with O(state=drained); other people's reasons are never overwritten.
    type: bool
    default: false
  wait:
    description:
      - With O(state=drained), wait until every node drained by this module (now or by an earlier run with the same
        O(reason)) has no jobs left, polling C(sinfo -h -N -n <nodes> -o "%N %t %C") until it reports C(drain)
        instead of C(drng) (or C(comp)).
      - Fails if the time runs out, naming the nodes still draining, or if a node stops being drained while waiting.
      - Ignored in check mode and with O(state=resumed).
    type: bool
    default: false
  wait_timeout_seconds:
    description: How long O(wait) waits in total.
    type: int
    default: 3600
  poll_interval_seconds:
    description: Seconds between two polls while waiting.
    type: int
    default: 10
  scontrol_path:
    description: Path of C(scontrol). Default, looked up on E(PATH) and in the sbin directories.
    type: path
  sinfo_path:
    description: Path of C(sinfo), used by O(wait). Default, looked up on E(PATH).
    type: path
notes:
  - Needs SlurmUser, root or a Slurm admin account to update nodes; reading needs no privilege.
  - C(State=RESUME) turns a DRAIN or DOWN node to IDLE; a node whose slurmd does not answer goes back to DOWN.
seealso:
  - name: scontrol(1)
    description: Node update states, Reason and RESUME semantics.
    link: https://slurm.schedmd.com/scontrol.html
"""

EXAMPLES = r"""
- name: Drain the nodes of this batch before the kernel upgrade and wait for their jobs to finish
  clusterforge.gpu.slurm_node:
    nodes: "{{ ansible_play_batch | clusterforge.gpu.hostlist_compress }}"
    state: drained
    reason: "cf-roll: kernel upgrade {{ kernel_version }}"
    reason_prefix: "cf-roll:"
    wait: true
    wait_timeout_seconds: 7200
  delegate_to: "{{ groups['slurm_controller'][0] }}"
  run_once: true

- name: Put the nodes back into service (only our own drains)
  clusterforge.gpu.slurm_node:
    nodes: gpu[01-16]
    state: resumed
    reason_prefix: "cf-roll:"
  delegate_to: "{{ groups['slurm_controller'][0] }}"
  run_once: true

- name: Resume a node whatever drained it (an admin decision)
  clusterforge.gpu.slurm_node:
    nodes: gpu07
    state: resumed
    force: true
"""

RETURN = r"""
changed:
  description: Whether an update was run (or would be, in check mode).
  returned: always
  type: bool
  sample: true
nodes:
  description: One entry per listed node, in the order of O(nodes).
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Slurm node name.
      type: str
      sample: gpu01
    state_before:
      description: C(State) as C(scontrol show node) printed it.
      type: str
      sample: MIXED
    reason_before:
      description: The reason text before, without Slurm's C([user@time]) tag; null when none.
      type: str
      sample: null
    state_after:
      description: The state after the change; predicted from the change, or the drained state seen while waiting.
      type: str
      sample: MIXED+DRAIN
    reason_after:
      description: The reason text after; null when none.
      type: str
      sample: "cf-roll: kernel upgrade"
    action:
      description: V(drain), V(resume), V(none) (already in the requested state) or V(skip) (owned by someone else).
      type: str
      sample: drain
  sample:
    - name: gpu01
      state_before: MIXED
      reason_before: null
      state_after: MIXED+DRAIN
      reason_after: "cf-roll: kernel upgrade"
      action: drain
skipped:
  description: Nodes left alone because someone else's reason is on them.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Slurm node name.
      type: str
    state:
      description: Current C(State).
      type: str
    reason:
      description: Their reason text.
      type: str
    reason_user:
      description: Who set the reason, from Slurm's tag; null if not printed.
      type: str
    reason_time:
      description: When it was set, from Slurm's tag; null if not printed.
      type: str
    why:
      description: Why the node was skipped.
      type: str
  sample:
    - name: gpu07
      state: IDLE+DRAIN
      reason: bad DIMM, ticket 4711
      reason_user: root
      reason_time: "2024-05-01T10:00:00"
      why: drained by someone else (reason does not start with 'cf-roll:')
cmd:
  description:
    - The C(scontrol update) commands that were run, shell-quoted (at most one). Empty in check mode and when nothing
      needed a change; in check mode, diff mode and RV(nodes) show what would change.
    - On a failure of a command, C(cmd) is that command (one string), with C(rc), C(stdout) and C(stderr).
  returned: always
  type: list
  elements: str
  sample: ["/usr/bin/scontrol update 'NodeName=gpu[01-04]' State=DRAIN 'Reason=cf-roll: kernel upgrade'"]
waited_seconds:
  description: Seconds spent waiting for nodes to drain (0 without O(wait)).
  returned: always
  type: float
  sample: 130.5
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import compress
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import parse_sinfo, reason_action, split_reason, state_flags
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm_nodes import read_nodes, unique_names

ARGUMENT_SPEC = dict(
    nodes=dict(type="str", required=True),
    state=dict(type="str", required=True, choices=["drained", "resumed"]),
    reason=dict(type="str"),
    reason_prefix=dict(type="str", default="cf-"),
    force=dict(type="bool", default=False),
    adopt=dict(type="bool", default=False),
    wait=dict(type="bool", default=False),
    wait_timeout_seconds=dict(type="int", default=3600),
    poll_interval_seconds=dict(type="int", default=10),
    scontrol_path=dict(type="path"),
    sinfo_path=dict(type="path"),
)


def _join_state(base, flags):
    return "+".join([base] + list(flags))


def _decide(module, name, node):
    """Return (entry, skipped_or_None) for one node."""
    params = module.params
    state_text = node.get("State", "")
    try:
        info = state_flags(state_text)
    except ValueError:
        module.fail_json(msg="cannot parse the state %r of node %s" % (state_text, name))
    reason, user, when = split_reason(node.get("Reason"))
    prefix = params["reason_prefix"]
    entry = {"name": name, "state_before": state_text, "reason_before": reason,
             "state_after": state_text, "reason_after": reason, "action": "none"}
    skipped = None

    def skip(why):
        entry["action"] = "skip"
        return {"name": name, "state": state_text, "reason": reason, "reason_user": user, "reason_time": when,
                "why": why}

    # One ownership rule for every drain and resume of this collection (module_utils/slurm.py reason_action).
    if params["state"] == "drained":
        verdict, why = reason_action("drain", info, reason, prefix, wanted=params["reason"], rewrite=params["adopt"])
        if verdict == "act":
            entry["action"] = "drain"
            if not info["drain"]:
                entry["state_after"] = _join_state(info["base"], info["flags"] + ["DRAIN"])
            entry["reason_after"] = params["reason"]
        elif verdict == "skip":
            skipped = skip(why)
    else:
        verdict, why = reason_action("resume", info, reason, prefix)
        if verdict == "skip" and params["force"]:
            verdict = "act"
        if verdict == "act":
            entry["action"] = "resume"
            base = "IDLE" if info["base"] in ("DOWN", "DRAINED", "DRAINING") else info["base"]
            entry["state_after"] = _join_state(base, [f for f in info["flags"] if f != "DRAIN"])
            entry["reason_after"] = None
        elif verdict == "skip":
            skipped = skip(why)
    return entry, skipped


class _WaitFailed(Exception):
    def __init__(self, msg, waited, **extra):
        super(_WaitFailed, self).__init__(msg)
        self.msg = msg
        self.waited = waited
        self.extra = extra


def _wait_drained(module, sinfo, entries):
    """Poll sinfo until every node in ``entries`` is DRAINED; returns the seconds waited."""
    params = module.params
    pending = list(entries)
    start = time.monotonic()
    deadline = start + params["wait_timeout_seconds"]
    last = {}
    while True:
        names = [e["name"] for e in pending]
        rc, out, err = sinfo.run(["-h", "-N", "-n", compress(names), "-o", "%N %t %C"], what="sinfo")
        seen = {}
        for row in parse_sinfo(out, ["nodelist", "state", "cpus_state"]):
            if row.get("nodelist") and row.get("state"):
                seen[row["nodelist"]] = row
        still = []
        for entry in pending:
            row = seen.get(entry["name"])
            if row is None:
                still.append(entry)
                continue
            last[entry["name"]] = row
            try:
                info = state_flags(row["state"])
            except ValueError:
                still.append(entry)
                continue
            if info["drained"]:
                base = "DOWN" if info["base"] == "DOWN" else "IDLE"
                entry["state_after"] = _join_state(base, [f for f in info["flags"]
                                                          if f not in ("NOT_RESPONDING", "POWERED_DOWN")] or ["DRAIN"])
            elif not info["drain"]:
                raise _WaitFailed("node %s is no longer drained while waiting (sinfo state %r): someone resumed it"
                                  % (entry["name"], row["state"]), round(time.monotonic() - start, 1))
            else:
                still.append(entry)
        pending = still
        now = time.monotonic()
        if not pending:
            return round(now - start, 1)
        if now >= deadline:
            details = []
            for entry in pending:
                row = last.get(entry["name"])
                if row is None:
                    details.append("%s (state unknown)" % entry["name"])
                    continue
                cpus = (row.get("cpus_state") or "").split("/")
                alloc = (", %s CPUs still allocated" % cpus[0]) if len(cpus) == 4 else ""
                details.append("%s (%s%s)" % (entry["name"], row["state"], alloc))
            raise _WaitFailed("timed out after %ss waiting for %d node(s) to drain; still draining: %s"
                              % (params["wait_timeout_seconds"], len(pending), ", ".join(details)),
                              round(now - start, 1), still_draining=[e["name"] for e in pending])
        time.sleep(max(0, min(params["poll_interval_seconds"], deadline - now)))


def main():
    module = AnsibleModule(
        argument_spec=ARGUMENT_SPEC,
        required_if=[("state", "drained", ("reason",))],
        supports_check_mode=True,
    )
    params = module.params
    if params["wait_timeout_seconds"] < 0:
        module.fail_json(msg="wait_timeout_seconds must be >= 0")
    if params["poll_interval_seconds"] < 1:
        module.fail_json(msg="poll_interval_seconds must be >= 1")
    if params["state"] == "drained":
        reason = (params["reason"] or "").strip()
        if not reason:
            module.fail_json(msg="reason must not be empty: Slurm requires a reason to drain a node")
        if "\n" in reason or "\r" in reason:
            module.fail_json(msg="reason must be one line")
        if not reason.startswith(params["reason_prefix"]):
            module.fail_json(msg="reason %r must start with reason_prefix %r, or state=resumed could not recognise "
                                 "this drain as ours later" % (reason, params["reason_prefix"]))
        params["reason"] = reason

    names = unique_names(module, params["nodes"])
    scontrol = ToolRunner(module, "scontrol", params["scontrol_path"], option="scontrol_path")
    records, read_cmd = read_nodes(module, scontrol, names, unknown_note="; nothing was changed")
    by_name = dict((node["NodeName"], node) for node in records)

    entries, skipped = [], []
    for name in names:
        entry, skip = _decide(module, name, by_name[name])
        entries.append(entry)
        if skip:
            skipped.append(skip)

    changing = [e["name"] for e in entries if e["action"] in ("drain", "resume")]
    cmd = []
    if changing and not module.check_mode:
        args = ["update", "NodeName=%s" % compress(changing)]
        if params["state"] == "drained":
            args += ["State=DRAIN", "Reason=%s" % params["reason"]]
        else:
            args += ["State=RESUME"]
        scontrol.run(args, what="scontrol update")
        cmd.append(quote(scontrol.calls[-1]))

    waited = 0.0
    if params["state"] == "drained" and params["wait"] and not module.check_mode:
        waiting = [e for e in entries
                   if e["action"] == "drain"
                   or (e["action"] == "none" and state_flags(e["state_before"])["draining"])]
        if waiting:
            sinfo = ToolRunner(module, "sinfo", params["sinfo_path"], option="sinfo_path")
            try:
                waited = _wait_drained(module, sinfo, waiting)
            except _WaitFailed as e:
                module.fail_json(msg=e.msg, changed=bool(changing), nodes=entries, skipped=skipped, cmd=cmd,
                                 waited_seconds=e.waited, **e.extra)

    result = dict(changed=bool(changing), nodes=entries, skipped=skipped, cmd=cmd, waited_seconds=waited)
    if module._diff:
        result["diff"] = dict(
            before={e["name"]: {"state": e["state_before"], "reason": e["reason_before"]} for e in entries},
            after={e["name"]: {"state": e["state_after"], "reason": e["reason_after"]} for e in entries},
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
