# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The result of a nested ansible-playbook run written by the ansible.posix.json stdout callback (the rolling
plan's check-mode run), read from its stdout beside what other callbacks print there."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

# The callback's indented document (json_indent > 0, which the plan sets) runs from a line "{" to a line "}";
# callbacks an operator enables (ansible.posix.profile_tasks, timer) print their own lines before and after it.
_DOCUMENT = re.compile(r"^\{$.*^\}$", re.M | re.S)


def json_callback_document(stdout):
    """The ansible.posix.json document in ``stdout`` as a dict; {} when there is none (the run stopped before its
    callback wrote it, or wrote only part of it)."""
    if not isinstance(stdout, str):
        return {}
    match = _DOCUMENT.search(stdout)
    if not match:
        return {}
    try:
        doc = json.loads(match.group(0))
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}
