# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node health check's catalogue and rules, shared by the program on the nodes and by preflight.

The slurm_compute role installs this file beside the health check (roles/slurm_compute/files/slurm_healthcheck.py)
as ``clusterforge_healthcheck.py``; preflight imports it from the collection. So it imports nothing beyond the
standard library. It holds the checks and their default strikes, the DCGM health codes the check can tell apart in
``dcgmi health -c -j`` and that output's parser, and the one rule of which drain-reason prefixes the check may own.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Every check, in the order the documentation, the metrics and the preflight list them.
CHECKS = ("gpu_count", "ecc", "retired_pages", "row_remap", "temperature", "dcgm_health", "dcgm_diag", "lustre",
          "xid", "nvlink", "pcie", "ib_port", "fabric_manager", "peermem", "throttle", "mig", "boot_units")
# Runs in a row a check must fail before its faults drain the node; "timeout" applies to a check whose only fault in
# a run is a command that did not answer. Why these numbers: docs/operations.md (health checks).
DEFAULT_STRIKES = {
    "gpu_count": 1, "ecc": 1, "retired_pages": 1, "row_remap": 1, "temperature": 2, "dcgm_health": 3,
    "dcgm_diag": 1, "lustre": 1, "xid": 1, "nvlink": 2, "pcie": 2, "ib_port": 2, "fabric_manager": 2, "peermem": 1,
    "throttle": 3, "mig": 1, "boot_units": 1, "timeout": 3,
}
# DCGM's health watch error codes (dcgm_errors.h, DCGM_FR_*) that this check recognises in `dcgmi health -c -j`:
# dcgmi prints an incident's message, not its code, so the code is read back from the message (DCGM's message
# formats; DCGM 4 says "clocks event" where DCGM 3 said "clock throttling"). Only these can be ignored by code.
DCGM_HEALTH_CODES = (
    (3, "DCGM_FR_PCI_REPLAY_RATE", r"Detected more than \d+ PCIe replays per minute for GPU \d+"),
    (4, "DCGM_FR_VOLATILE_DBE_DETECTED", r"Detected \d+ volatile double-bit ECC error\(s\) in GPU \d+"),
    (5, "DCGM_FR_VOLATILE_SBE_DETECTED", r"More than \d+ single-bit ECC error\(s\) detected in GPU \d+"),
    (6, "DCGM_FR_PENDING_PAGE_RETIREMENTS", r"A pending retired page has been detected in GPU \d+"),
    (7, "DCGM_FR_RETIRED_PAGES_LIMIT", r"\d+ or more retired pages have been detected in GPU \d+"),
    (8, "DCGM_FR_RETIRED_PAGES_DBE_LIMIT", r"An excess of \d+ retired pages due to DBEs have been detected"),
    (9, "DCGM_FR_CORRUPT_INFOROM", r"A corrupt InfoROM has been detected in GPU \d+"),
    (10, "DCGM_FR_CLOCK_THROTTLE_THERMAL",
     r"Detected clock(?:s event| throttling) due to thermal violation in GPU \d+"),
    (11, "DCGM_FR_POWER_UNREADABLE", r"Cannot reliably read the power usage for GPU \d+"),
    (12, "DCGM_FR_CLOCK_THROTTLE_POWER", r"Detected clock(?:s event| throttling) due to power violation in GPU \d+"),
    (13, "DCGM_FR_NVLINK_ERROR_THRESHOLD", r"Detected -?\d+ .+? NvLink errors on GPU \d+'s NVLink which exceeds"),
    (14, "DCGM_FR_NVLINK_DOWN", r"GPU \d+'s NvLink link -?\d+ is currently down"),
    (15, "DCGM_FR_NVSWITCH_FATAL_ERROR", r"Detected fatal errors on NvSwitch \d+ link \d+"),
    (16, "DCGM_FR_NVSWITCH_NON_FATAL_ERROR", r"Detected nonfatal errors on NvSwitch \d+ link \d+"),
    (27, "DCGM_FR_FIELD_QUERY", r"Could not query field .+? for GPU \d+"),
    (70, "DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD", r"[\d.]+ .+? NvLink errors found occuring per second on GPU \d+"),
    (71, "DCGM_FR_NVLINK_ERROR_CRITICAL", r"Detected -?\d+ .+? NvLink errors on GPU \d+'s NVLink \(should be 0\)"),
    (80, "DCGM_FR_ROW_REMAP_FAILURE", r"GPU \d+ had uncorrectable memory errors and row remapping failed"),
    (81, "DCGM_FR_UNCONTAINED_ERROR", r"GPU had an uncontained error \(XID 95\)"),
    (83, "DCGM_FR_DBE_PENDING_PAGE_RETIREMENTS", r"Pending page retirements together with a DBE were detected on GPU"),
    (84, "DCGM_FR_UNCORRECTABLE_ROW_REMAP", r"GPU \d+ had uncorrectable memory errors and \d+ rows were remapped"),
    (85, "DCGM_FR_PENDING_ROW_REMAP", r"GPU \d+ had memory errors and row remappings are pending"),
    (101, "DCGM_FR_XID_ERROR", r"Detected XID \d+ for GPU \d+"),
    (109, "DCGM_FR_SXID_ERROR", r"Detected fatal NvSwitch SXID \d+"),
)
DCGM_CODE_RES = [(code, name, re.compile(pattern)) for code, name, pattern in DCGM_HEALTH_CODES]

# --- drain-reason prefixes -----------------------------------------------------------------------------------------
# The deep checks' drain prefix (playbooks/health_deep.yml; validation_deep imports it from here).
DEEP_REASON_PREFIX = "cf-deep:"
# Reason prefixes other workflows own: the health check resumes every drain whose reason starts with its own prefix,
# and another owner resumes (or adopts) every drain whose reason starts with theirs.
OTHER_REASON_OWNERS = (
    ("cf-roll:", "the rolling playbook (playbooks/rolling_reconfigure.yml)"),
    (DEEP_REASON_PREFIX, "the deep checks on drained nodes (playbooks/health_deep.yml)"),
    ("NHC:", "LBNL Node Health Check"),
    ("[node_problem]", "soperator"),
    ("Healthcheck failures", "the Azure/CycleCloud health agent"),
)
# Reasons Slurm itself sets when it drains a node (slurm.conf(5), scontrol(1)): a prefix that starts one of them
# would make the health check resume a node Slurm drained for a fault (a process it could not kill, a failed
# prolog, missing GPUs...).
SLURM_REASONS = (
    "Kill task failed", "Not responding", "Prolog error", "Epilog error", "batch job complete failure",
    "Reboot ASAP", "reboot requested", "reboot issued", "Node unexpectedly rebooted", "Low RealMemory",
    "Low socket*core*thread count", "Low CPUs", "Low TmpDisk", "gres/gpu count reported lower than configured",
    "NO NETWORK ADDRESS FOUND", "Unkillable step", "Scheduled reboot",
)
REASON_PREFIX_MAX = 40
# A quote, a backslash or a control character breaks a Slurm reason.
REASON_BAD_CHARS = re.compile(r"[\"'\\\x00-\x1f\x7f]")


def _python_type_name(value):
    return type(value).__name__


def reason_prefix_problems(prefix, type_name=_python_type_name):
    """Why a health-check reason prefix could resume or hand over drains that belong to someone else ([] when it
    may own its drains): preflight reports every problem before install, the program refuses to act on the first.
    ``type_name`` names a value's type in the message (preflight's names YAML types)."""
    if not isinstance(prefix, str):
        return ["must be a string, got %s %r" % (type_name(prefix), prefix)]
    if not prefix.strip():
        return ["must not be empty or blank (got %r): the health check resumes every drain whose reason starts with "
                "it, and an empty prefix matches every drain, an administrator's too" % prefix]
    problems = []
    if prefix != prefix.lstrip():
        problems.append("%r starts with whitespace: Slurm strips it from the reason, so the check would never "
                        "recognise (or resume) its own drains" % prefix)
    if REASON_BAD_CHARS.search(prefix):
        problems.append("%r contains a quote, a backslash, a newline or another control character, which break a "
                        "Slurm reason" % prefix)
    if len(prefix) > REASON_PREFIX_MAX:
        problems.append("%r is longer than %d characters: the fault list would be cut off in the 200-character "
                        "reason" % (prefix, REASON_PREFIX_MAX))
    for owner, who in OTHER_REASON_OWNERS:
        if prefix == owner:
            problems.append("%r is the drain prefix of %s itself: the health check would resume that tool's drains "
                            "and it would adopt the check's" % (prefix, who))
        elif owner.startswith(prefix):
            problems.append("%r is a prefix of %r, the drain prefix of %s: the health check would resume that "
                            "tool's drains" % (prefix, owner, who))
        elif prefix.startswith(owner):
            problems.append("%r starts with %r, the drain prefix of %s: that tool would adopt and resume the "
                            "health check's drains" % (prefix, owner, who))
    for reason in SLURM_REASONS:
        if reason.lower().startswith(prefix.lower()):
            problems.append("%r begins Slurm's own drain reason %r: the health check would resume nodes Slurm "
                            "drained for a fault" % (prefix, reason))
            break
    return problems


# --- dcgmi health -c -j ----------------------------------------------------------------------------------------------

def parse_health_incidents(body):
    """[{group, entity, system, health, text}] of the ``body`` of ``dcgmi health -c -j`` (its JSON, decoded): one per
    incident, ``text`` its message on one line. "Overall Health" is not an incident."""
    found = []
    for group in sorted(body):
        node = body[group]
        if group == "Overall Health" or not isinstance(node, dict):
            continue
        entities = node.get("children") or {}
        for entity in sorted(entities):
            item = entities[entity] if isinstance(entities[entity], dict) else {}
            errors = ((item.get("children") or {}).get("Errors") or {}).get("children") or {}
            for system in sorted(errors):
                item = errors[system] if isinstance(errors[system], dict) else {}
                overflow = item.get("overflow") or []
                text = " ".join(str(p) for p in overflow) if isinstance(overflow, list) else str(overflow)
                found.append({"group": group, "entity": entity, "system": system,
                              "health": str(item.get("value", "")), "text": " ".join(text.split())})
    return found


def dcgm_codes(text):
    """The DCGM error codes (DCGM_HEALTH_CODES) whose messages this text holds, sorted."""
    return sorted(set(code for code, _name, pattern in DCGM_CODE_RES if pattern.search(text)))
