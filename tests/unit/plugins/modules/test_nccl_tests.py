# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl_tests: the one all_reduce_perf run of validation, the deep checks and the rolling gate, on a node or through
srun, against the lab's all_reduce_perf emulator (nccl-tests 2.18's layout) started by fake launchers on PATH that
record what they were given."""

import json
import os

import pytest

from conftest import EMULATORS
from cf_module_helper import install_fake, run_main

from ansible_collections.clusterforge.gpu.plugins.modules import nccl_isolate, nccl_tests
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.validation_judge import validation_judge

# all_reduce_perf on this node: records its argv and NCCL_ALGO, then is the emulator.
FAKE_ARP = r'''
import json, os, sys, time
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps({"tool": "all_reduce_perf", "argv": sys.argv[1:], "algo": os.environ.get("NCCL_ALGO")}) + "\n")
time.sleep(float(os.environ.get("FAKE_HANG", "0")))
os.execv(sys.executable, [sys.executable, os.path.join(os.environ["FAKE_EMULATORS"], "all_reduce_perf")] + sys.argv[1:])
'''
# srun: records its argv and what --export passes, then runs the command as task 0 of a job of -N nodes.
FAKE_SRUN = r'''
import json, os, sys
args = sys.argv[1:]
first = next(i for i, a in enumerate(args) if not a.startswith("-") and args[i - 1] not in ("-N", "-w"))
export = [a for a in args[:first] if a.startswith("--export=")]
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps({"tool": "srun", "argv": args, "export": export}) + "\n")
env = dict(os.environ, SLURM_NNODES=args[args.index("-N") + 1], SLURM_PROCID="0")
for item in export[0].split(",")[1:] if export else []:
    key, value = item.split("=", 1)
    env[key] = value
os.execve(sys.executable, [sys.executable, os.path.join(os.environ["FAKE_EMULATORS"], args[first])] + args[first + 1:], env)
'''


@pytest.fixture
def fake(tmp_path, monkeypatch):
    install_fake(tmp_path, monkeypatch, "all_reduce_perf", FAKE_ARP)
    install_fake(tmp_path, monkeypatch, "srun", FAKE_SRUN)
    monkeypatch.setenv("FAKE_LOG", str(tmp_path / "log"))
    monkeypatch.setenv("FAKE_EMULATORS", EMULATORS)
    monkeypatch.setenv("CLUSTERFORGE_EMU_STATE_DIR", str(tmp_path / "state"))
    for key in list(os.environ):
        if key.startswith(("CLUSTERFORGE_EMU_NCCL", "SLURM_", "NCCL_")) or key == "FAKE_HANG":
            monkeypatch.delenv(key)
    return tmp_path


def calls(tmp_path):
    with open(tmp_path / "log") as f:
        return [json.loads(line) for line in f]


def test_a_run_on_the_node_is_the_one_command_with_ring_and_is_read(fake):
    r = run_main(nccl_tests, {"gpus": 8})
    assert not r.get("failed") and r["changed"] is False, r
    (call,) = calls(fake)
    assert call == {"tool": "all_reduce_perf", "argv": ["-b", "8", "-e", "8G", "-f", "2", "-g", "8", "-c", "1"],
                    "algo": "Ring"}
    assert r["cmd"].endswith("all_reduce_perf -b 8 -e 8G -f 2 -g 8 -c 1") and r["nodes"] is None
    assert r["rc"] == 0 and r["ok"] is True and r["problems"] == [] and r["timed_out"] is False
    assert r["busbw_gbps"] == pytest.approx(370, rel=0.02) == r["result"]["busbw_peak_gbps"]
    assert r["result"]["rows"][-1]["size_bytes"] == 8 * 1024 ** 3


def test_a_threshold_fails_the_task_with_why_and_passes_above_it(fake):
    r = run_main(nccl_tests, {"gpus": 8, "min_bytes": "1G", "min_busbw_gbps": 450})
    assert r["failed"] and r["msg"].startswith("all_reduce_perf on this node: bus bandwidth 3"), r
    assert r["msg"].endswith("GB/s, needs 450.0 GB/s") and r["busbw_gbps"] < 450
    assert calls(fake)[0]["argv"][:2] == ["-b", "1G"]
    r = run_main(nccl_tests, {"gpus": 8, "min_bytes": "1G", "min_busbw_gbps": 300})
    assert not r.get("failed"), r


def test_wrong_data_is_a_problem_and_fails_a_threshold_whatever_the_bandwidth(fake, monkeypatch):
    monkeypatch.setenv("CLUSTERFORGE_EMU_NCCL_WRONG", "1")
    r = run_main(nccl_tests, {"gpus": 8})
    assert not r.get("failed") and r["ok"] is False and r["rc"] == 1, r
    assert r["problems"][0] == "exit status 1" and any("wrong elements" in p for p in r["problems"])
    assert r["result"]["ok"] is False and r["result"]["problems"] == r["problems"]   # what the judge reads
    r = run_main(nccl_tests, {"gpus": 8, "min_busbw_gbps": 1})
    assert r["failed"] and "wrong elements" in r["msg"], r


def test_across_nodes_through_srun_with_slurms_time_limit_and_the_job_environment(fake):
    r = run_main(nccl_tests, {"gpus": 4, "nodes": ["gpu01", "gpu02", "gpu01"], "timeout": 61,
                              "srun_extra_args": ["--mpi=pmix"], "max_bytes": "1G"})
    assert not r.get("failed"), r
    (call,) = calls(fake)
    assert call["tool"] == "srun" and call["argv"] == [
        "-N", "2", "-w", "gpu01,gpu02", "--ntasks-per-node=1", "--exclusive", "--time=2", "--immediate=120",
        "--export=ALL,NCCL_ALGO=Ring", "--mpi=pmix", "all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-g", "4",
        "-c", "1"]
    assert r["nodes"] == ["gpu01", "gpu02"]
    assert r["busbw_gbps"] == pytest.approx(385, rel=0.02)   # the emulator's figure across nodes


def test_the_same_command_as_the_search_after_a_miss(fake):
    mine = run_main(nccl_tests, {"gpus": 8, "nodes": ["a", "b", "c"], "timeout": 900}, check_mode=True)
    theirs = run_main(nccl_isolate, {"nodes": ["a", "b", "c"], "min_busbw_gbps": 300, "time_limit_minutes": 15},
                      check_mode=True)
    assert mine["skipped"] and theirs["commands"] == [mine["cmd"]]
    assert not os.path.exists(fake / "log")


def test_no_algorithm_leaves_ncclalgo_unset(fake):
    run_main(nccl_tests, {"gpus": 8, "algorithm": None})
    run_main(nccl_tests, {"gpus": 8, "algorithm": "", "nodes": ["a", "b"]})
    local, across = calls(fake)
    assert local["algo"] is None and across["export"] == ["--export=ALL"]


def test_a_run_past_its_time_limit_is_stopped_and_reported(fake, monkeypatch):
    monkeypatch.setenv("FAKE_HANG", "30")
    r = run_main(nccl_tests, {"gpus": 8, "timeout": 1})
    assert not r.get("failed") and r["timed_out"] is True and r["rc"] is None, r
    assert r["problems"][0] == "stopped: no result within 1 s" and r["ok"] is False
    assert r["result"]["ok"] is False and r["result"]["problems"][0] == "stopped: no result within 1 s"
    r = run_main(nccl_tests, {"gpus": 8, "timeout": 1, "min_busbw_gbps": 100})
    assert r["failed"] and "stopped: no result within 1 s" in r["msg"]


def test_a_missing_program_fails_naming_it(fake, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    r = run_main(nccl_tests, {"gpus": 8})
    assert r["failed"] and r["msg"].startswith("all_reduce_perf was not found on this host"), r


@pytest.mark.parametrize("args, words", [
    ({"gpus": 0}, "gpus must be a positive number"),
    ({"gpus": 8, "nodes": ["gpu01"]}, "needs two or more"),
    ({"gpus": 8, "nodes": ["gpu01,gpu02", "gpu03"]}, "one node name"),
    ({"gpus": 8, "max_bytes": "8X"}, "max_bytes: must be a size nccl-tests reads"),
    ({"gpus": 8, "min_bytes": "-1"}, "min_bytes: must be a size nccl-tests reads"),
    ({"gpus": 8, "max_bytes": "0G"}, "max_bytes: must be a size nccl-tests reads"),
    ({"gpus": 8, "algorithm": "Ring;reboot"}, "NCCL_ALGO value"),
    ({"gpus": 8, "min_busbw_gbps": 0}, "min_busbw_gbps must be a positive"),
    ({"gpus": 8, "timeout": 0}, "timeout must be a positive"),
])
def test_bad_input_is_refused_before_anything_runs(fake, args, words):
    r = run_main(nccl_tests, args)
    assert r["failed"] and words in r["msg"], r
    assert not os.path.exists(fake / "log")


def _judged(nodes):
    report = validation_judge({"cluster": "x", "nodes": nodes})
    return dict(((c["id"], c["subject"]), c) for c in report["checks"] if c["id"] == "nccl.single_node")


def test_the_judge_reads_the_modules_result_a_miss_and_a_run_that_could_not_be_made(fake, monkeypatch):
    good = run_main(nccl_tests, {"gpus": 8})
    monkeypatch.setenv("CLUSTERFORGE_EMU_NCCL_WRONG", "1")
    wrong = run_main(nccl_tests, {"gpus": 8})
    monkeypatch.setenv("PATH", "/nonexistent")
    missing = run_main(nccl_tests, {"gpus": 8, "nodes": ["a", "b"]})
    assert missing["failed"] and "srun was not found" in missing["msg"]
    checks = _judged({"gpu01": {"nccl_local": good["result"]}, "gpu02": {"nccl_local": wrong["result"]},
                      "gpu03": {"nccl_local": {"error": missing["msg"]}}})
    assert checks[("nccl.single_node", "gpu01")]["status"] == "pass"
    bad = checks[("nccl.single_node", "gpu02")]
    assert bad["status"] == "fail" and "exit status 1" in bad["message"] and "wrong elements" in bad["message"]
    gone = checks[("nccl.single_node", "gpu03")]
    assert gone["status"] == "fail" and gone["message"].startswith("gpu03: single-node NCCL test could not run: srun")
