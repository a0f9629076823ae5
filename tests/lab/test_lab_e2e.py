"""The lab end to end: site.yml converges the container cluster, repairs drift and changes nothing else.

Runs against the lab of inventories/lab (tests/lab/lab.sh up creates it if it is not running), exactly as
`make lab` does. The containers are left running for inspection; `make lab-down` removes them.
"""

import json
import os
import re
import subprocess
import time

import pytest

from labkit import (BIN, ENV, ROOT, SESSION_START, changed_tasks, node_states, podman_exec,  # pylint: disable=import-error
                    recap, roles_run, run, settled_node_states, slurm)


def test_check_mode_on_new_servers_plans_every_host_and_changes_nothing(planned):
    if not planned["new"]:
        pytest.skip("the lab was converged before this session (LAB_REUSE=1): no new servers to plan")
    assert planned["rc"] == 0, planned["out"]
    assert set(planned["recap"]) == {"head01", "gpu01", "gpu02", "stor01"}
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in planned["recap"].values()), planned["recap"]
    # every host has work to do, and the packages a real run installs are named
    assert all(r["changed"] > 0 for r in planned["recap"].values()), planned["recap"]
    assert planned["out"].count("Would install") >= 4, "check mode did not name the packages it would install"
    # nothing was installed or written
    touched = [what for what, present in planned["after"].items() if present]
    assert not touched, "check mode changed the servers: %s" % touched


def test_site_converges_every_lab_host(converged):
    assert set(converged) == {"head01", "gpu01", "gpu02", "stor01"}
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in converged.values()), converged


# A task of the last GPU node role: it shows that the role plays ran on the GPU nodes.
GPU_NODE_ROLE_TASK = "TASK [clusterforge.gpu.nccl : Write the NCCL system configuration]"
# The roles of site.yml that run tasks on every GPU node (the bios stage is off in the lab).
GPU_NODE_ROLES = {"common_os", "nvidia_driver", "dcgm", "pcie_acs", "gpu_tuning", "slurm_compute", "lustre_client",
                  "nccl", "monitoring"}


def site(*extra):
    return run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "site.yml"] + list(extra))


def test_a_failed_run_stops_at_the_failing_role_and_changes_nothing(converged):
    """A wrong extra variable fails in the nccl role (no interface holds the socket address: only the node can tell,
    so preflight lets it through), after the roles before it ran. On the converged lab that run changes nothing
    anywhere. The next plain run, which must complete, is the drift repair run of the next test (pytest keeps the
    file's order); run alone (`-k`), this test proves the failure only."""
    socket_ip = '{"nccl_socket_ip": "192.0.2.7"}'
    rc, out = site("-e", socket_ip)
    assert rc != 0, out
    assert "inventory passed preflight" in out, out
    assert "no interface holds 192.0.2.7" in out, out
    failed_run = recap(out)
    assert set(failed_run) == {"head01", "gpu01", "gpu02", "stor01"}, failed_run
    assert not {h: r for h, r in failed_run.items() if r["changed"]}, failed_run
    assert {h for h, r in failed_run.items() if r["failed"]} == {"gpu01", "gpu02"}, failed_run
    assert GPU_NODE_ROLE_TASK not in out, "the failed run went past the failing role"


# ------------------------------------------------------------------------------------ drift, repaired by a re-run

def lustre_param(host, name):
    rc, out = podman_exec(host, "lctl", "get_param", "-n", name)
    assert rc == 0, out
    return sorted(set(out.split()))


# The tasks and handlers that repair the drift below on gpu02: each kind of drift has its repair, and nothing else
# changes in that run (a task that changed on its own would be a second run after the converge that changes something).
DRIFT_REPAIRS = {
    "clusterforge.gpu.nccl : Write the NCCL system configuration",
    "clusterforge.gpu.gpu_tuning : Apply persistence mode, clock locks, application clocks and power limits",
    "clusterforge.gpu.lustre_client : Configure LNet (/etc/lnet.conf, lnet.service, the live networks)",
    "clusterforge.gpu.slurm_compute : Enable and start munge",
    "clusterforge.gpu.slurm_compute : Restart slurmd",
}
# LNet's restart re-applies the client tunings: systemd restarts the tuning unit with it (the unit requires the
# mounts, which require LNet), so lctl_param finds them repaired already; it would change them itself otherwise.
DRIFT_REPAIRS_MAYBE = {"clusterforge.gpu.lustre_client : Set the tunings whose live value differs (lctl set_param)"}


def test_a_plain_rerun_repairs_every_kind_of_drift(converged):
    """Operators run site.yml to repair drift: nothing is skipped on the strength of an earlier run's record.

    It runs right after the failed run of the test above: its plain run is also the run that follows a failed one,
    which must complete (every role on every node) and change nothing that was not drift."""
    want_dirty_mb = lustre_param("gpu02", "osc.*.max_dirty_mb")
    assert want_dirty_mb == ["2048"], want_dirty_mb
    # Drift on gpu02 only, of six kinds: a managed file, a GPU setting read back from the tool, a clock setting,
    # a Lustre client tunable, a stopped daemon, and LNet unconfigured under an active lnet.service.
    assert podman_exec("gpu02", "sh", "-c", "echo NCCL_DEBUG=TRACE >> /etc/nccl.conf")[0] == 0
    assert podman_exec("gpu02", "nvidia-smi", "-i", "3", "-pm", "0")[0] == 0
    assert podman_exec("gpu02", "nvidia-smi", "-i", "2", "-ac", "2619,1755")[0] == 0
    assert podman_exec("gpu02", "lctl", "set_param", "osc.*.max_dirty_mb=512")[0] == 0
    assert lustre_param("gpu02", "osc.*.max_dirty_mb") == ["512"]
    assert podman_exec("gpu02", "systemctl", "stop", "munge")[0] == 0
    # LNet unconfigured by hand while lnet.service stays active. (A real node refuses while Lustre is mounted; the
    # emulator lets it happen, which stands for a client whose mounts were taken down first.)
    assert podman_exec("gpu02", "lnetctl", "lnet", "unconfigure")[0] == 0
    assert podman_exec("gpu02", "lnetctl", "net", "show")[0] != 0
    # Without munge, slurmd cannot answer slurmctld's next ping and the node is marked not responding ("*"); wait
    # for it, so that the repair below has a node to bring back (restart slurmd once munge runs).
    deadline = time.monotonic() + 240
    while "*" not in podman_exec("head01", "sinfo", "--noheader", "--Node", "--nodes=gpu02", "--format=%T")[1]:
        assert time.monotonic() < deadline, "slurmctld never marked gpu02 not responding with munge stopped"
        time.sleep(3)
    rc, out = site()
    assert rc == 0, out
    # This is also the first plain re-run after the converge (and after a failed run): every role runs on every node
    # (there is no skip of any kind), nothing changes on the hosts without drift, and on gpu02 only the tasks that
    # repair the drift change.
    for host in ("gpu01", "gpu02"):
        assert GPU_NODE_ROLES <= roles_run(out, host), (host, sorted(GPU_NODE_ROLES - roles_run(out, host)))
    changed = recap(out)
    assert set(changed) == {"head01", "gpu01", "gpu02", "stor01"}, changed
    assert not {h: r["changed"] for h, r in changed.items() if r["changed"] and h != "gpu02"}, changed
    repaired = changed_tasks(out, "gpu02")
    assert DRIFT_REPAIRS <= repaired, "not repaired:\n" + "\n".join(sorted(DRIFT_REPAIRS - repaired))
    assert repaired <= DRIFT_REPAIRS | DRIFT_REPAIRS_MAYBE, "changed without drift:\n" + "\n".join(
        sorted(repaired - DRIFT_REPAIRS - DRIFT_REPAIRS_MAYBE))
    # Registration alone does not tell the fix apart: slurmctld's next successful ping (100 s after the one that
    # marked the node) may clear the mark during the run. Nothing else on gpu02 asks slurmd to restart here, so the
    # restart after munge is started again is checked itself: the handler "Restart slurmd" in DRIFT_REPAIRS above.
    rc, text = podman_exec("gpu02", "cat", "/etc/nccl.conf")
    assert rc == 0 and "NCCL_DEBUG" not in text, text
    rc, text = podman_exec("gpu02", "nvidia-smi", "--query-gpu=persistence_mode", "--format=csv,noheader")
    assert rc == 0 and set(text.split()) == {"Enabled"}, text
    rc, text = podman_exec("gpu02", "nvidia-smi", "--query-gpu=clocks.applications.graphics",
                           "--format=csv,noheader,nounits")
    assert rc == 0 and set(text.split()) == {"1980"}, text
    assert lustre_param("gpu02", "osc.*.max_dirty_mb") == want_dirty_mb
    assert podman_exec("gpu02", "systemctl", "is-active", "munge")[0] == 0
    rc, text = podman_exec("gpu02", "lnetctl", "net", "show")
    assert rc == 0 and "net type: tcp" in text, text
    # That the repair settled in this one run is proven by the next test, which runs right after this one: check mode
    # reports no change on any host. Run alone (`-k`), this test needs a lab whose last run changed nothing.


def test_check_mode_on_a_converged_lab_reports_no_change(converged):
    """Right after the drift repair above (pytest keeps the file's order), so a repair that needed a second run to
    settle fails here as well."""
    rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "site.yml", "--check"])
    assert rc == 0, out
    assert not {h: r for h, r in recap(out).items() if r["changed"] or r["failed"]}


def test_hosts_resolve_each_other_by_management_address(converged):
    rc, out = podman_exec("gpu01", "getent", "hosts", "head01")
    assert rc == 0 and out.split()[0] == "10.77.0.10", out
    rc, out = podman_exec("head01", "getent", "hosts", "gpu02-fab")
    assert rc == 0 and out.split()[0] == "10.78.0.22", out


def test_emulated_gpus_are_visible_on_gpu_nodes(converged):
    rc, out = podman_exec("gpu01", "nvidia-smi", "--query-gpu=name", "--format=csv,noheader")
    assert rc == 0 and out.splitlines() == ["NVIDIA H100 80GB HBM3"] * 8, out
    rc = podman_exec("head01", "sh", "-c", "command -v nvidia-smi")[0]
    assert rc != 0, "the controller must not look like a GPU node"


def test_slurm_schedules_gpu_jobs_across_the_lab(converged):
    states = {n: s for n, (s, r) in settled_node_states().items()}
    assert states == {"gpu01": "idle", "gpu02": "idle"}, states
    rc, out = podman_exec("head01", "srun", "-N2", "--gres=gpu:1", "--time=1", "hostname")
    assert rc == 0 and sorted(out.split()) == ["gpu01", "gpu02"], out
    rc, out = podman_exec("head01", "srun", "-N1", "--gres=gpu:9", "--time=1", "--immediate=5", "hostname")
    assert rc != 0, "a job asking for more GPUs than a node has must be rejected: " + out


def test_slurm_accounting_records_jobs_in_mariadb(converged):
    rc, out = podman_exec("head01", "srun", "-N1", "--job-name=cf-e2e-acct", "--time=1", "true")
    assert rc == 0, out
    # slurmctld hands finished jobs to slurmdbd asynchronously: poll for up to a minute.
    for dummy in range(30):
        rc, out = podman_exec("head01", "sacct", "-X", "-n", "-P", "--name=cf-e2e-acct", "--format=JobName,State")
        if rc == 0 and "cf-e2e-acct|COMPLETED" in out.split():
            break
        time.sleep(2)
    assert rc == 0 and "cf-e2e-acct|COMPLETED" in out.split(), out


def test_lustre_is_mounted_on_clients_and_shares_data(converged):
    rc, out = podman_exec("gpu01", "sh", "-c", "echo cf-e2e > /mnt/cflab/cf-e2e.txt && sync")
    assert rc == 0, out
    rc, out = podman_exec("gpu02", "cat", "/mnt/cflab/cf-e2e.txt")
    assert rc == 0 and out.strip() == "cf-e2e", out


# ------------------------------------------------------------------------------------------ rolling reconfigure

# Power limits unique to this session (within the emulated 200-700 W range), so that a reused lab changes too.
POWER_BASE_W = 400 + (int(time.time()) // 60 % 50) * 2
ROLL_ROLES = '{"rolling_roles": ["clusterforge.gpu.gpu_tuning"], "rolling_poll_interval_seconds": 2, ' \
             '"rolling_max_unavailable_percent": 50}'


def power_limits(host):
    rc, out = podman_exec(host, "nvidia-smi", "--query-gpu=power.limit", "--format=csv,noheader,nounits")
    assert rc == 0, out
    return sorted({float(v) for v in out.split()})


def power_change(power_w):
    """An extra inventory source with a power limit for both GPU nodes. Host variables: the lab caps power in
    group_vars/gpu_nodes/, which beats group variables written in an inventory file (Ansible's precedence)."""
    return "gpu_nodes:\n  hosts:\n" + "".join("    %s:\n      gpu_tuning_power_limit_watts: %d\n" % (h, power_w)
                                              for h in ("gpu01", "gpu02"))


def roll(tmp_path, power_w, *extra):
    """Roll gpu_tuning with a power limit set in an extra inventory source (where a change lives)."""
    override = tmp_path / "change.yml"
    override.write_text(power_change(power_w))
    return run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "-i", str(override),
                "playbooks/rolling_reconfigure.yml", "-e", ROLL_ROLES] + list(extra))


class Monitor(object):
    """Polls sinfo every second while a roll runs and keeps every snapshot."""

    def __init__(self, on_snapshot=None):
        import threading
        self.snapshots = []
        self.on_snapshot = on_snapshot
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self):
        while not self.stop.is_set():
            try:
                self.snapshots.append(node_states())
                if self.on_snapshot:
                    self.on_snapshot(self.snapshots[-1])
            except AssertionError:
                pass
            self.stop.wait(1)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(10)

    def most_rolled_at_once(self):
        return max([sum(1 for s, r in snap.values() if s.startswith(("drain", "drng")) and r.startswith("cf-roll:"))
                    for snap in self.snapshots] or [0])


def wait_for_job(job_id, wanted, seconds=120):
    state = ""
    for dummy in range(seconds // 2):
        rc, out = slurm("sacct", "-X", "-n", "-P", "-j", job_id, "--format=State")
        state = out.strip().splitlines()[0] if rc == 0 and out.strip() else ""
        if state in wanted:
            return state
        time.sleep(2)
    return state


ROLL_RELEASE = "/srv/cf-roll-job-release"


def held_job(host, release, name):
    """A job on host that runs until the file `release` exists there (unreleased, it fails after 10 minutes); its id
    once it runs."""
    podman_exec(host, "rm", "-f", release)
    rc, out = slurm("sbatch", "--parsable", "-w", host, "-J", name, "--time=12", "--wrap",
                    "for i in $(seq 600); do [ -e %s ] && exit 0; sleep 1; done; exit 3" % release)
    assert rc == 0, out
    job = out.strip().split(";")[0]
    assert wait_for_job(job, ("RUNNING",), 60) == "RUNNING"
    return job


def test_rolling_change_drains_only_what_changes_and_kills_no_job(converged, tmp_path):
    states = settled_node_states()
    assert all(s == "idle" for s, r in states.values()), states
    rc, out = slurm("scontrol", "update", "NodeName=gpu02", "State=DRAIN", "Reason=admin: fan check")
    assert rc == 0, out
    # The job runs until the test releases it, once gpu01 is seen draining under it (a fixed sleep ran out before the
    # drain when the machine was loaded: preflight and the plan come first); unreleased it fails after 10 minutes.
    job = held_job("gpu01", ROLL_RELEASE, "cf-roll-job")
    before_gpu02 = power_limits("gpu02")

    # Released once gpu01 has been draining for 35 s: long enough for the drain wait to report its progress (the
    # recap callback prints the node's state and the jobs it still runs at most every 30 s, the first after 30 s).
    draining_since = []

    def release_when_draining(snap):
        if snap.get("gpu01", ("", ""))[0] == "drng" and snap["gpu01"][1].startswith("cf-roll:"):
            draining_since.append(time.monotonic())
            if time.monotonic() - draining_since[0] >= 35:
                podman_exec("gpu01", "touch", ROLL_RELEASE)

    try:
        with Monitor(on_snapshot=release_when_draining) as mon:
            rc, out = roll(tmp_path, POWER_BASE_W + 150)
    finally:
        podman_exec("gpu01", "touch", ROLL_RELEASE)  # never leave the job behind
    assert rc == 0, out
    assert "held by someone else, drained, DOWN or FAIL (left alone, never resumed): gpu02" in out
    # While the drain waited, the run said what it waited for: gpu01's state and the job it still ran.
    progress = re.findall(r"^progress after .*: Wait until its jobs have finished .*$", out, re.M)
    print("\n".join(progress))  # for the record (pytest -s shows it)
    assert any("waiting for gpu01 (" in line and "job %s)" % job in line for line in progress), out[-3000:]
    # The job that ran on gpu01 when the roll started finished normally: the drain waited for it.
    assert wait_for_job(job, ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT")) == "COMPLETED"
    assert any(snap["gpu01"][0] == "drng" and snap["gpu01"][1].startswith("cf-roll:") for snap in mon.snapshots), \
        "gpu01 was never seen draining while its job ran"
    assert mon.most_rolled_at_once() <= 1
    # The admin's drain is untouched and the node was not changed.
    assert all(snap["gpu02"][0].rstrip("*") == "drain" and snap["gpu02"][1] == "admin: fan check"
               for snap in mon.snapshots if "gpu02" in snap)
    states = settled_node_states()
    assert states["gpu02"] == ("drain", "admin: fan check"), states
    assert power_limits("gpu02") == before_gpu02
    # gpu01 got the change and is back in service.
    assert states["gpu01"][0] == "idle", states
    assert power_limits("gpu01") == [float(POWER_BASE_W + 150)]


def test_failed_health_gate_stops_the_roll_and_a_rerun_finishes(converged, tmp_path):
    # The admin is done with gpu02 (drained by the test before; resuming an idle node is an error, hence no check).
    slurm("scontrol", "update", "NodeName=gpu02", "State=RESUME")
    states = settled_node_states({"gpu02": ("idle", "none")})
    assert states["gpu02"] == ("idle", "none"), states
    rc, out = podman_exec("gpu01", "dcgmi", "--emu-fail", "software", "3")
    assert rc == 0, out
    try:
        with Monitor() as mon:
            rc, out = roll(tmp_path, POWER_BASE_W + 100)
        assert rc != 0, out
        assert "gpu01 failed at 'dcgm-diag'" in out, out
        # The run ends with the CLUSTERFORGE RECAP (the recap callback), though it stopped: the held node and why.
        recap_text = out.rsplit("CLUSTERFORGE RECAP", 1)[-1]
        print("CLUSTERFORGE RECAP" + recap_text)  # for the record (pytest -s shows it)
        assert "nodes this run drained and left drained: gpu01: cf-roll:" in recap_text, out[-3000:]
        assert "failed: gpu01 at " in recap_text and "dcgm-diag" in recap_text, recap_text
        states = settled_node_states()
        assert states["gpu01"][0] == "drain", states
        assert states["gpu01"][1].startswith("cf-roll:") and "FAILED dcgm-diag" in states["gpu01"][1], states
        assert "software on GPU 3" in states["gpu01"][1], states
        run_id = re.match(r"cf-roll:(\S+) FAILED ", states["gpu01"][1]).group(1)
        # The canary failed: the later batch (gpu02) was never drained nor changed.
        assert states["gpu02"] == ("idle", "none"), states
        assert all(snap.get("gpu02", ("idle", ""))[0].rstrip("*") == "idle" for snap in mon.snapshots)
        assert power_limits("gpu02") != [float(POWER_BASE_W + 100)]
    finally:
        podman_exec("gpu01", "dcgmi", "--emu-reset")

    # A re-run adopts the stopped roll's drain only when it names that roll's run id. Its gate also runs the NCCL
    # test (clusterforge.gpu.nccl_tests against the emulator's 370 GB/s, above the default 333) on each node.
    rc, out = roll(tmp_path, POWER_BASE_W + 100, "-e", "rolling_run_id=%s" % run_id, "-e", '{"rolling_health_nccl_test": true}')
    assert rc == 0, out
    nccl_gate = re.findall(r"TASK \[clusterforge\.gpu\.rolling : Run all_reduce_perf across the node's GPUs; it reaches "
                           r"the NCCL bus bandwidth threshold\] \*+\n(ok: \[gpu0[12]\])", out)
    assert sorted(nccl_gate) == ["ok: [gpu01]", "ok: [gpu02]"], out[-3000:]
    assert "left drained by an earlier roll (adopted): gpu01" in out
    recap_text = out.rsplit("CLUSTERFORGE RECAP", 1)[-1]
    assert "nodes this run drained and left drained: none" in recap_text and "gpu01" in recap_text, recap_text
    states = settled_node_states()
    assert {n: s for n, (s, r) in states.items()} == {"gpu01": "idle", "gpu02": "idle"}, states
    assert power_limits("gpu01") == [float(POWER_BASE_W + 100)] and power_limits("gpu02") == [float(POWER_BASE_W + 100)]


def test_rolling_check_mode_drains_nothing(converged, tmp_path):
    before = {h: power_limits(h) for h in ("gpu01", "gpu02")}
    assert all(limits != [float(POWER_BASE_W + 50)] for limits in before.values()), before
    with Monitor() as mon:
        rc, out = roll(tmp_path, POWER_BASE_W + 50, "--check")
    assert rc == 0, out
    assert "nodes to roll: gpu01, gpu02" in out
    assert not any(s.startswith(("drain", "drng")) or r != "none" for snap in mon.snapshots for s, r in snap.values()), \
        mon.snapshots
    assert {n: s for n, (s, r) in settled_node_states().items()} == {"gpu01": "idle", "gpu02": "idle"}
    assert {h: power_limits(h) for h in ("gpu01", "gpu02")} == before


def test_a_vaulted_change_is_planned_with_the_operators_vault_secret(converged, tmp_path):
    """The plan's check-mode run gets the operator's command line: a change in a vaulted inventory source and the
    rolling variables in a vaulted -e @file, opened with --vault-password-file, are planned (one node, in check mode,
    so that nothing is left behind). Before the plan got the command line, its run could not open either file.
    The remote user is not part of this test: the lab's connection (connection_plugins/cf_lab_nsenter.py) enters the
    containers' namespaces as root and has no user to log in as; tests/unit/plugins/plugin_utils/test_rolling_plan.py
    proves that -u/--user reaches the plan."""
    secret = "cf-lab-vault-%d" % os.getpid()
    password = tmp_path / "vault-pass"
    password.write_text(secret + "\n")
    before = {h: power_limits(h) for h in ("gpu01", "gpu02")}
    power_w = POWER_BASE_W + 30
    assert before["gpu02"] != [float(power_w)], before
    change = tmp_path / "change.yml"
    change.write_text(power_change(power_w))
    rolling = tmp_path / "rolling.yml"
    rolling.write_text("rolling_nodes: gpu02\n")
    for path in (change, rolling):
        rc, out = run([os.path.join(BIN, "ansible-vault"), "encrypt", "--vault-password-file", str(password), str(path)])
        assert rc == 0, out
        assert path.read_text().startswith("$ANSIBLE_VAULT;"), path
    with Monitor() as mon:
        rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "-i", str(change),
                       "playbooks/rolling_reconfigure.yml", "-e", ROLL_ROLES, "-e", "@%s" % rolling,
                       "--vault-password-file", str(password), "--forks", "3", "--check"], timeout=600)
    assert rc == 0, out
    assert "nodes to roll: gpu02" in out and "would change: gpu02" in out, out
    assert secret not in out
    assert not any(s.startswith(("drain", "drng")) or r != "none" for snap in mon.snapshots for s, r in snap.values()), \
        mon.snapshots
    assert {h: power_limits(h) for h in ("gpu01", "gpu02")} == before


def test_a_change_that_fails_in_the_plan_drains_nothing_and_names_node_task_and_why(converged, tmp_path):
    """The plan reads the check-mode run as JSON: a failure is reported per node and task, and nothing is drained."""
    override = tmp_path / "bad_change.yml"
    # Only the node can tell that no interface holds this address, so preflight lets it through to the plan.
    override.write_text("gpu_nodes:\n  vars:\n    nccl_socket_ip: 192.0.2.7\n")
    roles = '{"rolling_roles": ["clusterforge.gpu.nccl"], "rolling_poll_interval_seconds": 2}'
    with Monitor() as mon:
        rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "-i", str(override),
                       "playbooks/rolling_reconfigure.yml", "-e", roles])
    assert rc != 0, out
    assert "The change failed in check mode" in out and "nothing was drained" in out, out
    # The callback may wrap the message: compare it with its whitespace joined.
    flat = " ".join(out.split())
    assert "Failed: " in flat and "Last lines" not in flat, out
    for node in ("gpu01", "gpu02"):
        assert re.search(r"%s: (?:\S+ : )?Refuse a node where no interface holds the socket address: %s: no interface "
                         r"holds 192\.0\.2\.7" % (node, node), flat), out
    assert not any(s.startswith(("drain", "drng")) or r != "none" for snap in mon.snapshots for s, r in snap.values()), \
        mon.snapshots


# ------------------------------------------------------------------------------------------------- validation

# gpu.power_limit and gpu.clocks: the lab inventory caps power (690 W) and locks SM clocks (1980 MHz).
VALIDATION_CHECKS = {"gpu.count", "gpu.health", "gpu.power_limit", "gpu.clocks", "dcgm.diag", "pcie.acs", "ib.port", "ib.port_count", "ib.fabric",
                     "ib.write_bw", "nccl.single_node", "nccl.multi_node", "storage.write", "storage.read",
                     "storage.aggregate_write", "storage.aggregate_read", "slurm.smoke", "checkpoint.stall"}


def test_site_yml_ends_with_a_passing_validation_report(converged):
    # site.yml's last stage wrote the report on the controller and fetched it to this checkout, in this session.
    assert os.path.getmtime(os.path.join(ROOT, "validation-reports", "validation.json")) >= SESSION_START
    with open(os.path.join(ROOT, "validation-reports", "validation.json")) as handle:
        report = json.load(handle)
    assert report["ok"] is True and report["summary"]["fail"] == 0, report["failures"]
    assert VALIDATION_CHECKS <= {c["id"] for c in report["checks"]}
    assert all(c["status"] == "pass" for c in report["checks"]), [c for c in report["checks"] if c["status"] != "pass"]
    with open(os.path.join(ROOT, "validation-reports", "validation.html")) as handle:
        html = handle.read()
    assert "<svg" in html and "nccl.multi_node" in html
    rc, out = podman_exec("head01", "python3", "-c", "import json; print(json.load(open("
                          "'/var/lib/clusterforge/validation/validation.json'))['ok'])")
    assert rc == 0 and out.strip() == "True", out


def test_injected_faults_fail_validation_and_are_named(converged, tmp_path):
    podman_exec("gpu02", "sh", "-c", "echo '{\"ports\": {\"mlx5_3\": {\"down\": true}}}' > /var/lib/clusterforge-emu/ib.json")
    podman_exec("gpu01", "sh", "-c", "echo '{\"nccl_busbw_gbps\": 200}' > /var/lib/clusterforge-emu/perf.json")
    # The rolling tests leave the power limit they rolled out (a change lives in the inventory): validation gets
    # the same extra inventory source, so that only the injected faults fail.
    change = tmp_path / "change.yml"
    change.write_text(power_change(int(power_limits("gpu01")[0])))
    try:
        rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "-i", str(change),
                       "playbooks/validate.yml", "-e", "validate_fetch_dir=%s" % tmp_path])
    finally:
        podman_exec("gpu02", "rm", "-f", "/var/lib/clusterforge-emu/ib.json")
        podman_exec("gpu01", "rm", "-f", "/var/lib/clusterforge-emu/perf.json")
    assert rc != 0, out
    assert "Validation failed" in out and "gpu02 mlx5_3:1: state Down" in out, out
    with open(os.path.join(str(tmp_path), "validation.json")) as handle:
        report = json.load(handle)
    assert report["ok"] is False
    failed = {(c["id"], c["subject"]) for c in report["checks"] if c["status"] == "fail"}
    assert ("ib.port", "gpu02 mlx5_3:1") in failed, failed
    assert ("nccl.single_node", "gpu01") in failed, failed
    # Everything else still passes: the faults are named, not smeared over the cluster.
    assert {c["subject"] for c in report["checks"] if c["status"] == "fail"} <= {"gpu02 mlx5_3:1", "gpu01"}


# ------------------------------------------------------------------------------- Slurm 24.11: the release, adding a node

ADD_NODE_INVENTORY = os.path.join("tests", "lab", "inventories", "add_gpu03.yml")


def test_the_lab_runs_slurm_24_11_with_accounting(converged):
    for host, cmd in (("head01", ["slurmctld", "-V"]), ("head01", ["slurmdbd", "-V"]), ("gpu01", ["slurmd", "-V"])):
        rc, out = podman_exec(host, *cmd)
        # Debian's build says "slurm-wlm 24.11.5", SchedMD's "slurm 24.11.5"
        assert rc == 0 and re.match(r"slurm(-wlm)? 24\.11\.", out.strip()), (host, cmd, out)
    rc, out = slurm("sacctmgr", "-n", "-P", "list", "cluster", "format=Cluster")
    assert rc == 0 and out.split() == ["cflab"], out


def test_the_health_check_runs_well_inside_slurms_60_s_limit(converged):
    """slurmd kills HealthCheckProgram after 60 s, and runs it before the node registers. Run it on each GPU node as
    slurmd does (no arguments, only SLURMD_NODENAME in the environment), with DCGM installed (the lab's emulated dcgmi:
    its `dcgmi health -c` answers at once, so this measures our program, not a real DCGM), and time it; then again with
    DCGM's level 1 diagnostic switched on."""
    for host in ("gpu01", "gpu02"):
        start = time.time()
        rc, out = podman_exec(host, "env", "-i", "SLURMD_NODENAME=" + host, "/usr/libexec/clusterforge/slurm-healthcheck")
        wall = time.time() - start
        assert rc == 0, out
        m = re.search(r"(?m)^cf-health: %s: healthy; .*; ([0-9.]+) s of a 40 s budget$" % host, out)
        assert m, out
        print("health check on %s: %.2f s (its own measure), %.2f s with podman exec" % (host, float(m.group(1)), wall))
        assert float(m.group(1)) < 30 and wall < 30, (host, m.group(1), wall)
    # With DCGM's level 1 diagnostic (slurm_compute_healthcheck_dcgm_diag_level: 1): the node's own configuration
    # with that one value changed, run the same way; --timing shows that the diagnostic ran.
    for host in ("gpu01", "gpu02"):
        rc, out = podman_exec(host, "python3", "-c",
                              "import json; c = json.load(open('/etc/slurm/clusterforge-healthcheck.json')); "
                              "c['dcgm_diag_level'] = 1; json.dump(c, open('/tmp/cf-hc-diag1.json', 'w'))")
        assert rc == 0, out
        start = time.time()
        rc, out = podman_exec(host, "env", "-i", "SLURMD_NODENAME=" + host, "/usr/libexec/clusterforge/slurm-healthcheck",
                              "--config", "/tmp/cf-hc-diag1.json", "--timing")
        wall = time.time() - start
        assert rc == 0, out
        m = re.search(r"(?m)^cf-health: %s: healthy; .*; ([0-9.]+) s of a 40 s budget$" % host, out)
        assert m, out
        timing = json.loads(out.strip().splitlines()[-1])
        # dcgmi diag --host unix:///run/nvidia-dcgm/nv-hostengine.sock -r 1 -j: the host engine's root-only socket
        diag = [c for c in timing["commands"] if c["command"].startswith("dcgmi diag") and " -r 1 " in c["command"]]
        assert len(diag) == 1 and diag[0]["outcome"] == "rc 0", timing
        print("health check with dcgmi diag -r 1 on %s: %.2f s (its own measure; diag %.2f s), %.2f s with podman exec"
              % (host, float(m.group(1)), diag[0]["elapsed_seconds"], wall))
        assert float(m.group(1)) < 30 and wall < 30, (host, m.group(1), wall)


def systemd_started(host, unit):
    rc, out = podman_exec(host, "systemctl", "show", unit, "--property=ActiveEnterTimestamp", "--value")
    assert rc == 0 and out.strip(), (host, unit, out)
    return out.strip()


def test_a_node_joins_through_scontrol_reconfigure_while_a_job_runs(converged):
    """Slurm 24.11: a new node is a configuration change plus `scontrol reconfigure`. The administrator adds gpu03 to
    the inventory and runs site.yml limited to the new node and the controller (README); no daemon is restarted by
    systemd anywhere else and the job running on gpu01 completes. gpu03 has slurm_compute_burn_in: it registers
    drained with the burn-in reason (drained before its slurmd first started) and takes no job until it is resumed
    (by the deep checks, here by hand). Then the node is removed again the same way."""
    states = settled_node_states()
    assert set(states) == {"gpu01", "gpu02"}, states
    rc, job = slurm("sbatch", "--parsable", "--job-name=cf-e2e-add-node", "--nodelist=gpu01", "--gres=gpu:1",
                    "--time=5", "--wrap", "sleep 45")
    assert rc == 0, job
    job = job.strip()
    assert wait_for_job(job, ("RUNNING",), 60) == "RUNNING"
    before = {(h, u): systemd_started(h, u) for h, u in (("head01", "slurmctld"), ("gpu01", "slurmd"), ("gpu02", "slurmd"))}
    env_extra = dict(ENV, CF_LAB_EXTRA_INVENTORY=ADD_NODE_INVENTORY)
    proc = subprocess.run([os.path.join(ROOT, "tests", "lab", "lab.sh"), "up"], cwd=ROOT, env=env_extra,
                          capture_output=True, text=True, timeout=900, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    try:
        rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "-i", ADD_NODE_INVENTORY,
                       "tests/lab/emulators.yml", "-e", "cf_emu_hosts=gpu03"])
        assert rc == 0, out
        rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "-i", ADD_NODE_INVENTORY,
                       "site.yml", "--limit", "gpu03,slurm_controller"])
        assert rc == 0, out
        assert set(recap(out)) == {"gpu03", "head01"}, recap(out)
        assert "RUNNING HANDLER [clusterforge.gpu.slurm_controller : Reconfigure Slurm" in out, "no scontrol reconfigure"
        after = {(h, u): systemd_started(h, u) for h, u in before}
        assert after == before, "systemd restarted a Slurm daemon: %s -> %s" % (before, after)
        assert re.search(r"TASK \[clusterforge\.gpu\.slurm_compute : Burn-in \| drain the node with the burn-in reason "
                         r"\(on the controller\)\] \*+\nchanged: \[gpu03 -> head01\]", out), out[-4000:]
        burn_in = "cf-deep: burn-in: new node, deep checks pending"
        states = settled_node_states({"gpu03": ("drain", burn_in)}, 120)
        assert states.get("gpu03") == ("drain", burn_in), states
        rc, out = slurm("scontrol", "update", "NodeName=gpu03", "State=RESUME")
        assert rc == 0, out
        states = settled_node_states({"gpu03": ("idle", "none")}, 120)
        assert states.get("gpu03", ("",))[0] in ("idle", "mix"), states
        rc, out = slurm("srun", "-N3", "--gres=gpu:1", "--time=1", "hostname")
        assert rc == 0 and sorted(out.split()) == ["gpu01", "gpu02", "gpu03"], out
        assert wait_for_job(job, ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL"), 120) == "COMPLETED"
    finally:
        # Removal, the same way: gpu03 leaves the inventory and the controller's run drops it with a reconfigure.
        subprocess.run(["podman", "rm", "-f", "-t", "2", "gpu03"], env=ENV, capture_output=True, timeout=120, check=False)
        rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "site.yml",
                       "--limit", "slurm_controller"])
    assert rc == 0, out
    assert {(h, u): systemd_started(h, u) for h, u in before} == before
    assert set(settled_node_states()) == {"gpu01", "gpu02"}


# --------------------------------------------------------------------------- Slurm upgrades (playbooks/slurm_upgrade.yml)

def slurm_upgrade(*extra):
    return run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "playbooks/slurm_upgrade.yml"]
               + list(extra))


def daemon_starts():
    return {(h, u): systemd_started(h, u)
            for h, u in (("head01", "slurmdbd"), ("head01", "slurmctld"), ("gpu01", "slurmd"), ("gpu02", "slurmd"))}


def backups():
    rc, out = podman_exec("head01", "sh", "-c", "ls -1d /var/backups/clusterforge/slurm-upgrade-* 2>/dev/null || true")
    return sorted(out.split())


def test_slurm_upgrade_refuses_a_downgrade_before_anything_changes(converged):
    before, saved = daemon_starts(), backups()
    rc, out = slurm_upgrade("-e", "slurm_upgrade_version=23.11.10")
    assert rc != 0, out
    assert re.search(r"downgrade", out, re.I), out[-4000:]
    assert "24.11.5" in out and "23.11.10" in out, out[-4000:]
    assert daemon_starts() == before, "a refused upgrade restarted a daemon"
    assert backups() == saved, "a refused upgrade wrote a backup"
    for host in ("head01", "gpu01"):
        rc, ver = podman_exec(host, "dpkg-query", "-W", "-f=${Version}", "slurm-client")
        assert ver.startswith("24.11.5"), (host, ver)


SITE_SLURM_SUFFIX = "+cf1"


def test_slurm_upgrade_runs_in_schedmd_order_from_a_site_repository_and_a_job_survives(converged, tmp_path):
    """A real package upgrade with real daemons: the lab's mirror has one Slurm 24.11 version, so a site repository
    (tests/lab/site_slurm_repo.sh) re-versions the same packages (24.11.5-4+deb13u1 -> ...+cf1), as a site's own build
    would; common_os_package_repositories points every Slurm host at it. Same major: nothing to convert in the
    database (the conversion path cannot be exercised here; docs/upgrades.md)."""
    proc = subprocess.run([os.path.join(ROOT, "tests", "lab", "site_slurm_repo.sh"), "head01", SITE_SLURM_SUFFIX,
                           "head01", "gpu01", "gpu02"], cwd=ROOT, env=ENV, capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    target = proc.stdout.split()[-1]
    assert target.endswith(SITE_SLURM_SUFFIX), proc.stdout
    repo = tmp_path / "site_slurm.yml"
    repo.write_text(
        "common_os_package_repositories:\n"
        "  - name: site-slurm\n"
        "    uris: [\"file:/srv/cf-lustre-shared/cf-site-slurm\"]\n"
        "    suites: [\"./\"]\n"
        "    trusted: true\n"
        "    pin_packages: [slurmctld, slurmdbd, slurmd, slurm-client, slurm-wlm-basic-plugins, slurm-wlm-mysql-plugin]\n")
    rc, out = site("-e", "@%s" % repo, "--tags", "common_os::install")
    assert rc == 0, out
    rc, job = slurm("sbatch", "--parsable", "--job-name=cf-e2e-upgrade", "--nodelist=gpu01", "--gres=gpu:1",
                    "--time=10", "--wrap", "sleep 150")
    assert rc == 0, job
    job = job.strip()
    assert wait_for_job(job, ("RUNNING",), 60) == "RUNNING"
    before, saved = daemon_starts(), backups()
    rc, out = slurm_upgrade("-e", "slurm_upgrade_version=%s" % target, "-e", '{"slurm_upgrade_slurmd_batch_size": 1}')
    assert rc == 0, out
    after = daemon_starts()
    for key in before:
        assert after[key] != before[key], "%s was not restarted by the upgrade" % (key,)
    # SchedMD's order, as systemd saw it: slurmdbd, then slurmctld, then the slurmds one at a time.
    stamps = {}
    for key in after:
        rc, epoch = podman_exec(key[0], "sh", "-c", "date -d \"$(systemctl show %s --property=ActiveEnterTimestamp "
                                "--value)\" +%%s" % key[1])
        stamps[key] = int(epoch)
    assert stamps[("head01", "slurmdbd")] <= stamps[("head01", "slurmctld")] <= \
        min(stamps[("gpu01", "slurmd")], stamps[("gpu02", "slurmd")]), stamps
    for host, pkgs in (("head01", ("slurmdbd", "slurmctld", "slurm-client")), ("gpu01", ("slurmd", "slurm-client")),
                       ("gpu02", ("slurmd", "slurm-client"))):
        for pkg in pkgs:
            rc, ver = podman_exec(host, "dpkg-query", "-W", "-f=${Version}", pkg)
            assert ver == target, (host, pkg, ver)
    # Debian's slurmd postinst chowns slurmd's spool directory to slurm on every configure; the upgrade leaves it as
    # slurm_compute keeps it (root's), so the next site.yml has nothing to change there.
    for host in ("gpu01", "gpu02"):
        rc, owner = podman_exec(host, "stat", "-c", "%U:%G %a", "/var/lib/slurm/slurmd")
        assert rc == 0 and owner.strip() == "root:root 755", (host, owner)
    # The backups: one new directory with the accounting database dump and StateSaveLocation.
    new = [b for b in backups() if b not in saved]
    assert len(new) == 1, backups()
    rc, listing = podman_exec("head01", "sh", "-c", "cd %s && ls -1 && zcat *.sql.gz | grep -c 'CREATE TABLE' && "
                              "tar -tzf statesave.tar.gz | grep -c job_state" % new[0])
    assert rc == 0, listing
    assert "manifest.json" in listing and "statesave.tar.gz" in listing, listing
    # The job that ran through the upgrade completed; SlurmdTimeout is back; the nodes are in service.
    assert wait_for_job(job, ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL"), 240) == "COMPLETED"
    rc, conf = slurm("scontrol", "show", "config")
    assert re.search(r"(?m)^SlurmdTimeout\s+=\s+300 sec", conf), conf
    states = settled_node_states({"gpu01": ("idle", "none"), "gpu02": ("idle", "none")})
    assert all(s == "idle" for s, r in states.values()), states
    # A second run at the same version has nothing to do.
    starts = daemon_starts()
    rc, out = slurm_upgrade("-e", "slurm_upgrade_version=%s" % target)
    assert rc == 0, out
    assert daemon_starts() == starts, "a re-run at the target version restarted a daemon"


# ---------------------------------------------------------------------------------- rolling reconfigure: a reboot
# Last in the file: the reboot leaves gpu02 at the lab's own tunings (690 W, locked clocks), while the rolling tests
# above leave both nodes at a rolled power limit that the validation tests read from gpu01 for both nodes.

def podman_inspect(host, fmt):
    proc = subprocess.run(["podman", "inspect", "--type", "container", "--format", fmt, host], env=ENV,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def gpu_query(host, field):
    rc, out = podman_exec(host, "nvidia-smi", "--query-gpu=" + field, "--format=csv,noheader,nounits")
    assert rc == 0, out
    return [v.strip() for v in out.splitlines() if v.strip()]


class StampedMonitor(Monitor):
    """Monitor that keeps the time of each snapshot: (time, {node: (compact state, reason)})."""

    def loop(self):
        while not self.stop.is_set():
            try:
                self.snapshots.append((time.time(), node_states()))
            except AssertionError:
                pass
            self.stop.wait(1)


def test_rolling_reboot_goes_through_slurm_and_the_node_returns_with_gpus_and_tunings(converged, tmp_path):
    """A change on gpu02 with the package manager's reboot marker and rolling_reboot_ok: Slurm reboots the node
    (scontrol reboot reason=<the run's>, RebootProgram = a container restart in the lab: /run is emptied, the
    emulated GPUs lose their clocks and power limit, the boot units run again), after the job running on it
    completed. gpu02 comes back drained, is judged by the gate while drained (never in service before the roll
    resumes it), and returns to service with its GPUs and the tunings re-applied by gpu_tuning's boot unit."""
    states = settled_node_states({"gpu02": ("idle", "none")})
    assert states["gpu02"] == ("idle", "none"), states
    gres_before = slurm("sinfo", "-h", "-N", "-n", "gpu02", "-o", "%G")[1].strip()
    assert gres_before.startswith("gpu:"), gres_before
    started_before = podman_inspect("gpu02", "{{.State.StartedAt}}")
    boot_id_before = podman_exec("gpu02", "cat", "/proc/sys/kernel/random/boot_id")[1].strip()
    # Drift on gpu02, so that the plan rolls it whatever an earlier test left (the change is the lab's own 690 W).
    rc, out = podman_exec("gpu02", "nvidia-smi", "-pl", "600")
    assert rc == 0, out

    rc, out = slurm("sbatch", "--parsable", "-w", "gpu02", "-J", "cf-roll-reboot-job", "--time=5", "--wrap", "sleep 60")
    assert rc == 0, out
    job = out.strip().split(";")[0]
    assert wait_for_job(job, ("RUNNING",), 60) == "RUNNING"
    rc, out = podman_exec("gpu02", "touch", "/run/reboot-required")
    assert rc == 0, out

    extra = json.dumps({"rolling_nodes": "gpu02", "rolling_reboot_ok": True, "rolling_reboot_timeout_seconds": 600})
    with StampedMonitor() as mon:
        rc, out = roll(tmp_path, 690, "-e", extra)
    assert rc == 0, out
    flat = " ".join(out.split())
    # (the YAML callback may quote the report line and double the quotes inside it)
    run_id = re.search(r"run id: (\S+) \(drain reason '*cf-roll:", flat).group(1)
    reason = "cf-roll:" + run_id
    assert "nodes to roll: gpu02" in flat, out
    # the plan said it, the apply phase did it
    assert re.search(r"would reboot through Slurm, kept drained \(scontrol reboot\): gpu02 "
                     r"\(/run/reboot-required\)", flat), out
    assert "gpu02 rebooted through Slurm (/run/reboot-required)" in flat, out

    # The job that ran when the roll started completed: the reboot waited for it (a reboot under it would have
    # ended it NODE_FAIL or requeued it).
    assert wait_for_job(job, ("COMPLETED", "FAILED", "CANCELLED", "NODE_FAIL", "TIMEOUT", "REQUEUED", "PENDING")) \
        == "COMPLETED"

    # The reboot went through Slurm: Slurm annotates the reason of a node it reboots (" : reboot issued"). The
    # monitor polls every second; Slurm's accounting keeps the node event with that reason for good.
    rebooting = reason + " : reboot issued"
    issued_at = [t for t, snap in mon.snapshots if snap.get("gpu02", ("", ""))[1] == rebooting]
    events = []
    deadline = time.time() + 60
    while not issued_at and not events and time.time() < deadline:
        rc, listing = slurm("sacctmgr", "-n", "-P", "show", "event", "Nodes=gpu02", "Start=now-1days",
                            "Format=NodeName,Reason")
        events = [line for line in listing.splitlines() if line == "gpu02|" + rebooting]
        if not events:
            time.sleep(2)
    assert issued_at or events, "Slurm never showed gpu02 with the reason %r: %s" % (
        rebooting, sorted({snap.get("gpu02") for t, snap in mon.snapshots}))
    # Seen draining (its job still running) only before Slurm issued the reboot.
    draining_at = [t for t, snap in mon.snapshots if snap.get("gpu02", ("", ""))[0].rstrip("*") == "drng"]
    assert not (draining_at and issued_at) or max(draining_at) < min(issued_at), "gpu02 rebooted under its job"

    # gpu02 really restarted (a container shares its host's kernel: the lab's reboot restarts the container, and the
    # kernel's boot id, the host's, is the same before and after).
    started_after = podman_inspect("gpu02", "{{.State.StartedAt}}")
    assert started_after != started_before, (started_before, started_after)
    boot_id_after = podman_exec("gpu02", "cat", "/proc/sys/kernel/random/boot_id")[1].strip()
    print("gpu02 boot id %s -> %s, started %s -> %s" % (boot_id_before, boot_id_after, started_before, started_after))
    rc, out = podman_exec("gpu02", "test", "-e", "/run/reboot-required")
    assert rc != 0, "/run/reboot-required survived the reboot"

    # Kept drained through the reboot: Slurm brought it back drained with this run's reason (Slurm's note kept), the
    # gate judged it then, and it was never in service from the roll's drain to the roll's resume.
    ours = [t for t, snap in mon.snapshots if snap.get("gpu02", ("", ""))[1].startswith(reason)]
    back_drained = [t for t, snap in mon.snapshots
                    if snap.get("gpu02", ("", ""))[0].rstrip("*") == "drain" and snap["gpu02"][1] == rebooting]
    assert back_drained, sorted({snap.get("gpu02") for t, snap in mon.snapshots})
    in_service = [(t, snap["gpu02"]) for t, snap in mon.snapshots if "gpu02" in snap and min(ours) <= t <= max(ours)
                  and snap["gpu02"][0].rstrip("*") in ("idle", "mix", "alloc")]
    assert not in_service, in_service
    # Back in service: idle, no reason (the roll resumed it after the gate), its GPUs schedulable.
    states = settled_node_states({"gpu02": ("idle", "none")})
    assert states["gpu02"] == ("idle", "none"), states
    assert slurm("sinfo", "-h", "-N", "-n", "gpu02", "-o", "%G")[1].strip() == gres_before
    rc, out = podman_exec("gpu02", "sh", "-c", "ls /dev/nvidia[0-9]*")
    assert rc == 0 and len(out.split()) == 8, out
    rc, out = slurm("srun", "-w", "gpu02", "--gres=gpu:8", "--time=1", "--immediate=60", "hostname")
    assert rc == 0 and out.split() == ["gpu02"], out
    # The tunings are back: the reboot emptied the emulator's volatile settings (700 W, unlocked clocks) and the
    # gpu_tuning boot unit applied the lab's (inventories/lab/group_vars/gpu_nodes/lab_gpu_tuning.yml) again.
    assert power_limits("gpu02") == [690.0]
    assert gpu_query("gpu02", "clocks.sm") == ["1980"] * 8
