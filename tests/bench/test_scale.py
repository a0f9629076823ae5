"""The arithmetic of `make bench-scale` (tests/bench/scale.py): batches read from drain windows, the fabric stage read
from profile_tasks, per-node costs, growth, projections and the targets. No lab is started here."""

import importlib.util
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
SPEC = importlib.util.spec_from_file_location("cf_scale", os.path.join(ROOT, "tests", "bench", "scale.py"))
scale = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(scale)


def row(nodes, warm, validate, fabric, rolling, canary=20.0, batch=40.0, rc=0, changed=0):
    return {"gpu_nodes": nodes, "warm_seconds": warm, "warm_changed": changed, "warm_controller_cpu_seconds": warm * 1.5,
            "validate_seconds": validate, "validate_rc": rc, "validate_controller_cpu_seconds": validate,
            "validate_fabric_seconds": fabric, "rolling_seconds": rolling, "rolling_controller_cpu_seconds": rolling,
            "rolling_canary_seconds": canary, "rolling_batch_seconds_max": batch,
            "rolling_bound_seconds": canary + 4 * batch, "rolling_batches": [{"nodes": 1, "seconds": canary}]}


def test_batches_are_the_nodes_drained_before_any_of_them_resumed():
    w = scale.DrainWindows()
    w.drained = {"gpu01": 1.0, "gpu02": 12.0, "gpu03": 12.5, "gpu04": 30.0}
    w.resumed = {"gpu01": 10.0, "gpu02": 25.0, "gpu03": 28.0, "gpu04": 41.0}
    assert w.batches() == [{"nodes": 1, "seconds": 9.0}, {"nodes": 2, "seconds": 16.0}, {"nodes": 1, "seconds": 11.0}]
    w.resumed.pop("gpu04")  # never seen back: not a finished batch
    assert len(w.batches()) == 2


def test_the_fabric_stage_is_the_sum_of_the_fabric_and_nccl_tasks():
    out = "\n".join([
        "clusterforge.gpu.validate : Measure | GPUs ------------------------------------ 3.10s",
        "clusterforge.gpu.validate : NCCL all_reduce_perf across the node's GPUs (Ring; idle nodes) --- 5.00s",
        "clusterforge.gpu.validate : Fabric | ibdiagnet from the first GPU node ------- 2.00s",
        "clusterforge.gpu.validate : Fabric IB | ib_write_bw round 1 ------------------- 4.25s",
        "clusterforge.gpu.validate : NCCL | all_reduce_perf across every idle GPU node - 6.00s",
        "clusterforge.gpu.validate : Report | write validation.json ------------------- 1.00s",
    ])
    # the per-node probe of phase measure runs in every node's own play: recorded, not part of the stage
    assert scale.fabric_seconds(out) == 12.2
    assert [t["seconds"] for t in scale.fabric_tasks(out)] == [5.0, 2.0, 4.25, 6.0]
    assert scale.fabric_tasks(out)[3]["task"] == ("clusterforge.gpu.validate : NCCL | all_reduce_perf across every "
                                                  "idle GPU node")
    # a scale.json that counted the probe in the stage is read again from its task times
    r = dict(row(8, 80, 60, 17.2, 200), validate_fabric_tasks=scale.fabric_tasks(out))
    scale.analyse([r])
    assert (r["validate_fabric_seconds"], r["validate_node_nccl_seconds"]) == (12.2, 5.0)


PROFILED = """
PLAY [Validate - fabric] ****
TASK [clusterforge.gpu.validate : Measure | GPUs] ***
Saturday 28 November 2026  00:34:46 +0000 (0:00:00.112)       0:00:45.400 *****
ok: [gpu01]

TASK [clusterforge.gpu.validate : Fabric IB | ib_write_bw round by round] ***
Saturday 28 November 2026  00:34:49 +0000 (0:00:03.000)       0:00:48.900 *****
ok: [head01]

RUNNING HANDLER [clusterforge.gpu.validate : Restart x] ***
Saturday 28 November 2026  00:34:53 +0000 (0:00:04.100)       0:00:53.000 *****

PLAY RECAP *********************************************************************
Saturday 28 November 2026  00:34:55 +0000 (0:00:02.000)       0:00:55.000 *****
"""


def test_each_task_runs_from_its_stamp_to_the_next_one():
    windows = scale.task_windows(PROFILED)
    assert [w[0] for w in windows] == ["clusterforge.gpu.validate : Measure | GPUs",
                                       "clusterforge.gpu.validate : Fabric IB | ib_write_bw round by round",
                                       "clusterforge.gpu.validate : Restart x"]
    # the start of the playbook: the latest of wall clock - time since the start, here 00:34:46 - 45.4 s (the wall
    # clock is cut to the second: 00:34:49 - 48.9 s is 0.5 s earlier, and as true)
    began = scale.datetime.datetime(2026, 11, 28, 0, 34, 46, tzinfo=scale.datetime.timezone.utc).timestamp() - 45.4
    assert [(round(a - began, 3), round(b - began, 3)) for dummy, a, b in windows] == [
        (45.4, 48.9), (48.9, 53.0), (53.0, 55.0)]
    assert scale.task_windows("no profile here") == []


def sampler_with(samples, hosts):
    s = scale.CpuSampler.__new__(scale.CpuSampler)
    s.files = dict((h, "/nonexistent/%s" % h) for h in hosts)
    s.samples = samples
    return s


def test_the_cpu_of_a_window_is_split_between_the_nodes_and_the_controllers():
    hosts = ["head01", "stor01", "gpu01", "gpu02"]
    s = sampler_with([(100.0, {"head01": 1.0, "stor01": 0.0, "gpu01": 0.0, "gpu02": 0.0}, 10.0),
                      (102.0, {"head01": 2.0, "stor01": 0.5, "gpu01": 1.0, "gpu02": 3.0}, 17.5),
                      (104.0, {"head01": 2.0, "stor01": 0.5, "gpu01": 2.0, "gpu02": 3.0}, 19.5)], hosts)
    # 100..102: head01 1, stor01 0.5, GPU nodes 4, machine busy 7.5 of which 5.5 in the containers
    assert s.used([(100.0, 102.0)]) == {"gpu_nodes": 4.0, "slurm_controller": 1.0, "storage": 0.5,
                                        "controller_machine": 2.0}
    # halfway between samples the use is taken as even; two windows add up
    assert s.used([(101.0, 102.0), (102.0, 103.0)])["gpu_nodes"] == 2.5
    assert s.whole()["gpu_nodes"] == 5.0
    assert sampler_with([], hosts).used([(1.0, 2.0)]) is None


def test_the_fabric_stage_controller_cpu_is_judged_beside_its_wall_time():
    small = dict(row(8, 80, 60, 10, 200), validate_fabric_cpu_split_seconds={
        "gpu_nodes": 8.0, "slurm_controller": 1.0, "storage": 0.0, "controller_machine": 3.0})
    large = dict(row(64, 640, 340, 60, 620), validate_fabric_cpu_split_seconds={
        "gpu_nodes": 64.0, "slurm_controller": 2.0, "storage": 0.0, "controller_machine": 5.0})
    steps, judged = scale.analyse([small, large])
    assert judged["validation fabric stage at 64 nodes within 2x its time at 8"] is False
    name = [k for k in judged if k.startswith("validation fabric stage's controller CPU at 64")]
    assert len(name) == 1 and judged[name[0]] is True  # 7 s against 2 x 4 s; the nodes' 64 s left out
    large["validate_fabric_cpu_split_seconds"]["controller_machine"] = 7.0
    assert scale.analyse([small, large])[1][name[0]] is False
    page = scale.markdown(dict(date="d", executor="mitogen", forks=10, machine="m", cpus=2, results=[small, large],
                               steps=steps, targets=judged))
    assert "| 64 | fabric stage | 60 s | 64 s | 2.0 s | 0.0 s | 7.0 s |" in page


def test_linear_growth_passes_and_faster_growth_is_reported():
    linear = [row(8, 80, 60, 10, 200), row(16, 160, 100, 11, 260), row(32, 320, 180, 12, 380), row(64, 640, 340, 14, 620)]
    steps, judged = scale.analyse(linear)
    assert steps["warm site.yml"]["seconds_per_added_node"] == 10.0
    assert steps["warm site.yml"]["seconds_per_added_node_by_interval"] == [10.0, 10.0, 10.0]
    assert steps["warm site.yml"]["projected_seconds"] == {"128": 1280, "256": 2560, "512": 5120}
    assert judged["warm site.yml grows at most linearly"] is True
    assert judged["validation fabric stage at 64 nodes within 2x its time at 8"] is True
    assert judged["rolling change at 64 nodes within the canary plus 4 batch times"] is False  # 620 > 180
    quadratic = [row(8, 80, 60, 10, 100), row(16, 200, 100, 30, 100), row(32, 700, 180, 90, 100)]
    steps, judged = scale.analyse(quadratic)
    assert judged["warm site.yml grows at most linearly"] is False
    assert judged["validation fabric stage at 32 nodes within 2x its time at 8"] is False
    assert judged["rolling change at 32 nodes within the canary plus 4 batch times"] is True


def test_a_changed_warm_run_or_a_failed_validation_misses_its_target():
    steps, judged = scale.analyse([row(16, 160, 100, 11, 260, changed=3, rc=2)])
    assert judged["warm site.yml at 16 nodes changed=0"] is False
    assert judged["validate.yml at 16 nodes passed"] is False


def test_the_page_and_chart_show_every_size():
    results = [row(8, 80, 60, 10, 200), row(16, 160, 100, 11, 260)]
    doc = {"executor": "mitogen", "forks": 10, "machine": "vm", "cpus": 2, "date": "2026-11-24 23:00 UTC",
           "results": results}
    doc["steps"], doc["targets"] = scale.analyse(results)
    page = scale.markdown(doc)
    assert "| 8 | 80 s | 0 |" in page and "| 16 | 160 s | 0 |" in page
    assert "projected at 512" in page and "- target: warm site.yml at 16 nodes changed=0: met" in page
    chart = scale.svg(results)
    assert chart.startswith("<svg") and chart.count("<polyline") == len(scale.STEPS)
    # a size whose rolling change did not run (stopped) shows dashes, not a made-up figure
    partial = dict(row(32, 320, 180, 12, 0), rolling_seconds=None, rolling_controller_cpu_seconds=None,
                   validate_controller_cpu_seconds=None)
    for key in ("rolling_canary_seconds", "rolling_batch_seconds_max", "rolling_bound_seconds", "rolling_batches"):
        partial.pop(key)
    doc["results"] = results + [partial]
    doc["steps"], doc["targets"] = scale.analyse(doc["results"])
    assert "| 32 | 320 s | 0 | 480 s | 180 s | 0 | - | 12.0 s | - | - | - | - | - | 0 | - |" in scale.markdown(doc)


def test_the_sinfo_samples_give_the_drain_windows_and_the_least_schedulable_share():
    w = scale.DrainWindows()
    w.sample([("gpu01", "idle"), ("gpu02", "idle")], 0.0)
    w.sample([("gpu01", "drain"), ("gpu02", "idle")], 1.0)
    w.sample([("gpu01", "drng"), ("gpu02", "idle")], 2.0)
    w.sample([("gpu01", "idle"), ("gpu02", "mix")], 3.0)
    assert (w.drained, w.resumed) == ({"gpu01": 1.0}, {"gpu01": 3.0})
    s = scale.bench.Schedulable(2)
    s.sample([("gpu01", "drain"), ("gpu02", "idle")], 1.0)
    s.sample([("gpu01", "idle"), ("gpu02", "idle")], 2.0)
    assert s.least == 0.5


def test_the_rolling_time_outside_drain_windows_is_what_the_batches_do_not_cover():
    r = row(8, 80, 60, 10, 76.0)
    r["rolling_batches"] = [{"nodes": 1, "seconds": 5.5}, {"nodes": 2, "seconds": 6.0}, {"nodes": 2, "seconds": 4.5}]
    assert scale.outside_drains(r) == 60.0
    steps, dummy = scale.analyse([r, dict(row(16, 160, 100, 11, 100.0), rolling_batches=[{"nodes": 1, "seconds": 20.0}])])
    assert steps["rolling, outside drains"]["seconds_per_added_node_by_interval"] == [2.5]
    assert scale.outside_drains(dict(r, rolling_batches=[])) is None
    page = scale.markdown(dict(date="d", executor="ansible", forks=10, machine="m", cpus=2, results=[r], steps=steps,
                               targets={}))
    assert "| 60 s |" in page


def test_every_measured_run_is_profiled_and_its_output_kept(tmp_path, monkeypatch):
    seen = {}

    def run(cmd, env=None):
        seen["env"] = env
        return 0, "PLAY RECAP\nclusterforge.gpu.validate : Fabric | x --- 1.00s\n", 2.5

    monkeypatch.setattr(scale.bench, "run", run)
    monkeypatch.setattr(scale.bench, "children_cpu", iter([10.0, 13.5]).__next__)
    monkeypatch.setattr(scale, "LOGS", str(tmp_path / "logs"))
    rc, out, secs, cpu = scale.timed(["ansible-playbook"], scale.profiled({"A": "1"}), "08-warm")
    assert (rc, secs, cpu) == (0, 2.5, 3.5)
    assert seen["env"]["A"] == "1" and seen["env"]["ANSIBLE_CALLBACKS_ENABLED"] == "ansible.posix.profile_tasks"
    assert (tmp_path / "logs" / "08-warm.log").read_text() == out


def test_the_sampler_reads_both_cgroup_versions_in_its_thread(tmp_path, monkeypatch):
    v1, v2 = tmp_path / "cpuacct.usage", tmp_path / "cpu.stat"
    v1.write_text("2500000000\n")
    v2.write_text("usage_usec 4000000\nuser_usec 3000000\n")
    monkeypatch.setattr(scale, "cgroup_cpu_files", lambda hosts: {"gpu01": str(v1), "head01": str(v2)})
    monkeypatch.setattr(scale.CpuSampler, "PERIOD", 0.05)
    with scale.CpuSampler(["gpu01", "head01"]) as sampler:
        scale.time.sleep(0.2)
        v1.write_text("3500000000\n")
        v2.write_text("usage_usec 4500000\n")
        scale.time.sleep(0.2)
    assert not sampler.thread.is_alive() and len(sampler.samples) >= 4
    assert sampler.samples[0][1] == {"gpu01": 2.5, "head01": 4.0}
    assert sampler.samples[-1][1] == {"gpu01": 3.5, "head01": 4.5}  # read once more as the block ends
    split = sampler.whole()
    assert (split["gpu_nodes"], split["slurm_controller"]) == (1.0, 0.5)
    # no readable cgroup: no thread, no figures
    monkeypatch.setattr(scale, "cgroup_cpu_files", lambda hosts: {})
    with scale.CpuSampler(["gpu01"]) as empty:
        pass
    assert not empty.thread.is_alive() and empty.whole() is None


def test_the_scale_inventory_gives_the_starved_health_check_more_time_within_the_role_rules(tmp_path, monkeypatch):
    import yaml
    monkeypatch.setattr(scale.bench, "WORK", str(tmp_path))
    inv = scale.inventory(8)
    with open(os.path.join(inv, "group_vars", "gpu_nodes", "scale_healthcheck.yml")) as handle:
        settings = yaml.safe_load(handle)
    with open(os.path.join(ROOT, "roles", "slurm_compute", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    assert set(settings) <= set(defaults)
    # slurmd kills the program at 60 s; preflight takes a budget of 10-59 s and a command limit within it
    assert 10 <= settings["slurm_compute_healthcheck_budget_seconds"] <= 59
    assert defaults["slurm_compute_healthcheck_command_timeout_seconds"] \
        < settings["slurm_compute_healthcheck_command_timeout_seconds"] <= settings["slurm_compute_healthcheck_budget_seconds"]
    assert settings["slurm_compute_healthcheck_strikes"]["timeout"] > 3
    # the lab's own inventory keeps the role's defaults
    assert not os.path.exists(os.path.join(ROOT, "inventories", "lab", "group_vars", "gpu_nodes", "scale_healthcheck.yml"))
