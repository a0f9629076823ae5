"""The CLUSTERFORGE RECAP callback: what a run tells the operator at its end, also when it stopped."""

import os
import re
import subprocess
import sys

import pytest

from ansible_collections.clusterforge.gpu.plugins.callback.recap import Progress, Recap, duration, machine_readable, waiting_for

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN = os.path.join(ROOT, ".venv", "bin")


def run_play(play, timeout):
    """ansible-playbook on localhost with the lab's ansible.cfg (the recap callback enabled); (process, output)."""
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "tests", "lab", "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "-c", "local",
                           "-e", "ansible_python_interpreter=" + sys.executable, str(play)],
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)
    return proc, proc.stdout + proc.stderr


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
    proc, out = run_play(play, 120)
    assert proc.returncode != 0, out
    recap = out.split("CLUSTERFORGE RECAP", 1)
    assert len(recap) == 2, out
    assert "nodes needing a reboot: localhost (NVIDIA driver)" in recap[1]
    assert "failed: localhost at The run stops here: the gate failed" in recap[1]
    assert "handled" not in recap[1] and out.index("PLAY RECAP") < out.index("CLUSTERFORGE RECAP")


class Clock(object):
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


DRAINING = {"nodes": [{"name": "gpu01", "state": "MIXED+DRAIN", "drained": False, "jobs": ["17", "18"],
                       "cpus_allocated": 64}]}


def test_a_drain_wait_prints_the_jobs_left_every_30_seconds_and_a_short_wait_nothing():
    clock = Clock()
    p = Progress(clock=clock)
    p.start("t1")
    lines = []
    # Polled every 10 s: the first line once 30 s have passed, then one every 30 s, never one per poll.
    for second in range(10, 100, 10):
        clock.now = 1000.0 + second
        lines.append((second, p.retry("t1", "Wait for the drain", "gpu01", "clusterforge.gpu.slurm_node_info",
                                      DRAINING, delay=10)))
    printed = [(second, line) for second, line in lines if line]
    assert [second for second, _line in printed] == [30, 60, 90]
    assert printed[0][1] == ("progress after 30 s: Wait for the drain: 0 of 1 host done; "
                             "waiting for gpu01 (MIXED+DRAIN, jobs 17, 18)")
    # A wait that ends before 30 s prints nothing.
    p.start("t2")
    clock.now += 5
    assert p.retry("t2", "Short", "gpu01", "clusterforge.gpu.slurm_node_info", DRAINING, delay=10) is None


def test_a_task_that_polls_every_30_seconds_prints_on_each_poll_and_names_the_hosts_done():
    clock = Clock()
    p = Progress(clock=clock)
    p.start("dcgm")
    running = {"started": 1, "finished": 0, "ansible_job_id": "j1"}
    clock.now += 30.4
    line = p.retry("dcgm", "Deep | wait for the DCGM diagnostic", "gpu02", "ansible.builtin.async_status", running, 30)
    assert line == "progress after 30 s: Deep | wait for the DCGM diagnostic: 0 of 1 host done; waiting for gpu02 (running)"
    # gpu01 finished; gpu03's retry comes right after gpu02's: one line per round, not one per host.
    p.done("dcgm", "gpu01")
    assert p.retry("dcgm", "Deep | wait for the DCGM diagnostic", "gpu03", "async_status", running, 30) is None
    clock.now += 30.1
    line = p.retry("dcgm", "Deep | wait for the DCGM diagnostic", "gpu02", "async_status", running, 30)
    assert line.endswith("1 of 3 hosts done; waiting for gpu02 (running), gpu03 (running)"), line
    assert line.startswith("progress after 1m00s: ")


def test_many_waiting_hosts_are_counted_beyond_eight_and_a_drained_node_is_not_waited_for():
    clock = Clock()
    p = Progress(clock=clock)
    p.start("t")
    for i in range(1, 12):
        p.retry("t", "Wait", "gpu%02d" % i, "async_status", {"started": 1, "finished": 0})
    clock.now += 40
    line = p.retry("t", "Wait", "gpu12", "async_status", {"started": 1, "finished": 0})
    assert line.endswith("gpu08 (running), and 4 more"), line
    assert waiting_for("slurm_node_info", {"nodes": [{"name": "gpu01", "state": "IDLE+DRAIN", "drained": True},
                                                     {"name": "gpu02", "state": "ALLOCATED+DRAIN", "drained": False,
                                                      "cpus_allocated": 8}]}) == "gpu02 ALLOCATED+DRAIN, 8 CPUs allocated"
    assert duration(3725) == "1h02m" and duration(65) == "1m05s"


@pytest.mark.skipif(not os.path.exists(os.path.join(BIN, "ansible-playbook")), reason="ansible-playbook not in the venv")
def test_a_real_wait_in_the_background_prints_its_progress_every_30_seconds(tmp_path):
    """Ansible's own events (the task's start, each retry with its delay) reach the progress lines: a job of 40 s in
    the background polled every 4 s prints one line at about 30 s, naming the host still running."""
    play = tmp_path / "play.yml"
    play.write_text("""---
- name: A long wait
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Start the long job
      ansible.builtin.command: sleep 40
      async: 120
      poll: 0
      register: job
      changed_when: false
    - name: Wait for the long job
      ansible.builtin.async_status:
        jid: "{{ job.ansible_job_id }}"
      register: done
      until: done.finished
      retries: 30
      delay: 4
""")
    proc, out = run_play(play, 180)
    assert proc.returncode == 0, out
    lines = [line for line in out.splitlines() if line.startswith("progress after ")]
    assert len(lines) == 1, out
    assert lines[0].endswith(": Wait for the long job: 0 of 1 host done; waiting for localhost (running)"), lines
    # Due once 30 s have passed, or earlier when the next poll (4 s away) would come later than 30 s: between 26 s and
    # 30 s plus one poll's own time (more on a loaded machine).
    waited = int(re.match(r"progress after (\d+) s: ", lines[0]).group(1))
    assert 26 <= waited <= 36, lines


def test_what_a_job_says_of_itself_comes_first():
    said = {"started": True, "finished": False, "progress": "NCCL runs done: 2 (1 passed) in 1 rounds;\n round 2"}
    assert waiting_for("clusterforge.gpu.async_progress", said) == "NCCL runs done: 2 (1 passed) in 1 rounds; round 2"
    # Nothing written yet: a job in the background still runs.
    assert waiting_for("clusterforge.gpu.async_progress", dict(said, progress="")) == "running"
