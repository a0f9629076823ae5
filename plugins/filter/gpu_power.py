# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the rack power budget: gpu_node_power and gpu_rack_power (plugins/plugin_utils/gpu_power.py, the rule
preflight uses too). Documentation lives beside this file in gpu_node_power.yml and gpu_rack_power.yml."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.plugin_utils.gpu_power import node_power, rack_plan


def gpu_node_power(gpus, selection=None, cap_watts=None, overhead_watts=0):
    """nvidia_smi_info's GPUs -> this node's planned draw."""
    if selection is not None and not isinstance(selection, (list, tuple)):
        raise AnsibleFilterError("gpu_node_power: the selection must be a list of GPU indexes, UUIDs or PCI bus ids")
    try:
        return node_power(list(gpus or []), None if selection is None else list(selection), cap_watts, overhead_watts)
    except (TypeError, ValueError, AttributeError) as e:
        raise AnsibleFilterError("gpu_node_power: %s" % e)


def gpu_rack_power(nodes):
    """Each node's planned draw (gpu_node_power plus host, rack and budget_watts) -> every rack against its budget."""
    try:
        return rack_plan(list(nodes or []))
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise AnsibleFilterError("gpu_rack_power: %s" % e)


class FilterModule(object):
    def filters(self):
        return {"gpu_node_power": gpu_node_power, "gpu_rack_power": gpu_rack_power}
