# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight rules for the bios role's BMC inventory (plugins/plugin_utils/preflight_bios.py), one test per rule."""

import pytest

from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_bios import check, parse_bmc_address
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import Inventory

GROUPS = {"all": ["head01", "gpu01", "gpu02"], "slurm_controller": ["head01"], "gpu_nodes": ["gpu01", "gpu02"]}
SECRET = "Pa55-never-printed"
GOOD = {"bios_enabled": True, "cluster_bmc_username": "cf", "cluster_bmc_password": SECRET}


def errors(gpu01=None, gpu02=None, **common):
    hv = {"head01": {"cluster_mgmt_ip": "10.1.0.10"},
          "gpu01": dict(GOOD, cluster_mgmt_ip="10.1.0.21", cluster_bmc_address="10.2.0.21", **common),
          "gpu02": dict(GOOD, cluster_mgmt_ip="10.1.0.22", cluster_bmc_address="bmc-gpu02.example.org:8443", **common)}
    hv["gpu01"].update(gpu01 or {})
    hv["gpu02"].update(gpu02 or {})
    out = check(Inventory(hv, GROUPS), {"rolling": False})
    assert all(SECRET not in e for e in out), out
    return out


def test_sound_inventory_passes():
    assert errors() == []
    extra = {"Dell Inc.": {"iommu": [{"attribute": "ProcVirtualization", "values": {"Enabled": "enabled"},
                                      "source": "our registry export"}]}}
    assert errors(gpu01={"cluster_bmc_address": "[fd00::21]:443"}, bios_apply=True, bios_vendor_table_extra=extra) == []


def test_off_by_default_needs_nothing():
    hv = {"head01": {}, "gpu01": {}, "gpu02": {}}
    assert check(Inventory(hv, GROUPS), {}) == []


def test_apply_without_enabled_is_refused():
    out = errors(gpu01={"bios_enabled": False, "bios_apply": True})
    assert out == ["gpu01: bios_apply: is true but bios_enabled is not: nothing would be read or staged; set "
                   "bios_enabled: true (and the BMC inventory) or bios_apply: false"]


def test_required_when_enabled():
    out = errors(gpu01={"cluster_bmc_address": None, "cluster_bmc_username": None, "cluster_bmc_password": None})
    assert out == [
        "gpu01: cluster_bmc_address: is required with bios_enabled (<address>[:<port>] (an IPv4 address, [IPv6] or "
        "a host name, optional port 1-65535, no scheme or path))",
        "gpu01: cluster_bmc_username: is required with bios_enabled",
        "gpu01: cluster_bmc_password: is required with bios_enabled (keep it in a vault)"]


def test_password_type_errors_never_show_the_value():
    out = errors(gpu01={"cluster_bmc_password": 12345678}, gpu02={"cluster_bmc_password": ""})
    assert out == ["gpu01: cluster_bmc_password: must be a non-empty string, got an integer",
                   "gpu02: cluster_bmc_password: must be a non-empty string, got an empty string"]
    assert "12345678" not in " ".join(out)


@pytest.mark.parametrize("value,message", [
    ("https://10.2.0.21", "give the address without the scheme (https://)"),
    ("10.2.0.21/redfish/v1", "is not <address>[:<port>]"),
    ("10.2.0.21:0", "the port must be 1-65535, got '0'"),
    ("10.2.0.21:https", "the port must be 1-65535, got 'https'"),
    ("10.2.0.321", "'10.2.0.321' is not an IPv4 address"),
    ("fd00::21", "write an IPv6 address in brackets"),
    ("[fd00::zz]", "'fd00::zz' is not an IPv6 address"),
    ("bmc_gpu01", "'bmc_gpu01' is not a host name"),
    (" 10.2.0.21", "has spaces around it"),
    (["10.2.0.21"], "got a list"),
])
def test_address_form(value, message):
    out = errors(gpu01={"cluster_bmc_address": value})
    assert len(out) == 1 and out[0].startswith("gpu01: cluster_bmc_address: ") and message in out[0], out


def test_parse_bmc_address():
    assert parse_bmc_address("10.2.0.21") == ("10.2.0.21", None)
    assert parse_bmc_address("127.0.0.1:18443") == ("127.0.0.1", 18443)
    assert parse_bmc_address("[fd00::21]") == ("fd00::21", None)
    assert parse_bmc_address("bmc01.mgmt") == ("bmc01.mgmt", None)


def test_the_nodes_own_address_and_shared_bmcs():
    out = errors(gpu01={"cluster_bmc_address": "10.1.0.21"})
    assert out == ["gpu01: cluster_bmc_address: 10.1.0.21 is the node's own management address (cluster_mgmt_ip): "
                   "give its BMC's address"]
    out = errors(gpu02={"cluster_bmc_address": "10.2.0.21"})
    assert out == ["gpu02: cluster_bmc_address: 10.2.0.21 is also the BMC of gpu01 (each node has its own BMC)"]
    # The same address on another port is another BMC (the lab's emulators share 127.0.0.1).
    assert errors(gpu01={"cluster_bmc_address": "127.0.0.1:18441"},
                  gpu02={"cluster_bmc_address": "127.0.0.1:18442"}) == []


def test_vendor_table_extra_needs_sources():
    out = errors(gpu01={"bios_vendor_table_extra": {"dell": {"iommu": {"attribute": "X", "values": {"On": "enabled"}}}}})
    assert out == ["gpu01: bios_vendor_table_extra: vendor dell, setting iommu: entry needs 'source' (every table "
                   "entry names its source)"]


def test_redfish_host_must_be_known():
    assert errors(bios_redfish_host="head01") == []
    out = errors(gpu01={"bios_redfish_host": "jump01"})
    assert out == ["gpu01: bios_redfish_host: 'jump01' is neither localhost nor a host of the inventory (the Redfish "
                   "calls are delegated to it)"]


# --- the BMC's certificate (issue 39: verify before trusting) -----------------------------------------------------

def test_the_bmc_certificate_is_checked_by_default():
    assert errors() == []   # the role's defaults: bios_bmc_validate_certs true, no opt-in needed


def test_an_unchecked_certificate_without_the_opt_in_is_refused_on_each_node():
    out = errors(bios_bmc_validate_certs=False)
    assert len(out) == 2 and all("bios_bmc_validate_certs: false sends the BMC password" in e for e in out)
    assert out[0].startswith("gpu01: ") and "bios_bmc_ca_path" in out[0]
    assert "bios_bmc_insecure_skip_tls_verify: true" in out[0]


def test_the_loud_opt_in_accepts_an_unchecked_certificate():
    assert errors(bios_bmc_validate_certs=False, bios_bmc_insecure_skip_tls_verify=True) == []


def test_the_opt_in_with_a_checked_certificate_is_a_contradiction():
    out = errors(gpu02={"bios_bmc_insecure_skip_tls_verify": True})
    assert out == ["gpu02: bios_bmc_insecure_skip_tls_verify: true only goes with bios_bmc_validate_certs: false "
                   "(set both, or neither)"]


@pytest.mark.parametrize("validate, insecure, refused", [
    (True, False, False), (True, None, False), (False, False, True), (False, None, True), (False, True, False),
    (True, True, True)])
def test_the_role_applies_the_same_rule(validate, insecure, refused):
    from ansible_collections.clusterforge.gpu.plugins.filter.bios import bios_bmc_tls_problem  # pylint: disable=import-outside-toplevel
    assert bool(bios_bmc_tls_problem(validate, insecure)) is refused
