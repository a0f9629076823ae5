# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ib_write_bw plan (rounds of disjoint ring pairs) and the runner of a round's processes."""

import os
import random
import stat
import sys

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils import fabric_rounds
from ansible_collections.clusterforge.gpu.plugins.module_utils.fabric_rounds import (
    PlanError,
    node_schedule,
    ring_colouring,
    ring_edges,
    ring_rounds,
    run_concurrently,
)

HCAS = ["mlx5_%d" % i for i in range(8)]


def nodes(n):
    return ["gpu%03d" % i for i in range(1, n + 1)]


def test_ring_edges():
    assert ring_edges([]) == [] and ring_edges(["a"]) == []
    assert ring_edges(["a", "b"]) == [("a", "b")]
    assert ring_edges(["a", "b", "c"]) == [("a", "b"), ("b", "c"), ("c", "a")]


@pytest.mark.parametrize("n", list(range(2, 40)) + [127, 128, 255, 256, 511, 512])
def test_every_ring_edge_once_per_hca_no_node_twice_in_a_round(n):
    hosts = nodes(n)
    plan = ring_rounds(hosts, HCAS, max_pairs=None)
    want = 1 if n == 2 else 2 if n % 2 == 0 else 3
    assert len(plan) == want
    seen = {}
    for index, round_tests in enumerate(plan):
        pairs = set((t["client"], t["server"]) for t in round_tests)
        members = [node for pair in pairs for node in pair]
        assert len(members) == len(set(members)), "round %d has a node twice" % index
        for test in round_tests:
            key = (test["client"], test["server"], test["hca"])
            assert key not in seen
            seen[key] = test["port"]
            assert test["port"] == 18515 + HCAS.index(test["hca"])
    expected = set((c, s, h) for c, s in ring_edges(hosts) for h in HCAS)
    assert set(seen) == expected and len(seen) == (1 if n == 2 else n) * len(HCAS)


def test_a_ring_of_512_nodes_with_8_hcas_is_4096_tests_in_2_rounds():
    plan = ring_rounds(nodes(512), HCAS)
    assert [len(r) for r in plan] == [256 * 8, 256 * 8]


@pytest.mark.parametrize("n,bound", [(512, 64), (511, 64), (10, 1), (9, 2), (100, 7)])
def test_chunks_respect_the_bound(n, bound):
    plan = ring_rounds(nodes(n), HCAS[:2], max_pairs=bound)
    colours = ring_colouring(nodes(n))
    assert len(plan) == sum(-(-len(c) // bound) for c in colours)
    for round_tests in plan:
        pairs = set((t["client"], t["server"]) for t in round_tests)
        assert 0 < len(pairs) <= bound
        members = [node for pair in pairs for node in pair]
        assert len(members) == len(set(members))
    assert sum(len(r) for r in plan) == n * 2


def test_schedule_gives_each_node_its_side_peer_and_ports():
    plan = ring_rounds(["a", "b", "c"], ["mlx5_0", "mlx5_1"], base_port=20000)
    schedule = node_schedule(plan, ["a", "b", "c", "d"])
    both = [{"hca": "mlx5_0", "port": 20000}, {"hca": "mlx5_1", "port": 20001}]
    assert schedule["a"] == [{"side": "client", "peer": "b", "tests": both}, None,
                             {"side": "server", "peer": "c", "tests": both}]
    assert schedule["b"][0]["side"] == "server" and schedule["b"][1]["side"] == "client" and schedule["b"][2] is None
    assert schedule["d"] == [None, None, None]


def test_bad_input():
    with pytest.raises(PlanError, match="appears twice"):
        ring_rounds(["a", "b", "a"], HCAS)
    with pytest.raises(PlanError, match="at least one HCA"):
        ring_rounds(["a", "b"], [])
    with pytest.raises(PlanError, match="TCP port range"):
        ring_rounds(["a", "b"], HCAS, base_port=65530)
    assert ring_rounds(["a"], HCAS) == []


# ---------------------------------------------------------------- run_concurrently
def script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("#!%s\n%s" % (sys.executable, body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_runs_at_once_and_in_order(tmp_path):
    body = ("import sys, time\nprint(time.time())\ntime.sleep(float(sys.argv[1]))\nprint(time.time())\n"
            "sys.exit(int(sys.argv[2]))\n")
    prog = script(tmp_path, "sleeper", body)
    out = run_concurrently([[prog, "1", "0"], [prog, "1", "3"], [prog, "0.5", "0"]], timeout=60)
    assert [r["rc"] for r in out] == [0, 3, 0]
    times = [[float(x) for x in r["stdout"].split()] for r in out]
    assert max(t[0] for t in times) < min(t[1] for t in times)  # every one started before any ended
    assert all(r["attempts"] == 1 and not r["timed_out"] for r in out)


def test_bound_on_concurrency(tmp_path):
    marker = tmp_path / "running"
    marker.mkdir()
    prog = script(tmp_path, "counter", "import os, sys, time\nd = %r\np = os.path.join(d, str(os.getpid()))\n"
                                       "open(p, 'w').close()\nprint(len(os.listdir(d)))\ntime.sleep(0.2)\n"
                                       "os.remove(p)\n" % str(marker))
    out = run_concurrently([[prog]] * 6, timeout=30, max_concurrent=2)
    assert max(int(r["stdout"]) for r in out) <= 2


def test_timeout_stops_the_process(tmp_path):
    prog = script(tmp_path, "hang", "import time\ntime.sleep(60)\n")
    out = run_concurrently([[prog]], timeout=0.3)
    assert out[0]["timed_out"] is True and out[0]["rc"] is None


def test_retry_while_the_server_does_not_listen(tmp_path):
    state = tmp_path / "tries"
    prog = script(tmp_path, "client", "import sys\np = %r\ntry:\n    n = int(open(p).read())\nexcept IOError:\n"
                                      "    n = 0\nopen(p, 'w').write(str(n + 1))\nif n < 2:\n"
                                      "    sys.stderr.write(\"Couldn't connect to h:1\\n\")\n    sys.exit(1)\n"
                                      "print('ok')\n" % str(state))
    out = run_concurrently([[prog]], timeout=30, retry_while=lambda rc, o, e: rc != 0 and "connect" in e,
                           retry_seconds=10, retry_delay=0.05)
    assert out[0]["rc"] == 0 and out[0]["attempts"] == 3 and out[0]["stdout"].strip() == "ok"


def test_a_command_that_cannot_start(tmp_path):
    out = run_concurrently([[os.path.join(str(tmp_path), "missing")]], timeout=5)
    assert out[0]["rc"] is None and "cannot run" in out[0]["stderr"]


# ------------------------------------------------------------------------ a round's spec and the nodes' results

def _noise(chars, seed=0):
    """Text that does not compress: the results' pieces then take several lines."""
    rng = random.Random(seed)
    return "".join(rng.choice("0123456789abcdef\n") for dummy in range(chars))


def _run(argv, rc=0, stdout="", stderr=""):
    return {"argv": argv, "rc": rc, "stdout": stdout, "stderr": stderr, "timed_out": False, "attempts": 1,
            "seconds": 0.5}


def test_round_spec_gives_each_node_its_part():
    plan = fabric_rounds.ring_rounds(["gpu01", "gpu02", "gpu03", "gpu04"], ["mlx5_0", "mlx5_1"])
    spec = fabric_rounds.round_spec(plan[0], {"gpu02": "10.78.0.22"}, 1048576, 5000, 120, 30, ["-F"])
    assert fabric_rounds.spec_nodes(spec) == ["gpu01", "gpu02", "gpu03", "gpu04"]
    tests = [{"hca": "mlx5_0", "port": 18515}, {"hca": "mlx5_1", "port": 18516}]
    assert fabric_rounds.spec_part(spec, "gpu01") == ("client", "gpu02", "10.78.0.22", tests)
    assert fabric_rounds.spec_part(spec, "gpu02") == ("server", "gpu01", None, tests)
    assert fabric_rounds.spec_part(spec, "gpu04") == ("server", "gpu03", None, tests)
    assert fabric_rounds.spec_part(spec, "gpu03")[2] == "gpu04"  # no address given: reached by its name
    assert fabric_rounds.spec_part(spec, "gpu09") is None
    with pytest.raises(fabric_rounds.PlanError, match="version 2, this program reads version 1"):
        fabric_rounds.spec_part(dict(spec, v=2), "gpu01")


def test_result_lines_are_short_and_come_back_whole_from_mixed_output():
    big = _noise(20000)  # a long stdout
    lines_a = fabric_rounds.result_lines("gpu01", "client", "gpu02", [_run(["ib_write_bw", "-d", "mlx5_0"], 0, big)],
                                         [{"hca": "mlx5_0", "port": 18515}])
    lines_b = fabric_rounds.result_lines("gpu02", "server", "gpu01", [_run(["ib_write_bw"], 1, "", "no device")],
                                         [{"hca": "mlx5_0", "port": 18515}])
    assert all(len(line) < 1000 for line in lines_a + lines_b)
    # Lines of both nodes, mixed, with noise between: each node's result comes back whole.
    mixed = []
    for i in range(max(len(lines_a), len(lines_b))):
        mixed += lines_a[i:i + 1] + ["srun: some message"] + lines_b[i:i + 1]
    results = fabric_rounds.parse_result_lines("\n".join(mixed))
    assert sorted(results) == ["gpu01", "gpu02"]
    assert len(lines_a) > 10
    assert results["gpu01"]["tests"][0]["stdout"] == big[-16384:]  # cut to its last 16 KiB
    assert results["gpu02"]["tests"][0]["rc"] == 1 and results["gpu02"]["side"] == "server"


def test_a_node_with_a_missing_or_broken_piece_has_no_result():
    lines = fabric_rounds.result_lines("gpu01", "client", "gpu02", [_run(["t"], 0, _noise(5000, 1))],
                                       [{"hca": "mlx5_0", "port": 1}])
    assert len(lines) >= 2
    assert fabric_rounds.parse_result_lines("\n".join(lines[:-1])) == {}
    broken = lines[:1] + [lines[1][:-10] + "!!!!!!!!!!"] + lines[2:]
    assert fabric_rounds.parse_result_lines("\n".join(broken)) == {}
    # A line cut in two by another node's output does not decode either.
    cut = lines[0][:300] + "\n" + lines[0][300:]
    assert fabric_rounds.parse_result_lines("\n".join([cut] + lines[1:])) == {}
    assert list(fabric_rounds.parse_result_lines("\n".join(lines))) == ["gpu01"]
