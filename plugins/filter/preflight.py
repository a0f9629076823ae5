# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""preflight_inventory_errors: every inventory rule of ClusterForge in one place, checked before any change.

Each error names the host (or ``inventory``), the variable and the rule, so an operator can fix the
inventory without reading code. The preflight role fails the play with the whole list.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

try:
    import netaddr

    HAS_NETADDR = True
except ImportError:  # pragma: no cover
    HAS_NETADDR = False

from ansible_collections.clusterforge.gpu.plugins.module_utils.hardware import FABRIC_TYPES, GPU_MODELS
from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import expand as hostlist_expand
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import (
    preflight_bios,
    preflight_cross,
    preflight_generic,
    preflight_gpu,
    preflight_lustre,
    preflight_os,
    preflight_rolling,
    preflight_slurm,
    preflight_specs,
    preflight_validate,
)
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import Inventory, is_host_label

# GPUs a node of each type can hold, from the hardware catalogue (plugins/module_utils/hardware.py).
GPU_TYPES = dict((name, p["gpus_per_node_max"]) for name, p in GPU_MODELS.items())
REQUIRED_GROUPS = ("slurm_controller", "gpu_nodes")
LUSTRE_GROUPS = ("lustre_mds", "lustre_oss", "lustre_clients")
PARTITION_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,62}$")
CLUSTER_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
# Every role's boolean (type bool in its meta/argument_specs.yml) must be a real boolean, a string "no" being truthy
# in Jinja: plugins/plugin_utils/preflight_specs.py checks them all from the specs, on the hosts each role runs on.


def _ip(value):
    try:
        return netaddr.IPAddress(str(value).strip())
    except (netaddr.AddrFormatError, ValueError, TypeError):
        return None


def _net(value):
    if value is None or not re.match(r"^[0-9a-fA-F.:]+/\d{1,3}$", str(value).strip()):
        return None
    try:
        return netaddr.IPNetwork(str(value).strip())
    except (netaddr.AddrFormatError, ValueError, TypeError):
        return None


_READER = {}


def _get(hostvars, host, key):
    """Read through the shared safe reader: an unresolvable value is reported once, not raised."""
    reader = _READER.get(id(hostvars))
    if reader is None:
        return Inventory(hostvars, {}).get(host, key)
    return reader.get(host, key)


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def preflight_inventory_errors(hostvars, groups, lustre_enabled=True, fabric_required=True, _rule_sets=True):
    """Return the list of inventory errors (empty when the inventory is sound).

    With the default ``_rule_sets`` it also runs every rule set (as ``preflight_inventory_report`` in strict=False
    mode, warnings left out); the report calls it with ``_rule_sets=False`` for the inventory's shape only.
    """
    if _rule_sets:
        return preflight_inventory_report(hostvars, groups, lustre_enabled, fabric_required)["errors"]
    if not HAS_NETADDR:
        raise AnsibleFilterError("preflight needs the Python library netaddr on the controller (pip install netaddr)")
    errors = []
    groups = dict(groups or {})
    all_hosts = list(groups.get("all", []))

    # Groups.
    for name in groups:
        if "-" in name:
            errors.append("inventory: group '%s': group names must not contain hyphens (use '_')" % name)
    required = list(REQUIRED_GROUPS) + (list(LUSTRE_GROUPS) if lustre_enabled else [])
    for name in required:
        if not groups.get(name):
            errors.append("inventory: group '%s': required group is missing or has no hosts" % name)

    # Cluster-wide values (read from the first host: group_vars/all).
    ref = all_hosts[0] if all_hosts else None
    cluster_name = _get(hostvars, ref, "cluster_name") if ref else None
    if cluster_name is None or not CLUSTER_NAME_RE.match(str(cluster_name)):
        errors.append("inventory: cluster_name: must be set, lower case, start with a letter, "
                      "at most 40 of [a-z0-9_-] (Slurm ClusterName), got %r" % (cluster_name,))
    fabric_type = _get(hostvars, ref, "cluster_fabric_type") if ref else None
    if fabric_type not in FABRIC_TYPES:
        errors.append("inventory: cluster_fabric_type: must be one of %s, got %r" % (", ".join(FABRIC_TYPES), fabric_type))
    mgmt_cidr = _get(hostvars, ref, "cluster_mgmt_network_cidr") if ref else None
    fabric_cidr = _get(hostvars, ref, "cluster_fabric_network_cidr") if ref else None
    mgmt_net = _net(mgmt_cidr)
    fabric_net = _net(fabric_cidr)
    if mgmt_net is None:
        errors.append("inventory: cluster_mgmt_network_cidr: must be a network in CIDR form, got %r" % (mgmt_cidr,))
    use_fabric = fabric_required and fabric_type not in (None, "none")
    if use_fabric and fabric_net is None:
        errors.append("inventory: cluster_fabric_network_cidr: must be a network in CIDR form when "
                      "cluster_fabric_type is %s, got %r" % (fabric_type, fabric_cidr))
    if mgmt_net is not None and fabric_net is not None and mgmt_net.first <= fabric_net.last and fabric_net.first <= mgmt_net.last:
        errors.append("inventory: cluster_fabric_network_cidr: %s overlaps cluster_mgmt_network_cidr %s; "
                      "management and fabric traffic must be kept on separate networks" % (fabric_net, mgmt_net))

    # Hosts: names and addresses.
    seen_names = {}
    seen_mgmt = {}
    seen_fabric = {}
    gpu_hosts = set(groups.get("gpu_nodes", []))
    for host in all_hosts:
        short = host.split(".")[0].lower()
        if not is_host_label(short):
            errors.append("%s: inventory_hostname: '%s' is not a valid host name (RFC 1123 label)" % (host, short))
        if short in seen_names:
            errors.append("%s: inventory_hostname: duplicates host %s (short names must be unique, ignoring case)"
                          % (host, seen_names[short]))
        seen_names.setdefault(short, host)

        for var, net, seen, need in (("cluster_mgmt_ip", mgmt_net, seen_mgmt, True),
                                     ("cluster_fabric_ip", fabric_net, seen_fabric, use_fabric and host in gpu_hosts)):
            value = _get(hostvars, host, var)
            if value is None:
                if need:
                    errors.append("%s: %s: is required but not set" % (host, var))
                continue
            addr = _ip(value)
            if addr is None:
                errors.append("%s: %s: %r is not an IP address" % (host, var, value))
                continue
            if net is not None:
                if addr not in net:
                    errors.append("%s: %s: %s is outside its network %s" % (host, var, addr, net))
                elif net.size > 2 and addr in (net.network, net.broadcast):
                    errors.append("%s: %s: %s is the network or broadcast address of %s" % (host, var, addr, net))
            key = str(addr)
            if key in seen:
                errors.append("%s: %s: %s is already used by %s (addresses must be unique)" % (host, var, addr, seen[key]))
            seen.setdefault(key, host)

    # GPU nodes: type and count declared and plausible.
    for host in sorted(gpu_hosts):
        gtype = _get(hostvars, host, "cluster_gpu_type")
        count = _get(hostvars, host, "cluster_gpu_count_per_node")
        if gtype is None:
            errors.append("%s: cluster_gpu_type: is required for gpu_nodes (one of %s)" % (host, ", ".join(sorted(GPU_TYPES))))
        elif str(gtype) not in GPU_TYPES and str(gtype).lower() in GPU_TYPES:
            # The roles and validate.yml use the name as given (profile names, GRES types): one spelling only.
            errors.append("%s: cluster_gpu_type: write %r in lower case (%r): the roles and validation look the type "
                          "up as given" % (host, gtype, str(gtype).lower()))
        elif str(gtype) not in GPU_TYPES:
            errors.append("%s: cluster_gpu_type: unknown GPU type %r (known: %s)" % (host, gtype, ", ".join(sorted(GPU_TYPES))))
        if count is None:
            errors.append("%s: cluster_gpu_count_per_node: is required for gpu_nodes" % host)
        elif not _is_int(count):
            errors.append("%s: cluster_gpu_count_per_node: must be an integer, got %r" % (host, count))
        else:
            limit = GPU_TYPES.get(str(gtype).lower(), 16)
            if count < 1 or count > limit:
                errors.append("%s: cluster_gpu_count_per_node: %d is not plausible for %s (1 to %d per node)"
                              % (host, count, gtype, limit))

    # Slurm partitions (read from the controller, where the slurm_controller role uses them).
    ctl = (groups.get("slurm_controller") or [ref])[0] if (groups.get("slurm_controller") or ref) else None
    partitions = _get(hostvars, ctl, "slurm_controller_partitions") if ctl else None
    if partitions is not None:
        errors.extend(_partition_errors(partitions, groups, gpu_hosts))
    return errors


def _partition_errors(partitions, groups, gpu_hosts):
    errors = []
    if not isinstance(partitions, list) or not partitions:
        return ["inventory: slurm_controller_partitions: must be a non-empty list of {name, nodes, default}"]
    names = set()
    defaults = []
    for i, part in enumerate(partitions):
        if not isinstance(part, dict):
            errors.append("inventory: slurm_controller_partitions[%d]: must be a dict with name and nodes" % i)
            continue
        name = part.get("name")
        if name is None or not PARTITION_RE.match(str(name)) or str(name).lower() in ("default", "all"):
            errors.append("inventory: slurm_controller_partitions[%d].name: %r is not a valid Slurm partition name "
                          "(letters, digits, '_', '.', '-'; not DEFAULT or ALL)" % (i, name))
        elif str(name) in names:
            errors.append("inventory: slurm_controller_partitions[%d].name: partition %r is defined twice" % (i, name))
        names.add(str(name))
        if part.get("default", False) is True:
            defaults.append(str(name))
        elif not isinstance(part.get("default", False), bool):
            errors.append("inventory: slurm_controller_partitions[%d].default: must be a boolean" % i)
        nodes = part.get("nodes")
        if not nodes:
            errors.append("inventory: slurm_controller_partitions[%d].nodes: partition %r has no nodes" % (i, name))
            continue
        if not isinstance(nodes, str):
            errors.append("inventory: slurm_controller_partitions[%d].nodes: must be an inventory group name or a "
                          "Slurm hostlist string (e.g. gpu[01-08]), got a %s" % (i, type(nodes).__name__))
            continue
        if nodes in groups:
            members = set(groups[nodes])
        elif hostlist_expand is not None:
            try:
                members = set(hostlist_expand(str(nodes)))
            except ValueError as e:
                errors.append("inventory: slurm_controller_partitions[%d].nodes: %s" % (i, e))
                continue
        else:
            members = set(str(nodes).split(","))
        unknown = sorted(members - gpu_hosts)
        if unknown:
            errors.append("inventory: slurm_controller_partitions[%d].nodes: partition %r names hosts that are not "
                          "in gpu_nodes: %s" % (i, name, ", ".join(unknown)))
    if len(defaults) > 1:
        errors.append("inventory: slurm_controller_partitions: more than one default partition (%s)" % ", ".join(defaults))
    return errors


# The rule sets beyond the inventory's shape, each in plugins/plugin_utils (unit-tested there). Each takes the safe
# reader and the options and returns its errors; one that stops on a value of a shape it did not expect is reported
# as an error, never raised, so the other rule sets still report theirs.
RULE_SETS = (
    ("role variables (argument specs)", preflight_specs.check),
    ("operating system", preflight_os.check),
    ("GPU, driver, DCGM and NCCL", preflight_gpu.check),
    ("BIOS through the BMC", preflight_bios.check),
    ("Slurm", preflight_slurm.check),
    ("Lustre", preflight_lustre.check),
    ("rolling change", preflight_rolling.check),
    ("validation", preflight_validate.check),
    ("ports of every role", preflight_generic.check),
    ("references between roles", preflight_cross.check),
    ("misspelt variables", preflight_specs.typo_errors),
)


def extra_var_names():
    """The names given with -e on this ansible-playbook command line (JSON, YAML, key=value or @file), read again
    from the command line the way Ansible reads them; [] when there is none or it cannot be read."""
    try:
        from ansible import context  # pylint: disable=import-outside-toplevel
        from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
        from ansible.utils.vars import load_extra_vars  # pylint: disable=import-outside-toplevel

        if not (context.CLIARGS or {}).get("extra_vars"):
            return []
        return sorted(load_extra_vars(DataLoader()).keys())
    except Exception:  # pylint: disable=broad-except
        return []


def preflight_inventory_report(hostvars, groups, lustre_enabled=True, fabric_required=True, strict=False,
                               rolling=False, playbook_roles=None):
    """Every preflight rule over the whole inventory: ``{"errors": [...], "warnings": [...]}``.

    ``strict`` makes warnings (a variable with one of our prefixes that no role defines) errors; ``rolling`` adds
    the rules of playbooks/rolling_reconfigure.yml's own variables; ``playbook_roles`` names the roles beyond
    site.yml's that the running playbook runs (their required options must be set).
    """
    # A switch given as -e name=true arrives as a string: read it as Ansible's bool filter does (the spec rules
    # still report that it should be given as a real boolean).
    opts = {"lustre_enabled": boolean(lustre_enabled, strict=False),
            "fabric_required": boolean(fabric_required, strict=False),
            "strict": boolean(strict, strict=False), "rolling": boolean(rolling, strict=False),
            "extra_var_names": extra_var_names(),
            "playbook_roles": [str(r) for r in playbook_roles] if isinstance(playbook_roles, (list, tuple)) else []}
    inv = Inventory(hostvars, groups)
    _READER[id(hostvars)] = inv
    try:
        errors = list(preflight_inventory_errors(hostvars, groups, opts["lustre_enabled"], opts["fabric_required"],
                                                 _rule_sets=False))
    except AnsibleFilterError:
        raise
    except Exception as e:  # pylint: disable=broad-except
        errors = ["inventory: preflight: the inventory rules stopped on a value of an unexpected shape (%s: %s); "
                  "the errors below still stand" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")]
    finally:
        _READER.pop(id(hostvars), None)
    for title, check in RULE_SETS:
        try:
            errors.extend(check(inv, opts))
        except Exception as e:  # pylint: disable=broad-except
            errors.append("inventory: preflight: the %s rules stopped on a value of an unexpected shape (%s: %s); "
                          "the errors above still stand" % (title, type(e).__name__, str(e).splitlines()[0] if str(e) else ""))
    warnings = []
    for title, advise in (("typo", preflight_specs.typos), ("GPU and fabric advice", preflight_gpu.warnings)):
        try:
            found = list(advise(inv, opts))
        except Exception as e:  # pylint: disable=broad-except
            found = ["inventory: preflight: the %s check stopped (%s)" % (title, type(e).__name__)]
        # strict is about names no role reads (typos); advice about settings stays advice.
        (errors if opts["strict"] and advise is preflight_specs.typos else warnings).extend(found)
    # Resolution errors first (a value that cannot be read explains later ones), each once.
    seen = set()
    ordered = []
    for err in inv.errors + errors:
        if err not in seen:
            seen.add(err)
            ordered.append(err)
    return {"errors": ordered, "warnings": warnings}


class FilterModule(object):
    def filters(self):
        return {"preflight_inventory_errors": preflight_inventory_errors,
                "preflight_inventory_report": preflight_inventory_report}
