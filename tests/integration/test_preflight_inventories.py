"""Bad inventories are rejected by site.yml's first play, each with its own message, before any change.

Each case runs the real ``ansible-playbook site.yml`` against an inventory whose hosts point at containers that do
not exist: had preflight let the inventory through, the next play would try to connect and the run would show
``unreachable``. So "rejected before anything changed" is proven by: rc != 0, the specific message, a recap
with changed=0 and no unreachable host, and no task of a later play in the output.
"""

import json
import os
import subprocess

import pytest

from integration.preflight_helpers import (  # tests/ is on sys.path (tests/conftest.py)
    BIN, ROOT, assert_distinct_messages, base_inventory, case_ids, reject_case, run_playbook,
)


def _children(inv):
    return inv["all"]["children"]


def _host(inv, group, host):
    return _children(inv)[group]["hosts"][host]


def mutate_missing_group(inv):
    del _children(inv)["slurm_controller"]


def mutate_empty_gpu_group(inv):
    _children(inv)["gpu_nodes"]["hosts"] = {}
    _children(inv)["gpu_nodes"].pop("vars")


def mutate_hyphen_group(inv):
    _children(inv)["gpu-rack1"] = {"children": {"gpu_nodes": None}}


def mutate_duplicate_ip(inv):
    _host(inv, "gpu_nodes", "gpu02")["cluster_mgmt_ip"] = "10.1.0.21"


def mutate_ip_outside_network(inv):
    _host(inv, "gpu_nodes", "gpu01")["cluster_mgmt_ip"] = "10.9.0.21"


def mutate_fabric_ip_outside(inv):
    _host(inv, "gpu_nodes", "gpu02")["cluster_fabric_ip"] = "10.1.0.99"


def mutate_networks_overlap(inv):
    inv["all"]["vars"]["cluster_fabric_network_cidr"] = "10.1.0.0/16"


def mutate_bad_cidr(inv):
    inv["all"]["vars"]["cluster_mgmt_network_cidr"] = "10.1.0.0/33"


def mutate_unknown_gpu(inv):
    _children(inv)["gpu_nodes"]["vars"]["cluster_gpu_type"] = "h1000"


def mutate_upper_case_gpu_type(inv):
    _children(inv)["gpu_nodes"]["vars"]["cluster_gpu_type"] = "H100"


def mutate_implausible_count(inv):
    _children(inv)["gpu_nodes"]["vars"]["cluster_gpu_count_per_node"] = 12


def mutate_bad_partition(inv):
    _host(inv, "slurm_controller", "head01")["slurm_controller_partitions"] = [
        {"name": "gpu batch", "nodes": "gpu_nodes", "default": True}]


def mutate_partition_unknown_nodes(inv):
    _host(inv, "slurm_controller", "head01")["slurm_controller_partitions"] = [
        {"name": "gpu", "nodes": "gpu[01-04]", "default": True}]


def mutate_string_switch(inv):
    inv["all"]["vars"]["common_os_reboot_ok"] = "no"


def mutate_retired_variable_strict(inv):
    inv["all"]["vars"]["preflight_strict"] = True
    inv["all"]["vars"]["cluster_converged_skip"] = False


def mutate_missing_fabric_ip(inv):
    del _host(inv, "gpu_nodes", "gpu01")["cluster_fabric_ip"]


def mutate_bad_cluster_name(inv):
    inv["all"]["vars"]["cluster_name"] = "My Cluster"


def mutate_broadcast_ip(inv):
    _host(inv, "gpu_nodes", "gpu01")["cluster_mgmt_ip"] = "10.1.0.255"


CASES = [
    (mutate_missing_group, "group 'slurm_controller': required group is missing or has no hosts"),
    (mutate_empty_gpu_group, "group 'gpu_nodes': required group is missing or has no hosts"),
    (mutate_hyphen_group, "group 'gpu-rack1': group names must not contain hyphens"),
    (mutate_duplicate_ip, "gpu02: cluster_mgmt_ip: 10.1.0.21 is already used by gpu01"),
    (mutate_ip_outside_network, "gpu01: cluster_mgmt_ip: 10.9.0.21 is outside its network 10.1.0.0/24"),
    (mutate_fabric_ip_outside, "gpu02: cluster_fabric_ip: 10.1.0.99 is outside its network 10.2.0.0/24"),
    (mutate_networks_overlap, "overlaps cluster_mgmt_network_cidr 10.1.0.0/24"),
    (mutate_bad_cidr, "cluster_mgmt_network_cidr: must be a network in CIDR form"),
    (mutate_unknown_gpu, "gpu01: cluster_gpu_type: unknown GPU type 'h1000'"),
    (mutate_upper_case_gpu_type, "gpu01: cluster_gpu_type: write 'H100' in lower case ('h100')"),
    (mutate_implausible_count, "gpu01: cluster_gpu_count_per_node: 12 is not plausible for h100 (1 to 8 per node)"),
    (mutate_bad_partition, "slurm_controller_partitions[0].name: 'gpu batch' is not a valid Slurm partition name"),
    (mutate_partition_unknown_nodes, "partition 'gpu' names hosts that are not in gpu_nodes: gpu03, gpu04"),
    (mutate_string_switch, "common_os_reboot_ok: must be a boolean (true/false), got 'no'"),
    (mutate_retired_variable_strict,
     "cluster_converged_skip (on gpu01, gpu02, stor01, head01): no longer read: the converged-node cache was removed"),
    (mutate_missing_fabric_ip, "gpu01: cluster_fabric_ip: is required but not set"),
    (mutate_bad_cluster_name, "cluster_name: must be set, lower case"),
    (mutate_broadcast_ip, "gpu01: cluster_mgmt_ip: 10.1.0.255 is the network or broadcast address of 10.1.0.0/24"),
]


@pytest.mark.parametrize("mutate,message", CASES, ids=case_ids(CASES))
def test_bad_inventory_is_rejected_before_any_change(tmp_path, mutate, message):
    reject_case(tmp_path, mutate, message)


def test_each_case_has_its_own_message():
    assert_distinct_messages([case[1] for case in CASES], 10)


def test_sound_inventory_passes(tmp_path):
    rc, out = run_playbook(tmp_path, base_inventory(), "playbooks/preflight.yml")
    assert rc == 0, out
    assert "ok=1" in out


# The example inventory with the product's ansible.cfg; the lab's with the lab's (its transport is test-only).
@pytest.mark.parametrize("inventory, config", [("inventories/example", "ansible.cfg"),
                                               ("inventories/lab", "tests/lab/ansible.cfg")])
def test_shipped_inventories_pass_preflight(inventory, config):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, config), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"), ANSIBLE_CACHE_PLUGIN="memory")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inventory, "playbooks/preflight.yml"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "inventory passed preflight" in proc.stdout, proc.stdout


def test_example_inventory_describes_the_reference_design():
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    proc = subprocess.run([os.path.join(BIN, "ansible-inventory"), "-i", "inventories/example", "--list"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    inv = json.loads(proc.stdout)
    gpu = inv["gpu_nodes"]["hosts"]
    assert len(gpu) == 8
    hv = inv["_meta"]["hostvars"]
    assert sum(hv[h]["cluster_gpu_count_per_node"] for h in gpu) == 64
    assert all(hv[h]["cluster_gpu_type"] == "h100" for h in gpu)
    assert len(inv["lustre_oss"]["hosts"]) == 4 and len(inv["lustre_mds"]["hosts"]) == 1
    assert len(inv["slurm_controller"]["hosts"]) == 1
    assert all(hv[h].get("ansible_connection", "ssh") == "ssh" for h in hv)
