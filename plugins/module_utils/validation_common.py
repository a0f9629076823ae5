# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the validation filters share: the error they raise and the coercion helpers (numbers, booleans, plain
JSON-safe copies, numbers for messages).

Used on the controller by plugins/filter/validation.py and the other validation_* module_utils. No
ansible.errors import: a bad input raises ValidationError (a ValueError), which the filter turns into
AnsibleFilterError with the same message.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible.module_utils.common.text.converters import to_text
from ansible.module_utils.parsing.convert_bool import boolean

try:  # ansible-core >= 2.19 hands lazy containers to filters; they are still mappings and sequences
    from collections.abc import Mapping, Sequence
except ImportError:  # pragma: no cover
    Mapping = dict
    Sequence = (list, tuple)


class ValidationError(ValueError):
    """A validation filter cannot use its input; the message says why (the filter raises it as AnsibleFilterError)."""


def _is_map(value):
    return isinstance(value, Mapping)


def _is_list(value):
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _number(value):
    """A real number (int/float or numeric text) as float; None for None, booleans, NaN and anything else."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, (str, bytes)):
        try:
            number = float(to_text(value).strip())
        except ValueError:
            return None
    else:
        return None
    if math.isnan(number) or math.isinf(number):
        return None
    return number


def _bool(value, what):
    """None stays None; true/false/yes/no/1/0 (as Ansible reads them) -> bool; anything else fails."""
    if value is None or isinstance(value, bool):
        return value
    try:
        return boolean(value, strict=True)
    except TypeError:
        raise ValidationError("validation_judge: %s must be a boolean, got %r" % (what, value))


def _plain(value):
    """Deep copy into JSON-safe builtins (dict/list/str/int/float/bool/None); NaN and infinities become None."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else float(value)
    if isinstance(value, (str, bytes)):
        return to_text(value)
    if _is_map(value):
        return dict((to_text(k), _plain(v)) for k, v in value.items())
    if _is_list(value) or isinstance(value, (set, frozenset)):
        return [_plain(v) for v in value]
    return to_text(value)


def _fmt(value, digits=1):
    """A number for messages: floats with ``digits`` decimals (``333.0``), ints as such, ``n/a`` for None."""
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return "%d" % value
    return "%.*f" % (digits, value)


def _fmt_apart(value, limit, digits=1):
    """``(_fmt(value), _fmt(limit))`` with as many more decimals (up to 4 more) as it takes for two different numbers
    to read differently: a miss never reads ``0.02 GB/s < 0.02 GB/s``."""
    for extra in range(5):
        texts = (_fmt(value, digits + extra), _fmt(limit, digits + extra))
        if value == limit or texts[0] != texts[1] or not all(isinstance(v, float) for v in (value, limit)):
            return texts
    return texts


def _whole(value):
    """A nominal figure for messages: ``400`` for 400 or 400.0, ``2.5`` for 2.5."""
    number = _number(value)
    if number is None:
        return "n/a"
    return "%d" % number if number.is_integer() else "%g" % round(number, 3)


def _pct(fraction):
    return "%g%%" % round(fraction * 100, 4)
