# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PRIVATE to clusterforge.gpu: where the monitoring daemons and dcgm-exporter listen, how they authenticate, and
which web options the installed versions take. Each decision is one function; the filters in
plugins/filter/web_security.py are the roles' only way to them."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.parsing.convert_bool import boolean

# Addresses that mean "every interface": a daemon bound there is asked on the loopback address.
_ANY = {"0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}
# exporter-toolkit (node-exporter 1.5.0): --web.config was renamed --web.config.file (node_exporter CHANGELOG 1.5.0).
NODE_EXPORTER_WEB_CONFIG_FILE_SINCE = (1, 5, 0)
# Alertmanager 0.26.0 added url_file to webhook_configs (alertmanager CHANGELOG 0.26.0).
ALERTMANAGER_URL_FILE_SINCE = (0, 26, 0)


def listen_address(host, explicit=None, mgmt_ip=None, setting="monitoring_listen_address"):
    """The address a daemon on `host` binds to: the explicit setting, else the host's management address
    (cluster_mgmt_ip). Neither: refused (binding every interface is a choice the inventory must make, by setting
    0.0.0.0 explicitly)."""
    for value in (explicit, mgmt_ip):
        if value is not None and str(value).strip():
            address = str(value).strip()
            if any(c.isspace() for c in address) or "/" in address:
                raise ValueError("%s: %s=%r is not an address (no prefix length, no spaces)" % (host, setting, address))
            return address
    raise ValueError("%s: no address to listen on: set cluster_mgmt_ip (the host's management address) or %s "
                     "(0.0.0.0 binds every interface)" % (host, setting))


def host_port(address, port, connect=False):
    """`address:port` as a listen flag or URL takes it (IPv6 in brackets). connect=True: the address to connect to
    (a daemon bound to every interface is asked on the loopback address)."""
    address = str(address).strip()
    if connect:
        address = _ANY.get(address, address)
    if ":" in address and not address.startswith("["):
        address = "[%s]" % address
    return "%s:%d" % (address, int(port))


def scrape_address(explicit=None, mgmt_ip=None, host=None):
    """Where Prometheus reaches a daemon on `host`: the daemon's own listen setting unless that means every interface,
    else the host's management address (cluster_mgmt_ip), else the host's name."""
    own = "" if explicit is None else str(explicit).strip()
    if own and own not in _ANY:
        return own
    mgmt = "" if mgmt_ip is None else str(mgmt_ip).strip()
    return mgmt or host


def _enabled(host_vars, name, default):
    """A host's own boolean setting where its inventory has one, else the role's default."""
    return boolean(host_vars.get(name, default), strict=False)


def scrape_targets(hosts, host_vars, gpu_hosts, ports, enabled=True, node_exporter_enabled=True, dcgm_exporter=True):
    """Prometheus's node-exporter and dcgm-exporter targets, in the order of `hosts` (every host of the inventory):
    ``{"node": [{"target", "node", "gpu_node"}], "dcgm": [{"target", "node"}]}``. node-exporter is scraped on every host
    whose own monitoring_enabled and monitoring_node_exporter_enabled (else `enabled`, `node_exporter_enabled`) are
    true, gpu_node telling whether it is one of `gpu_hosts`; dcgm-exporter on every host of `gpu_hosts` where
    `dcgm_exporter` is true. Each target is reached as scrape_address decides, on its port in `ports` ({"node",
    "dcgm"})."""
    gpu_hosts = list(gpu_hosts or [])
    own = {host: (host_vars[host] if host in host_vars else {}) for host in set(hosts) | set(gpu_hosts)}

    def target(host, setting, port):
        return host_port(scrape_address(own[host].get(setting), own[host].get("cluster_mgmt_ip"), host), port)

    node = [{"target": target(host, "monitoring_listen_address", ports["node"]), "node": host,
             "gpu_node": host in gpu_hosts}
            for host in hosts
            if _enabled(own[host], "monitoring_enabled", enabled)
            and _enabled(own[host], "monitoring_node_exporter_enabled", node_exporter_enabled)]
    dcgm = [{"target": target(host, "dcgm_exporter_listen_address", ports["dcgm"]), "node": host}
            for host in (gpu_hosts if dcgm_exporter else [])]
    return {"node": node, "dcgm": dcgm}


def web_config(username, password_hash, cert_file=None, key_file=None):
    """The exporter-toolkit web configuration (Prometheus, Alertmanager, node-exporter, dcgm-exporter): basic auth
    always, TLS where a certificate and its key are given (both or neither)."""
    if not username or ":" in str(username):
        raise ValueError("the web user name must be non-empty and without ':', got %r" % (username,))
    if not re.match(r"^\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}$", str(password_hash or "")):
        raise ValueError("the web password hash must be a bcrypt hash ($2b$...), which exporter-toolkit requires")
    if bool(cert_file) != bool(key_file):
        raise ValueError("TLS needs both a certificate and its key: got certificate %r, key %r" % (cert_file, key_file))
    config = {"basic_auth_users": {str(username): str(password_hash)}}
    if cert_file:
        config["tls_server_config"] = {"cert_file": str(cert_file), "key_file": str(key_file)}
    return config


def debian_version_tuple(version):
    """(major, minor, patch) of a package version as dpkg prints it ('1:0.25.0+ds-1' -> (0, 25, 0)); None when
    there is none (not installed)."""
    if version is None or not str(version).strip():
        return None
    upstream = str(version).strip().split(":", 1)[-1]
    match = re.match(r"^(\d+)(?:\.(\d+))?(?:\.(\d+))?", upstream)
    if not match:
        raise ValueError("not a package version: %r" % (version,))
    return tuple(int(part or 0) for part in match.groups())


def web_features(versions):
    """What the installed daemons support, from {package: dpkg version or None}:
    node_exporter_web_config_flag (the flag name), alertmanager_url_file (bool). A package not installed yet (check
    mode on a new host) is taken as the distribution's current one (the newer behaviour)."""
    versions = versions or {}
    node = debian_version_tuple(versions.get("prometheus-node-exporter"))
    alertmanager = debian_version_tuple(versions.get("prometheus-alertmanager"))
    return {
        "node_exporter_web_config_flag":
            "--web.config" if node is not None and node < NODE_EXPORTER_WEB_CONFIG_FILE_SINCE else "--web.config.file",
        "alertmanager_url_file": alertmanager is None or alertmanager >= ALERTMANAGER_URL_FILE_SINCE,
    }


def parse_dpkg_versions(stdout, packages):
    """{package: version or None} from `dpkg-query -W -f '${Package} ${db:Status-Abbrev} ${Version}\\n' ...`
    output; a package listed but not installed ('un', 'rc') is None."""
    found = dict((p, None) for p in packages)
    for line in (stdout or "").splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] in found and parts[1].startswith("ii"):
            found[parts[0]] = parts[2]
    return found
