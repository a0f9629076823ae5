# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for Slurm hostlist expressions: hostlist_expand and hostlist_compress.

Documentation lives beside this file in hostlist_expand.yml and hostlist_compress.yml.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import compress, expand

try:  # ansible-core >= 2.19 hands lazy containers to filters; they are still sequences
    from collections.abc import Sequence
except ImportError:  # pragma: no cover
    Sequence = (list, tuple)


def _is_text(value):
    return isinstance(value, (str, bytes))


def hostlist_expand(value):
    """A Slurm hostlist expression (or a list of them) -> the list of host names."""
    if _is_text(value):
        items = [to_text(value)]
    elif isinstance(value, Sequence):
        items = list(value)
    else:
        raise AnsibleFilterError("hostlist_expand expects a string or a list of strings, got %s" % type(value).__name__)
    hosts = []
    for item in items:
        if not _is_text(item):
            raise AnsibleFilterError("hostlist_expand expects strings, got %r (%s)" % (item, type(item).__name__))
        try:
            hosts.extend(expand(to_text(item)))
        except ValueError as e:
            raise AnsibleFilterError("hostlist_expand: %s" % e)
    return hosts


def hostlist_compress(value):
    """A list of host names (or hostlist expressions) -> Slurm's canonical sorted hostlist string."""
    if _is_text(value):
        items = [to_text(value)]
    elif isinstance(value, Sequence):
        items = list(value)
    else:
        raise AnsibleFilterError("hostlist_compress expects a list of host names, got %s" % type(value).__name__)
    names = []
    for item in items:
        if not _is_text(item):
            raise AnsibleFilterError("hostlist_compress expects strings, got %r (%s)" % (item, type(item).__name__))
        try:
            # Accept expressions too, so compress(['gpu[01-02]', 'gpu03']) works.
            names.extend(expand(to_text(item)))
        except ValueError as e:
            raise AnsibleFilterError("hostlist_compress: %s" % e)
    try:
        return compress(names)
    except ValueError as e:
        raise AnsibleFilterError("hostlist_compress: %s" % e)


class FilterModule(object):
    """Slurm hostlist filters."""

    def filters(self):
        return {
            "hostlist_expand": hostlist_expand,
            "hostlist_compress": hostlist_compress,
        }
