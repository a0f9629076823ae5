"""Slurm mistakes in an inventory are rejected by site.yml's first play, each with its own message, before any change.

Each case runs the real ``ansible-playbook site.yml`` against the sound base inventory with one mistake (see
integration/preflight_helpers.py for why a rejection there proves nothing was touched).
"""

import copy

import pytest

from integration.preflight_helpers import (  # tests/ is on sys.path (tests/conftest.py)
    all_vars, assert_distinct_messages, base_inventory, case_ids, group_vars, host, reject_case, run_playbook,
)


def controller(inv):
    return host(inv, "slurm_controller", "head01")


def gpu_group(inv):
    return group_vars(inv, "gpu_nodes")


def partitions(inv, **extra):
    part = {"name": "gpu", "nodes": "gpu_nodes", "default": True}
    part.update(extra)
    controller(inv)["slurm_controller_partitions"] = [part]


def mutate_second_controller(inv):
    inv["all"]["children"]["slurm_controller"]["hosts"]["head02"] = {
        "cluster_mgmt_ip": "10.1.0.11", "cluster_fabric_ip": "10.2.0.11"}


def mutate_max_time_in_words(inv):
    partitions(inv, max_time="2 days")


def mutate_max_time_out_of_range(inv):
    partitions(inv, max_time="25:61:00")


def mutate_partition_option_injection(inv):
    partitions(inv, options={"AllowGroups": "ml\nNodeName=evil CPUs=1"})


def mutate_partition_unknown_option(inv):
    partitions(inv, options={"OverSubscrib": "EXCLUSIVE"})


def mutate_partition_on_empty_group(inv):
    inv["all"]["children"]["spare_gpus"] = {"hosts": {}}
    partitions(inv)
    controller(inv)["slurm_controller_partitions"].append({"name": "spare", "nodes": "spare_gpus"})


def mutate_port_mismatch(inv):
    gpu_group(inv)["slurm_compute_slurmctld_port"] = 7817


def mutate_healthcheck_path_mismatch(inv):
    controller(inv)["slurm_controller_health_check_program"] = "/opt/clusterforge/healthcheck"


def mutate_compute_controller_elsewhere(inv):
    host(inv, "gpu_nodes", "gpu02")["slurm_compute_controller"] = "stor01"


def mutate_empty_reason_prefix(inv):
    gpu_group(inv)["slurm_compute_healthcheck_reason_prefix"] = ""


def mutate_rolling_prefix(inv):
    gpu_group(inv)["slurm_compute_healthcheck_reason_prefix"] = "cf-roll:"


def mutate_umbrella_prefix(inv):
    gpu_group(inv)["slurm_compute_healthcheck_reason_prefix"] = "cf-"


def mutate_prefix_inside_rolling(inv):
    host(inv, "gpu_nodes", "gpu01")["slurm_compute_healthcheck_reason_prefix"] = "cf-roll:health"


def mutate_relative_epilog_dir(inv):
    controller(inv)["slurm_controller_epilog_dir"] = "slurm/epilog.d"
    gpu_group(inv)["slurm_compute_epilog_dir"] = "slurm/epilog.d"


def mutate_prolog_dir_with_space(inv):
    controller(inv)["slurm_controller_prolog_dir"] = "/etc/slurm/prolog d"
    gpu_group(inv)["slurm_compute_prolog_dir"] = "/etc/slurm/prolog d"


def mutate_healthcheck_path_injection(inv):
    controller(inv)["slurm_controller_health_check_program"] = "/usr/libexec/hc;reboot"
    gpu_group(inv)["slurm_compute_healthcheck_path"] = "/usr/libexec/hc;reboot"


def mutate_decay_half_life_in_words(inv):
    controller(inv)["slurm_controller_priority_decay_half_life"] = "a week"


def mutate_healthcheck_timeout_120(inv):
    gpu_group(inv)["slurm_compute_healthcheck_command_timeout_seconds"] = 120


def mutate_healthcheck_budget_60(inv):
    gpu_group(inv)["slurm_compute_healthcheck_budget_seconds"] = 60


def mutate_healthcheck_timeout_above_budget(inv):
    gpu_group(inv).update({"slurm_compute_healthcheck_budget_seconds": 30,
                           "slurm_compute_healthcheck_command_timeout_seconds": 35})


def mutate_healthcheck_strikes_typo(inv):
    gpu_group(inv)["slurm_compute_healthcheck_strikes"] = {"temprature": 2}


def mutate_healthcheck_breaker_0(inv):
    gpu_group(inv)["slurm_compute_healthcheck_max_drained_percent"] = 0


def mutate_healthcheck_unknown_dcgm_code(inv):
    gpu_group(inv)["slurm_compute_healthcheck_dcgm_ignore_error_codes"] = [999]


def mutate_slurmdbd_port_is_slurmctld_port(inv):
    controller(inv)["slurm_controller_slurmdbd_port"] = 6817


def mutate_compute_group_missing(inv):
    controller(inv)["slurm_controller_compute_group"] = "gpu_servers"


def mutate_cluster_name_differs(inv):
    controller(inv)["slurm_controller_cluster_name"] = "prod"


def mutate_memory_reserve_80(inv):
    all_vars(inv)["slurm_controller_node_memory_reserve_percent"] = 80


def mutate_health_check_interval_0(inv):
    controller(inv)["slurm_controller_health_check_interval_seconds"] = 0


def mutate_unkillable_below_message_timeout(inv):
    controller(inv)["slurm_controller_unkillable_step_timeout_seconds"] = 60


def mutate_extra_config_overrides_configless(inv):
    controller(inv)["slurm_controller_extra_config"] = {"SlurmctldParameters": "idle_on_node_suspend"}


CASES = [
    (mutate_second_controller, "a second controller (SlurmctldHost HA, a backup slurmctld) is not supported"),
    (mutate_max_time_in_words,
     "slurm_controller_partitions[0].max_time: partition 'gpu': '2 days' is not a Slurm time"),
    (mutate_max_time_out_of_range, "partition 'gpu': '25:61:00' is out of range"),
    (mutate_partition_option_injection, "slurm_controller_partitions[0].options.AllowGroups: partition 'gpu': "),
    (mutate_partition_unknown_option, "'OverSubscrib' is not a Slurm PartitionName key"),
    (mutate_partition_on_empty_group, "partition 'spare' has no GPU nodes once group 'spare_gpus' is expanded"),
    (mutate_port_mismatch, "gpu01: slurm_compute_slurmctld_port: 7817 differs from slurm_controller_slurmctld_port "
                           "6817 on head01"),
    (mutate_healthcheck_path_mismatch, "gpu02: slurm_compute_healthcheck_path: "
                                       "'/usr/libexec/clusterforge/slurm-healthcheck' differs from "
                                       "slurm_controller_health_check_program '/opt/clusterforge/healthcheck'"),
    (mutate_compute_controller_elsewhere, "gpu02: slurm_compute_controller: 'stor01' is not the slurm_controller "
                                          "host head01"),
    (mutate_empty_reason_prefix, "gpu01: slurm_compute_healthcheck_reason_prefix: must not be empty or blank"),
    (mutate_rolling_prefix, "'cf-roll:' is the drain prefix of the rolling playbook"),
    (mutate_umbrella_prefix, "'cf-' is a prefix of 'cf-roll:'"),
    (mutate_prefix_inside_rolling, "gpu01: slurm_compute_healthcheck_reason_prefix: 'cf-roll:health' starts with "
                                   "'cf-roll:'"),
    (mutate_relative_epilog_dir, "slurm_compute_epilog_dir: must be an absolute path"),
    (mutate_prolog_dir_with_space, "head01: slurm_controller_prolog_dir: contains characters that would break or "
                                   "inject into slurm.conf's Prolog line"),
    (mutate_healthcheck_path_injection, "gpu01: slurm_compute_healthcheck_path: contains characters that would "
                                        "break or inject into the epilog's shell line"),
    (mutate_decay_half_life_in_words, "head01: slurm_controller_priority_decay_half_life: 'a week' is not a Slurm "
                                      "time"),
    (mutate_healthcheck_timeout_120, "slurm_compute_healthcheck_command_timeout_seconds: 120 s is not below Slurm's "
                                     "60 s HealthCheckProgram kill limit"),
    (mutate_healthcheck_budget_60, "slurm_compute_healthcheck_budget_seconds: 60 s is not below Slurm's 60 s "
                                   "HealthCheckProgram kill limit"),
    (mutate_healthcheck_timeout_above_budget, "slurm_compute_healthcheck_command_timeout_seconds: 35 s is more than "
                                              "slurm_compute_healthcheck_budget_seconds (30 s)"),
    (mutate_healthcheck_strikes_typo, "gpu01: slurm_compute_healthcheck_strikes: 'temprature' is not a health "
                                      "check, nor timeout"),
    (mutate_healthcheck_breaker_0, "gpu02: slurm_compute_healthcheck_max_drained_percent: 0 is outside 1-100"),
    (mutate_healthcheck_unknown_dcgm_code, "slurm_compute_healthcheck_dcgm_ignore_error_codes: 999 is not a DCGM "
                                           "health error code the check recognises"),
    (mutate_slurmdbd_port_is_slurmctld_port, "head01: slurm_controller_slurmdbd_port: 6817 is already the slurmctld "
                                             "port"),
    (mutate_compute_group_missing, "slurm_controller_compute_group: group 'gpu_servers' does not exist"),
    (mutate_cluster_name_differs, "slurm_controller_cluster_name: 'prod' differs from cluster_name 'testcl'"),
    (mutate_memory_reserve_80, "slurm_controller_node_memory_reserve_percent: 80 is outside 0-50"),
    (mutate_health_check_interval_0, "slurm_controller_health_check_interval_seconds: 0 is outside 1-65533"),
    (mutate_unkillable_below_message_timeout, "60 s is less than 5 x MessageTimeout (30 s)"),
    (mutate_extra_config_overrides_configless, "slurm_controller_extra_config.SlurmctldParameters: "
                                               "SlurmctldParameters is written by the role itself"),
]


@pytest.mark.parametrize("mutate,message", CASES, ids=case_ids(CASES))
def test_slurm_mistake_is_rejected_before_any_change(tmp_path, mutate, message):
    reject_case(tmp_path, mutate, message)


def test_each_case_has_its_own_message():
    assert_distinct_messages([case[1] for case in CASES], 14)


def test_sound_slurm_settings_pass(tmp_path):
    inv = copy.deepcopy(base_inventory())
    partitions(inv, max_time="7-00:00:00", options={"OverSubscribe": "EXCLUSIVE", "DefaultTime": "04:00:00"})
    controller(inv)["slurm_controller_partitions"].append({"name": "debug", "nodes": "gpu01", "max_time": "01:00:00"})
    controller(inv)["slurm_controller_slurmctld_port"] = 7817
    controller(inv)["slurm_controller_health_check_program"] = "/opt/clusterforge/healthcheck"
    gpu_group(inv).update({"slurm_compute_slurmctld_port": 7817,
                           "slurm_compute_healthcheck_path": "/opt/clusterforge/healthcheck",
                           "slurm_compute_healthcheck_reason_prefix": "site-health:",
                           "slurm_compute_healthcheck_command_timeout_seconds": 15,
                           "slurm_compute_healthcheck_checks_disabled": ["throttle"],
                           "slurm_compute_healthcheck_strikes": {"temperature": 3, "timeout": 2},
                           "slurm_compute_healthcheck_dcgm_ignore_error_codes": [12, "DCGM_FR_CLOCK_THROTTLE_THERMAL"],
                           "slurm_compute_healthcheck_max_drained_percent": 25,
                           "slurm_compute_healthcheck_mig_mode": False})
    rc, out = run_playbook(tmp_path, inv, "playbooks/preflight.yml")
    assert rc == 0, out
