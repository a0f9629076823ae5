# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ib_write_bw plan of the validation's fabric phase: a ring of node pairs (node i to node i+1) tested in rounds
of disjoint pairs, every HCA of a pair at the same time.

A ring of n nodes has n edges (one pair when n is 2). An edge colouring in which no node appears twice in a colour
needs 2 colours for an even n and 3 for an odd n (an odd cycle is not bipartite): edges (0,1), (2,3)... in round 0,
(1,2), (3,4)... in round 1 and, for an odd n, the closing edge (n-1, 0) alone in round 2. A round larger than
``max_pairs`` node pairs is cut into chunks that run one after the other, so that no more than ``max_pairs`` node
pairs load the fabric at once.

Each HCA of a pair gets its own TCP port (``base_port`` + the HCA's index in ``hcas``): both ends derive it from the
same list, and a node serves or connects at most once per round, so no port is used twice on a node at once.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import re
import subprocess
import tempfile
import time
import zlib

# perftest's default TCP port for the exchange of connection data.
DEFAULT_BASE_PORT = 18515


class PlanError(ValueError):
    pass


def _unique(names, what):
    out = []
    seen = set()
    for name in names or []:
        name = str(name)
        if not name:
            raise PlanError("%s: an empty name" % what)
        if name in seen:
            raise PlanError("%s: %s appears twice" % (what, name))
        seen.add(name)
        out.append(name)
    return out


def ring_edges(nodes):
    """The ring's node pairs as (client, server) tuples: (node i, node i+1), the last one closing the ring.

    No pair for fewer than two nodes; one pair for two nodes (a ring of two would test the same link twice).
    """
    nodes = _unique(nodes, "nodes")
    n = len(nodes)
    if n < 2:
        return []
    if n == 2:
        return [(nodes[0], nodes[1])]
    return [(nodes[i], nodes[(i + 1) % n]) for i in range(n)]


def ring_colouring(nodes):
    """The ring's edges in rounds where no node appears twice: 2 rounds for an even n, 3 for an odd n (1 for 2)."""
    edges = ring_edges(nodes)
    n = len(edges)
    if n <= 1:
        return [edges] if edges else []
    rounds = [[], []]
    for i, edge in enumerate(edges):
        if n % 2 and i == n - 1:
            rounds.append([edge])  # the closing edge of an odd ring shares a node with both other colours
        else:
            rounds[i % 2].append(edge)
    return rounds


def ring_rounds(nodes, hcas, max_pairs=None, base_port=DEFAULT_BASE_PORT):
    """The ib_write_bw plan: a list of rounds, each a list of {client, server, hca, port}.

    Every ring edge appears once per HCA; within a round no node is in two node pairs; a round holds at most
    ``max_pairs`` node pairs (None or 0: no bound), each with every HCA.
    """
    hcas = _unique(hcas, "hcas")
    if not hcas:
        raise PlanError("hcas: at least one HCA is needed")
    if max_pairs is not None and int(max_pairs) < 0:
        raise PlanError("max_pairs must be a positive number of node pairs, got %s" % max_pairs)
    base_port = int(base_port)
    if base_port < 1 or base_port + len(hcas) - 1 > 65535:
        raise PlanError("base_port %s with %d HCA(s) leaves the TCP port range 1-65535" % (base_port, len(hcas)))
    bound = int(max_pairs) if max_pairs else None
    plan = []
    for colour in ring_colouring(nodes):
        step = bound or len(colour)
        for start in range(0, len(colour), step):
            plan.append([{"client": client, "server": server, "hca": hca, "port": base_port + index}
                         for client, server in colour[start:start + step]
                         for index, hca in enumerate(hcas)])
    return plan


def node_schedule(plan, nodes):
    """Each node's part in each round: {node: [None or {side, peer, tests: [{hca, port}]} per round]}.

    ``side`` is ``server`` or ``client``; ``peer`` the other node of the pair. A node missing from the plan has a
    list of None.
    """
    schedule = dict((str(node), [None] * len(plan)) for node in nodes or [])
    for index, round_tests in enumerate(plan):
        for test in round_tests:
            ends = (("server", test["server"], test["client"]), ("client", test["client"], test["server"]))
            for side, me, peer in ends:
                slots = schedule.setdefault(me, [None] * len(plan))
                if slots[index] is None:
                    slots[index] = {"side": side, "peer": peer, "tests": []}
                elif slots[index]["side"] != side or slots[index]["peer"] != peer:
                    raise PlanError("round %d: %s is in two node pairs" % (index + 1, me))
                slots[index]["tests"].append({"hca": test["hca"], "port": test["port"]})
    return schedule


# ---------------------------------------------------------------------------------------------- running a round
# The fabric modules (ib_write_bw, nccl_isolate) run a round of tests as concurrent processes.

TERM_GRACE_SECONDS = 10
POLL_SECONDS = 0.05


def _read(handle, limit=262144):
    handle.seek(0)
    text = handle.read().decode("utf-8", "replace")
    handle.close()
    return text[-limit:]


def _start(argv, env):
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    try:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env, close_fds=True)
    except OSError as e:
        out.close()
        err.close()
        return None, "cannot run %s: %s" % (argv[0], e)
    return {"proc": proc, "out": out, "err": err}, None


def run_concurrently(commands, timeout, max_concurrent=None, retry_while=None, retry_seconds=0, retry_delay=1.0,
                     env=None, clock=time.time, sleep=time.sleep):
    """Run argv lists at once (at most ``max_concurrent`` at a time), each within ``timeout`` seconds.

    Returns one {argv, rc, stdout, stderr, timed_out, attempts, seconds} per command, in order. A command still
    running ``timeout`` seconds after its first start gets SIGTERM (srun passes it on and ends its job step), then
    SIGKILL TERM_GRACE_SECONDS later; its rc is None and ``timed_out`` true. While ``retry_while(rc, stdout,
    stderr)`` is true and less than ``retry_seconds`` have passed since the first start, the command runs again
    after ``retry_delay`` seconds (a client started before its server listens). A command that cannot be started
    has rc None and the reason in ``stderr``.
    """
    bound = int(max_concurrent) if max_concurrent else max(1, len(commands))
    results = [None] * len(commands)
    # Commands waiting for a slot: [index, argv, first start or None, not before, attempts so far]
    waiting = [[index, list(argv), None, 0.0, 0] for index, argv in enumerate(commands)]
    active = []
    while waiting or active:
        now = clock()
        for item in [w for w in waiting if w[3] <= now]:
            if len(active) >= bound:
                break
            waiting.remove(item)
            index, argv, first, _not_before, attempts = item
            job, problem = _start(argv, env)
            if job is None:
                results[index] = {"argv": argv, "rc": None, "stdout": "", "stderr": problem, "timed_out": False,
                                  "attempts": attempts + 1, "seconds": 0.0}
                continue
            job.update(index=index, argv=argv, first=now if first is None else first, attempts=attempts + 1,
                       term=None)
            active.append(job)
        running = []
        for job in active:
            proc = job["proc"]
            rc = proc.poll()
            now = clock()
            if rc is None and job["term"] is None and now - job["first"] >= timeout:
                proc.terminate()
                job["term"] = now
            elif rc is None and job["term"] is not None and now - job["term"] >= TERM_GRACE_SECONDS:
                proc.kill()
                rc = proc.wait()
            if rc is None:
                running.append(job)
                continue
            stdout, stderr = _read(job["out"]), _read(job["err"])
            timed_out = job["term"] is not None
            if (not timed_out and retry_while is not None and retry_while(rc, stdout, stderr)
                    and now + retry_delay - job["first"] < min(retry_seconds, timeout)):
                waiting.append([job["index"], job["argv"], job["first"], now + retry_delay, job["attempts"]])
                continue
            results[job["index"]] = {"argv": job["argv"], "rc": None if timed_out else rc, "stdout": stdout,
                                     "stderr": stderr, "timed_out": timed_out, "attempts": job["attempts"],
                                     "seconds": round(now - job["first"], 3)}
        active = running
        if active:
            sleep(POLL_SECONDS)
        elif waiting:
            sleep(max(0.0, min(w[3] for w in waiting) - clock()))
    return results


# ---------------------------------------------------------------------------------------- one node's side of a round
# The ib_write_bw module (mode server and client) and the node program that srun starts for a round
# (roles/slurm_compute/files/clusterforge-ib-write-bw-round, mode round of the module) run a node's side with these.

# What perftest prints when its server does not listen (yet): perftest_communication.c.
NOT_LISTENING_RE = re.compile(r"Couldn't connect to|Unable to init the socket connection|Connection refused")
RETRY_DELAY_SECONDS = 1.0


def ib_write_bw_argv(tool, side, test, peer, size_bytes, iterations, extra_args):
    """The ib_write_bw command of one test ({hca, port}) of a node's side; a client's ends with its server."""
    argv = [tool, "-d", str(test["hca"]), "-p", str(test["port"]), "--report_gbits", "-s", str(size_bytes),
            "-n", str(iterations)] + [str(arg) for arg in extra_args or []]
    if side == "client":
        argv.append(str(peer))
    return argv


def not_listening(rc, stdout, stderr):
    """True when a client failed because its server does not listen (yet)."""
    return rc != 0 and NOT_LISTENING_RE.search((stdout or "") + "\n" + (stderr or "")) is not None


def run_side(commands, side, timeout, connect_timeout, env=None, retry_delay=RETRY_DELAY_SECONDS, clock=time.time,
             sleep=time.sleep):
    """Run one node's side of a round (its ib_write_bw commands, all at once): clients start again while their
    server does not listen, for ``connect_timeout`` seconds. run_concurrently's results, in order."""
    return run_concurrently(commands, timeout, retry_while=not_listening if side == "client" else None,
                            retry_seconds=connect_timeout, retry_delay=retry_delay, env=env, clock=clock, sleep=sleep)


# ------------------------------------------------------------------------------------- a round launched by srun
# Mode round of the ib_write_bw module runs a whole round as one Slurm job step: every node of the round starts the
# node program, which reads the round's spec (this JSON, one argument), finds its own part by its Slurm node name
# and prints its result (result_lines). The controller's cost of a round is one srun, whatever the number of nodes.

SPEC_VERSION = 1
RESULT_PREFIX = "CF-IB-WRITE-BW-RESULT "


def round_spec(round_tests, addresses, size_bytes, iterations, timeout, connect_timeout, extra_args):
    """The spec of one round for the node program: its node pairs (client, server, the server's address as the
    client reaches it, and the [hca, port] tests of the pair) and the ib_write_bw settings of every test.

    ``addresses`` maps a node to its fabric address; a node missing there is reached by its name.
    """
    pairs = []
    index = {}
    for test in round_tests:
        key = (str(test["client"]), str(test["server"]))
        if key not in index:
            index[key] = len(pairs)
            pairs.append([key[0], key[1], str((addresses or {}).get(key[1]) or key[1]), []])
        pairs[index[key]][3].append([str(test["hca"]), int(test["port"])])
    seen = set()
    for client, server, _address, _tests in pairs:
        for node in (client, server):
            if node in seen:
                raise PlanError("%s is in two node pairs of the round" % node)
            seen.add(node)
    return {"v": SPEC_VERSION, "size_bytes": int(size_bytes), "iterations": int(iterations), "timeout": int(timeout),
            "connect_timeout": int(connect_timeout), "extra_args": [str(a) for a in extra_args or []], "pairs": pairs}


def spec_nodes(spec):
    """The nodes of a round's spec, in pair order (client, then server)."""
    return [node for pair in spec["pairs"] for node in pair[:2]]


def spec_part(spec, node):
    """A node's part in a round's spec: (side, peer, peer_address, [{hca, port}]), or None where it has none."""
    if not isinstance(spec, dict) or spec.get("v") != SPEC_VERSION:
        raise PlanError("round spec version %s, this program reads version %s: the node program and the collection "
                        "differ (run site.yml's slurm_compute role on the nodes)"
                        % (spec.get("v") if isinstance(spec, dict) else None, SPEC_VERSION))
    for client, server, address, tests in spec["pairs"]:
        parts = [{"hca": hca, "port": int(port)} for hca, port in tests]
        if node == client:
            return "client", server, address, parts
        if node == server:
            return "server", client, None, parts
    return None


# srun carries each task's output to the controller in messages of at most 1 KiB (slurmstepd sends whole lines while
# they fit) and writes the messages of all the round's tasks as they come: a longer line can be cut and the pieces of
# another node's output put between. So a node's result goes out as short lines, each whole: the prefix, the node,
# the line's number and count, and a piece of the result (JSON, compressed, base64).
RESULT_CHUNK_CHARS = 600


def result_lines(node, side, peer, runs, tests):
    """The node program's result lines: each test's run (stdout and stderr cut), framed as above."""
    out = []
    for test, run in zip(tests, runs):
        out.append({"hca": test["hca"], "port": test["port"], "cmd": " ".join(run["argv"]), "rc": run["rc"],
                    "timed_out": run["timed_out"], "attempts": run["attempts"], "seconds": run["seconds"],
                    "stdout": run["stdout"][-16384:], "stderr": run["stderr"][-4096:]})
    text = json.dumps({"node": node, "side": side, "peer": peer, "tests": out}, sort_keys=True)
    payload = base64.b64encode(zlib.compress(text.encode("utf-8"))).decode("ascii")
    chunks = [payload[i:i + RESULT_CHUNK_CHARS] for i in range(0, len(payload), RESULT_CHUNK_CHARS)] or [""]
    return ["%s%s %d/%d %s" % (RESULT_PREFIX, node, i, len(chunks), chunk) for i, chunk in enumerate(chunks, 1)]


def parse_result_lines(text):
    """The node program's results in srun's output: {node: result}. Other lines are ignored, and so is a node
    whose lines are incomplete or do not decode (it then has no result)."""
    pieces = {}
    for line in (text or "").splitlines():
        at = line.find(RESULT_PREFIX)
        if at < 0:
            continue
        fields = line[at + len(RESULT_PREFIX):].split(" ")
        m = re.match(r"^(\d+)/(\d+)$", fields[1]) if len(fields) == 3 else None
        if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
            continue
        node = pieces.setdefault(fields[0], {"count": int(m.group(2)), "chunks": {}})
        if node["count"] == int(m.group(2)):
            node["chunks"][int(m.group(1))] = fields[2]
    results = {}
    for name, node in pieces.items():
        if len(node["chunks"]) != node["count"]:
            continue
        try:
            payload = "".join(node["chunks"][i] for i in range(1, node["count"] + 1))
            result = json.loads(zlib.decompress(base64.b64decode(payload)).decode("utf-8"))
        except (ValueError, TypeError, zlib.error):
            continue
        if isinstance(result, dict) and result.get("node") == name:
            results[name] = result
    return results
