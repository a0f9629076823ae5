"""preflight_generic: the rules that come from the specs and the names, for every role, one test per rule.

The guard at the end fails when a number option of any role's entry point has no range (a new role is covered the
day it is written), and when a range names an option its role no longer has.
"""

import copy
import os
import textwrap

import pytest

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import preflight_common, preflight_generic
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import Inventory
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_generic import (
    name_problems, number_problem, port_errors, range_of, serial_problem, spec_gaps, url_problem,
)
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_specs import check as spec_check

GROUPS = {
    "all": ["head01", "gpu01", "gpu02", "stor01"],
    "slurm_controller": ["head01"],
    "gpu_nodes": ["gpu01", "gpu02"],
    "lustre_mds": ["stor01"],
    "lustre_oss": ["stor01"],
    "lustre_clients": ["gpu01", "gpu02", "head01"],
}
OPTS = {"lustre_enabled": True, "fabric_required": True, "strict": False, "rolling": False}


def inv_of(**per_host):
    hv = {host: {} for host in GROUPS["all"]}
    for host, values in per_host.items():
        for target in (GROUPS["all"] if host == "all" else GROUPS.get(host, [host]) if host in GROUPS else [host]):
            hv[target].update(copy.deepcopy(values))
    return Inventory(hv, GROUPS)


def ports(**per_host):
    return port_errors(inv_of(**per_host))


# -- ranges ----------------------------------------------------------------------------------------------------------
def test_names_imply_port_and_percent_ranges():
    assert range_of("anything_port")["min"] == 1 and range_of("anything_port")["max"] == 65535
    assert number_problem("x.listen_port", 0) == "0 is not a TCP port (1-65535)"
    assert number_problem("monitoring_prometheus_port", 65536) == "65536 is not a TCP port (1-65535)"
    assert number_problem("rolling_max_unavailable_percent", 100.5) == "100.5 is not a percentage (0-100)"
    assert number_problem("rolling_max_unavailable_percent", 25) is None


def test_a_role_range_narrows_what_the_name_implies():
    # slurm_compute_healthcheck_max_drained_percent: 1-100 (0 would never drain a node).
    assert "0 is outside 1-100" in number_problem("slurm_compute_healthcheck_max_drained_percent", 0)
    assert number_problem("slurm_compute_healthcheck_max_drained_percent", 100) is None


@pytest.mark.parametrize("name, value, message", [
    ("monitoring_prometheus_retention_days", 0, "0 is below the minimum 1 (0 keeps no samples)"),
    ("validate_ib_write_bw_max_concurrent_pairs", 0, "0 would mean no bound"),
    ("validate_nccl_isolation_max_concurrent_runs", 0, "0 is below the minimum 1"),
    ("bios_bmc_timeout_seconds", 0, "0 would give each Redfish request no time"),
    ("slurm_upgrade_slurmd_register_timeout_seconds", 0, "0 would give slurmd no time to register"),
    ("slurm_compute_healthcheck_budget_seconds", 60, "60 is outside 10-59 (slurmd kills the health check after 60 s)"),
    ("nccl_ib_timeout", 0, "0 is outside 1-31 (0 makes a lost InfiniBand packet wait forever)"),
    ("validate_ib_write_bw_iterations", 4, "ib_write_bw needs at least 5 iterations"),
])
def test_role_ranges_refuse_what_means_nothing_or_everything(name, value, message):
    assert message in number_problem(name, value)


def test_zero_where_it_means_something_passes():
    for name in ("slurm_controller_inactive_limit_seconds", "slurm_controller_accounting_purge_job_after_days",
                 "slurm_controller_def_mem_per_cpu_mb", "slurm_compute_healthcheck_max_ecc_uncorrectable",
                 "monitoring_alertmanager_group_wait_seconds"):
        assert number_problem(name, 0) is None, name


def test_unknown_unit_names_keep_the_non_negative_rule():
    assert number_problem("x.settle_seconds", -1) == "must not be negative, got -1"
    assert number_problem("x.settle_seconds", 0) is None
    assert number_problem("not_a_number_name", "x") is None


def test_the_spec_rules_use_the_ranges():
    errs = spec_check(inv_of(gpu_nodes={"validate_storage_test_mib": 0}), OPTS)
    assert "gpu01: validate_storage_test_mib: 0 is below the minimum 1 (a 0 MiB file measures nothing)" in errs


# -- URLs ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["https://repo.example.org/lustre/el9", "http://10.1.0.5:8080/x", "", "{{ x }}"])
def test_urls_of_allowed_schemes_pass(value):
    assert url_problem("lustre_client_repo_url", value) is None


@pytest.mark.parametrize("value, message", [
    ("repo.example.org/lustre", "is not a URL"),
    ("ftp://repo.example.org/lustre", "the scheme ftp is not allowed"),
    ("https:///no-host", "is not a URL"),
    ("https://exa mple.org", "is not a URL"),
])
def test_bad_urls_are_refused(value, message):
    assert message in url_problem("monitoring_alertmanager_webhook_url", value)


def test_only_url_names_are_judged_as_urls():
    assert url_problem("lustre_client_mount_options", "defaults") is None
    assert name_problems("nvidia_driver_cuda_repo_base_url", "ftp://x/y", "str")


# -- serial-like values ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [1, "10%", [1, "10%"], [1, 5, "100%"], "3"])
def test_serial_values_pass(value):
    assert serial_problem("slurm_upgrade_slurmd_batch_size", value) is None


@pytest.mark.parametrize("value, message", [
    (0, "0 hosts per batch"),
    ([1, 0], "0 hosts per batch"),
    ("0%", "no share of the hosts"),
    ([1, "150%"], "more than every host"),
    ("ten", "neither a number of hosts nor a percentage"),
    ([], "is an empty list"),
])
def test_serial_values_refused(value, message):
    assert message in serial_problem("slurm_upgrade_slurmd_batch_size", value)
    assert message in serial_problem("rolling_serial", value)


# -- ports -----------------------------------------------------------------------------------------------------------
def test_default_ports_do_not_collide():
    assert ports() == []


def test_two_services_on_one_port_of_a_host():
    errs = ports(gpu_nodes={"dcgm_exporter_listen_port": 9100}, all={"monitoring_dcgm_exporter_port": 9100})
    assert errs == ["gpu01, gpu02: monitoring_node_exporter_port (node-exporter): port 9100 is also "
                    "the port of dcgm_exporter_listen_port (dcgm-exporter) on this host; each service needs its own port"], errs


def test_the_exporter_on_slurmds_port():
    errs = ports(gpu_nodes={"dcgm_exporter_listen_port": 6818}, all={"monitoring_dcgm_exporter_port": 6818})
    assert errs == ["gpu01, gpu02: slurm_controller_slurmd_port (slurmd): port 6818 is also the port of "
                    "dcgm_exporter_listen_port (dcgm-exporter) on this host; each service needs its own port"], errs
    errs = ports(head01={"slurm_controller_slurmd_port": 9999}, gpu_nodes={"dcgm_exporter_listen_port": 9999},
                 all={"monitoring_dcgm_exporter_port": 9999})
    assert len(errs) == 1 and "port 9999 is also the port of dcgm_exporter_listen_port" in errs[0], errs
    assert ports(gpu_nodes={"dcgm_exporter_enabled": False, "dcgm_exporter_listen_port": 6818},
                 all={"monitoring_scrape_dcgm_exporter": False}) == []


def test_a_port_listening_on_other_hosts_than_its_role():
    # slurmd listens on the GPU nodes though slurm_controller sets its port; nv-hostengine's is fixed (where it has
    # no socket: dcgm_hostengine_socket_path null).
    errs = ports(head01={"slurm_controller_slurmd_port": 5555},
                 gpu_nodes={"dcgm_exporter_enabled": True, "dcgm_hostengine_socket_path": None})
    assert "gpu01, gpu02: slurm_controller_slurmd_port (slurmd): port 5555 is also the port of nv-hostengine " \
           "(a fixed port) on this host; each service needs its own port" in errs, errs
    # on its socket (the default) the host engine has no TCP port
    assert ports(head01={"slurm_controller_slurmd_port": 5555}, gpu_nodes={"dcgm_exporter_enabled": True}) == []


def test_mariadb_fixed_port_on_the_controller():
    errs = ports(head01={"slurm_controller_slurmdbd_port": 3306})
    assert errs and "port 3306" in errs[0] and "MariaDB" in errs[0], errs


def test_a_port_that_is_off_takes_no_port():
    assert ports(gpu_nodes={"dcgm_exporter_enabled": False, "dcgm_exporter_listen_port": 9100},
                 all={"monitoring_scrape_dcgm_exporter": False}) == []


def test_monitoring_scrapes_the_port_dcgm_starts():
    errs = ports(gpu_nodes={"dcgm_exporter_listen_port": 9401})
    assert errs == ["head01: monitoring_dcgm_exporter_port: the dcgm-exporter scrape uses port 9400, but "
                    "dcgm_exporter_listen_port is 9401 on gpu01, gpu02; give both the same port"], errs


def test_monitoring_refuses_to_scrape_an_exporter_that_is_off():
    errs = ports(gpu_nodes={"dcgm_exporter_enabled": False})
    assert errs == ["head01: monitoring_dcgm_exporter_port: the dcgm-exporter scrape expects "
                    "dcgm_exporter_listen_port on gpu01, gpu02, which is off there (dcgm_exporter_enabled: false); "
                    "turn it on or stop expecting it"], errs
    assert ports(gpu_nodes={"dcgm_exporter_enabled": False}, all={"monitoring_scrape_dcgm_exporter": False}) == []
    assert ports(gpu_nodes={"dcgm_exporter_enabled": False}, all={"monitoring_enabled": False}) == []


def test_slurm_references_agree_with_the_controller():
    errs = ports(gpu_nodes={"slurm_compute_slurmctld_port": 6820})
    assert errs == ["gpu01, gpu02: slurm_compute_slurmctld_port: slurmd's --conf-server uses port 6820, but "
                    "slurm_controller_slurmctld_port is 6817 on head01; give both the same port"], errs
    errs = ports(all={"slurm_upgrade_slurmdbd_port": 6900})
    assert any(e.startswith("head01: slurm_upgrade_slurmdbd_port: the upgrade's wait for slurmdbd uses port 6900")
               for e in errs), errs


def test_the_dcgm_and_monitoring_defaults_agree():
    """Defaults that work together: a cluster that sets nothing scrapes an exporter that runs, on its port."""
    assert preflight_common.spec_default("dcgm", "dcgm_exporter_enabled") is True
    assert preflight_common.spec_default("monitoring", "monitoring_scrape_dcgm_exporter") is True
    assert (preflight_common.spec_default("dcgm", "dcgm_exporter_listen_port")
            == preflight_common.spec_default("monitoring", "monitoring_dcgm_exporter_port"))


# -- the guard -------------------------------------------------------------------------------------------------------
def test_every_number_option_of_every_entry_point_has_a_range():
    assert spec_gaps() == []


def test_the_guard_catches_a_new_option_without_a_range(tmp_path):
    meta = tmp_path / "roles" / "newrole" / "meta"
    meta.mkdir(parents=True)
    (meta / "argument_specs.yml").write_text(textwrap.dedent("""\
        argument_specs:
          main:
            options:
              newrole_listen_port: {type: int, default: 80}
              newrole_share_percent: {type: int, default: 5}
              newrole_wait_seconds: {type: int, default: 5}
          extra:
            options:
              newrole_batch_count: {type: int, default: 5}
              newrole_stale: {type: raw, default: 3}
        """))
    (meta / "preflight.yml").write_text("ranges:\n  newrole_gone_seconds: {min: 1}\n")
    gaps = spec_gaps(str(tmp_path))
    assert "newrole: newrole_wait_seconds (int) has no range: add it to roles/newrole/meta/preflight.yml" in gaps
    assert "newrole: newrole_batch_count (int) has no range: add it to roles/newrole/meta/preflight.yml" in gaps
    assert "newrole: ranges: newrole_gone_seconds names no option of the role's argument spec" in gaps
    assert ("newrole: newrole_listen_port is a port with no entry under ports: in roles/newrole/meta/preflight.yml "
            "(where it listens, or same_as the port it refers to)") in gaps
    assert not [g for g in gaps
                if "has no range" in g and ("listen_port" in g or "share_percent" in g or "newrole_stale" in g)], gaps


def test_an_option_with_choices_needs_no_range():
    assert not preflight_generic.needs_range("validate_deep_dcgm_level", {"type": "int", "choices": [2, 3, 4]})
    assert preflight_generic.needs_range("validate_deep_dcgm_level", {"type": "int"})
    assert not preflight_generic.needs_range("gpu_tuning_application_clocks", {"type": "raw"})
    assert preflight_generic.needs_range("x_wait_seconds", {"type": "raw"})


def test_every_rules_file_parses_and_names_real_roles():
    rules = preflight_generic.load_rules()
    roles = set(os.listdir(os.path.join(preflight_common.COLLECTION_ROOT, "roles")))
    assert set(rules) <= roles and len(rules) >= 10
    for role, data in rules.items():
        for name, entry in data["ranges"].items():
            assert set(entry) <= {"min", "max", "why"}, (role, name)
            assert "min" in entry or "max" in entry, (role, name)
