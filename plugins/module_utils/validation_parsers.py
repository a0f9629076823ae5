# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark output -> the numbers the validation judge uses: nccl-tests, perftest and GNU dd, and the checkpoint
arithmetic (``checkpoint_estimate``).

nccl-tests and perftest output is parsed by the collection's one parser of each, module_utils/perf.py; this file
only adds what the judge needs on top (the peak of the largest message size, ``ok`` and ``problems``). GNU dd's
summary line has no other parser in the collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.clusterforge.gpu.plugins.module_utils.perf import parse_nccl_tests, parse_perftest
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_common import (
    ValidationError,
    _is_list,
    _is_map,
    _number,
    _plain,
)


def _parsed(stdout, parse, name, tool):
    """The parsed output of a benchmark: its text, a registered command result passed whole (its ``stdout``), or
    an already parsed result (a dict with ``rows``), which is returned as a plain copy."""
    if _is_map(stdout) and "rows" in stdout:
        return _plain(stdout)
    if _is_map(stdout) and "stdout" in stdout:
        return parse(to_text(stdout.get("stdout") or ""))
    if isinstance(stdout, (str, bytes)) or stdout is None:
        return parse(to_text(stdout or ""))
    raise ValidationError("%s expects the text %s printed, got %s" % (name, tool, type(stdout).__name__))


def nccl_tests_results(stdout):
    """nccl-tests output (all_reduce_perf...) -> parse_nccl_tests() plus ``busbw_peak_gbps``, ``ok``, ``problems``.

    ``busbw_peak_gbps`` is the out-of-place bus bandwidth (GB/s) of the largest message size (in-place when the
    out-of-place column is missing). ``ok`` is false when the output reports wrong elements, an out-of-bounds
    FAILED, or has no result row; ``problems`` says which.
    """
    result = _parsed(stdout, parse_nccl_tests, "nccl_tests_results", "nccl-tests")
    rows = result.get("rows") or []
    if "busbw_peak_gbps" not in result:
        peak = None
        if rows:
            largest = max(rows, key=lambda r: r.get("size_bytes") or 0)
            peak = largest.get("busbw_oop")
            if peak is None:
                peak = largest.get("busbw_ip")
        result["busbw_peak_gbps"] = peak
    problems = []
    if not rows:
        problems.append("no result rows in the output")
    wrong = result.get("wrong_total") or 0
    if wrong:
        problems.append("%d wrong elements" % wrong)
    if result.get("out_of_bounds_status") == "FAILED" or (result.get("out_of_bounds") or 0) > 0:
        problems.append("out of bounds values: %s %s" % (result.get("out_of_bounds"),
                                                         result.get("out_of_bounds_status") or ""))
    if rows and result.get("out_of_bounds") is None:
        # nccl-tests always ends with "# Out of bounds values : N OK|FAILED"; without it the run was cut short
        problems.append("no 'Out of bounds values' summary: the test did not finish")
    if result.get("passed") is False and not problems:
        problems.append("nccl-tests reported a failure")
    if "ok" not in result:
        result["ok"] = not problems
    result.setdefault("problems", [p.strip() for p in problems])
    return result


# perftest's MB/sec is MiB/s: perftest divides by 0x100000 (its MEGA) for MB/sec and by 125000000 for
# --report_gbits. Gb/s = MB/sec * 1048576 * 8 / 1e9 (x 0.008388608): 46121.07 MB/sec -> 386.89 Gb/s.
# parse_perftest() already converts each row (bw_avg_gbps) with that factor; this filter only picks the row.
def perftest_results(stdout):
    """perftest output (ib_write_bw...) -> parse_perftest() plus ``bw_peak_gbits`` and ``ok``.

    ``bw_peak_gbits`` is the BW average of the largest message size, in Gb/s (10^9 bit/s) whatever unit
    perftest printed. ``ok`` is false when the output has no result row or an unknown bandwidth unit.
    """
    result = _parsed(stdout, parse_perftest, "perftest_results", "perftest")
    rows = result.get("rows") or []
    if "bw_peak_gbits" not in result:
        value = None
        if rows:
            largest = max(rows, key=lambda r: r.get("bytes") or 0)
            value = largest.get("bw_avg_gbps")
        result["bw_peak_gbits"] = value
    result.setdefault("ok", bool(rows) and result.get("bw_peak_gbits") is not None)
    return result


_DD_LINE_RE = re.compile(
    r"^\s*(?P<bytes>\d+)\s+bytes?\b.*?\bcopied,\s*(?P<seconds>[0-9]+(?:[.,][0-9]+)?(?:[eE][-+]?[0-9]+)?)\s*s"
    r"(?:,\s*(?P<rate>\S+)\s*(?P<unit>[kKMGTPE]?i?B)/s)?")


def dd_results(stderr):
    """GNU dd's final stderr line -> ``{bytes, seconds, gbytes_per_s}`` (gbytes_per_s = bytes / seconds / 1e9).

    Accepts ``1073741824 bytes (1.1 GB, 1.0 GiB) copied, 1.23456 s, 870 MB/s``, the older ``(1.1 GB)`` form, the
    short ``512 bytes copied, ...`` form and any rate unit (B/s, kB/s, MB/s, GB/s...); the rate dd printed is
    not used (it is rounded). With ``status=progress`` the last summary line wins.
    """
    if _is_map(stderr) and "stderr" in stderr:
        stderr = stderr.get("stderr")
    if stderr is None:
        raise ValidationError("dd_results: no dd output (got None)")
    if not isinstance(stderr, (str, bytes)):
        raise ValidationError("dd_results expects the text dd printed on stderr, got %s" % type(stderr).__name__)
    match = None
    for line in re.split(r"[\r\n]+", to_text(stderr)):
        found = _DD_LINE_RE.match(line)
        if found:
            match = found
    if match is None:
        tail = to_text(stderr).strip().splitlines()[-1:] or [""]
        raise ValidationError("dd_results: no 'N bytes ... copied, S s, R/s' line in the dd output (last line: %r)"
                              % tail[0][:200])
    nbytes = int(match.group("bytes"))
    # A non-C LC_NUMERIC (with English messages) prints a decimal comma: "1,23456 s".
    seconds = float(match.group("seconds").replace(",", "."))
    if seconds <= 0:
        raise ValidationError("dd_results: dd reports %d bytes in %s s; a zero duration gives no bandwidth "
                              "(write more data, e.g. a larger count=)" % (nbytes, match.group("seconds")))
    return {"bytes": nbytes, "seconds": seconds, "gbytes_per_s": nbytes / seconds / 1e9}


def _positive(value, name, where):
    number = _number(value)
    if number is None or number <= 0:
        raise ValidationError("%s: %s must be a positive number, got %r" % (where, name, value))
    return number


def checkpoint_estimate(models, write_gbytes_per_s, interval_minutes, bytes_per_parameter=16):
    """Per model: checkpoint size and how much of each hour training stalls writing it.

    checkpoint_bytes = parameters_billion * 1e9 * bytes_per_parameter (16: fp32 master weights + Adam's two
    moments + bf16/fp16 weights and gradients in mixed precision; 175B -> 2.8e12 bytes);
    write_seconds = checkpoint_bytes / (write_gbytes_per_s * 1e9);
    stall_seconds_per_hour = write_seconds * 60 / interval_minutes; stall_percent = that / 3600 * 100.
    """
    where = "checkpoint_estimate"
    bandwidth = _positive(write_gbytes_per_s, "write_gbytes_per_s (aggregate write bandwidth, GB/s)", where)
    interval = _positive(interval_minutes, "interval_minutes (checkpoint interval)", where)
    per_param = _positive(bytes_per_parameter, "bytes_per_parameter", where)
    if models is None:
        return []
    if _is_map(models) or not _is_list(models):
        raise ValidationError("%s expects a list of {name, parameters_billion}, got %s"
                              % (where, type(models).__name__))
    out = []
    for position, model in enumerate(models):
        if not _is_map(model):
            raise ValidationError("%s: models[%d] must be a dict with name and parameters_billion, got %r"
                                  % (where, position, model))
        name = to_text(model.get("name") if model.get("name") is not None else "model %d" % position)
        raw = model.get("parameters_billion")
        params = _positive(raw, "models[%d] (%s) parameters_billion" % (position, name), where)
        checkpoint_bytes = int(round(params * 1e9 * per_param))
        write_seconds = checkpoint_bytes / (bandwidth * 1e9)
        stall_seconds_per_hour = write_seconds * 60.0 / interval
        out.append({
            "name": name,
            # as given when it is a number (175 stays 175), else the number read from the text
            "parameters_billion": _plain(raw) if isinstance(raw, (int, float)) else params,
            "checkpoint_bytes": checkpoint_bytes,
            "write_seconds": write_seconds,
            "stall_seconds_per_hour": stall_seconds_per_hour,
            "stall_percent": stall_seconds_per_hour / 3600.0 * 100.0,
        })
    return out
