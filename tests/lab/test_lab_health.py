"""The node health check in the lab, against real Slurm: a fault drains only after its strikes, a switched-off check
drains nothing, a fault on every GPU node drains at most the circuit breaker's cap, also when the nodes decide at the
same moment (and the breaker is named in the journal and in the metrics file), an administrator's drain is never resumed, and the run time of a check with every
new check in it.

The faults come from the emulators' --emu-* options (tests/lab/emulators). The check runs as slurmd runs it
(`env -i SLURMD_NODENAME=<node> /usr/libexec/clusterforge/slurm-healthcheck`), on a copy of the node's own
configuration where a test changes one value, with its own state and metrics directory: slurmd's periodic runs (every
300 s, spread over the nodes) use the installed configuration and count nothing of a test's runs. Every test puts the
lab back (faults cleared, the nodes its runs drained resumed, Slurm settled) even when it fails.
"""

import contextlib
import json
import re
import time
from concurrent.futures import ThreadPoolExecutor

from labkit import node_states, podman_exec, settled_node_states, slurm  # pylint: disable=import-error

GPU_NODES = ("gpu01", "gpu02")
HC = "/usr/libexec/clusterforge/slurm-healthcheck"
CONFIG = "/etc/slurm/clusterforge-healthcheck.json"
PREFIX = "cf-health:"
PROM = "clusterforge_healthcheck.prom"
# Writes a copy of the node's configuration with the JSON object in argv[2] over it.
COPY_CONFIG = ("import json, sys; c = json.load(open(%r)); c.update(json.loads(sys.argv[2])); "
               "json.dump(c, open(sys.argv[1], 'w'), indent=1)" % CONFIG)


def config_copy(host, name, **change):
    """/tmp/cf-hc-lab-<name>.json on the host: the node's configuration, its own state and metrics directory
    (/run/cf-hc-lab-<name>), and `change`."""
    state = "/run/cf-hc-lab-%s" % name
    change = dict({"state_dir": state, "textfile_dir": state + "/prom"}, **change)
    path = "/tmp/cf-hc-lab-%s.json" % name
    podman_exec(host, "rm", "-rf", state)
    rc, out = podman_exec(host, "python3", "-c", COPY_CONFIG, path, json.dumps(change))
    assert rc == 0, (host, out)
    return path, state


def run_check(host, *extra):
    """rc, stdout, wall seconds of one run as slurmd runs it."""
    start = time.time()
    rc, out = podman_exec(host, "env", "-i", "SLURMD_NODENAME=" + host, HC, *extra)
    return rc, out, time.time() - start


def summary(host, out):
    lines = [line for line in out.splitlines() if line.startswith("cf-health: %s: " % host) and " budget" in line]
    assert lines, out
    return lines[-1]


def own_seconds(line):
    m = re.search(r"; ([0-9.]+) s of a \d+ s budget$", line)
    assert m, line
    return float(m.group(1))


def prom(host, state):
    rc, out = podman_exec(host, "cat", "%s/prom/%s" % (state, PROM))
    assert rc == 0, (host, out)
    return out


def emulated_temperature(host, slot):
    rc, out = podman_exec(host, "nvidia-smi", "--emu-state")
    assert rc == 0, out
    gpus = json.loads(out)["hardware"]["gpus"]
    return [g for g in gpus if g["slot"] == slot][0]["temperature"]


def forget(host, check):
    """Clear what slurmd's own runs (the installed configuration) counted or remembered of an injected fault: an Xid
    stays a fault for the rest of the boot, so a test that injects one must clear it."""
    rc, out = podman_exec(host, HC, "--clear", check)
    assert rc == 0, (host, out)


def restore(drained_by_tests=(), admin=()):
    """Resume what the test drained (only drains with the check's prefix, or the admin drain the test set itself) and
    wait until Slurm has every GPU node idle again."""
    states = node_states()
    for host in GPU_NODES:
        state, reason = states.get(host, ("", ""))
        if (reason.startswith(PREFIX) and host in drained_by_tests) or (host in admin and "drain" in state):
            slurm("scontrol", "update", "NodeName=" + host, "State=RESUME")
    settled = settled_node_states({h: ("idle", "none") for h in GPU_NODES}, seconds=180)
    assert {h: settled.get(h) for h in GPU_NODES} == {h: ("idle", "none") for h in GPU_NODES}, settled


def test_a_single_fault_drains_only_after_its_strikes(converged):  # pylint: disable=unused-argument
    """GPU 3 of gpu01 at 86 C (above the 85 C limit, below the 87 C at which the emulated GPU slows down, so that only
    the temperature check fails): the first run reports it pending (temperature needs 2 runs), the second drains."""
    restore()  # every GPU node idle before the test, or it says so
    host = "gpu01"
    before = emulated_temperature(host, 3)
    path, _state = config_copy(host, "strikes")
    try:
        rc, out = podman_exec(host, "nvidia-smi", "--emu-temp", "3", "86")
        assert rc == 0, out
        rc, out, _wall = run_check(host, "--config", path)
        line = summary(host, out)
        assert rc == 1, out
        assert "pending: temperature 1/2 (GPU 3 temperature 86 C > 85 C)" in line and "action none" in line, line
        assert not node_states()[host][1].startswith(PREFIX)
        rc, out, _wall = run_check(host, "--config", path)
        line = summary(host, out)
        assert rc == 1 and "action drain;" in line, out
        state, reason = node_states()[host]
        assert state in ("drain", "drng") and reason == "cf-health: GPU 3 temperature 86 C > 85 C", (state, reason)
        # healthy again: the check resumes its own drain
        podman_exec(host, "nvidia-smi", "--emu-temp", "3", str(before))
        rc, out, _wall = run_check(host, "--config", path)
        assert rc == 0 and "action resume" in summary(host, out), out
    finally:
        podman_exec(host, "nvidia-smi", "--emu-temp", "3", str(before))
        podman_exec(host, "rm", "-rf", path, "/run/cf-hc-lab-strikes")
        forget(host, "temperature")
        restore(drained_by_tests=(host,))


def test_a_switched_off_check_drains_nothing(converged):  # pylint: disable=unused-argument
    restore()
    host = "gpu02"
    path, state = config_copy(host, "switch", checks_disabled=["pcie"], strikes={"pcie": 1})
    try:
        rc, out = podman_exec(host, "nvidia-smi", "--emu-pcie-width", "4", "8")
        assert rc == 0, out
        for _run in range(3):
            rc, out, _wall = run_check(host, "--config", path)
            assert rc == 0 and "healthy; state IDLE; action none" in summary(host, out), out
        assert node_states()[host] == ("idle", "none")
        metrics = prom(host, state)
        assert 'check="pcie"' not in metrics
        assert re.search(r'(?m)^clusterforge_healthcheck_fault\{check="gpu_count"\} 0$', metrics), metrics
        # the same fault with the check on drains at once (strikes 1 here)
        path_on, _state_on = config_copy(host, "switch-on", strikes={"pcie": 1})
        rc, out, _wall = run_check(host, "--config", path_on)
        assert rc == 1 and "pcie: GPU 4 link width x8 < x16" in summary(host, out), out
        assert node_states()[host][1] == "cf-health: pcie: GPU 4 link width x8 < x16"
        podman_exec(host, "nvidia-smi", "--emu-pcie-width", "4", "16")
        rc, out, _wall = run_check(host, "--config", path_on)
        assert rc == 0 and "action resume" in summary(host, out), out
    finally:
        podman_exec(host, "nvidia-smi", "--emu-pcie-width", "4", "16")
        podman_exec(host, "rm", "-rf", path, state, "/tmp/cf-hc-lab-switch-on.json", "/run/cf-hc-lab-switch-on")
        forget(host, "pcie")
        restore(drained_by_tests=(host,))


@contextlib.contextmanager
def pcie_fault_on_every_gpu_node(name, **change):
    """GPU 2's PCIe link narrowed to x8 on every GPU node, each with a copy of its configuration (config_copy) where
    pcie drains at its first strike: yields {host: (configuration path, state directory)}. Afterwards the links, the
    copies, the check's memory of the fault and the test's drains are put back, even when the test failed."""
    configs = dict((host, config_copy(host, name, strikes={"pcie": 1}, **change)) for host in GPU_NODES)
    try:
        for host in GPU_NODES:
            rc, out = podman_exec(host, "nvidia-smi", "--emu-pcie-width", "2", "8")
            assert rc == 0, out
        yield configs
    finally:
        for host in GPU_NODES:
            podman_exec(host, "nvidia-smi", "--emu-pcie-width", "2", "16")
            podman_exec(host, "rm", "-rf", configs[host][0], configs[host][1])
            forget(host, "pcie")
        restore(drained_by_tests=GPU_NODES)


def test_a_fault_on_every_gpu_node_drains_at_most_the_cap(converged):  # pylint: disable=unused-argument
    """Two GPU nodes at the default 10 %: max(1, floor(2 x 10 / 100)) = 1 node may be drained by the check. A narrowed
    PCIe link on both (pcie drains at its first strike in this copy): the first node's run drains it, the second's
    finds the cap reached and holds back, saying "breaker open" with the check in its summary, its journal (LOG_ERR,
    tag cf-health) and its metrics file."""
    restore()
    # the journal's own clock (the container's time zone), for journalctl --since
    since = dict((host, podman_exec(host, "date", "+%Y-%m-%d %H:%M:%S")[1].strip()) for host in GPU_NODES)
    with pcie_fault_on_every_gpu_node("breaker") as configs:
        outs = {}
        for host in GPU_NODES:
            rc, out, _wall = run_check(host, "--config", configs[host][0])
            assert rc == 1, out
            outs[host] = summary(host, out)
        states = node_states()
        drained = [h for h in GPU_NODES if states[h][1].startswith(PREFIX)]
        assert len(drained) == 1, (states, outs)
        assert states[drained[0]][1] == "cf-health: pcie: GPU 2 link width x8 < x16"
        other = [h for h in GPU_NODES if h not in drained][0]
        # (run once more on the node that was held back: slurmd's own run may have come first on either node)
        rc, out, _wall = run_check(other, "--config", configs[other][0])
        line = summary(other, out)
        assert rc == 1 and "action none (breaker open: pcie)" in line, out
        assert not node_states()[other][1].startswith(PREFIX)
        rc, journal = podman_exec(other, "journalctl", "-t", "cf-health", "--since", since[other], "--no-pager",
                                  "--output=cat")
        assert rc == 0 and re.search(r"(?m)^cf-health: %s: breaker open: not draining for pcie: 1 of \d+ nodes "
                                     r"already drained with reason prefix 'cf-health:', at most 1 \(10%%\) may be"
                                     % other, journal), journal
        rc, priorities = podman_exec(other, "journalctl", "-t", "cf-health", "--since", since[other], "--no-pager",
                                     "--priority=err", "--output=cat")
        assert "breaker open: not draining for pcie" in priorities, priorities
        metrics = prom(other, configs[other][1])
        assert re.search(r'(?m)^clusterforge_healthcheck_breaker_open\{check="pcie"\} 1$', metrics), metrics
        assert re.search(r'(?m)^clusterforge_healthcheck_fault\{check="pcie"\} 1$', metrics), metrics
        drained_metrics = prom(drained[0], configs[drained[0]][1])
        assert re.search(r'(?m)^clusterforge_healthcheck_breaker_open\{check="pcie"\} 0$', drained_metrics)


def test_gpu_nodes_that_decide_at_the_same_moment_keep_the_cap(converged):  # pylint: disable=unused-argument
    """The same fault on both GPU nodes, both checks started together with no random pause, three times over: each
    time exactly one node stays drained (the cap), the other either held back before draining or withdrew its drain
    after the second count against real slurmctld's reasons (`[root@<time>]`), and says which."""
    restore()
    with pcie_fault_on_every_gpu_node("together", breaker_jitter_seconds=0) as configs:
        for _round in range(3):
            with ThreadPoolExecutor(len(GPU_NODES)) as pool:
                outs = dict(zip(GPU_NODES, pool.map(lambda h: run_check(h, "--config", configs[h][0]), GPU_NODES)))
            lines = dict((host, summary(host, outs[host][1])) for host in GPU_NODES)
            assert all(outs[host][0] == 1 for host in GPU_NODES), outs
            states = node_states()
            drained = [h for h in GPU_NODES if states[h][1].startswith(PREFIX)]
            assert len(drained) == 1, (states, lines)
            assert "action drain;" in lines[drained[0]], lines
            # the second count found the node's own drain in real slurmctld's listing, first in its order
            rc, out = podman_exec(drained[0], "cat", configs[drained[0]][1] + "/healthcheck-slurmd.json")
            assert rc == 0 and json.loads(out)["breaker_rank"] == 1, out
            other = [h for h in GPU_NODES if h != drained[0]][0]
            assert re.search(r"action (none|drain withdrawn) \(breaker open: pcie\)", lines[other]), lines
            assert (states[other][0].rstrip("*"), states[other][1]) == ("idle", "none"), states
            restore(drained_by_tests=GPU_NODES)


# On the controller: as soon as gpu02 shows the check's drain, drain gpu01 with the check's prefix (another node that
# decided at the same moment), then print both nodes' reasons with slurmctld's times.
DRAIN_GPU01_AFTER_GPU02 = r"""
for i in $(seq 1 500); do
  case "$(scontrol show node -o gpu02)" in *"Reason=cf-health:"*)
    scontrol update NodeName=gpu01 State=DRAIN Reason="cf-health: decided in the same moment"
    scontrol show node -o gpu01,gpu02 | sed -n 's/^NodeName=\([^ ]*\) .*Reason=.*\[[^@]*@\([^]]*\)\].*/\1 \2/p'
    exit 0;;
  esac
  sleep 0.02
done
echo "gpu02 was not drained"; exit 1
"""


def test_a_drain_in_the_same_second_by_a_node_sorting_first_makes_this_one_withdraw(converged):  # pylint: disable=unused-argument
    """gpu02's run drains (its first count saw nothing); in the 4 s it waits before its second count, gpu01 is drained
    with the check's prefix as soon as the controller sees gpu02's drain. In the same second, gpu01 comes first in
    slurmctld's order (time, then name) and gpu02, the second drain against a cap of 1, withdraws its own; a second
    later, gpu01 comes second and gpu02 keeps it. Each round is judged by the times real slurmctld wrote, and one of
    three rounds at least must have been a withdrawal (on this lab every one was)."""
    restore()
    host = "gpu02"
    path, state = config_copy(host, "same-second", strikes={"pcie": 1}, breaker_jitter_seconds=0,
                              breaker_settle_seconds=4)
    withdrawals = 0
    try:
        rc, out = podman_exec(host, "nvidia-smi", "--emu-pcie-width", "2", "8")
        assert rc == 0, out
        for _round in range(3):
            with ThreadPoolExecutor(1) as pool:
                controller = pool.submit(slurm, "bash", "-c", DRAIN_GPU01_AFTER_GPU02)
                rc, out, _wall = run_check(host, "--config", path)
                ctl_rc, ctl_out = controller.result(60)
            assert ctl_rc == 0, ctl_out
            taken = dict(line.split() for line in ctl_out.split("\n") if line.strip())
            rc_record, record = podman_exec(host, "cat", state + "/healthcheck-slurmd.json")
            assert rc_record == 0, record
            record = json.loads(record)
            states = node_states()
            assert rc == 1 and states["gpu01"] == ("drain", "cf-health: decided in the same moment"), (out, states)
            if taken["gpu01"] == taken["gpu02"]:
                withdrawals += 1
                assert "action drain withdrawn (breaker open: pcie)" in summary(host, out), out
                assert record["breaker_rank"] == 2 and record["breaker_open"] == ["pcie"], record
                # (a trailing '*': a ping that timed out on the loaded lab; it clears at slurmctld's next ping)
                assert (states[host][0].rstrip("*"), states[host][1]) == ("idle", "none"), states
            else:
                assert taken["gpu01"] > taken["gpu02"], taken
                assert "action drain;" in summary(host, out) and record["breaker_rank"] == 1, (out, record)
                assert states[host][1].startswith(PREFIX), states
            restore(drained_by_tests=GPU_NODES)
        assert withdrawals >= 1, "no round had both drains in the same second"
    finally:
        podman_exec(host, "nvidia-smi", "--emu-pcie-width", "2", "16")
        podman_exec(host, "rm", "-rf", path, state)
        forget(host, "pcie")
        restore(drained_by_tests=GPU_NODES)


def test_an_admin_drain_is_never_resumed_nor_overwritten(converged):  # pylint: disable=unused-argument
    restore()
    host = "gpu02"
    reason = "admin: bad DIMM ticket 4711"
    path, state = config_copy(host, "admin", strikes={"xid": 1})
    try:
        rc, out = slurm("scontrol", "update", "NodeName=" + host, "State=DRAIN", "Reason=" + reason)
        assert rc == 0, out
        rc, out, _wall = run_check(host, "--config", path)
        assert rc == 0 and "healthy; state IDLE+DRAIN; action none" in summary(host, out), out
        # a fault (an Xid in the kernel log) on the admin-drained node: still the admin's reason
        rc, out = podman_exec(host, "dmesg", "--emu-xid", "1", "79")
        assert rc == 0, out
        rc, out, _wall = run_check(host, "--config", path)
        line = summary(host, out)
        assert rc == 1 and "xid: Xid 79 on GPU 0000:2a:00" in line and "action none" in line, out
        podman_exec(host, "dmesg", "--emu-reset")
        podman_exec(host, HC, "--config", path, "--clear", "xid")
        rc, out, _wall = run_check(host, "--config", path)
        assert rc == 0 and "action none" in summary(host, out), out
        assert node_states()[host] == ("drain", reason)
    finally:
        podman_exec(host, "dmesg", "--emu-reset")
        podman_exec(host, "rm", "-rf", path, state)
        forget(host, "xid")  # slurmd's own runs may have seen the Xid too
        restore(admin=(host,))


def test_the_health_check_with_every_new_check_runs_well_inside_its_budget(converged):  # pylint: disable=unused-argument
    """Each GPU node's installed check (Xids, NVLink state and counters, PCIe width, clock events, DCGM health,
    GPU count, ECC...) as slurmd runs it, twice (the second run reads the first one's counters); then with MIG and the
    peermem module asked for too, on a copy (the lab loads no kernel module: peermem fails, named, with no drain as a
    dry run). Prints the run time (its own measure and with podman exec)."""
    restore()
    for host in GPU_NODES:
        for attempt in (1, 2):
            rc, out, wall = run_check(host, "--timing")
            assert rc == 0, out
            line = summary(host, out)
            assert re.match(r"^cf-health: %s: healthy; state IDLE; action none; [0-9.]+ s of a 40 s budget$" % host,
                            line), line
            timing = json.loads(out.strip().splitlines()[-1])
            commands = [c["command"].split()[:3] for c in timing["commands"]]
            assert ["dmesg"] in commands and ["nvidia-smi", "nvlink", "-s"] in commands, commands
            print("health check on %s (run %d): %.2f s (its own measure), %.2f s with podman exec; %s" % (
                host, attempt, own_seconds(line), wall,
                ", ".join("%s %.2f s" % (" ".join(c["command"].split()[:2])[:40], c["elapsed_seconds"])
                          for c in timing["commands"])))
            assert own_seconds(line) < 30 and wall < 30, (host, line, wall)
        # (no nvidia_peermem directory where the copy looks: the lab loads no kernel module, and /sys is the host's)
        path, state = config_copy(host, "all", mig_mode=False, peermem=True,
                                  sys_module_dir="/run/cf-hc-lab-all/no-sys-module")
        try:
            rc, out, wall = run_check(host, "--config", path, "--dry-run")
            line = summary(host, out)
            assert rc == 1 and "peermem: nvidia_peermem is not loaded" in line, out
            print("health check on %s with MIG and peermem checks: %.2f s, %.2f s with podman exec"
                  % (host, own_seconds(line), wall))
            assert own_seconds(line) < 30
        finally:
            podman_exec(host, "rm", "-rf", path, state)
    assert {h: node_states()[h] for h in GPU_NODES} == {h: ("idle", "none") for h in GPU_NODES}
