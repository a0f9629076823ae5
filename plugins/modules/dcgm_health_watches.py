#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: dcgm_health_watches
short_description: Make sure NVIDIA DCGM's health watches are on (dcgmi health -f, -s)
version_added: "1.0.0"
description:
  - Reads the health watches the DCGM host engine has (C(dcgmi health -f)) and, when a watch of O(watches) is not
    on, sets them with C(dcgmi health -s <watches>) (the letters exactly as given), reads them back and fails when a
    wanted watch is still off.
  - Watches live in C(nv-hostengine)'s memory and are lost whenever C(nvidia-dcgm) restarts. The collection's role
    clusterforge.gpu.dcgm also installs a systemd unit that sets them at every boot and after every host engine
    restart; this module sets and checks them now.
  - Only the watches of O(watches) matter. Other watches that are on leave the module unchanged; but DCGM replaces
    the whole set when the module sets it, so a watch on before and not in O(watches) is off afterwards.
  - The host engine may still be starting (C(nvidia-dcgm) just restarted), so a C(dcgmi health -f) that fails is
    tried again O(retries) times, O(delay_seconds) apart, before the module fails.
  - DCGM has no HTTP health API; this module talks to the host engine through C(dcgmi) only.
author:
  - ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.dcgm
attributes:
  check_mode:
    support: full
    details:
      - Reads the watches and reports the ones that are off in RV(missing) with C(changed=true); sets nothing.
  diff_mode:
    support: full
    details:
      - "Shows every watch row as a line C(PCIe: on) or C(PCIe: off), before and after (predicted in check mode)."
options:
  watches:
    description:
      - The watches that must be on, in the letters of C(dcgmi health -s). V(a) for all (see below), or letters of C(pmitndx),
        each once. C(p) PCIe, C(m) memory, C(i) InfoROM, C(t) thermal and power, C(n) NVLink, C(d) driver, C(x)
        NvSwitch (fatal and non-fatal).
      - V(a) requires the rows every C(dcgmi health -s a) turns on (PCIe, Memory, InfoROM, Thermal, Power, NVLINK);
        DCGM 4 also turns on the NvSwitch rows, and no C(dcgmi) turns on Driver.
      - Anything else fails the module before any command runs.
    type: str
    required: true
  retries:
    description:
      - How many more times a failing C(dcgmi health -f) is run (the host engine is still starting) before the
        module fails. V(0) tries once.
    type: int
    default: 6
  delay_seconds:
    description:
      - Seconds between two tries of C(dcgmi health -f).
    type: int
    default: 5
notes:
  - Requires a running C(nv-hostengine) (the C(nvidia-dcgm) service).
  - The C(dcgmi) of DCGM 3 and 4 (as its source reads) accepts only V(a), C(p), C(m), C(i), C(t) and C(n) for C(-s);
    where C(dcgmi) rejects a letter (C(d), C(x)), the module fails with its message.
seealso:
  - module: clusterforge.gpu.dcgm_diag
  - name: DCGM health monitoring
    description: Health watches and checks (C(dcgmi health)).
    link: https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/feature-overview.html
"""

EXAMPLES = r"""
- name: Every health watch on (sets the missing ones)
  clusterforge.gpu.dcgm_health_watches:
    watches: a

- name: PCIe, memory and thermal/power watches on, right after restarting nvidia-dcgm
  clusterforge.gpu.dcgm_health_watches:
    watches: pmt
    dcgmi_path: /usr/bin/dcgmi
    retries: 12
    delay_seconds: 5
  register: watches

- name: Show the watches
  ansible.builtin.debug:
    var: watches.watches
"""

RETURN = r"""
watches:
  description:
    - Every row of C(dcgmi health -f), true when the watch is on, after the module ran (in check mode, as read, since
      nothing is set).
  returned: always
  type: dict
  sample: {"PCIe": true, "NVLINK": true, "Memory": true, "SM": false, "InfoROM": true, "Thermal": true,
           "Power": true, "Driver": false, "NvSwitch NF": true, "NvSwitch F": true}
missing:
  description: The wanted rows that were not on before the module ran (empty when nothing was to set).
  returned: always
  type: list
  elements: str
  sample: ["Thermal", "Power"]
cmd:
  description: The command that set the watches (in check mode, the one that would run).
  returned: when a wanted watch was off
  type: str
  sample: /usr/bin/dcgmi health -s pmt
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils.dcgm import (
    WATCH_LETTERS,
    hostengine_args,
    parse_health_watches,
    validate_watch_letters,
    watch_rows,
)


def _key(row):
    return row.strip().lower()


def off_rows(watches, wanted):
    """The wanted rows that are not on (a row dcgmi did not print counts as off)."""
    on = set(_key(row) for row, state in watches.items() if state)
    return [row for row in wanted if _key(row) not in on]


def read_watches(module, dcgmi, host_args, tries, delay):
    """(watches, stdout) of ``dcgmi health -f``; a failing run is tried again (the host engine may be starting)."""
    args = ["health"] + host_args + ["-f"]
    for attempt in range(1, tries + 1):
        rc, out, err = dcgmi.run(args, check_rc=False)
        if rc == 0:
            break
        if attempt < tries:
            time.sleep(delay)
    else:
        module.fail_json(msg="dcgmi health -f failed %d time(s), %s s apart (is the DCGM host engine, nvidia-dcgm, "
                             "running?); last rc=%s: %s" % (tries, delay, rc, (err or out or "").strip()[:2000]),
                         cmd=quote([dcgmi.bin] + args), rc=rc, stdout=out, stderr=err)
    parsed = parse_health_watches(out)
    if not parsed["watches"]:
        module.fail_json(msg="dcgmi health -f printed no health watch rows: %s"
                         % "; ".join(parsed["errors"])[:2000], cmd=quote([dcgmi.bin] + args), stdout=out, stderr=err)
    return parsed["watches"], out


def predict(watches, letters, wanted):
    """The rows after ``dcgmi health -s <letters>``: the wanted rows on; DCGM replaces the set, so the other rows go
    off, except for ``a`` whose extra rows depend on the DCGM version (kept as they are)."""
    keep = letters == "a"
    wanted_keys = set(_key(row) for row in wanted)
    after = dict((row, (_key(row) in wanted_keys) or (keep and state)) for row, state in watches.items())
    printed = set(_key(row) for row in watches)
    for row in wanted:
        if _key(row) not in printed:
            after[row] = True
    return after


def diff(before, after):
    def render(watches):
        return "".join("%s: %s\n" % (row, "on" if state else "off") for row, state in watches.items())
    return {"before_header": "dcgmi health -f", "after_header": "dcgmi health -f",
            "before": render(before), "after": render(after)}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            watches=dict(type="str", required=True),
            dcgmi_path=dict(type="path"),
            host=dict(type="str"),
            retries=dict(type="int", default=6),
            delay_seconds=dict(type="int", default=5),
        ),
        supports_check_mode=True,
    )
    p = module.params
    letters = p["watches"]
    reason = validate_watch_letters(letters)
    if reason:
        module.fail_json(msg="watches must be a, or letters of %s each at most once; got %r: %s"
                         % (WATCH_LETTERS, letters, reason))
    if p["retries"] < 0:
        module.fail_json(msg="retries must be 0 or more, got %s" % p["retries"])
    if p["delay_seconds"] < 0:
        module.fail_json(msg="delay_seconds must be 0 or more, got %s" % p["delay_seconds"])
    wanted = watch_rows(letters)
    tries = p["retries"] + 1

    try:
        host_args = hostengine_args(p["host"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    dcgmi = ToolRunner(module, "dcgmi", p["dcgmi_path"], option="dcgmi_path")
    before, _out = read_watches(module, dcgmi, host_args, tries, p["delay_seconds"])
    missing = off_rows(before, wanted)
    result = dict(changed=False, watches=before, missing=missing)
    if not missing:
        if module._diff:
            result["diff"] = diff(before, before)
        module.exit_json(**result)

    set_args = ["health"] + host_args + ["-s", letters]
    result.update(changed=True, cmd=quote([dcgmi.bin] + set_args))
    if module.check_mode:
        if module._diff:
            result["diff"] = diff(before, predict(before, letters, wanted))
        module.exit_json(**result)

    rc, out, err = dcgmi.run(set_args, check_rc=False)
    if rc != 0:
        dcgmi.fail([dcgmi.bin] + set_args, rc, out, err, what="dcgmi health -s %s" % letters, watches=before,
                   missing=missing)
    after, out = read_watches(module, dcgmi, host_args, tries, p["delay_seconds"])
    result["watches"] = after
    if module._diff:
        result["diff"] = diff(before, after)
    still = off_rows(after, wanted)
    if still:
        module.fail_json(msg="DCGM health watches still not on after dcgmi health -s %s: %s. dcgmi health -f: %s"
                         % (letters, ", ".join(still), out.strip()), stdout=out, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
