#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nccl_tests
short_description: Run nccl-tests' all_reduce_perf on a node or across nodes and read its bus bandwidth
version_added: "1.0.0"
description:
  - Runs C(all_reduce_perf -b <min_bytes> -e <max_bytes> -f 2 -g <gpus> -c 1) across the GPUs of this node, or,
    with O(nodes), through C(srun -N <k> -w <nodes> --ntasks-per-node=1 --exclusive --time=<minutes>
    --immediate=<immediate_seconds> --export=ALL,NCCL_ALGO=<algorithm> <srun_extra_args>) across those nodes, one
    task per node. The same command line as M(clusterforge.gpu.nccl_isolate), built by the same function.
  - Returns the parsed output (RV(result), the filter C(clusterforge.gpu.nccl_tests_results)'s form, which the
    validation judge reads) and the run as judged (RV(busbw_gbps), RV(ok), RV(problems)). C(-c 1) checks the data,
    and wrong elements make RV(ok) false.
  - A run that does not start, exits non-zero, reports wrong data or passes its time limit is a measurement, not a
    module failure (RV(problems) says what happened), unless O(min_busbw_gbps) is set. Then the task fails unless
    the run exits 0, reports right data and reaches that bus bandwidth, with one message that says why.
  - Every run has a time limit. On a node the process group is killed after O(timeout) seconds. Through srun, Slurm's
    C(--time) is O(timeout) in whole minutes (rounded up), and the run is stopped when srun has not returned
    O(immediate_seconds) plus two minutes after that.
  - The run loads the GPUs (and with O(nodes) the fabric); check mode runs nothing and returns the command.
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
attributes:
  check_mode:
    support: full
    details:
      - Nothing is run; RV(cmd) is the command that would run.
  diff_mode:
    support: none
options:
  gpus:
    description: GPUs per process (C(all_reduce_perf -g)); the GPUs of the node.
    type: int
    required: true
  nodes:
    description:
      - Run across these nodes through srun (two or more Slurm node names). Empty, run on this node.
    type: list
    elements: str
    default: []
  min_bytes:
    description: Smallest message (C(-b); bytes, or a number with K, M, G or T).
    type: str
    default: "8"
  max_bytes:
    description: Largest message (C(-e)); the bus bandwidth reported is that of this size.
    type: str
    default: 8G
  algorithm:
    description:
      - C(NCCL_ALGO) for the run (C(Ring) makes runs of different node counts comparable). Null leaves NCCL's choice.
    type: str
    default: Ring
  timeout:
    description: Time limit of the run in seconds.
    type: int
    default: 900
  immediate_seconds:
    description: With O(nodes), how long srun waits for the nodes (C(srun --immediate)).
    type: int
    default: 120
  srun_extra_args:
    description: With O(nodes), extra srun arguments (for example C(--mpi=pmix)).
    type: list
    elements: str
    default: []
  min_busbw_gbps:
    description:
      - Fail the task unless the run exits 0, reports right data and its bus bandwidth reaches this many GB/s.
        Not set, the result is returned for a judge to read.
    type: float
  srun_path:
    description: Path of C(srun). Looked up on E(PATH) when not set.
    type: path
  all_reduce_perf:
    description: The all_reduce_perf program (a name looked up on E(PATH) on the node that runs it, or a path).
    type: str
    default: all_reduce_perf
seealso:
  - module: clusterforge.gpu.nccl_isolate
"""

EXAMPLES = r"""
- name: NCCL all_reduce_perf across the node's 8 GPUs, judged later
  clusterforge.gpu.nccl_tests:
    gpus: 8
    max_bytes: 8G
  register: __nccl

- name: The same across two nodes through srun
  clusterforge.gpu.nccl_tests:
    gpus: 8
    nodes: [gpu01, gpu02]
    srun_extra_args: [--mpi=pmix]
  run_once: true

- name: A rolling change's gate (fails below 450 GB/s)
  clusterforge.gpu.nccl_tests:
    gpus: 8
    min_bytes: 1G
    min_busbw_gbps: 450
"""

RETURN = r"""
cmd:
  description: The command line that ran (or would run, in check mode).
  returned: always
  type: str
  sample: "all_reduce_perf -b 8 -e 8G -f 2 -g 8 -c 1"
nodes:
  description: The nodes of the run; null when it ran on this node.
  returned: always
  type: list
  elements: str
rc:
  description: Exit status; null when it did not start or was stopped at its time limit.
  returned: when it ran
  type: int
timed_out:
  description: Whether the run was stopped at its time limit.
  returned: when it ran
  type: bool
stdout:
  description: What all_reduce_perf (or srun) printed.
  returned: when it ran
  type: str
stderr:
  description: The last 4000 characters of its standard error.
  returned: when it ran
  type: str
result:
  description:
    - The parsed output, as the filter C(clusterforge.gpu.nccl_tests_results) returns it (rows, peak bus bandwidth,
      wrong elements), with RV(ok) and RV(problems) of the run in its C(ok) and C(problems) (a non-zero exit status
      or the time limit makes C(ok) false). The form the validation judge reads.
  returned: when it ran
  type: dict
busbw_gbps:
  description: The out-of-place bus bandwidth of the largest message in GB/s; null when there was no result row.
  returned: when it ran
  type: float
  sample: 482.3
ok:
  description: Whether the run exited 0 and its output has result rows, no wrong data and a complete summary.
  returned: when it ran
  type: bool
problems:
  description: What went wrong (exit status, stopped, wrong elements, no rows); empty for a clean run.
  returned: when it ran
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils import _runner
from ansible_collections.clusterforge.gpu.plugins.module_utils.nccl_tests import (
    OVERRUN_SECONDS,
    algorithm_problem,
    all_reduce_argv,
    run_result,
    shortfall,
    size_problem,
    srun_argv,
)
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_parsers import nccl_tests_results


def _nodes(module, names):
    nodes = []
    for node in names:
        node = (node or "").strip()
        if not node or "," in node or " " in node:
            module.fail_json(msg="nodes: each entry must be one node name, got %r" % node)
        if node not in nodes:
            nodes.append(node)
    if len(nodes) == 1:
        module.fail_json(msg="nodes: a run across nodes needs two or more (leave nodes empty to run on this node), "
                             "got %s" % nodes)
    return nodes


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type="int", required=True),
            nodes=dict(type="list", elements="str", default=[]),
            min_bytes=dict(type="str", default="8"),
            max_bytes=dict(type="str", default="8G"),
            algorithm=dict(type="str", default="Ring"),
            timeout=dict(type="int", default=900),
            immediate_seconds=dict(type="int", default=120),
            srun_extra_args=dict(type="list", elements="str", default=[]),
            min_busbw_gbps=dict(type="float"),
            srun_path=dict(type="path"),
            all_reduce_perf=dict(type="str", default="all_reduce_perf"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    for name in ("gpus", "timeout", "immediate_seconds"):
        if p[name] < 1:
            module.fail_json(msg="%s must be a positive number, got %s" % (name, p[name]))
    for name in ("min_bytes", "max_bytes"):
        if size_problem(p[name], name):
            module.fail_json(msg=size_problem(p[name], name))
    algorithm = p["algorithm"] or None
    if algorithm_problem(algorithm):
        module.fail_json(msg=algorithm_problem(algorithm))
    if p["min_busbw_gbps"] is not None and p["min_busbw_gbps"] <= 0:
        module.fail_json(msg="min_busbw_gbps must be a positive number of GB/s, got %s" % p["min_busbw_gbps"])
    nodes = _nodes(module, p["nodes"])

    env = dict(_runner.C_LOCALE)
    if nodes:
        srun = _runner.find_tool(module, "srun", p["srun_path"], option="srun_path")
        command = all_reduce_argv(p["all_reduce_perf"], p["gpus"], p["max_bytes"], p["min_bytes"])
        minutes = (p["timeout"] + 59) // 60
        argv = srun_argv(srun, nodes, minutes, p["immediate_seconds"], algorithm, p["srun_extra_args"], command)
        limit = minutes * 60 + p["immediate_seconds"] + OVERRUN_SECONDS
    else:
        prog = p["all_reduce_perf"]
        binary = _runner.find_tool(module, os.path.basename(prog), prog if "/" in prog else None,
                                   option="all_reduce_perf")
        argv = all_reduce_argv(binary, p["gpus"], p["max_bytes"], p["min_bytes"])
        limit = p["timeout"]
        if algorithm:
            env["NCCL_ALGO"] = algorithm
    cmd = _runner.quote(argv)
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, cmd=cmd, nodes=nodes or None,
                         msg="check mode: no NCCL run (it loads the GPUs%s)" % (" and the fabric" if nodes else ""))
    timed_out = False
    try:
        rc, out, err = _runner.execute(module, argv, limit, environ_update=env)
    except _runner.ToolTimeout:
        rc, out, err, timed_out = None, "", "", True
    judged = run_result(rc, out, cmd, timed_out, err, limit)
    # The parsed output, with the run's verdict (exit status and time limit included) in its ok and problems: the
    # form the validation judge reads.
    parsed = nccl_tests_results(out or "")
    parsed.update(ok=judged["ok"] and rc == 0, problems=judged["problems"])
    result = dict(changed=False, cmd=cmd, nodes=nodes or None, rc=rc, timed_out=timed_out, stdout=out,
                  stderr=(err or "")[-4000:], result=parsed, busbw_gbps=judged["busbw_gbps"],
                  ok=parsed["ok"], problems=judged["problems"])
    if p["min_busbw_gbps"] is not None:
        why = shortfall(judged, p["min_busbw_gbps"])
        if why:
            module.fail_json(msg="all_reduce_perf on %s: %s" % (",".join(nodes) if nodes else "this node", why),
                             **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
