#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: lustre_device_info
short_description: Report the Lustre obd devices of this node (lctl dl), and check that targets are UP
version_added: "1.0.0"
description:
  - Runs C(lctl dl) once and returns every obd device it lists, with its index, status, type, name, UUID and
    reference count.
  - With O(expect_up), checks that each given target is started, and fails naming every one that is not. A target is
    started when C(lctl dl) lists its devices with status C(UP). For an MGS that is the C(mgs) device C(MGS); for an
    MDT, the C(mdt) device of its name; for an OST, the C(obdfilter) device of its name; for a combined MGS and MDT0,
    both the C(mgs) and the C(mdt) device.
  - It never changes anything.
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.INFO_MODULE
options:
  expect_up:
    description:
      - Targets that must be UP. Each is its name and its type, as in M(clusterforge.gpu.lustre_target).
      - When one is not UP the module fails, naming each missing device and the status C(lctl dl) shows for it, and
        listing every device it found.
    type: list
    elements: dict
    default: []
    suboptions:
      svname:
        description: The name the target registers under (V(MGS), V(lfs-MDT0000), V(lfs-OST0001)).
        type: str
        required: true
      type:
        description: Target type. V(mgs_mdt) is a combined MGS and MDT0.
        type: str
        required: true
        choices: [mgs, mgs_mdt, mdt, ost]
  lctl_path:
    description: Path of C(lctl). By default it is looked up on E(PATH) and in the sbin directories.
    type: path
notes:
  - Runs exactly one C(lctl dl). Needs the Lustre modules loaded; without them C(lctl dl) fails and so does the module.
  - Status C(UP) means set up. C(lctl dl) also shows C(ST) (stopping), C(IN) (inactive) and C(AT) (attached, not set
    up).
seealso:
  - module: clusterforge.gpu.lustre_target
  - name: Lustre Operations Manual, Lustre Operations
    description: Checking devices with lctl dl.
    link: https://doc.lustre.org/lustre_manual.xhtml#lustreoperations
"""

EXAMPLES = r"""
- name: The targets of this server are UP
  clusterforge.gpu.lustre_device_info:
    expect_up:
      - {svname: lfs-MDT0000, type: mgs_mdt}
      - {svname: lfs-OST0000, type: ost}
      - {svname: lfs-OST0001, type: ost}

- name: List the Lustre devices
  clusterforge.gpu.lustre_device_info:
  register: lustre_devices

- name: Show the OSTs this server runs
  ansible.builtin.debug:
    msg: "{{ lustre_devices.devices | selectattr('type', 'equalto', 'obdfilter') | map(attribute='name') | list }}"
"""

RETURN = r"""
devices:
  description: Every obd device C(lctl dl) lists, in its order.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: Device number.
      type: int
      sample: 3
    status:
      description: V(UP), V(ST) (stopping), V(IN) (inactive), V(AT) (attached) or V(--).
      type: str
      sample: UP
    type:
      description: obd type (V(mgs), V(mdt), V(obdfilter), V(osd-ldiskfs), V(osc), V(mdc)...).
      type: str
      sample: obdfilter
    name:
      description: Device name.
      type: str
      sample: lfs-OST0000
    uuid:
      description: Device UUID.
      type: str
      sample: lfs-OST0000_UUID
    refcount:
      description: Reference count.
      type: int
      sample: 5
  sample:
    - {index: 1, status: UP, type: mgs, name: MGS, uuid: MGS, refcount: 7}
    - {index: 3, status: UP, type: obdfilter, name: lfs-OST0000, uuid: lfs-OST0000_UUID, refcount: 5}
not_up:
  description: The devices of O(expect_up) that are not UP (empty when all are). Returned on failure too.
  returned: always
  type: list
  elements: dict
  contains:
    svname:
      description: The target, as given in O(expect_up).
      type: str
    type:
      description: The target type, as given in O(expect_up).
      type: str
    obd_type:
      description: The obd type of the device that is missing (V(mgs), V(mdt) or V(obdfilter)).
      type: str
    name:
      description: The name of the device that is missing.
      type: str
    status:
      description: What C(lctl dl) shows for it, or null when it does not list it.
      type: str
  sample: [{svname: lfs-OST0001, type: ost, obd_type: obdfilter, name: lfs-OST0001, status: null}]
cmd:
  description: The C(lctl dl) command that was run.
  returned: always
  type: str
  sample: /usr/sbin/lctl dl
msg:
  description: A summary.
  returned: always
  type: str
  sample: all 3 expected targets are UP
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils.lustre import (
    TARGET_TYPES,
    parse_lctl_dl,
    targets_not_up,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            expect_up=dict(type="list", elements="dict", default=[], options=dict(
                svname=dict(type="str", required=True),
                type=dict(type="str", required=True, choices=list(TARGET_TYPES)),
            )),
            lctl_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    lctl = ToolRunner(module, "lctl", p["lctl_path"], option="lctl_path")
    args = ["dl"]
    cmd = quote([lctl.bin] + args)
    rc, out, err = lctl.run(args, check_rc=False)
    if rc != 0:
        lctl.fail([lctl.bin] + args, rc, out, err, what="lctl dl", devices=[], not_up=[])
    devices = parse_lctl_dl(out)
    expect = p["expect_up"] or []
    not_up = targets_not_up(expect, devices)
    if not_up:
        module.fail_json(
            msg="not UP in lctl dl: %s. lctl dl lists: %s"
                % (", ".join("%s %s (%s)" % (d["obd_type"], d["name"], d["status"] or "not listed") for d in not_up),
                   ", ".join("%s %s %s" % (d["status"], d["type"], d["name"]) for d in devices) or "no devices"),
            changed=False, devices=devices, not_up=not_up, cmd=cmd)
    msg = ("all %d expected targets are UP" % len(expect)) if expect else "%d devices" % len(devices)
    module.exit_json(changed=False, devices=devices, not_up=[], cmd=cmd, msg=msg)


if __name__ == "__main__":
    main()
