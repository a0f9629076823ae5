# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the monitoring daemons listen, their web configuration, and the web options of the installed versions."""

import importlib
import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter import web_security as filters
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import web_security

HASH = "$2b$12$" + "a" * 53


def test_the_explicit_address_wins_over_the_management_address():
    assert web_security.listen_address("gpu01", "10.0.0.9", "10.77.0.21") == "10.0.0.9"


def test_the_management_address_is_the_default():
    assert web_security.listen_address("gpu01", None, "10.77.0.21") == "10.77.0.21"
    assert web_security.listen_address("gpu01", "", "10.77.0.21") == "10.77.0.21"


def test_every_interface_only_when_asked_for():
    assert web_security.listen_address("gpu01", "0.0.0.0", None) == "0.0.0.0"


def test_a_host_with_no_address_is_refused_naming_both_settings():
    with pytest.raises(ValueError) as err:
        web_security.listen_address("gpu01", None, None, setting="dcgm_exporter_listen_address")
    assert "gpu01" in str(err.value) and "cluster_mgmt_ip" in str(err.value)
    assert "dcgm_exporter_listen_address" in str(err.value)
    with pytest.raises(AnsibleFilterError):
        filters.web_listen_address("gpu01")


@pytest.mark.parametrize("bad", ["10.0.0.0/24", "10.0.0.1 10.0.0.2"])
def test_a_network_or_a_list_is_not_an_address(bad):
    with pytest.raises(ValueError):
        web_security.listen_address("gpu01", bad, None)


@pytest.mark.parametrize("address, connect, expected", [
    ("10.77.0.21", False, "10.77.0.21:9100"),
    ("10.77.0.21", True, "10.77.0.21:9100"),
    ("0.0.0.0", False, "0.0.0.0:9100"),
    ("0.0.0.0", True, "127.0.0.1:9100"),
    ("fd00::5", False, "[fd00::5]:9100"),
    ("::", True, "[::1]:9100"),
    ("[fd00::5]", False, "[fd00::5]:9100"),
])
def test_host_port(address, connect, expected):
    assert web_security.host_port(address, 9100, connect=connect) == expected


def test_web_config_is_basic_auth_always_and_tls_with_a_certificate():
    assert web_security.web_config("clusterforge", HASH) == {"basic_auth_users": {"clusterforge": HASH}}
    tls = web_security.web_config("clusterforge", HASH, "/etc/pki/node.crt", "/etc/pki/node.key")
    assert tls["tls_server_config"] == {"cert_file": "/etc/pki/node.crt", "key_file": "/etc/pki/node.key"}
    assert tls["basic_auth_users"] == {"clusterforge": HASH}


@pytest.mark.parametrize("user, pw_hash, cert, key", [
    ("clusterforge", "plaintext-password", None, None),     # exporter-toolkit takes bcrypt only
    ("clusterforge", None, None, None),
    ("", HASH, None, None),
    ("a:b", HASH, None, None),
    ("clusterforge", HASH, "/etc/pki/node.crt", None),       # half a TLS setting
])
def test_web_config_refuses(user, pw_hash, cert, key):
    with pytest.raises(ValueError):
        web_security.web_config(user, pw_hash, cert, key)
    with pytest.raises(AnsibleFilterError):
        filters.web_config(pw_hash, user, cert, key)


@pytest.mark.parametrize("version, expected", [
    ("1.5.0-1+b4", (1, 5, 0)), ("1:0.25.0+ds-1", (0, 25, 0)), ("0.28.1+ds-2", (0, 28, 1)), ("2", (2, 0, 0)),
    (None, None), ("", None),
])
def test_debian_version_tuple(version, expected):
    assert web_security.debian_version_tuple(version) == expected


DPKG = ("prometheus-node-exporter ii  1.3.1-1ubuntu0.22.04.2\n"
        "prometheus-alertmanager ii  0.23.0+ds-1ubuntu0.1\n")


def test_old_node_exporter_and_alertmanager_take_the_old_flag_and_no_url_file():
    got = filters.web_features(DPKG, ["prometheus-node-exporter", "prometheus-alertmanager"])
    assert got == {"node_exporter_web_config_flag": "--web.config", "alertmanager_url_file": False}


def test_bookworm_takes_the_new_flag_but_its_alertmanager_has_no_url_file():
    out = "prometheus-node-exporter ii  1.5.0-1+b6\nprometheus-alertmanager ii  0.25.0+ds-2+b7\n"
    got = filters.web_features(out, ["prometheus-node-exporter", "prometheus-alertmanager"])
    assert got == {"node_exporter_web_config_flag": "--web.config.file", "alertmanager_url_file": False}


def test_trixie_takes_both():
    out = "prometheus-node-exporter ii  1.9.1-1\nprometheus-alertmanager ii  0.28.1+ds-1\n"
    got = filters.web_features(out, ["prometheus-node-exporter", "prometheus-alertmanager"])
    assert got == {"node_exporter_web_config_flag": "--web.config.file", "alertmanager_url_file": True}


def test_a_package_not_installed_is_taken_as_current():
    out = "prometheus-node-exporter un  <none>\n"
    assert web_security.parse_dpkg_versions(out, ["prometheus-node-exporter", "prometheus-alertmanager"]) == \
        {"prometheus-node-exporter": None, "prometheus-alertmanager": None}
    got = filters.web_features(out, ["prometheus-node-exporter", "prometheus-alertmanager"])
    assert got == {"node_exporter_web_config_flag": "--web.config.file", "alertmanager_url_file": True}


@pytest.mark.parametrize("explicit, mgmt, expected", [
    ("10.0.0.9", "10.77.0.21", "10.0.0.9"),      # the exporter's own listen address
    ("0.0.0.0", "10.77.0.21", "10.77.0.21"),     # every interface: reached on the management address
    ("::", None, "gpu01"),                       # ... or, without one, on the inventory name
    ("[::]", "fd00::21", "fd00::21"),
    (None, "10.77.0.21", "10.77.0.21"), ("", " ", "gpu01"), (None, None, "gpu01")])
def test_where_prometheus_reaches_an_exporter(explicit, mgmt, expected):
    assert web_security.scrape_address(explicit, mgmt, "gpu01") == expected
    assert filters.web_scrape_address(explicit, mgmt, "gpu01") == expected


HOSTVARS = {
    "head01": {"cluster_mgmt_ip": "10.77.0.10"},
    "gpu01": {"cluster_mgmt_ip": "10.77.0.21", "monitoring_listen_address": "0.0.0.0"},
    "gpu02": {"cluster_mgmt_ip": "10.77.0.22", "dcgm_exporter_listen_address": "fd00::22"},
    "stor01": {"cluster_mgmt_ip": "10.77.0.31", "monitoring_enabled": False},
    "stor02": {"cluster_mgmt_ip": "10.77.0.32", "monitoring_node_exporter_enabled": "no"},
    "login01": {"monitoring_listen_address": "10.1.1.3"},
}


def test_scrape_targets_in_inventory_order_with_their_own_switches_and_addresses():
    got = filters.monitoring_scrape_targets(["gpu01", "gpu02", "stor01", "stor02", "login01", "head01"], HOSTVARS,
                                            ["gpu01", "gpu02"], 9100, 9400)
    assert got["node"] == [
        {"target": "10.77.0.21:9100", "node": "gpu01", "gpu_node": True},
        {"target": "10.77.0.22:9100", "node": "gpu02", "gpu_node": True},
        {"target": "10.1.1.3:9100", "node": "login01", "gpu_node": False},
        {"target": "10.77.0.10:9100", "node": "head01", "gpu_node": False}]
    assert got["dcgm"] == [{"target": "10.77.0.21:9400", "node": "gpu01"},
                           {"target": "[fd00::22]:9400", "node": "gpu02"}]


def test_scrape_targets_defaults_apply_where_a_host_sets_nothing():
    hosts = ["gpu01", "head01"]
    assert filters.monitoring_scrape_targets(hosts, HOSTVARS, ["gpu01"], 9100, 9400, enabled=False)["node"] == []
    off = filters.monitoring_scrape_targets(hosts, HOSTVARS, ["gpu01"], 9100, 9400, node_exporter_enabled=False,
                                            dcgm_exporter=False)
    assert off == {"node": [], "dcgm": []}
    # a host's own setting wins over the default either way
    own = dict(HOSTVARS, head01={"cluster_mgmt_ip": "10.77.0.10", "monitoring_enabled": True})
    assert [t["node"] for t in filters.monitoring_scrape_targets(hosts, own, [], 9100, 9400, enabled=False)["node"]] \
        == ["head01"]


FILTER_DIR = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "plugins", "filter")


@pytest.mark.parametrize("module, name", [
    ("web_security", "web_listen_address"), ("web_security", "web_host_port"), ("web_security", "web_config"),
    ("web_security", "web_features"), ("web_security", "monitoring_scrape_targets"),
    ("web_security", "web_scrape_address"), ("repo_keys", "repo_key_problem"), ("safe_paths", "root_dir_problem"),
    ("bios", "bios_bmc_tls_problem")])
def test_each_new_filter_is_registered_and_documented_beside_its_file(module, name):
    plugin = importlib.import_module("ansible_collections.clusterforge.gpu.plugins.filter.%s" % module)
    assert name in plugin.FilterModule().filters()
    with open(os.path.join(FILTER_DIR, name + ".yml")) as f:
        doc = yaml.safe_load(f)
    assert doc["DOCUMENTATION"]["name"] == name and doc["DOCUMENTATION"]["version_added"] == "1.0.0"
    assert "_input" in doc["DOCUMENTATION"]["options"]
    assert "clusterforge.gpu.%s" % name in doc["EXAMPLES"]
    assert "_value" in doc["RETURN"]
