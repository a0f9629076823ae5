# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of clusterforge.gpu.slurm_controller: the compute nodes' descriptions and their slurm.conf and gres.conf
lines (plugins/plugin_utils/slurm_nodes.py; documentation in slurm_node_descriptions.yml, slurm_node_lines.yml and
slurm_gres_lines.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import slurm_nodes


def slurm_node_descriptions(members, hostvars, known=None, scope=None):
    """{nodes, problems, kept} for the compute nodes ``members``."""
    return slurm_nodes.node_descriptions(list(members or []), hostvars, known=known,
                                         scope=None if scope is None else list(scope))


def slurm_node_lines(nodes, node_vars, reserve_percent, reserve_min_mb, cooling, features_extra=None):
    """slurm.conf's node lines for {node: description}."""
    try:
        return slurm_nodes.node_lines(dict(nodes or {}), node_vars, reserve_percent, reserve_min_mb, cooling,
                                      list(features_extra or []))
    except (KeyError, TypeError, ValueError) as e:
        raise AnsibleFilterError("slurm_node_lines: a node description lacks or has a bad %s" % e)


def slurm_gres_lines(nodes):
    """gres.conf's lines for {node: description}."""
    try:
        return slurm_nodes.gres_lines(dict(nodes or {}))
    except (KeyError, TypeError, ValueError) as e:
        raise AnsibleFilterError("slurm_gres_lines: a node description lacks or has a bad %s" % e)


class FilterModule(object):
    """Slurm node description filters."""

    def filters(self):
        return {"slurm_node_descriptions": slurm_node_descriptions, "slurm_node_lines": slurm_node_lines,
                "slurm_gres_lines": slurm_gres_lines}
