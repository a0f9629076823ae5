# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight rules: the variables of playbooks/rolling_reconfigure.yml (``rolling_*``).

A rolling change drains production GPU nodes. A batch list that Ansible reads as "every node at once", a node list
that names the controller, a switch given as the string ``'true'`` or a health gate that no node can pass would
only show once nodes are drained. These rules find them before the plan, each with its own message.

The variables are the options of the role clusterforge.gpu.rolling (roles/rolling/meta/argument_specs.yml), plus
``rolling_apply_hosts`` of playbooks/rolling_apply.yml. Their types and choices are the spec's, which preflight_specs
checks strictly for every role; these rules add what no spec can say: what a value means for the roll (a batch of
0, a hostlist naming the controller, a role that does not run on GPU nodes, a gate no node can pass), the rules
between two variables, and where a value is set. A value of the wrong type is left to the spec's check, except a
string given with ``-e name=value`` for a list or a switch, which gets this playbook's own advice; while these rules
run, the spec's check leaves out the values they report (:func:`reports`).

Where the playbook reads each variable matters:

* the plan (the play on the controller) and the ``serial:`` keyword read ``rolling_roles``, ``rolling_nodes``,
  ``rolling_serial``, ``rolling_max_unavailable_percent``, ``rolling_plan`` and ``rolling_run_id`` once for the
  whole roll: they must be the same on every host (group_vars/all or ``-e``), or the plan and the nodes disagree;
* the per-node steps and the health gate read the others on each node: a GPU node may have its own value, which
  is checked on that node.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import math
import os
import re

from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import compress as hostlist_compress
from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import expand as hostlist_expand
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import (
    COLLECTION_ROOT,
    MISSING,
    ROLE_HOSTS,
    bool_advice,
    load_role_specs,
    spec_default,
)
from ansible_collections.clusterforge.gpu.plugins.module_utils.values import is_int, is_number, type_name
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.rolling_plan import COLLECTION, role_fqcn

ROLE = "rolling"
# Every variable the rolling role and playbooks/rolling_apply.yml read: the role's options and rolling_apply_hosts.
# tests/unit/plugins/plugin_utils/test_preflight_rolling.py keeps this in step with the spec and the files.
ROLLING_VARIABLES = (
    "rolling_roles",
    "rolling_nodes",
    "rolling_serial",
    "rolling_max_unavailable_percent",
    "rolling_plan",
    "rolling_run_id",
    "rolling_apply_hosts",
    "rolling_adopt_drains_of_other_runs",
    "rolling_drain_timeout_seconds",
    "rolling_poll_interval_seconds",
    "rolling_reboot_ok",
    "rolling_reboot_timeout_seconds",
    "rolling_health_register_timeout_seconds",
    "rolling_gpus_per_node",
    "rolling_health_dcgm_level",
    "rolling_health_dcgm_timeout_seconds",
    "rolling_health_nccl_test",
    "rolling_health_nccl_min_busbw_gbps",
    "rolling_health_nccl_timeout_seconds",
    "rolling_health_node_check",
)

# Read once for the whole roll (the plan on the controller, the serial: keyword): one value for the cluster.
CLUSTER_WIDE = ("rolling_roles", "rolling_nodes", "rolling_serial", "rolling_max_unavailable_percent",
                "rolling_plan", "rolling_run_id", "rolling_apply_hosts", "rolling_adopt_drains_of_other_runs")
# Read on each node by the per-node steps and the health gate.
PER_NODE = tuple(v for v in ROLLING_VARIABLES if v not in CLUSTER_WIDE)

SECONDS = ("rolling_drain_timeout_seconds", "rolling_poll_interval_seconds", "rolling_reboot_timeout_seconds",
           "rolling_health_register_timeout_seconds", "rolling_health_dcgm_timeout_seconds",
           "rolling_health_nccl_timeout_seconds")
SWITCHES = ("rolling_reboot_ok", "rolling_plan", "rolling_health_nccl_test", "rolling_health_node_check")
# Roles whose play in site.yml runs on the GPU nodes (directly, or through a group GPU nodes are usually in).
GPU_NODE_GROUPS = ("all", "gpu_nodes", "lustre_clients")
# Roles of this collection that change nothing on a node: rolling them out would drain nodes for nothing.
NOT_A_CHANGE = {
    "preflight": "checks the inventory and changes nothing (every rolling playbook runs it first)",
    "rolling": "is this rolling change itself",
    "validate": "measures and judges, it changes nothing (run playbooks/validate.yml)",
}
# DCGM diagnostic levels (dcgmi diag -r 1..4) and how long each takes (PRACTICE.md section 6 and 8): a gate
# timeout shorter than its level's run time fails every node.
DCGM_LEVELS = {1: "seconds", 2: "about 2 minutes", 3: "about 15 minutes", 4: "longer than level 3 (15 minutes)"}
DCGM_MIN_TIMEOUT = {1: 1, 2: 120, 3: 900, 4: 1800}
# NVLink 4 of an H100/H200 SXM carries 900 GB/s per GPU (both directions); a one-node all_reduce busbw threshold
# above that is no GB/s figure (most likely Gb/s of a NIC).
NCCL_BUSBW_MAX_GBPS = 900
RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")
PERCENT_RE = re.compile(r"^\s*(-?\d+(?:\.\d*)?)\s*%\s*$")
EXAMPLE_ROLES = '-e \'{"rolling_roles": ["clusterforge.gpu.gpu_tuning"]}\''
EXAMPLE_SERIAL = '-e \'{"rolling_serial": [1, "25%"]}\''
_ROLES = {}


def collection_roles(root=None):
    """The roles of this collection (a directory under roles/ with tasks/main.yml)."""
    root = root or COLLECTION_ROOT
    if root not in _ROLES:
        paths = glob.glob(os.path.join(root, "roles", "*", "tasks", "main.yml"))
        _ROLES[root] = sorted(p.split(os.sep)[-3] for p in paths)
    return _ROLES[root]


def _show(value):
    """A value for a message, written as in YAML (strings quoted, null, true/false)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'%s'" % value
    try:
        return "%r" % (value,)
    except Exception:  # pylint: disable=broad-except
        return "a %s" % type_name(value)


def _whole(value):
    """An integer (the spec's type of the rule's variable); None for anything else, which the spec reports."""
    return value if is_int(value) else None


def _finite(value):
    """Whether a number (the spec's float) is finite: the spec lets NaN and infinity through."""
    return not (isinstance(value, float) and (math.isnan(value) or math.isinf(value)))


def _gpu_hosts(inv):
    return inv.hosts("gpu_nodes")


# -- the rules of each variable: (value, inventory) -> list of messages without the "<where>: <name>: " prefix -----

def _roles(value, inv):
    if value is None or value is MISSING:
        return ["is required: the roles to roll out, e.g. %s" % EXAMPLE_ROLES]
    if isinstance(value, str):
        return ["must be a list of role names, got the string %s; give %s (-e rolling_roles=... passes a string)"
                % (_show(value), EXAMPLE_ROLES)]
    if not isinstance(value, (list, tuple)):
        return []  # not a list: the spec says so
    if not value:
        return ["is an empty list: name at least one role to roll out, e.g. %s" % EXAMPLE_ROLES]
    errors = []
    known = collection_roles()
    seen = set()
    for index, entry in enumerate(value):
        if not isinstance(entry, str) or not entry.strip():
            errors.append("entry %d is %s (%s), not a role name such as 'clusterforge.gpu.gpu_tuning'"
                          % (index + 1, _show(entry), type_name(entry)))
            continue
        name = entry.strip()
        collection, dummy, role = role_fqcn(name).rpartition(".")
        if collection != COLLECTION:
            errors.append("'%s' is not a role of this collection: the rolling playbook rolls out the roles of "
                          "%s only (%s.<role>, or the bare role name)" % (name, COLLECTION, COLLECTION))
            continue
        if role not in known:
            errors.append("'%s' names no role of clusterforge.gpu (roles: %s)"
                          % (name, ", ".join(r for r in known if r not in NOT_A_CHANGE)))
            continue
        if role in NOT_A_CHANGE:
            errors.append("'%s' is not a change to roll out: %s %s" % (name, role, NOT_A_CHANGE[role]))
            continue
        groups = ROLE_HOSTS.get(role)
        if groups is not None and not any(g in GPU_NODE_GROUPS for g in groups):
            errors.append("'%s' runs on %s, not on GPU nodes: the rolling playbook applies its roles to drained GPU "
                          "nodes; change %s with site.yml" % (name, ", ".join(groups), role))
            continue
        if role in seen:
            errors.append("names the role %s twice: each node would get it twice" % role)
        seen.add(role)
    return errors


def _nodes(value, inv):
    if value is MISSING:
        return []
    if value is None:
        return []  # the playbook's default: every GPU node
    gpu = set(_gpu_hosts(inv))
    groups = set(inv.groups)
    everyone = set(inv.all_hosts)
    if isinstance(value, str) and not value.strip():
        names = []
    elif isinstance(value, str):
        try:
            names = hostlist_expand(value)
        except ValueError as e:
            return ["%s is not a hostlist of GPU nodes (e.g. 'gpu[01-04]'): %s" % (_show(value), e)]
    elif isinstance(value, (list, tuple)):
        names = []
        errors = []
        for index, entry in enumerate(value):
            if not isinstance(entry, str) or not entry.strip():
                errors.append("entry %d is %s (%s), not a host name" % (index + 1, _show(entry), type_name(entry)))
            elif "[" in entry or "," in entry:
                errors.append("entry %d '%s' is a hostlist expression inside a list: a list takes host names; give "
                              "the hostlist as one string instead (rolling_nodes: '%s')" % (index + 1, entry, entry))
            else:
                names.append(entry.strip())
        if errors:
            return errors
    else:
        return ["must be a hostlist string ('gpu[01-04]') or a list of GPU node names, got %s (%s)"
                % (_show(value), type_name(value))]
    if not names:
        return ["names no node: leave rolling_nodes unset to consider every GPU node"]
    errors = []
    as_groups = [n for n in names if n in groups and n not in everyone]
    if as_groups:
        errors.append("names the group(s) %s: rolling_nodes takes host names (leave it unset for every GPU node)"
                      % ", ".join(sorted(set(as_groups))))
    unknown = [n for n in names if n not in everyone and n not in groups]
    if unknown:
        errors.append("names hosts that are not in the inventory: %s" % _compress(unknown))
    not_gpu = [n for n in names if n in everyone and n not in gpu]
    if not_gpu:
        errors.append("names hosts that are not GPU nodes: %s (only members of gpu_nodes can be rolled; the "
                      "controller and storage servers must stay in service)" % _compress(not_gpu))
    return errors


def _compress(names):
    try:
        return hostlist_compress(sorted(set(names)))
    except Exception:  # pylint: disable=broad-except
        return ", ".join(sorted(set(names)))


def _serial(value, inv):
    if value is MISSING:
        return []
    if value is None:
        return ["is null: Ansible then runs every node in one batch (no canary); remove it for the default "
                "[1, \"25%%\"] or give a list, e.g. %s" % EXAMPLE_SERIAL]
    if isinstance(value, str):
        return ["must be a list of batch sizes, got the string %s (-e rolling_serial=... passes a string); "
                "give %s" % (_show(value), EXAMPLE_SERIAL)]
    if not isinstance(value, (list, tuple)):
        return []  # not a list: the spec says so
    if not value:
        return ["is an empty list: Ansible then runs every node in one batch (no canary); give e.g. %s"
                % EXAMPLE_SERIAL]
    errors = []
    for index, entry in enumerate(value):
        where = "entry %d" % (index + 1)
        if is_int(entry):
            if entry <= 0:
                errors.append("%s is %d: a batch of 0 or fewer nodes makes Ansible put every remaining node in one "
                              "batch; batch sizes are whole numbers of nodes from 1" % (where, entry))
            continue
        if isinstance(entry, str) and "%" in entry:
            match = PERCENT_RE.match(entry)
            if not match or "." in match.group(1):
                errors.append("%s '%s' is not a whole percentage such as '25%%'" % (where, entry))
                continue
            pct = int(match.group(1))
            if pct < 1:
                errors.append("%s '%s' is below 1%%: a batch of 0%% of the nodes holds no node (Ansible then takes "
                              "one); give a percentage from 1%% to 100%%" % (where, entry))
            elif pct > 100:
                errors.append("%s '%s' is above 100%%: the batch would hold every node at once; give a percentage "
                              "from 1%% to 100%%" % (where, entry))
            continue
        errors.append("%s is %s (%s): a batch size is a whole number of nodes (e.g. 2) or a percentage string "
                      "(e.g. '25%%')" % (where, _show(entry), type_name(entry)))
    return errors


def _percent(value, inv):
    if value is MISSING or not is_number(value):
        return []  # not a number: the spec says so
    if not _finite(value) or value < 0 or value > 100:
        return ["must be a share of the nodes from 0 to 100 percent, got %s" % _show(value)]
    return []


def _run_id(value, inv):
    if value is MISSING:
        return []
    text = str(value) if is_int(value) and value >= 0 else value
    if not isinstance(text, str) or not RUN_ID_RE.match(text):
        return ["%s (%s) cannot name a Slurm drain reason: a run id is 1 to 64 letters, digits, '.', '_', ':' or '-', "
                "starting with a letter or digit (the reason is cf-roll:<run id>)" % (_show(value), type_name(value))]
    return []


def _apply_hosts(value, inv):
    if value is MISSING:
        return []
    if not isinstance(value, str) or not value.strip():
        return ["must be a host pattern string (default gpu_nodes), got %s (%s)" % (_show(value), type_name(value))]
    return []


def _switch(name):
    def rule(value, inv):
        # A string is what -e name=true gives: this playbook's advice, in the form that works as printed. Any other
        # type that is not a boolean is the spec's to report.
        if not isinstance(value, str):
            return []
        advice = bool_advice(name)
        if name == "rolling_plan":
            advice = advice.replace(": true}", ": false}").replace("=true passes the string 'true'",
                                                                   "=false passes the string 'false'")
        return ["must be a real boolean, got the string %s; %s" % (_show(value), advice)]
    return rule


def _seconds(value, inv):
    whole = _whole(value)
    if whole is not None and whole < 1:
        return ["must be at least 1 second, got %s" % _show(value)]
    return []


def _gpus(value, inv):
    whole = _whole(value)
    if whole is not None and (whole < 1 or whole > 16):
        return ["%s GPUs per node is not plausible (1 to 16; 8 on an HGX H100/H200 board)" % _show(value)]
    return []


def _dcgm_level(value, inv):
    # Levels other than 1-4 are outside the spec's choices; 0 gets the reason it cannot switch the gate off.
    if _whole(value) == 0:
        return ["is 0, which would resume nodes without the DCGM diagnostic of the health gate; give a level from 1 "
                "(quick, seconds) to 4 (extended)"]
    return []


def _busbw(value, inv):
    if value is MISSING or not is_number(value):
        return []  # not a number: the spec says so
    number = value
    if not _finite(number):
        return ["must be a finite bus bandwidth in GB/s, got %s" % _show(value)]
    if number <= 0:
        return ["must be a positive bus bandwidth in GB/s, got %s" % _show(value)]
    if number > NCCL_BUSBW_MAX_GBPS:
        return ["%s GB/s is more than one node's NVLink can carry (%d GB/s per H100/H200 GPU): no node would pass the "
                "gate; the threshold is in GB/s (bytes), not Gb/s (8x H100 SXM reach about 370-480 GB/s)"
                % (_show(value), NCCL_BUSBW_MAX_GBPS)]
    return []


RULES = {
    "rolling_roles": _roles,
    "rolling_nodes": _nodes,
    "rolling_serial": _serial,
    "rolling_max_unavailable_percent": _percent,
    "rolling_plan": _switch("rolling_plan"),
    "rolling_run_id": _run_id,
    "rolling_apply_hosts": _apply_hosts,
    "rolling_adopt_drains_of_other_runs": _switch("rolling_adopt_drains_of_other_runs"),
    "rolling_drain_timeout_seconds": _seconds,
    "rolling_poll_interval_seconds": _seconds,
    "rolling_reboot_ok": _switch("rolling_reboot_ok"),
    "rolling_reboot_timeout_seconds": _seconds,
    "rolling_health_register_timeout_seconds": _seconds,
    "rolling_gpus_per_node": _gpus,
    "rolling_health_dcgm_level": _dcgm_level,
    "rolling_health_dcgm_timeout_seconds": _seconds,
    "rolling_health_nccl_timeout_seconds": _seconds,
    "rolling_health_nccl_test": _switch("rolling_health_nccl_test"),
    "rolling_health_nccl_min_busbw_gbps": _busbw,
    "rolling_health_node_check": _switch("rolling_health_node_check"),
}


# -- rules across variables, on the values one node uses ----------------------------------------------------------

def _effective(values, name):
    """The value a node uses: its own, else the role's default (the spec's)."""
    value = values.get(name, MISSING)
    return spec_default(ROLE, name) if value is MISSING else value


def _across(values):
    """Rules between two variables, on the values one node reads ({name: value or MISSING}).

    Returns (variable, message, the variables involved) tuples.
    """
    errors = []
    poll = _whole(_effective(values, "rolling_poll_interval_seconds"))
    drain = _whole(_effective(values, "rolling_drain_timeout_seconds"))
    involved = ("rolling_poll_interval_seconds", "rolling_drain_timeout_seconds")
    if poll and drain and 0 < drain <= poll:
        errors.append(("rolling_poll_interval_seconds",
                       "polling every %d s is not shorter than rolling_drain_timeout_seconds (%d s): the drain would "
                       "time out at its first look; poll more often than the timeout" % (poll, drain), involved))
    level = _whole(_effective(values, "rolling_health_dcgm_level"))
    timeout = _whole(_effective(values, "rolling_health_dcgm_timeout_seconds"))
    involved = ("rolling_health_dcgm_level", "rolling_health_dcgm_timeout_seconds")
    if level in DCGM_MIN_TIMEOUT and timeout and 0 < timeout < DCGM_MIN_TIMEOUT[level]:
        errors.append(("rolling_health_dcgm_timeout_seconds",
                       "%d s is too short for the DCGM diagnostic level %d of the health gate (it takes %s, so every "
                       "node would fail the gate); give at least %d s" % (timeout, level, DCGM_LEVELS[level],
                                                                          DCGM_MIN_TIMEOUT[level]), involved))
    return errors


def _gpu_count_mismatch(gpus, host, inv):
    """The GPU count a node's gate expects against the node's cluster_gpu_count_per_node (None when they agree)."""
    gpus = _whole(gpus)
    if gpus is None or not 1 <= gpus <= 16:
        return None
    count = inv.get(host, "cluster_gpu_count_per_node")
    if is_int(count) and count != gpus:
        return count
    return None


# -- the rule set -------------------------------------------------------------------------------------------------

def _differs(a, b):
    try:
        return bool(a != b)
    except Exception:  # pylint: disable=broad-except
        return True


def _label(value):
    return "not set" if value is MISSING else _show(value)


def extra_role_variables(names, root=None):
    """A role variable given with -e to a rolling playbook would not last: the roll would apply it, and the next
    site.yml, which reads the inventory, would undo it. Refuse it and say where the change goes.
    The variables of the roles that change no node (preflight, rolling itself, validate) are not a change."""
    role_vars = set()
    for role, options in load_role_specs(root).items():
        if role not in NOT_A_CHANGE:
            role_vars.update(options)
    return ["inventory: %s: given with -e: a rolling change is planned and applied from the inventory (the next "
            "site.yml, which reads the inventory, would not keep a -e value); set %s in group_vars or host_vars, or in "
            "an extra inventory source (-i change.yml), then roll"
            % (name, name) for name in names if name in role_vars or name.startswith("cluster_")]


def reports(host, name, value, inv):
    """Whether :func:`check` reports this host's value of ``name`` in its own words (then preflight_specs leaves its
    generic message about the same value out): the cluster's value, or a GPU node's own value of a per-node
    variable, that one of this variable's rules rejects."""
    rule = RULES.get(name)
    if rule is None or value is MISSING:
        return False
    try:
        if _differs(value, inv.get_cluster(name, MISSING)) and not (name in PER_NODE and host in _gpu_hosts(inv)):
            return False
        return bool(rule(value, inv))
    except Exception:  # pylint: disable=broad-except
        return False


def check(inv, opts):
    """Errors of this rule set: a list of "<host or inventory>: <variable>: <rule>" strings."""
    if not (opts or {}).get("rolling"):
        return []
    errors = []
    ref = inv.first_host
    if ref is None:
        return errors
    cluster = dict((name, inv.get_cluster(name, MISSING)) for name in ROLLING_VARIABLES)

    errors.extend(extra_role_variables(opts.get("extra_var_names") or []))

    # Every rule on the cluster's value (extra vars and group_vars/all are the same on every host).
    for name in ROLLING_VARIABLES:
        value = cluster[name]
        if name == "rolling_roles" and value is MISSING:
            value = None  # required: reported by its rule
        for msg in RULES[name](value, inv):
            errors.append("inventory: %s: %s" % (name, msg))
    for name, msg, involved in _across(cluster):
        if any(cluster[n] is not MISSING for n in involved):
            errors.append("inventory: %s: %s" % (name, msg))

    # Values that differ between hosts: the plan's variables must be one value; a GPU node's own value of the
    # others is checked on that node.
    gpu = set(_gpu_hosts(inv))
    differ = {}
    mismatched = {}
    for host in inv.all_hosts:
        own = {}
        if host != ref:
            keys = set(inv.keys(host))
            for name in ROLLING_VARIABLES:
                value = inv.get(host, name, MISSING) if name in keys else MISSING
                if _differs(value, cluster[name]):
                    own[name] = value
                    if name in CLUSTER_WIDE:
                        differ.setdefault(name, []).append((host, value))
        if host not in gpu:
            continue
        for name, value in own.items():
            if name in PER_NODE:
                for msg in RULES[name](value, inv):
                    errors.append("%s: %s: %s" % (host, name, msg))
        if own:
            values = dict(cluster)
            values.update(own)
            for name, msg, involved in _across(values):
                if any(n in own for n in involved):
                    errors.append("%s: %s: %s" % (host, name, msg))
        gpus = own.get("rolling_gpus_per_node", cluster["rolling_gpus_per_node"])
        count = _gpu_count_mismatch(gpus, host, inv)
        if count is not None:
            if "rolling_gpus_per_node" in own:
                errors.append("%s: rolling_gpus_per_node: the health gate would expect %s GPUs on this node but its "
                              "cluster_gpu_count_per_node is %d: the gate would fail it" % (host, _show(gpus), count))
            else:
                mismatched.setdefault(count, []).append(host)
    for count, hosts in sorted(mismatched.items()):
        errors.append("inventory: rolling_gpus_per_node: the health gate would expect %s GPUs per node but "
                      "cluster_gpu_count_per_node is %d on %s: the gate would fail those nodes; leave "
                      "rolling_gpus_per_node unset or make the two agree"
                      % (_show(cluster["rolling_gpus_per_node"]), count, _compress(hosts)))
    for name in CLUSTER_WIDE:
        if name in differ:
            shown = "; ".join("%s: %s" % (h, _label(v)) for h, v in differ[name][:4])
            more = " and %d more" % (len(differ[name]) - 4) if len(differ[name]) > 4 else ""
            errors.append("inventory: %s: is set differently on some hosts (%s: %s; %s%s): the rolling playbook reads "
                          "it once for the whole roll, so set it in one place (group_vars/all or -e)"
                          % (name, ref, _label(cluster[name]), shown, more))
    return _unique(errors)


def _unique(errors):
    seen = set()
    out = []
    for err in errors:
        if err not in seen:
            seen.add(err)
            out.append(err)
    return out
