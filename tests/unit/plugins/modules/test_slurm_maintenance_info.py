# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_maintenance_info against a scripted scontrol: the lab's recorded Slurm 24.11 node output and a
maintenance reservation in the layout Slurm prints with -o."""

import datetime
import os

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import slurm_maintenance_info

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "module_utils", "fixtures", "slurm")
# gpu01 idle, gpu02 drained (the lab's recording)
with open(os.path.join(FIXTURES, "scontrol-show-node-24.11-2-nodes-drain.txt")) as _f:
    NODES = _f.read()


def reservation(end):
    return ("ReservationName=cf-maint StartTime=2020-01-01T00:00:00 EndTime=%s Duration=UNLIMITED Nodes=gpu01 "
            "NodeCnt=1 CoreCnt=2 Features=(null) PartitionName=(null) Flags=MAINT,SPEC_NODES TRES=cpu=2 Users=root "
            "Groups=(null) Accounts=(null) Licenses=(null) State=ACTIVE BurstBuffer=(null) MaxStartDelay=(null)\n"
            % end.strftime("%Y-%m-%dT%H:%M:%S"))


def run(res_reply, **args):
    def answer(argv, data):
        if argv[1:3] == ["show", "node"]:
            return 0, NODES, ""
        assert argv[1:] == ["-o", "show", "reservation"], argv
        return res_reply
    tool = Tool(answer)
    args.setdefault("nodes", "gpu[01-02]")
    return run_module(slurm_maintenance_info, args, tool), tool


def test_no_reservation_only_the_drained_node():
    result, tool = run((0, "No reservations in the system\n", ""))
    assert tool.calls == [["/usr/bin/scontrol", "show", "node", "gpu[01-02]"],
                          ["/usr/bin/scontrol", "-o", "show", "reservation"]]
    assert result["changed"] is False and not result.get("failed")
    assert result["selected"] == ["gpu02"] and result["reservations"] == []
    assert result["cmd"] == ["/usr/bin/scontrol show node 'gpu[01-02]'", "/usr/bin/scontrol -o show reservation"]
    by = dict((n["name"], n) for n in result["nodes"])
    assert by["gpu02"]["kind"] == "drained" and by["gpu02"]["reason"] == "cf-roll:20261124T200156Z"
    assert by["gpu02"]["reason_user"] == "root" and by["gpu01"]["why"].startswith("in service")
    # A rolling change's drain is not the deep checks' (default prefix cf-deep:).
    assert result["reason_prefix"] == "cf-deep:" and not by["gpu02"]["ours"] and not by["gpu01"]["ours"]
    result, _tool = run((0, "No reservations in the system\n", ""), reason_prefix="cf-roll:")
    assert result["nodes"][1]["ours"] is True


def test_idle_node_in_a_maintenance_reservation_until_it_ends_too_soon():
    end = datetime.datetime.now() + datetime.timedelta(hours=2)
    result, _tool = run((0, reservation(end), ""), min_remaining_minutes=30)
    assert result["selected"] == ["gpu01", "gpu02"]
    assert result["nodes"][0]["reservation"] == "cf-maint" and result["nodes"][0]["kind"] == "maintenance"
    assert result["reservations"][0]["maint"] and result["reservations"][0]["active"]
    result, _tool = run((0, reservation(end), ""), min_remaining_minutes=180)
    assert result["selected"] == ["gpu02"]
    assert "which ends in" in result["nodes"][0]["why"]


def test_a_failed_reservation_read_fails_with_the_command():
    result, _tool = run((1, "", "slurm_load_reservations error: Unable to contact slurm controller"))
    assert result["failed"] and "scontrol show reservation failed (rc=1)" in result["msg"]
    assert result["cmd"] == "/usr/bin/scontrol -o show reservation"


def test_bad_arguments_fail_before_anything_runs():
    result, tool = run((0, "", ""), min_remaining_minutes=-1)
    assert result["failed"] and "min_remaining_minutes" in result["msg"] and tool.calls == []
    result, tool = run((0, "", ""), reason_prefix=" ")
    assert result["failed"] and "reason_prefix must not be empty" in result["msg"] and tool.calls == []
    result, tool = run((0, "", ""), nodes="gpu[02-01]")
    assert result["failed"] and result["msg"].startswith("nodes:") and tool.calls == []
