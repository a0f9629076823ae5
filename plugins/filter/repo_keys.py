# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter of the roles' pinned repository keys; the decision is plugins/plugin_utils/repo_keys.py, the documentation
repo_key_problem.yml beside this file."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import repo_keys


def repo_key_problem(colons, expected, what="the key"):
    """'' when gpg's listing of the downloaded key is exactly the pinned fingerprint, else why not."""
    try:
        return repo_keys.key_problem(colons, expected, what=what)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule(object):
    def filters(self):
        return {"repo_key_problem": repo_key_problem}
