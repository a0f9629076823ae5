# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the Lustre roles over plugins/plugin_utils/lustre_roles.py; documentation in lustre_server_targets.yml
and lustre_client_directories.yml beside this file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import lustre_roles


def _list_of_dicts(value, name):
    if value is None:
        return []
    if isinstance(value, (str, bytes, dict)) or not all(isinstance(v, dict) for v in value):
        raise AnsibleFilterError("%s: expects a list of dicts, got %r" % (name, value))
    return list(value)


def lustre_server_targets(targets, mount_root, mount_options):
    """A host's Lustre targets with their names, mount points, mount options and mount order."""
    return lustre_roles.server_targets(_list_of_dicts(targets, "lustre_server_targets"), mount_root, mount_options)


def lustre_client_directories(directories, dataset_layout, checkpoint_layout):
    """The directories to create, each with the layout it gets."""
    return lustre_roles.client_directories(_list_of_dicts(directories, "lustre_client_directories"), dataset_layout,
                                           checkpoint_layout)


class FilterModule(object):
    def filters(self):
        return {"lustre_server_targets": lustre_server_targets, "lustre_client_directories": lustre_client_directories}
