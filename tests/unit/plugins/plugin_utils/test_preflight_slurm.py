# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Slurm preflight rules, one test (at least) per rule, on plain hostvars and groups."""

import copy
import os
import re

import pytest
import yaml

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import preflight_slurm
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import (
    COLLECTION_ROOT, Inventory, spec_default,
)
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_slurm import (
    check, reason_prefix_problems, slurm_time_seconds,
)

OPTS = {"lustre_enabled": True, "fabric_required": True, "strict": False, "rolling": False}
CLUSTER = {"cluster_name": "testcl", "cluster_fabric_type": "infiniband"}
GPU = {"cluster_gpu_type": "h100", "cluster_gpu_count_per_node": 8}


def base():
    hostvars = {
        "head01": dict(CLUSTER),
        "gpu01": dict(CLUSTER, **GPU),
        "gpu02": dict(CLUSTER, **GPU),
        "stor01": dict(CLUSTER),
    }
    groups = {
        "all": ["head01", "gpu01", "gpu02", "stor01"],
        "ungrouped": [],
        "slurm_controller": ["head01"],
        "gpu_nodes": ["gpu01", "gpu02"],
        "lustre_mds": ["stor01"],
        "lustre_oss": ["stor01"],
        "lustre_clients": ["gpu01", "gpu02", "head01"],
    }
    return hostvars, groups


def run(hostvars, groups):
    return check(Inventory(hostvars, groups), OPTS)


def errors_with(change):
    hostvars, groups = base()
    change(hostvars, groups)
    return run(hostvars, groups)


def both_gpus(hostvars, name, value):
    for host in ("gpu01", "gpu02"):
        hostvars[host][name] = value


def ctl(name, value):
    def change(hostvars, groups):
        hostvars["head01"][name] = value
    return change


def gpus(name, value):
    def change(hostvars, groups):
        both_gpus(hostvars, name, value)
    return change


def burn_in(reason):
    def change(hostvars, groups):
        both_gpus(hostvars, "slurm_compute_burn_in", True)
        both_gpus(hostvars, "slurm_compute_burn_in_reason", reason)
    return change


def gpu01(name, value):
    def change(hostvars, groups):
        hostvars["gpu01"][name] = value
    return change


def budget_and_timeout(budget, timeout):
    def change(hostvars, groups):
        both_gpus(hostvars, "slurm_compute_healthcheck_budget_seconds", budget)
        both_gpus(hostvars, "slurm_compute_healthcheck_command_timeout_seconds", timeout)
    return change


def partitions(*parts):
    return ctl("slurm_controller_partitions", list(parts))


def gpu_part(**extra):
    part = {"name": "gpu", "nodes": "gpu_nodes", "default": True}
    part.update(extra)
    return part


# --- sound inventories --------------------------------------------------------------------------------------------
def test_base_inventory_passes():
    assert run(*base()) == []


def test_shipped_inventories_pass():
    for name in ("example", "lab"):
        hostvars, groups = _load_inventory(os.path.join(COLLECTION_ROOT, "inventories", name))
        assert run(hostvars, groups) == [], name


def test_sound_non_default_values_pass():
    def change(hostvars, groups):
        for host in ("gpu01", "gpu02"):
            hostvars[host].update({
                "slurm_compute_slurmctld_port": 7817, "slurm_compute_healthcheck_path": "/opt/cf/bin/hc",
                "slurm_compute_prolog_dir": "/etc/slurm/prolog.d/", "slurm_compute_controller": "head01",
                "slurm_compute_healthcheck_reason_prefix": "site-hc:",
                "slurm_compute_healthcheck_command_timeout_seconds": "15",
                "slurm_compute_healthcheck_lustre_mounts": ["/lustre/scratch"],
                "slurm_compute_healthcheck_gpu_count": 7,
                "slurm_compute_healthcheck_checks_disabled": ["pcie", "throttle"],
                "slurm_compute_healthcheck_strikes": {"temperature": 3, "timeout": "2", "xid": 1},
                "slurm_compute_healthcheck_max_drained_percent": 100,
                "slurm_compute_healthcheck_dcgm_ignore_error_codes": [12, "10", "DCGM_FR_PCI_REPLAY_RATE"],
                "slurm_compute_healthcheck_xid_ignore_codes": [],
                "slurm_compute_healthcheck_nvlink_active_links": 18,
                "slurm_compute_healthcheck_textfile_dir": "",
            })
        hostvars["head01"].update({
            "slurm_controller_slurmctld_port": "7817", "slurm_controller_health_check_program": "/opt/cf/bin/hc",
            "slurm_controller_cluster_name": "testcl", "slurm_controller_priority_decay_half_life": "14-0",
            "slurm_controller_priority_max_age": "1-12:00:00", "slurm_controller_task_plugin": "task/none",
            "slurm_controller_preempt_mode": "SUSPEND,GANG",
            "slurm_controller_extra_config": {"SchedulerParameters": "bf_continue,bf_window=10080",
                                              "PrologFlags": "Alloc", "SlurmctldDebug": "info",
                                              "Comment": '"two words"'},
            "slurm_controller_partitions": [
                gpu_part(max_time="UNLIMITED", options={"OverSubscribe": "EXCLUSIVE", "DefaultTime": "1:00:00",
                                                        "priorityTier": 10, "Hidden": "NO"}),
                {"name": "debug", "nodes": "gpu[01-02]", "max_time": 30},
                {"name": "short", "nodes": "gpu01", "max_time": "2-12"},
            ],
        })
    assert errors_with(change) == []


@pytest.mark.parametrize("value", ["UNLIMITED", "INFINITE", "infinite", "60", 60, "30:00", "04:00:00", "7-0",
                                   "1-12", "1-12:30", "7-00:00:00", "100:00:00"])
def test_slurm_times_accepted(value):
    assert slurm_time_seconds(value, unlimited=True)[1] is None


@pytest.mark.parametrize("value, problem", [
    ("2 days", "syntax"), ("a week", "syntax"), ("7d", "syntax"), ("", "syntax"), (" 60", "syntax"),
    ("1:2:3:4", "syntax"), (True, "syntax"), (None, "syntax"), (1.5, "syntax"), ("25:61:00", "range"),
    ("10:75", "range"), ("1-24", "range"), ("1-23:60", "range"), ("-5", "syntax"),
])
def test_slurm_times_rejected(value, problem):
    assert slurm_time_seconds(value, unlimited=True) == (None, problem)


def test_slurm_time_values():
    assert slurm_time_seconds("7-00:00:00")[0] == 7 * 86400
    assert slurm_time_seconds("90")[0] == 5400
    assert slurm_time_seconds("01:30")[0] == 90
    assert slurm_time_seconds("UNLIMITED") == (None, "syntax")
    assert slurm_time_seconds("UNLIMITED", unlimited=True) == (-1, None)


# --- one case per rule ---------------------------------------------------------------------------------------------
def two_controllers(hostvars, groups):
    hostvars["head02"] = dict(CLUSTER)
    groups["all"].append("head02")
    groups["slurm_controller"].append("head02")


def missing_compute_group(hostvars, groups):
    hostvars["head01"]["slurm_controller_compute_group"] = "gpus"


def empty_compute_group(hostvars, groups):
    groups["spare"] = []
    hostvars["head01"]["slurm_controller_compute_group"] = "spare"


def compute_group_outside_gpu(hostvars, groups):
    hostvars["head01"]["slurm_controller_compute_group"] = "lustre_clients"


def compute_group_partial(hostvars, groups):
    groups["rack1"] = ["gpu01"]
    hostvars["head01"]["slurm_controller_compute_group"] = "rack1"


def empty_partition_group(hostvars, groups):
    groups["spare"] = []
    hostvars["head01"]["slurm_controller_partitions"] = [gpu_part(), {"name": "spare", "nodes": "spare"}]


def partition_outside_compute_group(hostvars, groups):
    groups["rack1"] = ["gpu01"]
    hostvars["head01"]["slurm_controller_compute_group"] = "rack1"
    hostvars["head01"]["slurm_controller_partitions"] = [gpu_part(nodes="gpu[01-02]")]


def split_ports(hostvars, groups):
    both_gpus(hostvars, "slurm_compute_slurmctld_port", 7000)


def healthcheck_elsewhere(hostvars, groups):
    both_gpus(hostvars, "slurm_compute_healthcheck_path", "/usr/local/sbin/cf-healthcheck")


def prolog_elsewhere(hostvars, groups):
    hostvars["head01"]["slurm_controller_prolog_dir"] = "/etc/slurm/prolog"


def epilog_elsewhere(hostvars, groups):
    hostvars["gpu02"]["slurm_compute_epilog_dir"] = "/etc/slurm/epilog"


def same_prolog_epilog(hostvars, groups):
    hostvars["head01"]["slurm_controller_epilog_dir"] = "/etc/slurm/prolog.d"
    both_gpus(hostvars, "slurm_compute_epilog_dir", "/etc/slurm/prolog.d")


def healthcheck_in_epilog_dir(hostvars, groups):
    hostvars["head01"]["slurm_controller_health_check_program"] = "/etc/slurm/epilog.d/hc"
    both_gpus(hostvars, "slurm_compute_healthcheck_path", "/etc/slurm/epilog.d/hc")


RULE_CASES = [
    (two_controllers, "inventory: slurm_controller: 2 hosts (head01, head02): exactly one Slurm controller is "
                      "supported; a second controller (SlurmctldHost HA, a backup slurmctld) is not supported"),
    (missing_compute_group, "head01: slurm_controller_compute_group: group 'gpus' does not exist in the inventory"),
    (empty_compute_group, "head01: slurm_controller_compute_group: group 'spare' has no hosts"),
    (compute_group_outside_gpu, "group 'lustre_clients' holds hosts that are not in gpu_nodes (head01)"),
    (compute_group_partial, "group 'rack1' leaves out GPU nodes (gpu02)"),
    (ctl("slurm_controller_compute_group", ["gpu_nodes"]), "slurm_controller_compute_group: must be the name of an "
                                                           "inventory group, got list"),
    # partitions
    (partitions(gpu_part(max_time="2 days")), "inventory: slurm_controller_partitions[0].max_time: partition 'gpu': "
                                              "'2 days' is not a Slurm time"),
    (partitions(gpu_part(max_time="25:61:00")), "'25:61:00' is out of range"),
    (partitions(gpu_part(max_time="01:00")), "'01:00' is 60 s, too short for any GPU job"),
    (partitions(gpu_part(max_time=None)), "partition 'gpu': None is not a Slurm time"),
    (partitions(gpu_part(MaxTime="1-0")), "partition 'gpu' has an unknown key 'MaxTime'"),
    (empty_partition_group, "slurm_controller_partitions[1].nodes: partition 'spare' has no GPU nodes once group "
                            "'spare' is expanded"),
    (partitions(gpu_part(), {"name": "ctl", "nodes": "slurm_controller"}),
     "partition 'ctl' has no GPU nodes once group 'slurm_controller' is expanded"),
    (partition_outside_compute_group, "partition 'gpu' names hosts outside slurm_controller_compute_group (gpu02)"),
    (partitions(gpu_part(options="OverSubscribe=EXCLUSIVE")), "slurm_controller_partitions[0].options: partition "
                                                              "'gpu': must be a dict"),
    (partitions(gpu_part(options={"OverSubscribe": "EXCLUSIVE Hidden=YES"})),
     "'EXCLUSIVE Hidden=YES' would break or inject into the slurm.conf line"),
    (partitions(gpu_part(options={"AllowGroups": "ml#ops"})), "'ml#ops' would break or inject"),
    (partitions(gpu_part(options={"AllowGroups": "ml\nNodeName=evil"})), "'ml\\nNodeName=evil' would break"),
    (partitions(gpu_part(options={"Hidden": True})), "not a YAML boolean (it would be written as True"),
    (partitions(gpu_part(options={"OverSubscrib": "NO"})), "'OverSubscrib' is not a Slurm PartitionName key"),
    (partitions(gpu_part(options={"State": "DOWN"})), "State is written by the role itself"),
    (partitions(gpu_part(options={"Over Subscribe": "NO"})), "'Over Subscribe' is not a slurm.conf key"),
    (partitions(gpu_part(options={"Hidden": "maybe"})), "options.Hidden: partition 'gpu': must be YES or NO"),
    (partitions(gpu_part(options={"OverSubscribe": "ALWAYS"})), "must be EXCLUSIVE, NO, YES[:count] or FORCE"),
    (partitions(gpu_part(max_time="1:00:00", options={"DefaultTime": "2:00:00"})),
     "DefaultTime '2:00:00' exceeds the partition's max_time '1:00:00'"),
    (partitions(gpu_part(options={"DefaultTime": "2h"})), "DefaultTime: partition 'gpu': '2h' is not a Slurm time"),
    # ports
    (ctl("slurm_controller_slurmdbd_port", 6817), "head01: slurm_controller_slurmdbd_port: 6817 is already the "
                                                  "slurmctld port"),
    (ctl("slurm_controller_slurmd_port", 70000), "slurm_controller_slurmd_port: 70000 is not a TCP port"),
    (ctl("slurm_controller_slurmd_port", "ssh"), "slurm_controller_slurmd_port: must be a TCP port number"),
    (ctl("slurm_controller_slurmdbd_port", 3306), "3306 is MariaDB's port"),
    (ctl("slurm_controller_slurmctld_port", 22), "slurm_controller_slurmctld_port: 22 is the SSH port"),
    (split_ports, "gpu01: slurm_compute_slurmctld_port: 7000 differs from slurm_controller_slurmctld_port 6817 on "
                  "head01"),
    (gpu01("slurm_compute_slurmctld_port", 0), "gpu01: slurm_compute_slurmctld_port: 0 is not a TCP port"),
    # the roles agree
    (healthcheck_elsewhere, "gpu02: slurm_compute_healthcheck_path: '/usr/local/sbin/cf-healthcheck' differs from "
                            "slurm_controller_health_check_program"),
    (prolog_elsewhere, "gpu01: slurm_compute_prolog_dir: '/etc/slurm/prolog.d' differs from "
                       "slurm_controller_prolog_dir '/etc/slurm/prolog'"),
    (epilog_elsewhere, "gpu02: slurm_compute_epilog_dir: '/etc/slurm/epilog' differs from slurm_controller_epilog_dir"),
    (gpu01("slurm_compute_controller", "10.1.0.10"), "gpu01: slurm_compute_controller: '10.1.0.10' is not the "
                                                     "slurm_controller host head01"),
    # paths
    (gpus("slurm_compute_epilog_dir", "etc/slurm/epilog.d"), "slurm_compute_epilog_dir: must be an absolute path"),
    (ctl("slurm_controller_health_check_program", "/usr/libexec/cf hc"),
     "slurm_controller_health_check_program: contains characters that would break or inject"),
    (gpus("slurm_compute_healthcheck_path", "/usr/libexec/hc;reboot"),
     "gpu01: slurm_compute_healthcheck_path: contains characters that would break or inject into the epilog's shell"),
    (gpus("slurm_compute_healthcheck_path", "/usr/libexec/../hc"), "must not contain '.' or '..' components"),
    (gpus("slurm_compute_healthcheck_path", "/usr/libexec/"), "names a directory, not a program"),
    (ctl("slurm_controller_prolog_dir", "/"), "slurm_controller_prolog_dir: must not be the root directory"),
    (ctl("slurm_controller_reboot_program", "/sbin/shutdown -r now"), "slurm_controller_reboot_program: contains"),
    (ctl("slurm_controller_secrets_dir", "secrets"), "slurm_controller_secrets_dir: must be an absolute path"),
    (ctl("slurm_controller_state_save_location", "var/spool/slurmctld"),
     "slurm_controller_state_save_location: must be an absolute path"),
    (ctl("slurm_controller_state_save_location", "/var/spool/slurm ctld"),
     "slurm_controller_state_save_location: contains characters that would break or inject"),
    (gpus("slurm_compute_nvidia_smi_path", "nvidia-smi"), "slurm_compute_nvidia_smi_path: must be an absolute path"),
    (gpus("slurm_compute_healthcheck_lustre_mounts", ["lustre/scratch"]),
     "slurm_compute_healthcheck_lustre_mounts: must be an absolute path"),
    (gpus("slurm_compute_healthcheck_lustre_mounts", "/lustre/scratch"),
     "slurm_compute_healthcheck_lustre_mounts: must be a list of mount points"),
    (same_prolog_epilog, "slurm_compute_epilog_dir: '/etc/slurm/prolog.d' is also slurm_compute_prolog_dir"),
    (healthcheck_in_epilog_dir, "slurm_compute_healthcheck_path: '/etc/slurm/epilog.d/hc' lies in "
                                "slurm_compute_epilog_dir"),
    # reason prefix
    (gpus("slurm_compute_healthcheck_reason_prefix", ""), "gpu01: slurm_compute_healthcheck_reason_prefix: must not "
                                                          "be empty or blank"),
    (gpus("slurm_compute_healthcheck_reason_prefix", "   "), "must not be empty or blank (got '   ')"),
    (gpus("slurm_compute_healthcheck_reason_prefix", None), "slurm_compute_healthcheck_reason_prefix: must be a "
                                                            "string, got null"),
    (gpus("slurm_compute_healthcheck_reason_prefix", "cf-roll:"),
     "'cf-roll:' is the drain prefix of the rolling playbook (playbooks/rolling_reconfigure.yml) itself"),
    (gpus("slurm_compute_healthcheck_reason_prefix", "cf-"), "'cf-' is a prefix of 'cf-roll:'"),
    (gpus("slurm_compute_healthcheck_reason_prefix", "cf-roll:x"), "'cf-roll:x' starts with 'cf-roll:'"),
    (gpus("slurm_compute_healthcheck_reason_prefix", "NHC:"), "'NHC:' is the drain prefix of LBNL Node Health Check"),
    (gpus("slurm_compute_healthcheck_reason_prefix", "Kill"), "'Kill' begins Slurm's own drain reason "
                                                              "'Kill task failed'"),
    (gpus("slurm_compute_healthcheck_reason_prefix", 'hc "x"'), "contains a quote, a backslash, a newline"),
    (gpus("slurm_compute_healthcheck_reason_prefix", "hc:\nState=RESUME"), "contains a quote, a backslash, a newline"),
    (gpus("slurm_compute_healthcheck_reason_prefix", " hc:"), "' hc:' starts with whitespace"),
    (gpus("slurm_compute_healthcheck_reason_prefix", "x" * 41), "is longer than 40 characters"),
    # timings
    (ctl("slurm_controller_health_check_interval_seconds", 0),
     "slurm_controller_health_check_interval_seconds: 0 is outside 1-65533 (0 turns the periodic health check off"),
    (ctl("slurm_controller_slurmd_timeout_seconds", 0), "slurm_controller_slurmd_timeout_seconds: 0 is outside"),
    (ctl("slurm_controller_message_timeout_seconds", 300), "slurm_controller_message_timeout_seconds: 300 is outside "
                                                           "1-100"),
    (ctl("slurm_controller_unkillable_step_timeout_seconds", 60), "60 s is less than 5 x MessageTimeout (30 s)"),
    (ctl("slurm_controller_resume_timeout_seconds", 60), "slurm_controller_resume_timeout_seconds: 60 is outside "
                                                         "300-65533"),
    (ctl("slurm_controller_return_to_service", 3), "slurm_controller_return_to_service: 3 is outside 0-2"),
    (ctl("slurm_controller_kill_wait_seconds", "thirty"), "slurm_controller_kill_wait_seconds: must be an integer"),
    (ctl("slurm_controller_priority_decay_half_life", "a week"), "slurm_controller_priority_decay_half_life: "
                                                                 "'a week' is not a Slurm time"),
    (ctl("slurm_controller_priority_max_age", "UNLIMITED"), "slurm_controller_priority_max_age: 'UNLIMITED' is not"),
    (gpus("slurm_compute_healthcheck_command_timeout_seconds", 120),
     "gpu01: slurm_compute_healthcheck_command_timeout_seconds: 120 s is not below Slurm's 60 s"),
    (gpus("slurm_compute_healthcheck_command_timeout_seconds", 45),
     "gpu01: slurm_compute_healthcheck_command_timeout_seconds: 45 s is more than "
     "slurm_compute_healthcheck_budget_seconds (40 s)"),
    (budget_and_timeout(30, 35), "gpu02: slurm_compute_healthcheck_command_timeout_seconds: 35 s is more than "
                                 "slurm_compute_healthcheck_budget_seconds (30 s)"),
    (gpus("slurm_compute_healthcheck_budget_seconds", 60),
     "gpu01: slurm_compute_healthcheck_budget_seconds: 60 s is not below Slurm's 60 s HealthCheckProgram kill limit"),
    (gpus("slurm_compute_healthcheck_budget_seconds", 9), "slurm_compute_healthcheck_budget_seconds: 9 s is below "
                                                          "10 s"),
    (gpus("slurm_compute_healthcheck_budget_seconds", "40s"), "slurm_compute_healthcheck_budget_seconds: must be an "
                                                              "integer number of seconds"),
    (gpus("slurm_compute_healthcheck_command_timeout_seconds", 0), "0 s: each command of the health check needs"),
    (gpus("slurm_compute_healthcheck_command_timeout_seconds", "1m"), "command_timeout_seconds: must be an integer "
                                                                      "number of seconds"),
    # controller values
    (ctl("slurm_controller_cluster_name", "prod"), "slurm_controller_cluster_name: 'prod' differs from cluster_name "
                                                   "'testcl'"),
    (ctl("slurm_controller_node_memory_reserve_percent", 75), "node_memory_reserve_percent: 75 is outside 0-50"),
    (ctl("slurm_controller_node_memory_reserve_min_mb", -1), "node_memory_reserve_min_mb: -1 is outside >= 0"),
    (ctl("slurm_controller_priority_weight_qos", -5), "slurm_controller_priority_weight_qos: -5 is outside"),
    (ctl("slurm_controller_proctrack_type", "proctrack/cgroups"), "'proctrack/cgroups' is not one of"),
    (ctl("slurm_controller_task_plugin", "task/cgroup task/affinity"), "slurm_controller_task_plugin: 'task/cgroup "
                                                                       "task/affinity' would break"),
    (ctl("slurm_controller_health_check_node_state", "ANY,CYCLES"), "health_check_node_state: 'ANY,CYCLES' is not"),
    (ctl("slurm_controller_select_type_parameters", "CR_Core_Memory # x"), "select_type_parameters: "
                                                                           "'CR_Core_Memory # x' would break"),
    (ctl("slurm_controller_accounting_storage_enforce", "associations,limits"),
     "accounting_storage_enforce: must be a list of AccountingStorageEnforce flags"),
    (ctl("slurm_controller_accounting_storage_enforce", ["associations", "limit"]),
     "unknown AccountingStorageEnforce flags ['limit']"),
    (ctl("slurm_controller_extra_config", {"SlurmctldParameters": "enable_configless,idle_on_node_suspend"}),
     "slurm_controller_extra_config.SlurmctldParameters: SlurmctldParameters is written by the role itself"),
    (ctl("slurm_controller_extra_config", {"slurmctldport": 7000}),
     "slurmctldport is written by the role itself (set slurm_controller_slurmctld_port)"),
    (ctl("slurm_controller_extra_config", {"SchedulerParameters": "bf_continue\nNodeName=x"}),
     "slurm_controller_extra_config.SchedulerParameters: 'bf_continue\\nNodeName=x' would break"),
    (ctl("slurm_controller_extra_config", ["PrologFlags=Alloc"]), "slurm_controller_extra_config: must be a dict"),
    (ctl("slurm_controller_extra_config", {"Prolog Flags": "Alloc"}), "'Prolog Flags' is not a slurm.conf key"),
    (gpu01("slurm_controller_node_cooling", "liquid cooled"), "gpu01: slurm_controller_node_cooling: 'liquid "
                                                              "cooled' is not a Slurm node feature"),
    (ctl("slurm_controller_node_features_extra", ["ib,ndr"]),
     "gpu02: slurm_controller_node_features_extra: ['ib,ndr']"),
    (gpus("slurm_compute_healthcheck_max_temperature_c", 185), "slurm_compute_healthcheck_max_temperature_c: 185 "
                                                               "is outside 40-100 C"),
    (gpus("slurm_compute_healthcheck_max_ecc_uncorrectable", -1), "max_ecc_uncorrectable: -1 is outside >= 0"),
    (gpus("slurm_compute_healthcheck_gpu_count", 9), "slurm_compute_healthcheck_gpu_count: 9 is more than the "
                                                     "node's 8 GPUs"),
    (gpus("slurm_compute_healthcheck_gpu_count", "eight"), "slurm_compute_healthcheck_gpu_count: must be a number"),
    # the health check's switches, strikes, breaker and DCGM codes
    (gpus("slurm_compute_healthcheck_checks_disabled", ["xid", "ecc2"]),
     "gpu01: slurm_compute_healthcheck_checks_disabled: 'ecc2' is not a health check (known: gpu_count, ecc,"),
    (gpus("slurm_compute_healthcheck_checks_disabled", "xid"),
     "slurm_compute_healthcheck_checks_disabled: must be a list of health check names, got string 'xid'"),
    (gpus("slurm_compute_healthcheck_strikes", {"temprature": 2}),
     "slurm_compute_healthcheck_strikes: 'temprature' is not a health check, nor timeout"),
    (gpus("slurm_compute_healthcheck_strikes", {"ecc": 0}),
     "slurm_compute_healthcheck_strikes.ecc: must be a whole number of runs of at least 1 (1: the first failing run "
     "drains), got 0"),
    (gpus("slurm_compute_healthcheck_strikes", {"timeout": "two"}),
     "slurm_compute_healthcheck_strikes.timeout: must be a whole number of runs of at least 1"),
    (gpus("slurm_compute_healthcheck_strikes", [["ecc", 2]]),
     "slurm_compute_healthcheck_strikes: must be a dict of health check name: runs in a row"),
    (gpus("slurm_compute_healthcheck_max_drained_percent", 0),
     "slurm_compute_healthcheck_max_drained_percent: 0 is outside 1-100 % of the nodes (the circuit breaker"),
    (gpus("slurm_compute_healthcheck_max_drained_percent", 150),
     "slurm_compute_healthcheck_max_drained_percent: 150 is outside 1-100"),
    # burn-in: a reason the deep checks own and would resume
    (burn_in("burn-in: x"), "gpu01: slurm_compute_burn_in_reason: 'burn-in: x' does not start with 'cf-deep:'"),
    (burn_in("cf-health: new"), "slurm_compute_burn_in_reason: 'cf-health: new' does not start with 'cf-deep:'"),
    (burn_in("cf-deep: "), "slurm_compute_burn_in_reason: 'cf-deep: ' is the prefix alone"),
    (burn_in("cf-deep: it's new"), "slurm_compute_burn_in_reason: \"cf-deep: it's new\" contains a quote"),
    (burn_in("cf-deep: " + "x" * 200), "slurm_compute_burn_in_reason: is 209 characters long"),
    (burn_in(None), "slurm_compute_burn_in_reason: must be a string starting with 'cf-deep:', got null None"),
    (gpus("slurm_compute_healthcheck_dcgm_ignore_error_codes", [12, 999]),
     "slurm_compute_healthcheck_dcgm_ignore_error_codes: 999 is not a DCGM health error code the check recognises"),
    (gpus("slurm_compute_healthcheck_dcgm_ignore_error_codes", ["DCGM_FR_CLOCK_THROTTLE_POWR"]),
     "'DCGM_FR_CLOCK_THROTTLE_POWR' is not a DCGM health error code"),
    (gpus("slurm_compute_healthcheck_dcgm_ignore_error_codes", [True]),
     "slurm_compute_healthcheck_dcgm_ignore_error_codes: True is not a DCGM health error code"),
    (gpus("slurm_compute_healthcheck_dcgm_ignore_error_codes", "12"),
     "slurm_compute_healthcheck_dcgm_ignore_error_codes: must be a list of DCGM error codes"),
    (gpus("slurm_compute_healthcheck_xid_ignore_codes", [13, -1]),
     "slurm_compute_healthcheck_xid_ignore_codes: [-1] are not Xid numbers"),
    (gpus("slurm_compute_healthcheck_nvlink_active_links", -2),
     "slurm_compute_healthcheck_nvlink_active_links: -2 is outside >= 0"),
    (gpus("slurm_compute_healthcheck_ib_max_error_increase", "many"),
     "slurm_compute_healthcheck_ib_max_error_increase: must be an integer"),
    (gpus("slurm_compute_healthcheck_textfile_dir", "var/lib/node-exporter"),
     "slurm_compute_healthcheck_textfile_dir: must be an absolute path"),
]


@pytest.mark.parametrize("change, message", RULE_CASES,
                         ids=[str(i) + "-" + re.sub(r"\W+", "_", m)[:40] for i, (c, m) in enumerate(RULE_CASES)])
def test_rule(change, message):
    errors = errors_with(change)
    assert any(message in e for e in errors), errors
    for error in errors:
        assert re.match(r"^(inventory|[a-z0-9]+): [A-Za-z0-9_.\[\] ]+: ", error), error


def test_messages_are_distinct_per_case():
    messages = [m for c, m in RULE_CASES]
    for i, first in enumerate(messages):
        for j, other in enumerate(messages):
            if i != j and first in other and first != other:
                # a shorter expected message that also appears in another case's expectation must still be
                # produced only by its own mistake: the other case's errors must not contain it
                assert not any(first in e for e in errors_with(RULE_CASES[j][0])), (first, other)


def test_mismatch_is_reported_per_gpu_node():
    errors = errors_with(split_ports)
    assert [e.split(":")[0] for e in errors] == ["gpu01", "gpu02"]


def test_one_controller_rules_use_the_first_controller():
    errors = errors_with(two_controllers)
    assert len(errors) == 1


def test_no_controller_group_does_not_raise():
    hostvars, groups = base()
    del groups["slurm_controller"]
    assert isinstance(run(hostvars, groups), list)


@pytest.mark.parametrize("value", [None, "x", 7, 1.5, True, [1, "a"], {"a": 1}, [{"name": None}], ["gpu"],
                                   [{"name": "gpu", "nodes": {"a": 1}, "max_time": [1], "options": [1]}],
                                   [{"name": "gpu", "nodes": "gpu[01-", "options": {1: None, "Hidden": None}}]])
def test_wrong_shapes_do_not_raise(value):
    hostvars, groups = base()
    for host in hostvars:
        for name in ("slurm_controller_partitions", "slurm_controller_slurmctld_port", "slurm_controller_compute_group",
                     "slurm_controller_extra_config", "slurm_controller_prolog_dir",
                     "slurm_controller_accounting_storage_enforce", "slurm_controller_node_features_extra",
                     "slurm_controller_priority_max_age", "slurm_controller_task_plugin",
                     "slurm_compute_healthcheck_reason_prefix", "slurm_compute_healthcheck_lustre_mounts",
                     "slurm_compute_healthcheck_path", "slurm_compute_slurmctld_port", "slurm_compute_controller",
                     "slurm_compute_healthcheck_command_timeout_seconds", "slurm_compute_healthcheck_gpu_count",
                     "slurm_compute_healthcheck_budget_seconds",
                     "slurm_compute_healthcheck_checks_disabled", "slurm_compute_healthcheck_strikes",
                     "slurm_compute_healthcheck_max_drained_percent",
                     "slurm_compute_healthcheck_dcgm_ignore_error_codes", "slurm_compute_healthcheck_xid_ignore_codes",
                     "slurm_compute_healthcheck_nvlink_active_links", "slurm_compute_healthcheck_textfile_dir",
                     "slurm_compute_healthcheck_nvlink_max_error_increase",
                     "slurm_controller_node_cooling", "slurm_controller_cluster_name"):
            hostvars[host][name] = copy.deepcopy(value)
    errors = run(hostvars, groups)
    assert isinstance(errors, list)
    assert not [e for e in errors if "stopped on a value of an unexpected shape" in e], errors


def test_default_prefix_and_timeout_pass():
    assert reason_prefix_problems("cf-health:") == []
    assert reason_prefix_problems("cf-health") == []
    assert reason_prefix_problems("[cf-health]") == []


def test_rolling_prefix_is_the_playbooks():
    with open(os.path.join(COLLECTION_ROOT, "roles", "rolling", "vars", "main.yml")) as handle:
        assert yaml.safe_load(handle)["__rolling_prefix"] == "cf-roll:"
    assert preflight_slurm.OTHER_REASON_OWNERS[0][0] == "cf-roll:"


def test_spec_defaults_pass_the_rules():
    """The roles' own defaults (what a silent inventory gets) are accepted by every rule."""
    assert reason_prefix_problems(spec_default("slurm_compute", "slurm_compute_healthcheck_reason_prefix")) == []
    timeout = spec_default("slurm_compute", "slurm_compute_healthcheck_command_timeout_seconds")
    budget = spec_default("slurm_compute", "slurm_compute_healthcheck_budget_seconds")
    assert preflight_slurm.HEALTHCHECK_BUDGET_MIN <= budget < preflight_slurm.HEALTHCHECK_KILL_SECONDS
    assert 1 <= timeout <= budget
    # well inside slurmd's limit, not at its edge: the issue "Slurm where users are" asks for about 40 s
    assert budget <= 45
    with open(os.path.join(COLLECTION_ROOT, "roles", "slurm_compute", "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    assert defaults["slurm_compute_healthcheck_command_timeout_seconds"] == timeout
    assert defaults["slurm_compute_healthcheck_budget_seconds"] == budget


@pytest.mark.parametrize("budget, timeout", [(10, 10), (59, 59), (40, 25), (30, 30), ("40", "20")])
def test_sound_budgets_and_timeouts_pass(budget, timeout):
    assert errors_with(budget_and_timeout(budget, timeout)) == []


# --- loading a shipped inventory without Ansible ---------------------------------------------------------------------
def _load_inventory(path):
    """hostvars and groups of a YAML inventory directory (hosts.yml + group_vars/<group>/*.yml), group precedence
    all < child groups, enough for these rules."""
    with open(os.path.join(path, "hosts.yml")) as handle:
        tree = yaml.safe_load(handle)
    groups = {"all": []}
    host_vars = {}
    parents = {}

    def walk(name, node, parent):
        node = node or {}
        groups.setdefault(name, [])
        if parent:
            parents.setdefault(name, set()).add(parent)
        for host, hvars in (node.get("hosts") or {}).items():
            host_vars.setdefault(host, {}).update(hvars or {})
            if host not in groups[name]:
                groups[name].append(host)
            if host not in groups["all"]:
                groups["all"].append(host)
        for child, sub in (node.get("children") or {}).items():
            walk(child, sub, name)

    walk("all", tree["all"], None)
    changed = True
    while changed:  # a parent group holds its children's hosts
        changed = False
        for child, ups in parents.items():
            for up in ups:
                for host in groups[child]:
                    if host not in groups[up]:
                        groups[up].append(host)
                        changed = True

    def group_vars(name):
        out = {}
        folder = os.path.join(path, "group_vars", name)
        if os.path.isdir(folder):
            for fname in sorted(os.listdir(folder)):
                with open(os.path.join(folder, fname)) as handle:
                    out.update(yaml.safe_load(handle) or {})
        return out

    hostvars = {}
    for host in groups["all"]:
        values = group_vars("all")
        for name in groups:
            if name != "all" and host in groups[name]:
                values.update(group_vars(name))
        values.update(host_vars.get(host, {}))
        hostvars[host] = values
    return hostvars, groups


# --- the health check's own lists ------------------------------------------------------------------------------------
def test_health_check_names_and_codes_are_the_programs():
    """The check names, strike keys and DCGM codes preflight accepts are the ones the health check program knows:
    both read plugins/module_utils/healthcheck.py, which the program's package imports (installed beside it)."""
    import ast
    import glob
    from ansible_collections.clusterforge.gpu.plugins.module_utils import healthcheck
    package = os.path.join(COLLECTION_ROOT, "roles", "slurm_compute", "files", "clusterforge_health")
    imported = set()
    for path in glob.glob(os.path.join(package, "*.py")):
        with open(path) as handle:
            tree = ast.parse(handle.read())
        imported |= {a.name for n in tree.body if isinstance(n, ast.ImportFrom) and n.module == "clusterforge_healthcheck"
                     for a in n.names}
    assert {"CHECKS", "DEFAULT_STRIKES", "DCGM_HEALTH_CODES"} <= imported, imported
    assert preflight_slurm.HEALTHCHECK_CHECKS == healthcheck.CHECKS
    assert tuple(sorted(healthcheck.DEFAULT_STRIKES)) == tuple(sorted(preflight_slurm.HEALTHCHECK_STRIKE_KEYS))
    assert tuple((code, name) for code, name, _pattern in healthcheck.DCGM_HEALTH_CODES) == \
        preflight_slurm.DCGM_HEALTH_CODES


def test_health_check_defaults_pass():
    for name in ("slurm_compute_healthcheck_checks_disabled", "slurm_compute_healthcheck_strikes",
                 "slurm_compute_healthcheck_max_drained_percent", "slurm_compute_healthcheck_dcgm_ignore_error_codes",
                 "slurm_compute_healthcheck_xid_ignore_codes", "slurm_compute_healthcheck_textfile_dir"):
        assert spec_default("slurm_compute", name) is not None, name
    assert spec_default("slurm_compute", "slurm_compute_healthcheck_max_drained_percent") == 10
    assert run(*base()) == []


def test_burn_in_is_checked_only_when_it_is_on_and_a_sound_reason_passes():
    assert not errors_with(gpus("slurm_compute_burn_in_reason", "no prefix at all"))
    assert not errors_with(burn_in("cf-deep: burn-in: new node, deep checks pending"))
