# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over plugins/module_utils/hardware.py (the hardware catalogue); documentation in validation_profile.yml
and cluster_fabric.yml beside this file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.module_utils import hardware


def validation_profile(name):
    """The figures validation judges a platform against (validate_profile); an unknown name fails naming the known."""
    try:
        return hardware.validation_profile(name)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def cluster_fabric(value):
    """The cluster's compute fabric: cluster_fabric_type, or the collection's default where it is not set."""
    return hardware.fabric_type(value)


class FilterModule(object):
    def filters(self):
        return {"validation_profile": validation_profile, "cluster_fabric": cluster_fabric}
