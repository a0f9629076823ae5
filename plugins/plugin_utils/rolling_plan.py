# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling plan's check-mode run: the ``ansible-playbook`` command line, built from the operator's own.

The plan (roles/rolling/tasks/plan.yml, through the action plugin clusterforge.gpu.rolling_plan_run) runs
playbooks/rolling_apply.yml in check mode. That run must see what the real run sees: the same inventory sources,
remote user, private key, connection, timeout, forks, become settings, vault secrets and every ``-e``.
:func:`plan_command` is the one place that turns the operator's command line (``ansible.context.CLIARGS``) into that
run's argv and environment.

Secrets never appear in the argv, in a log or in clear on disk. A vault secret, a prompted become password (-K) or
connection password (-k) reaches the child through an executable password file (``--vault-id label@file``,
``--become-password-file``, ``--connection-password-file``: Ansible runs an executable password file once, as it
starts, and reads its stdout). Each secret is split in two: a random one-time pad, in an environment variable of the
child only, and the secret XOR that pad, in a file of a private directory (0700) that the caller removes after the
run. The executable prints the secret and deletes its file at once, so that the pad left in the child's environment
(which a local task could read) opens nothing.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

# The collection whose roles a roll applies; a bare role name in rolling_roles is one of its roles.
COLLECTION = "clusterforge.gpu"


def role_fqcn(name):
    """A role name of rolling_roles as include_role takes it: a bare name is this collection's role."""
    name = str(name).strip()
    return name if "." in name else "%s.%s" % (COLLECTION, name)


# Environment variables of the child that carry a secret (vault secrets, prompted passwords).
SECRET_ENV_PREFIX = "CF_ROLL_PLAN_SECRET_"
# The check-mode run's own settings: its result is read as JSON (per-host stats and each failed task's message).
PLAN_ENV = {
    "ANSIBLE_STDOUT_CALLBACK": "ansible.posix.json",
    # Indented (its default), whatever the operator's json_indent: the document then starts with a line "{".
    "ANSIBLE_JSON_INDENT": "4",
    "ANSIBLE_NOCOLOR": "1",
    "ANSIBLE_FORCE_COLOR": "0",
    "ANSIBLE_RETRY_FILES_ENABLED": "0",
}
# Options whose value is passed on as given: CLIARGS key -> ansible-playbook option.
_VALUE_OPTIONS = (
    ("remote_user", "--user"),
    ("private_key_file", "--private-key"),
    ("connection", "--connection"),
    ("timeout", "--timeout"),
    ("forks", "--forks"),
    ("ssh_common_args", "--ssh-common-args"),
    ("ssh_extra_args", "--ssh-extra-args"),
    ("sftp_extra_args", "--sftp-extra-args"),
    ("scp_extra_args", "--scp-extra-args"),
    ("become_method", "--become-method"),
    ("become_user", "--become-user"),
)


def _script(python, pad_file, variable):
    """An executable password file: prints (pad file XOR the child's environment variable) and deletes the pad file."""
    return ("#!%s\n# Written by clusterforge.gpu.rolling_plan_run for one check-mode run, removed after it.\n"
            "import os, sys\n"
            "key = bytes.fromhex(os.environ.get(%r, ''))\n"
            "with open(%r, 'rb') as f:\n"
            "    data = f.read()\n"
            "os.remove(%r)\n"
            "sys.stdout.buffer.write(bytes(a ^ b for a, b in zip(data, key)) + b'\\n')\n"
            % (python, variable, pad_file, pad_file))


def _bytes(secret):
    if isinstance(secret, bytes):
        return secret
    return secret.encode("utf-8", "surrogateescape")


def _split(values):
    """CLIARGS tags: a tuple of comma-separated strings -> a list of names."""
    names = []
    for value in values or ():
        names.extend(name.strip() for name in str(value).split(",") if name.strip())
    return names


def plan_command(cliargs, ansible_playbook, playbook, limit, plan_vars_json, secrets_dir, vault_secrets=(),
                 become_pass=None, conn_pass=None, config_file=None, cwd=None, python=None, pad=os.urandom):
    """The check-mode run's command: {"argv", "env", "files", "shown"}.

    ``cliargs``: ``ansible.context.CLIARGS`` of the running ansible-playbook (a mapping). ``vault_secrets``: the
    (vault id, secret) pairs the running ansible-playbook holds, however they were given (prompt, password file,
    client script). ``become_pass``/``conn_pass``: the passwords the operator typed at -K/-k (used only when
    CLIARGS says they were prompted for). ``plan_vars_json``: the plan's own ``-e``, last, so it wins. ``files``:
    {path under secrets_dir: bytes} for the caller to write, mode 0700 (the executables and the padded secrets).
    ``env``: what the child's environment adds to the controller's (the pads among it). ``python``: the interpreter
    of the executables (the controller's). ``shown``: the argv to log, with the operator's inline ``-e``
    values left out (they may hold a password).
    """
    cwd = cwd or os.getcwd()
    argv = [ansible_playbook]
    env = dict(PLAN_ENV)
    env["ANSIBLE_CONFIG"] = config_file or ""
    files = {}
    for source in cliargs.get("inventory") or ():
        argv += ["--inventory", source]
    argv += [playbook, "--check", "--limit", limit]
    for key, option in _VALUE_OPTIONS:
        value = cliargs.get(key)
        if value is not None and value != "":
            argv += [option, str(value)]
    if cliargs.get("become"):
        argv.append("--become")
    for path in cliargs.get("module_path") or ():
        argv += ["--module-path", path]

    def secret_file(name, secret):
        data = _bytes(secret)
        key = pad(len(data))
        variable = SECRET_ENV_PREFIX + name.upper()
        path = os.path.join(secrets_dir, name)
        padded = os.path.join(secrets_dir, name + ".pad")
        env[variable] = key.hex()
        files[padded] = bytes(a ^ b for a, b in zip(data, key))
        files[path] = _script(python or "/usr/bin/python3", padded, variable).encode("utf-8")
        return path

    # Become and connection passwords: a prompted one through an executable password file, a password file as given.
    if cliargs.get("become_password_file"):
        argv += ["--become-password-file", cliargs["become_password_file"]]
    elif cliargs.get("become_ask_pass") and become_pass:
        argv += ["--become-password-file", secret_file("become", become_pass)]
    if cliargs.get("connection_password_file"):
        argv += ["--connection-password-file", cliargs["connection_password_file"]]
    elif cliargs.get("ask_pass") and conn_pass:
        argv += ["--connection-password-file", secret_file("connection", conn_pass)]
    # Every vault secret the running ansible-playbook holds, under its own vault id, none prompted for again.
    for index, (vault_id, secret) in enumerate(vault_secrets or ()):
        label = vault_id or "default"
        if "@" in label:
            raise ValueError("vault id %r contains '@'" % label)
        argv += ["--vault-id", "%s@%s" % (label, secret_file("vault_%d" % index, secret))]
    shown = list(argv)
    # Every -e of the operator, in order (@file paths are absolute in CLIARGS; a relative one is made so), then the
    # plan's own.
    for value in cliargs.get("extra_vars") or ():
        if value.startswith("@") and not os.path.isabs(value[1:]):
            value = "@" + os.path.join(cwd, value[1:])
        argv += ["--extra-vars", value]
        shown += ["--extra-vars", value if value.startswith("@") else "<given on the command line>"]
    argv += ["--extra-vars", plan_vars_json]
    shown += ["--extra-vars", plan_vars_json]
    tags = [t for t in _split(cliargs.get("tags")) if t != "all"]
    skip = _split(cliargs.get("skip_tags"))
    for option, names in (("--tags", tags), ("--skip-tags", skip)):
        if names:
            argv += [option, ",".join(names)]
            shown += [option, ",".join(names)]
    return {"argv": argv, "env": env, "files": files, "shown": shown}
