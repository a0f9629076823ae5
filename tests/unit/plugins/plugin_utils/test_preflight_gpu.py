"""Preflight rules for GPUs, power, clocks, the rack budget, driver, DCGM, NCCL and the fabric, one test per rule."""

import copy

import pytest

from ansible_collections.clusterforge.gpu.plugins.filter.preflight import GPU_TYPES
from ansible_collections.clusterforge.gpu.plugins.module_utils.hardware import GPU_MODELS
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import Inventory
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_gpu import check, warnings

OPTS = {"lustre_enabled": True, "fabric_required": True, "strict": False, "rolling": False}
GPU = {"cluster_gpu_type": "h100", "cluster_gpu_count_per_node": 8, "cluster_fabric_type": "infiniband"}


def inventory(gpu_hosts=("gpu01",), head=None, **gpu_vars):
    """head01 first (the cluster-wide values), then the GPU nodes, each with GPU and gpu_vars."""
    fabric = gpu_vars.get("cluster_fabric_type", "infiniband")
    hv = {"head01": dict({"cluster_fabric_type": fabric}, **(head or {}))}
    for name in gpu_hosts:
        hv[name] = dict(GPU, **gpu_vars)
    groups = {"all": ["head01"] + list(gpu_hosts), "slurm_controller": ["head01"], "gpu_nodes": list(gpu_hosts)}
    return hv, groups


def errors(**gpu_vars):
    hv, groups = inventory(**gpu_vars)
    return check(Inventory(hv, groups), OPTS)


def errors_of(hv, groups):
    return check(Inventory(hv, groups), OPTS)


def one(out, message):
    assert len(out) == 1 and message in out[0], out


# ------------------------------------------------------------------------------------------------ the table

def test_profiles_cover_every_gpu_type_with_the_same_node_maximum():
    for key, count in GPU_TYPES.items():
        assert key in GPU_MODELS, key
        assert GPU_MODELS[key]["gpus_per_node_max"] == count, key
    for key in ("h100_pcie", "h100_nvl", "h200_nvl", "a100_pcie"):
        assert key in GPU_MODELS


def test_profiles_are_consistent():
    fields = {"name", "architecture", "gpus_per_node_max", "power_min_watts", "power_max_watts", "power_default_watts",
              "sm_clock_max_mhz", "memory_clock_max_mhz", "open_kernel_module", "min_branch", "max_branch", "mig",
              "nvswitch"}
    for key, p in GPU_MODELS.items():
        assert set(p) == fields, key
        assert p["architecture"] in ("volta", "ampere", "ada", "hopper", "blackwell"), key
        if p["architecture"] == "blackwell":
            assert p["open_kernel_module"] == "required", key
        if p["architecture"] == "hopper":
            assert p["open_kernel_module"] == "recommended", key
        if p["power_min_watts"] is not None and p["power_max_watts"] is not None:
            assert p["power_min_watts"] < p["power_max_watts"], key
    h100 = GPU_MODELS["h100"]
    assert (h100["power_min_watts"], h100["power_max_watts"], h100["sm_clock_max_mhz"]) == (200, 700, 1980)


def test_sound_values_pass():
    assert errors() == []
    assert errors(gpu_tuning_power_limit_watts=500, gpu_tuning_locked_gpu_clocks={"min": 1980, "max": 1980},
                  gpu_tuning_locked_memory_clocks="reset", gpu_tuning_application_clocks={"memory": 2619,
                                                                                          "graphics": 1980},
                  gpu_tuning_gpus=["0", "GPU-9e698665-a4d3-ab5e-4786-e4ff011a36a8", "00000000:18:00.0"],
                  nvidia_driver_branch="570", nvidia_driver_version="570.133.20",
                  nvidia_driver_kernel_module_type="open", validate_dcgm_level=2, rolling_health_dcgm_level=1,
                  dcgm_health_watches="pmit", dcgm_exporter_listen_port=9400, dcgm_exporter_hostengine="localhost:5555",
                  nccl_ib_hca=["mlx5_0:1", "=mlx5_1:1", "mlx5_2"], nccl_socket_ifname="=ib0",
                  nccl_ib_timeout=22, nccl_settings={"NCCL_CROSS_NIC": 0, "NCCL_NET_GDR_LEVEL": "PHB"},
                  gpu_tuning_rack="r01", gpu_tuning_rack_power_budget_watts=11000) == []


@pytest.mark.parametrize("value", [
    "800", 800.5, True, [700], {"w": 700}, "reset", None, 0, -5, "  ", {"min": "x", "max": None}, ["a", 1, None],
    {1: 2}, "Reset", "mlx5_0:x", 12.5,
])
def test_wrong_shapes_never_raise(value):
    names = ("gpu_tuning_power_limit_watts", "gpu_tuning_locked_gpu_clocks", "gpu_tuning_locked_memory_clocks",
             "gpu_tuning_application_clocks", "gpu_tuning_gpus", "gpu_tuning_rack", "gpu_tuning_rack_power_budget_watts",
             "gpu_tuning_node_overhead_watts", "gpu_tuning_mig_config", "gpu_tuning_state_file", "gpu_tuning_unit_after",
             "nvidia_driver_branch", "nvidia_driver_version", "nvidia_driver_kernel_module_type",
             "nvidia_driver_nvswitch_present", "validate_dcgm_level", "rolling_health_dcgm_level",
             "slurm_compute_healthcheck_dcgm", "slurm_compute_healthcheck_dcgm_watches", "dcgm_health_watches",
             "slurm_compute_healthcheck_dcgm_diag_level",
             "dcgm_version", "dcgm_cuda_major", "dcgm_dcgmi_path", "dcgm_exporter_hostengine",
             "dcgm_exporter_listen_port", "dcgm_exporter_scrape_interval_seconds", "nccl_ib_hca", "nccl_socket_ifname",
             "nccl_socket_ip", "nccl_ib_gid_index", "nccl_ib_timeout", "nccl_settings", "nccl_debug_overrides",
             "nccl_topo_file", "nccl_roce_qos_tool", "nccl_roce_pfc_priority", "nccl_roce_trust",
             "cluster_fabric_type", "cluster_gpu_type", "cluster_gpu_count_per_node")
    for name in names:
        hv, groups = inventory(gpu_hosts=("gpu01", "gpu02"), **{name: copy.deepcopy(value)})
        inv = Inventory(hv, groups)
        assert isinstance(check(inv, OPTS), list)
        assert isinstance(warnings(inv, OPTS), list)


def test_unknown_gpu_type_skips_the_model_rules():
    assert errors(cluster_gpu_type="h1000", gpu_tuning_power_limit_watts=5000) == []


# ------------------------------------------------------------------------------------------------- power cap

def test_power_cap_inside_the_range():
    assert errors(gpu_tuning_power_limit_watts=200) == []
    assert errors(gpu_tuning_power_limit_watts=700) == []


def test_power_cap_above_the_range():
    one(errors(gpu_tuning_power_limit_watts=800),
        "gpu01: gpu_tuning_power_limit_watts: 800 W is outside the H100 SXM range 200-700 W")


def test_power_cap_below_the_range():
    one(errors(gpu_tuning_power_limit_watts=150), "150 W is outside the H100 SXM range 200-700 W")


def test_power_cap_above_a_maximum_only_model():
    one(errors(cluster_gpu_type="l40s", gpu_tuning_power_limit_watts=400),
        "gpu01: gpu_tuning_power_limit_watts: 400 W is above the L40S maximum of 350 W")


def test_power_cap_on_an_l4():
    one(errors(cluster_gpu_type="l4", gpu_tuning_power_limit_watts=600), "600 W is outside the L4 range 40-72 W")


def test_power_cap_model_key_is_case_insensitive():
    one(errors(cluster_gpu_type="H100", gpu_tuning_power_limit_watts=800), "outside the H100 SXM range")


@pytest.mark.parametrize("value,message", [
    ("lots", "must be a whole number of watts per GPU (or null for no cap), got string 'lots'"),
    ("reset", "to remove a cap set the model's default limit"),
    (True, "got boolean True"),
    (500.5, "got number 500.5"),
    (0, "must be a positive number of watts, got 0"),
])
def test_power_cap_shape(value, message):
    one(errors(gpu_tuning_power_limit_watts=value), message)


def test_power_cap_from_the_command_line_is_a_string_of_digits():
    assert errors(gpu_tuning_power_limit_watts="500") == []
    one(errors(gpu_tuning_power_limit_watts="900"), "900 W is outside the H100 SXM range 200-700 W")


# ---------------------------------------------------------------------------------------------------- clocks

@pytest.mark.parametrize("value", [None, "reset", {"min": 1980, "max": 1980}, {"min": 0, "max": 1980},
                                   {"min": "1500", "max": "1980"}])
def test_locked_gpu_clock_shapes_the_role_accepts(value):
    assert errors(gpu_tuning_locked_gpu_clocks=value) == []


@pytest.mark.parametrize("value,message", [
    ({"min": 1980, "max": 1500}, "gpu_tuning_locked_gpu_clocks: min (1980 MHz) must not be greater than max (1500 MHz)"),
    ({"min": 1500, "max": 2100}, "gpu_tuning_locked_gpu_clocks: max 2100 MHz is above the H100 SXM's highest SM "
                                 "clock of 1980 MHz"),
    ([1980, 1980], "a list ([1980, 1980]) is not accepted"),
    ("1980,1980", "got the string '1980,1980'"),
    ("RESET", "write reset in lower case"),
    ({"min": 1980}, "takes exactly the keys min and max (missing: max; unknown: none)"),
    ({"min": 1980, "max": 1980, "mode": 1}, "(missing: none; unknown: mode)"),
    ({"min": 1980.0, "max": 1980}, "min must be a whole number of MHz, got number 1980.0"),
    ({"min": -100, "max": 1980}, "min must not be negative, got -100"),
    ({"min": 0, "max": 0}, "max must be a positive number of MHz, got 0"),
    (1980, "got integer 1980"),
])
def test_locked_gpu_clocks(value, message):
    one(errors(gpu_tuning_locked_gpu_clocks=value), message)


def test_locked_memory_clocks_above_the_memory_clock():
    one(errors(gpu_tuning_locked_memory_clocks={"min": 2619, "max": 3000}),
        "gpu_tuning_locked_memory_clocks: max 3000 MHz is above the H100 SXM's highest memory clock of 2619 MHz")


def test_locked_memory_clocks_on_volta():
    out = errors(cluster_gpu_type="v100", nvidia_driver_kernel_module_type="proprietary",
                 gpu_tuning_locked_memory_clocks={"min": 877, "max": 877})
    one(out, "memory clock locks (nvidia-smi -lmc) need an Ampere or newer GPU; V100 SXM2 is Volta")


def test_application_clocks():
    assert errors(gpu_tuning_application_clocks={"memory": 3201, "graphics": 1980}, cluster_gpu_type="h200") == []
    one(errors(gpu_tuning_application_clocks={"memory": 2619, "graphics": 2505}),
        "gpu_tuning_application_clocks: graphics 2505 MHz is above the H100 SXM's highest SM clock of 1980 MHz")
    one(errors(gpu_tuning_application_clocks={"memory": 3201, "graphics": 1980}),
        "gpu_tuning_application_clocks: memory 3201 MHz is above the H100 SXM's highest memory clock of 2619 MHz")
    one(errors(gpu_tuning_application_clocks={"min": 1980, "max": 1980}),
        "takes exactly the keys memory and graphics (missing: memory, graphics; unknown: max, min)")


def test_clock_limits_unknown_for_the_model_are_skipped():
    assert errors(cluster_gpu_type="b200", gpu_tuning_locked_gpu_clocks={"min": 2500, "max": 2500}) == []


# ----------------------------------------------------------------------------------------------- GPU selection

@pytest.mark.parametrize("value,message", [
    ("0,1", "gpu_tuning_gpus: must be a list of GPU indexes"),
    ([], "an empty list: the module would tune every GPU while the power budget counts none"),
    ([0, "1"], "gpu_tuning_gpus[0]: the index 0 must be a string ('0')"),
    (["8"], "gpu_tuning_gpus[0]: GPU index 8 does not exist on a node with 8 GPUs"),
    (["MIG-9e698665-a4d3-ab5e-4786-e4ff011a36a8"], "is a MIG device: clocks and power limits are per physical GPU"),
    (["gpu0"], "'gpu0' is not a GPU index (0, 1, ...), a GPU UUID"),
    (["1", "1"], "gpu_tuning_gpus[1]: GPU '1' is listed twice"),
    ([["0"]], "gpu_tuning_gpus[0]: must be a GPU index, UUID or PCI bus id, got list"),
])
def test_gpu_selection(value, message):
    one(errors(gpu_tuning_gpus=value), message)


def test_mig_config():
    assert errors(gpu_tuning_mig_config="all-1g.10gb") == []
    one(errors(cluster_gpu_type="l40s", gpu_tuning_mig_config="all-1g.10gb"),
        "gpu_tuning_mig_config: L40S GPUs do not support MIG")
    one(errors(gpu_tuning_mig_config="all 1g; reboot"), "must be a nvidia-mig-parted configuration name")


def test_boot_unit_values():
    one(errors(gpu_tuning_state_file="/etc/my state.json"), "gpu_tuning_state_file: must be an absolute path")
    one(errors(gpu_tuning_unit_after=["nvidia-persistenced"]),
        "gpu_tuning_unit_after[0]: 'nvidia-persistenced' is not a systemd unit name")
    assert errors(gpu_tuning_unit_after=[], gpu_tuning_unit_before=["slurmd.service"]) == []


# ------------------------------------------------------------------------------------------- rack power budget

def rack(hosts=("gpu01", "gpu02"), **gpu_vars):
    hv, groups = inventory(gpu_hosts=hosts, **dict({"gpu_tuning_rack": "r01"}, **gpu_vars))
    return hv, groups


def test_rack_within_budget():
    # 2 x (8 x 700 + 4600) = 20400 W
    assert errors_of(*rack(gpu_tuning_rack_power_budget_watts=20400)) == []


def test_rack_over_budget_across_two_hosts_where_each_alone_fits():
    out = errors_of(*rack(gpu_tuning_rack_power_budget_watts=15000))
    one(out, "inventory: gpu_tuning_rack_power_budget_watts: rack 'r01' would draw 20400 W with 2 nodes, over its "
             "budget of 15000 W")
    assert "gpu01: 8 GPUs x 700 W = 5600 W + 4600 W overhead" in out[0]


def test_rack_budget_uses_the_cap_and_the_overhead():
    assert errors_of(*rack(gpu_tuning_rack_power_budget_watts=15000, gpu_tuning_power_limit_watts=400,
                           gpu_tuning_node_overhead_watts=3000)) == []   # 2 x (3200 + 3000) = 12400
    one(errors_of(*rack(gpu_tuning_rack_power_budget_watts=12000, gpu_tuning_power_limit_watts=400,
                        gpu_tuning_node_overhead_watts=3000)), "would draw 12400 W with 2 nodes")


def test_rack_budget_counts_uncapped_gpus_at_their_default_limit():
    # 2 GPUs capped at 300 W, 6 at 700 W: 4800 W + 4600 W = 9400 W per node.
    one(errors_of(*rack(gpu_tuning_rack_power_budget_watts=18000, gpu_tuning_power_limit_watts=300,
                        gpu_tuning_gpus=["0", "1"])), "would draw 18800 W")


def test_rack_budget_is_the_smallest_the_nodes_give():
    hv, groups = rack(gpu_tuning_rack_power_budget_watts=30000)
    hv["gpu02"]["gpu_tuning_rack_power_budget_watts"] = 20000
    one(errors_of(hv, groups), "over its budget of 20000 W (the smallest its nodes give)")
    assert any("give different budgets" in w for w in warnings(Inventory(hv, groups), OPTS))


def test_rack_budget_is_per_rack():
    hv, groups = rack(gpu_tuning_rack_power_budget_watts=15000)
    hv["gpu02"]["gpu_tuning_rack"] = "r02"
    assert errors_of(hv, groups) == []


def test_budget_without_a_rack():
    one(errors(gpu_tuning_rack_power_budget_watts=20000),
        "gpu01: gpu_tuning_rack_power_budget_watts: a budget is set but gpu_tuning_rack is not")


def test_rack_without_a_budget():
    hv, groups = rack(gpu_tuning_rack_power_budget_watts=20400)
    del hv["gpu02"]["gpu_tuning_rack_power_budget_watts"]
    one(errors_of(hv, groups), "gpu02: gpu_tuning_rack: rack 'r01' has no gpu_tuning_rack_power_budget_watts on this "
                               "host")


@pytest.mark.parametrize("name,value,message", [
    ("gpu_tuning_rack_power_budget_watts", "lots", "must be a positive whole number of watts, got 'lots'"),
    ("gpu_tuning_rack_power_budget_watts", -1, "must be a positive whole number of watts, got -1"),
    ("gpu_tuning_node_overhead_watts", -100, "gpu_tuning_node_overhead_watts: must be a whole number of watts, 0 or "
     "more, got -100"),
    ("gpu_tuning_rack", ["r01"], "gpu_tuning_rack: must be the rack's name (a string), got list"),
])
def test_rack_shapes(name, value, message):
    hv, groups = rack(gpu_tuning_rack_power_budget_watts=30000)
    hv["gpu01"][name] = value
    out = errors_of(hv, groups)
    assert any(message in e for e in out), out


# ------------------------------------------------------------------------------------------------------ driver

@pytest.mark.parametrize("branch,version", [("570", None), ("535", "535.230.02"), (570, "570.133"),
                                            ("580", "580.65.06")])
def test_sound_driver(branch, version):
    assert errors(nvidia_driver_branch=branch, nvidia_driver_version=version) == []


@pytest.mark.parametrize("gpu_vars,message", [
    ({"nvidia_driver_branch": "R570"}, "nvidia_driver_branch: must be a driver branch of three digits such as "
                                       "\"570\", got 'R570'"),
    ({"nvidia_driver_branch": 570.0}, "nvidia_driver_branch: 570 is a number, not a branch string"),
    ({"nvidia_driver_version": "570"}, "nvidia_driver_version: must look like 570.133.20 or 570.133"),
    ({"nvidia_driver_version": 570.1}, "nvidia_driver_version: 570.1 is a number, not a version string: YAML reads"),
    ({"nvidia_driver_version": 570}, "nvidia_driver_version: must be a driver version string such as "
                                     "\"570.133.20\", got integer 570"),
    ({"nvidia_driver_version": "550.54.15"}, "nvidia_driver_version: 550.54.15 is not in branch 570"),
    ({"nvidia_driver_branch": "515", "nvidia_driver_kernel_module_type": "proprietary"},
     "nvidia_driver_branch: 515 is too old for H100 SXM (Hopper needs R525 or newer)"),
    ({"nvidia_driver_branch": "470", "cluster_gpu_type": "a100"},
     "open kernel modules exist from branch 515 on; branch 470 has only proprietary ones"),
])
def test_driver(gpu_vars, message):
    one(errors(**gpu_vars), message)


def test_proprietary_modules_on_blackwell():
    one(errors(cluster_gpu_type="b200", nvidia_driver_kernel_module_type="proprietary"),
        "nvidia_driver_kernel_module_type: B200 (Blackwell) GPUs work only with NVIDIA's open kernel modules")


def test_blackwell_needs_r570():
    one(errors(cluster_gpu_type="b200", nvidia_driver_branch="550"),
        "nvidia_driver_branch: 550 is too old for B200 (Blackwell needs R570 or newer)")


def test_open_modules_on_volta_including_the_default():
    one(errors(cluster_gpu_type="v100"), "V100 SXM2 (Volta) needs proprietary (open is the role's default)")
    assert errors(cluster_gpu_type="v100", nvidia_driver_kernel_module_type="proprietary") == []


def test_volta_after_r580():
    one(errors(cluster_gpu_type="v100", nvidia_driver_kernel_module_type="proprietary", nvidia_driver_branch="590"),
        "nvidia_driver_branch: 590 does not support V100 SXM2: R580 is the last driver branch for Volta GPUs")


def test_nvswitch_setting():
    one(errors(cluster_gpu_type="l40s", nvidia_driver_nvswitch_present=True), "L40S nodes have no NVSwitch")
    one(errors(nvidia_driver_nvswitch_present=False), "an 8-GPU H100 SXM node is an HGX/DGX board")
    assert errors(nvidia_driver_nvswitch_present=False, cluster_gpu_count_per_node=4) == []


def test_proprietary_on_hopper_is_a_warning_only():
    hv, groups = inventory(nvidia_driver_kernel_module_type="proprietary")
    inv = Inventory(hv, groups)
    assert check(inv, OPTS) == []
    assert any("recommends the open kernel modules for H100 SXM" in w for w in warnings(inv, OPTS))


# -------------------------------------------------------------------------------------------------------- DCGM

@pytest.mark.parametrize("name", ["validate_dcgm_level"])
@pytest.mark.parametrize("value", [1, 4, "2"])
def test_dcgm_levels_in_range(name, value):
    assert errors(**{name: value}) == []


@pytest.mark.parametrize("name", ["validate_dcgm_level"])
@pytest.mark.parametrize("value", [0, 5, -1, "quick", 1.5, True])
def test_dcgm_levels_out_of_range(name, value):
    one(errors(**{name: value}), "%s: must be a DCGM diagnostic level 1-4" % name)


def test_health_check_dcgm_mode():
    assert errors(slurm_compute_healthcheck_dcgm="auto") == []
    assert errors(slurm_compute_healthcheck_dcgm=True) == []
    one(errors(slurm_compute_healthcheck_dcgm="required"), "slurm_compute_healthcheck_dcgm: must be auto, true or false")


@pytest.mark.parametrize("value", [0, 1, "1"])
def test_health_check_diagnostic_level_0_or_1(value):
    assert errors(slurm_compute_healthcheck_dcgm_diag_level=value) == []


@pytest.mark.parametrize("value", [2, 3, -1, "quick", 1.5, True])
def test_health_check_diagnostic_levels_that_take_minutes_are_refused(value):
    one(errors(slurm_compute_healthcheck_dcgm_diag_level=value),
        "slurm_compute_healthcheck_dcgm_diag_level: must be 0 (off) or 1")


def test_health_check_diagnostic_needs_dcgm_in_the_check():
    one(errors(slurm_compute_healthcheck_dcgm_diag_level=1, slurm_compute_healthcheck_dcgm=False),
        "slurm_compute_healthcheck_dcgm_diag_level: 1 needs DCGM in the health check")
    assert errors(slurm_compute_healthcheck_dcgm_diag_level=0, slurm_compute_healthcheck_dcgm=False) == []


@pytest.mark.parametrize("name,value,ok", [
    ("dcgm_health_watches", "a", True), ("dcgm_health_watches", "pmitndx", True), ("dcgm_health_watches", "", False),
    ("dcgm_health_watches", "pq", False), ("dcgm_health_watches", "pp", False), ("dcgm_health_watches", 1, False),
    ("slurm_compute_healthcheck_dcgm_watches", "", True), ("slurm_compute_healthcheck_dcgm_watches", "all", False),
])
def test_dcgm_watches(name, value, ok):
    out = errors(**{name: value})
    assert (out == []) is ok, out
    if not ok:
        assert out[0].startswith("gpu01: %s: " % name)


@pytest.mark.parametrize("gpu_vars,message", [
    ({"dcgm_version": "3.3.9"}, "dcgm_version: must be a DCGM 4 version such as \"4.4.2\""),
    ({"dcgm_version": 4.4}, "dcgm_version: 4.4 is a number, not a version string"),
    ({"dcgm_cuda_major": 10}, "dcgm_cuda_major: must be one of 11, 12, 13"),
    ({"dcgm_cuda_major": 13}, "dcgm_cuda_major: CUDA 13 needs driver branch R580 or newer; nvidia_driver_branch is 570"),
    ({"dcgm_exporter_listen_port": 70000}, "dcgm_exporter_listen_port: must be a TCP port 1-65535, got 70000"),
    ({"dcgm_exporter_listen_port": 0}, "dcgm_exporter_listen_port: must be a TCP port 1-65535, got 0"),
    ({"dcgm_exporter_listen_port": 5555, "dcgm_hostengine_socket_path": None},
     "dcgm_exporter_listen_port: 5555 is the local host engine's port"),
    ({"dcgm_exporter_hostengine": "local host"}, "dcgm_exporter_hostengine: must be the running nv-hostengine's"),
    ({"dcgm_exporter_hostengine": "localhost:99999"}, "port 99999 is not 1-65535, got 'localhost:99999'"),
    ({"dcgm_exporter_hostengine": "unix://run/x.sock"}, "a unix:// address needs an absolute socket path"),
    ({"dcgm_hostengine_socket_path": "/var/run/dcgm.sock"}, "dcgm_hostengine_socket_path: must be /run/<directory>"),
    ({"dcgm_hostengine_socket_path": "/run/x/../y"}, "dcgm_hostengine_socket_path: must be /run/<directory>"),
    ({"dcgm_dcgmi_path": "dcgmi --host x"}, "dcgm_dcgmi_path: must be a command name or an absolute path"),
    ({"dcgm_exporter_binary": "dcgm-exporter"}, "dcgm_exporter_binary: must be an absolute path"),
    ({"dcgm_exporter_scrape_interval_seconds": 0}, "dcgm_exporter_scrape_interval_seconds: must be a positive"),
])
def test_dcgm(gpu_vars, message):
    one(errors(**gpu_vars), message)


def test_dcgm_sound_values():
    assert errors(dcgm_version="4.2.3", dcgm_cuda_major=12, dcgm_exporter_hostengine="10.1.0.5:5555",
                  dcgm_exporter_listen_port=5555, dcgm_dcgmi_path="/usr/bin/dcgmi") == []
    assert errors(dcgm_cuda_major=13, nvidia_driver_branch="580") == []
    # the host engine on its socket (the default) leaves TCP 5555 free for the exporter
    assert errors(dcgm_exporter_listen_port=5555, dcgm_hostengine_socket_path="/run/dcgm/he.sock",
                  dcgm_exporter_hostengine="unix:///run/dcgm/he.sock") == []
    assert errors(dcgm_exporter_listen_port=5555) == []


# -------------------------------------------------------------------------------------------------------- NCCL

@pytest.mark.parametrize("value,message", [
    ("mlx5_0:1,mlx5_1:1", "nccl_ib_hca: must be a list of HCA ports such as ['mlx5_0:1', 'mlx5_1:1']"),
    ([], "nccl_ib_hca: an empty list names no HCA, so NCCL has none to use on this infiniband fabric"),
    (["mlx5_0:x"], "nccl_ib_hca[0]: the port of 'mlx5_0:x' must be a positive whole number"),
    (["mlx5_0:0"], "the port of 'mlx5_0:0' must be a positive whole number (HCA ports count from 1), got '0'"),
    (["mlx5 0"], "nccl_ib_hca[0]: 'mlx5 0' is not an HCA name such as mlx5_0"),
    (["^mlx5_0"], "the role writes the '=' exact-match prefix itself"),
    (["mlx5_0:1,mlx5_1:1"], "holds several HCAs: give one per list entry"),
    (["mlx5_0:1", "=mlx5_0:1"], "nccl_ib_hca[1]: '=mlx5_0:1' is listed twice"),
    ([1], "nccl_ib_hca[0]: must be a string 'hca' or 'hca:port'"),
])
def test_nccl_ib_hca(value, message):
    one(errors(nccl_ib_hca=value), message)


def test_nccl_ib_hca_needs_ports_on_roce():
    out = errors(cluster_fabric_type="roce", nccl_ib_hca=["mlx5_0", "mlx5_1:1"])
    one(out, "nccl_ib_hca[0]: 'mlx5_0' needs its port on a RoCE fabric (e.g. mlx5_0:1)")
    assert errors(cluster_fabric_type="roce", nccl_ib_hca=["mlx5_0:1"]) == []
    assert errors(cluster_fabric_type="ethernet", nccl_ib_hca=[]) == []


@pytest.mark.parametrize("value", ["ib0", "=ens1f0", "^docker,lo", "^=docker0,lo", "eth0.100", "ib"])
def test_nccl_socket_ifname_sound(value):
    assert errors(nccl_socket_ifname=value) == []


@pytest.mark.parametrize("value,message", [
    ("ib0 ", "bad: 'ib0 '"),
    ("ib0;reboot", "bad: 'ib0;reboot'"),
    ("averyveryverylongname0", "bad: 'averyveryverylongname0'"),
    ("ib0,,ib1", "bad: ''"),
    ("=", "bad: ''"),
    (["ib0"], "nccl_socket_ifname: must be a string such as ib0"),
])
def test_nccl_socket_ifname(value, message):
    one(errors(nccl_socket_ifname=value), message)


def test_nccl_socket_ip():
    assert errors(nccl_socket_ip="10.2.0.21") == []
    one(errors(nccl_socket_ip="10.2.0.0/24"), "nccl_socket_ip: must be an IP address of this node")


@pytest.mark.parametrize("name,value,message", [
    ("nccl_ib_gid_index", 256, "nccl_ib_gid_index: must be a GID index 0-255"),
    ("nccl_ib_gid_index", -1, "(see show_gids; null detects the RoCE v2 IPv4 GID), got -1"),
    ("nccl_ib_timeout", 32, "nccl_ib_timeout: must be a whole number 1-31"),
    ("nccl_ib_timeout", 0, "nccl_ib_timeout: must be a whole number 1-31 (NCCL_IB_TIMEOUT"),
    ("nccl_ib_timeout", None, "nccl_ib_timeout: must be a whole number 1-31"),
])
def test_nccl_ranges(name, value, message):
    one(errors(**{name: value}), message)


def test_nccl_ranges_sound():
    assert errors(cluster_fabric_type="roce", nccl_ib_gid_index=3, nccl_ib_timeout=31) == []
    assert errors(nccl_ib_timeout="23") == []


@pytest.mark.parametrize("settings,message", [
    ({"CROSS_NIC": 0}, "nccl_settings: 'CROSS_NIC' is not a NCCL variable name"),
    ({"nccl_cross_nic": 0}, "'nccl_cross_nic' is not a NCCL variable name"),
    ({"NCCL_CROSS_NIC": [0]}, "nccl_settings: NCCL_CROSS_NIC: must be a single value"),
    ({"NCCL_IB_PCI_RELAXED_ORDERING": True}, "a YAML boolean is written as True"),
    ({"NCCL_DEBUG": "INFO\nNCCL_ALGO=Ring"}, "must be one line"),
    ({"NCCL_DEBUG": " WARN"}, "NCCL reads the value literally (no trimming)"),
    ({"NCCL_IB_TIMEOUT": 22}, "NCCL_IB_TIMEOUT is written by the role from nccl_ib_timeout"),
    ({"NCCL_ALGO": "Ring"}, "nccl_settings: NCCL_ALGO is a debugging-only variable"),
    ({"NCCL_CROSS_NIC": 3}, "NCCL_CROSS_NIC must be a whole number 0-2, got 3"),
    ({"NCCL_IB_RETRY_CNT": 9}, "NCCL_IB_RETRY_CNT must be a whole number 0-7"),
    ({"NCCL_NET_GDR_LEVEL": "NEAR"}, "NCCL_NET_GDR_LEVEL must be one of LOC, PIX, PXB, PHB, SYS"),
    (["NCCL_CROSS_NIC=0"], "nccl_settings: must be a dict of NCCL_* variables"),
])
def test_nccl_settings(settings, message):
    one(errors(nccl_settings=settings), message)


def test_nccl_debug_overrides():
    assert errors(nccl_debug_overrides={"NCCL_ALGO": "Ring", "NCCL_PROTO": "Simple"}) == []
    one(errors(nccl_settings={"NCCL_DEBUG": "WARN"}, nccl_debug_overrides={"NCCL_DEBUG": "INFO"}),
        "nccl_debug_overrides: NCCL_DEBUG is also in nccl_settings; give it once")


def test_nccl_topology_file():
    one(errors(nccl_topo_file_src="files/topo.xml"), "nccl_topo_file_src: is set but nccl_topo_file")
    one(errors(nccl_topo_file="topo.xml"), "nccl_topo_file: must be an absolute path")
    assert errors(nccl_topo_file_src="files/topo.xml", nccl_topo_file="/etc/nccl-topo.xml") == []


@pytest.mark.parametrize("name,value,message", [
    ("nccl_roce_qos_tool", "mlnx_qos; reboot", "nccl_roce_qos_tool: must be a command name or an absolute path"),
    ("nccl_roce_pfc_priority", 8, "nccl_roce_pfc_priority: must be a priority 0-7"),
    ("nccl_roce_trust", "DSCP", "nccl_roce_trust: must be dscp (routed RoCE, the usual choice) or pcp"),
])
def test_roce_values_written_into_the_boot_unit(name, value, message):
    one(errors(cluster_fabric_type="roce", **{name: value}), message)


def test_roce_settings_on_infiniband_are_a_warning_only():
    hv, groups = inventory(nccl_ib_gid_index=3, nccl_roce_trust="pcp")
    inv = Inventory(hv, groups)
    assert check(inv, OPTS) == []
    found = warnings(inv, OPTS)
    assert len(found) == 1 and "nccl_ib_gid_index, nccl_roce_trust: RoCE settings have no effect" in found[0]
    # nccl_ib_hca on a fabric without HCAs is an error of preflight_cross (test_preflight_cross.py), no warning.
    hv, groups = inventory(cluster_fabric_type="ethernet", nccl_ib_hca=["mlx5_0:1"])
    assert not any("NCCL_IB_HCA" in w for w in warnings(Inventory(hv, groups), OPTS))


# ------------------------------------------------------------------------------------------------------ fabric

def test_fabric_type_agrees():
    hv, groups = inventory(gpu_hosts=("gpu01", "gpu02", "gpu03"))
    assert errors_of(hv, groups) == []


def test_mixed_fabric_types_name_the_hosts_that_differ():
    hv, groups = inventory(gpu_hosts=("gpu01", "gpu02", "gpu03"))
    hv["gpu02"]["cluster_fabric_type"] = "roce"
    one(errors_of(hv, groups), "inventory: cluster_fabric_type: the GPU nodes must all use one fabric type (NCCL, the "
                               "HCA settings and LNet follow it): gpu02 has 'roce' while 2 other GPU node(s) (gpu01, "
                               "gpu03) have 'infiniband'")


def test_invalid_fabric_type_on_one_host():
    hv, groups = inventory(gpu_hosts=("gpu01", "gpu02"))
    hv["gpu02"]["cluster_fabric_type"] = "ib"
    out = errors_of(hv, groups)
    assert "gpu02: cluster_fabric_type: must be one of infiniband, roce, ethernet, none, got 'ib'" in out
    assert any("gpu02 has 'ib'" in e for e in out)


def test_invalid_cluster_wide_fabric_type_is_left_to_the_inventory_rules():
    hv, groups = inventory(gpu_hosts=("gpu01",), cluster_fabric_type="ib", head={"cluster_fabric_type": "ib"})
    assert errors_of(hv, groups) == []


def test_gpu_nodes_differ_from_the_cluster_value():
    hv, groups = inventory(gpu_hosts=("gpu01", "gpu02"), cluster_fabric_type="roce",
                           head={"cluster_fabric_type": "infiniband"})
    one(errors_of(hv, groups), "the GPU nodes (gpu01, gpu02) have 'roce' but the cluster-wide value read from head01 "
                               "is 'infiniband'")
