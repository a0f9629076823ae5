"""Preflight rules for the OS base (common_os), one test per rule (ports and ranges: test_preflight_generic.py)."""

import pytest

from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import Inventory
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_os import check

GROUPS = {"all": ["head01", "gpu01"], "slurm_controller": ["head01"], "gpu_nodes": ["gpu01"]}


def errors(ctl=None, **gpu_vars):
    hv = {"head01": dict(ctl or {}), "gpu01": dict(gpu_vars)}
    return check(Inventory(hv, GROUPS), {})


def test_sound_values_pass():
    assert errors() == []
    assert errors(common_os_cpu_governor="performance", common_os_kernel_cmdline_params=["iommu=pt", "pci=realloc=off"],
                  common_os_memlock_limit="unlimited", common_os_nofile_limit=1048576,
                  common_os_chrony_servers=[{"name": "10.1.0.1", "type": "server"}, {"name": "ntp.example.org"}],
                  common_os_chrony_allow_cidrs=["10.1.0.0/24"], common_os_hosts_fabric_suffix="-ib",
                  common_os_hosts_extra=[{"ip": "10.1.0.5", "names": ["bmc01", "bmc01.example.org"]}],
                  common_os_sysctl={"net.core.rmem_max": 268435456, "fs.nr_open": 4194304},
                  dcgm_exporter_enabled=True) == []
    assert errors(common_os_cpu_governor=None) == []


def one(**kw):
    out = errors(**kw)
    assert len(out) == 1, out
    return out[0]


def test_governor():
    assert "'performace' is not a Linux cpufreq governor" in one(common_os_cpu_governor="performace")
    assert "is not a Linux cpufreq governor" in one(common_os_cpu_governor="performance; reboot")


@pytest.mark.parametrize("param", ["iommu=pt intel_iommu=on", 'quiet"', "x=$(reboot)", "a=`id`", "", 5])
def test_kernel_params_are_single_safe_parameters(param):
    assert "is not one kernel parameter" in one(common_os_kernel_cmdline_params=[param])


def test_kernel_param_given_twice_with_different_values():
    assert "iommu is given twice with different values (pt and off)" in one(
        common_os_kernel_cmdline_params=["iommu=pt", "iommu=off"])
    assert errors(common_os_kernel_cmdline_params=["iommu=pt", "iommu=pt"]) == []


@pytest.mark.parametrize("value", ["infinite", -1, "64G", 0])
def test_memlock(value):
    assert "common_os_memlock_limit: must be 'unlimited'" in one(common_os_memlock_limit=value)


def test_nofile_above_nr_open_refuses_logins():
    assert "above the kernel's fs.nr_open (1048576)" in one(common_os_nofile_limit=2097152)
    assert errors(common_os_nofile_limit=2097152, common_os_sysctl={"fs.nr_open": 4194304}) == []
    # Below 1024 is the range of roles/common_os/meta/preflight.yml: test_preflight_generic.py.
    assert errors(common_os_nofile_limit=100) == []


def test_chrony():
    assert "common_os_chrony_servers: is empty" in one(common_os_chrony_servers=[])
    assert "neither a host name nor an IP address" in one(common_os_chrony_servers=[{"name": "ntp server"}])
    assert "'10.1.0.0/33' is not a network in CIDR form" in one(common_os_chrony_allow_cidrs=["10.1.0.0/33"])


def test_hosts_entries():
    assert "common_os_hosts_fabric_suffix: must be 1-20 of [a-z0-9-]" in one(common_os_hosts_fabric_suffix=" fab")
    assert "common_os_hosts_extra[0].ip: '10.1.0.500' is not an IP address" in one(
        common_os_hosts_extra=[{"ip": "10.1.0.500", "names": ["x"]}])
    assert "common_os_hosts_extra[0].names: must be a non-empty list of host names" in one(
        common_os_hosts_extra=[{"ip": "10.1.0.5", "names": ["bad name"]}])


def test_sysctl():
    assert "'rmem_max' is not a sysctl key" in one(common_os_sysctl={"rmem_max": 1})
    assert "net.core.rmem_max: the value must be a number or a one-line string, got list" in one(
        common_os_sysctl={"net.core.rmem_max": [1]})


@pytest.mark.parametrize("value", [None, "x", 1.5, [], {}, [None], [{"name": None}], {"a": {"b": 1}}])
def test_wrong_shapes_do_not_raise(value):
    for name in ("common_os_cpu_governor", "common_os_kernel_cmdline_params", "common_os_memlock_limit",
                 "common_os_nofile_limit", "common_os_chrony_servers", "common_os_chrony_allow_cidrs",
                 "common_os_hosts_fabric_suffix", "common_os_hosts_extra", "common_os_sysctl",
                 "dcgm_exporter_listen_port"):
        errors(**{name: value, "dcgm_exporter_enabled": True})
