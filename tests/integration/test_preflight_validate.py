"""Bad validation variables are rejected before any change, by site.yml and by validate.yml run alone."""

import copy

import pytest

from integration.preflight_helpers import (  # tests/ is on sys.path (tests/conftest.py)
    assert_rejected_before_any_change, base_inventory, case_ids, group_vars, reject_case, run_playbook,
)


def mutate_unknown_profile(inv):
    group_vars(inv, "gpu_nodes")["validate_profile"] = "h100_sxm_xdr"


def mutate_threshold_typo(inv):
    group_vars(inv, "gpu_nodes")["validate_thresholds"] = {"nccl_multi_node_busbw_gpbs": 300}


def mutate_fraction_as_percent(inv):
    group_vars(inv, "gpu_nodes")["validate_thresholds"] = {"ib_write_bw_min_fraction": 95}


def mutate_relative_storage_path(inv):
    group_vars(inv, "gpu_nodes")["validate_storage_path"] = "lustre/validate"


def mutate_model_without_size(inv):
    group_vars(inv, "gpu_nodes")["validate_models"] = [{"name": "llama-70b"}]


CASES = [
    (mutate_unknown_profile, "gpu01: validate_profile: 'h100_sxm_xdr' is not a hardware profile of the catalogue"),
    (mutate_threshold_typo, "validate_thresholds.nccl_multi_node_busbw_gpbs: not a threshold validation knows"),
    (mutate_fraction_as_percent, "validate_thresholds.ib_write_bw_min_fraction: is a fraction of the nominal figure"),
    (mutate_relative_storage_path, "gpu01: validate_storage_path: must be an absolute path"),
    (mutate_model_without_size, "validate_models[0].parameters_billion: must be a positive number"),
]


@pytest.mark.parametrize("mutate,message", CASES, ids=case_ids(CASES))
def test_site_rejects_bad_validation_variables(tmp_path, mutate, message):
    reject_case(tmp_path, mutate, message)


def test_validate_playbook_alone_runs_preflight_first(tmp_path):
    inv = copy.deepcopy(base_inventory())
    mutate_threshold_typo(inv)
    rc, out = run_playbook(tmp_path, inv, "playbooks/validate.yml")
    assert_rejected_before_any_change(rc, out, "not a threshold validation knows")
    assert "Validate - which GPU nodes are idle" not in out
