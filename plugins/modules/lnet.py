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
    only the file is written. Start C(lnet.service) after this module, so that it imports the file just written.
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
notes:
  - Needs root.
  - One C(lnetctl net show) call per run. One C(lnetctl net add) call for each network that lacks interfaces,
    followed by a second C(lnetctl net show) to read the result back.
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

# The file first, then the service: on a new node lnet.service imports the file just written.
- name: Configure LNet
  clusterforge.gpu.lnet:
    networks: [{net: o2ib0, interfaces: [ib0]}]
- name: Enable and start LNet
  ansible.builtin.systemd_service:
    name: lnet.service
    enabled: true
    state: started
"""

RETURN = r"""
running:
  description: Whether LNet was running when the module read it. With V(false), only the file was managed.
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
        ),
        supports_check_mode=True,
    )
    p = module.params
    networks = p["networks"]
    problems = check_networks(networks)
    if problems:
        module.fail_json(msg="invalid networks: %s" % "; ".join(problems), changed=False)

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

    if not running:
        msg = "LNet is not running: lnet.service imports %s when it starts" % p["config_path"]
    elif added:
        msg = ("would add " if module.check_mode else "added ") + ", ".join(
            "%s(%s)" % (a["net"], ",".join(a["interfaces"])) for a in added)
    else:
        msg = "LNet has every network"
    result = dict(changed=config_changed or bool(added), running=running, config_changed=config_changed,
                  added=added, networks=after, cmd=cmds, msg=msg)
    if module._diff:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
