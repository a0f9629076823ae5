# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

import os

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import (
    gres_count, parse_gres, parse_not_found, parse_scontrol_nodes, parse_sinfo, split_reason, state_flags,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "slurm")


def read(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


# ------------------------------------------------------------------------------------------- scontrol show node

def test_slurm_24_11_layout_keeps_the_reason_after_its_line_of_spaces():
    # Recorded from Slurm 24.11.5: "   " inside each node, before Reason= (the node that has one).
    text = read("scontrol-show-node-24.11-2-nodes-drain.txt")
    assert "\n   \n   Reason=" in text
    nodes = parse_scontrol_nodes(text)
    assert [n.get("NodeName") for n in nodes] == ["gpu01", "gpu02"]
    assert "Reason" not in nodes[0]
    assert nodes[1]["State"] == "IDLE+DRAIN"
    assert nodes[1]["Version"] == "24.11.5"
    assert split_reason(nodes[1]["Reason"]) == ("cf-roll:20261124T200156Z", "root", "2026-11-24T20:01:57")


def test_multi_node_output_split_and_all_keys_kept():
    nodes = parse_scontrol_nodes(read("scontrol-show-node-3-nodes-drain-reasons.txt"))
    assert [n["NodeName"] for n in nodes] == ["gpu01", "gpu02", "gpu03"]
    first = nodes[0]
    assert first["State"] == "MIXED+DRAIN"
    assert first["CPUAlloc"] == "96"
    assert first["CoresPerSocket"] == "48"          # trailing space stripped
    assert first["Partitions"] == "gpu"
    assert first["CfgTRES"] == "cpu=192,mem=2000000M,billing=192,gres/gpu=8"
    assert first["OS"] == "Linux 5.15.0-105-generic #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024"
    assert first["Reason"] == "cf-roll: kernel 6.8 upgrade [root@2024-05-01T10:00:00]"
    assert first["ExtSensorsTemp"] == "n/a"
    assert len(first) == 39
    assert nodes[1]["AllocTRES"] == ""
    assert nodes[1]["Comment"] == "waiting for vendor RMA, see ticket 4711"
    # "state=replace" inside a reason is not a key
    assert nodes[1]["Reason"] == "bad DIMM B3 state=replace [alice@2024-04-30T17:15:02]"
    assert "Reason" not in nodes[2]
    assert nodes[2]["Partitions"] == "gpu,debug"


def test_one_line_format_matches_multi_line():
    one = parse_scontrol_nodes(read("scontrol-o-show-node-2-nodes.txt"))
    multi = parse_scontrol_nodes(read("scontrol-show-node-3-nodes-drain-reasons.txt"))
    assert [n["NodeName"] for n in one] == ["gpu01", "gpu02"]
    assert one[0] == multi[0]
    assert one[1]["State"] == "IDLE"
    assert one[1]["OS"] == multi[1]["OS"]
    assert one[1]["AllocTRES"] == ""


def test_one_line_reason_with_upper_case_key_lookalike_ends_at_tag():
    text = ("NodeName=n1 State=IDLE+DRAIN Reason=moved State=DOWN by hand [bob@2024-01-02T03:04:05] "
            "Comment=hello world\n")
    node = parse_scontrol_nodes(text)[0]
    assert node["State"] == "IDLE+DRAIN"
    assert node["Reason"] == "moved State=DOWN by hand [bob@2024-01-02T03:04:05]"
    assert node["Comment"] == "hello world"


def test_multi_line_reason_continuation_and_tabs():
    text = ("NodeName=n1 Arch=x86_64\n"
            "\tState=DOWN+DRAIN\tThreadsPerCore=2\n"
            "   Reason=first line [root@2024-01-01T00:00:00]\n"
            "       second line\n")
    node = parse_scontrol_nodes(text)[0]
    assert node["State"] == "DOWN+DRAIN"
    assert node["ThreadsPerCore"] == "2"
    assert node["Reason"] == "first line [root@2024-01-01T00:00:00]\nsecond line"


def test_not_found_lines_are_skipped_and_reported():
    text = read("scontrol-show-node-not-found.txt")
    nodes = parse_scontrol_nodes(text)
    assert [n["NodeName"] for n in nodes] == ["gpu01"]
    assert parse_not_found(text) == ["gpu99"]
    assert parse_not_found("") == []


def test_fragment_without_node_name_and_garbage():
    nodes = parse_scontrol_nodes("some banner\n   Gres=gpu:h100:8(S:0-1)\n")
    assert nodes == [{"Gres": "gpu:h100:8(S:0-1)"}]
    assert parse_scontrol_nodes("") == []
    assert parse_scontrol_nodes(None) == []


def test_truncated_output_keeps_what_is_there():
    text = read("scontrol-show-node-3-nodes-drain-reasons.txt")
    cut = text[:text.index("   RealMemory=2000000 AllocMem=0 FreeMem=1990000")]
    nodes = parse_scontrol_nodes(cut)
    assert [n["NodeName"] for n in nodes] == ["gpu01", "gpu02"]
    assert "State" not in nodes[1]


@pytest.mark.parametrize("reason, expected", [
    ("cf-roll: kernel 6.8 upgrade [root@2024-05-01T10:00:00]", ("cf-roll: kernel 6.8 upgrade", "root",
                                                                "2024-05-01T10:00:00")),
    ("Not responding [slurm@2024-01-01T00:00:00]", ("Not responding", "slurm", "2024-01-01T00:00:00")),
    ("no tag here", ("no tag here", None, None)),
    ("", (None, None, None)),
    ("none", (None, None, None)),
    (None, (None, None, None)),
])
def test_split_reason(reason, expected):
    assert split_reason(reason) == expected


# --------------------------------------------------------------------------------------------------- states

@pytest.mark.parametrize("state, base, flags, drained, draining", [
    ("IDLE", "IDLE", [], False, False),
    ("IDLE+DRAIN", "IDLE", ["DRAIN"], True, False),
    ("MIXED+DRAIN", "MIXED", ["DRAIN"], False, True),
    ("ALLOCATED+DRAIN", "ALLOCATED", ["DRAIN"], False, True),
    ("IDLE+COMPLETING+DRAIN", "IDLE", ["COMPLETING", "DRAIN"], False, True),
    ("DOWN+DRAIN+NOT_RESPONDING", "DOWN", ["DRAIN", "NOT_RESPONDING"], True, False),
    ("IDLE+DRAIN+INVALID_REG", "IDLE", ["DRAIN", "INVALID_REG"], True, False),
    ("IDLE+DYNAMIC_NORM", "IDLE", ["DYNAMIC_NORM"], False, False),
    ("drng", "DRAINING", ["DRAIN"], False, True),
    ("drain", "DRAINED", ["DRAIN"], True, False),
    ("drain*", "DRAINED", ["DRAIN", "NOT_RESPONDING"], True, False),
    ("drng@", "DRAINING", ["DRAIN", "REBOOT_REQUESTED"], False, True),
    ("DRAINING", "DRAINING", ["DRAIN"], False, True),
    ("drained", "DRAINED", ["DRAIN"], True, False),
    ("comp", "COMPLETING", [], False, False),
    ("mix", "MIXED", [], False, False),
    ("mix-", "MIXED", ["PLANNED"], False, False),
    ("alloc", "ALLOCATED", [], False, False),
    ("idle~", "IDLE", ["POWERED_DOWN"], False, False),
    ("down*", "DOWN", ["NOT_RESPONDING"], False, False),
])
def test_state_flags(state, base, flags, drained, draining):
    info = state_flags(state)
    assert (info["base"], info["flags"], info["drained"], info["draining"]) == (base, flags, drained, draining)
    assert info["drain"] == ("DRAIN" in flags)


def test_state_flags_completing_and_not_responding():
    assert state_flags("comp")["completing"] is True
    assert state_flags("MIXED+COMPLETING")["completing"] is True
    assert state_flags("IDLE*")["not_responding"] is True


@pytest.mark.parametrize("bad", ["", "   ", None, "+", "*"])
def test_state_flags_invalid(bad):
    with pytest.raises(ValueError):
        state_flags(bad)


# ------------------------------------------------------------------------------------------------------ sinfo

def test_parse_sinfo_with_format_letters_reason_last():
    rows = parse_sinfo(read("sinfo-N-nodes-state-reason.txt"), "%N %t %E")
    assert [r["nodelist"] for r in rows] == ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"]
    assert rows[0] == {"nodelist": "gpu01", "state": "drng", "reason": "cf-roll: kernel 6.8 upgrade"}
    assert rows[1]["reason"] == "bad DIMM B3 state=replace"
    assert [state_flags(r["state"])["drained"] for r in rows] == [False, True, False, False, False]


def test_parse_sinfo_field_names_widths_and_missing_columns():
    rows = parse_sinfo("gpu01 drain\ngpu02\n\n", ["%20N", "%.6t", "%E"])
    assert rows == [{"nodelist": "gpu01", "state": "drain", "reason": None},
                    {"nodelist": "gpu02", "state": None, "reason": None}]
    rows = parse_sinfo("gpu01\tidle", "nodelist state")
    assert rows == [{"nodelist": "gpu01", "state": "idle"}]


def test_parse_sinfo_default_table_uses_header():
    text = ("PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
            "batch*       up   infinite      1  alloc dgx1\n"
            "batch*       up   infinite      8   idle dgx[2-9]\n")
    rows = parse_sinfo(text)
    assert rows[1] == {"partition": "batch*", "avail": "up", "timelimit": "infinite", "nodes": "8",
                       "state": "idle", "nodelist": "dgx[2-9]"}
    assert parse_sinfo("") == []


def test_parse_sinfo_empty_fields_rejected():
    with pytest.raises(ValueError):
        parse_sinfo("x", [])


# ------------------------------------------------------------------------------------------------------- gres

@pytest.mark.parametrize("text, expected", [
    ("gpu:h100:8(S:0-1)", [("gpu", "h100", 8, "0-1", None)]),
    ("gpu:8", [("gpu", None, 8, None, None)]),
    ("gpu", [("gpu", None, 1, None, None)]),
    ("gpu:0", [("gpu", None, 0, None, None)]),
    ("gpu:(null):0(IDX:N/A)", [("gpu", None, 0, None, None)]),
    ("gpu:a40:1(S:0,2,4,6,8,10)", [("gpu", "a40", 1, "0,2,4,6,8,10", None)]),
    ("gpu:A30:4(IDX:0-3),gpu:Q6K:4(IDX:0-3)", [("gpu", "A30", 4, None, "0-3"), ("gpu", "Q6K", 4, None, "0-3")]),
    ("gpu:3g.40gb:8(S:0-1),gpu:2g.20gb:8(S:0-1),gpu:1g.10gb:16(S:0-1)",
     [("gpu", "3g.40gb", 8, "0-1", None), ("gpu", "2g.20gb", 8, "0-1", None), ("gpu", "1g.10gb", 16, "0-1", None)]),
    ("gpu:nvidia_h100_80gb_hbm3_1g.10gb:2", [("gpu", "nvidia_h100_80gb_hbm3_1g.10gb", 2, None, None)]),
    ("gpu:h100:8(S:0-1),shard:h100:64", [("gpu", "h100", 8, "0-1", None), ("shard", "h100", 64, None, None)]),
    ("mps:4K", [("mps", None, 4096, None, None)]),
    ("(null)", []),
    ("", []),
])
def test_parse_gres(text, expected):
    got = [(g["name"], g["type"], g["count"], g["sockets"], g["index"]) for g in parse_gres(text)]
    assert got == expected


def test_gres_count():
    assert gres_count("gpu:3g.40gb:8(S:0-1),gpu:2g.20gb:8(S:0-1),gpu:1g.10gb:16(S:0-1)") == 32
    assert gres_count("gpu:h100:8(S:0-1),shard:h100:64", name="shard") == 64
    assert gres_count("(null)") == 0


# scontrol ping (Slurm 24.11), with a backup controller; the same lines end scontrol show config.
PING = "Slurmctld(primary) at head01 is DOWN\nSlurmctld(backup) at head02 is UP\n"


def test_parse_ping_reads_each_controller():
    from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import controller_up, parse_ping
    assert parse_ping(PING) == [{"role": "primary", "host": "head01", "state": "DOWN"},
                                {"role": "backup", "host": "head02", "state": "UP"}]
    assert controller_up(PING) is True
    assert controller_up("Slurmctld(primary) at head01 is DOWN\n") is False
    assert controller_up("") is False and parse_ping(None) == []
    # a word UP elsewhere (a node's reason, a comment) is not a controller that is up
    assert controller_up("Reason=link is UP again\n") is False
