# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""storage_probe: the validation's storage test writes and reads back real bytes, as root, only in a directory no
other user controls, never through a link, and leaves nothing behind."""

import errno
import os

import pytest

from cf_module_helper import run_main

from ansible_collections.clusterforge.gpu.plugins.modules import storage_probe

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the rule is root's: the test runs as root")

NAME = "cf-validate-gpu01.bin"


def _run(where, check_mode=False, **extra):
    args = {"path": str(where), "file_name": NAME, "size_mib": 3, "block_size_kib": 256}
    args.update(extra)
    return run_main(storage_probe, args, check_mode=check_mode)


def test_a_missing_directory_is_created_root_owned_0700_and_the_bytes_are_written_and_read_back(tmp_path):
    target = tmp_path / "validate"
    r = _run(target)
    assert not r.get("failed"), r
    assert r["created"] is True and r["changed"] is True
    st = os.stat(target)
    assert st.st_uid == 0 and oct(st.st_mode & 0o7777) == "0o700"
    m = r["measured"]
    assert m["path"] == str(target)
    assert m["write"]["bytes"] == m["read"]["bytes"] == 3 * 1024 * 1024
    for kind in ("write", "read"):
        assert m[kind]["seconds"] > 0
        assert m[kind]["gbytes_per_s"] == pytest.approx(m[kind]["bytes"] / m[kind]["seconds"] / 1e9, rel=1e-3)
    assert m["started"] <= m["written"] <= m["read_done"]
    assert isinstance(m["read"]["direct"], bool)
    assert os.listdir(target) == []              # nothing left behind
    again = _run(target)
    assert again["changed"] is False and again["created"] is False and again["mode_set"] is False


def test_a_root_owned_0755_directory_is_set_to_0700(tmp_path):
    target = tmp_path / "validate"
    target.mkdir(mode=0o755)
    os.chmod(target, 0o755)
    r = _run(target)
    assert not r.get("failed"), r
    assert r["mode_set"] is True and r["changed"] is True
    assert os.stat(target).st_mode & 0o777 == 0o700


@pytest.mark.parametrize("uid, mode, words", [
    (65534, 0o700, "not root"),
    (0, 0o777, "writable by others"),
    (0, 0o1777, "writable by others"),
    (0, 0o730, "writable by others"),
])
def test_a_directory_another_user_controls_is_refused_before_anything_is_written(tmp_path, uid, mode, words):
    target = tmp_path / "validate"
    target.mkdir()
    os.chown(target, uid, -1)
    os.chmod(target, mode)
    r = _run(target)
    assert r["failed"] and r["refused"] is True and words in r["msg"] and r["msg"].startswith(str(target)), r
    assert os.listdir(target) == []
    assert os.stat(target).st_mode & 0o7777 == mode     # not "repaired" either


def test_a_link_anywhere_on_the_path_is_refused_and_nothing_is_written_through_it(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    for path in (tmp_path / "link", tmp_path / "link" / "validate"):
        r = _run(path)
        assert r["failed"] and r["refused"] is True, r
        assert "%s is a symbolic link (to %s)" % (tmp_path / "link", real) in r["msg"]
    assert os.listdir(real) == []


def test_a_file_where_the_directory_should_be_is_refused(tmp_path):
    (tmp_path / "validate").write_text("x")
    r = _run(tmp_path / "validate")
    assert r["failed"] and r["refused"] and "is not a directory" in r["msg"]


def test_a_link_planted_at_the_file_name_is_refused_and_its_target_untouched(tmp_path):
    target = tmp_path / "validate"
    target.mkdir(mode=0o700)
    victim = tmp_path / "disk"
    victim.write_text("keep me")
    (target / NAME).symlink_to(victim)
    r = _run(target)
    assert r["failed"] and r["refused"] and "not a regular file" in r["msg"], r
    assert victim.read_text() == "keep me" and os.path.islink(target / NAME)


def test_a_leftover_of_an_interrupted_run_is_removed_first(tmp_path):
    target = tmp_path / "validate"
    target.mkdir(mode=0o700)
    (target / NAME).write_bytes(b"old")
    r = _run(target)
    assert not r.get("failed") and r["leftover_removed"] is True, r
    assert os.listdir(target) == []


def test_check_mode_creates_writes_and_reads_nothing_and_says_what_a_run_would_do(tmp_path):
    r = _run(tmp_path / "validate", check_mode=True)
    assert not r.get("failed") and r["measured"] is None
    assert r["changed"] is True and r["created"] is True     # a real run would create it
    assert not (tmp_path / "validate").exists()
    (tmp_path / "validate").mkdir(mode=0o700)
    os.chmod(tmp_path / "validate", 0o755)
    r = _run(tmp_path / "validate", check_mode=True)
    assert r["changed"] is True and r["mode_set"] is True and os.stat(tmp_path / "validate").st_mode & 0o777 == 0o755
    os.chmod(tmp_path / "validate", 0o700)
    assert _run(tmp_path / "validate", check_mode=True)["changed"] is False


def test_the_time_limit_stops_the_test_and_removes_the_file(tmp_path, monkeypatch):
    clock = {"t": 1000.0}

    def monotonic():
        clock["t"] += 1.0   # every look at the clock is one second later
        return clock["t"]

    monkeypatch.setattr(storage_probe.time, "monotonic", monotonic)
    target = tmp_path / "validate"
    r = _run(target, timeout=2)
    assert r["failed"] and r["refused"] is False and "passed its time limit of 2 s while writing" in r["msg"], r
    assert os.listdir(target) == []


def test_a_file_system_without_direct_io_is_read_after_dropping_its_cache(tmp_path, monkeypatch):
    real_open = os.open

    def no_direct(path, flags, *args, **kwargs):
        if flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(storage_probe.os, "open", no_direct)
    r = _run(tmp_path / "validate")
    assert not r.get("failed"), r
    assert r["measured"]["read"]["direct"] is False and r["measured"]["read"]["bytes"] == 3 * 1024 * 1024


def test_an_io_error_fails_naming_the_path_and_leaves_nothing(tmp_path, monkeypatch):
    def full(fd, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(storage_probe.os, "write", full)
    target = tmp_path / "validate"
    r = _run(target)
    assert r["failed"] and r["refused"] is False, r
    assert r["msg"] == "%s: the storage test failed: %s" % (target, os.strerror(errno.ENOSPC))
    assert os.listdir(target) == []


@pytest.mark.parametrize("extra, words", [
    ({"file_name": "../x"}, "bare file name"),
    ({"size_mib": 0}, "size_mib"),
    ({"block_size_kib": 6}, "multiple of 4"),
    ({"timeout": 0}, "timeout"),
    ({"path": "relative/dir"}, "normalised absolute path"),
    ({"path": "/tmp/../etc"}, "normalised absolute path"),
])
def test_bad_input_is_refused(tmp_path, extra, words):
    r = _run(tmp_path / "validate", **extra)
    assert r["failed"] and words in r["msg"], r


def test_measure_false_prepares_the_directory_by_the_same_rule_and_writes_nothing(tmp_path):
    target = tmp_path / "validate"
    r = run_main(storage_probe, {"path": str(target), "measure": False})
    assert not r.get("failed") and r["created"] is True and r["changed"] is True and r["measured"] is None, r
    assert os.stat(target).st_mode & 0o7777 == 0o700 and os.listdir(target) == []
    again = run_main(storage_probe, {"path": str(target), "measure": False})
    assert again["changed"] is False
    # then the measuring run on the prepared directory changes nothing either
    assert _run(target)["changed"] is False
    os.chmod(target, 0o777)
    r = run_main(storage_probe, {"path": str(target), "measure": False})
    assert r["failed"] and r["refused"] and "writable by others" in r["msg"]
    assert run_main(storage_probe, {"path": str(tmp_path / "x")}, check_mode=False)["failed"]   # measure needs both
    r = run_main(storage_probe, {"path": str(tmp_path / "y"), "measure": False}, check_mode=True)
    assert not r.get("failed") and r["changed"] is True and not (tmp_path / "y").exists()
