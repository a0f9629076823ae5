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
    results[2].update({"warm_seconds": 85.0, "warm_seconds_ansible": 151.0, "warm_changed_ansible": 0,
                       "warm_tasks_per_gpu_node": 96.0, "warm_skipped_per_gpu_node": 40.0,
                       "cold_controller_cpu_seconds_per_gpu_node": 16.0, "warm_controller_cpu_seconds_per_gpu_node": 4.5,
                       "slurm_stages_seconds": 15.2, "slurm_stages_changed": 0})
    per_node, one_node = bench.per_node_cost(results)
    doc = {"date": "2026-11-22 21:00 UTC", "machine": "vm", "cpus": 2, "executor": "mitogen", "results": results,
           "cold_seconds_per_added_node": per_node, "cold_seconds_one_node": one_node,
           "cold_cpu_floor": bench.cpu_floor(results, 2)}
    doc["targets"] = bench.targets(doc)
    # Mitogen 85 s <= 90 s; Ansible's executor 151 s > 150 s; 96 tasks <= 100; Slurm stages 15.2 s > 14 s.
    assert doc["targets"] == {"warm_8_nodes_mitogen_at_most_90s_changed_0": True,
                              "warm_8_nodes_ansible_at_most_150s_changed_0": False,
                              "tasks_per_gpu_node_at_most_100": True, "slurm_stages_at_most_14s": False}
    page = bench.markdown(doc)
    assert "cannot cost less than 22.5 s of wall time" in page
    assert "target `warm_8_nodes_ansible_at_most_150s_changed_0`: NOT met" in page
    assert "| 96 (40) | 16.0 s / 4.5 s | 15 s |" in page
    warm = dict(results[2], warm_changed=1)
    assert bench.targets(dict(doc, results=results[:2] + [warm]))["warm_8_nodes_mitogen_at_most_90s_changed_0"] is False
    many = dict(results[2], warm_tasks_per_gpu_node=125.0)
    assert bench.targets(dict(doc, results=results[:2] + [many]))["tasks_per_gpu_node_at_most_100"] is False


def test_tasks_per_node_reads_the_recap_of_the_gpu_nodes_only():
    out = ("gpu01                      : ok=90   changed=1    unreachable=0    failed=0    skipped=40   rescued=0    ignored=0\n"
           "gpu02                      : ok=94   changed=0    unreachable=0    failed=0    skipped=44   rescued=0    ignored=0\n"
           "head01                     : ok=300  changed=0    unreachable=0    failed=0    skipped=9    rescued=0    ignored=0\n")
    assert bench.tasks_per_node(out, ["gpu01", "gpu02"]) == (92.0, 42.0)
    assert bench.tasks_per_node(out, ["gpu09"]) == (None, None)
