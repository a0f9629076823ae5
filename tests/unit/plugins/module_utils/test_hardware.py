"""The hardware catalogue (plugins/module_utils/hardware.py): one table of GPU models and validation profiles that
preflight, the validate role (filter validation_profile) and the judge's defaults all read (issue 41)."""

import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter import hardware as hardware_filter
from ansible_collections.clusterforge.gpu.plugins.module_utils import hardware
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_thresholds import DEFAULT_THRESHOLDS
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import preflight_gpu, preflight_validate

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
FIGURES = {"nccl_single_node_busbw_gbps", "nccl_multi_node_busbw_gbps", "ib_rate_gbps", "ib_ports_per_node"}


def test_every_profile_has_every_figure_as_a_positive_number():
    for name, figures in hardware.VALIDATION_PROFILES.items():
        assert set(figures) == FIGURES, name
        assert all(isinstance(v, int) and v > 0 for v in figures.values()), name


def test_the_figures_are_the_published_ones():
    """PRACTICE.md section 5: NVLink4 Ring about 370 GB/s in a node; NDR Ring ceiling about 385, HDR about 192."""
    assert hardware.validation_profile("h100_sxm_ndr") == {"nccl_single_node_busbw_gbps": 370,
                                                           "nccl_multi_node_busbw_gbps": 385,
                                                           "ib_rate_gbps": 400, "ib_ports_per_node": 8}
    assert hardware.validation_profile("h100_sxm_hdr")["nccl_multi_node_busbw_gbps"] == 192
    assert hardware.validation_profile("h100_sxm_hdr")["ib_rate_gbps"] == 200


def test_a_profile_is_a_copy():
    figures = hardware.validation_profile("h200_sxm_ndr")
    figures["ib_rate_gbps"] = 1
    assert hardware.VALIDATION_PROFILES["h200_sxm_ndr"]["ib_rate_gbps"] == 400


@pytest.mark.parametrize("name", ["h100_pcie_ndr", "", None, 5])
def test_an_unknown_profile_names_the_known_ones(name):
    with pytest.raises(ValueError, match="known: h100_sxm_hdr, h100_sxm_ndr, h200_sxm_ndr"):
        hardware.validation_profile(name)
    with pytest.raises(AnsibleFilterError, match="is not a hardware profile"):
        hardware_filter.validation_profile(name)


def test_every_reader_reads_the_one_catalogue():
    assert preflight_validate.profiles() is hardware.VALIDATION_PROFILES
    default = hardware.VALIDATION_PROFILES[hardware.DEFAULT_VALIDATION_PROFILE]
    for key in ("nccl_single_node_busbw_gbps", "nccl_multi_node_busbw_gbps"):
        assert DEFAULT_THRESHOLDS[key] == default[key]
    assert preflight_gpu.GPU_MODELS is hardware.GPU_MODELS
    # the role keeps no copy: its figures come through the filter
    role_vars = yaml.safe_load(open(os.path.join(ROOT, "roles", "validate", "vars", "main.yml")))
    assert "validate_profiles" not in role_vars
    assert role_vars["__validate_profile_figures"] == "{{ validate_profile | clusterforge.gpu.validation_profile }}"
    assert hardware_filter.FilterModule().filters()["validation_profile"]("h100_sxm_ndr") == default


def test_the_role_default_profile_of_each_sxm_model_exists():
    """validate_profile defaults to <cluster_gpu_type>_sxm_ndr: the SXM models validation knows have one."""
    for gtype in ("h100", "h200"):
        assert hardware.GPU_MODELS[gtype]["name"].endswith("SXM")
        assert "%s_sxm_ndr" % gtype in hardware.VALIDATION_PROFILES


@pytest.mark.parametrize("value, expected", [
    (None, "infiniband"), ("", "infiniband"), ("  ", "infiniband"), ("roce", "roce"), (" ethernet ", "ethernet"),
    ("none", "none")])
def test_the_fabric_is_the_inventorys_else_the_one_default(value, expected):
    assert hardware.fabric_type(value) == expected
    assert hardware_filter.FilterModule().filters()["cluster_fabric"](value) == expected
    assert hardware.DEFAULT_FABRIC in hardware.FABRIC_TYPES
