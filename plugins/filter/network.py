# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Address planning filters built on netaddr: used by preflight and the roles."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

try:
    import netaddr

    HAS_NETADDR = True
except ImportError:  # pragma: no cover - exercised only without netaddr
    HAS_NETADDR = False


def _need_netaddr(name):
    if not HAS_NETADDR:
        raise AnsibleFilterError("%s needs the Python library netaddr on the controller (pip install netaddr)" % name)


def _network(value, name):
    _need_netaddr(name)
    try:
        return netaddr.IPNetwork(str(value).strip())
    except (netaddr.AddrFormatError, ValueError, TypeError) as e:
        raise AnsibleFilterError("%s: %r is not a network in CIDR form (%s)" % (name, value, e))


def network_host(cidr, n):
    """The n-th usable host address of a network (1 = first host; -1 = last host)."""
    net = _network(cidr, "network_host")
    try:
        n = int(n)
    except (TypeError, ValueError):
        raise AnsibleFilterError("network_host: the host number must be an integer, got %r" % (n,))
    if net.size <= 2:
        first, last = int(net.first), int(net.last)
    else:
        first, last = int(net.first) + 1, int(net.last) - 1
    count = last - first + 1
    if n == 0 or abs(n) > count:
        raise AnsibleFilterError("network_host: %s has %d host addresses; host %d does not exist" % (net, count, n))
    value = first + n - 1 if n > 0 else last + n + 1
    return str(netaddr.IPAddress(value, net.version))


def networks_overlap(a, b):
    """True when two networks share at least one address."""
    na, nb = _network(a, "networks_overlap"), _network(b, "networks_overlap")
    return bool(na.first <= nb.last and nb.first <= na.last)


def ip_in_network(ip, cidr):
    """True when the address lies inside the network."""
    net = _network(cidr, "ip_in_network")
    try:
        addr = netaddr.IPAddress(str(ip).strip())
    except (netaddr.AddrFormatError, ValueError, TypeError):
        return False
    return addr in net


def interface_with_address(facts, ip):
    """The name of the interface that holds IPv4 address ``ip`` (primary or secondary) in a host's gathered facts
    (``ansible_facts``), the first in name order; '' when none does."""
    if not hasattr(facts, "get"):
        raise AnsibleFilterError("interface_with_address: expected a host's ansible_facts, got %s" % type(facts).__name__)
    wanted = str(ip).strip()
    for name in sorted(facts.get("interfaces") or []):
        device = facts.get(str(name).replace("-", "_").replace(".", "_")) or {}
        ipv4 = device.get("ipv4") if hasattr(device, "get") else None
        if not hasattr(ipv4, "get"):
            continue
        secondaries = [a.get("address") for a in device.get("ipv4_secondaries") or [] if hasattr(a, "get")]
        if ipv4.get("address") == wanted or wanted in secondaries:
            return name
    return ""


class FilterModule(object):
    def filters(self):
        return {
            "network_host": network_host,
            "networks_overlap": networks_overlap,
            "ip_in_network": ip_in_network,
            "interface_with_address": interface_with_address,
        }
