# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of ``clusterforge.gpu.async_progress`` (documented in plugins/modules/async_progress.py): the status
of a job in the background, as ansible.builtin.async_status gives it, with the progress the job writes.

Why an action plugin: one task must both read the job's status (the async_status module, with the async directory of
the connection's shell, which only an action knows) and, while it runs, the job's progress file, so that a task
with ``until`` retries on both and the recap callback can print what the job says of itself.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json

from ansible.plugins.action import ActionBase
from ansible.utils.vars import merge_hash


def progress_text(slurped):
    """The job's progress from ansible.builtin.slurp's result of its progress file; '' when there is none yet (the
    file is written before each step and removed at the end) or it cannot be read."""
    if not isinstance(slurped, dict) or slurped.get("failed") or not slurped.get("content"):
        return ""
    try:
        data = json.loads(base64.b64decode(slurped["content"]).decode("utf-8"))
    except (ValueError, TypeError, UnicodeDecodeError):
        return ""
    text = data.get("progress") if isinstance(data, dict) else None
    return " ".join(str(text).split()) if text else ""


class ActionModule(ActionBase):
    _supports_check_mode = True

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "jid": {"type": "str", "required": True},
            "progress_file": {"type": "path"},
        })
        async_dir = self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))
        result.update(started=False, finished=False, ansible_job_id=args["jid"],
                      results_file=self._connection._shell.join_path(async_dir, args["jid"]))
        status = self._execute_module(module_name="ansible.legacy.async_status", task_vars=task_vars,
                                      module_args={"jid": args["jid"], "mode": "status", "_async_dir": async_dir})
        result = merge_hash(result, status)
        for key in ("started", "finished"):
            result[key] = bool(result.get(key))
        if not result["finished"] and not result.get("failed") and args["progress_file"]:
            slurped = self._execute_module(module_name="ansible.legacy.slurp", task_vars=task_vars,
                                           module_args={"src": args["progress_file"]})
            result["progress"] = progress_text(slurped)
        return result
