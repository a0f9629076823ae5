"""Run a clusterforge.gpu module's main() in-process against a scripted tool.

Usage::

    from cf_module_helper import run_module, Tool

    tool = Tool({("--query-gpu",): (0, CSV, "")})       # or a callable handler(argv, data) -> (rc, out, err)
    result = run_module(nvidia_smi_module, {"power_limit_watts": 500}, tool, check_mode=True)
    assert result["changed"] and tool.count("--query-gpu") == 1

``run_module`` returns the dict the module passed to exit_json/fail_json, with ``failed`` set on failure.
``Tool.calls`` lists every argv the module ran, so tests can assert exact commands and call counts.
"""

import json
import os
import stat
import sys

from unittest import mock

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.clusterforge.gpu.plugins.module_utils import _runner


class _Exit(Exception):
    def __init__(self, result):
        super().__init__(result)
        self.result = result


class Tool(object):
    """A scripted stand-in for the commands a module runs.

    ``handler`` is either a callable ``(argv, data) -> (rc, stdout, stderr)`` or a list of
    ``(match, (rc, stdout, stderr))`` pairs where ``match`` is a tuple of strings that must all appear in
    argv; the first matching pair answers. ``missing`` lists tool names that get_bin_path must not find.
    """

    def __init__(self, handler, missing=()):
        self.handler = handler
        self.missing = set(missing)
        self.calls = []
        self.limits = []  # the time limit in seconds of each call, as the runner passed it

    def answer(self, argv, data=None):
        self.calls.append(list(argv))
        if callable(self.handler):
            return self.handler(list(argv), data)
        for match, reply in self.handler:
            if all(any(m == a or (m in a) for a in argv) for m in match):
                return reply
        raise AssertionError("unexpected command: %r" % (argv,))

    def count(self, *needles):
        return sum(1 for c in self.calls if all(any(n in a for a in c) for n in needles))


def _exit_json(self, **kwargs):
    kwargs.setdefault("changed", False)
    raise _Exit(kwargs)


def _fail_json(self, msg=None, **kwargs):
    kwargs["failed"] = True
    kwargs["msg"] = msg
    raise _Exit(kwargs)


def _main(module):
    try:
        module.main()
    except _Exit as e:
        # Round-trip through JSON like the real wire format, so non-serialisable results fail the test.
        return json.loads(json.dumps(e.result))
    raise AssertionError("module returned without calling exit_json or fail_json")


def run_main(module, args, check_mode=False):
    """Run ``module.main()`` with ``args`` and the real commands (for modules that start their processes
    themselves, against fake executables on PATH); return its result dict."""
    args = dict(args, _ansible_check_mode=check_mode)
    with patch_module_args(args), mock.patch.multiple(basic.AnsibleModule, exit_json=_exit_json, fail_json=_fail_json):
        return _main(module)


def run_module(module, args, tool, check_mode=False, diff=False):
    """Run ``module.main()`` with ``args``; return its result dict."""
    args = dict(args)
    args["_ansible_check_mode"] = check_mode
    args["_ansible_diff"] = diff
    exit_json, fail_json = _exit_json, _fail_json

    def run_command(self, args, **kwargs):
        return tool.answer(args, kwargs.get("data"))

    def execute(module, cmd, timeout_seconds, data=None, environ_update=None):
        # the time-limited executor of module_utils/_runner: the scripted tool answers instead
        tool.limits.append(timeout_seconds)
        return tool.answer(cmd, data)

    def get_bin_path(self, arg, required=False, opt_dirs=None):
        if arg in tool.missing:
            if required:
                fail_json(self, msg="Failed to find required executable %s" % arg)
            return None
        return "/usr/bin/%s" % arg

    with patch_module_args(args), mock.patch.object(_runner, "execute", execute), \
            mock.patch.multiple(basic.AnsibleModule, exit_json=exit_json, fail_json=fail_json,
                                run_command=run_command, get_bin_path=get_bin_path):
        return _main(module)


def install_fake(tmp_path, monkeypatch, name, source):
    """A fake executable ``name`` (Python ``source``) first on PATH, for modules that start their own processes."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    tool = bindir / name
    tool.write_text("#!%s\n%s" % (sys.executable, source))
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ.get("PATH", "")))
    return tool
