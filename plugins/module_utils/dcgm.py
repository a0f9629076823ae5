# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for NVIDIA DCGM's ``dcgmi`` (no Ansible import, stdlib only).

DCGM has no HTTP health API (nv-hostengine speaks DCGM's own protocol on 127.0.0.1:5555, or on a Unix socket), so
everything here reads ``dcgmi`` output: ``diag -r N`` (box table or ``-j`` JSON) and ``health -f`` (the health
watches that are set); and where the dcgm role recorded the host engine (:func:`hostengine_args`). The
``health -c``, ``discovery -l`` and ``nvlink -s`` parsers, which no plugin uses, are test-only: tests/formats/dcgm.py.

Results are always lower case ``pass``/``fail``/``warn``/``skip``; test names keep DCGM's own spelling
(``memory``, ``GPU Memory``, ``Persistence Mode``...).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import stat

RESULTS = ("pass", "fail", "warn", "skip")
# worst first
_SEVERITY = {"fail": 3, "warn": 2, "pass": 1, "skip": 0}

_SECTION_RE = re.compile(r"^[|+]-{3,}\s+(?P<name>[A-Za-z][\w ]*?)\s+-+\+")
_ENTITY_RE = re.compile(r"^(?P<group>[A-Za-z]+?)\s?(?P<id>\d+):\s*(?P<result>Pass|Fail|Warn|Skip|Warning|Skipped)\b", re.I)
_GPU_LIST_RE = re.compile(r"^(?P<result>Pass|Fail|Warn|Skip)\s+-\s+GPUs?:\s*(?P<ids>[\d,\s]+)$", re.I)
_DETAIL_RE = re.compile(r"^(?P<kind>Warning|Info|Error)(?::\s*(?P<group>[A-Za-z]+?)\s?(?P<id>\d+))?$")
_METADATA_KEYS = {
    "dcgm version": "dcgm_version",
    "driver version detected": "driver_version",
    "gpu device ids detected": "gpu_device_ids",
    "gpu device serials detected": "gpu_serials",
    "number of cpus detected": "cpu_count",
    "eud test version": "eud_version",
    "cpu eud test version": "cpu_eud_version",
}
# DCGM wraps detail text in 45-character chunks (Diag::DisplayVerboseInfo, DATA_INFO_TAG_LEN)
_CHUNK = 45


def normalize_result(value):
    """DCGM's many spellings (``Pass``, ``PASS``, ``Skipped``, ``Warning``, ``Fail - All``) -> pass/fail/warn/skip.

    Unknown words (e.g. ``Not Run``) return None: never read as a pass.
    """
    if value is None:
        return None
    word = str(value).strip().lower()
    word = word.split(" - ", 1)[0].strip()
    if word in ("pass", "passed", "ok"):
        return "pass"
    if word in ("fail", "failed", "failure", "error"):
        return "fail"
    if word in ("warn", "warning"):
        return "warn"
    if word in ("skip", "skipped"):
        return "skip"
    return None


def worst(results):
    """The overall verdict: fail > warn > pass > skip; None when there is nothing."""
    results = [r for r in results if r in _SEVERITY]
    if not results:
        return None
    return max(results, key=lambda r: _SEVERITY[r])


def _summarise(tests, metadata, errors, complete):
    overall = worst(t["result"] for t in tests)
    if errors and not tests:
        overall = "fail"
    return {"result": overall, "tests": tests, "metadata": metadata, "errors": errors, "complete": complete}


def _metadata_value(key, value):
    if key in ("gpu_device_ids", "gpu_serials"):
        return [v.strip() for v in value.split(",") if v.strip()]
    if key == "cpu_count":
        try:
            return int(value)
        except ValueError:
            return value
    return value


def parse_diag(text):
    """Parse the box table of ``dcgmi diag -r N``.

    Handles DCGM 1.x/2.x (``Blacklist`` row, no Metadata), DCGM 3.x (``Pass - All``, ``Fail - GPUs: 1, 3``) and
    DCGM 4.x (``GPU0: Pass`` rows, ``Warning: GPU3`` details), wrapped multi-line details, a missing top border and
    a missing closing border (``complete`` is False then). Lines that are not table rows go to ``errors`` (except
    DCGM's "Successfully ran diagnostic" banner).

    Returns ``{"result", "tests": [{"name", "category", "result", "gpus": {id: result}, "details": [...]}],
    "metadata": {...}, "errors": [...], "complete": bool}``.
    """
    tests = []
    metadata = {}
    errors = []
    category = None
    current = None
    detail = None
    complete = False
    seen_row = False
    for raw in (text or "").splitlines():
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        m = _SECTION_RE.match(line)
        if m:
            category = m.group("name").strip()
            current = detail = None
            seen_row = True
            continue
        if line.startswith("+"):
            # plain border: the one after the header row, or the closing one
            if seen_row and re.match(r"^\+-+\+-+\+\s*$", line) and (tests or metadata):
                complete = True
            continue
        if not line.startswith("|"):
            stripped = line.strip()
            if stripped.startswith("Successfully ran diagnostic"):
                continue
            errors.append(stripped)
            continue
        seen_row = True
        complete = False
        body = line[1:]
        if "|" not in body:
            continue
        name_cell, value_area = body.split("|", 1)
        name = name_cell.strip()
        value_area = value_area[1:] if value_area.startswith(" ") else value_area
        # the value area ends with " |"; keep exact 45-char chunks for wrapped text
        if value_area.rstrip().endswith("|"):
            value_area = value_area.rstrip()[:-1]
        chunk = value_area[:_CHUNK] if len(value_area) > _CHUNK else value_area.rstrip()
        value = value_area.strip()
        if name == "Diagnostic" and value == "Result":
            continue
        if category is None or category.lower() == "metadata":
            if name:
                key = _METADATA_KEYS.get(name.lower(), re.sub(r"\W+", "_", name.lower()).strip("_"))
                metadata[key] = _metadata_value(key, value)
            continue
        dm = _DETAIL_RE.match(name)
        if name and dm:
            detail = {"kind": dm.group("kind").lower(), "message": chunk,
                      "gpu": int(dm.group("id")) if dm.group("id") else None}
            if current is not None:
                current["details"].append(detail)
            else:
                errors.append(chunk.strip())
            continue
        if name:
            current = {"name": name, "category": category, "result": normalize_result(value), "gpus": {},
                       "details": []}
            detail = None
            tests.append(current)
            gm = _GPU_LIST_RE.match(value)
            if gm:
                current["_listed"] = True
                for gid in re.findall(r"\d+", gm.group("ids")):
                    current["gpus"][int(gid)] = normalize_result(gm.group("result"))
            continue
        # nameless row: per-entity result, "Fail - GPUs: 1, 3" continuation, or wrapped detail text
        em = _ENTITY_RE.match(value)
        gm = _GPU_LIST_RE.match(value)
        if current is not None and em and em.group("group").upper() == "GPU":
            current["gpus"][int(em.group("id"))] = normalize_result(em.group("result"))
            detail = None
        elif current is not None and gm:
            current["_listed"] = True
            for gid in re.findall(r"\d+", gm.group("ids")):
                current["gpus"][int(gid)] = normalize_result(gm.group("result"))
            detail = None
        elif current is not None and em:
            current.setdefault("entities", {})["%s%s" % (em.group("group"), em.group("id"))] = \
                normalize_result(em.group("result"))
            detail = None
        elif detail is not None:
            detail["message"] += chunk
        # anything else (e.g. "  Code: (000000000000)") is ignored
    for test in tests:
        for d in test["details"]:
            d["message"] = re.sub(r"\s+", " ", d["message"]).strip()
        # DCGM 3.x "Pass - GPUs: 0, 1" / "Fail - GPU: 2" rows: the first word is not the test verdict
        if (test.pop("_listed", False) or test["result"] is None) and test["gpus"]:
            test["result"] = worst(test["gpus"].values())
    return _summarise(tests, metadata, errors, complete)


def _extract_json(text):
    text = text or ""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object in the output")
    try:
        data = json.JSONDecoder().raw_decode(text[start:])[0]
    except ValueError as e:
        raise ValueError("output is not valid JSON: %s" % e)
    if not isinstance(data, dict):
        raise ValueError("JSON output is not an object")
    return data


def _gpu_ids(value):
    if value is None:
        return []
    if isinstance(value, int) and not isinstance(value, bool):
        return [value]
    return [int(x) for x in re.findall(r"\d+", str(value))]


def _warning_text(item):
    if isinstance(item, dict):
        text = item.get("warning") or item.get("message") or ""
        code = item.get("error_id")
        return text, code
    return str(item), None


def parse_diag_json(text):
    """Parse ``dcgmi diag -r N -j``: DCGM 3.x (``"DCGM GPU Diagnostic"``, ``gpu_ids``) and DCGM 4.x
    (``"DCGM Diagnostic"``, ``entity_id``, ``test_summary``, top-level ``metadata``/``entity_groups``).

    Returns the same shape as parse_diag. Raises ValueError when there is no diagnostic JSON document.
    """
    data = _extract_json(text)
    root = None
    for key in ("DCGM Diagnostic", "DCGM GPU Diagnostic"):
        if isinstance(data.get(key), dict):
            root = data[key]
            break
    if root is None:
        raise ValueError("JSON output has no 'DCGM Diagnostic' document")
    metadata = {}
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    for source in (root, meta):
        for key, value in source.items():
            if isinstance(value, (dict, list)) or value is None:
                continue
            lkey = key.lower()
            if lkey in ("version", "dcgm version"):
                metadata["dcgm_version"] = str(value)
            elif lkey in ("driver version detected", "driver_version", "driver_version_detected"):
                metadata["driver_version"] = str(value)
            elif lkey not in ("runtime_error", "warning"):
                metadata[re.sub(r"\W+", "_", lkey).strip("_")] = value
    for group in data.get("entity_groups") or []:
        if isinstance(group, dict) and group.get("entity_group") == "GPU":
            ents = [e for e in group.get("entities") or [] if isinstance(e, dict)]
            metadata["gpu_device_ids"] = [str(e.get("device_id")) for e in ents if e.get("device_id") is not None]
            serials = [str(e.get("serial_num")) for e in ents if e.get("serial_num") is not None]
            if serials:
                metadata["gpu_serials"] = serials
    errors = []
    if root.get("runtime_error"):
        errors.append(str(root["runtime_error"]).strip())
    tests = []
    for cat in root.get("test_categories") or []:
        if not isinstance(cat, dict):
            continue
        category = cat.get("category")
        for test in cat.get("tests") or []:
            if not isinstance(test, dict) or not test.get("name"):
                continue  # DCGM 3.x emits null entries between tests
            entry = {"name": test["name"], "category": category, "result": None, "gpus": {}, "details": []}
            for res in test.get("results") or []:
                if not isinstance(res, dict):
                    continue
                status = normalize_result(res.get("status"))
                if "entity_id" in res and res.get("entity_group", "GPU") == "GPU":
                    ids = _gpu_ids(res.get("entity_id"))
                elif "gpu_ids" in res or "gpu_id" in res:
                    ids = _gpu_ids(res.get("gpu_ids", res.get("gpu_id")))
                else:
                    ids = []
                for gid in ids:
                    entry["gpus"][gid] = status
                gpu = ids[0] if len(ids) == 1 else None
                for item in res.get("warnings") or []:
                    msg, code = _warning_text(item)
                    d = {"kind": "warning", "message": msg.strip(), "gpu": gpu}
                    if code is not None:
                        d["error_id"] = code
                    entry["details"].append(d)
                for item in res.get("info") or []:
                    entry["details"].append({"kind": "info", "message": str(item).strip(), "gpu": gpu})
                if not ids and status:
                    entry.setdefault("_other", []).append(status)
            summary = test.get("test_summary") if isinstance(test.get("test_summary"), dict) else {}
            entry["result"] = normalize_result(summary.get("status"))
            for item in summary.get("warnings") or []:
                msg, code = _warning_text(item)
                entry["details"].append({"kind": "warning", "message": msg.strip(), "gpu": None})
            if entry["result"] is None:
                entry["result"] = worst(list(entry["gpus"].values()) + entry.get("_other", []))
            entry.pop("_other", None)
            tests.append(entry)
    return _summarise(tests, metadata, errors, True)


def failing_tests(parsed):
    """[(test name, [gpu ids])] for every failing test; an empty list of GPUs means DCGM did not say which."""
    out = []
    for test in parsed.get("tests") or []:
        if test.get("result") == "fail":
            gpus = sorted(g for g, r in (test.get("gpus") or {}).items() if r == "fail")
            out.append((test["name"], gpus))
    return out


def gpu_results(parsed):
    """{gpu id: {test name: result}} from a parsed diag."""
    out = {}
    for test in parsed.get("tests") or []:
        for gid, result in (test.get("gpus") or {}).items():
            out.setdefault(gid, {})[test["name"]] = result
    return out


# ------------------------------------------------------------------------------------------------ health watches

# Letters of ``dcgmi health -s`` -> the rows of ``dcgmi health -f`` each one turns on.
# Source: DCGM's dcgmi (dcgmi/CommandLineParser.cpp, ProcessHealthCommandLine; dcgmi health --help lists a, p, m, i,
# t, n) and dcgmi/Health.cpp (Health::GetWatches prints the rows PCIe, NVLINK, Memory, SM, InfoROM, Thermal, Power,
# Driver, NvSwitch NF, NvSwitch F). d (driver) and x (NvSwitch) are the collection's letters for the Driver and
# NvSwitch rows (roles/dcgm, the lab's dcgmi emulator); the dcgmi builds whose source was read reject them ("Invalid
# flags detected"). Nothing sets the SM row (DCGM keeps it for later), so no letter maps to it.
WATCH_ROWS = {
    "p": ("PCIe",),
    "m": ("Memory",),
    "i": ("InfoROM",),
    "t": ("Thermal", "Power"),
    "n": ("NVLINK",),
    "d": ("Driver",),
    "x": ("NvSwitch NF", "NvSwitch F"),
}
WATCH_LETTERS = "pmitndx"
# The letters whose rows ``dcgmi health -s a`` turns on in every DCGM whose source was read: DCGM 3.x sets PCIe,
# Memory, InfoROM, Thermal, Power and NVLINK; DCGM 4.x adds both NvSwitch rows; none sets Driver. "a" requires
# these rows only, so it holds on real hosts (a Driver or NvSwitch row that is on anyway is fine).
ALL_WATCHES_LETTERS = "pmitn"
_WATCHES_TITLE = "health monitor systems report"


def validate_watch_letters(letters):
    """None when ``letters`` is a valid ``dcgmi health -s`` value (``a``, or letters of WATCH_LETTERS, each once),
    else the reason, for the message."""
    if letters == "a":
        return None
    if not letters:
        return "it is empty"
    bad = sorted(set(c for c in letters if c not in WATCH_LETTERS))
    if bad:
        return "%s %s not a watch letter" % (", ".join(repr(c) for c in bad), "is" if len(bad) == 1 else "are")
    twice = sorted(set(c for c in letters if letters.count(c) > 1))
    if twice:
        return "%s more than once (dcgmi rejects repeated letters)" % ", ".join(repr(c) for c in twice)
    return None


def watch_rows(letters):
    """The rows of ``dcgmi health -f`` that must be On for ``dcgmi health -s <letters>``, in the order of
    WATCH_LETTERS. ``a`` means the rows of ALL_WATCHES_LETTERS. Unknown letters raise ValueError."""
    wanted = ALL_WATCHES_LETTERS if letters == "a" else letters
    unknown = [c for c in wanted if c not in WATCH_ROWS]
    if unknown:
        raise ValueError("not a health watch letter: %s" % ", ".join(unknown))
    rows = []
    for letter in WATCH_LETTERS:
        if letter in wanted:
            rows.extend(WATCH_ROWS[letter])
    return rows


def _watch_state(value):
    word = str(value if value is not None else "").strip().lower()
    if word == "on":
        return True
    if word == "off":
        return False
    return None


def parse_health_watches(text):
    """Parse ``dcgmi health -f`` (DcgmiOutputTree, 18 + 70 wide) or ``dcgmi health -f -j``.

    Text form::

        Health monitor systems report
        +-----------------+--------------------------------------------------------------------+
        | PCIe            | On                                                                 |
        | NVLINK          | Off                                                                |
        ...
        +-----------------+--------------------------------------------------------------------+

    Returns ``{"watches": {row: True|False}, "errors": [lines]}``: the rows in dcgmi's order with their names as
    printed (``PCIe``, ``NVLINK``, ``Memory``, ``SM``, ``InfoROM``, ``Thermal``, ``Power``, ``Driver``,
    ``NvSwitch NF``, ``NvSwitch F``; ``-j`` sorts them by name), True for On. ``errors`` holds the lines that are
    neither the title, a border nor an On/Off row (``Error: Unable to get health watches. Return: ...``, a
    connection error), and ``<row>: <value>`` for a row that is neither On nor Off; no row at all with no error
    line adds ``no health watch rows in the output``.
    """
    lines = (text or "").splitlines()
    watches = {}
    errors = []
    rest = "\n".join(line for line in lines if line.strip().lower() != _WATCHES_TITLE)
    if rest.lstrip().startswith("{"):
        try:
            body = _extract_json(rest).get("body")
        except ValueError as e:
            body = None
            errors.append(str(e))
        for name, node in (body.items() if isinstance(body, dict) else ()):
            value = node.get("value") if isinstance(node, dict) else node
            state = _watch_state(value)
            if state is None:
                errors.append("%s: %s" % (name, value))
            else:
                watches[name] = state
        lines = []
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("+") or line.lower() == _WATCHES_TITLE:
            continue
        if not line.startswith("|"):
            errors.append(line)
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != 2 or not cells[0]:
            errors.append(line)
            continue
        state = _watch_state(cells[1])
        if state is None:
            errors.append("%s: %s" % (cells[0], cells[1]))
            continue
        watches[cells[0]] = state
    if not watches and not errors:
        errors.append("no health watch rows in the output")
    return {"watches": watches, "errors": errors}


# --- where the host engine listens -------------------------------------------------------------------------------
# The dcgm role records on each node how its nv-hostengine is reached (a Unix socket in a root-only directory by
# default, so that only root can set or clear health watches or run a diagnostic), and every dcgmi caller on the node
# (the modules, the Slurm health check) reads it here. Without the file, dcgmi's own default applies (localhost:5555).
HOSTENGINE_FILE = "/etc/clusterforge/dcgm-hostengine"
UNIX_PREFIX = "unix://"
_TCP_RE = re.compile(r"^(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*)(?::(?P<port>\d{1,5}))?$")


def hostengine_problem(address):
    """None when ``address`` is a host engine address dcgmi's ``--host`` takes (``unix:///<absolute path>``, or a
    host or ``[IPv6]`` with an optional port), else why not."""
    if not isinstance(address, str) or not address:
        return "an address is required"
    if address.startswith(UNIX_PREFIX):
        path = address[len(UNIX_PREFIX):]
        if not path.startswith("/") or "\n" in path or any(c.isspace() for c in path):
            return "a unix:// address needs an absolute socket path without spaces (unix:///run/x/y.sock)"
        return None
    match = _TCP_RE.match(address)
    if not match:
        return "not unix:///<path>, <host> or <host>:<port>"
    if match.group("port") is not None and not 0 < int(match.group("port")) < 65536:
        return "port %s is not 1-65535" % match.group("port")
    return None


_SOCKET_PATH_RE = re.compile(r"^/run/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def socket_path_problem(path):
    """None when ``path`` can be the dcgm role's host engine socket: /run/<directory>/<name>, the directory one that
    systemd creates root-only for nvidia-dcgm (RuntimeDirectory=), else why not."""
    if not isinstance(path, str) or not _SOCKET_PATH_RE.match(path) or "/.." in path or path.endswith("/."):
        return ("must be /run/<directory>/<name> of letters, digits and ._- (systemd creates the directory root-only "
                "at each start of nvidia-dcgm), or null for DCGM's TCP 127.0.0.1:5555")
    return None


def recorded_hostengine(path=None):
    """The address the dcgm role recorded for this node's host engine, or None where no file is there. The file must
    be a regular root-owned file nobody else may write (its address decides where root's dcgmi connects); anything
    else raises ValueError naming the problem."""
    path = path or HOSTENGINE_FILE
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == 2:  # ENOENT
            return None
        raise ValueError("%s cannot be read: %s" % (path, exc.strerror))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
            raise ValueError("%s is not a regular file owned by root that only root may write (uid %d, mode %04o)"
                             % (path, st.st_uid, stat.S_IMODE(st.st_mode)))
        data = os.read(fd, 4097)
    finally:
        os.close(fd)
    address = data.decode("utf-8", "replace").strip()
    problem = hostengine_problem(address)
    if problem:
        raise ValueError("%s: %r: %s" % (path, address[:200], problem))
    return address


def hostengine_args(host=None, path=None):
    """The ``--host`` arguments of every dcgmi call on this node: ``host`` when given, else the recorded address,
    else none (dcgmi's default, localhost:5555). Raises ValueError for a bad address or recorded file."""
    address = host if host else recorded_hostengine(path)
    if not address:
        return []
    problem = hostengine_problem(address)
    if problem:
        raise ValueError("DCGM host engine address %r: %s" % (address, problem))
    return ["--host", address]
