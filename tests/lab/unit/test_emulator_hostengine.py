"""The nv-hostengine TEST EMULATOR with the dcgmi emulator in host-engine mode, as the lab runs them: dcgmi connects
to the host engine (a Unix socket or TCP), the health watches live in the host engine's memory, and who may connect
is decided by the kernel. Read through the collection's own parsers (module_utils/dcgm.py)."""

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from conftest import EMULATORS

from ansible_collections.clusterforge.gpu.plugins.module_utils import dcgm as D

DCGMI = os.path.join(EMULATORS, "dcgmi")
HOSTENGINE = os.path.join(EMULATORS, "nv-hostengine")


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    e.update(CLUSTERFORGE_EMU_STATE_DIR=str(tmp_path / "state"), CLUSTERFORGE_EMU_RUN_DIR=str(tmp_path / "run"),
             CLUSTERFORGE_EMU_DCGM_HOSTENGINE="1")
    e.pop("CLUSTERFORGE_EMU_DCGM_GPUS", None)
    return e


class Engine(object):
    """One nv-hostengine emulator process, started as nvidia-dcgm.service would."""

    def __init__(self, args, env):
        self.proc = subprocess.Popen([sys.executable, HOSTENGINE, "-n"] + args, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        self.started = self.proc.stdout.readline()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=30)


@pytest.fixture
def engines():
    running = []
    yield lambda args, env: running.append(Engine(args, env)) or running[-1]
    for engine in running:
        if engine.proc.poll() is None:
            engine.stop()


def dcgmi(env, *args, **kwargs):
    python = kwargs.pop("python", sys.executable)
    p = subprocess.run([python, DCGMI] + list(args), env=env, capture_output=True, text=True, timeout=60,
                       check=False, **kwargs)
    return p.returncode, p.stdout


def watches_on(env, host):
    rc, out = dcgmi(env, "health", "--host", host, "-f")
    assert rc == 0, out
    return sorted(row for row, on in D.parse_health_watches(out)["watches"].items() if on)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_the_emulator_says_it_is_one():
    with open(HOSTENGINE) as f:
        assert f.readline() == "#!/usr/bin/env python3\n"
        assert f.readline().startswith("# ClusterForge TEST EMULATOR of nv-hostengine: not the real tool.")
    assert os.access(HOSTENGINE, os.X_OK)


def test_watches_live_in_the_host_engine_on_its_socket_and_die_with_it(env, engines, tmp_path):
    sock = str(tmp_path / "hostengine" / "nv-hostengine.sock")
    os.mkdir(os.path.dirname(sock), 0o700)
    engine = engines(["--domain-socket", sock], env)
    assert engine.started.startswith("Started host engine version 4.4.2 using socket path %s" % sock)
    host = "unix://" + sock
    assert watches_on(env, host) == []
    assert dcgmi(env, "health", "--host", host, "-s", "a") == (0, "Health monitor systems set successfully.\n")
    assert set(D.watch_rows("a")) <= set(watches_on(env, host))
    rc, out = dcgmi(env, "health", "--host", host, "-c", "-j")
    assert rc == 0 and '"Healthy"' in out
    # the default (localhost:5555 by TCP) is not where this host engine listens
    rc, out = dcgmi(env, "health", "-f")
    assert rc == 247
    assert out.splitlines() == [
        "Error: unable to establish a connection to the specified host: localhost",
        "Error: Unable to connect to host engine. Host engine connection invalid/disconnected."]
    assert dcgmi(env, "health", "--host", host, "--clear")[0] == 0
    assert watches_on(env, host) == []
    dcgmi(env, "health", "--host", host, "-s", "pm")
    engine.stop()
    assert not os.path.exists(sock)
    assert dcgmi(env, "health", "--host", host, "-f")[0] == 247
    engines(["--domain-socket", sock], env)
    assert watches_on(env, host) == []  # a restarted host engine has no watches


def test_diag_and_discovery_need_the_host_engine_too(env, engines, tmp_path):
    sock = str(tmp_path / "he.sock")
    assert dcgmi(env, "diag", "--host", "unix://" + sock, "-r", "1", "-j")[0] == 247
    assert dcgmi(env, "discovery", "--host", "unix://" + sock, "-l")[0] == 247
    engines(["-d", sock], env)
    rc, out = dcgmi(env, "diag", "--host", "unix://" + sock, "-r", "1", "-j")
    assert rc == 0 and D.parse_diag_json(out)["result"] == "pass"
    rc, out = dcgmi(env, "discovery", "--host", "unix://" + sock, "-l")
    assert rc == 0 and out.startswith("8 GPUs found.")


def test_tcp_host_engine_on_a_port(env, engines):
    port = free_port()
    engine = engines(["--port", str(port)], env)
    assert "port number: %d" % port in engine.started
    host = "127.0.0.1:%d" % port
    assert dcgmi(env, "health", "--host", host, "-s", "t")[0] == 0
    assert watches_on(env, host) == sorted(D.watch_rows("t"))


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"),
                    reason="needs root (to run dcgmi as another user) and the system's python3")
def test_a_user_outside_the_root_only_directory_is_refused(env, engines, tmp_path):
    """The kernel refuses the socket to a user who may not enter its directory: dcgmi cannot clear the watches."""
    base = tempfile.mkdtemp(prefix="cf-hostengine-", dir="/tmp")  # pytest's own tmp_path is root's alone
    os.chmod(base, 0o755)
    run_dir = os.path.join(base, "nvidia-dcgm")
    os.mkdir(run_dir, 0o700)
    sock = os.path.join(run_dir, "nv-hostengine.sock")
    engines(["--domain-socket", sock], env)
    host = "unix://" + sock
    assert dcgmi(env, "health", "--host", host, "-s", "a")[0] == 0
    nobody = pwd.getpwnam("nobody")

    def as_nobody():
        os.setgid(nobody.pw_gid)
        os.setuid(nobody.pw_uid)

    user_env = dict(env, CLUSTERFORGE_EMU_STATE_DIR="/nonexistent", CLUSTERFORGE_EMU_RUN_DIR="/nonexistent")
    rc, out = dcgmi(user_env, "health", "--host", host, "--clear", preexec_fn=as_nobody, cwd="/",
                    python="/usr/bin/python3")
    assert rc == 247, out
    assert "unable to establish a connection to the specified host: %s" % host in out
    assert set(D.watch_rows("a")) <= set(watches_on(env, host))
    # the same user may clear them where the directory lets everyone in: the refusal above was the directory's
    os.chmod(run_dir, 0o755)
    try:
        rc, out = dcgmi(user_env, "health", "--host", host, "--clear", preexec_fn=as_nobody, cwd="/",
                        python="/usr/bin/python3")
        assert rc == 0, out
        assert watches_on(env, host) == []
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_bad_arguments_and_missing_service_account(env):
    p = subprocess.run([sys.executable, HOSTENGINE, "-n", "--bogus"], env=env, capture_output=True, text=True,
                       timeout=30, check=False)
    assert p.returncode == 1 and "Unrecognized argument: --bogus" in p.stderr
    p = subprocess.run([sys.executable, HOSTENGINE, "-n", "--service-account", "no-such-user-cf"], env=env,
                       capture_output=True, text=True, timeout=30, check=False)
    assert p.returncode == 1 and "no-such-user-cf" in p.stderr
