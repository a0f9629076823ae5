#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: ib_write_bw
short_description: Plan and run ib_write_bw (perftest) between node pairs, every HCA at once
version_added: 1.0.0
description:
  - Tests InfiniBand RDMA write bandwidth between pairs of nodes with perftest's C(ib_write_bw), in three modes.
  - O(mode=plan) runs nothing. It returns a ring of the nodes in O(nodes) (node i with node i+1) as rounds of
    disjoint node pairs (2 rounds for an even number of nodes, 3 for an odd number, rounds larger than
    O(max_concurrent_pairs) cut into chunks), every HCA of O(hcas) in each pair on its own TCP port
    (O(base_port) plus the HCA's index), and each node's part in each round (RV(schedule)).
  - O(mode=server) starts one C(ib_write_bw) server per entry of O(tests) at once, each on its HCA and port, and
    waits until every one has served its client or O(timeout) has passed. Run it with C(async) and C(poll=0)
    before the clients of the round start.
  - O(mode=client) runs one C(ib_write_bw) client per entry of O(tests) at once against O(peer), retrying for
    O(connect_timeout) seconds while the server does not listen yet, and parses each output with
    P(clusterforge.gpu.perftest_results#filter)'s parser (in RV(tests)). It fails when a test fails (naming
    the HCAs), so register the result and judge it.
  - O(mode=round) runs a whole round of the plan (one entry of RV(rounds), in O(round)) as one Slurm job step,
    from a host with Slurm's client commands (the controller); C(srun) starts O(node_program) on every node of the
    round at once (C(--ntasks-per-node=1 --exclusive), waiting at most O(immediate_seconds) for the nodes), each
    node runs its side as O(mode=server) or O(mode=client) would, and prints its results; the clients' outputs are
    parsed here. The controller's cost of a round is one task and one C(srun), whatever the number of nodes; this
    is how playbooks/validate.yml runs the rounds by default (C(validate_ib_write_bw_launcher=slurm)). The node
    program is installed by the clusterforge.gpu.slurm_compute role. It fails when a test fails (naming the pair
    and HCA), so register the result and judge it.
  - With O(mode=server) and O(mode=client) every node does its part of a round in its own play, so the pairs of a
    round run at the same time, in waves of Ansible's C(forks) (C(validate_ib_write_bw_launcher=ansible)).
  - The module never changes anything on the node and always returns C(changed=false).
author:
  - ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
attributes:
  check_mode:
    support: partial
    details:
      - O(mode=plan) runs in check mode (it runs nothing anyway). In the other modes the benchmark loads the
        fabric, so in check mode nothing is run; the module returns C(skipped=true) and the commands it would
        have run. A missing C(ib_write_bw) still fails.
  diff_mode:
    support: none
    details:
      - Nothing is changed, so there is nothing to diff.
options:
  mode:
    description:
      - C(plan) to compute the rounds, C(server) or C(client) to run one node's side of a round, C(round) to run
        a whole round through C(srun).
    type: str
    choices: [plan, server, client, round]
    required: true
  nodes:
    description:
      - With O(mode=plan), the nodes of the ring, in ring order (each is paired with the next; the last with the
        first). Two nodes give one pair, fewer none.
    type: list
    elements: str
  hcas:
    description:
      - With O(mode=plan), the HCAs tested in every pair (the same name on both nodes).
    type: list
    elements: str
  max_concurrent_pairs:
    description:
      - With O(mode=plan), the most node pairs in one round; a larger round is cut into chunks that run one
        after the other. 0 sets no bound.
    type: int
    default: 0
  base_port:
    description:
      - With O(mode=plan), the TCP port of the first HCA of O(hcas) (C(ib_write_bw -p)); the next HCAs take
        the next ports.
    type: int
    default: 18515
  tests:
    description:
      - With O(mode=server) or O(mode=client), what this node runs at once, one C(ib_write_bw) per entry (a
        round's entries for this node in RV(schedule)).
    type: list
    elements: dict
    suboptions:
      hca:
        description: HCA of this node (C(ib_write_bw -d)).
        type: str
        required: true
      port:
        description: TCP port of the test (C(ib_write_bw -p)); server and client of a test use the same.
        type: int
        required: true
  peer:
    description:
      - With O(mode=client), the address (or host name) of the server node, as the client reaches it.
    type: str
  size_bytes:
    description: Message size (C(ib_write_bw -s)).
    type: int
    default: 1048576
  iterations:
    description: Iterations of each test (C(ib_write_bw -n)).
    type: int
    default: 5000
  timeout:
    description:
      - Seconds each C(ib_write_bw) may run, counted from its first start (a server waits this long for its
        client). A test still running then is stopped (SIGTERM, then SIGKILL) and fails.
    type: int
    default: 120
  connect_timeout:
    description:
      - With O(mode=client), seconds during which a client whose server does not listen yet is started again
        (every second), within O(timeout).
    type: int
    default: 30
  extra_args:
    description:
      - More C(ib_write_bw) arguments for every test, server and client alike (for example C(-x 3) for a
        RoCE GID index, C(-F) or C(--use_cuda=0)).
    type: list
    elements: str
    default: []
  ib_write_bw_path:
    description:
      - Path of the C(ib_write_bw) binary. Looked up on E(PATH) when not set.
    type: path
  round:
    description:
      - With O(mode=round), the tests of one round, as one entry of RV(rounds) gives them. No node may be in two
        node pairs of a round.
    type: list
    elements: dict
    suboptions:
      client:
        description: The client node (its Slurm node name).
        type: str
        required: true
      server:
        description: The server node (its Slurm node name).
        type: str
        required: true
      hca:
        description: The HCA, on both nodes.
        type: str
        required: true
      port:
        description: The TCP port of the test.
        type: int
        required: true
  addresses:
    description:
      - With O(mode=round), the address by which clients reach each server node (its fabric address); a node
        missing here is reached by its name.
    type: dict
    default: {}
  node_program:
    description:
      - With O(mode=round), the path of the node program on the nodes, installed by the
        clusterforge.gpu.slurm_compute role.
    type: str
    default: /usr/libexec/clusterforge/clusterforge-ib-write-bw-round
  srun_path:
    description:
      - With O(mode=round), the path of C(srun). Looked up on E(PATH) when not set.
    type: path
  srun_extra_args:
    description:
      - With O(mode=round), more C(srun) arguments (for example C(--partition=gpu) or C(--reservation=...)).
    type: list
    elements: str
    default: []
  time_limit_minutes:
    description:
      - With O(mode=round), the job step's time limit (C(srun --time)); 0 derives it from O(timeout) and
        O(connect_timeout) plus a minute.
    type: int
    default: 0
  immediate_seconds:
    description:
      - With O(mode=round), how long C(srun) waits for the round's nodes to be free (C(srun --immediate)).
    type: int
    default: 120
notes:
  - Server and client must be given the same O(size_bytes), O(iterations) and O(extra_args); perftest exchanges
    its parameters and refuses a mismatch.
  - A round's servers must be started before its clients; O(connect_timeout) covers the seconds between.
seealso:
  - name: perftest
    description: The ib_write_bw tool and its options.
    link: https://github.com/linux-rdma/perftest
  - module: clusterforge.gpu.nccl_isolate
"""

EXAMPLES = r"""
- name: Plan the rounds once
  clusterforge.gpu.ib_write_bw:
    mode: plan
    nodes: [gpu01, gpu02, gpu03]
    hcas: [mlx5_0, mlx5_1]
    max_concurrent_pairs: 64
  register: plan
  run_once: true

- name: Servers of the first round (each node where it serves)
  clusterforge.gpu.ib_write_bw:
    mode: server
    tests: "{{ plan.schedule[inventory_hostname][0].tests }}"
    timeout: 120
  async: 180
  poll: 0
  register: server_job
  when: (plan.schedule[inventory_hostname][0].side | default('')) == 'server'

- name: Clients of the first round
  clusterforge.gpu.ib_write_bw:
    mode: client
    peer: "{{ plan.schedule[inventory_hostname][0].peer }}"
    tests: "{{ plan.schedule[inventory_hostname][0].tests }}"
    timeout: 120
  register: client
  failed_when: false
  when: (plan.schedule[inventory_hostname][0].side | default('')) == 'client'

- name: Or, from the controller, every round as one srun (all pairs and HCAs of a round at once)
  clusterforge.gpu.ib_write_bw:
    mode: round
    round: "{{ item }}"
    addresses: {gpu01: 10.78.0.21, gpu02: 10.78.0.22, gpu03: 10.78.0.23}
    timeout: 120
  loop: "{{ plan.rounds }}"
  register: rounds
  failed_when: false

- name: Show the bandwidth of each HCA
  ansible.builtin.debug:
    msg: "{{ client.tests | map(attribute='bw_peak_gbits') | list }}"
  when: client is not skipped
"""

RETURN = r"""
rounds:
  description:
    - With O(mode=plan), the rounds in order, each a list of tests C({client, server, hca, port}); no node is in
      two node pairs of a round, and every ring pair appears once per HCA.
  returned: with mode=plan
  type: list
  elements: list
  sample: [[{client: gpu01, server: gpu02, hca: mlx5_0, port: 18515}], [{client: gpu02, server: gpu03,
           hca: mlx5_0, port: 18515}], [{client: gpu03, server: gpu01, hca: mlx5_0, port: 18515}]]
schedule:
  description:
    - With O(mode=plan), per node of O(nodes), one entry per round, null where the node has no part, else
      C({side, peer, tests}) with C(side) C(server) or C(client), C(peer) the other node and C(tests) the
      C({hca, port}) list to pass as O(tests).
  returned: with mode=plan
  type: dict
  sample: {gpu01: [{side: client, peer: gpu02, tests: [{hca: mlx5_0, port: 18515}]}, null,
                   {side: server, peer: gpu03, tests: [{hca: mlx5_0, port: 18515}]}]}
node_pairs:
  description: With O(mode=plan), the number of node pairs of the ring.
  returned: with mode=plan
  type: int
  sample: 3
tests:
  description:
    - With O(mode=server) or O(mode=client), one entry per entry of O(tests), in order.
    - With O(mode=round), one entry per test of O(round), in order, each the client's run (where the client's node
      printed no result, C(rc) is null and C(msg) says why).
  returned: with mode=server, mode=client or mode=round
  type: list
  elements: dict
  contains:
    client:
      description: With O(mode=round), the client node.
      type: str
    server:
      description: With O(mode=round), the server node.
      type: str
    msg:
      description: With O(mode=round), why the test failed; null when it passed.
      type: str
    hca:
      description: The HCA.
      type: str
    port:
      description: The TCP port.
      type: int
    cmd:
      description: The command run (in check mode, the one that would run).
      type: str
    rc:
      description: Exit status; null when the test timed out, could not start or did not run (check mode).
      type: int
    timed_out:
      description: True when the test was stopped after O(timeout) seconds.
      type: bool
    attempts:
      description: How many times the test was started (a client retries while its server does not listen).
      type: int
    seconds:
      description: Seconds from the first start to the end.
      type: float
    result:
      description:
        - With O(mode=client), the parsed output (P(clusterforge.gpu.perftest_results#filter) output, with
          C(rows), C(bw_peak_gbits) and C(ok)); null otherwise.
      type: dict
    bw_peak_gbits:
      description: With O(mode=client), the BW average of the largest message, in Gb/s; null when none.
      type: float
    stderr:
      description: The last lines of what the test printed on stderr.
      type: str
  sample:
    - {hca: mlx5_0, port: 18515, cmd: "/usr/bin/ib_write_bw -d mlx5_0 -p 18515 --report_gbits -s 1048576 -n 5000
       10.2.0.22", rc: 0, timed_out: false, attempts: 1, seconds: 3.1, bw_peak_gbits: 388.2,
       result: {ok: true, bw_peak_gbits: 388.2}, stderr: ""}
cmd:
  description: With O(mode=round), the C(srun) command (the round's spec, its last argument, left out).
  returned: with mode=round
  type: str
  sample: "/usr/bin/srun -N 2 -w gpu01,gpu02 --ntasks-per-node=1 --exclusive --time=4 --immediate=120
           /usr/libexec/clusterforge/clusterforge-ib-write-bw-round '<round spec>'"
rc:
  description: With O(mode=round), the exit status of C(srun); null in check mode or when it did not end in time.
  returned: with mode=round
  type: int
  sample: 0
nodes_reported:
  description: With O(mode=round), the nodes whose program printed a result.
  returned: with mode=round
  type: list
  elements: str
  sample: [gpu01, gpu02]
skipped:
  description: True in check mode with O(mode=server), O(mode=client) or O(mode=round), where nothing is run.
  returned: in check mode
  type: bool
  sample: true
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import C_LOCALE, find_tool, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils.fabric_rounds import (
    PlanError,
    ib_write_bw_argv,
    node_schedule,
    parse_result_lines,
    ring_edges,
    ring_rounds,
    round_spec,
    run_concurrently,
    run_side as run_node_side,
    spec_nodes,
)
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_parsers import perftest_results

# How long srun may wait for the round's nodes (--immediate), and the seconds it gets beyond the tests' own limit.
SRUN_IMMEDIATE_SECONDS = 120
SRUN_GRACE_SECONDS = 60


def _stderr_tail(text, lines=20):
    return "\n".join((text or "").strip().splitlines()[-lines:])


def plan(module, p):
    for name in ("nodes", "hcas"):
        if p[name] is None:
            module.fail_json(msg="mode=plan needs %s" % name)
    if p["max_concurrent_pairs"] < 0:
        module.fail_json(msg="max_concurrent_pairs must be 0 (no bound) or a positive number of node pairs, got %s"
                         % p["max_concurrent_pairs"])
    try:
        rounds = ring_rounds(p["nodes"], p["hcas"], p["max_concurrent_pairs"] or None, p["base_port"])
        result = dict(changed=False, rounds=rounds, schedule=node_schedule(rounds, p["nodes"]),
                      node_pairs=len(ring_edges(p["nodes"])))
    except PlanError as e:
        module.fail_json(msg="cannot plan ib_write_bw: %s" % e)
    module.exit_json(**result)


def run_side(module, p):
    side = p["mode"]
    tests = p["tests"]
    if not tests:
        module.fail_json(msg="mode=%s needs tests (a list of {hca, port})" % side)
    if side == "client" and not p["peer"]:
        module.fail_json(msg="mode=client needs peer (the server node's address)")
    for name in ("timeout", "size_bytes", "iterations"):
        if p[name] <= 0:
            module.fail_json(msg="%s must be a positive number, got %s" % (name, p[name]))
    ports = [t["port"] for t in tests]
    if len(set(ports)) != len(ports) or any(not 0 < port < 65536 for port in ports):
        module.fail_json(msg="tests: each test needs its own TCP port between 1 and 65535, got %s" % ports)
    tool = find_tool(module, "ib_write_bw", p["ib_write_bw_path"], option="ib_write_bw_path")
    commands = [ib_write_bw_argv(tool, side, test, p["peer"], p["size_bytes"], p["iterations"], p["extra_args"])
                for test in tests]
    if module.check_mode:
        module.exit_json(changed=False, skipped=True,
                         msg="check mode: ib_write_bw was not run (the benchmark loads the fabric)",
                         tests=[{"hca": t["hca"], "port": t["port"], "cmd": quote(argv), "rc": None, "timed_out": False,
                                 "attempts": 0, "seconds": 0.0, "result": None, "bw_peak_gbits": None, "stderr": ""}
                                for t, argv in zip(tests, commands)])

    env = dict(os.environ)
    env.update(C_LOCALE)
    runs = run_node_side(commands, side, p["timeout"], p["connect_timeout"], env=env)
    out = []
    problems = []
    for test, run in zip(tests, runs):
        entry = {"hca": test["hca"], "port": test["port"], "cmd": quote(run["argv"]), "rc": run["rc"],
                 "timed_out": run["timed_out"], "attempts": run["attempts"], "seconds": run["seconds"],
                 "result": None, "bw_peak_gbits": None, "stderr": _stderr_tail(run["stderr"])}
        if side == "client":
            entry["result"] = perftest_results(run["stdout"])
            entry["bw_peak_gbits"] = entry["result"].get("bw_peak_gbits")
        if run["timed_out"]:
            problems.append("%s: no result within %s s" % (test["hca"], p["timeout"]))
        elif run["rc"] != 0:
            problems.append("%s: exit status %s%s" % (test["hca"], run["rc"], ": %s" % entry["stderr"].splitlines()[-1]
                                                      if entry["stderr"] else ""))
        elif side == "client" and entry["bw_peak_gbits"] is None:
            problems.append("%s: no bandwidth result in the output" % test["hca"])
        out.append(entry)
    if problems:
        module.fail_json(msg="ib_write_bw %s%s failed: %s" % (side, " to %s" % p["peer"] if side == "client" else "",
                                                              "; ".join(problems)), changed=False, tests=out)
    module.exit_json(changed=False, tests=out)


def _last_line(text):
    lines = (text or "").strip().splitlines()
    return lines[-1].strip() if lines else ""


def run_round(module, p):
    """One round as one Slurm job step: srun starts the node program on every node of the round at once; each
    prints its side's result, and each client's output is parsed here."""
    tests = p["round"]
    if not tests:
        module.fail_json(msg="mode=round needs round (a list of {client, server, hca, port})")
    for name in ("timeout", "size_bytes", "iterations", "immediate_seconds"):
        if p[name] <= 0:
            module.fail_json(msg="%s must be a positive number, got %s" % (name, p[name]))
    try:
        spec = round_spec(tests, p["addresses"], p["size_bytes"], p["iterations"], p["timeout"],
                          p["connect_timeout"], p["extra_args"])
    except (PlanError, KeyError, TypeError, ValueError) as e:
        module.fail_json(msg="round: %s" % e)
    nodes = spec_nodes(spec)
    # Slurm's --time is in minutes: the tests' own limit, the clients' connection retries and a minute to start.
    minutes = p["time_limit_minutes"] or (p["timeout"] + p["connect_timeout"] + 59) // 60 + 1
    srun = find_tool(module, "srun", p["srun_path"], option="srun_path")
    argv = ([srun, "-N", str(len(nodes)), "-w", ",".join(nodes), "--ntasks-per-node=1", "--exclusive",
             "--time=%d" % minutes, "--immediate=%d" % p["immediate_seconds"]] + list(p["srun_extra_args"])
            + [p["node_program"], json.dumps(spec, separators=(",", ":"), sort_keys=True)])
    cmd = quote(argv[:-1]) + " '<round spec>'"
    if module.check_mode:
        module.exit_json(changed=False, skipped=True, cmd=cmd, rc=None,
                         msg="check mode: ib_write_bw was not run (the benchmark loads the fabric)",
                         tests=[dict(test, cmd=None, rc=None, timed_out=False, attempts=0, seconds=0.0, result=None,
                                     bw_peak_gbits=None, stderr="", msg=None) for test in tests])
    env = dict(os.environ)
    env.update(C_LOCALE)
    run = run_concurrently([argv], p["immediate_seconds"] + p["timeout"] + SRUN_GRACE_SECONDS, env=env)[0]
    results = parse_result_lines(run["stdout"])
    srun_problem = ("srun %s: %s" % ("did not end within its limit" if run["timed_out"] else "exit %s" % run["rc"],
                                     _last_line(run["stderr"]) or "no error printed"))
    out = []
    problems = []
    for test in tests:
        client, server = str(test["client"]), str(test["server"])
        mine = [t for t in (results.get(client) or {}).get("tests", [])
                if t.get("hca") == test["hca"] and int(t.get("port", -1)) == int(test["port"])]
        entry = {"client": client, "server": server, "hca": test["hca"], "port": int(test["port"]), "cmd": None,
                 "rc": None, "timed_out": False, "attempts": 0, "seconds": 0.0, "result": None,
                 "bw_peak_gbits": None, "stderr": "", "msg": None}
        if not mine:
            # The node program names its node on each line it writes to stderr (a refused spec, no part): its own
            # last word, where it wrote one, says more than srun's.
            own = [line.strip() for line in (run["stderr"] or "").splitlines() if line.startswith(client + ": ")]
            entry["msg"] = "no result from %s (%s)" % (client, own[-1] if own else srun_problem)
        else:
            ran = mine[0]
            entry.update(cmd=ran.get("cmd"), rc=ran.get("rc"), timed_out=bool(ran.get("timed_out")),
                         attempts=ran.get("attempts", 0), seconds=ran.get("seconds", 0.0),
                         stderr=_stderr_tail(ran.get("stderr")))
            entry["result"] = perftest_results(ran.get("stdout") or "")
            entry["bw_peak_gbits"] = entry["result"].get("bw_peak_gbits")
            if entry["timed_out"]:
                entry["msg"] = "no result within %s s" % p["timeout"]
            elif entry["rc"] != 0:
                entry["msg"] = _last_line(entry["stderr"]) or "exit status %s" % entry["rc"]
            elif entry["bw_peak_gbits"] is None:
                entry["msg"] = "no bandwidth result in the output"
        if entry["msg"]:
            problems.append("%s -> %s %s: %s" % (client, server, test["hca"], entry["msg"]))
        out.append(entry)
    result = dict(changed=False, cmd=cmd, rc=run["rc"], tests=out, stderr=_stderr_tail(run["stderr"]),
                  nodes_reported=sorted(results))
    if problems:
        module.fail_json(msg="ib_write_bw round failed: %s" % "; ".join(problems), **result)
    module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["plan", "server", "client", "round"], required=True),
            nodes=dict(type="list", elements="str"),
            hcas=dict(type="list", elements="str"),
            max_concurrent_pairs=dict(type="int", default=0),
            base_port=dict(type="int", default=18515),
            tests=dict(type="list", elements="dict", options=dict(
                hca=dict(type="str", required=True),
                port=dict(type="int", required=True),
            )),
            peer=dict(type="str"),
            size_bytes=dict(type="int", default=1048576),
            iterations=dict(type="int", default=5000),
            timeout=dict(type="int", default=120),
            connect_timeout=dict(type="int", default=30),
            extra_args=dict(type="list", elements="str", default=[]),
            ib_write_bw_path=dict(type="path"),
            round=dict(type="list", elements="dict", options=dict(
                client=dict(type="str", required=True),
                server=dict(type="str", required=True),
                hca=dict(type="str", required=True),
                port=dict(type="int", required=True),
            )),
            addresses=dict(type="dict", default={}),
            node_program=dict(type="str", default="/usr/libexec/clusterforge/clusterforge-ib-write-bw-round"),
            srun_path=dict(type="path"),
            srun_extra_args=dict(type="list", elements="str", default=[]),
            time_limit_minutes=dict(type="int", default=0),
            immediate_seconds=dict(type="int", default=SRUN_IMMEDIATE_SECONDS),
        ),
        required_if=[("mode", "plan", ("nodes", "hcas")), ("mode", "server", ("tests",)),
                     ("mode", "client", ("tests", "peer")), ("mode", "round", ("round",))],
        supports_check_mode=True,
    )
    p = module.params
    if p["mode"] == "plan":
        plan(module, p)
    if p["mode"] == "round":
        run_round(module, p)
    run_side(module, p)


if __name__ == "__main__":
    main()
