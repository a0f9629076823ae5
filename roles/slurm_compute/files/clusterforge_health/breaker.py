# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""The circuit breaker: how many nodes may be drained with this check's prefix, this node's place among the drains,
and the second count after a drain that withdraws it when it is past the cap (the program's docstring)."""

import math
import time

# pylint: disable=import-error
from clusterforge_healthcheck import CHECKS
# pylint: enable=import-error

from clusterforge_health.core import DEFAULTS, SLURM, first_line, log_error, run, whole
from clusterforge_health.slurm import all_nodes, own_drains


def drain_rank(drains, node):
    """This node's place (1 = first) among the drains in the order slurmctld took them: reason time, then name."""
    mine = (drains[node][0], node)
    return 1 + sum(1 for name, (taken, _reason) in drains.items() if (taken, name) < mine)


def breaker_cap(cfg, total):
    percent = whole(cfg.get("max_drained_percent"), DEFAULTS["max_drained_percent"], 1, 100)
    return max(1, int(math.floor(total * percent / 100.0))), percent


def confirm_drain(cfg, scontrol, node, new_reason, before_state, budget, report, active, settle):
    """The breaker's second count, `settle` seconds after this node's drain: withdraw the drain when it is not among
    the first `cap` drains with the prefix (the program's docstring). Returns True when the drain was withdrawn."""
    time.sleep(settle)
    prefix = cfg["reason_prefix"]
    try:
        total, drains = own_drains(all_nodes(scontrol, budget, ", after the drain"), prefix)
    except RuntimeError as exc:
        log_error(cfg, "cf-health: %s: drained, but the breaker's count after the drain failed (%s): the drain "
                       "stays" % (node, exc))
        return False
    if node not in drains or drains[node][1] != new_reason.strip():
        return False  # resumed or re-drained by someone else since: not this run's drain to withdraw
    cap, percent = breaker_cap(cfg, total)
    rank = drain_rank(drains, node)
    report["breaker_rank"] = rank
    if rank <= cap:
        return False
    tripped = sorted(set(f.check for f in active), key=CHECKS.index)
    report["breaker"] = tripped
    if "DOWN" in set(before_state.upper().replace("*", "").split("+")):
        log_error(cfg, "cf-health: %s: breaker open: drain %d of %d with reason prefix %r, at most %d (%d%%) may "
                       "be; the node was DOWN before it, so the drain stays"
                  % (node, rank, total, prefix, cap, percent))
        return False
    log_error(cfg, "cf-health: %s: breaker open: drain withdrawn for %s: it was drain %d with reason prefix %r of "
                   "%d nodes, at most %d (%d%%) may be; faults: %s"
              % (node, ", ".join(tripped), rank, prefix, total, cap, percent, "; ".join(f.text for f in active)))
    res = run([scontrol, "update", "NodeName=" + node, "State=RESUME"], budget, SLURM)
    if res.finished and res.rc == 0:
        report["action"] = "drain withdrawn (breaker open: %s)" % ", ".join(tripped)
        return True
    if not res.finished:
        budget.unfinished.append("scontrol update (withdraw)")
    report["action"] = "drain (breaker open: %s; the withdrawal failed)" % ", ".join(tripped)
    log_error(cfg, "cf-health: %s: scontrol update (withdraw the drain): %s: the drain stays" % (
        node, "no answer" if not res.finished else "rc %d: %s" % (res.rc, first_line(res.err) or first_line(res.out))))
    return False
