# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""The strike state, shared by every caller under an exclusive lock (<state_dir>/healthcheck-state.json and
<state_dir>/healthcheck.lock), the boot id that starts it afresh, and the strike count of a run."""

import fcntl
import json
import os
import time

# pylint: disable=import-error
from clusterforge_infiniband import read_sysfs_text
# pylint: enable=import-error

from clusterforge_health.core import DEFAULTS, strikes_needed, whole
from clusterforge_health.metrics import write_atomically


STATE_VERSION = 1


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
