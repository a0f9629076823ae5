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
