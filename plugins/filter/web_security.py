# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the monitoring and dcgm roles' listening addresses and web authentication.

The decisions are plugins/plugin_utils/web_security.py; documentation lives beside this file in
web_listen_address.yml, web_host_port.yml, web_scrape_address.yml, web_config.yml, web_features.yml
and monitoring_scrape_targets.yml.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import web_security


def _wrap(func, *args, **kwargs):
    try:
        return func(*args, **kwargs)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


def web_listen_address(host, explicit=None, mgmt_ip=None, setting="monitoring_listen_address"):
    """The address a daemon binds to: the explicit setting, else the management address; neither is refused."""
    return _wrap(web_security.listen_address, host, explicit=explicit, mgmt_ip=mgmt_ip, setting=setting)


def web_host_port(address, port, connect=False):
    """address:port (IPv6 in brackets); connect=True asks a daemon bound to every interface on the loopback."""
    return _wrap(web_security.host_port, address, port, connect=connect)


def web_config(password_hash, username, cert_file=None, key_file=None):
    """The exporter-toolkit web configuration: basic auth always, TLS with a certificate and key."""
    return _wrap(web_security.web_config, username, password_hash, cert_file=cert_file, key_file=key_file)


def web_scrape_address(listen_address, mgmt_ip=None, host=None):
    """Where Prometheus reaches a daemon: its listen address unless that is every interface, else the management
    address, else the host's name."""
    return _wrap(web_security.scrape_address, listen_address, mgmt_ip, host)


def monitoring_scrape_targets(hosts, host_vars, gpu_hosts, node_exporter_port, dcgm_exporter_port, enabled=True,
                              node_exporter_enabled=True, dcgm_exporter=True):
    """Prometheus's node-exporter and dcgm-exporter targets: which hosts, where each is reached, and its labels."""
    return _wrap(web_security.scrape_targets, list(hosts or []), host_vars, gpu_hosts,
                 {"node": node_exporter_port, "dcgm": dcgm_exporter_port}, enabled=enabled,
                 node_exporter_enabled=node_exporter_enabled, dcgm_exporter=dcgm_exporter)


def web_features(dpkg_stdout, packages):
    """What the installed daemons support (web config flag name, Alertmanager url_file) from dpkg-query's output."""
    return _wrap(web_security.web_features, web_security.parse_dpkg_versions(dpkg_stdout, list(packages or [])))


class FilterModule(object):
    def filters(self):
        return {"web_listen_address": web_listen_address, "web_host_port": web_host_port,
                "web_config": web_config, "web_features": web_features,
                "monitoring_scrape_targets": monitoring_scrape_targets, "web_scrape_address": web_scrape_address}
