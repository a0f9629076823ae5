#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: lctl_param
short_description: Set Lustre parameters with lctl, at runtime on this node or persistently on the MGS
version_added: 1.0.0
description:
  - B(Runtime) (O(persistent=false), the default). Reads each parameter with C(lctl get_param <name>), one
    C(path=value) line for each device the name (wildcards allowed) matches. Then it sets every parameter whose
    value differs on any device with one C(lctl set_param name=value ...), reads the changed parameters back, and
    fails if a value did not stick. Runtime values apply to this node only and are lost when the device goes
    away (unmount, reboot).
  - B(Persistent) (O(persistent=true)). Runs on the node where the MGS runs. It reads the MGS C(params)
    configuration log with C(lctl --device MGS llog_print params). In that log later records win, and a
    C(set_param -P -d) deletion removes a parameter. The module then runs C(lctl set_param -P name=value ...)
    for the parameters whose logged value differs. With O(state=absent), it runs
    C(lctl set_param -P -d name ...) for the logged parameters that must go. Finally it reads the log again.
    The MGS passes persistent parameters on to every server and client of the file system, now and at each mount.
  - The module never runs a shell. Names are passed to lctl as separate arguments.
author:
  - ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.idempotent
attributes:
  check_mode:
    support: full
    details:
      - Reads the values (or the MGS log) and reports what would change. It runs no C(set_param).
  diff_mode:
    support: full
    details:
      - Gives each parameter before and after. Runtime parameters show one value per device path, and
        persistent ones show the logged value, or null when none is logged.
  idempotent:
    support: full
options:
  params:
    description:
      - The parameters, as a dict of name to value (for example C(osc.*.max_rpcs_in_flight) to V(32)). Names
        are lctl paths and may use wildcards.
      - With O(state=absent), give a list of names. A dict is also accepted, and its values are ignored.
      - Booleans are written as C(1) and C(0); other values are written as their string.
    type: raw
    required: true
  state:
    description:
      - V(present) sets the values. V(absent) deletes persistent parameters from the MGS log
        (C(lctl set_param -P -d)) and needs O(persistent=true), because a runtime parameter cannot be deleted.
    type: str
    choices: [present, absent]
    default: present
  persistent:
    description:
      - V(false) sets runtime values on this node (C(lctl set_param)).
      - V(true) sets persistent values through the MGS (C(lctl set_param -P)). The MGS must run on this node.
    type: bool
    default: false
  lctl_path:
    description: Path of C(lctl). By default it is looked up on E(PATH) and in the sbin directories.
    type: path
notes:
  - Needs root.
  - At runtime a name that matches no device makes C(lctl get_param) fail, and the module fails with it. Set
    runtime parameters after the mount that creates the devices.
  - Runtime mode runs one C(lctl get_param) per parameter, and only if something differs one C(lctl set_param)
    plus one C(get_param) per changed parameter. Persistent mode runs one C(llog_print), and only if something
    differs one C(set_param -P) and a second C(llog_print).
  - Values are compared as the strings lctl prints. A value lctl rewrites (C(max_pages_per_rpc=16M) reads back
    as C(4096)) never compares equal, so give values in the unit lctl prints.
seealso:
  - name: Lustre Operations Manual, Setting Parameters with lctl
    description: set_param, set_param -P, set_param -P -d and llog_print.
    link: https://doc.lustre.org/lustre_manual.xhtml#lustre_configure_multiple_parameters
"""

EXAMPLES = r"""
- name: Client RPC and read-ahead tunings (this node, until the next mount)
  clusterforge.gpu.lctl_param:
    params:
      osc.*.max_pages_per_rpc: 1024
      osc.*.max_rpcs_in_flight: 32
      llite.*.max_read_ahead_mb: 1024

- name: 16 MiB bulk RPCs on every OSS of the file system (on the MGS node)
  clusterforge.gpu.lctl_param:
    params:
      obdfilter.*.brw_size: 16
    persistent: true

- name: Remove a persistent parameter from the MGS log
  clusterforge.gpu.lctl_param:
    params: [osc.*.max_dirty_mb]
    persistent: true
    state: absent
"""

RETURN = r"""
params:
  description: One entry per parameter, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The parameter name as given.
      type: str
    value:
      description: The wanted value as lctl prints it, or null with O(state=absent).
      type: str
    before:
      description:
        - Runtime, a dict of device path to value before the run. Persistent, the logged value before the run,
          or null when none is logged.
      type: raw
    after:
      description: The same after the run (in check mode, the predicted state).
      type: raw
    changed:
      description: Whether this parameter was (or would be) set or deleted.
      type: bool
  sample:
    - name: osc.*.max_rpcs_in_flight
      value: "32"
      before: {osc.lfs-OST0000-osc-ffff8d4b.max_rpcs_in_flight: "8", osc.lfs-OST0001-osc-ffff8d4b.max_rpcs_in_flight: "8"}
      after: {osc.lfs-OST0000-osc-ffff8d4b.max_rpcs_in_flight: "32", osc.lfs-OST0001-osc-ffff8d4b.max_rpcs_in_flight: "32"}
      changed: true
cmd:
  description: The C(lctl set_param) command that was run (or would run, in check mode); null when nothing differed.
  returned: always
  type: str
  sample: /usr/sbin/lctl set_param -P obdfilter.*.brw_size=16
"""

import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils.lustre import (
    lctl_value,
    parse_lctl_get_param,
    parse_llog_params,
)

_NAME_RE = re.compile(r"^[A-Za-z0-9_*?\[\]{},@:.-]+$")
LLOG = ["--device", "MGS", "llog_print", "params"]


def wanted_params(module, raw, state):
    """[(name, value or None)] in the given order; fails on bad input before any command runs."""
    if isinstance(raw, dict):
        items = list(raw.items())
    elif isinstance(raw, list) and state == "absent":
        items = [(n, None) for n in raw]
    else:
        module.fail_json(msg="params must be a dict of name: value%s, not %r"
                             % (" (or, with state=absent, a list of names)" if state == "absent" else "", raw))
    if not items:
        module.fail_json(msg="params is empty")
    out = []
    for name, value in items:
        if not isinstance(name, str) or "." not in name or not _NAME_RE.match(name):
            module.fail_json(msg="%r is not an lctl parameter name (like osc.*.max_rpcs_in_flight)" % (name,))
        if state == "present":
            if value is None or isinstance(value, (dict, list)):
                module.fail_json(msg="%s: the value must be a string, number or boolean, not %r" % (name, value))
            value = lctl_value(value)
            if not value or "\n" in value:
                module.fail_json(msg="%s: the value must be one non-empty line, not %r" % (name, value))
        else:
            value = None
        out.append((name, value))
    return out


def read_runtime(lctl, name):
    rc, out, err = lctl.run(["get_param", name], check_rc=False)
    if rc != 0:
        lctl.fail([lctl.bin, "get_param", name], rc, out, err,
                  what="lctl get_param %s (no device has this parameter: is the file system mounted, or the "
                       "target running?)" % name)
    return dict((d["path"], d["value"]) for d in parse_lctl_get_param(out))


def runtime(module, lctl, wanted):
    entries = []
    for name, value in wanted:
        before = read_runtime(lctl, name)
        changed = any(v != value for v in before.values())
        entries.append({"name": name, "value": value, "before": before,
                        "after": dict((k, value) for k in before) if changed else dict(before), "changed": changed})
    todo = [e for e in entries if e["changed"]]
    cmd = None
    if todo:
        args = ["set_param"] + ["%s=%s" % (e["name"], e["value"]) for e in todo]
        cmd = quote([lctl.bin] + args)
        if not module.check_mode:
            lctl.run(args, what="lctl set_param")
            for e in todo:
                e["after"] = read_runtime(lctl, e["name"])
            off = [e for e in todo if any(v != e["value"] for v in e["after"].values())]
            if off:
                module.fail_json(msg="lctl set_param ran but these values did not stick: %s"
                                     % "; ".join("%s=%s (now %s)" % (e["name"], e["value"],
                                                                     ", ".join(sorted(set(e["after"].values()))))
                                                 for e in off),
                                 changed=True, cmd=cmd, params=entries)
    return entries, cmd


def read_llog(lctl):
    _rc, out, _err = lctl.run(LLOG, what="lctl --device MGS llog_print params (the MGS must run on this node)")
    return parse_llog_params(out)["params"]


def persistent(module, lctl, wanted, state):
    logged = read_llog(lctl)
    entries = []
    for name, value in wanted:
        before = logged.get(name)
        changed = before != value
        entries.append({"name": name, "value": value, "before": before, "after": value if changed else before,
                        "changed": changed})
    todo = [e for e in entries if e["changed"]]
    cmd = None
    if todo:
        if state == "present":
            args = ["set_param", "-P"] + ["%s=%s" % (e["name"], e["value"]) for e in todo]
        else:
            args = ["set_param", "-P", "-d"] + [e["name"] for e in todo]
        cmd = quote([lctl.bin] + args)
        if not module.check_mode:
            lctl.run(args, what="lctl set_param -P")
            logged = read_llog(lctl)
            for e in todo:
                e["after"] = logged.get(e["name"])
            off = [e for e in todo if e["after"] != e["value"]]
            if off:
                module.fail_json(msg="lctl set_param -P ran but the MGS params log does not show: %s"
                                     % "; ".join("%s=%s (logged %s)" % (e["name"], e["value"], e["after"])
                                                 for e in off),
                                 changed=True, cmd=cmd, params=entries)
    return entries, cmd


def main():
    module = AnsibleModule(
        argument_spec=dict(
            params=dict(type="raw", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            persistent=dict(type="bool", default=False),
            lctl_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["state"] == "absent" and not p["persistent"]:
        module.fail_json(msg="state=absent deletes persistent parameters and needs persistent=true; a runtime "
                             "parameter cannot be deleted")
    wanted = wanted_params(module, p["params"], p["state"])
    lctl = ToolRunner(module, "lctl", p["lctl_path"], option="lctl_path")
    if p["persistent"]:
        entries, cmd = persistent(module, lctl, wanted, p["state"])
    else:
        entries, cmd = runtime(module, lctl, wanted)
    result = dict(changed=cmd is not None, params=entries, cmd=cmd)
    if module._diff:
        result["diff"] = dict(before=dict((e["name"], e["before"]) for e in entries),
                              after=dict((e["name"], e["after"]) for e in entries),
                              before_header="MGS params log" if p["persistent"] else "lctl get_param",
                              after_header="MGS params log" if p["persistent"] else "lctl get_param")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
