# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for Slurm command output: ``scontrol show node``, ``sinfo``, ``scontrol ping``, node states and GRES
strings.

Pure Python, standard library only. Values are returned as printed (strings); callers convert.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# A Slurm key: starts with an upper-case letter (NodeName, CPUAlloc, MCS_label, ...), at the start of the
# line or after whitespace. Lower-case words followed by '=' inside a Reason or OS string are not keys.
_KEY_RE = re.compile(r"(?:(?<=\s)|^)([A-Z][A-Za-z0-9_]*)=")
# Keys whose value runs to the end of their line in the multi-line format (free text with spaces).
_REST_OF_LINE_KEYS = ("Reason", "Comment", "Extra")
_REASON_TAG_RE = re.compile(r"\[([^\]@\s]*)@([^\]\s]+)\]")
_REASON_SPLIT_RE = re.compile(r"^(.*?)\s*\[([^\]@\s]*)@([^\]\s]+)\]\s*$", re.S)
_NOT_FOUND_RE = re.compile(r"^\s*Node (\S+) not found\s*$", re.M)
# One controller's line of `scontrol ping`, also the last lines of `scontrol show config`:
# "Slurmctld(primary) at head01 is UP", "Slurmctld(backup) at head02 is DOWN".
_PING_RE = re.compile(r"^\s*Slurmctld\(([^)]*)\) at (\S+) is (\S+)\s*$", re.M)


def _parse_kv_line(line, rest_of_line_first):
    """Parse ``Key=value Key2=value with spaces`` into an ordered list of (key, value)."""
    matches = list(_KEY_RE.finditer(line))
    pairs = []
    index = 0
    while index < len(matches):
        match = matches[index]
        key = match.group(1)
        start = match.end()
        if key in _REST_OF_LINE_KEYS and (rest_of_line_first and index == 0):
            pairs.append((key, line[start:].strip()))
            break
        if key == "Reason":
            # One-line format: the reason ends with its "[user@time]" tag when Slurm printed one.
            tag = _REASON_TAG_RE.search(line, start)
            if tag:
                pairs.append((key, line[start:tag.end()].strip()))
                while index < len(matches) and matches[index].start() < tag.end():
                    index += 1
                continue
        end = matches[index + 1].start() if index + 1 < len(matches) else len(line)
        pairs.append((key, line[start:end].strip()))
        index += 1
    return pairs


def parse_scontrol_nodes(text):
    """Parse ``scontrol show node`` output (multi-line or ``-o`` one-line) into a list of dicts.

    Every ``Key=value`` is kept as a string, as printed. Free-text values with spaces (``OS=Linux 5.15 ...``,
    ``Reason=cf-roll: kernel [root@2024-05-01T10:00:00]``, ``Comment=...``) are kept whole. Nodes are split on
    ``NodeName=`` lines and empty lines (a line of spaces only, which Slurm 24.11 prints inside a node, is skipped).
    ``Node X not found`` lines and other text are ignored (see :func:`parse_not_found`).
    """
    nodes = []
    current = None
    last_key = None
    for raw in (text or "").splitlines():
        line = raw.rstrip("\r\n")
        if not line:
            current, last_key = None, None
            continue
        if not line.strip():
            # Slurm 24.11 prints a line of indentation only inside a node, before its Reason= line: not a separator.
            continue
        if _NOT_FOUND_RE.match(line):
            continue
        continuation = line[:1].isspace()
        stripped = line.strip()
        if stripped.startswith("NodeName="):
            current = {}
            nodes.append(current)
            pairs = _parse_kv_line(stripped, rest_of_line_first=False)
        elif not _KEY_RE.match(stripped):
            # A multi-line Reason continues on lines without a key (indented further).
            if current is not None and last_key in _REST_OF_LINE_KEYS and continuation:
                current[last_key] = current[last_key] + "\n" + stripped
            continue
        else:
            if current is None:
                # A fragment such as "scontrol show node X | grep Gres": keep it as a node without a name.
                current = {}
                nodes.append(current)
            pairs = _parse_kv_line(stripped, rest_of_line_first=continuation)
        for key, value in pairs:
            current[key] = value
            last_key = key
    return nodes


def parse_ping(text):
    """The controllers ``scontrol ping`` (or the end of ``scontrol show config``) reports, in its order:
    ``[{"role": "primary", "host": "head01", "state": "UP"}]``."""
    return [{"role": m.group(1), "host": m.group(2), "state": m.group(3)} for m in _PING_RE.finditer(text or "")]


def controller_up(text):
    """Whether a slurmctld serves the cluster: one of the controllers it reports is UP (the primary, or a backup
    that took over)."""
    return any(c["state"] == "UP" for c in parse_ping(text))


def parse_not_found(text):
    """Node names from ``Node X not found`` lines (scontrol prints them on stdout, rc 1)."""
    return _NOT_FOUND_RE.findall(text or "")


def split_reason(reason):
    """``cf-roll: kernel [root@2024-05-01T10:00:00]`` -> ("cf-roll: kernel", "root", "2024-05-01T10:00:00").

    Returns (None, None, None) for an empty reason or the literal ``none``/``(null)``.
    """
    if reason is None:
        return None, None, None
    reason = reason.strip()
    if not reason or reason.lower() in ("none", "(null)", "n/a"):
        return None, None, None
    match = _REASON_SPLIT_RE.match(reason)
    if match:
        return match.group(1).strip() or None, match.group(2) or None, match.group(3)
    return reason, None, None


# sinfo %t (compact) and %T (long) state names -> (base, flags). DRAINED/DRAINING are DRAIN with or
# without jobs left; Slurm prints them in sinfo only.
_COMPACT_STATES = {
    "alloc": "ALLOCATED", "allocated": "ALLOCATED",
    "idle": "IDLE",
    "mix": "MIXED", "mixed": "MIXED",
    "comp": "COMPLETING", "completing": "COMPLETING",
    "down": "DOWN",
    "drain": "DRAINED", "drained": "DRAINED",
    "drng": "DRAINING", "draining": "DRAINING",
    "fail": "FAIL", "failg": "FAILING", "failing": "FAILING",
    "maint": "MAINT",
    "resv": "RESERVED", "reserved": "RESERVED",
    "unk": "UNKNOWN", "unknown": "UNKNOWN",
    "futr": "FUTURE", "future": "FUTURE",
    "npc": "PERFCTRS", "perfctrs": "PERFCTRS",
    "plnd": "PLANNED", "planned": "PLANNED",
    "boot": "REBOOT_ISSUED", "reboot": "REBOOT_REQUESTED",
    "inval": "INVAL", "blocked": "BLOCKED",
    "pow_dn": "POWERED_DOWN", "powered_down": "POWERED_DOWN",
    "pow_up": "POWERING_UP", "powering_up": "POWERING_UP",
}
# sinfo appends one of these to a state: not responding, powered off, powering up, ... (sinfo(1)).
_STATE_SUFFIXES = "*~#!%$@^-"
_SUFFIX_FLAGS = {"*": "NOT_RESPONDING", "~": "POWERED_DOWN", "#": "POWERING_UP", "!": "POWER_DOWN",
                 "%": "POWERING_DOWN", "$": "MAINT", "@": "REBOOT_REQUESTED", "^": "REBOOT_ISSUED",
                 "-": "PLANNED"}
_BUSY_BASES = ("ALLOCATED", "MIXED", "COMPLETING")


def state_flags(state):
    """Split a Slurm node state into its base and flags, and tell drained from draining.

    Accepts scontrol's ``IDLE+DRAIN``, ``MIXED+DRAIN``, ``DOWN+DRAIN+NOT_RESPONDING``, sinfo's long
    (``draining``) and compact (``drng``, ``drain*``, ``comp``) forms. Returns a dict: ``base`` (upper case),
    ``flags`` (list, upper case), ``drain`` (the DRAIN flag is set), ``drained`` (DRAIN and no jobs left),
    ``draining`` (DRAIN and jobs still running or completing), ``completing``, ``not_responding``, ``busy`` (jobs
    running or completing: ALLOCATED, MIXED, COMPLETING, draining).
    Like Slurm's node_state_string, a DRAIN node counts as draining while ALLOCATED, MIXED or COMPLETING.
    """
    text = (state or "").strip()
    if not text:
        raise ValueError("empty node state")
    parts = [p for p in text.split("+") if p]
    flags = []
    base = None
    for index, part in enumerate(parts):
        while part and part[-1] in _STATE_SUFFIXES:
            flag = _SUFFIX_FLAGS[part[-1]]
            if flag not in flags:
                flags.append(flag)
            part = part[:-1]
        if not part:
            continue
        if index == 0:
            lower = part.lower()
            if lower in _COMPACT_STATES and (part.islower() or lower in ("drained", "draining", "drng")):
                base = _COMPACT_STATES[lower]
            else:
                base = part.upper()
        else:
            if part.upper() not in flags:
                flags.append(part.upper())
    if base is None:
        raise ValueError("cannot parse node state %r" % state)
    if base in ("DRAINED", "DRAINING") and "DRAIN" not in flags:
        flags.insert(0, "DRAIN")
    completing = base == "COMPLETING" or "COMPLETING" in flags
    drain = "DRAIN" in flags
    busy = base in _BUSY_BASES or base == "DRAINING" or completing
    return {
        "base": base,
        "flags": flags,
        "drain": drain,
        "drained": drain and not busy,
        "draining": drain and busy,
        "completing": completing,
        "not_responding": "NOT_RESPONDING" in flags,
        "busy": busy,
    }


# sinfo -o format letters -> field names (sinfo(1)).
SINFO_FIELDS = {
    "%N": "nodelist", "%n": "hostnames", "%t": "state", "%T": "state_long", "%E": "reason", "%H": "reason_time",
    "%u": "reason_user", "%G": "gres", "%P": "partition", "%R": "partition_name", "%D": "nodes", "%a": "avail",
    "%l": "timelimit", "%c": "cpus", "%C": "cpus_state", "%m": "memory", "%f": "features", "%O": "cpu_load",
    "%e": "free_mem", "%o": "node_addr", "%b": "features_act", "%h": "oversubscribe", "%z": "sockets_cores_threads",
}


def parse_sinfo(text, fields=None):
    """Parse whitespace-separated sinfo output into a list of dicts.

    ``fields`` names the columns: a list (``["nodelist", "state"]``), a string of names, or the ``-o`` format
    itself (``"%N %t %E"``; letters are mapped with SINFO_FIELDS). The last column takes the rest of the line,
    so put free text such as ``%E`` (reason) last. Without ``fields`` the first line is the header
    (``PARTITION AVAIL TIMELIMIT NODES STATE NODELIST`` of plain ``sinfo``) and names the columns in lower case.
    Missing trailing columns are None.
    """
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if fields is None:
        if not lines:
            return []
        names = [name.lower() for name in lines[0].split()]
        lines = lines[1:]
    else:
        if isinstance(fields, str):
            fields = fields.split()
        names = []
        for field in fields:
            field = field.strip().strip('"')
            spec = re.sub(r"^%\.?\d*", "%", field) if field.startswith("%") else field
            names.append(SINFO_FIELDS.get(spec, field.lstrip("%")))
    if not names:
        raise ValueError("sinfo fields are empty")
    rows = []
    for line in lines:
        values = line.split(None, len(names) - 1)
        values = [v.strip() for v in values] + [None] * (len(names) - len(values))
        rows.append(dict(zip(names, values)))
    return rows


_GRES_RE = re.compile(r"^(?P<spec>.*?)(?:\((?P<extra>[A-Z]+:[^()]*)\))?$")
_COUNT_RE = re.compile(r"^(\d+)([KMGT]?)$", re.I)
_MULTIPLIERS = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3, "T": 1024 ** 4}


def _split_gres_list(text):
    items, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
            continue
        current.append(char)
    items.append("".join(current))
    return [item.strip() for item in items if item.strip()]


def parse_gres(text):
    """Parse a Slurm GRES string into a list of dicts.

    ``gpu:h100:8(S:0-1)`` -> ``[{"name": "gpu", "type": "h100", "count": 8, "sockets": "0-1", "index": None}]``.
    Accepts comma lists (commas inside parentheses are part of the affinity), ``gpu:8`` (no type),
    ``gpu:(null):0(IDX:N/A)`` (type None, index None), ``gpu:a40:1(S:0,2,4)``, ``gpu:A30:4(IDX:0-3)``,
    ``shard:h100:64`` and K/M/G count suffixes. An empty string, ``(null)`` or ``N/A`` gives [].
    """
    text = (text or "").strip()
    if not text or text.lower() in ("(null)", "n/a", "none"):
        return []
    result = []
    for item in _split_gres_list(text):
        match = _GRES_RE.match(item)
        if not match:
            raise ValueError("cannot parse GRES %r" % item)
        parts = match.group("spec").split(":")
        name = parts[0]
        gtype = None
        count = 1
        rest = parts[1:]
        if rest and _COUNT_RE.match(rest[-1]):
            number, unit = _COUNT_RE.match(rest[-1]).groups()
            count = int(number) * _MULTIPLIERS[unit.upper()]
            rest = rest[:-1]
        if rest:
            gtype = ":".join(rest)
            if gtype in ("(null)", ""):
                gtype = None
        sockets = index = None
        extra = match.group("extra")
        if extra:
            for chunk in re.split(r"\s+(?=[A-Z]+:)", extra.strip()):
                key, _sep, value = chunk.partition(":")
                value = value.strip()
                if value.upper() == "N/A":
                    value = None
                if key == "S":
                    sockets = value
                elif key == "IDX":
                    index = value
        if not name:
            raise ValueError("cannot parse GRES %r: no name" % item)
        result.append({"name": name, "type": gtype, "count": count, "sockets": sockets, "index": index})
    return result


def gres_count(text, name="gpu"):
    """Total count of one GRES (default ``gpu``) in a GRES string."""
    return sum(item["count"] for item in parse_gres(text) if item["name"] == name)


# --- drain-reason ownership: the one rule every drain, resume and reason rewrite of this collection follows -------
# The health check (roles/slurm_compute/files/slurm_healthcheck.py) runs on the nodes, where the collection is not
# installed: the slurm_compute role installs this file beside it as clusterforge_slurm.py, and it imports
# reason_action and state_flags from there. So this module imports nothing beyond the standard library.
#
# Node states in which Slurm keeps a reason that someone set: draining over it would overwrite that reason.
REASON_STATES = ("DOWN", "FAIL", "FAILING")
# Reasons Slurm sets itself on a node it marked DOWN and clears itself once slurmd answers again: nobody owns them,
# so a drain may be laid over them (the node stays out of service either way). Every other reason on a DOWN, DRAIN
# or FAIL node, Slurm's own drain reasons ("Kill task failed", "Prolog error", ...) included, has an owner.
SLURM_TRANSIENT_DOWN_REASONS = ("Not responding",)


def held_by_its_owner(info, reason, own_prefixes, slurm_reasons=()):
    """Whether a node is out of service by someone's decision that this collection does not own: the text that says
    so ("DOWN+DRAIN: 'RMA 1234'"), or None.

    ``info`` is :func:`state_flags` of the node's state, ``reason`` its reason without the ``[user@time]`` tag.
    Out of service: DOWN, drained or draining, or FAIL. Held by its owner: with a reason that starts with none of
    ``own_prefixes`` (the collection's own drains: the health check's, a roll's, the deep checks') and is none of
    ``slurm_reasons`` (a reason Slurm sets when it finds a fault, "Not responding" among them: a fault, not a
    decision). Such a node is the owner's until the owner releases it (an administrator's RMA, another tool's drain):
    validation runs no job on it and judges nothing of it, as the rest of the collection never resumes it.
    """
    out = info["drain"] or info["base"] in REASON_STATES or "FAIL" in info["flags"]
    text = (reason or "").strip()
    if not out or not text:
        return None
    if any(text.startswith(p) for p in own_prefixes if p) or any(text.startswith(r) for r in slurm_reasons):
        return None
    state = "+".join([info["base"]] + [f for f in info["flags"] if f != info["base"]])
    return "%s: %r" % (state, text)


def reason_action(action, info, reason, prefix, wanted=None, rewrite=False):
    """Whether this collection may drain (``action`` "drain") or resume ("resume") a node: ("act"|"none"|"skip", why).

    ``info`` is :func:`state_flags` of the node's state, ``reason`` its reason without the ``[user@time]`` tag (None
    when it has none), ``prefix`` the reason prefix the caller owns, ``wanted`` the reason a drain would set and
    ``rewrite`` whether the caller may replace another reason it owns on a node already drained (slurm_node's adopt,
    the health check's update of its own reason).

    The rule: a reason belongs to whoever set it. A reason that starts with ``prefix`` is the caller's; a drain may
    replace it (with ``rewrite``) and a resume may lift it. Any other reason on a drained node, or on a DOWN or FAIL
    node, is never overwritten, and a drain that is not the caller's is never resumed, except Slurm's own transient
    DOWN reasons (:data:`SLURM_TRANSIENT_DOWN_REASONS`), which a drain may cover. "none": the node is already as
    asked; "skip": someone else owns it, and ``why`` says so.
    """
    owned = (reason or "").startswith(prefix)
    if action == "drain":
        if info["drain"]:
            if reason == wanted:
                return "none", None
            if rewrite and owned:
                return "act", None
            return "skip", "already drained with another reason; not overwritten"
        if reason and reason != wanted and (info["base"] in REASON_STATES or "FAIL" in info["flags"]):
            if info["base"] == "DOWN" and reason in SLURM_TRANSIENT_DOWN_REASONS:
                return "act", None
            return "skip", "%s with a reason set by someone else; draining would overwrite it" % info["base"]
        return "act", None
    if action == "resume":
        if not info["drain"]:
            return "none", None
        if owned:
            return "act", None
        return "skip", "drained by someone else (reason does not start with %r); use force to resume" % prefix
    raise ValueError("unknown action %r" % (action,))


# --- a refused `scontrol reconfigure` -----------------------------------------------------------------------------
# slurmctld refuses a configuration it cannot use and keeps running with the one it had; scontrol then says only
# "slurm_reconfigure error: Unspecified error". Its log says why, after the request.
RECONFIGURE_MARKERS = ("Processing Reconfiguration Request", "Reconfigure signal (SIGHUP) received")
_LOG_PROBLEM = re.compile(r"\b(?:error|fatal|FATAL)\b:?")


def reconfigure_refusal(log_text, limit=8):
    """The fatal and error lines slurmctld logged after the last reconfigure request in ``log_text`` (the tail of
    its log), fatal ones first, at most ``limit`` of them, without their timestamps; [] when none (or no request is
    in the text). A running slurmctld logs harmless errors too (an unusable MailProg): the fatal line that refused
    the configuration comes first."""
    lines = (log_text or "").splitlines()
    start = None
    for index, line in enumerate(lines):
        if any(marker in line for marker in RECONFIGURE_MARKERS):
            start = index
    if start is None:
        return []
    found = []
    for line in lines[start + 1:]:
        text = re.sub(r"^\[[^\]]*\]\s*", "", line).strip()
        if _LOG_PROBLEM.search(text) and text not in found:
            found.append(text)
    found.sort(key=lambda text: 0 if "fatal" in text.lower() else 1)
    return found[:limit]
