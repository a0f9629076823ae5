"""ClusterForge scale lab (`make bench-scale`; not a timed test): how the controller's cost grows with the node count.

One GPU node is converged with site.yml (head01, stor01 and gpu01, as in `make lab`) and committed as a container
image. For each size in --sizes (default 8 16 32 64) the GPU nodes gpu01..gpuNN are clones of that image, each
with its own host name, addresses, and (through the emulators' node identity, tests/lab/emulators/_cf_emu_identity.py)
its own GPU UUIDs, GPU serials and HCA GUIDs; the controller and the storage host stay. Every clone runs real
systemd, munge and slurmd and the emulators: the per-node work is real, only repeated. Sizes grow, so each size
adds clones to the lab of the size before. At each size:
  * join: site.yml once over the whole inventory, which brings the new clones into the cluster (the controller's
    node list, their own configuration); recorded, not judged;
  * warm site.yml: every role on every node, changed=0 required; wall time and the controller's CPU (ansible-playbook
    and its workers);
  * validate.yml: wall time, controller CPU, and the fabric stage (the tasks of phases fabric and fabric_ib, named
    "Fabric ... |" and "NCCL | ...", timed by ansible.posix.profile_tasks; the per-node NCCL probe of phase measure
    apart);
  * a rolling change of every node (a new GPU power limit, playbooks/rolling_reconfigure.yml at rolling_serial
    [1, "25%"]): wall time, controller CPU, and from sinfo polled every second the canary's and each batch's time
    (first drain to last resume of the nodes of the batch).
Every run is timed by ansible.posix.profile_tasks, and its whole output kept in .cache/bench/scale-logs/ (SIZE-STEP.log).
Every measured run's CPU, and the fabric stage's, is split between the GPU nodes, head01, stor01 and this machine
outside the containers (CpuSampler: the containers' cgroups and /proc/stat, every half second).
Then the seconds per added GPU node of each step (least squares), the targets of issue 19, and a projection to
128, 256 and 512 GPU nodes. Writes bench/scale.json, bench/scale.svg and the "scale" section of docs/performance.md.
The lab of inventories/lab is replaced, and the scale lab removed at the end: `make lab` brings it back.
"""

import argparse
import datetime
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the lab helpers of `make bench`)

ROOT = bench.ROOT
BIN = bench.BIN
OUT = bench.OUT
NODE_IMAGE = "localhost/clusterforge-scale-node:%s" % os.environ.get("CF_LAB_SUITE", "trixie")
PROJECT_TO = [128, 256, 512]
# Issue 19's targets: the validation fabric stage at the largest size within twice its time at 8 GPU nodes; the
# rolling change within the canary plus four batch times; no step growing faster than linearly (the cost of an
# added node in the last interval of sizes at most LINEAR_SLACK times that of the first interval).
FABRIC_GROWTH_LIMIT = 2.0
ROLLING_BATCHES = 4
LINEAR_SLACK = 1.5
TIMED_TASK = re.compile(r"^(.*?)\s*-+ (\d+(?:\.\d+)?)s$")
# Every measured run's whole output (profile_tasks' table at its end), for reading a figure with its profile.
LOGS = os.path.join(bench.WORK, "scale-logs")
FABRIC_TASK = re.compile(r"(^|\|\s*|: )(Fabric|NCCL)\b|ib_write_bw", re.I)
# The fabric stage proper: the tasks of phases fabric and fabric_ib, named "Fabric ... |" and "NCCL |" (ib_write_bw
# in rounds, ibdiagnet, NCCL across the nodes and the search behind a miss). FABRIC_TASK also keeps, for the record,
# the per-node NCCL probe of phase measure ("NCCL all_reduce_perf across the node's GPUs"), which runs in every
# node's own play: issue 19 puts per-node probes there, outside the fabric stage.
FABRIC_STAGE_TASK = re.compile(r"(^|: )(Fabric( IB)?|NCCL) \|")
# profile_tasks' line under each task's banner: the wall-clock time the task started, then the time since the
# previous task and since the playbook started.
TASK_STAMP = re.compile(r"^\w+ (\d{1,2} \w+ \d{4})\s+(\d\d:\d\d:\d\d) ([+-]\d{4}) \(([\d:.]+)\)\s+([\d:.]+) \*")
TASK_HEADER = re.compile(r"^(?:TASK|RUNNING HANDLER) \[(.*)\] \*+$|^PLAY RECAP \*+$")


def log(msg):
    print("[scale %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def gpu_names(size):
    return ["gpu%02d" % i for i in range(1, size + 1)]


def inventory(size):
    """bench.inventory's lab with gpu01..gpuNN at 10.77.0.(100+N) (and 10.78.0.(100+N)): clear of head01 (.10) and
    stor01 (.31), which the lab's own addresses (.20+N) reach from gpu11 on."""
    inv = bench.inventory(size)
    path = os.path.join(inv, "hosts.yml")
    with open(path) as handle:
        text = handle.read()
    for i in range(1, size + 1):
        text = text.replace("        gpu%02d:\n          cluster_mgmt_ip: 10.77.0.%d\n          cluster_fabric_ip: 10.78.0.%d\n"
                            % (i, 20 + i, 20 + i),
                            "        gpu%02d:\n          cluster_mgmt_ip: 10.77.0.%d\n          cluster_fabric_ip: 10.78.0.%d\n"
                            % (i, 100 + i, 100 + i))
    with open(path, "w") as handle:
        handle.write(text)
    with open(os.path.join(inv, "group_vars", "gpu_nodes", "scale_healthcheck.yml"), "w") as handle:
        handle.write(SCALE_HEALTHCHECK)
    return inv


# At 64 GPU nodes, 66 containers and the run share this machine's 2 CPUs, and the emulated nvidia-smi and dcgmi
# (Python programs) answered the health check after its 20 s command limit: three such runs in a row (the default
# timeout strikes, 15 minutes at HealthCheckInterval 300) drained 6 nodes during the 64-node join of 2026-11-28, and
# those drains got the join's own NCCL run across every node refused. What the scale lab measures is the controller's
# cost, so its GPU nodes give a command more time and need more slow runs in a row before a drain. A real node
# answers in about a second; production keeps the role's defaults (40 s budget, 20 s per command, 3 strikes).
SCALE_HEALTHCHECK = """---
# Written by tests/bench/scale.py: the scale lab's CPU-starved GPU nodes (see SCALE_HEALTHCHECK there).
slurm_compute_healthcheck_budget_seconds: 58
slurm_compute_healthcheck_command_timeout_seconds: 40
slurm_compute_healthcheck_strikes: {timeout: 6}
"""


def lab_env(inv):
    return dict(bench.ENV, CF_LAB_INVENTORY=inv, CF_LAB_NODE_IMAGE=NODE_IMAGE, CF_LAB_NODE_IMAGE_HOSTS="gpu[0-9]+")


def playbook_cmd(inv, executor, *args):
    return [os.path.join(BIN, "ansible-playbook"), "-i", inv] + bench.EXECUTOR_INVENTORY[executor] + list(args)


def must(rc, out, what):
    if rc != 0:
        path = os.path.join(bench.WORK, re.sub(r"[^A-Za-z0-9]+", "-", what).strip("-") + ".log")
        with open(path, "w") as handle:
            handle.write(out)
        raise SystemExit("%s failed (rc %d; whole output in %s):\n%s" % (what, rc, path, out[-8000:]))


def profiled(env):
    """env with ansible.posix.profile_tasks on: every task's seconds, in the order they ran, at the end of the output
    (a missed target is read with the profile that explains it; the rolling change's nested check-mode run gets it
    too, and its plan reads its JSON beside it)."""
    return dict(env, ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks", PROFILE_TASKS_TASK_OUTPUT_LIMIT="all",
                PROFILE_TASKS_SORT_ORDER="none")


def timed(cmd, env, log_name=None):
    """Run cmd; (rc, output, wall seconds, controller CPU seconds of the run). With log_name, the whole output is
    kept in LOGS/<log_name>.log."""
    before = bench.children_cpu()
    rc, out, secs = bench.run(cmd, env=env)
    cpu = bench.children_cpu() - before
    if log_name:
        os.makedirs(LOGS, exist_ok=True)
        with open(os.path.join(LOGS, log_name + ".log"), "w") as handle:
            handle.write(out)
    return rc, out, secs, cpu


def changed(out):
    return sum(r["changed"] for r in bench.recap(out).values())


def task_times(out):
    """[(task name, seconds)] from ansible.posix.profile_tasks' summary."""
    rows = []
    for line in out.splitlines():
        m = TIMED_TASK.match(line.strip())
        if m:
            rows.append((m.group(1).strip(), float(m.group(2))))
    return rows


def fabric_tasks(out):
    """[{task, seconds}] of the fabric stage's tasks, in the order they ran: what its figure is made of."""
    return [{"task": name, "seconds": secs} for name, secs in task_times(out) if FABRIC_TASK.search(name)]


def fabric_seconds(out):
    return stage_seconds(fabric_tasks(out))


def stage_seconds(tasks):
    """The fabric stage's seconds from [{task, seconds}]: the tasks of FABRIC_STAGE_TASK only."""
    return round(sum(t["seconds"] for t in tasks if FABRIC_STAGE_TASK.search(t["task"])), 1)


def _clock(text):
    """h:mm:ss.fff as seconds."""
    hours, minutes, secs = text.split(":")
    return int(hours) * 3600 + int(minutes) * 60 + float(secs)


def task_windows(out):
    """[(task name, start, end)], start and end in Unix seconds, from profile_tasks' banners: a task runs from its
    own stamp to the next one (the next task's or the recap's). The start of the playbook is the latest of
    (wall-clock stamp - time since the start) over the stamps, since the wall clock is printed to the second and the
    time since the start to the millisecond; every start is that plus its time since the start."""
    stamps, name = [], None
    for line in out.splitlines():
        header = TASK_HEADER.match(line.strip())
        if header:
            name = header.group(1) or "PLAY RECAP"
            continue
        m = TASK_STAMP.match(line.strip())
        if m and name is not None:
            wall = datetime.datetime.strptime("%s %s %s" % (m.group(1), m.group(2), m.group(3)),
                                              "%d %B %Y %H:%M:%S %z").timestamp()
            stamps.append((name, wall, _clock(m.group(5))))
            name = None
    if not stamps:
        return []
    began = max(wall - since for dummy, wall, since in stamps)
    return [(name, began + since, began + stamps[i + 1][2]) for i, (name, dummy, since) in enumerate(stamps[:-1])]


def cgroup_cpu_files(hosts):
    """{host: its container's CPU accounting file on this machine}: cgroup v1 cpuacct.usage (nanoseconds, as on this
    lab's machines) or v2 cpu.stat (usage_usec). Hosts whose file cannot be read are left out."""
    rc, out = bench.podman("inspect", "--format", "{{.Name}} {{.State.CgroupPath}}", *hosts)
    files = {}
    for line in out.splitlines() if rc == 0 else []:
        fields = line.split()
        if len(fields) != 2:
            continue
        for path in ("/sys/fs/cgroup/cpuacct%s/cpuacct.usage" % fields[1], "/sys/fs/cgroup%s/cpu.stat" % fields[1]):
            if os.access(path, os.R_OK):
                files[fields[0]] = path
                break
    return files


def read_cgroup_cpu(path):
    """CPU seconds from a file of cgroup_cpu_files, None when it cannot be read."""
    try:
        with open(path) as handle:
            text = handle.read()
    except OSError:
        return None
    if path.endswith("cpuacct.usage"):
        return int(text.strip()) / 1e9
    m = re.search(r"^usage_usec (\d+)", text, re.M)
    return int(m.group(1)) / 1e6 if m else None


def machine_busy_cpu():
    """CPU seconds this machine has been busy (/proc/stat: every field but idle and iowait)."""
    with open("/proc/stat") as handle:
        fields = [int(x) for x in handle.readline().split()[1:8]]
    return (sum(fields) - fields[3] - fields[4]) / float(os.sysconf("SC_CLK_TCK"))


class CpuSampler(bench.Poller):
    """Every half second, in a thread while in a `with` block: the CPU each lab container has used (its cgroup, read
    on this machine) and this machine's busy CPU. used(start, end) splits the CPU of a window of a run into the GPU
    nodes', the Slurm controller's (head01: slurmctld, srun), the storage host's and this machine's outside the
    containers (ansible-playbook and its workers, podman exec): on a real cluster each GPU node's share runs on its
    own machine, the rest on the controllers."""

    PERIOD = 0.5

    def __init__(self, hosts):
        super().__init__()
        self.files = cgroup_cpu_files(hosts)
        self.samples = []

    def poll(self):
        used = dict((host, read_cgroup_cpu(path)) for host, path in self.files.items())
        self.samples.append((time.time(), dict((h, v) for h, v in used.items() if v is not None), machine_busy_cpu()))

    def __enter__(self):
        return super().__enter__() if self.files else self

    def _at(self, when, value):
        """value(sample) at the time when, linear between the samples around it (the first or last one outside)."""
        rows = [(t, v) for t, v in ((s[0], value(s)) for s in self.samples) if v is not None]
        if not rows:
            return None
        if when <= rows[0][0]:
            return rows[0][1]
        for (t0, v0), (t1, v1) in zip(rows, rows[1:]):
            if t0 <= when <= t1:
                return v0 + (v1 - v0) * ((when - t0) / (t1 - t0) if t1 > t0 else 1.0)
        return rows[-1][1]

    def whole(self):
        """used() over the whole time the sampler ran."""
        return self.used([(self.samples[0][0], self.samples[-1][0])]) if len(self.samples) >= 2 else None

    def used(self, windows):
        """{gpu_nodes, slurm_controller, storage, controller_machine}: CPU seconds used within the windows
        [(start, end)], or None without samples."""
        if len(self.samples) < 2:
            return None
        totals = {"gpu_nodes": 0.0, "slurm_controller": 0.0, "storage": 0.0, "controller_machine": 0.0}
        for start, end in windows:
            inside = 0.0
            for host in self.files:
                a, b = self._at(start, lambda s: s[1].get(host)), self._at(end, lambda s: s[1].get(host))
                if a is None or b is None:
                    continue
                part = max(b - a, 0.0)
                inside += part
                group = "gpu_nodes" if host.startswith("gpu") else "slurm_controller" if host.startswith("head") \
                    else "storage"
                totals[group] += part
            busy = self._at(end, lambda s: s[2]) - self._at(start, lambda s: s[2])
            totals["controller_machine"] += max(busy - inside, 0.0)
        return dict((k, round(v, 1)) for k, v in totals.items())


class DrainWindows(bench.SinfoPoller):
    """Per GPU node, when it was first seen drained and when it was first seen schedulable again after that."""

    def __init__(self):
        super().__init__()
        self.drained = {}
        self.resumed = {}

    def sample(self, rows, now):
        for name, state in rows:
            down = state.startswith(("drain", "drng", "down", "fail", "boot", "reboot"))
            if down and name not in self.drained:
                self.drained[name] = now
            elif not down and name in self.drained and name not in self.resumed:
                self.resumed[name] = now

    def batches(self):
        """[{nodes, seconds}] in order: a batch is the nodes drained before any node of it was resumed."""
        order = sorted((t, n) for n, t in self.drained.items() if n in self.resumed)
        groups = []
        for began, name in order:
            if groups and began < min(self.resumed[n] for n in groups[-1]):
                groups[-1].append(name)
            else:
                groups.append([name])
        return [{"nodes": len(g), "seconds": round(max(self.resumed[n] for n in g) - min(self.drained[n] for n in g), 1)}
                for g in groups]


def forget_facts():
    """The lab's jsonfile fact cache (tests/lab/ansible.cfg, 600 s) would hand a recreated host the facts of the
    container that had its name before (its addresses): drop it whenever hosts are (re)created."""
    facts = os.path.join(ROOT, ".cache", "facts")
    for name in os.listdir(facts) if os.path.isdir(facts) else []:
        os.remove(os.path.join(facts, name))


def base_image(executor):
    """A converged one-GPU-node lab; gpu01 committed as NODE_IMAGE (its emulators then take the clone's host name as
    their identity, and the hardware state that holds GPU UUIDs is dropped, so each clone makes its own)."""
    inv = inventory(1)
    env = dict(bench.ENV, CF_LAB_INVENTORY=inv)  # every host from the lab's image: the node image is made here
    log("base: recreating the lab with one GPU node")
    bench.run([bench.LAB, "down"], env=env)
    bench.podman("image", "rm", "-f", NODE_IMAGE)
    rc, out, dummy = bench.run([bench.LAB, "up"], env=env)
    must(rc, out, "lab.sh up")
    forget_facts()
    rc, out, dummy = bench.run([os.path.join(BIN, "ansible-playbook"), "-i", inv, "tests/lab/emulators.yml"])
    must(rc, out, "emulators.yml")
    log("base: site.yml on head01, stor01, gpu01")
    rc, out, secs, cpu = timed(playbook_cmd(inv, executor, "site.yml"), dict(bench.ENV, **bench.EXECUTORS[executor]))
    must(rc, out, "site.yml (base)")
    log("base: converged in %.0f s; committing gpu01 as %s" % (secs, NODE_IMAGE))
    rc, out = bench.podman("exec", "gpu01", "sh", "-c",
                           "mkdir -p /etc/clusterforge-emu && echo @hostname > /etc/clusterforge-emu/identity && "
                           "rm -f /var/lib/clusterforge-emu/nvidia-smi.json")
    if rc != 0:
        raise SystemExit("preparing gpu01 for cloning failed: %s" % out)
    rc, out = bench.podman("commit", "-q", "--pause=true", "gpu01", NODE_IMAGE)
    if rc != 0:
        raise SystemExit("podman commit failed: %s" % out)
    # gpu01 itself is a clone too from here on: recreate it from the image, like every other GPU node.
    bench.podman("rm", "-f", "-t", "2", "gpu01")
    return {"base_site_seconds": round(secs, 1)}


def node_identities(gpus):
    """{host: (first GPU UUID, first HCA port GUID)} as each clone reports them."""
    found = {}
    for host in gpus:
        rc1, uuid = bench.podman("exec", host, "nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader", "-i", "0")
        rc2, guid = bench.podman("exec", host, "sh", "-c", "ibstat mlx5_0 1 | sed -n 's/.*Port GUID: //p'")
        found[host] = (uuid.strip() if rc1 == 0 else None, guid.strip() if rc2 == 0 else None)
    return found


def size_run(size, executor, power_w, skip_warm=False):
    inv = inventory(size)
    env = lab_env(inv)
    play_env = dict(bench.ENV, **bench.EXECUTORS[executor])
    gpus = gpu_names(size)
    result = {"gpu_nodes": size, "hosts": size + 2, "executor": executor}
    log("%d GPU nodes: cloning the missing GPU nodes" % size)
    t0 = time.monotonic()
    rc, out, dummy = bench.run([bench.LAB, "up"], env=env)
    must(rc, out, "lab.sh up (%d)" % size)
    forget_facts()
    result["clone_seconds"] = round(time.monotonic() - t0, 1)
    ids = node_identities(gpus)
    result["distinct_gpu_uuids"] = len(set(u for u, g in ids.values() if u))
    result["distinct_hca_guids"] = len(set(g for u, g in ids.values() if g))
    if result["distinct_gpu_uuids"] != size or result["distinct_hca_guids"] != size:
        raise SystemExit("clones share hardware identifiers: %s" % json.dumps(ids, indent=1))

    if skip_warm:
        log("%d GPU nodes: join and warm site.yml skipped (--skip-warm): the lab is joined already" % size)
    else:
        join_and_warm(size, inv, executor, play_env, result)
    return measure_validate_and_roll(size, inv, executor, play_env, power_w, result)


def lab_hosts(size):
    return ["head01", "stor01"] + gpu_names(size)


def join_and_warm(size, inv, executor, play_env, result):
    log("%d GPU nodes: join (site.yml brings the new clones in)" % size)
    rc, out, secs, cpu = timed(playbook_cmd(inv, executor, "site.yml"), profiled(play_env), "%02d-join" % size)
    must(rc, out, "site.yml (join, %d)" % size)
    result.update(join_seconds=round(secs, 1), join_changed=changed(out))

    log("%d GPU nodes: warm site.yml" % size)
    with CpuSampler(lab_hosts(size)) as sampler:
        rc, out, secs, cpu = timed(playbook_cmd(inv, executor, "site.yml"), profiled(play_env), "%02d-warm" % size)
    must(rc, out, "site.yml (warm, %d)" % size)
    result.update(warm_seconds=round(secs, 1), warm_changed=changed(out), warm_controller_cpu_seconds=round(cpu, 1),
                  warm_cpu_split_seconds=sampler.whole())
    log("%d GPU nodes: warm %.0f s, changed=%d, controller CPU %.0f s" % (size, secs, result["warm_changed"], cpu))


def measure_validate_and_roll(size, inv, executor, play_env, power_w, result):
    log("%d GPU nodes: validate.yml" % size)
    with CpuSampler(lab_hosts(size)) as sampler:
        rc, out, secs, cpu = timed(playbook_cmd(inv, executor, "playbooks/validate.yml"), profiled(play_env),
                                   "%02d-validate" % size)
    stage = [(start, end) for name, start, end in task_windows(out) if FABRIC_STAGE_TASK.search(name)]
    result.update(validate_seconds=round(secs, 1), validate_rc=rc, validate_controller_cpu_seconds=round(cpu, 1),
                  validate_fabric_seconds=fabric_seconds(out), validate_fabric_tasks=fabric_tasks(out),
                  validate_cpu_split_seconds=sampler.whole(),
                  validate_fabric_cpu_split_seconds=sampler.used(stage) if stage else None)
    if rc != 0:
        result["validate_failures"] = [line.strip() for line in out.splitlines() if "FAIL" in line][:20]
    log("%d GPU nodes: validate %.0f s (rc %d), fabric stage %.1f s" % (size, secs, rc, result["validate_fabric_seconds"]))

    log("%d GPU nodes: rolling change of every node (power limit %d W)" % (size, power_w))
    change = bench.change_inventory("scale-change-%d" % size, power_w)
    extra = {"rolling_roles": ["clusterforge.gpu.gpu_tuning"], "rolling_poll_interval_seconds": 2,
             "rolling_serial": [1, "25%"]}
    with DrainWindows() as windows, CpuSampler(lab_hosts(size)) as sampler:
        rc, out, secs, cpu = timed(playbook_cmd(inv, executor, "-i", change, "playbooks/rolling_reconfigure.yml",
                                                "-e", json.dumps(extra)), profiled(play_env), "%02d-rolling" % size)
    must(rc, out, "rolling_reconfigure.yml (%d)" % size)
    batches = windows.batches()
    result.update(rolling_seconds=round(secs, 1), rolling_controller_cpu_seconds=round(cpu, 1), rolling_batches=batches,
                  rolling_nodes_seen=len(windows.resumed), rolling_cpu_split_seconds=sampler.whole())
    if batches:
        result["rolling_canary_seconds"] = batches[0]["seconds"]
        rest = batches[1:]
        result["rolling_batch_seconds_max"] = max([b["seconds"] for b in rest] or [0.0])
        result["rolling_bound_seconds"] = round(result["rolling_canary_seconds"]
                                                + ROLLING_BATCHES * result["rolling_batch_seconds_max"], 1)
    log("%d GPU nodes: rolling %.0f s, %d batches %s" % (size, secs, len(batches), [b["seconds"] for b in batches]))
    return result


def slope(results, key):
    rows = [r for r in results if r.get(key) is not None]
    if len(rows) < 2:
        return None, None
    per_node, at_one = bench.least_squares(rows, key)
    return round(per_node, 2), round(at_one - per_node, 1)


STEPS = [("warm site.yml", "warm_seconds", "warm_controller_cpu_seconds"),
         ("validate.yml", "validate_seconds", "validate_controller_cpu_seconds"),
         ("validation fabric stage", "validate_fabric_seconds", None),
         ("rolling change", "rolling_seconds", "rolling_controller_cpu_seconds"),
         ("rolling, outside drains", "rolling_outside_drain_seconds", None)]


def outside_drains(result):
    """The rolling change's seconds outside the batches' drain windows (the batches follow one another): preflight,
    the plan's check-mode run on every node, and each batch's work before its first drain and after its last
    resume. None without batches."""
    batches = result.get("rolling_batches") or []
    if not batches or result.get("rolling_seconds") is None:
        return None
    return round(result["rolling_seconds"] - sum(b["seconds"] for b in batches), 1)


def controller_cpu(split):
    """The controllers' share of a CPU split: the Slurm controller's container and this machine outside the
    containers (Ansible)."""
    return split["slurm_controller"] + split["controller_machine"]


def analyse(results):
    """Per step: seconds and controller CPU per added GPU node, the fixed part, growth between the sizes, and the
    projection to PROJECT_TO; then the targets."""
    for r in results:
        r["rolling_outside_drain_seconds"] = outside_drains(r)
        if r.get("validate_fabric_tasks"):
            # From the recorded task times: the stage proper, and the per-node NCCL probe beside it (scale.json of a
            # run before FABRIC_STAGE_TASK counted the probe in the stage).
            r["validate_fabric_seconds"] = stage_seconds(r["validate_fabric_tasks"])
            r["validate_node_nccl_seconds"] = round(sum(t["seconds"] for t in r["validate_fabric_tasks"]
                                                        if not FABRIC_STAGE_TASK.search(t["task"])), 1)
    steps = {}
    for label, key, cpu_key in STEPS:
        per_node, fixed = slope(results, key)
        entry = {"seconds_per_added_node": per_node, "fixed_seconds": fixed}
        if cpu_key:
            entry["controller_cpu_seconds_per_added_node"], entry["controller_cpu_fixed_seconds"] = slope(results, cpu_key)
        rows = [r for r in results if r.get(key) is not None]
        increments = []
        for a, b in zip(rows, rows[1:]):
            increments.append(round((b[key] - a[key]) / float(b["gpu_nodes"] - a["gpu_nodes"]), 2))
        entry["seconds_per_added_node_by_interval"] = increments
        if per_node is not None:
            entry["projected_seconds"] = dict((str(n), round(fixed + per_node * n)) for n in PROJECT_TO)
        if entry.get("controller_cpu_seconds_per_added_node") is not None:
            entry["projected_controller_cpu_seconds"] = dict(
                (str(n), round(entry["controller_cpu_fixed_seconds"] + entry["controller_cpu_seconds_per_added_node"] * n))
                for n in PROJECT_TO)
        steps[label] = entry
    judged = {}
    for label, entry in steps.items():
        inc = entry["seconds_per_added_node_by_interval"]
        if len(inc) >= 2 and inc[0] > 0:
            judged["%s grows at most linearly" % label] = inc[-1] <= LINEAR_SLACK * inc[0]
    by_size = dict((r["gpu_nodes"], r) for r in results)
    largest = max(by_size)
    if 8 in by_size and largest > 8 and by_size[8].get("validate_fabric_seconds"):
        judged["validation fabric stage at %d nodes within %.0fx its time at 8" % (largest, FABRIC_GROWTH_LIMIT)] = \
            by_size[largest]["validate_fabric_seconds"] <= FABRIC_GROWTH_LIMIT * by_size[8]["validate_fabric_seconds"]
    split = by_size[largest].get("validate_fabric_cpu_split_seconds")
    if 8 in by_size and largest > 8 and split and by_size[8].get("validate_fabric_cpu_split_seconds"):
        judged["validation fabric stage's controller CPU at %d nodes within %.0fx its CPU at 8 (Slurm controller and "
               "the Ansible machine; the GPU nodes' own CPU left out)" % (largest, FABRIC_GROWTH_LIMIT)] = \
            controller_cpu(split) <= FABRIC_GROWTH_LIMIT * controller_cpu(by_size[8]["validate_fabric_cpu_split_seconds"])
    for r in results:
        if r["gpu_nodes"] >= 16:
            if r.get("warm_changed") is not None:
                judged["warm site.yml at %d nodes changed=0" % r["gpu_nodes"]] = r["warm_changed"] == 0
            judged["validate.yml at %d nodes passed" % r["gpu_nodes"]] = r["validate_rc"] == 0
            if r.get("rolling_bound_seconds") is not None:
                judged["rolling change at %d nodes within the canary plus %d batch times"
                       % (r["gpu_nodes"], ROLLING_BATCHES)] = r["rolling_seconds"] <= r["rolling_bound_seconds"]
    return steps, judged


def svg(results):
    width, height, left, bottom, top = 640, 360, 60, 40, 30
    series = [(label, key) for label, key, dummy in STEPS]
    colours = ["#4a78b5", "#c0504d", "#9bbb59", "#8064a2", "#f79646"]
    xs = [r["gpu_nodes"] for r in results]
    ymax = max([r.get(k) or 0 for r in results for dummy, k in series] + [1])
    xmax = max(xs + [1])

    def px(x, y):
        return (left + (width - left - 160) * x / float(xmax), height - bottom - (height - bottom - top) * y / float(ymax))

    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">'
             % (width, height), '<text x="10" y="18">ClusterForge scale lab: wall seconds by GPU nodes</text>',
             '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>' % (left, height - bottom, width - 160, height - bottom),
             '<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#444"/>' % (left, top, left, height - bottom)]
    for x in xs:
        gx, gy = px(x, 0)
        parts.append('<text x="%.0f" y="%d" text-anchor="middle">%d</text>' % (gx, height - bottom + 16, x))
    for i in range(5):
        value = ymax * i / 4.0
        gx, gy = px(0, value)
        parts.append('<text x="%d" y="%.0f" text-anchor="end">%.0f s</text>' % (left - 6, gy + 4, value))
    for n, (label, key) in enumerate(series):
        points = [px(r["gpu_nodes"], r[key]) for r in results if r.get(key) is not None]
        colour = colours[n % len(colours)]
        if points:
            parts.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                         % (colour, " ".join("%.1f,%.1f" % p for p in points)))
            for p in points:
                parts.append('<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>' % (p[0], p[1], colour))
        parts.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>' % (width - 150, top + 18 * n, colour))
        parts.append('<text x="%d" y="%d">%s</text>' % (width - 135, top + 9 + 18 * n, label))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _secs(value):
    return "-" if value is None else "%.0f s" % value


def _or_dash(value):
    return "-" if value is None else value


def markdown(doc):
    results, steps = doc["results"], doc["steps"]
    resumed = "; resumed %s" % doc["resumed"] if doc.get("resumed") else ""
    head = ("Executor `%s`, forks %s, on %s (%d CPUs) shared by the controller and every container; GPU nodes are "
            "clones of one converged node (own host name, addresses, GPU UUIDs and HCA GUIDs), head01 and stor01 as "
            "in `make lab`. Measured %s%s.")
    head = head % (doc["executor"], doc["forks"], doc["machine"], doc["cpus"], doc["date"], resumed)
    lines = [head,
             "",
             "| GPU nodes | warm site.yml | changed | controller CPU | validate.yml | rc | controller CPU | fabric stage "
             "| per-node NCCL probe | rolling change | controller CPU | canary | longest batch | batches | outside drains |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append("| %d | %s | %s | %s | %.0f s | %d | %s | %.1f s | %s | %s | %s | %s | %s | %s | %s |" % (
            r["gpu_nodes"], _secs(r.get("warm_seconds")), _or_dash(r.get("warm_changed")),
            _secs(r.get("warm_controller_cpu_seconds")),
            r["validate_seconds"], r["validate_rc"], _secs(r.get("validate_controller_cpu_seconds")),
            r["validate_fabric_seconds"],
            ("%.1f s" % r["validate_node_nccl_seconds"]) if r.get("validate_node_nccl_seconds") is not None else "-",
            _secs(r.get("rolling_seconds")), _secs(r.get("rolling_controller_cpu_seconds")),
            ("%.0f s" % r["rolling_canary_seconds"]) if "rolling_canary_seconds" in r else "-",
            ("%.0f s" % r["rolling_batch_seconds_max"]) if "rolling_batch_seconds_max" in r else "-",
            len(r.get("rolling_batches", [])),
            ("%.0f s" % r["rolling_outside_drain_seconds"]) if r.get("rolling_outside_drain_seconds") is not None
            else "-"))
    lines += ["", "| step | seconds per added GPU node | by interval of sizes | controller CPU per added node | "
              + " | ".join("projected at %d" % n for n in PROJECT_TO) + " |",
              "|---|---|---|---|" + "---|" * len(PROJECT_TO)]
    for label, dummy, dummy2 in STEPS:
        e = steps.get(label, {})
        proj = e.get("projected_seconds", {})
        lines.append("| %s | %s | %s | %s | %s |" % (
            label, _or_dash(e.get("seconds_per_added_node")),
            ", ".join(str(x) for x in e.get("seconds_per_added_node_by_interval", [])) or "-",
            _or_dash(e.get("controller_cpu_seconds_per_added_node")),
            " | ".join(("%d s" % proj[str(n)]) if str(n) in proj else "-" for n in PROJECT_TO)))
    split_rows = [(r["gpu_nodes"], label, r.get(key + "_seconds"), r.get(key + "_cpu_split_seconds"))
                  for r in results for label, key in (("warm site.yml", "warm"), ("validate.yml", "validate"),
                                                      ("fabric stage", "validate_fabric"), ("rolling change", "rolling"))
                  if r.get(key + "_cpu_split_seconds")]
    if split_rows:
        lines += ["", "Where the CPU went (cgroups of the containers, and this machine's busy time outside them): on a "
                  "real cluster the GPU nodes' share runs on the nodes themselves, in parallel.", "",
                  "| GPU nodes | step | wall | GPU nodes' CPU | Slurm controller CPU | storage CPU | Ansible machine CPU |",
                  "|---|---|---|---|---|---|---|"]
        for nodes, label, wall, split in split_rows:
            lines.append("| %d | %s | %s | %.0f s | %.1f s | %.1f s | %.1f s |" % (
                nodes, label, _secs(wall), split["gpu_nodes"], split["slurm_controller"], split["storage"],
                split["controller_machine"]))
    lines.append("")
    for name, met in sorted(doc.get("targets", {}).items()):
        lines.append("- target: %s: %s" % (name, "met" if met else "NOT met"))
    lines.append("")
    return "\n".join(lines) + "\n"


def update_doc(doc):
    path = os.path.join(ROOT, "docs", "performance.md")
    begin, end = "<!-- scale:begin -->", "<!-- scale:end -->"
    with open(path) as handle:
        text = handle.read()
    block = begin + "\n" + markdown(doc) + end
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + block + rest.split(end, 1)[1]
    else:
        heading = "## Scale lab: 16, 32 and 64 GPU nodes"
        if heading in text:
            head, rest = text.split(heading, 1)
            first, sep, after = rest.partition("\n\n")
            text = head + heading + first + "\n\n" + block + "\n\n" + after
        else:
            text = text.rstrip("\n") + "\n\n" + heading + "\n\n" + block + "\n"
    with open(path, "w") as handle:
        handle.write(text)


def write_results(doc):
    """Judge the results so far; write bench/scale.json, bench/scale.svg and the section of docs/performance.md."""
    doc["steps"], doc["targets"] = analyse(doc["results"])
    with open(os.path.join(OUT, "scale.json"), "w") as handle:
        json.dump(doc, handle, indent=2)
        handle.write("\n")
    with open(os.path.join(OUT, "scale.svg"), "w") as handle:
        handle.write(svg(doc["results"]))
    update_doc(doc)


def forks():
    rc, out, dummy = bench.run([os.path.join(BIN, "ansible-config"), "dump", "--only-changed"])
    m = re.search(r"^DEFAULT_FORKS\(.*\) = (\d+)", out, re.M)
    return int(m.group(1)) if m else 5


def resumed(args, now):
    """bench/scale.json of an earlier run that stopped, with only the sizes below those asked for now; the node image
    and the lab of that run must still be there (same executor and forks)."""
    with open(os.path.join(OUT, "scale.json")) as handle:
        doc = json.load(handle)
    first = min(args.sizes)
    doc["results"] = [r for r in doc["results"] if r["gpu_nodes"] < first]
    if doc.get("executor") != args.executor or doc.get("forks") != forks():
        raise SystemExit("--resume: bench/scale.json was measured with executor %s and %s forks, not %s and %s"
                         % (doc.get("executor"), doc.get("forks"), args.executor, forks()))
    rc, dummy = bench.podman("image", "exists", NODE_IMAGE)
    if rc != 0:
        raise SystemExit("--resume: the node image %s is gone: run without --resume" % NODE_IMAGE)
    doc["resumed"] = "%s (sizes %s after %s)" % (now, " ".join(str(s) for s in sorted(set(args.sizes))),
                                                 " ".join(str(r["gpu_nodes"]) for r in doc["results"]) or "none")
    log("resuming after %s GPU nodes" % (", ".join(str(r["gpu_nodes"]) for r in doc["results"]) or "no size"))
    return doc


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32, 64])
    # Mitogen, as `make bench`: validation's default ib_write_bw launcher (slurm) runs each round as one srun and
    # uses no async task, which did not finish under the Mitogen strategy (docs/performance.md, "Mitogen"). On this
    # 2-CPU lab the warm site.yml on 2 GPU nodes took 75 s and 41 s of user CPU with Mitogen against 162 s and 207 s
    # with Ansible's executor (2026-11-27): --executor ansible measures the slower one.
    parser.add_argument("--executor", choices=sorted(bench.EXECUTORS), default="mitogen")
    parser.add_argument("--keep", action="store_true", help="leave the scale lab running at the end")
    parser.add_argument("--resume", action="store_true",
                        help="go on from bench/scale.json and the running scale lab: keep the results of the sizes "
                             "below the first one asked for, reuse the node image, do not rebuild the base")
    parser.add_argument("--skip-warm", action="store_true",
                        help="with --resume: the lab is joined at the first size already; measure validate.yml and "
                             "the rolling change only")
    parser.add_argument("--report-only", action="store_true",
                        help="no lab: judge bench/scale.json again and rewrite bench/scale.svg and docs/performance.md")
    args = parser.parse_args()
    if args.report_only:
        with open(os.path.join(OUT, "scale.json")) as handle:
            doc = json.load(handle)
        write_results(doc)
        return 0
    if max(args.sizes) > 99:
        raise SystemExit("the scale lab names GPU nodes gpu01..gpu99 on one /24 management network: at most 99")
    os.makedirs(bench.WORK, exist_ok=True)
    os.makedirs(OUT, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if args.skip_warm and not args.resume:
        raise SystemExit("--skip-warm goes with --resume")
    if args.resume:
        doc = resumed(args, now)
    else:
        doc = {"date": now, "machine": os.uname().nodename, "cpus": os.cpu_count(), "executor": args.executor,
               "forks": forks(), "results": []}
        doc.update(base_image(args.executor))
    for size in sorted(set(args.sizes)):
        # each size rolls out another power limit than the size before, so that every node changes
        doc["results"].append(size_run(size, args.executor, 600 + 10 * (len(doc["results"]) % 5),
                                       skip_warm=args.skip_warm and size == min(args.sizes)))
        write_results(doc)
    log("results: bench/scale.json, bench/scale.svg, docs/performance.md")
    if not args.keep:
        bench.run([bench.LAB, "down"], env=lab_env(inventory(max(args.sizes))))
        log("the scale lab is removed; `make lab` brings back inventories/lab")
    return 0


if __name__ == "__main__":
    sys.exit(main())
