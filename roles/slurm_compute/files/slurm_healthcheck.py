#!/usr/bin/python3
# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""ClusterForge Slurm node health check (installed by clusterforge.gpu.slurm_compute).

Run by slurmd as HealthCheckProgram (every HealthCheckInterval, and once when slurmd starts, before the node
registers) and, after each job, by the systemd unit clusterforge-healthcheck.service that the epilog starts (the
epilog itself runs no Slurm command). Checks this node and, on a fault, drains it with
`scontrol update NodeName=<node> State=DRAIN Reason="cf-health: <what>"`. Every fault belongs to a named check:
  - gpu_count: fewer GPUs than configured, or nvidia-smi missing, failing or not answering (nvidia-smi --query-gpu),
  - ecc: uncorrectable (volatile) ECC errors above the limit; retired_pages: pending page retirement;
    row_remap: pending row remap; temperature: a GPU above the limit,
  - pcie: a GPU's PCIe link narrower than its maximum (pcie.link.width.current < .max; the link generation is not
    compared: GPUs lower it at idle to save power, which is no fault),
  - throttle: HW slowdown, HW thermal slowdown or SW thermal slowdown active (clocks_event_reasons.*, or
    clocks_throttle_reasons.* before driver R535),
  - mig: a GPU whose MIG mode (mig.mode.current) is not the configured one (mig_mode; null: not checked),
  - nvlink: fewer active NVLinks than expected (`nvidia-smi nvlink -s`; expected: nvlink_active_links, else the
    most any GPU of the node has) or NVLink error counters that grew by more than nvlink_max_error_increase since
    the last run (`nvidia-smi nvlink -e`),
  - xid: an NVIDIA Xid (not in xid_ignore_codes) or a fatal NVSwitch SXid in the kernel log (`dmesg`) since the
    last run; an Xid stays a fault until the node reboots or `--clear xid` (a GPU that had one needs a reset),
  - dcgm_health: a failed `dcgmi health -c` where DCGM is installed (DCGM's own RPC via dcgmi; never HTTP); incidents
    whose DCGM error codes are all in dcgm_ignore_error_codes do not count,
  - dcgm_diag: with `dcgm_diag_level` 1 (off by default), a failed `dcgmi diag -r 1` (DCGM's quick diagnostic,
    seconds; levels 2 and above take minutes and belong on drained nodes, never here). It runs only while no process
    uses a GPU (`nvidia-smi --query-compute-apps`): a diagnostic beside a job disturbs the job and reports its
    processes,
  - lustre: a configured Lustre mount point that is not mounted,
  - ib_port: an InfiniBand port not Active (sysfs /sys/class/infiniband/*/ports/*, else `ibstat`), a link that went
    down since the last run (counters/link_downed grew) or port error counters that grew by more than
    ib_max_error_increase,
  - fabric_manager: nvidia-fabricmanager not active where configured (`systemctl is-active`),
  - peermem: the nvidia_peermem module not loaded where configured (/sys/module/nvidia_peermem),
  - boot_units: a unit of boot_units that failed (`systemctl is-failed`): the units that re-apply at boot what a
    reboot undoes (ACS, GPU settings, RoCE QoS, Lustre client tunings) run before slurmd, so the run at slurmd start
    drains a node whose boot set-up failed before it registers, with the unit named in the reason.
A hardware command that does not answer in its share of the time budget (below) is a fault of the check it belongs
to. Checks listed in checks_disabled do not run at all.

Strikes. A check must fail `strikes[check]` runs in a row before its faults drain the node (built-in defaults in
DEFAULT_STRIKES, overridden per check by the configuration); a run in which it passes resets its count. A check whose
only fault in a run is a command that did not answer needs max(strikes[check], strikes["timeout"]) runs. A fault below
its strikes is reported ("pending: temperature 1/2 (...)"): it neither drains nor lets the node resume. The counts,
the Xids seen, and the NVLink and InfiniBand counters of the last run live in <state_dir>/healthcheck-state.json,
shared by every caller under an exclusive lock (<state_dir>/healthcheck.lock, fcntl); the default state_dir is
/run/clusterforge, so a reboot starts them afresh (the boot id is recorded too). Without a usable state directory
the check cannot count and acts on a fault at once. A run that waited 10 s (a quarter of its budget at most) for
the lock while another run held it (the epilog's run of a job, which a hung tool keeps for its whole budget) checks
beside it: it reads the counts, counts this run as the next of each check's strikes, and may drain, but it writes no
count and no metrics and never resumes (the run holding the lock decides that). So slurmd's run at its start, which
must keep a faulty node from its first job, is never skipped.

Circuit breaker. At most max(1, floor(nodes x max_drained_percent / 100)) nodes may be drained (or draining) with
the check's own reason prefix. Two counts, each one `scontrol show node -o` of every node:
  - before the drain, after a random pause of up to breaker_jitter_seconds (3) that spreads nodes deciding together:
    if draining this node would exceed the cap, it does not drain;
  - after the drain, once breaker_settle_seconds (2) have passed: the drains with the prefix are put in the order
    slurmctld took them (the time in their reason, `[user@time]`, to the second, then the node name). A node whose
    drain is not among the first `cap` withdraws it at once (`State=RESUME`, only while the reason is still the one
    it set). Every node that drained within the same seconds reads the same drains in the same order (the settle
    pause outlasts the second of any drain taken before its own), so together they keep exactly the cap, however
    many decided at once; the withdrawn ones were drained for the moment between the two counts (a drain stops no
    job). A node that was DOWN before its drain keeps it (a resume would undo Slurm's DOWN; the node is out of
    service either way), and so does one whose second count got no answer from slurmctld or whose withdrawal
    slurmctld refused (logged; "the withdrawal failed" in its summary).
Held back or withdrawn, it reports and logs (syslog LOG_ERR) "breaker open" with the checks that tripped and exits 1.
Without the time left for both counts (slurmctld slow to answer) it does not drain in this run (exit 2).

When every check passes and none is pending it resumes the node only if its drain reason starts with the ownership
prefix (`cf-health:`): a drain set by an administrator or another tool is never touched, and never overwritten.
Thresholds come from the JSON configuration written by the role (default path below).

The prefix must be one this check can own: with an empty or blank prefix, or one that another tool owns (a prefix
of the rolling playbook's `cf-roll:` or one starting with it, NHC's `NHC:`, ...), or that begins one of Slurm's own
drain reasons, it never drains and never resumes, whatever its configuration says. The rule is reason_prefix_problems
of plugins/module_utils/healthcheck.py, which preflight applies before install (this guards a hand-edited
configuration).

Time budget. slurmd kills HealthCheckProgram after 60 s, so a run has a total budget (`budget_seconds`, 40 by
default; preflight keeps it below 60) and ends by itself within it. Every command gets the smaller of its own
timeout (`command_timeout_seconds`) and the time left, less a moment to kill it; one stuck in the kernel after
SIGKILL is left behind rather than waited for. The budget has two shares:
  - the hardware checks (dmesg, ibstat, systemctl, nvidia-smi, dcgmi) end at budget - reserve, where the reserve is
    the smaller of the command timeout and half the budget: a hung check can never take the time the drain needs;
  - Slurm (`scontrol show node`, the breaker's `scontrol show node -o`, then `scontrol update`) has the rest.
The cheap checks run first (files, dmesg, ibstat), then nvidia-smi, then dcgmi: when nvidia-smi hangs, the checks
that need it again (pcie, throttle, mig, nvlink) are not run (their strike counts stay as they were), and dcgmi gets
what is left. A hardware check that gets no answer in the time it was given, or that no time was left for, is a fault
named in the reason (`nvidia-smi: no answer within 19 s`, `dcgmi health not run: time budget spent`): a healthy GPU
node answers in about a second, and a hung nvidia-smi or dcgmi is what a GPU that fell off the bus looks like.
An `scontrol` that does not answer is not a fault of this node: slurmctld may be busy or unreachable, and the run at
slurmd start comes before the node has registered, where scontrol is what may hang. The run then says which step
did not finish (stderr, syslog); without `scontrol show node` it acts on nothing and exits 2; the next run acts.
An unfinished hardware check being a fault, a run that did not finish its checks never resumes a node.

Output: one summary line on stdout and in syslog (facility daemon, tag cf-health) with the run's own time, e.g.
`cf-health: gpu01: healthy; state IDLE; action none; 0.41 s of a 40 s budget`; `--timing` adds one JSON line
with every command's time limit, start, duration and outcome.

Record: each run also writes its summary as JSON to <state_dir>/healthcheck-<source>.json, one file per caller:
`slurmd` (HealthCheckProgram), `epilog` (the unit, which sets CF_HEALTHCHECK_SOURCE=epilog) or `manual`, so the
last run of each is known without a log (`finished_at`, status, faults, pending, action, run time, and
`breaker_rank`: after a drain, its place among the check's drains in the second count; null without one;
`beside_another_run`: true for a run that checked beside one holding the lock).

Metrics: each run (not --dry-run) writes <textfile_dir>/clusterforge_healthcheck.prom atomically for node-exporter's
textfile collector (textfile_dir empty: none): per caller clusterforge_healthcheck_status{source} (0 healthy,
1 faults, 2 error), clusterforge_healthcheck_last_run_timestamp_seconds{source} and
clusterforge_healthcheck_duration_seconds{source}; per enabled check clusterforge_healthcheck_fault{check} (1 when
it failed this run), clusterforge_healthcheck_strikes{check} and clusterforge_healthcheck_breaker_open{check} (1 when
the breaker held back this node's drain for it).

Exit status: 0 healthy, 1 faults found (drained, pending or held back by the breaker), 2 the check itself could not
run or act (bad configuration, refused prefix, scontrol missing or not answering).

Code: the package clusterforge_health/, installed beside this program (one module per check, and the configuration,
strike state, Slurm, circuit breaker and metrics; its __init__ lists them); this program only starts it.
"""

import os
import sys

# The package and the collection's parsers it imports are installed beside this program (roles/slurm_compute/tasks/
# config.yml): clusterforge_health/ and clusterforge_<name>.py (see clusterforge_health/__init__.py).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=import-error,wrong-import-position
from clusterforge_health.main import main  # noqa: E402
# pylint: enable=import-error,wrong-import-position


if __name__ == "__main__":
    sys.exit(main())
