"""The lab end to end: site.yml converges the container cluster, and a second run changes nothing.

Runs against the lab of inventories/lab (tests/lab/lab.sh up creates it if it is not running), exactly as
`make lab` does. The containers are left running for inspection; `make lab-down` removes them.
"""

import os
import re
import subprocess
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, ".venv", "bin")
ENV = dict(os.environ)
ENV.update({
    "CONTAINERS_CONF": os.path.join(ROOT, "tests", "lab", "containers.conf"),
    "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"),
    "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".cache", "collections"),
    "ANSIBLE_NOCOLOR": "1",
    "ANSIBLE_FORCE_COLOR": "0",
    "PATH": BIN + os.pathsep + os.environ.get("PATH", ""),
})
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def run(cmd, timeout=3000):
    proc = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout, check=False)
    out = proc.stdout + proc.stderr
    print(out[-20000:])
    return proc.returncode, out


def recap(out):
    return {m.group(1): dict(ok=int(m.group(2)), changed=int(m.group(3)), unreachable=int(m.group(4)),
                             failed=int(m.group(5))) for m in RECAP.finditer(out)}


def podman_exec(host, *argv):
    proc = subprocess.run(["podman", "exec", host] + list(argv), env=ENV, capture_output=True, text=True, timeout=120, check=False)
    return proc.returncode, proc.stdout


@pytest.fixture(scope="module")
def lab():
    rc, out = run([os.path.join(ROOT, "tests", "lab", "lab.sh"), "up"], timeout=900)
    assert rc == 0, out
    rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "tests/lab/emulators.yml"])
    assert rc == 0, out
    return True


@pytest.fixture(scope="module")
def converged(lab):
    rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "site.yml"])
    assert rc == 0, out
    return recap(out)


def test_site_converges_every_lab_host(converged):
    assert set(converged) == {"head01", "gpu01", "gpu02", "stor01"}
    assert all(r["failed"] == 0 and r["unreachable"] == 0 for r in converged.values()), converged


def test_second_run_changes_nothing(converged):
    rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "site.yml"])
    assert rc == 0, out
    again = recap(out)
    assert set(again) == {"head01", "gpu01", "gpu02", "stor01"}
    changed = {h: r["changed"] for h, r in again.items() if r["changed"]}
    assert not changed, "second site.yml run reported changes: %s" % changed


def test_check_mode_on_a_converged_lab_reports_no_change(converged):
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
    rc, out = podman_exec("head01", "sinfo", "-h", "-N", "-p", "gpu", "-o", "%N %t")
    assert rc == 0, out
    states = dict(line.split() for line in out.splitlines())
    assert states == {"gpu01": "idle", "gpu02": "idle"}, out
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
