# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PRIVATE to clusterforge.gpu: the one way modules of the collection replace a file they own.

The content is written beside the file (same file system) and renamed over it with the module's
``atomic_move``, so a reader never sees half a file and a failed write leaves the old file in place.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import tempfile

from ansible.module_utils.common.text.converters import to_bytes, to_native


def write_atomic(module, path, content, mode=None, make_dirs=False, **fail_extra):
    """Replace ``path`` with ``content`` (text or bytes). ``mode`` (an int) is set on the result: atomic_move keeps
    the mode of a file it replaces, or applies the umask to a new one. ``make_dirs`` creates a missing parent
    (mode 0755); without it a missing parent fails. Any error fails the module naming the path, with
    ``fail_extra`` added to the failure (for example what was already changed)."""
    directory = os.path.dirname(path) or "."
    tmp = None
    try:
        if not os.path.isdir(directory):
            if not make_dirs:
                module.fail_json(msg="cannot write %s: the directory %s does not exist" % (path, directory),
                                 **fail_extra)
            os.makedirs(directory, 0o755)
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".%s." % os.path.basename(path), suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(to_bytes(content))
        if mode is not None:
            os.chmod(tmp, mode)
        module.atomic_move(tmp, path, unsafe_writes=bool(module.params.get("unsafe_writes")))
        if mode is not None:
            os.chmod(path, mode)
    except (IOError, OSError) as e:
        module.fail_json(msg="cannot write %s: %s" % (path, to_native(e)), **fail_extra)
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
