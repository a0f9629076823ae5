# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ib_port_info over recorded ibstat output and a fake sysfs tree."""

import os

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import ib_port_info

FIX = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures", "infiniband")
IBSTAT = open(os.path.join(FIX, "ibstat-tabs-4x-cx7-one-down-one-slow.txt")).read()


def ibstat_tool(text=IBSTAT, rc=0, err=""):
    return Tool([(("ibstat",), (rc, text, err))])


def make_sysfs(root, ports):
    """ports: {ca: (state, phys, rate, link_layer)}"""
    for ca, (state, phys, rate, ll) in ports.items():
        d = root / "class" / "infiniband" / ca
        p = d / "ports" / "1"
        p.mkdir(parents=True)
        (d / "fw_ver").write_text("28.39.1002\n")
        (d / "hca_type").write_text("MT4129\n")
        (p / "state").write_text(state + "\n")
        (p / "phys_state").write_text(phys + "\n")
        (p / "rate").write_text(rate + "\n")
        (p / "link_layer").write_text(ll + "\n")
        (p / "lid").write_text("0x80\n")
    return str(root)


def test_ibstat_ports_and_active_ports():
    tool = ibstat_tool()
    r = run_module(ib_port_info, {}, tool)
    assert r["changed"] is False and r["source"] == "ibstat"
    assert [p["name"] for p in r["ports"]] == ["mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"]
    assert r["active_ports"] == ["mlx5_0:1", "mlx5_1:1", "mlx5_2:1"]
    assert r["mismatched_ports"] == []
    assert tool.calls == [["/usr/bin/ibstat"]] and r["cmd"] == "/usr/bin/ibstat"


def test_expected_rate_mismatch_reported_not_failed():
    r = run_module(ib_port_info, {"expected_rate_gbps": 400}, ibstat_tool())
    assert not r.get("failed")
    assert [(m["name"], m["rate_gbps"], m["state"]) for m in r["mismatched_ports"]] == [
        ("mlx5_2:1", 200, "Active"), ("mlx5_3:1", 10, "Down")]


def test_fail_on_mismatch():
    r = run_module(ib_port_info, {"expected_rate_gbps": 400, "fail_on_mismatch": True}, ibstat_tool())
    assert r["failed"] and "mlx5_2:1 (Active/LinkUp, 200 Gb/s)" in r["msg"] and "mlx5_3:1 (Down/Polling" in r["msg"]


def test_fail_on_mismatch_passes_when_all_good():
    text = IBSTAT.replace("Rate: 200", "Rate: 400")
    text = text[:text.index("CA 'mlx5_3'")]
    r = run_module(ib_port_info, {"expected_rate_gbps": 400, "fail_on_mismatch": True}, ibstat_tool(text))
    assert not r.get("failed") and r["mismatched_ports"] == [] and len(r["active_ports"]) == 3


def test_fail_on_mismatch_requires_expected_rate():
    r = run_module(ib_port_info, {"fail_on_mismatch": True}, ibstat_tool())
    assert r["failed"] and "expected_rate_gbps" in r["msg"]


def test_link_layer_filter_excludes_ethernet():
    text = IBSTAT.replace("CA 'mlx5_1'", "CA 'mlx5_bond_0'").replace(
        "Link layer: InfiniBand\nCA 'mlx5_2'", "Link layer: Ethernet\nCA 'mlx5_2'")
    r = run_module(ib_port_info, {}, ibstat_tool(text))
    assert "mlx5_bond_0:1" not in r["active_ports"]
    r = run_module(ib_port_info, {"link_layer": "any"}, ibstat_tool(text))
    assert "mlx5_bond_0:1" in r["active_ports"]
    r = run_module(ib_port_info, {"link_layer": "Ethernet"}, ibstat_tool(text))
    assert r["active_ports"] == ["mlx5_bond_0:1"]


def test_sysfs_source(tmp_path):
    root = make_sysfs(tmp_path, {"mlx5_0": ("4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand"),
                                 "mlx5_1": ("1: DOWN", "2: Polling", "10 Gb/sec (4X SDR)", "InfiniBand")})
    tool = ibstat_tool()
    r = run_module(ib_port_info, {"source": "sysfs", "sysfs_root": root}, tool)
    assert r["source"] == "sysfs" and tool.calls == [] and "cmd" not in r
    assert [(p["name"], p["state"], p["physical_state"], p["rate_gbps"], p["ca_type"], p["base_lid"])
            for p in r["ports"]] == [("mlx5_0:1", "Active", "LinkUp", 400, "MT4129", 128),
                                     ("mlx5_1:1", "Down", "Polling", 10, "MT4129", 128)]
    assert r["active_ports"] == ["mlx5_0:1"]


def test_auto_falls_back_to_sysfs_without_ibstat(tmp_path):
    root = make_sysfs(tmp_path, {"mlx5_0": ("4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)", "InfiniBand")})
    r = run_module(ib_port_info, {"sysfs_root": root}, Tool([], missing=("ibstat",)))
    assert r["source"] == "sysfs" and r["ports"][0]["rate_gbps"] == 200


def test_ibstat_source_required_and_missing():
    r = run_module(ib_port_info, {"source": "ibstat"}, Tool([], missing=("ibstat",)))
    assert r["failed"] and "ibstat was not found" in r["msg"]


def test_sysfs_absent_fails(tmp_path):
    r = run_module(ib_port_info, {"source": "sysfs", "sysfs_root": str(tmp_path)}, Tool([]))
    assert r["failed"] and "class/infiniband" in r["msg"]


def test_ibstat_rc_nonzero():
    r = run_module(ib_port_info, {}, ibstat_tool("", 255, "ibpanic: [42] main: stat of IB device 'mlx5_9' failed"))
    assert r["failed"] and r["rc"] == 255 and r["cmd"] == "/usr/bin/ibstat"


def test_ibstat_unparseable_fails():
    r = run_module(ib_port_info, {}, ibstat_tool("something entirely different\n"))
    assert r["failed"] and "could not parse" in r["msg"]


@pytest.mark.parametrize("check_mode", [True, False])
def test_never_changed(check_mode):
    assert run_module(ib_port_info, {}, ibstat_tool(), check_mode=check_mode)["changed"] is False


def test_auto_with_an_ibstat_path_that_does_not_exist_fails_rather_than_use_sysfs(tmp_path):
    # the user named the tool: a wrong path is an error, not a reason to read sysfs instead
    root = make_sysfs(tmp_path, {"mlx5_0": ("4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)", "InfiniBand")})
    r = run_module(ib_port_info, {"sysfs_root": root, "ibstat_path": "/opt/ofed/ibstat"},
                   Tool([], missing=("/opt/ofed/ibstat",)))
    assert r["failed"] and "ibstat was not found at /opt/ofed/ibstat (ibstat_path)" in r["msg"]


def add_gids(root, ca, entries):
    """entries: {index: (type or None for unset, gid)} under ports/1 of ca."""
    p = root / "class" / "infiniband" / ca / "ports" / "1"
    (p / "gid_attrs" / "types").mkdir(parents=True)
    (p / "gids").mkdir()
    for index, (kind, gid) in entries.items():
        (p / "gid_attrs" / "types" / str(index)).write_text((kind + "\n") if kind else "")
        (p / "gids" / str(index)).write_text(gid + "\n")


# Indexes as a ConnectX port shows them with one IPv4 address: 0/1 the link-local IPv6 GID (RoCE v1/v2), 2/3
# the IPv4-mapped GID (v1/v2). Unset entries read empty here (EINVAL on a real port).
ROCE_GIDS = {
    0: ("IB/RoCE v1", "fe80:0000:0000:0000:5aa2:e1ff:fea7:820e"),
    1: ("RoCE v2", "fe80:0000:0000:0000:5aa2:e1ff:fea7:820e"),
    2: ("IB/RoCE v1", "0000:0000:0000:0000:0000:ffff:0a4e:0015"),
    3: ("RoCE v2", "0000:0000:0000:0000:0000:ffff:0a4e:0015"),
    4: (None, "0000:0000:0000:0000:0000:0000:0000:0000"),
}


def test_roce_v2_ipv4_gid_index_from_sysfs(tmp_path):
    root = make_sysfs(tmp_path, {"mlx5_0": ("4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "Ethernet"),
                                 "mlx5_1": ("4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "Ethernet"),
                                 "mlx5_2": ("4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", "InfiniBand")})
    add_gids(tmp_path, "mlx5_0", ROCE_GIDS)
    # No IPv4 address on mlx5_1's interface: only the link-local GIDs.
    add_gids(tmp_path, "mlx5_1", dict((i, ROCE_GIDS[i]) for i in (0, 1)))
    r = run_module(ib_port_info, {"source": "sysfs", "sysfs_root": root, "link_layer": "Ethernet"}, Tool([]))
    by_name = dict((p["name"], p) for p in r["ports"])
    assert by_name["mlx5_0:1"]["roce_v2_ipv4_gid_index"] == 3
    assert by_name["mlx5_1:1"]["roce_v2_ipv4_gid_index"] is None
    assert "roce_v2_ipv4_gid_index" not in by_name["mlx5_2:1"]


def test_roce_gid_index_read_from_sysfs_with_ibstat_source(tmp_path):
    text = IBSTAT.replace("Link layer: InfiniBand", "Link layer: Ethernet")
    assert "Link layer: Ethernet" in text
    root = tmp_path
    for ca in ("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"):
        (root / "class" / "infiniband" / ca / "ports" / "1").mkdir(parents=True)
    add_gids(root, "mlx5_0", ROCE_GIDS)
    r = run_module(ib_port_info, {"sysfs_root": str(root), "link_layer": "Ethernet"}, ibstat_tool(text))
    assert r["source"] == "ibstat"
    assert [p.get("roce_v2_ipv4_gid_index") for p in r["ports"]] == [3, None, None, None]
