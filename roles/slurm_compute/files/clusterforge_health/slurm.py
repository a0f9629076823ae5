# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""Slurm: the node's state and drain reason (`scontrol show node`), the drains every node carries with this check's
prefix (`scontrol show node -o`), and the decision whether to drain, update, resume or leave the node, by the drain
reason ownership rule of plugins/module_utils/slurm.py (installed beside the program as clusterforge_slurm.py)."""

# pylint: disable=import-error
from clusterforge_slurm import parse_scontrol_nodes, reason_action, split_reason, state_flags
# pylint: enable=import-error

from clusterforge_health.core import SLURM, first_line, prefix_refusal, run


def node_info(state):
    """scontrol's node state (IDLE+DRAIN, DOWN*, MIXED+DRAIN+NOT_RESPONDING) as state_flags reads it; an empty
    state (a node scontrol did not describe) has no flag."""
    if not (state or "").strip():
        return {"base": "", "flags": [], "drain": False}
    return state_flags(state)


def decide(active, pending, state, reason, prefix, max_len, may_resume=True):
    """Return (action, new_reason, why): drain, update, resume, or none (why: whose reason kept this check off).
    `may_resume` False (a run beside another that holds the lock): drain or update only; the run holding the lock,
    which may have found a fault this one did not, decides whether the node resumes."""
    if prefix_refusal(prefix):
        return "none", None, None  # main() refuses earlier; never own a drain through a prefix this check cannot own
    info = node_info(state)
    reason = reason or None
    if active:
        text = "%s %s" % (prefix, "; ".join(f.text for f in active))
        if len(text) > max_len:
            text = text[:max_len - 3].rstrip() + "..."
        verdict, why = reason_action("drain", info, reason, prefix, wanted=text, rewrite=True)
        if verdict != "act":
            return "none", None, why
        return ("update" if info["drain"] else "drain"), text, None
    if pending or not may_resume:
        return "none", None, None  # a fault below its strikes neither drains nor lets the node resume
    verdict, why = reason_action("resume", info, reason, prefix)
    if verdict == "act":
        return "resume", None, None
    return "none", None, None  # a drain that is not this check's is not this check's to lift: no note needed


class SlurmUnanswered(RuntimeError):
    """scontrol gave no answer in the time left: not a fault of this node."""


def _scontrol(scontrol, budget, args, label, what):
    """scontrol's output; SlurmUnanswered when it gave no answer in the time left, RuntimeError when it failed."""
    res = run([scontrol] + args, budget, SLURM)
    if not res.finished:
        budget.unfinished.append(what)
        raise SlurmUnanswered("scontrol %s: %s (slurmctld busy or unreachable, or slurmd has not registered yet)" % (
            label, "no answer within %d s" % max(1, int(round(res.limit)))
            if res.outcome == "no answer" else "not run, time budget spent"))
    if res.rc != 0:
        raise RuntimeError("scontrol %s failed (rc %d): %s" % (label, res.rc,
                                                               first_line(res.out) or first_line(res.err)))
    return res.out


def _state_and_reason(node):
    """(state, reason without its [user@time] tag, the tag's time) of one node of parse_scontrol_nodes; "" for none.
    The time is when slurmctld took the drain (SLURM_TIME_FORMAT=standard, set for every command this check runs:
    ISO 8601, to the second, so that its text sorts as the time does)."""
    reason, _user, taken = split_reason(node.get("Reason"))
    return node.get("State", ""), reason or "", taken or ""


def node_state(scontrol, node, budget):
    out = _scontrol(scontrol, budget, ["show", "node", "-o", node], "show node %s" % node, "scontrol show node")
    described = [n for n in parse_scontrol_nodes(out) if n.get("NodeName") == node] or [{}]
    return _state_and_reason(described[0])[:2]


def own_drains(out, prefix):
    """(nodes in the cluster, {node: (reason time, reason)} of those drained or draining with this prefix) from
    `scontrol show node -o` of every node. The time is "" where the reason has no `[user@time]`."""
    nodes = [n for n in parse_scontrol_nodes(out) if n.get("NodeName")]
    drains = {}
    for node in nodes:
        state, reason, taken = _state_and_reason(node)
        flags = set(state.upper().replace("*", "").split("+"))
        if flags & {"DRAIN", "DRAINED", "DRAINING", "FAIL"} and reason.startswith(prefix):
            drains[node["NodeName"]] = (taken, reason)
    return len(nodes), drains


def all_nodes(scontrol, budget, when):
    return _scontrol(scontrol, budget, ["show", "node", "-o"], "show node -o (all nodes%s)" % when,
                     "scontrol show node -o (all nodes%s)" % when)
