"""playbooks/rolling_reconfigure.yml checks the whole inventory and its own variables before it plans.

Each case runs the real ``ansible-playbook playbooks/rolling_reconfigure.yml`` against the base inventory, with the
rolling variables given as ``-e`` (as an operator gives them). The hosts point at containers that do not exist:
had preflight let the run through, the plan would try to reach the controller and show ``unreachable``. So
"rejected before anything changed" is: rc != 0, the case's own message, no unreachable host, nothing changed, and
the play "Rolling change - preflight and plan" never started.
"""

import copy
import json
import re

import pytest

from integration.preflight_helpers import (  # tests/ is on sys.path (tests/conftest.py)
    REJECTED, assert_rejected_before_any_change, base_inventory, group_vars, run_playbook,
)

PLAYBOOK = "playbooks/rolling_reconfigure.yml"
ROLES = {"rolling_roles": ["clusterforge.gpu.gpu_tuning"]}


def run(tmp_path, inv, extra_args, playbook=PLAYBOOK):
    """run_playbook, with the output's Python-escaped quotes (\\' in the one-line error) read back as quotes."""
    rc, out = run_playbook(tmp_path, inv, playbook, extra_args=extra_args)
    return rc, out.replace("\\'", "'")


def extra(**values):
    """The -e arguments of a case: JSON, with rolling_roles unless the case says otherwise."""
    out = dict(ROLES)
    out.update(values)
    return ["-e", json.dumps(out)]


# (id, inventory mutation or None, extra args, expected message)
CASES = [
    ("serial_zero", None, extra(rolling_serial=[0]),
     "rolling_serial: entry 1 is 0: a batch of 0 or fewer nodes makes Ansible put every remaining node in one batch"),
    ("serial_empty", None, extra(rolling_serial=[]),
     "rolling_serial: is an empty list: Ansible then runs every node in one batch (no canary)"),
    ("serial_zero_after_canary", None, extra(rolling_serial=[1, 0]),
     "rolling_serial: entry 2 is 0: a batch of 0 or fewer nodes"),
    ("serial_over_100_percent", None, extra(rolling_serial=["150%"]),
     "rolling_serial: entry 1 '150%' is above 100%: the batch would hold every node at once"),
    ("serial_bad_percentage", None, extra(rolling_serial=["x%"]),
     "rolling_serial: entry 1 'x%' is not a whole percentage"),
    ("serial_string", None, ["-e", json.dumps(ROLES), "-e", "rolling_serial=[1,2]"],
     "rolling_serial: must be a list of batch sizes, got the string '[1,2]'"),
    ("unknown_role", None, extra(rolling_roles=["clusterforge.gpu.gpu_tunning"]),
     "rolling_roles: 'clusterforge.gpu.gpu_tunning' names no role of clusterforge.gpu"),
    ("controller_role", None, extra(rolling_roles=["clusterforge.gpu.slurm_controller"]),
     "rolling_roles: 'clusterforge.gpu.slurm_controller' runs on slurm_controller, not on GPU nodes"),
    ("roles_missing", None, [],
     "inventory: rolling_roles: is required: the roles to roll out"),
    ("roles_as_string", None, ["-e", "rolling_roles=clusterforge.gpu.gpu_tuning"],
     "rolling_roles: must be a list of role names, got the string 'clusterforge.gpu.gpu_tuning'"),
    ("reboot_ok_key_value", None, ["-e", json.dumps(ROLES), "-e", "rolling_reboot_ok=true"],
     "rolling_reboot_ok: must be a real boolean, got the string 'true'; give -e '{\"rolling_reboot_ok\": true}'"),
    ("role_variable", None, extra(gpu_tuning_power_limit_watts="lots"),
     "gpu01: gpu_tuning_power_limit_watts: "),
    ("role_variable_given_with_e", None, extra(gpu_tuning_power_limit_watts=600),
     "inventory: gpu_tuning_power_limit_watts: given with -e: a rolling change is planned and applied from the "
     "inventory"),
    ("nodes_not_gpu", None, extra(rolling_nodes="gpu01,head01"),
     "rolling_nodes: names hosts that are not GPU nodes: head01"),
    ("nodes_unknown", None, extra(rolling_nodes="gpu[01-04]"),
     "rolling_nodes: names hosts that are not in the inventory: gpu[03-04]"),
    ("dcgm_level_zero", None, extra(rolling_health_dcgm_level=0),
     "rolling_health_dcgm_level: is 0, which would resume nodes without the DCGM diagnostic"),
    ("max_unavailable_over_100", None, extra(rolling_max_unavailable_percent=150),
     "rolling_max_unavailable_percent: must be a share of the nodes from 0 to 100 percent, got 150"),
    ("drain_timeout_zero", None, extra(rolling_drain_timeout_seconds=0),
     "rolling_drain_timeout_seconds: must be at least 1 second, got 0"),
    ("nccl_threshold_in_gigabits", None, extra(rolling_health_nccl_min_busbw_gbps=3200),
     "rolling_health_nccl_min_busbw_gbps: 3200 GB/s is more than one node's NVLink can carry"),
    ("run_id_with_space", None, extra(rolling_run_id="kernel update"),
     "rolling_run_id: 'kernel update' (string) cannot name a Slurm drain reason"),
    # A batch of one node of a two-node rack: the whole rack is judged, not the batch.
    ("rack_over_budget_rolling_one_node",
     lambda inv: group_vars(inv, "gpu_nodes").update({"gpu_tuning_rack": "r01", "gpu_tuning_rack_power_budget_watts": 15000}),
     extra(rolling_nodes="gpu01", rolling_serial=[1]),
     "rack 'r01' would draw 20400 W with 2 nodes, over its budget of 15000 W"),
    ("serial_only_on_gpu_nodes", lambda inv: group_vars(inv, "gpu_nodes").update(rolling_serial=[2]), extra(),
     "rolling_serial: is set differently on some hosts"),
]


@pytest.mark.parametrize("mutate,extra_args,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_rolling_input_is_rejected_before_the_plan(tmp_path, mutate, extra_args, message):
    inv = copy.deepcopy(base_inventory())
    if mutate:
        mutate(inv)
    rc, out = run(tmp_path, inv, extra_args)
    assert_rejected_before_any_change(rc, out, message)


def test_each_case_has_its_own_message():
    messages = [c[3] for c in CASES]
    assert len(set(messages)) == len(messages) >= 12
    for message in messages:
        assert sum(1 for other in messages if message in other) == 1, message


def _passed_preflight_and_drained_nothing(rc, out):
    assert "inventory passed preflight" in out, out
    assert REJECTED not in out, out
    # The next step reads Slurm on the controller, which does not exist here: it fails there, before any drain.
    assert "Rolling change - preflight and plan" in out, out
    assert "Drain the node" not in out and "changed=1" not in out, out


def test_reboot_ok_given_as_the_message_advises_passes_preflight(tmp_path):
    rc, out = run(tmp_path, base_inventory(), ["-e", json.dumps(ROLES), "-e", "rolling_reboot_ok=true"])
    assert_rejected_before_any_change(rc, out, "rolling_reboot_ok: must be a real boolean")
    advised = re.search(r"give -e '(\{\"rolling_reboot_ok\": true\})'", out)
    assert advised, out
    # Given exactly as printed, the switch passes preflight.
    rc, out = run(tmp_path, base_inventory(), ["-v", "-e", json.dumps(ROLES), "-e", advised.group(1)])
    _passed_preflight_and_drained_nothing(rc, out)


def test_sound_rolling_input_passes_preflight(tmp_path):
    rc, out = run(tmp_path, base_inventory(), ["-v"] + extra(
        rolling_roles=["gpu_tuning", "clusterforge.gpu.dcgm"], rolling_serial=[1, "25%"], rolling_nodes="gpu[01-02]",
        rolling_reboot_ok=False, rolling_health_dcgm_level=2, rolling_poll_interval_seconds=2,
        rolling_max_unavailable_percent=50))
    _passed_preflight_and_drained_nothing(rc, out)


def test_skipping_the_preflight_tag_does_not_skip_the_checks(tmp_path):
    rc, out = run(tmp_path, base_inventory(), extra(rolling_serial=[0]) + ["--skip-tags", "preflight"])
    assert rc != 0, out
    assert "The inventory preflight of this playbook did not run" in out, out
    assert "unreachable=1" not in out and "changed=1" not in out, out


def test_rolling_apply_alone_starts_with_the_same_preflight(tmp_path):
    rc, out = run(tmp_path, base_inventory(), extra(rolling_roles=["clusterforge.gpu.lustre_server"]),
                  "playbooks/rolling_apply.yml")
    assert_rejected_before_any_change(rc, out, "'clusterforge.gpu.lustre_server' runs on lustre_mds, lustre_oss")
    assert "Rolling change - apply the roles of rolling_roles" not in out, out
