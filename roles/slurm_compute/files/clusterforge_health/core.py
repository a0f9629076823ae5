# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""The node health check's configuration (its defaults, reading it and what a hand-edited one got wrong),
logging, the time budget, commands run within it (each in its own process group, killed at its limit) and one run's
faults (Run, Fault), with the small value helpers every check uses. The time budget and the rest of what the program
does are described in the program's docstring (slurm_healthcheck.py, installed beside this package)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

try:
    import syslog
except ImportError:  # pragma: no cover - every Linux Python has it
    syslog = None

# pylint: disable=import-error
from clusterforge_dcgm import HOSTENGINE_FILE
from clusterforge_healthcheck import CHECKS, DEFAULT_STRIKES, reason_prefix_problems
# pylint: enable=import-error


# The run's clock starts here, before the configuration is read.
STARTED = time.monotonic()

DEFAULT_CONFIG = "/etc/slurm/clusterforge-healthcheck.json"
SEARCH_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

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

# --- time budget (see the program's docstring) ---
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


def boot_units(cfg):
    """The configured boot units: a list of unit names (anything else, none)."""
    units = cfg.get("boot_units") or []
    return [str(u) for u in units if str(u).strip()] if isinstance(units, list) else []


def load_config(path):
    cfg = dict(DEFAULTS)
    with open(path) as handle:
        cfg.update(json.load(handle))
    return cfg
