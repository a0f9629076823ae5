# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""clusterforge.gpu.async_progress: a real job in the background on localhost, read while it runs and once it ended."""

import base64
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.clusterforge.gpu.plugins.action.async_progress import progress_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN = os.path.join(ROOT, ".venv", "bin")

PLAY = """---
- name: A job in the background that says how far it is
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Start the job (it writes its progress, then works)
      ansible.builtin.shell: |
        printf '{"progress": "step 1 of 2"}' > @DIR@/p.json.tmp && mv @DIR@/p.json.tmp @DIR@/p.json
        sleep 5
        rm @DIR@/p.json
        echo done
      async: 60
      poll: 0
      register: job
      changed_when: false
    - name: Until the job has written its progress
      ansible.builtin.wait_for:
        path: "@DIR@/p.json"
        timeout: 20
    - name: Read it while it runs
      clusterforge.gpu.async_progress:
        jid: "{{ job.ansible_job_id }}"
        progress_file: "@DIR@/p.json"
      register: running
    - name: Wait for the job
      clusterforge.gpu.async_progress:
        jid: "{{ job.ansible_job_id }}"
        progress_file: "@DIR@/p.json"
      register: done
      until: done.finished
      retries: 30
      delay: 1
    - name: Keep both results
      ansible.builtin.copy:
        content: "{{ {'running': running, 'done': done} | to_json }}"
        dest: "@DIR@/results.json"
        mode: "0600"
"""


@pytest.mark.skipif(not os.path.exists(os.path.join(BIN, "ansible-playbook")), reason="ansible-playbook not in the venv")
def test_a_running_job_gives_its_progress_and_an_ended_one_its_result(tmp_path):
    play = tmp_path / "play.yml"
    play.write_text(PLAY.replace("@DIR@", str(tmp_path)))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "tests", "lab", "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", "ansible_python_interpreter=" + sys.executable, str(play)],
                          env=env, capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    running, done = results["running"], results["done"]
    assert running["started"] is True and running["finished"] is False, running
    assert running["progress"] == "step 1 of 2"
    # Once it ended: the job's own result, as async_status gives it, and no progress.
    assert done["finished"] is True and done["rc"] == 0 and done["stdout"] == "done", done
    assert "progress" not in done


def test_progress_text_is_empty_until_the_job_wrote_something_readable():
    def slurped(data):
        return {"content": base64.b64encode(data.encode()).decode()}
    assert progress_text(slurped('{"progress": "NCCL runs done: 2\\n (1 passed)"}')) == "NCCL runs done: 2 (1 passed)"
    assert progress_text({"failed": True, "msg": "file not found"}) == ""
    assert progress_text(slurped("not json")) == ""
    assert progress_text(slurped('["a list"]')) == ""
    assert progress_text(slurped('{"other": 1}')) == ""
