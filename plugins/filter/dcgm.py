# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the dcgm role's settings, over the rules of plugins/module_utils/dcgm.py that preflight and the
modules use; documentation in dcgm_socket_path_problem.yml and dcgm_watches_problem.yml beside this file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.clusterforge.gpu.plugins.module_utils import dcgm


def dcgm_socket_path_problem(path):
    """None when ``path`` can be the host engine's socket (or is null: TCP), else what it must be."""
    return None if path is None else dcgm.socket_path_problem(path)


def dcgm_watches_problem(letters):
    """None when ``letters`` is a dcgmi health -s value, else why not."""
    if not isinstance(letters, str):
        return "it is not a string of letters"
    return dcgm.validate_watch_letters(letters)


class FilterModule(object):
    def filters(self):
        return {"dcgm_socket_path_problem": dcgm_socket_path_problem, "dcgm_watches_problem": dcgm_watches_problem}
