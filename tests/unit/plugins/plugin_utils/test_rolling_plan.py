# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""plan_command: the rolling plan's check-mode run gets the operator's command line, and no secret in its argv."""

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.clusterforge.gpu.plugins.plugin_utils.rolling_plan import PLAN_ENV, SECRET_ENV_PREFIX, plan_command

AP = "/venv/bin/ansible-playbook"
PLAYBOOK = "/c/playbooks/rolling_apply.yml"
PLAN_VARS = json.dumps({"rolling_roles": ["clusterforge.gpu.gpu_tuning"], "__preflight_passed": True})
BASE = {"inventory": ("/inv/hosts.yml",), "remote_user": None, "private_key_file": None, "connection": "ssh",
        "timeout": 10, "forks": 5, "ssh_common_args": "", "ssh_extra_args": "", "sftp_extra_args": "",
        "scp_extra_args": "", "become": False, "become_method": "sudo", "become_user": None,
        "become_ask_pass": False, "become_password_file": None, "ask_pass": False, "connection_password_file": None,
        "vault_ids": (), "vault_password_files": (), "ask_vault_pass": False, "extra_vars": (), "module_path": None,
        "tags": ("all",), "skip_tags": ()}
SECRET = "s3cr3t-Vault!"


def build(tmp_path, **cli):
    extra = dict((k, cli.pop(k)) for k in ("vault_secrets", "become_pass", "conn_pass") if k in cli)
    return plan_command(dict(BASE, **cli), AP, PLAYBOOK, "gpu01,gpu02", PLAN_VARS, str(tmp_path), cwd="/ops",
                        python=sys.executable, **extra)


def opt(argv, name):
    return [argv[i + 1] for i, a in enumerate(argv) if a == name]


def test_the_base_command():
    cmd = plan_command(BASE, AP, PLAYBOOK, "gpu01,gpu02", PLAN_VARS, "/tmp/x", cwd="/ops")
    assert cmd["argv"] == [AP, "--inventory", "/inv/hosts.yml", PLAYBOOK, "--check", "--limit", "gpu01,gpu02",
                           "--connection", "ssh", "--timeout", "10", "--forks", "5", "--become-method", "sudo",
                           "--extra-vars", PLAN_VARS]
    assert cmd["files"] == {}
    assert cmd["env"] == dict(PLAN_ENV, ANSIBLE_CONFIG="")


@pytest.mark.parametrize("key, value, option", [
    ("remote_user", "admin", "--user"),
    ("private_key_file", "/home/op/.ssh/cluster", "--private-key"),
    ("connection", "paramiko", "--connection"),
    ("timeout", 45, "--timeout"),
    ("forks", 64, "--forks"),
    ("ssh_common_args", "-o ProxyJump=bastion", "--ssh-common-args"),
    ("ssh_extra_args", "-o ServerAliveInterval=5", "--ssh-extra-args"),
    ("sftp_extra_args", "-l 1000", "--sftp-extra-args"),
    ("scp_extra_args", "-l 1000", "--scp-extra-args"),
    ("become_method", "doas", "--become-method"),
    ("become_user", "slurm", "--become-user"),
    ("become_password_file", "/home/op/become.txt", "--become-password-file"),
    ("connection_password_file", "/home/op/conn.txt", "--connection-password-file"),
])
def test_each_connection_option_is_passed_on(tmp_path, key, value, option):
    cmd = build(tmp_path, **{key: value})
    assert opt(cmd["argv"], option) == [str(value)]
    assert opt(cmd["shown"], option) == [str(value)]


def test_become_module_path_inventories_and_tags(tmp_path):
    cmd = build(tmp_path, become=True, module_path=("/m1", "/m2"), inventory=("/inv/a.yml", "/inv/b.ini", "h1,h2,"),
                tags=("all", "gpu_tuning,nccl"), skip_tags=("bios",))
    assert "--become" in cmd["argv"]
    assert opt(cmd["argv"], "--module-path") == ["/m1", "/m2"]
    assert opt(cmd["argv"], "--inventory") == ["/inv/a.yml", "/inv/b.ini", "h1,h2,"]
    assert opt(cmd["argv"], "--tags") == ["gpu_tuning,nccl"]
    assert opt(cmd["argv"], "--skip-tags") == ["bios"]


def test_every_extra_var_in_order_and_the_plans_own_last(tmp_path):
    cmd = build(tmp_path, extra_vars=("@/ops/change.yml", "@rel/vault.yml", "a=1", '{"b": 2}'))
    assert opt(cmd["argv"], "--extra-vars") == ["@/ops/change.yml", "@/ops/rel/vault.yml", "a=1", '{"b": 2}', PLAN_VARS]
    # Inline values are left out of what is shown (they may hold a password); @files and the plan's own are shown.
    assert opt(cmd["shown"], "--extra-vars") == ["@/ops/change.yml", "@/ops/rel/vault.yml", "<given on the command line>",
                                                 "<given on the command line>", PLAN_VARS]


def test_secrets_never_in_argv_shown_or_clear_on_disk(tmp_path):
    cmd = build(tmp_path, become_ask_pass=True, ask_pass=True, become_pass="b3come-PW", conn_pass="c0nn-PW",
                vault_secrets=[("default", SECRET.encode()), ("prod", b"prod-pass")])
    text = json.dumps([cmd["argv"], cmd["shown"], [v.decode("latin-1") for v in cmd["files"].values()]])
    for secret in (SECRET, "b3come-PW", "c0nn-PW", "prod-pass"):
        assert secret not in text
        assert secret not in json.dumps(cmd["env"])
    assert opt(cmd["argv"], "--vault-id") == ["default@%s/vault_0" % tmp_path, "prod@%s/vault_1" % tmp_path]
    assert opt(cmd["argv"], "--become-password-file") == ["%s/become" % tmp_path]
    assert opt(cmd["argv"], "--connection-password-file") == ["%s/connection" % tmp_path]
    assert all(path.startswith(str(tmp_path) + os.sep) for path in cmd["files"])
    assert sorted(k for k in cmd["env"] if k.startswith(SECRET_ENV_PREFIX)) == [
        SECRET_ENV_PREFIX + n for n in ("BECOME", "CONNECTION", "VAULT_0", "VAULT_1")]


def test_a_prompted_password_is_passed_only_when_it_was_prompted_for(tmp_path):
    cmd = build(tmp_path, become_pass="from-a-variable", conn_pass="x")
    assert "--become-password-file" not in cmd["argv"] and "--connection-password-file" not in cmd["argv"]
    assert cmd["files"] == {}


def test_the_password_executable_prints_the_secret_once_and_deletes_its_file(tmp_path):
    cmd = build(tmp_path, vault_secrets=[("default", SECRET.encode())])
    for path, data in cmd["files"].items():
        with open(path, "wb") as handle:
            handle.write(data)
        os.chmod(path, 0o700)
    script = opt(cmd["argv"], "--vault-id")[0].split("@", 1)[1]
    env = dict(os.environ, **cmd["env"])
    out = subprocess.run([script], env=env, capture_output=True, timeout=30, check=True).stdout
    assert out == SECRET.encode() + b"\n"
    assert not os.path.exists(script + ".pad")
    # The pad left in the environment opens nothing once the file is gone.
    assert subprocess.run([script], env=env, capture_output=True, timeout=30, check=False).returncode != 0


def test_a_vaulted_extra_vars_file_is_read_by_the_child(tmp_path):
    """The whole path: ansible-vault encrypts a vars file, the child reads it with the secret handed over."""
    bindir = os.path.dirname(sys.executable)
    playbook_bin, vault_bin = os.path.join(bindir, "ansible-playbook"), os.path.join(bindir, "ansible-vault")
    if not (os.path.exists(playbook_bin) and os.path.exists(vault_bin)):
        pytest.skip("ansible-playbook not installed beside this Python")
    (tmp_path / "pw").write_text(SECRET + "\n")
    (tmp_path / "change.yml").write_text("cf_test_value: 4711\n")
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_"))
    subprocess.run([vault_bin, "encrypt", "--vault-password-file", str(tmp_path / "pw"), str(tmp_path / "change.yml")],
                   env=env, check=True, capture_output=True, timeout=120)
    (tmp_path / "play.yml").write_text(
        "- hosts: localhost\n  gather_facts: false\n  tasks:\n"
        "    - ansible.builtin.debug:\n        msg: \"value={{ cf_test_value }}\"\n")
    secrets = tmp_path / "secrets"
    secrets.mkdir(mode=0o700)
    cli = dict(BASE, inventory=("localhost,",), connection="local", extra_vars=("@%s" % (tmp_path / "change.yml"),))
    cmd = plan_command(cli, playbook_bin, str(tmp_path / "play.yml"), "localhost", "{}", str(secrets),
                       vault_secrets=[("default", SECRET.encode())], python=sys.executable)
    for path, data in cmd["files"].items():
        with open(path, "wb") as handle:
            handle.write(data)
        os.chmod(path, 0o700)
    env.update(cmd["env"], ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    proc = subprocess.run(cmd["argv"], env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"] == "value=4711"
    assert SECRET not in proc.stdout + proc.stderr
    assert os.listdir(str(secrets)) == ["vault_0"]  # the padded secret deleted itself once read


def test_the_action_hands_over_every_secret_the_loader_holds():
    from ansible.parsing.dataloader import DataLoader
    from ansible.parsing.vault import VaultSecret
    from ansible_collections.clusterforge.gpu.plugins.action.rolling_plan_run import vault_secrets
    loader = DataLoader()
    loader.set_vault_secrets([("default", VaultSecret(SECRET.encode())), ("prod", VaultSecret(b"p")),
                              ("empty", VaultSecret(b""))])
    assert vault_secrets(loader) == [("default", SECRET.encode()), ("prod", b"p")]
    assert vault_secrets(DataLoader()) == []
