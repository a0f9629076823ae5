# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/_runner time limits, against real processes: a tool that never answers (the lab emulator's hang
switch, or a script whose child holds the output open) fails within a few seconds with "no answer in N s:
<command line>", and its whole process group is gone."""

import os
import stat
import sys
import time

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils import _runner
from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, ToolTimeout, execute

EMULATORS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "lab", "emulators")


class Failed(Exception):
    pass


class RealModule(object):
    """Enough of AnsibleModule for ToolRunner: the tool's path as given, fail_json raises."""

    def get_bin_path(self, arg, required=False):
        return arg if os.access(arg, os.X_OK) else None

    def fail_json(self, **kwargs):
        raise Failed(kwargs)


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead (its parent has not reaped it yet)
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("#!%s\n%s" % (sys.executable, body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_hung_emulated_nvidia_smi_fails_within_the_limit_and_is_killed(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERFORGE_EMU_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("CLUSTERFORGE_EMU_RUN_DIR", str(tmp_path))
    monkeypatch.setattr(_runner, "TERM_GRACE_SECONDS", 1)
    tool = os.path.realpath(os.path.join(EMULATORS, "nvidia-smi"))
    runner = ToolRunner(RealModule(), "nvidia-smi", path=tool)
    rc, out, _err = runner.run(["-L"], timeout_seconds=5)
    assert rc == 0 and "GPU 0:" in out, "the emulator answers while its hang switch is off"

    (tmp_path / "hang-nvidia-smi").write_text("")
    start = time.monotonic()
    with pytest.raises(Failed) as e:
        runner.run(["-q", "-x"], timeout_seconds=1)
    took = time.monotonic() - start
    info = e.value.args[0]
    assert info["msg"] == "no answer in 1 s: %s -q -x" % tool
    assert info["timed_out"] is True and info["time_limit_seconds"] == 1
    # 1 s limit + SIGTERM (ignored, like a D-state process) + 1 s grace + SIGKILL
    assert took < 5, took
    assert not [p for p in _pids_running(tool, "CLUSTERFORGE_EMU_STATE_DIR=%s" % tmp_path) if _alive(p)], \
        "the hung emulator is still running"


def _pids_running(path, env_entry):
    """The processes running ``path`` whose environment holds ``env_entry`` (this test's own: other tests running
    the same emulator at the same time, in another pytest worker, are not this one's)."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % entry, "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if not any(a.decode("utf-8", "replace") == path for a in argv):
            continue
        try:
            with open("/proc/%s/environ" % entry, "rb") as handle:
                environ = handle.read().split(b"\0")
        except OSError:
            continue
        if env_entry.encode() in environ:
            pids.append(int(entry))
    return pids


def test_the_whole_process_group_is_killed_even_a_child_that_holds_the_output(tmp_path, monkeypatch):
    """The tool starts a child that keeps stdout open and ignores SIGTERM, then the tool itself hangs: the
    runner must not wait for the output to close, and must kill the child too."""
    monkeypatch.setattr(_runner, "TERM_GRACE_SECONDS", 1)
    pidfile = tmp_path / "child.pid"
    tool = _script(tmp_path, "lctl", """
import os, signal, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c",
    "import signal, time\\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\\nwhile True: time.sleep(60)"])
open(%r, "w").write(str(child.pid))
print("started", flush=True)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
while True:
    time.sleep(60)
""" % str(pidfile))
    start = time.monotonic()
    with pytest.raises(ToolTimeout) as e:
        execute(None, [tool, "get_param", "osc.*.max_dirty_mb"], 1)
    assert time.monotonic() - start < 5
    assert str(e.value) == "no answer in 1 s: %s get_param 'osc.*.max_dirty_mb'" % tool
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 2
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the tool's child survived the time limit"


def test_a_tool_that_exits_but_leaves_a_child_holding_the_output_is_a_timeout_too(tmp_path):
    tool = _script(tmp_path, "scontrol", """
import os, sys, time
if os.fork() == 0:
    time.sleep(30)
    os._exit(0)
print("ok")
""")
    with pytest.raises(ToolTimeout, match="no answer in 1 s: "):
        execute(None, [tool, "ping"], 1)


def test_an_answer_within_the_limit_is_returned_with_rc_output_and_the_c_locale(tmp_path):
    tool = _script(tmp_path, "sinfo", """
import os, sys
sys.stdout.write(os.environ["LC_ALL"] + " " + sys.stdin.read())
sys.stderr.write("warn")
sys.exit(3)
""")
    assert execute(None, [tool], 10, data="hello") == (3, "C hello\n", "warn")


def test_a_missing_program_is_rc_127_not_an_exception(tmp_path):
    rc, out, err = execute(None, [str(tmp_path / "nope")], 5)
    assert rc == 127 and out == "" and "cannot run" in err


@pytest.mark.parametrize("tool, seconds", [
    ("nvidia-smi", 120), ("/usr/bin/nvidia-smi", 120), ("scontrol", 60), ("ibdiagnet", 1800),
    ("mkfs.lustre", 3600), ("something-else", _runner.DEFAULT_TIME_LIMIT_SECONDS),
])
def test_default_limit_per_tool(tool, seconds):
    assert _runner.time_limit_seconds(tool) == seconds


def test_caller_limit_wins_and_diag_levels_scale():
    assert _runner.time_limit_seconds("nvidia-smi", 7) == 7
    levels = [_runner.time_limit_seconds("dcgmi", dcgm_diag_level=n) for n in (1, 2, 3, 4)]
    assert levels == sorted(levels) and len(set(levels)) == 4
    assert _runner.time_limit_seconds("dcgmi", dcgm_diag_level="long") == levels[2]
    assert _runner.time_limit_seconds("dcgmi", dcgm_diag_level="pcie") == levels[3]  # a named test: the longest


@pytest.mark.parametrize("bad", [0, -1, True, "60"])
def test_a_limit_that_is_not_a_positive_number_is_refused(bad):
    with pytest.raises(ValueError, match="positive number of seconds"):
        _runner.time_limit_seconds("lctl", bad)


def test_every_run_passes_the_tools_default_limit(monkeypatch):
    seen = []
    monkeypatch.setattr(_runner, "execute", lambda module, cmd, limit, data=None, environ_update=None:
                        seen.append((cmd, limit)) or (0, "", ""))

    class Module(RealModule):
        def get_bin_path(self, arg, required=False):
            return "/usr/bin/" + arg
    ToolRunner(Module(), "scontrol").run(["ping"])
    ToolRunner(Module(), "dcgmi").run(["diag", "-r", "3"], timeout_seconds=2700)
    assert seen == [(["/usr/bin/scontrol", "ping"], 60), (["/usr/bin/dcgmi", "diag", "-r", "3"], 2700)]
