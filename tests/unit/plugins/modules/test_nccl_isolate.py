# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl_isolate module tests: a fake srun on PATH that "runs" all_reduce_perf on the nodes of -w and prints
nccl-tests' layout (its own numbers): slow when a node of FAKE_BAD_NODES or both nodes of a FAKE_BAD_PAIRS pair
are in the set."""

import json
import os
import re
import subprocess
import sys

import pytest

from ansible_collections.clusterforge.gpu.plugins.modules import nccl_isolate
from cf_module_helper import install_fake, run_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BIN = os.path.join(ROOT, ".venv", "bin")

FAKE_SRUN = r'''
import json, os, sys, time
args = sys.argv[1:]
nodes = args[args.index("-w") + 1].split(",")
progress = os.environ.get("FAKE_PROGRESS")
with open(os.environ["FAKE_SRUN_LOG"], "a") as f:
    f.write(json.dumps({"argv": args, "nodes": nodes, "start": time.time(),
                        "progress": open(progress).read() if progress and os.path.exists(progress) else None}) + "\n")
time.sleep(float(os.environ.get("FAKE_SRUN_SECONDS", "0")))
bad = set(n for n in os.environ.get("FAKE_BAD_NODES", "").split(",") if n)
pairs = [set(p.split("+")) for p in os.environ.get("FAKE_BAD_PAIRS", "").split(",") if p]
if set(nodes) & set(os.environ.get("FAKE_DOWN_NODES", "").split(",")):
    sys.stderr.write("srun: error: Unable to allocate resources: Requested node configuration is not available\n")
    sys.exit(1)
busbw = 120.3 if (bad & set(nodes) or any(p <= set(nodes) for p in pairs)) else 381.7
gpus = int(args[args.index("-g") + 1])
print("# nccl-tests version 2.18.3 nccl-headers=22703 nccl-library=22703")
print("# Collective test starting: all_reduce_perf")
print("# nThread 1 nGpus %d minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 1 iters: 20 agg iters: 1 "
      "validation: 1 graph: 0" % gpus)
print("#")
print("# Using devices")
for rank, node in enumerate(nodes):
    print("#  Rank %2d Group  0 Pid  %5d on %10s device  0 [0000:18:00] NVIDIA H100 80GB HBM3" % (rank, 4000 + rank, node))
print("#")
print("#                                                              out-of-place                       in-place")
print("#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong")
print("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)")
for size, frac in ((1073741824, 0.93), (4294967296, 0.98), (8589934592, 1.0)):
    bw = busbw * frac
    alg = bw / (2.0 * (len(nodes) - 1) / len(nodes))
    t = size / (alg * 1e3)
    print("%12d  %12d     float     sum      -1  %7.1f  %6.2f  %6.2f       0  %7.1f  %6.2f  %6.2f       0"
          % (size, size // 4, t, alg, bw, t, alg, bw))
print("# Out of bounds values : 0 OK")
print("# Avg bus bandwidth    : %.4f" % (busbw * 0.6))
print("#")
print("# Collective test concluded: all_reduce_perf")
'''


@pytest.fixture
def fake(tmp_path, monkeypatch):
    install_fake(tmp_path, monkeypatch, "srun", FAKE_SRUN)
    monkeypatch.setenv("FAKE_SRUN_LOG", str(tmp_path / "log"))
    for key in ("FAKE_BAD_NODES", "FAKE_BAD_PAIRS", "FAKE_SRUN_SECONDS", "FAKE_DOWN_NODES", "FAKE_PROGRESS"):
        monkeypatch.delenv(key, raising=False)
    return tmp_path


def calls(tmp_path):
    path = tmp_path / "log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def run(args, check_mode=False):
    return run_main(nccl_isolate, args, check_mode)


NODES = ["gpu%02d" % i for i in range(1, 9)]


def all_nodes_run(fake, monkeypatch):
    """What the fabric phase's run across all nodes printed (the fake srun, then its log entry removed)."""
    import subprocess
    srun = str(fake / "bin" / "srun")
    proc = subprocess.run([srun, "-N", "8", "-w", ",".join(NODES), "all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2",
                           "-g", "8", "-c", "1"], capture_output=True, text=True, check=False)
    (fake / "log").unlink()
    return proc.returncode, proc.stdout


def test_names_the_culprit_without_running_the_all_node_set_again(fake, monkeypatch):
    monkeypatch.setenv("FAKE_BAD_NODES", "gpu06")
    rc, stdout = all_nodes_run(fake, monkeypatch)
    out = run({"nodes": NODES, "thresholds": {"nccl_multi_node_busbw_gbps": 385}, "all_nodes_rc": rc,
               "all_nodes_stdout": stdout, "gpus_per_node": 8, "srun_extra_args": ["--mpi=pmix"]})
    assert "failed" not in out, out
    assert out["needed"] is True and out["threshold_gbps"] == 346.5
    assert out["culprits"] == ["gpu06"] and out["pairs"] == [] and out["unresolved"] == []
    assert out["runs"][0] == {"round": 0, "nodes": NODES, "passed": False, "busbw_gbps": 120.3, "rc": 0, "ok": True,
                              "problems": [], "cmd": None}
    assert out["evidence"]["gpu06"]["busbw_gbps"] == 120.3 and "gpu06" in out["evidence"]["gpu06"]["nodes"]
    logged = calls(fake)
    assert all(len(c["nodes"]) < 8 for c in logged)
    first_half = [c for c in logged if c["nodes"] == NODES[:4]]
    assert first_half[0]["argv"] == [
        "-N", "4", "-w", "gpu01,gpu02,gpu03,gpu04", "--ntasks-per-node=1", "--exclusive", "--time=15",
        "--immediate=120", "--export=ALL,NCCL_ALGO=Ring", "--mpi=pmix",
        "all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8", "-c", "1"]
    assert out["rounds"] == 3 and len(logged) == 2 + 2 + 2  # halves, quarters, one reference pair per suspect


def test_disjoint_sets_of_a_round_run_at_once(fake, monkeypatch):
    monkeypatch.setenv("FAKE_BAD_NODES", "gpu02")
    monkeypatch.setenv("FAKE_SRUN_SECONDS", "1")
    out = run({"nodes": NODES, "min_busbw_gbps": 300, "all_nodes_rc": 0,
               "all_nodes_stdout": "no rows: the run was cut short"})
    assert out["culprits"] == ["gpu02"], out
    logged = calls(fake)
    first_round = [c for c in logged if len(c["nodes"]) == 4]
    # both halves started before either could end (each takes 1 s)
    assert len(first_round) == 2 and abs(first_round[0]["start"] - first_round[1]["start"]) < 1


def test_a_pair_at_fault(fake, monkeypatch):
    monkeypatch.setenv("FAKE_BAD_PAIRS", "gpu03+gpu08")
    out = run({"nodes": NODES, "min_busbw_gbps": 346.5})
    assert out["pairs"] == [["gpu03", "gpu08"]] and out["culprits"] == [], out
    assert out["runs"][0]["cmd"].startswith(str(fake / "bin" / "srun") + " -N 8 -w gpu01,")


def test_all_nodes_pass_when_run_again_names_nothing(fake):
    out = run({"nodes": NODES, "min_busbw_gbps": 346.5})
    assert out["needed"] is True and out["culprits"] == [] and out["pairs"] == [] and out["unresolved"] == []
    assert len(calls(fake)) == 1


def test_a_passing_all_node_result_runs_nothing(fake, monkeypatch):
    rc, stdout = all_nodes_run(fake, monkeypatch)
    out = run({"nodes": NODES, "min_busbw_gbps": 346.5, "all_nodes_rc": rc, "all_nodes_stdout": stdout})
    assert out["needed"] is False and calls(fake) == [] and out["runs"][0]["passed"] is True


def test_a_node_that_cannot_be_allocated_is_a_culprit_with_the_srun_error(fake, monkeypatch):
    monkeypatch.setenv("FAKE_DOWN_NODES", "gpu04")
    out = run({"nodes": NODES, "min_busbw_gbps": 346.5})
    assert out["culprits"] == ["gpu04"], out
    evidence = out["evidence"]["gpu04"]
    assert evidence["rc"] == 1 and evidence["busbw_gbps"] is None
    assert evidence["problems"][0] == ("exit status 1: srun: error: Unable to allocate resources: Requested node "
                                       "configuration is not available")


def test_check_mode_runs_nothing(fake):
    out = run({"nodes": NODES, "min_busbw_gbps": 346.5, "all_nodes_rc": 1, "all_nodes_stdout": ""}, check_mode=True)
    assert out["skipped"] is True and calls(fake) == [] and out["culprits"] == []
    assert len(out["commands"]) == 2 and "-w gpu01,gpu02,gpu03,gpu04" in out["commands"][0]


def test_argument_errors(fake):
    assert "min_busbw_gbps" in run({"nodes": NODES})["msg"]
    assert "mutually exclusive" in run({"nodes": NODES, "min_busbw_gbps": 1, "thresholds": {}})["msg"]
    assert run({"nodes": ["gpu01"], "min_busbw_gbps": 1})["msg"] == (
        "nodes: a run across nodes needs two or more, got ['gpu01']")
    out = run({"nodes": NODES, "thresholds": {"nccl_min_fracton": 0.5}})
    assert out["failed"] and out["msg"].startswith("thresholds: validation_judge: unknown threshold key(s) "
                                                   "nccl_min_fracton")


def test_the_search_says_how_far_it_is_in_its_progress_file_and_removes_it_at_the_end(fake, monkeypatch):
    monkeypatch.setenv("FAKE_BAD_NODES", "gpu06")
    progress = fake / "run" / "clusterforge" / "isolate.json"
    (fake / "run").mkdir(mode=0o755)
    monkeypatch.setenv("FAKE_PROGRESS", str(progress))
    rc, stdout = all_nodes_run(fake, monkeypatch)
    out = run({"nodes": NODES, "min_busbw_gbps": 300, "all_nodes_rc": rc, "all_nodes_stdout": stdout,
               "progress_file": str(progress)})
    assert out["culprits"] == ["gpu06"], out
    seen = [json.loads(c["progress"])["progress"] for c in calls(fake)]
    # What each srun of the search could have been reported with: the runs done so far and the round running.
    assert seen[0] == "NCCL runs done: 0 (0 passed) in 0 rounds; round 1 running: 2 runs of 4 nodes"
    assert seen[2] == "NCCL runs done: 2 (1 passed) in 1 rounds; round 2 running: 2 runs of 2 nodes"
    assert seen[-1].startswith("NCCL runs done: 4 (") and "round 3 running" in seen[-1]
    assert not progress.exists()
    assert oct((fake / "run" / "clusterforge").stat().st_mode & 0o777) == "0o700"


def test_a_progress_file_in_a_directory_others_may_write_is_refused_before_any_run(fake, monkeypatch):
    shared = fake / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    out = run({"nodes": NODES, "min_busbw_gbps": 300, "progress_file": str(shared / "isolate.json")})
    assert out["failed"] and out["msg"].startswith("progress_file: ") and "writable by others" in out["msg"], out
    assert calls(fake) == []


SEARCH_PLAY = """---
- name: The validation's NCCL search in the background, as the validate role runs it
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Search (in the background)
      clusterforge.gpu.nccl_isolate:
        nodes: [gpu01, gpu02, gpu03, gpu04, gpu05, gpu06, gpu07, gpu08]
        min_busbw_gbps: 300
        progress_file: "@DIR@/run/clusterforge/isolate.json"
      async: 300
      poll: 0
      register: job
    - name: Wait for the search
      clusterforge.gpu.async_progress:
        jid: "{{ job.ansible_job_id }}"
        progress_file: "@DIR@/run/clusterforge/isolate.json"
      register: search
      until: search.finished
      retries: 100
      delay: 1
    - name: Keep the result
      ansible.builtin.copy:
        content: "{{ search | to_json }}"
        dest: "@DIR@/search.json"
        mode: "0600"
"""


@pytest.mark.skipif(not os.path.exists(os.path.join(BIN, "ansible-playbook")), reason="ansible-playbook not in the venv")
def test_in_the_background_the_search_reports_its_runs_and_its_result(fake):
    """As the validate role runs it: in the background, waited for with clusterforge.gpu.async_progress (the fake
    srun's runs take 2 s, gpu06 is slow). The retried results carry the search's own progress, the finished one the
    culprit."""
    tmp_path = fake
    (tmp_path / "run").mkdir(mode=0o755)
    play = tmp_path / "play.yml"
    play.write_text(SEARCH_PLAY.replace("@DIR@", str(tmp_path)))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "tests", "lab", "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"), FAKE_SRUN_SECONDS="2",
               FAKE_BAD_NODES="gpu06", ANSIBLE_CALLBACK_RESULT_FORMAT="json",
               ANSIBLE_DISPLAY_OK_HOSTS="1")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-vvv", "-i", "localhost,", "-c", "local",
                           "-e", "ansible_python_interpreter=" + sys.executable, str(play)],
                          env=env, capture_output=True, text=True, timeout=240, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    search = json.loads((tmp_path / "search.json").read_text())
    assert search["finished"] is True and search["culprits"] == ["gpu06"], search
    # The retries Ansible printed (-vvv: with their results) carry what the search said of itself while it ran.
    said = re.findall(r'"progress": "(NCCL runs done: [^"]*)"', out)
    # No run across all nodes was given: the search starts with it.
    assert said and said[0] == "NCCL runs done: 0 (0 passed) in 0 rounds; round 1 running: 1 run of 8 nodes", out
    assert "NCCL runs done: 1 (0 passed) in 1 rounds; round 2 running: 2 runs of 4 nodes" in said, said
    assert not (tmp_path / "run" / "clusterforge" / "isolate.json").exists()
