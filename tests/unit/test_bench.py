"""The arithmetic of `make bench` (tests/bench/bench.py): the cost of an added GPU node, the least it could cost from
the CPU the cold run used, and the targets judged on them. No lab is started here."""

import importlib.util
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = importlib.util.spec_from_file_location("cf_bench", os.path.join(ROOT, "tests", "bench", "bench.py"))
bench = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench)


def row(nodes, cold, node_cpu=None, controller_cpu=None):
    r = {"gpu_nodes": nodes, "cold_seconds": cold, "warm_seconds": 20.0, "warm_changed": 0,
         "tool_calls_per_gpu_node": 16, "rolling_seconds": 30.0, "rolling_seconds_per_node": 15.0,
         "rolling_least_schedulable_percent": 75.0}
    if node_cpu is not None:
        r["cold_cpu_seconds_per_gpu_node"] = node_cpu
        r["cold_controller_cpu_seconds"] = controller_cpu
    return r


def test_per_node_cost_is_the_least_squares_line():
    assert bench.per_node_cost([row(2, 100.0)]) == (None, None)
    # 40 s fixed, 30 s a node: one node 70 s.
    assert bench.per_node_cost([row(2, 100.0), row(4, 160.0), row(8, 280.0)]) == (30.0, 70.0)


def test_cpu_floor_adds_the_node_and_the_controller_per_added_node_over_the_cpus():
    assert bench.cpu_floor([row(2, 100.0, 30.0, 50.0)], 2) is None
    assert bench.cpu_floor([row(2, 100.0), row(4, 160.0)], 2) is None
    floor = bench.cpu_floor([row(2, 100.0, 33.0, 50.0), row(4, 160.0, 31.0, 76.0), row(8, 280.0, 32.0, 128.0)], 2)
    # The controller used 13 s more for every added GPU node; a node's container 32 s on average.
    assert floor == {"node_cpu_seconds": 32.0, "controller_cpu_seconds_per_added_node": 13.0, "cpus": 2,
                     "least_wall_seconds_per_added_node": 22.5}


def test_the_targets_and_the_page_say_what_was_measured():
    results = [row(2, 100.0, 33.0, 50.0), row(4, 160.0, 31.0, 76.0), row(8, 280.0, 32.0, 128.0)]
    per_node, one_node = bench.per_node_cost(results)
    doc = {"date": "2026-11-22 21:00 UTC", "machine": "vm", "cpus": 2, "executor": "mitogen", "results": results,
           "cold_seconds_per_added_node": per_node, "cold_seconds_one_node": one_node,
           "cold_cpu_floor": bench.cpu_floor(results, 2)}
    doc["targets"] = bench.targets(doc)
    # 30 s an added node against 70 s for one: not under a quarter. Warm on 8 nodes: 20 s, changed 0.
    assert doc["targets"] == {"added_node_under_quarter_of_one_node": False, "warm_8_nodes_under_60s_changed_0": True}
    page = bench.markdown(doc)
    assert "cannot cost less than 22.5 s of wall time" in page
    assert "a fixed part of 40 s, the quarter target needs an added node under 13.3 s" in page
    assert "target `added_node_under_quarter_of_one_node`: NOT met" in page
    warm = dict(results[2], warm_changed=1)
    assert bench.targets(dict(doc, results=results[:2] + [warm]))["warm_8_nodes_under_60s_changed_0"] is False
