# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The result of a nested ansible-playbook run written by the ansible.posix.json stdout callback (the rolling
plan's check-mode run), read from its stdout beside what other callbacks print there."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible.module_utils.parsing.convert_bool import boolean

# The callback's indented document (json_indent > 0, which the plan sets) runs from a line "{" to a line "}";
# callbacks an operator enables (ansible.posix.profile_tasks, timer) print their own lines before and after it.
_DOCUMENT = re.compile(r"^\{$.*^\}$", re.M | re.S)


def json_callback_document(stdout):
    """The ansible.posix.json document in ``stdout`` as a dict; {} when there is none (the run stopped before its
    callback wrote it, or wrote only part of it)."""
    if not isinstance(stdout, str):
        return {}
    match = _DOCUMENT.search(stdout)
    if not match:
        return {}
    try:
        doc = json.loads(match.group(0))
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


# The facts the roles set where a node needs a reboot (common_os, nvidia_driver, bios), each with what it means, and
# the package manager's marker, which rolling_apply.yml reports in its check-mode run.
REBOOT_REASONS = (("common_os_reboot_required", "kernel parameters (common_os_reboot_required)"),
                  ("nvidia_driver_reboot_required", "NVIDIA driver (nvidia_driver_reboot_required)"),
                  ("bios_reboot_required", "BIOS settings pending on the BMC (bios_reboot_required)"))
REBOOT_FACTS = tuple(fact for fact, dummy in REBOOT_REASONS)
REBOOT_MARKER_FACT = "__rolling_apply_reboot_marker"
REBOOT_MARKER = "/run/reboot-required"


def reboot_reasons(facts, marker=False):
    """Why a node needs a reboot, in REBOOT_REASONS' order: each reboot fact of ``facts`` (a host's variables) that
    is true, read as Jinja's bool, then the package manager's marker where ``marker`` says it exists. The plan and
    the apply phase both ask this function, so that what the plan says would reboot is what reboots."""
    get = facts.get if hasattr(facts, "get") else {}.get
    why = [label for fact, label in REBOOT_REASONS if boolean(get(fact, False), strict=False)]
    if marker:
        why.append(REBOOT_MARKER)
    return why


def _items(value):
    return value.items() if isinstance(value, dict) else ()


def _host_results(doc):
    """(task name, host, result) of every task of every play of a json callback document, in order."""
    for play in (doc or {}).get("plays") or []:
        for task in (play or {}).get("tasks") or []:
            name = ((task or {}).get("task") or {}).get("name") or "?"
            for host, result in _items((task or {}).get("hosts")):
                yield name, host, result if isinstance(result, dict) else {}


def plan_summary(doc):
    """What the rolling plan reads from its check-mode run's document (json_callback_document):
    ``recap`` {host: {changed, unreachable, failed}} from its stats; ``failures`` ["<host>: <task>: <message>"] of
    every failed or unreachable task result (the message cut at 300 characters); ``reboot_facts`` {host: {fact: bool}}
    of the reboot facts (REBOOT_FACTS and the marker fact), the last value a host reported. An empty document (the
    run stopped before its callback wrote it) gives empty ones."""
    recap = {}
    for host, stats in _items((doc or {}).get("stats")):
        stats = stats if isinstance(stats, dict) else {}
        recap[host] = {"changed": int(stats.get("changed") or 0), "unreachable": int(stats.get("unreachable") or 0),
                       "failed": int(stats.get("failures") or 0)}
    failures, reboot_facts = [], {}
    for name, host, result in _host_results(doc):
        if result.get("failed") or result.get("unreachable"):
            failures.append("%s: %s: %s" % (host, name, str(result.get("msg") or "")[:300]))
        for fact, value in _items(result.get("ansible_facts")):
            if fact in REBOOT_FACTS or fact == REBOOT_MARKER_FACT:
                reboot_facts.setdefault(host, {})[fact] = boolean(value, strict=False)   # as Jinja's bool
    return {"recap": recap, "failures": failures, "reboot_facts": reboot_facts}


def would_reboot(targets, reboot_facts, markers=None):
    """{node: [why]} of the nodes to roll that would reboot: each reboot fact that is true, and the package manager's
    marker (REBOOT_MARKER), as the node reported it in the check-mode run or, without a plan, as ``markers`` (the
    registered loop of ansible.builtin.stat over the nodes, on the controller) found it. Nodes that would not reboot
    are left out."""
    found = {}
    for res in (markers or {}).get("results") or []:
        if isinstance(res, dict) and isinstance(res.get("stat"), dict):
            found[res.get("item")] = bool(res["stat"].get("exists"))
    out = {}
    for node in targets or []:
        facts = (reboot_facts or {}).get(node) or {}
        why = reboot_reasons(facts, facts[REBOOT_MARKER_FACT] if REBOOT_MARKER_FACT in facts else found.get(node, False))
        if why:
            out[node] = why
    return out
