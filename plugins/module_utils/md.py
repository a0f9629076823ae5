# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parser for Linux software RAID (md) state, ``/proc/mdstat`` (no Ansible import, stdlib only).

The format is md_seq_show() of drivers/md/md.c. One header line per array, then continuation lines indented with
spaces::

    Personalities : [raid6] [raid5] [raid4]
    md1 : active (auto-read-only) raid6 sdf[5] sde[4] sdd[3] sdc[2] sdb[1] sda[0]
          41021865984 blocks super 1.2 level 6, 512k chunk, algorithm 2 [6/6] [UUUUUU]
          bitmap: 0/59 pages [0KB], 65536KB chunk

    md127 : inactive sdb[1](S)
          1953382488 blocks super 1.2

    unused devices: <none>

The header is ``<name> : active`` or ``<name> : inactive``; an active array may say `` (read-only)`` or
`` (auto-read-only)`` next, then the personality (``raid6``, ``raid1``, ``linear``...); an inactive one has no
personality. Each member is ``<bdev>[<desc_nr>]`` followed by ``(W)`` write-mostly, ``(J)`` journal, ``(F)`` faulty,
``(S)`` spare or ``(R)`` replacement.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_HEADER_RE = re.compile(r"^(\S+) : (in)?active(?: \((read-only|auto-read-only)\))?(?:\s+(.*?))?\s*$")
_MEMBER_RE = re.compile(r"^(.+)\[(\d+)\]((?:\([A-Z]\))*)$")
_BLOCKS_RE = re.compile(r"^\s*(\d+) blocks(?: super (\S+))?")
_DISKS_RE = re.compile(r"\[(\d+)/(\d+)\] \[([U_]+)\]")


def parse_mdstat(text):
    """Parse ``/proc/mdstat`` -> ``{array_name: array}`` (``md0``, ``md127``, ``md_home``).

    Each array is a dict: ``state`` (``active`` or ``inactive``), ``readonly`` (True for `` (read-only)`` and
    `` (auto-read-only)``), ``auto_read_only``, ``level`` (the personality, ``raid6``; None when inactive),
    ``members`` (``[{"device": "sdb", "number": 1, "flags": ["S"]}]`` in printed order), and from the line after
    the header ``blocks`` (int or None), ``super`` (metadata version, ``1.2``; None for 0.90), ``raid_disks``,
    ``working_disks`` (from ``[6/5]``) and ``status`` (``UUUUU_``), None where not printed. The
    ``Personalities :`` and ``unused devices:`` lines, bitmap and resync lines are not returned.
    """
    arrays = {}
    current = None
    for raw in (text or "").splitlines():
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        if not line[0].isspace():
            current = None
            m = _HEADER_RE.match(line)
            if not m:
                continue  # Personalities, unused devices, read_ahead (2.4 kernels)
            name, inactive, ro, rest = m.group(1), m.group(2), m.group(3), m.group(4) or ""
            tokens = rest.split()
            level = None
            if not inactive and tokens and not _MEMBER_RE.match(tokens[0]):
                level = tokens.pop(0)
            members = []
            for token in tokens:
                mm = _MEMBER_RE.match(token)
                if mm:
                    members.append({"device": mm.group(1), "number": int(mm.group(2)),
                                    "flags": re.findall(r"\(([A-Z])\)", mm.group(3))})
            current = {"state": "inactive" if inactive else "active", "readonly": bool(ro),
                       "auto_read_only": ro == "auto-read-only", "level": level, "members": members,
                       "blocks": None, "super": None, "raid_disks": None, "working_disks": None, "status": None}
            arrays[name] = current
            continue
        if current is None:
            continue
        m = _BLOCKS_RE.match(line)
        if m and current["blocks"] is None:
            current["blocks"] = int(m.group(1))
            current["super"] = m.group(2)
        m = _DISKS_RE.search(line)
        if m and current["raid_disks"] is None:
            current["raid_disks"], current["working_disks"] = int(m.group(1)), int(m.group(2))
            current["status"] = m.group(3)
    return arrays


def md_level_problem(name, arrays, level):
    """What keeps ``name`` (a kernel block device name, ``md1``) from being an active md array of ``level``
    (``raid6``) in ``arrays`` (parse_mdstat output), in words; None when it is one. A read-only or
    auto-read-only array counts as active (it turns read-write at its first write)."""
    array = arrays.get(name)
    if array is None:
        return "is not an md array"
    if array["state"] != "active":
        return "is %s" % array["state"]
    if array["level"] != level:
        return "is %s, not %s" % (array["level"] or "of no level", level)
    return None
