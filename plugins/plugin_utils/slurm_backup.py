# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The upgrade's accounting database backup (clusterforge.gpu.slurm_upgrade, tasks/backup.yml): is there room for
the dump before it is taken, and is the dump whole after it. Called through plugins/filter/slurm_backup.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Headroom over the database's size on disk (data and indexes, an upper bound for a compressed dump).
HEADROOM_FRACTION = 0.10
HEADROOM_MIN_BYTES = 16 * 1024 * 1024


def needed_bytes(database_bytes):
    """Free bytes the dump needs: the database's size on disk plus 10 % and 16 MiB."""
    size = max(int(database_bytes or 0), 0)
    return size + int(size * HEADROOM_FRACTION) + HEADROOM_MIN_BYTES


def parse_df_avail(text):
    """The available bytes of ``df --output=avail --block-size=1 <path>`` (its last line), or None."""
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if not lines or not lines[-1].isdigit():
        return None
    return int(lines[-1])


def space_problem(path, df_output, database_bytes):
    """'' where the dump fits in path's file system, else a message naming the path, the free and the needed bytes."""
    free = parse_df_avail(df_output)
    need = needed_bytes(database_bytes)
    if free is None:
        return ("Could not read the free space of %s (df printed %r): the database was not dumped and nothing was "
                "changed." % (path, (df_output or "").strip()[:200]))
    if free < need:
        return ("Not enough free space for the accounting database dump in %s: %d bytes free, %d bytes needed (the "
                "database takes %d bytes on disk, plus 10 %% and 16 MiB). Free space there or set "
                "slurm_upgrade_backup_dir to a larger file system; slurmdbd was not stopped and nothing was changed."
                % (path, free, need, max(int(database_bytes or 0), 0)))
    return ""


def dump_problem(path, size_bytes, gzip_rc, gzip_stderr=""):
    """'' where the dump is whole (not empty, ``gzip -t`` passes), else a message naming it."""
    if not size_bytes or int(size_bytes) <= 0:
        return "The accounting database dump %s is empty (0 bytes): the backup failed." % path
    if gzip_rc != 0:
        return ("The accounting database dump %s (%d bytes) is not a whole gzip file (gzip -t exit %s: %s): the backup "
                "failed." % (path, int(size_bytes), gzip_rc, (gzip_stderr or "").strip()[:300]))
    return ""
