# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PRIVATE to clusterforge.gpu: whether a directory root writes into is one no user controls."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def root_dir_problem(stat, path):
    """Why root must not write into `path` ('' when it may), from ansible.builtin.stat's result with follow: false.
    Missing: '' (the role creates it root-owned 0700). Present: a real directory (not a symbolic link), owned by
    root (uid 0) and writable by root only (nobody else may create, swap or link files in it; the role then sets
    0700)."""
    stat = stat or {}
    if not stat.get("exists"):
        return ""
    if stat.get("islnk"):
        return "%s is a symbolic link (to %s): root does not write through it" % (path, stat.get("lnk_source") or "?")
    if not stat.get("isdir"):
        return "%s exists and is not a directory" % path
    problems = []
    if stat.get("uid") != 0:
        problems.append("owned by %s (uid %s), not root" % (stat.get("pw_name") or "?", stat.get("uid")))
    mode = str(stat.get("mode") or "")
    try:
        writable_by_others = int(mode, 8) & 0o022
    except ValueError:
        writable_by_others = True
    if writable_by_others:
        problems.append("mode %s, writable by others than its owner" % (mode or "?"))
    if problems:
        return ("%s is %s: another user could plant a file or link there that root would write through; remove it "
                "(the role creates it root-owned 0700) or fix its owner and mode" % (path, " and ".join(problems)))
    return ""
