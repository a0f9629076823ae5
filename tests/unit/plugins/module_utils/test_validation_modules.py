# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation module_utils and plugin_utils on their own: one file per job behind plugins/filter/validation.py,
each raising ValidationError (a ValueError, no ansible.errors import), which the filter turns into AnsibleFilterError
with the same message. What the filters compute is tested through the filter, in tests/unit/plugins/filter/test_validation.py."""

import ast
import inspect
import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter import validation as validation_filter
from ansible_collections.clusterforge.gpu.plugins.module_utils import validation_common
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import validation_deep
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import validation_judge
from ansible_collections.clusterforge.gpu.plugins.module_utils import validation_parsers
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import validation_report
from ansible_collections.clusterforge.gpu.plugins.module_utils import validation_thresholds
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_common import ValidationError
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import preflight_validate

MODULES = (validation_common, validation_thresholds, validation_parsers, validation_judge, validation_report,
           validation_deep)
FILTERS = validation_filter.FilterModule().filters()
# filter name -> the module_utils function behind it
BEHIND = {
    "nccl_tests_results": validation_parsers.nccl_tests_results,
    "perftest_results": validation_parsers.perftest_results,
    "dd_results": validation_parsers.dd_results,
    "checkpoint_estimate": validation_parsers.checkpoint_estimate,
    "validation_judge": validation_judge.validation_judge,
    "validation_html": validation_report.validation_html,
    "validation_node_verdicts": validation_judge.node_verdicts,
    "validation_loopback_plan": validation_deep.loopback_plan,
    "validation_loopback_results": validation_deep.loopback_results,
    "validation_ib_line_rate": validation_deep.line_rate,
    "validation_held_nodes": validation_judge.held_nodes,
    "storage_aggregate": validation_judge.storage_aggregate,
    "validation_ib_client_results": validation_deep.client_results,
    "validation_ib_round_results": validation_deep.round_results,
    "validation_deep_selection_lines": validation_deep.selection_lines,
    "validation_deep_states": validation_deep.node_states,
    "validation_deep_outcome_lines": validation_deep.outcome_lines,
    "validation_node_record": validation_judge.node_record,
}


def source(module):
    with open(module.__file__) as f:
        return f.read()


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_module_utils_header_and_imports(module):
    """The header ansible-test sanity wants, and nothing from the filters or ansible.errors; the module_utils ones
    (which modules ship to nodes) nothing from plugin_utils either, the plugin_utils ones (controller only) may."""
    text = source(module)
    assert text.startswith("# -*- coding: utf-8 -*-\n# Copyright: ClusterForge developers\n"
                           "# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)\n")
    assert "from __future__ import absolute_import, division, print_function\n\n__metaclass__ = type\n" in text
    imported = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    on_nodes = ".plugins.module_utils." in module.__name__
    assert not [name for name in imported if name.startswith("ansible.errors") or ".plugins.filter" in name
                or (on_nodes and ".plugins.plugin_utils" in name)], imported
    allowed = ("ansible.module_utils.", "ansible_collections.clusterforge.gpu.plugins.module_utils.") + \
        (() if on_nodes else ("ansible_collections.clusterforge.gpu.plugins.plugin_utils.",))
    for name in imported:  # the standard library, Ansible's module_utils and the collection's
        if name.split(".")[0] in ("ansible", "ansible_collections"):
            assert name.startswith(allowed), name


def test_filter_is_thin_and_exports_the_same_filters_and_signatures():
    assert set(FILTERS) == set(BEHIND)
    for name, func in FILTERS.items():
        assert func.__name__ == name
        assert inspect.signature(func) == inspect.signature(BEHIND[name]), name
    # one short wrapper per filter (18 of them), the work behind them
    assert len(source(validation_filter).splitlines()) < 180


def test_validation_error_is_a_value_error():
    assert issubclass(ValidationError, ValueError)
    assert not issubclass(ValidationError, AnsibleFilterError)


@pytest.mark.parametrize("name, args, message", [
    ("dd_results", (None,), "dd_results: no dd output (got None)"),
    ("dd_results", ("512 bytes copied, 0 s, 0 B/s",), "dd_results: dd reports 512 bytes in 0 s; a zero duration"),
    ("nccl_tests_results", (42,), "nccl_tests_results expects the text nccl-tests printed, got int"),
    ("perftest_results", ([],), "perftest_results expects the text perftest printed, got list"),
    ("checkpoint_estimate", ([], 0, 30), "checkpoint_estimate: write_gbytes_per_s (aggregate write bandwidth, GB/s) "
                                         "must be a positive number, got 0"),
    ("validation_judge", ([],), "validation_judge expects a dict of measured results, got list"),
    ("validation_judge", ({}, {"nccl_min_fracton": 0.9}),
     "validation_judge: unknown threshold key(s) nccl_min_fracton"),
    ("validation_judge", ({"nodes": {"gpu01": {"idle": "maybe"}}},), "validation_judge: idle must be a boolean"),
    ("validation_html", ({},), "validation_html expects the report of validation_judge"),
    ("validation_held_nodes", ({}, ["cf-health:"]), "validation_held_nodes: expects slurm_node_info's nodes (a list), got dict"),
    ("validation_held_nodes", ([], ["cf-health:", ""]), "validation_held_nodes: own_prefixes must be a list"),
])
def test_module_utils_raise_value_errors_the_filter_raises_as_filter_errors(name, args, message):
    with pytest.raises(ValidationError) as raw:
        BEHIND[name](*args)
    assert str(raw.value).startswith(message), str(raw.value)
    with pytest.raises(AnsibleFilterError) as converted:
        FILTERS[name](*args)
    assert str(converted.value) == str(raw.value)
    # raised afresh, as when the filters lived in the filter file: no chained cause or context to display
    assert converted.value.__cause__ is None and converted.value.__suppress_context__ is True


def test_thresholds_merge_and_reject():
    merged = validation_thresholds._thresholds({"nccl_min_fraction": 0.8, "bytes_per_parameter": 18,
                                                "checkpoint_max_stall_percent": None})
    assert merged == dict(validation_thresholds.DEFAULT_THRESHOLDS, nccl_min_fraction=0.8, bytes_per_parameter=18)
    assert isinstance(merged["bytes_per_parameter"], int)
    assert validation_thresholds._thresholds(None) == validation_thresholds.DEFAULT_THRESHOLDS
    with pytest.raises(ValidationError, match="threshold nccl_min_fraction is a fraction"):
        validation_thresholds._thresholds({"nccl_min_fraction": 2})
    with pytest.raises(ValidationError, match="threshold ib_write_bw_min_fraction must be a positive number"):
        validation_thresholds._thresholds({"ib_write_bw_min_fraction": "fast"})
    with pytest.raises(ValidationError, match="thresholds must be a dict, got list"):
        validation_thresholds._thresholds([])


def test_preflight_and_judge_read_one_threshold_table():
    """preflight_validate judges threshold keys by the judge's own table."""
    assert preflight_validate.DEFAULT_THRESHOLDS is validation_thresholds.DEFAULT_THRESHOLDS


@pytest.mark.parametrize("value, expected", [
    (3, 3.0), ("2.5", 2.5), (b" 7 ", 7.0), (True, None), (None, None), (float("nan"), None), ("inf", None),
    ("fast", None), ([1], None),
])
def test_number(value, expected):
    assert validation_common._number(value) == expected


def test_plain_and_bool():
    assert validation_common._plain({"a": (1, float("inf")), b"b": {2}, "c": object}) == {
        "a": [1, None], "b": [2], "c": "<class 'object'>"}
    assert validation_common._bool("yes", "x") is True and validation_common._bool(None, "x") is None
    with pytest.raises(ValidationError, match="validation_judge: gpu01 expected.persistence must be a boolean"):
        validation_common._bool("maybe", "gpu01 expected.persistence")


def test_report_renders_a_judge_report_without_the_filter():
    report = validation_judge.validation_judge({"cluster": "x", "storage_aggregate": {"write_gbytes_per_s": 2.5}})
    page = validation_report.validation_html(report)
    assert page.startswith("<!DOCTYPE html>\n") and page.endswith("</html>\n")
    assert "<title>ClusterForge validation: x</title>" in page and '<svg class="chart"' in page
    assert os.path.basename(validation_report.__file__) == "validation_report.py"


# ---------------------------------------------------------------- nodes their owner holds out of service

OWN = ["cf-health:", "cf-roll:", "cf-deep:", "cf-mig:"]


@pytest.mark.parametrize("state, reason, held", [
    ("DOWN+DRAIN", "RMA 1234", "DOWN+DRAIN: 'RMA 1234'"),          # an administrator's RMA
    ("DOWN", "power supply replaced, awaiting burn-in", "DOWN: 'power supply replaced, awaiting burn-in'"),
    ("IDLE+DRAIN", "NHC: check_hw_ib failed", "IDLE+DRAIN: 'NHC: check_hw_ib failed'"),  # another tool's drain
    ("MIXED+DRAIN", "kernel update", "MIXED+DRAIN: 'kernel update'"),  # draining: still the owner's decision
    ("IDLE+FAIL", "flaky NVLink", "IDLE+FAIL: 'flaky NVLink'"),
    ("IDLE+DRAIN", "cf-health: GPU 3 temperature 95 C > 85 C", None),   # the collection's own drains
    ("IDLE+DRAIN", "cf-roll:20261129T232841Z FAILED dcgm-diag", None),
    # the deep checks' drains are theirs: the node waits for health_deep.yml (a job could not run on it)
    ("IDLE+DRAIN", "cf-deep: burn-in: new node, deep checks pending",
     "IDLE+DRAIN: 'cf-deep: burn-in: new node, deep checks pending' (the deep checks' drain: "
     "playbooks/health_deep.yml resumes it when it passes)"),
    ("IDLE", "cf-deep: burn-in: an old reason on a node in service", None),
    ("IDLE+DRAIN", "cf-mig: MIG layout all-1g.10gb", None),
    ("DOWN*", "Not responding", None),                                   # faults Slurm found itself
    ("IDLE+DRAIN", "Kill task failed", None),
    ("IDLE+DRAIN", "gres/gpu count reported lower than configured (7 < 8)", None),
    ("DOWN", None, None),                                                 # no reason: nobody's decision
    ("IDLE", "an old reason on a node in service", None),                # in service
    ("MIXED", None, None),
])
def test_a_node_is_held_only_when_out_of_service_with_a_reason_nobody_here_owns(state, reason, held):
    assert validation_judge.held_nodes([{"name": "gpu02", "state": state, "reason": reason}], OWN) == \
        ({"gpu02": held} if held else {})


def test_a_held_node_is_one_skipped_check_and_fails_nothing():
    measured = {"nodes": {"gpu02": {"held": "DOWN+DRAIN: 'RMA 1234'", "idle": False}},
                "nodes_expected": ["gpu02"]}
    report = validation_judge.validation_judge(measured)
    held = [c for c in report["checks"] if c["id"] == "slurm.held"]
    assert len(held) == 1 and held[0]["status"] == "skip" and held[0]["subject"] == "gpu02"
    assert held[0]["message"] == ("gpu02: not validated: Slurm has it out of service by its owner's decision "
                                  "(DOWN+DRAIN: 'RMA 1234'); validation ran no job on it and judged nothing of it")
    assert not [c for c in report["checks"] if c["subject"].startswith("gpu02") and c["id"] != "slurm.held"]
    assert report["ok"] is True and report["summary"]["fail"] == 0
