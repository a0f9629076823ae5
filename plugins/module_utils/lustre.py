# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers and helpers for the Lustre ``lfs`` client tool (no Ansible import, stdlib only).

Layouts are normalised into one shape so that what ``lfs getstripe`` prints and what a user requests can be
compared like with like::

    {"mirror_count": 1, "components": [
        {"mirror_id": None, "extent_start": 0, "extent_end": None, "stripe_count": 4,
         "stripe_size": 4194304, "pattern": "raid0", "pool": None}]}

``extent_end`` None means EOF. A plain (non-composite) layout is one component 0..EOF. A directory without a
default layout parses to ``{"mirror_count": 0, "components": []}``.

``lfs getstripe -y`` output is parsed line by line, deliberately without a YAML library: several lfs versions
print YAML that is not valid (object lists at odd indentation, flow mappings with unquoted FIDs, a text header
line); only ``key: value`` pairs are read, and object lists (``lmm_objects``) are skipped.

The plain-text ``lfs getstripe``, ``lfs getdirstripe`` and ``lfs df`` parsers, which no plugin uses, are test-only:
tests/formats/lustre.py (it reuses the private helpers below).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import stat as stat_module

SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}
STRIPE_SIZE_ALIGN = 64 * 1024
EOF_WORDS = ("-1", "eof", "EOF", "Eof")
LAYOUT_KEYS = ("mirror_id", "extent_start", "extent_end", "stripe_count", "stripe_size", "pattern", "pool")

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtTpPeE]?)(?:i?[bB])?\s*$")
# key: value pairs; lfs prints several on one line for directory defaults
_PAIR_RE = re.compile(r"([A-Za-z_][\w.]*):\s+(\S+)")
_COMPONENT_HDR_RE = re.compile(r"^\s*component\d+:\s*$")

# lfs getstripe key -> our component key. Both the lmm_ (file / YAML) and the bare (directory default) spellings.
_COMPONENT_KEYS = {
    "lmm_stripe_count": "stripe_count",
    "stripe_count": "stripe_count",
    "lmm_stripe_size": "stripe_size",
    "stripe_size": "stripe_size",
    "lmm_pattern": "pattern",
    "pattern": "pattern",
    "lmm_pool": "pool",
    "pool": "pool",
    "lmm_stripe_offset": "stripe_offset",
    "stripe_offset": "stripe_offset",
    "lcme_mirror_id": "mirror_id",
    "lcme_extent.e_start": "extent_start",
    "lcme_extent.e_end": "extent_end",
    "lcme_id": "id",
    "lcme_flags": "flags",
}


class LayoutError(ValueError):
    """A requested layout that lfs would refuse (raised before any command runs)."""


def parse_size(value):
    """``"4M"`` -> 4194304. Accepts ints, plain digits and K/M/G/T/P/E suffixes (binary, as lfs does).

    Raises ValueError for anything else (including negative numbers).
    """
    if isinstance(value, bool):
        raise ValueError("invalid size: %r" % (value,))
    if isinstance(value, int):
        if value < 0:
            raise ValueError("invalid size: %r" % (value,))
        return value
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ValueError("invalid size: %r" % (value,))
    number, unit = m.group(1), m.group(2).upper()
    result = float(number) * SIZE_UNITS[unit]
    if result != int(result):
        raise ValueError("size is not a whole number of bytes: %r" % (value,))
    return int(result)


def parse_extent(value):
    """A component end: ``-1``/``eof``/``EOF`` (or None) -> None, anything else -> bytes via parse_size."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return None if value == -1 else parse_size(value)
    text = str(value).strip()
    if text in EOF_WORDS or text.lower() == "eof":
        return None
    return parse_size(text)


def format_size(num):
    """Bytes -> the shortest exact lfs size string (``4194304`` -> ``"4M"``, ``65536`` -> ``"64K"``)."""
    num = int(num)
    if num == 0:
        return "0"
    for unit in ("E", "P", "T", "G", "M", "K"):
        mult = SIZE_UNITS[unit]
        if num % mult == 0:
            return "%d%s" % (num // mult, unit)
    return str(num)


def format_extent(end):
    """None (EOF) -> ``"-1"``, bytes -> format_size."""
    return "-1" if end is None else format_size(end)


def _int_or_none(value):
    if value is None:
        return None
    value = str(value).strip().rstrip(",")
    if value in ("N/A", "n/a", ""):
        return None
    try:
        return int(value, 0) if value.lower().startswith("0x") else int(value)
    except ValueError:
        return None


def normalize_pattern(value):
    """lfs prints the pattern as a word (``raid0``, ``mdt``) or, in older versions, a number (``1`` = raid0;
    ``0`` = unset, which lfs treats as raid0)."""
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in ("0", "1", "raid0", "default"):
        return "raid0"
    if text in ("mdt", "0x100", "256"):
        return "mdt"
    return text


def _empty_component():
    return {"mirror_id": None, "extent_start": 0, "extent_end": None, "stripe_count": None,
            "stripe_size": None, "pattern": None, "pool": None}


def _finish(raw):
    comp = _empty_component()
    comp["mirror_id"] = _int_or_none(raw.get("mirror_id"))
    start = _int_or_none(raw.get("extent_start"))
    comp["extent_start"] = 0 if start is None else start
    end = raw.get("extent_end")
    comp["extent_end"] = None if end is None or str(end).upper() == "EOF" else _int_or_none(end)
    comp["stripe_count"] = _int_or_none(raw.get("stripe_count"))
    comp["stripe_size"] = _int_or_none(raw.get("stripe_size"))
    comp["pattern"] = normalize_pattern(raw.get("pattern"))
    pool = raw.get("pool")
    comp["pool"] = pool if pool not in (None, "", "N/A") else None
    return comp


def _parse_layout_lines(lines):
    """Shared core of the YAML and (test-only) text parsers: returns (header, raw component dicts)."""
    header = {}
    comps = []
    current = None
    composite = False
    for raw_line in lines:
        line = raw_line.replace("\t", "    ").rstrip("\r\n")
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("-") or stripped.startswith("l_ost_idx") or stripped.startswith("l_fid") \
                or stripped.startswith("obdidx") or re.match(r"^\d+\s+\d+", stripped):
            continue  # object lists / obdidx table
        if _COMPONENT_HDR_RE.match(line):
            composite = True
            if current:
                comps.append(current)
            current = {}
            continue
        pairs = _PAIR_RE.findall(line)
        if not pairs:
            continue  # path header line, "has no stripe info" message, sub_layout:, lmm_objects:
        for key, value in pairs:
            if key.startswith("lcm_"):
                composite = True
                header[key] = value
                continue
            ours = _COMPONENT_KEYS.get(key)
            if ours is None:
                continue
            if key.startswith("lcme_"):
                composite = True
            if ours == "id" and current is not None and "id" in current:
                comps.append(current)
                current = {}
            if current is None:
                current = {}
            current[ours] = value
    if current:
        comps.append(current)
    return header, comps, composite


def _layout(header, comps, composite):
    components = [_finish(c) for c in comps if any(k in c for k in ("stripe_count", "stripe_size", "extent_end"))]
    mirror_count = _int_or_none(header.get("lcm_mirror_count"))
    if mirror_count is None:
        mirror_count = 1 if components else 0
    return {"mirror_count": mirror_count, "components": components, "composite": bool(composite and components)}


def parse_getstripe_yaml(text):
    """Parse ``lfs getstripe -y [-d] <path>``. Only the first layout in the output is read."""
    header, comps, composite = _parse_layout_lines((text or "").splitlines())
    return _layout(header, comps, composite)


def layout_from_params(stripe_count=None, stripe_size=None, pool=None, components=None):
    """Normalise a requested layout into the parsed shape, filling in what lfs fills in (extents 0..EOF, each
    component starting where the previous one ended). Options left unset stay None: they are not compared.

    Raises LayoutError for layouts lfs would refuse.
    """
    def _size(value, what):
        if value is None:
            return None
        try:
            size = parse_size(value)
        except ValueError:
            raise LayoutError("%s %r is not a size (use bytes or a K/M/G suffix)" % (what, value))
        if size <= 0 or size % STRIPE_SIZE_ALIGN:
            raise LayoutError("%s %r must be a positive multiple of 64K (65536 bytes)" % (what, value))
        return size

    def _count(value, what):
        if value is None:
            return None
        try:
            count = int(value)
        except (TypeError, ValueError):
            raise LayoutError("%s %r is not an integer" % (what, value))
        if count < -1:
            raise LayoutError("%s must be -1 (all OSTs), 0 (filesystem default) or positive, got %d" % (what, count))
        return count

    if components:
        if stripe_count is not None or stripe_size is not None or pool is not None:
            raise LayoutError("components cannot be combined with stripe_count, stripe_size or pool")
        result = []
        start = 0
        for pos, item in enumerate(components):
            item = item or {}
            label = "components[%d]" % pos
            if item.get("end") is None:
                raise LayoutError("%s needs an end (a size, or -1/eof for the last component)" % label)
            try:
                end = parse_extent(item.get("end"))
            except ValueError:
                raise LayoutError("%s end %r is not a size or -1/eof" % (label, item.get("end")))
            comp = _empty_component()
            comp.update(extent_start=start, extent_end=end,
                        stripe_count=_count(item.get("stripe_count"), label + " stripe_count"),
                        stripe_size=_size(item.get("stripe_size"), label + " stripe_size"),
                        pool=item.get("pool") or None)
            last = pos == len(components) - 1
            if end is None and not last:
                raise LayoutError("%s ends at EOF but is not the last component" % label)
            if end is not None:
                if last:
                    raise LayoutError("the last component must end at EOF (-1), not %s" % item.get("end"))
                if end <= start:
                    raise LayoutError("component ends must increase: %s end %s is not after %s"
                                      % (label, format_size(end), format_size(start)))
                if end % STRIPE_SIZE_ALIGN:
                    raise LayoutError("%s end %s must be a multiple of 64K" % (label, item.get("end")))
                if comp["stripe_size"] and end % comp["stripe_size"]:
                    raise LayoutError("%s end %s must be a multiple of its stripe_size %s"
                                      % (label, item.get("end"), format_size(comp["stripe_size"])))
            result.append(comp)
            start = end
        return {"mirror_count": 1, "components": result, "composite": True}
    comp = _empty_component()
    comp.update(stripe_count=_count(stripe_count, "stripe_count"), stripe_size=_size(stripe_size, "stripe_size"),
                pool=pool or None)
    return {"mirror_count": 1, "components": [comp], "composite": False}


def layout_matches(current, desired):
    """True when ``current`` (parsed) satisfies ``desired`` (from layout_from_params).

    Same number of components with the same extents; stripe_count, stripe_size and pool compared only where
    ``desired`` sets them.
    """
    cur = (current or {}).get("components") or []
    want = (desired or {}).get("components") or []
    if len(cur) != len(want):
        return False
    for have, need in zip(cur, want):
        if have.get("extent_start", 0) != need.get("extent_start", 0) or have.get("extent_end") != need.get("extent_end"):
            return False
        for key in ("stripe_count", "stripe_size", "pool"):
            if need.get(key) is not None and have.get(key) != need.get(key):
                return False
    return True


def setstripe_args(desired):
    """``lfs setstripe`` arguments (without the path) for a layout from layout_from_params."""
    args = []
    comps = desired["components"]
    for comp in comps:
        if desired.get("composite"):
            args += ["-E", format_extent(comp["extent_end"])]
        if comp.get("stripe_count") is not None:
            args += ["-c", str(comp["stripe_count"])]
        if comp.get("stripe_size") is not None:
            args += ["-S", format_size(comp["stripe_size"])]
        if comp.get("pool"):
            args += ["-p", comp["pool"]]
    return args


# ------------------------------------------------------------------------------------------------ server tools
# Parsers for the Lustre server tools (tunefs.lustre, blkid, lctl get_param / llog_print / dl, lnetctl), one per
# tool output, and the pure decisions built on them. The modules lustre_target, lnet, lctl_param and
# lustre_device_info use them; the lab emulators are read through the same parsers
# (tests/lab/unit/test_emulator_lustre_server.py).

LDD_FLAG_MDT = 0x1
LDD_FLAG_OST = 0x2
LDD_FLAG_MGS = 0x4
LDD_FLAG_VIRGIN = 0x20

_LDD_LINE_RE = re.compile(r"^(Target|Index|UUID|Lustre FS|Mount type|Flags|Persistent mount opts|Parameters):"
                          r"[ \t]*(.*)$")


def _parse_ldd_block(lines):
    ldd = {}
    for line in lines:
        m = _LDD_LINE_RE.match(line.rstrip("\r\n"))
        if not m:
            continue
        key, value = m.group(1), m.group(2).strip()
        if key == "Target":
            ldd["target"] = value
        elif key == "Index":
            ldd["index"] = None if value in ("unassigned", "") else _int_or_none(value)
        elif key == "UUID":
            ldd["uuid"] = value
        elif key == "Lustre FS":
            ldd["fsname"] = value
        elif key == "Mount type":
            ldd["mount_type"] = value
        elif key == "Flags":
            ldd["flags"] = int(value, 16) if value.lower().startswith("0x") else _int_or_none(value)
        elif key == "Persistent mount opts":
            ldd["mount_opts"] = value
        elif key == "Parameters":
            ldd["params"] = value.split()
    if "flags" in ldd and ldd["flags"] is not None:
        flags = ldd["flags"]
        ldd["types"] = [name for name, bit in (("MGS", LDD_FLAG_MGS), ("MDT", LDD_FLAG_MDT), ("OST", LDD_FLAG_OST))
                        if flags & bit]
        ldd["first_time"] = bool(flags & LDD_FLAG_VIRGIN)
    return ldd


def parse_tunefs_dryrun(text):
    """Parse ``tunefs.lustre --dryrun <dev>`` (also ``mkfs.lustre --dryrun``).

    Returns ``{"found": bool, "previous": ldd or None, "permanent": ldd or None}``; each ldd has ``target``,
    ``index`` (None when unassigned), ``fsname``, ``mount_type``, ``flags`` (int), ``types`` (MGS/MDT/OST),
    ``first_time``, ``mount_opts`` and ``params`` (list of ``key=value``). ``found`` is False when the tool
    said ``checking for existing Lustre data: not found`` or printed no previous values.
    """
    sections = {}
    current = None
    found = None
    for line in (text or "").splitlines():
        stripped = line.strip()
        if stripped.startswith("checking for existing Lustre data:"):
            found = stripped.endswith("found") and not stripped.endswith("not found")
            continue
        if stripped in ("Read previous values:", "Permanent disk data:"):
            current = "previous" if stripped.startswith("Read") else "permanent"
            sections[current] = []
            continue
        if current:
            sections[current].append(line)
    result = {"found": found if found is not None else "previous" in sections, "previous": None,
              "permanent": None}
    for name in ("previous", "permanent"):
        if name in sections:
            result[name] = _parse_ldd_block(sections[name])
    return result


_LLOG_RECORD_RE = re.compile(r"^\s*-\s*\{\s*(.*?)\s*\}\s*$")


def parse_llog_params(text):
    """Parse ``lctl --device MGS llog_print params``: one ``- { index: N, event: set_param, device: general,
    parameter: P, value: V }`` line per record (older versions print ``param:``).

    Returns ``{"records": [...], "params": {parameter: value}}``; later records win, and a record without a
    value (a ``set_param -P -d`` deletion) removes the parameter.
    """
    records = []
    params = {}
    for line in (text or "").splitlines():
        m = _LLOG_RECORD_RE.match(line)
        if not m:
            continue
        rec = {}
        for part in m.group(1).split(", "):
            if ":" not in part:
                continue
            key, value = part.split(":", 1)
            rec[key.strip()] = value.strip()
        name = rec.get("parameter", rec.get("param"))
        if name is None:
            continue
        rec = {"index": _int_or_none(rec.get("index")), "event": rec.get("event"), "device": rec.get("device"),
               "parameter": name, "value": rec.get("value")}
        records.append(rec)
        if rec["value"] is None or rec["event"] in ("del", "delete"):
            params.pop(name, None)
        else:
            params[name] = rec["value"]
    return {"records": records, "params": params}


def lnet_net_name(net):
    """``tcp0`` -> ``tcp``, ``o2ib0`` -> ``o2ib`` (what lnetctl prints); ``tcp1`` is kept."""
    m = re.match(r"^([a-z0-9]*?[a-z])(\d*)$", net or "")
    if not m:
        return net
    return m.group(1) if m.group(2) in ("", "0") else net


def parse_lnetctl_net_show(text):
    """Parse ``lnetctl net show [-v]`` (and ``lnetctl export``) without a YAML library.

    Returns ``{net_type: [{"nid": ..., "status": ..., "interfaces": [...]}]}`` in output order; ``lo`` is
    included when printed. Unknown keys (statistics, tunables) are ignored.
    """
    nets = {}
    current = None
    ni = None
    in_ifaces = False
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        m = re.match(r"^\s*-\s*net type:\s*(\S+)\s*$", line)
        if m:
            current = m.group(1)
            nets.setdefault(current, [])
            ni, in_ifaces = None, False
            continue
        if current is None:
            continue
        m = re.match(r"^\s*-\s*(nid|interfaces):\s*(\S*)\s*$", line)
        if m:
            ni = {"nid": None, "status": None, "interfaces": []}
            nets[current].append(ni)
            if m.group(1) == "nid":
                ni["nid"] = m.group(2)
                in_ifaces = False
            else:
                in_ifaces = True
            continue
        if ni is None:
            continue
        m = re.match(r"^\s*(status|interfaces):\s*(\S*)\s*$", line)
        if m:
            if m.group(1) == "status":
                ni["status"] = m.group(2)
                in_ifaces = False
            else:
                in_ifaces = True
            continue
        m = re.match(r"^\s*\d+:\s*(\S+)\s*$", line)
        if m and in_ifaces:
            ni["interfaces"].append(m.group(1))
            continue
        if re.match(r"^\s*[A-Za-z][\w ()]*:", line):
            in_ifaces = False
    return nets


# ------------------------------------------------------------------------------------------------ blkid

def _blkid_unescape(value):
    """``blkid -o export`` escapes shell specials with a backslash (``LABEL=my\\ data``)."""
    return re.sub(r"\\(.)", r"\1", value)


def parse_blkid_export(text):
    """Parse ``blkid -p -o export <dev>``: one ``KEY=value`` line per property -> dict (``TYPE``, ``PTTYPE``,
    ``LABEL``, ``UUID``, ``DEVNAME``...). blkid prints nothing (and exits 2) when it finds no signature."""
    result = {}
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and re.match(r"^[A-Z][A-Z0-9_]*$", key):
            result[key] = _blkid_unescape(value)
    return result


# ------------------------------------------------------------------------------------------------ targets

TARGET_TYPES = ("mgs", "mgs_mdt", "mdt", "ost")
# The type bits of tunefs.lustre's "Flags:" that each requested target type must carry.
TARGET_TYPE_FLAGS = {"mgs": LDD_FLAG_MGS, "mgs_mdt": LDD_FLAG_MGS | LDD_FLAG_MDT, "mdt": LDD_FLAG_MDT,
                     "ost": LDD_FLAG_OST}
TARGET_TYPE_ARGS = {"mgs": ["--mgs"], "mgs_mdt": ["--mgs", "--mdt"], "mdt": ["--mdt"], "ost": ["--ost"]}
_TYPE_BITS = LDD_FLAG_MGS | LDD_FLAG_MDT | LDD_FLAG_OST


def target_svname(target):
    """The name a target registers under: ``MGS``, ``<fsname>-MDT<index hex>`` or ``<fsname>-OST<index hex>``."""
    if target["type"] == "mgs":
        return "MGS"
    kind = "OST" if target["type"] == "ost" else "MDT"
    return "%s-%s%04x" % (target.get("fsname") or "", kind, int(target.get("index") or 0))


def target_mount_leaf(target):
    """The directory a target mounts on under lustre_server_mount_root when it names no mountpoint: ``mgs``, or
    ``<fsname>-<mdt|ost><index>`` (a combined MGS and MDT0 mounts as its MDT)."""
    if target["type"] == "mgs":
        return "mgs"
    return "%s-%s%s" % (target.get("fsname", ""), target["type"].replace("mgs_", ""), target.get("index", 0))


def check_targets(targets):
    """The problems of a target list (a list of str, empty when it is usable), before any device is read.

    Each target needs an absolute device, a known type, an fsname of 1-8 characters and an index >= 0 (except
    an MGS), mgs_nids (an MDT or OST without its own MGS), not both servicenodes and failnodes; no two targets
    may use the same device.
    """
    problems = []
    seen = {}
    for pos, t in enumerate(targets):
        label = "targets[%d] (%s)" % (pos, t.get("device") or "?")
        device = t.get("device") or ""
        if not device.startswith("/"):
            problems.append("%s: device must be an absolute path" % label)
        if t.get("type") not in TARGET_TYPES:
            problems.append("%s: type must be one of %s" % (label, ", ".join(TARGET_TYPES)))
            continue
        if t["type"] != "mgs":
            if not 1 <= len(t.get("fsname") or "") <= 8:
                problems.append("%s: a %s needs an fsname of 1-8 characters" % (label, t["type"]))
            if t.get("index") is None or int(t["index"]) < 0:
                problems.append("%s: a %s needs an index (an integer >= 0)" % (label, t["type"]))
        if t["type"] in ("mdt", "ost") and not t.get("mgs_nids"):
            problems.append("%s: a %s needs mgs_nids (the first is the active MGS)" % (label, t["type"]))
        if t.get("servicenodes") and t.get("failnodes"):
            problems.append("%s: servicenodes and failnodes are mutually exclusive" % label)
        if device in seen:
            problems.append("%s: device already used by targets[%d]" % (label, seen[device]))
        seen.setdefault(device, pos)
    return problems


def mkfs_args(target):
    """``mkfs.lustre`` arguments (without the program) that format ``target``. Never ``--reformat``."""
    args = ["--backfstype=%s" % (target.get("backfstype") or "ldiskfs")]
    if target.get("fsname"):
        args.append("--fsname=%s" % target["fsname"])
    args += TARGET_TYPE_ARGS[target["type"]]
    if target["type"] != "mgs":
        args.append("--index=%d" % int(target["index"]))
    args += ["--mgsnode=%s" % n for n in target.get("mgs_nids") or []]
    args += ["--servicenode=%s" % n for n in target.get("servicenodes") or []]
    args += ["--failnode=%s" % n for n in target.get("failnodes") or []]
    if target.get("mkfs_options"):
        args.append("--mkfsoptions=%s" % target["mkfs_options"])
    args += ["--param=%s" % p for p in target.get("params") or []]
    args.append(target["device"])
    return args


def _wanted(target):
    return "%s %s%s" % (target["type"], target_svname(target),
                        " of %s" % target["fsname"] if target.get("fsname") else "")


# How the probes answer a device that holds nothing, and nothing else. Anything they print beyond these lines (an
# I/O error, a permission error, a debugfs complaint, a message of a version we have not seen) means the device
# could not be read cleanly, and such a device is never called blank.
#
# tunefs.lustre (lustre/utils/mkfs_lustre.c, built with TUNEFS): osd_is_lustre() prints "checking for existing
# Lustre data: not found" (stdout), then fatal() and "Device <dev> has not been formatted with mkfs.lustre"
# (stderr), and it exits ENODEV (19) with "<prog>: exiting with 19 (No such device)".
TUNEFS_NOT_LUSTRE_RC = 19
_TUNEFS_NOT_LUSTRE_OUT = (re.compile(r"^checking for existing Lustre data: not found$"),)
_TUNEFS_NOT_LUSTRE_ERR = (re.compile(r"^\S+ FATAL: Device \S.* has not been formatted with mkfs\.lustre$"),
                          re.compile(r"^\S+: exiting with 19 \(No such device\)$"))
# blkid -p (util-linux misc-utils/blkid.c, lowprobe_device()): exit 2 (BLKID_EXIT_NOTFOUND) and no output when it
# found nothing. It ALSO exits 2 when open() fails ("blkid: error: <dev>: Input/output error" on stderr) and,
# silently, when a read fails during the probe: exit 2 with an empty stderr does not prove that the device was read,
# which is why blank also needs the device's first and last MiB read back (device_read_error).
BLKID_NOTFOUND_RC = 2
BLKID_AMBIVALENT_RC = 8
# What is read back from each end of a device before it may be called blank.
READBACK_BYTES = 1 << 20


def _lines(text):
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def tunefs_says_not_lustre(rc, out, err):
    """True only when ``tunefs.lustre --dryrun`` answered exactly "this device holds no Lustre data": exit 19 with
    the "has not been formatted with mkfs.lustre" text and no other line. Any other failure (an I/O error, a
    permission error, a timeout (rc None), an unknown message) is False."""
    if rc != TUNEFS_NOT_LUSTRE_RC or "has not been formatted with mkfs.lustre" not in (err or ""):
        return False
    return (all(any(p.match(line) for p in _TUNEFS_NOT_LUSTRE_OUT) for line in _lines(out))
            and all(any(p.match(line) for p in _TUNEFS_NOT_LUSTRE_ERR) for line in _lines(err)))


def blkid_says_nothing(rc, out, err):
    """True only when ``blkid -p -o export`` answered "no signature": exit 2, nothing on stdout or stderr."""
    return rc == BLKID_NOTFOUND_RC and not _lines(out) and not _lines(err)


def _first_error(*texts):
    for text in texts:
        lines = _lines(text)
        if lines:
            return " / ".join(lines)[:500]
    return ""


def classify_device(target, exists, tunefs=None, blkid=None, read_error=False, in_use=None):
    """THE decision on what ``target``'s device holds, from what was read before anything is written. Every
    caller that must know whether a device may be formatted uses this function.

    ``tunefs`` and ``blkid`` are ``(rc, stdout, stderr)`` of ``tunefs.lustre --dryrun <dev>`` and
    ``blkid -p -o export <dev>`` (rc None: no answer within the time limit); blkid is only needed when tunefs found
    no Lustre data. ``read_error`` is what reading the device's first and last MiB gave: None when both read back,
    an error text when not, False (the default) when they were not read. ``in_use`` is the list of reasons the device
    is busy (device_usage()): holders, mounts, swap, partitions in use. Returns ``{"state", "detail", "identity"}``
    where state is:

    * ``present``: the same target (type bits, and fsname and index unless an MGS) is already there;
    * ``blank``: EVERY probe answered cleanly that it holds nothing (tunefs.lustre its "not formatted with
      mkfs.lustre" text and nothing else, blkid exit 2 with no output at all), its first and last MiB read back
      without error, and nothing uses it;
    * ``foreign``: another Lustre target, or another file system / partition table / several signatures;
    * ``in_use``: it looks blank but something holds, mounts or swaps on it (or on one of its partitions);
    * ``missing``: the device does not exist;
    * ``unreadable``: any other answer (an I/O or permission error, no answer in time, a failed read-back, an
      unknown message): the device and the error are in the detail.

    Only ``blank`` may be formatted; every other state except ``present`` stops everything, with format_ok too.
    """
    want = _wanted(target)
    if not exists:
        return {"state": "missing", "detail": "does not exist (expected %s)" % want, "identity": None}
    t_rc, t_out, t_err = tunefs if tunefs is not None else (None, "", "")
    parsed = parse_tunefs_dryrun(t_out)
    ldd = parsed["previous"]
    if t_rc == 0 and parsed["found"] and ldd:
        flags = ldd.get("flags") or 0
        index = ldd.get("index")
        same = (flags & _TYPE_BITS) == TARGET_TYPE_FLAGS[target["type"]] and (
            target["type"] == "mgs" or (ldd.get("fsname") == target.get("fsname")
                                        and index is not None and index == int(target["index"])))
        identity = dict(ldd, source="tunefs.lustre")
        if same:
            return {"state": "present", "detail": ldd.get("target") or target_svname(target), "identity": identity}
        return {"state": "foreign", "identity": identity,
                "detail": "holds Lustre target %s (fsname %s, index %s, flags %#x), not %s"
                          % (ldd.get("target") or "?", ldd.get("fsname") or "", "unassigned" if index is None else index,
                             flags, want)}
    b_rc, b_out, b_err = blkid if blkid is not None else (None, "", "")
    props = parse_blkid_export(b_out)
    signature = dict((k, v) for k, v in props.items() if k != "DEVNAME")
    if b_rc == 0 and signature:
        what = props.get("TYPE") or props.get("PTTYPE") or "an unknown signature"
        label = " (label %s)" % props["LABEL"] if props.get("LABEL") else ""
        return {"state": "foreign", "identity": dict(props, source="blkid"),
                "detail": "holds %s%s, not Lustre data (expected %s)" % (what, label, want)}
    if b_rc == BLKID_AMBIVALENT_RC and "ambivalent result" in (b_err or ""):
        return {"state": "foreign", "identity": None,
                "detail": "holds more than one signature (blkid: %s), not Lustre data (expected %s)"
                          % (_first_error(b_err), want)}

    def unreadable(why):
        return {"state": "unreadable", "identity": None,
                "detail": "is unreadable, refusing to call it blank (expected %s): %s" % (want, why)}

    if t_rc is None and tunefs is not None:
        return unreadable("tunefs.lustre --dryrun gave no answer in time")
    if not tunefs_says_not_lustre(t_rc, t_out, t_err):
        return unreadable("tunefs.lustre --dryrun rc %s: %s" % (t_rc, _first_error(t_err, t_out) or "no output"))
    if b_rc is None:
        return unreadable("blkid -p gave no answer%s" % (" in time" if blkid is not None else ""))
    if not blkid_says_nothing(b_rc, b_out, b_err):
        return unreadable("blkid -p rc %s: %s" % (b_rc, _first_error(b_err, b_out) or "no output"))
    if read_error is False:
        return unreadable("its first and last MiB were not read back")
    if read_error:
        return unreadable("reading its first and last MiB failed: %s" % read_error)
    if in_use:
        return {"state": "in_use", "identity": None,
                "detail": "holds no signature but is in use, refusing to format it (expected %s): %s"
                          % (want, "; ".join(in_use))}
    return {"state": "blank", "detail": want, "identity": None}


# ------------------------------------------------------------------------------------------------ device identity
# Two paths are the same target when they name the same device: a block device by its device number (st_rdev, after
# links are followed: /dev/sdb and /dev/disk/by-id/wwn-... are one disk), any other file (a lab "device") by its
# file system and inode.

def device_key(st):
    """The identity of a device from its os.stat() result: ``("block", major, minor)`` or ``("file", st_dev, ino)``."""
    if stat_module.S_ISBLK(st.st_mode):
        return ("block", os.major(st.st_rdev), os.minor(st.st_rdev))
    return ("file", st.st_dev, st.st_ino)


def describe_key(key):
    return "block device %d:%d" % (key[1], key[2]) if key[0] == "block" else "file %d:%d" % (key[1], key[2])


def duplicate_devices(targets, stat=os.stat):
    """The problems (list of str) of targets whose devices are one device under different paths, compared by
    device number (``stat`` follows links). Devices that do not exist are left to the caller."""
    seen = {}
    problems = []
    for pos, t in enumerate(targets):
        try:
            key = device_key(stat(t["device"]))
        except (OSError, TypeError, ValueError):
            continue
        if key in seen:
            first = seen[key]
            problems.append("targets[%d] (%s) is the same device as targets[%d] (%s): %s"
                            % (pos, t["device"], first, targets[first]["device"], describe_key(key)))
        else:
            seen[key] = pos
    return problems


def parse_mountinfo(text):
    """``/proc/self/mountinfo`` -> ``[{"devno": "8:17", "mountpoint", "source"}]`` (octal escapes undone)."""
    def unescape(value):
        return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), value)
    mounts = []
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) < 7 or "-" not in fields[6:]:
            continue
        sep = fields.index("-", 6)
        source = fields[sep + 2] if len(fields) > sep + 2 else ""
        mounts.append({"devno": fields[2], "mountpoint": unescape(fields[4]), "source": unescape(source)})
    return mounts


def _read_text(path):
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None


def device_usage(path, sys_root="/sys", mountinfo_path="/proc/self/mountinfo", swaps_path="/proc/swaps",
                 stat=os.stat, realpath=os.path.realpath):
    """Why ``path`` must not be formatted although it may look blank (list of str, empty when nothing uses it).

    A block device is in use when ``<sys_root>/class/block/<name>/holders`` is not empty (device-mapper, md, LVM
    built on it), when it or one of its partitions is mounted (``/proc/self/mountinfo``, by device number, or by a
    source that resolves to it) or is active swap, or when a partition has holders. Any other file (a lab "device")
    is in use when a mount names it as its source.
    """
    reasons = []
    real = realpath(path)
    st = stat(real)
    mounts = parse_mountinfo(_read_text(mountinfo_path) or "")
    swaps = [line.split()[0] for line in (_read_text(swaps_path) or "").splitlines()[1:] if line.split()]

    def devno_of(other):
        """The device number (``"8:17"``) of a block device path, None for anything else."""
        if not other or not other.startswith("/"):
            return None
        try:
            other_st = stat(realpath(other))
        except (OSError, TypeError, ValueError):
            return None
        if not stat_module.S_ISBLK(other_st.st_mode):
            return None
        return "%d:%d" % (os.major(other_st.st_rdev), os.minor(other_st.st_rdev))

    if not stat_module.S_ISBLK(st.st_mode):
        for m in mounts:
            if m["source"] and (m["source"] == path or m["source"] == real):
                reasons.append("%s is mounted at %s" % (path, m["mountpoint"]))
        return reasons
    devno = "%d:%d" % (os.major(st.st_rdev), os.minor(st.st_rdev))
    block = os.path.join(sys_root, "class", "block")
    name = os.path.basename(real)
    if (_read_text(os.path.join(block, name, "dev")) or "").strip() != devno:
        name = None
        try:
            entries = sorted(os.listdir(block))
        except OSError:
            entries = []
        for entry in entries:
            if (_read_text(os.path.join(block, entry, "dev")) or "").strip() == devno:
                name = entry
                break
    if name is None:
        return ["%s (%s) is not listed in %s, so its holders and partitions cannot be checked" % (path, devno, block)]
    parts = []
    try:
        for entry in sorted(os.listdir(os.path.join(block, name))):
            if os.path.exists(os.path.join(block, name, entry, "partition")):
                parts.append((entry, (_read_text(os.path.join(block, name, entry, "dev")) or "").strip()))
    except OSError:
        pass
    for label, kname, dn in [("%s (%s)" % (path, name), name, devno)] + \
            [("partition %s of %s" % (p, path), "%s/%s" % (name, p), pdn) for p, pdn in parts]:
        try:
            holders = sorted(os.listdir(os.path.join(block, kname, "holders")))
        except OSError:
            holders = []
        if holders:
            reasons.append("%s is held by %s" % (label, ", ".join(holders)))
        for m in mounts:
            if m["devno"] == dn or devno_of(m["source"]) == dn:
                reasons.append("%s is mounted at %s" % (label, m["mountpoint"]))
        if any(devno_of(swap) == dn for swap in swaps):
            reasons.append("%s is active swap" % label)
    return reasons


# ------------------------------------------------------------------------------------------------ LNet

def lnet_config_text(networks, header=None):
    """The persistent LNet configuration (the ``lnetctl export --backup`` format that ``lnetctl import``, and so
    the stock lnet.service, reads): one local NI per interface. ``networks`` is ``[{"net", "interfaces"}]``."""
    lines = []
    for line in (header or "").splitlines():
        lines.append(("# " + line).rstrip())
    lines.append("net:")
    for net in networks:
        lines.append("    - net type: %s" % net["net"])
        lines.append("      local NI(s):")
        for ifname in net["interfaces"]:
            lines += ["        - interfaces:", "              0: %s" % ifname]
    return "\n".join(lines) + "\n"


def lnet_missing(networks, live):
    """The wanted interfaces LNet lacks: ``[{"net", "missing"}]`` in wanted order.

    ``live`` is parse_lnetctl_net_show output; wanted nets are matched by the name lnetctl prints
    (``tcp0`` is shown as ``tcp``). Networks and interfaces LNet has but nobody asked for are not reported.
    """
    out = []
    for want in networks:
        have = set()
        for key in (want["net"], lnet_net_name(want["net"])):
            for ni in live.get(key, []):
                have.update(ni.get("interfaces") or [])
        missing = [i for i in want["interfaces"] if i not in have]
        if missing:
            out.append({"net": want["net"], "missing": missing})
    return out


# ------------------------------------------------------------------------------------------------ lctl params

_GET_PARAM_RE = re.compile(r"^([A-Za-z0-9_][^=\s]*)=(.*)$")


def parse_lctl_get_param(text):
    """Parse ``lctl get_param <pattern>...`` (without ``-n``): one ``path=value`` line per device the pattern
    matches -> ``[{"path", "value"}]`` in output order. A parameter whose value spans lines prints it on the
    lines after ``path=``; those lines are joined to its value with newlines."""
    result = []
    for line in (text or "").splitlines():
        m = _GET_PARAM_RE.match(line)
        if m:
            result.append({"path": m.group(1), "value": m.group(2).strip()})
        elif result and line.strip():
            prev = result[-1]
            prev["value"] = (prev["value"] + "\n" + line.rstrip()) if prev["value"] else line.rstrip()
    return result


def lctl_value(value):
    """A wanted parameter value as lctl prints it: booleans as 1/0, everything else as its trimmed string."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value).strip()


# ------------------------------------------------------------------------------------------------ lctl dl

# The obd devices `lctl dl` lists UP once a target of each type is mounted: (obd type, name), where None is the
# target's own name (its svname). A combined MGS and MDT0 starts both.
TARGET_DL_DEVICES = {"mgs": (("mgs", "MGS"),), "mgs_mdt": (("mgs", "MGS"), ("mdt", None)), "mdt": (("mdt", None),),
                     "ost": (("obdfilter", None),)}


def parse_lctl_dl(text):
    """Parse ``lctl dl``, one line per obd device: ``  3 UP obdfilter lfs-OST0000 lfs-OST0000_UUID 5``. The kernel's
    ``devices`` list (obd_device_list_seq_show(): ``"%3d %s %s %s %s %d"``) and the netlink listing of newer lctl
    (print_out_devices(): ``"%3s "`` then the fields with one space) print the same columns.

    Returns ``[{"index", "status", "type", "name", "uuid", "refcount"}]`` in output order. ``status`` is ``UP``
    (set up), ``ST`` (stopping), ``IN`` (inactive), ``AT`` (attached, not set up) or ``--``. The connection that
    ``lctl dl -t`` appends to osc and mdc lines is ignored, and so is any line that is not a device.
    """
    devices = []
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) >= 6 and fields[0].isdigit():
            devices.append({"index": int(fields[0]), "status": fields[1], "type": fields[2], "name": fields[3],
                            "uuid": fields[4], "refcount": _int_or_none(fields[5])})
    return devices


def targets_not_up(expect, devices):
    """The obd devices of the ``expect``ed targets (``[{"svname", "type"}]``, type as in TARGET_TYPES) that
    ``devices`` (parse_lctl_dl output) does not list UP: ``[{"svname", "type", "obd_type", "name", "status"}]``
    in ``expect`` order, each obd device once. ``status`` is what ``lctl dl`` shows for it, None when unlisted.
    """
    shown = dict(((d["type"], d["name"]), d["status"]) for d in devices)
    out = []
    seen = set()
    for want in expect:
        for obd_type, name in TARGET_DL_DEVICES[want["type"]]:
            key = (obd_type, name or want["svname"])
            if key in seen:
                continue
            seen.add(key)
            status = shown.get(key)
            if status != "UP":
                out.append({"svname": want["svname"], "type": want["type"], "obd_type": key[0], "name": key[1],
                            "status": status})
    return out
