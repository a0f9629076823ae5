#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: sysctl_settings
short_description: Keep a set of kernel tunables in one sysctl.d file and in the running kernel
version_added: "1.0.0"
description:
  - Owns one file under C(/etc/sysctl.d) that holds exactly O(settings), one C(key=value) line each, under a comment
    header; rewrites it (atomically) only when its content differs.
  - With O(apply_runtime=true) it also reads the running value of every key from C(/proc/sys) and sets those that
    differ, then reads them back and fails when the kernel did not keep the value (a value out of range, a read-only
    key). Values with several fields (C(net.ipv4.tcp_rmem)) are compared with their whitespace normalised.
  - One module run for every key, where C(ansible.posix.sysctl) is one run per key and keeps no single file (keys
    removed from O(settings) would stay in its file). Like C(sysctl -w), it writes C(/proc/sys) directly; no command
    is run.
  - Every key is checked before anything is changed; an unknown key (no C(/proc/sys) entry, for example a module
    not loaded yet) fails the run when O(apply_runtime=true).
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - ansible.builtin.files
attributes:
  check_mode:
    support: full
    details:
      - Reads the file and the running values and reports what would change; writes neither.
  diff_mode:
    support: full
    details:
      - Shows the file before and after, and the running values that differ (predicted in check mode).
options:
  settings:
    description:
      - The tunables, one C(key) and its value each. Keys use the dotted form (C(net.core.somaxconn)) or the slash form of
        C(sysctl(8)). Booleans are written as C(1)/C(0); a list is written with its items separated by spaces.
      - The file lists them in the order given.
    type: dict
    required: true
  path:
    description: The file this module owns. Keys not in O(settings) are removed from it.
    type: path
    default: /etc/sysctl.d/90-clusterforge.conf
  header:
    description: The comment written as the first line of the file (without C(#)).
    type: str
    default: Managed by Ansible (clusterforge.gpu.sysctl_settings).
  apply_runtime:
    description:
      - Also set the running values. V(false) where C(/proc/sys) is read-only (an unprivileged container); the file
        then applies at the next boot.
    type: bool
    default: true
  proc_root:
    description: Where the running values are read and written. Change it only for tests.
    type: path
    default: /proc/sys
notes:
  - Values the kernel clamps or rounds (it keeps something else than was written) make the module fail with the
    value the kernel kept; put that value in O(settings).
seealso:
  - module: ansible.posix.sysctl
  - name: sysctl.d(5)
    description: The file format.
    link: https://man7.org/linux/man-pages/man5/sysctl.d.5.html
"""

EXAMPLES = r"""
- name: Kernel tunables, one file and the running values
  clusterforge.gpu.sysctl_settings:
    settings:
      net.core.somaxconn: 4096
      vm.max_map_count: 1048576
      net.ipv4.tcp_rmem: "4096 87380 268435456"
    path: /etc/sysctl.d/90-clusterforge.conf
    owner: root
    group: root
    mode: "0644"

- name: File only (a container whose /proc/sys is read-only)
  clusterforge.gpu.sysctl_settings:
    settings: {kernel.numa_balancing: 0}
    apply_runtime: false
"""

RETURN = r"""
path:
  description: The file.
  returned: always
  type: str
  sample: /etc/sysctl.d/90-clusterforge.conf
settings:
  description: The settings as written (values as strings).
  returned: always
  type: dict
  sample: {"net.core.somaxconn": "4096"}
file_changed:
  description: Whether the file's content was (or in check mode would be) rewritten.
  returned: always
  type: bool
  sample: false
runtime_changed:
  description: The keys whose running value was (or in check mode would be) set, with the value before and after.
  returned: always
  type: list
  elements: dict
  sample: [{"key": "net.core.somaxconn", "before": "128", "after": "4096"}]
"""

import errno
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.clusterforge.gpu.plugins.module_utils._files import write_atomic

# What sysctl(8) accepts as a key: no whitespace, no '=', not starting with a separator or '-'.
_KEY_RE = re.compile(r"^[A-Za-z0-9_][^\s=]*$")


def normalise_value(value):
    """The string written for a value: booleans as 1/0, lists joined with spaces, surrounding space removed."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (list, tuple)):
        return " ".join(normalise_value(v) for v in value)
    return to_native(value).strip()


def same_value(live, wanted):
    """Running and wanted values are equal once their whitespace is normalised (tcp_rmem prints tabs)."""
    return (live or "").split() == (wanted or "").split()


def validate(settings):
    """{key: value string}, or raise ValueError naming the bad entries."""
    out = {}
    bad = []
    for key, value in settings.items():
        text = normalise_value(value) if value is not None else ""
        if not _KEY_RE.match(key or "") or ".." in key or "//" in key:
            bad.append("%r (not a sysctl key)" % key)
        elif not text or "\n" in text or "\r" in text:
            bad.append("%s=%r (empty, or more than one line)" % (key, text))
        else:
            out[key] = text
    if bad:
        raise ValueError("invalid settings: %s" % ", ".join(bad))
    return out


def key_path(proc_root, key):
    """The /proc/sys file of a key, as sysctl(8) maps it.

    When the first separator of the key is '.', every '.' becomes '/' and every '/' becomes '.'
    (net.ipv4.conf.eth0/100.rp_filter -> net/ipv4/conf/eth0.100/rp_filter); a key whose first separator is
    '/' is already a path.
    """
    first = re.search(r"[./]", key)
    if first and first.group(0) == ".":
        key = key.translate({ord("."): "/", ord("/"): "."})
    return os.path.join(proc_root, key)


def render(header, settings):
    lines = ["# %s" % header] if header else []
    lines += ["%s=%s" % (key, value) for key, value in settings.items()]
    return "\n".join(lines) + "\n"


def _read_file(path):
    try:
        with open(path, "rb") as f:
            return to_native(f.read(), errors="surrogate_or_strict")
    except (IOError, OSError) as e:
        if e.errno == errno.ENOENT:
            return None
        raise


def read_live(module, proc_root, keys):
    """{key: running value}; fails, naming every problem key, before anything is changed."""
    live, missing, unreadable = {}, [], []
    for key in keys:
        path = key_path(proc_root, key)
        try:
            with open(path, "r") as f:
                live[key] = f.read().strip()
        except (IOError, OSError) as e:
            if e.errno in (errno.ENOENT, errno.ENOTDIR):
                missing.append(key)
            else:
                unreadable.append("%s (%s)" % (key, e.strerror))
    if missing:
        module.fail_json(msg="unknown sysctl key(s): %s (no entry under %s; a kernel module not loaded yet?)"
                         % (", ".join(missing), proc_root), unknown=missing)
    if unreadable:
        module.fail_json(msg="cannot read the running value of: %s" % ", ".join(unreadable))
    return live


def write_live(module, proc_root, key, value):
    path = key_path(proc_root, key)
    try:
        with open(path, "w") as f:
            f.write(value)
    except (IOError, OSError) as e:
        hint = ""
        if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            hint = " (/proc/sys is read-only here, as in an unprivileged container: set apply_runtime=false)"
        module.fail_json(msg="setting %s=%s failed: %s%s" % (key, value, e.strerror, hint), key=key)
    with open(path, "r") as f:
        kept = f.read().strip()
    if not same_value(kept, value):
        module.fail_json(msg="the kernel did not keep %s=%s: it reads %s" % (key, value, kept), key=key, kept=kept)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            settings=dict(type="dict", required=True),
            path=dict(type="path", default="/etc/sysctl.d/90-clusterforge.conf"),
            header=dict(type="str", default="Managed by Ansible (clusterforge.gpu.sysctl_settings)."),
            apply_runtime=dict(type="bool", default=True),
            proc_root=dict(type="path", default="/proc/sys"),
        ),
        add_file_common_args=True,
        supports_check_mode=True,
    )
    params = module.params
    try:
        settings = validate(params["settings"])
    except ValueError as e:
        module.fail_json(msg=to_native(e))
    path = params["path"]

    # Read everything first: an unknown key fails before the file or any value changes.
    live = read_live(module, params["proc_root"], settings) if params["apply_runtime"] else {}
    drift = [{"key": key, "before": live[key], "after": value}
             for key, value in settings.items() if params["apply_runtime"] and not same_value(live[key], value)]

    try:
        before = _read_file(path)
    except (IOError, OSError) as e:
        module.fail_json(msg="cannot read %s: %s" % (path, e.strerror))
    after = render(params["header"], settings)
    file_changed = before != after

    changed = file_changed or bool(drift)
    if not module.check_mode:
        if file_changed:
            write_atomic(module, path, after)
        for entry in drift:
            write_live(module, params["proc_root"], entry["key"], entry["after"])
    diff = {}
    if os.path.exists(path) or not module.check_mode:
        file_args = module.load_file_common_arguments(params, path=path)
        changed = module.set_fs_attributes_if_different(file_args, changed, diff=diff)

    result = dict(changed=changed, path=path, settings=settings, file_changed=file_changed, runtime_changed=drift)
    if module._diff:
        diffs = [{"before_header": path, "after_header": path, "before": before or "", "after": after}]
        if diff.get("before") or diff.get("after"):
            diffs.append(diff)
        if drift:
            diffs.append({
                "before_header": "running values", "after_header": "running values",
                "before": "".join("%s = %s\n" % (d["key"], d["before"]) for d in drift),
                "after": "".join("%s = %s\n" % (d["key"], d["after"]) for d in drift),
            })
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
