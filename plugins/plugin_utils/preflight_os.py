# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight rules: the operating system base (common_os).

Several common_os values end up in places where a wrong one does harm beyond the role: the CPU governor in a
``sh -c`` line of a boot unit, kernel parameters inside GRUB's double-quoted command line, /etc/hosts entries, a
nofile limit above the kernel's ``fs.nr_open`` (pam_limits then refuses every login), chrony's configuration.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

try:
    import netaddr

    HAS_NETADDR = True
except ImportError:  # pragma: no cover
    HAS_NETADDR = False

from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import MISSING, is_host_name
from ansible_collections.clusterforge.gpu.plugins.module_utils.values import is_int, type_name

# The governors of the Linux cpufreq subsystem (Documentation/admin-guide/pm/cpufreq.rst).
GOVERNORS = ("performance", "powersave", "ondemand", "conservative", "schedutil", "userspace")
# A kernel parameter: key or key=value, no whitespace, nothing GRUB's double-quoted line would expand.
KERNEL_PARAM_RE = re.compile(r"^[A-Za-z0-9_.-]+(=[^\s\"'`$\\;]+)?$")
SUFFIX_RE = re.compile(r"^[a-z0-9-]{1,20}$")
SYSCTL_KEY_RE = re.compile(r"^[a-z0-9_]+(\.[A-Za-z0-9_*:-]+)+$")
# Linux's default fs.nr_open; RLIMIT_NOFILE may not exceed it (setrlimit fails with EPERM and pam_limits then
# refuses the login), and fs.nr_open itself tops out at 1073741816 on 64-bit kernels.
NR_OPEN_DEFAULT = 1048576
NR_OPEN_MAX = 1073741816


def check(inv, opts):
    errors = []
    for host in inv.role_hosts("common_os"):
        errors.extend(_host_errors(inv, host))
    # The ports a node listens on are judged for every role at once (plugins/plugin_utils/preflight_generic.py).
    return errors


def _host_errors(inv, host):
    errors = []
    gov = inv.get(host, "common_os_cpu_governor", MISSING)
    if gov is not MISSING and gov is not None and gov not in GOVERNORS:
        errors.append("%s: common_os_cpu_governor: %r is not a Linux cpufreq governor (one of %s, or null to leave "
                      "it alone)" % (host, gov, ", ".join(GOVERNORS)))

    params = inv.get(host, "common_os_kernel_cmdline_params", MISSING)
    if isinstance(params, list):
        keys = {}
        for p in params:
            if not isinstance(p, str) or not KERNEL_PARAM_RE.match(p):
                errors.append("%s: common_os_kernel_cmdline_params: %r is not one kernel parameter (key or key=value, "
                              "no spaces, quotes, '$', '`', '\\' or ';': it is written into GRUB's quoted command "
                              "line)" % (host, p))
                continue
            key, value = p.partition("=")[::2]
            if key in keys and keys[key] != value:
                errors.append("%s: common_os_kernel_cmdline_params: %s is given twice with different values (%s and "
                              "%s): the kernel takes the last one, which is rarely what was meant"
                              % (host, key, keys[key] or "(no value)", value or "(no value)"))
            keys.setdefault(key, value)

    memlock = inv.get(host, "common_os_memlock_limit", MISSING)
    if memlock is not MISSING and memlock != "unlimited" and not (
            (is_int(memlock) and memlock > 0) or (isinstance(memlock, str) and memlock.isdigit() and int(memlock) > 0)):
        errors.append("%s: common_os_memlock_limit: must be 'unlimited' (what RDMA needs) or a positive number of "
                      "KiB, got %r" % (host, memlock))

    nofile = inv.get(host, "common_os_nofile_limit", MISSING)
    if is_int(nofile):
        sysctl = inv.get(host, "common_os_sysctl", {})
        nr_open = sysctl.get("fs.nr_open") if isinstance(sysctl, dict) else None
        nr_open = nr_open if is_int(nr_open) else NR_OPEN_DEFAULT
        # Below 1024: the range of roles/common_os/meta/preflight.yml (preflight_generic) says so.
        if nofile > min(nr_open, NR_OPEN_MAX):
            errors.append("%s: common_os_nofile_limit: %d is above the kernel's fs.nr_open (%d): setting it fails and "
                          "pam_limits refuses every login; raise fs.nr_open in common_os_sysctl first (at most %d)"
                          % (host, nofile, nr_open, NR_OPEN_MAX))

    servers = inv.get(host, "common_os_chrony_servers", MISSING)
    if isinstance(servers, list):
        if not servers:
            errors.append("%s: common_os_chrony_servers: is empty; a cluster without a time source drifts, and "
                          "Slurm, munge and Lustre all need synchronised clocks" % host)
        for i, server in enumerate(servers):
            name = server.get("name") if isinstance(server, dict) else None
            if isinstance(name, str) and not (is_host_name(name) or _is_ip(name)):
                errors.append("%s: common_os_chrony_servers[%d].name: %r is neither a host name nor an IP address"
                              % (host, i, name))

    cidrs = inv.get(host, "common_os_chrony_allow_cidrs", MISSING)
    if isinstance(cidrs, list):
        for cidr in cidrs:
            if not isinstance(cidr, str) or not _is_net(cidr):
                errors.append("%s: common_os_chrony_allow_cidrs: %r is not a network in CIDR form" % (host, cidr))

    suffix = inv.get(host, "common_os_hosts_fabric_suffix", MISSING)
    if suffix is not MISSING and (not isinstance(suffix, str) or not SUFFIX_RE.match(suffix)):
        errors.append("%s: common_os_hosts_fabric_suffix: must be 1-20 of [a-z0-9-] (it makes host names such as "
                      "gpu01-fab), got %r" % (host, suffix))

    extra = inv.get(host, "common_os_hosts_extra", MISSING)
    if isinstance(extra, list):
        for i, entry in enumerate(extra):
            if not isinstance(entry, dict):
                continue
            ip = entry.get("ip")
            if isinstance(ip, str) and not _is_ip(ip):
                errors.append("%s: common_os_hosts_extra[%d].ip: %r is not an IP address" % (host, i, ip))
            names = entry.get("names")
            if isinstance(names, list):
                bad = [n for n in names if not isinstance(n, str) or not is_host_name(n)]
                if bad or not names:
                    errors.append("%s: common_os_hosts_extra[%d].names: must be a non-empty list of host names, got %r"
                                  % (host, i, names))

    sysctl = inv.get(host, "common_os_sysctl", MISSING)
    if isinstance(sysctl, dict):
        for key, value in sysctl.items():
            if not isinstance(key, str) or not SYSCTL_KEY_RE.match(key):
                errors.append("%s: common_os_sysctl: %r is not a sysctl key (dotted, e.g. net.core.rmem_max)" % (host, key))
            elif isinstance(value, (dict, list)) or value is None or (isinstance(value, str) and ("\n" in value or not value.strip())):
                errors.append("%s: common_os_sysctl: %s: the value must be a number or a one-line string, got %s"
                              % (host, key, type_name(value) if not isinstance(value, str) else repr(value)))
    return errors


def _is_ip(value):
    if not HAS_NETADDR:  # pragma: no cover
        return True
    try:
        netaddr.IPAddress(value)
        return True
    except (netaddr.AddrFormatError, ValueError, TypeError):
        return False


def _is_net(value):
    if not re.match(r"^[0-9a-fA-F.:]+/\d{1,3}$", value.strip()):
        return False
    try:
        netaddr.IPNetwork(value)
        return True
    except (netaddr.AddrFormatError, ValueError, TypeError):
        return False
