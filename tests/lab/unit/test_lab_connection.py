"""The lab's cf_lab_nsenter connection: its cache of container init PIDs is trusted only while the PID is the same
process (a recreated container, or a reused PID, is looked up again)."""

import importlib.util
import json
import os
import subprocess

import pytest

PLUGIN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "connection_plugins",
                      "cf_lab_nsenter.py")


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("cf_lab_nsenter", PLUGIN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "CACHE_DIR", str(tmp_path))
    return mod


def cached(plugin, name, entry):
    with open(os.path.join(plugin.CACHE_DIR, name), "w") as handle:
        json.dump(entry, handle)
    # _cached_pid does not use the connection's state: call it without building a play context.
    return plugin.Connection._cached_pid(None, name)


def test_start_time_reads_this_process_and_not_a_missing_one(plugin):
    assert plugin._start_time(os.getpid()).isdigit()
    assert plugin._start_time(2 ** 22 + 12345) is None


def test_cache_entry_of_the_same_process_is_trusted(plugin):
    pid = os.getpid()
    assert cached(plugin, "gpu01", {"pid": pid, "start": plugin._start_time(pid)}) == pid


def test_cache_entry_whose_pid_now_names_another_process_is_not_trusted(plugin):
    pid = os.getpid()
    wrong = str(int(plugin._start_time(pid)) + 1)
    assert cached(plugin, "gpu01", {"pid": pid, "start": wrong}) is None


@pytest.mark.parametrize("entry", [{"pid": 2 ** 22 + 12345, "start": "1"}, {"pid": os.getpid()}, {"start": "1"}, "junk"])
def test_cache_entry_of_a_gone_process_or_malformed_is_not_trusted(plugin, entry):
    assert cached(plugin, "gpu01", entry) is None


def test_no_cache_entry(plugin):
    assert plugin.Connection._cached_pid(None, "nosuch") is None


def test_a_cached_process_gone_before_its_read_is_looked_up_again(plugin, monkeypatch):
    """The cached PID passed its check, then the container was stopped or replaced before the environment was read
    (seen once in a CI run: 'No such process' for gpu01): the connection asks podman again instead of failing."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    looked_up = []

    class Fake(object):
        _connected = False

        @staticmethod
        def _container():
            return "gpu01"

        @staticmethod
        def _cached_pid(name):
            return gone.pid

        @staticmethod
        def _lookup_pid(name):
            looked_up.append(name)
            return os.getpid()

        _environ = staticmethod(plugin.Connection._environ)

    fake = Fake()
    monkeypatch.setattr(plugin.os, "geteuid", lambda: 0)
    plugin.Connection._connect(fake)
    assert looked_up == ["gpu01"] and fake._pid == os.getpid() and fake._env["PATH"]
