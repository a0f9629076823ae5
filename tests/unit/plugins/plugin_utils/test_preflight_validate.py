"""Preflight rules for playbooks/validate.yml's variables, one test per rule."""

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils.hardware import VALIDATION_PROFILES
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import Inventory
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_validate import check, profiles

GROUPS = {"all": ["head01", "gpu01"], "slurm_controller": ["head01"], "gpu_nodes": ["gpu01"]}


def errors(**gpu_vars):
    hv = {"head01": {}, "gpu01": dict({"cluster_gpu_type": "h100"}, **gpu_vars)}
    return check(Inventory(hv, GROUPS), {"rolling": False})


def test_sound_defaults_pass():
    assert errors() == []
    assert errors(validate_profile="h100_sxm_hdr", validate_thresholds={"nccl_min_fraction": 0.8},
                  validate_models=[{"name": "70b", "parameters_billion": 70}], validate_nccl_max_bytes="8G",
                  validate_ib_write_bw_hcas=["mlx5_0", "mlx5_1"], validate_storage_path="/lustre/scratch/v",
                  validate_dcgm_timeout_seconds=900) == []


def test_the_profiles_are_the_hardware_catalogue():
    assert profiles() is VALIDATION_PROFILES and "h100_sxm_ndr" in profiles()


def test_unknown_profile():
    assert errors(validate_profile="h100_pcie_ndr")[0].startswith(
        "gpu01: validate_profile: 'h100_pcie_ndr' is not a hardware profile of the catalogue")


def test_gpu_type_without_a_default_profile():
    out = errors(cluster_gpu_type="l40s")
    assert len(out) == 1 and "default for cluster_gpu_type l40s (l40s_sxm_ndr)" in out[0]
    assert errors(cluster_gpu_type="l40s", validate_profile="h100_sxm_ndr") == []


@pytest.mark.parametrize("thresholds,message", [
    ({"nccl_min_fracton": 0.9}, "validate_thresholds.nccl_min_fracton: not a threshold validation knows"),
    ({"nccl_min_fraction": 90}, "validate_thresholds.nccl_min_fraction: is a fraction of the nominal figure"),
    ({"nccl_single_node_busbw_gbps": -1}, "validate_thresholds.nccl_single_node_busbw_gbps: must be a positive"),
    ({"nccl_single_node_busbw_gbps": "fast"}, "must be a positive number, got 'fast'"),
    (["nccl_min_fraction"], "validate_thresholds: must be a dict of threshold overrides, got a list"),
])
def test_thresholds(thresholds, message):
    out = errors(validate_thresholds=thresholds)
    assert len(out) == 1 and message in out[0], out


def test_null_threshold_means_default():
    assert errors(validate_thresholds={"nccl_min_fraction": None}) == []


@pytest.mark.parametrize("name,value", [
    ("validate_dcgm_timeout_seconds", 0), ("validate_dcgm_timeout_seconds", "900"),
    ("validate_checkpoint_interval_minutes", -5), ("validate_storage_test_mib", 1.5),
])
def test_numbers_are_the_spec_rules_to_judge(name, value):
    # Type and range come from the spec and roles/validate/meta/preflight.yml (test_preflight_generic.py): this rule
    # set says nothing more, so an operator sees one message per mistake.
    assert errors(**{name: value}) == []


def test_paths_with_shell_characters():
    out = errors(validate_storage_path="/tmp/x; rm -rf /")
    assert len(out) == 1 and "validate_storage_path: must be an absolute path without quotes or shell" in out[0]


@pytest.mark.parametrize("value", ["relative/dir", 5])
def test_relative_paths_are_the_spec_rules_to_judge(value):
    assert errors(validate_storage_path=value) == []


@pytest.mark.parametrize("value", ["8 GB", "0", -1, "lots"])
def test_nccl_max_bytes(value):
    assert "validate_nccl_max_bytes: must be a size" in errors(validate_nccl_max_bytes=value)[0]


@pytest.mark.parametrize("value", [[], "mlx5_0", ["mlx5_0 mlx5_1"], [1]])
def test_hcas(value):
    assert "validate_ib_write_bw_hcas: must be a non-empty list" in errors(validate_ib_write_bw_hcas=value)[0]


@pytest.mark.parametrize("value,message", [
    ({"name": "x"}, "validate_models: must be a list"),
    (["70b"], "validate_models[0]: must be a dict"),
    ([{"name": "70b", "parameters_billion": "seventy"}], "validate_models[0].parameters_billion: must be a positive"),
])
def test_models(value, message):
    assert message in errors(validate_models=value)[0]
