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
"""

import argparse
import fcntl
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

try:
    import syslog
except ImportError:  # pragma: no cover - every Linux Python has it
    syslog = None

# The collection's parsers, installed beside this program as clusterforge_<name>.py (roles/slurm_compute/tasks/
# config.yml): plugins/module_utils/slurm.py (the one rule of whose drain reason may be replaced or resumed, shared
# with the slurm_node module, and the scontrol parser), infiniband.py (ibstat and the ports in sysfs, shared with
# ib_port_info), nvidia_smi.py (--query-gpu CSV, shared with nvidia_smi_info, and nvlink -s / -e) and
# healthcheck.py (the checks, their strikes, the DCGM codes and the reason-prefix rule, shared with preflight) and
# dcgm.py (where this node's host engine listens, as the dcgm role recorded it: the dcgm modules read it the same way).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable=import-error,wrong-import-position
from clusterforge_slurm import parse_scontrol_nodes, reason_action, split_reason, state_flags  # noqa: E402
from clusterforge_infiniband import read_sysfs_ports, read_sysfs_text  # noqa: E402
from clusterforge_infiniband import parse_ibstat as parse_ibstat_ports  # noqa: E402
from clusterforge_nvidia_smi import parse_nvlink_errors, parse_nvlink_status, parse_query_csv  # noqa: E402
from clusterforge_dcgm import HOSTENGINE_FILE, hostengine_args  # noqa: E402
from clusterforge_healthcheck import CHECKS, DCGM_HEALTH_CODES, DEFAULT_STRIKES  # noqa: E402
from clusterforge_healthcheck import dcgm_codes, reason_prefix_problems  # noqa: E402
from clusterforge_healthcheck import parse_health_incidents as _dcgm_incidents  # noqa: E402
# pylint: enable=import-error,wrong-import-position

# The run's clock starts here, before the configuration is read.
STARTED = time.monotonic()

DEFAULT_CONFIG = "/etc/slurm/clusterforge-healthcheck.json"
SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
GPU_FIELDS = ["index", "ecc.errors.uncorrected.volatile.total", "retired_pages.pending",
              "remapped_rows.pending", "temperature.gpu"]
# The second nvidia-smi query (pcie, mig, throttle): apart from the first, so that a field an old driver does not
# know cannot cost the GPU count check its answer. The clock event reasons were clocks_throttle_reasons.* before R535.
EXTRA_FIELDS = ["index", "pcie.link.width.current", "pcie.link.width.max", "mig.mode.current"]
THROTTLE_REASONS = (("hw_slowdown", "HW slowdown"), ("hw_thermal_slowdown", "HW thermal slowdown"),
                    ("sw_thermal_slowdown", "SW thermal slowdown"))
EVENT_PREFIXES = ("clocks_event_reasons", "clocks_throttle_reasons")

# The kernel log (dmesg: "[ seconds.micros] message"): NVIDIA's Xid and NVSwitch SXid lines.
DMESG_LINE_RE = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)$")
XID_RE = re.compile(r"NVRM: Xid \(PCI:([^)]*)\): (\d+)(?:, (.*))?")
SXID_RE = re.compile(r"(nvidia-nvswitch\d*): SXid \(PCI:([^)]*)\): (\d+), ([^,]*)(?:, (.*))?")
# InfiniBand port counters (sysfs counters/): link_downed counts link flaps; these count errors.
IB_ERROR_COUNTERS = ("symbol_error", "port_rcv_errors", "link_error_recovery", "local_link_integrity_errors",
                     "excessive_buffer_overrun_errors", "port_rcv_remote_physical_errors")
XID_EVENTS_KEPT = 20
PROM_FILE = "clusterforge_healthcheck.prom"
STATE_VERSION = 1

DEFAULTS = {
    "node_name": None,
    "reason_prefix": "cf-health:",
    "gpu_count": 0,
    "max_temperature_c": 85,
    "max_ecc_uncorrectable": 0,
    "check_ecc": True,
    "check_retired_pages": True,
    "check_row_remap": True,
    "dcgm": "auto",
    "dcgm_set_watches": "a",
    "dcgm_fail_on_warning": False,
    "dcgm_diag_level": 0,
    "dcgm_ignore_error_codes": [],
    "lustre_mounts": [],
    "mounts_file": "/proc/mounts",
    "command_timeout_seconds": 20,
    "budget_seconds": 40,
    "nvidia_smi_path": None,
    "dcgmi_path": None,
    # The dcgm role's record of the host engine's address (dcgmi --host); no file: dcgmi's default, localhost:5555.
    "dcgm_hostengine_file": HOSTENGINE_FILE,
    "scontrol_path": None,
    "dmesg_path": None,
    "ibstat_path": None,
    "systemctl_path": None,
    "max_reason_length": 200,
    "syslog": True,
    # Checks that do not run at all, and the strikes per check (merged over DEFAULT_STRIKES).
    "checks_disabled": [],
    "strikes": {},
    # The circuit breaker: at most this share of all nodes drained with this check's prefix; before counting, a
    # random pause of up to this many seconds spreads nodes that decide at the same moment (after the same job);
    # after its drain a node waits breaker_settle_seconds before the second count (the role leaves it at 2; below
    # 1.5 the order is no longer sure: Slurm's reason time is to the second, and every drain taken in or before this
    # node's second must be visible; the tests set 0 where no other node drains).
    "max_drained_percent": 10,
    "breaker_jitter_seconds": 3.0,
    "breaker_settle_seconds": 2.0,
    # node-exporter's textfile collector directory (Debian's default); empty: no metrics file.
    "textfile_dir": "/var/lib/prometheus/node-exporter",
    "xid_ignore_codes": [13, 31, 43, 45],
    "boot_id_file": "/proc/sys/kernel/random/boot_id",
    "nvlink_active_links": None,
    "nvlink_max_error_increase": 0,
    "ib": False,
    "ib_sysfs_root": "/sys/class/infiniband",
    "ib_max_error_increase": 100,
    "fabric_manager": False,
    "fabric_manager_unit": "nvidia-fabricmanager",
    "peermem": False,
    "sys_module_dir": "/sys/module",
    # systemd units (full names) whose failure is a fault: the role lists the boot units of the collection.
    "boot_units": [],
    "mig_mode": None,
    # Each run's record (one file per caller, see write_record), the strike state and its lock.
    "state_dir": "/run/clusterforge",
    # Configless slurmd nodes have no /etc/slurm/slurm.conf: client commands use the copy slurmd fetched.
    "slurm_conf_candidates": ["/etc/slurm/slurm.conf", "/run/slurm/conf/slurm.conf",
                              "/var/lib/slurm/slurmd/conf-cache/slurm.conf", "/var/spool/slurmd/conf-cache/slurm.conf"],
}

# --- time budget (see the module docstring) ---
# slurmd kills HealthCheckProgram after this many seconds (run_command's max_wait).
SLURMD_KILL_SECONDS = 60
# Kept at the end of the budget to report, log and exit.
END_MARGIN = 0.5
# After SIGKILL, how long to wait for a command to go; one stuck in the kernel (D state) is left behind.
KILL_GRACE = 0.3
# A command is not started with less time than this left.
MIN_START = 0.5
# Longest wait for another run's lock (a run takes about a second; slurmd's and the epilog's may overlap).
LOCK_WAIT = 10.0
CHECKS_PHASE = "checks"
SLURM = "slurm"


def prefix_refusal(prefix):
    """Why this check must neither drain nor resume with this reason prefix (the first of reason_prefix_problems,
    the rule preflight applies before install); None when the prefix is its own."""
    problems = reason_prefix_problems(prefix)
    return ("reason prefix %s" % problems[0]) if problems else None


def log(cfg, priority, text):
    """syslog (facility daemon, tag cf-health), so that every run and its time are in the node's journal."""
    if syslog is None or not cfg.get("syslog", True):
        return
    try:
        syslog.openlog("cf-health", syslog.LOG_PID, syslog.LOG_DAEMON)
        syslog.syslog(priority, text)
        syslog.closelog()
    except (OSError, ValueError):  # pragma: no cover - no syslog socket
        pass


def log_error(cfg, text):
    """stderr (slurmd's log) and syslog, so that a refused run is seen by whoever reads either."""
    print(text, file=sys.stderr)
    if syslog is not None:
        log(cfg, syslog.LOG_ERR, text)


def seconds(value, default, low, high):
    """A number of seconds from the configuration: the default when it is not a number within [low, high)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return float(default), "%r is not a number of seconds" % (value,)
    if isinstance(value, bool) or not low <= number < high:
        return float(default), "%r is outside %g-%g s" % (value, low, high)
    return number, None


def whole(value, default, low, high=None):
    """An integer from the configuration, the default when it is none within [low, high]."""
    if isinstance(value, bool):
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    if number < low or (high is not None and number > high):
        return default
    return number


class Budget(object):
    """The run's time: the hardware checks end at checks_end, Slurm (scontrol) at end."""

    def __init__(self, budget_seconds, command_timeout, started):
        self.seconds = budget_seconds
        self.timeout = command_timeout
        self.started = started
        self.end = started + budget_seconds - END_MARGIN
        self.reserve = min(command_timeout, (budget_seconds - END_MARGIN) / 2.0)
        self.checks_end = self.end - self.reserve
        self.commands = []
        self.unfinished = []

    def elapsed(self):
        return time.monotonic() - self.started

    def limit(self, phase):
        """min(the command timeout, the time left in this phase), less the moment a kill may take."""
        end = self.checks_end if phase == CHECKS_PHASE else self.end
        return min(self.timeout, end - time.monotonic() - KILL_GRACE)


class Result(object):
    """A command's rc, stdout and stderr; outcome "done" (it exited), "no answer" (killed at its limit) or
    "not run" (no time left)."""

    def __init__(self, rc, out, err, outcome, limit):
        self.rc, self.out, self.err, self.outcome, self.limit = rc, out, err, outcome, limit

    @property
    def finished(self):
        return self.outcome == "done"


def _kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the command and anything it started (its own session)
    except OSError:
        pass
    try:
        proc.communicate(timeout=KILL_GRACE)
    except subprocess.TimeoutExpired:
        pass  # stuck in the kernel (a GPU that fell off the bus can do that): left behind, the run goes on


def run(argv, budget, phase):
    """Run argv for at most min(its timeout, the time left in its phase); record its timing in the budget."""
    limit = budget.limit(phase)
    began = time.monotonic()
    record = {"command": " ".join([os.path.basename(argv[0])] + list(argv[1:])), "phase": phase,
              "start_seconds": round(began - budget.started, 3), "limit_seconds": round(max(limit, 0.0), 3)}
    budget.commands.append(record)
    if limit < MIN_START:
        record.update(elapsed_seconds=0.0, outcome="not run")
        return Result(None, "", "", "not run", limit)
    env = dict(os.environ, LC_ALL="C", LANG="C", SLURM_TIME_FORMAT="standard")
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                universal_newlines=True, env=env, start_new_session=True)
    except OSError as exc:
        record.update(elapsed_seconds=round(time.monotonic() - began, 3), outcome="rc 127")
        return Result(127, "", str(exc), "done", limit)
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        _kill(proc)
        record.update(elapsed_seconds=round(time.monotonic() - began, 3), outcome="no answer")
        return Result(None, "", "", "no answer", limit)
    record.update(elapsed_seconds=round(time.monotonic() - began, 3), outcome="rc %d" % proc.returncode)
    return Result(proc.returncode, out, err, "done", limit)


def unfinished(budget, what, res):
    """The fault text of a check that did not finish; the check is also listed as unfinished."""
    budget.unfinished.append(what)
    if res.outcome == "not run":
        return "%s not run: time budget spent" % what
    return "%s: no answer within %d s" % (what, max(1, int(round(res.limit))))


def find(name, configured):
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    path = os.environ.get("PATH", "") + ":" + SEARCH_PATH
    return shutil.which(name, path=path)


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def to_int(text):
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def is_yes(text):
    return str(text).strip().lower() in ("yes", "1", "true")


def tristate(value):
    """True, False or None (not configured) from a configuration value (a boolean, or its text)."""
    if isinstance(value, bool) or value is None:
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1", "enabled"):
        return True
    if text in ("false", "no", "off", "0", "disabled"):
        return False
    return None


# --- one run: its configuration, faults, notes and the strike state --------------------------------------------

class Fault(object):
    """One fault of one check; `timeout` when it is a command that did not answer (or was given no time)."""

    def __init__(self, check, text, timeout=False):
        self.check, self.text, self.timeout = check, text, timeout


class Run(object):
    def __init__(self, cfg, budget, state):
        self.cfg = cfg
        self.budget = budget
        self.state = state
        self.faults = []
        self.notes = []
        self.evaluated = set()
        self.enabled = enabled_checks(cfg)
        self.gpus_answered = False

    def on(self, check):
        return check in self.enabled

    def fail(self, check, text, timeout=False):
        self.faults.append(Fault(check, text, timeout))
        self.evaluated.add(check)

    def passed(self, *checks):
        self.evaluated.update(c for c in checks if self.on(c))

    def owner(self, *checks):
        """The first enabled check of these: the one a failure of a command they share belongs to."""
        for check in checks:
            if self.on(check):
                return check
        return checks[0]

    def answered(self, check, res, what, failed, err_first=False):
        """Whether `res` finished with rc 0; otherwise the check's fault is recorded: a command that did not answer
        (`what` names it), or one that failed (the message starts with `failed`, then its rc and first line)."""
        if not res.finished:
            self.fail(check, unfinished(self.budget, what, res), timeout=True)
            return False
        if res.rc != 0:
            first, second = (res.err, res.out) if err_first else (res.out, res.err)
            self.fail(check, "%s failed (rc %d): %s" % (failed, res.rc, first_line(first) or first_line(second)))
            return False
        return True


def enabled_checks(cfg):
    """The checks this configuration runs, in CHECKS order."""
    gpu = (whole(cfg.get("gpu_count"), 0, 0) or 0) > 0
    dcgm_on = str(cfg.get("dcgm")).lower() not in ("false", "off", "no")
    on = {
        "gpu_count": gpu, "ecc": gpu and bool(cfg.get("check_ecc")),
        "retired_pages": gpu and bool(cfg.get("check_retired_pages")),
        "row_remap": gpu and bool(cfg.get("check_row_remap")), "temperature": gpu,
        "dcgm_health": dcgm_on, "dcgm_diag": dcgm_on and whole(cfg.get("dcgm_diag_level"), 0, 0) == 1,
        "lustre": bool(cfg.get("lustre_mounts")), "xid": gpu, "nvlink": gpu, "pcie": gpu,
        "ib_port": bool(tristate(cfg.get("ib"))), "fabric_manager": bool(tristate(cfg.get("fabric_manager"))),
        "peermem": bool(tristate(cfg.get("peermem"))), "throttle": gpu,
        "mig": gpu and tristate(cfg.get("mig_mode")) is not None,
        "boot_units": bool(boot_units(cfg)),
    }
    disabled = cfg.get("checks_disabled") or []
    disabled = set(disabled) if isinstance(disabled, list) else set()
    return [c for c in CHECKS if on[c] and c not in disabled]


def strikes_needed(cfg):
    """DEFAULT_STRIKES with the configuration's values (whole numbers >= 1) over them."""
    needed = dict(DEFAULT_STRIKES)
    given = cfg.get("strikes") or {}
    if isinstance(given, dict):
        for key, value in given.items():
            if key in needed:
                needed[key] = whole(value, needed[key], 1)
    return needed


def config_problems(cfg):
    """What a hand-edited configuration got wrong that the check works around (reported on stderr)."""
    problems = []
    disabled = cfg.get("checks_disabled") or []
    if not isinstance(disabled, list):
        problems.append("checks_disabled %r is not a list: every check runs" % (disabled,))
    else:
        unknown = [c for c in disabled if c not in CHECKS]
        if unknown:
            problems.append("checks_disabled names unknown checks %s (known: %s)" % (unknown, ", ".join(CHECKS)))
    given = cfg.get("strikes") or {}
    if not isinstance(given, dict):
        problems.append("strikes %r is not a dict: the built-in strikes apply" % (given,))
    else:
        for key, value in sorted(given.items(), key=lambda kv: str(kv[0])):
            if key not in DEFAULT_STRIKES:
                problems.append("strikes: unknown check %r" % (key,))
            elif whole(value, None, 1) is None:
                problems.append("strikes: %s %r is not a whole number >= 1: using %d"
                                % (key, value, DEFAULT_STRIKES[key]))
    return problems


# --- the strike state (shared by every caller, under a lock) ---------------------------------------------------

def boot_id(cfg):
    return read_sysfs_text(cfg.get("boot_id_file") or DEFAULTS["boot_id_file"]) or ""


class StateStore(object):
    """<state_dir>/healthcheck-state.json under an exclusive fcntl lock on <state_dir>/healthcheck.lock."""

    def __init__(self, cfg):
        self.dir = str(cfg.get("state_dir") or DEFAULTS["state_dir"])
        self.path = os.path.join(self.dir, "healthcheck-state.json")
        self.lock_path = os.path.join(self.dir, "healthcheck.lock")
        self.handle = None
        self.usable = False
        self.problem = None
        # Another run held the lock past this run's wait: this run reads the strike record without writing it.
        self.held_by_other = False

    def lock(self, deadline):
        """True when this run holds the lock; False when another run held it until the deadline. A state
        directory that cannot be used leaves `usable` False (the run goes on without a strike record)."""
        try:
            os.makedirs(self.dir, mode=0o755, exist_ok=True)
            self.handle = open(self.lock_path, "a")
        except OSError as exc:
            self.problem = "cannot use %s: %s" % (self.lock_path, exc)
            return True
        while True:
            try:
                fcntl.flock(self.handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.usable = True
                return True
            except OSError:
                if time.monotonic() >= deadline:
                    self.handle.close()
                    self.handle = None
                    self.held_by_other = True
                    return False
                time.sleep(0.05)

    def load(self, current_boot):
        state = {}
        if self.usable or self.held_by_other:
            # (The record is replaced whole, by rename: a run that does not hold the lock reads the old or the new.)
            try:
                with open(self.path) as handle:
                    state = json.load(handle)
            except (OSError, ValueError):
                state = {}
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            state = {}
        if state.get("boot_id") != current_boot:
            # A new boot: strike counts, Xids and counters start afresh (GPUs and links were reset); the callers'
            # last runs stay for the metrics file.
            state = {"sources": state.get("sources") or {}}
        state.update(version=STATE_VERSION, boot_id=current_boot)
        for key in ("strikes", "xid", "nvlink", "ib", "sources"):
            if not isinstance(state.get(key), dict):
                state[key] = {}
        return state

    def save(self, state):
        if not self.usable:
            return "no strike record (%s)" % (self.problem or "state directory not usable")
        problem = write_atomically(self.path, json.dumps(state, sort_keys=True) + "\n")
        if problem:
            return "cannot write %s: %s" % (self.path, problem)
        return None

    def unlock(self):
        if self.handle is not None:
            try:
                fcntl.flock(self.handle.fileno(), fcntl.LOCK_UN)
            except OSError:
                pass
            self.handle.close()
            self.handle = None


# --- checks ----------------------------------------------------------------------------------------------------

def check_gpus(r):
    """nvidia-smi --query-gpu: gpu_count, ecc, retired_pages, row_remap, temperature."""
    mine = ("gpu_count", "ecc", "retired_pages", "row_remap", "temperature")
    if not any(r.on(c) for c in mine):
        return
    cfg = r.cfg
    expected = int(cfg["gpu_count"] or 0)
    owner = r.owner(*mine)
    smi = find("nvidia-smi", cfg["nvidia_smi_path"])
    if smi is None:
        r.fail(owner, "nvidia-smi not found (expected %d GPUs)" % expected)
        return
    res = run([smi, "--query-gpu=" + ",".join(GPU_FIELDS), "--format=csv,noheader,nounits"], r.budget, CHECKS_PHASE)
    if not r.answered(owner, res, "nvidia-smi", "nvidia-smi"):
        return
    r.gpus_answered = True
    # A line that is not a whole row (a warning nvidia-smi printed between the rows, a truncated line) is no GPU.
    rows = parse_query_csv(res.out, GPU_FIELDS)
    if r.on("gpu_count") and len(rows) < expected:
        r.fail("gpu_count", "GPU count %d < %d" % (len(rows), expected))
    limit_t = int(cfg["max_temperature_c"])
    for row in rows:
        index, ecc, retired, remap, temp = [row[f] for f in GPU_FIELDS]
        ecc_n = to_int(ecc)
        if r.on("ecc") and ecc_n is not None and ecc_n > int(cfg["max_ecc_uncorrectable"]):
            r.fail("ecc", "GPU %s uncorrectable ECC errors %d" % (index, ecc_n))
        if r.on("retired_pages") and is_yes(retired):
            r.fail("retired_pages", "GPU %s retired pages pending" % index)
        if r.on("row_remap") and is_yes(remap):
            r.fail("row_remap", "GPU %s row remap pending" % index)
        temp_n = to_int(temp)
        if r.on("temperature") and temp_n is not None and temp_n > limit_t:
            r.fail("temperature", "GPU %s temperature %d C > %d C" % (index, temp_n, limit_t))
    r.passed(*mine)


def _extra_query(r, smi, prefix):
    fields = EXTRA_FIELDS + ["%s.%s" % (prefix, name) for name, _label in THROTTLE_REASONS]
    return run([smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"], r.budget, CHECKS_PHASE)


def check_gpu_extras(r):
    """pcie, throttle and mig from one more nvidia-smi query, once the first one answered."""
    mine = ("pcie", "throttle", "mig")
    if not any(r.on(c) for c in mine) or not r.gpus_answered:
        return  # no nvidia-smi answer this run: not evaluated, their strike counts stay as they were
    cfg = r.cfg
    owner = r.owner("gpu_count", *mine)
    smi = find("nvidia-smi", cfg["nvidia_smi_path"])
    res = _extra_query(r, smi, EVENT_PREFIXES[0])
    if res.finished and res.rc != 0 and "is not a valid field" in res.out + res.err:
        res = _extra_query(r, smi, EVENT_PREFIXES[1])  # a driver before R535: clocks_throttle_reasons.*
    if not r.answered(owner, res, "nvidia-smi", "nvidia-smi --query-gpu (pcie, clock events, MIG)"):
        return
    mig_mode = tristate(cfg.get("mig_mode"))
    want_mig = None if mig_mode is None else ("Enabled" if mig_mode else "Disabled")
    # the prefix does not matter to the parser: the cells are read by position
    fields = EXTRA_FIELDS + ["throttle.%s" % name for name, _label in THROTTLE_REASONS]
    for row in parse_query_csv(res.out, fields):
        index, width, width_max, mig = [row[f] for f in EXTRA_FIELDS]
        mig = "[N/A]" if mig is None else mig  # nvidia-smi's own spelling of a GPU without MIG
        current, most = to_int(width), to_int(width_max)
        if r.on("pcie") and current is not None and most is not None and current < most:
            r.fail("pcie", "pcie: GPU %s link width x%d < x%d" % (index, current, most))
        active = [label for name, label in THROTTLE_REASONS if str(row["throttle." + name]).lower() == "active"]
        if r.on("throttle") and active:
            r.fail("throttle", "throttle: GPU %s %s" % (index, ", ".join(active)))
        if r.on("mig") and want_mig is not None:
            # a GPU without MIG ([N/A], [Not Supported]) is as good as one with MIG disabled, never as one with it on
            enabled = mig.lower() == "enabled"
            if enabled != (want_mig == "Enabled"):
                r.fail("mig", "mig: GPU %s MIG mode %s, configured %s" % (index, mig, want_mig))
    r.passed(*mine)


def check_nvlink(r):
    if not r.on("nvlink") or not r.gpus_answered:
        return
    cfg = r.cfg
    smi = find("nvidia-smi", cfg["nvidia_smi_path"])
    res = run([smi, "nvlink", "-s"], r.budget, CHECKS_PHASE)
    if not r.answered("nvlink", res, "nvidia-smi nvlink", "nvlink: nvidia-smi nvlink -s"):
        return
    gpus = parse_nvlink_status(res.out)
    expected = cfg.get("nvlink_active_links")
    expected = whole(expected, None, 0) if expected is not None else None
    if expected is None:
        expected = max([sum(links.values()) for _i, _u, links in gpus] + [0])
    for index, _uuid, links in gpus:
        up = sum(links.values())
        if up < expected:
            down = [str(n) for n in sorted(links) if not links[n]]
            r.fail("nvlink", "nvlink: GPU %s %d of %d links active%s" % (
                index, up, expected, (" (inactive: %s)" % ", ".join(down[:6] + (["..."] if len(down) > 6 else [])))
                if down else ""))
    res = run([smi, "nvlink", "-e"], r.budget, CHECKS_PHASE)
    if not r.answered("nvlink", res, "nvidia-smi nvlink -e", "nvlink: nvidia-smi nvlink -e"):
        return
    counters = parse_nvlink_errors(res.out)
    before = r.state["nvlink"]
    allowed = whole(cfg.get("nvlink_max_error_increase"), 0, 0)
    for gpu in sorted(counters):
        for link in sorted(counters[gpu], key=int):
            now = counters[gpu][link]
            then = (before.get(gpu) or {}).get(link) or {}
            grown = [(name, now[name] - then[name]) for name in sorted(now)
                     if isinstance(then.get(name), int) and now[name] > then[name]]
            if sum(n for _name, n in grown) > allowed:
                r.fail("nvlink", "nvlink: %s link %s %s since the last run" % (
                    gpu, link, ", ".join("%s +%d" % (name, n) for name, n in grown)))
    r.state["nvlink"] = counters  # a counter that went down (driver reload, GPU reset) is the new baseline
    r.passed("nvlink")


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


def dcgm_ignored_codes(cfg):
    by_name = dict((name, code) for code, name, _pattern in DCGM_HEALTH_CODES)
    codes = set()
    for item in cfg.get("dcgm_ignore_error_codes") or []:
        if isinstance(item, str) and item.strip() in by_name:
            codes.add(by_name[item.strip()])
        elif to_int(item) is not None and not isinstance(item, bool):
            codes.add(to_int(item))
    return codes


HEALTH_RANK = {"Healthy": 0, "Warning": 1, "Failure": 2}


def dcgmi_host(r, check):
    """dcgmi's --host arguments for this node's host engine (module_utils/dcgm.py hostengine_args, as the modules);
    None, with ``check`` failed, when the recorded address cannot be trusted or read."""
    try:
        return hostengine_args(path=r.cfg["dcgm_hostengine_file"])
    except ValueError as exc:
        r.fail(check, str(exc))
        return None


def check_dcgm(r):
    if not r.on("dcgm_health"):
        return
    cfg = r.cfg
    mode = str(cfg["dcgm"]).lower()
    dcgmi = find("dcgmi", cfg["dcgmi_path"])
    if dcgmi is None:
        if mode in ("true", "on", "yes"):
            r.fail("dcgm_health", "dcgmi not found")
        r.passed("dcgm_health")
        return
    host = dcgmi_host(r, "dcgm_health")
    if host is None:
        return
    res = run([dcgmi, "health"] + host + ["-c", "-j"], r.budget, CHECKS_PHASE)
    if res.finished and res.rc != 0 and "watches not enabled" in (res.out + res.err).lower() \
            and cfg["dcgm_set_watches"]:
        # Watches live in nv-hostengine's memory and are lost when it restarts: set them again.
        res = run([dcgmi, "health"] + host + ["-s", str(cfg["dcgm_set_watches"])], r.budget, CHECKS_PHASE)
        if res.finished:
            r.notes.append("dcgm health watches set (%s)" % cfg["dcgm_set_watches"])
            res = run([dcgmi, "health"] + host + ["-c", "-j"], r.budget, CHECKS_PHASE)
    if not r.answered("dcgm_health", res, "dcgmi health", "dcgmi health -c"):
        return
    try:
        body = json.loads(res.out)["body"]
        overall = body["Overall Health"]["value"]
    except (ValueError, KeyError, TypeError):
        r.fail("dcgm_health", "dcgmi health -c: unreadable output: %s" % first_line(res.out))
        return
    incidents = _dcgm_incidents(body)
    ignore = dcgm_ignored_codes(cfg)
    kept = []
    for incident in incidents:
        codes = dcgm_codes(incident["text"])
        if codes and ignore.issuperset(codes):
            r.notes.append("dcgmi health: ignored %s %s %s (DCGM error code %s, dcgm_ignore_error_codes)" % (
                incident["group"], incident["entity"], incident["system"], ", ".join(str(c) for c in codes)))
        else:
            kept.append(incident)
    if incidents:
        # What is left once the ignored incidents are gone decides.
        overall = max([i["health"] for i in kept] + ["Healthy"], key=lambda h: HEALTH_RANK.get(h, 2))
    if overall == "Healthy" or (overall == "Warning" and not cfg["dcgm_fail_on_warning"]):
        r.passed("dcgm_health")
        return
    detail = ", ".join("%s %s %s %s" % (i["group"], i["entity"], i["system"], i["health"]) for i in kept
                       if HEALTH_RANK.get(i["health"], 2) > 0)
    r.fail("dcgm_health", "dcgmi health %s%s" % (overall, (" (" + detail + ")") if detail else ""))


def _diag_failures(doc):
    """[(test, [GPU ids], first warning)] of the failing tests of a `dcgmi diag -j` document (DCGM 3.x and 4.x)."""
    root = doc.get("DCGM Diagnostic") if isinstance(doc.get("DCGM Diagnostic"), dict) else doc.get("DCGM GPU Diagnostic")
    if not isinstance(root, dict):
        raise ValueError("no DCGM Diagnostic document")
    failures = []
    categories = [c for c in root.get("test_categories") or [] if isinstance(c, dict)]
    for category in categories:
        for test in category.get("tests") or []:
            if not isinstance(test, dict) or not test.get("name"):
                continue  # DCGM 3.x writes null entries between tests
            gpus, warning = [], None
            for res in test.get("results") or []:
                if not isinstance(res, dict) or str(res.get("status", "")).lower() != "fail":
                    continue
                ids = res.get("entity_id", res.get("gpu_ids", res.get("gpu_id")))
                gpus += re.findall(r"\d+", str(ids)) if ids is not None else []
                for item in res.get("warnings") or []:
                    text = item.get("warning") if isinstance(item, dict) else item
                    warning = warning or (str(text).strip() if text else None)
            summary = test.get("test_summary") if isinstance(test.get("test_summary"), dict) else {}
            if gpus or str(summary.get("status", "")).lower() == "fail":
                failures.append((test["name"], gpus, warning))
    return failures, root.get("runtime_error")


def check_dcgm_diag(r):
    """`dcgmi diag -r 1 -j`, only while no process uses a GPU."""
    if not r.on("dcgm_diag"):
        return
    cfg = r.cfg
    dcgmi = find("dcgmi", cfg["dcgmi_path"])
    if dcgmi is None:
        r.passed("dcgm_diag")
        return  # check_dcgm reports a missing dcgmi where DCGM is required
    smi = find("nvidia-smi", cfg["nvidia_smi_path"])
    if smi is None:
        r.notes.append("dcgmi diag not run: nvidia-smi not found, GPU processes unknown")
        return
    res = run([smi, "--query-compute-apps=pid", "--format=csv,noheader"], r.budget, CHECKS_PHASE)
    if not res.finished:
        r.fail("dcgm_diag", unfinished(r.budget, "nvidia-smi", res), timeout=True)
        return
    pids = [line.strip() for line in res.out.splitlines() if line.strip().isdigit()]
    if res.rc != 0 or pids:
        r.notes.append("dcgmi diag not run: %s" % ("%d GPU process(es) running" % len(pids) if pids else
                                                   "GPU processes unknown (nvidia-smi rc %d)" % res.rc))
        return
    host = dcgmi_host(r, "dcgm_diag")
    if host is None:
        return
    res = run([dcgmi, "diag"] + host + ["-r", "1", "-j"], r.budget, CHECKS_PHASE)
    if not res.finished:
        r.fail("dcgm_diag", unfinished(r.budget, "dcgmi diag", res), timeout=True)
        return
    try:
        start = res.out.index("{")
        failures, runtime_error = _diag_failures(json.JSONDecoder().raw_decode(res.out[start:])[0])
    except (ValueError, AttributeError):
        r.fail("dcgm_diag", "dcgmi diag -r 1 failed (rc %d): %s" % (res.rc, first_line(res.out) or first_line(res.err)))
        return
    for name, gpus, warning in failures:
        where = " on GPU %s" % ",".join(gpus) if gpus else ""
        r.fail("dcgm_diag", "dcgmi diag -r 1: %s failed%s%s" % (name, where, (": " + warning) if warning else ""))
    if runtime_error:
        r.fail("dcgm_diag", "dcgmi diag -r 1: %s" % first_line(str(runtime_error)))
    elif not failures and res.rc != 0:
        r.fail("dcgm_diag", "dcgmi diag -r 1 failed (rc %d) without a failing test" % res.rc)
    r.passed("dcgm_diag")


def check_lustre(r):
    if not r.on("lustre"):
        return
    cfg = r.cfg
    try:
        with open(cfg["mounts_file"]) as handle:
            table = [line.split() for line in handle if line.strip()]
    except OSError as exc:
        r.fail("lustre", "cannot read %s: %s" % (cfg["mounts_file"], exc))
        return
    lustre = set(f[1] for f in table if len(f) > 2 and f[2] == "lustre")
    for path in cfg["lustre_mounts"]:
        if path.rstrip("/") not in lustre and path not in lustre:
            r.fail("lustre", "Lustre not mounted at %s" % path)
    r.passed("lustre")


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


def check_fabric_manager(r):
    if not r.on("fabric_manager"):
        return
    unit = str(r.cfg.get("fabric_manager_unit") or DEFAULTS["fabric_manager_unit"])
    systemctl = find("systemctl", r.cfg.get("systemctl_path"))
    if systemctl is None:
        r.fail("fabric_manager", "fabric_manager: systemctl not found, %s unknown" % unit)
        return
    res = run([systemctl, "is-active", unit], r.budget, CHECKS_PHASE)
    if not res.finished:
        r.fail("fabric_manager", unfinished(r.budget, "systemctl is-active", res), timeout=True)
        return
    state = first_line(res.out) or "unknown"
    if res.rc != 0 or state != "active":
        r.fail("fabric_manager", "fabric_manager: %s is %s" % (unit, state))
    r.passed("fabric_manager")


def check_peermem(r):
    if not r.on("peermem"):
        return
    if not os.path.isdir(os.path.join(r.cfg.get("sys_module_dir") or DEFAULTS["sys_module_dir"], "nvidia_peermem")):
        r.fail("peermem", "peermem: nvidia_peermem is not loaded")
    r.passed("peermem")


def boot_units(cfg):
    """The configured boot units: a list of unit names (anything else, none)."""
    units = cfg.get("boot_units") or []
    return [str(u) for u in units if str(u).strip()] if isinstance(units, list) else []


def check_boot_units(r):
    """A boot unit that failed is a fault naming it: `systemctl is-failed` prints one state per unit, in order
    ("failed", "active", "inactive" for one that did not run or is not installed)."""
    if not r.on("boot_units"):
        return
    units = boot_units(r.cfg)
    systemctl = find("systemctl", r.cfg.get("systemctl_path"))
    if systemctl is None:
        r.fail("boot_units", "boot_units: systemctl not found, %s unknown" % ", ".join(units))
        return
    res = run([systemctl, "is-failed"] + units, r.budget, CHECKS_PHASE)
    if not res.finished:
        r.fail("boot_units", unfinished(r.budget, "systemctl is-failed", res), timeout=True)
        return
    states = [line.strip() for line in res.out.splitlines()]
    if len(states) != len(units):
        r.fail("boot_units", "boot_units: systemctl is-failed gave %d state(s) for %d unit(s) (rc %s)"
               % (len(states), len(units), res.rc))
        return
    failed = [unit for unit, state in zip(units, states) if state == "failed"]
    if failed:
        r.fail("boot_units", "boot_units: %s failed" % ", ".join(failed))
    r.passed("boot_units")


def run_checks(r):
    """Every enabled check; the cheap ones first, then nvidia-smi, then dcgmi (see the time budget)."""
    for check in (check_lustre, check_peermem, check_fabric_manager, check_boot_units, check_xid, check_ib, check_gpus,
                  check_gpu_extras, check_nvlink, check_dcgm, check_dcgm_diag):
        check(r)


# --- strikes, decision, breaker ---------------------------------------------------------------------------------

def count_strikes(r, counting):
    """(active faults, {check: (count, needed, [faults])} of pending ones, {check: count}) after this run."""
    needed = strikes_needed(r.cfg)
    before = r.state["strikes"]
    counts = {}
    by_check = {}
    for fault in r.faults:
        by_check.setdefault(fault.check, []).append(fault)
    for check in r.enabled:
        if check in by_check:
            counts[check] = whole(before.get(check), 0, 0) + 1
        elif check in r.evaluated:
            counts[check] = 0
        else:
            counts[check] = whole(before.get(check), 0, 0)  # not evaluated this run: as it was
    active_checks = set()
    pending = {}
    for check, faults in by_check.items():
        need = needed.get(check, 1)
        if all(f.timeout for f in faults):
            need = max(need, needed["timeout"])
        if not counting:
            need = 1  # no strike record: a fault acts at once
        if counts.get(check, 1) >= need:
            active_checks.add(check)
        else:
            pending[check] = (counts.get(check, 1), need, faults)
    active = [f for f in r.faults if f.check in active_checks]
    return active, pending, counts


# --- drain-reason ownership: reason_action of plugins/module_utils/slurm.py (imported above) --------------------------

def node_info(state):
    """scontrol's node state (IDLE+DRAIN, DOWN*, MIXED+DRAIN+NOT_RESPONDING) as state_flags reads it; an empty
    state (a node scontrol did not describe) has no flag."""
    if not (state or "").strip():
        return {"base": "", "flags": [], "drain": False}
    return state_flags(state)


def decide(active, pending, state, reason, prefix, max_len, may_resume=True):
    """Return (action, new_reason, why): drain, update, resume, or none (why: whose reason kept this check off).
    `may_resume` False (a run beside another that holds the lock): drain or update only; the run holding the lock,
    which may have found a fault this one did not, decides whether the node resumes."""
    if prefix_refusal(prefix):
        return "none", None, None  # main() refuses earlier; never own a drain through a prefix this check cannot own
    info = node_info(state)
    reason = reason or None
    if active:
        text = "%s %s" % (prefix, "; ".join(f.text for f in active))
        if len(text) > max_len:
            text = text[:max_len - 3].rstrip() + "..."
        verdict, why = reason_action("drain", info, reason, prefix, wanted=text, rewrite=True)
        if verdict != "act":
            return "none", None, why
        return ("update" if info["drain"] else "drain"), text, None
    if pending or not may_resume:
        return "none", None, None  # a fault below its strikes neither drains nor lets the node resume
    verdict, why = reason_action("resume", info, reason, prefix)
    if verdict == "act":
        return "resume", None, None
    return "none", None, None  # a drain that is not this check's is not this check's to lift: no note needed


class SlurmUnanswered(RuntimeError):
    """scontrol gave no answer in the time left: not a fault of this node."""


def _scontrol(scontrol, budget, args, label, what):
    """scontrol's output; SlurmUnanswered when it gave no answer in the time left, RuntimeError when it failed."""
    res = run([scontrol] + args, budget, SLURM)
    if not res.finished:
        budget.unfinished.append(what)
        raise SlurmUnanswered("scontrol %s: %s (slurmctld busy or unreachable, or slurmd has not registered yet)" % (
            label, "no answer within %d s" % max(1, int(round(res.limit)))
            if res.outcome == "no answer" else "not run, time budget spent"))
    if res.rc != 0:
        raise RuntimeError("scontrol %s failed (rc %d): %s" % (label, res.rc,
                                                               first_line(res.out) or first_line(res.err)))
    return res.out


def _state_and_reason(node):
    """(state, reason without its [user@time] tag, the tag's time) of one node of parse_scontrol_nodes; "" for none.
    The time is when slurmctld took the drain (SLURM_TIME_FORMAT=standard, set for every command this check runs:
    ISO 8601, to the second, so that its text sorts as the time does)."""
    reason, _user, taken = split_reason(node.get("Reason"))
    return node.get("State", ""), reason or "", taken or ""


def node_state(scontrol, node, budget):
    out = _scontrol(scontrol, budget, ["show", "node", "-o", node], "show node %s" % node, "scontrol show node")
    described = [n for n in parse_scontrol_nodes(out) if n.get("NodeName") == node] or [{}]
    return _state_and_reason(described[0])[:2]


def own_drains(out, prefix):
    """(nodes in the cluster, {node: (reason time, reason)} of those drained or draining with this prefix) from
    `scontrol show node -o` of every node. The time is "" where the reason has no `[user@time]`."""
    nodes = [n for n in parse_scontrol_nodes(out) if n.get("NodeName")]
    drains = {}
    for node in nodes:
        state, reason, taken = _state_and_reason(node)
        flags = set(state.upper().replace("*", "").split("+"))
        if flags & {"DRAIN", "DRAINED", "DRAINING", "FAIL"} and reason.startswith(prefix):
            drains[node["NodeName"]] = (taken, reason)
    return len(nodes), drains


def all_nodes(scontrol, budget, when):
    return _scontrol(scontrol, budget, ["show", "node", "-o"], "show node -o (all nodes%s)" % when,
                     "scontrol show node -o (all nodes%s)" % when)


def drain_rank(drains, node):
    """This node's place (1 = first) among the drains in the order slurmctld took them: reason time, then name."""
    mine = (drains[node][0], node)
    return 1 + sum(1 for name, (taken, _reason) in drains.items() if (taken, name) < mine)


def breaker_cap(cfg, total):
    percent = whole(cfg.get("max_drained_percent"), DEFAULTS["max_drained_percent"], 1, 100)
    return max(1, int(math.floor(total * percent / 100.0))), percent


def confirm_drain(cfg, scontrol, node, new_reason, before_state, budget, report, active, settle):
    """The breaker's second count, `settle` seconds after this node's drain: withdraw the drain when it is not among
    the first `cap` drains with the prefix (module docstring). Returns True when the drain was withdrawn."""
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


def load_config(path):
    cfg = dict(DEFAULTS)
    with open(path) as handle:
        cfg.update(json.load(handle))
    return cfg


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


def write_atomically(path, text, mode=0o644):
    """Replace `path` with `text` at once. The temporary file is new and unpredictable (mkstemp: O_CREAT|O_EXCL,
    a random name, 0600 until written), in the target's own directory, so that a name planted there beforehand
    (a file or a link a user made) is never opened or written through, and readers see the old or the new file."""
    tmp = None
    try:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix="." + os.path.basename(path) + ".")
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return str(exc)
    return None


def write_record(cfg, node, record):
    """The run's summary in <state_dir>/healthcheck-<source>.json, written atomically; a failure to write it is
    reported and never changes the run's outcome."""
    path = os.path.join(str(cfg.get("state_dir") or DEFAULTS["state_dir"]), "healthcheck-%s.json" % record["source"])
    problem = write_atomically(path, json.dumps(record, sort_keys=True) + "\n")
    if problem:
        print("cf-health: %s: cannot write %s: %s" % (node, path, problem), file=sys.stderr)


# --- metrics for node-exporter's textfile collector -------------------------------------------------------------

SOURCE_SERIES_RE = re.compile(r'^clusterforge_healthcheck_(status|last_run_timestamp_seconds|duration_seconds)'
                              r'\{source="([a-z][a-z0-9_-]{0,31})"\} (\S+)$')
SOURCE_KEYS = {"status": "status", "last_run_timestamp_seconds": "finished_at", "duration_seconds": "duration"}


def read_back_sources(path):
    """The per-caller series of an existing metrics file: {source: {status, finished_at, duration}}."""
    sources = {}
    try:
        with open(path) as handle:
            for line in handle:
                m = SOURCE_SERIES_RE.match(line.strip())
                if m:
                    try:
                        sources.setdefault(m.group(2), {})[SOURCE_KEYS[m.group(1)]] = float(m.group(3))
                    except ValueError:
                        continue
    except OSError:
        pass
    return sources


def _number(value):
    if isinstance(value, float) and not value.is_integer():
        return "%.3f" % value
    return "%d" % int(value)


def render_metrics(sources, checks, failed, counts, breaker):
    families = [
        ("clusterforge_healthcheck_status", "Result of the node health check's last run by this caller: 0 healthy, "
         "1 faults found, 2 the check could not run or act.", "source",
         [(s, sources[s].get("status", 2)) for s in sorted(sources)]),
        ("clusterforge_healthcheck_last_run_timestamp_seconds", "When the node health check's last run by this "
         "caller finished, in seconds since the epoch.", "source",
         [(s, sources[s].get("finished_at", 0)) for s in sorted(sources)]),
        ("clusterforge_healthcheck_duration_seconds", "How long the node health check's last run by this caller "
         "took, in seconds.", "source", [(s, sources[s].get("duration", 0)) for s in sorted(sources)]),
        ("clusterforge_healthcheck_fault", "1 when the check failed in the node health check's last run (drained, "
         "pending its strikes or held back by the breaker), 0 otherwise.", "check",
         [(c, 1 if c in failed else 0) for c in checks]),
        ("clusterforge_healthcheck_strikes", "Runs in a row the check has failed (it drains the node at its "
         "configured strikes).", "check", [(c, counts.get(c, 0)) for c in checks]),
        ("clusterforge_healthcheck_breaker_open", "1 when the circuit breaker (max_drained_percent) held back this "
         "node's drain for the check in the last run.", "check", [(c, 1 if c in breaker else 0) for c in checks]),
    ]
    lines = []
    for name, text, label, rows in families:
        lines.append("# HELP %s %s" % (name, text))
        lines.append("# TYPE %s gauge" % name)
        for key, value in rows:
            lines.append(name + "{" + '%s="%s"} %s' % (label, key, _number(value)))
    return "\n".join(lines) + "\n"


def write_metrics(cfg, node, state, source, record, report, checks):
    directory = cfg.get("textfile_dir")
    if not directory:
        return
    path = os.path.join(str(directory), PROM_FILE)
    sources = read_back_sources(path)
    for name, values in (state.get("sources") or {}).items():
        if isinstance(values, dict):
            sources[name] = values
    sources[source] = {"status": record["status"], "finished_at": record["finished_at"],
                       "duration": record["elapsed_seconds"]}
    state["sources"] = sources
    problem = write_atomically(path, render_metrics(sources, checks, set(report.get("failed") or []),
                                                    report.get("counts") or {}, set(report.get("breaker") or [])))
    if problem:
        print("cf-health: %s: cannot write %s: %s" % (node, path, problem), file=sys.stderr)


# --- main ------------------------------------------------------------------------------------------------------

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


if __name__ == "__main__":
    sys.exit(main())
