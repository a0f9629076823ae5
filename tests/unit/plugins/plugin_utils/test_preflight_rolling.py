"""Preflight rules for the variables of playbooks/rolling_reconfigure.yml (rolling_*), one test per rule.

The types and choices are the rolling role's argument spec (preflight_specs checks it): a value of the wrong type is
reported once, by the spec (``full``), unless these rules have their own words for it.
"""

import glob
import os
import re

import pytest

import yaml

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import preflight_specs
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import Inventory, load_role_specs
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_rolling import (
    CLUSTER_WIDE,
    NOT_A_CHANGE,
    PER_NODE,
    ROLLING_VARIABLES,
    check,
    collection_roles,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
GROUPS = {"all": ["gpu01", "gpu02", "head01", "stor01"], "slurm_controller": ["head01"],
          "gpu_nodes": ["gpu01", "gpu02"], "lustre_mds": ["stor01"], "lustre_oss": ["stor01"],
          "lustre_clients": ["gpu01", "gpu02", "head01"]}
ROLES = ["clusterforge.gpu.gpu_tuning"]
ON = {"rolling": True}


def hostvars(**extra):
    """Every host gets the extra vars (as -e gives them), GPU nodes their GPU count."""
    hv = {h: dict(extra) for h in GROUPS["all"]}
    for h in GROUPS["gpu_nodes"]:
        hv[h]["cluster_gpu_count_per_node"] = 8
    return hv


def errors(**extra):
    extra.setdefault("rolling_roles", ROLES)
    return check(Inventory(hostvars(**extra), GROUPS), ON)


def one(name, **extra):
    """The only error, which must be about the variable ``name``."""
    out = errors(**extra)
    assert len(out) == 1, out
    assert out[0].startswith("inventory: %s: " % name), out
    return out[0]


def full(hv=None, **extra):
    """What a rolling playbook's preflight reports about the rolling variables: the spec's check, then these rules."""
    if hv is None:
        extra.setdefault("rolling_roles", ROLES)
        hv = hostvars(**extra)
    inv = Inventory(hv, GROUPS)
    return [e for e in preflight_specs.check(inv, ON) if ": rolling_" in e] + check(inv, ON)


def spec_only(name, **extra):
    """The spec's message about ``name`` (the same value on every host: the first host the role runs on names it),
    these rules silent about it."""
    assert not [e for e in errors(**extra) if e.startswith("inventory: %s: " % name)], errors(**extra)
    out = full(**extra)
    assert out and all(": %s" % name in e for e in out), out
    assert out[0].startswith("head01: %s: " % name), out
    return out[0]


# -- the rule set as a whole -------------------------------------------------------------------------------------

def test_does_nothing_unless_the_rolling_playbook_asks():
    assert check(Inventory(hostvars(rolling_serial=[0]), GROUPS), {"rolling": False}) == []
    assert check(Inventory(hostvars(), GROUPS), {}) == []


def test_sound_values_pass():
    assert errors() == []
    assert errors(rolling_roles=["clusterforge.gpu.nvidia_driver", "dcgm", "clusterforge.gpu.slurm_compute"],
                  rolling_nodes="gpu[01-02]", rolling_serial=[1, "25%"], rolling_max_unavailable_percent=50,
                  rolling_plan=True, rolling_run_id="20250101T000000Z", rolling_drain_timeout_seconds=7200,
                  rolling_poll_interval_seconds=2, rolling_reboot_ok=True, rolling_reboot_timeout_seconds=1800,
                  rolling_health_register_timeout_seconds=120, rolling_gpus_per_node=8, rolling_health_dcgm_level=2,
                  rolling_health_dcgm_timeout_seconds=900, rolling_health_nccl_test=True,
                  rolling_health_nccl_min_busbw_gbps=333.5, rolling_apply_hosts="gpu_nodes") == []


@pytest.mark.parametrize("serial", [[1, "25%"], [2, 4], ["10%"], [1], ["100%"], [1, 2, "50%"]])
def test_sound_serial_forms_pass(serial):
    assert errors(rolling_serial=serial) == []


def test_numbers_given_as_key_equals_value_on_the_command_line_are_the_specs_to_report():
    # -e name=value gives strings: the spec wants the type (JSON keeps it), these rules leave such values alone.
    values = dict(rolling_drain_timeout_seconds="7200", rolling_max_unavailable_percent="30",
                  rolling_health_dcgm_level="2", rolling_health_nccl_min_busbw_gbps="300")
    assert errors(**values) == []
    out = full(**values)
    for name, value in values.items():
        assert any(e.startswith("head01: %s: " % name) and "got the string '%s'" % value in e for e in out), out
    assert full(rolling_nodes="gpu01", rolling_run_id="r42") == []


def _read_in(*tops):
    read = set()
    for top in tops:
        for path in glob.glob(os.path.join(ROOT, top, "**", "*.yml"), recursive=True):
            with open(path) as f:
                text = f.read()
            read.update(re.findall(r"(?<![\w.&*])(rolling_[a-z0-9_]+)", text))
    # file names, not variables
    return read - {"rolling_reconfigure", "rolling_apply"}


def test_rolling_variables_match_what_the_role_and_the_playbooks_read():
    assert _read_in("playbooks", os.path.join("roles", "rolling")) == set(ROLLING_VARIABLES)
    assert set(CLUSTER_WIDE) | set(PER_NODE) == set(ROLLING_VARIABLES)


def test_rolling_variables_are_the_role_options_and_the_apply_playbooks_hosts():
    assert set(load_role_specs()["rolling"]) == set(ROLLING_VARIABLES) - {"rolling_apply_hosts"}
    assert "rolling_apply_hosts" in _read_in("playbooks")


def test_role_defaults_are_the_specs_defaults():
    with open(os.path.join(ROOT, "roles", "rolling", "defaults", "main.yml")) as f:
        defaults = yaml.safe_load(f)
    spec = load_role_specs()["rolling"]
    assert set(defaults) == set(spec) - {"rolling_roles"}
    for name, opt in spec.items():
        if "default" in opt:
            assert defaults[name] == opt["default"], name
        elif name in defaults:
            # no default in the spec: computed (a template) or null, and the description says what it is
            assert defaults[name] is None or "{{" in defaults[name], name
            assert "Default" in " ".join(opt["description"]), name


def test_collection_roles_are_read_from_the_checkout():
    assert {"gpu_tuning", "nvidia_driver", "slurm_controller"} <= set(collection_roles())


# -- rolling_roles -----------------------------------------------------------------------------------------------

def test_roles_required():
    hv = hostvars()
    out = check(Inventory(hv, GROUPS), ON)
    assert out == ["inventory: rolling_roles: is required: the roles to roll out, e.g. "
                   "-e '{\"rolling_roles\": [\"clusterforge.gpu.gpu_tuning\"]}'"]


def test_roles_a_string_from_the_command_line():
    assert "must be a list of role names, got the string 'clusterforge.gpu.gpu_tuning'" in one(
        "rolling_roles", rolling_roles="clusterforge.gpu.gpu_tuning")


def test_roles_empty():
    assert "is an empty list: name at least one role" in one("rolling_roles", rolling_roles=[])


def test_roles_not_a_list():
    assert "must be a list, got a dict {'a': 1}" in spec_only("rolling_roles", rolling_roles={"a": 1})


def test_roles_a_string_is_reported_once_in_this_playbooks_words():
    out = full(rolling_roles="clusterforge.gpu.gpu_tuning")
    assert len(out) == 1 and "must be a list of role names, got the string" in out[0], out


@pytest.mark.parametrize("role", sorted(NOT_A_CHANGE))
def test_roles_that_change_no_node(role):
    assert "is not a change to roll out: %s " % role in one("rolling_roles", rolling_roles=[role])
    assert role in collection_roles()


def test_roles_unknown_role_is_named():
    msg = one("rolling_roles", rolling_roles=["clusterforge.gpu.gpu_tunning"])
    assert "'clusterforge.gpu.gpu_tunning' names no role of clusterforge.gpu" in msg
    assert "gpu_tuning" in msg


def test_roles_bare_unknown_role():
    assert "'nvidia' names no role of clusterforge.gpu" in one("rolling_roles", rolling_roles=["nvidia"])


def test_roles_of_another_collection():
    assert "'geerlingguy.docker.docker' is not a role of this collection" in one(
        "rolling_roles", rolling_roles=["geerlingguy.docker.docker"])


def test_roles_that_do_not_run_on_gpu_nodes():
    msg = one("rolling_roles", rolling_roles=["clusterforge.gpu.slurm_controller"])
    assert "'clusterforge.gpu.slurm_controller' runs on slurm_controller, not on GPU nodes" in msg
    assert "runs on lustre_mds, lustre_oss, not on GPU nodes" in one("rolling_roles", rolling_roles=["lustre_server"])


def test_roles_entry_not_a_name():
    assert "entry 2 is 5 (integer), not a role name" in one("rolling_roles", rolling_roles=["gpu_tuning", 5])


def test_roles_twice():
    assert "names the role gpu_tuning twice" in one("rolling_roles", rolling_roles=["gpu_tuning",
                                                                                    "clusterforge.gpu.gpu_tuning"])


# -- rolling_serial ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("serial,message", [
    ([0], "entry 1 is 0: a batch of 0 or fewer nodes makes Ansible put every remaining node in one batch"),
    ([1, 0], "entry 2 is 0: a batch of 0 or fewer nodes"),
    ([-1], "entry 1 is -1: a batch of 0 or fewer nodes"),
    (["0%"], "entry 1 '0%' is below 1%"),
    (["150%"], "entry 1 '150%' is above 100%: the batch would hold every node at once"),
    (["x%"], "entry 1 'x%' is not a whole percentage such as '25%'"),
    (["12.5%"], "entry 1 '12.5%' is not a whole percentage"),
    ([1, "abc"], "entry 2 is 'abc' (string): a batch size is a whole number of nodes"),
    ([2.5], "entry 1 is 2.5 (number): a batch size is a whole number of nodes"),
    ([True], "entry 1 is true (boolean)"),
    ([None], "entry 1 is null (null)"),
    ([], "is an empty list: Ansible then runs every node in one batch (no canary)"),
    ("25%", "must be a list of batch sizes, got the string '25%'"),
    ("[1, 2]", "must be a list of batch sizes, got the string '[1, 2]' (-e rolling_serial=... passes a string)"),
    (None, "is null: Ansible then runs every node in one batch"),
])
def test_serial_rejected(serial, message):
    msg = one("rolling_serial", rolling_serial=serial)
    assert message in msg, msg
    # reported once: the spec's check leaves out what these rules report
    assert full(rolling_serial=serial) == [msg]


def test_serial_not_a_list():
    assert "must be a list, got an integer 4" in spec_only("rolling_serial", rolling_serial=4)


def test_serial_gives_the_json_form():
    assert "-e '{\"rolling_serial\": [1, \"25%\"]}'" in one("rolling_serial", rolling_serial="1")


def test_serial_each_bad_entry_has_its_own_message():
    out = errors(rolling_serial=[0, "150%"])
    assert len(out) == 2 and "entry 1 is 0" in out[0] and "entry 2 '150%'" in out[1], out


# -- rolling_max_unavailable_percent -----------------------------------------------------------------------------

@pytest.mark.parametrize("value", [0, 25, 100, 12.5])
def test_max_unavailable_sound(value):
    assert errors(rolling_max_unavailable_percent=value) == []


def test_max_unavailable_out_of_range():
    assert "from 0 to 100 percent, got 150" in one("rolling_max_unavailable_percent",
                                                   rolling_max_unavailable_percent=150)
    assert "from 0 to 100 percent, got -5" in one("rolling_max_unavailable_percent",
                                                  rolling_max_unavailable_percent=-5)


def test_max_unavailable_not_a_number():
    assert "must be a number, got the string 'many'" in spec_only(
        "rolling_max_unavailable_percent", rolling_max_unavailable_percent="many")
    assert "must be a number, got a boolean True" in spec_only("rolling_max_unavailable_percent",
                                                               rolling_max_unavailable_percent=True)
    assert "from 0 to 100 percent, got nan" in errors(rolling_max_unavailable_percent=float("nan"))[0]


# -- *_seconds ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["rolling_drain_timeout_seconds", "rolling_poll_interval_seconds",
                                  "rolling_reboot_timeout_seconds", "rolling_health_register_timeout_seconds",
                                  "rolling_health_dcgm_timeout_seconds"])
def test_seconds_must_be_positive_whole_numbers(name):
    assert "must be at least 1 second, got 0" in one(name, **{name: 0})
    assert "must be at least 1 second, got -30" in one(name, **{name: -30})
    # the spec's "must not be negative" is left out: one message for one fault
    assert full(**{name: -30}) == [one(name, **{name: -30})]
    assert "must be an integer, got the string 'lots'" in spec_only(name, **{name: "lots"})
    assert "must be an integer, got a number 1.5" in spec_only(name, **{name: 1.5})
    assert "must be an integer, got a boolean True" in spec_only(name, **{name: True})


def test_poll_interval_not_shorter_than_the_drain_timeout():
    msg = one("rolling_poll_interval_seconds", rolling_poll_interval_seconds=600, rolling_drain_timeout_seconds=300)
    assert "polling every 600 s is not shorter than rolling_drain_timeout_seconds (300 s)" in msg
    assert "polling every 3600 s" in one("rolling_poll_interval_seconds", rolling_poll_interval_seconds=3600)


def test_dcgm_timeout_shorter_than_its_level():
    msg = one("rolling_health_dcgm_timeout_seconds", rolling_health_dcgm_level=3,
              rolling_health_dcgm_timeout_seconds=300)
    assert "300 s is too short for the DCGM diagnostic level 3 of the health gate (it takes about 15 minutes" in msg
    # level 4 with the default timeout (900 s)
    assert "900 s is too short for the DCGM diagnostic level 4" in one("rolling_health_dcgm_timeout_seconds",
                                                                       rolling_health_dcgm_level=4)
    assert errors(rolling_health_dcgm_level=3, rolling_health_dcgm_timeout_seconds=1800) == []


# -- switches ----------------------------------------------------------------------------------------------------

def test_reboot_ok_string_gets_the_json_advice():
    msg = one("rolling_reboot_ok", rolling_reboot_ok="true")
    assert "must be a real boolean, got the string 'true'" in msg
    assert "give -e '{\"rolling_reboot_ok\": true}'" in msg


def test_reboot_ok_other_types():
    assert "must be a boolean (true/false), got 1" in spec_only("rolling_reboot_ok", rolling_reboot_ok=1)
    assert full(rolling_reboot_ok=False) == []


def test_reboot_ok_string_is_reported_once_in_this_playbooks_words():
    out = full(rolling_reboot_ok="true")
    assert len(out) == 1 and out[0].startswith("inventory: rolling_reboot_ok: must be a real boolean"), out


def test_site_yml_checks_the_rolling_variables_against_the_spec_alone():
    inv = Inventory(hostvars(rolling_reboot_ok="true", rolling_serial=[0]), GROUPS)
    off = {"rolling": False}
    assert check(inv, off) == []
    out = preflight_specs.check(inv, off)
    assert "head01: rolling_reboot_ok: must be a boolean (true/false), got 'true'" in out, out
    # A batch of 0 is refused by name in every run (preflight_generic.serial_problem); the rolling playbook's own
    # rule set says it in its words when it runs.
    assert "head01: rolling_serial: 0 hosts per batch would run no host (or, in Ansible, every host at once)" in out


def test_plan_string_advice_gives_false():
    msg = one("rolling_plan", rolling_plan="false")
    assert "give -e '{\"rolling_plan\": false}'" in msg


def test_nccl_test_switch_string():
    assert "got the string 'yes'" in one("rolling_health_nccl_test", rolling_health_nccl_test="yes")


# -- rolling_nodes -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("nodes", ["gpu01", "gpu[01-02]", "gpu01,gpu02", ["gpu02"], None])
def test_nodes_sound(nodes):
    assert errors(rolling_nodes=nodes) == []


def test_nodes_not_gpu_nodes():
    msg = one("rolling_nodes", rolling_nodes="gpu01,head01")
    assert "names hosts that are not GPU nodes: head01" in msg


def test_nodes_not_in_the_inventory():
    assert "names hosts that are not in the inventory: gpu[03-04]" in one("rolling_nodes", rolling_nodes="gpu[01-04]")


def test_nodes_a_group_name():
    assert "names the group(s) gpu_nodes: rolling_nodes takes host names" in one("rolling_nodes",
                                                                                 rolling_nodes="gpu_nodes")


def test_nodes_bad_hostlist():
    assert "'gpu[01-' is not a hostlist of GPU nodes" in one("rolling_nodes", rolling_nodes="gpu[01-")


def test_nodes_empty():
    assert "names no node: leave rolling_nodes unset" in one("rolling_nodes", rolling_nodes=[])
    assert "names no node" in one("rolling_nodes", rolling_nodes=" ")


def test_nodes_hostlist_inside_a_list():
    assert "entry 1 'gpu[01-02]' is a hostlist expression inside a list" in one("rolling_nodes",
                                                                                rolling_nodes=["gpu[01-02]"])


def test_nodes_wrong_shape():
    assert "must be a hostlist string ('gpu[01-04]') or a list of GPU node names, got 3 (integer)" in one(
        "rolling_nodes", rolling_nodes=3)
    assert "entry 1 is 7 (integer), not a host name" in one("rolling_nodes", rolling_nodes=[7])


# -- health gate -------------------------------------------------------------------------------------------------

def test_dcgm_level_zero():
    assert "is 0, which would resume nodes without the DCGM diagnostic" in one("rolling_health_dcgm_level",
                                                                               rolling_health_dcgm_level=0)


def test_dcgm_level_zero_is_reported_once():
    out = full(rolling_health_dcgm_level=0)
    assert len(out) == 1 and "is 0, which would resume nodes" in out[0], out


@pytest.mark.parametrize("level", [5, -1])
def test_dcgm_level_out_of_range(level):
    msg = spec_only("rolling_health_dcgm_level", rolling_health_dcgm_level=level)
    assert "%d is not one of 1, 2, 3, 4" % level in msg


def test_dcgm_level_not_a_number():
    assert "must be an integer, got the string 'long'" in spec_only("rolling_health_dcgm_level",
                                                                    rolling_health_dcgm_level="long")


def test_nccl_busbw_positive():
    assert "must be a positive bus bandwidth in GB/s, got 0" in one("rolling_health_nccl_min_busbw_gbps",
                                                                    rolling_health_nccl_min_busbw_gbps=0)
    assert "must be a number, got the string 'fast'" in spec_only("rolling_health_nccl_min_busbw_gbps",
                                                                  rolling_health_nccl_min_busbw_gbps="fast")
    assert "must be a finite bus bandwidth" in one("rolling_health_nccl_min_busbw_gbps",
                                                   rolling_health_nccl_min_busbw_gbps=float("inf"))


def test_nccl_busbw_in_gigabits():
    assert "3200 GB/s is more than one node's NVLink can carry" in one("rolling_health_nccl_min_busbw_gbps",
                                                                       rolling_health_nccl_min_busbw_gbps=3200)


def test_gpus_per_node_against_the_inventory_count():
    msg = one("rolling_gpus_per_node", rolling_gpus_per_node=4)
    assert "expect 4 GPUs per node but cluster_gpu_count_per_node is 8 on gpu[01-02]" in msg


def test_gpus_per_node_implausible():
    assert "20 GPUs per node is not plausible" in one("rolling_gpus_per_node", rolling_gpus_per_node=20)
    assert "must be an integer, got the string 'eight'" in spec_only("rolling_gpus_per_node",
                                                                     rolling_gpus_per_node="eight")


# -- run id, apply hosts -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("run_id", ["my run", "", "-x", "a" * 65, "cf roll;rm", 3.5])
def test_run_id_unsafe(run_id):
    assert "cannot name a Slurm drain reason" in one("rolling_run_id", rolling_run_id=run_id)


@pytest.mark.parametrize("run_id", ["20250101T120000Z", "kernel-6.8", "r1.2_a:b", 42])
def test_run_id_safe(run_id):
    assert errors(rolling_run_id=run_id) == []


def test_apply_hosts_must_be_a_pattern():
    assert "must be a host pattern string" in one("rolling_apply_hosts", rolling_apply_hosts=["gpu01"])


# -- where a value is set ----------------------------------------------------------------------------------------

def test_plan_variable_set_differently_on_some_hosts():
    hv = hostvars(rolling_roles=ROLES)
    hv["gpu02"]["rolling_serial"] = [2]
    out = check(Inventory(hv, GROUPS), ON)
    assert len(out) == 1, out
    assert out[0].startswith("inventory: rolling_serial: is set differently on some hosts (gpu01: not set; "
                             "gpu02: [2])"), out


def test_a_gpu_nodes_own_value_is_checked_on_that_node():
    hv = hostvars(rolling_roles=ROLES)
    hv["gpu02"]["rolling_health_dcgm_level"] = 0
    hv["gpu02"]["rolling_gpus_per_node"] = 4
    out = check(Inventory(hv, GROUPS), ON)
    assert any(e.startswith("gpu02: rolling_health_dcgm_level: is 0, which would resume") for e in out), out
    assert any(e.startswith("gpu02: rolling_gpus_per_node: the health gate would expect 4 GPUs on this node")
               for e in out), out
    assert len(out) == 2, out
    # the spec's check agrees with these rules on that node, and says nothing more
    assert full(hv) == out


def test_a_gpu_nodes_own_value_of_the_wrong_type_is_the_specs_to_report_on_that_node():
    hv = hostvars(rolling_roles=ROLES)
    hv["gpu02"]["rolling_health_dcgm_level"] = 7
    assert full(hv) == ["gpu02: rolling_health_dcgm_level: 7 is not one of 1, 2, 3, 4"]


def test_a_gpu_nodes_own_sound_value_passes():
    hv = hostvars(rolling_roles=ROLES)
    hv["gpu02"]["rolling_health_dcgm_level"] = 3
    hv["gpu02"]["rolling_health_dcgm_timeout_seconds"] = 1200
    assert check(Inventory(hv, GROUPS), ON) == []


# -- wrong shapes never raise ------------------------------------------------------------------------------------

WRONG_SHAPES = [None, "", "x", 0, -1, 1.5, True, [], [None], [{}], {}, {"a": [1]}, [[1]], object(), float("nan"),
                float("inf"), "%", "-%", "1e400"]


@pytest.mark.parametrize("name", ROLLING_VARIABLES)
def test_no_rule_raises_on_a_wrong_shape(name):
    for value in WRONG_SHAPES:
        check(Inventory(hostvars(**{name: value}), GROUPS), ON)
        hv = hostvars(rolling_roles=ROLES)
        hv["gpu02"][name] = value
        check(Inventory(hv, GROUPS), ON)


def test_an_empty_inventory_does_not_raise():
    assert check(Inventory({}, {}), ON) == []


def test_a_role_variable_given_with_e_is_refused_with_where_it_goes():
    from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_rolling import extra_role_variables
    errs = extra_role_variables(["rolling_roles", "rolling_reboot_ok", "gpu_tuning_power_limit_watts",
                                 "cluster_fabric_type", "preflight_strict", "some_site_variable"])
    assert [e.split(":", 2)[1].strip() for e in errs] == ["gpu_tuning_power_limit_watts", "cluster_fabric_type"]
    assert "set gpu_tuning_power_limit_watts in group_vars or host_vars, or in an extra inventory source" in errs[0]
