#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: package_check
short_description: Report which of the wanted Debian packages are not installed, from one dpkg-query call
description:
  - Reads the installed state of the packages in O(names) with one C(dpkg-query -W) call and returns the specs
    that are not satisfied in RV(missing). It never changes anything.
  - It is the collection's one reader of the dpkg database (the reader itself is shared with
    M(clusterforge.gpu.nvidia_driver_state)). The roles install through
    M(clusterforge.gpu.packages), which runs it first and the package manager only for RV(missing). On a node
    where every package is present this costs one short C(dpkg-query), not an C(apt) module run that opens the
    package cache (about a second of CPU per node and role). Use it directly to read installed versions.
  - A spec is C(name), C(name=version) (the exact version) or C(name=version*) (a version that starts with it), as
    C(ansible.builtin.apt) takes them. A spec it does not understand (a group, a comparison) is reported missing, so
    that the package manager decides.
  - Where C(dpkg-query) does not exist (not a Debian family host) every spec is reported missing and RV(supported)
    is false; the package manager's own idempotence then applies.
version_added: "1.0.0"
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.INFO_MODULE
options:
  names:
    description: The package specs the role wants present.
    type: list
    elements: str
    required: true
  dpkg_query_path:
    description: Path to C(dpkg-query). By default it is looked up on C(PATH).
    type: path
seealso:
  - module: clusterforge.gpu.packages
  - module: ansible.builtin.apt
  - module: ansible.builtin.package_facts
"""

EXAMPLES = r"""
- name: Read the installed version of the driver libraries
  clusterforge.gpu.package_check:
    names: [libnvidia-ml1]
  register: __nvidia_driver_register_version_package

- name: Read which Slurm packages are missing (clusterforge.gpu.packages installs them)
  clusterforge.gpu.package_check:
    names: [munge, slurmd, slurm-client]
  register: __slurm_compute_register_packages
"""

RETURN = r"""
missing:
  description: The specs from O(names) that are not satisfied, in their order.
  returned: always
  type: list
  elements: str
  sample: ["slurmd", "datacenter-gpu-manager-4-core=1:4.2.3*"]
installed:
  description: Installed version of each named package that is installed.
  returned: always
  type: dict
  sample: {"munge": "0.5.15-2", "slurmd": "22.05.8-4+deb12u3"}
supported:
  description: Whether C(dpkg-query) was found (false means every spec is reported missing).
  returned: always
  type: bool
cmd:
  description: The command that was run.
  returned: when supported
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import quote
# The parsers live in module_utils/packages.py (the collection's one dpkg reader); the names stay reachable here.
from ansible_collections.clusterforge.gpu.plugins.module_utils.packages import (  # pylint: disable=unused-import
    FORMAT, SPEC, installed_versions, parse_dpkg_query, parse_spec, satisfied,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            names=dict(type="list", elements="str", required=True),
            dpkg_query_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    names = [n for n in module.params["names"] if n and n.strip()]
    parsed = dict((spec, parse_spec(spec)) for spec in names)
    query = sorted(set(p[0] for p in parsed.values() if p))
    supported, installed, argv = installed_versions(module, query, module.params["dpkg_query_path"])
    if not supported:
        module.exit_json(changed=False, missing=names, installed={}, supported=False)

    cmd = quote(argv) if argv else ""
    missing = [spec for spec in names if not parsed[spec] or not satisfied(parsed[spec], installed)]
    wanted = set(query)
    module.exit_json(changed=False, missing=missing, supported=True, cmd=cmd,
                     installed=dict((k, v) for k, v in installed.items() if k in wanted))


if __name__ == "__main__":
    main()
