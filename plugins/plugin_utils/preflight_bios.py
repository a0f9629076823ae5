# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight rules: the BMC inventory the bios role reads the BIOS through (Redfish), before anything runs.

On every GPU node where ``bios_enabled`` is true (the role runs on gpu_nodes):

* ``cluster_bmc_address`` is ``<address>[:<port>]``: an IPv4 address, a bracketed IPv6 address or a host name, an
  optional port 1-65535, no scheme (community.general's Redfish modules always put ``https://`` in front), no path;
  it is not the node's own management address (a BMC is a separate device), and no two nodes share one (the role
  would read, and with bios_apply stage, the wrong server);
* ``cluster_bmc_username`` and ``cluster_bmc_password`` are non-empty strings. A message never shows the password,
  only its type;
* ``bios_vendor_table_extra`` is what ``merge_table`` of plugins/plugin_utils/bios_attributes.py accepts (every entry
  with its source), so the role cannot stop on it later;
* ``bios_apply`` without ``bios_enabled`` is refused: it would stage nothing, silently;
* ``bios_redfish_host`` is ``localhost`` or a host of the inventory (the Redfish calls are delegated to it).

The types of the bios_* options themselves are checked from the role's argument spec (preflight_specs.py).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

from ansible_collections.clusterforge.gpu.plugins.plugin_utils.bios_attributes import merge_table
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import MISSING, is_host_name
from ansible_collections.clusterforge.gpu.plugins.module_utils.values import type_name

ROLE = "bios"
GROUP = "gpu_nodes"
SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
FORM = "<address>[:<port>] (an IPv4 address, [IPv6] or a host name, optional port 1-65535, no scheme or path)"


def _a(value):
    """'an integer', 'a list': the type of a value with its article, for messages that must not show the value."""
    name = type_name(value)
    return ("an " if name[:1] in "aeiou" else "a ") + name


def parse_bmc_address(value):
    """(host, port or None) of a cluster_bmc_address, or raise ValueError saying what is wrong."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError("must be %s, got %s" % (FORM, "an empty string" if isinstance(value, str) else _a(value)))
    text = value.strip()
    if text != value:
        raise ValueError("has spaces around it: %r" % value)
    if SCHEME_RE.match(text):
        raise ValueError("%r: give the address without the scheme (%s): the Redfish modules always use https://"
                         % (value, text.split("://", 1)[0] + "://"))
    if "/" in text or "@" in text or any(c.isspace() for c in text):
        raise ValueError("%r is not %s" % (value, FORM))
    host, port = text, None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError("%r: an IPv6 address needs its closing bracket" % value)
        host, rest = text[1:end], text[end + 1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError("%r: %r is not an IPv6 address" % (value, host))
        if rest:
            if not rest.startswith(":"):
                raise ValueError("%r is not %s" % (value, FORM))
            port = rest[1:]
    elif text.count(":") == 1:
        host, port = text.split(":")
    elif text.count(":") > 1:
        raise ValueError("%r: write an IPv6 address in brackets, [addr] or [addr]:port" % value)
    if port is not None:
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise ValueError("%r: the port must be 1-65535, got %r" % (value, port))
        port = int(port)
    if not text.startswith("["):
        if re.match(r"^[0-9.]+$", host):
            try:
                ipaddress.IPv4Address(host)
            except ValueError:
                raise ValueError("%r: %r is not an IPv4 address" % (value, host))
        elif not is_host_name(host):
            raise ValueError("%r: %r is not a host name" % (value, host))
    return host, port


def bmc_tls_problem(validate_certs, insecure_skip_tls_verify):
    """Why the BMC's TLS settings are refused, or None. Not checking the BMC's certificate (validate_certs false)
    sends the BMC password to whoever answers at its address: only with the loudly named opt-in
    bios_bmc_insecure_skip_tls_verify: true (a lab's emulated BMCs, a BMC whose certificate cannot be replaced yet)."""
    if validate_certs is False and insecure_skip_tls_verify is not True:
        return ("bios_bmc_validate_certs: false sends the BMC password without checking who answers; give the BMC's "
                "CA in bios_bmc_ca_path (keeping bios_bmc_validate_certs: true), or accept unverified BMCs with "
                "bios_bmc_insecure_skip_tls_verify: true")
    if insecure_skip_tls_verify is True and validate_certs is not False:
        return ("bios_bmc_insecure_skip_tls_verify: true only goes with bios_bmc_validate_certs: false (set both, or "
                "neither)")
    return None


def check(inv, opts):  # pylint: disable=unused-argument
    errors = []
    seen = {}
    hosts = inv.hosts(GROUP)
    for host in hosts:
        enabled = inv.effective(host, ROLE, "bios_enabled")
        apply_ = inv.effective(host, ROLE, "bios_apply")
        if enabled is not True:
            if apply_ is True:
                errors.append("%s: bios_apply: is true but bios_enabled is not: nothing would be read or staged; "
                              "set bios_enabled: true (and the BMC inventory) or bios_apply: false" % host)
            continue
        errors.extend(_bmc_errors(inv, host, seen))
        tls = bmc_tls_problem(inv.effective(host, ROLE, "bios_bmc_validate_certs"),
                              inv.effective(host, ROLE, "bios_bmc_insecure_skip_tls_verify"))
        if tls:
            errors.append("%s: %s" % (host, tls))
        extra = inv.get(host, "bios_vendor_table_extra", MISSING)
        if extra not in (MISSING, None) and isinstance(extra, dict):
            try:
                merge_table(extra)
            except ValueError as e:
                errors.append("%s: bios_vendor_table_extra: %s" % (host, e))
        redfish_host = inv.effective(host, ROLE, "bios_redfish_host")
        if isinstance(redfish_host, str) and redfish_host not in ("localhost", "127.0.0.1") \
                and redfish_host not in inv.all_hosts:
            errors.append("%s: bios_redfish_host: %r is neither localhost nor a host of the inventory (the Redfish "
                          "calls are delegated to it)" % (host, redfish_host))
    return errors


def _bmc_errors(inv, host, seen):
    errors = []
    address = inv.get(host, "cluster_bmc_address", MISSING)
    if address is MISSING or address is None:
        errors.append("%s: cluster_bmc_address: is required with bios_enabled (%s)" % (host, FORM))
    else:
        try:
            bmc_host, port = parse_bmc_address(address)
        except ValueError as e:
            errors.append("%s: cluster_bmc_address: %s" % (host, e))
        else:
            mgmt = inv.get(host, "cluster_mgmt_ip", None)
            if mgmt is not None and str(mgmt).strip() == bmc_host:
                errors.append("%s: cluster_bmc_address: %s is the node's own management address (cluster_mgmt_ip): "
                              "give its BMC's address" % (host, bmc_host))
            key = (bmc_host.lower(), port)
            if key in seen:
                errors.append("%s: cluster_bmc_address: %s is also the BMC of %s (each node has its own BMC)"
                              % (host, address, seen[key]))
            seen.setdefault(key, host)
    for name in ("cluster_bmc_username", "cluster_bmc_password"):
        value = inv.get(host, name, MISSING)
        if value is MISSING or value is None:
            errors.append("%s: %s: is required with bios_enabled%s" % (
                host, name, " (keep it in a vault)" if name.endswith("password") else ""))
        elif not isinstance(value, str) or not value:
            # Never the value itself: it may be a password.
            errors.append("%s: %s: must be a non-empty string, got %s" % (
                host, name, "an empty string" if isinstance(value, str) else _a(value)))
    return errors
