# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the rolling change.

rolling_plan_result reads the plan's nested check-mode run, rolling_plan_summary what the plan needs of it (the
recap, the failures, the reboot facts) and rolling_would_reboot which nodes would reboot and why (the work is
plugin_utils/playbook_output.py).
roll_adoption decides which earlier drains a roll takes over, and roll_adopt_refusal whether a node the plan
adopted still carries the reason the plan saw. Documentation lives beside this file (rolling_*.yml).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.module_utils.healthcheck import SLURM_REASONS
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import held_by_its_owner, state_flags
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.rolling_plan import role_fqcn
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.playbook_output import (
    json_callback_document,
    plan_summary,
    reboot_reasons,
    would_reboot,
)

# Slurm appends these to the reason of a node it reboots (scontrol reboot ... reason=).
_REBOOT_NOTES = r"(?: : reboot (?:issued|complete|timed out))*"


def rolling_plan_result(stdout):
    """The ansible.posix.json document of a nested run's stdout, or {}."""
    return json_callback_document(stdout)


def rolling_plan_summary(doc):
    """{recap, failures, reboot_facts} of the check-mode run's document (rolling_plan_result's)."""
    if not isinstance(doc, dict):
        raise AnsibleFilterError("rolling_plan_summary expects the document rolling_plan_result returns, got %s"
                                 % type(doc).__name__)
    return plan_summary(doc)


def rolling_would_reboot(targets, reboot_facts, markers=None):
    """{node: [why]} of the nodes to roll that would reboot (see rolling_would_reboot.yml)."""
    return would_reboot(targets, reboot_facts, markers)


def rolling_reboot_why(host_vars, marker=False):
    """Why this node needs a reboot (see rolling_reboot_why.yml)."""
    return reboot_reasons(host_vars, marker)


def rolling_role_names(names):
    """The roles of a roll as include_role takes them (see rolling_role_names.yml)."""
    if names is None or isinstance(names, (str, bytes)) or not hasattr(names, "__iter__"):
        raise AnsibleFilterError("rolling_role_names: expects a list of role names, got %r" % (names,))
    return [role_fqcn(name) for name in names]


def run_reason_re(prefix, run_id):
    """The reasons one run sets: <prefix><run id>, or its FAILED reason, with Slurm's reboot notes or without."""
    if not run_id:
        raise AnsibleFilterError("a roll needs a run id: its drain reason is %s<run id>" % prefix)
    return re.compile("^%s(?: FAILED .*)?%s$" % (re.escape("%s%s" % (prefix, run_id)), _REBOOT_NOTES), re.S)


def roll_adoption(nodes, prefix, run_id, adopt_other_runs=False):
    """Which drained nodes (slurm_node_info's nodes) a roll with this run id takes over, and which it leaves alone.

    Returns {"adopt": {name: {"reason", "reason_user", "reason_time"}}, "other_runs": [names], "foreign": [names]}.
    A roll adopts only the drains of its own run id (cf-roll:<run id>, its FAILED reason, Slurm's reboot notes):
    a re-run that finishes a stopped roll names that roll's run id. The drains of other runs (another reason that
    starts with the prefix) are adopted only with adopt_other_runs (rolling_adopt_drains_of_other_runs); without
    it they are listed in other_runs and left alone, like every drain that is not a roll's (foreign). The plan keeps
    each adopted reason with its [user@time] tag, so that the drain phase can tell a reason set again since.
    A node that is not drained but DOWN or FAIL with a reason its owner set (an administrator's RMA: module_utils/
    slurm.py held_by_its_owner, the rule validation follows) is foreign too: the roll neither touches nor waits for it.
    """
    mine = run_reason_re(prefix, run_id)
    result = {"adopt": {}, "other_runs": [], "foreign": []}
    for node in nodes or []:
        if not node.get("drain"):
            state = node.get("state")
            if state and held_by_its_owner(state_flags(state), node.get("reason"), [prefix], SLURM_REASONS):
                result["foreign"].append(node["name"])
            continue
        reason = node.get("reason") or ""
        if mine.match(reason) or (adopt_other_runs is True and prefix and reason.startswith(prefix)):
            result["adopt"][node["name"]] = {"reason": reason, "reason_user": node.get("reason_user"),
                                             "reason_time": node.get("reason_time")}
        elif prefix and reason.startswith(prefix):
            result["other_runs"].append(node["name"])
        else:
            result["foreign"].append(node["name"])
    return result


def roll_adopt_refusal(node, prefix, run_id, adopted):
    """Why the drain phase must leave this node alone ("" when it may drain it): slurm_node_info's entry of the
    node now, and the plan's roll_adoption()["adopt"].

    A node not drained, or drained with this run's own reason, may be drained (again). A node drained with any other
    reason may be only when the plan adopted it and its reason, user and time are still the ones the plan read: a
    reason set again since (an administrator holding the node, another roll) is not this run's to take over.
    """
    if not node.get("drain"):
        return ""
    reason = node.get("reason") or ""
    if reason == "%s%s" % (prefix, run_id):
        return ""
    seen = (adopted or {}).get(node.get("name"))
    if seen is None:
        return "drained by someone else since the plan (%s)" % reason
    now = {"reason": reason, "reason_user": node.get("reason_user"), "reason_time": node.get("reason_time")}
    if now != seen:
        return ("its reason changed since the plan adopted it: %r (%s at %s) is now %r (%s at %s)"
                % (seen["reason"], seen["reason_user"], seen["reason_time"], reason, now["reason_user"],
                   now["reason_time"]))
    return ""


class FilterModule(object):
    """Rolling change filters."""

    def filters(self):
        return {"rolling_plan_result": rolling_plan_result, "roll_adoption": roll_adoption,
                "roll_adopt_refusal": roll_adopt_refusal, "rolling_plan_summary": rolling_plan_summary,
                "rolling_would_reboot": rolling_would_reboot, "rolling_reboot_why": rolling_reboot_why,
                "rolling_role_names": rolling_role_names}
