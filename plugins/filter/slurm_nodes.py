# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter of clusterforge.gpu.slurm_controller: the compute nodes' descriptions (plugins/plugin_utils/slurm_nodes.py;
documentation in slurm_node_descriptions.yml)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import slurm_nodes


def slurm_node_descriptions(members, hostvars, known=None, scope=None):
    """{nodes, problems, kept} for the compute nodes ``members``."""
    return slurm_nodes.node_descriptions(list(members or []), hostvars, known=known,
                                         scope=None if scope is None else list(scope))


class FilterModule(object):
    """Slurm node description filters."""

    def filters(self):
        return {"slurm_node_descriptions": slurm_node_descriptions}
