# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""The xid check: NVIDIA Xids and fatal NVSwitch SXids in the kernel log (`dmesg`) since the last run."""

import re

from clusterforge_health.core import CHECKS_PHASE, find, run, to_int


# The kernel log (dmesg: "[ seconds.micros] message"): NVIDIA's Xid and NVSwitch SXid lines.
DMESG_LINE_RE = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)$")
XID_RE = re.compile(r"NVRM: Xid \(PCI:([^)]*)\): (\d+)(?:, (.*))?")
SXID_RE = re.compile(r"(nvidia-nvswitch\d*): SXid \(PCI:([^)]*)\): (\d+), ([^,]*)(?:, (.*))?")
XID_EVENTS_KEPT = 20


def _xid_detail(tail):
    """The driver's words after an Xid's code, without the pid=, name= and channel fields."""
    parts = [p.strip() for p in (tail or "").split(", ")]
    while parts and re.match(r"^(pid|name)=|^channel\b", parts[0]):
        parts.pop(0)
    return ", ".join(parts)[:80]


def check_xid(r):
    """Xids and fatal SXids in the kernel log since the last run; an Xid stays a fault for the rest of the boot."""
    if not r.on("xid"):
        return
    cfg = r.cfg
    dmesg = find("dmesg", cfg.get("dmesg_path"))
    if dmesg is None:
        r.fail("xid", "xid: dmesg not found")
        return
    res = run([dmesg], r.budget, CHECKS_PHASE)
    if not r.answered("xid", res, "dmesg", "xid: dmesg", err_first=True):
        return
    seen = r.state["xid"]
    last = seen.get("last_ts")
    last = float(last) if isinstance(last, (int, float)) else -1.0
    events = [e for e in seen.get("events") or [] if isinstance(e, dict)]
    ignore = set(to_int(c) for c in cfg.get("xid_ignore_codes") or [])
    newest = last
    stamped = False
    for line in res.out.splitlines():
        m = DMESG_LINE_RE.match(line)
        if not m:
            continue
        stamped = True
        ts, message = float(m.group(1)), m.group(2)
        if ts <= last:
            continue
        newest = max(newest, ts)
        xid = XID_RE.search(message)
        if xid:
            code = int(xid.group(2))
            if code in ignore:
                r.notes.append("xid: Xid %d on GPU %s ignored (xid_ignore_codes)" % (code, xid.group(1)))
                continue
            events.append({"what": "Xid %d on GPU %s" % (code, xid.group(1)), "ts": ts,
                           "detail": _xid_detail(xid.group(3))})
            continue
        sxid = SXID_RE.search(message)
        if sxid:
            what = "SXid %s on %s" % (sxid.group(3), sxid.group(1))
            if sxid.group(4).strip().lower().startswith("fatal"):
                events.append({"what": what + " (fatal)", "ts": ts, "detail": (sxid.group(5) or "").strip()[:80]})
            else:
                r.notes.append("xid: non-fatal %s" % what)
    if res.out.strip() and not stamped:
        r.notes.append("xid: dmesg prints no timestamps (printk.time=0): Xids not checked")
    events = events[-XID_EVENTS_KEPT:]
    r.state["xid"] = {"last_ts": newest, "events": events}
    whats = []
    for event in events:
        if event.get("what") not in whats:
            whats.append(event.get("what"))
    if whats:
        detail = next((e.get("detail") for e in events if e.get("what") == whats[0] and e.get("detail")), "")
        text = "xid: %s%s" % (whats[0], (" (%s)" % detail) if detail else "")
        if len(whats) > 1:
            text += "; and %s" % ", ".join(whats[1:4]) + (" and %d more" % (len(whats) - 4) if len(whats) > 4 else "")
        r.fail("xid", text)
    r.passed("xid")
