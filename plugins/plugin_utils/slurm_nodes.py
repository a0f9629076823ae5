# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which description of each compute node slurm.conf and gres.conf get (clusterforge.gpu.slurm_controller).

Each GPU node describes its CPUs, memory and GPUs in site.yml's "Slurm node facts" play
(``slurm_compute_node_hardware.node``); the controller keeps the last description of every node in a JSON file. One
rule, here: this run's description wins; a node not described in this run keeps its kept one (a node outside
--limit, or one that failed earlier in this run - a hung nvidia-smi must not stop the run for the whole cluster,
its failure is reported already); a node with neither cannot be written and stops the run; a node described with
fewer GPUs than its inventory expects (``cluster_gpu_count_per_node``) stops the run before Slurm gets it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

UNDESCRIBED = (
    "no description of CPUs, memory and GPUs from this run, and none kept from an earlier one. The \"Slurm node "
    "facts\" play of site.yml (the facts entry point of clusterforge.gpu.slurm_compute) must run on every GPU node "
    "this controller has not described before; the node was unreachable, failed there, or was left out by --limit "
    "or --tags.")


def _fresh(hostvars, node):
    """This run's description of node (its slurm_compute_node_hardware.node), or None."""
    try:
        hardware = hostvars[node].get("slurm_compute_node_hardware")
    except KeyError:
        return None
    if not isinstance(hardware, dict) or not isinstance(hardware.get("node"), dict):
        return None
    return dict(hardware["node"])


def _expected_gpus(hostvars, node):
    try:
        value = hostvars[node].get("cluster_gpu_count_per_node", 0)
    except KeyError:
        return 0
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def node_descriptions(members, hostvars, known=None, scope=None):
    """The descriptions of the compute nodes ``members`` (in order) and what stops the run.

    ``hostvars``: Ansible's hostvars (a mapping of host -> its variables). ``known``: {node: description} kept on the
    controller (None: none). ``scope``: the hosts of this run (--limit); None, all of them.

    Returns {"nodes": {node: description} (this run's over the kept ones, members only), "problems": [text],
    "kept": [members in scope that keep their kept description, not described in this run]}.
    """
    known = dict(known or {})
    scope = None if scope is None else set(scope)
    nodes, missing, problems, kept = {}, [], [], []
    for node in members:
        fresh = _fresh(hostvars, node)
        if fresh is not None:
            nodes[node] = fresh
            expected = _expected_gpus(hostvars, node)
            if int(fresh.get("gpu_count") or 0) < expected:
                problems.append("%s has %s GPUs, the inventory expects %d: fix or remove the node before adding it "
                                "to Slurm." % (node, fresh.get("gpu_count") or 0, expected))
        elif node in known:
            nodes[node] = known[node]
            if scope is None or node in scope:
                kept.append(node)
        else:
            missing.append(node)
    if missing:
        problems.insert(0, "%s: %s" % (", ".join(missing), UNDESCRIBED))
    return {"nodes": nodes, "problems": problems, "kept": kept}


def _vars_of(node_vars, node):
    """A node's variables from hostvars; {} for a node the inventory does not have (one kept from an earlier run)."""
    try:
        if node not in node_vars:
            return {}
        found = node_vars[node]
    except (KeyError, TypeError):
        return {}
    return found if hasattr(found, "get") else {}


def _grouped(entries):
    """``NodeName=<hostlist> <text>`` lines, one per distinct text, the nodes of each in the order given. Texts are
    grouped and sorted without regard to case, each line with the text of its first node: the order the templates
    wrote with Jinja's groupby, kept so that an upgrade rewrites no slurm.conf."""
    from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import compress  # pylint: disable=import-outside-toplevel
    groups = {}
    for node, text in entries:
        groups.setdefault(text.lower(), (text, []))[1].append(node)
    return ["NodeName=%s %s" % (compress(groups[key][1]), groups[key][0]) for key in sorted(groups)]


def cpu_attributes(description):
    """A node's CPU layout as slurm.conf describes it: ``CPUs= Sockets= CoresPerSocket= ThreadsPerCore=``."""
    return "CPUs=%d Sockets=%d CoresPerSocket=%d ThreadsPerCore=%d" % (
        int(description["cpus"]), int(description["sockets"]), int(description["cores_per_socket"]),
        int(description["threads_per_core"]))


def gres_attribute(description):
    """`` Gres=gpu:<type>:<count>`` (with its leading space) for a node with GPUs, else ``""``."""
    gpu_count = int(description.get("gpu_count") or 0)
    return " Gres=gpu:%s:%d" % (description.get("gpu_type"), gpu_count) if gpu_count > 0 else ""


def node_attributes(description, fabric, cooling, features_extra, reserve_percent, reserve_min_mb):
    """A node's slurm.conf attributes from its description: ``CPUs= Sockets= CoresPerSocket= ThreadsPerCore=
    RealMemory= [Gres=gpu:<type>:<count>] Features=<gpu type,fabric,cooling,extra> State=UNKNOWN``. RealMemory is the
    node's memory less the larger of ``reserve_percent`` of it and ``reserve_min_mb`` (for the OS and the daemons)."""
    memory = int(description["memtotal_mb"])
    reserve = max(int(memory * float(reserve_percent) / 100), int(reserve_min_mb))
    attrs = "%s RealMemory=%d%s" % (cpu_attributes(description), memory - reserve, gres_attribute(description))
    gpu_type = description.get("gpu_type")
    features, seen = [], set()
    for feature in ([gpu_type] if gpu_type else []) + [fabric or "", cooling] + list(features_extra or []):
        if feature and str(feature).lower() not in seen:  # case-insensitive, as Ansible's unique filter was
            seen.add(str(feature).lower())
            features.append(str(feature))
    return "%s Features=%s State=UNKNOWN" % (attrs, ",".join(features))


def node_lines(nodes, node_vars, reserve_percent, reserve_min_mb, cooling, features_extra):
    """slurm.conf's node lines: identical nodes share one line. ``nodes``: {node: description} (node_descriptions'
    ``nodes``); ``node_vars`` (hostvars) gives a node's ``cluster_fabric_type`` and its own
    ``slurm_controller_node_cooling`` / ``slurm_controller_node_features_extra``, else ``cooling`` /
    ``features_extra``."""
    entries = []
    for node in sorted(nodes):
        own = _vars_of(node_vars, node)
        entries.append((node, node_attributes(
            nodes[node], own.get("cluster_fabric_type", ""), own.get("slurm_controller_node_cooling", cooling),
            own.get("slurm_controller_node_features_extra", features_extra), reserve_percent, reserve_min_mb)))
    return _grouped(entries)


def gres_lines(nodes):
    """gres.conf's lines for the nodes with GPUs, identical ones sharing a line: ``AutoDetect=nvml Name=gpu Type=
    Count=`` where the node's Slurm has the gpu_nvml plugin, else ``Name=gpu Type= File=/dev/nvidia[...]``."""
    from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import compress  # pylint: disable=import-outside-toplevel
    entries = []
    for node in sorted(nodes):
        desc = nodes[node]
        count = int(desc.get("gpu_count") or 0)
        if count <= 0:
            continue
        if desc.get("gres_autodetect") == "nvml":
            line = "AutoDetect=nvml Name=gpu Type=%s Count=%d" % (desc.get("gpu_type"), count)
        else:
            files = compress(["/dev/nvidia%s" % i for i in desc.get("gpu_indexes") or []])
            line = "Name=gpu Type=%s File=%s" % (desc.get("gpu_type"), files)
        entries.append((node, line))
    return _grouped(entries)
