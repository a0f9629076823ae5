"""Adopting a running cluster (issue 37): the lab is rebuilt from new containers as another administrator would have
built it, without this collection - Debian's munge, MariaDB and Slurm packages, the package's own munge key copied to
every node, a slurm.conf and a slurmdbd.conf written by hand, an accounting database holding finished jobs, gpu02 set
DOWN by the administrator for an RMA and a job running on gpu01 - and then site.yml takes it over, as
docs/operations.md ("Adopting a running cluster") tells an operator to: the live StateSaveLocation and
ReturnToService named in an inventory source, the accounting database user's password in the controller's secrets
file.

Proven: site.yml succeeds (with validation); the running job completes once released, after every daemon was
restarted or reconfigured under it; sacct still lists the jobs that finished before; the munge key is the same on
every node; gpu02 keeps its state and reason through site.yml, a health-check fault on it and a rolling change;
every node answers; a second site.yml changes nothing.

This module runs last in `make test-lab`: it removes the converged lab and leaves the adopted one."""

import hashlib
import json
import os
import time

import pytest

from labkit import BIN, ROOT, podman_exec, recap, run, slurm

HOSTS = ("head01", "gpu01", "gpu02")
RMA = "RMA 4711 (PSU fan)"
DB_PASSWORD = "bf-%s" % hashlib.sha256(str(os.getpid()).encode()).hexdigest()[:20]
RELEASE = "/srv/cf-bf-job-release"
HC = "/usr/libexec/clusterforge/slurm-healthcheck"
# Writes a copy of the node's health-check configuration with the JSON object in argv[2] over it.
COPY_CONFIG = ("import json, sys; c = json.load(open('/etc/slurm/clusterforge-healthcheck.json')); "
               "c.update(json.loads(sys.argv[2])); json.dump(c, open(sys.argv[1], 'w'), indent=1)")
POWER_BASE_W = 400 + (int(time.time()) // 60 % 50) * 2

# The administrator's slurm.conf, the same on every host: no configless (every slurmd reads its own copy), each GPU
# node as `slurmd -C` describes it with its eight GPUs (gres.conf on the node). A node line that describes a node
# otherwise than this collection will (slurmd -C's layout, the GPUs) stops site.yml before slurm.conf changes: a unit
# test of plugins/plugin_utils/slurm_adoption.py node_description_problems covers it.
SLURM_CONF = """# written by hand by the cluster's administrator
ClusterName=cflab
SlurmctldHost=head01(10.77.0.10)
AuthType=auth/munge
SlurmUser=slurm
StateSaveLocation=/var/lib/slurm/slurmctld
SlurmdSpoolDir=/var/lib/slurm/slurmd
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=1
SchedulerType=sched/backfill
SelectType=select/cons_tres
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=head01
JobAcctGatherType=jobacct_gather/none
GresTypes=gpu
%s
PartitionName=gpu Nodes=gpu01,gpu02 Default=YES MaxTime=INFINITE State=UP
"""
GRES_CONF = "Name=gpu Type=h100 File=/dev/nvidia[0-7]\n"

SLURMDBD_CONF = """# written by hand by the cluster's administrator
AuthType=auth/munge
DbdHost=localhost
SlurmUser=slurm
LogFile=/var/log/slurm/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=%s
StorageLoc=slurm_acct_db
""" % DB_PASSWORD

# What the administrator ran (a plain script, no Ansible). Packages without recommends, as the collection installs.
INSTALL = ("set -e; export DEBIAN_FRONTEND=noninteractive; "
           "timeout 600 apt-get update -q >/dev/null; "
           "timeout 900 apt-get install -y -q --no-install-recommends munge %s >/dev/null; "
           "test -s /etc/munge/munge.key || mungekey -c -k /etc/munge/munge.key; "
           "mkdir -p /var/log/slurm && chown slurm:slurm /var/log/slurm")
DATABASE = ("set -e; systemctl restart mariadb; mysql -e \"CREATE DATABASE IF NOT EXISTS slurm_acct_db; "
            "CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '%s'; "
            "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'\"" % DB_PASSWORD)


def sh(host, script, timeout=1200):
    """rc and output of a bash script on host (a longer limit than labkit's podman_exec for the installs)."""
    return run(["podman", "exec", host, "bash", "-c", script], timeout=timeout)


def put(host, path, text, owner="root:root", mode="0644"):
    rc, out = sh(host, "set -e; cat > %s <<'CFEOF'\n%sCFEOF\nchown %s %s; chmod %s %s" % (path, text, owner, path, mode, path))
    assert rc == 0, (host, path, out)


def munge_keys():
    keys = {}
    for host in HOSTS:
        rc, out = podman_exec(host, "sha256sum", "/etc/munge/munge.key")
        assert rc == 0, (host, out)
        keys[host] = out.split()[0]
    return keys


def node_state(node):
    """(state, reason) of a node as sinfo prints them (%T, %E: "down", "RMA ..."; "idle", "none")."""
    rc, out = slurm("sinfo", "-h", "-N", "-n", node, "-o", "%T|%E")
    assert rc == 0 and out.strip(), out
    state, reason = out.strip().splitlines()[0].split("|", 1)
    return state, reason


def wait(predicate, seconds, what):
    deadline = time.time() + seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError("%s: not within %d s" % (what, seconds))
        time.sleep(2)


def job_state(job):
    rc, out = slurm("sacct", "-n", "-P", "-X", "-j", job, "-o", "State,ExitCode")
    return out.strip() if rc == 0 else ""


def power_limits(host):
    rc, out = podman_exec(host, "nvidia-smi", "--query-gpu=power.limit", "--format=csv,noheader,nounits")
    assert rc == 0, out
    return sorted({float(v) for v in out.split()})


def site_yml(tmp_path, *extra):
    return run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "-i", str(tmp_path / "adopt.yml"),
                "site.yml", "-e", "validate_fetch_dir=%s" % tmp_path] + list(extra))


@pytest.fixture(scope="module")
def brownfield():
    """The lab as another administrator built it; returns what was there before site.yml."""
    lab = os.path.join(ROOT, "tests", "lab", "lab.sh")
    rc, out = run([lab, "down"], timeout=600)
    assert rc == 0, out
    rc, out = run([lab, "up"], timeout=900)
    assert rc == 0, out
    # The emulated hardware (GPUs, HCAs) is the machine's, not the administrator's software.
    rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "tests/lab/emulators.yml"])
    assert rc == 0, out
    for host, packages in (("head01", "mariadb-server slurmdbd slurmctld slurm-client"),
                           ("gpu01", "slurmd slurm-client"), ("gpu02", "slurmd slurm-client")):
        rc, out = sh(host, INSTALL % packages)
        assert rc == 0, (host, out)
    # The node lines as the administrator wrote them: `slurmd -C` of each node, its address and GPUs.
    lines = []
    for host, address in (("gpu01", "10.77.0.21"), ("gpu02", "10.77.0.22")):
        rc, out = podman_exec(host, "slurmd", "-C")
        assert rc == 0 and out.startswith("NodeName=%s " % host), out
        lines.append("%s NodeAddr=%s Gres=gpu:h100:8 State=UNKNOWN" % (out.splitlines()[0].strip(), address))
        put(host, "/etc/slurm/gres.conf", GRES_CONF)
    # One key for the cluster: the package's key of the controller, copied to the nodes as the administrator did.
    rc, key = run(["podman", "exec", "head01", "base64", "-w0", "/etc/munge/munge.key"])
    assert rc == 0, key
    for host in HOSTS:
        rc, out = sh(host, "set -e; echo %s | base64 -d > /etc/munge/munge.key; chown munge:munge /etc/munge/munge.key; "
                           "chmod 0400 /etc/munge/munge.key; systemctl restart munge" % key.strip())
        assert rc == 0, (host, out)
        put(host, "/etc/slurm/slurm.conf", SLURM_CONF % "\n".join(lines))
    rc, out = sh("head01", DATABASE)
    assert rc == 0, out
    put("head01", "/etc/slurm/slurmdbd.conf", SLURMDBD_CONF, "slurm:slurm", "0600")
    rc, out = sh("head01", "set -e; systemctl enable slurmdbd slurmctld >/dev/null 2>&1; systemctl restart slurmdbd; "
                           "for i in $(seq 60); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 1; done; "
                           "sacctmgr -i add cluster cflab; systemctl restart slurmctld")
    assert rc == 0, out
    for host in ("gpu01", "gpu02"):
        rc, out = sh(host, "systemctl enable slurmd >/dev/null 2>&1; systemctl restart slurmd")
        assert rc == 0, (host, out)
    wait(lambda: all(node_state(n) == ("idle", "none") for n in ("gpu01", "gpu02")), 120, "both nodes idle")
    # Jobs that finished before the adoption, recorded by slurmdbd.
    finished = []
    for _round in range(2):
        rc, out = slurm("sbatch", "--parsable", "-N2", "--wait", "--wrap", "hostname")
        assert rc == 0, out
        finished.append(out.strip().split(";")[0])
    wait(lambda: all(job_state(j) == "COMPLETED|0:0" for j in finished), 60, "the finished jobs in sacct")
    # The administrator's RMA and a job that runs until the test releases it.
    rc, out = slurm("scontrol", "update", "NodeName=gpu02", "State=DOWN", "Reason=" + RMA)
    assert rc == 0, out
    podman_exec("gpu01", "rm", "-f", RELEASE)
    rc, out = slurm("sbatch", "--parsable", "-w", "gpu01", "-J", "cf-bf-job", "--time=60", "--wrap",
                    "for i in $(seq 3000); do [ -e %s ] && exit 0; sleep 1; done; exit 3" % RELEASE)
    assert rc == 0, out
    job = out.strip().split(";")[0]
    wait(lambda: job_state(job).startswith("RUNNING"), 60, "the running job")
    return {"keys": munge_keys(), "finished": finished, "job": job}


def test_site_yml_adopts_a_cluster_built_without_it(brownfield, tmp_path):
    assert node_state("gpu02") == ("down", RMA), node_state("gpu02")
    # What an operator adopting this cluster writes down (docs/operations.md): the live StateSaveLocation and
    # ReturnToService, and the accounting user's password where the controller keeps its secrets. The cluster's
    # slurmds run without the lab's -b (a reboot reported at every slurmd start, for `scontrol reboot` in containers):
    # with it, slurm_compute's restart of slurmd would tell slurmctld that gpu01 rebooted under its job.
    (tmp_path / "adopt.yml").write_text(
        "all:\n  vars:\n    slurm_controller_state_save_location: /var/lib/slurm/slurmctld\n"
        "    slurm_controller_return_to_service: 1\n"
        "gpu_nodes:\n  hosts:\n    gpu01:\n      slurm_compute_slurmd_options_extra: []\n"
        "    gpu02:\n      slurm_compute_slurmd_options_extra: []\n")
    rc, out = sh("head01", "set -e; umask 077; mkdir -p /etc/clusterforge/secrets; "
                           "printf %%s '%s' > /etc/clusterforge/secrets/slurmdbd_storage_pass" % DB_PASSWORD)
    assert rc == 0, out
    rc, out = site_yml(tmp_path)
    assert rc == 0, out[-6000:]
    # Through site.yml: the same key everywhere, the RMA kept, the job still running, the old jobs still listed.
    assert munge_keys() == brownfield["keys"]
    assert node_state("gpu02") == ("down", RMA), node_state("gpu02")
    assert job_state(brownfield["job"]).startswith("RUNNING"), job_state(brownfield["job"])
    for job in brownfield["finished"]:
        assert job_state(job) == "COMPLETED|0:0", (job, job_state(job))
    with open(os.path.join(str(tmp_path), "validation.json")) as handle:
        report = json.load(handle)
    assert report["ok"] is True, report["failures"]
    held = [c for c in report["checks"] if c["id"] == "slurm.held"]
    assert [(c["subject"], c["status"]) for c in held] == [("gpu02", "skip")] and RMA in held[0]["message"], held
    # The job completes when released: it lived through slurmctld's and slurmd's restarts and reconfigures.
    podman_exec("gpu01", "touch", RELEASE)
    wait(lambda: job_state(brownfield["job"]) == "COMPLETED|0:0", 60, "the adopted job's completion")
    # Every node answers: a job on gpu01 with its GPUs, slurmd of gpu02 registered (DOWN by its owner, responding).
    rc, out = slurm("srun", "-w", "gpu01", "--gres=gpu:1", "-t", "2", "hostname")
    assert rc == 0 and out.strip() == "gpu01", out
    rc, out = slurm("scontrol", "ping")
    assert rc == 0 and "is UP" in out, out
    assert node_state("gpu02") == ("down", RMA), node_state("gpu02")  # no '*': its slurmd answers

    # A second run changes nothing.
    rc, out = site_yml(tmp_path)
    assert rc == 0, out[-6000:]
    second = recap(out)
    assert sorted(second) == ["gpu01", "gpu02", "head01", "stor01"], second
    assert {h: r["changed"] for h, r in second.items()} == {h: 0 for h in second}, second

    # A health-check fault on gpu02 (an Xid in the emulated kernel log, one strike drains), run as slurmd runs it
    # with a copy of the node's configuration: the fault is seen, the RMA stays.
    config = "/tmp/cf-bf-hc.json"
    rc, out = podman_exec("gpu02", "python3", "-c", COPY_CONFIG, config, json.dumps(
        {"state_dir": "/run/cf-bf-hc", "textfile_dir": "/run/cf-bf-hc/prom", "strikes": {"xid": 1}}))
    assert rc == 0, out
    rc, out = podman_exec("gpu02", "dmesg", "--emu-xid", "1", "79")
    assert rc == 0, out
    try:
        rc, out = podman_exec("gpu02", "env", "-i", "SLURMD_NODENAME=gpu02", HC, "--config", config)
        line = [x for x in out.splitlines() if x.startswith("cf-health: gpu02: ") and " budget" in x]
        assert rc == 1 and line and "xid: Xid 79" in line[-1] and "action none" in line[-1], out
        assert node_state("gpu02") == ("down", RMA), (node_state("gpu02"), out)
    finally:
        podman_exec("gpu02", "dmesg", "--emu-reset")
        podman_exec("gpu02", HC, "--clear", "xid")  # slurmd's own runs may have seen the Xid too

    # A rolling change of both nodes' power limit: gpu01 is rolled, the administrator's gpu02 is left alone.
    gpu02_power = power_limits("gpu02")
    assert gpu02_power != [float(POWER_BASE_W)], gpu02_power
    change = tmp_path / "change.yml"
    change.write_text("gpu_nodes:\n  hosts:\n" + "".join("    %s:\n      gpu_tuning_power_limit_watts: %d\n"
                                                         % (h, POWER_BASE_W) for h in ("gpu01", "gpu02")))
    rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "-i", str(tmp_path / "adopt.yml"),
                   "-i", str(change), "playbooks/rolling_reconfigure.yml", "-e",
                   '{"rolling_roles": ["clusterforge.gpu.gpu_tuning"], "rolling_poll_interval_seconds": 2, '
                   '"rolling_max_unavailable_percent": 50}'])
    assert rc == 0, out[-6000:]
    assert "nodes to roll: gpu01" in out and "nodes to roll: gpu01," not in out, out[-6000:]
    assert "held by someone else, drained, DOWN or FAIL (left alone, never resumed): gpu02" in out, out[-6000:]
    assert power_limits("gpu01") == [float(POWER_BASE_W)], power_limits("gpu01")
    assert power_limits("gpu02") == gpu02_power, (power_limits("gpu02"), gpu02_power)
    assert node_state("gpu02") == ("down", RMA), node_state("gpu02")
    assert node_state("gpu01") == ("idle", "none"), node_state("gpu01")
    assert munge_keys() == brownfield["keys"]
