# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""roce_qos: reads with one mlnx_qos -i per interface, changes only the difference, honours check and diff mode,
reads back, and refuses a missing tool or missing ECN files before changing anything."""

import os
import re

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import roce_qos

FIX = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures", "roce")
WANT = "0,0,0,1,0,0,0,0"

with open(os.path.join(FIX, "mlnx_qos-i-dscp-pfc3-buffers-fw-dcbx.txt")) as _f:
    TEMPLATE = _f.read()


def render(trust, pfc):
    """The recorded output with this trust state and PFC enabled row."""
    text = re.sub(r"Priority trust state: \S+", "Priority trust state: %s" % trust, TEMPLATE)
    return re.sub(r"(\tenabled     )([01]   ){8}", lambda m: m.group(1) + "".join("%d   " % v for v in pfc), text)


class FakeNic(object):
    """mlnx_qos over a state per interface; ``sticky`` makes set commands do nothing (a NIC that refuses)."""

    def __init__(self, state, sticky=False):
        self.state = state
        self.sticky = sticky

    def __call__(self, argv, data):
        args = argv[1:]
        iface = args[args.index("-i") + 1]
        if iface not in self.state:
            return 1, "", "Netlink error: No such device\n"
        s = self.state[iface]
        if not self.sticky:
            if "--trust" in args:
                s["trust"] = args[args.index("--trust") + 1]
            if "--pfc" in args:
                s["pfc"] = [int(v) for v in args[args.index("--pfc") + 1].split(",")]
        return 0, render(s["trust"], s["pfc"]), ""


def sysfs(tmp_path, ifaces, value="0", prio=3):
    for iface in ifaces:
        for point in ("np", "rp"):
            d = tmp_path / "class" / "net" / iface / "ecn" / ("roce_%s" % point) / "enable"
            d.mkdir(parents=True, exist_ok=True)
            (d / str(prio)).write_text(value + "\n")
    return str(tmp_path)


def ecn_value(root, iface, point, prio=3):
    with open(os.path.join(root, "class", "net", iface, "ecn", "roce_%s" % point, "enable", str(prio))) as f:
        return f.read().strip()


def sets(tool):
    return [c[1:] for c in tool.calls if "--trust" in c or "--pfc" in c]


def test_nothing_differs_nothing_runs_but_the_reads(tmp_path):
    root = sysfs(tmp_path, ["ens1np0", "ens2np0"], "1")
    nic = FakeNic({"ens1np0": {"trust": "dscp", "pfc": [0, 0, 0, 1, 0, 0, 0, 0]},
                   "ens2np0": {"trust": "dscp", "pfc": [0, 0, 0, 1, 0, 0, 0, 0]}})
    tool = Tool(nic)
    r = run_module(roce_qos, {"interfaces": ["ens1np0", "ens2np0"], "sysfs_root": root}, tool)
    assert not r.get("failed") and r["changed"] is False and r["cmd"] == []
    assert tool.calls == [["/usr/bin/mlnx_qos", "-i", "ens1np0"], ["/usr/bin/mlnx_qos", "-i", "ens2np0"]]
    first = r["interfaces"][0]
    assert first["before"] == first["after"] == {"trust": "dscp", "pfc": [0, 0, 0, 1, 0, 0, 0, 0],
                                                 "ecn": {"np": True, "rp": True}}
    assert first["boot_argv"] == ["/usr/bin/mlnx_qos", "-i", "ens1np0", "--trust", "dscp", "--pfc", WANT]
    assert first["ecn_files"] == [os.path.join(root, "class/net/ens1np0/ecn/roce_np/enable/3"),
                                  os.path.join(root, "class/net/ens1np0/ecn/roce_rp/enable/3")]


def test_trust_only(tmp_path):
    root = sysfs(tmp_path, ["ens1np0"], "1")
    tool = Tool(FakeNic({"ens1np0": {"trust": "pcp", "pfc": [0, 0, 0, 1, 0, 0, 0, 0]}}))
    r = run_module(roce_qos, {"interfaces": ["ens1np0"], "sysfs_root": root}, tool)
    assert r["changed"] and r["interfaces"][0]["changes"] == ["trust"]
    assert sets(tool) == [["-i", "ens1np0", "--trust", "dscp"]]
    assert r["interfaces"][0]["after"]["trust"] == "dscp"
    assert tool.count("-i") == 3  # read, set, read back


def test_pfc_only_on_another_priority(tmp_path):
    root = sysfs(tmp_path, ["ens1np0"], "1", prio=5)
    tool = Tool(FakeNic({"ens1np0": {"trust": "dscp", "pfc": [0, 0, 0, 1, 0, 0, 0, 0]}}))
    r = run_module(roce_qos, {"interfaces": ["ens1np0"], "sysfs_root": root, "pfc_priority": 5}, tool)
    assert r["changed"] and r["interfaces"][0]["changes"] == ["pfc"]
    assert sets(tool) == [["-i", "ens1np0", "--pfc", "0,0,0,0,0,1,0,0"]]
    assert r["interfaces"][0]["after"]["pfc"] == [0, 0, 0, 0, 0, 1, 0, 0]


def test_both_and_ecn_in_one_command_per_interface(tmp_path):
    root = sysfs(tmp_path, ["ens1np0"], "0")
    tool = Tool(FakeNic({"ens1np0": {"trust": "pcp", "pfc": [0] * 8}}))
    r = run_module(roce_qos, {"interfaces": ["ens1np0"], "sysfs_root": root}, tool, diff=True)
    assert r["changed"] and r["interfaces"][0]["changes"] == ["trust", "pfc", "ecn_np", "ecn_rp"]
    assert sets(tool) == [["-i", "ens1np0", "--trust", "dscp", "--pfc", WANT]]
    assert r["cmd"] == ["/usr/bin/mlnx_qos -i ens1np0 --trust dscp --pfc " + WANT]
    assert ecn_value(root, "ens1np0", "np") == "1" and ecn_value(root, "ens1np0", "rp") == "1"
    assert r["diff"]["before"]["ens1np0"]["trust"] == "pcp"
    assert r["diff"]["after"]["ens1np0"] == {"trust": "dscp", "pfc": [0, 0, 0, 1, 0, 0, 0, 0],
                                             "ecn": {"np": True, "rp": True}}


def test_check_mode_reads_and_predicts_but_changes_nothing(tmp_path):
    root = sysfs(tmp_path, ["ens1np0"], "0")
    nic = FakeNic({"ens1np0": {"trust": "pcp", "pfc": [0] * 8}})
    tool = Tool(nic)
    r = run_module(roce_qos, {"interfaces": ["ens1np0"], "sysfs_root": root}, tool, check_mode=True, diff=True)
    assert r["changed"] and sets(tool) == [] and tool.calls == [["/usr/bin/mlnx_qos", "-i", "ens1np0"]]
    assert nic.state["ens1np0"] == {"trust": "pcp", "pfc": [0] * 8}
    assert ecn_value(root, "ens1np0", "np") == "0"
    assert r["cmd"] == ["/usr/bin/mlnx_qos -i ens1np0 --trust dscp --pfc " + WANT]
    assert r["interfaces"][0]["after"] == {"trust": "dscp", "pfc": [0, 0, 0, 1, 0, 0, 0, 0],
                                           "ecn": {"np": True, "rp": True}}
    assert r["diff"]["before"]["ens1np0"]["pfc"] == [0] * 8


def test_a_nic_that_does_not_keep_the_setting_fails(tmp_path):
    root = sysfs(tmp_path, ["ens1np0"], "1")
    tool = Tool(FakeNic({"ens1np0": {"trust": "pcp", "pfc": [0, 0, 0, 1, 0, 0, 0, 0]}}, sticky=True))
    r = run_module(roce_qos, {"interfaces": ["ens1np0"], "sysfs_root": root}, tool)
    assert r["failed"] and "did not keep the wanted QoS (still differs: trust)" in r["msg"]


def test_missing_tool_is_refused_naming_the_package(tmp_path):
    tool = Tool(FakeNic({}), missing=["mlnx_qos"])
    r = run_module(roce_qos, {"interfaces": ["ens1np0"], "sysfs_root": str(tmp_path)}, tool)
    assert r["failed"] and tool.calls == []
    assert r["msg"].startswith("mlnx_qos not found on this host") and "mlnx-tools" in r["msg"] and "MLNX_OFED" in r["msg"]


def test_missing_ecn_files_are_refused_before_any_change(tmp_path):
    root = sysfs(tmp_path, ["ens1np0"], "1")  # ens2np0 has no ECN files
    nic = FakeNic({"ens1np0": {"trust": "pcp", "pfc": [0] * 8}, "ens2np0": {"trust": "pcp", "pfc": [0] * 8}})
    tool = Tool(nic)
    r = run_module(roce_qos, {"interfaces": ["ens1np0", "ens2np0"], "sysfs_root": root}, tool)
    assert r["failed"] and "ens2np0: ECN cannot be set" in r["msg"] and "ecn: false" in r["msg"]
    assert sets(tool) == [] and nic.state["ens1np0"]["trust"] == "pcp"


def test_ecn_false_leaves_ecn_and_needs_no_files(tmp_path):
    tool = Tool(FakeNic({"ens1np0": {"trust": "dscp", "pfc": [0, 0, 0, 1, 0, 0, 0, 0]}}))
    r = run_module(roce_qos, {"interfaces": ["ens1np0"], "sysfs_root": str(tmp_path), "ecn": False}, tool)
    assert not r.get("failed") and r["changed"] is False and r["interfaces"][0]["ecn_files"] == []


def test_unreadable_output_fails_with_the_command(tmp_path):
    tool = Tool(lambda argv, data: (0, "Netlink error: Operation not supported\n", ""))
    r = run_module(roce_qos, {"interfaces": ["ens1np0"], "sysfs_root": str(tmp_path)}, tool)
    assert r["failed"] and r["msg"].startswith("ens1np0: no 'PFC configuration' table") and "mlnx_qos -i ens1np0" in r["cmd"]


@pytest.mark.parametrize("args, msg", [
    ({"interfaces": []}, "interfaces is empty"),
    ({"interfaces": ["-x"]}, "not an interface name"),
    ({"interfaces": ["ens1np0"], "timeout_seconds": 0}, "timeout_seconds must be a positive"),
])
def test_bad_input_is_refused_before_anything_runs(args, msg):
    tool = Tool(FakeNic({}))
    r = run_module(roce_qos, args, tool)
    assert r["failed"] and msg in r["msg"] and tool.calls == []


def test_every_mlnx_qos_run_has_the_time_limit(tmp_path):
    from unittest import mock
    from ansible_collections.clusterforge.gpu.plugins.module_utils import _runner

    root = sysfs(tmp_path, ["ens1np0"], "0")
    tool = Tool(FakeNic({"ens1np0": {"trust": "pcp", "pfc": [0] * 8}}))
    with mock.patch.object(_runner, "time_limit_seconds", wraps=_runner.time_limit_seconds) as limit:
        r = run_module(roce_qos, {"interfaces": ["ens1np0"], "sysfs_root": root, "timeout_seconds": 17}, tool)
    assert r["changed"] and len(tool.calls) == 3
    assert [c.args for c in limit.call_args_list] == [("mlnx_qos", 17)] * 3
