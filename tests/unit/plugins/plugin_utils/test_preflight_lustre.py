"""Preflight rules for Lustre (servers, clients, LNet, layouts, tunings), one test per rule at least.

The sound inventory is a small production design: mds01 serves a combined MGS+MDT0, oss01 and oss02 two OSTs each
(four OSTs of file system ``lfs``), the GPU nodes and the head node mount it over o2ib0 with 16 MiB RPCs.
"""

import copy

import pytest

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import preflight_common
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import Inventory
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_lustre import (
    check, fsname_problem, layout_problems, nid_problem, parse_mgs_nids,
)

GROUPS = {
    "all": ["head01", "gpu01", "gpu02", "mds01", "oss01", "oss02"],
    "slurm_controller": ["head01"],
    "gpu_nodes": ["gpu01", "gpu02"],
    "lustre_mds": ["mds01"],
    "lustre_oss": ["oss01", "oss02"],
    "lustre_clients": ["gpu01", "gpu02", "head01"],
}
ADDR = {"head01": 10, "gpu01": 21, "gpu02": 22, "mds01": 31, "oss01": 41, "oss02": 42}
MGS = ["10.2.0.31@o2ib"]
CLIENTS = ("gpu01", "gpu02", "head01")
ON = {"lustre_enabled": True}


def ost(device, index, fsname="lfs", **kw):
    t = {"device": device, "type": "ost", "fsname": fsname, "index": index, "mgs_nids": list(MGS)}
    t.update(kw)
    return t


def sound():
    hv = {}
    for host, n in ADDR.items():
        hv[host] = {"cluster_name": "testcl", "cluster_fabric_type": "infiniband",
                    "cluster_mgmt_network_cidr": "10.1.0.0/24", "cluster_fabric_network_cidr": "10.2.0.0/24",
                    "cluster_mgmt_ip": "10.1.0.%d" % n, "cluster_fabric_ip": "10.2.0.%d" % n}
    hv["mds01"].update({
        "lustre_server_targets": [{"device": "/dev/disk/by-id/nvme-mdt0", "type": "mgs_mdt", "fsname": "lfs",
                                   "index": 0}],
        "lustre_server_params": {"obdfilter.*.brw_size": 16},
    })
    hv["oss01"]["lustre_server_targets"] = [ost("/dev/md0", 0), ost("/dev/md1", 1)]
    hv["oss02"]["lustre_server_targets"] = [ost("/dev/md0", 2), ost("/dev/md1", 3)]
    for host in CLIENTS:
        hv[host].update({
            "lustre_client_mounts": [{"fsname": "lfs", "mgs_nids": list(MGS), "path": "/mnt/lfs"}],
            "lustre_client_server_brw_size_mb": 16,
            "lustre_client_tunings_extra": {"osc.*.max_pages_per_rpc": 4096, "osc.*.max_dirty_mb": 2048},
            "lustre_client_directories": [{"path": "/mnt/lfs/datasets", "kind": "dataset"},
                                          {"path": "/mnt/lfs/checkpoints", "kind": "checkpoint", "mode": "1777"}],
            "lustre_client_dataset_layout": {"stripe_count": -1, "stripe_size": "16M"},
        })
    return hv


def run(hv, opts=None, groups=None):
    return check(Inventory(hv, groups or GROUPS), ON if opts is None else opts)


def mutated(**hosts):
    """The sound inventory with {host: {var: value}} set (None deletes the variable)."""
    hv = sound()
    for host, values in hosts.items():
        for var, value in values.items():
            if value is None:
                hv[host].pop(var, None)
            else:
                hv[host][var] = value
    return hv


def clients(**values):
    return dict((host, dict(values)) for host in CLIENTS)


def has(out, *parts):
    """Some error contains every part; returns it."""
    for err in out:
        if all(p in err for p in parts):
            return err
    raise AssertionError("no error with %r in %r" % (parts, out))


def only(out, *parts):
    """Exactly one error, containing every part."""
    assert len(out) == 1, out
    return has(out, *parts)


# --------------------------------------------------------------------------------------------- sound values
def test_sound_inventory_passes():
    assert run(sound()) == []


def test_role_defaults_alone_pass():
    hv = dict((h, {"cluster_fabric_type": "infiniband"}) for h in ADDR)
    assert run(hv) == []


def test_lab_like_tcp_inventory_with_progressive_layout_over_fewer_osts_passes():
    hv = sound()
    for host in hv:
        hv[host]["cluster_fabric_type"] = "ethernet"
        hv[host]["lustre_server_lnet_networks"] = [{"net": "tcp0", "interfaces": ["eth1"]}]
        hv[host]["lustre_client_lnet_networks"] = [{"net": "tcp0", "interfaces": ["eth1"]}]
    hv["mds01"]["cluster_lustre_mgs_nids"] = ["10.2.0.31@tcp"]
    hv["oss01"]["lustre_server_targets"] = [ost("/srv/lustre-devs/ost0", 0, mgs_nids=["10.2.0.31@tcp"])]
    hv["oss02"]["lustre_server_targets"] = []
    for host in CLIENTS:
        hv[host]["lustre_client_mounts"] = [{"fsname": "lfs", "mgs_nids": ["10.2.0.31@tcp0"], "path": "/mnt/lfs"}]
        # PFL middle component of 4 over 1 OST: Lustre caps each component, the layout is a template.
        hv[host]["lustre_client_checkpoint_layout"] = {"components": [
            {"end": "64M", "stripe_count": 1}, {"end": "4G", "stripe_count": 4, "stripe_size": "16M"},
            {"end": -1, "stripe_count": -1, "stripe_size": "16M"}]}
    assert run(hv) == []


def test_ha_failover_mgs_and_servicenodes_pass():
    hv = sound()
    nids = ["10.2.0.31@o2ib", "10.2.0.32@o2ib"]
    hv["mds01"]["lustre_server_targets"] = [
        {"device": "/dev/mapper/mgt", "type": "mgs", "servicenodes": nids},
        {"device": "/dev/mapper/mdt0", "type": "mdt", "fsname": "lfs", "index": 0, "mgs_nids": nids,
         "servicenodes": nids}]
    hv["oss01"]["lustre_server_targets"] = [ost("/dev/md0", 0, mgs_nids=nids), ost("/dev/md1", 1, mgs_nids=nids)]
    hv["oss02"]["lustre_server_targets"] = [ost("/dev/md0", 2, mgs_nids=nids), ost("/dev/md1", 3, mgs_nids=nids)]
    for host in CLIENTS:
        hv[host]["lustre_client_mounts"] = [{"fsname": "lfs", "mgs_nids": nids, "path": "/mnt/lfs"}]
    assert run(hv) == []


def test_multi_rail_nids_of_one_node_in_any_order_pass():
    hv = sound()
    for host in ("oss01", "oss02", "mds01"):
        hv[host]["lustre_server_lnet_networks"] = [{"net": "o2ib0", "interfaces": ["ib0", "ib1"]}]
    for t in hv["oss01"]["lustre_server_targets"] + hv["oss02"]["lustre_server_targets"]:
        t["mgs_nids"] = ["10.2.0.31@o2ib,10.2.1.31@o2ib"]
    for host in CLIENTS:
        hv[host]["lustre_client_mounts"][0]["mgs_nids"] = ["10.2.1.31@o2ib0,10.2.0.31@o2ib0"]
    assert run(hv) == []


def test_an_external_file_system_mounted_beside_ours_passes():
    hv = sound()
    for host in CLIENTS:
        hv[host]["lustre_client_mounts"].append({"fsname": "home", "mgs_nids": ["10.9.0.5@o2ib"], "path": "/home"})
    assert run(hv) == []


def test_lustre_disabled_and_no_lustre_variables_skips_every_rule():
    hv = dict((h, {}) for h in ADDR)
    hv["gpu01"]["cluster_fabric_type"] = "ethernet"  # the default o2ib0 would be refused were Lustre on
    assert run(hv, {"lustre_enabled": False}) == []
    assert run(hv, {}) != []  # lustre_enabled defaults to true


def test_lustre_disabled_but_lustre_variables_set_still_checks():
    hv = sound()
    hv["oss02"]["lustre_server_targets"][0]["index"] = 1
    assert run(hv, {"lustre_enabled": False}) != []


# -------------------------------------------------------------------------------------------------- fsname
@pytest.mark.parametrize("value,why", [
    ("scratch01", "has 9 characters"), ("lfs.1", "only letters, digits"), ("", "is empty"), (5, "must be a string"),
])
def test_fsname_problem(value, why):
    assert why in fsname_problem(value)
    assert fsname_problem("lfs_01-a") is None


def test_target_fsname_of_nine_characters():
    hv = sound()
    hv["oss02"]["lustre_server_targets"][1]["fsname"] = "scratch01"
    has(run(hv), "oss02: lustre_server_targets[1].fsname: 'scratch01' has 9 characters")


def test_client_mount_fsname_invalid():
    out = run(mutated(**clients(lustre_client_mounts=[{"fsname": "lfs/x", "mgs_nids": MGS, "path": "/mnt/lfs"}])))
    has(out, "gpu01: lustre_client_mounts[0].fsname: 'lfs/x' is not a Lustre file system name")


def test_cluster_lustre_fsname_checked_and_matched_against_targets():
    has(run(mutated(mds01={"cluster_lustre_fsname": "toolongname"})), "mds01: cluster_lustre_fsname:",
        "has 11 characters")
    has(run(mutated(oss01={"cluster_lustre_fsname": "lfs2"})),
        "oss01: lustre_server_targets[0].fsname: lfs differs from cluster_lustre_fsname lfs2")


# ------------------------------------------------------------------------------------------------- indexes
def test_duplicate_ost_index_across_two_oss_hosts():
    hv = sound()
    hv["oss02"]["lustre_server_targets"][0]["index"] = 1
    only(run(hv), "oss02: lustre_server_targets[0].index: OST index 1 of file system lfs is also on oss01 "
                  "(lustre_server_targets[1], /dev/md1)")


def test_duplicate_ost_index_on_one_host():
    hv = sound()
    hv["oss01"]["lustre_server_targets"][1]["index"] = 0
    has(run(hv), "oss01: lustre_server_targets[1].index: OST index 0 of file system lfs is also "
                 "lustre_server_targets[0] on this host")


def test_same_index_in_two_file_systems_is_fine():
    hv = sound()
    hv["mds01"]["lustre_server_targets"].append({"device": "/dev/nvme1n1", "type": "mdt", "fsname": "proj",
                                                 "index": 0, "mgs_nids": MGS})
    hv["oss02"]["lustre_server_targets"].append(ost("/dev/md2", 0, fsname="proj"))
    assert run(hv) == []


def test_duplicate_mdt_index():
    hv = sound()
    hv["oss01"]["lustre_server_targets"].append({"device": "/dev/nvme0n1", "type": "mdt", "fsname": "lfs",
                                                 "index": 0, "mgs_nids": MGS})
    has(run(hv), "oss01: lustre_server_targets[2].index: MDT index 0 of file system lfs is also on mds01")


@pytest.mark.parametrize("ttype,index,msg", [
    ("ost", 70000, "OST index 70000 is outside Lustre's range 0-65534"),
    ("ost", -1, "OST index -1 is outside"),
    ("mdt", 300, "MDT index 300 is outside 0-255"),
    ("ost", "one", "must be a whole number (the target's index), got string 'one'"),
    ("ost", True, "must be a whole number"),
])
def test_index_range_and_type(ttype, index, msg):
    hv = sound()
    t = hv["oss02"]["lustre_server_targets"][1]
    t.update(type=ttype, index=index)
    has(run(hv), "oss02: lustre_server_targets[1].index: " + msg)


def test_index_as_a_string_of_digits_is_accepted():
    hv = sound()
    hv["oss02"]["lustre_server_targets"][1]["index"] = "3"
    assert run(hv) == []


def test_mgs_mdt_index_must_be_zero():
    hv = sound()
    hv["mds01"]["lustre_server_targets"][0]["index"] = 1
    has(run(hv), "mds01: lustre_server_targets[0].index: a combined mgs_mdt target is MDT0 and must have index 0")


def test_missing_index_and_fsname():
    hv = sound()
    del hv["oss02"]["lustre_server_targets"][1]["index"]
    del hv["oss02"]["lustre_server_targets"][0]["fsname"]
    out = run(hv)
    has(out, "oss02: lustre_server_targets[1]: has no index")
    has(out, "oss02: lustre_server_targets[0]: has no fsname")


def test_mdt0_missing():
    hv = sound()
    hv["mds01"]["lustre_server_targets"] = [{"device": "/dev/sda", "type": "mgs"},
                                            {"device": "/dev/sdb", "type": "mdt", "fsname": "lfs", "index": 1,
                                             "mgs_nids": MGS}]
    has(run(hv), "inventory: lustre_server_targets: file system lfs has OSTs but no MDT0")


def test_file_system_without_ost():
    hv = sound()
    hv["oss01"]["lustre_server_targets"] = []
    hv["oss02"]["lustre_server_targets"] = []
    has(run(hv), "inventory: lustre_server_targets: file system lfs has no OST on any server")


def test_two_mgs():
    hv = sound()
    hv["oss01"]["lustre_server_targets"].append({"device": "/dev/sdz", "type": "mgs"})
    has(run(hv), "inventory: lustre_server_targets: 2 MGS targets (mds01 /dev/disk/by-id/nvme-mdt0, oss01 /dev/sdz)")


def test_no_mgs_while_targets_name_one_of_ours():
    hv = sound()
    hv["mds01"]["lustre_server_targets"][0].update(type="mdt", mgs_nids=MGS)
    has(run(hv), "inventory: lustre_server_targets: no host serves an MGS")


def test_an_external_mgs_is_accepted():
    hv = sound()
    ext = ["10.9.0.1@o2ib"]
    hv["mds01"]["lustre_server_targets"][0].update(type="mdt", mgs_nids=ext)
    for host in ("oss01", "oss02"):
        for t in hv[host]["lustre_server_targets"]:
            t["mgs_nids"] = ext
    for host in CLIENTS:
        hv[host]["lustre_client_mounts"][0]["mgs_nids"] = ext
    assert run(hv) == []


# ------------------------------------------------------------------------------------------------- devices
def test_relative_device_path():
    hv = sound()
    hv["oss01"]["lustre_server_targets"][0]["device"] = "sdb"
    only(run(hv), "oss01: lustre_server_targets[0].device: 'sdb' is not an absolute path")


def test_one_device_used_twice_on_a_host():
    hv = sound()
    hv["oss01"]["lustre_server_targets"][1]["device"] = "/dev/md0"
    only(run(hv), "oss01: lustre_server_targets[1].device: /dev/md0 is also the device of lustre_server_targets[0]")


def test_device_with_a_space_or_missing():
    hv = sound()
    hv["oss01"]["lustre_server_targets"][0]["device"] = "/dev/md0 /dev/md1"
    del hv["oss01"]["lustre_server_targets"][1]["device"]
    out = run(hv)
    has(out, "oss01: lustre_server_targets[0].device: '/dev/md0 /dev/md1' is not a device path")
    has(out, "oss01: lustre_server_targets[1]: has no device")


def test_target_type_not_supported():
    hv = sound()
    hv["mds01"]["lustre_server_targets"][0]["type"] = "mgs+mdt"
    has(run(hv), "mds01: lustre_server_targets[0].type: 'mgs+mdt' is not a target type the role supports")


def test_unknown_target_option():
    hv = sound()
    hv["oss01"]["lustre_server_targets"][0]["servicenode"] = ["10.2.0.41@o2ib"]
    only(run(hv), "oss01: lustre_server_targets[0]: 'servicenode' is not a target option")


def test_servicenodes_and_failnodes_together():
    hv = sound()
    hv["oss01"]["lustre_server_targets"][0].update(servicenodes=["10.2.0.41@o2ib"], failnodes=["10.2.0.42@o2ib"])
    only(run(hv), "oss01: lustre_server_targets[0]: servicenodes and failnodes are mutually exclusive")


def test_servicenodes_nids_checked():
    hv = sound()
    hv["oss01"]["lustre_server_targets"][0]["servicenodes"] = ["10.2.0.41"]
    has(run(hv), "oss01: lustre_server_targets[0].servicenodes[0]: '10.2.0.41' has no LNet network")


def test_servicenodes_without_this_host():
    hv = sound()
    hv["oss01"]["lustre_server_targets"][0]["servicenodes"] = ["10.2.0.42@o2ib"]
    only(run(hv), "oss01: lustre_server_targets[0].servicenodes: names oss02 but not this host (oss01)")
    hv["oss01"]["lustre_server_targets"][0]["servicenodes"] = ["10.2.0.41@o2ib", "10.2.0.42@o2ib"]
    assert run(hv) == []


def test_failnodes_with_this_host():
    hv = sound()
    hv["oss01"]["lustre_server_targets"][0]["failnodes"] = ["10.2.0.41@o2ib"]
    only(run(hv), "oss01: lustre_server_targets[0].failnodes: includes this host's own NID")
    hv["oss01"]["lustre_server_targets"][0]["failnodes"] = ["10.2.0.42@o2ib"]
    assert run(hv) == []


def test_targets_on_a_host_outside_the_server_groups():
    only(run(mutated(gpu01={"lustre_server_targets": [ost("/dev/nvme1n1", 9)]})),
         "gpu01: lustre_server_targets: this host is in neither lustre_mds nor lustre_oss")


def test_backfstype():
    hv = sound()
    hv["oss01"]["lustre_server_targets"][0]["backfstype"] = "ext4"
    only(run(hv), "lustre_server_targets[0].backfstype: 'ext4' is not a backing file system")


def test_mount_point_relative_or_shared():
    hv = sound()
    hv["oss01"]["lustre_server_targets"][0]["mountpoint"] = "mnt/ost0"
    hv["oss01"]["lustre_server_targets"][1]["mountpoint"] = "/mnt/lustre/lfs-ost0"
    hv["oss02"]["lustre_server_targets"][1]["mountpoint"] = "/mnt/lustre/lfs-ost2"  # the default of target 0
    out = run(hv)
    has(out, "oss01: lustre_server_targets[0].mountpoint: 'mnt/ost0' is not an absolute mount point")
    has(out, "oss02: lustre_server_targets[1].mountpoint: /mnt/lustre/lfs-ost2 is also the mount point of "
             "lustre_server_targets[0]")
    assert len(out) == 2, out


def test_params_and_options_strings():
    hv = sound()
    hv["oss01"]["lustre_server_targets"][0].update(params=["sys.timeout 40"], mount_options="noatime, x")
    out = run(hv)
    has(out, "lustre_server_targets[0].params[0]: 'sys.timeout 40' is not key=value")
    has(out, "lustre_server_targets[0].mount_options: 'noatime, x' is not a mount option list")


def test_server_mount_root_and_options():
    out = run(mutated(oss01={"lustre_server_mount_root": "mnt", "lustre_server_mount_options": "a b"}))
    has(out, "oss01: lustre_server_mount_root: 'mnt' is not an absolute directory")
    has(out, "oss01: lustre_server_mount_options: 'a b' is not a mount option list")


# ---------------------------------------------------------------------------------------------------- NIDs
@pytest.mark.parametrize("nid,why", [
    ("10.2.0.31", "has no LNet network"), ("10.2.0.31@ib0", "the network 'ib0' of NID"),
    ("10.2.0.300@o2ib", "is not an IPv4 address"), ("10.2.0@tcp", "is not an IPv4 address"),
    ("a@b@tcp", "several '@'"), ("", "is empty"), ("abc@gni", "must be a number"), (5, "must be a string"),
])
def test_nid_problem(nid, why):
    assert why in nid_problem(nid)


@pytest.mark.parametrize("nid", ["10.2.0.31@o2ib", "10.2.0.31@o2ib1", "10.2.0.31@tcp0", "mds01@o2ib", "12@gni",
                                 "mds01.cluster.example.com@tcp"])
def test_nid_accepted(nid):
    assert nid_problem(nid) is None


def test_parse_mgs_nids_nodes():
    assert parse_mgs_nids(["10.0.0.1@o2ib0,10.0.1.1@o2ib", "10.0.0.2@o2ib"], "x") == (
        [], [["10.0.0.1@o2ib", "10.0.1.1@o2ib"], ["10.0.0.2@o2ib"]])
    assert parse_mgs_nids(["10.0.0.1@tcp:10.0.0.2@tcp"], "x")[1] == [["10.0.0.1@tcp"], ["10.0.0.2@tcp"]]
    assert "would take it character by character" in parse_mgs_nids("10.0.0.1@tcp", "x")[0][0]
    assert "is empty" in parse_mgs_nids([], "x")[0][0]


def test_mgs_nid_without_network_on_a_target():
    hv = sound()
    hv["oss01"]["lustre_server_targets"][0]["mgs_nids"] = ["10.2.0.31"]
    has(run(hv), "oss01: lustre_server_targets[0].mgs_nids[0]: '10.2.0.31' has no LNet network")


def test_mgs_nids_missing_or_a_string():
    hv = sound()
    del hv["oss01"]["lustre_server_targets"][0]["mgs_nids"]
    hv["oss01"]["lustre_server_targets"][1]["mgs_nids"] = "10.2.0.31@o2ib"
    out = run(hv)
    has(out, "oss01: lustre_server_targets[0]: has no mgs_nids")
    has(out, "oss01: lustre_server_targets[1].mgs_nids: must be a list", "character by character")


def test_mgs_nids_differ_between_targets_of_a_file_system():
    hv = sound()
    hv["oss02"]["lustre_server_targets"][1]["mgs_nids"] = ["10.2.0.31@o2ib", "10.2.0.32@o2ib"]
    has(run(hv), "oss02: lustre_server_targets[1].mgs_nids: ['10.2.0.31@o2ib', '10.2.0.32@o2ib'] differ from the "
                 "MGS NIDs ['10.2.0.31@o2ib']")


def test_mgs_nids_differ_from_cluster_lustre_mgs_nids():
    has(run(mutated(oss01={"cluster_lustre_mgs_nids": ["10.2.0.33@o2ib"]})),
        "oss01: lustre_server_targets[0].mgs_nids: ['10.2.0.31@o2ib'] differ from cluster_lustre_mgs_nids")
    has(run(mutated(mds01={"cluster_lustre_mgs_nids": ["10.2.0.31"]})), "mds01: cluster_lustre_mgs_nids[0]:",
        "has no LNet network")


def test_primary_mgs_nid_is_another_servers_address():
    hv = sound()
    for host in ("oss01", "oss02"):
        for t in hv[host]["lustre_server_targets"]:
            t["mgs_nids"] = ["10.2.0.42@o2ib"]
    has(run(hv), "oss01: lustre_server_targets[0].mgs_nids: the primary MGS NID 10.2.0.42@o2ib is an address of "
                 "oss02, which serves no MGS (the MGS is on mds01)")


def test_primary_mgs_nid_mistyped_inside_the_cluster_network():
    hv = sound()
    for host in ("oss01", "oss02"):
        for t in hv[host]["lustre_server_targets"]:
            t["mgs_nids"] = ["10.2.0.13@o2ib"]
    for host in CLIENTS:
        hv[host]["lustre_client_mounts"][0]["mgs_nids"] = ["10.2.0.13@o2ib"]
    has(run(hv), "oss01: lustre_server_targets[0].mgs_nids: the primary MGS NID 10.2.0.13@o2ib is no address of the "
                 "MGS host mds01 (10.1.0.31, 10.2.0.31), yet it lies in the cluster's network 10.2.0.0/24")


def test_mgs_on_a_separate_storage_network_is_accepted():
    hv = sound()
    for host in ("oss01", "oss02"):
        for t in hv[host]["lustre_server_targets"]:
            t["mgs_nids"] = ["10.30.0.1@o2ib"]
    for host in CLIENTS:
        hv[host]["lustre_client_mounts"][0]["mgs_nids"] = ["10.30.0.1@o2ib"]
    assert run(hv) == []


def test_mgs_nid_on_a_network_the_mgs_host_lacks():
    hv = sound()
    for host in ("oss01", "oss02"):
        hv[host]["lustre_server_lnet_networks"] = [{"net": "o2ib0", "interfaces": ["ib0"]},
                                                   {"net": "tcp0", "interfaces": ["eth0"]}]
        for t in hv[host]["lustre_server_targets"]:
            t["mgs_nids"] = ["10.2.0.31@tcp"]
    for host in CLIENTS:
        hv[host]["lustre_client_mounts"][0]["mgs_nids"] = ["10.2.0.31@tcp"]
    has(run(hv), "oss01: lustre_server_targets[0].mgs_nids: the MGS host mds01 has no LNet network tcp")


def test_server_cannot_reach_the_mgs():
    hv = mutated(oss02={"lustre_server_lnet_networks": [{"net": "o2ib1", "interfaces": ["ib1"]}]})
    has(run(hv), "oss02: lustre_server_targets[0].mgs_nids: no NID of the primary MGS (10.2.0.31@o2ib) is on an "
                 "LNet network of this server (o2ib1)")


# -------------------------------------------------------------------------------------------- client mounts
def test_client_fsname_differs_from_the_servers():
    hv = mutated(**clients(lustre_client_mounts=[{"fsname": "lsf", "mgs_nids": MGS, "path": "/mnt/lfs"}],
                           lustre_client_directories=[]))
    out = run(hv)
    has(out, "gpu01: lustre_client_mounts[0].fsname: no server in the inventory serves file system lsf (the servers "
             "serve lfs)")
    assert len(out) == 3, out


def test_client_mgs_nids_differ_from_the_servers():
    hv = mutated(**clients(lustre_client_mounts=[{"fsname": "lfs", "mgs_nids": ["10.2.0.41@o2ib"],
                                                  "path": "/mnt/lfs"}]))
    has(run(hv), "gpu02: lustre_client_mounts[0].mgs_nids: ['10.2.0.41@o2ib'] differ from the MGS NIDs of lfs's "
                 "servers ['10.2.0.31@o2ib']")


def test_client_mgs_nids_grouped_differently():
    hv = sound()
    nids = ["10.2.0.31@o2ib", "10.2.0.32@o2ib"]
    for host in ("oss01", "oss02"):
        for t in hv[host]["lustre_server_targets"]:
            t["mgs_nids"] = list(nids)
    hv["mds01"]["lustre_server_targets"][0]["servicenodes"] = list(nids)
    for host in CLIENTS:
        hv[host]["lustre_client_mounts"][0]["mgs_nids"] = [",".join(nids)]
    has(run(hv), "gpu01: lustre_client_mounts[0].mgs_nids: ['10.2.0.31@o2ib,10.2.0.32@o2ib'] group the NIDs of lfs's "
                 "MGS differently from its servers")


def test_client_mgs_nid_without_network():
    hv = mutated(**clients(lustre_client_mounts=[{"fsname": "lfs", "mgs_nids": ["10.2.0.31"], "path": "/mnt/lfs"}]))
    has(run(hv), "head01: lustre_client_mounts[0].mgs_nids[0]: '10.2.0.31' has no LNet network")


def test_client_mount_of_a_file_system_without_mgs_nids_checks_the_mgs_host():
    hv = mutated(oss01={"lustre_server_targets": []}, oss02={"lustre_server_targets": []},
                 **clients(lustre_client_mounts=[{"fsname": "lfs", "mgs_nids": ["10.2.0.41@o2ib"], "path": "/mnt/lfs"}]))
    out = run(hv)
    has(out, "gpu01: lustre_client_mounts[0].mgs_nids: the primary MGS NID 10.2.0.41@o2ib is an address of oss01, "
             "which serves no MGS (the MGS of lfs is on mds01)")
    has(out, "file system lfs has no OST")


def test_client_lnet_network_the_servers_do_not_have():
    hv = mutated(**clients(lustre_client_lnet_networks=[{"net": "o2ib1", "interfaces": ["ib0"]}]))
    out = run(hv)
    has(out, "gpu01: lustre_client_lnet_networks: this client's LNet networks (o2ib1) include none of the networks "
             "of mds01 (o2ib), a server of lfs")
    has(out, "gpu01: lustre_client_mounts[0].mgs_nids: no NID of the primary MGS (10.2.0.31@o2ib) is on an LNet "
             "network of this client (o2ib1)")


@pytest.mark.parametrize("mounts,msg", [
    ([{"fsname": "lfs", "mgs_nids": MGS, "path": "mnt/lfs"}], "lustre_client_mounts[0].path: 'mnt/lfs' is not an "
                                                              "absolute mount point"),
    ([{"fsname": "lfs", "mgs_nids": MGS, "path": "/"}], "lustre_client_mounts[0].path: / is a system directory"),
    ([{"fsname": "lfs", "mgs_nids": MGS, "path": "/mnt/my lfs"}],
     "lustre_client_mounts[0].path: '/mnt/my lfs' is not a usable mount point"),
    ([{"fsname": "lfs", "mgs_nids": MGS, "path": "/mnt/lfs"}, {"fsname": "home", "mgs_nids": ["10.9.0.5@o2ib"],
                                                               "path": "/mnt/lfs/"}],
     "lustre_client_mounts[1].path: /mnt/lfs/ is also the mount point of lustre_client_mounts[0]"),
    ([{"fsname": "lfs", "mgs_nids": MGS, "path": "/mnt/lfs"}, {"fsname": "lfs", "mgs_nids": MGS, "path": "/lfs"}],
     "lustre_client_mounts[1].fsname: lfs is already mounted by lustre_client_mounts[0]"),
    ([{"fsname": "lfs", "mgs_nids": MGS, "path": "/mnt/lfs", "options": "noatime, ro"}],
     "lustre_client_mounts[0].options: 'noatime, ro' is not a mount option list"),
    ([{"fsname": "lfs", "mgs_nid": MGS, "path": "/mnt/lfs"}],
     "lustre_client_mounts[0]: 'mgs_nid' is not a mount option the role knows"),
    ([{"fsname": "lfs", "path": "/mnt/lfs"}], "lustre_client_mounts[0]: has no mgs_nids"),
    ([{"mgs_nids": MGS, "path": "/mnt/lfs"}], "lustre_client_mounts[0]: has no fsname"),
    ([{"fsname": "lfs", "mgs_nids": MGS}], "lustre_client_mounts[0]: has no path"),
    (["lfs"], "lustre_client_mounts[0]: must be a dict"),
    ({"fsname": "lfs"}, "lustre_client_mounts: must be a list"),
])
def test_client_mount_shapes(mounts, msg):
    hv = mutated(gpu01={"lustre_client_mounts": mounts, "lustre_client_directories": []})
    has(run(hv), "gpu01: " + msg)


def test_client_mount_options_variable():
    has(run(mutated(gpu01={"lustre_client_mount_options": "defaults, _netdev"})),
        "gpu01: lustre_client_mount_options: 'defaults, _netdev' is not a mount option list")


# ---------------------------------------------------------------------------------------------------- LNet
@pytest.mark.parametrize("nets,msg", [
    ("o2ib0(ib0)", "lustre_client_lnet_networks: must be a list of {net, interfaces}"),
    ([], "lustre_client_lnet_networks: is empty"),
    ([{"net": "ib0", "interfaces": ["ib0"]}], "lustre_client_lnet_networks[0].net: 'ib0' is not an LNet network name"),
    ([{"interfaces": ["ib0"]}], "lustre_client_lnet_networks[0]: has no net"),
    ([{"net": "o2ib0", "interfaces": "ib0"}], "lustre_client_lnet_networks[0].interfaces: must be a list of interface "
                                              "names"),
    ([{"net": "o2ib0", "interfaces": []}], "lustre_client_lnet_networks[0].interfaces: is empty"),
    ([{"net": "o2ib0"}], "lustre_client_lnet_networks[0]: has no interfaces"),
    ([{"net": "o2ib0", "interfaces": ["enp1s0f0np0verylong"]}], "lustre_client_lnet_networks[0].interfaces[0]: "
                                                                "'enp1s0f0np0verylong' is not a Linux interface name"),
    ([{"net": "o2ib0", "interfaces": ["ib0; reboot"]}], "lustre_client_lnet_networks[0].interfaces[0]: 'ib0; reboot' "
     "is not a Linux interface name"),
    ([{"net": "o2ib0", "interfaces": ["ib0"]}, {"net": "o2ib", "interfaces": ["ib1"]}],
     "lustre_client_lnet_networks[1].net: o2ib is the same LNet network as lustre_client_lnet_networks[0] (o2ib0)"),
    ([{"net": "o2ib0", "interfaces": ["ib0"]}, {"net": "o2ib1", "interfaces": ["ib0"]}],
     "lustre_client_lnet_networks[1].interfaces[0]: ib0 is already in LNet network o2ib0"),
    ([{"net": "o2ib0", "interfaces": ["ib0"], "ip": "10.2.0.21"}], "lustre_client_lnet_networks[0]: 'ip' is not an "
                                                                   "LNet network option"),
    (["o2ib0"], "lustre_client_lnet_networks[0]: must be a dict {net, interfaces}"),
])
def test_lnet_networks(nets, msg):
    has(run(mutated(gpu01={"lustre_client_lnet_networks": nets})), "gpu01: " + msg)


def test_server_lnet_networks_checked_too():
    has(run(mutated(oss01={"lustre_server_lnet_networks": [{"net": "o2ib0", "interfaces": "ib0,ib1"}]})),
        "oss01: lustre_server_lnet_networks[0].interfaces: must be a list")


def test_o2ib_on_an_ethernet_fabric():
    hv = sound()
    for host in hv:
        hv[host]["cluster_fabric_type"] = "ethernet"
    has(run(hv), "gpu01: lustre_client_lnet_networks[0].net: o2ib0 needs RDMA (InfiniBand or RoCE) but "
                 "cluster_fabric_type is ethernet")


# ------------------------------------------------------------------------------------------------- layouts
def test_layout_problems_directly():
    assert layout_problems({"stripe_count": -1, "stripe_size": "4M"}) == []
    assert layout_problems({"components": [{"end": "64M", "stripe_count": 1}, {"end": "4G", "stripe_count": 4},
                                           {"end": -1, "stripe_count": -1, "stripe_size": "4M"}]}) == []
    assert "more than the 4 OSTs of file system lfs" in layout_problems({"stripe_count": 5}, (4, "lfs"))[0]
    assert layout_problems({"stripe_count": 4}, (4, "lfs")) == []
    assert "must be a dict" in layout_problems(["stripe_count", 4])[0]


def test_stripe_size_not_a_multiple_of_64k():
    only(run(mutated(gpu01={"lustre_client_dataset_layout": {"stripe_count": -1, "stripe_size": "1000K"}})),
         "gpu01: lustre_client_dataset_layout: stripe_size '1000K' is not a multiple of 64 KiB")


@pytest.mark.parametrize("size,msg", [
    ("4G", "is not below 4 GiB"), ("big", "is not a size"), (0, "must be positive"), (1048576, None),
    ("64k", None), ("1M", None), ("16MiB", None), (True, "must be a size"),
])
def test_stripe_sizes(size, msg):
    out = run(mutated(gpu01={"lustre_client_dataset_layout": {"stripe_count": -1, "stripe_size": size}}))
    if msg is None:
        assert out == []
    else:
        has(out, "gpu01: lustre_client_dataset_layout: stripe_size", msg)


def test_stripe_count_above_the_osts_counted_over_every_oss():
    only(run(mutated(gpu01={"lustre_client_dataset_layout": {"stripe_count": 5, "stripe_size": "16M"}})),
         "gpu01: lustre_client_dataset_layout: stripe_count 5 is more than the 4 OSTs of file system lfs")
    assert run(mutated(gpu01={"lustre_client_dataset_layout": {"stripe_count": 4}})) == []


def test_stripe_count_checked_without_a_directory_of_that_kind():
    hv = mutated(gpu01={"lustre_client_directories": [],
                        "lustre_client_dataset_layout": {"stripe_count": 8}})
    has(run(hv), "gpu01: lustre_client_dataset_layout: stripe_count 8 is more than the 4 OSTs")


@pytest.mark.parametrize("count,msg", [
    (-2, "stripe_count -2 is not -1 (every OST), 0"), ("all", "stripe_count must be a whole number (-1 for every OST)"),
    (0, None), ("2", None),
])
def test_stripe_count_values(count, msg):
    out = run(mutated(gpu01={"lustre_client_dataset_layout": {"stripe_count": count}}))
    if msg is None:
        assert out == []
    else:
        has(out, "gpu01: lustre_client_dataset_layout: " + msg)


def test_stripe_count_above_lustre_limit_on_an_external_file_system():
    hv = mutated(gpu01={"lustre_client_mounts": [{"fsname": "ext", "mgs_nids": ["10.9.0.5@o2ib"], "path": "/ext"}],
                        "lustre_client_directories": [{"path": "/ext/ds", "kind": "dataset", "stripe_count": 3000}]})
    has(run(hv), "gpu01: lustre_client_directories[0]: stripe_count 3000 is above Lustre's limit of 2000")


def test_layout_option_the_role_ignores():
    only(run(mutated(gpu01={"lustre_client_dataset_layout": {"stripe_count": -1, "stripe_offset": 0}})),
         "gpu01: lustre_client_dataset_layout: 'stripe_offset' is not a layout option the role applies")


def test_components_with_plain_options():
    has(run(mutated(gpu01={"lustre_client_checkpoint_layout": {"stripe_count": 1, "components": [{"end": -1}]}})),
        "gpu01: lustre_client_checkpoint_layout: components cannot be combined with stripe_count")


PFL_CASES = [
    ([{"end": "64M"}, {"end": "32M"}, {"end": -1}], "components[1] end 32M is not after the previous component's "
     "end 64M"),
    ([{"end": "64M"}, {"end": "64M"}, {"end": -1}], "components[1] end 64M is not after"),
    ([{"end": "64M"}, {"end": "4G"}], "the last component (components[1]) must end at EOF"),
    ([{"end": "64M"}, {"end": "eof"}, {"end": -1}], "components[1] ends at EOF (eof) but is not the last"),
    ([{"end": "100K"}, {"end": -1}], "components[0] end 100K is not a multiple of 64 KiB"),
    ([{"end": "6M", "stripe_size": "4M"}, {"end": -1}], "components[0] end 6M is not a multiple of its stripe_size 4M"),
    ([{"stripe_count": 1}, {"end": -1}], "components[0] has no end"),
    ([{"end": "soon"}, {"end": -1}], "components[0] end 'soon' is not a size"),
    ([{"end": "64M", "stripe_offset": 0}, {"end": -1}], "components[0]: 'stripe_offset' is not a component option"),
    ([{"end": "64M", "stripe_count": "x"}, {"end": -1}], "components[0] stripe_count must be a whole number"),
    ([{"end": "64M", "stripe_size": "1000K"}, {"end": -1}], "components[0] stripe_size '1000K' is not a multiple"),
    ([{"end": "64M", "pool": "a pool"}, {"end": -1}], "components[0] pool 'a pool' is not an OST pool name"),
    (["64M", {"end": -1}], "components[0] must be a dict"),
    ([], "components is empty"),
    ("-E 64M -c 1", "components must be a list"),
]


@pytest.mark.parametrize("comps,msg", PFL_CASES)
def test_progressive_layouts(comps, msg):
    has(run(mutated(gpu01={"lustre_client_checkpoint_layout": {"components": comps}})),
        "gpu01: lustre_client_checkpoint_layout: " + msg)


def test_pool_name():
    has(run(mutated(gpu01={"lustre_client_dataset_layout": {"stripe_count": -1, "pool": "flash-pool-of-nvme"}})),
        "pool 'flash-pool-of-nvme' is not an OST pool name")
    assert run(mutated(gpu01={"lustre_client_dataset_layout": {"stripe_count": -1, "pool": "lfs.flash"}})) == []


# --------------------------------------------------------------------------------------------- directories
def test_directory_not_on_a_lustre_mount():
    has(run(mutated(gpu01={"lustre_client_directories": [{"path": "/data/datasets", "kind": "dataset"}]})),
        "gpu01: lustre_client_directories[0].path: /data/datasets is not on a Lustre mount of this client (/mnt/lfs)")


def test_directory_without_any_mount():
    has(run(mutated(gpu01={"lustre_client_mounts": []})),
        "gpu01: lustre_client_directories[0].path: /mnt/lfs/datasets cannot be on Lustre: this client mounts no")


def test_directory_listed_twice():
    dirs = [{"path": "/mnt/lfs/ds", "kind": "dataset"}, {"path": "/mnt/lfs/ds/", "kind": "checkpoint"}]
    has(run(mutated(**clients(lustre_client_directories=dirs))),
        "gpu01: lustre_client_directories[1].path: /mnt/lfs/ds/ is also lustre_client_directories[0]")


def test_directory_kind_mode_and_options():
    dirs = [{"path": "/mnt/lfs/a", "kind": "datasets"}, {"path": "/mnt/lfs/b", "mode": 1777},
            {"path": "/mnt/lfs/c", "mode": "rwx"}, {"path": "/mnt/lfs/d", "layout": "wide"}, "x", {"kind": "plain"}]
    out = run(mutated(**clients(lustre_client_directories=dirs)))
    has(out, "gpu01: lustre_client_directories[0].kind: 'datasets' is not a directory kind")
    has(out, "gpu01: lustre_client_directories[1].mode: 1777 is a number: quote the mode ('1777')")
    has(out, "gpu01: lustre_client_directories[2].mode: 'rwx' is not a file mode")
    has(out, "gpu01: lustre_client_directories[3]: 'layout' is not a directory option")
    has(out, "gpu01: lustre_client_directories[4]: must be a dict")
    has(out, "gpu01: lustre_client_directories[5]: has no path")


def test_directory_own_layout_checked_against_its_file_system():
    dirs = [{"path": "/mnt/lfs/ds", "kind": "dataset", "stripe_count": 6, "stripe_size": "1M"}]
    out = run(mutated(**clients(lustre_client_directories=dirs)))
    has(out, "gpu01: lustre_client_directories[0]: stripe_count 6 is more than the 4 OSTs of file system lfs")
    assert len(out) == 3, out
    dirs = [{"path": "/mnt/lfs/ds", "kind": "dataset", "stripe_count": 1, "stripe_size": "1M"}]
    assert run(mutated(**clients(lustre_client_directories=dirs))) == []


def test_directories_differ_between_clients_with_run_once():
    hv = mutated(gpu02={"lustre_client_directories": [{"path": "/mnt/lfs/other", "kind": "dataset"}]})
    only(run(hv), "gpu02: lustre_client_directories: differs from gpu01's list, but "
                  "lustre_client_directories_run_once is true")
    hv = mutated(**dict((h, {"lustre_client_directories_run_once": False}) for h in CLIENTS))
    hv["gpu02"]["lustre_client_directories"] = [{"path": "/mnt/lfs/other", "kind": "dataset"}]
    assert run(hv) == []
    assert run(mutated(head01={"lustre_client_directories": []})) == []


# ------------------------------------------------------------------------------------------------- tunings
@pytest.mark.parametrize("extra,msg", [
    ({"osc.*.max_pages_per_rpc=4096": 1}, "'osc.*.max_pages_per_rpc=4096' is not an lctl parameter name"),
    ({"osc.*.checksums; reboot": 0}, "'osc.*.checksums; reboot' is not an lctl parameter name"),
    ({"obdfilter.*.brw_size": 16}, "obdfilter.*.brw_size is a server parameter (obdfilter)"),
    ({"osc.*.checksums": False}, "osc.*.checksums: the value is the boolean false: lctl expects 1 or 0"),
    ({"llite.*.statahead_max": [1, 2]}, "llite.*.statahead_max: the value must be a single number or word"),
    ({"debug": "+neterr $(id)"}, "debug: the value '+neterr $(id)' is not a single lctl value"),
    ({"osc.*.max_rpcs_in_flight": 300}, "osc.*.max_rpcs_in_flight: 300 is outside Lustre's range 1-256"),
    ({"mdc.*.max_rpcs_in_flight": 0}, "mdc.*.max_rpcs_in_flight: 0 is outside Lustre's range 1-256"),
    ({"osc.*.max_dirty_mb": 512}, "osc.*.max_dirty_mb: 512 MiB is below 4 x RPC size (16 MiB) x max_rpcs_in_flight "
                                  "(32) = 2048 MiB"),
    ({"osc.*.max_dirty_mb": "lots"}, "osc.*.max_dirty_mb: 'lots' is not a whole number"),
    ({"llite.*.max_read_ahead_per_file_mb": 2048}, "llite.*.max_read_ahead_per_file_mb: 2048 MiB exceeds "
                                                   "llite.*.max_read_ahead_mb 1024 MiB"),
    ({"llite.*.max_read_ahead_whole_mb": 512}, "llite.*.max_read_ahead_whole_mb: 512 MiB exceeds "
                                               "llite.*.max_read_ahead_per_file_mb 256 MiB"),
    ({"osc.*.checksums": 2}, "osc.*.checksums: 2 is not 0 or 1"),
])
def test_client_tunings(extra, msg):
    tun = {"osc.*.max_pages_per_rpc": 4096, "osc.*.max_dirty_mb": 2048}
    tun.update(extra)
    has(run(mutated(gpu01={"lustre_client_tunings_extra": tun})), "gpu01: lustre_client_tunings_extra: " + msg)


def test_sound_extra_tunings_pass():
    tun = {"osc.*.max_pages_per_rpc": "16M", "osc.*.max_dirty_mb": 2048, "osc.*.checksums": 0,
           "ldlm.namespaces.*.lru_max_age": 600000, "osc.lfs-OST*.max_rpcs_in_flight": 32, "at_max": 600}
    assert run(mutated(gpu01={"lustre_client_tunings_extra": tun})) == []


def test_rpc_size_above_the_servers_brw_size():
    out = run(mutated(gpu01={"lustre_client_server_brw_size_mb": 4}))
    only(out, "gpu01: lustre_client_tunings_extra: osc.*.max_pages_per_rpc 4096 x 4 KiB pages = 16384 KiB RPCs exceed "
              "the servers' brw_size of 4 MiB")


def test_rpc_size_with_a_size_suffix_and_64k_pages():
    has(run(mutated(gpu01={"lustre_client_page_size_kib": 64})), "osc.*.max_pages_per_rpc 4096 x 64 KiB pages")


def test_client_brw_size_above_what_the_servers_set():
    hv = mutated(mds01={"lustre_server_params": None})
    has(run(hv), "gpu01: lustre_client_server_brw_size_mb: 16 MiB is more than the servers' obdfilter.*.brw_size of "
                 "4 MiB")


@pytest.mark.parametrize("var,value,msg", [
    ("lustre_client_page_size_kib", 8, "lustre_client_page_size_kib: 8 is not a kernel page size"),
    ("lustre_client_server_brw_size_mb", 32, "lustre_client_server_brw_size_mb: 32 is not the servers' brw_size"),
    ("lustre_client_tunings", ["osc.*.checksums=0"], "lustre_client_tunings: must be a dict of lctl parameters"),
])
def test_client_tuning_scalars(var, value, msg):
    has(run(mutated(gpu01={var: value})), "gpu01: " + msg)


@pytest.mark.parametrize("params,msg", [
    ({"obdfilter.*.brw_size": 32}, "obdfilter.*.brw_size: 32 is not a bulk RPC size in MiB from 1 to 16"),
    ({"osc.*.max_rpcs_in_flight": True, "obdfilter.*.brw_size": 16}, "osc.*.max_rpcs_in_flight: the value is the boolean true"),
    ({"osc.*.checksums 0": 1, "obdfilter.*.brw_size": 16}, "'osc.*.checksums 0' is not an lctl parameter name"),
    (["obdfilter.*.brw_size=16"], "must be a dict of lctl parameters"),
])
def test_server_params(params, msg):
    only(run(mutated(mds01={"lustre_server_params": params})), "mds01: lustre_server_params: " + msg)


def test_server_params_set_where_no_mgs_runs():
    out = run(mutated(oss01={"lustre_server_params": {"obdfilter.*.brw_size": 8}}))
    only(out, "oss01: lustre_server_params: is applied only on the host that serves the MGS (mds01)")
    # The same parameters on every server (group_vars of both groups) are fine.
    assert run(mutated(oss01={"lustre_server_params": {"obdfilter.*.brw_size": 16}})) == []


# ------------------------------------------------------------------------------------------ wrong shapes
WRONG = [None, "", "x; rm -rf /", -1, 0, 1.5, True, [], ["a"], [None], [[1]], {}, {"a": None}, [{"a": 1}],
         [{"device": 5, "type": ["ost"], "fsname": None, "index": "one", "mgs_nids": {"a": 1}}],
         [{"fsname": ["x"], "mgs_nids": [["a"]], "path": 7}],
         [{"net": {"a": 1}, "interfaces": [None, 5]}],
         [{"path": ["x"], "kind": {}, "components": [{"end": []}], "mode": None}],
         {"components": [None, {"end": {"a": 1}, "stripe_size": [], "stripe_count": {}}]},
         {"stripe_count": [], "stripe_size": {}, "pool": 5, "components": "x"},
         {5: 1, "osc.*.max_pages_per_rpc": {"a": 1}, None: []}]
VARIABLES = ["lustre_server_targets", "lustre_server_lnet_networks", "lustre_server_params",
             "lustre_server_mount_root", "lustre_server_mount_options", "lustre_client_mounts",
             "lustre_client_lnet_networks", "lustre_client_tunings", "lustre_client_tunings_extra",
             "lustre_client_directories", "lustre_client_dataset_layout", "lustre_client_checkpoint_layout",
             "lustre_client_server_brw_size_mb", "lustre_client_page_size_kib", "lustre_client_mount_options",
             "lustre_client_directories_run_once", "cluster_lustre_fsname", "cluster_lustre_mgs_nids",
             "cluster_fabric_ip", "cluster_fabric_type", "ansible_host"]


@pytest.mark.parametrize("var", VARIABLES)
def test_no_rule_raises_on_a_wrong_shape(var):
    for value in WRONG:
        for hosts in (list(ADDR), ["oss01"], ["gpu02"]):
            hv = sound()
            for host in hosts:
                hv[host][var] = copy.deepcopy(value)
            out = run(hv)
            assert isinstance(out, list)


def test_wrong_shapes_inside_targets_are_reported():
    hv = sound()
    hv["oss01"]["lustre_server_targets"] = [{"device": 5, "type": ["ost"], "fsname": None, "index": "one"}, "ost"]
    out = run(hv)
    has(out, "oss01: lustre_server_targets[0].device: must be a device path (/dev/...), got integer 5")
    has(out, "oss01: lustre_server_targets[0].type: a list is not a target type")
    has(out, "oss01: lustre_server_targets[1]: must be a dict")
    has(run(mutated(oss01={"lustre_server_targets": "ost0"})), "oss01: lustre_server_targets: must be a list")


class _Undefined(preflight_common._JinjaUndefined):  # pylint: disable=protected-access
    pass


def test_an_unresolvable_nested_value_is_reported_by_the_reader():
    hv = sound()
    hv["oss01"]["lustre_server_targets"][0]["mgs_nids"] = _Undefined(name="cluster_lustre_mgs_nids")
    inv = Inventory(hv, GROUPS)
    out = check(inv, ON)
    assert any(e.startswith("oss01: lustre_server_targets: cannot be resolved") for e in inv.errors), inv.errors
    assert isinstance(out, list)


def test_server_params_absent():
    assert run(mutated(mds01={"lustre_server_params_absent": ["osc.*.max_dirty_mb"]})) == []
    only(run(mutated(mds01={"lustre_server_params_absent": ["obdfilter.*.brw_size"]})),
         "mds01: lustre_server_params_absent: obdfilter.*.brw_size is also in lustre_server_params")
    only(run(mutated(mds01={"lustre_server_params_absent": ["osc.*.x; rm -rf /"]})),
         "mds01: lustre_server_params_absent: 'osc.*.x; rm -rf /' is not an lctl parameter name")
