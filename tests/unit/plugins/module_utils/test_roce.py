# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/roce.py: the mlnx_qos parser over the recorded format (fixtures/roce/),
the ECN sysfs reads, the one set-command builder and the plan."""

import os

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils import roce

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "roce")


def load(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


@pytest.mark.parametrize("name, dcbx, trust, pfc", [
    ("mlnx_qos-i-dscp-pfc3-ofed4.txt", "OS controlled", "dscp", [0, 0, 0, 1, 0, 0, 0, 0]),
    ("mlnx_qos-i-pcp-pfc-off-buffers.txt", "OS controlled", "pcp", [0] * 8),
    ("mlnx_qos-i-dscp-pfc-0267-ets.txt", "OS controlled", "dscp", [1, 0, 1, 0, 0, 0, 1, 1]),
    ("mlnx_qos-i-dscp-pfc3-buffers-fw-dcbx.txt", "Firmware controlled", "dscp", [0, 0, 0, 1, 0, 0, 0, 0]),
])
def test_parser_reads_trust_and_pfc_from_every_recorded_layout(name, dcbx, trust, pfc):
    assert roce.parse_mlnx_qos(load(name)) == {"dcbx_mode": dcbx, "trust": trust, "pfc": pfc}


def test_parser_ignores_the_buffer_row_and_tc_blocks():
    # buffer row differs from enabled: only enabled counts
    text = load("mlnx_qos-i-pcp-pfc-off-buffers.txt").replace(
        "\tbuffer      0   0   0   0   0   0   0   0", "\tbuffer      1   1   1   1   1   1   1   1")
    assert roce.parse_mlnx_qos(text)["pfc"] == [0] * 8


def test_parser_follows_the_priority_header_order():
    text = load("mlnx_qos-i-dscp-pfc3-ofed4.txt").replace(
        "priority    0   1   2   3   4   5   6   7", "priority    7   6   5   4   3   2   1   0")
    assert roce.parse_mlnx_qos(text)["pfc"] == [0, 0, 0, 0, 1, 0, 0, 0]


def test_parser_without_trust_line_reports_none():
    text = "\n".join(line for line in load("mlnx_qos-i-dscp-pfc3-ofed4.txt").splitlines()
                     if not line.startswith("Priority trust state"))
    assert roce.parse_mlnx_qos(text)["trust"] is None


@pytest.mark.parametrize("text", [
    "",
    "Netlink error: Operation not supported\n",
    "DCBX mode: OS controlled\nPriority trust state: dscp\nPFC configuration:\n\tpriority 0 1 2 3\n\tenabled 0 0 0 1\n",
])
def test_parser_refuses_output_without_the_pfc_table(text):
    with pytest.raises(ValueError, match="PFC configuration"):
        roce.parse_mlnx_qos(text)


@pytest.mark.parametrize("prio, expected", [(0, [1, 0, 0, 0, 0, 0, 0, 0]), (3, [0, 0, 0, 1, 0, 0, 0, 0]),
                                            (7, [0, 0, 0, 0, 0, 0, 0, 1])])
def test_pfc_for_priority(prio, expected):
    assert roce.pfc_for_priority(prio) == expected


def test_pfc_for_priority_refuses_out_of_range():
    with pytest.raises(ValueError):
        roce.pfc_for_priority(8)


def test_set_args_builder():
    assert roce.mlnx_qos_set_args("ens1np0", "dscp", [0, 0, 0, 1, 0, 0, 0, 0]) == [
        "-i", "ens1np0", "--trust", "dscp", "--pfc", "0,0,0,1,0,0,0,0"]
    assert roce.mlnx_qos_set_args("ens1np0", trust="pcp") == ["-i", "ens1np0", "--trust", "pcp"]
    assert roce.mlnx_qos_set_args("ens1np0", pfc=[0] * 8) == ["-i", "ens1np0", "--pfc", "0,0,0,0,0,0,0,0"]
    assert roce.mlnx_qos_set_args("ens1np0") == ["-i", "ens1np0"]


@pytest.mark.parametrize("kwargs", [
    {"iface": ""}, {"iface": "-i"}, {"iface": "../x"}, {"iface": "e", "trust": "cos"},
    {"iface": "e", "pfc": [0] * 7}, {"iface": "e", "pfc": [2] + [0] * 7},
])
def test_set_args_builder_refuses_bad_input(kwargs):
    with pytest.raises(ValueError):
        roce.mlnx_qos_set_args(**kwargs)


def test_ecn_read_present_absent_and_values(tmp_path):
    base = tmp_path / "class" / "net" / "ens1np0" / "ecn"
    (base / "roce_np" / "enable").mkdir(parents=True)
    (base / "roce_np" / "enable" / "3").write_text("1\n")
    assert roce.read_ecn(str(tmp_path), "ens1np0", 3) == {"np": True, "rp": None}
    (base / "roce_rp" / "enable").mkdir(parents=True)
    (base / "roce_rp" / "enable" / "3").write_text("0\n")
    assert roce.read_ecn(str(tmp_path), "ens1np0", 3) == {"np": True, "rp": False}
    assert roce.read_ecn(str(tmp_path), "ens9np0", 3) == {"np": None, "rp": None}
    assert roce.ecn_path("/sys", "ens1np0", "rp", 3) == "/sys/class/net/ens1np0/ecn/roce_rp/enable/3"


WANT = [0, 0, 0, 1, 0, 0, 0, 0]


@pytest.mark.parametrize("current, ecn, expected", [
    ({"trust": "dscp", "pfc": WANT, "ecn": {"np": True, "rp": True}}, True, {"trust": None, "pfc": None, "ecn": []}),
    ({"trust": "pcp", "pfc": WANT, "ecn": {"np": True, "rp": True}}, True, {"trust": "dscp", "pfc": None, "ecn": []}),
    ({"trust": "dscp", "pfc": [0] * 8, "ecn": {"np": True, "rp": True}}, True, {"trust": None, "pfc": WANT, "ecn": []}),
    ({"trust": "pcp", "pfc": [1] * 8, "ecn": {"np": False, "rp": True}}, True,
     {"trust": "dscp", "pfc": WANT, "ecn": ["np"]}),
    ({"trust": "dscp", "pfc": WANT, "ecn": {"np": False, "rp": False}}, False, {"trust": None, "pfc": None, "ecn": []}),
])
def test_plan_changes_only_the_difference(current, ecn, expected):
    change = roce.plan(current, "dscp", WANT, ecn)
    assert change == expected
    assert roce.plan_is_empty(change) == (expected == {"trust": None, "pfc": None, "ecn": []})
