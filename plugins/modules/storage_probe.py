#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: storage_probe
short_description: Measure a file system's write and read bandwidth from one node, as root, safely
version_added: "1.0.0"
description:
  - Writes O(size_mib) MiB of zeros into a new file in O(path), flushes it to the storage (C(fsync)), then reads it
    back bypassing the page cache (C(O_DIRECT); where the file system refuses it, the cache is dropped for the file
    first and RV(measured.read.direct) says so), and removes the file whatever happens.
  - Returns each direction's bytes, seconds and GB/s (bytes / seconds / 1e9) and the wall-clock times at which the
    write started, the write ended and the read ended, from which the validate role computes the aggregate bandwidth
    of every node writing at once (the filter C(clusterforge.gpu.storage_aggregate)).
  - The directory is one no other user controls, because root writes there. Each component of O(path) is opened
    relative to the one before without following a symbolic link, a missing O(path) is created root-owned 0700, and
    the opened directory must be a directory owned by root that only root may write (the rule of the filter
    C(clusterforge.gpu.root_dir_problem)); one that passes is set to 0700. The file is created exclusively
    (C(O_EXCL), C(O_NOFOLLOW)) inside that open directory. A directory that fails the rule fails the task with
    RV(refused) true before anything is written.
  - A regular file of the same name left by an interrupted run (only root can have made it there) is removed first
    and RV(leftover_removed) says so.
  - Every block is checked against O(timeout); past it the test stops, the file is removed and the task fails.
  - Check mode measures nothing and changes nothing; it reports whether a real run would create O(path) or set its
    mode.
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
attributes:
  check_mode:
    support: full
    details:
      - Nothing is created, written or read; RV(measured) is null, and RV(created) and RV(mode_set) say what a real
        run would do to O(path).
  diff_mode:
    support: none
options:
  path:
    description: The directory to test in (normalised, absolute; no symbolic link anywhere on it).
    type: path
    required: true
  file_name:
    description:
      - The name of the test file in O(path) (a bare name; one per node when nodes share O(path)). Required with
        O(measure=true).
    type: str
  size_mib:
    description: How much to write and read back, in MiB. Required with O(measure=true).
    type: int
  measure:
    description:
      - false, only make sure O(path) is there and safe (created root-owned 0700, set to 0700, or refused, as above)
        and write nothing; the validate role does this once per run, busy nodes or not, so that the directory is
        ready before the first node measures.
    type: bool
    default: true
  block_size_kib:
    description: The size of each write and read, in KiB (a multiple of 4 for C(O_DIRECT)).
    type: int
    default: 1024
  timeout:
    description: Time limit of the whole test in seconds.
    type: int
    default: 1800
seealso:
  - module: clusterforge.gpu.lfs_stripe
"""

EXAMPLES = r"""
- name: Write, then read back, 4 GiB on the checkpoint file system
  clusterforge.gpu.storage_probe:
    path: /lustre/hgx01/checkpoints/validate
    file_name: "cf-validate-{{ inventory_hostname }}.bin"
    size_mib: 4096
    timeout: 1800
  register: __probe
"""

RETURN = r"""
measured:
  description: What was measured; null in check mode and with O(measure=false).
  returned: success
  type: dict
  sample:
    path: /lustre/hgx01/checkpoints/validate
    write: {"bytes": 4294967296, "seconds": 2.1, "gbytes_per_s": 2.045}
    read: {"bytes": 4294967296, "seconds": 1.6, "gbytes_per_s": 2.684, "direct": true}
    started: 1764480000.12
    written: 1764480002.22
    read_done: 1764480003.82
  contains:
    path:
      description: The directory tested.
      type: str
    write:
      description: The write and its flush (C(fsync)), C({bytes, seconds, gbytes_per_s}).
      type: dict
    read:
      description:
        - The read-back, C({bytes, seconds, gbytes_per_s, direct}); C(direct) is false where the file system refused
          C(O_DIRECT) and the file's cached pages were dropped instead.
      type: dict
      contains:
        direct:
          description: Whether the read bypassed the page cache with C(O_DIRECT).
          type: bool
    started:
      description: When the write started (seconds since the epoch, this node's clock).
      type: float
    written:
      description: When the write and its flush ended.
      type: float
    read_done:
      description: When the read-back ended.
      type: float
created:
  description: Whether O(path) was created (root-owned 0700).
  returned: always
  type: bool
mode_set:
  description: Whether O(path) was root-owned but not 0700, and was set to 0700.
  returned: always
  type: bool
leftover_removed:
  description: Whether a file of O(file_name) left by an interrupted run was removed before the test.
  returned: always
  type: bool
refused:
  description: True when the directory failed the rule and nothing was written.
  returned: failure
  type: bool
"""

import errno
import mmap
import os
import stat
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils.safe_paths import UnsafeDirectory, open_root_dir

MIB = 1024 * 1024
CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class ProbeError(Exception):
    """The measurement failed (an I/O error, a short read, the time limit): the message says where."""


def _rate(nbytes, seconds):
    seconds = max(seconds, 1e-9)
    return {"bytes": nbytes, "seconds": round(seconds, 6), "gbytes_per_s": nbytes / seconds / 1e9}


def _check_time(deadline, limit, what, done, total):
    if time.monotonic() > deadline:
        raise ProbeError("the storage test passed its time limit of %d s while %s (%d of %d MiB)"
                         % (limit, what, done // MIB, total // MIB))


def _remove_leftover(dir_fd, name):
    """Remove a regular file of ``name`` (an interrupted run's); refuse anything else. True when one was removed."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as e:
        if e.errno == errno.ENOENT:
            return False
        raise
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeDirectory("%s is there and is not a regular file: the test does not touch it" % name)
    os.unlink(name, dir_fd=dir_fd)
    return True


def _write(dir_fd, name, total, block, deadline, limit):
    buf = b"\0" * block
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | CLOEXEC, 0o600, dir_fd=dir_fd)
    try:
        done = 0
        while done < total:
            _check_time(deadline, limit, "writing", done, total)
            view = memoryview(buf)[:min(block, total - done)]
            while len(view):
                n = os.write(fd, view)
                done += n
                view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    return done


def _open_for_read(dir_fd, name):
    """(fd, direct): O_DIRECT where the file system takes it, else the file's cached pages dropped first."""
    plain = os.O_RDONLY | os.O_NOFOLLOW | CLOEXEC
    direct = getattr(os, "O_DIRECT", 0)
    if direct:
        try:
            return os.open(name, plain | direct, dir_fd=dir_fd), True
        except OSError as e:
            if e.errno != errno.EINVAL:
                raise
    fd = os.open(name, plain, dir_fd=dir_fd)
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return fd, False


def _read(dir_fd, name, total, block, deadline, limit):
    fd, direct = _open_for_read(dir_fd, name)
    buf = mmap.mmap(-1, block)   # page-aligned, as O_DIRECT needs
    try:
        done = 0
        while True:
            _check_time(deadline, limit, "reading back", done, total)
            n = os.readv(fd, [buf])
            if n == 0:
                break
            done += n
    finally:
        buf.close()
        os.close(fd)
    if done != total:
        raise ProbeError("read back %d bytes of the %d written" % (done, total))
    return done, direct


def probe(path, name, size_mib, block_kib, limit):
    """The test itself; returns (measured, created, mode_set, leftover_removed). Raises UnsafeDirectory before
    anything is written, ProbeError or OSError after."""
    total = size_mib * MIB
    block = block_kib * 1024
    dir_fd, created, mode_set = open_root_dir(path)
    try:
        leftover = _remove_leftover(dir_fd, name)
        deadline = time.monotonic() + limit
        try:
            started = time.time()
            t0 = time.monotonic()
            written_bytes = _write(dir_fd, name, total, block, deadline, limit)
            t1 = time.monotonic()
            written = time.time()
            read_bytes, direct = _read(dir_fd, name, total, block, deadline, limit)
            t2 = time.monotonic()
            read_done = time.time()
        finally:
            try:
                os.unlink(name, dir_fd=dir_fd)
            except OSError as e:
                if e.errno != errno.ENOENT:
                    raise
    finally:
        os.close(dir_fd)
    read = _rate(read_bytes, t2 - t1)
    read["direct"] = direct
    measured = {"path": path, "write": _rate(written_bytes, t1 - t0), "read": read,
                "started": started, "written": written, "read_done": read_done}
    return measured, created, mode_set, leftover


def predict(path):
    """Check mode: (created, mode_set) as a real run would report them, read without following a link."""
    try:
        st = os.lstat(path)
    except OSError:
        return True, False
    return False, stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) != 0o700


def check_mode_exit(module, path, what):
    created, mode_set = predict(path)
    module.exit_json(changed=created or mode_set, measured=None, created=created, mode_set=mode_set,
                     leftover_removed=False, msg="check mode: %s" % what)


def prepare(module, path):
    """measure=false: the directory only (created, set to 0700 or refused, by the same rule); nothing written."""
    if module.check_mode:
        check_mode_exit(module, path, "the directory is neither created nor changed")
    try:
        dir_fd, created, mode_set = open_root_dir(path)
        os.close(dir_fd)
    except UnsafeDirectory as e:
        module.fail_json(msg="%s" % e, refused=True, created=False, mode_set=False, leftover_removed=False)
    except OSError as e:
        module.fail_json(msg="%s: %s" % (path, os.strerror(e.errno) if e.errno else e), refused=False)
    module.exit_json(changed=created or mode_set, measured=None, created=created, mode_set=mode_set,
                     leftover_removed=False)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            file_name=dict(type="str"),
            size_mib=dict(type="int"),
            measure=dict(type="bool", default=True),
            block_size_kib=dict(type="int", default=1024),
            timeout=dict(type="int", default=1800),
        ),
        required_if=[("measure", True, ("file_name", "size_mib"))],
        supports_check_mode=True,
    )
    p = module.params
    if not p["measure"]:
        prepare(module, p["path"])
    name = p["file_name"]
    if not name or "/" in name or name in (".", ".."):
        module.fail_json(msg="file_name must be a bare file name, got %r" % name)
    if p["size_mib"] < 1:
        module.fail_json(msg="size_mib must be at least 1, got %d" % p["size_mib"])
    if p["block_size_kib"] < 4 or p["block_size_kib"] % 4:
        module.fail_json(msg="block_size_kib must be a positive multiple of 4, got %d" % p["block_size_kib"])
    if p["timeout"] < 1:
        module.fail_json(msg="timeout must be at least 1 second, got %d" % p["timeout"])
    if module.check_mode:
        check_mode_exit(module, p["path"], "nothing created, written or read")
    try:
        measured, created, mode_set, leftover = probe(p["path"], name, p["size_mib"], p["block_size_kib"],
                                                      p["timeout"])
    except UnsafeDirectory as e:
        module.fail_json(msg="%s" % e, refused=True, created=False, mode_set=False, leftover_removed=False)
    except ProbeError as e:
        module.fail_json(msg="%s: %s" % (p["path"], e), refused=False)
    except OSError as e:
        module.fail_json(msg="%s: the storage test failed: %s" % (p["path"], os.strerror(e.errno) if e.errno else e),
                         refused=False)
    module.exit_json(changed=created or mode_set, measured=measured, created=created, mode_set=mode_set,
                     leftover_removed=leftover)


if __name__ == "__main__":
    main()
