# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""The ib_port check: InfiniBand ports Active (sysfs, else `ibstat`), no link that went down and no error counters
grown past the limit since the last run."""

# pylint: disable=import-error
from clusterforge_infiniband import read_sysfs_ports
from clusterforge_infiniband import parse_ibstat as parse_ibstat_ports
# pylint: enable=import-error

from clusterforge_health.core import CHECKS_PHASE, DEFAULTS, find, run, whole


# InfiniBand port counters (sysfs counters/): link_downed counts link flaps; these count errors.
IB_ERROR_COUNTERS = ("symbol_error", "port_rcv_errors", "link_error_recovery", "local_link_integrity_errors",
                     "excessive_buffer_overrun_errors", "port_rcv_remote_physical_errors")


def _ib_sysfs_ports(root):
    """{"<device>/<port>": {"state", "phys", "layer", "counters"}} from sysfs; None without InfiniBand devices there."""
    try:
        found = read_sysfs_ports(root, ("link_downed",) + IB_ERROR_COUNTERS)
    except OSError:
        return None
    return dict(("%s/%d" % (p["ca"], p["port"]), {"state": p["state"] or "", "phys": p["physical_state"] or "",
                                                  "layer": p["link_layer"] or "InfiniBand", "counters": p["counters"]})
                for p in found) or None


def parse_ibstat(text):
    """`ibstat`: {"<CA>/<port>": {"state", "phys", "layer", "counters": {}}} (ibstat shows no counters)."""
    return dict(("%s/%d" % (p["ca"], p["port"]), {"state": p["state"] or "", "phys": p["physical_state"] or "",
                                                  "layer": p["link_layer"] or "InfiniBand", "counters": {}})
                for p in parse_ibstat_ports(text))


def check_ib(r):
    if not r.on("ib_port"):
        return
    cfg = r.cfg
    root = cfg.get("ib_sysfs_root") or DEFAULTS["ib_sysfs_root"]
    ports = _ib_sysfs_ports(root)
    if ports is None:
        ibstat = find("ibstat", cfg.get("ibstat_path"))
        if ibstat is None:
            r.fail("ib_port", "ib_port: no InfiniBand device (%s is empty and ibstat is not installed)" % root)
            return
        res = run([ibstat], r.budget, CHECKS_PHASE)
        if not r.answered("ib_port", res, "ibstat", "ib_port: ibstat", err_first=True):
            return
        ports = parse_ibstat(res.out)
    ib = dict((name, p) for name, p in ports.items() if p["layer"].lower() == "infiniband")
    if not ib:
        r.fail("ib_port", "ib_port: no InfiniBand port found")
        return
    before = r.state["ib"]
    allowed = whole(cfg.get("ib_max_error_increase"), 100, 0)
    baseline = {}
    for name in sorted(ib):
        port = ib[name]
        if port["state"].upper() != "ACTIVE":
            r.fail("ib_port", "ib_port: %s state %s%s" % (name, port["state"] or "unknown",
                                                          (" (%s)" % port["phys"]) if port["phys"] else ""))
        now = port["counters"]
        if not now:
            continue
        baseline[name] = now
        then = before.get(name) or {}
        downed = now.get("link_downed", 0) - then.get("link_downed", now.get("link_downed", 0))
        if downed > 0:
            r.fail("ib_port", "ib_port: %s link went down %d time(s) since the last run" % (name, downed))
        grown = [(c, now[c] - then[c]) for c in IB_ERROR_COUNTERS
                 if isinstance(then.get(c), int) and c in now and now[c] > then[c]]
        if sum(n for _c, n in grown) > allowed:
            r.fail("ib_port", "ib_port: %s %s since the last run" % (name, ", ".join("%s +%d" % g for g in grown)))
    r.state["ib"] = baseline
    r.passed("ib_port")
