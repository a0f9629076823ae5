# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the GPU settings contract (plugins/module_utils/gpu_settings.py): gpu_tuning_settings reads a host's
gpu_tuning variables, gpu_settings_failures judges a node's GPUs against them as the validation judge does.
Documentation lives beside this file in gpu_tuning_settings.yml and gpu_settings_failures.yml."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.module_utils.gpu_settings import judge_node, role_settings


def gpu_tuning_settings(variables):
    """A host's variables (hostvars[host]) -> its gpu_tuning settings: {gpus, state_file, <option>: value}."""
    if not isinstance(variables, Mapping):
        raise AnsibleFilterError("gpu_tuning_settings: expected a host's variables (hostvars[inventory_hostname]), "
                                 "got %s" % type(variables).__name__)
    return role_settings(variables)


def gpu_settings_failures(info, settings):
    """nvidia_smi_info's result and gpu_tuning_settings -> one line per GPU setting that fails, naming the GPU."""
    if not isinstance(info, Mapping) or not isinstance(settings, Mapping):
        raise AnsibleFilterError("gpu_settings_failures: expected nvidia_smi_info's result and gpu_tuning_settings")
    findings, problems = judge_node(dict(settings), dict(info))
    if problems:
        raise AnsibleFilterError("gpu_settings_failures: %s" % "; ".join(problems))
    out = []
    for item in findings:
        if item["status"] == "fail":
            gpu = item["gpu"]
            out.append("GPU%s (%s, %s): %s" % (gpu.get("index"), gpu.get("pci_bus_id"), gpu.get("uuid"),
                                               item["message"]))
    return out


class FilterModule(object):
    def filters(self):
        return {"gpu_tuning_settings": gpu_tuning_settings, "gpu_settings_failures": gpu_settings_failures}
