#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# The work is done by the action plugin of the same name (plugins/action/packages.py); this file holds its
# documentation, as ansible-test requires for an action plugin.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: packages
short_description: Install the packages a role needs, reading what is installed first (one task per role)
description:
  - The one package task of every role of the collection. It reads the installed state of O(names) and
    O(remove) with one C(dpkg-query) call (M(clusterforge.gpu.package_check)), then runs the package manager's
    module only for the difference; first O(remove) the packages in it that are installed, then install
    the packages of O(names) that are missing. On a node where everything is in place no package manager
    runs (C(apt) opens its cache, about a second of CPU per node and role).
  - The package manager's module is chosen as M(ansible.builtin.package) chooses it (O(use), else the
    C(ansible_package_use) variable, else the C(pkg_mgr) fact). C(dpkg-query) is read only where it is C(apt).
  - Where the installed state cannot be read (not C(apt), or C(dpkg-query) not found) every package of O(names)
    counts as missing and the package manager's own idempotence applies in a real run.
  - A spec is C(name), C(name=version) or C(name=version*), as M(ansible.builtin.apt) takes them; a spec
    C(dpkg-query) cannot judge (a group, a module stream, a comparison) counts as missing.
version_added: "1.0.0"
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.action_plugin
options:
  names:
    description: The package specs that must be installed.
    type: list
    elements: str
    required: true
  remove:
    description:
      - Packages removed before O(names) are installed, when they are installed (for example the previous major
        version's package that the new ones replace). Plain names.
    type: list
    elements: str
    default: []
  weak_dependencies:
    description:
      - Whether recommended packages (C(apt) C(install_recommends)) or weak dependencies (C(dnf)
        C(install_weak_deps)) are installed with O(names). Unset leaves the package manager's default.
      - Ignored by other package managers.
    type: bool
  cache_valid_time:
    description:
      - C(apt) only. Refresh the package index before installing when it is older than this many seconds
        (C(0) refreshes it on every install). Unset installs without refreshing it.
      - The index is refreshed only when something is installed.
    type: int
  use:
    description: The package manager's module (C(apt), C(dnf), ...); C(auto) picks it as M(ansible.builtin.package) does.
    type: str
    default: auto
  dpkg_query_path:
    description: Path to C(dpkg-query). By default it is looked up on C(PATH).
    type: path
  start_services:
    description:
      - C(false) keeps the packages' own scripts from starting, stopping or restarting any service while this task
        installs or removes packages (C(apt) only), for a role that starts its daemons itself once they are
        configured. Debian's policy layer does it, C(/usr/sbin/policy-rc.d) exiting 101 ("action forbidden").
      - The file is written only for the package manager's run and removed right after, whatever happens. A host
        that has its own C(/usr/sbin/policy-rc.d) keeps it untouched, and its own policy decides.
      - Nothing is written when nothing is to be installed or removed, or in check mode.
    type: bool
    default: true
  allow_held:
    description:
      - C(apt) only. Install the versions asked for even where the site holds the packages (C(apt-mark hold)), for
        an upgrade the site asked for. The hold stays in place.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    details:
      - Check mode never calls the package manager to install (on a new host its index may not know the packages
        yet, because repositories are added only by a real run). It names the missing packages in RV(msg)
        ("Would install ...", printed without C(-v)) and reports changed.
      - O(remove) is predicted from C(dpkg-query); where it cannot be read the package manager's own check mode is asked.
  diff_mode:
    support: partial
    details:
      - The package manager module's diff is returned when it installed something.
notes:
  - Module defaults set for M(ansible.builtin.apt) or M(ansible.builtin.dnf) are not applied to the calls this
    action makes; give the options here.
seealso:
  - module: clusterforge.gpu.package_check
  - module: ansible.builtin.package
  - module: ansible.builtin.apt
  - module: ansible.builtin.dnf
"""

EXAMPLES = r"""
- name: Install munge and slurmd (no recommended packages; the apt index refreshed at most hourly; no service started)
  clusterforge.gpu.packages:
    names: [munge, slurmd]
    weak_dependencies: false
    cache_valid_time: 3600
    start_services: false
  register: __slurm_compute_register_packages

- name: Replace DCGM 3 with DCGM 4
  clusterforge.gpu.packages:
    names: ["datacenter-gpu-manager-4-core=1:4.2.3*"]
    remove: [datacenter-gpu-manager]
"""

RETURN = r"""
missing:
  description:
    - The specs of O(names) that were not installed before this task, in their order; in check mode the ones a real
      run installs.
    - Every spec of O(names) where the installed state could not be read (RV(supported) false).
  returned: always
  type: list
  elements: str
  sample: ["slurmd"]
removed:
  description: The packages of O(remove) that were removed (in check mode, that a real run removes).
  returned: always
  type: list
  elements: str
  sample: ["datacenter-gpu-manager"]
supported:
  description: Whether the installed state was read with C(dpkg-query).
  returned: always
  type: bool
versions:
  description: The installed version of each package of O(names) and O(remove) that was installed before this task.
  returned: always
  type: dict
  sample: {"munge": "0.5.15-2"}
backend:
  description: The package manager's module that was (or would be) used.
  returned: always
  type: str
  sample: apt
cmd:
  description: The C(dpkg-query) command that was run.
  returned: when supported
  type: str
msg:
  description: What was done, or in check mode what a real run does (C(Would install ...) and the names).
  returned: always
  type: str
  sample: "Would install (services and checks that need them are not run in check mode): slurmd"
rc:
  description: The package manager's exit status, when it failed.
  returned: failure
  type: int
stdout:
  description: The package manager's output, when it failed.
  returned: failure
  type: str
stderr:
  description: The package manager's error output, when it failed.
  returned: failure
  type: str
"""
