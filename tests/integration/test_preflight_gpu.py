"""GPU, power, clock, rack budget, driver, DCGM, NCCL and fabric mistakes are rejected by site.yml's first play.

Each case runs the real ``ansible-playbook site.yml`` against the shared sound inventory with one mistake, and checks
that preflight names it and that nothing was changed and no host was contacted (preflight_helpers).
"""

import copy

import pytest

from integration.preflight_helpers import (  # tests/ is on sys.path (tests/conftest.py)
    all_vars, assert_distinct_messages, base_inventory, case_ids, group_vars, host, reject_case, run_playbook,
)


def mutate_power_cap_above_h100(inv):
    group_vars(inv, "gpu_nodes")["gpu_tuning_power_limit_watts"] = 800


def mutate_power_cap_on_l4(inv):
    group_vars(inv, "gpu_nodes").update({"cluster_gpu_type": "l4", "gpu_tuning_power_limit_watts": 600})


def mutate_locked_clocks_min_above_max(inv):
    host(inv, "gpu_nodes", "gpu01")["gpu_tuning_locked_gpu_clocks"] = {"min": 1980, "max": 1410}


def mutate_sm_clock_above_h100(inv):
    group_vars(inv, "gpu_nodes")["gpu_tuning_locked_gpu_clocks"] = {"min": 1980, "max": 2100}


def mutate_application_clocks_as_a_list(inv):
    group_vars(inv, "gpu_nodes")["gpu_tuning_application_clocks"] = [2619, 1980]


def mutate_rack_over_budget(inv):
    # Each node alone (8 x 700 W + 4600 W = 10200 W) fits 15000 W; the rack's two nodes do not.
    group_vars(inv, "gpu_nodes").update({"gpu_tuning_rack": "r01", "gpu_tuning_rack_power_budget_watts": 15000})


def mutate_budget_without_rack(inv):
    host(inv, "gpu_nodes", "gpu02")["gpu_tuning_rack_power_budget_watts"] = 20000


def mutate_gpu_index_beyond_count(inv):
    group_vars(inv, "gpu_nodes")["gpu_tuning_gpus"] = ["0", "8"]


def mutate_driver_version_not_in_branch(inv):
    group_vars(inv, "gpu_nodes").update({"nvidia_driver_branch": "570", "nvidia_driver_version": "550.54.15"})


def mutate_driver_version_float(inv):
    group_vars(inv, "gpu_nodes")["nvidia_driver_version"] = 570.1


def mutate_proprietary_modules_on_b200(inv):
    group_vars(inv, "gpu_nodes").update({"cluster_gpu_type": "b200",
                                         "nvidia_driver_kernel_module_type": "proprietary"})


def mutate_open_modules_on_v100(inv):
    group_vars(inv, "gpu_nodes")["cluster_gpu_type"] = "v100"


def mutate_hopper_on_old_branch(inv):
    group_vars(inv, "gpu_nodes").update({"nvidia_driver_branch": "515",
                                         "nvidia_driver_kernel_module_type": "proprietary"})


def mutate_dcgm_level_5(inv):
    all_vars(inv)["validate_dcgm_level"] = 5


def mutate_dcgm_health_watches(inv):
    group_vars(inv, "gpu_nodes")["dcgm_health_watches"] = "all"


def mutate_exporter_port_out_of_range(inv):
    group_vars(inv, "gpu_nodes")["dcgm_exporter_listen_port"] = 70000


def mutate_ib_hca_bad_port(inv):
    group_vars(inv, "gpu_nodes")["nccl_ib_hca"] = ["mlx5_0:1", "mlx5_1:x"]


def mutate_socket_ifname_with_space(inv):
    group_vars(inv, "gpu_nodes")["nccl_socket_ifname"] = "ib0 ib1"


def mutate_socket_ifname_with_semicolon(inv):
    host(inv, "gpu_nodes", "gpu02")["nccl_socket_ifname"] = "ib0;reboot"


def mutate_nccl_ib_timeout(inv):
    group_vars(inv, "gpu_nodes")["nccl_ib_timeout"] = 40


def mutate_nccl_debug_variable_in_settings(inv):
    group_vars(inv, "gpu_nodes")["nccl_settings"] = {"NCCL_ALGO": "Ring"}


def mutate_mixed_fabric(inv):
    host(inv, "gpu_nodes", "gpu02")["cluster_fabric_type"] = "roce"


def mutate_unknown_fabric_on_one_host(inv):
    host(inv, "lustre_mds", "stor01")["cluster_fabric_type"] = "omnipath"


CASES = [
    (mutate_power_cap_above_h100, "gpu01: gpu_tuning_power_limit_watts: 800 W is outside the H100 SXM range 200-700 W"),
    (mutate_power_cap_on_l4, "gpu02: gpu_tuning_power_limit_watts: 600 W is outside the L4 range 40-72 W"),
    (mutate_locked_clocks_min_above_max,
     "gpu01: gpu_tuning_locked_gpu_clocks: min (1980 MHz) must not be greater than max (1410 MHz)"),
    (mutate_sm_clock_above_h100,
     "gpu_tuning_locked_gpu_clocks: max 2100 MHz is above the H100 SXM's highest SM clock of 1980 MHz"),
    (mutate_application_clocks_as_a_list, "gpu_tuning_application_clocks: must be a dict {memory: MHz, graphics: MHz}"),
    (mutate_rack_over_budget, "rack 'r01' would draw 20400 W with 2 nodes, over its budget of 15000 W"),
    (mutate_budget_without_rack, "gpu02: gpu_tuning_rack_power_budget_watts: a budget is set but gpu_tuning_rack is not"),
    (mutate_gpu_index_beyond_count, "gpu_tuning_gpus[1]: GPU index 8 does not exist on a node with 8 GPUs"),
    (mutate_driver_version_not_in_branch, "nvidia_driver_version: 550.54.15 is not in branch 570"),
    (mutate_driver_version_float, "nvidia_driver_version: 570.1 is a number, not a version string"),
    (mutate_proprietary_modules_on_b200, "B200 (Blackwell) GPUs work only with NVIDIA's open kernel modules"),
    (mutate_open_modules_on_v100, "V100 SXM2 (Volta) needs proprietary (open is the role's default)"),
    (mutate_hopper_on_old_branch, "nvidia_driver_branch: 515 is too old for H100 SXM (Hopper needs R525 or newer)"),
    (mutate_dcgm_level_5, "gpu01: validate_dcgm_level: must be a DCGM diagnostic level 1-4"),
    (mutate_dcgm_health_watches, "dcgm_health_watches: must be a (all watches) or letters of p m i t n d x"),
    (mutate_exporter_port_out_of_range, "dcgm_exporter_listen_port: must be a TCP port 1-65535, got 70000"),
    (mutate_ib_hca_bad_port, "nccl_ib_hca[1]: the port of 'mlx5_1:x' must be a positive whole number"),
    (mutate_socket_ifname_with_space, "nccl_socket_ifname: 'ib0 ib1' is not a NCCL_SOCKET_IFNAME list"),
    (mutate_socket_ifname_with_semicolon, "gpu02: nccl_socket_ifname: 'ib0;reboot' is not a NCCL_SOCKET_IFNAME list"),
    (mutate_nccl_ib_timeout, "nccl_ib_timeout: must be a whole number 1-31"),
    (mutate_nccl_debug_variable_in_settings, "nccl_settings: NCCL_ALGO is a debugging-only variable"),
    (mutate_mixed_fabric, "gpu02 has 'roce' while 1 other GPU node(s) (gpu01) have 'infiniband'"),
    (mutate_unknown_fabric_on_one_host,
     "stor01: cluster_fabric_type: must be one of infiniband, roce, ethernet, none, got 'omnipath'"),
]


@pytest.mark.parametrize("mutate,message", CASES, ids=case_ids(CASES))
def test_gpu_mistake_is_rejected_before_any_change(tmp_path, mutate, message):
    reject_case(tmp_path, mutate, message)


def test_each_case_has_its_own_message():
    assert_distinct_messages([case[1] for case in CASES], 16)


def test_sound_gpu_settings_pass(tmp_path):
    inv = copy.deepcopy(base_inventory())
    group_vars(inv, "gpu_nodes").update({
        "gpu_tuning_power_limit_watts": 600, "gpu_tuning_locked_gpu_clocks": {"min": 1980, "max": 1980},
        "gpu_tuning_application_clocks": {"memory": 2619, "graphics": 1980}, "gpu_tuning_rack": "r01",
        "gpu_tuning_rack_power_budget_watts": 20000, "nvidia_driver_branch": "570",
        "nvidia_driver_version": "570.133.20", "nccl_ib_hca": ["mlx5_0:1", "mlx5_1:1"], "nccl_socket_ifname": "=ib0",
        "nccl_settings": {"NCCL_CROSS_NIC": 0}, "dcgm_health_watches": "pmitn",
    })
    all_vars(inv)["validate_dcgm_level"] = 2
    rc, out = run_playbook(tmp_path, inv, "playbooks/preflight.yml")
    assert rc == 0, out
