#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# The work is done by the action plugin of the same name (plugins/action/rolling_plan_run.py); this file holds its
# documentation, as ansible-test requires for an action plugin.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: rolling_plan_run
short_description: Run a playbook in check mode with the running ansible-playbook's connection and secrets
version_added: 1.0.0
description:
  - The rolling plan (clusterforge.gpu.rolling, phase plan) runs playbooks/rolling_apply.yml in check mode on the
    candidate nodes. That run must see what the real run sees; this action runs it with the command line of the
    running ansible-playbook, read on the controller from C(ansible.context.CLIARGS).
  - Passed on - every inventory source, C(--user), C(--private-key), C(--connection), C(--timeout), C(--forks),
    the SSH argument options, C(--become), C(--become-method), C(--become-user), C(--module-path), every C(-e) in
    order (C(@file) included), C(--tags) and C(--skip-tags); the plan's own O(plan_vars) come last and win.
  - Secrets - every vault secret the running ansible-playbook holds (typed at C(--ask-vault-pass), from password
    files or client scripts), and a become or connection password typed at C(-K) or C(-k), go to the child through
    executable password files in a private directory (0700) that is removed after the run. Each file holds the
    secret XOR a random pad; the pad is in the child's environment only, and the file deletes itself when the child
    has read it. No secret is in the argv, in the result or on disk in clear. Password files given with
    C(--become-password-file) or C(--connection-password-file) are passed on as they are.
  - The child reports through the C(ansible.posix.json) callback (indent 4, no colour, no retry files).
author:
  - ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.action_plugin
options:
  playbook:
    description: The playbook to run in check mode.
    type: path
    required: true
  limit:
    description: The hosts to run it on (C(--limit)).
    type: list
    elements: str
    required: true
  plan_vars:
    description: Extra variables of the plan, passed last as one JSON C(-e).
    type: dict
    default: {}
  playbook_command:
    description: The ansible-playbook to run; by default the one beside the controller's Python, else the one on C(PATH).
    type: path
  chdir:
    description: The directory to run it in.
    type: path
  config_file:
    description: The configuration file of the run (C(ANSIBLE_CONFIG)); empty when the running one has none.
    type: path
  timeout_seconds:
    description: Longest time the check-mode run may take; it is killed after it and RV(rc) is 124.
    type: int
    default: 3600
attributes:
  check_mode:
    support: full
    details:
      - The child runs in check mode always; the action itself changes nothing and runs in check mode too.
  diff_mode:
    support: none
notes:
  - It runs on the controller, whatever the task's host.
seealso:
  - module: clusterforge.gpu.slurm_node
"""

EXAMPLES = r"""
- name: Run the change in check mode with the operator's connection and vault secrets
  clusterforge.gpu.rolling_plan_run:
    playbook: "{{ role_path | dirname | dirname }}/playbooks/rolling_apply.yml"
    limit: [gpu01, gpu02]
    plan_vars:
      rolling_roles: [clusterforge.gpu.gpu_tuning]
  register: plan_run
"""

RETURN = r"""
rc:
  description: The exit status of the check-mode run (124 when it ran past O(timeout_seconds), 127 when it could not start).
  returned: always
  type: int
stdout:
  description: Its output (the C(ansible.posix.json) document).
  returned: always
  type: str
stderr:
  description: Its error output.
  returned: always
  type: str
cmd:
  description: Its argv, with the operator's inline C(-e) values left out (they may hold a password).
  returned: always
  type: list
  elements: str
"""
