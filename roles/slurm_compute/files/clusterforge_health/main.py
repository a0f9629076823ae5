# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""The program: its arguments, one run (check, decide, act, record) and --clear."""

import argparse
import json
import os
import random
import re
import socket
import sys
import time

# pylint: disable=import-error
from clusterforge_healthcheck import CHECKS
# pylint: enable=import-error

from clusterforge_health.core import (DEFAULT_CONFIG, DEFAULTS, LOCK_WAIT, MIN_START, SLURM, SLURMD_KILL_SECONDS,
                                      STARTED, Budget, Run, config_problems, find, first_line, load_config, log,
                                      log_error, prefix_refusal, run, seconds, syslog)
from clusterforge_health.state import StateStore, boot_id, count_strikes
from clusterforge_health.slurm import all_nodes, decide, node_state, own_drains
from clusterforge_health.breaker import breaker_cap, confirm_drain
from clusterforge_health.metrics import write_metrics, write_record
from clusterforge_health.check_gpu import check_gpu_extras, check_gpus
from clusterforge_health.check_nvlink import check_nvlink
from clusterforge_health.check_xid import check_xid
from clusterforge_health.check_dcgm import check_dcgm, check_dcgm_diag
from clusterforge_health.check_lustre import check_lustre
from clusterforge_health.check_ib import check_ib
from clusterforge_health.check_services import check_boot_units, check_fabric_manager, check_peermem


def run_checks(r):
    """Every enabled check; the cheap ones first, then nvidia-smi, then dcgmi (see the time budget)."""
    for check in (check_lustre, check_peermem, check_fabric_manager, check_boot_units, check_xid, check_ib, check_gpus,
                  check_gpu_extras, check_nvlink, check_dcgm, check_dcgm_diag):
        check(r)


def check_node(cfg, args, budget, node, report, r):
    """Check, decide and act; returns the exit status and fills report (faults, state, action, notes)."""
    # Ownership first: a prefix this check cannot own means it must not touch any drain, whatever else it finds.
    refusal = prefix_refusal(cfg.get("reason_prefix"))
    if refusal:
        log_error(cfg, "cf-health: %s: refusing to drain or resume this node: %s (fix "
                       "slurm_compute_healthcheck_reason_prefix)" % (node, refusal))
    run_checks(r)
    active, pending, counts = count_strikes(r, report["counting"])
    report.update(faults=[f.text for f in active], counts=counts, failed=sorted(set(f.check for f in r.faults)),
                  pending=pending, notes=r.notes)
    for note in r.notes:
        print("cf-health: %s: %s" % (node, note))
    every = [f.text for f in r.faults]
    if refusal:
        # Neither resume nor drain. Resuming would release nodes someone else drained (a rolling change in progress,
        # an administrator's hardware ticket, Slurm's own fault drains); draining would hand the node to another
        # owner (the rolling playbook adopts and resumes every cf-roll: drain) or leave a drain that nobody
        # recognises as this check's, so no later healthy run could lift it. Leaving every node as it is keeps
        # Slurm's state true to what its owners decided; the faults go to syslog and stderr for an administrator,
        # and exit 2 (a configuration error) shows in slurmd's log. From the epilog: 0, since a failing epilog
        # would drain the node with a generic reason that nobody owns.
        log_error(cfg, "cf-health: %s: faults (not acted on): %s" % (node, "; ".join(every) or "none"))
        return 2
    status = 1 if r.faults else 0
    scontrol = find("scontrol", cfg["scontrol_path"])
    if scontrol is None:
        print("cf-health: %s: scontrol not found; faults: %s" % (node, "; ".join(every) or "none"), file=sys.stderr)
        return 2
    if not os.environ.get("SLURM_CONF"):
        for candidate in cfg["slurm_conf_candidates"]:
            if os.path.exists(candidate):
                os.environ["SLURM_CONF"] = candidate
                break
    try:
        state, reason = node_state(scontrol, node, budget)
    except RuntimeError as exc:
        # Without the node's state this run can neither drain nor resume; the next run acts.
        log_error(cfg, "cf-health: %s: %s; faults (not acted on): %s" % (node, exc, "; ".join(every) or "none"))
        return 2
    report["state"] = state
    action, new_reason, kept = decide(active, pending, state, reason, cfg["reason_prefix"],
                                      int(cfg["max_reason_length"]), may_resume=not report["beside"])
    if kept:
        # Someone else's reason: the faults are reported, the node and its reason stay as its owner left them.
        report["kept_reason"] = reason
        print("cf-health: %s: not draining: %s (%r); faults (not acted on): %s"
              % (node, kept, reason, "; ".join(f.text for f in active)))
    settle = 0.0
    if action == "drain":
        # After the drain: the settle pause, then the second count and perhaps the withdrawal, each a command that
        # needs MIN_START left to start.
        settle, _problem = seconds(cfg.get("breaker_settle_seconds"), DEFAULTS["breaker_settle_seconds"], 0, 30)
        needed = settle + 2 * MIN_START
        # Nodes whose runs end together (the same job's epilogs) would all count the same drained nodes: a random
        # pause spreads them, so that fewer drain only to withdraw. At most a third of the time left beyond what
        # the second count needs.
        jitter, _problem = seconds(cfg.get("breaker_jitter_seconds"), DEFAULTS["breaker_jitter_seconds"], 0, 30)
        pause = random.uniform(0, max(0.0, min(jitter, (budget.end - time.monotonic() - needed) / 3.0)))
        report["breaker_pause"] = round(pause, 3)
        time.sleep(pause)
        try:
            total, drains = own_drains(all_nodes(scontrol, budget, ""), cfg["reason_prefix"])
        except RuntimeError as exc:
            log_error(cfg, "cf-health: %s: %s; not draining without the count of drained nodes; faults "
                           "(not acted on): %s" % (node, exc, "; ".join(every)))
            return 2
        drained = len([name for name in drains if name != node])
        allowed, percent = breaker_cap(cfg, total)
        if drained + 1 > allowed:
            tripped = sorted(set(f.check for f in active), key=CHECKS.index)
            report["breaker"] = tripped
            report["action"] = "none (breaker open: %s)" % ", ".join(tripped)
            log_error(cfg, "cf-health: %s: breaker open: not draining for %s: %d of %d nodes already drained with "
                           "reason prefix %r, at most %d (%d%%) may be; faults: %s"
                      % (node, ", ".join(tripped), drained, total, cfg["reason_prefix"], allowed, percent,
                         "; ".join(f.text for f in active)))
            return 1
        if not args.dry_run and budget.end - time.monotonic() < needed:
            budget.unfinished.append("breaker")
            log_error(cfg, "cf-health: %s: not draining: %.1f s left, the breaker's count after the drain needs %.1f s "
                           "(slurmctld slow to answer?); faults (not acted on): %s"
                      % (node, max(0.0, budget.end - time.monotonic()), needed, "; ".join(every)))
            return 2
    report["action"] = action
    if action in ("drain", "update"):
        cmd = [scontrol, "update", "NodeName=" + node, "State=DRAIN", "Reason=" + new_reason]
    elif action == "resume":
        cmd = [scontrol, "update", "NodeName=" + node, "State=RESUME"]
    else:
        cmd = None
    if cmd is not None and args.dry_run:
        report["action"] += " (dry run)"
    elif cmd is not None:
        res = run(cmd, budget, SLURM)
        if action == "drain" and res.finished and res.rc == 0:
            confirm_drain(cfg, scontrol, node, new_reason, state, budget, report, active, settle)
        elif not res.finished:
            budget.unfinished.append("scontrol update")
            log_error(cfg, "cf-health: %s: scontrol update (%s): %s" % (
                node, action, "no answer within %d s" % max(1, int(round(res.limit)))
                if res.outcome == "no answer" else "not run, time budget spent"))
            status = 2 if not r.faults else status
        elif res.rc != 0:
            print("cf-health: %s: %s failed (rc %d): %s" % (node, " ".join(cmd[1:3]), res.rc,
                                                            first_line(res.err) or first_line(res.out)),
                  file=sys.stderr)
            status = 2 if not r.faults else status
    return status


def run_source():
    source = os.environ.get("CF_HEALTHCHECK_SOURCE", "").strip().lower()
    if re.match(r"^[a-z][a-z0-9_-]{0,31}$", source):
        return source
    return "slurmd" if os.environ.get("SLURMD_NODENAME") else "manual"


def summary_text(report):
    parts = list(report["faults"])
    pending = report.get("pending") or {}
    if pending:
        parts.append("pending: " + ", ".join(
            "%s %d/%d (%s)" % (check, count, needed, "; ".join(f.text for f in faults))
            for check, (count, needed, faults) in sorted(pending.items(), key=lambda kv: CHECKS.index(kv[0]))))
    return "; ".join(parts) if parts else "healthy"


def clear_checks(cfg, node, names):
    """--clear CHECK: forget a check's strike count and what it remembers (the Xids of this boot, the counters)."""
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        print("cf-health: %s: --clear: unknown checks %s (known: %s)" % (node, unknown, ", ".join(CHECKS)),
              file=sys.stderr)
        return 2
    store = StateStore(cfg)
    if not store.lock(time.monotonic() + LOCK_WAIT) or not store.usable:
        print("cf-health: %s: --clear: cannot lock %s" % (node, store.lock_path), file=sys.stderr)
        return 2
    try:
        state = store.load(boot_id(cfg))
        for name in names:
            state["strikes"].pop(name, None)
            if name == "xid":
                state["xid"]["events"] = []
            elif name in ("nvlink", "ib_port"):
                state["nvlink" if name == "nvlink" else "ib"] = {}
        problem = store.save(state)
    finally:
        store.unlock()
    if problem:
        print("cf-health: %s: --clear: %s" % (node, problem), file=sys.stderr)
        return 2
    print("cf-health: %s: cleared %s" % (node, ", ".join(names)))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description="ClusterForge Slurm node health check")
    parser.add_argument("--config", default=DEFAULT_CONFIG)
    parser.add_argument("--dry-run", action="store_true",
                        help="report only: never run scontrol update, and leave the strike state and the metrics "
                             "file as they are")
    parser.add_argument("--epilog", action="store_true",
                        help="always exit 0 (the check drains by itself); for site scripts that still run it from "
                             "an epilog: the role's own epilog starts clusterforge-healthcheck.service instead")
    parser.add_argument("--timing", action="store_true",
                        help="after the summary, print one JSON line with the run's time and every command's "
                             "time limit, start, duration and outcome")
    parser.add_argument("--clear", action="append", default=[], metavar="CHECK",
                        help="forget a check's strike count and what it remembers (xid: the Xids of this boot), "
                             "e.g. after a GPU reset; runs no check")
    args = parser.parse_args(argv)
    try:
        cfg = load_config(args.config)
    except (OSError, ValueError) as exc:
        print("cf-health: cannot read %s: %s" % (args.config, exc), file=sys.stderr)
        return 0 if args.epilog else 2
    node = cfg["node_name"] or os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    if args.clear:
        return clear_checks(cfg, node, args.clear)
    budget_seconds, problem = seconds(cfg.get("budget_seconds"), DEFAULTS["budget_seconds"], 1,
                                      SLURMD_KILL_SECONDS)
    if problem:
        print("cf-health: %s: budget_seconds %s: using %g s" % (node, problem, budget_seconds), file=sys.stderr)
    timeout, problem = seconds(cfg.get("command_timeout_seconds"), DEFAULTS["command_timeout_seconds"], 1,
                               SLURMD_KILL_SECONDS)
    if problem:
        print("cf-health: %s: command_timeout_seconds %s: using %g s" % (node, problem, timeout), file=sys.stderr)
    for problem in config_problems(cfg):
        print("cf-health: %s: %s" % (node, problem), file=sys.stderr)
    budget = Budget(budget_seconds, timeout, STARTED)
    source = run_source()
    store = StateStore(cfg)
    beside = not store.lock(time.monotonic() + min(LOCK_WAIT, budget_seconds / 4.0))
    if beside:
        # Another run (slurmd's, the epilog's) has held the lock past the wait: with a hung tool it can hold it for
        # its whole budget. This run still checks, since it may be the one that must keep the node from jobs (slurmd's
        # run at its start, before the node registers, while the epilog's run of the last job began before the
        # fault). It reads the strike record but writes neither it nor the metrics (a fault is counted once per run
        # holding the lock), and it may drain but never resume (the holder decides that).
        line = "cf-health: %s: another health check run holds %s: this run checks beside it, counting no " \
               "strike and resuming nothing" % (node, store.lock_path)
        print(line)
        if syslog is not None:
            log(cfg, syslog.LOG_INFO, line)
    try:
        state = store.load(boot_id(cfg))
        if store.problem:
            print("cf-health: %s: %s: no strike record, a fault acts at once" % (node, store.problem),
                  file=sys.stderr)
        r = Run(cfg, budget, state)
        report = {"faults": [], "notes": [], "state": "", "action": "none",
                  "counting": store.usable or store.held_by_other, "beside": beside,
                  "pending": {}, "counts": {}, "failed": [], "breaker": []}
        status = check_node(cfg, args, budget, node, report, r)
        faults = report["faults"]
        elapsed = budget.elapsed()
        line = "cf-health: %s: %s; state %s; action %s" % (node, summary_text(report), report["state"] or "?",
                                                           report["action"])
        if budget.unfinished:
            line += "; not finished: %s" % ", ".join(budget.unfinished)
        line += "; %.2f s of a %g s budget" % (elapsed, budget_seconds)
        print(line)
        sys.stdout.flush()
        pending = dict((c, {"strikes": v[0], "needed": v[1], "faults": [f.text for f in v[2]]})
                       for c, v in (report["pending"] or {}).items())
        record = {"node": node, "source": source, "finished_at": round(time.time(), 3), "status": status,
                  "faults": faults, "pending": pending, "breaker_open": report["breaker"], "state": report["state"],
                  "breaker_rank": report.get("breaker_rank"), "action": report["action"],
                  "not_finished": budget.unfinished, "elapsed_seconds": round(elapsed, 3),
                  "strikes": report["counts"], "checks": r.enabled, "dry_run": bool(args.dry_run),
                  "beside_another_run": beside}
        write_record(cfg, node, record)
        if not args.dry_run and not beside:
            state["strikes"] = report["counts"]
            write_metrics(cfg, node, state, source, record, report, r.enabled)
            problem = store.save(state)
            if problem and store.usable:
                print("cf-health: %s: %s" % (node, problem), file=sys.stderr)
    finally:
        store.unlock()
    if syslog is not None:
        log(cfg, syslog.LOG_INFO if status == 0 and report["action"] == "none" else
            syslog.LOG_WARNING if status < 2 else syslog.LOG_ERR, line)
    if args.timing:
        print(json.dumps({
            "node": node, "status": status, "faults": faults, "pending": pending, "state": report["state"],
            "action": report["action"], "not_finished": budget.unfinished, "elapsed_seconds": round(elapsed, 3),
            "budget_seconds": budget_seconds, "command_timeout_seconds": timeout,
            "breaker_pause_seconds": report.get("breaker_pause", 0.0),
            "checks_end_seconds": round(budget.checks_end - budget.started, 3),
            "end_seconds": round(budget.end - budget.started, 3), "commands": budget.commands,
        }, sort_keys=True))
    return 0 if args.epilog else status
