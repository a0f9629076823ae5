# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm hostlist expressions, with Slurm's semantics (src/common/hostlist.c).

Pure Python, standard library only: used by modules on the target and by filter plugins on the controller.

``expand("gpu[01-03],head1")`` -> ``["gpu01", "gpu02", "gpu03", "head1"]``: the order of the expression,
duplicates kept (like ``scontrol show hostnames``). Zero padding follows the low end of each range
(``[01-10]`` -> ``01``..``10``, ``[1-10]`` -> ``1``..``10``). Several bracket groups give the cartesian
product, the first group varying slowest (``r[1-2]n[1-2]`` -> ``r1n1 r1n2 r2n1 r2n2``). Text after a
bracket is kept (``rack[1-2]-ib`` -> ``rack1-ib rack2-ib``). Commas and whitespace separate hosts.

``compress(hosts)`` -> the canonical ranged string of ``scontrol show hostlistsorted``: hosts sorted
(natural order of the prefix, then width, then number) and de-duplicated; consecutive numbers with
compatible zero padding become ranges; ranges that share a prefix share one bracket
(``gpu[01-02,001]``). Names whose number is followed by text (``rack1-ib``) are grouped by prefix *and*
suffix (``rack[1-2]-ib``), a form Slurm accepts as input and expands back to the same names.

Invalid expressions (unbalanced or nested brackets, reversed or non-numeric ranges, empty input) raise
``ValueError`` with a message that names the offending part.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Slurm refuses ranges larger than this (MAX_RANGE in hostlist.c).
MAX_RANGE = 64 * 1024

_SEPARATORS = ", \t\r\n"
_RANGE_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
_LAST_NUMBER_RE = re.compile(r"^(.*?)(\d+)(\D*)$")
_NAT_RE = re.compile(r"(\d+)")


def _split_top_level(text):
    """Split ``text`` on separators that are not inside brackets; check bracket balance."""
    tokens = []
    depth = 0
    current = []
    for pos, char in enumerate(text):
        if char == "[":
            if depth:
                raise ValueError("invalid hostlist %r: nested '[' at position %d" % (text, pos))
            depth = 1
        elif char == "]":
            if not depth:
                raise ValueError("invalid hostlist %r: ']' without '[' at position %d" % (text, pos))
            depth = 0
        if char in _SEPARATORS and not depth:
            if current:
                tokens.append("".join(current))
            current = []
            continue
        current.append(char)
    if depth:
        raise ValueError("invalid hostlist %r: unbalanced '[' (missing ']')" % text)
    if current:
        tokens.append("".join(current))
    return tokens


def _parse_ranges(body, token):
    """``01-04,07`` -> [("01", 1, 4, 2), ...] as (text, lo, hi, width)."""
    ranges = []
    if not body.strip():
        raise ValueError("invalid hostlist %r: empty brackets" % token)
    for part in body.split(","):
        part = part.strip()
        match = _RANGE_RE.match(part)
        if not match:
            raise ValueError("invalid hostlist %r: bad range %r (expected N or N-M with digits only)" % (token, part))
        lo_text, hi_text = match.group(1), match.group(2)
        lo = int(lo_text)
        hi = int(hi_text) if hi_text is not None else lo
        if hi < lo:
            raise ValueError("invalid hostlist %r: reversed range %r (%d > %d)" % (token, part, lo, hi))
        if hi - lo + 1 > MAX_RANGE:
            raise ValueError("invalid hostlist %r: too many hosts in range %r (max %d)" % (token, part, MAX_RANGE))
        ranges.append((lo, hi, len(lo_text)))
    return ranges


def _expand_token(token):
    """One host expression without top-level separators: literal text and bracket groups."""
    parts = []  # list of lists of alternatives
    pos = 0
    while pos < len(token):
        start = token.find("[", pos)
        if start < 0:
            if "]" in token[pos:]:
                raise ValueError("invalid hostlist %r: ']' without '['" % token)
            parts.append([token[pos:]])
            break
        end = token.find("]", start)
        if end < 0:
            raise ValueError("invalid hostlist %r: unbalanced '[' (missing ']')" % token)
        literal = token[pos:start]
        if "]" in literal:
            raise ValueError("invalid hostlist %r: ']' without '['" % token)
        if literal:
            parts.append([literal])
        values = []
        for lo, hi, width in _parse_ranges(token[start + 1:end], token):
            values.extend("%0*d" % (width, num) for num in range(lo, hi + 1))
        parts.append(values)
        pos = end + 1
    if parts and len(parts[0]) == 1 and not parts[0][0]:
        parts.pop(0)
    if not parts:
        raise ValueError("invalid hostlist %r: empty host name" % token)
    hosts = [""]
    for alternatives in parts:
        hosts = [head + alt for head in hosts for alt in alternatives]
        if len(hosts) > MAX_RANGE * 16:
            raise ValueError("invalid hostlist %r: expands to too many hosts" % token)
    return hosts


def expand(hostlist):
    """Expand a Slurm hostlist expression into a list of host names (order kept, duplicates kept)."""
    if not isinstance(hostlist, str):
        raise ValueError("hostlist must be a string, got %s" % type(hostlist).__name__)
    tokens = _split_top_level(hostlist)
    if not tokens:
        raise ValueError("invalid hostlist %r: empty" % hostlist)
    hosts = []
    for token in tokens:
        hosts.extend(_expand_token(token))
    return hosts


def _natural_key(text):
    return tuple((0, int(chunk), len(chunk)) if chunk.isdigit() else (1, chunk, 0)
                 for chunk in _NAT_RE.split(text) if chunk != "")


def _split_host(host):
    """``gpu01`` -> ("gpu", "01", ""); ``rack1-ib`` -> ("rack", "1", "-ib"); ``head`` -> ("head", None, "")."""
    match = _LAST_NUMBER_RE.match(host)
    if not match:
        return host, None, ""
    return match.group(1), match.group(2), match.group(3)


def _padded(text):
    return len(text) > 1 and text[0] == "0"


def _fits(members, candidate):
    """Can ``candidate`` (a digit string) share one zero-padding width with ``members``?"""
    texts = members + [candidate]
    widths = set(len(t) for t in texts if _padded(t))
    if len(widths) > 1:
        return False
    if widths:
        width = widths.pop()
        return all(len(t) >= width for t in texts)
    return True


def _render_range(members):
    first, last = members[0], members[-1]
    if len(members) == 1:
        return first
    width = max([len(t) for t in members if _padded(t)] or [len(first)])
    return "%0*d-%0*d" % (width, int(first), width, int(last))


def compress(hosts):
    """Compress host names into Slurm's canonical, sorted and de-duplicated hostlist string."""
    if isinstance(hosts, str):
        hosts = [hosts]
    names = []
    for host in hosts:
        if not isinstance(host, str):
            raise ValueError("host names must be strings, got %r" % (host,))
        host = host.strip()
        if not host:
            raise ValueError("invalid host name: empty string")
        if any(c in host for c in "[]") or any(c in host for c in _SEPARATORS):
            raise ValueError("invalid host name %r: brackets, commas and spaces are not allowed "
                             "(expand hostlist expressions first)" % host)
        names.append(host)
    if not names:
        raise ValueError("cannot compress an empty list of hosts")

    entries = {}
    for host in set(names):
        prefix, number, suffix = _split_host(host)
        if number is None:
            key = (_natural_key(prefix), 0, suffix, 0, 0)
        else:
            key = (_natural_key(prefix), 1, suffix, len(number), int(number))
        entries[key] = (prefix, number, suffix)

    out = []
    group = None   # (prefix, suffix)
    ranges = []    # list of lists of digit strings

    def flush():
        if group is None:
            return
        prefix, suffix = group
        count = sum(len(r) for r in ranges)
        body = ",".join(_render_range(r) for r in ranges)
        out.append("%s[%s]%s" % (prefix, body, suffix) if count > 1 else prefix + body + suffix)

    for key in sorted(entries):
        prefix, number, suffix = entries[key]
        if number is None:
            flush()
            group, ranges = None, []
            out.append(prefix + suffix)
            continue
        if group != (prefix, suffix):
            flush()
            group, ranges = (prefix, suffix), [[number]]
            continue
        current = ranges[-1]
        if int(number) == int(current[-1]) + 1 and _fits(current, number):
            current.append(number)
        else:
            ranges.append([number])
    flush()
    return ",".join(out)
