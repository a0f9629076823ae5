# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' one way to refuse an unsupported operating system and pick the variables file of the one they run on.

The platforms the collection supports are one table, PLATFORMS; a role that supports fewer names its distributions."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.errors import AnsibleFilterError
from ansible.module_utils.six import string_types


# The operating systems the collection's roles support: {distribution (ansible_facts.distribution): [major, ...]}.
# Each role's meta/main.yml names them for Galaxy (a unit test keeps the two in step); README.md says where each is
# proven.
PLATFORMS = {
    "Debian": ["12", "13"],
    "Ubuntu": ["22", "24"],
    "RedHat": ["9"],
    "Rocky": ["9"],
    "AlmaLinux": ["9"],
}


def supported_platforms(distributions=None):
    """PLATFORMS, or the part of it a role supports (``distributions``: the distributions it keeps)."""
    if distributions is None:
        return dict((dist, list(majors)) for dist, majors in PLATFORMS.items())
    if isinstance(distributions, string_types) or not isinstance(distributions, (list, tuple)) or not distributions:
        raise AnsibleFilterError("os_vars_file: distributions must be a non-empty list of distributions, got %r"
                                 % (distributions,))
    unknown = [d for d in distributions if d not in PLATFORMS]
    if unknown:
        raise AnsibleFilterError("os_vars_file: %s not among the collection's platforms (%s)"
                                 % (", ".join(map(str, unknown)), _supported_text(PLATFORMS)))
    return dict((dist, list(PLATFORMS[dist])) for dist in distributions)


def _supported_text(supported):
    return ", ".join("%s %s" % (dist, "/".join(str(v) for v in versions)) for dist, versions in sorted(supported.items()))


def os_vars_file(facts, vars_dir, host="this host", role="this role", distributions=None):
    """The role's variables file for the host's OS, most specific first: ``<distribution>_<major>.yml``,
    ``<distribution>.yml``, ``<os_family>.yml`` in ``vars_dir``.

    Fails with one message naming the host, its OS, the role and the supported list when the distribution or
    its major version is not one of the collection's platforms (PLATFORMS; only ``distributions`` of them where the
    role names some), or when no file exists for it."""
    if not isinstance(facts, dict):
        raise AnsibleFilterError("os_vars_file: expects ansible_facts (a dict), got %s" % type(facts).__name__)
    supported = supported_platforms(distributions)
    missing = [k for k in ("distribution", "distribution_major_version", "os_family") if not facts.get(k)]
    if missing:
        raise AnsibleFilterError("%s: %s needs the facts %s; gather them first (setup, gather_subset: [min])"
                                 % (host, role, ", ".join(missing)))
    dist, major, family = (str(facts["distribution"]), str(facts["distribution_major_version"]), str(facts["os_family"]))
    versions = supported.get(dist)
    if isinstance(versions, string_types) or versions is None or major not in [str(v) for v in versions]:
        raise AnsibleFilterError("%s: %s %s is not supported by %s (supported: %s)"
                                 % (host, dist, major, role, _supported_text(supported)))
    for name in ("%s_%s.yml" % (dist, major), "%s.yml" % dist, "%s.yml" % family):
        path = os.path.join(str(vars_dir), name)
        if os.path.isfile(path):
            return path
    raise AnsibleFilterError("%s: %s has no variables file for %s %s in %s (looked for %s_%s.yml, %s.yml, %s.yml)"
                             % (host, role, dist, major, vars_dir, dist, major, dist, family))


class FilterModule(object):
    def filters(self):
        return {"os_vars_file": os_vars_file}
