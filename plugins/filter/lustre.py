# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lustre client tunings read with one command: every parameter's `lctl get_param -n` output after a marker line."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

MARKER = "@@cf-param "


def lctl_params_drift(lines, wanted):
    """The tunings whose live value differs from ``wanted``.

    ``lines`` is the output of ``for p; do echo "@@cf-param $p"; lctl get_param -n "$p"; done`` (one line per
    device a wildcard matches). Returns a list of dicts: param, expected (str), live (list of str), setting
    ("param=value" for ``lctl set_param``), in the order of ``wanted``. A parameter with no device (no line) is
    not a difference: there is nothing to set yet.
    """
    if not isinstance(wanted, dict):
        raise AnsibleFilterError("lctl_params_drift: wanted must be a dict of parameter: value, not %r" % (wanted,))
    if isinstance(lines, str):
        lines = lines.splitlines()
    live, current = {}, None
    for line in lines or []:
        line = str(line)
        if line.startswith(MARKER):
            current = line[len(MARKER):].strip()
            live.setdefault(current, [])
        elif current is not None and line.strip():
            live[current].append(line.strip())
    missing = [p for p in wanted if p not in live]
    if missing:
        raise AnsibleFilterError("lctl_params_drift: no output for %s (was every parameter read?)" % ", ".join(missing))
    out = []
    for param, value in wanted.items():
        expected = str(value).strip()
        values = live[param]
        if any(v != expected for v in values):
            out.append({"param": param, "expected": expected, "live": values, "setting": "%s=%s" % (param, expected)})
    return out


class FilterModule(object):
    def filters(self):
        return {"lctl_params_drift": lctl_params_drift}
