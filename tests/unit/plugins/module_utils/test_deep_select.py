# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which nodes the deep checks may stress (plugins/module_utils/slurm_maintenance.py), from node and reservation
text in the layouts Slurm prints: the lab's recorded Slurm 24.11 ``scontrol show node``, the one-line ``-o``
format, a real Slurm 25.05 node (shared fixtures), and ``scontrol show reservation`` as published by operators."""

import datetime
import os

import pytest

from conftest import SAMPLES

from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import parse_scontrol_nodes
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm_maintenance import (
    deep_candidates,
    describe_reservation,
    parse_scontrol_reservations,
    parse_time,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "slurm")
NOW = datetime.datetime(2025, 10, 14, 13, 10, 0)

# Reservations as published with their output (multi-line format; values kept, names as printed):
# AWS PCS user guide, capacity blocks (Slurm 24.11: Comment= line, MaxStartDelay=).
RES_AWS_PCS = """ReservationName=node-fanout-scheduled StartTime=2025-10-14T13:09:17 EndTime=2025-10-14T13:11:17 Duration=00:02:00
   Nodes=node-fanout-[1-4] NodeCnt=4 CoreCnt=16 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES
   TRES=cpu=16
   Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null)
   MaxStartDelay=(null)
   Comment=node-fanout Scheduled
"""
# aws-parallelcluster-node, slurm_commands.py docstring (Slurm 23.02: Watts=n/a).
RES_PCLUSTER = """ReservationName=root_6 StartTime=2023-10-13T15:57:03 EndTime=2024-10-12T15:57:03 Duration=365-00:00:00
    Nodes=q1-st-cr2-1,q2-dy-cr4-[1-5] NodeCnt=6 CoreCnt=481 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES
    TRES=cpu=481
    Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) Watts=n/a
    MaxStartDelay=(null)
"""
# Rutgers OARC user guide (Slurm 20.x), an inactive cluster-wide maintenance window, printed double-spaced (its
# 426-node list shortened here).
RES_RUTGERS = """ReservationName=202105-Maint StartTime=2021-05-18T08:00:00 EndTime=2021-05-19T19:00:00 Duration=1-11:00:00

   Nodes=cuda[001-008],gpu[001-016],volta[001-003] NodeCnt=426 CoreCnt=13964 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES,ALL_NODES

   TRES=cpu=13964

   Users=(null) Accounts=oarc Licenses=(null) State=INACTIVE BurstBuffer=(null) Watts=n/a
"""
# The one-line format (-o): a maintenance window from a scheduler client's test data (epoch times, as that tool
# recorded them), and a user reservation in the same layout.
RES_ONE_LINE = ("ReservationName=maint_1 StartTime=1756800000 EndTime=1756900000 Duration=1-03:46:40 "
                "Nodes=trace[01-29] NodeCnt=29 CoreCnt=3712 Features=(null) PartitionName=batch Flags=MAINT,SPEC_NODES "
                "TRES=cpu=3712 Users=(null) Groups=(null) Accounts=root Licenses=(null) State=INACTIVE "
                "BurstBuffer=(null) Watts=n/a MaxStartDelay=(null)\n"
                "ReservationName=project_x StartTime=2025-10-14T09:00:00 EndTime=2025-10-15T09:00:00 "
                "Duration=1-00:00:00 Nodes=gpu[03-04] NodeCnt=2 CoreCnt=96 Features=(null) PartitionName=(null) "
                "Flags=SPEC_NODES TRES=cpu=96 Users=alice Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE "
                "BurstBuffer=(null) Watts=n/a MaxStartDelay=(null) Comment=project x training\n")


def read(name, root=FIXTURES):
    with open(os.path.join(root, name)) as f:
        return f.read()


def lab_node(name, state, reason=None, extra=""):
    """One node of the lab's recorded Slurm 24.11 output, with another state (and reason) put in."""
    text = read("scontrol-show-node-24.11-2-nodes-drain.txt").split("\n\n")[0]
    text = text.replace("NodeName=gpu01", "NodeName=%s" % name).replace("State=IDLE ", "State=%s " % state)
    if extra:
        text = text.replace("   Partitions=gpu,debug \n", "   Partitions=gpu,debug \n   %s\n" % extra)
    if reason:
        text += "\n   Reason=%s [root@2025-10-14T12:00:00]" % reason
    return text + "\n"


def select(nodes_text, res_text="", now=NOW, minutes=0, prefix="cf-deep:"):
    entries, reservations = deep_candidates(parse_scontrol_nodes(nodes_text), parse_scontrol_reservations(res_text),
                                            now=now, min_remaining_seconds=60 * minutes, reason_prefix=prefix)
    return dict((e["name"], e) for e in entries), reservations


# ------------------------------------------------------------------------------------------------ reservations

def test_reservations_parse_in_every_published_layout():
    aws = parse_scontrol_reservations(RES_AWS_PCS)
    assert len(aws) == 1 and aws[0]["Flags"] == "MAINT,SPEC_NODES" and aws[0]["Nodes"] == "node-fanout-[1-4]"
    assert aws[0]["TRES"] == "cpu=16" and aws[0]["Comment"] == "node-fanout Scheduled" and aws[0]["State"] == "ACTIVE"
    pc = parse_scontrol_reservations(RES_PCLUSTER)
    assert pc[0]["Nodes"] == "q1-st-cr2-1,q2-dy-cr4-[1-5]" and pc[0]["Watts"] == "n/a"
    rutgers = parse_scontrol_reservations(RES_RUTGERS)
    assert rutgers[0]["Flags"] == "MAINT,SPEC_NODES,ALL_NODES" and rutgers[0]["State"] == "INACTIVE"
    one = parse_scontrol_reservations(RES_ONE_LINE)
    assert [r["ReservationName"] for r in one] == ["maint_1", "project_x"]
    assert one[1]["Comment"] == "project x training" and one[1]["Users"] == "alice"
    assert parse_scontrol_reservations("No reservations in the system\n") == []
    assert parse_scontrol_reservations("") == [] and parse_scontrol_reservations(None) == []


def test_reservations_described():
    aws = describe_reservation(parse_scontrol_reservations(RES_AWS_PCS)[0], NOW)
    assert aws["maint"] and aws["active"] and aws["nodes"] == ["node-fanout-%d" % i for i in range(1, 5)]
    assert aws["remaining_seconds"] == 77 and aws["flags"] == ["MAINT", "SPEC_NODES"]
    pc = describe_reservation(parse_scontrol_reservations(RES_PCLUSTER)[0], NOW)
    assert pc["nodes"][0] == "q1-st-cr2-1" and len(pc["nodes"]) == 6
    rutgers = describe_reservation(parse_scontrol_reservations(RES_RUTGERS)[0], NOW)
    assert rutgers["maint"] and not rutgers["active"]
    # Epoch times (a tool's test data) are not Slurm times: the printed State decides.
    maint_1 = describe_reservation(parse_scontrol_reservations(RES_ONE_LINE)[0], NOW)
    assert maint_1["remaining_seconds"] is None and not maint_1["active"]
    # Without State= (Slurm before 14.11), the times decide.
    bare = describe_reservation({"ReservationName": "old", "StartTime": "2025-10-14T13:00:00",
                                 "EndTime": "2025-10-14T14:00:00", "Nodes": "ALL", "Flags": "MAINT"}, NOW)
    assert bare["active"] and bare["all_nodes"] and bare["nodes"] == []
    assert parse_time("Unknown") is None and parse_time("2025-10-14T13:00:00") == datetime.datetime(2025, 10, 14, 13)


# ------------------------------------------------------------------------------------------------ node selection

def test_lab_recording_drained_node_selected_idle_node_not():
    nodes, _res = select(read("scontrol-show-node-24.11-2-nodes-drain.txt"))
    assert nodes["gpu02"]["selected"] and nodes["gpu02"]["kind"] == "drained"
    assert nodes["gpu02"]["reason"] == "cf-roll:20261124T200156Z" and nodes["gpu02"]["gpus"] == 8
    assert nodes["gpu02"]["why"] == "drained, no job left (IDLE+DRAIN; reason: cf-roll:20261124T200156Z)"
    assert not nodes["gpu01"]["selected"] and nodes["gpu01"]["kind"] is None
    assert not nodes["gpu02"]["ours"]
    nodes, _res = select(read("scontrol-show-node-24.11-2-nodes-drain.txt"), prefix="cf-roll:")
    assert nodes["gpu02"]["ours"] and not nodes["gpu01"]["ours"]
    nodes, _res = select(read("scontrol-show-node-24.11-2-nodes-drain.txt"), prefix=None)
    assert not nodes["gpu02"]["ours"]
    assert nodes["gpu01"]["why"] == "in service (IDLE): neither drained nor in an active MAINT reservation"


def test_one_line_format_draining_node_is_not_selected():
    nodes, _res = select(read("scontrol-o-show-node-2-nodes.txt"))
    # MIXED+DRAIN: Slurm's DRAINING, jobs still run on it.
    assert not nodes["gpu01"]["selected"] and nodes["gpu01"]["why"] == "draining: jobs still run on it (MIXED+DRAIN)"
    assert not nodes["gpu02"]["selected"] and nodes["gpu02"]["why"].startswith("in service")


def test_multi_line_admin_drain_selected_with_its_reason():
    nodes, _res = select(read("scontrol-show-node-3-nodes-drain-reasons.txt"))
    assert not nodes["gpu01"]["selected"]
    assert nodes["gpu02"]["selected"] and nodes["gpu02"]["reason"] and not nodes["gpu02"]["reason"].startswith("cf-")


def test_real_slurm_25_05_node_with_a_dynamic_flag_is_in_service():
    nodes, _res = select(read("scontrol-show-node-a40-gres-slurm25.05-slinky.txt", os.path.join(SAMPLES, "slurm")))
    node = nodes["esc8000a-1"]
    assert not node["selected"] and node["gpus"] == 1 and node["flags"] == ["DYNAMIC_NORM"]


@pytest.mark.parametrize("state, selected, why", [
    ("IDLE+DRAIN", True, "drained, no job left (IDLE+DRAIN; reason: cf-deep: burn-in: new)"),
    ("DOWN+DRAIN", True, "drained, no job left (DOWN+DRAIN; reason: cf-deep: burn-in: new)"),
    ("MIXED+DRAIN", False, "draining: jobs still run on it (MIXED+DRAIN)"),
    ("ALLOCATED+DRAIN", False, "draining: jobs still run on it (ALLOCATED+DRAIN)"),
    ("IDLE+COMPLETING+DRAIN", False, "draining: jobs still run on it (IDLE+COMPLETING+DRAIN)"),
    ("IDLE+DRAIN+NOT_RESPONDING", False, "Slurm cannot use it now (IDLE+DRAIN+NOT_RESPONDING): slurmd must "
                                         "register first"),
    ("DOWN+DRAIN+NOT_RESPONDING", False, "Slurm cannot use it now (DOWN+DRAIN+NOT_RESPONDING): slurmd must "
                                         "register first"),
    ("UNKNOWN+DRAIN", False, "Slurm cannot use it now (UNKNOWN+DRAIN): slurmd must register first"),
    ("IDLE+DRAIN+REBOOT_ISSUED", False, "Slurm cannot use it now (IDLE+DRAIN+REBOOT_ISSUED): slurmd must register "
                                        "first"),
    ("IDLE+DRAIN+POWERED_DOWN", False, "Slurm cannot use it now (IDLE+DRAIN+POWERED_DOWN): slurmd must register "
                                       "first"),
    ("DOWN", False, "DOWN without DRAIN: left to the operator"),
    ("IDLE+FAIL", False, "IDLE+FAIL without DRAIN: left to the operator"),
    ("MIXED", False, "runs jobs (MIXED)"),
    ("IDLE+RESERVED", False, "in service (IDLE+RESERVED): neither drained nor in an active MAINT reservation"),
])
def test_states(state, selected, why):
    reason = "cf-deep: burn-in: new" if "DRAIN" in state or state == "DOWN" else None
    nodes, _res = select(lab_node("gpu05", state, reason))
    assert nodes["gpu05"]["selected"] is selected
    assert nodes["gpu05"]["ours"] is ("DRAIN" in state)
    assert nodes["gpu05"]["why"] == why
    assert nodes["gpu05"]["kind"] == ("drained" if selected else None)


def test_allocated_cpus_on_an_idle_node_mean_a_job_is_starting():
    text = lab_node("gpu05", "IDLE+DRAIN", "cf-deep: x").replace("CPUAlloc=0 ", "CPUAlloc=2 ")
    nodes, _res = select(text)
    assert not nodes["gpu05"]["selected"] and nodes["gpu05"]["why"] == "CPUs allocated (CPUAlloc=2) while IDLE+DRAIN"


MAINT_NOW = """ReservationName=cf-maint StartTime=2025-10-14T13:00:00 EndTime=2025-10-14T15:00:00 Duration=02:00:00
   Nodes=gpu[05-06] NodeCnt=2 CoreCnt=4 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES
   TRES=cpu=4
   Users=root Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null)
   MaxStartDelay=(null)
"""


def test_idle_node_in_an_active_maint_reservation_is_selected():
    text = (lab_node("gpu05", "IDLE+MAINTENANCE+RESERVED", extra="ReservationName=cf-maint")
            + "\n" + lab_node("gpu06", "MIXED+MAINTENANCE+RESERVED") + "\n" + lab_node("gpu07", "IDLE"))
    nodes, res = select(text, MAINT_NOW)
    assert nodes["gpu05"]["selected"] and nodes["gpu05"]["kind"] == "maintenance"
    assert nodes["gpu05"]["reservation"] == "cf-maint"
    assert nodes["gpu05"]["why"] == "idle in maintenance reservation cf-maint (IDLE+MAINTENANCE+RESERVED)"
    # A user of the reservation runs a job there: not idle.
    assert not nodes["gpu06"]["selected"] and nodes["gpu06"]["why"].startswith("runs jobs")
    assert not nodes["gpu07"]["selected"]
    assert [r["name"] for r in res] == ["cf-maint"] and res[0]["remaining_seconds"] == 6600


def test_maint_reservation_without_the_node_flag_and_the_flag_without_a_reservation():
    # Slurm before 22.05 prints MAINT; a node listed by an active MAINT reservation counts without its flag too.
    nodes, _res = select(lab_node("gpu05", "IDLE") + "\n" + lab_node("gpu09", "IDLE+MAINT"), MAINT_NOW)
    assert nodes["gpu05"]["selected"] and nodes["gpu05"]["reservation"] == "cf-maint"
    assert nodes["gpu09"]["selected"] and nodes["gpu09"]["reservation"] is None
    assert nodes["gpu09"]["why"] == "idle in maintenance reservation (MAINT flag) (IDLE+MAINT)"


def test_inactive_or_non_maint_reservations_select_nothing():
    later = MAINT_NOW.replace("State=ACTIVE", "State=INACTIVE")
    nodes, _res = select(lab_node("gpu05", "IDLE"), later)
    assert not nodes["gpu05"]["selected"]
    plain = MAINT_NOW.replace("Flags=MAINT,SPEC_NODES", "Flags=SPEC_NODES")
    nodes, _res = select(lab_node("gpu05", "IDLE+RESERVED"), plain)
    assert not nodes["gpu05"]["selected"]


def test_a_maintenance_window_that_ends_too_soon_is_not_used():
    nodes, _res = select(lab_node("gpu05", "IDLE+MAINTENANCE+RESERVED"), MAINT_NOW, minutes=120)
    assert not nodes["gpu05"]["selected"] and nodes["gpu05"]["reservation"] == "cf-maint"
    assert nodes["gpu05"]["why"] == "idle in maintenance reservation cf-maint, which ends in 110 min (120 min needed)"
    nodes, _res = select(lab_node("gpu05", "IDLE+MAINTENANCE+RESERVED"), MAINT_NOW, minutes=110)
    assert nodes["gpu05"]["selected"]
    # Drained nodes are not bounded by any window.
    nodes, _res = select(lab_node("gpu05", "IDLE+DRAIN+MAINTENANCE+RESERVED", "cf-deep: x"), MAINT_NOW, minutes=999)
    assert nodes["gpu05"]["selected"] and nodes["gpu05"]["kind"] == "drained"


def test_bad_state_raises_value_error():
    with pytest.raises(ValueError):
        deep_candidates([{"NodeName": "gpu01", "State": ""}], [], now=NOW)
