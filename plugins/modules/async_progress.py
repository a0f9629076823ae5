#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

# The work is done by the action plugin of the same name (plugins/action/async_progress.py); this file holds its
# documentation, as ansible-test requires for an action plugin.

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: async_progress
short_description: The status of a job in the background, with the progress it reports of itself
version_added: 1.0.0
description:
  - Reads a job started with C(async) and C(poll=0) as M(ansible.builtin.async_status) does, and returns what that
    module returns. While the job runs, it also reads the job's O(progress_file) (one JSON object with a
    C(progress) text, written by M(clusterforge.gpu.nccl_isolate) for example) and returns its text as
    RV(progress).
  - Used with C(until), the recap callback (clusterforge.gpu.recap) prints RV(progress) of each host still waiting
    in its progress line, at most every 30 s.
  - Changes nothing. A missing or unreadable progress file gives an empty RV(progress) (the job has not written it
    yet, or has ended).
author:
  - ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.action_plugin
options:
  jid:
    description: The job id, RV(ansible.builtin.async_status#module:ansible_job_id) of the task that started it.
    type: str
    required: true
  progress_file:
    description: The file the job writes its progress into, on the host the job runs on.
    type: path
attributes:
  check_mode:
    support: full
    details:
      - It only reads; check mode changes nothing.
  diff_mode:
    support: none
seealso:
  - module: ansible.builtin.async_status
  - module: clusterforge.gpu.nccl_isolate
"""

EXAMPLES = r"""
- name: Search the node behind a missed NCCL run, in the background
  clusterforge.gpu.nccl_isolate:
    nodes: "{{ groups['gpu_nodes'] }}"
    min_busbw_gbps: 330
    progress_file: /run/clusterforge/nccl-isolate.json
  async: 7200
  poll: 0
  register: search_job

- name: Wait for the search (the recap callback prints the NCCL runs done every 30 s)
  clusterforge.gpu.async_progress:
    jid: "{{ search_job.ansible_job_id }}"
    progress_file: /run/clusterforge/nccl-isolate.json
  register: search
  until: search.finished
  retries: 720
  delay: 10
"""

RETURN = r"""
started:
  description: The job has started.
  returned: always
  type: bool
finished:
  description: The job has ended; the job's own result is returned with it.
  returned: always
  type: bool
ansible_job_id:
  description: The job id.
  returned: always
  type: str
progress:
  description: What the job last wrote of its progress; empty when it has written nothing (yet).
  returned: while the job runs, with O(progress_file)
  type: str
  sample: "NCCL runs done: 2 (1 passed) in 1 rounds; round 2 running: 2 runs of 2 nodes"
"""
