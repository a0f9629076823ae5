#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: lnet
short_description: Configure the LNet networks of a Lustre node, live and in the persistent configuration
version_added: 1.0.0
description:
  - Writes the persistent LNet configuration (O(config_path), by default C(/etc/lnet.conf)) in the format
    C(lnetctl export --backup) writes and C(lnetctl import) reads, with one local NI per interface. The stock
    C(lnet.service) imports this file when it starts.
  - Where LNet is already running, the module reads the live networks with C(lnetctl net show). It adds
    the networks and interfaces that LNet lacks with C(lnetctl net add --net <net> --if <if>[,<if>]), then
    reads them back and fails if they are still missing.
  - Networks and interfaces that LNet has but O(networks) does not name are left alone, and LNet is never
    reloaded. Removing a network, or reloading LNet, cuts every Lustre connection of the node.
  - Where LNet is not running yet (C(lnetctl net show) reports the network down or the LNet device missing),
    and O(service) is not set, only the file is written.
  - With O(service) (C(lnet.service)), the module also manages the systemd unit that loads LNet and imports
    O(config_path). It reloads systemd where the unit file is new or changed on disk, enables the unit, and where
    LNet is not configured, starts the unit (or restarts it, where the unit is active but LNet was unconfigured
    by hand), then reads the networks back, adds any that the import missed, and fails if LNet is still not up.
    A unit is never restarted while LNet is configured.
author:
  - ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.idempotent
attributes:
  check_mode:
    support: full
    details:
      - Compares the file and the live networks and reports what would change. It writes no file and runs no
        C(lnetctl net add).
  diff_mode:
    support: full
    details:
      - Gives the file's content before and after, and the live networks (net to interfaces) before and after.
  idempotent:
    support: full
options:
  networks:
    description:
      - The LNet networks of this node. Each net name appears once.
    type: list
    elements: dict
    required: true
    suboptions:
      net:
        description: LNet network name (V(o2ib0), V(tcp0), V(tcp1)). lnetctl shows V(o2ib0) as V(o2ib).
        type: str
        required: true
      interfaces:
        description: Interfaces of the network (V(ib0), V(eth1)). Several interfaces make a multi-rail network.
        type: list
        elements: str
        required: true
  persistent:
    description:
      - Write O(config_path). With V(false), only the live networks are managed.
    type: bool
    default: true
  config_path:
    description: The persistent LNet configuration that C(lnet.service) imports.
    type: path
    default: /etc/lnet.conf
  lnetctl_path:
    description: Path of C(lnetctl). By default it is looked up on E(PATH) and in the sbin directories.
    type: path
  service:
    description:
      - The systemd unit that configures LNet and imports O(config_path) when it starts (the Lustre packages
        ship C(lnet.service)). The module enables it and starts it where LNet is not configured.
      - Where LNet is configured but the unit is not active (LNet brought up another way, for example by
        C(modprobe lnet) options and C(lctl network up)), the unit is enabled for the next boot but not started
        now, because its start would import networks that already exist. The result warns.
      - Not set (the default), the module does not touch systemd.
    type: str
notes:
  - Needs root.
  - One C(lnetctl net show) call per run. One C(lnetctl net add) call for each network that lacks interfaces,
    followed by a second C(lnetctl net show) to read the result back. With O(service), one C(systemctl show)
    of the unit, and a second C(lnetctl net show) after a start.
  - The file is written with mode C(0644) and a header saying that Ansible manages it. Comments and other
    sections (peers, routes, global settings) that were in the file are replaced.
seealso:
  - module: ansible.builtin.systemd_service
  - name: Lustre Operations Manual, Configuring LNet via lnetctl
    description: lnetctl net add/show, export and import.
    link: https://doc.lustre.org/lustre_manual.xhtml#lnet_config.lnetctl
"""

EXAMPLES = r"""
- name: LNet on two InfiniBand ports (multi-rail) and one Ethernet interface
  clusterforge.gpu.lnet:
    networks:
      - net: o2ib0
        interfaces: [ib0, ib1]
      - net: tcp0
        interfaces: [eth1]

# The file, then the unit: on a new node lnet.service is enabled and started, and imports the file just written.
# Where the unit is active but LNet was unconfigured by hand, the unit is restarted. A configured LNet is never
# restarted: missing interfaces are added live.
- name: Configure LNet and its unit
  clusterforge.gpu.lnet:
    networks: [{net: o2ib0, interfaces: [ib0]}]
    service: lnet.service
"""

RETURN = r"""
running:
  description:
    - Whether LNet is configured (running) at the end of the run, read with C(lnetctl net show) (after O(service)
      started it, where it did). With V(false), only the file (and the unit) were managed; in check mode, also
      where the unit would be started.
  returned: always
  type: bool
  sample: true
config_changed:
  description: Whether O(config_path) was (or, in check mode, would be) rewritten.
  returned: always
  type: bool
added:
  description: The interfaces added to the running LNet (or that would be added, in check mode), per network.
  returned: always
  type: list
  elements: dict
  sample: [{net: o2ib0, interfaces: [ib1]}]
networks:
  description:
    - The live networks after the run, as C(lnetctl net show) prints them (net type to its local NIs with nid,
      status and interfaces). In check mode, the networks read before the run. Empty when LNet is not running.
  returned: always
  type: dict
  sample: {lo: [{nid: 0@lo, status: up, interfaces: []}], o2ib: [{nid: 10.10.0.5@o2ib, status: up, interfaces: [ib0]}]}
cmd:
  description: The C(lnetctl net add) commands that were run (or would run, in check mode).
  returned: always
  type: list
  elements: str
  sample: ["/usr/sbin/lnetctl net add --net o2ib0 --if ib1"]
service:
  description:
    - What was (or would be, in check mode) done to O(service). Absent without O(service).
    - C(action) is V(started), V(restarted) or V(none). C(enabled) is whether the unit is enabled after the run.
  returned: when O(service) is set
  type: dict
  sample: {name: lnet.service, daemon_reloaded: false, enabled: true, enabled_changed: false, action: started}
msg:
  description: A summary of what was (or would be) done.
  returned: always
  type: str
  sample: added o2ib0(ib1)
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.clusterforge.gpu.plugins.module_utils._files import write_atomic
from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils.lustre import (
    lnet_config_text,
    lnet_missing,
    lnet_net_name,
    parse_lnetctl_net_show,
)

HEADER = ("Managed by Ansible (clusterforge.gpu.lnet): local changes are overwritten.\n"
          "LNet networks (lnetctl import format, as written by `lnetctl export --backup`); lnet.service imports "
          "this file.")
MODE = 0o644
# lnetctl's YAML error when LNet is not configured (ENETDOWN) or its device/module is absent (ENODEV, ENOENT)
_NOT_RUNNING_RE = re.compile(r"errno:\s*-(100|19|2)\b|Network is down|No such device|unconfigured", re.I)
_NET_RE = re.compile(r"^[a-z][a-z0-9]*[a-z](\d+)?$")


def check_networks(networks):
    problems = []
    seen = set()
    for pos, n in enumerate(networks):
        if not _NET_RE.match(n["net"]):
            problems.append("networks[%d]: %r is not an LNet network name (o2ib0, tcp0, tcp1...)" % (pos, n["net"]))
        if not n["interfaces"] or not all(i and re.match(r"^[^\s,()]+$", i) for i in n["interfaces"]):
            problems.append("networks[%d] (%s): needs one or more interface names" % (pos, n["net"]))
        key = lnet_net_name(n["net"])
        if key in seen:
            problems.append("networks[%d]: %s is given twice" % (pos, n["net"]))
        seen.add(key)
    return problems


def read_live(module, lnetctl):
    """(running, parsed networks) from one `lnetctl net show`."""
    rc, out, err = lnetctl.run(["net", "show"], check_rc=False)
    if rc != 0:
        if _NOT_RUNNING_RE.search((out or "") + (err or "")):
            return False, {}
        lnetctl.fail([lnetctl.bin, "net", "show"], rc, out, err, what="lnetctl net show")
    return True, parse_lnetctl_net_show(out)


def live_view(nets):
    """net type -> interfaces, for the diff."""
    return dict((net, sorted(i for ni in nis for i in ni.get("interfaces") or [])) for net, nis in nets.items())


# UnitFileState values that need no `systemctl enable` (static, generated and indirect units cannot be enabled)
_ENABLED_STATES = ("enabled", "enabled-runtime", "static", "indirect", "generated", "alias", "transient")
_ACTIVE_STATES = ("active", "activating", "reloading")
_UNIT_DIRS = ("/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/lib/systemd/system",
              "/usr/lib/systemd/system")


def unit_state(systemctl, unit):
    """LoadState, ActiveState, UnitFileState and NeedDaemonReload of a unit, from one `systemctl show`."""
    _rc, out, _err = systemctl.run(["show", "--property=LoadState,ActiveState,UnitFileState,NeedDaemonReload",
                                    "--", unit], what="systemctl show %s" % unit)
    state = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    for key in ("LoadState", "ActiveState", "UnitFileState", "NeedDaemonReload"):
        state.setdefault(key, "")
    return state


def unit_file_exists(unit):
    return any(os.path.exists(os.path.join(d, unit)) for d in _UNIT_DIRS)


def prepare_unit(module, systemctl, unit):
    """Reload systemd where the unit is new or changed on disk, and enable it. Returns (state, report)."""
    report = dict(name=unit, daemon_reloaded=False, enabled_changed=False, action="none")
    state = unit_state(systemctl, unit)
    if state["LoadState"] == "not-found" or state["NeedDaemonReload"] == "yes":
        if state["LoadState"] == "not-found" and not unit_file_exists(unit):
            module.fail_json(msg="the unit %s is not installed (no unit file in %s); install the Lustre packages "
                                 "that ship it, or set service to the unit that configures LNet"
                                 % (unit, ", ".join(_UNIT_DIRS)), changed=False)
        report["daemon_reloaded"] = True
        if not module.check_mode:
            systemctl.run(["daemon-reload"], what="systemctl daemon-reload")
            state = unit_state(systemctl, unit)
            if state["LoadState"] == "not-found":
                module.fail_json(msg="systemd does not find %s after a daemon-reload" % unit, changed=False)
    if state["LoadState"] == "masked" or state["UnitFileState"].startswith("masked"):
        module.fail_json(msg="%s is masked: unmask it (systemctl unmask %s) so that LNet can start at boot"
                             % (unit, unit), changed=False)
    if state["UnitFileState"] not in _ENABLED_STATES:
        report["enabled_changed"] = True
        if not module.check_mode:
            systemctl.run(["enable", "--", unit], what="systemctl enable %s" % unit)
    report["enabled"] = True
    return state, report


def main():
    module = AnsibleModule(
        argument_spec=dict(
            networks=dict(type="list", elements="dict", required=True, options=dict(
                net=dict(type="str", required=True),
                interfaces=dict(type="list", elements="str", required=True),
            )),
            persistent=dict(type="bool", default=True),
            config_path=dict(type="path", default="/etc/lnet.conf"),
            lnetctl_path=dict(type="path"),
            service=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    networks = p["networks"]
    problems = check_networks(networks)
    if p["service"] is not None and not re.match(r"^[A-Za-z0-9:_.@-]+\.service$", p["service"]):
        problems.append("service: %r is not a systemd service unit name (lnet.service)" % p["service"])
    if problems:
        module.fail_json(msg="invalid input: %s" % "; ".join(problems), changed=False)

    diffs = []
    config_changed = False
    if p["persistent"]:
        path = p["config_path"]
        wanted = lnet_config_text(networks, HEADER)
        current = None
        if os.path.exists(path):
            with open(path, "rb") as f:
                current = to_text(f.read(), errors="surrogate_or_strict")
        mode_wrong = current is not None and (os.stat(path).st_mode & 0o7777) != MODE
        config_changed = current != wanted or mode_wrong
        if config_changed and not module.check_mode:
            if not os.path.isdir(os.path.dirname(path) or "."):
                module.fail_json(msg="the directory of %s does not exist" % path, changed=False)
            write_atomic(module, path, wanted, mode=MODE)
        diffs.append(dict(before=current or "", after=wanted, before_header=path, after_header=path))

    lnetctl = ToolRunner(module, "lnetctl", p["lnetctl_path"], option="lnetctl_path")
    running, live = read_live(module, lnetctl)
    service = None
    if p["service"]:
        unit = p["service"]
        systemctl = ToolRunner(module, "systemctl")
        state, service = prepare_unit(module, systemctl, unit)
        active = state["ActiveState"] in _ACTIVE_STATES
        if not running:
            # The unit imports config_path when it starts. Active with LNet unconfigured: restart (stop runs
            # `lnetctl lnet unconfigure`, harmless on an unconfigured LNet; start configures and imports).
            service["action"] = "restarted" if active else "started"
            if not module.check_mode:
                verb = "restart" if active else "start"
                systemctl.run([verb, "--", unit], what="systemctl %s %s" % (verb, unit))
                running, live = read_live(module, lnetctl)
                if not running:
                    module.fail_json(msg="%s %s but LNet is still not configured (lnetctl net show): see "
                                         "journalctl -u %s" % (unit, service["action"], unit),
                                     changed=True, service=service, running=False, config_changed=config_changed)
        elif not active:
            module.warn("LNet is configured but %s is not active (LNet was brought up another way): the unit "
                        "is enabled for the next boot and not started now" % unit)
        if module._diff:
            before = "enabled: %s\nLNet configured: %s\n" % (str(not service["enabled_changed"]).lower(),
                                                             str(service["action"] == "none").lower())
            diffs.append(dict(before_header=unit, after_header=unit, before=before,
                              after="enabled: true\nLNet configured: true\n"))
    added, cmds = [], []
    after = live
    if running:
        for item in lnet_missing(networks, live):
            args = ["net", "add", "--net", item["net"], "--if", ",".join(item["missing"])]
            cmds.append(quote([lnetctl.bin] + args))
            added.append({"net": item["net"], "interfaces": item["missing"]})
            if not module.check_mode:
                lnetctl.run(args, what="lnetctl net add --net %s" % item["net"])
        if added and not module.check_mode:
            _running, after = read_live(module, lnetctl)
            still = lnet_missing(networks, after)
            if still:
                module.fail_json(msg="lnetctl net add ran but LNet still lacks %s"
                                     % ", ".join("%s(%s)" % (s["net"], ",".join(s["missing"])) for s in still),
                                 changed=True, cmd=cmds, networks=after, added=added, running=True,
                                 config_changed=config_changed)
        if module._diff:
            predicted = live_view(live)
            for a in added:
                key = lnet_net_name(a["net"])
                predicted[key] = sorted(set(predicted.get(key, [])) | set(a["interfaces"]))
            diffs.append(dict(before=live_view(live), after=predicted if module.check_mode else live_view(after),
                              before_header="lnetctl net show", after_header="lnetctl net show"))

    would = "would " if module.check_mode else ""
    parts = []
    if service and service["enabled_changed"]:
        parts.append(("would enable " if module.check_mode else "enabled ") + service["name"])
    if service and service["action"] != "none":
        verb = {"started": "start", "restarted": "restart"}[service["action"]] if would else service["action"]
        parts.append("%s%s %s (it imports %s)" % (would, verb, service["name"], p["config_path"]))
    if added:
        parts.append(("would add " if module.check_mode else "added ") + ", ".join(
            "%s(%s)" % (a["net"], ",".join(a["interfaces"])) for a in added))
    if not running and not service:
        parts.append("LNet is not running: lnet.service imports %s when it starts" % p["config_path"])
    msg = "; ".join(parts) or "LNet has every network"
    changed = config_changed or bool(added) or bool(service and (service["enabled_changed"]
                                                                 or service["action"] != "none"))
    result = dict(changed=changed, running=running, config_changed=config_changed,
                  added=added, networks=after, cmd=cmds, msg=msg)
    if service:
        result["service"] = service
    if module._diff:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
