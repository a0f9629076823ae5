#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: nccl_isolate
short_description: Name the node or node pair behind a multi-node NCCL run that misses its bus bandwidth
version_added: 1.0.0
description:
  - When an C(all_reduce_perf) run across many nodes misses its bus bandwidth threshold or fails, finds which
    node(s) or node pair(s) cause it, as the validation runbooks of the large clouds do, instead of reporting that
    the cluster is slow.
  - Bisection first. The failing node set is split into halves and both halves run at once (they are disjoint);
    a half that misses is split again, down to sets of two or three nodes. When both halves pass and the whole
    does not, halves of the two halves are paired across (the fault lies between them). One culprit among n
    nodes takes about log2(n) rounds.
  - Then pairs. Each node of a failing small set that passed nowhere runs with a node that passed (a
    reference), all such pairs at once; a node that misses with a good reference is a culprit (RV(culprits)). A
    small set whose nodes all pass elsewhere names its failing pair(s) (RV(pairs)). What cannot be narrowed
    down is returned in RV(unresolved) with the reason (many disjoint sets missing at once, or every part
    passing while the whole does not, both causes shared by many nodes).
  - Every run is C(srun -N <k> -w <nodes> --ntasks-per-node=1 --exclusive --time=<time_limit_minutes>
    --immediate=<immediate_seconds> --export=ALL,NCCL_ALGO=Ring <srun_extra_args> all_reduce_perf -b 8 -e
    <max_bytes> -f 2 -g <gpus_per_node> -c 1), the command of the validation's run across all nodes; at most
    O(max_concurrent) run at once. A run passes when it exits 0, reports no wrong data and its bus bandwidth at
    the largest message (out of place) reaches the threshold.
  - The same threshold holds for every node set of two or more nodes. nccl-tests' bus bandwidth is the
    algorithm bandwidth times 2(n-1)/n for all_reduce, which makes it independent of the number of ranks; with
    the Ring algorithm forced (C(NCCL_ALGO=Ring)) each node's NICs carry the same traffic per byte in a ring of
    two nodes as in a ring of all of them, so a subset is held to the figure of the whole cluster. A small
    subset has less latency and no more contention, so the comparison errs on the lenient side, and a subset that
    misses is slow. Tree, NVLS and CollNet are not comparable across sizes (Tree on two nodes can exceed the NIC
    line rate), which is why the algorithm is fixed. No set of one node is run (it measures NVLink, not the
    network).
  - Runs on a host with the Slurm client commands (the controller). The module never changes anything and
    always returns C(changed=false); finding a culprit does not fail it.
author:
  - ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
attributes:
  check_mode:
    support: partial
    details:
      - The runs load the GPUs and the fabric, so in check mode nothing is run; the module returns
        C(skipped=true), the threshold and the command of the first round it would run.
  diff_mode:
    support: none
    details:
      - Nothing is changed, so there is nothing to diff.
options:
  nodes:
    description:
      - The Slurm node names of the run that missed, two or more.
    type: list
    elements: str
    required: true
  min_busbw_gbps:
    description:
      - The bus bandwidth a run must reach, in GB/s.
      - Give this or O(thresholds).
    type: float
  thresholds:
    description:
      - The thresholds of P(clusterforge.gpu.validation_judge#filter); the module uses C(nccl_min_fraction)
        times C(nccl_multi_node_busbw_gbps) (defaults 0.9 and 385), exactly as the judge does for the run
        across all nodes.
      - Give this or O(min_busbw_gbps).
    type: dict
  all_nodes_rc:
    description:
      - Exit status of the run across all O(nodes) that missed, so that it is not run again. With
        O(all_nodes_stdout).
    type: int
  all_nodes_stdout:
    description:
      - What that run printed. Without it the module runs O(nodes) first; when that run passes, nothing else
        runs.
    type: str
  gpus_per_node:
    description: GPUs per node (C(all_reduce_perf -g)).
    type: int
    default: 8
  max_bytes:
    description: Largest message (C(all_reduce_perf -e); bytes, or a number with K, M, G or T).
    type: str
    default: 8G
  time_limit_minutes:
    description: Slurm time limit of each run (C(srun --time)); the module stops a run that takes 2 minutes longer.
    type: int
    default: 15
  immediate_seconds:
    description: How long each run waits for its nodes (C(srun --immediate)).
    type: int
    default: 120
  srun_extra_args:
    description: Extra srun arguments for every run (for example C(--mpi=pmix)).
    type: list
    elements: str
    default: []
  max_concurrent:
    description: The most runs at once (disjoint node sets; a round with more runs them in waves).
    type: int
    default: 16
  max_failing_sets:
    description:
      - When more disjoint node sets than this miss at once, the search stops and names them in RV(unresolved)
        (a cause shared by many nodes; searching on would run nearly every node set).
    type: int
    default: 8
  max_tournament:
    description:
      - When no run passed at all, the most suspect nodes that are tried in every pairing to find a reference;
        with more, the suspects are returned in RV(unresolved).
    type: int
    default: 16
  srun_path:
    description: Path of C(srun). Looked up on E(PATH) when not set.
    type: path
  all_reduce_perf:
    description: The nccl-tests program on the nodes, a name on their E(PATH) or a path.
    type: str
    default: all_reduce_perf
  progress_file:
    description:
      - Where the search says how far it is, for a run in the background (C(async)) polled with
        M(clusterforge.gpu.async_progress). Before each round it writes the NCCL runs done, how many passed, and the
        round now running; the file is removed when the module ends.
      - Its directory is opened without following a symbolic link, created root-owned 0700 when missing, and must be
        owned by root and writable by no one else (C(/run/clusterforge) for example); the module fails otherwise.
    type: path
notes:
  - Each run asks for whole nodes (C(--exclusive)); run it when the nodes are idle, as the validation does.
seealso:
  - name: nccl-tests performance notes
    description: How algorithm and bus bandwidth are computed.
    link: https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md
  - module: clusterforge.gpu.ib_write_bw
"""

EXAMPLES = r"""
- name: NCCL across every node
  ansible.builtin.command:
    argv: [srun, -N, "4", -w, "gpu[01-04]", --ntasks-per-node=1, --exclusive, --time=15, --immediate=120,
           "--export=ALL,NCCL_ALGO=Ring", all_reduce_perf, -b, "8", -e, 8G, -f, "2", -g, "8", -c, "1"]
  register: nccl_all
  changed_when: false
  failed_when: false

- name: Name the node or pair behind a miss
  clusterforge.gpu.nccl_isolate:
    nodes: [gpu01, gpu02, gpu03, gpu04]
    min_busbw_gbps: 346.5
    all_nodes_rc: "{{ nccl_all.rc }}"
    all_nodes_stdout: "{{ nccl_all.stdout }}"
  register: isolation

- name: Show the culprits
  ansible.builtin.debug:
    msg: "{{ isolation.culprits }} {{ isolation.pairs }} {{ isolation.unresolved }}"
"""

RETURN = r"""
needed:
  description: False when the run across all O(nodes) reaches the threshold (nothing else ran).
  returned: always
  type: bool
  sample: true
threshold_gbps:
  description: The bus bandwidth every run was held to, in GB/s.
  returned: always
  type: float
  sample: 346.5
runs:
  description:
    - Every run, in order, the run across all nodes first (round 0).
  returned: always
  type: list
  elements: dict
  contains:
    round:
      description: The round (runs of a round ran at once).
      type: int
    nodes:
      description: The node set.
      type: list
      elements: str
    passed:
      description: Whether the run reached the threshold.
      type: bool
    busbw_gbps:
      description: Out-of-place bus bandwidth of the largest message, in GB/s; null when none was printed.
      type: float
    rc:
      description: Exit status of srun; null when it timed out or could not start.
      type: int
    ok:
      description: False when the output reports wrong data or no result row.
      type: bool
    problems:
      description: What nccl-tests reported wrong, and how the run ended when it did not exit 0.
      type: list
      elements: str
    cmd:
      description: The command (null for a run given in O(all_nodes_stdout)).
      type: str
  sample:
    - {round: 0, nodes: [gpu01, gpu02, gpu03, gpu04], passed: false, busbw_gbps: 121.4, rc: 0, ok: true,
       problems: [], cmd: null}
    - {round: 1, nodes: [gpu01, gpu02], passed: true, busbw_gbps: 371.0, rc: 0, ok: true, problems: [],
       cmd: "srun -N 2 -w gpu01,gpu02 --ntasks-per-node=1 ..."}
rounds:
  description: How many rounds ran after the run across all nodes.
  returned: always
  type: int
  sample: 3
suspects:
  description: The nodes of the small node sets that missed, before the pairs with references cleared some.
  returned: always
  type: list
  elements: str
  sample: [gpu03, gpu04]
culprits:
  description: Nodes that miss the threshold with a node that passed elsewhere and pass nowhere themselves.
  returned: always
  type: list
  elements: str
  sample: [gpu04]
pairs:
  description: Node pairs that miss together although each node passes elsewhere (a link or route between them).
  returned: always
  type: list
  elements: list
  sample: [[gpu05, gpu06]]
unresolved:
  description: Node sets that could not be narrowed down, each C({nodes, reason}).
  returned: always
  type: list
  elements: dict
  sample: [{nodes: [gpu01, gpu02], reason: "no pair of these nodes reaches the threshold"}]
evidence:
  description:
    - For each culprit (by node name) and each pair (C(a,b)), the run that names it, as in RV(runs).
  returned: always
  type: dict
  sample: {gpu04: {round: 3, nodes: [gpu01, gpu04], passed: false, busbw_gbps: 96.2, rc: 0, ok: true,
                   problems: [], cmd: "srun -N 2 -w gpu01,gpu04 ..."}}
commands:
  description: In check mode, the commands of the first round that would run.
  returned: in check mode
  type: list
  elements: str
  sample: ["srun -N 2 -w gpu01,gpu02 --ntasks-per-node=1 --exclusive --time=15 ..."]
skipped:
  description: True in check mode, where nothing is run.
  returned: in check mode
  type: bool
  sample: true
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import C_LOCALE, find_tool, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils.fabric_rounds import run_concurrently
from ansible_collections.clusterforge.gpu.plugins.module_utils.nccl_bisect import isolate
from ansible_collections.clusterforge.gpu.plugins.module_utils.progress import ProgressFile
from ansible_collections.clusterforge.gpu.plugins.module_utils.safe_paths import UnsafeDirectory
from ansible_collections.clusterforge.gpu.plugins.module_utils.nccl_tests import (
    OVERRUN_SECONDS,
    all_reduce_argv,
    reaches,
    run_result,
    size_problem,
    srun_argv,
)
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_common import ValidationError
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_thresholds import _thresholds


# One threshold for every node set of two or more nodes. nccl-tests reports all_reduce's bus bandwidth as algbw x
# 2(n-1)/n, which takes the rank count out (nccl-tests doc/PERFORMANCE.md); with NCCL_ALGO=Ring forced, every
# node's NICs carry the same bytes per reduced byte in a ring of 2 nodes as in a ring of all of them, so the figure
# of the whole cluster (PRACTICE.md section 5: ~385 GB/s for 8x NDR) holds for a subset. A small subset has less
# latency and no more contention than the whole, so the comparison errs on the lenient side: a subset that misses
# is slow. Tree (which can beat the NIC rate on 2 nodes), NVLS and CollNet are not comparable across sizes, hence
# the fixed algorithm; a single node is never run (NVLink only, the single-node check's business).
def threshold_of(module, p):
    if p["min_busbw_gbps"] is not None:
        if p["min_busbw_gbps"] <= 0:
            module.fail_json(msg="min_busbw_gbps must be a positive number of GB/s, got %s" % p["min_busbw_gbps"])
        return float(p["min_busbw_gbps"])
    try:
        limits = _thresholds(p["thresholds"])
    except ValidationError as e:
        module.fail_json(msg="thresholds: %s" % e)
    # The judge's figure for the run across all nodes (validation_judge.py, _Judge.nccl).
    return round(limits["nccl_min_fraction"] * limits["nccl_multi_node_busbw_gbps"], 3)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nodes=dict(type="list", elements="str", required=True),
            min_busbw_gbps=dict(type="float"),
            thresholds=dict(type="dict"),
            all_nodes_rc=dict(type="int"),
            all_nodes_stdout=dict(type="str"),
            gpus_per_node=dict(type="int", default=8),
            max_bytes=dict(type="str", default="8G"),
            time_limit_minutes=dict(type="int", default=15),
            immediate_seconds=dict(type="int", default=120),
            srun_extra_args=dict(type="list", elements="str", default=[]),
            max_concurrent=dict(type="int", default=16),
            max_failing_sets=dict(type="int", default=8),
            max_tournament=dict(type="int", default=16),
            srun_path=dict(type="path"),
            all_reduce_perf=dict(type="str", default="all_reduce_perf"),
            progress_file=dict(type="path"),
        ),
        required_one_of=[("min_busbw_gbps", "thresholds")],
        mutually_exclusive=[("min_busbw_gbps", "thresholds")],
        required_together=[("all_nodes_rc", "all_nodes_stdout")],
        supports_check_mode=True,
    )
    p = module.params
    nodes = []
    for node in p["nodes"]:
        node = node.strip()
        if not node or "," in node:
            module.fail_json(msg="nodes: each entry must be one node name, got %r" % node)
        if node not in nodes:
            nodes.append(node)
    if len(nodes) < 2:
        module.fail_json(msg="nodes: a run across nodes needs two or more, got %s" % nodes)
    for name in ("gpus_per_node", "time_limit_minutes", "immediate_seconds", "max_concurrent", "max_failing_sets",
                 "max_tournament"):
        if p[name] <= 0:
            module.fail_json(msg="%s must be a positive number, got %s" % (name, p[name]))
    if size_problem(p["max_bytes"], "max_bytes"):
        module.fail_json(msg=size_problem(p["max_bytes"], "max_bytes"))
    threshold = threshold_of(module, p)
    srun = find_tool(module, "srun", p["srun_path"], option="srun_path")
    command = all_reduce_argv(p["all_reduce_perf"], p["gpus_per_node"], p["max_bytes"])

    def argv_of(node_set):
        return srun_argv(srun, node_set, p["time_limit_minutes"], p["immediate_seconds"], "Ring",
                         p["srun_extra_args"], command)

    empty = dict(changed=False, threshold_gbps=threshold, runs=[], rounds=0, suspects=[], culprits=[], pairs=[],
                 unresolved=[], evidence={})
    first = None
    if p["all_nodes_stdout"] is not None:
        first = run_result(p["all_nodes_rc"], p["all_nodes_stdout"])

    def passes(result):
        return reaches(result, threshold)

    if first is not None and passes(first):
        empty["runs"] = [{"round": 0, "nodes": nodes, "passed": True, "busbw_gbps": first["busbw_gbps"],
                          "rc": first["rc"], "ok": first["ok"], "problems": first["problems"], "cmd": None}]
        module.exit_json(needed=False, msg="the run across all %d nodes reaches %s GB/s: nothing to isolate"
                         % (len(nodes), threshold), **empty)
    if module.check_mode:
        half = len(nodes) // 2
        cmds = [quote(argv_of(nodes[:half])), quote(argv_of(nodes[half:]))] if len(nodes) > 3 else \
            [quote(argv_of(nodes))]
        module.exit_json(needed=True, skipped=True, commands=cmds,
                         msg="check mode: no NCCL run (they load the GPUs and the fabric)", **empty)

    env = dict(os.environ)
    env.update(C_LOCALE)
    timeout = p["time_limit_minutes"] * 60 + p["immediate_seconds"] + OVERRUN_SECONDS

    try:
        progress = ProgressFile(p["progress_file"])
    except (UnsafeDirectory, OSError) as e:
        module.fail_json(msg="progress_file: %s" % e)
    done = {"rounds": 0, "runs": 0, "passed": 0}

    def run_round(node_sets):
        progress.write("NCCL runs done: %d (%d passed) in %d rounds; round %d running: %d run%s of %s nodes"
                       % (done["runs"], done["passed"], done["rounds"], done["rounds"] + 1, len(node_sets),
                          "" if len(node_sets) == 1 else "s",
                          "/".join(sorted(set(str(len(s)) for s in node_sets), key=int))))
        runs = run_concurrently([argv_of(s) for s in node_sets], timeout, max_concurrent=p["max_concurrent"], env=env)
        results = [run_result(r["rc"], r["stdout"], quote(r["argv"]), r["timed_out"], r["stderr"], timeout)
                   for r in runs]
        done["rounds"] += 1
        done["runs"] += len(results)
        done["passed"] += sum(1 for r in results if passes(r))
        return results

    try:
        found = isolate(nodes, run_round, passes, first=first, max_failing_sets=p["max_failing_sets"],
                        max_tournament=p["max_tournament"])
    finally:
        progress.close()

    def flat(entry):
        out = {"round": entry["round"], "nodes": entry["nodes"], "passed": entry["passed"]}
        out.update(entry["result"])
        return out

    result = dict(empty)
    result.update(needed=True, runs=[flat(e) for e in found["runs"]], rounds=found["rounds"],
                  suspects=found["suspects"], culprits=found["culprits"], pairs=found["pairs"],
                  unresolved=found["unresolved"],
                  evidence=dict((k, flat(v)) for k, v in found["evidence"].items()))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
