"""The CLUSTERFORGE RECAP callback: what a run tells the operator at its end, also when it stopped."""

import os
import subprocess
import sys

import pytest

from ansible_collections.clusterforge.gpu.plugins.callback.recap import Recap, machine_readable

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN = os.path.join(ROOT, ".venv", "bin")


def test_reboots_held_and_resumed_nodes_verdict_and_failures():
    r = Recap()
    r.result("gpu01", "ansible.builtin.set_fact",
             {"ansible_facts": {"nvidia_driver_reboot_required": True, "common_os_reboot_required": False}})
    r.result("gpu02", "ansible.builtin.set_fact", {"ansible_facts": {"bios_reboot_required": "True"}})
    r.result("gpu03", "ansible.builtin.set_fact", {"ansible_facts": {"bios_reboot_required": False}})
    # A roll: gpu01 drained then resumed; gpu02 drained and held; a node owned by someone else skipped.
    drain = {"nodes": [{"name": "gpu01", "action": "drain", "reason_after": "cf-roll:r1"},
                       {"name": "gpu02", "action": "drain", "reason_after": "cf-roll:r1"},
                       {"name": "gpu05", "action": "skip", "reason_after": "RMA"}]}
    r.result("head01", "clusterforge.gpu.slurm_node", drain)
    r.result("head01", "clusterforge.gpu.slurm_node", {"nodes": [{"name": "gpu01", "action": "resume", "reason_after": None}]})
    r.result("head01", "clusterforge.gpu.slurm_node",
             {"nodes": [{"name": "gpu02", "action": "drain", "reason_after": "cf-roll:r1 FAILED dcgm-diag: level 1 failed"}]})
    r.result("head01", "ansible.builtin.set_fact",
             {"ansible_facts": {"validate_verdict": {"pass": False, "failed": "2", "report": "/tmp/r/validation.html"}}})
    r.failure("gpu02", {"msg": "rescued"}, "Health gate")
    r.failure("gpu02", {"msg": "Rolling change stopped: gpu02 failed at\n 'dcgm-diag'"}, "Stop the roll")
    r.failure("gpu04", {"msg": "no answer"}, "Gathering Facts", unreachable=True)
    r.failure("gpu03", {"msg": "rescued later"}, "Something")
    lines = r.lines(failed_hosts={"gpu02"})
    assert lines == [
        "nodes needing a reboot: gpu01 (NVIDIA driver); gpu02 (BIOS settings pending on the BMC)",
        "nodes this run drained and left drained: gpu02: cf-roll:r1 FAILED dcgm-diag: level 1 failed",
        "nodes this run resumed: gpu01",
        "validation: FAIL (2 checks failed), report /tmp/r/validation.html",
        "failed: gpu02 at Stop the roll: Rolling change stopped: gpu02 failed at 'dcgm-diag'",
        "unreachable: gpu04 (Gathering Facts: no answer)",
    ]


def test_a_long_failure_keeps_its_end_up_to_600_characters_and_is_cut_at_a_word_beyond():
    hold = ("Rolling change stopped: gpu01 failed at 'dcgm-diag': DCGM diagnostic level 1 failed: software on GPU 3. "
            "It stays drained (cf-roll:20261129T232841Z FAILED ...); later batches were not touched. Fix it and "
            "re-run with -e rolling_run_id=20261129T232841Z: that re-run adopts this drain and finishes the work.")
    r = Recap()
    r.failure("gpu01", {"msg": hold}, "Stop the roll")
    assert r.lines(failed_hosts={"gpu01"})[-1] == "failed: gpu01 at Stop the roll: " + hold
    r.failure("gpu01", {"msg": "word " * 200}, "Stop the roll")
    line = r.lines(failed_hosts={"gpu01"})[-1]
    assert line.endswith("word word ...") and len(line) <= len("failed: gpu01 at Stop the roll: ") + 600


def test_machine_readable_output_stays_one_document():
    assert machine_readable("ansible.posix.json") and machine_readable("json") and machine_readable("ansible.posix.jsonl")
    assert not machine_readable("default") and not machine_readable("ansible.builtin.default")
    assert not machine_readable("community.general.yaml") and not machine_readable(None)


def test_a_quiet_run_says_so():
    r = Recap()
    r.result("gpu01", "ansible.builtin.set_fact", {"ansible_facts": {"nvidia_driver_reboot_required": False}})
    r.result("head01", "ansible.builtin.set_fact", {"ansible_facts": {"validate_verdict": {"pass": True, "failed": 0,
                                                                                           "report": "r.html"}}})
    assert r.lines() == ["nodes needing a reboot: none", "nodes this run drained and left drained: none",
                         "validation: PASS, report r.html"]
    assert r.lines(check_mode=True)[1] == "nodes this run would have drained and left drained: none"


@pytest.mark.skipif(not os.path.exists(os.path.join(BIN, "ansible-playbook")), reason="ansible-playbook not in the venv")
def test_the_recap_is_printed_after_a_run_that_stopped(tmp_path):
    play = tmp_path / "play.yml"
    play.write_text("""---
- name: A run that stops
  hosts: localhost
  gather_facts: false
  tasks:
    - name: A role says the node needs a reboot
      ansible.builtin.set_fact:
        nvidia_driver_reboot_required: true
    - name: A failure that a rescue handles is no failure of the run
      block:
        - name: Fails
          ansible.builtin.fail:
            msg: handled
      rescue:
        - name: Handled
          ansible.builtin.debug:
            msg: ok
    - name: The run stops here
      ansible.builtin.fail:
        msg: the gate failed
- name: Never reached
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Nothing
      ansible.builtin.debug:
        msg: unreachable code
""")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "tests", "lab", "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", "ansible_python_interpreter=" + sys.executable, str(play)],
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    recap = out.split("CLUSTERFORGE RECAP", 1)
    assert len(recap) == 2, out
    assert "nodes needing a reboot: localhost (NVIDIA driver)" in recap[1]
    assert "failed: localhost at The run stops here: the gate failed" in recap[1]
    assert "handled" not in recap[1] and out.index("PLAY RECAP") < out.index("CLUSTERFORGE RECAP")
