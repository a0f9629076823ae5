# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roll_adoption and roll_adopt_refusal: a roll takes over only its own run's drains, never a reason set since."""

import os

import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter import rolling

FILTERS = rolling.FilterModule().filters()
PREFIX = "cf-roll:"
RUN = "20260101T000000Z"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))


def node(name, reason=None, drain=True, user="root", when="2026-01-01T00:00:00"):
    return {"name": name, "drain": drain, "reason": reason, "reason_user": user if reason else None,
            "reason_time": when if reason else None}


@pytest.mark.parametrize("reason", [
    "cf-roll:20260101T000000Z",
    "cf-roll:20260101T000000Z FAILED gate: dcgmi diag failed",
    "cf-roll:20260101T000000Z : reboot issued",
    "cf-roll:20260101T000000Z : reboot issued : reboot timed out",
    "cf-roll:20260101T000000Z FAILED apply: x : reboot complete",
])
def test_the_runs_own_drains_are_adopted(reason):
    result = FILTERS["roll_adoption"]([node("gpu01", reason)], PREFIX, RUN)
    assert result == {"adopt": {"gpu01": {"reason": reason, "reason_user": "root",
                                          "reason_time": "2026-01-01T00:00:00"}},
                      "other_runs": [], "foreign": []}


@pytest.mark.parametrize("reason", [
    "cf-roll:20251231T000000Z FAILED gate: x",  # another run
    "cf-roll:20260101T000000Z2",  # a run id that merely starts with this one
    "cf-roll:20260101T000000Zhold by bob",
    "cf-roll:",
])
def test_other_runs_drains_are_left_alone_without_the_switch(reason):
    result = FILTERS["roll_adoption"]([node("gpu01", reason)], PREFIX, RUN)
    assert result == {"adopt": {}, "other_runs": ["gpu01"], "foreign": []}
    switched = FILTERS["roll_adoption"]([node("gpu01", reason)], PREFIX, RUN, True)
    assert list(switched["adopt"]) == ["gpu01"] and switched["other_runs"] == []


@pytest.mark.parametrize("reason", ["bad DIMM, ticket 4711", "cf-health: xid 79", "NHC: check_hw_ib", "Kill task failed",
                                    "hold cf-roll:20260101T000000Z"])
def test_foreign_drains_are_never_adopted(reason):
    for switch in (False, True):
        result = FILTERS["roll_adoption"]([node("gpu01", reason)], PREFIX, RUN, switch)
        assert result == {"adopt": {}, "other_runs": [], "foreign": ["gpu01"]}


def test_nodes_not_drained_are_not_listed_and_a_string_switch_does_not_count():
    nodes = [node("gpu01", None, drain=False), node("gpu02", "cf-roll:old", drain=False), node("gpu03", "cf-roll:old")]
    result = FILTERS["roll_adoption"](nodes, PREFIX, RUN, "true")
    assert result == {"adopt": {}, "other_runs": ["gpu03"], "foreign": []}


def test_a_run_needs_an_id():
    with pytest.raises(AnsibleFilterError, match="run id"):
        FILTERS["roll_adoption"]([], PREFIX, "")


REFUSAL = FILTERS["roll_adopt_refusal"]
ADOPTED = {"gpu01": {"reason": "cf-roll:%s FAILED gate: x" % RUN, "reason_user": "root",
                     "reason_time": "2026-01-01T00:00:00"}}


def test_the_drain_phase_drains_what_the_plan_adopted_unchanged():
    assert REFUSAL(node("gpu01", "cf-roll:%s FAILED gate: x" % RUN), PREFIX, RUN, ADOPTED) == ""
    assert REFUSAL(node("gpu02", None, drain=False), PREFIX, RUN, ADOPTED) == ""
    assert REFUSAL(node("gpu02", "cf-roll:" + RUN), PREFIX, RUN, ADOPTED) == ""


@pytest.mark.parametrize("changed", [
    dict(reason="cf-roll:%s FAILED gate: x" % RUN, when="2026-01-02T09:00:00"),  # set again by an admin: a hold
    dict(reason="cf-roll:%s FAILED gate: x" % RUN, user="bob"),
    dict(reason="cf-roll:%s FAILED gate: x, held by bob" % RUN),
    dict(reason="bad DIMM"),
])
def test_a_reason_set_again_since_the_plan_is_left_alone(changed):
    why = REFUSAL(node("gpu01", **changed), PREFIX, RUN, ADOPTED)
    assert "changed since the plan" in why


@pytest.mark.parametrize("reason", ["bad DIMM", "cf-roll:other", "cf-roll:%s FAILED gate: x" % RUN])
def test_a_drain_the_plan_did_not_adopt_is_left_alone(reason):
    assert "drained by someone else since the plan" in REFUSAL(node("gpu02", reason), PREFIX, RUN, ADOPTED)


def test_filter_docs_exist():
    for name in ("roll_adoption", "roll_adopt_refusal"):
        with open(os.path.join(ROOT, "plugins", "filter", name + ".yml")) as handle:
            doc = yaml.safe_load(handle)
        assert doc["DOCUMENTATION"]["name"] == name
        assert doc["DOCUMENTATION"]["version_added"] == "1.0.0"


@pytest.mark.parametrize("state, reason, foreign", [
    ("DOWN", "RMA 4711 (PSU fan)", True),  # an administrator's DOWN (the brownfield lab test's gpu02)
    ("DOWN+NOT_RESPONDING", "RMA 4711", True),
    ("FAIL", "replace HCA", True),
    ("DOWN", "Not responding", False),  # Slurm's own fault: the roll's gate judges the node
    ("DOWN", "Node unexpectedly rebooted", False),
    ("DOWN", None, False),
    ("IDLE", None, False),
    ("MIXED", None, False),
])
def test_a_node_down_by_its_owner_is_foreign_though_not_drained(state, reason, foreign):
    entry = dict(node("gpu02", reason, drain=False), state=state)
    result = FILTERS["roll_adoption"]([entry], PREFIX, RUN)
    assert result == {"adopt": {}, "other_runs": [], "foreign": ["gpu02"] if foreign else []}
