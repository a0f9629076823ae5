# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The upgrade's database backup rules (plugins/plugin_utils/slurm_backup.py), through the filters the role calls."""

from ansible_collections.clusterforge.gpu.plugins.filter.slurm_backup import FilterModule

F = FilterModule().filters()
MIB = 1024 * 1024
DF = "   Avail\n%d\n"


def test_enough_space_is_no_problem():
    assert F["slurm_backup_space_problem"](DF % (10 * 1024 * MIB), "/var/backups/x", 100 * MIB) == ""


def test_too_little_space_names_path_free_and_needed_bytes():
    problem = F["slurm_backup_space_problem"](DF % (100 * MIB), "/var/backups/x", 100 * MIB)
    needed = 100 * MIB + 10 * MIB + 16 * MIB
    assert "/var/backups/x" in problem
    assert "%d bytes free" % (100 * MIB) in problem
    assert "%d bytes needed" % needed in problem
    assert "slurmdbd was not stopped" in problem


def test_an_empty_database_still_needs_the_headroom():
    assert F["slurm_backup_space_problem"](DF % (15 * MIB), "/b", 0) != ""
    assert F["slurm_backup_space_problem"](DF % (17 * MIB), "/b", 0) == ""


def test_unreadable_df_output_is_a_problem():
    assert "Could not read the free space of /b" in F["slurm_backup_space_problem"]("df: /b: No such file", "/b", 1)


def test_a_whole_dump_is_no_problem():
    assert F["slurm_backup_dump_problem"](2048, "/b/db.sql.gz", 0, "") == ""


def test_an_empty_dump_is_a_problem():
    assert "is empty" in F["slurm_backup_dump_problem"](0, "/b/db.sql.gz", 0, "")


def test_a_truncated_dump_is_a_problem():
    problem = F["slurm_backup_dump_problem"](2048, "/b/db.sql.gz", 1, "gzip: /b/db.sql.gz: unexpected end of file")
    assert "not a whole gzip file" in problem and "unexpected end of file" in problem
