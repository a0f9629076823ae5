# -*- coding: utf-8 -*-
# Copyright: (c) 2026, ClusterForge developers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ClusterForge recap: what the operator must know when a run ends, even when it stopped."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: recap
type: aggregate
short_description: Ends every run with what the operator must know about the cluster
version_added: 1.0.0
description:
  - At the end of every playbook run (C(site.yml), the rolling change, C(slurm_upgrade.yml), C(health_deep.yml),
    C(validate.yml)), prints one B(CLUSTERFORGE RECAP) after Ansible's play recap, also when the run stopped on a
    failure (a task at the end of a playbook would not run then).
  - "It lists: the nodes that need a reboot and why (the facts C(common_os_reboot_required),
    C(nvidia_driver_reboot_required) and C(bios_reboot_required)); the nodes this run drained and left drained, with
    their reason (every M(clusterforge.gpu.slurm_node) result), and those it resumed; the validation verdict and the
    report's path (the fact C(validate_verdict)); the hosts that failed or were unreachable."
  - "While a task waits (a task with C(until) that Ansible retries: a drain waiting for jobs, an asynchronous DCGM
    diagnostic or NCCL run), it prints a B(progress) line for the task at most every 30 seconds, and at least every 30
    seconds when the task polls at least that often: how long it has waited, the hosts done, and what each host still
    waits for (what a job in the background says of itself through M(clusterforge.gpu.async_progress); a node's Slurm
    state and the jobs it still runs, from M(clusterforge.gpu.slurm_node_info) with
    O(clusterforge.gpu.slurm_node_info#module:jobs=true); C(running) for another job in the background). A wait
    shorter than 30 seconds prints nothing."
  - It reads only the results of the run's own tasks; it contacts nothing.
  - It prints nothing under a machine-readable stdout callback (C(ansible.posix.json), C(ansible.posix.jsonl)), whose
    output must stay one document.
  - Enable it with C(callbacks_enabled = clusterforge.gpu.recap) in the C([defaults]) section of C(ansible.cfg) (this
    collection's C(ansible.cfg) and the lab's do).
requirements:
  - enable in configuration
"""

import time

from ansible import constants as C
from ansible import context
from ansible.plugins.callback import CallbackBase

# The facts roles set when a node needs a reboot, and what each means for the operator.
REBOOT_FACTS = (
    ("common_os_reboot_required", "kernel parameters"),
    ("nvidia_driver_reboot_required", "NVIDIA driver"),
    ("bios_reboot_required", "BIOS settings pending on the BMC"),
)
SLURM_NODE_ACTIONS = ("clusterforge.gpu.slurm_node", "slurm_node")
SLURM_NODE_INFO_ACTIONS = ("clusterforge.gpu.slurm_node_info", "slurm_node_info")
ASYNC_STATUS_ACTIONS = ("ansible.builtin.async_status", "async_status")
ASYNC_PROGRESS_ACTIONS = ("clusterforge.gpu.async_progress", "async_progress")
# At most one progress line per task in this many seconds, and one at least this often when the task polls more
# often (issue 42: the operator of a wait of up to an hour hears from it every 30 s).
PROGRESS_SECONDS = 30
# Hosts named one by one in a progress line; beyond them, a count.
PROGRESS_HOSTS_NAMED = 8
# A failure's message in the recap: long enough for what the operator does next (the rolling hold's message ends with
# the re-run command), cut at a word with " ..." beyond it.
MESSAGE_MAX = 600


def shorten(text, limit):
    """`text` as it is when it fits in `limit` characters, else cut at the last space within them, with " ..."."""
    if len(text) <= limit:
        return text
    cut = text[:limit - 4]
    if " " in cut:
        cut = cut[:cut.rindex(" ")]
    return cut + " ..."


class Recap(object):
    """What the run did that the operator must know, gathered from task results (no Ansible objects: unit-tested)."""

    def __init__(self):
        self.reboot = {}     # host -> {reason: bool}, the last value each fact was set to
        self.nodes = {}      # Slurm node -> (last action, reason after)
        self.verdict = None  # the last validate_verdict fact
        self.failed = {}     # host -> the first failed task's name and message
        self.unreachable = {}

    def result(self, host, action, result, task_name=""):
        """One ok or changed task result."""
        facts = result.get("ansible_facts") or {}
        for fact, why in REBOOT_FACTS:
            if fact in facts:
                self.reboot.setdefault(host, {})[why] = _true(facts[fact])
        if isinstance(facts.get("validate_verdict"), dict):
            self.verdict = facts["validate_verdict"]
        if action in SLURM_NODE_ACTIONS and not result.get("skipped"):
            for node in result.get("nodes") or []:
                if isinstance(node, dict) and node.get("action") in ("drain", "resume") and node.get("name"):
                    self.nodes[node["name"]] = (node["action"], node.get("reason_after"))

    def failure(self, host, result, task_name="", unreachable=False):
        """A failed or unreachable result. The host's last one is kept: a failure a rescue handled comes before the one
        that stopped the host (the rolling hold's "Stop the roll" names the failed step)."""
        where = self.unreachable if unreachable else self.failed
        msg = shorten(" ".join(str(result.get("msg") or result.get("stderr") or "").split()), MESSAGE_MAX)
        where[host] = "%s: %s" % (task_name, msg) if task_name else msg

    def lines(self, check_mode=False, failed_hosts=None):
        """The recap's lines. failed_hosts: the hosts Ansible's stats count as failed (a failure that a rescue
        handled is not one); None keeps every failure seen."""
        out = []
        reboot = ["%s (%s)" % (host, ", ".join(sorted(w for w, need in whys.items() if need)))
                  for host, whys in sorted(self.reboot.items()) if any(whys.values())]
        out.append("nodes needing a reboot: %s" % ("; ".join(reboot) if reboot else "none"))
        held = ["%s: %s" % (node, reason or "(no reason)") for node, (action, reason) in sorted(self.nodes.items())
                if action == "drain"]
        would = "would have " if check_mode else ""
        out.append("nodes this run %sdrained and left drained: %s" % (would, "; ".join(held) if held else "none"))
        resumed = sorted(node for node, (action, _reason) in self.nodes.items() if action == "resume")
        if resumed:
            out.append("nodes this run resumed: %s" % ", ".join(resumed))
        if self.verdict is not None:
            v = self.verdict
            out.append("validation: %s%s%s" % (
                "PASS" if _true(v.get("pass")) else "FAIL",
                "" if _true(v.get("pass")) else " (%s checks failed)" % v.get("failed", "?"),
                (", report %s" % v["report"]) if v.get("report") else ""))
        for host, why in sorted(self.failed.items()):
            if failed_hosts is not None and host not in failed_hosts:
                continue
            out.append("failed: %s at %s" % (host, why))
        for host, why in sorted(self.unreachable.items()):
            out.append("unreachable: %s (%s)" % (host, why))
        return out


def waiting_for(action, result):
    """What one retried result still waits for, in words: what the job says of itself (clusterforge.gpu.async_progress's
    ``progress``), each listed node's Slurm state and the jobs it runs (a drain polled with slurm_node_info), "running"
    for an asynchronous job, else nothing."""
    if isinstance(result.get("progress"), str) and result["progress"].strip():
        return " ".join(result["progress"].split())
    if action in SLURM_NODE_INFO_ACTIONS:
        parts = []
        for node in result.get("nodes") or []:
            if not isinstance(node, dict) or node.get("drained"):
                continue
            jobs = node.get("jobs")
            if jobs:
                held = "job%s %s" % ("s" if len(jobs) > 1 else "", ", ".join(str(j) for j in jobs))
            elif node.get("cpus_allocated"):
                held = "%s CPUs allocated" % node["cpus_allocated"]
            else:
                held = ""
            parts.append("%s %s%s" % (node.get("name"), node.get("state"), (", " + held) if held else ""))
        return "; ".join(parts)
    if action in ASYNC_STATUS_ACTIONS + ASYNC_PROGRESS_ACTIONS and result.get("started") and not result.get("finished"):
        return "running"
    return ""


def duration(seconds):
    """12 s, 4m05s, 1h02m."""
    seconds = int(seconds)
    if seconds < 60:
        return "%d s" % seconds
    if seconds < 3600:
        return "%dm%02ds" % (seconds // 60, seconds % 60)
    return "%dh%02dm" % (seconds // 3600, seconds % 3600 // 60)


class Progress(object):
    """Progress lines for tasks that wait (no Ansible objects: unit-tested with a clock of its own).

    Per task: when it started, the hosts done, and what each host still waiting was last seen waiting for. A line is
    due on a retry once PROGRESS_SECONDS have passed since the task started or since its last line, or earlier when
    the next retry (``delay`` seconds away) would come later than that.
    """

    def __init__(self, clock=time.monotonic, every=PROGRESS_SECONDS):
        self.clock = clock
        self.every = every
        self.tasks = {}

    def start(self, task_id):
        self.tasks[task_id] = {"start": self.clock(), "last": None, "done": [], "waiting": {}}

    def _task(self, task_id):
        if task_id not in self.tasks:
            self.start(task_id)
        return self.tasks[task_id]

    def done(self, task_id, host):
        """A host's final result of the task (ok, failed, skipped or unreachable)."""
        task = self.tasks.get(task_id)
        if task is None:
            return
        task["waiting"].pop(host, None)
        if host not in task["done"]:
            task["done"].append(host)

    def retry(self, task_id, name, host, action, result, delay=0):
        """A host's retried result; returns the progress line when one is due, else None."""
        task = self._task(task_id)
        task["waiting"][host] = waiting_for(action, result)
        now = self.clock()
        since = task["last"] if task["last"] is not None else task["start"]
        # One second of slack: a task that polls every 30 s prints on each poll, not on every other one.
        if now - since < self.every - 1 and now + max(0, delay) - since <= self.every:
            return None
        task["last"] = now
        return self.line(task, name, now)

    def line(self, task, name, now):
        done, waiting = task["done"], task["waiting"]
        total = len(done) + len(waiting)
        hosts = sorted(waiting)
        named = []
        for host in hosts[:PROGRESS_HOSTS_NAMED]:
            what = waiting[host]
            if what.startswith(host + " "):  # a node read about itself (the drain of the node the task runs for)
                what = what[len(host) + 1:]
            named.append("%s (%s)" % (host, what) if what else host)
        if len(hosts) > PROGRESS_HOSTS_NAMED:
            named.append("and %d more" % (len(hosts) - PROGRESS_HOSTS_NAMED))
        return "progress after %s: %s: %d of %d host%s done; waiting for %s" % (
            duration(now - task["start"]), name, len(done), total, "" if total == 1 else "s", ", ".join(named))


def machine_readable(stdout_callback):
    """Whether the run's stdout callback writes a document for programs (json, jsonl), which a recap would break."""
    name = str(stdout_callback or "").rsplit(".", 1)[-1]
    return name in ("json", "jsonl")


def _true(value):
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "1", "on")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "clusterforge.gpu.recap"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, display=None, options=None):
        super(CallbackModule, self).__init__(display=display, options=options)
        self.recap = Recap()
        self.progress = Progress()

    def _done(self, result):
        self.progress.done(result._task._uuid, result._host.get_name())

    def _ok(self, result):
        self.recap.result(result._host.get_name(), result._task.action, result._result, result._task.get_name())

    def v2_playbook_on_task_start(self, task, is_conditional):
        self.progress.start(task._uuid)

    def v2_runner_on_ok(self, result):
        self._done(result)
        self._ok(result)

    def v2_runner_item_on_ok(self, result):
        self._ok(result)

    def v2_runner_on_skipped(self, result):
        self._done(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._done(result)
        if not ignore_errors:
            self.recap.failure(result._host.get_name(), result._result, result._task.get_name())

    def v2_runner_on_unreachable(self, result):
        self._done(result)
        self.recap.failure(result._host.get_name(), result._result, result._task.get_name(), unreachable=True)

    def v2_runner_retry(self, result):
        if machine_readable(C.DEFAULT_STDOUT_CALLBACK):
            return
        try:
            delay = int(result._task.delay or 0)
        except (TypeError, ValueError):
            delay = 0
        line = self.progress.retry(result._task._uuid, result._task.get_name(), result._host.get_name(),
                                   result._task.action, result._result, delay)
        if line:
            self._display.display(line)

    def v2_playbook_on_stats(self, stats):
        if machine_readable(C.DEFAULT_STDOUT_CALLBACK):
            return
        failed = set(host for host in stats.processed if stats.summarize(host).get("failures"))
        self._display.banner("CLUSTERFORGE RECAP")
        for line in self.recap.lines(bool(context.CLIARGS.get("check")), failed):
            self._display.display(line)
        self._display.display("")
