# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for InfiniBand tools: ``ibstat``, ``ibstatus`` and ``ibdiagnet`` (2.x and 1.x).

The ``iblinkinfo`` parser, which no plugin uses, is test-only: tests/formats/infiniband.py.

Stdlib only, no Ansible import. Indentation may be TABs (what the tools print) or spaces (what pasted
copies show); trailing spaces are ignored; unknown lines are skipped.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

# Name -> (per-lane speed that `ibdiagnet --ls` takes, 4x link rate in Gb/s).
# PRACTICE.md: --ls is the per-lane speed (25 EDR, 50 HDR, 100 NDR; XDR 200).
RATES = {
    "sdr": (2.5, 10),
    "ddr": (5, 20),
    "qdr": (10, 40),
    "fdr": (14, 56),
    "edr": (25, 100),
    "hdr": (50, 200),
    "ndr": (100, 400),
    "xdr": (200, 800),
}

# sysfs and ibstatus print "<n>: <NAME>"; ibstat prints the names below. Normalise to ibstat's words.
PORT_STATES = {"0": "Nop", "1": "Down", "2": "Initializing", "3": "Armed", "4": "Active", "5": "ActiveDefer"}
PHYS_STATES = {"0": "NoStateChange", "1": "Sleep", "2": "Polling", "3": "Disabled", "4": "PortConfigurationTraining",
               "5": "LinkUp", "6": "LinkErrorRecovery", "7": "PhyTest"}


def _lane(name):
    key = str(name).strip().lower()
    if key not in RATES:
        raise ValueError("unknown InfiniBand rate %r (expected one of %s)" % (name, ", ".join(sorted(RATES))))
    return RATES[key]


def lane_speed_for_rate(name):
    """``ndr`` -> 100: the per-lane speed for ``ibdiagnet --ls`` (edr 25, hdr 50, ndr 100, xdr 200)."""
    value = _lane(name)[0]
    return int(value) if float(value).is_integer() else value


def _number(text):
    m = re.search(r"(\d+(?:\.\d+)?)", text or "")
    if not m:
        return None
    val = float(m.group(1))
    return int(val) if val.is_integer() else val


def rate_to_gbps(text):
    """``400``, ``400 Gb/sec (4X NDR)`` -> 400; ``2.5 Gb/sec (1X SDR)`` -> 2.5; None when no number."""
    return _number(text)


def normalize_state(text):
    """``4: ACTIVE`` / ``ACTIVE`` / ``Active`` -> ``Active``; ``2: INIT`` -> ``Initializing``."""
    text = (text or "").strip()
    m = re.match(r"^(\d+)\s*:", text)
    if m and m.group(1) in PORT_STATES:
        return PORT_STATES[m.group(1)]
    word = text.split(":")[-1].strip()
    low = word.lower()
    for val in PORT_STATES.values():
        if val.lower() == low:
            return val
    if low == "init":
        return "Initializing"
    if low in ("active_defer", "activedefer"):
        return "ActiveDefer"
    return word


def normalize_phys_state(text):
    """``5: LinkUp`` -> ``LinkUp``; ``Polling`` stays ``Polling``."""
    text = (text or "").strip()
    m = re.match(r"^(\d+)\s*:\s*(.*)$", text)
    if m:
        return PHYS_STATES.get(m.group(1), m.group(2).strip())
    return text


ROCE_V2 = "RoCE v2"
# An IPv4 address in a GID is IPv4-mapped: ::ffff:a.b.c.d, which sysfs prints as 0000:...:ffff:aabb:ccdd.
IPV4_MAPPED_GID_PREFIX = "0000:0000:0000:0000:0000:ffff:"


def roce_v2_ipv4_gid_index(types, gids):
    """The lowest GID index of a port whose type is RoCE v2 and whose GID carries an IPv4 address, or None.

    ``types`` and ``gids`` map the index (int) to the text of sysfs ``ports/<n>/gid_attrs/types/<i>`` and
    ``ports/<n>/gids/<i>``; an unset entry (which fails to read) is left out or None. NCCL_IB_GID_INDEX takes this
    index on a RoCE fabric (PRACTICE.md, NCCL)."""
    found = [i for i, kind in types.items()
             if (kind or "").strip() == ROCE_V2 and (gids.get(i) or "").strip().lower().startswith(IPV4_MAPPED_GID_PREFIX)]
    return min(found) if found else None


def parse_ibstat(text):
    """``ibstat`` (or ``ibstat mlx5_0``) -> list of ports.

    Each port: ``ca``, ``port`` (int), ``state``, ``physical_state``, ``rate_gbps``, ``link_layer``, and where
    present ``ca_type``, ``firmware``, ``base_lid``, ``sm_lid``, ``port_guid``, ``node_guid``. ``ibstatus``
    output is detected and handed to :func:`parse_ibstatus`, so either format can be passed.
    """
    if re.search(r"^Infiniband device '[^']+' port \d+ status:", text or "", re.M):
        return parse_ibstatus(text)
    ports = []
    ca = None
    ca_info = {}
    port = None
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        m = re.match(r"^CA:? '([^']+)'", line)
        if m:
            ca = m.group(1)
            ca_info = {}
            port = None
            continue
        if ca is None:
            continue
        body = line.strip()
        m = re.match(r"^Port (\d+):$", body)
        if m:
            port = {"ca": ca, "port": int(m.group(1)), "state": None, "physical_state": None, "rate_gbps": None,
                    "link_layer": None}
            port.update(ca_info)
            ports.append(port)
            continue
        if ":" not in body:
            continue
        key, value = [p.strip() for p in body.split(":", 1)]
        if port is None:
            if key == "CA type":
                ca_info["ca_type"] = value
            elif key == "Firmware version":
                ca_info["firmware"] = value
            elif key == "Node GUID":
                ca_info["node_guid"] = value
            continue
        if key == "State":
            port["state"] = normalize_state(value)
        elif key == "Physical state":
            port["physical_state"] = normalize_phys_state(value)
        elif key == "Rate":
            port["rate_gbps"] = _number(value)
        elif key == "Base lid":
            port["base_lid"] = _number(value)
        elif key == "SM lid":
            port["sm_lid"] = _number(value)
        elif key == "Port GUID":
            port["port_guid"] = value
        elif key == "Link layer":
            port["link_layer"] = value
    return ports


def parse_ibstatus(text):
    """``ibstatus`` -> the same port dicts as :func:`parse_ibstat` (lids converted from hex)."""
    ports = []
    port = None
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        m = re.match(r"^Infiniband device '([^']+)' port (\d+) status:", line)
        if m:
            port = {"ca": m.group(1), "port": int(m.group(2)), "state": None, "physical_state": None,
                    "rate_gbps": None, "link_layer": None}
            ports.append(port)
            continue
        if port is None or ":" not in line:
            continue
        key, value = [p.strip() for p in line.strip().split(":", 1)]
        if key == "state":
            port["state"] = normalize_state(value)
        elif key == "phys state":
            port["physical_state"] = normalize_phys_state(value)
        elif key == "rate":
            port["rate_gbps"] = _number(value)
            m = re.search(r"\((\d+X)\s+([A-Z0-9]+)\)", value)
            if m:
                port["width"], port["speed_name"] = m.group(1), m.group(2)
        elif key == "link_layer":
            port["link_layer"] = value
        elif key in ("base lid", "sm lid"):
            try:
                port[key.replace(" ", "_")] = int(value, 16)
            except ValueError:
                port[key.replace(" ", "_")] = None
        elif key == "default gid":
            port["default_gid"] = value
    return ports


_SEPARATOR_RE = re.compile(r"^-{20,}$")
_MSG_RE = re.compile(r"^-(W|E)-\s?(.*)$")
_V2_HEADER_RE = re.compile(r"^-I-\s+Stage\s+Warnings\s+Errors\s+Comment\s*$")
_V2_ROW_RE = re.compile(r"^-I-\s+(?P<name>.+?)\s+(?P<a>\d+)\s+(?P<b>\d+)(?:\s+(?P<comment>\S.*))?$")
_V1_HEADER_RE = re.compile(r"^\s+STAGE\s+Errors\s+Warnings\s*$")
_V1_ROW_RE = re.compile(r"^\s+(?P<name>\S.*?)\s+(?P<a>\d+)\s+(?P<b>\d+)\s*$")


def parse_ibdiagnet(text):
    """ibdiagnet console output (ibdiagnet2, or legacy 1.x) -> dict.

    ``format``: ``ibdiagnet2`` | ``ibdiagnet1`` | None; ``summary_found``: whether a stage table was seen;
    ``stages``: [{name, warnings, errors, comment}] from the ``Summary`` table (2.x: Warnings before Errors) or
    the 1.x ``Stages Status Report`` (Errors before Warnings); ``total_warnings``/``total_errors``: their sums;
    ``messages``: [{level: warning|error, text, stage}] from ``-W-``/``-E-`` lines (indented continuation lines
    are joined; ``stage`` is the ibdiagnet2 section the line appeared in); ``log_file``: where ibdiagnet says
    the full report is. Remember the console shows at most a few messages per type: gate on the totals.
    """
    stages = []
    messages = []
    fmt = None
    section = None
    table = None  # None, "v2" or "v1"
    after_sep = False
    last_msg = None
    log_file = None
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if line.startswith("Running version:") and "IBDIAGNET 2" in line.upper():
            fmt = fmt or "ibdiagnet2"
        if line.startswith("Loading IBDIAGNET from:"):
            fmt = "ibdiagnet1"
        if not line.strip():
            last_msg = None
            table = None
            continue
        if _SEPARATOR_RE.match(line):
            after_sep = True
            last_msg = None
            table = None
            continue
        if after_sep:
            after_sep = False
            if not line.startswith("-"):
                section = line.strip()
                if section == "Summary":
                    fmt = fmt or "ibdiagnet2"
                continue
        m = re.search(r"detailed errors/warnings in:?\s*(\S+)", line) or re.search(r"see (\S+) for complete log", line)
        if m:
            log_file = m.group(1)
            table = None
            continue
        if _V2_HEADER_RE.match(line):
            table = "v2"
            fmt = fmt or "ibdiagnet2"
            continue
        if _V1_HEADER_RE.match(line):
            table = "v1"
            fmt = fmt or "ibdiagnet1"
            continue
        if table == "v2":
            r = _V2_ROW_RE.match(line)
            if r:
                stages.append({"name": r.group("name"), "warnings": int(r.group("a")), "errors": int(r.group("b")),
                               "comment": (r.group("comment") or "").strip()})
                continue
            table = None
        elif table == "v1":
            r = _V1_ROW_RE.match(line)
            if r:
                stages.append({"name": r.group("name"), "warnings": int(r.group("b")), "errors": int(r.group("a")),
                               "comment": ""})
                continue
            table = None
        m = _MSG_RE.match(line)
        if m:
            last_msg = {"level": "warning" if m.group(1) == "W" else "error", "text": m.group(2).strip(),
                        "stage": section}
            messages.append(last_msg)
            continue
        if last_msg is not None and raw[:1].isspace():
            last_msg["text"] = (last_msg["text"] + " " + line.strip()).strip()
            continue
        last_msg = None
    return {
        "format": fmt,
        "summary_found": bool(stages),
        "stages": stages,
        "total_warnings": sum(s["warnings"] for s in stages),
        "total_errors": sum(s["errors"] for s in stages),
        "messages": messages,
        "log_file": log_file,
    }


# --------------------------------------------------------------------------------------------------------- sysfs
# /sys/class/infiniband/<ca>/ports/<n>/{state,phys_state,rate,link_layer,lid,counters/<name>}: what ibstat prints,
# read without running it (ib_port_info, and the node health check, which also reads the error counters).

def read_sysfs_text(path):
    """The stripped text of a sysfs file, None where it cannot be read."""
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def read_sysfs_ports(class_dir, counters=()):
    """Ports from sysfs, as :func:`parse_ibstat` returns them (``ca``, ``port``, ``state``, ``physical_state``,
    ``rate_gbps``, ``link_layer``, and where present ``ca_type``, ``firmware``, ``base_lid``), plus ``counters``:
    {name: int} of the named counters (``counters/<name>``) that read as whole numbers. ``class_dir`` is
    /sys/class/infiniband (or a copy); OSError when it cannot be listed."""
    ports = []
    for ca in sorted(os.listdir(class_dir)):
        dev = os.path.join(class_dir, ca)
        fw = read_sysfs_text(os.path.join(dev, "fw_ver"))
        hca = read_sysfs_text(os.path.join(dev, "hca_type"))
        pdir = os.path.join(dev, "ports")
        try:
            numbers = sorted((n for n in os.listdir(pdir) if n.isdigit()), key=int)
        except OSError:
            continue
        for n in numbers:
            pp = os.path.join(pdir, n)
            port = {
                "ca": ca, "port": int(n),
                "state": normalize_state(read_sysfs_text(os.path.join(pp, "state"))),
                "physical_state": normalize_phys_state(read_sysfs_text(os.path.join(pp, "phys_state"))),
                "rate_gbps": rate_to_gbps(read_sysfs_text(os.path.join(pp, "rate"))),
                "link_layer": read_sysfs_text(os.path.join(pp, "link_layer")),
                "counters": {},
            }
            if hca:
                port["ca_type"] = hca
            if fw:
                port["firmware"] = fw
            lid = read_sysfs_text(os.path.join(pp, "lid"))
            if lid:
                try:
                    port["base_lid"] = int(lid, 16)
                except ValueError:
                    pass
            for name in counters:
                value = read_sysfs_text(os.path.join(pp, "counters", name))
                if value is not None and re.match(r"^\d+$", value):
                    port["counters"][name] = int(value)
            ports.append(port)
    return ports
