# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PRIVATE to clusterforge.gpu: whether a directory root writes into is one no user controls.

One rule, ``root_dir_problem``, for the controller (the filter of that name, over ansible.builtin.stat's result)
and for the node (``open_root_dir``: the directory opened component by component, never through a symbolic link,
and judged from what the open file descriptor is, so the directory judged is the one written into).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os
import pwd
import stat as stat_mod


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


class UnsafeDirectory(Exception):
    """The directory must not be written into as root; the message says why (nothing was written)."""


def _stat_dict(st):
    """os.stat_result -> the fields of ansible.builtin.stat that root_dir_problem reads."""
    try:
        owner = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        owner = None
    return {"exists": True, "isdir": stat_mod.S_ISDIR(st.st_mode), "islnk": stat_mod.S_ISLNK(st.st_mode),
            "uid": st.st_uid, "pw_name": owner, "mode": "%04o" % stat_mod.S_IMODE(st.st_mode)}


def open_root_dir(path, create=True):
    """Open the absolute ``path`` as a directory file descriptor for root to write into, or raise UnsafeDirectory.

    Every component is opened relative to the one before with O_NOFOLLOW, so no symbolic link anywhere on the path
    is followed (a link planted or swapped in at any time is refused, not written through). A missing last
    component is created root-owned 0700 when ``create``. The opened directory must pass root_dir_problem; one that
    passes with a mode other than 0700 is set to 0700. Returns ``(fd, created, mode_set)``; the caller closes fd."""
    if not path or not os.path.isabs(path) or os.path.normpath(path) != path or path == "/":
        raise UnsafeDirectory("%r is not a normalised absolute path of a directory below /" % (path,))
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    parts = path.strip("/").split("/")
    fd = os.open("/", flags)
    created = False
    try:
        for index, part in enumerate(parts):
            here = "/" + "/".join(parts[:index + 1])
            last = index == len(parts) - 1
            try:
                child = os.open(part, flags, dir_fd=fd)
            except OSError as e:
                if e.errno == errno.ENOENT and last and create:
                    try:
                        os.mkdir(part, 0o700, dir_fd=fd)
                        created = True
                    except OSError as mk:
                        if mk.errno != errno.EEXIST:   # another node of a shared file system made it first
                            raise UnsafeDirectory("cannot create %s: %s" % (here, os.strerror(mk.errno)))
                    child = os.open(part, flags, dir_fd=fd)
                elif e.errno == errno.ENOENT:
                    raise UnsafeDirectory("%s does not exist" % here)
                elif e.errno in (errno.ELOOP, errno.ENOTDIR):
                    st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                    if stat_mod.S_ISLNK(st.st_mode):
                        target = os.readlink(part, dir_fd=fd)
                        raise UnsafeDirectory("%s is a symbolic link (to %s): root does not write through it; give "
                                              "the real path" % (here, target))
                    raise UnsafeDirectory("%s exists and is not a directory" % here)
                else:
                    raise UnsafeDirectory("cannot open %s: %s" % (here, os.strerror(e.errno)))
            os.close(fd)
            fd = child
        info = _stat_dict(os.fstat(fd))
        problem = root_dir_problem(info, path)
        if problem:
            raise UnsafeDirectory(problem)
        mode_set = info["mode"] != "0700"
        if mode_set:
            os.fchmod(fd, 0o700)
        return fd, created, mode_set
    except BaseException:
        os.close(fd)
        raise
