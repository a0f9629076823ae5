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
  - It is the collection's one reader of the dpkg database. The roles install through
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

import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote

# dpkg package names: lower case letters, digits, + - . (at least two characters, starting alphanumeric); an
# optional :arch qualifier.
SPEC = re.compile(r"^(?P<name>[a-z0-9][a-z0-9+.\-]+(?::[a-z0-9\-]+)?)(?:=(?P<version>[^=*\s]+)(?P<glob>\*)?)?$")
FORMAT = "${binary:Package}\t${Version}\t${db:Status-Abbrev}\n"


def parse_spec(spec):
    """(name, version or None, prefix match) for a spec, or None when it is not a plain apt spec."""
    match = SPEC.match(spec.strip())
    if not match:
        return None
    return match.group("name"), match.group("version"), bool(match.group("glob"))


def parse_dpkg_query(text):
    """{package: version} for the packages dpkg reports installed (status abbreviation ``ii``)."""
    installed = {}
    for line in text.splitlines():
        fields = line.split("\t")
        if len(fields) < 3:
            continue
        name, version, status = fields[0].strip(), fields[1].strip(), fields[2]
        # Status-Abbrev: desired (i install, h hold, ...), current status (i installed), error flag.
        if len(status) >= 2 and status[1] == "i" and version:
            installed[name] = version
            # binary:Package adds :arch only for foreign and multi-arch same packages; index the bare name too.
            installed.setdefault(name.split(":")[0], version)
    return installed


def satisfied(parsed, installed):
    name, version, prefix = parsed
    have = installed.get(name)
    if have is None:
        return False
    if version is None:
        return True
    return have.startswith(version) if prefix else have == version


def main():
    module = AnsibleModule(
        argument_spec=dict(
            names=dict(type="list", elements="str", required=True),
            dpkg_query_path=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    names = [n for n in module.params["names"] if n and n.strip()]
    tool = ToolRunner(module, "dpkg-query", module.params["dpkg_query_path"], required=False,
                      option="dpkg_query_path")
    if not tool.available:
        module.exit_json(changed=False, missing=names, installed={}, supported=False)

    parsed = dict((spec, parse_spec(spec)) for spec in names)
    query = sorted(set(p[0] for p in parsed.values() if p))
    installed = {}
    if query:
        # dpkg-query exits 1 when a name is unknown to dpkg (never installed): that is an answer, not an error.
        rc, out, err = tool.run(["-W", "-f=" + FORMAT, "--"] + query, check_rc=False)
        if rc not in (0, 1):
            tool.fail(tool.calls[-1], rc, out, err)
        installed = parse_dpkg_query(out)
    cmd = quote(tool.calls[-1]) if tool.calls else ""
    missing = [spec for spec in names if not parsed[spec] or not satisfied(parsed[spec], installed)]
    wanted = set(query)
    module.exit_json(changed=False, missing=missing, supported=True, cmd=cmd,
                     installed=dict((k, v) for k, v in installed.items() if k in wanted))


if __name__ == "__main__":
    main()
