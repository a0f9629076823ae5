"""Operator mistakes across monitoring, bios, slurm_upgrade, health_deep, validation and the health check, each
rejected by the playbook that would act on it before any host is contacted (issue 40).

CI time is tight, so each playbook runs once against one inventory that holds all of its mistakes: preflight reports
every broken rule of a run, and each mistake's own message must be in that report. The rules behind them come from
the specs and the names (plugins/plugin_utils/preflight_generic.py, roles/*/meta/preflight.yml), the references
between roles (preflight_cross.py) and the one-edit typo rule (preflight_specs.typo_errors).
"""

import copy
import re

import pytest

from integration.preflight_helpers import (  # tests/ is on sys.path (tests/conftest.py)
    all_vars, assert_distinct_messages, assert_rejected_before_any_change, base_inventory, group_vars, host,
    run_playbook,
)

# (where, variable, value, message): where is "all", a group or a host; every message is that mistake's alone.
MONITORING = [
    ("all", "monitoring_prometheus_retention_days", 0,
     "head01: monitoring_prometheus_retention_days: 0 is below the minimum 1 (0 keeps no samples)"),
    ("all", "monitoring_scrape_interval_seconds", 0,
     "head01: monitoring_scrape_interval_seconds: 0 is below the minimum 1 (0 is not a Prometheus interval)"),
    ("all", "monitoring_alertmanager_webhook_url", "hooks.example.org/alert",
     "monitoring_alertmanager_webhook_url: 'hooks.example.org/alert' is not a URL"),
    ("all", "monitoring_prometheus_port", 9100,
     "head01: monitoring_prometheus_port (Prometheus): port 9100 is also the port of "
     "monitoring_node_exporter_port (node-exporter) on this host"),
    ("all", "monitoring_dcgm_exporter_port", 9500,
     "head01: monitoring_dcgm_exporter_port: the dcgm-exporter scrape uses port 9500, but dcgm_exporter_listen_port "
     "is 9400 on gpu01, gpu02"),
    ("all", "monitoring_gpu_temperature_max_c", 150, "monitoring_gpu_temperature_max_c: 150 is outside 1-120"),
    ("all", "monitoring_slurm_drained_share_max_percent", 120,
     "monitoring_slurm_drained_share_max_percent: 120 is not a percentage (0-100)"),
    ("all", "monitoring_healthcheck_max_age_seconds", 0,
     "monitoring_healthcheck_max_age_seconds: 0 is below the minimum 1 (0 would call every health check stale)"),
    ("all", "monitoring_alertmanager_repeat_interval_seconds", -5,
     "monitoring_alertmanager_repeat_interval_seconds: -5 is below the minimum 1"),
    ("all", "monitoring_evaluation_intervall_seconds", 30,
     "monitoring_evaluation_intervall_seconds (on gpu01, gpu02, stor01, head01): no role or playbook defines this variable, and it "
     "is one letter away from monitoring_evaluation_interval_seconds"),
    ("all", "monitoring_node_exporter_textfile_dir", "var/lib/node-exporter",
     "monitoring_node_exporter_textfile_dir: must be an absolute path on the node, got 'var/lib/node-exporter'"),
]
BIOS = [
    ("gpu_nodes", "bios_bmc_timeout_seconds", 0,
     "gpu01: bios_bmc_timeout_seconds: 0 is outside 1-3600 (0 would give each Redfish request no time)"),
    ("gpu_nodes", "bios_bmc_ca_path", "certs/bmc-ca.pem",
     "gpu01: bios_bmc_ca_path: must be an absolute path on the node, got 'certs/bmc-ca.pem'"),
    ("gpu_nodes", "bios_enabeld", True,
     "bios_enabeld (on gpu01, gpu02): no role or playbook defines this variable, and it is one letter away from "
     "bios_enabled"),
    ("gpu_nodes", "bios_settings", ["ProcessorHyperThreading=Disabled"],
     "gpu01: bios_settings: must be a dict (key: value), got a list"),
    ("gpu_nodes", "bios_apply", "yes", "gpu01: bios_apply: must be a boolean (true/false), got 'yes'"),
    ("gpu_nodes", "bios_bmc_auth", "digest", "gpu01: bios_bmc_auth: 'digest' is not one of basic, session"),
]
SLURM_UPGRADE = [
    # slurm_upgrade_version is left out: required by the upgrade playbook (not by site.yml).
    ("all", "slurm_upgrade_slurmd_batch_size", [1, 0],
     "slurm_upgrade_slurmd_batch_size: 0 hosts per batch would run no host"),
    ("all", "slurm_upgrade_slurmdbd_conversion_timeout_minutes", 0,
     "slurm_upgrade_slurmdbd_conversion_timeout_minutes: 0 is below the minimum 1 (0 would give the database "
     "conversion no time)"),
    ("all", "slurm_upgrade_slurmdbd_start_timeout_seconds", 0,
     "slurm_upgrade_slurmdbd_start_timeout_seconds: 0 is below the minimum 1 (0 would give slurmdbd no time to "
     "start)"),
    ("all", "slurm_upgrade_slurmctld_start_timeout_seconds", -1,
     "slurm_upgrade_slurmctld_start_timeout_seconds: -1 is below the minimum 1"),
    ("all", "slurm_upgrade_slurmd_timeout_seconds", 0,
     "slurm_upgrade_slurmd_timeout_seconds: 0 is outside 1-65533 (0 turns off Slurm's detection of dead nodes)"),
    ("all", "slurm_upgrade_slurmd_register_timeout_seconds", "300",
     "slurm_upgrade_slurmd_register_timeout_seconds: must be an integer, got the string '300'"),
    ("all", "slurm_upgrade_backup_dir", "backups",
     "slurm_upgrade_backup_dir: must be an absolute path on the node, got 'backups'"),
    ("all", "slurm_upgrade_slurmdbd_port", 6900,
     "head01: slurm_upgrade_slurmdbd_port: the upgrade's wait for slurmdbd uses port 6900, but "
     "slurm_controller_slurmdbd_port is 6819 on head01"),
    ("all", "slurm_upgrade_update_cache", "no", "slurm_upgrade_update_cache: must be a boolean (true/false), got 'no'"),
    ("all", "slurm_upgrade_versoin", "24.11.5",
     "slurm_upgrade_versoin (on gpu01, gpu02, stor01, head01): no role or playbook defines this variable, and it "
     "is one letter away from slurm_upgrade_version"),
    ("all", "slurm_upgrade_state_save_location", "spool/slurmctld",
     "slurm_upgrade_state_save_location: must be an absolute path on the node, got 'spool/slurmctld'"),
    (None, None, None, "slurm_upgrade_version: is required by the slurm_upgrade role but not set"),
]
HEALTH_DEEP = [
    ("all", "validate_deep_dcgm_level", 0, "validate_deep_dcgm_level: 0 is not one of 2, 3, 4"),
    ("all", "validate_deep_dcgm_timeout_seconds", 0,
     "validate_deep_dcgm_timeout_seconds: 0 is below the minimum 1 (0 would give the diagnostic no time)"),
    ("all", "validate_deep_reservation_min_remaining_minutes", -10,
     "validate_deep_reservation_min_remaining_minutes: -10 is below the minimum 0"),
    ("all", "validate_deep_ib_hcas", "mlx5_0", "validate_deep_ib_hcas: must be a list, got the string 'mlx5_0'"),
    ("all", "validate_deep_drain_failed", "true", "validate_deep_drain_failed: must be a boolean (true/false), got 'true'"),
]
HEALTH_CHECK = [
    ("gpu_nodes", "slurm_compute_healthcheck_budget_seconds", 90,
     "slurm_compute_healthcheck_budget_seconds: 90 is outside 10-59 (slurmd kills the health check after 60 s)"),
    ("gpu_nodes", "slurm_compute_healthcheck_command_timeout_seconds", 0,
     "slurm_compute_healthcheck_command_timeout_seconds: 0 is outside 1-59 (0 would give each command no time)"),
    ("gpu_nodes", "slurm_compute_healthcheck_max_drained_percent", 0,
     "slurm_compute_healthcheck_max_drained_percent: 0 is outside 1-100 (0 would stop the check from ever draining "
     "a node)"),
    ("gpu_nodes", "slurm_compute_healthcheck_lustre_mounts", ["/lustre/home"],
     "gpu01: slurm_compute_healthcheck_lustre_mounts: /lustre/home is not a Lustre mount of this node"),
    ("gpu_nodes", "slurm_compute_healthcheck_gpu_count", 0,
     "slurm_compute_healthcheck_gpu_count: 0 is outside 1-16"),
    ("gpu_nodes", "slurm_compute_healthcheck_max_temperature_c", 200,
     "slurm_compute_healthcheck_max_temperature_c: 200 is outside 40-100 (below 40 C drains healthy idle GPUs"),
    ("gpu_nodes", "slurm_compute_healthcheck_nvlink_active_links", 36,
     "slurm_compute_healthcheck_nvlink_active_links: 36 is outside 0-18"),
    ("gpu_nodes", "slurm_compute_healthcheck_ib_max_error_increase", -1,
     "slurm_compute_healthcheck_ib_max_error_increase: -1 is below the minimum 0"),
    ("gpu_nodes", "slurm_compute_healthchek_xid_ignore_codes", [13],
     "slurm_compute_healthchek_xid_ignore_codes (on gpu01, gpu02): no role or playbook defines this variable, and "
     "it is one letter away from slurm_compute_healthcheck_xid_ignore_codes"),
]
VALIDATION = [
    ("all", "validate_storage_path", "/scratch/validate",
     "gpu01: validate_storage_path: /scratch/validate is not under a Lustre mount of this node"),
    ("all", "validate_storage_test_mib", 0,
     "validate_storage_test_mib: 0 is below the minimum 1 (a 0 MiB file measures nothing)"),
    ("all", "validate_ib_write_bw_max_concurrent_pairs", 0,
     "validate_ib_write_bw_max_concurrent_pairs: 0 is below the minimum 1 (0 would mean no bound"),
    ("all", "validate_nccl_isolation_max_concurrent_runs", 0,
     "validate_nccl_isolation_max_concurrent_runs: 0 is below the minimum 1 (0 would run no search)"),
    ("all", "validate_ib_write_bw_iterations", 2,
     "validate_ib_write_bw_iterations: 2 is below the minimum 5"),
    ("all", "validate_ib_write_bw_base_port", 70000, "validate_ib_write_bw_base_port: 70000 is not a TCP port (1-65535)"),
    ("all", "validate_nccl_time_limit_minutes", 0,
     "validate_nccl_time_limit_minutes: 0 is below the minimum 1 (srun --time=0 means no limit)"),
    ("all", "validate_checkpoint_interval_minutes", 0,
     "validate_checkpoint_interval_minutes: 0 is below the minimum 1 (0 minutes between checkpoints"),
    ("all", "validate_dcgm_timeout_seconds", 0,
     "validate_dcgm_timeout_seconds: 0 is below the minimum 1 (0 would give the diagnostic no time)"),
    ("all", "validate_report_dir", "reports", "validate_report_dir: must be an absolute path on the node, got 'reports'"),
    # Monitoring scrapes an exporter that is off (the defaults agree; an inventory that turns it off must say so).
    ("gpu_nodes", "dcgm_exporter_enabled", False,
     "head01: monitoring_dcgm_exporter_port: the dcgm-exporter scrape expects dcgm_exporter_listen_port on gpu01, "
     "gpu02, which is off there (dcgm_exporter_enabled: false)"),
]

RUNS = {
    "site.yml": MONITORING + BIOS,
    "playbooks/slurm_upgrade.yml": SLURM_UPGRADE,
    "playbooks/health_deep.yml": HEALTH_DEEP + HEALTH_CHECK,
    "playbooks/validate.yml": VALIDATION,
}


def broken_inventory(mistakes):
    inv = copy.deepcopy(base_inventory())
    for where, name, value, _message in mistakes:
        if where is None:
            continue
        if where == "all":
            all_vars(inv)[name] = value
        elif where in inv["all"]["children"]:
            group_vars(inv, where)[name] = value
        else:
            host(inv, "gpu_nodes", where)[name] = value
    return inv


def unwrapped(out):
    """The output with YAML's line folding undone (the failure list is printed as folded YAML strings)."""
    return re.sub(r"\s*\n\s*", " ", out.replace("\\'", "'")).replace("''", "'")


def test_at_least_40_mistakes_each_with_its_own_message():
    messages = [mistake[3] for mistakes in RUNS.values() for mistake in mistakes]
    assert_distinct_messages(messages, at_least=40)


@pytest.mark.parametrize("playbook", sorted(RUNS))
def test_every_mistake_is_rejected_before_any_host_is_contacted(tmp_path, playbook):
    mistakes = RUNS[playbook]
    rc, out = run_playbook(tmp_path, broken_inventory(mistakes), playbook)
    text = unwrapped(out)
    assert_rejected_before_any_change(rc, text, "preflight rejected the inventory")
    missing = [mistake[3] for mistake in mistakes if mistake[3] not in text]
    assert not missing, "\n".join(["not reported:"] + missing + ["--- output:", text[-6000:]])
    for later in ("Slurm upgrade - read every", "Deep checks - choose", "Validate - measure", "Common OS"):
        assert later not in out, "a later play started: " + later
