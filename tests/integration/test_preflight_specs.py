"""Every role's argument spec is checked by site.yml's first play, strictly, before any role starts; typos warned.

Each case runs the real ``ansible-playbook site.yml`` against the shared 4-host inventory with one variable of one
role given a value its spec does not allow, and must be rejected before any change with its own message. Values
given with ``-e name=value`` arrive as strings: the message says how to give them with their type, and that advice,
given as printed, passes.
"""

import copy
import json
import re

import pytest

from integration.preflight_helpers import (  # tests/ is on sys.path (tests/conftest.py)
    all_vars, assert_distinct_messages, assert_rejected_before_any_change, base_inventory, case_ids, group_vars, host, reject_case, run_playbook,
)


def unescaped(out):
    """The output with the failure's Python-quoted list unescaped (a message holding ' and " shows \\' there)."""
    return out.replace("\\'", "'")


def mutate_pfc_priority_out_of_range(inv):
    group_vars(inv, "gpu_nodes")["nccl_roce_pfc_priority"] = 9


def mutate_trust_mode_in_capitals(inv):
    group_vars(inv, "gpu_nodes")["nccl_roce_trust"] = "DSCP"


def mutate_acs_scope_unknown(inv):
    group_vars(inv, "gpu_nodes")["pcie_acs_scope"] = "everything"


def mutate_nofile_limit_words(inv):
    all_vars(inv)["common_os_nofile_limit"] = "lots"


def mutate_chrony_servers_as_string(inv):
    all_vars(inv)["common_os_chrony_servers"] = "pool.ntp.org"


def mutate_sysctl_as_list(inv):
    all_vars(inv)["common_os_sysctl"] = ["net.core.somaxconn=4096"]


def mutate_lustre_mount_without_path(inv):
    group_vars(inv, "gpu_nodes")["lustre_client_mounts"] = [{"fsname": "scratch", "mgs_nids": ["10.2.0.31@o2ib"]}]


def mutate_lustre_directory_key_typo(inv):
    group_vars(inv, "gpu_nodes")["lustre_client_directories"] = [{"path": "/lustre/datasets", "knid": "dataset"}]


def mutate_lnet_interfaces_as_string(inv):
    group_vars(inv, "gpu_nodes")["lustre_client_lnet_networks"] = [{"net": "o2ib0", "interfaces": "ib0"}]


def mutate_lustre_target_type_typo(inv):
    host(inv, "lustre_mds", "stor01")["lustre_server_targets"] = [
        {"device": "/dev/md0", "type": "ots", "fsname": "scratch", "index": 0, "mgs_nids": ["10.2.0.31@o2ib"]}]


def mutate_exporter_port_as_string(inv):
    group_vars(inv, "gpu_nodes")["dcgm_exporter_listen_port"] = "9400"


def mutate_exporter_switch_as_string(inv):
    group_vars(inv, "gpu_nodes")["dcgm_exporter_enabled"] = "yes"


def mutate_driver_version_as_float(inv):
    group_vars(inv, "gpu_nodes")["nvidia_driver_version"] = 570.1


def mutate_kernel_module_type_typo(inv):
    group_vars(inv, "gpu_nodes")["nvidia_driver_kernel_module_type"] = "opne"


def mutate_state_file_relative(inv):
    group_vars(inv, "gpu_nodes")["gpu_tuning_state_file"] = "etc/clusterforge/state.json"


def mutate_max_temperature_with_unit(inv):
    group_vars(inv, "gpu_nodes")["slurm_compute_healthcheck_max_temperature_c"] = "85C"


def mutate_partition_time_unquoted(inv):
    # What YAML makes of an unquoted max_time: 1:00:00 (a sexagesimal number).
    host(inv, "slurm_controller", "head01")["slurm_controller_partitions"] = [
        {"name": "gpu", "nodes": "gpu_nodes", "default": True, "max_time": 3600}]


def mutate_slurmd_port_out_of_range(inv):
    host(inv, "slurm_controller", "head01")["slurm_controller_slurmd_port"] = 70000


def mutate_hosts_extra_names_as_string(inv):
    all_vars(inv)["common_os_hosts_extra"] = [{"ip": "10.1.0.200", "names": "nfs01"}]


CASES = [
    (mutate_pfc_priority_out_of_range, "gpu01: nccl_roce_pfc_priority: 9 is not one of 0, 1, 2, 3, 4, 5, 6, 7"),
    (mutate_trust_mode_in_capitals, "gpu01: nccl_roce_trust: 'DSCP' is not one of dscp, pcp"),
    (mutate_acs_scope_unknown, "gpu01: pcie_acs_scope: 'everything' is not one of gpu_nic_paths, all"),
    (mutate_nofile_limit_words, "head01: common_os_nofile_limit: must be an integer, got the string 'lots'"),
    (mutate_chrony_servers_as_string,
     "stor01: common_os_chrony_servers: must be a list, got the string 'pool.ntp.org'"),
    (mutate_sysctl_as_list, "gpu02: common_os_sysctl: must be a dict (key: value), got a list"),
    (mutate_lustre_mount_without_path,
     "gpu01: lustre_client_mounts[0]: the required key path is missing (needs fsname, mgs_nids, path)"),
    (mutate_lustre_directory_key_typo, "gpu02: lustre_client_directories[0]: unknown key 'knid'"),
    (mutate_lnet_interfaces_as_string,
     "gpu01: lustre_client_lnet_networks[0].interfaces: must be a list, got the string 'ib0'"),
    (mutate_lustre_target_type_typo,
     "stor01: lustre_server_targets[0].type: 'ots' is not one of mgs, mgs_mdt, mdt, ost"),
    (mutate_exporter_port_as_string, "gpu01: dcgm_exporter_listen_port: must be an integer, got the string '9400'"),
    (mutate_exporter_switch_as_string, "gpu02: dcgm_exporter_enabled: must be a boolean (true/false), got 'yes'"),
    (mutate_driver_version_as_float, "gpu01: nvidia_driver_version: must be a string, got the number 570.1"),
    (mutate_kernel_module_type_typo, "gpu01: nvidia_driver_kernel_module_type: 'opne' is not one of open, proprietary"),
    (mutate_state_file_relative, "gpu01: gpu_tuning_state_file: must be an absolute path on the node"),
    (mutate_max_temperature_with_unit,
     "gpu02: slurm_compute_healthcheck_max_temperature_c: must be an integer, got the string '85C'"),
    (mutate_partition_time_unquoted,
     "head01: slurm_controller_partitions[0].max_time: must be a quoted Slurm time such as '1:00:00'"),
    (mutate_slurmd_port_out_of_range, "head01: slurm_controller_slurmd_port: 70000 is not a TCP port (1-65535)"),
    (mutate_hosts_extra_names_as_string,
     "gpu01: common_os_hosts_extra[0].names: must be a list, got the string 'nfs01'"),
]


@pytest.mark.parametrize("mutate,message", CASES, ids=case_ids(CASES))
def test_value_against_its_role_spec_is_rejected_before_any_change(tmp_path, mutate, message):
    reject_case(tmp_path, mutate, message)


def test_each_case_has_its_own_message():
    assert_distinct_messages([case[1] for case in CASES], 14)


def test_bool_from_the_command_line_gets_advice_that_works_as_printed(tmp_path):
    inv = base_inventory()
    rc, out = run_playbook(tmp_path, inv, extra_args=["-e", "pcie_acs_disable=true"])
    out = unescaped(out)
    assert_rejected_before_any_change(rc, out, "gpu01: pcie_acs_disable: must be a boolean (true/false), got 'true'")
    advice = "give -e '{\"pcie_acs_disable\": true}' (JSON keeps the type; -e pcie_acs_disable=true passes the " \
             "string 'true')"
    assert advice in out, out
    printed = re.search(r"give -e '(\{\"pcie_acs_disable\".*?\})'", out).group(1)
    assert json.loads(printed) == {"pcie_acs_disable": True}
    rc, out = run_playbook(tmp_path, inv, "playbooks/preflight.yml", extra_args=["-e", printed])
    assert rc == 0, out
    assert "pcie_acs_disable" not in out, out


def test_integer_from_the_command_line_gets_the_json_advice(tmp_path):
    inv = base_inventory()
    # Monitoring scrapes the exporter's port: preflight refuses a scrape of another port than dcgm starts.
    all_vars(inv)["monitoring_dcgm_exporter_port"] = 9401
    rc, out = run_playbook(tmp_path, inv, extra_args=["-e", "dcgm_exporter_listen_port=9401"])
    out = unescaped(out)
    assert_rejected_before_any_change(rc, out, "dcgm_exporter_listen_port: must be an integer, got the string '9401'")
    assert "give -e '{\"dcgm_exporter_listen_port\": 9401}' (JSON keeps the type" in out, out
    rc, out = run_playbook(tmp_path, inv, "playbooks/preflight.yml",
                           extra_args=["-e", '{"dcgm_exporter_listen_port": 9401}'])
    assert rc == 0, out


def test_typo_is_a_warning_and_an_error_when_strict(tmp_path):
    inv = copy.deepcopy(base_inventory())
    # More than one edit away (one edit away is an error whatever preflight_strict says: test_preflight_generic.py).
    group_vars(inv, "gpu_nodes")["gpu_tuning_power_limt_w"] = 600
    warning = "inventory: gpu_tuning_power_limt_w (on gpu01, gpu02): no role or playbook defines this variable; " \
              "did you mean gpu_tuning_power_limit_watts?"
    rc, out = run_playbook(tmp_path, inv, "playbooks/preflight.yml")
    assert rc == 0, out
    assert "preflight warnings" in out and re.sub(r"\s+", " ", out).count(warning) >= 1, out
    rc, out = run_playbook(tmp_path, inv, "playbooks/preflight.yml", extra_args=["-e", '{"preflight_strict": true}'])
    assert rc != 0, out
    assert "preflight rejected the inventory" in out and warning in out, out
