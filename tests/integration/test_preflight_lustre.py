"""Lustre mistakes are rejected by site.yml's first play, each with its own message, before any host is touched.

Each case adds a sound Lustre design to the shared base inventory (stor01 serves a combined MGS+MDT0 and two OSTs of
file system ``lfs``; the GPU nodes and the head node mount it over o2ib0), breaks one thing an operator gets wrong,
and runs the real ``ansible-playbook site.yml``: rc != 0, the case's own message, nothing changed, no host contacted
(tests/integration/preflight_helpers.py).
"""

import copy

import pytest

from integration.preflight_helpers import (  # tests/ is on sys.path (tests/conftest.py)
    all_vars, assert_distinct_messages, base_inventory, case_ids, children, group_vars, host, reject_case, run_playbook,
)

MGS = ["10.2.0.31@o2ib"]


def with_lustre(inv):
    """The base inventory with a sound Lustre file system (what every case starts from)."""
    host(inv, "lustre_mds", "stor01")["lustre_server_targets"] = [
        {"device": "/dev/disk/by-id/nvme-mdt0", "type": "mgs_mdt", "fsname": "lfs", "index": 0},
        {"device": "/dev/md0", "type": "ost", "fsname": "lfs", "index": 0, "mgs_nids": list(MGS)},
        {"device": "/dev/md1", "type": "ost", "fsname": "lfs", "index": 1, "mgs_nids": list(MGS)},
    ]
    clients = group_vars(inv, "lustre_clients")
    clients["lustre_client_mounts"] = [{"fsname": "lfs", "mgs_nids": list(MGS), "path": "/mnt/lfs"}]
    clients["lustre_client_directories"] = [{"path": "/mnt/lfs/datasets", "kind": "dataset"},
                                            {"path": "/mnt/lfs/checkpoints", "kind": "checkpoint", "mode": "1777"}]
    return inv


def targets(inv):
    return host(inv, "lustre_mds", "stor01")["lustre_server_targets"]


def clients(inv):
    return group_vars(inv, "lustre_clients")


def add_oss(inv, name="stor02", n=32, osts=()):
    """A second storage host in lustre_oss, serving the given OST indexes of lfs."""
    children(inv)["lustre_oss"]["hosts"][name] = {
        "cluster_mgmt_ip": "10.1.0.%d" % n, "cluster_fabric_ip": "10.2.0.%d" % n,
        "lustre_server_targets": [{"device": "/dev/md%d" % i, "type": "ost", "fsname": "lfs", "index": idx,
                                   "mgs_nids": list(MGS)} for i, idx in enumerate(osts)]}


def mutate_duplicate_ost_index_on_two_oss(inv):
    add_oss(inv, osts=[2, 1])


def mutate_nine_character_fsname(inv):
    for t in targets(inv):
        t["fsname"] = "scratch01"


def mutate_stripe_size_1000k(inv):
    clients(inv)["lustre_client_dataset_layout"] = {"stripe_count": -1, "stripe_size": "1000K"}


def mutate_stripe_count_5_with_4_osts(inv):
    add_oss(inv, osts=[2, 3])
    clients(inv)["lustre_client_dataset_layout"] = {"stripe_count": 5, "stripe_size": "4M"}


def mutate_relative_device(inv):
    targets(inv)[1]["device"] = "md0"


def mutate_device_used_twice(inv):
    targets(inv)[2]["device"] = "/dev/md0"


def mutate_client_fsname_differs(inv):
    clients(inv)["lustre_client_mounts"][0]["fsname"] = "lsf"


def mutate_mgs_nid_without_network(inv):
    targets(inv)[2]["mgs_nids"] = ["10.2.0.31"]


def mutate_client_network_servers_lack(inv):
    clients(inv)["lustre_client_lnet_networks"] = [{"net": "o2ib1", "interfaces": ["ib0"]}]


def mutate_pfl_ends_not_increasing(inv):
    clients(inv)["lustre_client_checkpoint_layout"] = {"components": [
        {"end": "4G", "stripe_count": 1}, {"end": "64M", "stripe_count": 4}, {"end": -1, "stripe_count": -1}]}


def mutate_pfl_last_component_not_eof(inv):
    clients(inv)["lustre_client_checkpoint_layout"] = {"components": [
        {"end": "64M", "stripe_count": 1}, {"end": "4G", "stripe_count": -1}]}


def mutate_no_mdt0(inv):
    targets(inv)[0] = {"device": "/dev/disk/by-id/nvme-mgt", "type": "mgs"}
    targets(inv).append({"device": "/dev/nvme1n1", "type": "mdt", "fsname": "lfs", "index": 1,
                         "mgs_nids": list(MGS)})


def mutate_second_mgs(inv):
    add_oss(inv, osts=[2])
    host(inv, "lustre_oss", "stor02")["lustre_server_targets"].append({"device": "/dev/sdm", "type": "mgs"})


def mutate_unsupported_target_type(inv):
    targets(inv)[0]["type"] = "mgs+mdt"


def mutate_client_mgs_nids_wrong_host(inv):
    clients(inv)["lustre_client_mounts"][0]["mgs_nids"] = ["10.2.0.21@o2ib"]


def mutate_ost_index_out_of_range(inv):
    targets(inv)[2]["index"] = 70000


def mutate_mgs_nids_as_a_string(inv):
    targets(inv)[1]["mgs_nids"] = "10.2.0.31@o2ib"


def mutate_interfaces_as_a_string(inv):
    all_vars(inv)["lustre_server_lnet_networks"] = [{"net": "o2ib0", "interfaces": "ib0,ib1"}]


def mutate_client_directory_off_lustre(inv):
    clients(inv)["lustre_client_directories"].append({"path": "/data/scratch", "kind": "dataset"})


def mutate_rpc_above_brw_size(inv):
    clients(inv)["lustre_client_tunings_extra"] = {"osc.*.max_pages_per_rpc": 4096, "osc.*.max_dirty_mb": 2048}


def mutate_client_brw_size_above_servers(inv):
    clients(inv)["lustre_client_server_brw_size_mb"] = 16


def mutate_server_param_in_client_tunings(inv):
    clients(inv)["lustre_client_tunings_extra"] = {"obdfilter.*.brw_size": 16}


def mutate_o2ib_on_ethernet_fabric(inv):
    all_vars(inv)["cluster_fabric_type"] = "ethernet"


def mutate_mount_point_twice(inv):
    clients(inv)["lustre_client_mounts"].append({"fsname": "home", "mgs_nids": ["10.9.0.5@o2ib"], "path": "/mnt/lfs"})


def mutate_mgs_nid_mistyped(inv):
    for t in targets(inv)[1:]:
        t["mgs_nids"] = ["10.2.0.13@o2ib"]
    clients(inv)["lustre_client_mounts"][0]["mgs_nids"] = ["10.2.0.13@o2ib"]


def mutate_directory_mode_unquoted(inv):
    clients(inv)["lustre_client_directories"][1]["mode"] = 1777


CASES = [
    (mutate_duplicate_ost_index_on_two_oss,
     "stor02: lustre_server_targets[1].index: OST index 1 of file system lfs is also on stor01"),
    (mutate_nine_character_fsname, "stor01: lustre_server_targets[0].fsname: 'scratch01' has 9 characters"),
    (mutate_stripe_size_1000k, "lustre_client_dataset_layout: stripe_size '1000K' is not a multiple of 64 KiB"),
    (mutate_stripe_count_5_with_4_osts,
     "lustre_client_dataset_layout: stripe_count 5 is more than the 4 OSTs of file system lfs"),
    (mutate_relative_device, "stor01: lustre_server_targets[1].device: 'md0' is not an absolute path"),
    (mutate_device_used_twice,
     "stor01: lustre_server_targets[2].device: /dev/md0 is also the device of lustre_server_targets[1]"),
    (mutate_client_fsname_differs,
     "lustre_client_mounts[0].fsname: no server in the inventory serves file system lsf"),
    (mutate_mgs_nid_without_network, "stor01: lustre_server_targets[2].mgs_nids[0]: '10.2.0.31' has no LNet network"),
    (mutate_client_network_servers_lack,
     "gpu01: lustre_client_lnet_networks: this client's LNet networks (o2ib1) include none of the networks of stor01"),
    (mutate_pfl_ends_not_increasing,
     "lustre_client_checkpoint_layout: components[1] end 64M is not after the previous component's end 4G"),
    (mutate_pfl_last_component_not_eof,
     "lustre_client_checkpoint_layout: the last component (components[1]) must end at EOF"),
    (mutate_no_mdt0, "file system lfs has OSTs but no MDT0"),
    (mutate_second_mgs, "inventory: lustre_server_targets: 2 MGS targets"),
    (mutate_unsupported_target_type, "lustre_server_targets[0].type: 'mgs+mdt' is not a target type the role supports"),
    (mutate_client_mgs_nids_wrong_host,
     "lustre_client_mounts[0].mgs_nids: ['10.2.0.21@o2ib'] differ from the MGS NIDs of lfs's servers"),
    (mutate_ost_index_out_of_range, "lustre_server_targets[2].index: OST index 70000 is outside Lustre's range"),
    (mutate_mgs_nids_as_a_string, "lustre_server_targets[1].mgs_nids: must be a list with one entry per MGS node"),
    (mutate_interfaces_as_a_string, "stor01: lustre_server_lnet_networks[0].interfaces: must be a list of interface"),
    (mutate_client_directory_off_lustre,
     "lustre_client_directories[2].path: /data/scratch is not on a Lustre mount of this client"),
    (mutate_rpc_above_brw_size,
     "osc.*.max_pages_per_rpc 4096 x 4 KiB pages = 16384 KiB RPCs exceed the servers' brw_size of 4 MiB"),
    (mutate_client_brw_size_above_servers,
     "lustre_client_server_brw_size_mb: 16 MiB is more than the servers' obdfilter.*.brw_size of 4 MiB"),
    (mutate_server_param_in_client_tunings, "obdfilter.*.brw_size is a server parameter (obdfilter)"),
    (mutate_o2ib_on_ethernet_fabric,
     "gpu01: lustre_client_lnet_networks[0].net: o2ib0 needs RDMA (InfiniBand or RoCE)"),
    (mutate_mount_point_twice, "lustre_client_mounts[1].path: /mnt/lfs is also the mount point of "
                               "lustre_client_mounts[0]"),
    (mutate_mgs_nid_mistyped, "the primary MGS NID 10.2.0.13@o2ib is no address of the MGS host stor01"),
    (mutate_directory_mode_unquoted, "lustre_client_directories[1].mode: 1777 is a number: quote the mode"),
]


@pytest.mark.parametrize("mutate,message", CASES, ids=case_ids(CASES))
def test_lustre_mistake_is_rejected_before_any_change(tmp_path, mutate, message):
    reject_case(tmp_path, mutate, message, prepare=with_lustre)


def test_each_case_has_its_own_message():
    assert_distinct_messages([case[1] for case in CASES], 14)


def test_sound_lustre_design_passes(tmp_path):
    inv = with_lustre(copy.deepcopy(base_inventory()))
    add_oss(inv, osts=[2, 3])
    clients(inv)["lustre_client_dataset_layout"] = {"stripe_count": 4, "stripe_size": "4M"}
    rc, out = run_playbook(tmp_path, inv, "playbooks/preflight.yml")
    assert rc == 0, out
    assert "inventory passed preflight" in out, out
