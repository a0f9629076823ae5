# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

import random

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import compress, expand


@pytest.mark.parametrize("expr, hosts", [
    ("gpu01", ["gpu01"]),
    ("head", ["head"]),
    ("gpu[1-3]", ["gpu1", "gpu2", "gpu3"]),
    ("gpu[01-03]", ["gpu01", "gpu02", "gpu03"]),
    ("gpu[001-003]", ["gpu001", "gpu002", "gpu003"]),
    ("gpu[08-11]", ["gpu08", "gpu09", "gpu10", "gpu11"]),
    ("gpu[8-11]", ["gpu8", "gpu9", "gpu10", "gpu11"]),
    ("gpu[98-101]", ["gpu98", "gpu99", "gpu100", "gpu101"]),
    ("gpu[098-101]", ["gpu098", "gpu099", "gpu100", "gpu101"]),
    ("gpu[01-04,07,09-10]", ["gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "gpu09", "gpu10"]),
    ("gpu[01-02,001]", ["gpu01", "gpu02", "gpu001"]),
    ("gpu[0-1]", ["gpu0", "gpu1"]),
    ("gpu[00-01]", ["gpu00", "gpu01"]),
    ("head01,gpu[01-02],stor[1-2]", ["head01", "gpu01", "gpu02", "stor1", "stor2"]),
    ("rack[1-2]-node", ["rack1-node", "rack2-node"]),
    ("rack[1-2]-ib[0-1]", ["rack1-ib0", "rack1-ib1", "rack2-ib0", "rack2-ib1"]),
    ("r[1-2]n[01-02]", ["r1n01", "r1n02", "r2n01", "r2n02"]),
    ("r[1-2]c[1-2]n[1-2]", ["r1c1n1", "r1c1n2", "r1c2n1", "r1c2n2", "r2c1n1", "r2c1n2", "r2c2n1", "r2c2n2"]),
    ("esc8000a-[0-1],esc8000b-0", ["esc8000a-0", "esc8000a-1", "esc8000b-0"]),
    ("dgx[2-9]", ["dgx%d" % i for i in range(2, 10)]),
    ("a b\tc", ["a", "b", "c"]),
    ("gpu1,gpu1", ["gpu1", "gpu1"]),        # like scontrol show hostnames: duplicates kept
    ("gpu3,gpu1", ["gpu3", "gpu1"]),        # order of the expression kept
    ("gpu1,", ["gpu1"]),
    ("node-a.b[1-2].example", ["node-a.b1.example", "node-a.b2.example"]),
    ("[1-2]", ["1", "2"]),
    ("gpu[ 1 - 2 ]".replace(" - ", "-").replace("[ ", "[").replace(" ]", "]"), ["gpu1", "gpu2"]),
])
def test_expand(expr, hosts):
    assert expand(expr) == hosts


@pytest.mark.parametrize("expr, fragment", [
    ("", "empty"),
    ("   ", "empty"),
    (",,", "empty"),
    ("gpu[1-3", "unbalanced"),
    ("gpu1-3]", "']' without '['"),
    ("gpu[[1-2]]", "nested"),
    ("gpu[3-1]", "reversed"),
    ("gpu[]", "empty brackets"),
    ("gpu[a-b]", "bad range"),
    ("gpu[1-]", "bad range"),
    ("gpu[-1]", "bad range"),
    ("gpu[1--2]", "bad range"),
    ("gpu[1,,2]", "bad range"),
    ("gpu[0-99999]", "too many"),
])
def test_expand_invalid(expr, fragment):
    with pytest.raises(ValueError) as excinfo:
        expand(expr)
    assert fragment in str(excinfo.value)
    assert repr(expr.strip()) in str(excinfo.value) or expr.strip() in str(excinfo.value) or "empty" in fragment


def test_expand_rejects_non_string():
    with pytest.raises(ValueError):
        expand(["gpu1"])


@pytest.mark.parametrize("hosts, expr", [
    (["gpu01"], "gpu01"),
    (["gpu01", "gpu02", "gpu03"], "gpu[01-03]"),
    (["gpu03", "gpu01", "gpu02", "gpu01"], "gpu[01-03]"),
    (["gpu01", "gpu02", "gpu03", "gpu04", "gpu07", "gpu09", "gpu10"], "gpu[01-04,07,09-10]"),
    (["gpu1", "gpu2", "gpu10", "gpu11"], "gpu[1-2,10-11]"),
    (["gpu9", "gpu10"], "gpu[9-10]"),
    (["gpu09", "gpu10"], "gpu[09-10]"),
    (["gpu99", "gpu100"], "gpu[99-100]"),
    (["gpu099", "gpu100"], "gpu[099-100]"),
    (["gpu01", "gpu02", "gpu001", "gpu002"], "gpu[01-02,001-002]"),
    (["gpu1", "gpu01"], "gpu[1,01]"),
    (["stor2", "head01", "gpu02", "gpu01", "stor1", "gpu01"], "gpu[01-02],head01,stor[1-2]"),
    (["r2n1", "r10n1", "r1n2", "r1n1"], "r1n[1-2],r2n1,r10n1"),
    (["rack2-node", "rack1-node"], "rack[1-2]-node"),
    (["rack1-ib", "rack1", "rack2"], "rack[1-2],rack1-ib"),
    (["head", "head1", "head2"], "head,head[1-2]"),
    (["login", "compute"], "compute,login"),
    (["esc8000a-0", "esc8000a-1", "esc8000b-0"], "esc8000a-[0-1],esc8000b-0"),
    (["gpu0", "gpu1"], "gpu[0-1]"),
    (["gpu00", "gpu01", "gpu1"], "gpu[1,00-01]"),
    ("gpu05", "gpu05"),
])
def test_compress(hosts, expr):
    assert compress(hosts) == expr


@pytest.mark.parametrize("hosts", [[], [""], ["gpu[1-2]"], ["a,b"], ["a b"], [None], [3]])
def test_compress_invalid(hosts):
    with pytest.raises(ValueError):
        compress(hosts)


def test_compress_handles_sinfo_fixture_lists():
    assert compress(expand("dgx1,dgx[2-9]")) == "dgx[1-9]"


def _random_hosts(rng):
    prefixes = ["gpu", "node", "r1n", "rack-", "stor", "a"]
    suffixes = ["", "", "", "-ib"]
    hosts = []
    for dummy in range(rng.randint(1, 40)):
        prefix = rng.choice(prefixes)
        suffix = rng.choice(suffixes)
        width = rng.choice([1, 2, 3])
        number = rng.randint(0, 120)
        if rng.random() < 0.05:
            hosts.append(prefix.rstrip("-") or "x")   # no number at all
        else:
            hosts.append("%s%0*d%s" % (prefix, width, number, suffix))
    return hosts


@pytest.mark.parametrize("seed", range(300))
def test_round_trip(seed):
    rng = random.Random(seed)
    hosts = _random_hosts(rng)
    compressed = compress(hosts)
    expanded = expand(compressed)
    # Same set of names, no duplicates, and compress is canonical: compressing again changes nothing.
    assert sorted(expanded) == sorted(set(hosts))
    assert len(expanded) == len(set(expanded))
    assert compress(expanded) == compressed
    assert compress(list(reversed(hosts))) == compressed


def test_round_trip_large_range():
    hosts = ["gpu%04d" % i for i in range(1, 2049) if i % 7]
    compressed = compress(hosts)
    assert compressed.startswith("gpu[0001-0006,0008-0013,")
    assert expand(compressed) == hosts
