# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight rules: Slurm (slurm_controller on the controller, slurm_compute on every GPU node).

What no argument spec can say, checked before any host is touched:

* one controller (the roles write a single SlurmctldHost; there is no backup controller);
* partitions beyond their shape (plugins/filter/preflight.py): MaxTime in Slurm's time syntax, extra PartitionName
  keys that slurmctld knows and that cannot break or inject into the slurm.conf line, no partition left without
  nodes once its group or hostlist is expanded;
* the two roles agree: what slurm.conf says (controller) and what each node installs (slurm_compute) must be the
  same ports, health-check program and prolog/epilog directories, read as EFFECTIVE values (inventory, else the
  role's default) on the controller and on every GPU node;
* paths written into slurm.conf or into a shell line are absolute and of safe characters;
* the health check's drain-reason prefix owns nothing that belongs to someone else (the rolling playbook's
  ``cf-roll:``, NHC, Slurm's own reasons), since the check resumes every drain whose reason starts with it;
* timings and sizes a Slurm administrator expects (slurm.conf(5): MessageTimeout, UnkillableStepTimeout,
  HealthCheckProgram's 60 s limit, time strings);
* the health check's switches name checks it has (checks_disabled, strikes), strikes are whole numbers of at least
  1, the circuit breaker's share is 1-100 %, and the DCGM error codes to ignore are codes the check can recognise in
  dcgmi's output.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools
import posixpath
import re

from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import expand as hostlist_expand
from ansible_collections.clusterforge.gpu.plugins.module_utils import healthcheck
from ansible_collections.clusterforge.gpu.plugins.module_utils.healthcheck import DEEP_REASON_PREFIX
from ansible_collections.clusterforge.gpu.plugins.module_utils.values import is_int, type_name

CTL = "slurm_controller"
CMP = "slurm_compute"

# --- drain-reason ownership and the health check's checks ---------------------------------------------------------
# One catalogue with the node program (plugins/module_utils/healthcheck.py, installed beside it): the checks, the
# strike keys, the DCGM codes it tells apart, the other owners' prefixes and Slurm's own reasons.
HEALTHCHECK_CHECKS = healthcheck.CHECKS
# strikes takes a check name, or "timeout": the runs needed by a check whose only fault is a command not answering.
HEALTHCHECK_STRIKE_KEYS = tuple(healthcheck.CHECKS) + ("timeout",)
# (code, name) of the DCGM health watch error codes the check recognises: only these can be ignored.
DCGM_HEALTH_CODES = tuple((code, name) for code, name, _pattern in healthcheck.DCGM_HEALTH_CODES)
OTHER_REASON_OWNERS = healthcheck.OTHER_REASON_OWNERS
SLURM_REASONS = healthcheck.SLURM_REASONS
REASON_PREFIX_MAX = healthcheck.REASON_PREFIX_MAX
REASON_BAD_CHARS = healthcheck.REASON_BAD_CHARS
reason_prefix_problems = functools.partial(healthcheck.reason_prefix_problems, type_name=type_name)

# --- slurm.conf -----------------------------------------------------------------------------------------------
# Slurm's time syntax (slurm.conf(5), sbatch --time): minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS.
TIME_FORMS = (
    (re.compile(r"^(\d+)$"), ("m",)),
    (re.compile(r"^(\d+):(\d+)$"), ("m", "s")),
    (re.compile(r"^(\d+):(\d+):(\d+)$"), ("h", "m", "s")),
    (re.compile(r"^(\d+)-(\d+)$"), ("d", "h")),
    (re.compile(r"^(\d+)-(\d+):(\d+)$"), ("d", "h", "m")),
    (re.compile(r"^(\d+)-(\d+):(\d+):(\d+)$"), ("d", "h", "m", "s")),
)
TIME_SYNTAX = "minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS"
UNLIMITED = ("UNLIMITED", "INFINITE")
MIN_PARTITION_SECONDS = 300
# The partition keys of slurm_controller_partitions (the template's), and Slurm's PartitionName keys (slurm.conf(5),
# 22.05-24.11; matched without case, as slurmctld does).
PARTITION_KEYS = ("name", "nodes", "default", "max_time", "options")
PARTITION_WRITTEN = ("partitionname", "nodes", "default", "maxtime", "state")
SLURM_PARTITION_KEYS = frozenset(k.lower() for k in (
    "AllocNodes", "AllowAccounts", "AllowGroups", "AllowQos", "Alternate", "CpuBind", "DefaultTime", "DefCpuPerGPU",
    "DefMemPerCPU", "DefMemPerGPU", "DefMemPerNode", "DenyAccounts", "DenyQos", "DisableRootJobs", "ExclusiveTopo",
    "ExclusiveUser", "GraceTime", "Hidden", "LLN", "MaxCPUsPerNode", "MaxCPUsPerSocket", "MaxMemPerCPU",
    "MaxMemPerNode", "MaxNodes", "MinNodes", "OverSubscribe", "OverTimeLimit", "PowerDownOnIdle", "PreemptMode",
    "PriorityJobFactor", "PriorityTier", "QOS", "ReqResv", "ResumeTimeout", "RootOnly", "SelectTypeParameters",
    "SuspendTime", "SuspendTimeout", "TRESBillingWeights", "Topology", "Shared",
))
YES_NO_PARTITION_KEYS = frozenset(("disablerootjobs", "exclusivetopo", "exclusiveuser", "hidden", "lln",
                                   "powerdownonidle", "reqresv", "rootonly"))
# A value that stays one slurm.conf token: no whitespace (ends the value), '#' (starts a comment), quotes, '\'.
CONF_VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:=/+*@%-]+$")
CONF_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
# slurm.conf keys slurm.conf.j2 writes itself: slurm_controller_extra_config must not repeat them (a second
# SlurmctldParameters would drop enable_configless; a second port would split the cluster).
WRITTEN_KEYS = dict((k.lower(), v) for k, v in (
    ("ClusterName", "slurm_controller_cluster_name"), ("SlurmctldHost", None), ("SlurmctldParameters", None),
    ("SlurmctldPort", "slurm_controller_slurmctld_port"), ("SlurmdPort", "slurm_controller_slurmd_port"),
    ("SlurmUser", None), ("AuthType", None), ("CredType", None),
    ("StateSaveLocation", "slurm_controller_state_save_location"),
    ("SlurmdSpoolDir", None), ("SlurmctldPidFile", None), ("SlurmdPidFile", None), ("SlurmctldLogFile", None),
    ("SlurmdLogFile", None), ("MpiDefault", None), ("SwitchType", None), ("SelectType", None),
    ("SelectTypeParameters", "slurm_controller_select_type_parameters"),
    ("DefMemPerCPU", "slurm_controller_def_mem_per_cpu_mb"), ("GresTypes", None),
    ("ProctrackType", "slurm_controller_proctrack_type"), ("TaskPlugin", "slurm_controller_task_plugin"),
    ("JobAcctGatherType", "slurm_controller_jobacct_gather_type"), ("AccountingStorageType", None),
    ("AccountingStorageHost", None), ("AccountingStoragePort", "slurm_controller_slurmdbd_port"),
    ("AccountingStorageTRES", None),
    ("AccountingStorageEnforce", "slurm_controller_accounting_storage_enforce"), ("JobCompType", None),
    ("PriorityType", None), ("PriorityDecayHalfLife", "slurm_controller_priority_decay_half_life"),
    ("PriorityMaxAge", "slurm_controller_priority_max_age"),
    ("PriorityWeightFairshare", "slurm_controller_priority_weight_fairshare"),
    ("PriorityWeightAge", "slurm_controller_priority_weight_age"),
    ("PriorityWeightQOS", "slurm_controller_priority_weight_qos"),
    ("PriorityWeightJobSize", "slurm_controller_priority_weight_job_size"),
    ("PriorityWeightPartition", "slurm_controller_priority_weight_partition"), ("PriorityWeightTRES", None),
    ("PreemptType", None), ("PreemptMode", "slurm_controller_preempt_mode"), ("JobRequeue", None),
    ("ReturnToService", "slurm_controller_return_to_service"),
    ("RebootProgram", "slurm_controller_reboot_program"),
    ("ResumeTimeout", "slurm_controller_resume_timeout_seconds"),
    ("SlurmdTimeout", "slurm_controller_slurmd_timeout_seconds"),
    ("SlurmctldTimeout", "slurm_controller_slurmctld_timeout_seconds"),
    ("MessageTimeout", "slurm_controller_message_timeout_seconds"),
    ("KillWait", "slurm_controller_kill_wait_seconds"),
    ("UnkillableStepTimeout", "slurm_controller_unkillable_step_timeout_seconds"),
    ("InactiveLimit", "slurm_controller_inactive_limit_seconds"),
    ("HealthCheckProgram", "slurm_controller_health_check_program"),
    ("HealthCheckInterval", "slurm_controller_health_check_interval_seconds"),
    ("HealthCheckNodeState", "slurm_controller_health_check_node_state"),
    ("Prolog", "slurm_controller_prolog_dir"), ("Epilog", "slurm_controller_epilog_dir"),
    ("NodeName", None), ("PartitionName", "slurm_controller_partitions"), ("NodeSet", None), ("DownNodes", None),
))
PROCTRACK_TYPES = ("proctrack/cgroup", "proctrack/linuxproc", "proctrack/pgid")
TASK_PLUGINS = ("task/cgroup", "task/affinity", "task/none")
JOBACCT_TYPES = ("jobacct_gather/linux", "jobacct_gather/cgroup", "jobacct_gather/none")
PREEMPT_MODES = ("OFF", "CANCEL", "GANG", "REQUEUE", "SUSPEND", "PRIORITY", "WITHIN")
ENFORCE_FLAGS = ("all", "associations", "limits", "nojobs", "nosteps", "qos", "safe", "wckeys")
NODE_STATE_FLAGS = ("ALLOC", "ANY", "CYCLE", "IDLE", "MIXED", "NONDRAINED_IDLE", "START_ONLY")
CGROUP_PLUGINS = ("autodetect", "cgroup/v1", "cgroup/v2")
FEATURE_RE = re.compile(r"^[A-Za-z0-9_.-]+$")

# --- timings (slurm.conf(5)) ----------------------------------------------------------------------------------
# slurmd kills HealthCheckProgram after 60 s, and runs it once at start, before the node registers (PRACTICE.md
# section 8). The check ends by itself within its budget, below that limit; it keeps part of the budget for scontrol
# so that a hung nvidia-smi or dcgmi still leads to a drain, and gives every command the smaller of its timeout and
# the time left: a command timeout longer than the budget could never be given, and is refused. Below 10 s a
# healthy node can miss the budget (nvidia-smi alone takes seconds on an 8-GPU node without persistence mode) and be
# drained.
HEALTHCHECK_KILL_SECONDS = 60
HEALTHCHECK_BUDGET_MIN = 10
# slurmctld warns that a MessageTimeout above 100 s is too high for effective fault tolerance.
MESSAGE_TIMEOUT_MAX = 100
SLURM_TIMEOUT_MAX = 65533
# An HGX node takes several minutes to reboot (POST of 8 GPUs and terabytes of memory); a node not back within
# ResumeTimeout after `scontrol reboot` is marked DOWN.
RESUME_TIMEOUT_MIN = 300
MARIADB_PORT = 3306
SSH_PORT = 22

# --- paths ----------------------------------------------------------------------------------------------------
SAFE_PATH_RE = re.compile(r"^/[A-Za-z0-9._/+-]*$")


def check(inv, opts):
    """Errors of this rule set: a list of "<host or inventory>: <variable>: <rule>" strings."""
    errors = []
    ctx = _Context(inv, errors)
    for rule in (_rule_controllers, _rule_compute_group, _rule_partitions, _rule_ports, _rule_role_agreement,
                 _rule_controller_paths, _rule_compute_paths, _rule_reason_prefix, _rule_timings,
                 _rule_controller_values, _rule_extra_config, _rule_node_values, _rule_healthcheck_switches, _rule_burn_in):
        try:
            rule(ctx)
        except Exception as e:  # pylint: disable=broad-except
            # One rule that meets a shape it did not expect must not hide the others' errors.
            errors.append("inventory: preflight: the Slurm rule %s stopped on a value of an unexpected shape "
                          "(%s: %s)" % (rule.__name__.lstrip("_"), type(e).__name__,
                                        str(e).splitlines()[0] if str(e) else ""))
    return errors


class _Context(object):
    def __init__(self, inv, errors):
        self.inv = inv
        self.errors = errors
        controllers = inv.hosts("slurm_controller")
        self.ctl = controllers[0] if controllers else None
        self.gpu_nodes = inv.hosts("gpu_nodes")

    def add(self, who, name, text):
        self.errors.append("%s: %s: %s" % (who, name, text))

    def ctl_value(self, name):
        return self.inv.effective(self.ctl, CTL, name)

    def node_value(self, host, name):
        return self.inv.effective(host, CMP, name)


# --- value readers --------------------------------------------------------------------------------------------
def _as_int(value):
    """An integer, or a string of digits (the roles apply `| int`); None for anything else (bool included)."""
    if is_int(value):
        return value
    if isinstance(value, str) and re.match(r"^\s*-?\d+\s*$", value):
        return int(value)
    return None


def slurm_time_seconds(value, unlimited=False):
    """``(seconds, problem)`` of a Slurm time value: seconds None with ``problem`` when it is not one.

    ``unlimited`` accepts UNLIMITED/INFINITE (seconds -1). Within a form, the parts after the first are bounded
    (``25:61:00`` has 61 minutes; ``1-24`` has 24 hours after a day count).
    """
    if isinstance(value, bool) or value is None or not isinstance(value, (str, int)):
        return None, "syntax"
    text = str(value)  # no stripping: a space would end the value in slurm.conf
    if unlimited and text.upper() in UNLIMITED:
        return -1, None
    for pattern, units in TIME_FORMS:
        m = pattern.match(text)
        if not m:
            continue
        parts = dict(zip(units, (int(g) for g in m.groups())))
        limits = {"s": 59, "m": 59, "h": 23}
        for unit in units[1:]:
            if parts[unit] > limits[unit]:
                return None, "range"
        seconds = (parts.get("d", 0) * 86400 + parts.get("h", 0) * 3600 + parts.get("m", 0) * 60
                   + parts.get("s", 0))
        return seconds, None
    return None, "syntax"


def _time_problem(value, unlimited):
    seconds, problem = slurm_time_seconds(value, unlimited)
    if problem == "syntax":
        return "%r is not a Slurm time (%s%s)" % (value, "UNLIMITED, INFINITE, " if unlimited else "", TIME_SYNTAX)
    if problem == "range":
        return ("%r is out of range: minutes and seconds after hours or minutes must be 0-59 and hours after a day "
                "count 0-23 (e.g. 1-02:00:00 for 26 hours)" % (value,))
    return None


def _path_problem(value, what, directory=False):
    """Why a path written into slurm.conf or a shell line is unsafe, or None."""
    if not isinstance(value, str):
        return "must be an absolute path (a string), got %s %r" % (type_name(value), value)
    if not value.startswith("/"):
        return ("must be an absolute path (%s; slurmd and the roles do not run from a fixed directory), got %r"
                % (what, value))
    if not SAFE_PATH_RE.match(value):
        return ("contains characters that would break or inject into %s (only letters, digits and . _ - + / are "
                "allowed: no spaces, quotes, ';', '$', '#', '*' or newlines), got %r" % (what, value))
    parts = value.split("/")
    if ".." in parts or "." in parts:
        return "must not contain '.' or '..' components (%s), got %r" % (what, value)
    if directory and posixpath.normpath(value) == "/":
        return "must not be the root directory: every executable file in it would run (%s), got %r" % (what, value)
    if not directory and value.endswith("/"):
        return "names a directory, not a program (%s), got %r" % (what, value)
    return None


def _norm(path):
    return posixpath.normpath(path) if isinstance(path, str) and path.startswith("/") else path


def _conf_token_problem(value):
    if isinstance(value, bool):
        return "must be a Slurm value, not a YAML boolean (it would be written as %s; write YES or NO)" % value
    if is_int(value):
        return None
    if not isinstance(value, str):
        return "must be a string or an integer, got %s" % type_name(value)
    if value == "":
        return "must not be empty (slurm.conf would get 'key=')"
    if not CONF_VALUE_RE.match(value):
        return ("%r would break or inject into the slurm.conf line (no spaces, newlines, '#', quotes or '\\'; "
                "one value per key)" % value)
    return None


# --- rules ----------------------------------------------------------------------------------------------------
def _rule_controllers(ctx):
    controllers = ctx.inv.hosts("slurm_controller")
    if len(controllers) > 1:
        ctx.add("inventory", "slurm_controller",
                "%d hosts (%s): exactly one Slurm controller is supported; a second controller (SlurmctldHost HA, "
                "a backup slurmctld) is not supported by the roles, which write one SlurmctldHost, one slurmdbd and "
                "one munge key" % (len(controllers), ", ".join(controllers)))


def _compute_members(ctx):
    """Hosts of slurm_controller_compute_group (None when the name is not a usable group)."""
    if ctx.ctl is None:
        return None
    group = ctx.ctl_value("slurm_controller_compute_group")
    if not isinstance(group, str) or group not in ctx.inv.groups:
        return None
    return ctx.inv.hosts(group)


def _rule_compute_group(ctx):
    if ctx.ctl is None:
        return
    name = "slurm_controller_compute_group"
    group = ctx.ctl_value(name)
    if not isinstance(group, str) or not group:
        ctx.add(ctx.ctl, name, "must be the name of an inventory group, got %s %r" % (type_name(group), group))
        return
    if group not in ctx.inv.groups:
        ctx.add(ctx.ctl, name, "group %r does not exist in the inventory (slurm.conf would have no compute nodes; "
                "the GPU nodes are in gpu_nodes)" % group)
        return
    members = ctx.inv.hosts(group)
    if not members:
        ctx.add(ctx.ctl, name, "group %r has no hosts (slurm.conf would have no compute nodes)" % group)
        return
    gpu = set(ctx.gpu_nodes)
    outside = [h for h in members if h not in gpu]
    if outside:
        ctx.add(ctx.ctl, name, "group %r holds hosts that are not in gpu_nodes (%s): slurm_compute installs slurmd "
                "on gpu_nodes only, so these nodes would never register" % (group, ", ".join(outside)))
    missing = [h for h in ctx.gpu_nodes if h not in set(members)]
    if missing:
        ctx.add(ctx.ctl, name, "group %r leaves out GPU nodes (%s): their slurmd would find no NodeName line in "
                "slurm.conf and fail to start" % (group, ", ".join(missing)))


def _rule_partitions(ctx):
    if ctx.ctl is None:
        return
    partitions = ctx.ctl_value("slurm_controller_partitions")
    if not isinstance(partitions, list):
        return  # the inventory's shape rules (plugins/filter/preflight.py) report it
    compute = _compute_members(ctx)
    gpu = set(ctx.gpu_nodes)
    for i, part in enumerate(partitions):
        if not isinstance(part, dict):
            continue  # reported by the shape rules
        label = "slurm_controller_partitions[%d]" % i
        pname = part.get("name")
        for key in part:
            if str(key) not in PARTITION_KEYS:
                ctx.add("inventory", label, "partition %r has an unknown key %r (keys: %s; other PartitionName "
                        "keys such as OverSubscribe go under options)" % (pname, key, ", ".join(PARTITION_KEYS)))
        # MaxTime.
        if "max_time" in part:
            value = part.get("max_time")
            problem = _time_problem(value, unlimited=True)
            if problem:
                ctx.add("inventory", label + ".max_time", "partition %r: %s" % (pname, problem))
            else:
                seconds = slurm_time_seconds(value, True)[0]
                if 0 <= seconds < MIN_PARTITION_SECONDS:
                    ctx.add("inventory", label + ".max_time",
                            "partition %r: %r is %d s, too short for any GPU job (jobs are killed at MaxTime; "
                            "MM:SS is minutes:seconds and a bare number is minutes, write HH:MM:SS for hours)"
                            % (pname, value, seconds))
        # Nodes: the template writes Nodes= from the group's hosts that are compute nodes, or the hostlist as is.
        nodes = part.get("nodes")
        if nodes and isinstance(nodes, str):  # another shape is reported by the shape rules
            members = None
            if nodes in ctx.inv.groups:
                members = [h for h in ctx.inv.hosts(nodes) if compute is None or h in compute]
                how = "group %r" % nodes
            else:
                try:
                    members = hostlist_expand(nodes)
                except ValueError:
                    members = None  # the shape rules report the bad hostlist
                how = "hostlist %r" % nodes
            if members is not None and not [h for h in members if h in gpu]:
                ctx.add("inventory", label + ".nodes", "partition %r has no GPU nodes once %s is expanded "
                        "(slurm.conf would get an empty Nodes= and slurmctld refuses it)" % (pname, how))
            elif members is not None and compute is not None and nodes not in ctx.inv.groups:
                outside = [h for h in members if h in gpu and h not in compute]
                if outside:
                    ctx.add("inventory", label + ".nodes", "partition %r names hosts outside "
                            "slurm_controller_compute_group (%s): slurm.conf has no NodeName line for them"
                            % (pname, ", ".join(outside)))
        # Extra PartitionName keys.
        if "options" in part:
            _partition_options(ctx, label, pname, part)


def _partition_options(ctx, label, pname, part):
    options = part.get("options")
    if not isinstance(options, dict):
        ctx.add("inventory", label + ".options", "partition %r: must be a dict of extra PartitionName keys "
                "(e.g. {OverSubscribe: EXCLUSIVE}), got %s" % (pname, type_name(options)))
        return
    for key, value in options.items():
        where = "%s.options.%s" % (label, key)
        if not isinstance(key, str) or not CONF_KEY_RE.match(key):
            ctx.add("inventory", where, "partition %r: %r is not a slurm.conf key (letters and digits)" % (pname, key))
            continue
        low = key.lower()
        if low in PARTITION_WRITTEN:
            ctx.add("inventory", where, "partition %r: %s is written by the role itself (use name, nodes, default "
                    "and max_time); a second %s on the line is ambiguous" % (pname, key, key))
            continue
        if low not in SLURM_PARTITION_KEYS:
            ctx.add("inventory", where, "partition %r: %r is not a Slurm PartitionName key (slurmctld refuses "
                    "to start on an unknown key)" % (pname, key))
            continue
        problem = _conf_token_problem(value)
        if problem:
            ctx.add("inventory", where, "partition %r: %s" % (pname, problem))
            continue
        text = str(value)
        if low in YES_NO_PARTITION_KEYS and text.upper() not in ("YES", "NO"):
            ctx.add("inventory", where, "partition %r: must be YES or NO, got %r" % (pname, value))
        elif low == "oversubscribe" and not re.match(r"^(EXCLUSIVE|NO|(YES|FORCE)(:\d+)?)$", text, re.I):
            ctx.add("inventory", where, "partition %r: must be EXCLUSIVE, NO, YES[:count] or FORCE[:count], got %r"
                    % (pname, value))
        elif low in ("defaulttime", "gracetime"):
            problem = _time_problem(value, unlimited=(low == "defaulttime"))
            if problem:
                ctx.add("inventory", where, "partition %r: %s" % (pname, problem))
            elif low == "defaulttime":
                default = slurm_time_seconds(value, True)[0]
                limit = slurm_time_seconds(part.get("max_time", "INFINITE"), True)[0]
                if limit is not None and limit >= 0 and (default < 0 or default > limit):
                    ctx.add("inventory", where, "partition %r: DefaultTime %r exceeds the partition's max_time %r"
                            % (pname, value, part.get("max_time")))


def _port_problem(value):
    port = _as_int(value)
    if port is None:
        return None, "must be a TCP port number (an integer 1-65535), got %s %r" % (type_name(value), value)
    if not 1 <= port <= 65535:
        return None, "%d is not a TCP port (1-65535)" % port
    return port, None


def _rule_ports(ctx):
    if ctx.ctl is None:
        return
    seen = {}
    for name, daemon in (("slurm_controller_slurmctld_port", "slurmctld"), ("slurm_controller_slurmd_port", "slurmd"),
                         ("slurm_controller_slurmdbd_port", "slurmdbd")):
        port, problem = _port_problem(ctx.ctl_value(name))
        if problem:
            ctx.add(ctx.ctl, name, problem)
            continue
        if port in seen:
            ctx.add(ctx.ctl, name, "%d is already the %s port (%s): slurmctld, slurmd and slurmdbd each need their "
                    "own port" % (port, seen[port][1], seen[port][0]))
            continue
        seen[port] = (name, daemon)
        if port == MARIADB_PORT and daemon != "slurmd":
            ctx.add(ctx.ctl, name, "%d is MariaDB's port, and MariaDB runs on the controller for slurmdbd" % port)
        elif port == SSH_PORT:
            ctx.add(ctx.ctl, name, "%d is the SSH port" % port)


def _rule_role_agreement(ctx):
    """What slurm.conf says (controller) and what each GPU node installs (slurm_compute) must agree."""
    if ctx.ctl is None:
        return
    ctl_port = _as_int(ctx.ctl_value("slurm_controller_slurmctld_port"))
    ctl_program = ctx.ctl_value("slurm_controller_health_check_program")
    ctl_dirs = {"prolog": ctx.ctl_value("slurm_controller_prolog_dir"),
                "epilog": ctx.ctl_value("slurm_controller_epilog_dir")}
    for host in ctx.gpu_nodes:
        name = "slurm_compute_slurmctld_port"
        value = ctx.node_value(host, name)
        port, problem = _port_problem(value)
        if problem:
            ctx.add(host, name, problem)
        elif ctl_port is not None and port != ctl_port:
            ctx.add(host, name, "%d differs from slurm_controller_slurmctld_port %d on %s: slurmd would ask for its "
                    "configuration (--conf-server) on a port slurmctld does not listen on" % (port, ctl_port, ctx.ctl))
        name = "slurm_compute_healthcheck_path"
        value = ctx.node_value(host, name)
        if isinstance(value, str) and isinstance(ctl_program, str) and _norm(value) != _norm(ctl_program):
            ctx.add(host, name, "%r differs from slurm_controller_health_check_program %r on %s (slurm.conf "
                    "HealthCheckProgram): slurmd would run a program that is not installed"
                    % (value, ctl_program, ctx.ctl))
        for kind in ("prolog", "epilog"):
            name = "slurm_compute_%s_dir" % kind
            value = ctx.node_value(host, name)
            other = ctl_dirs[kind]
            if isinstance(value, str) and isinstance(other, str) and _norm(value) != _norm(other):
                ctx.add(host, name, "%r differs from slurm_controller_%s_dir %r on %s (slurm.conf %s=<dir>/*): the "
                        "%s scripts this role installs would never run, and a glob that matches nothing fails every "
                        "job" % (value, kind, other, ctx.ctl, kind.capitalize(), kind))
        name = "slurm_compute_controller"
        value = ctx.inv.get(host, name)
        if value is not None and value != ctx.ctl:
            ctx.add(host, name, "%r is not the slurm_controller host %s: slurmd fetches its configuration and the "
                    "munge key from there (leave it unset to use the controller)" % (value, ctx.ctl))


def _rule_controller_paths(ctx):
    if ctx.ctl is None:
        return
    for name, what, directory in (
            ("slurm_controller_health_check_program", "slurm.conf's HealthCheckProgram line", False),
            ("slurm_controller_prolog_dir", "slurm.conf's Prolog line", True),
            ("slurm_controller_epilog_dir", "slurm.conf's Epilog line", True),
            ("slurm_controller_reboot_program", "slurm.conf's RebootProgram line", False),
            ("slurm_controller_secrets_dir", "the controller's secrets directory", True),
            ("slurm_controller_state_save_location", "slurm.conf's StateSaveLocation line", True)):
        value = ctx.ctl_value(name)
        if value is None and name == "slurm_controller_state_save_location":
            continue  # null: the OS's directory
        problem = _path_problem(value, what, directory)
        if problem:
            ctx.add(ctx.ctl, name, problem)
    _dir_layout(ctx, ctx.ctl, "slurm_controller_prolog_dir", "slurm_controller_epilog_dir",
                "slurm_controller_health_check_program", ctx.ctl_value)


def _dir_layout(ctx, host, prolog_name, epilog_name, program_name, read):
    prolog, epilog, program = read(prolog_name), read(epilog_name), read(program_name)
    if not all(isinstance(v, str) and v.startswith("/") for v in (prolog, epilog)):
        return
    if _norm(prolog) == _norm(epilog):
        ctx.add(host, epilog_name, "%r is also %s: the epilog that starts the health check after each job would "
                "also run as a prolog, starting it before every job" % (epilog, prolog_name))
    if isinstance(program, str) and program.startswith("/"):
        parent = posixpath.dirname(_norm(program))
        for name, directory in ((prolog_name, prolog), (epilog_name, epilog)):
            if parent == _norm(directory):
                ctx.add(host, program_name, "%r lies in %s %r: slurmd would run it as a prolog/epilog script too, "
                        "calling scontrol from there, and its non-zero exit would drain the node"
                        % (program, name, directory))


def _rule_compute_paths(ctx):
    for host in ctx.gpu_nodes:
        read = functools.partial(ctx.node_value, host)
        for name, what, directory in (
                ("slurm_compute_healthcheck_path", "the epilog's shell line and slurm.conf's HealthCheckProgram",
                 False),
                ("slurm_compute_prolog_dir", "slurm.conf's Prolog line", True),
                ("slurm_compute_epilog_dir", "slurm.conf's Epilog line", True),
                ("slurm_compute_nvidia_smi_path", "the health check's configuration", False)):
            value = read(name)
            if value is None and name == "slurm_compute_nvidia_smi_path":
                continue
            problem = _path_problem(value, what, directory)
            if problem:
                ctx.add(host, name, problem)
        _dir_layout(ctx, host, "slurm_compute_prolog_dir", "slurm_compute_epilog_dir",
                    "slurm_compute_healthcheck_path", read)
        mounts = read("slurm_compute_healthcheck_lustre_mounts")
        if mounts is None:
            continue
        if not isinstance(mounts, list):
            ctx.add(host, "slurm_compute_healthcheck_lustre_mounts", "must be a list of mount points, got %s %r"
                    % (type_name(mounts), mounts))
            continue
        for mount in mounts:
            problem = _path_problem(mount, "a Lustre mount point the health check looks up", True)
            if problem:
                ctx.add(host, "slurm_compute_healthcheck_lustre_mounts", problem)


def _rule_reason_prefix(ctx):
    name = "slurm_compute_healthcheck_reason_prefix"
    for host in ctx.gpu_nodes:
        for problem in reason_prefix_problems(ctx.node_value(host, name)):
            ctx.add(host, name, problem)


def _int_rule(ctx, host, name, value, low=None, high=None, why=""):
    """Report a value that is not an integer within [low, high]; return the integer or None."""
    number = _as_int(value)
    if number is None:
        ctx.add(host, name, "must be an integer, got %s %r" % (type_name(value), value))
        return None
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = ("%s-%s" % (low, high) if low is not None and high is not None
                  else (">= %s" % low if low is not None else "<= %s" % high))
        ctx.add(host, name, "%d is outside %s%s" % (number, bounds, why))
        return None
    return number


def _rule_timings(ctx):
    if ctx.ctl is not None:
        c, v = ctx.ctl, ctx.ctl_value
        _int_rule(ctx, c, "slurm_controller_health_check_interval_seconds",
                  v("slurm_controller_health_check_interval_seconds"), 1, SLURM_TIMEOUT_MAX,
                  " (0 turns the periodic health check off; the collection relies on it to drain faulty GPU nodes)")
        # SlurmdTimeout and HealthCheckInterval are independent in slurm.conf(5) (the check runs beside slurmd,
        # which keeps answering pings), so no rule ties them; 0 disables DOWN detection, which nothing else here
        # replaces.
        _int_rule(ctx, c, "slurm_controller_slurmd_timeout_seconds", v("slurm_controller_slurmd_timeout_seconds"),
                  1, SLURM_TIMEOUT_MAX, " (0 means slurmctld never marks a dead node DOWN; Slurm's limit is 65533 s)")
        _int_rule(ctx, c, "slurm_controller_slurmctld_timeout_seconds",
                  v("slurm_controller_slurmctld_timeout_seconds"), 1, SLURM_TIMEOUT_MAX)
        message = _int_rule(ctx, c, "slurm_controller_message_timeout_seconds",
                            v("slurm_controller_message_timeout_seconds"), 1, MESSAGE_TIMEOUT_MAX,
                            " (slurmctld warns that a MessageTimeout above 100 s is too high for fault tolerance)")
        unkillable = _int_rule(ctx, c, "slurm_controller_unkillable_step_timeout_seconds",
                               v("slurm_controller_unkillable_step_timeout_seconds"), 1, SLURM_TIMEOUT_MAX)
        if message is not None and unkillable is not None and unkillable < 5 * message:
            ctx.add(c, "slurm_controller_unkillable_step_timeout_seconds",
                    "%d s is less than 5 x MessageTimeout (%d s): slurm.conf(5) warns this drains nodes "
                    "unexpectedly" % (unkillable, message))
        _int_rule(ctx, c, "slurm_controller_kill_wait_seconds", v("slurm_controller_kill_wait_seconds"), 0,
                  SLURM_TIMEOUT_MAX)
        _int_rule(ctx, c, "slurm_controller_inactive_limit_seconds", v("slurm_controller_inactive_limit_seconds"),
                  0, SLURM_TIMEOUT_MAX)
        _int_rule(ctx, c, "slurm_controller_resume_timeout_seconds", v("slurm_controller_resume_timeout_seconds"),
                  RESUME_TIMEOUT_MIN, SLURM_TIMEOUT_MAX,
                  " (an HGX node needs minutes to reboot; one not back within ResumeTimeout is marked DOWN)")
        _int_rule(ctx, c, "slurm_controller_return_to_service", v("slurm_controller_return_to_service"), 0, 2,
                  " (ReturnToService is 0, 1 or 2)")
        for name in ("slurm_controller_priority_decay_half_life", "slurm_controller_priority_max_age"):
            problem = _time_problem(v(name), unlimited=False)
            if problem:
                ctx.add(c, name, problem)
    for host in ctx.gpu_nodes:
        _healthcheck_timings(ctx, host)


def _healthcheck_timings(ctx, host):
    name = "slurm_compute_healthcheck_budget_seconds"
    value = ctx.node_value(host, name)
    budget = _as_int(value)
    if budget is None:
        ctx.add(host, name, "must be an integer number of seconds, got %s %r" % (type_name(value), value))
    elif budget >= HEALTHCHECK_KILL_SECONDS:
        ctx.add(host, name, "%d s is not below Slurm's %d s HealthCheckProgram kill limit: slurmd would kill the "
                "check before it ends by itself, perhaps before it drains a faulty node"
                % (budget, HEALTHCHECK_KILL_SECONDS))
        budget = None
    elif budget < HEALTHCHECK_BUDGET_MIN:
        ctx.add(host, name, "%d s is below %d s: nvidia-smi alone can take seconds on an 8-GPU node without "
                "persistence mode, and a hardware check that does not finish in its share of the budget drains the "
                "node" % (budget, HEALTHCHECK_BUDGET_MIN))
        budget = None
    name = "slurm_compute_healthcheck_command_timeout_seconds"
    value = ctx.node_value(host, name)
    number = _as_int(value)
    if number is None:
        ctx.add(host, name, "must be an integer number of seconds, got %s %r" % (type_name(value), value))
    elif number < 1:
        ctx.add(host, name, "%d s: each command of the health check needs at least 1 s" % number)
    elif number >= HEALTHCHECK_KILL_SECONDS:
        ctx.add(host, name, "%d s is not below Slurm's %d s HealthCheckProgram kill limit: slurmd would kill "
                "the check before it drains a faulty node" % (number, HEALTHCHECK_KILL_SECONDS))
    elif budget is not None and number > budget:
        ctx.add(host, name, "%d s is more than slurm_compute_healthcheck_budget_seconds (%d s), the time the whole "
                "check may take: no command can get more than the budget (raise the budget, below %d s, or lower "
                "the timeout)" % (number, budget, HEALTHCHECK_KILL_SECONDS))


def _rule_controller_values(ctx):
    if ctx.ctl is None:
        return
    c, v = ctx.ctl, ctx.ctl_value
    # ClusterName is also the accounting cluster; preflight and every other tool read cluster_name.
    name = "slurm_controller_cluster_name"
    value = v(name)
    cluster = ctx.inv.get(c, "cluster_name")
    if value is not None and value != cluster:
        ctx.add(c, name, "%r differs from cluster_name %r: Slurm's ClusterName (and the accounting cluster) must "
                "be the cluster's name (leave it unset)" % (value, cluster))
    _int_rule(ctx, c, "slurm_controller_node_memory_reserve_percent", v("slurm_controller_node_memory_reserve_percent"),
              0, 50, " (percent of MemTotal kept from jobs; more than half would leave the GPUs without host memory)")
    _int_rule(ctx, c, "slurm_controller_node_memory_reserve_min_mb", v("slurm_controller_node_memory_reserve_min_mb"),
              0, None)
    _int_rule(ctx, c, "slurm_controller_def_mem_per_cpu_mb", v("slurm_controller_def_mem_per_cpu_mb"), 0, None)
    for weight in ("fairshare", "age", "qos", "job_size", "partition"):
        wname = "slurm_controller_priority_weight_%s" % weight
        _int_rule(ctx, c, wname, v(wname), 0, 4294967294)
    # One-token slurm.conf values, and the plugin names slurmctld knows.
    for name, allowed, sep in (("slurm_controller_proctrack_type", PROCTRACK_TYPES, None),
                               ("slurm_controller_task_plugin", TASK_PLUGINS, ","),
                               ("slurm_controller_jobacct_gather_type", JOBACCT_TYPES, None),
                               ("slurm_controller_preempt_mode", PREEMPT_MODES, ","),
                               ("slurm_controller_health_check_node_state", NODE_STATE_FLAGS, ","),
                               ("slurm_controller_cgroup_plugin", CGROUP_PLUGINS, None),
                               ("slurm_controller_select_type_parameters", None, None)):
        value = v(name)
        problem = _conf_token_problem(value) if not is_int(value) else "must be a string, got integer %r" % value
        if problem:
            ctx.add(c, name, problem)
            continue
        if allowed is None:
            continue
        items = value.split(sep) if sep else [value]
        upper = dict((a.upper(), a) for a in allowed)
        unknown = [i for i in items if i.upper() not in upper]
        if unknown:
            ctx.add(c, name, "%r is not one of %s%s" % (value, ", ".join(allowed),
                                                        " (comma-separated)" if sep else ""))
    name = "slurm_controller_accounting_storage_enforce"
    value = v(name)
    if not isinstance(value, list):
        ctx.add(c, name, "must be a list of AccountingStorageEnforce flags (%s), got %s %r"
                % (", ".join(ENFORCE_FLAGS), type_name(value), value))
    else:
        unknown = [f for f in value if not isinstance(f, str) or f.lower() not in ENFORCE_FLAGS]
        if unknown:
            ctx.add(c, name, "unknown AccountingStorageEnforce flags %r (known: %s)"
                    % (unknown, ", ".join(ENFORCE_FLAGS)))


def _rule_extra_config(ctx):
    if ctx.ctl is None:
        return
    name = "slurm_controller_extra_config"
    extra = ctx.ctl_value(name)
    if extra is None:
        return
    if not isinstance(extra, dict):
        ctx.add(ctx.ctl, name, "must be a dict of slurm.conf keys and values, got %s" % type_name(extra))
        return
    for key, value in extra.items():
        where = "%s.%s" % (name, key)
        if not isinstance(key, str) or not CONF_KEY_RE.match(key):
            ctx.add(ctx.ctl, where, "%r is not a slurm.conf key (letters and digits)" % (key,))
            continue
        if key.lower() in WRITTEN_KEYS:
            var = WRITTEN_KEYS[key.lower()]
            ctx.add(ctx.ctl, where, "%s is written by the role itself%s; a second %s line would contradict it"
                    % (key, (" (set %s)" % var) if var else "", key))
            continue
        if isinstance(value, str) and len(value) > 1 and value.startswith('"') and value.endswith('"') \
                and not re.search(r'["\n\r#\\]', value[1:-1]):
            continue  # a quoted slurm.conf value may hold spaces
        problem = _conf_token_problem(value)
        if problem:
            ctx.add(ctx.ctl, where, problem)


def _rule_node_values(ctx):
    """Per node: Features (slurm.conf's node lines read them from each node's variables) and the GPU count."""
    default_cooling = ctx.ctl_value("slurm_controller_node_cooling") if ctx.ctl else None
    default_extra = ctx.ctl_value("slurm_controller_node_features_extra") if ctx.ctl else None
    for host in ctx.gpu_nodes:
        cooling = ctx.inv.get(host, "slurm_controller_node_cooling", default_cooling)
        if cooling is not None and (not isinstance(cooling, str) or not FEATURE_RE.match(cooling)):
            ctx.add(host, "slurm_controller_node_cooling", "%r is not a Slurm node feature (letters, digits, _ . -; "
                    "e.g. air or liquid)" % (cooling,))
        extra = ctx.inv.get(host, "slurm_controller_node_features_extra", default_extra)
        if extra is not None:
            if not isinstance(extra, list):
                ctx.add(host, "slurm_controller_node_features_extra", "must be a list of node features, got %s %r"
                        % (type_name(extra), extra))
            else:
                bad = [f for f in extra if not isinstance(f, str) or not FEATURE_RE.match(f)]
                if bad:
                    ctx.add(host, "slurm_controller_node_features_extra", "%r are not Slurm node features (letters, "
                            "digits, _ . -; a comma or space would split the Features= list)" % (bad,))
        # Thresholds of the health check: a GPU idles at 30-50 C and no data-centre GPU runs above 100 C, so a
        # limit outside 40-100 C either drains healthy nodes or never fires.
        _int_rule(ctx, host, "slurm_compute_healthcheck_max_temperature_c",
                  ctx.node_value(host, "slurm_compute_healthcheck_max_temperature_c"), 40, 100,
                  " C (below 40 C drains healthy idle GPUs, above 100 C never fires)")
        _int_rule(ctx, host, "slurm_compute_healthcheck_max_ecc_uncorrectable",
                  ctx.node_value(host, "slurm_compute_healthcheck_max_ecc_uncorrectable"), 0, None)
        count = ctx.node_value(host, "slurm_compute_healthcheck_gpu_count")
        if count is None:
            continue
        number = _as_int(count)
        if number is None or number < 0:
            ctx.add(host, "slurm_compute_healthcheck_gpu_count", "must be a number of GPUs (an integer >= 0), got %r"
                    % (count,))
            continue
        declared = ctx.inv.get(host, "cluster_gpu_count_per_node")
        if is_int(declared) and number > declared:
            ctx.add(host, "slurm_compute_healthcheck_gpu_count", "%d is more than the node's %d GPUs "
                    "(cluster_gpu_count_per_node): the health check would drain it at once" % (number, declared))


def _known(names):
    return ", ".join(names)


def _rule_healthcheck_switches(ctx):
    """The health check's checks_disabled and strikes name its checks, strikes are whole numbers >= 1, the breaker's
    share is a percentage of 1-100, and the DCGM codes to ignore are ones the check can tell apart."""
    codes = dict(DCGM_HEALTH_CODES)
    names = dict((name, code) for code, name in DCGM_HEALTH_CODES)
    for host in ctx.gpu_nodes:
        read = functools.partial(ctx.node_value, host)
        name = "slurm_compute_healthcheck_checks_disabled"
        value = read(name)
        if value is not None and not isinstance(value, list):
            ctx.add(host, name, "must be a list of health check names, got %s %r" % (type_name(value), value))
        elif value:
            for item in value:
                if item not in HEALTHCHECK_CHECKS:
                    ctx.add(host, name, "%r is not a health check (known: %s)" % (item, _known(HEALTHCHECK_CHECKS)))
        name = "slurm_compute_healthcheck_strikes"
        value = read(name)
        if value is not None and not isinstance(value, dict):
            ctx.add(host, name, "must be a dict of health check name: runs in a row, got %s %r"
                    % (type_name(value), value))
        elif value:
            for key, strikes in value.items():
                if key not in HEALTHCHECK_STRIKE_KEYS:
                    ctx.add(host, name, "%r is not a health check, nor timeout (known: %s)"
                            % (key, _known(HEALTHCHECK_STRIKE_KEYS)))
                    continue
                number = _as_int(strikes)
                if number is None or number < 1:
                    ctx.add(host, "%s.%s" % (name, key), "must be a whole number of runs of at least 1 (1: the "
                            "first failing run drains), got %r" % (strikes,))
        _int_rule(ctx, host, "slurm_compute_healthcheck_max_drained_percent",
                  read("slurm_compute_healthcheck_max_drained_percent"), 1, 100,
                  " % of the nodes (the circuit breaker: at most this share may be drained by the health check; "
                  "at least one node always may)")
        name = "slurm_compute_healthcheck_dcgm_ignore_error_codes"
        value = read(name)
        if value is not None and not isinstance(value, list):
            ctx.add(host, name, "must be a list of DCGM error codes, got %s %r" % (type_name(value), value))
        elif value:
            for item in value:
                code = _as_int(item) if not isinstance(item, str) or item.strip().isdigit() else None
                if code in codes or (isinstance(item, str) and item.strip() in names):
                    continue
                ctx.add(host, name, "%r is not a DCGM health error code the check recognises in dcgmi's output "
                        "(dcgmi prints the message, not the code; known: %s)"
                        % (item, ", ".join("%d %s" % c for c in DCGM_HEALTH_CODES)))
        name = "slurm_compute_healthcheck_xid_ignore_codes"
        value = read(name)
        if value is not None and not isinstance(value, list):
            ctx.add(host, name, "must be a list of Xid numbers, got %s %r" % (type_name(value), value))
        elif value:
            bad = [item for item in value if _as_int(item) is None or _as_int(item) < 0]
            if bad:
                ctx.add(host, name, "%r are not Xid numbers (whole numbers >= 0)" % (bad,))
        for name in ("slurm_compute_healthcheck_nvlink_max_error_increase",
                     "slurm_compute_healthcheck_ib_max_error_increase"):
            _int_rule(ctx, host, name, read(name), 0, None)
        value = read("slurm_compute_healthcheck_nvlink_active_links")
        if value is not None:
            _int_rule(ctx, host, "slurm_compute_healthcheck_nvlink_active_links", value, 0, None)
        name = "slurm_compute_healthcheck_textfile_dir"
        value = read(name)
        if value not in (None, ""):
            problem = _path_problem(value, "the directory of node-exporter's textfile collector", True)
            if problem:
                ctx.add(host, name, problem)


def _rule_burn_in(ctx):
    """A new node's burn-in drain (slurm_compute_burn_in) is one the deep checks resume: its reason starts with their
    prefix (DEEP_REASON_PREFIX, cf-deep:), says something after it, and is one line Slurm keeps as written."""
    name = "slurm_compute_burn_in_reason"
    for host in ctx.gpu_nodes:
        if ctx.node_value(host, "slurm_compute_burn_in") is not True:
            continue
        reason = ctx.node_value(host, name)
        if not isinstance(reason, str):
            ctx.add(host, name, "must be a string starting with %r, got %s %r"
                    % (DEEP_REASON_PREFIX, type_name(reason), reason))
            continue
        if not reason.startswith(DEEP_REASON_PREFIX):
            ctx.add(host, name, "%r does not start with %r: playbooks/health_deep.yml resumes only drains whose reason "
                    "starts with it, so a new node drained with this reason would never be put into service"
                    % (reason, DEEP_REASON_PREFIX))
        elif not reason[len(DEEP_REASON_PREFIX):].strip():
            ctx.add(host, name, "%r is the prefix alone: say why the node is drained (e.g. %r)"
                    % (reason, DEEP_REASON_PREFIX + " burn-in: new node, deep checks pending"))
        if REASON_BAD_CHARS.search(reason):
            ctx.add(host, name, "%r contains a quote, a backslash, a newline or another control character, which break "
                    "a Slurm reason" % reason)
        if len(reason) > 200:
            ctx.add(host, name, "is %d characters long: keep a drain reason within 200, as the deep checks keep theirs"
                    % len(reason))
