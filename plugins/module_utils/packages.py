# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PRIVATE to clusterforge.gpu: the one reader of the dpkg database.

One ``dpkg-query -W`` call for the packages a module asks about, never the apt cache (opening it costs about a
second of CPU per node). Used by the modules package_check (and through it the packages action) and
nvidia_driver_state.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner

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
    """Whether a parsed spec (from :func:`parse_spec`) is met by ``installed`` ({package: version})."""
    name, version, prefix = parsed
    have = installed.get(name)
    if have is None:
        return False
    if version is None:
        return True
    return have.startswith(version) if prefix else have == version


def installed_versions(module, names, dpkg_query_path=None):
    """Read the installed versions of ``names`` (package names, no version) with one ``dpkg-query -W`` call.

    Returns ``(supported, installed, cmd)``: ``supported`` is false where ``dpkg-query`` does not exist (not a
    Debian family host; nothing is run and ``installed`` is empty); ``installed`` is ``{package: version}`` as
    :func:`parse_dpkg_query` gives it (arch-qualified names are indexed bare as well); ``cmd`` is the argv list
    that was run, or None when there was nothing to ask. ``dpkg_query_path`` is the module's
    ``dpkg_query_path`` option: a path there that is wrong fails the module.
    """
    tool = ToolRunner(module, "dpkg-query", dpkg_query_path, required=False, option="dpkg_query_path")
    if not tool.available:
        return False, {}, None
    query = sorted(set(n for n in names if n))
    if not query:
        return True, {}, None
    # dpkg-query exits 1 when a name is unknown to dpkg (never installed): that is an answer, not an error.
    rc, out, err = tool.run(["-W", "-f=" + FORMAT, "--"] + query, check_rc=False)
    if rc not in (0, 1):
        tool.fail(tool.calls[-1], rc, out, err)
    return True, parse_dpkg_query(out), tool.calls[-1]
