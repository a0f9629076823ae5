# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST-ONLY parsers for plain-text ``lfs getstripe``, ``lfs getdirstripe`` and ``lfs df``.

No plugin reads these outputs (lfs_stripe reads ``lfs getstripe -y``), so the parsers live here, not in
plugins/module_utils/lustre.py. They keep the lab's lfs emulator (tests/lab/unit/test_emulator_lfs_dcgm.py) and the
real samples (tests/conformance/) honest about the formats. Shared helpers come from the plugin module.
"""

import re

from ansible_collections.clusterforge.gpu.plugins.module_utils.lustre import (
    SIZE_UNITS, _PAIR_RE, _int_or_none, _layout, _parse_layout_lines,
)


def parse_getstripe_text(text):
    """Parse the plain-text ``lfs getstripe [-d] <path>`` output (file or directory default).

    The first line naming the path is kept as ``path``; a second path header (a recursive listing) ends parsing.
    """
    lines = (text or "").splitlines()
    path = None
    body = []
    for line in lines:
        stripped = line.strip()
        if stripped and not line[0].isspace() and not _PAIR_RE.search(line) and not stripped.startswith("obdidx") \
                and not re.match(r"^\d", stripped):
            if "has no stripe info" in stripped:
                path = path or stripped.split(" has no stripe info")[0]
                continue
            if path is None and not body:
                path = stripped
                continue
            if body:
                break
        body.append(line)
    header, comps, composite = _parse_layout_lines(body)
    result = _layout(header, comps, composite)
    result["path"] = path
    return result


def parse_getdirstripe(text):
    """``lfs getdirstripe [-D] <dirs>``: one dict of ``lmv_*`` values per line (DNE directory layout)."""
    result = []
    for line in (text or "").splitlines():
        pairs = _PAIR_RE.findall(line)
        if not pairs:
            continue
        entry = {}
        for key, value in pairs:
            if key.startswith("lmv_"):
                ivalue = _int_or_none(value)
                entry[key] = value if ivalue is None else ivalue
        if entry:
            result.append(entry)
    return result


_DF_TARGET_RE = re.compile(r"^(?P<fs>[\w-]+?)-(?P<type>MDT|OST)(?P<index>[0-9a-fA-F]{4})_UUID$")


def _df_number(value, human):
    if value is None:
        return None
    if human:
        m = re.match(r"^(\d+(?:\.\d+)?)([KMGTPE]?)$", value)
        if not m:
            return None
        return int(float(m.group(1)) * SIZE_UNITS[m.group(2)])
    return _int_or_none(value)


def parse_lfs_df(text):
    """Parse ``lfs df [-h|-i]``.

    Returns ``{"unit": "kib"|"bytes"|"inodes", "targets": [...], "filesystems": {mount: summary}}``; each target
    has ``uuid``, ``fsname``, ``type`` (MDT/OST), ``index``, ``total``, ``used``, ``available``, ``use_percent``,
    ``mounted_on`` and ``status`` (``active`` or the word lfs printed, e.g. ``inactive``).
    ``-h`` sizes are converted to bytes.
    """
    unit = "kib"
    human = False
    targets = []
    filesystems = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if not fields:
            continue
        if fields[0] == "UUID":
            if len(fields) > 1 and fields[1] == "bytes":
                unit, human = "bytes", True
            elif len(fields) > 1 and fields[1] == "Inodes":
                unit = "inodes"
            continue
        if fields[0] == "filesystem_summary:" or fields[0] == "filesystem":
            if fields[0] == "filesystem":
                fields = ["filesystem_summary:"] + fields[2:]
            if len(fields) >= 6:
                filesystems[fields[5]] = {
                    "total": _df_number(fields[1], human), "used": _df_number(fields[2], human),
                    "available": _df_number(fields[3], human), "use_percent": _int_or_none(fields[4].rstrip("%")),
                    "mounted_on": fields[5]}
            continue
        m = _DF_TARGET_RE.match(fields[0])
        if not m:
            continue
        target = {"uuid": fields[0], "fsname": m.group("fs"), "type": m.group("type"),
                  "index": int(m.group("index"), 16), "total": None, "used": None, "available": None,
                  "use_percent": None, "mounted_on": None, "status": "active"}
        if len(fields) >= 6 and re.match(r"^[\d.]+[KMGTPE]?$", fields[1]):
            target.update(total=_df_number(fields[1], human), used=_df_number(fields[2], human),
                          available=_df_number(fields[3], human), use_percent=_int_or_none(fields[4].rstrip("%")),
                          mounted_on=fields[5])
        else:
            rest = " ".join(fields[1:]).lstrip(": ").strip()
            target["status"] = rest.split()[0] if rest else "unknown"
        targets.append(target)
    return {"unit": unit, "targets": targets, "filesystems": filesystems}
