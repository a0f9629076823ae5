# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter over plugins/module_utils/safe_paths.py; documentation in root_dir_problem.yml beside this file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.clusterforge.gpu.plugins.module_utils import safe_paths


def root_dir_problem(stat, path):
    """'' when root may write into the directory (missing, or a root-owned 0700 directory), else why not."""
    return safe_paths.root_dir_problem(dict(stat or {}), path)


class FilterModule(object):
    def filters(self):
        return {"root_dir_problem": root_dir_problem}
