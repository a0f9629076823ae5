# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ib_write_bw module tests: a fake ib_write_bw on PATH that prints perftest's layout (its own numbers), logs every
start and can refuse connections for a while (a server that does not listen yet)."""

import json
import os
import time

import pytest

from ansible_collections.clusterforge.gpu.plugins.modules import ib_write_bw
from cf_module_helper import install_fake, run_main
from fake_fabric import FAKE_IB_WRITE_BW, FAKE_SRUN, install_round_program


@pytest.fixture
def fake(tmp_path, monkeypatch):
    install_fake(tmp_path, monkeypatch, "ib_write_bw", FAKE_IB_WRITE_BW)
    monkeypatch.setenv("FAKE_IB_LOG", str(tmp_path / "log"))
    for key in list(os.environ):
        if key.startswith("FAKE_IB_") and key != "FAKE_IB_LOG":
            monkeypatch.delenv(key)
    return tmp_path


def calls(tmp_path):
    path = tmp_path / "log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def overlapped(tmp_path):
    """Every test started before the first one ended: they ran at once."""
    ends = [float(x) for x in (tmp_path / "log.end").read_text().split()]
    return max(c["t"] for c in calls(tmp_path)) < min(ends)


def run(args, check_mode=False):
    return run_main(ib_write_bw, args, check_mode)


TESTS = [{"hca": "mlx5_0", "port": 18515}, {"hca": "mlx5_1", "port": 18516}, {"hca": "mlx5_2", "port": 18517}]


def test_plan_runs_nothing_and_gives_rounds_and_schedule(fake):
    out = run({"mode": "plan", "nodes": ["a", "b", "c", "d", "e"], "hcas": ["mlx5_0", "mlx5_1"],
               "max_concurrent_pairs": 1})
    assert "failed" not in out and out["changed"] is False and out["node_pairs"] == 5
    assert len(out["rounds"]) == 5  # 2 + 2 + 1 pairs, one pair per round
    assert out["rounds"][0] == [{"client": "a", "server": "b", "hca": "mlx5_0", "port": 18515},
                                {"client": "a", "server": "b", "hca": "mlx5_1", "port": 18516}]
    assert out["schedule"]["e"][4] == {"side": "client", "peer": "a",
                                       "tests": [{"hca": "mlx5_0", "port": 18515}, {"hca": "mlx5_1", "port": 18516}]}
    assert calls(fake) == []
    assert run({"mode": "plan", "nodes": ["a", "b"], "hcas": ["mlx5_0"]}, check_mode=True)["node_pairs"] == 1


def test_plan_refuses_bad_input(fake):
    out = run({"mode": "plan", "nodes": ["a", "b", "a"], "hcas": ["mlx5_0"]})
    assert out["failed"] and out["msg"] == "cannot plan ib_write_bw: nodes: a appears twice"
    out = run({"mode": "plan", "nodes": ["a", "b"], "hcas": ["mlx5_0"], "max_concurrent_pairs": -1})
    assert out["failed"] and "max_concurrent_pairs" in out["msg"]
    out = run({"mode": "plan", "nodes": ["a", "b"]})
    assert out["failed"] and "hcas" in out["msg"]


def test_client_runs_every_hca_at_once_and_parses_each(fake, monkeypatch):
    monkeypatch.setenv("FAKE_IB_CLIENT_SECONDS", "1")
    monkeypatch.setenv("FAKE_IB_GBPS_mlx5_1", "190.0")
    out = run({"mode": "client", "peer": "10.2.0.22", "tests": TESTS, "size_bytes": 1048576, "iterations": 5000})
    assert "failed" not in out, out
    assert overlapped(fake)
    assert [t["hca"] for t in out["tests"]] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert [t["bw_peak_gbits"] for t in out["tests"]] == [388.4, 190.0, 388.4]
    assert all(t["rc"] == 0 and t["attempts"] == 1 and t["result"]["ok"] for t in out["tests"])
    assert out["tests"][0]["cmd"].endswith("ib_write_bw -d mlx5_0 -p 18515 --report_gbits -s 1048576 -n 5000 "
                                           "10.2.0.22")
    logged = calls(fake)
    assert sorted(c["argv"][1] for c in logged) == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert all(c["side"] == "client" for c in logged)


def test_server_runs_every_hca_at_once_on_its_port(fake, monkeypatch):
    monkeypatch.setenv("FAKE_IB_SERVER_SECONDS", "1")
    out = run({"mode": "server", "tests": TESTS, "extra_args": ["-F"]})
    assert "failed" not in out, out
    assert overlapped(fake)
    assert [t["rc"] for t in out["tests"]] == [0, 0, 0] and all(t["result"] is None for t in out["tests"])
    assert sorted(c["argv"][3] for c in calls(fake)) == ["18515", "18516", "18517"]
    assert all(c["side"] == "server" and "-F" in c["argv"] for c in calls(fake))


def test_client_retries_while_the_server_does_not_listen(fake, monkeypatch):
    monkeypatch.setenv("FAKE_IB_REFUSE", "2")
    out = run({"mode": "client", "peer": "gpu02", "tests": TESTS[:1], "connect_timeout": 20})
    assert "failed" not in out, out
    assert out["tests"][0]["attempts"] == 3 and out["tests"][0]["bw_peak_gbits"] == 388.4


def test_client_gives_up_after_connect_timeout(fake, monkeypatch):
    monkeypatch.setenv("FAKE_IB_REFUSE", "100")
    out = run({"mode": "client", "peer": "gpu02", "tests": TESTS[:1], "connect_timeout": 2})
    assert out["failed"] and out["tests"][0]["rc"] == 1 and 1 < out["tests"][0]["attempts"] <= 3
    assert out["msg"].startswith("ib_write_bw client to gpu02 failed: mlx5_0: exit status 1: ")


def test_a_failing_hca_is_named_and_the_others_still_measured(fake, monkeypatch):
    monkeypatch.setenv("FAKE_IB_FAIL", "mlx5_2")
    out = run({"mode": "client", "peer": "gpu02", "tests": TESTS})
    assert out["failed"] and out["msg"] == ("ib_write_bw client to gpu02 failed: mlx5_2: exit status 1: Couldn't get "
                                            "context for the device")
    assert [t["rc"] for t in out["tests"]] == [0, 0, 1]
    assert out["tests"][2]["bw_peak_gbits"] is None and out["tests"][2]["result"]["ok"] is False
    assert out["tests"][0]["bw_peak_gbits"] == 388.4


def test_a_server_without_client_times_out(fake, monkeypatch):
    monkeypatch.setenv("FAKE_IB_SERVER_SECONDS", "30")
    start = time.time()
    out = run({"mode": "server", "tests": TESTS[:2], "timeout": 1})
    assert time.time() - start < 25  # stopped, not the 30 s the servers would wait
    assert out["failed"] and [t["timed_out"] for t in out["tests"]] == [True, True]
    assert [t["rc"] for t in out["tests"]] == [None, None]
    assert out["msg"] == "ib_write_bw server failed: mlx5_0: no result within 1 s; mlx5_1: no result within 1 s"


def test_check_mode_measures_nothing(fake):
    out = run({"mode": "client", "peer": "gpu02", "tests": TESTS}, check_mode=True)
    assert out["skipped"] is True and out["changed"] is False and calls(fake) == []
    assert [t["rc"] for t in out["tests"]] == [None, None, None]
    assert "ib_write_bw -d mlx5_1 -p 18516" in out["tests"][1]["cmd"]


def test_argument_errors(fake):
    assert "peer" in run({"mode": "client", "tests": TESTS})["msg"]
    out = run({"mode": "server", "tests": [{"hca": "mlx5_0", "port": 1}, {"hca": "mlx5_1", "port": 1}]})
    assert out["failed"] and "its own TCP port" in out["msg"]


def test_missing_tool_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    out = run({"mode": "server", "tests": TESTS})
    assert out["failed"] and out["msg"] == ("ib_write_bw was not found on this host; install it or set "
                                            "ib_write_bw_path")


# ------------------------------------------------------------------------------------ mode=round, through srun

@pytest.fixture
def srun(fake, monkeypatch):
    """The fake srun, and the node program installed as the slurm_compute role installs it (beside the round code)."""
    install_fake(fake, monkeypatch, "srun", FAKE_SRUN)
    monkeypatch.setenv("FAKE_SRUN_LOG", str(fake / "srun.log"))
    monkeypatch.delenv("FAKE_SRUN_BUSY", raising=False)
    monkeypatch.delenv("FAKE_SRUN_LOST", raising=False)
    return install_round_program(fake / "libexec")


def srun_calls(tmp_path):
    path = tmp_path / "srun.log"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def round_of(nodes, hcas=("mlx5_0", "mlx5_1")):
    plan = run({"mode": "plan", "nodes": nodes, "hcas": list(hcas)})
    return plan["rounds"]


def test_a_round_runs_as_one_srun_every_pair_and_hca_at_once(fake, srun, monkeypatch):
    monkeypatch.setenv("FAKE_IB_CLIENT_SECONDS", "2")
    monkeypatch.setenv("FAKE_IB_SERVER_SECONDS", "2")
    monkeypatch.setenv("FAKE_IB_GBPS_mlx5_1", "190.0")
    first = round_of(["gpu01", "gpu02", "gpu03", "gpu04"])[0]  # gpu01 -> gpu02 and gpu03 -> gpu04
    out = run({"mode": "round", "round": first, "node_program": srun, "timeout": 30,
               "addresses": {"gpu02": "10.78.0.22", "gpu04": "10.78.0.24"}})
    assert "failed" not in out, out
    # One srun for the whole round, on its four nodes, one task each, exclusive, with a time limit.
    (call,) = srun_calls(fake)
    assert call[:4] == ["-N", "4", "-w", "gpu01,gpu02,gpu03,gpu04"]
    assert "--ntasks-per-node=1" in call and "--exclusive" in call and "--immediate=120" in call
    assert "--time=2" in call  # (30 s + 30 s of connection retries) rounded up to a minute, plus one
    assert out["cmd"].endswith("clusterforge-ib-write-bw-round '<round spec>'")
    assert out["nodes_reported"] == ["gpu01", "gpu02", "gpu03", "gpu04"]
    # Every server and client of every pair and HCA ran at once, each client against its server's address.
    logged = calls(fake)
    assert len(logged) == 8 and overlapped(fake)
    clients = sorted((c["argv"][1], c["argv"][-1]) for c in logged if c["side"] == "client")
    assert clients == [("mlx5_0", "10.78.0.22"), ("mlx5_0", "10.78.0.24"), ("mlx5_1", "10.78.0.22"),
                       ("mlx5_1", "10.78.0.24")]
    assert [(t["client"], t["server"], t["hca"], t["port"]) for t in out["tests"]] == [
        ("gpu01", "gpu02", "mlx5_0", 18515), ("gpu01", "gpu02", "mlx5_1", 18516),
        ("gpu03", "gpu04", "mlx5_0", 18515), ("gpu03", "gpu04", "mlx5_1", 18516)]
    assert [t["bw_peak_gbits"] for t in out["tests"]] == [388.4, 190.0, 388.4, 190.0]
    assert all(t["rc"] == 0 and t["msg"] is None and t["result"]["ok"] for t in out["tests"])


def test_long_results_of_several_nodes_come_back_whole_through_srun(fake, srun, monkeypatch):
    """srun carries a task's output in messages of at most 1 KiB and mixes the tasks' messages (the fake srun does
    as well): a node's result of several KiB must still come back whole, for every node."""
    monkeypatch.setenv("FAKE_IB_NOISE", "6000")
    first = round_of(["gpu01", "gpu02", "gpu03", "gpu04"], hcas=["mlx5_%d" % i for i in range(4)])[0]
    out = run({"mode": "round", "round": first, "node_program": srun})
    assert "failed" not in out, out
    assert out["nodes_reported"] == ["gpu01", "gpu02", "gpu03", "gpu04"]
    assert all(t["rc"] == 0 and t["bw_peak_gbits"] == 388.4 for t in out["tests"]) and len(out["tests"]) == 8


def test_a_round_names_each_failed_test_and_keeps_the_others(fake, srun, monkeypatch):
    monkeypatch.setenv("FAKE_IB_FAIL", "mlx5_1")
    monkeypatch.setenv("FAKE_IB_REFUSE", "1")  # every client's first connection is refused: it starts again
    first = round_of(["gpu01", "gpu02"])[0]
    out = run({"mode": "round", "round": first, "node_program": srun, "connect_timeout": 10})
    assert out["failed"] and out["msg"] == ("ib_write_bw round failed: gpu01 -> gpu02 mlx5_1: Couldn't get context "
                                            "for the device")
    assert [t["rc"] for t in out["tests"]] == [0, 1]
    assert out["tests"][0]["attempts"] == 2 and out["tests"][0]["bw_peak_gbits"] == 388.4
    assert out["tests"][1]["result"]["ok"] is False


def test_a_node_that_reports_nothing_fails_its_tests_with_srun_reason(fake, srun, monkeypatch):
    monkeypatch.setenv("FAKE_SRUN_LOST", "gpu03")
    first = round_of(["gpu01", "gpu02", "gpu03", "gpu04"], hcas=["mlx5_0"])[0]
    out = run({"mode": "round", "round": first, "node_program": srun})
    assert out["failed"] and out["rc"] == 137 and out["nodes_reported"] == ["gpu01", "gpu02", "gpu04"]
    assert out["tests"][0]["rc"] == 0 and out["tests"][0]["msg"] is None
    assert out["tests"][1]["rc"] is None
    assert out["tests"][1]["msg"] == "no result from gpu03 (srun exit 137: srun: error: gpu03: task 0: Killed)"


def test_a_node_program_from_another_version_is_named(fake, srun, monkeypatch):
    """An older node program refuses the spec and says why on stderr; that reason, not srun's, names the failure."""
    with open(srun) as handle:
        program = handle.read()
    with open(srun, "w") as handle:
        handle.write(program.replace("\nimport clusterforge_fabric_rounds as rounds",
                                     "\nimport clusterforge_fabric_rounds as rounds\nrounds.SPEC_VERSION = 0"))
    out = run({"mode": "round", "round": round_of(["gpu01", "gpu02"], hcas=["mlx5_0"])[0], "node_program": srun})
    assert out["failed"] and out["nodes_reported"] == [] and calls(fake) == []
    assert out["tests"][0]["msg"] == (
        "no result from gpu01 (gpu01: round spec version 1, this program reads version 0: the node program and the "
        "collection differ (run site.yml's slurm_compute role on the nodes))")


def test_busy_nodes_fail_every_test_of_the_round(fake, srun, monkeypatch):
    monkeypatch.setenv("FAKE_SRUN_BUSY", "1")
    first = round_of(["gpu01", "gpu02"], hcas=["mlx5_0"])[0]
    out = run({"mode": "round", "round": first, "node_program": srun, "immediate_seconds": 5,
               "srun_extra_args": ["--partition=gpu"]})
    assert out["failed"] and calls(fake) == []
    assert "--immediate=5" in srun_calls(fake)[0] and "--partition=gpu" in srun_calls(fake)[0]
    assert out["tests"][0]["msg"] == ("no result from gpu01 (srun exit 1: srun: error: Unable to allocate resources: "
                                      "Requested nodes are busy)")


def test_a_round_in_check_mode_runs_nothing(fake, srun):
    out = run({"mode": "round", "round": round_of(["gpu01", "gpu02"])[0], "node_program": srun}, check_mode=True)
    assert out["skipped"] is True and out["changed"] is False
    assert srun_calls(fake) == [] and calls(fake) == []
    assert [t["rc"] for t in out["tests"]] == [None, None]


def test_a_round_refuses_a_node_in_two_pairs(fake, srun):
    bad = [{"client": "gpu01", "server": "gpu02", "hca": "mlx5_0", "port": 18515},
           {"client": "gpu02", "server": "gpu03", "hca": "mlx5_0", "port": 18515}]
    out = run({"mode": "round", "round": bad, "node_program": srun})
    assert out["failed"] and out["msg"] == "round: gpu02 is in two node pairs of the round"
    assert srun_calls(fake) == []
