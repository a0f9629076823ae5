# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of clusterforge.gpu.slurm_controller's adoption of a running controller.

The decisions are plugins/plugin_utils/slurm_adoption.py; documentation lives beside this file in
slurm_munge_key_plan.yml, slurm_state_problems.yml, slurm_state_dirs.yml, slurm_state_dirs_found.yml,
slurm_dbd_conf_problems.yml and slurm_db_user_plan.yml.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import reconfigure_refusal
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import slurm_adoption


def slurm_munge_key_plan(key_exists, marker_exists=False, rotate=False, key_hosts=None, scope_hosts=None, unreachable=None):
    """keep / generate / rotate / refuse for the controller's munge key, with the reason."""
    return slurm_adoption.munge_key_plan(bool(key_exists), marker_exists=bool(marker_exists), rotate=bool(rotate),
                                         key_hosts=list(key_hosts or []), scope_hosts=scope_hosts,
                                         unreachable=list(unreachable or []))


def slurm_state_problems(cluster_name, state_save_location, live_conf=None, state_dirs=None):
    """Why the live ClusterName / StateSaveLocation may not be changed ([] when they may)."""
    return slurm_adoption.state_problems(cluster_name, state_save_location, live_conf=live_conf, state_dirs=state_dirs)


def slurm_state_dirs(state_save_location, live_conf=None):
    """The StateSaveLocations to read: the live slurm.conf's and the role's."""
    return slurm_adoption.state_dirs_to_read(state_save_location, live_conf=live_conf)


def slurm_state_dirs_found(entries, names=None):
    """The looped find and slurp results of the StateSaveLocations -> {path: {entries, clustername}}."""
    return slurm_adoption.state_dirs_found(entries, names)


def slurm_dbd_conf_problems(db_name, db_user, live_dbd_conf=None):
    """Why slurmdbd may not be pointed at the role's database and user ([] when it may)."""
    return slurm_adoption.dbd_conf_problems(db_name, db_user, live_dbd_conf=live_dbd_conf)


def slurm_db_user_plan(user_exists, password_file_exists=False, password_matches=None, user="slurm", password_file=None):
    """create / keep / unknown / refuse for the accounting database user, with the reason."""
    return slurm_adoption.db_user_plan(user_exists, bool(password_file_exists), password_matches=password_matches,
                                       user=user, password_file=password_file)


def slurm_node_description_problems(nodes, live_nodes_text=None, live_conf=None):
    """Why slurm.conf may not change the description of a node the running slurmctld knows ([] when it may)."""
    return slurm_adoption.node_description_problems(nodes, live_nodes_text, live_conf=live_conf)


def slurm_reconfigure_refusal(log_text, limit=8):
    """Why slurmctld refused the last `scontrol reconfigure`: its log's fatal and error lines after the request."""
    return reconfigure_refusal(log_text, limit=int(limit))


class FilterModule(object):
    """Slurm controller adoption filters."""

    def filters(self):
        return {
            "slurm_munge_key_plan": slurm_munge_key_plan,
            "slurm_state_problems": slurm_state_problems,
            "slurm_db_user_plan": slurm_db_user_plan,
            "slurm_state_dirs": slurm_state_dirs,
            "slurm_state_dirs_found": slurm_state_dirs_found,
            "slurm_dbd_conf_problems": slurm_dbd_conf_problems,
            "slurm_node_description_problems": slurm_node_description_problems,
            "slurm_reconfigure_refusal": slurm_reconfigure_refusal,
        }
