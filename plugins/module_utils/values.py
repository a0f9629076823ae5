# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a value given by a user is read and named in a message (standard library only): one definition for preflight
(controller side) and for the rules that also run on nodes (module_utils/gpu_settings.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_WHOLE_RE = re.compile(r"^\s*-?[0-9]+\s*$")


def is_int(value):
    """A real integer (not a bool, not a string of digits)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def whole(value, allow_float=False):
    """An integer from an int, a string of digits (``-e name=500`` gives one) or, with allow_float, a float without a
    fraction; None for anything else."""
    if is_int(value):
        return value
    if isinstance(value, str) and _WHOLE_RE.match(value):
        return int(value)
    if allow_float and isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def type_name(value):
    """The YAML-ish name of a value's type, for messages."""
    if isinstance(value, bool):
        return "boolean"
    if is_int(value):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "dict"
    if isinstance(value, (list, tuple)):
        return "list"
    if value is None:
        return "null"
    return type(value).__name__
