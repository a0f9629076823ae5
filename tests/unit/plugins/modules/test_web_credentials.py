# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""web_credentials: one generated password and its bcrypt hash, kept root-only and never hashed again."""

import json
import os
import stat

import pytest

from cf_module_helper import run_main

from ansible_collections.clusterforge.gpu.plugins.modules import web_credentials


def fake_backend():
    """A stand-in hash (deterministic per call count) so the tests need no bcrypt; verify is exact."""
    calls = []

    def hash_pw(pw):
        calls.append(pw)
        return "$2b$12$" + ("%053d" % len(calls))[:53]

    store = {}

    def hasher(pw):
        h = hash_pw(pw)
        store[h] = pw
        return h

    return (hasher, lambda pw, h: store.get(h) == pw), calls


@pytest.fixture
def backend(monkeypatch):
    pair, calls = fake_backend()
    monkeypatch.setattr(web_credentials, "_bcrypt_backend", lambda: pair)
    return calls


def run(path, check_mode=False, username="clusterforge"):
    return run_main(web_credentials, {"path": str(path), "username": username}, check_mode=check_mode)


def test_first_run_generates_a_root_only_file_and_the_second_keeps_it(tmp_path, backend):
    path = tmp_path / "secrets" / "web.json"
    first = run(path)
    assert first["changed"] and first["action"] == "generate"
    assert len(first["password"]) == 32 and first["password"].isalnum()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert json.loads(path.read_text()) == {"username": "clusterforge", "password": first["password"],
                                            "password_hash": first["password_hash"]}
    second = run(path)
    assert not second["changed"] and second["action"] == "keep"
    assert (second["password"], second["password_hash"]) == (first["password"], first["password_hash"])
    assert len(backend) == 1   # hashed once, never again: the hash (salted) stays the same


def test_check_mode_on_a_new_host_writes_nothing_and_returns_no_password(tmp_path, backend):
    path = tmp_path / "web.json"
    r = run(path, check_mode=True)
    assert r["changed"] and r["action"] == "generate" and r["password"] is None and r["password_hash"] is None
    assert not path.exists() and backend == []


def test_a_hash_that_does_not_match_its_password_is_made_again_from_the_password(tmp_path, backend):
    path = tmp_path / "web.json"
    path.write_text(json.dumps({"username": "clusterforge", "password": "p" * 32, "password_hash": "$2b$12$stale"}))
    r = run(path)
    assert r["changed"] and r["action"] == "rehash" and r["password"] == "p" * 32
    assert json.loads(path.read_text())["password_hash"] == r["password_hash"] != "$2b$12$stale"


def test_a_new_user_name_keeps_the_password_and_hash(tmp_path, backend):
    path = tmp_path / "web.json"
    first = run(path)
    r = run(path, username="prometheus")
    assert r["changed"] and r["action"] == "rename"
    assert (r["password"], r["password_hash"]) == (first["password"], first["password_hash"])
    assert json.loads(path.read_text())["username"] == "prometheus"


def test_a_broken_file_is_replaced_by_a_new_password(tmp_path, backend):
    path = tmp_path / "web.json"
    path.write_text("not json")
    r = run(path)
    assert r["changed"] and r["action"] == "generate" and len(r["password"]) == 32


def test_no_bcrypt_fails_naming_the_package(tmp_path, monkeypatch):
    monkeypatch.setattr(web_credentials, "_bcrypt_backend", lambda: None)
    r = run(tmp_path / "web.json")
    assert r["failed"] and "python3-bcrypt" in r["msg"]
    assert not (tmp_path / "web.json").exists()


def test_check_mode_on_a_new_server_without_bcrypt_yet_reports_the_plan(tmp_path, monkeypatch):
    # site.yml --check on new servers: python3-bcrypt is one of the packages the role would install.
    monkeypatch.setattr(web_credentials, "_bcrypt_backend", lambda: None)
    r = run(tmp_path / "web.json", check_mode=True)
    assert not r.get("failed") and r["changed"] and r["action"] == "generate" and r["password"] is None
    assert not (tmp_path / "web.json").exists()


def test_a_user_name_with_a_colon_is_refused(tmp_path, backend):
    r = run(tmp_path / "web.json", username="a:b")
    assert r["failed"] and "':'" in r["msg"]


@pytest.mark.parametrize("existing, action", [
    (None, "generate"),
    ({"password": "short"}, "generate"),
    ({"username": "u", "password": "x" * 32, "password_hash": "h"}, "keep"),
    ({"username": "v", "password": "x" * 32, "password_hash": "h"}, "rename"),
    ({"username": "u", "password": "x" * 32, "password_hash": "other"}, "rehash"),
    ({"username": "u", "password": "x" * 32}, "rehash"),
])
def test_plan(existing, action):
    got, _record = web_credentials.plan(existing, "u", lambda pw, h: h == "h")
    assert got == action


def test_the_real_backend_makes_a_bcrypt_hash_that_verifies():
    backend = web_credentials._bcrypt_backend()  # pylint: disable=protected-access
    if backend is None:
        pytest.skip("neither bcrypt nor crypt with bcrypt on this Python")
    pw_hash = backend[0]("correct horse")
    assert pw_hash.startswith(("$2b$", "$2y$", "$2a$")) and len(pw_hash) == 60
    assert backend[1]("correct horse", pw_hash) and not backend[1]("wrong", pw_hash)
    # and it is a hash the web configuration takes (exporter-toolkit reads bcrypt only)
    from ansible_collections.clusterforge.gpu.plugins.plugin_utils import web_security  # pylint: disable=import-outside-toplevel
    assert web_security.web_config("clusterforge", pw_hash) == {"basic_auth_users": {"clusterforge": pw_hash}}
