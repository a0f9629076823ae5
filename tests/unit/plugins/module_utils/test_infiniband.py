# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/infiniband.py and tests/formats/infiniband.py over recorded output
(fixtures/infiniband/)."""

import os

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils import infiniband as ib
from ansible_collections.clusterforge.gpu.tests.formats.infiniband import parse_iblinkinfo

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "infiniband")


def load(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


def test_ibstat_tabs_down_and_slow_ports():
    ports = ib.parse_ibstat(load("ibstat-tabs-4x-cx7-one-down-one-slow.txt"))
    assert [(p["ca"], p["port"], p["state"], p["physical_state"], p["rate_gbps"], p["link_layer"]) for p in ports] == [
        ("mlx5_0", 1, "Active", "LinkUp", 400, "InfiniBand"),
        ("mlx5_1", 1, "Active", "LinkUp", 400, "InfiniBand"),
        ("mlx5_2", 1, "Active", "LinkUp", 200, "InfiniBand"),
        ("mlx5_3", 1, "Down", "Polling", 10, "InfiniBand"),
    ]
    assert ports[0]["ca_type"] == "MT4129" and ports[0]["firmware"] == "28.39.1002"
    assert ports[0]["base_lid"] == 0x80 and ports[0]["port_guid"] == "0x946dae03003c1a20"
    assert ports[3]["base_lid"] == 65535 and ports[3]["sm_lid"] == 0


def test_ibstat_tabs_equal_spaces():
    text = load("ibstat-tabs-4x-cx7-one-down-one-slow.txt")
    assert ib.parse_ibstat(text) == ib.parse_ibstat(text.replace("\t", "        "))


def test_ibstat_single_port_form_trailing_spaces_unknown_line():
    ports = ib.parse_ibstat(load("ibstat-ca-port-form.txt"))
    assert len(ports) == 1
    assert ports[0]["ca"] == "mlx5_0" and ports[0]["state"] == "Initializing" and ports[0]["rate_gbps"] == 400
    assert "ca_type" not in ports[0]


def test_ibstat_truncated_keeps_partial_port():
    ports = ib.parse_ibstat(load("ibstat-truncated.txt"))
    assert [p["ca"] for p in ports] == ["mlx5_0", "mlx5_1"]
    assert ports[1]["state"] == "Active" and ports[1]["physical_state"] is None and ports[1]["rate_gbps"] is None


def test_ibstatus_tabs_and_autodetect():
    text = load("ibstatus-tabs-2port-hdr-and-init.txt")
    ports = ib.parse_ibstatus(text)
    assert ports == ib.parse_ibstat(text)  # parse_ibstat detects the ibstatus format
    assert [(p["ca"], p["state"], p["physical_state"], p["rate_gbps"]) for p in ports] == [
        ("mlx5_0", "Active", "LinkUp", 200), ("mlx5_1", "Initializing", "LinkUp", 400)]
    assert ports[0]["base_lid"] == 0x80 and ports[0]["speed_name"] == "HDR" and ports[0]["width"] == "4X"


def test_empty_and_garbage():
    assert ib.parse_ibstat("") == []
    assert ib.parse_ibstat("ibpanic: [1] main: stat of IB device 'mlx5_9' failed\n") == []
    assert ib.parse_ibdiagnet("")["summary_found"] is False


@pytest.mark.parametrize("text,state", [("4: ACTIVE", "Active"), ("1: DOWN", "Down"), ("2: INIT", "Initializing"),
                                        ("Armed", "Armed"), ("3: ARMED", "Armed"), ("ACTIVE", "Active")])
def test_normalize_state(text, state):
    assert ib.normalize_state(text) == state


@pytest.mark.parametrize("text,rate", [("400 Gb/sec (4X NDR)", 400), ("2.5 Gb/sec (1X SDR)", 2.5), ("Rate: 56", 56),
                                       ("", None)])
def test_rate_to_gbps(text, rate):
    assert ib.rate_to_gbps(text) == rate


@pytest.mark.parametrize("name,lane", [("edr", 25), ("hdr", 50), ("ndr", 100), ("xdr", 200), ("NDR", 100), ("fdr", 14)])
def test_lane_speed_for_rate(name, lane):
    assert ib.lane_speed_for_rate(name) == lane


def test_lane_speed_unknown():
    with pytest.raises(ValueError):
        ib.lane_speed_for_rate("ultra")


def test_ibdiagnet2_speed_errors():
    r = ib.parse_ibdiagnet(load("ibdiagnet2-ndr-speed-errors.txt"))
    assert r["format"] == "ibdiagnet2" and r["summary_found"]
    assert [s["name"] for s in r["stages"]] == ["Discovery", "Lids Check", "Links Check", "Port Counters",
                                                "Speed / Width checks", "Temperature Sensing"]
    assert r["total_errors"] == 2 and r["total_warnings"] == 1
    assert r["stages"][3]["comment"] == "skipped by user request"
    errors = [m for m in r["messages"] if m["level"] == "error"]
    assert len(errors) == 3 and all(m["stage"] == "Speed / Width checks" for m in errors)
    assert "Unexpected actual link speed 50" in errors[1]["text"] and not errors[1]["text"].endswith(" ")
    warnings = [m for m in r["messages"] if m["level"] == "warning"]
    assert warnings == [{"level": "warning", "stage": "Discovery",
                         "text": "S946dae0300aa0001/N946dae0300aa0001 - No response for MAD VSGeneralInfo"}]
    assert r["log_file"] == "/var/tmp/ibdiagnet2/ibdiagnet2.log"


def test_ibdiagnet2_truncated_has_messages_but_no_summary():
    r = ib.parse_ibdiagnet(load("ibdiagnet2-truncated-no-summary.txt"))
    assert r["summary_found"] is False and r["stages"] == [] and r["total_errors"] == 0
    assert sum(1 for m in r["messages"] if m["level"] == "error") == 3


def test_ibdiagnet_legacy_columns_swapped():
    text = ("-I- Stages Status Report:\n"
            "    STAGE                                    Errors Warnings\n"
            "    Bad GUIDs/LIDs Check                     2      0     \n"
            "    Link State Active Check                  0      5     \n"
            "\n"
            "Please see /tmp/ibdiagnet.log for complete log\n")
    r = ib.parse_ibdiagnet(text)
    assert r["format"] == "ibdiagnet1"
    assert r["stages"] == [{"name": "Bad GUIDs/LIDs Check", "warnings": 0, "errors": 2, "comment": ""},
                           {"name": "Link State Active Check", "warnings": 5, "errors": 0, "comment": ""}]
    assert r["log_file"] == "/tmp/ibdiagnet.log"


def test_iblinkinfo_small():
    text = ("CA: node07 HCA-1:\n"
            "      0x946dae03003c1a20    128    1[  ] ==( 4X          100.0 Gbps Active/  LinkUp)==>       1    5[  ] \"cf-leaf01\" ( )\n"
            "Switch: 0x946dae0300aa0001 cf-leaf01:\n"
            "           1    2[  ] ==(                Down/ Polling)==>             [  ] \"\" ( )\n")
    links = parse_iblinkinfo(text)
    assert links[0]["rate_gbps"] == 400 and links[0]["node"] == "node07 HCA-1" and links[0]["peer_port"] == 5
    assert links[1]["node_type"] == "Switch" and links[1]["node"] == "cf-leaf01" and links[1]["state"] == "Down"
    assert links[1]["rate_gbps"] is None and links[1]["peer"] is None


def _sysfs_port(root, ca, port, files):
    path = root / ca / "ports" / str(port)
    (path / "counters").mkdir(parents=True)
    for name, text in files.items():
        (path / name).write_text(text + "\n")
    return path


def test_read_sysfs_ports_reads_states_rate_lid_and_only_the_counters_asked_for(tmp_path):
    """The kernel's format: state "4: ACTIVE", phys_state "5: LinkUp", rate "400 Gb/sec (4X NDR)", lid "0x12"."""
    _sysfs_port(tmp_path, "mlx5_0", 1, {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)",
                                        "link_layer": "InfiniBand", "lid": "0x12", "counters/symbol_error": "3",
                                        "counters/link_downed": "0", "counters/port_rcv_errors": "n/a"})
    _sysfs_port(tmp_path, "mlx5_1", 1, {"state": "1: DOWN", "phys_state": "2: Polling", "link_layer": "InfiniBand"})
    (tmp_path / "mlx5_0" / "fw_ver").write_text("28.39.1002\n")
    (tmp_path / "mlx5_0" / "ports" / "not-a-port").mkdir()
    ports = ib.read_sysfs_ports(str(tmp_path), ("symbol_error", "link_downed", "port_rcv_errors"))
    assert [(p["ca"], p["port"], p["state"], p["physical_state"]) for p in ports] == [
        ("mlx5_0", 1, "Active", "LinkUp"), ("mlx5_1", 1, "Down", "Polling")]
    assert ports[0]["rate_gbps"] == 400 and ports[0]["base_lid"] == 0x12 and ports[0]["firmware"] == "28.39.1002"
    assert ports[0]["counters"] == {"symbol_error": 3, "link_downed": 0}
    assert ports[1]["counters"] == {} and ports[1]["rate_gbps"] is None
    assert ib.read_sysfs_ports(str(tmp_path))[0]["counters"] == {}
