#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: files
short_description: Keep a role's directories, small files and drop-ins in one module run
version_added: "1.0.0"
description:
  - Brings every entry of O(files) to its state (a directory, a file with the given content, or absent) in the order
    given, so a directory comes before the files in it. Owner, group and mode are set where they differ.
  - Reads each path first and changes only what differs; a file's content is replaced atomically (written beside
    it, then renamed over it), so a reader never sees half a file.
  - One module run where a loop of M(ansible.builtin.file), M(ansible.builtin.copy) or M(ansible.builtin.template)
    runs one module per item; a role's handler is notified when any entry changed, so one call groups the entries
    whose change needs the same handler.
  - Every entry is checked before anything is changed (bad modes, relative paths, a path given twice).
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads every path and reports what would change; changes nothing.
  diff_mode:
    support: full
    details:
      - Shows each changed path's state, owner, group and mode before and after, and a file's content.
options:
  files:
    description: The paths, each with the state it must have.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: An absolute path.
        type: path
        required: true
      state:
        description:
          - V(directory) creates it (and missing parents, mode C(0755)); V(file) writes O(files[].content);
            V(absent) removes a file or link, or an empty directory (a directory with something in it fails the run).
        type: str
        choices: [directory, file, absent]
        default: file
      content:
        description:
          - The file's content, exactly (a template's output through C(lookup('ansible.builtin.template', ...)), or a
            file's through C(lookup('ansible.builtin.file', ..., rstrip=false))). Required with O(files[].state=file).
          - Not for secrets, because the content is shown in diff mode and in the task's arguments.
        type: str
      owner:
        description: The owner's name; unchanged when not given.
        type: str
      group:
        description: The group's name; unchanged when not given.
        type: str
      mode:
        description:
          - The permissions, as an octal string with its leading zero, C("0644"). An unquoted C(0644) reaches the module
            as C(420), which is refused.
          - A new file or directory gets C(0644) or C(0755) when not given.
        type: str
notes:
  - The mode must be a quoted octal string, because YAML reads an unquoted C(0644) as the number 420.
  - A path that is a symbolic link or another non-regular file fails the run for V(file) and V(directory), so the
    module never writes through a link. V(absent) removes a link itself, not its target.
seealso:
  - module: ansible.builtin.file
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: A role's directories and its unit drop-in, one module run
  clusterforge.gpu.files:
    files:
      - {path: /etc/slurm, state: directory, owner: root, group: root, mode: "0755"}
      - {path: /var/log/slurm, state: directory, owner: slurm, group: slurm, mode: "0755"}
      - path: /etc/systemd/system/slurmd.service.d/clusterforge.conf
        content: "{{ lookup('ansible.builtin.template', 'slurmd.conf.j2') }}"
        owner: root
        group: root
        mode: "0644"
      - {path: /etc/systemd/system/slurmd.service.d/old.conf, state: absent}
  notify: Restart slurmd
"""

RETURN = r"""
changed_paths:
  description: The paths that changed (or in check mode would change), in the order given.
  returned: always
  type: list
  elements: str
  sample: ["/etc/slurm"]
"""

import errno
import os
import re
import stat

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_bytes, to_native, to_text

from ansible_collections.clusterforge.gpu.plugins.module_utils._files import write_atomic

_MODE_RE = re.compile(r"^0[0-7]{3,4}$")
_NEW_MODE = {"directory": 0o755, "file": 0o644}
_ATTRS = ("owner", "group", "mode")


def validate(entries):
    """The entries' problems (an empty list when every entry is sound); nothing is read or changed."""
    problems = []
    seen = set()
    for i, entry in enumerate(entries):
        path = entry.get("path") or ""
        where = "files[%d] (%s)" % (i, path)
        if not os.path.isabs(path):
            problems.append("%s: path must be absolute" % where)
        norm = os.path.normpath(path)
        if norm in seen:
            problems.append("%s: the path is given twice" % where)
        seen.add(norm)
        mode = entry.get("mode")
        if mode is not None and not _MODE_RE.match(mode):
            problems.append("%s: mode must be an octal string such as \"0644\", got %r" % (where, mode))
        if entry.get("state") == "file" and entry.get("content") is None:
            problems.append("%s: state file needs content" % where)
        if entry.get("state") != "file" and entry.get("content") is not None:
            problems.append("%s: content is only for state file" % where)
    return problems


def current_state(path):
    """``directory``, ``file`` (a regular file), ``other`` (a link, a device...) or ``absent``."""
    try:
        st = os.lstat(path)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return "absent"
        raise
    if stat.S_ISDIR(st.st_mode):
        return "directory"
    if stat.S_ISREG(st.st_mode):
        return "file"
    return "other"


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _file_args(module, entry):
    args = dict((k, entry.get(k)) for k in _ATTRS)
    args.update(path=entry["path"], seuser=None, serole=None, setype=None, selevel=None, attributes=None,
                unsafe_writes=False)
    return module.load_file_common_arguments(args, path=entry["path"])


def apply_entry(module, entry):
    """Bring one path to its state; returns (changed, diffs)."""
    path, want = entry["path"], entry["state"]
    try:
        have = current_state(path)
    except OSError as e:
        module.fail_json(msg="cannot read %s: %s" % (path, to_native(e.strerror)))
    diffs = []
    changed = False
    if want == "absent":
        if have == "absent":
            return False, diffs
        diffs.append({"before_header": path, "after_header": path, "before": {"state": have}, "after": {"state": "absent"}})
        if not module.check_mode:
            try:
                if have == "directory":
                    os.rmdir(path)
                else:
                    os.unlink(path)
            except OSError as e:
                module.fail_json(msg="cannot remove %s: %s" % (path, to_native(e.strerror)))
        return True, diffs

    if have not in ("absent", want):
        module.fail_json(msg="%s is a %s, not a %s: remove or move it first" % (
            path, "directory" if have == "directory" else "non-regular file" if have == "other" else have, want))
    mode = int(entry["mode"], 8) if entry.get("mode") else _NEW_MODE[want]
    if want == "directory" and have == "absent":
        changed = True
        diffs.append({"before_header": path, "after_header": path, "before": {"state": "absent"}, "after": {"state": "directory"}})
        if not module.check_mode:
            try:
                os.makedirs(path, 0o755)
                os.chmod(path, mode)
            except OSError as e:
                module.fail_json(msg="cannot create %s: %s" % (path, to_native(e.strerror)))
    elif want == "file":
        content = to_bytes(entry["content"])
        try:
            before = _read(path) if have == "file" else None
        except (IOError, OSError) as e:
            module.fail_json(msg="cannot read %s: %s" % (path, to_native(e.strerror)))
        if before != content:
            changed = True
            diffs.append({"before_header": path, "after_header": path,
                          "before": "" if before is None else to_text(before, errors="surrogate_or_replace"),
                          "after": to_text(content, errors="surrogate_or_replace")})
            if not module.check_mode:
                write_atomic(module, path, content, mode=mode if have == "absent" else None, make_dirs=True)
    if module.check_mode and have == "absent":
        return changed, diffs  # nothing there yet whose owner or mode could be read
    attr_diff = {"before_header": path, "after_header": path, "before": {}, "after": {}}
    if module.set_fs_attributes_if_different(_file_args(module, entry), False, diff=attr_diff):
        changed = True
        diffs.append(attr_diff)
    return changed, diffs


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type="list", elements="dict", required=True, options=dict(
                path=dict(type="path", required=True),
                state=dict(type="str", choices=["directory", "file", "absent"], default="file"),
                content=dict(type="str"),
                owner=dict(type="str"),
                group=dict(type="str"),
                mode=dict(type="str"),
            )),
        ),
        supports_check_mode=True,
    )
    entries = module.params["files"]
    problems = validate(entries)
    if problems:
        module.fail_json(msg="files: nothing was changed: " + "; ".join(problems), problems=problems)
    changed_paths = []
    diffs = []
    for entry in entries:
        changed, entry_diffs = apply_entry(module, entry)
        if changed:
            changed_paths.append(entry["path"])
            diffs.extend(entry_diffs)
    result = dict(changed=bool(changed_paths), changed_paths=changed_paths)
    if module._diff:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
