# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PRIVATE to clusterforge.gpu: the one way the collection runs nccl-tests' all_reduce_perf and reads one run.

The command line (on a node, or across nodes through srun), the result of one run as the callers judge it
(bus bandwidth, exit status, wrong data, problems) and whether it reaches a bus bandwidth. Used by the nccl_tests
module (validation's single-node and multi-node runs, the deep checks, the rolling gate) and by nccl_isolate (the
search after a multi-node miss), so every run is the same command and is judged the same way.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_parsers import nccl_tests_results

# A run through srun still going this long after its Slurm time limit is stopped.
OVERRUN_SECONDS = 120

# all_reduce_perf -b/-e: bytes, or a number with K, M, G or T (nccl-tests' parsesize); not zero.
_SIZE_RE = re.compile(r"^[0-9]+[KMGT]?$")
_ZERO_RE = re.compile(r"^0+[KMGT]?$")
# NCCL_ALGO: a value, or a comma-separated list with an optional ^ (exclude) in front (NCCL's env documentation).
_ALGO_RE = re.compile(r"^\^?[A-Za-z]+(,[A-Za-z]+)*$")


def size_problem(value, name):
    """'' when ``value`` is a size all_reduce_perf takes (a positive integer, or a string such as 8, 1G), else why
    not, naming ``name``. The nccl_tests and nccl_isolate modules and preflight (validate_nccl_max_bytes) use it."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return ""
    if isinstance(value, str) and _SIZE_RE.match(value) and not _ZERO_RE.match(value):
        return ""
    return "%s: must be a size nccl-tests reads (bytes, or a number with K, M, G or T, e.g. 8G), got %r" % (name, value)


def algorithm_problem(value):
    """'' when ``value`` is a value of NCCL_ALGO (Ring, Tree, ^NVLS, Ring,Tree), else why not."""
    if value is not None and not _ALGO_RE.match(value):
        return "algorithm must be an NCCL_ALGO value such as Ring, Tree or ^NVLS, got %r" % (value,)
    return ""


def all_reduce_argv(binary, gpus, max_bytes, min_bytes="8", factor=2, check=1):
    """all_reduce_perf's argv: sizes from ``min_bytes`` to ``max_bytes`` by ``factor``, ``gpus`` GPUs per
    process, ``check`` data checks (-c 1: a wrong sum is reported as wrong elements)."""
    return [binary, "-b", str(min_bytes), "-e", str(max_bytes), "-f", str(factor), "-g", str(gpus), "-c", str(check)]


def srun_argv(srun, nodes, time_limit_minutes, immediate_seconds, algorithm, extra_args, command):
    """``command`` across ``nodes`` through srun: one task per node, whole nodes, Slurm's own time limit, waiting
    at most ``immediate_seconds`` for the nodes, NCCL_ALGO passed in the job's environment (none: NCCL chooses)."""
    export = "--export=ALL" + (",NCCL_ALGO=%s" % algorithm if algorithm else "")
    return ([srun, "-N", str(len(nodes)), "-w", ",".join(nodes), "--ntasks-per-node=1", "--exclusive",
             "--time=%d" % time_limit_minutes, "--immediate=%d" % immediate_seconds, export]
            + [str(a) for a in extra_args] + list(command))


def run_result(rc, stdout, cmd=None, timed_out=False, stderr="", limit_seconds=None):
    """One run as its callers judge it: ``{busbw_gbps, rc, ok, problems, cmd}``. ``rc`` None: it could not start
    or was stopped (``timed_out``, at ``limit_seconds`` when given). ``ok``: the output has result rows, no wrong
    data and a complete summary."""
    parsed = nccl_tests_results(stdout or "")
    problems = [str(x) for x in parsed.get("problems") or []]
    last = ((stderr or "").strip().splitlines() or [""])[-1][:300]
    if timed_out:
        problems.insert(0, "stopped: no result within %s" % ("%d s" % limit_seconds if limit_seconds
                                                             else "its time limit"))
    elif rc is None:
        problems.insert(0, last or "could not start")
    elif rc != 0:
        problems.insert(0, "exit status %s%s" % (rc, ": %s" % last if last else ""))
    return {"busbw_gbps": parsed.get("busbw_peak_gbps"), "rc": rc, "ok": bool(parsed.get("ok")),
            "problems": problems, "cmd": cmd}


def reaches(result, min_busbw_gbps):
    """Whether a run_result passes: exit 0, right data, and a bus bandwidth of at least ``min_busbw_gbps``."""
    return (result["rc"] == 0 and result["ok"] and result["busbw_gbps"] is not None
            and result["busbw_gbps"] >= min_busbw_gbps)


def shortfall(result, min_busbw_gbps):
    """Why a run_result does not reach ``min_busbw_gbps`` ('' when it does), in one line."""
    if reaches(result, min_busbw_gbps):
        return ""
    busbw = result["busbw_gbps"]
    text = "bus bandwidth %s GB/s, needs %s GB/s" % ("none" if busbw is None else busbw, min_busbw_gbps)
    if result["problems"]:
        text += " (%s)" % "; ".join(result["problems"])
    return text
