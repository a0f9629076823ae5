"""The README's install steps, tried: the built tarball installed into an empty collections path, and the playbooks
run by name (clusterforge.gpu.site, .validate, .rolling_reconfigure, .preflight) from a directory outside the
checkout, with no ansible.cfg. Each run gets an inventory with one mistake, so preflight (reading the installed
copy's roles/ and profiles) must reject it before any host is contacted; --list-tasks shows that every import of
the installed playbooks (the validate phases included) resolves."""

import copy
import os
import subprocess

import pytest
import yaml

from integration.preflight_helpers import (
    BIN,
    REJECTED,
    ROOT,
    assert_rejected_before_any_change,
    base_inventory,
    checkout_lines,
    group_vars,
)

PLAYBOOKS = ("site", "validate", "rolling_reconfigure", "preflight")


def _env(collections):
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("ANSIBLE_"):
            del env[key]
    env.update({"ANSIBLE_COLLECTIONS_PATH": str(collections), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0",
                "ANSIBLE_RETRY_FILES_ENABLED": "0", "ANSIBLE_HOST_KEY_CHECKING": "0",
                "PATH": BIN + os.pathsep + os.environ.get("PATH", "")})
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(collections path, env, cwd): the tarball built from this checkout and installed with ansible-galaxy."""
    base = tmp_path_factory.mktemp("installed")
    build = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--force", "--output-path",
                            str(base)], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert build.returncode == 0, build.stdout + build.stderr
    (tarball,) = [p for p in base.iterdir() if p.name.endswith(".tar.gz")]
    collections = base / "collections"
    work = base / "work"
    work.mkdir()
    env = _env(collections)
    # The dependencies (ansible.posix, community.general, community.mysql) come with the pinned ansible package;
    # --offline, as the README installs it (tests/integration/test_readme_install.py runs its commands word for word).
    inst = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--offline", "-p",
                           str(collections), str(tarball)], cwd=str(work), env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert inst.returncode == 0, inst.stdout + inst.stderr
    listing = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "list", "clusterforge.gpu"],
                             cwd=str(work), env=env, capture_output=True, text=True, timeout=120, check=False)
    assert str(collections) in listing.stdout and ROOT not in listing.stdout, listing.stdout + listing.stderr
    return collections, env, work


def _run(installed, args):
    _collections, env, work = installed
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook")] + args, cwd=str(work), env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout + proc.stderr


@pytest.mark.parametrize("playbook", PLAYBOOKS)
def test_playbook_runs_by_name_and_preflight_rejects_a_mistake(installed, playbook):
    inv = copy.deepcopy(base_inventory())
    group_vars(inv, "gpu_nodes")["validate_profile"] = "b300_nvl"
    path = installed[2] / ("%s-hosts.yml" % playbook)
    path.write_text(yaml.safe_dump(inv))
    extra = ["-e", '{"rolling_roles": ["clusterforge.gpu.gpu_tuning"]}'] if playbook == "rolling_reconfigure" else []
    rc, out = _run(installed, ["-i", str(path), "clusterforge.gpu." + playbook] + extra)
    assert_rejected_before_any_change(rc, out, "validate_profile: 'b300_nvl' is not a hardware profile")
    assert REJECTED in out
    assert checkout_lines(out) == [], "the run used the checkout, not the installed collection: " + out


def test_site_by_name_resolves_every_stage_and_validation_phase(installed):
    path = installed[2] / "sound-hosts.yml"
    path.write_text(yaml.safe_dump(base_inventory()))
    rc, out = _run(installed, ["-i", str(path), "clusterforge.gpu.site", "--list-tasks"])
    assert rc == 0, out
    for needle in ("clusterforge.gpu.preflight : ", "clusterforge.gpu.nccl : ",
                   "clusterforge.gpu.validate : Record this node's measurements",
                   "clusterforge.gpu.validate : Judge the measurements", "clusterforge.gpu.validate : Verdict"):
        assert needle in out, needle + " missing from:\n" + out
