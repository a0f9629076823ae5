# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of ``clusterforge.gpu.rolling_plan_run``: the rolling plan's check-mode run, with the operator's
connection and secrets (documented in plugins/modules/rolling_plan_run.py).

Why an action plugin: the command line of the running ansible-playbook (``ansible.context.CLIARGS``), the vault
secrets it holds and the passwords typed at its prompts exist only in the controller's process. The argv is built by
plugins/plugin_utils/rolling_plan.py (plan_command); this file writes its password executables into a private
directory, runs the child with a time limit and removes the directory.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import subprocess
import sys
import tempfile

from ansible import context
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.clusterforge.gpu.plugins.plugin_utils.rolling_plan import plan_command

ARGUMENT_SPEC = dict(
    playbook=dict(type="path", required=True),
    limit=dict(type="list", elements="str", required=True),
    plan_vars=dict(type="dict", default={}),
    playbook_command=dict(type="path"),
    chdir=dict(type="path"),
    config_file=dict(type="path"),
    timeout_seconds=dict(type="int", default=3600),
)


def vault_secrets(loader):
    """The (vault id, secret bytes) pairs the running ansible-playbook holds (prompted, files, client scripts)."""
    vault = getattr(loader, "_vault", None)
    pairs = []
    for vault_id, secret in getattr(vault, "secrets", None) or []:
        data = getattr(secret, "bytes", None)
        if data:
            pairs.append((vault_id, data))
    return pairs


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        _spec, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        if args["timeout_seconds"] < 1:
            raise AnsibleActionFail("timeout_seconds must be at least 1")
        if not args["limit"]:
            raise AnsibleActionFail("limit names no host: nothing to plan")
        ansible_playbook = args["playbook_command"] or os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        if not os.path.exists(ansible_playbook):
            ansible_playbook = "ansible-playbook"
        secrets_dir = tempfile.mkdtemp(prefix="cf-roll-plan-")  # 0700, this user's only
        try:
            os.chmod(secrets_dir, 0o700)
            command = plan_command(
                context.CLIARGS, ansible_playbook, args["playbook"], ",".join(args["limit"]),
                json.dumps(args["plan_vars"], sort_keys=True), secrets_dir,
                vault_secrets=vault_secrets(self._loader),
                become_pass=getattr(self._play_context, "become_pass", None),
                conn_pass=getattr(self._play_context, "password", None),
                config_file=args["config_file"], python=sys.executable)
            for path, data in command["files"].items():
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o700)
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
            env = dict(os.environ)
            env.update(command["env"])
            result["cmd"] = command["shown"]
            try:
                proc = subprocess.run(command["argv"], cwd=args["chdir"] or None, env=env, stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                                      timeout=args["timeout_seconds"], check=False)
            except subprocess.TimeoutExpired as exc:
                result.update(rc=124, stdout=exc.stdout or "", stderr=exc.stderr or "",
                              msg="the check-mode run did not finish within %d s" % args["timeout_seconds"])
            except OSError as exc:
                result.update(rc=127, stdout="", stderr=str(exc), msg="cannot run %s: %s" % (ansible_playbook, exc))
            else:
                result.update(rc=proc.returncode, stdout=proc.stdout, stderr=proc.stderr)
        finally:
            shutil.rmtree(secrets_dir, ignore_errors=True)
        result["changed"] = False
        return result
