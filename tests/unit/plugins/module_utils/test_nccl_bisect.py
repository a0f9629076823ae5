# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The search behind a multi-node NCCL miss, against a fake cluster (a runner that knows the faults)."""

import math

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils.nccl_bisect import isolate, tournament_rounds

GOOD = 380.0
SLOW = 120.0
THRESHOLD = 346.5


class Cluster(object):
    """A fake: a set misses when it holds a bad node or both nodes of a bad pair, or (``min_size_fault``) when it
    is at least that large."""

    def __init__(self, n, bad=(), bad_pairs=(), min_size_fault=None, everything_slow=False):
        self.nodes = ["gpu%03d" % i for i in range(1, n + 1)]
        self.bad = set(bad)
        self.bad_pairs = [set(p) for p in bad_pairs]
        self.min_size_fault = min_size_fault
        self.everything_slow = everything_slow
        self.rounds = []

    def busbw(self, nodes):
        s = set(nodes)
        if self.everything_slow or s & self.bad or any(p <= s for p in self.bad_pairs):
            return SLOW
        if self.min_size_fault and len(s) >= self.min_size_fault:
            return SLOW
        return GOOD

    def run_round(self, sets):
        members = [n for s in sets for n in s]
        assert len(members) == len(set(members)), "a round's sets must be disjoint: %r" % sets
        assert all(len(s) >= 2 for s in sets), "no set of one node: %r" % sets
        self.rounds.append([list(s) for s in sets])
        return [{"busbw": self.busbw(s)} for s in sets]

    def search(self, **kw):
        first = {"busbw": self.busbw(self.nodes)}
        return isolate(self.nodes, self.run_round, lambda r: r["busbw"] >= THRESHOLD, first=first, **kw)


def node(i):
    return "gpu%03d" % i


@pytest.mark.parametrize("n", [4, 5, 7, 8, 16, 33, 64, 100, 256, 512])
def test_one_culprit_in_about_log2_n_rounds(n):
    for culprit in sorted({1, n // 2, n // 2 + 1, n}):
        cluster = Cluster(n, bad=[node(culprit)])
        found = cluster.search()
        assert found["culprits"] == [node(culprit)], (n, culprit, found)
        assert found["pairs"] == [] and found["unresolved"] == []
        assert found["rounds"] <= math.ceil(math.log2(n)) + 1, (n, found["rounds"])
        assert found["evidence"][node(culprit)]["passed"] is False
        assert node(culprit) in found["evidence"][node(culprit)]["nodes"]
        assert len(found["evidence"][node(culprit)]["nodes"]) == 2
        runs = sum(len(r) for r in cluster.rounds)
        assert runs <= 2 * math.ceil(math.log2(n)) + 3, (n, runs)


@pytest.mark.parametrize("n,bad", [(8, (1, 8)), (8, (1, 2)), (4, (1, 3)), (64, (5, 40)), (512, (3, 300)),
                                   (9, (4, 5))])
def test_two_culprits(n, bad):
    cluster = Cluster(n, bad=[node(b) for b in bad])
    found = cluster.search()
    assert sorted(found["culprits"]) == [node(b) for b in bad], found
    assert found["pairs"] == [] and found["unresolved"] == []


def test_a_failing_pair_of_good_nodes_is_named():
    # gpu003 and gpu004 are fine with anyone else; together they miss (a link or route between them).
    cluster = Cluster(16, bad_pairs=[(node(3), node(4))])
    found = cluster.search()
    assert found["culprits"] == [] and found["pairs"] == [[node(3), node(4)]], found
    assert found["evidence"]["%s,%s" % (node(3), node(4))]["passed"] is False


def test_a_failing_pair_across_the_halves_is_named():
    # The halves of 8 are 1-4 and 5-8: both pass, the whole does not; the quarters are paired across.
    cluster = Cluster(8, bad_pairs=[(node(2), node(7))])
    found = cluster.search()
    assert found["culprits"] == [] and found["pairs"] == [[node(2), node(7)]], found
    assert found["unresolved"] == []


def test_a_failing_pair_in_a_set_of_three():
    cluster = Cluster(3, bad_pairs=[(node(1), node(3))])
    found = cluster.search()
    assert found["pairs"] == [[node(1), node(3)]] and found["culprits"] == [], found


def test_one_culprit_among_three_nodes():
    cluster = Cluster(3, bad=[node(2)])
    found = cluster.search()
    assert found["culprits"] == [node(2)], found


def test_threshold_met_at_every_size_names_nobody():
    cluster = Cluster(32)
    found = isolate(cluster.nodes, cluster.run_round, lambda r: r["busbw"] >= THRESHOLD)
    assert found["culprits"] == [] and found["pairs"] == [] and found["unresolved"] == []
    assert found["rounds"] == 1 and cluster.rounds == [[cluster.nodes]]


def test_a_miss_that_only_shows_at_full_size_is_unresolved_not_blamed_on_a_node():
    cluster = Cluster(16, min_size_fault=16)
    found = cluster.search()
    assert found["culprits"] == [] and found["pairs"] == []
    assert len(found["unresolved"]) == 1 and found["unresolved"][0]["nodes"] == cluster.nodes
    assert "only at this size" in found["unresolved"][0]["reason"]


def test_everything_slow_stops_early_and_blames_no_node():
    cluster = Cluster(512, everything_slow=True)
    found = cluster.search()
    assert found["culprits"] == [] and found["pairs"] == []
    assert len(found["unresolved"]) == 1 and "shared by many nodes" in found["unresolved"][0]["reason"]
    assert found["unresolved"][0]["nodes"] == cluster.nodes
    assert sum(len(r) for r in cluster.rounds) <= 2 + 4 + 8 + 16  # stops once more than 8 sets miss at once


def test_two_nodes_only():
    cluster = Cluster(2, bad=[node(1)])
    found = cluster.search()
    assert found["culprits"] == [] and cluster.rounds == []
    assert found["unresolved"] == [{"nodes": cluster.nodes, "reason": found["unresolved"][0]["reason"]}]
    assert "no pair of these nodes" in found["unresolved"][0]["reason"]


def test_no_reference_node_uses_a_tournament():
    # 4 nodes, culprits 1 and 3: halves {1,2} and {3,4} both miss, no node passed anywhere.
    cluster = Cluster(4, bad=[node(1), node(3)])
    found = cluster.search()
    assert sorted(found["culprits"]) == [node(1), node(3)], found


def test_sets_are_never_run_twice():
    cluster = Cluster(64, bad=[node(10)], bad_pairs=[(node(40), node(41))])
    found = cluster.search()
    sets = [frozenset(s) for r in cluster.rounds for s in r]
    assert len(sets) == len(set(sets))
    assert found["culprits"] == [node(10)] and found["pairs"] == [[node(40), node(41)]], found


def test_runs_record_every_result_with_its_round():
    cluster = Cluster(8, bad=[node(5)])
    found = cluster.search()
    assert found["runs"][0] == {"round": 0, "nodes": cluster.nodes, "passed": False, "result": {"busbw": SLOW}}
    assert [r["round"] for r in found["runs"]] == sorted(r["round"] for r in found["runs"])
    assert found["suspects"] == [node(5), node(6)]


@pytest.mark.parametrize("n", [2, 3, 4, 5, 8, 9])
def test_tournament_rounds_cover_every_pair_once(n):
    players = list(range(n))
    rounds = tournament_rounds(players)
    pairs = [tuple(sorted(p)) for r in rounds for p in r]
    assert len(pairs) == len(set(pairs)) == n * (n - 1) // 2
    for r in rounds:
        members = [x for p in r for x in p]
        assert len(members) == len(set(members))
