# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# PRIVATE: this module_utils file is internal to clusterforge.gpu. It is not a public API and may change
# without notice.
"""One way for every module of the collection to run a hardware tool.

Commands are argv lists (never shell strings), run with the C locale so the output parses the same
everywhere, each within a time limit (a default per tool, see TOOL_TIME_LIMIT_SECONDS; the caller may pass its
own), and every call is recorded so that modules can return the commands they ran and tests can
count them (each module reads each tool's state once per run).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import selectors
import shlex
import signal
import subprocess
import time

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}

# ------------------------------------------------------------------------------------------------ time limits
# Every command the collection runs on a node has a time limit: a GPU that falls off the bus leaves nvidia-smi
# hanging in D state, and one hung tool must fail its host, not stall the play for every host.

# Seconds a tool may run when the caller does not say otherwise (the caller may pass its own per call).
TOOL_TIME_LIMIT_SECONDS = {
    "nvidia-smi": 120,      # -q -x on 8 GPUs takes seconds; a hung driver never answers
    "dcgmi": 120,           # queries and health watches; a diagnostic uses DCGM_DIAG_LEVEL_SECONDS
    "lctl": 120,
    "lnetctl": 120,
    "lfs": 300,
    "scontrol": 60,         # MessageTimeout is 10 s by default; a minute is many retries
    "sinfo": 60,
    "squeue": 60,
    "ibstat": 60,
    "ibdiagnet": 1800,      # a fabric sweep of a large fabric takes minutes
    "lspci": 60,
    "setpci": 60,
    "blkid": 60,
    "tunefs.lustre": 300,
    "mkfs.lustre": 3600,    # formats the whole device
    "rpm": 300,
    "dpkg-query": 300,
    "dnf": 900,             # may refresh repository metadata
    "apt-cache": 300,
    "systemctl": 300,       # a unit start waits for the unit (systemd's own default is 90 s per job)
}
DEFAULT_TIME_LIMIT_SECONDS = 300

# dcgmi diag by level (PRACTICE.md: level 1 takes seconds, 2 about 2 min, 3 about 15 min, 4 is extended)
DCGM_DIAG_LEVEL_SECONDS = {1: 300, 2: 900, 3: 2700, 4: 7200}

# After the limit: SIGTERM to the whole process group, SIGKILL this many seconds later.
TERM_GRACE_SECONDS = 5


class ToolTimeout(Exception):
    """A command gave no answer within its time limit (its process group has been killed)."""

    def __init__(self, cmd, seconds):
        self.cmd = list(cmd)
        self.seconds = seconds
        super(ToolTimeout, self).__init__(timeout_message(cmd, seconds))


def timeout_message(cmd, seconds):
    """The one message for a command that timed out: ``no answer in N s: <command line>``."""
    return "no answer in %s s: %s" % (_seconds_text(seconds), quote(cmd))


def _seconds_text(seconds):
    return "%d" % seconds if float(seconds) == int(seconds) else "%s" % seconds


def time_limit_seconds(tool, seconds=None, dcgm_diag_level=None):
    """The time limit for one run of ``tool`` (a name or a path): the caller's ``seconds`` when given, else the
    dcgmi diag limit for ``dcgm_diag_level`` when given, else the tool's default, else the generic default.
    A limit that is not a positive number is refused (ValueError)."""
    if seconds is not None:
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise ValueError("a time limit must be a positive number of seconds, got %r" % (seconds,))
        return seconds
    if dcgm_diag_level is not None:
        level = {"quick": 1, "short": 1, "medium": 2, "long": 3, "xlong": 4}.get(str(dcgm_diag_level), dcgm_diag_level)
        try:
            return DCGM_DIAG_LEVEL_SECONDS[int(level)]
        except (KeyError, TypeError, ValueError):
            return DCGM_DIAG_LEVEL_SECONDS[max(DCGM_DIAG_LEVEL_SECONDS)]
    name = os.path.basename(str(tool or ""))
    return TOOL_TIME_LIMIT_SECONDS.get(name, DEFAULT_TIME_LIMIT_SECONDS)


def _kill_group(proc, grace=None):
    """SIGTERM to the child's process group, SIGKILL ``grace`` seconds later (or at once when the leader is gone,
    for anything it left behind). Never waits for a process that cannot die (D state): it is left to init."""
    grace = TERM_GRACE_SECONDS if grace is None else grace
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 1)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        end = time.monotonic() + wait
        while proc.poll() is None and time.monotonic() < end:
            time.sleep(0.05)


def execute(module, cmd, timeout_seconds, data=None, environ_update=None):
    """Run argv ``cmd`` in its own session and process group with the C locale; return (rc, stdout, stderr).

    ``data`` is written to its standard input (with a newline added, as AnsibleModule.run_command does). Raises
    ToolTimeout when it has not finished (exited and closed its output) within ``timeout_seconds``, after killing
    its whole process group. ``module`` is unused here; it lets tests put a scripted tool in place of this.
    """
    env = dict(os.environ)
    env.update(environ_update if environ_update is not None else C_LOCALE)
    deadline = time.monotonic() + timeout_seconds
    try:
        proc = subprocess.Popen([str(c) for c in cmd], stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, close_fds=True,
                                start_new_session=True)
    except OSError as e:
        return 127, "", "cannot run %s: %s" % (cmd[0], e)
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    chunks = {out_fd: [], err_fd: []}
    try:
        if data is not None:
            try:
                proc.stdin.write((data + "\n").encode("utf-8"))
            except (BrokenPipeError, OSError):
                pass
            proc.stdin.close()
        selector = selectors.DefaultSelector()
        for handle in (proc.stdout, proc.stderr):
            selector.register(handle, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise ToolTimeout(cmd, timeout_seconds)
            for key, _events in selector.select(min(left, 1.0)):
                chunk = os.read(key.fd, 65536)
                if chunk:
                    chunks[key.fd].append(chunk)
                else:
                    selector.unregister(key.fileobj)
        selector.close()
        left = deadline - time.monotonic()
        try:
            rc = proc.wait(timeout=max(left, 0.01))
        except subprocess.TimeoutExpired:
            raise ToolTimeout(cmd, timeout_seconds)
    except ToolTimeout:
        _kill_group(proc)
        raise
    finally:
        for handle in (proc.stdout, proc.stderr):
            handle.close()
    return rc, _text(chunks[out_fd]), _text(chunks[err_fd])


def _text(chunks):
    return b"".join(chunks).decode("utf-8", "replace")


def find_tool(module, tool, path=None, required=True, option=None):
    """The one way a module of the collection finds the program it runs. Returns its path, or None.

    ``path`` is the user's override (a module option such as ``nvidia_smi_path``; ``option`` names it for the
    message). It wins over any lookup, and it must exist and be executable: a path the user set that is wrong
    fails the module (``required`` or not), with the path and the option in the message, before anything runs. A
    bare name in the option (``dcgmi``) is looked up on PATH like the default.

    Without an override the tool is looked up with ``get_bin_path``: on PATH, in PATH order (a site's wrapper in
    /usr/local/bin wins over the packaged tool), then in /sbin, /usr/sbin and /usr/local/sbin. A tool that is not
    found fails the module with a clear message when ``required``, else None is returned.
    """
    if path:
        # get_bin_path on an absolute path checks that it exists, is a file and is executable.
        found = module.get_bin_path(path, required=False)
        if found is None:
            module.fail_json(msg="%s was not found at %s%s (it does not exist or is not executable)"
                             % (tool, path, " (%s)" % option if option else ""), changed=False)
        return path if "/" in path else found
    found = module.get_bin_path(tool, required=False)
    if found is None and required:
        module.fail_json(msg="%s was not found on this host; install it or set %s"
                         % (tool, option or "its path option"), changed=False)
    return found


class ToolRunner(object):
    """Runs one external tool for an AnsibleModule.

    The binary is found with :func:`find_tool` (``path`` is the user's override, ``option`` its option name).
    A missing tool fails the module with a clear message before anything is changed.
    """

    def __init__(self, module, tool, path=None, required=True, option=None):
        self.module = module
        self.tool = tool
        self.calls = []
        self.bin = find_tool(module, tool, path, required=required, option=option)

    @property
    def available(self):
        return self.bin is not None

    def run(self, args, check_rc=True, data=None, what=None, timeout_seconds=None):
        """Run the tool with ``args`` (a list). Returns (rc, stdout, stderr).

        With ``check_rc`` a non-zero exit fails the module with the command, rc, stdout and stderr. The command
        runs within ``timeout_seconds`` (default: :func:`time_limit_seconds` for this tool); at the limit its
        process group is killed and the module fails with ``no answer in N s: <command line>``, whatever
        ``check_rc`` says (a tool that does not answer has no result to judge).
        """
        cmd = [self.bin] + [str(a) for a in args]
        self.calls.append(cmd)
        limit = time_limit_seconds(self.tool, timeout_seconds)
        try:
            rc, out, err = execute(self.module, cmd, limit, data=data, environ_update=C_LOCALE)
        except ToolTimeout as e:
            self.module.fail_json(msg=str(e), cmd=quote(cmd), rc=None, stdout="", stderr="", timed_out=True,
                                  time_limit_seconds=limit)
            raise  # fail_json does not return; for fakes that do
        if check_rc and rc != 0:
            self.fail(cmd, rc, out, err, what=what)
        return rc, out, err

    def fail(self, cmd, rc, out, err, what=None, **extra):
        msg = "%s failed (rc=%s): %s" % (what or self.tool, rc, (err or out or "").strip()[:2000])
        self.module.fail_json(msg=msg, cmd=quote(cmd), rc=rc, stdout=out, stderr=err, **extra)


def quote(cmd):
    """The argv list as one shell-quoted string, for messages and the ``cmd`` return value."""
    return " ".join(shlex.quote(str(c)) for c in cmd)
