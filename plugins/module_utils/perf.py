# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for benchmark output: nccl-tests (all_reduce_perf and friends) and perftest (ib_write_bw, ib_read_bw,
ib_send_bw).

Pure Python, standard library only. Lines the parsers do not know (NCCL INFO logs, MPI warnings, perftest's CPU
frequency warning) are ignored; a truncated table gives the rows that are complete.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# ---------------------------------------------------------------------------------------------------------- nccl-tests

_NCCL_VERSION_RE = re.compile(r"^#\s*nccl-tests version\s+(\S+)(.*)$")
_NCCL_TEST_RE = re.compile(r"^#\s*Collective test (starting|concluded):\s*(\S+)")
_NCCL_LIB_RE = re.compile(r"^#?\s*NCCL version\s+(\S+)")
_NCCL_RANK_RE = re.compile(
    r"^#\s*Rank\s+(?P<rank>\d+)\s+(?:Group\s+(?P<group>\d+)\s+)?Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)\s+"
    r"device\s+(?P<device>\d+)\s+\[(?P<busid>[^\]]*)\]\s*(?P<name>.*?)\s*$")
_NCCL_OOB_RE = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\S*)")
_NCCL_AVG_RE = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+|nan|inf)\s*(\S*)")
_NCCL_INT_PARAMS = {
    "nThread": "nThread", "nGpus": "nGpus", "minBytes": "minBytes", "maxBytes": "maxBytes",
    "warmup iters:": "warmup_iters", "iters:": "iters", "agg iters:": "agg_iters", "validation:": "validation",
    "graph:": "graph", "unalign:": "unalign",
}


def _num(text, kind=float):
    if text is None:
        return None
    text = text.strip()
    if text.upper() in ("N/A", "NAN", "-", ""):
        return None
    try:
        return kind(text)
    except ValueError:
        return kind(float(text)) if kind is int else None


def _parse_nccl_params(line):
    """``# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 ...``."""
    params = {}
    body = line.lstrip("#").strip()
    for label, key in sorted(_NCCL_INT_PARAMS.items(), key=lambda kv: -len(kv[0])):
        pattern = r"(?:^|\s)%s\s*(-?\d+)" % re.escape(label)
        match = re.search(pattern, body)
        if match and key not in params:
            params[key] = int(match.group(1))
            # keep "iters:" from matching inside "warmup iters:" / "agg iters:"
            body = body[:match.start()] + " " + body[match.end():]
    step = re.search(r"step:\s*(\d+)\((factor|bytes)\)", line)
    if step:
        params["step"] = int(step.group(1))
        params["step_kind"] = step.group(2)
    return params


def _nccl_columns(header_line):
    """Column layout from the ``#  size  count  type  redop  [root]  time algbw busbw #wrong|error ...`` line."""
    words = header_line.lstrip("#").split()
    has_root = "root" in words
    check = "#wrong" if "#wrong" in words else ("error" if "error" in words else None)
    return has_root, check


def parse_nccl_tests(text):
    """Parse nccl-tests output (``all_reduce_perf`` and the other ``*_perf`` tests).

    Returns a dict:
      - ``rows``: list of {size_bytes, count, type, redop, root (None when the column is absent), time_oop_us,
        algbw_oop, busbw_oop, wrong_oop, time_ip_us, algbw_ip, busbw_ip, wrong_ip, error_oop, error_ip}.
        Bandwidths are GB/s as printed. ``wrong_*`` is the ``#wrong`` count (int, None for ``N/A`` or for the
        old layouts that print a max ``error`` float instead, which goes to ``error_*``).
      - ``avg_busbw_gbps`` (float or None), ``out_of_bounds`` (int or None), ``passed`` (no wrong values and
        out-of-bounds OK; None when the summary is missing), ``max_busbw_gbps`` (over both placements).
      - ``header``: ``nccl_tests_version``, ``test``, ``nccl_version``, the ``nThread``/``nGpus``/... parameters,
        ``devices`` [{rank, group, pid, host, device, busid, name}], ``ranks`` (count), ``hosts`` (ordered unique),
        ``concluded`` (the 2.18+ trailer was seen).
    Old (no ``root`` column, ``error`` column) and new (``root``, ``#wrong``, 2.18 header lines) layouts are read.
    """
    header = {"devices": []}
    rows = []
    has_root = None
    check = None
    avg = None
    oob = None
    oob_status = None
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        stripped = line.strip()
        if stripped.startswith("#"):
            match = _NCCL_VERSION_RE.match(stripped)
            if match:
                header["nccl_tests_version"] = match.group(1)
                for key, value in re.findall(r"(nccl-headers|nccl-library)=(\S+)", match.group(2)):
                    header[key.replace("-", "_")] = value
                continue
            match = _NCCL_TEST_RE.match(stripped)
            if match:
                header["test"] = match.group(2)
                if match.group(1) == "concluded":
                    header["concluded"] = True
                continue
            if re.match(r"^#\s*nThread\s", stripped):
                header.update(_parse_nccl_params(stripped))
                continue
            match = _NCCL_RANK_RE.match(stripped)
            if match:
                device = match.groupdict()
                for key in ("rank", "group", "pid", "device"):
                    device[key] = int(device[key]) if device[key] is not None else None
                header["devices"].append(device)
                continue
            match = _NCCL_OOB_RE.match(stripped)
            if match:
                oob, oob_status = int(match.group(1)), match.group(2) or None
                continue
            match = _NCCL_AVG_RE.match(stripped)
            if match:
                avg = _num(match.group(1))
                continue
            words = stripped.lstrip("#").split()
            if words[:2] == ["size", "count"]:
                has_root, check = _nccl_columns(stripped)
            match = _NCCL_LIB_RE.match(stripped)
            if match:
                header["nccl_version"] = match.group(1)
            continue
        match = _NCCL_LIB_RE.match(stripped)
        if match:
            header["nccl_version"] = match.group(1)
            continue
        row = _parse_nccl_row(stripped.split(), has_root, check)
        if row is not None:
            rows.append(row)
    header["ranks"] = len(header["devices"])
    hosts = []
    for device in header["devices"]:
        if device["host"] not in hosts:
            hosts.append(device["host"])
    header["hosts"] = hosts
    header.setdefault("concluded", False)
    busbws = [r[k] for r in rows for k in ("busbw_oop", "busbw_ip") if r[k] is not None]
    wrong = sum((r["wrong_oop"] or 0) + (r["wrong_ip"] or 0) for r in rows)
    passed = None
    if oob is not None:
        passed = oob == 0 and oob_status != "FAILED" and wrong == 0
    return {
        "rows": rows,
        "avg_busbw_gbps": avg,
        "max_busbw_gbps": max(busbws) if busbws else None,
        "out_of_bounds": oob,
        "out_of_bounds_status": oob_status,
        "wrong_total": wrong,
        "passed": passed,
        "header": header,
    }


def _parse_nccl_row(tokens, has_root, check):
    if has_root is None:
        # No column header seen (a truncated paste): 13 tokens carry a root column, 12 do not.
        if len(tokens) == 13:
            has_root = True
        elif len(tokens) == 12:
            has_root = False
        else:
            return None
    expected = 13 if has_root else 12
    if len(tokens) != expected:
        return None
    try:
        size = int(tokens[0])
        count = int(tokens[1])
    except ValueError:
        return None
    offset = 5 if has_root else 4
    root = None
    if has_root:
        try:
            root = int(tokens[4])
        except ValueError:
            return None
    row = {"size_bytes": size, "count": count, "type": tokens[2], "redop": tokens[3], "root": root}
    for name, start in (("oop", offset), ("ip", offset + 4)):
        time_us, algbw, busbw, check_value = tokens[start:start + 4]
        try:
            row["time_%s_us" % name] = _num(time_us)
            row["algbw_%s" % name] = _num(algbw)
            row["busbw_%s" % name] = _num(busbw)
        except ValueError:
            return None
        wrong = error = None
        if check_value.upper() != "N/A":
            is_int = re.match(r"^-?\d+$", check_value) is not None
            if check == "#wrong" or (check is None and is_int):
                if not is_int:
                    return None
                wrong = int(check_value)
            else:
                error = _num(check_value)
        row["wrong_%s" % name] = wrong
        row["error_%s" % name] = error
    if row["busbw_oop"] is None and row["busbw_ip"] is None:
        return None
    return row


# ------------------------------------------------------------------------------------------------------------ perftest

_PERF_RESULT_HEADER_RE = re.compile(r"#bytes\s+#iterations\s+BW peak\[([^\]]+)\]\s+BW average\[([^\]]+)\]"
                                    r"(?:\s+MsgRate\[([^\]]+)\])?")
_PERF_KV_RE = re.compile(r"([A-Za-z][A-Za-z0-9_*.\- ]*?)\s*:\s*(\S+)")
_PERF_ADDR_RE = re.compile(r"^(local|remote) address:\s*(.*)$")
_PERF_TITLE_RE = re.compile(r"^\s*(\S.*?(?:BW|Lat) Test)\s*$")
# perftest's MB/sec is MiB/s (0x100000 bytes); Gb/sec is 10^9 bits (125000000 bytes).
_TO_GBPS = {"Gb/sec": 1.0, "MB/sec": 1048576.0 * 8 / 1e9, "MiB/sec": 1048576.0 * 8 / 1e9}


def parse_perftest(text):
    """Parse perftest bandwidth output (ib_write_bw, ib_read_bw, ib_send_bw; client or server side).

    Returns a dict:
      - ``rows``: list of {bytes, iterations, bw_peak, bw_avg, msg_rate_mpps, bw_peak_gbps, bw_avg_gbps}; bandwidth
        in ``bw_unit`` as printed (``MB/sec`` or ``Gb/sec`` with --report_gbits), ``*_gbps`` converted to Gb/s.
      - ``bw_unit``, ``test`` (``RDMA_Write BW Test``), ``info`` (every ``Key : value`` of the header, as printed),
        ``link``: {device, link_type, transport, connection_type, mtu, gid_index, qps} where printed (else None),
        ``local``/``remote``: the address lines as dicts (LID, QPN, PSN, GID...).
    """
    info = {}
    result = {"rows": [], "bw_unit": None, "msg_rate_unit": None, "test": None, "info": info,
              "local": None, "remote": None}
    in_header = True
    last_addr = None
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if result["test"] is None:
            match = _PERF_TITLE_RE.match(line)
            if match and ":" not in line:
                result["test"] = match.group(1)
                continue
        if stripped.startswith("---"):
            if info:
                in_header = False
            continue
        match = _PERF_RESULT_HEADER_RE.search(stripped)
        if match:
            result["bw_unit"] = match.group(1)
            result["msg_rate_unit"] = match.group(3)
            in_header = False
            continue
        match = _PERF_ADDR_RE.match(stripped)
        if match:
            last_addr = match.group(1)
            result[last_addr] = dict(re.findall(r"(\w+)\s+(\S+)", match.group(2)))
            in_header = False
            continue
        if stripped.startswith("GID:") and last_addr and result[last_addr] is not None:
            result[last_addr]["GID"] = stripped.split(":", 1)[1].strip()
            continue
        if in_header and ":" in stripped and not stripped.startswith("*"):
            for key, value in _PERF_KV_RE.findall(stripped):
                info[key.strip()] = value
            continue
        tokens = stripped.split()
        if len(tokens) in (4, 5) and result["bw_unit"] is not None:
            try:
                row = {"bytes": int(tokens[0]), "iterations": int(tokens[1]), "bw_peak": float(tokens[2]),
                       "bw_avg": float(tokens[3]),
                       "msg_rate_mpps": float(tokens[4]) if len(tokens) == 5 else None}
            except ValueError:
                continue
            factor = _TO_GBPS.get(result["bw_unit"])
            row["bw_peak_gbps"] = round(row["bw_peak"] * factor, 3) if factor else None
            row["bw_avg_gbps"] = round(row["bw_avg"] * factor, 3) if factor else None
            result["rows"].append(row)
    mtu = info.get("Mtu")
    gid = info.get("GID index")
    qps = info.get("Number of qps")
    result["link"] = {
        "device": info.get("Device"),
        "link_type": info.get("Link type"),
        "transport": info.get("Transport type"),
        "connection_type": info.get("Connection type"),
        "mtu": int(re.match(r"\d+", mtu).group(0)) if mtu and re.match(r"\d+", mtu) else None,
        "gid_index": int(gid) if gid and gid.lstrip("-").isdigit() else None,
        "qps": int(qps) if qps and qps.isdigit() else None,
    }
    largest = max(result["rows"], key=lambda r: r["bytes"]) if result["rows"] else None
    result["bw_avg_largest"] = largest["bw_avg"] if largest else None
    result["bw_avg_largest_gbps"] = largest["bw_avg_gbps"] if largest else None
    return result
