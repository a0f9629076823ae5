#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: tool_info
short_description: Find programs on a host the way the collection's modules find them
version_added: "1.0.0"
description:
  - Looks up each program of O(names) with the collection's one tool finder, the one every module of the collection
    uses. An explicit path from O(paths) must exist and be executable; otherwise the program is looked up on
    C(PATH), in C(PATH) order, then in C(/sbin), C(/usr/sbin) and C(/usr/local/sbin).
  - Returns where each was found and which are missing. With O(required=true) a missing program fails the task with
    one message that names every missing program and adds O(hint), before anything else is done.
  - The roles use it where they need a vendor program they do not install themselves (C(nvidia-mig-parted),
    C(mlnx_qos)), instead of a C(which) command.
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.INFO_MODULE
options:
  names:
    description: The programs to find (bare names).
    type: list
    elements: str
    required: true
  paths:
    description:
      - "Explicit paths for some of the programs, C({name: path}). A path given here that does not exist fails the
        task (whatever O(required) is), naming it."
    type: dict
    default: {}
  required:
    description: Fail when a program is not found.
    type: bool
    default: false
  hint:
    description: Added to the failure message when O(required=true) and a program is missing (what provides it).
    type: str
    default: ""
seealso:
  - module: clusterforge.gpu.package_check
"""

EXAMPLES = r"""
- name: Refuse a RoCE fabric without the vendor QoS tool
  clusterforge.gpu.tool_info:
    names: [mlnx_qos]
    required: true
    hint: Install MLNX_OFED / DOCA-OFED or the mlnx-tools package.

- name: Where is nvidia-smi
  clusterforge.gpu.tool_info:
    names: [nvidia-smi]
  register: __tools
"""

RETURN = r"""
found:
  description: Each program of O(names) and its path, or null when it was not found.
  returned: always
  type: dict
  sample: {"mlnx_qos": "/usr/bin/mlnx_qos", "nvidia-mig-parted": null}
missing:
  description: The programs of O(names) that were not found, in their order.
  returned: always
  type: list
  elements: str
  sample: ["nvidia-mig-parted"]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import find_tool


def main():
    module = AnsibleModule(
        argument_spec=dict(
            names=dict(type="list", elements="str", required=True),
            paths=dict(type="dict", default={}),
            required=dict(type="bool", default=False),
            hint=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    names = [n.strip() for n in module.params["names"] if n and n.strip()]
    bad = [n for n in names if "/" in n]
    if bad:
        module.fail_json(msg="names takes bare program names (give a path in paths): %s" % ", ".join(bad))
    unknown = sorted(set(module.params["paths"]) - set(names))
    if unknown:
        module.fail_json(msg="paths names programs that are not in names: %s" % ", ".join(unknown))
    found = {}
    for name in names:
        override = module.params["paths"].get(name)
        found[name] = find_tool(module, name, str(override) if override else None, required=False,
                                option="paths.%s" % name)
    missing = [n for n in names if found[n] is None]
    if missing and module.params["required"]:
        hint = module.params["hint"].strip()
        module.fail_json(msg="%s not found on this host (looked on PATH and in /sbin, /usr/sbin, /usr/local/sbin)%s"
                         % (", ".join(missing), (". " + hint) if hint else ""), found=found, missing=missing)
    module.exit_json(changed=False, found=found, missing=missing)


if __name__ == "__main__":
    main()
