"""The deep checks' word on each node (before and after), the states the verdicts take, and the one reading of an
ib_write_bw test's outcome that the fabric rounds (ssh and srun) and the loopback share (plugin_utils/validation_deep.py,
in place of Jinja loops in the validate role)."""

import pytest

from ansible_collections.clusterforge.gpu.plugins.filter.validation import FilterModule
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_common import ValidationError
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import validation_deep as deep

FILTERS = FilterModule().filters()
SELECTION = {"reason_prefix": "cf-deep:", "nodes": [
    {"name": "gpu01", "selected": False, "why": "in service (IDLE)"},
    {"name": "gpu02", "selected": True, "ours": True, "drain": True, "why": "drained, no job left (IDLE+DRAIN)"},
    {"name": "gpu03", "selected": True, "ours": False, "drain": True, "why": "drained, no job left (admin)"},
    {"name": "gpu04", "selected": True, "ours": False, "drain": False, "why": "idle in maintenance reservation m1"},
]}


def test_selection_lines_say_what_happens_to_each_node():
    assert deep.selection_lines(SELECTION, False) == [
        "gpu01: not checked: in service (IDLE)",
        "gpu02: checked: drained, no job left (IDLE+DRAIN); resumed if every check passes, else it stays drained with "
        "a reason naming the check",
        "gpu03: checked: drained, no job left (admin); never resumed by the deep checks: the drain is not theirs",
        "gpu04: checked: idle in maintenance reservation m1; a failure is reported only"]
    lines = FILTERS["validation_deep_selection_lines"](SELECTION, True, True)
    assert lines[0] == ("Check mode: nothing is run or changed; a real run would do this (cf-deep: drains only are "
                        "resumed).")
    assert lines[-1].endswith("; drained with a reason naming the check if it fails")


def test_states_take_the_recorded_loopback_hcas_or_none():
    nodes = [{"name": "gpu02", "drain": True, "reason": "cf-deep:x"}, {"name": "gpu03", "drain": False, "reason": None}]
    node_vars = {"gpu02": {"__validate_deep_node": {"loopback_hcas": ["mlx5_0"]}}, "gpu03": {}}
    assert FILTERS["validation_deep_states"](nodes, node_vars) == {
        "gpu02": {"drain": True, "reason": "cf-deep:x", "loopback_hcas": ["mlx5_0"]},
        "gpu03": {"drain": False, "reason": None, "loopback_hcas": None}}
    assert list(deep.node_states(list(reversed(nodes)), node_vars)) == ["gpu03", "gpu02"]


VERDICTS = {"reason_prefix": "cf-deep:", "nodes": [
    {"node": "gpu01", "action": "resume"}, {"node": "gpu02", "action": "resume"},
    {"node": "gpu03", "action": "relabel", "new_reason": "cf-deep: FAILED dcgm.diag"},
    {"node": "gpu04", "action": "drain", "new_reason": "cf-deep: FAILED nccl"},
    {"node": "gpu05", "action": "drain", "new_reason": "cf-deep: FAILED nccl"},
    {"node": "gpu06", "action": "keep", "reason": "RMA 4411"}, {"node": "gpu07", "action": None}]}


def test_outcome_lines_name_what_was_done_to_each_node():
    resume = {"nodes": [{"name": "gpu01"}], "skipped": [{"name": "gpu02", "reason": "admin: cable"}]}
    assert deep.outcome_lines(VERDICTS, resume, ["gpu04"], True) == [
        "gpu01 resumed",
        'gpu02 not resumed: its reason changed during the checks ("admin: cable")',
        'gpu03 stays drained as "cf-deep: FAILED dcgm.diag"',
        'gpu04 drained as "cf-deep: FAILED nccl"',
        "gpu05 left as it is (not drained now; validate_deep_drain_failed or someone resumed it)",
        'gpu06 stays drained by its owner ("RMA 4411" is not a cf-deep: drain)',
        "gpu07 left in service as it was (not drained)"]
    # a resume task skipped by its condition has no nodes: its skipped list is not a node list
    skipped_task = {"skipped": True, "skip_reason": "Conditional result was False"}
    assert deep.outcome_lines(VERDICTS, skipped_task, [], False)[1] == "gpu02 resumed"
    with pytest.raises(ValidationError, match="expected validation_node_verdicts' result"):
        deep.outcome_lines(None, {}, [], False)


@pytest.mark.parametrize("run,outcome", [
    (None, (None, "why", None)),
    ({"rc": 0, "result": {"ok": True}}, (0, None, {"ok": True})),
    ({"rc": None, "timed_out": True}, (None, "no result within 120 s", None)),
    ({"rc": 1, "stderr": "first\nCouldn't connect to 10.0.0.2:18515\n"}, (1, "Couldn't connect to 10.0.0.2:18515", None)),
    ({"rc": 1, "stderr": ""}, (1, "exit status 1", None)),
    ({"rc": 2, "msg": "srun: node gpu02 lost", "result": {"ok": True}}, (2, "srun: node gpu02 lost", None)),
    ({"rc": None, "result": None}, (None, "the test did not run (why)", None)),
])
def test_one_reading_of_a_tests_outcome(run, outcome):
    assert deep._test_outcome(run, 120, "why") == outcome


def test_client_results_of_a_round_take_the_ports_rate_and_name_the_server():
    ports = {"ports": [{"ca": "mlx5_0", "state": "Active", "rate_gbps": 200}]}
    client = {"tests": [{"hca": "mlx5_0", "rc": 0, "result": {"ok": True}}]}
    plan = [{"hca": "mlx5_0"}, {"hca": "mlx5_1"}]
    entries = FILTERS["validation_ib_client_results"](client, plan, "gpu01", "gpu02", 120, ports, 400)
    assert entries == [
        {"client": "gpu01", "server": "gpu02", "hca": "mlx5_0", "line_rate_gbits": 200, "rc": 0, "msg": None,
         "result": {"ok": True}},
        {"client": "gpu01", "server": "gpu02", "hca": "mlx5_1", "line_rate_gbits": 400, "rc": None,
         "msg": "the ib_write_bw client did not run", "result": None}]


def test_round_results_fail_every_test_of_a_round_that_gave_none():
    runs = [{"round": [{"client": "gpu01", "server": "gpu02", "hca": "mlx5_0"}],
             "tests": [{"client": "gpu01", "hca": "mlx5_0", "rc": 0, "msg": None, "result": {"ok": True}}]},
            {"round": [{"client": "gpu02", "server": "gpu01", "hca": "mlx5_0"}], "msg": "srun: exit 1: Job violates"}]
    node_vars = {"gpu01": {"__validate_node": {"ib_port_info": {"ports": [
        {"ca": "mlx5_0", "state": "Active", "rate_gbps": 400}]}}}, "gpu02": {}}
    entries = FILTERS["validation_ib_round_results"](runs, "round", node_vars, 200)
    assert [(e["client"], e["line_rate_gbits"], e["rc"], e["msg"]) for e in entries] == [
        ("gpu01", 400, 0, None), ("gpu02", 200, None, "srun: exit 1: Job violates")]
