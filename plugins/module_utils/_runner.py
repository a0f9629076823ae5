# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
#
# PRIVATE: this module_utils file is internal to clusterforge.gpu. It is not a public API and may change
# without notice.
"""One way for every module of the collection to run a hardware tool.

Commands are argv lists (never shell strings), run with the C locale so the output parses the same
everywhere, and every call is recorded so that modules can return the commands they ran and tests can
count them (each module reads each tool's state once per run).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import shlex

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LC_MESSAGES": "C"}


def find_tool(module, tool, path=None, required=True, option=None):
    """The one way a module of the collection finds the program it runs. Returns its path, or None.

    ``path`` is the user's override (a module option such as ``nvidia_smi_path``; ``option`` names it for the
    message). It wins over any lookup, and it must exist and be executable: a path the user set that is wrong
    fails the module (``required`` or not), with the path and the option in the message, before anything runs. A
    bare name in the option (``dcgmi``) is looked up on PATH like the default.

    Without an override the tool is looked up with ``get_bin_path``: on PATH, in PATH order (a site's wrapper in
    /usr/local/bin wins over the packaged tool), then in /sbin, /usr/sbin and /usr/local/sbin. A tool that is not
    found fails the module with a clear message when ``required``, else None is returned.
    """
    if path:
        # get_bin_path on an absolute path checks that it exists, is a file and is executable.
        found = module.get_bin_path(path, required=False)
        if found is None:
            module.fail_json(msg="%s was not found at %s%s (it does not exist or is not executable)"
                             % (tool, path, " (%s)" % option if option else ""), changed=False)
        return path if "/" in path else found
    found = module.get_bin_path(tool, required=False)
    if found is None and required:
        module.fail_json(msg="%s was not found on this host; install it or set %s"
                         % (tool, option or "its path option"), changed=False)
    return found


class ToolRunner(object):
    """Runs one external tool for an AnsibleModule.

    The binary is found with :func:`find_tool` (``path`` is the user's override, ``option`` its option name).
    A missing tool fails the module with a clear message before anything is changed.
    """

    def __init__(self, module, tool, path=None, required=True, option=None):
        self.module = module
        self.tool = tool
        self.calls = []
        self.bin = find_tool(module, tool, path, required=required, option=option)

    @property
    def available(self):
        return self.bin is not None

    def run(self, args, check_rc=True, data=None, what=None):
        """Run the tool with ``args`` (a list). Returns (rc, stdout, stderr).

        With ``check_rc`` a non-zero exit fails the module with the command, rc, stdout and stderr.
        """
        cmd = [self.bin] + [str(a) for a in args]
        self.calls.append(cmd)
        rc, out, err = self.module.run_command(cmd, environ_update=C_LOCALE, data=data, check_rc=False)
        if check_rc and rc != 0:
            self.fail(cmd, rc, out, err, what=what)
        return rc, out, err

    def fail(self, cmd, rc, out, err, what=None, **extra):
        msg = "%s failed (rc=%s): %s" % (what or self.tool, rc, (err or out or "").strip()[:2000])
        self.module.fail_json(msg=msg, cmd=quote(cmd), rc=rc, stdout=out, stderr=err, **extra)


def quote(cmd):
    """The argv list as one shell-quoted string, for messages and the ``cmd`` return value."""
    return " ".join(shlex.quote(str(c)) for c in cmd)
