# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""The DCGM checks: dcgm_health (`dcgmi health -c`) and dcgm_diag (`dcgmi diag -r 1`, only while no process uses
a GPU), both through this node's host engine as the dcgm role recorded it."""

import json
import re

# pylint: disable=import-error
from clusterforge_dcgm import hostengine_args
from clusterforge_healthcheck import DCGM_HEALTH_CODES, dcgm_codes
from clusterforge_healthcheck import parse_health_incidents as _dcgm_incidents
# pylint: enable=import-error

from clusterforge_health.core import CHECKS_PHASE, find, first_line, run, to_int, unfinished


def dcgm_ignored_codes(cfg):
    by_name = dict((name, code) for code, name, _pattern in DCGM_HEALTH_CODES)
    codes = set()
    for item in cfg.get("dcgm_ignore_error_codes") or []:
        if isinstance(item, str) and item.strip() in by_name:
            codes.add(by_name[item.strip()])
        elif to_int(item) is not None and not isinstance(item, bool):
            codes.add(to_int(item))
    return codes


HEALTH_RANK = {"Healthy": 0, "Warning": 1, "Failure": 2}


def dcgmi_host(r, check):
    """dcgmi's --host arguments for this node's host engine (module_utils/dcgm.py hostengine_args, as the modules);
    None, with ``check`` failed, when the recorded address cannot be trusted or read."""
    try:
        return hostengine_args(path=r.cfg["dcgm_hostengine_file"])
    except ValueError as exc:
        r.fail(check, str(exc))
        return None


def check_dcgm(r):
    if not r.on("dcgm_health"):
        return
    cfg = r.cfg
    mode = str(cfg["dcgm"]).lower()
    dcgmi = find("dcgmi", cfg["dcgmi_path"])
    if dcgmi is None:
        if mode in ("true", "on", "yes"):
            r.fail("dcgm_health", "dcgmi not found")
        r.passed("dcgm_health")
        return
    host = dcgmi_host(r, "dcgm_health")
    if host is None:
        return
    res = run([dcgmi, "health"] + host + ["-c", "-j"], r.budget, CHECKS_PHASE)
    if res.finished and res.rc != 0 and "watches not enabled" in (res.out + res.err).lower() \
            and cfg["dcgm_set_watches"]:
        # Watches live in nv-hostengine's memory and are lost when it restarts: set them again.
        res = run([dcgmi, "health"] + host + ["-s", str(cfg["dcgm_set_watches"])], r.budget, CHECKS_PHASE)
        if res.finished:
            r.notes.append("dcgm health watches set (%s)" % cfg["dcgm_set_watches"])
            res = run([dcgmi, "health"] + host + ["-c", "-j"], r.budget, CHECKS_PHASE)
    if not r.answered("dcgm_health", res, "dcgmi health", "dcgmi health -c"):
        return
    try:
        body = json.loads(res.out)["body"]
        overall = body["Overall Health"]["value"]
    except (ValueError, KeyError, TypeError):
        r.fail("dcgm_health", "dcgmi health -c: unreadable output: %s" % first_line(res.out))
        return
    incidents = _dcgm_incidents(body)
    ignore = dcgm_ignored_codes(cfg)
    kept = []
    for incident in incidents:
        codes = dcgm_codes(incident["text"])
        if codes and ignore.issuperset(codes):
            r.notes.append("dcgmi health: ignored %s %s %s (DCGM error code %s, dcgm_ignore_error_codes)" % (
                incident["group"], incident["entity"], incident["system"], ", ".join(str(c) for c in codes)))
        else:
            kept.append(incident)
    if incidents:
        # What is left once the ignored incidents are gone decides.
        overall = max([i["health"] for i in kept] + ["Healthy"], key=lambda h: HEALTH_RANK.get(h, 2))
    if overall == "Healthy" or (overall == "Warning" and not cfg["dcgm_fail_on_warning"]):
        r.passed("dcgm_health")
        return
    detail = ", ".join("%s %s %s %s" % (i["group"], i["entity"], i["system"], i["health"]) for i in kept
                       if HEALTH_RANK.get(i["health"], 2) > 0)
    r.fail("dcgm_health", "dcgmi health %s%s" % (overall, (" (" + detail + ")") if detail else ""))


def _diag_failures(doc):
    """[(test, [GPU ids], first warning)] of the failing tests of a `dcgmi diag -j` document (DCGM 3.x and 4.x)."""
    root = doc.get("DCGM Diagnostic") if isinstance(doc.get("DCGM Diagnostic"), dict) else doc.get("DCGM GPU Diagnostic")
    if not isinstance(root, dict):
        raise ValueError("no DCGM Diagnostic document")
    failures = []
    categories = [c for c in root.get("test_categories") or [] if isinstance(c, dict)]
    for category in categories:
        for test in category.get("tests") or []:
            if not isinstance(test, dict) or not test.get("name"):
                continue  # DCGM 3.x writes null entries between tests
            gpus, warning = [], None
            for res in test.get("results") or []:
                if not isinstance(res, dict) or str(res.get("status", "")).lower() != "fail":
                    continue
                ids = res.get("entity_id", res.get("gpu_ids", res.get("gpu_id")))
                gpus += re.findall(r"\d+", str(ids)) if ids is not None else []
                for item in res.get("warnings") or []:
                    text = item.get("warning") if isinstance(item, dict) else item
                    warning = warning or (str(text).strip() if text else None)
            summary = test.get("test_summary") if isinstance(test.get("test_summary"), dict) else {}
            if gpus or str(summary.get("status", "")).lower() == "fail":
                failures.append((test["name"], gpus, warning))
    return failures, root.get("runtime_error")


def check_dcgm_diag(r):
    """`dcgmi diag -r 1 -j`, only while no process uses a GPU."""
    if not r.on("dcgm_diag"):
        return
    cfg = r.cfg
    dcgmi = find("dcgmi", cfg["dcgmi_path"])
    if dcgmi is None:
        r.passed("dcgm_diag")
        return  # check_dcgm reports a missing dcgmi where DCGM is required
    smi = find("nvidia-smi", cfg["nvidia_smi_path"])
    if smi is None:
        r.notes.append("dcgmi diag not run: nvidia-smi not found, GPU processes unknown")
        return
    res = run([smi, "--query-compute-apps=pid", "--format=csv,noheader"], r.budget, CHECKS_PHASE)
    if not res.finished:
        r.fail("dcgm_diag", unfinished(r.budget, "nvidia-smi", res), timeout=True)
        return
    pids = [line.strip() for line in res.out.splitlines() if line.strip().isdigit()]
    if res.rc != 0 or pids:
        r.notes.append("dcgmi diag not run: %s" % ("%d GPU process(es) running" % len(pids) if pids else
                                                   "GPU processes unknown (nvidia-smi rc %d)" % res.rc))
        return
    host = dcgmi_host(r, "dcgm_diag")
    if host is None:
        return
    res = run([dcgmi, "diag"] + host + ["-r", "1", "-j"], r.budget, CHECKS_PHASE)
    if not res.finished:
        r.fail("dcgm_diag", unfinished(r.budget, "dcgmi diag", res), timeout=True)
        return
    try:
        start = res.out.index("{")
        failures, runtime_error = _diag_failures(json.JSONDecoder().raw_decode(res.out[start:])[0])
    except (ValueError, AttributeError):
        r.fail("dcgm_diag", "dcgmi diag -r 1 failed (rc %d): %s" % (res.rc, first_line(res.out) or first_line(res.err)))
        return
    for name, gpus, warning in failures:
        where = " on GPU %s" % ",".join(gpus) if gpus else ""
        r.fail("dcgm_diag", "dcgmi diag -r 1: %s failed%s%s" % (name, where, (": " + warning) if warning else ""))
    if runtime_error:
        r.fail("dcgm_diag", "dcgmi diag -r 1: %s" % first_line(str(runtime_error)))
    elif not failures and res.rc != 0:
        r.fail("dcgm_diag", "dcgmi diag -r 1 failed (rc %d) without a failing test" % res.rc)
    r.passed("dcgm_diag")
