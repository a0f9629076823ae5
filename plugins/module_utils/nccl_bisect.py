# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which node (or pair of nodes) makes a multi-node NCCL run miss its threshold: bisection, then pairs.

The search runs node sets through a runner the caller gives (the nccl_isolate module runs srun; the unit tests a
fake), one round at a time: every set of a round is disjoint from the others, so the runner may run them at once.

1. Bisection. A failing set of four or more nodes is split into halves and both halves run (at once). A half that
   misses is searched the same way; a set of two or three nodes that misses is a leaf. When both halves reach the
   threshold and the whole does not, the fault lies between the halves: each half is split into quarters
   (x1, x2 of one, y1, y2 of the other) and x1+y1 and x2+y2 run, then, if both pass, x1+y2 and x2+y1; a failing
   one is searched the same way (its two parts already passed). One culprit among n nodes is found in about
   log2(n) rounds.
2. Leaves. Each node of a failing leaf that no passing run cleared runs with a node that did (a reference), one
   pair per node, all at once: a node that misses with a good reference is a culprit. A leaf whose nodes all pass
   elsewhere names its pair (two nodes), or runs its three pairs and names those that miss (three nodes).
3. No reference. When no run passed at all, the suspects (at most ``max_tournament``) run every pair in rounds of
   disjoint pairs; nodes of a passing pair become references and the rules of 2 apply.

Whatever cannot be narrowed down is returned as ``unresolved`` with the reason: a set whose parts all pass (a cause
that only shows at that size: congestion, routing, a spine link), more than ``max_failing_sets`` disjoint sets
missing at once (a cause shared by many nodes: fabric, configuration or the threshold itself), or suspects without
a single passing pair.

A set is never run twice (results are kept by node set), and no set of fewer than two nodes is run: one node's NCCL
run measures NVLink, not the network (that is the single-node check).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# A leaf is a failing set this small; a set of four or more is split.
LEAF_SIZE = 3
DEFAULT_MAX_FAILING_SETS = 8
DEFAULT_MAX_TOURNAMENT = 16


def _split(nodes):
    half = len(nodes) // 2
    return list(nodes[:half]), list(nodes[half:])


def tournament_rounds(nodes):
    """Every pair of ``nodes`` in rounds of disjoint pairs (the circle method): n-1 rounds for an even n, n for odd."""
    players = list(nodes)
    if len(players) < 2:
        return []
    if len(players) % 2:
        players.append(None)
    n = len(players)
    rounds = []
    for _r in range(n - 1):
        pairs = []
        for i in range(n // 2):
            a, b = players[i], players[n - 1 - i]
            if a is not None and b is not None:
                pairs.append([a, b])
        rounds.append(pairs)
        players = [players[0]] + [players[-1]] + players[1:-1]
    return rounds


class _Search(object):
    def __init__(self, nodes, run_round, passes, max_failing_sets, max_tournament):
        self.order = dict((node, i) for i, node in enumerate(nodes))
        self.run_round = run_round
        self.passes = passes
        self.max_failing_sets = max_failing_sets
        self.max_tournament = max_tournament
        self.results = {}
        self.runs = []
        self.rounds = 0
        self.culprits = []
        self.pairs = []
        self.unresolved = []
        self.evidence = {}

    def key(self, nodes):
        return frozenset(nodes)

    def sort(self, nodes):
        return sorted(nodes, key=lambda n: self.order.get(n, len(self.order)))

    def record(self, nodes, result, round_no):
        nodes = self.sort(nodes)
        passed = bool(self.passes(result))
        entry = {"round": round_no, "nodes": nodes, "passed": passed, "result": result}
        self.results[self.key(nodes)] = entry
        self.runs.append(entry)
        return entry

    def known(self, nodes):
        return self.results.get(self.key(nodes))

    def passed(self, nodes):
        entry = self.known(nodes)
        return entry is not None and entry["passed"]

    def run(self, sets):
        """Run the sets not measured yet as one round (they must be disjoint)."""
        todo = []
        seen = set()
        for nodes in sets:
            key = self.key(nodes)
            if len(nodes) >= 2 and key not in self.results and key not in seen:
                seen.add(key)
                todo.append(self.sort(nodes))
        if not todo:
            return
        self.rounds += 1
        results = self.run_round(todo)
        if len(results) != len(todo):
            raise ValueError("the runner returned %d results for %d node sets" % (len(results), len(todo)))
        for nodes, result in zip(todo, results):
            self.record(nodes, result, self.rounds)

    def good_nodes(self):
        good = set()
        for entry in self.runs:
            if entry["passed"]:
                good.update(entry["nodes"])
        return good

    def unresolve(self, nodes, reason):
        self.unresolved.append({"nodes": self.sort(nodes), "reason": reason})

    # ------------------------------------------------------------------ 1. bisection
    def bisect(self, nodes):
        """Failing leaves (sets of 2 or 3 nodes) of the failing set ``nodes``; what cannot be split is unresolved."""
        pending = [("split", list(nodes), None)]
        leaves = []
        while pending:
            if len(pending) > self.max_failing_sets:
                self.unresolve([n for _stage, failing, _parts in pending for n in failing],
                               "%d disjoint sets of these nodes miss the threshold at once: a cause shared by many "
                               "nodes (fabric, configuration or the threshold itself), not a few nodes"
                               % len(pending))
                return leaves
            to_run = []
            for stage, failing, parts in pending:
                if len(failing) <= LEAF_SIZE:
                    continue
                if stage == "split":
                    to_run.extend(_split(failing))
                else:
                    x1, x2, y1, y2 = list(parts)
                    to_run.extend([x1 + y1, x2 + y2] if stage == "cross1" else [x1 + y2, x2 + y1])
            self.run(to_run)
            following = []
            for stage, failing, parts in pending:
                if len(failing) <= LEAF_SIZE:
                    leaves.append(self.sort(failing))
                    continue
                if stage == "split":
                    x, y = _split(failing)
                    halves = [h for h in (x, y) if not self.passed(h)]
                    if halves:
                        following.extend(("split", h, None) for h in halves)
                    else:
                        following.append(self._cross(failing, x, y))
                    continue
                x1, x2, y1, y2 = list(parts)
                sets = [(x1, y1), (x2, y2)] if stage == "cross1" else [(x1, y2), (x2, y1)]
                missing = [(a, b) for a, b in sets if not self.passed(a + b)]
                if missing:
                    following.extend(self._cross(a + b, a, b) for a, b in missing)
                elif stage == "cross1":
                    following.append(("cross2", failing, parts))
                else:
                    self.unresolve(failing, "every half and every pairing of its quarters reaches the threshold "
                                            "and the whole set does not: a cause that shows only at this size "
                                            "(congestion, routing, a spine link), not one node")
            pending = [item for item in following if item is not None]
        return leaves

    @staticmethod
    def _cross(failing, x, y):
        """The next stage of a failing set whose two parts x and y passed."""
        if len(failing) <= LEAF_SIZE:
            return ("split", failing, None)  # a leaf: its pairs are tried in phase 2
        if len(x) < 2 or len(y) < 2:
            return ("split", failing, None)
        x1, x2 = _split(x)
        y1, y2 = _split(y)
        return ("cross1", failing, (x1, x2, y1, y2))

    # ------------------------------------------------------------------ 2. leaves
    def pair_rounds(self, pairs):
        """Run pairs in as few rounds of disjoint pairs as possible (first fit)."""
        rounds = []
        for pair in pairs:
            if self.known(pair):
                continue
            for placed in rounds:
                used = set(n for p in placed for n in p)
                if not used & set(pair):
                    placed.append(pair)
                    break
            else:
                rounds.append([pair])
        for placed in rounds:
            self.run(placed)

    def references(self, suspects, good):
        """Pair each suspect with a distinct good node, in as many rounds as references run short."""
        refs = self.sort(good - set(suspects))
        if not refs:
            return
        todo = list(suspects)
        while todo:
            batch, todo = todo[:len(refs)], todo[len(refs):]
            self.run([[node, ref] for node, ref in zip(batch, refs)])

    def convict(self, node, good):
        """The failing run of ``node`` with a good reference, if any (and no passing run of the node)."""
        failing = None
        for entry in self.runs:
            if node not in entry["nodes"]:
                continue
            if entry["passed"]:
                return None
            others = set(entry["nodes"]) - set([node])
            if failing is None and len(entry["nodes"]) == 2 and others <= good:
                failing = entry
        return failing

    def resolve(self, leaves):
        suspects = self.sort(set(n for leaf in leaves for n in leaf))
        good = self.good_nodes()
        if not good:
            if len(suspects) > self.max_tournament:
                self.unresolve(suspects, "no set of these nodes reaches the threshold and there are more than %d "
                                         "of them to try in pairs: a cause shared by all of them (fabric, "
                                         "configuration or the threshold itself)" % self.max_tournament)
                return
            for pairs in tournament_rounds(suspects):
                self.run([p for p in pairs if not self.known(p)])
            good = self.good_nodes()
            if not good:
                self.unresolve(suspects, "no pair of these nodes reaches the threshold: a cause shared by all of "
                                         "them (fabric, configuration or the threshold itself), not one node")
                return
        self.references([n for n in suspects if n not in good], good)
        good = self.good_nodes()
        for node in suspects:
            entry = self.convict(node, good) if node not in good else None
            if entry is not None:
                self.culprits.append(node)
                self.evidence[node] = entry
        culprits = set(self.culprits)
        # Leaves without a culprit: every node passes elsewhere, so the fault is between them.
        triples = []
        for leaf in leaves:
            if culprits & set(leaf):
                continue
            if len(leaf) == 2:
                self._name_pair(leaf)
            else:
                triples.append(leaf)
        self.pair_rounds([[a, b] for leaf in triples for i, a in enumerate(leaf) for b in leaf[i + 1:]])
        for leaf in triples:
            named = False
            for i, a in enumerate(leaf):
                for b in leaf[i + 1:]:
                    entry = self.known([a, b])
                    if entry is not None and not entry["passed"]:
                        self._name_pair([a, b])
                        named = True
            if not named:
                self.unresolve(leaf, "each pair of these three nodes reaches the threshold and the three together "
                                     "do not")

    def _name_pair(self, pair):
        pair = self.sort(pair)
        if any(p == pair for p in self.pairs):
            return
        self.pairs.append(pair)
        entry = self.known(pair)
        if entry is not None:
            self.evidence[",".join(pair)] = entry


def isolate(nodes, run_round, passes, first=None, max_failing_sets=DEFAULT_MAX_FAILING_SETS,
            max_tournament=DEFAULT_MAX_TOURNAMENT):
    """Search the node(s) or pair(s) behind a multi-node NCCL run that misses its threshold.

    ``run_round(sets)`` runs a list of disjoint node lists (each of two or more nodes), at once if it can, and
    returns one result per set, in order; ``passes(result)`` says whether a result reaches the threshold. ``first``
    is the result of the run across all ``nodes`` when the caller has it (it is not run again).

    Returns {runs: [{round, nodes, passed, result}], rounds (how many rounds ran), suspects (nodes of the failing
    leaves), culprits (nodes), pairs ([a, b] lists), unresolved ([{nodes, reason}]), evidence ({node or "a,b": the
    run that convicts it})}.
    """
    ordered = []
    for node in nodes or []:
        node = str(node)
        if node not in ordered:
            ordered.append(node)
    search = _Search(ordered, run_round, passes, max(1, int(max_failing_sets)), max(2, int(max_tournament)))
    out = {"runs": search.runs, "suspects": [], "culprits": search.culprits, "pairs": search.pairs,
           "unresolved": search.unresolved, "evidence": search.evidence}
    if len(ordered) < 2:
        search.unresolve(ordered, "fewer than two nodes: nothing to run across nodes")
        out["rounds"] = 0
        return out
    if first is not None:
        search.record(ordered, first, 0)
    else:
        search.run([ordered])
    if not search.passed(ordered):
        leaves = search.bisect(ordered)
        out["suspects"] = search.sort(set(n for leaf in leaves for n in leaf))
        if leaves:
            search.resolve(leaves)
    out["rounds"] = search.rounds
    return out
