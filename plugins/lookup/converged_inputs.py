# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
name: converged_inputs
author: ClusterForge developers (@clusterforge)
version_added: "1.0.0"
short_description: Digest of a run's inputs, made on the controller, for the converged records
description:
  - Returns one SHA-256 digest of what decides what the roles would do, apart from the nodes' own state
    (which C(clusterforge.gpu.converged_state) reads on each node).
  - "It covers: the collection's files (C(roles), C(plugins), C(playbooks), C(meta), C(site.yml), C(galaxy.yml));
    every file of every inventory source (C(ansible_inventory_sources)) and of C(group_vars) and C(host_vars) next to
    the playbook; the extra variables of the command line (C(-e), files included); the ansible-core version; the
    C(--start-at-task) and C(--step) options (such a run is not complete, so its record never matches the next run);
    and the terms, which the caller uses for inputs that live elsewhere (the controller's munge key checksum)."
  - Variables named in O(ignore_extra_vars) are left out of the extra variables, so that switching the skip off for
    one run does not by itself invalidate every record.
options:
  _terms:
    description: More inputs, as strings.
    type: list
    elements: str
    required: false
  ignore_extra_vars:
    description: Extra variables left out of the digest.
    type: list
    elements: str
    default: []
notes:
  - Environment variables and configuration files outside these paths (C(ansible.cfg), C(ANSIBLE_*)) are not part
    of the digest.
"""

EXAMPLES = r"""
- name: Digest of the run's inputs
  ansible.builtin.set_fact:
    cf_converged_inputs: "{{ lookup('clusterforge.gpu.converged_inputs', munge_key_checksum) }}"
  run_once: true
"""

RETURN = r"""
_raw:
  description: One hexadecimal SHA-256 digest.
  type: list
  elements: str
"""

import hashlib
import json
import os

from ansible import context
from ansible.errors import AnsibleLookupError
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.lookup import LookupBase
from ansible.release import __version__ as ANSIBLE_VERSION
from ansible.utils.vars import load_extra_vars

COLLECTION_PARTS = ("roles", "plugins", "playbooks", "meta", "site.yml", "galaxy.yml")
SKIP_DIRS = ("__pycache__", ".git")


def collection_root():
    """The collection's root: this file is <root>/plugins/lookup/converged_inputs.py."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def hash_tree(digest, path):
    """Adds every file under path (or the file itself), by relative name and content, in a stable order."""
    path = os.path.realpath(path)
    if os.path.isfile(path):
        files = [(os.path.basename(path), path)]
    elif os.path.isdir(path):
        files = []
        for dirpath, dirnames, filenames in os.walk(path, followlinks=True):
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
            for name in sorted(filenames):
                if name.endswith((".pyc", ".retry")):
                    continue
                full = os.path.join(dirpath, name)
                files.append((os.path.relpath(full, path), full))
    else:
        digest.update(b"missing:" + to_bytes(path) + b"\n")
        return
    for rel, full in files:
        digest.update(to_bytes(rel) + b"\0")
        try:
            with open(full, "rb") as handle:
                digest.update(hashlib.sha256(handle.read()).digest())
        except (IOError, OSError) as exc:
            raise AnsibleLookupError("cannot read %s for the inputs digest: %s" % (full, to_text(exc)))


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        unknown = set(kwargs) - set(["ignore_extra_vars"])
        if unknown:
            raise AnsibleLookupError("converged_inputs: unknown option(s) %s" % ", ".join(sorted(unknown)))
        ignored = kwargs.get("ignore_extra_vars") or []
        if not isinstance(ignored, (list, tuple)) or not all(isinstance(v, str) for v in ignored):
            raise AnsibleLookupError("converged_inputs: ignore_extra_vars must be a list of variable names")
        variables = variables or {}
        digest = hashlib.sha256()
        digest.update(to_bytes("ansible-core " + ANSIBLE_VERSION + "\n"))
        root = collection_root()
        for part in COLLECTION_PARTS:
            digest.update(to_bytes("collection:" + part + "\n"))
            hash_tree(digest, os.path.join(root, part))
        sources = variables.get("ansible_inventory_sources") or []
        playbook_dir = variables.get("playbook_dir")
        if playbook_dir:
            sources = list(sources) + [os.path.join(playbook_dir, "group_vars"), os.path.join(playbook_dir, "host_vars")]
        for source in sources:
            digest.update(to_bytes("inventory:" + os.path.basename(os.path.normpath(source)) + "\n"))
            if os.path.exists(source):
                hash_tree(digest, source)
        extra = load_extra_vars(self._loader) if context.CLIARGS else {}
        extra = dict((k, v) for k, v in extra.items() if k not in set(ignored))
        digest.update(to_bytes("extra:" + json.dumps(extra, sort_keys=True, default=to_text) + "\n"))
        # A run that starts at a task or asks at each step is not complete: its record must not match the next run.
        partial = dict((k, context.CLIARGS.get(k)) for k in ("start_at_task", "step") if context.CLIARGS and context.CLIARGS.get(k))
        digest.update(to_bytes("partial:" + json.dumps(partial, sort_keys=True, default=to_text) + "\n"))
        for term in terms:
            digest.update(to_bytes("term:" + to_text(term) + "\n"))
        return [digest.hexdigest()]
