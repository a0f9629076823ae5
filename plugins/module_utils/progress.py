# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# PRIVATE: this module_utils file is internal to clusterforge.gpu. It is not a public API and may change
# without notice.
"""Progress of a module that runs in the background (``async``), in a file that clusterforge.gpu.async_progress reads.

A module that works for minutes (nccl_isolate's search, round after round) writes one line of progress after each
step. The file is replaced atomically in a directory no other user controls (safe_paths.open_root_dir: opened
without following links, created root-owned 0700), and removed when the module ends.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

from ansible_collections.clusterforge.gpu.plugins.module_utils.safe_paths import UnsafeDirectory, open_root_dir


class ProgressFile(object):
    """``write(text)`` replaces the file's content with {"progress": text}; ``close()`` removes it. With no path it
    does nothing, so that callers need no condition."""

    def __init__(self, path):
        self.path = path
        self.fd = None
        self.name = None
        if path:
            if not os.path.isabs(path) or path.endswith("/"):
                raise UnsafeDirectory("progress_file %r is not an absolute path of a file" % (path,))
            directory, self.name = os.path.split(path)
            self.fd = open_root_dir(directory)[0]

    def write(self, text):
        """Best effort: a progress line that cannot be written (a full /run) must not stop the work it reports on;
        the file then keeps its last line, or stays absent."""
        if self.fd is None:
            return
        temporary = ".%s.%d.tmp" % (self.name, os.getpid())
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            handle = os.open(temporary, flags, 0o600, dir_fd=self.fd)
            try:
                os.write(handle, json.dumps({"progress": text}).encode("utf-8"))
            finally:
                os.close(handle)
            os.replace(temporary, self.name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except OSError:
            pass

    def close(self):
        if self.fd is None:
            return
        for name in (self.name, ".%s.%d.tmp" % (self.name, os.getpid())):
            try:
                os.unlink(name, dir_fd=self.fd)
            except OSError:
                pass
        os.close(self.fd)
        self.fd = None
