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


class ToolRunner(object):
    """Runs one external tool for an AnsibleModule.

    ``path`` is the user's override (a module option such as ``nvidia_smi_path``); otherwise the tool is
    looked up on PATH, in PATH order, and then in /sbin, /usr/sbin and /usr/local/sbin. A missing tool fails the module with a clear
    message before anything is changed.
    """

    def __init__(self, module, tool, path=None, required=True):
        self.module = module
        self.tool = tool
        self.calls = []
        if path:
            self.bin = path
        else:
            # PATH order decides (a site's wrapper in /usr/local/bin wins over the packaged tool), then the sbin
            # directories that get_bin_path always adds.
            self.bin = module.get_bin_path(tool, required=False)
        if self.bin is None and required:
            module.fail_json(msg="%s was not found on this host; install it or set its path option" % tool, changed=False)

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
