"""Session fixtures of the lab's end-to-end modules: the lab is brought up, planned in check mode and converged
once for every module (tests/lab/test_lab_*.py), in the order `make test-lab` names them."""

import os
import sys

import pytest

sys.path.append(os.path.dirname(os.path.abspath(__file__)))  # after tests/, whose conftest the emulator tests import

from labkit import BIN, ROOT, installed, podman_exec, recap, run  # noqa: E402  pylint: disable=wrong-import-position


@pytest.fixture(scope="session")
def lab():
    rc, out = run([os.path.join(ROOT, "tests", "lab", "lab.sh"), "up"], timeout=900)
    assert rc == 0, out
    rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "tests/lab/emulators.yml"])
    assert rc == 0, out
    return True


@pytest.fixture(scope="session")
def planned(lab):
    """README step 3 on new servers: `site.yml --check --diff` before the first real run (when the lab is new)."""
    new = podman_exec("head01", "test", "-e", "/etc/slurm/slurm.conf")[0] != 0
    rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "site.yml", "--check", "--diff"])
    after = {"slurmd on gpu01": installed("gpu01", "slurmd"), "chrony on stor01": installed("stor01", "chrony"),
             "slurmctld on head01": installed("head01", "slurmctld"),
             "slurm.conf on head01": podman_exec("head01", "test", "-e", "/etc/slurm/slurm.conf")[0] == 0,
             "munge key on head01": podman_exec("head01", "test", "-e", "/etc/munge/munge.key")[0] == 0,
             "nccl.conf on gpu02": podman_exec("gpu02", "test", "-e", "/etc/nccl.conf")[0] == 0}
    return {"new": new, "rc": rc, "out": out, "recap": recap(out), "after": after}


@pytest.fixture(scope="session")
def converged(lab, planned):  # pylint: disable=unused-argument  # the check-mode plan runs on the new lab first
    rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "site.yml"])
    assert rc == 0, out
    return recap(out)
