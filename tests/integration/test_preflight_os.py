"""Bad OS-base values are rejected by site.yml's preflight, before the Common OS play writes anything."""


import pytest

from integration.preflight_helpers import (  # tests/ is on sys.path (tests/conftest.py)
    all_vars, case_ids, group_vars, reject_case,
)


def mutate_governor_typo(inv):
    all_vars(inv)["common_os_cpu_governor"] = "performace"


def mutate_kernel_params_in_one_string(inv):
    group_vars(inv, "gpu_nodes")["common_os_kernel_cmdline_params"] = ["iommu=pt intel_iommu=on"]


def mutate_nofile_above_nr_open(inv):
    all_vars(inv)["common_os_nofile_limit"] = 4194304


def mutate_memlock_word(inv):
    all_vars(inv)["common_os_memlock_limit"] = "infinity"


def mutate_exporter_on_slurmd_port(inv):
    group_vars(inv, "gpu_nodes").update({"dcgm_exporter_enabled": True, "dcgm_exporter_listen_port": 6818})


CASES = [
    (mutate_governor_typo, "gpu01: common_os_cpu_governor: 'performace' is not a Linux cpufreq governor"),
    (mutate_kernel_params_in_one_string, "'iommu=pt intel_iommu=on' is not one kernel parameter"),
    (mutate_nofile_above_nr_open, "common_os_nofile_limit: 4194304 is above the kernel's fs.nr_open"),
    (mutate_memlock_word, "common_os_memlock_limit: must be 'unlimited' (what RDMA needs)"),
    (mutate_exporter_on_slurmd_port, "gpu01, gpu02: slurm_controller_slurmd_port (slurmd): port 6818 is also "
                                     "the port of dcgm_exporter_listen_port (dcgm-exporter) on this host"),
]


@pytest.mark.parametrize("mutate,message", CASES, ids=case_ids(CASES))
def test_bad_os_values_are_rejected_before_any_change(tmp_path, mutate, message):
    reject_case(tmp_path, mutate, message)
