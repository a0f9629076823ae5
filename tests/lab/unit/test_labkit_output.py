"""The lab's readers of ansible-playbook output (tests/lab/labkit.py): the drift test's assertions rest on them, so
a reader that missed a changed task or a role would let a second-run change or a skipped role through."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from labkit import changed_tasks, recap, roles_run  # noqa: E402  # pylint: disable=import-error,wrong-import-position

OUT = """
PLAY [GPU tuning] **************************************************************

TASK [clusterforge.gpu.gpu_tuning : Apply persistence mode, clock locks, application clocks and power limits] ***
ok: [gpu01]
changed: [gpu02]

TASK [clusterforge.gpu.slurm_compute : Create the slurmd directories] *********
ok: [gpu01] => (item=/var/lib/slurm/slurmd)
changed: [gpu02] => (item=/var/lib/slurm/slurmd)
skipping: [head01]

TASK [clusterforge.gpu.nccl : Report the NCCL settings] *******************
ok: [gpu01 -> head01] => (item=x)
skipping: [gpu02]

RUNNING HANDLER [clusterforge.gpu.slurm_compute : Restart slurmd] **************
changed: [gpu02]

TASK [clusterforge.gpu.lustre_client : Mount] ***********************************
changed: [gpu021]

PLAY RECAP *********************************************************************
gpu01                      : ok=3    changed=0    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0
gpu02                      : ok=3    changed=3    unreachable=0    failed=0    skipped=1    rescued=0    ignored=0
"""


def test_changed_tasks_are_named_per_host_with_items_and_handlers():
    assert changed_tasks(OUT, "gpu02") == {
        "clusterforge.gpu.gpu_tuning : Apply persistence mode, clock locks, application clocks and power limits",
        "clusterforge.gpu.slurm_compute : Create the slurmd directories",
        "clusterforge.gpu.slurm_compute : Restart slurmd",
    }
    assert changed_tasks(OUT, "gpu01") == set()
    # gpu021 is another host: its lines are not gpu02's
    assert changed_tasks(OUT, "gpu021") == {"clusterforge.gpu.lustre_client : Mount"}


def test_roles_run_count_ok_and_changed_but_not_skipped():
    assert roles_run(OUT, "gpu01") == {"gpu_tuning", "slurm_compute", "nccl"}
    assert roles_run(OUT, "gpu02") == {"gpu_tuning", "slurm_compute"}
    assert roles_run(OUT, "head01") == set()
    assert recap(OUT)["gpu02"]["changed"] == 3
