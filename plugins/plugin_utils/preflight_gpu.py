# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight rules: GPUs, power, clocks, rack power budget, driver, DCGM, NCCL and the fabric, across hosts.

Every rule reads the GPU model of each GPU node (``cluster_gpu_type``) and judges the values the roles will use
against the hardware catalogue (plugins/module_utils/hardware.py GPU_MODELS), the figures NVIDIA publishes for that
model, with their sources. A figure that is not known with confidence is ``None`` in the table, and the rule that
needs it is skipped for that model rather than guessed.

The rack power budget is judged over the whole rack (every GPU node of the inventory with the same
``gpu_tuning_rack``), where roles/gpu_tuning/tasks/budget.yml can only see the hosts of one play's batch.

:func:`check` returns errors; :func:`warnings` returns advice that is not an error (a RoCE-only setting on an
InfiniBand fabric, proprietary modules where NVIDIA recommends the open ones).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.clusterforge.gpu.plugins.module_utils.dcgm import (
    WATCH_LETTERS,
    hostengine_problem,
    socket_path_problem,
    validate_watch_letters,
)
from ansible_collections.clusterforge.gpu.plugins.module_utils.gpu_settings import ROLE_NAMES, parse_setting
from ansible_collections.clusterforge.gpu.plugins.module_utils.hardware import FABRIC_TYPES, GPU_MODELS, fabric_type
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.gpu_power import rack_plan
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import MISSING
from ansible_collections.clusterforge.gpu.plugins.module_utils.values import is_int, type_name, whole

ARCH_NAMES = {"volta": "Volta", "ampere": "Ampere", "ada": "Ada Lovelace", "hopper": "Hopper",
              "blackwell": "Blackwell"}
# Open GPU kernel modules exist from this branch on (KM).
OPEN_MODULES_FIRST_BRANCH = 515
NAMES_SHOWN = 6

BRANCH_RE = re.compile(r"^[0-9]{3}$")
VERSION_RE = re.compile(r"^([0-9]{3})\.[0-9]{1,3}(\.[0-9]{1,3})?$")
DCGM_VERSION_RE = re.compile(r"^([0-9]+)\.[0-9]+\.[0-9]+$")
DCGM_CUDA_MAJORS = (11, 12, 13)
# CUDA 13 needs driver branch R580 or newer (NVIDIA's CUDA and drivers support matrix: R580 is the first branch
# whose maximum CUDA major is 13; R535 and R570 stop at CUDA 12).
CUDA13_FIRST_BRANCH = 580
DIGITS_RE = re.compile(r"^\s*[0-9]+\s*$")
# A GPU as nvidia_smi takes it: an index, a UUID, or a PCI bus id (domain optional).
GPU_INDEX_RE = re.compile(r"^[0-9]+$")
GPU_UUID_RE = re.compile(r"^GPU-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
GPU_BUS_RE = re.compile(r"^([0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
# NCCL_IB_HCA entry: an RDMA device name (mlx5_0, mlx5_bond_0, rocep65s0f0...) and an optional :port.
HCA_ENTRY_RE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9_.-]{0,63})(?::(?P<port>[^:]*))?$")
# Linux network interface names: at most 15 characters (IFNAMSIZ 16); we take the safe characters only.
IFNAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,15}$")
NCCL_NAME_RE = re.compile(r"^NCCL_[A-Z0-9_]+$")
# What the nccl role writes itself from its own variables: the same name in nccl_settings gives a second line
# that NCCL ignores (it keeps the first value it reads).
NCCL_ROLE_OWNED = {
    "NCCL_IB_HCA": "nccl_ib_hca", "NCCL_SOCKET_IFNAME": "nccl_socket_ifname", "NCCL_IB_GID_INDEX": "nccl_ib_gid_index",
    "NCCL_IB_TIMEOUT": "nccl_ib_timeout", "NCCL_TOPO_FILE": "nccl_topo_file",
}
# Debugging-only variables the role's own check counts in nccl_debug_overrides (roles/nccl/tasks/verify.yml).
NCCL_DEBUG_ONLY = ("NCCL_ALGO", "NCCL_PROTO")
# Integer NCCL variables with a fixed range (NCCL env docs; InfiniBand verbs field widths).
NCCL_INT_RANGES = {
    "NCCL_IB_TIMEOUT": (1, 31), "NCCL_IB_RETRY_CNT": (0, 7), "NCCL_IB_SL": (0, 15), "NCCL_IB_TC": (0, 255),
    "NCCL_IB_GID_INDEX": (0, 255), "NCCL_CROSS_NIC": (0, 2),
}
NCCL_GDR_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "P2C", "NVL")
NCCL_TIMEOUT_RANGE = (1, 31)
GID_INDEX_RANGE = (0, 255)
HCA_PORT_RANGE = (1, 255)
# Values written into systemd ExecStart lines (not a shell, but whitespace, quotes, % and $ are special there).
COMMAND_RE = re.compile(r"^[A-Za-z0-9_.+/-]+$")
ABS_PATH_RE = re.compile(r"^/[A-Za-z0-9_.+@,=:/-]*$")
MIG_CONFIG_RE = re.compile(r"^[A-Za-z0-9_.-]+$")
UNIT_RE = re.compile(r"^[A-Za-z0-9:_.\\@-]+\."
                     r"(service|socket|target|mount|automount|device|path|timer|slice|scope|swap)$")
HOSTENGINE_RE = re.compile(r"^(?P<host>[A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]+)$")
DCGM_HOSTENGINE_PORT = 5555
DCGM_LEVELS = (1, 2, 3, 4)
# The DCGM diagnostic levels an inventory can set, where 0 skips the diagnostic (validation runs it only when the
# level is above 0).
# rolling_health_dcgm_level is judged by its spec (roles/rolling, levels 1-4: the health gate cannot be switched
# off) and preflight_rolling (the rolling playbook's own wording for 0).
DCGM_LEVEL_VARS = ("validate_dcgm_level",)
HEALTHCHECK_DCGM_MODES = ("auto", "true", "false", "yes", "no", "on", "off")


# ----------------------------------------------------------------------------------------------------- helpers

def profile_of(inv, host):
    """The GPU profile of a host (None for an unknown or missing cluster_gpu_type: the filter reports those)."""
    gtype = inv.get(host, "cluster_gpu_type")
    if not isinstance(gtype, str):
        return None
    return GPU_MODELS.get(gtype.strip().lower())


def _names(hosts):
    hosts = list(hosts)
    if len(hosts) <= NAMES_SHOWN:
        return ", ".join(hosts)
    return "%s and %d more" % (", ".join(hosts[:NAMES_SHOWN]), len(hosts) - NAMES_SHOWN)


def _fmt(value):
    if isinstance(value, float) and value.is_integer():
        return "%d" % value
    return "%s" % (value,)


def _set(inv, host, name):
    """The inventory's value, or MISSING when the inventory does not set it (role defaults left out)."""
    return inv.get(host, name, MISSING)


def _fabric_of(inv, host):
    value = inv.get(host, "cluster_fabric_type", MISSING)
    return fabric_type(None if value is MISSING else value)


# ------------------------------------------------------------------------------------------------ entry points

def check(inv, opts):
    """Errors of this rule set: a list of "<host or inventory>: <variable>: <rule>" strings."""
    errors = []
    gpu_hosts = inv.hosts("gpu_nodes")
    for host in gpu_hosts:
        profile = profile_of(inv, host)
        errors.extend(_power_errors(inv, host, profile))
        errors.extend(_clock_errors(inv, host, profile))
        errors.extend(_gpu_selection_errors(inv, host))
        errors.extend(_mig_errors(inv, host, profile))
        errors.extend(_unit_errors(inv, host))
        errors.extend(_driver_errors(inv, host, profile))
        errors.extend(_dcgm_errors(inv, host))
        errors.extend(_nccl_errors(inv, host))
    errors.extend(_rack_errors(inv, gpu_hosts))
    errors.extend(_fabric_errors(inv, gpu_hosts))
    return errors


def warnings(inv, opts):
    """Advice that is not an error: settings that have no effect on this fabric, choices NVIDIA advises against."""
    found = []
    for host in inv.hosts("gpu_nodes"):
        fabric = _fabric_of(inv, host)
        if fabric in FABRIC_TYPES and fabric != "roce":
            roce_only = [name for name in ("nccl_ib_gid_index", "nccl_roce_qos_manage", "nccl_roce_qos_tool",
                                           "nccl_roce_pfc_priority", "nccl_roce_trust", "nccl_roce_ecn")
                         if _set(inv, host, name) not in (MISSING, None)]
            if roce_only:
                found.append("%s: %s: RoCE settings have no effect (nccl_ib_gid_index is written but only matters on "
                             "RoCE) while cluster_fabric_type is %s" % (host, ", ".join(roce_only), fabric))
        # nccl_ib_hca on a fabric without HCAs is an error (plugins/plugin_utils/preflight_cross.py).
        profile = profile_of(inv, host)
        module_type = inv.effective(host, "nvidia_driver", "nvidia_driver_kernel_module_type")
        if profile and profile["open_kernel_module"] == "recommended" and module_type == "proprietary":
            found.append("%s: nvidia_driver_kernel_module_type: NVIDIA recommends the open kernel modules for %s "
                         "(%s); proprietary still works" % (host, profile["name"],
                                                            ARCH_NAMES[profile["architecture"]]))
    for rack, budgets in sorted(_rack_budgets(inv, inv.hosts("gpu_nodes")).items()):
        if len(set(budgets.values())) > 1:
            found.append("inventory: gpu_tuning_rack_power_budget_watts: the nodes of rack %r give different budgets "
                         "(%s); the smallest is used" % (rack, "; ".join("%s %d W" % (h, b) for h, b in
                                                                         sorted(budgets.items()))))
    return found


# ------------------------------------------------------------------------------------------- power and clocks

def _power_range(profile):
    low, high = profile["power_min_watts"], profile["power_max_watts"]
    if low is not None and high is not None:
        return "the %s range %d-%d W" % (profile["name"], low, high)
    if high is not None:
        return "the %s maximum of %d W" % (profile["name"], high)
    return "the %s minimum of %d W" % (profile["name"], low)


def _power_errors(inv, host, profile):
    name = "gpu_tuning_power_limit_watts"
    value = _set(inv, host, name)
    if value is MISSING or value is None:
        return []
    watts, problem = parse_setting("power_limit_watts", value, name)
    if problem:
        return ["%s: %s" % (host, problem)]
    if profile is None:
        return []
    low, high = profile["power_min_watts"], profile["power_max_watts"]
    if (low is not None and watts < low) or (high is not None and watts > high):
        if low is not None and high is not None:
            verb = "outside"
        else:
            verb = "above" if high is not None else "below"
        return ["%s: %s: %d W is %s %s" % (host, name, watts, verb, _power_range(profile))]
    return []


def _clock_errors(inv, host, profile):
    errors = []
    for option in ("locked_gpu_clocks", "locked_memory_clocks", "application_clocks"):
        name = ROLE_NAMES[option]
        value = _set(inv, host, name)
        if value is MISSING or value is None:
            continue
        parsed, problem = parse_setting(option, value, name)
        if problem:
            errors.append("%s: %s" % (host, problem))
        if profile is None:
            continue
        if name == "gpu_tuning_locked_memory_clocks" and profile["architecture"] == "volta":
            errors.append("%s: %s: memory clock locks (nvidia-smi -lmc) need an Ampere or newer GPU; %s is %s"
                          % (host, name, profile["name"], ARCH_NAMES["volta"]))
            continue
        if not isinstance(parsed, dict):
            continue
        sm_max, mem_max = profile["sm_clock_max_mhz"], profile["memory_clock_max_mhz"]
        if name == "gpu_tuning_locked_gpu_clocks" and sm_max is not None and parsed["max"] > sm_max:
            errors.append("%s: %s: max %d MHz is above the %s's highest SM clock of %d MHz"
                          % (host, name, parsed["max"], profile["name"], sm_max))
        if name == "gpu_tuning_locked_memory_clocks" and mem_max is not None and parsed["max"] > mem_max:
            errors.append("%s: %s: max %d MHz is above the %s's highest memory clock of %d MHz"
                          % (host, name, parsed["max"], profile["name"], mem_max))
        if name == "gpu_tuning_application_clocks":
            if sm_max is not None and parsed["graphics"] > sm_max:
                errors.append("%s: %s: graphics %d MHz is above the %s's highest SM clock of %d MHz"
                              % (host, name, parsed["graphics"], profile["name"], sm_max))
            if mem_max is not None and parsed["memory"] > mem_max:
                errors.append("%s: %s: memory %d MHz is above the %s's highest memory clock of %d MHz"
                              % (host, name, parsed["memory"], profile["name"], mem_max))
    return errors


def _gpu_selection(inv, host):
    """The GPUs gpu_tuning manages on a host: None for all, else the list (or MISSING for a wrong shape)."""
    value = _set(inv, host, "gpu_tuning_gpus")
    if value is MISSING or value is None:
        return None
    if not isinstance(value, (list, tuple)):
        return MISSING
    return list(value)


def _gpu_selection_errors(inv, host):
    name = "gpu_tuning_gpus"
    value = _set(inv, host, name)
    if value is MISSING or value is None:
        return []
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        return ["%s: %s: must be a list of GPU indexes (as strings, e.g. ['0', '1']), UUIDs or PCI bus ids, or null "
                "for every GPU; got %s %r" % (host, name, type_name(value), value)]
    if not value:
        return ["%s: %s: an empty list: the module would tune every GPU while the power budget counts none; use null "
                "for every GPU" % (host, name)]
    errors = []
    count = inv.get(host, "cluster_gpu_count_per_node")
    seen = set()
    for i, item in enumerate(value):
        if is_int(item):
            errors.append("%s: %s[%d]: the index %d must be a string ('%d'): the role compares the GPUs' indexes as "
                          "strings, so the power budget and the read-back would skip this GPU"
                          % (host, name, i, item, item))
            text = str(item)
        elif not isinstance(item, str):
            errors.append("%s: %s[%d]: must be a GPU index, UUID or PCI bus id, got %s %r"
                          % (host, name, i, type_name(item), item))
            continue
        else:
            text = item.strip()
        if text.upper().startswith("MIG-"):
            errors.append("%s: %s[%d]: %r is a MIG device: clocks and power limits are per physical GPU, name the "
                          "parent GPU" % (host, name, i, item))
            continue
        if GPU_INDEX_RE.match(text):
            if is_int(count) and int(text) >= count:
                errors.append("%s: %s[%d]: GPU index %s does not exist on a node with %d GPUs "
                              "(cluster_gpu_count_per_node; indexes 0-%d)" % (host, name, i, text, count, count - 1))
        elif not (GPU_UUID_RE.match(text) or GPU_BUS_RE.match(text)):
            errors.append("%s: %s[%d]: %r is not a GPU index (0, 1, ...), a GPU UUID (GPU-xxxxxxxx-xxxx-xxxx-xxxx-"
                          "xxxxxxxxxxxx) or a PCI bus id (00000000:18:00.0)" % (host, name, i, item))
            continue
        key = text.lower()
        if key in seen:
            errors.append("%s: %s[%d]: GPU %r is listed twice" % (host, name, i, item))
        seen.add(key)
    return errors


def _mig_errors(inv, host, profile):
    errors = []
    config = _set(inv, host, "gpu_tuning_mig_config")
    if config in (MISSING, None):
        return errors
    if not isinstance(config, str) or not MIG_CONFIG_RE.match(config):
        errors.append("%s: gpu_tuning_mig_config: must be a nvidia-mig-parted configuration name of letters, digits, "
                      "'_', '.' and '-' (it is written into the boot unit's command line), got %r" % (host, config))
    elif profile is not None and profile["mig"] is False:
        errors.append("%s: gpu_tuning_mig_config: %s GPUs do not support MIG (A100, A30, H100, H200, B200 and GB200 "
                      "do), got %r" % (host, profile["name"], config))
    return errors


def _unit_errors(inv, host):
    """Values gpu_tuning writes into its boot unit's command lines and ordering."""
    errors = []
    for name in ("gpu_tuning_state_file", "gpu_tuning_mig_parted_config_file"):
        value = _set(inv, host, name)
        if value in (MISSING, None):
            continue
        if not isinstance(value, str) or not ABS_PATH_RE.match(value):
            errors.append("%s: %s: must be an absolute path without spaces, quotes or shell characters (it is written "
                          "into a systemd ExecStart line), got %r" % (host, name, value))
    for name in ("gpu_tuning_unit_after", "gpu_tuning_unit_before"):
        value = _set(inv, host, name)
        if value in (MISSING, None):
            continue
        if not isinstance(value, (list, tuple)):
            errors.append("%s: %s: must be a list of systemd unit names, got %s %r"
                          % (host, name, type_name(value), value))
            continue
        for i, unit in enumerate(value):
            if not isinstance(unit, str) or not UNIT_RE.match(unit):
                errors.append("%s: %s[%d]: %r is not a systemd unit name (e.g. nvidia-persistenced.service)"
                              % (host, name, i, unit))
    return errors


# ------------------------------------------------------------------------------------------- rack power budget

def _rack_of(inv, host):
    rack = inv.effective(host, "gpu_tuning", "gpu_tuning_rack")
    if rack is None or isinstance(rack, bool) or not isinstance(rack, (str, int)):
        return None
    rack = str(rack).strip()
    return rack or None


def _budget_of(inv, host):
    value = inv.effective(host, "gpu_tuning", "gpu_tuning_rack_power_budget_watts")
    number = whole(value, allow_float=True)
    return number if number is not None and number > 0 else None


def _rack_budgets(inv, gpu_hosts):
    """{rack: {host: budget}} for the nodes with both a rack and a sound budget."""
    racks = {}
    for host in gpu_hosts:
        rack, budget = _rack_of(inv, host), _budget_of(inv, host)
        if rack is not None and budget is not None:
            racks.setdefault(rack, {})[host] = budget
    return racks


def _rack_errors(inv, gpu_hosts):
    errors = []
    members = {}
    for host in gpu_hosts:
        rack_value = inv.effective(host, "gpu_tuning", "gpu_tuning_rack")
        budget_value = inv.effective(host, "gpu_tuning", "gpu_tuning_rack_power_budget_watts")
        overhead_value = inv.effective(host, "gpu_tuning", "gpu_tuning_node_overhead_watts")
        if rack_value is not None and (isinstance(rack_value, bool) or not isinstance(rack_value, (str, int))
                                       or not str(rack_value).strip()):
            errors.append("%s: gpu_tuning_rack: must be the rack's name (a string), got %s %r"
                          % (host, type_name(rack_value), rack_value))
        if budget_value is not None and _budget_of(inv, host) is None:
            errors.append("%s: gpu_tuning_rack_power_budget_watts: must be a positive whole number of watts, got %r"
                          % (host, budget_value))
        overhead = whole(overhead_value, allow_float=True)
        if overhead_value is not None and (overhead is None or overhead < 0):
            errors.append("%s: gpu_tuning_node_overhead_watts: must be a whole number of watts, 0 or more, got %r"
                          % (host, overhead_value))
        rack = _rack_of(inv, host)
        if budget_value is not None and rack_value is None:
            errors.append("%s: gpu_tuning_rack_power_budget_watts: a budget is set but gpu_tuning_rack is not: the "
                          "budget check needs both (set them together on the rack's group)" % host)
        if rack is not None and budget_value is None:
            errors.append("%s: gpu_tuning_rack: rack %r has no gpu_tuning_rack_power_budget_watts on this host: the "
                          "role leaves this node out of the rack's power check" % (host, rack))
        if rack is not None:
            members.setdefault(rack, []).append(host)

    # Every rack whole, judged by the rule the role uses (plugins/plugin_utils/gpu_power.py): a rack whose draw
    # cannot be known for one of its nodes (GPU count or profile unknown) is left to the role's measured check.
    nodes = []
    unknown = set()
    for rack in sorted(members):
        for host in members[rack]:
            node = _node_draw(inv, host)
            if node is None:
                unknown.add(rack)
                continue
            gpus, gpu_watts, overhead = node
            nodes.append({"host": host, "rack": rack, "budget_watts": _budget_of(inv, host),
                          "total_watts": gpu_watts + overhead,
                          "text": "%s: %s = %d W + %d W overhead" % (host, gpus, gpu_watts, overhead)})
    for entry in rack_plan(nodes):
        if entry["fits"] or entry["rack"] in unknown:
            continue
        detail = [n["text"] for n in entry["detail"]]
        shown = detail[:NAMES_SHOWN] + (["%d more" % (len(detail) - NAMES_SHOWN)] if len(detail) > NAMES_SHOWN else [])
        which = " (the smallest its nodes give)" if len(set(n["budget_watts"] for n in entry["detail"])) > 1 else ""
        errors.append("inventory: gpu_tuning_rack_power_budget_watts: rack %r would draw %d W with %d nodes, over its "
                      "budget of %d W%s (%s); lower gpu_tuning_power_limit_watts, move nodes to another rack or raise "
                      "the budget" % (entry["rack"], entry["planned_watts"], len(entry["nodes"]),
                                      entry["budget_watts"], which, "; ".join(shown)))
    return errors


def _node_draw(inv, host):
    """(GPU description, GPU watts, overhead watts) the role plans for a node, or None when it cannot be known."""
    profile = profile_of(inv, host)
    count = inv.get(host, "cluster_gpu_count_per_node")
    overhead = whole(inv.effective(host, "gpu_tuning", "gpu_tuning_node_overhead_watts"), allow_float=True)
    if not is_int(count) or count < 1 or overhead is None or overhead < 0:
        return None
    default = None
    if profile is not None:
        default = profile["power_default_watts"] or profile["power_max_watts"]
    cap = whole(_set(inv, host, "gpu_tuning_power_limit_watts"), allow_float=True)
    if cap is not None and cap <= 0:
        cap = None
    selection = _gpu_selection(inv, host)
    if selection is MISSING:
        selection = None
    capped = count if selection is None else min(count, len(set(str(s).strip().lower() for s in selection)))
    if cap is None:
        capped = 0
    rest = count - capped
    if rest and default is None:
        return None
    gpu_watts = capped * (cap or 0) + rest * (default or 0)
    parts = []
    if capped:
        parts.append("%d GPUs x %d W" % (capped, cap))
    if rest:
        parts.append("%d GPUs x %d W%s" % (rest, default, " (default limit)" if cap is not None else ""))
    return " + ".join(parts), gpu_watts, overhead


# ------------------------------------------------------------------------------------------------------ driver

def _branch_of(inv, host):
    """The driver branch as an int, or None when it is not sound (its own rule reports it)."""
    branch = inv.effective(host, "nvidia_driver", "nvidia_driver_branch")
    if is_int(branch) and 100 <= branch <= 999:
        return branch
    if isinstance(branch, str) and BRANCH_RE.match(branch.strip()):
        return int(branch.strip())
    return None


def _driver_errors(inv, host, profile):
    errors = []
    branch_value = _set(inv, host, "nvidia_driver_branch")
    if branch_value is not MISSING:
        if isinstance(branch_value, float):
            errors.append("%s: nvidia_driver_branch: %s is a number, not a branch string; quote it "
                          "(nvidia_driver_branch: \"570\")" % (host, _fmt(branch_value)))
        elif branch_value is None or isinstance(branch_value, bool) or _branch_of(inv, host) is None:
            errors.append("%s: nvidia_driver_branch: must be a driver branch of three digits such as \"570\", got %r"
                          % (host, branch_value))
    branch = _branch_of(inv, host)

    version = _set(inv, host, "nvidia_driver_version")
    if version not in (MISSING, None):
        if isinstance(version, float):
            errors.append("%s: nvidia_driver_version: %s is a number, not a version string: YAML reads an unquoted "
                          "version such as 570.10 as the number 570.1 and drops digits; quote it "
                          "(nvidia_driver_version: \"570.133.20\")" % (host, _fmt(version)))
        elif not isinstance(version, str):
            errors.append("%s: nvidia_driver_version: must be a driver version string such as \"570.133.20\", got %s %r"
                          % (host, type_name(version), version))
        else:
            match = VERSION_RE.match(version.strip())
            if not match:
                errors.append("%s: nvidia_driver_version: must look like 570.133.20 or 570.133 (the full driver "
                              "version; the branch goes in nvidia_driver_branch), got %r" % (host, version))
            elif branch is not None and int(match.group(1)) != branch:
                errors.append("%s: nvidia_driver_version: %s is not in branch %d (nvidia_driver_branch): every NVIDIA "
                              "package is pinned to that branch" % (host, version.strip(), branch))

    module_type = inv.effective(host, "nvidia_driver", "nvidia_driver_kernel_module_type")
    if profile is not None:
        arch = ARCH_NAMES[profile["architecture"]]
        if module_type == "proprietary" and profile["open_kernel_module"] == "required":
            errors.append("%s: nvidia_driver_kernel_module_type: %s (%s) GPUs work only with NVIDIA's open kernel "
                          "modules; proprietary is not supported (set open)" % (host, profile["name"], arch))
        if module_type == "open" and profile["open_kernel_module"] == "unsupported":
            default = "" if _set(inv, host, "nvidia_driver_kernel_module_type") is not MISSING else " (open is the " \
                "role's default)"
            errors.append("%s: nvidia_driver_kernel_module_type: the open kernel modules support Turing and newer GPUs "
                          "only; %s (%s) needs proprietary%s" % (host, profile["name"], arch, default))
        if branch is not None and profile["min_branch"] is not None and branch < profile["min_branch"]:
            errors.append("%s: nvidia_driver_branch: %d is too old for %s (%s needs R%d or newer)"
                          % (host, branch, profile["name"], arch, profile["min_branch"]))
        if branch is not None and profile["max_branch"] is not None and branch > profile["max_branch"]:
            errors.append("%s: nvidia_driver_branch: %d does not support %s: R%d is the last driver branch for %s GPUs"
                          % (host, branch, profile["name"], profile["max_branch"], arch))
    if module_type == "open" and branch is not None and branch < OPEN_MODULES_FIRST_BRANCH:
        errors.append("%s: nvidia_driver_kernel_module_type: open kernel modules exist from branch %d on; branch %d "
                      "has only proprietary ones" % (host, OPEN_MODULES_FIRST_BRANCH, branch))

    nvswitch = _set(inv, host, "nvidia_driver_nvswitch_present")
    count = inv.get(host, "cluster_gpu_count_per_node")
    if profile is not None and isinstance(nvswitch, bool):
        if nvswitch and profile["nvswitch"] == "never":
            errors.append("%s: nvidia_driver_nvswitch_present: %s nodes have no NVSwitch; Fabric Manager would be "
                          "installed and fail to start (leave it null to detect)" % (host, profile["name"]))
        if not nvswitch and profile["nvswitch"] == "hgx8" and count == 8:
            errors.append("%s: nvidia_driver_nvswitch_present: an 8-GPU %s node is an HGX/DGX board whose GPUs are "
                          "connected through NVSwitch; without Fabric Manager CUDA does not initialise (leave it null "
                          "to detect)" % (host, profile["name"]))
    return errors


# -------------------------------------------------------------------------------------------------------- DCGM

def _level_errors(host, name, value):
    number = whole(value)
    # A level that skips the diagnostic would make validation report a cluster healthy without asking DCGM.
    if number is None or number not in DCGM_LEVELS:
        return ["%s: %s: must be a DCGM diagnostic level 1-4 (1 quick, 2 medium, 3 long, 4 extended), got %r"
                % (host, name, value)]
    return []


def _watch_errors(host, name, value, allow_empty):
    if isinstance(value, str) and (value == "" and allow_empty):
        return []
    problem = validate_watch_letters(value) if isinstance(value, str) else "it is %s" % type_name(value)
    if problem:
        return ["%s: %s: must be a (all watches) or letters of %s (p PCIe, m memory, i InfoROM, t thermal and power, "
                "n NVLink, d driver, x NVSwitch), each at most once, for dcgmi health -s; got %r: %s"
                % (host, name, " ".join(WATCH_LETTERS), value, problem)]
    return []


def _port_of(value):
    number = whole(value)
    return number if number is not None and 1 <= number <= 65535 else None


def _command_errors(host, name, value, absolute):
    if value in (MISSING, None):
        return []
    regex = ABS_PATH_RE if absolute else COMMAND_RE
    if not isinstance(value, str) or not regex.match(value) or (not absolute and value.startswith("-")):
        what = "an absolute path" if absolute else "a command name or an absolute path"
        return ["%s: %s: must be %s of letters, digits and ._+-/ (it is written into a systemd ExecStart line: no "
                "spaces, quotes or shell characters), got %r" % (host, name, what, value)]
    return []


def _dcgm_errors(inv, host):
    errors = []
    for name in DCGM_LEVEL_VARS:
        value = _set(inv, host, name)
        if value not in (MISSING, None):
            errors.extend(_level_errors(host, name, value))

    mode = _set(inv, host, "slurm_compute_healthcheck_dcgm")
    if mode not in (MISSING, None) and not isinstance(mode, bool) and \
            str(mode).strip().lower() not in HEALTHCHECK_DCGM_MODES:
        errors.append("%s: slurm_compute_healthcheck_dcgm: must be auto, true or false (dcgmi health -c in the node "
                      "health check), got %r" % (host, mode))
    level = _set(inv, host, "slurm_compute_healthcheck_dcgm_diag_level")
    if level not in (MISSING, None) and (isinstance(level, bool) or str(level).strip() not in ("0", "1")):
        errors.append("%s: slurm_compute_healthcheck_dcgm_diag_level: must be 0 (off) or 1 (dcgmi diag -r 1, "
                      "seconds); levels 2 and above take minutes and slurmd kills the health check at 60 s: run them "
                      "on drained nodes, got %r" % (host, level))
    elif level not in (MISSING, None) and str(level).strip() == "1" and mode is not MISSING and \
            str(mode).strip().lower() in ("false", "off", "no"):
        errors.append("%s: slurm_compute_healthcheck_dcgm_diag_level: 1 needs DCGM in the health check "
                      "(slurm_compute_healthcheck_dcgm auto or true, got false)" % host)
    watches = _set(inv, host, "slurm_compute_healthcheck_dcgm_watches")
    if watches not in (MISSING, None):
        errors.extend(_watch_errors(host, "slurm_compute_healthcheck_dcgm_watches", watches, allow_empty=True))
    watches = _set(inv, host, "dcgm_health_watches")
    if watches is not MISSING:
        errors.extend(_watch_errors(host, "dcgm_health_watches", watches, allow_empty=False))

    version = _set(inv, host, "dcgm_version")
    if version not in (MISSING, None):
        match = DCGM_VERSION_RE.match(version.strip()) if isinstance(version, str) else None
        if isinstance(version, float):
            errors.append("%s: dcgm_version: %s is a number, not a version string; quote it (dcgm_version: \"4.4.2\")"
                          % (host, _fmt(version)))
        elif match is None or match.group(1) != "4":
            errors.append("%s: dcgm_version: must be a DCGM 4 version such as \"4.4.2\" (the role installs the "
                          "datacenter-gpu-manager-4 packages and removes DCGM 3), got %r" % (host, version))
    cuda = _set(inv, host, "dcgm_cuda_major")
    if cuda not in (MISSING, None):
        major = whole(cuda)
        if major not in DCGM_CUDA_MAJORS:
            errors.append("%s: dcgm_cuda_major: must be one of %s (the datacenter-gpu-manager-4-cuda<major> packages), "
                          "got %r" % (host, ", ".join(str(m) for m in DCGM_CUDA_MAJORS), cuda))
        else:
            branch = _branch_of(inv, host)
            if major >= 13 and branch is not None and branch < CUDA13_FIRST_BRANCH:
                errors.append("%s: dcgm_cuda_major: CUDA 13 needs driver branch R%d or newer; nvidia_driver_branch is "
                              "%d (use 12)" % (host, CUDA13_FIRST_BRANCH, branch))

    errors.extend(_command_errors(host, "dcgm_dcgmi_path", _set(inv, host, "dcgm_dcgmi_path"), absolute=False))
    for name in ("dcgm_exporter_binary", "dcgm_exporter_collectors_file"):
        errors.extend(_command_errors(host, name, _set(inv, host, name), absolute=True))

    socket_path = _set(inv, host, "dcgm_hostengine_socket_path")
    problem = socket_path_problem(socket_path) if socket_path not in (MISSING, None) else None
    if problem:
        errors.append("%s: dcgm_hostengine_socket_path: %s, got %r" % (host, problem, socket_path))
    # nv-hostengine's own TCP port, where it has one (socket path null; unset is the role's socket); the exporter must
    # not take it.
    engine_port = DCGM_HOSTENGINE_PORT if socket_path is None else None
    engine_local = True
    engine = _set(inv, host, "dcgm_exporter_hostengine")
    if engine not in (MISSING, None):
        problem = hostengine_problem(engine.strip()) if isinstance(engine, str) else "not a string"
        match = HOSTENGINE_RE.match(engine.strip()) if isinstance(engine, str) else None
        if problem:
            errors.append("%s: dcgm_exporter_hostengine: must be the running nv-hostengine's address, "
                          "unix:///<socket> or host:port (e.g. localhost:5555) with a port 1-65535: %s, got %r"
                          % (host, problem, engine))
            engine_port = None
        elif match is not None:
            engine_port = _port_of(match.group("port"))
            engine_local = match.group("host") in ("localhost", "127.0.0.1", "[::1]")
    port_value = _set(inv, host, "dcgm_exporter_listen_port")
    if port_value not in (MISSING, None):
        port = _port_of(port_value) if not isinstance(port_value, float) else None
        if port is None:
            errors.append("%s: dcgm_exporter_listen_port: must be a TCP port 1-65535, got %r" % (host, port_value))
        elif engine_local and port == engine_port:
            errors.append("%s: dcgm_exporter_listen_port: %d is the local host engine's port (nv-hostengine listens on "
                          "it); give the exporter another port such as 9400" % (host, port))
    interval = _set(inv, host, "dcgm_exporter_scrape_interval_seconds")
    if interval not in (MISSING, None):
        number = whole(interval)
        if number is None or number <= 0:
            errors.append("%s: dcgm_exporter_scrape_interval_seconds: must be a positive whole number of seconds, "
                          "got %r"
                          % (host, interval))
    return errors


# -------------------------------------------------------------------------------------------------------- NCCL

def _hca_errors(inv, host, fabric):
    name = "nccl_ib_hca"
    value = _set(inv, host, name)
    if value in (MISSING, None):
        return []
    if isinstance(value, str) or not isinstance(value, (list, tuple)):
        return ["%s: %s: must be a list of HCA ports such as ['mlx5_0:1', 'mlx5_1:1'] (or null to detect the active "
                "ports), got %s %r" % (host, name, type_name(value), value)]
    if not value:
        if fabric in ("infiniband", "roce"):
            return ["%s: %s: an empty list names no HCA, so NCCL has none to use on this %s fabric; use null to detect "
                    "the active ports" % (host, name, fabric)]
        return []
    errors = []
    seen = set()
    qos = inv.effective(host, "nccl", "nccl_roce_qos_manage")
    gid = inv.effective(host, "nccl", "nccl_ib_gid_index")
    for i, item in enumerate(value):
        label = "%s[%d]" % (name, i)
        if not isinstance(item, str):
            errors.append("%s: %s: must be a string 'hca' or 'hca:port' (e.g. mlx5_0:1), got %s %r"
                          % (host, label, type_name(item), item))
            continue
        text = item.strip()
        if text.startswith("^"):
            errors.append("%s: %s: %r: the role writes the '=' exact-match prefix itself (NCCL_IB_HCA==...), so an "
                          "exclusion list ('^') cannot be given here; list the HCAs to use" % (host, label, item))
            continue
        if text.startswith("="):
            text = text[1:]
        if "," in text:
            errors.append("%s: %s: %r holds several HCAs: give one per list entry" % (host, label, item))
            continue
        match = HCA_ENTRY_RE.match(text)
        if match is None:
            errors.append("%s: %s: %r is not an HCA name such as mlx5_0, with an optional :port (letters, digits, '_', "
                          "'.', '-')" % (host, label, item))
            continue
        port = match.group("port")
        if port is not None:
            number = whole(port) if DIGITS_RE.match(port) else None
            if number is None or not HCA_PORT_RANGE[0] <= number <= HCA_PORT_RANGE[1]:
                errors.append("%s: %s: the port of %r must be a positive whole number (HCA ports count from 1), got %r"
                              % (host, label, item, port))
                continue
        elif fabric == "roce" and (qos is True or (i == 0 and gid is None)):
            errors.append("%s: %s: %r needs its port on a RoCE fabric (e.g. %s:1): the role reads the port's GIDs "
                          "and network interface from /sys/class/infiniband/<hca>/ports/<port>"
                          % (host, label, item, match.group("name")))
        key = (match.group("name"), int(port) if port is not None else None)
        if key in seen:
            errors.append("%s: %s: %r is listed twice" % (host, label, item))
        seen.add(key)
    return errors


def _ifname_errors(host, value):
    name = "nccl_socket_ifname"
    if not isinstance(value, str):
        return ["%s: %s: must be a string such as ib0, =ens1f0 or ^docker,lo (NCCL_SOCKET_IFNAME), got %s %r"
                % (host, name, type_name(value), value)]
    text = value
    if text.startswith("^"):
        text = text[1:]
    if text.startswith("="):
        text = text[1:]
    parts = text.split(",")
    bad = [p for p in parts if not IFNAME_RE.match(p) or p in (".", "..")]
    if bad:
        return ["%s: %s: %r is not a NCCL_SOCKET_IFNAME list (an optional ^ and/or = prefix, then interface names or "
                "prefixes separated by commas, each at most 15 of letters, digits, '_', '.', '-'); bad: %s"
                % (host, name, value, ", ".join(repr(b) for b in bad))]
    return []


def _nccl_value_errors(host, name, key, value):
    if isinstance(value, bool):
        return ["%s: %s: %s: a YAML boolean is written as %s, which NCCL does not read as a number; write 0 or 1"
                % (host, name, key, value)]
    if value is None or isinstance(value, (dict, list, tuple)):
        return ["%s: %s: %s: must be a single value (a string or a number), got %s %r"
                % (host, name, key, type_name(value), value)]
    text = "%s" % (value,)
    if "\n" in text or "\r" in text:
        return ["%s: %s: %s: must be one line (nccl.conf is NAME=value per line), got %r" % (host, name, key, value)]
    if text != text.strip() or not text:
        return ["%s: %s: %s: NCCL reads the value literally (no trimming): remove the surrounding spaces from %r"
                % (host, name, key, value)]
    if key in NCCL_INT_RANGES:
        low, high = NCCL_INT_RANGES[key]
        number = whole(value) if not isinstance(value, float) else None
        if number is None or not low <= number <= high:
            return ["%s: %s: %s must be a whole number %d-%d, got %r" % (host, name, key, low, high, value)]
    if key == "NCCL_NET_GDR_LEVEL" and text.upper() not in NCCL_GDR_LEVELS and not DIGITS_RE.match(text):
        return ["%s: %s: NCCL_NET_GDR_LEVEL must be one of %s (or a number), got %r"
                % (host, name, ", ".join(NCCL_GDR_LEVELS), value)]
    return []


def _settings_errors(inv, host):
    errors = []
    dicts = {}
    for name in ("nccl_settings", "nccl_debug_overrides"):
        value = _set(inv, host, name)
        if value in (MISSING, None):
            continue
        if not isinstance(value, dict):
            errors.append("%s: %s: must be a dict of NCCL_* variables to values (e.g. {NCCL_CROSS_NIC: 0}), got %s %r"
                          % (host, name, type_name(value), value))
            continue
        dicts[name] = value
        for key in value:
            if not isinstance(key, str) or not NCCL_NAME_RE.match(key):
                errors.append("%s: %s: %r is not a NCCL variable name (NCCL_ followed by upper-case letters, digits "
                              "and '_')" % (host, name, key))
                continue
            errors.extend(_nccl_value_errors(host, name, key, value[key]))
            if key in NCCL_ROLE_OWNED:
                errors.append("%s: %s: %s is written by the role from %s; set that variable instead (a second line in "
                              "nccl.conf is ignored: NCCL keeps the first)" % (host, name, key, NCCL_ROLE_OWNED[key]))
            if name == "nccl_settings" and key in NCCL_DEBUG_ONLY:
                errors.append("%s: nccl_settings: %s is a debugging-only variable (NCCL's docs: do not leave it set in "
                              "production); put it in nccl_debug_overrides if you really mean it" % (host, key))
    both = set(dicts.get("nccl_settings", {})) & set(dicts.get("nccl_debug_overrides", {}))
    for key in sorted(k for k in both if isinstance(k, str)):
        errors.append("%s: nccl_debug_overrides: %s is also in nccl_settings; give it once" % (host, key))
    return errors


def _nccl_errors(inv, host):
    errors = []
    fabric = _fabric_of(inv, host)
    errors.extend(_hca_errors(inv, host, fabric))
    ifname = _set(inv, host, "nccl_socket_ifname")
    if ifname not in (MISSING, None):
        errors.extend(_ifname_errors(host, ifname))
    socket_ip = _set(inv, host, "nccl_socket_ip")
    if isinstance(socket_ip, str) and socket_ip.strip() and not _is_ip(socket_ip.strip()):
        errors.append("%s: nccl_socket_ip: must be an IP address of this node (its interface becomes "
                      "NCCL_SOCKET_IFNAME), got %r" % (host, socket_ip))
    elif socket_ip not in (MISSING, None) and not isinstance(socket_ip, str):
        errors.append("%s: nccl_socket_ip: must be an IP address string, got %s %r"
                      % (host, type_name(socket_ip), socket_ip))

    gid = _set(inv, host, "nccl_ib_gid_index")
    if gid not in (MISSING, None):
        number = whole(gid) if not isinstance(gid, float) else None
        if number is None or not GID_INDEX_RANGE[0] <= number <= GID_INDEX_RANGE[1]:
            errors.append("%s: nccl_ib_gid_index: must be a GID index %d-%d (see show_gids; null detects the RoCE v2 "
                          "IPv4 GID), got %r" % (host, GID_INDEX_RANGE[0], GID_INDEX_RANGE[1], gid))
    timeout = _set(inv, host, "nccl_ib_timeout")
    if timeout is not MISSING:
        number = whole(timeout) if not isinstance(timeout, float) else None
        if number is None or not NCCL_TIMEOUT_RANGE[0] <= number <= NCCL_TIMEOUT_RANGE[1]:
            errors.append("%s: nccl_ib_timeout: must be a whole number %d-%d (NCCL_IB_TIMEOUT: 4.096 us x 2^value; "
                          "NCCL's default 20 is about 4 s per retry, ~30 s before an error), got %r"
                          % (host, NCCL_TIMEOUT_RANGE[0], NCCL_TIMEOUT_RANGE[1], timeout))

    errors.extend(_settings_errors(inv, host))

    for name in ("nccl_conf_path", "nccl_topo_file"):
        value = _set(inv, host, name)
        if value not in (MISSING, None) and (not isinstance(value, str) or not ABS_PATH_RE.match(value)):
            errors.append("%s: %s: must be an absolute path without spaces or special characters, got %r"
                          % (host, name, value))
    if _set(inv, host, "nccl_topo_file_src") not in (MISSING, None) and \
            inv.effective(host, "nccl", "nccl_topo_file") is None:
        errors.append("%s: nccl_topo_file_src: is set but nccl_topo_file (where the XML goes on the node) is not, so "
                      "the topology file would not be copied nor used" % host)

    # RoCE QoS: written into the boot unit's command lines (roles/nccl/templates/.../clusterforge-roce-qos.service.j2).
    tool = _set(inv, host, "nccl_roce_qos_tool")
    if tool not in (MISSING, None):
        errors.extend(_command_errors(host, "nccl_roce_qos_tool", tool, absolute=False))
    priority = _set(inv, host, "nccl_roce_pfc_priority")
    if priority not in (MISSING, None):
        number = whole(priority) if not isinstance(priority, float) else None
        if number is None or not 0 <= number <= 7:
            errors.append("%s: nccl_roce_pfc_priority: must be a priority 0-7 (PFC is enabled on that one), got %r"
                          % (host, priority))
    trust = _set(inv, host, "nccl_roce_trust")
    if trust not in (MISSING, None) and trust not in ("dscp", "pcp"):
        errors.append("%s: nccl_roce_trust: must be dscp (routed RoCE, the usual choice) or pcp, got %r"
                      % (host, trust))
    return errors


def _is_ip(text):
    try:
        import ipaddress  # pylint: disable=import-outside-toplevel

        ipaddress.ip_address(u"%s" % text)
        return True
    except ValueError:
        return False


# ------------------------------------------------------------------------------------------------------ fabric

def _fabric_errors(inv, gpu_hosts):
    """cluster_fabric_type read per host: valid everywhere, and one value on every GPU node."""
    errors = []
    first = inv.first_host
    cluster = inv.get(first, "cluster_fabric_type") if first else None
    gpu_set = set(gpu_hosts)
    by_value = {}
    for host in inv.all_hosts:
        value = inv.get(host, "cluster_fabric_type", MISSING)
        if value is MISSING:
            continue
        # The first host's value is the cluster's, judged by the inventory rules (plugins/filter/preflight.py).
        if value not in FABRIC_TYPES and value != cluster:
            errors.append("%s: cluster_fabric_type: must be one of %s, got %r"
                          % (host, ", ".join(FABRIC_TYPES), value))
        if host in gpu_set:
            by_value.setdefault(value if isinstance(value, str) else repr(value), []).append(host)
    if len(by_value) > 1:
        # The value most GPU nodes have is taken as meant (ties: the cluster's value, then a valid one).
        ordered = sorted(by_value.items(), key=lambda kv: (-len(kv[1]), kv[0] != cluster, kv[0] not in FABRIC_TYPES,
                                                           kv[0]))
        majority = ordered[0]
        others = "; ".join("%s has %r" % (_names(hosts), value) for value, hosts in ordered[1:])
        errors.append("inventory: cluster_fabric_type: the GPU nodes must all use one fabric type (NCCL, the HCA "
                      "settings and LNet follow it): %s while %d other GPU node(s) (%s) have %r"
                      % (others, len(majority[1]), _names(majority[1]), majority[0]))
    elif by_value and cluster in FABRIC_TYPES:
        value, hosts = next(iter(by_value.items()))
        if value in FABRIC_TYPES and value != cluster:
            errors.append("inventory: cluster_fabric_type: the GPU nodes (%s) have %r but the cluster-wide value read "
                          "from %s is %r; give it once in group_vars/all" % (_names(hosts), value, first, cluster))
    return errors
