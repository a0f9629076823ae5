import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter.network import (
    FilterModule, ip_in_network, network_host, networks_overlap)


def test_filters_registered():
    assert set(FilterModule().filters()) == {"network_host", "networks_overlap", "ip_in_network", "interface_with_address"}


@pytest.mark.parametrize("cidr,n,expected", [
    ("10.0.0.0/24", 1, "10.0.0.1"),
    ("10.0.0.0/24", 10, "10.0.0.10"),
    ("10.0.0.0/24", -1, "10.0.0.254"),
    ("10.0.0.0/24", 254, "10.0.0.254"),
    ("192.168.4.0/22", 300, "192.168.5.44"),
    ("10.1.2.0/31", 2, "10.1.2.1"),
    ("fd00::/64", 5, "fd00::5"),
])
def test_network_host(cidr, n, expected):
    assert network_host(cidr, n) == expected


@pytest.mark.parametrize("cidr,n", [("10.0.0.0/24", 0), ("10.0.0.0/24", 255), ("10.0.0.0/24", -255), ("10.0.0.0/30", 3)])
def test_network_host_out_of_range(cidr, n):
    with pytest.raises(AnsibleFilterError, match="does not exist"):
        network_host(cidr, n)


def test_network_host_bad_input():
    with pytest.raises(AnsibleFilterError, match="CIDR"):
        network_host("not-a-net", 1)
    with pytest.raises(AnsibleFilterError, match="integer"):
        network_host("10.0.0.0/24", "x")


@pytest.mark.parametrize("a,b,expected", [
    ("10.0.0.0/16", "10.0.5.0/24", True),
    ("10.0.5.0/24", "10.0.0.0/16", True),
    ("10.0.0.0/24", "10.0.1.0/24", False),
    ("10.0.0.0/23", "10.0.1.0/24", True),
    ("172.16.0.0/12", "172.32.0.0/16", False),
])
def test_networks_overlap(a, b, expected):
    assert networks_overlap(a, b) is expected


@pytest.mark.parametrize("ip,cidr,expected", [
    ("10.0.0.7", "10.0.0.0/24", True),
    ("10.0.1.7", "10.0.0.0/24", False),
    ("garbage", "10.0.0.0/24", False),
    ("fd00::1", "fd00::/64", True),
])
def test_ip_in_network(ip, cidr, expected):
    assert ip_in_network(ip, cidr) is expected


FACTS = {"interfaces": ["lo", "eth0", "bond0.100", "ib0"],
         "lo": {"ipv4": {"address": "127.0.0.1"}},
         "eth0": {"ipv4": {"address": "10.0.0.11"}, "ipv4_secondaries": [{"address": "10.0.0.99"}]},
         "bond0_100": {"ipv4": {"address": "10.1.0.11"}},
         "ib0": {"ipv6": [{"address": "fe80::1"}]}}


def test_interface_with_address_reads_primary_and_secondary_addresses():
    find = FilterModule().filters()["interface_with_address"]
    assert find(FACTS, "10.0.0.11") == "eth0"
    assert find(FACTS, "10.0.0.99") == "eth0"
    assert find(FACTS, "10.1.0.11") == "bond0.100"   # facts name the VLAN device bond0_100
    assert find(FACTS, "10.9.9.9") == ""
    assert find({"interfaces": ["b", "a"], "a": {"ipv4": {"address": "1.1.1.1"}},
                 "b": {"ipv4": {"address": "1.1.1.1"}}}, "1.1.1.1") == "a"   # the first in name order
