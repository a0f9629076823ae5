# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""RoCEv2 host-side QoS: the parser of ``mlnx_qos -i <iface>`` output, the ECN sysfs paths, the one builder of
the ``mlnx_qos`` set command and the one plan of what differs.

The module ``roce_qos`` and the nccl role's boot unit (which runs the argv the module returns) use these; nothing
else decides what a RoCE interface's QoS is or how it is set.

``mlnx_qos -i <iface>`` (MLNX_OFED / DOCA-OFED, package mlnx-tools) prints, in this order::

    DCBX mode: OS controlled
    Priority trust state: dscp
    dscp2prio mapping:                     (only with trust dscp)
            prio:0 dscp:07,06,05,04,03,02,01,00,
    Receive buffer size (bytes): 80256,... (newer releases)
    Cable len: 7
    PFC configuration:
            priority    0   1   2   3   4   5   6   7
            enabled     0   0   0   1   0   0   0   0
            buffer      0   0   0   1   0   0   0   0   (newer releases)
    tc: 0 ratelimit: unlimited, tsa: vendor
             priority:  1

Only the trust state and the PFC ``enabled`` row matter here; the buffer and tc information is ignored. ECN
(DCQCN) is not in that output: it is per priority in sysfs,
``/sys/class/net/<iface>/ecn/roce_np/enable/<prio>`` (notification point) and ``.../roce_rp/enable/<prio>``
(reaction point), ``1`` or ``0``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

TOOL = "mlnx_qos"
# What provides the tool, for the message when it is missing.
TOOL_PACKAGE_HINT = ("mlnx_qos comes with MLNX_OFED / DOCA-OFED (the mlnx-tools package); install it, or manage "
                     "PFC, ECN and trust another way")
# mlnx_qos talks netlink to the driver and answers in well under a second; a minute means it hangs.
TIME_LIMIT_SECONDS = 60
TRUST_STATES = ("pcp", "dscp")
PRIORITIES = 8
ECN_POINTS = ("np", "rp")

_TRUST_RE = re.compile(r"^\s*Priority trust state:\s*(\S+)", re.M)
_DCBX_RE = re.compile(r"^\s*DCBX mode:\s*(.+?)\s*$", re.M)
_PRIORITY_ROW_RE = re.compile(r"^\s*priority((?:\s+\d+){%d})\s*$" % PRIORITIES)
_ENABLED_ROW_RE = re.compile(r"^\s*enabled((?:\s+[01]){%d})\s*$" % PRIORITIES)


def parse_mlnx_qos(text):
    """The state ``mlnx_qos -i <iface>`` prints: ``{"dcbx_mode": str|None, "trust": "dscp"|"pcp"|None,
    "pfc": [8 ints 0/1, by priority 0..7]}``. Raises ValueError when the PFC table is not there (not the
    output of ``mlnx_qos -i``, or a format this parser does not know)."""
    text = text or ""
    trust = _TRUST_RE.search(text)
    dcbx = _DCBX_RE.search(text)
    pfc = None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip() != "PFC configuration:":
            continue
        order = None
        for row in lines[i + 1:i + 4]:
            m = _PRIORITY_ROW_RE.match(row)
            if m:
                order = [int(p) for p in m.group(1).split()]
                continue
            m = _ENABLED_ROW_RE.match(row)
            if m:
                values = [int(v) for v in m.group(1).split()]
                order = order or list(range(PRIORITIES))
                if sorted(order) != list(range(PRIORITIES)):
                    raise ValueError("mlnx_qos PFC table has priorities %s, not 0..7" % order)
                pfc = [0] * PRIORITIES
                for prio, value in zip(order, values):
                    pfc[prio] = value
                break
        break
    if pfc is None:
        raise ValueError("no 'PFC configuration' table with an 'enabled' row of 8 values in the mlnx_qos output")
    return {"dcbx_mode": dcbx.group(1) if dcbx else None, "trust": trust.group(1).lower() if trust else None,
            "pfc": pfc}


def pfc_for_priority(priority):
    """PFC enabled on ``priority`` only (the lossless RoCE priority): a list of 8 ints."""
    priority = int(priority)
    if not 0 <= priority < PRIORITIES:
        raise ValueError("a PFC priority is 0..7, got %s" % priority)
    return [1 if p == priority else 0 for p in range(PRIORITIES)]


def mlnx_qos_set_args(iface, trust=None, pfc=None):
    """The one builder of the ``mlnx_qos`` set command's arguments (without the program): ``-i <iface>``, then
    ``--trust <trust>`` and ``--pfc 0,0,0,1,0,0,0,0`` for the parts given. The module runs it for what differs;
    the boot unit runs it with both parts."""
    if not iface or iface.startswith("-") or "/" in iface:
        raise ValueError("not an interface name: %r" % (iface,))
    args = ["-i", iface]
    if trust is not None:
        if trust not in TRUST_STATES:
            raise ValueError("trust is one of %s, got %r" % (", ".join(TRUST_STATES), trust))
        args += ["--trust", trust]
    if pfc is not None:
        if len(pfc) != PRIORITIES or any(int(v) not in (0, 1) for v in pfc):
            raise ValueError("pfc is 8 values of 0 or 1, got %r" % (pfc,))
        args += ["--pfc", ",".join(str(int(v)) for v in pfc)]
    return args


def ecn_path(sysfs_root, iface, point, priority):
    """The sysfs file that enables ECN for ``point`` (np: notification point, rp: reaction point) on one
    priority of ``iface``."""
    if point not in ECN_POINTS:
        raise ValueError("ECN point is np or rp, got %r" % (point,))
    return os.path.join(sysfs_root, "class", "net", iface, "ecn", "roce_%s" % point, "enable", str(int(priority)))


def parse_ecn_value(text):
    """A sysfs ECN enable file's content: True (1), False (0), None (unreadable or unknown)."""
    value = (text or "").strip()
    return {"1": True, "0": False}.get(value)


def read_ecn(sysfs_root, iface, priority):
    """``{"np": bool|None, "rp": bool|None}``: ECN on ``priority`` of ``iface``; None where the file is absent
    (not an mlx5 RoCE interface, or the driver does not offer it)."""
    state = {}
    for point in ECN_POINTS:
        try:
            with open(ecn_path(sysfs_root, iface, point, priority)) as f:
                state[point] = parse_ecn_value(f.read())
        except (IOError, OSError):
            state[point] = None
    return state


def plan(current, trust, pfc, ecn):
    """What to change on one interface: ``{"trust": new|None, "pfc": new|None, "ecn": [points to enable]}``.

    ``current`` is parse_mlnx_qos's result plus ``"ecn": {"np": .., "rp": ..}``; ``trust`` and ``pfc`` are the
    wanted values; with ``ecn`` True every point that is not enabled is to be enabled (ECN that is on is never
    turned off). Nothing differs: every value None or empty."""
    return {
        "trust": trust if current.get("trust") != trust else None,
        "pfc": list(pfc) if list(current.get("pfc") or []) != list(pfc) else None,
        "ecn": [p for p in ECN_POINTS if (current.get("ecn") or {}).get(p) is not True] if ecn else [],
    }


def plan_is_empty(change):
    return change["trust"] is None and change["pfc"] is None and not change["ecn"]
