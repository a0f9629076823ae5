# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the Slurm upgrade's database backup. The work is plugins/plugin_utils/slurm_backup.py; documentation
lives beside this file in slurm_backup_space_problem.yml and slurm_backup_dump_problem.yml."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import slurm_backup


def slurm_backup_space_problem(df_output, path, database_bytes):
    """'' or the message that the dump does not fit."""
    return slurm_backup.space_problem(path, df_output, database_bytes)


def slurm_backup_dump_problem(size_bytes, path, gzip_rc, gzip_stderr=""):
    """'' or the message that the dump is not whole."""
    return slurm_backup.dump_problem(path, size_bytes, gzip_rc, gzip_stderr)


class FilterModule(object):
    """Slurm upgrade backup filters."""

    def filters(self):
        return {
            "slurm_backup_space_problem": slurm_backup_space_problem,
            "slurm_backup_dump_problem": slurm_backup_dump_problem,
        }
