# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which Slurm nodes run no job and are out of service for maintenance: ``scontrol show reservation`` parsed, and
the nodes the deep checks may stress (drained nodes with no job left, idle nodes in an active MAINT reservation).

Pure Python, standard library only. Node records come from ``slurm.parse_scontrol_nodes`` (the one parser of
``scontrol show node``); node states are read by ``slurm.state_flags`` and reasons by ``slurm.split_reason``, so a
state or a reason means the same here as in slurm_node and slurm_node_info.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import re

from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import expand
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import (
    _KEY_RE,
    _parse_kv_line,
    gres_count,
    split_reason,
    state_flags,
)

# What scontrol prints (stdout, rc 0) when there is no reservation at all.
NO_RESERVATIONS_RE = re.compile(r"^\s*No reservations in the system\s*$", re.M)
SLURM_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"
# A node in an active MAINT reservation carries this flag: MAINT up to Slurm 21.08, MAINTENANCE from 22.05
# (node_state_flag_string), next to RESERVED.
MAINT_FLAGS = ("MAINT", "MAINTENANCE")
# Nodes that cannot be checked now: Slurm powers them, reboots them or has not heard from them.
_UNREACHABLE_FLAGS = ("NOT_RESPONDING", "POWERED_DOWN", "POWERING_UP", "POWERING_DOWN", "POWER_DOWN",
                      "REBOOT_REQUESTED", "REBOOT_ISSUED")
_UNREACHABLE_BASES = ("UNKNOWN", "FUTURE", "INVAL", "POWERED_DOWN", "POWERING_UP", "REBOOT_ISSUED",
                      "REBOOT_REQUESTED")
_BUSY_BASES = ("ALLOCATED", "MIXED", "COMPLETING", "DRAINING")


def parse_scontrol_reservations(text):
    """Parse ``scontrol show reservation`` output (multi-line or ``-o`` one-line) into a list of dicts.

    Every ``Key=value`` is kept as printed (strings). A reservation starts at its ``ReservationName=`` line;
    continuation lines are indented. ``No reservations in the system`` gives []. Free text (``Comment=...``) runs
    to the end of its line in the multi-line format, as in ``scontrol show node``.
    """
    reservations = []
    current = None
    for raw in (text or "").splitlines():
        line = raw.rstrip("\r\n")
        stripped = line.strip()
        if not stripped or NO_RESERVATIONS_RE.match(line):
            continue
        if stripped.startswith("ReservationName="):
            current = {}
            reservations.append(current)
            pairs = _parse_kv_line(stripped, rest_of_line_first=False)
        elif current is None or not _KEY_RE.match(stripped):
            continue
        else:
            pairs = _parse_kv_line(stripped, rest_of_line_first=line[:1].isspace())
        for key, value in pairs:
            current[key] = value
    return reservations


def _null(value):
    value = (value or "").strip()
    return None if not value or value.lower() in ("(null)", "n/a", "none", "unknown") else value


def parse_time(value):
    """A Slurm time (``2024-05-01T10:00:00``, the controller's local time) -> naive datetime; None if not a time."""
    value = _null(value)
    if value is None:
        return None
    try:
        return datetime.datetime.strptime(value, SLURM_TIME_FORMAT)
    except ValueError:
        return None


def describe_reservation(record, now):
    """One reservation record -> {name, flags, nodes, all_nodes, state, active, maint, start_time, end_time}.

    ``active``: Slurm's ``State=ACTIVE`` where printed (Slurm 14.11 on), else StartTime <= now < EndTime.
    ``nodes``: the expanded ``Nodes=`` hostlist (``ALL`` or ``ALL_NODES`` in the flags: every node, ``all_nodes``).
    """
    flags = [f.strip().upper() for f in (_null(record.get("Flags")) or "").split(",") if f.strip()]
    nodes_text = _null(record.get("Nodes"))
    all_nodes = nodes_text is not None and nodes_text.upper() == "ALL"
    try:
        nodes = [] if nodes_text is None or all_nodes else expand(nodes_text)
    except ValueError:
        nodes = []
    start, end = parse_time(record.get("StartTime")), parse_time(record.get("EndTime"))
    state = _null(record.get("State"))
    if state is not None:
        active = state.upper() == "ACTIVE"
    else:
        active = (start is None or start <= now) and (end is None or now < end)
    return {
        "name": record.get("ReservationName"),
        "flags": flags,
        "nodes": nodes,
        "all_nodes": all_nodes,
        "state": state,
        "active": active,
        "maint": "MAINT" in flags,
        "start_time": record.get("StartTime"),
        "end_time": record.get("EndTime"),
        "remaining_seconds": int((end - now).total_seconds()) if end is not None else None,
    }


def _maint_reservation(name, reservations):
    """The active MAINT reservation that holds node ``name`` (one without an end first, else the one that ends
    last), or None."""
    found = [r for r in reservations if r["active"] and r["maint"] and (r["all_nodes"] or name in r["nodes"])]
    open_ended = [r for r in found if r["remaining_seconds"] is None]
    if open_ended:
        return open_ended[0]
    return max(found, key=lambda r: r["remaining_seconds"]) if found else None


def deep_candidates(node_records, reservation_records, now=None, min_remaining_seconds=0, reason_prefix=None):
    """Which nodes run no job and may take the deep checks, and why each other node may not.

    ``node_records``: ``parse_scontrol_nodes`` output; ``reservation_records``: ``parse_scontrol_reservations``
    output; ``now``: the controller's local time (Slurm prints local times). Returns (entries, reservations): one
    entry per node, in the given order, with ``selected`` (bool), ``kind`` (``drained``, ``maintenance`` or null)
    and ``why`` (one line), plus its state, reason and configured GPUs; and the described reservations.

    Selected: a node with the DRAIN flag and no job left (IDLE+DRAIN, DOWN+DRAIN: Slurm's DRAINED, never DRAINING),
    and an idle node (no job, not drained) in an active reservation with the MAINT flag that still has
    ``min_remaining_seconds`` to run. ``ours``: drained with a reason that starts with ``reason_prefix`` (never
    without one). Never selected: a node that runs or completes jobs, one Slurm has not heard
    from (NOT_RESPONDING, UNKNOWN, FUTURE) or powers or reboots, a FAIL or DOWN node without DRAIN, a node in service.
    """
    now = now or datetime.datetime.now()
    reservations = [describe_reservation(r, now) for r in reservation_records if r.get("ReservationName")]
    entries = []
    for record in node_records:
        name = record.get("NodeName")
        if not name:
            continue
        state = record.get("State", "")
        info = state_flags(state)
        reason, user, when = split_reason(record.get("Reason"))
        try:
            gpus = gres_count(record.get("Gres"))
        except ValueError:
            gpus = None
        entry = {"name": name, "state": state, "base": info["base"], "flags": info["flags"], "drain": info["drain"],
                 "reason": reason, "reason_user": user, "reason_time": when, "gpus": gpus,
                 "ours": bool(reason_prefix and info["drain"] and reason and reason.startswith(reason_prefix)),
                 "selected": False,
                 "kind": None, "reservation": None, "why": ""}
        entries.append(entry)
        busy = info["base"] in _BUSY_BASES or info["completing"]
        cpus = record.get("CPUAlloc")
        if busy:
            entry["why"] = ("draining: jobs still run on it (%s)" if info["drain"] else "runs jobs (%s)") % state
            continue
        if cpus not in (None, "", "0"):
            # Slurm says IDLE while CPUs are allocated only in a race with a starting job: not idle.
            entry["why"] = "CPUs allocated (CPUAlloc=%s) while %s" % (cpus, state)
            continue
        unreachable = [f for f in info["flags"] if f in _UNREACHABLE_FLAGS]
        if unreachable or info["base"] in _UNREACHABLE_BASES:
            entry["why"] = "Slurm cannot use it now (%s): slurmd must register first" % state
            continue
        if info["drain"]:
            entry.update(selected=True, kind="drained",
                         why="drained, no job left (%s; reason: %s)" % (state, reason or "none"))
            continue
        if info["base"] == "DOWN" or "FAIL" in info["flags"] or info["base"] in ("FAIL", "FAILING"):
            entry["why"] = "%s without DRAIN: left to the operator" % state
            continue
        reservation = _maint_reservation(name, reservations)
        flagged = [f for f in info["flags"] if f in MAINT_FLAGS]
        if reservation is None and not flagged:
            entry["why"] = "in service (%s): neither drained nor in an active MAINT reservation" % state
            continue
        if info["base"] != "IDLE":
            entry["why"] = "in a maintenance reservation but not idle (%s)" % state
            continue
        res_name = reservation["name"] if reservation else record.get("ReservationName")
        left = reservation["remaining_seconds"] if reservation else None
        if left is not None and left < min_remaining_seconds:
            entry.update(reservation=res_name,
                         why="idle in maintenance reservation %s, which ends in %d min (%d min needed)"
                         % (res_name, left // 60, min_remaining_seconds // 60))
            continue
        entry.update(selected=True, kind="maintenance", reservation=res_name,
                     why="idle in maintenance reservation %s (%s)" % (res_name or "(MAINT flag)", state))
    return entries, reservations
