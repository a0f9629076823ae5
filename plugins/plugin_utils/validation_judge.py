# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation judge: measured cluster results (module results and benchmark numbers) + thresholds -> a report
of checks, one per subject (node, GPU, port, pair, path), each ``pass``, ``fail`` or ``skip``. What was not measured
is a ``skip`` that says why, never a ``pass``. See plugins/filter/validation_judge.yml for the input and the report.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.clusterforge.gpu.plugins.plugin_utils.bios_attributes import SETTINGS as BIOS_SETTINGS
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.bios_attributes import judge as bios_judge
from ansible_collections.clusterforge.gpu.plugins.module_utils.gpu_settings import CLOCK_KEYS, ROLE_NAMES, judge_node, requested
from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import compress as hostlist_compress
from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import expand as hostlist_expand
from ansible_collections.clusterforge.gpu.plugins.module_utils.pci import normalize_bdf
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_common import (
    ValidationError,
    _bool,
    _fmt,
    _fmt_apart,
    _is_list,
    _is_map,
    _number,
    _pct,
    _plain,
    _whole,
)
from ansible_collections.clusterforge.gpu.plugins.module_utils.healthcheck import DEEP_REASON_PREFIX, SLURM_REASONS
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import held_by_its_owner, state_flags
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_parsers import (
    checkpoint_estimate,
    dd_results,
    nccl_tests_results,
    perftest_results,
)
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_thresholds import (
    _BAD_CLOCK_REASONS,
    _thresholds,
)

CHECK_KEYS = ("id", "category", "subject", "measured", "threshold", "expected", "unit", "status", "message")


def _check(check_id, subject, status, message, measured=None, threshold=None, expected=None, unit=None):
    return {
        "id": check_id,
        "category": check_id.split(".", 1)[0],
        "subject": to_text(subject),
        "measured": _plain(measured),
        "threshold": _plain(threshold),
        "expected": _plain(expected),
        "unit": unit,
        "status": status,
        "message": to_text(message),
    }


def _result_problem(result, what):
    """Why a registered module result cannot be judged: ("skip", reason), ("fail", reason) or None (usable).

    None -> not measured; ``skipped`` -> the task was skipped; ``failed`` without data -> the module failed.
    """
    if result is None:
        return "skip", "%s was not measured" % what
    if not _is_map(result):
        return "fail", "%s is not a module result (got %s)" % (what, type(result).__name__)
    if result.get("skipped"):
        return "skip", "%s was skipped (%s)" % (what, result.get("skip_reason") or result.get("msg") or "task skipped")
    return None


def _module_failed(result, data_key=None):
    """Whether a registered module result is a module that failed before it returned its data (``data_key``).

    measure.yml registers its reads with ``failed_when: false`` (one tool's failure must not stop the other
    measurements), and Ansible then sets ``failed`` to false on the result: such a failure shows only as
    ``failed_when_result`` beside the module's message, without its data (without ``data_key``, the message alone
    tells: for a module that returns none on success). A result with ``failed`` set (a task without failed_when,
    or ignore_errors) is a failure as it says.
    """
    if result.get("failed"):
        return True
    return "failed_when_result" in result and bool(result.get("msg")) and (
        data_key is None or result.get(data_key) in (None, "", [], {}))


def _failed_msg(result):
    """The first line of a failed module result's message (or stderr)."""
    lines = to_text(result.get("msg") or result.get("stderr") or "").strip().splitlines()
    return lines[0][:300] if lines else "no message"


def _hosts(value):
    """Host names from a list, a hostlist expression (``gpu[01-02]``, as SLURM_JOB_NODELIST) or a mix of both."""
    if value is None:
        return []
    items = [value] if isinstance(value, (str, bytes)) else list(value) if _is_list(value) else [value]
    names = []
    for item in items:
        text = to_text(item).strip()
        try:
            names.extend(hostlist_expand(text))
        except ValueError:
            names.extend(n for n in re.split(r"[\s,]+", text) if n)
    return names


def _subject_hosts(nodes):
    names = _hosts(nodes)
    if not names:
        return "multi-node"
    try:
        return hostlist_compress(names)
    except ValueError:
        return ",".join(names)


class _Judge(object):
    def __init__(self, measured, thresholds):
        self.m = measured
        self.t = thresholds
        self.checks = []
        self.bandwidth = []

    def add(self, *args, **kwargs):
        self.checks.append(_check(*args, **kwargs))

    @staticmethod
    def busy(node):
        """Why a stress test has no result on a node the playbook marked busy (``idle: false``), else None."""
        if _bool(node.get("idle"), "idle") is False:
            return "not run: the node was running Slurm jobs (stress tests run on idle nodes only)"
        return None

    def chart_row(self, label, group, unit, measured, threshold, status):
        if measured is None:
            return
        self.bandwidth.append({"label": to_text(label), "group": group, "unit": unit, "measured": _plain(measured),
                               "threshold": _plain(threshold), "status": status})

    # ---------------------------------------------------------------- GPUs
    @staticmethod
    def gpu_subject(host, gpu):
        ids = [to_text(x) for x in (gpu.get("pci_bus_id"), gpu.get("uuid")) if x]
        return "%s GPU%s%s" % (host, gpu.get("index"), " (%s)" % ", ".join(ids) if ids else "")

    def gpus(self, host, node, expected):
        info = node.get("nvidia_smi_info")
        problem = _result_problem(info, "nvidia_smi_info")
        gpus = []
        if problem is None:
            gpus = [g for g in (info.get("gpus") or []) if _is_map(g)]
            if _module_failed(info, "gpus") and not gpus:
                problem = ("fail", "nvidia_smi_info failed: %s" % _failed_msg(info))
        settings = expected.get("gpu_settings") if _is_map(expected.get("gpu_settings")) else {}
        wanted, errors = requested(settings, ROLE_NAMES)
        if errors:
            raise ValidationError("%s expected.gpu_settings: %s" % (host, "; ".join(errors)))
        want = expected.get("gpu_count")
        if problem is not None:
            status, reason = problem
            self.add("gpu.count", host, status, "%s: %s" % (host, reason), expected=want, unit="GPUs")
            for check_id in ("gpu.health",) + tuple(
                    cid for cid, options in (("gpu.persistence", ("persistence_mode",)),
                                             ("gpu.power_limit", ("power_limit_watts",)),
                                             ("gpu.clocks", tuple(CLOCK_KEYS))) if any(o in wanted for o in options)):
                self.add(check_id, host, "skip", "%s: %s; no GPU data to judge" % (host, reason))
            return
        self.gpu_count(host, info, gpus, want, node)
        for gpu in gpus:
            self.gpu_health(host, gpu)
        # The gpu_tuning settings: each GPU the selection names, its live state against the module's record and the
        # request, by the one judgement the rolling gate also uses.
        findings, errors = judge_node(settings, dict(info, gpus=gpus))
        if errors:
            raise ValidationError("%s expected.gpu_settings: %s" % (host, "; ".join(errors)))
        for item in findings:
            subject = self.gpu_subject(host, item["gpu"])
            extra = dict((k, item[k]) for k in ("measured", "expected", "unit") if item[k] is not None)
            self.add("gpu." + item["check"], subject, item["status"], "%s: %s" % (subject, item["message"]), **extra)

    def gpu_count(self, host, info, gpus, want, node):
        found = len(gpus)
        if _number(info.get("gpu_count")) is not None:
            found = int(_number(info.get("gpu_count")))
        want_n = _number(want)
        if want_n is None:
            self.add("gpu.count", host, "skip", "%s: %d GPU(s) found; no expected gpu_count to compare with"
                     % (host, found), measured=found, unit="GPUs")
            return
        want_n = int(want_n)
        truncated = " (nvidia-smi output was cut short)" if info.get("truncated") else ""
        if found == want_n:
            self.add("gpu.count", host, "pass", "%s: %d of %d GPUs visible to nvidia-smi" % (host, found, want_n),
                     measured=found, expected=want_n, unit="GPUs")
            return
        seen = [to_text(g.get("pci_bus_id")) for g in gpus if g.get("pci_bus_id")]
        detail = "; visible: %s" % ", ".join(seen) if seen else ""
        missing = self.missing_gpus(node, seen)
        if missing:
            detail += "; on the PCI bus but not in nvidia-smi: %s" % ", ".join(missing)
        self.add("gpu.count", host, "fail", "%s: %d of %d GPUs visible to nvidia-smi%s%s"
                 % (host, found, want_n, truncated, detail), measured=found, expected=want_n, unit="GPUs")

    @staticmethod
    def missing_gpus(node, seen):
        """GPUs lspci (pcie_acs_info) lists that nvidia-smi does not, when both name the same devices."""
        acs = node.get("pcie_acs_info")
        if not _is_map(acs) or not _is_list(acs.get("gpus")):
            return []

        def norm(bdf):
            # nvidia-smi: 00000000:1B:00.0, lspci -D: 0000:1b:00.0, lspci: 1b:00.0 (one normaliser, module_utils/pci)
            return normalize_bdf(to_text(bdf)) or to_text(bdf).lower()
        smi = set(norm(b) for b in seen)
        pci = [to_text(g.get("bdf")) for g in acs["gpus"] if _is_map(g) and g.get("bdf")]
        pci_set = set(norm(b) for b in pci)
        if not smi or not smi <= pci_set:
            return []  # the two sources do not agree on addresses: naming "missing" ones would mislead
        return [b for b in pci if norm(b) not in smi]

    def gpu_health(self, host, gpu):
        subject = self.gpu_subject(host, gpu)
        problems = []
        ecc = gpu.get("ecc") if _is_map(gpu.get("ecc")) else {}
        if to_text(ecc.get("mode") or "").lower() == "disabled":
            problems.append("ECC disabled")
        volatile = _number(ecc.get("volatile_uncorrectable"))
        if volatile:
            problems.append("%d volatile uncorrectable ECC error(s)" % volatile)
        if gpu.get("retired_pages_pending") is True:
            problems.append("page retirement pending (reset the GPU)")
        if gpu.get("remapped_rows_pending") is True:
            problems.append("row remap pending (reset the GPU)")
        if gpu.get("remapped_rows_failure") is True:
            problems.append("row remapping failed (replace the GPU)")
        reasons = gpu.get("clock_event_reasons") if _is_map(gpu.get("clock_event_reasons")) else {}
        active = [r for r in _BAD_CLOCK_REASONS if reasons.get(r) is True]
        temp = _number(gpu.get("temperature_c"))
        if active:
            problems.append("clocks slowed down: %s%s"
                            % (", ".join(active), " at %d C" % temp if temp is not None else ""))
        aggregate = _number(ecc.get("aggregate_uncorrectable"))
        known = any(v is not None for v in (ecc.get("volatile_uncorrectable"), gpu.get("retired_pages_pending"),
                                            gpu.get("remapped_rows_pending")))
        if problems:
            self.add("gpu.health", subject, "fail", "%s: %s" % (subject, "; ".join(problems)), measured=len(problems),
                     expected=0, unit="problems")
            return
        if not known and not reasons:
            self.add("gpu.health", subject, "skip", "%s: nvidia-smi reports no ECC, retirement/remap or clock event "
                     "data for this GPU" % subject)
            return
        notes = []
        if aggregate:
            notes.append("%d lifetime uncorrectable ECC error(s), none since the driver loaded" % aggregate)
        if temp is not None:
            notes.append("%d C" % temp)
        self.add("gpu.health", subject, "pass", "%s: no ECC, page retirement, row remap or slowdown problem%s"
                 % (subject, " (%s)" % ", ".join(notes) if notes else ""), measured=0, expected=0, unit="problems")

    # ---------------------------------------------------------------- DCGM
    def dcgm(self, host, node):
        diag = node.get("dcgm_diag")
        if diag is None:
            why = self.busy(node) or "no DCGM diagnostic (DCGM not installed or diagnostic disabled)"
            self.add("dcgm.diag", host, "skip", "%s: %s" % (host, why))
            return
        problem = _result_problem(diag, "dcgm_diag")
        if problem is not None:
            self.add("dcgm.diag", host, problem[0], "%s: %s" % (host, problem[1]))
            return
        level = re.search(r"\s-r\s+(\d)", to_text(diag.get("cmd") or ""))
        what = "DCGM diagnostic%s" % (" level %s" % level.group(1) if level else "")
        tests = [t for t in (diag.get("tests") or []) if _is_map(t)]
        verdict = diag.get("result")
        if not tests and _module_failed(diag, "tests"):
            self.add("dcgm.diag", host, "fail", "%s: %s did not complete: %s" % (host, what, _failed_msg(diag)),
                     measured=verdict, expected="pass")
            return
        if diag.get("skipped") or verdict is None or not tests:
            self.add("dcgm.diag", host, "skip", "%s: %s was not run (check mode or no result)" % (host, what),
                     expected="pass")
            return
        gpus = {}
        info = node.get("nvidia_smi_info")
        if _is_map(info):
            for gpu in info.get("gpus") or []:
                if _is_map(gpu) and gpu.get("index") is not None:
                    gpus[to_text(gpu.get("index"))] = gpu
        failed = [f for f in (diag.get("failed_tests") or []) if _is_map(f)]
        if failed or verdict == "fail":
            parts = []
            for item in failed:
                ids = [to_text(g) for g in item.get("gpus") or []]
                names = []
                for gid in ids:
                    gpu = gpus.get(gid)
                    ident = [to_text(x) for x in ((gpu or {}).get("pci_bus_id"), (gpu or {}).get("uuid")) if x]
                    names.append("GPU %s%s" % (gid, " (%s)" % ", ".join(ident) if ident else ""))
                detail = self.dcgm_detail(tests, item.get("name"), ids)
                parts.append("%s failed on %s%s" % (
                    item.get("name"), ", ".join(names) if names else "all GPUs", ": %s" % detail if detail else ""))
            if not parts:
                parts.append(_failed_msg(diag) if diag.get("msg") else "overall result fail")
            self.add("dcgm.diag", host, "fail", "%s: %s: %s" % (host, what, "; ".join(parts)), measured=verdict,
                     expected="pass")
            return
        warnings = [to_text(w) for w in diag.get("diag_warnings") or []]
        if verdict == "skip":
            self.add("dcgm.diag", host, "skip", "%s: %s skipped every test" % (host, what), measured=verdict,
                     expected="pass")
            return
        self.add("dcgm.diag", host, "pass", "%s: %s %s, %d test(s)%s" % (
            host, what, "passed" if verdict == "pass" else "passed with warnings", len(tests),
            " (warnings: %s)" % "; ".join(warnings[:3]) if warnings else ""), measured=verdict, expected="pass")

    @staticmethod
    def dcgm_detail(tests, name, ids):
        for test in tests:
            if test.get("name") != name:
                continue
            for detail in test.get("details") or []:
                if not _is_map(detail) or not detail.get("message"):
                    continue
                if not ids or detail.get("gpu") is None or to_text(detail.get("gpu")) in ids:
                    return to_text(detail["message"]).strip()[:300]
        return None

    # ---------------------------------------------------------------- PCIe ACS
    def acs(self, host, node, expected):
        must = _bool(expected.get("acs_must_be_disabled"), "%s expected.acs_must_be_disabled" % host)
        info = node.get("pcie_acs_info")
        if not must:
            self.add("pcie.acs", host, "skip", "%s: ACS may stay enabled on this node (acs_must_be_disabled is %s)"
                     % (host, "false" if must is False else "not set"))
            return
        problem = _result_problem(info, "pcie_acs_info")
        if problem is None and _module_failed(info, "bridges") and not _is_list(info.get("bridges")):
            problem = ("fail", "pcie_acs_info failed: %s" % _failed_msg(info))
        if problem is not None:
            self.add("pcie.acs", host, problem[0], "%s: %s" % (host, problem[1]), expected=0, unit="bridges")
            return
        bridges = dict((to_text(b.get("bdf")), b) for b in info.get("bridges") or [] if _is_map(b))
        enabled = [to_text(b) for b in info.get("gpu_nic_acs_enabled_bridges") or []]
        if "gpu_nic_acs_enabled_bridges" not in info:
            enabled = [bdf for bdf, b in bridges.items() if b.get("acs_enabled") and b.get("on_gpu_nic_path")]
        if enabled:
            parts = []
            for bdf in enabled:
                bridge = bridges.get(bdf, {})
                below = [to_text(x) for x in bridge.get("upstream_of") or []]
                parts.append("%s (ACSCtl %s, above %s)" % (
                    bdf, bridge.get("acs_ctl_value") or "?", ", ".join(below) if below else "a GPU/NIC"))
            self.add("pcie.acs", host, "fail", "%s: ACS still enabled on %d bridge(s) on GPU/NIC paths: %s"
                     % (host, len(enabled), "; ".join(parts)), measured=len(enabled), expected=0, unit="bridges")
            return
        if info.get("access_denied"):
            self.add("pcie.acs", host, "skip", "%s: lspci could not read the ACS registers (<access denied>, not root)"
                     % host, expected=0, unit="bridges")
            return
        if not bridges:
            self.add("pcie.acs", host, "pass", "%s: no PCI bridge with the ACS capability" % host, measured=0,
                     expected=0, unit="bridges")
            return
        on_path = sum(1 for b in bridges.values() if b.get("on_gpu_nic_path"))
        other = [bdf for bdf, b in bridges.items() if b.get("acs_enabled") and not b.get("on_gpu_nic_path")]
        self.add("pcie.acs", host, "pass", "%s: ACS disabled on all %d bridge(s) on GPU/NIC paths%s"
                 % (host, on_path, " (still enabled off those paths: %s)" % ", ".join(other) if other else ""),
                 measured=0, expected=0, unit="bridges")

    # ---------------------------------------------------------------- BIOS beside runtime ACS
    @staticmethod
    def runtime_acs(info):
        """(True/False, words): ACS enabled on a bridge on a GPU/NIC path now (pcie_acs_info); (None, why) when
        that was not read."""
        if not _is_map(info) or info.get("skipped"):
            return None, "not read (no pcie_acs_info)"
        if _module_failed(info, "bridges") and not _is_list(info.get("bridges")):
            return None, "not read (pcie_acs_info failed)"
        if "gpu_nic_acs_enabled_bridges" in info:
            enabled = [to_text(b) for b in info.get("gpu_nic_acs_enabled_bridges") or []]
        else:
            enabled = [to_text(b.get("bdf")) for b in info.get("bridges") or []
                       if _is_map(b) and b.get("acs_enabled") and b.get("on_gpu_nic_path")]
        if enabled:
            return True, "enabled on %d bridge(s) on GPU/NIC paths" % len(enabled)
        if info.get("access_denied"):
            return None, "not read (lspci: access denied)"
        return False, "disabled"

    @staticmethod
    def bios_words(setting, item, runtime_words):
        """``acs: BIOS disabled (AccessControlService='Disabled'), runtime disabled``: one setting's BIOS state,
        beside the runtime state for ACS."""
        item = item if _is_map(item) else {}
        state = to_text(item.get("state") or "unknown")
        if item.get("attribute"):
            how = "%s=%r" % (to_text(item["attribute"]), _plain(item.get("value")))
        else:
            how = to_text(item.get("reason") or "not read")
        text = "%s: BIOS %s (%s)" % (setting, state, how)
        if setting == "acs":
            text += ", runtime %s" % runtime_words
        return text

    def bios(self, host, node, expected):
        """``bios.settings``: the BIOS read through the BMC (``bios_state`` of the bios role) and the runtime ACS
        state against ``bios_settings``, judged by bios_attributes.judge (the one verdict the bios role's filter
        bios_judge gives too)."""
        check_id = "bios.settings"
        enabled = _bool(expected.get("bios_enabled"), "%s expected.bios_enabled" % host)
        require_known = _bool(expected.get("bios_require_known"), "%s expected.bios_require_known" % host)
        settings = expected.get("bios_settings")
        if settings is not None and not _is_map(settings):
            raise ValidationError("validation_judge: %s expected.bios_settings must be a dict of setting -> "
                                  "enabled|disabled" % host)
        wanted = dict((to_text(k), _plain(v)) for k, v in (settings or {}).items() if v is not None)
        want_text = ", ".join("%s %s" % (k, wanted[k]) for k in sorted(wanted)) or None
        if not enabled:
            # Nothing asked of this node's BIOS (the deep checks, a cluster without BMC access): no check at all.
            if wanted:
                self.add(check_id, host, "skip", "%s: BIOS not read: bios_enabled is not true for this node "
                         "(bios_settings wants %s)" % (host, want_text), expected=want_text)
            return
        state = node.get("bios_state")
        if not _is_map(state) or not _is_map(state.get("settings")):
            error = to_text(node.get("bios_error") or "no BIOS state was recorded").strip().splitlines()
            self.add(check_id, host, "fail", "%s: the BIOS could not be read through the BMC: %s"
                     % (host, error[0][:300] if error else "no message"), expected=want_text)
            return
        mapped = _plain(state["settings"])
        runtime, runtime_words = self.runtime_acs(node.get("pcie_acs_info"))
        try:
            verdict = bios_judge(mapped, wanted, runtime)
        except ValueError as e:
            self.add(check_id, host, "fail", "%s: bios_settings cannot be judged: %s" % (host, e), expected=want_text)
            return
        # A setting in the wanted state now that a value pending on the BMC changes at the next reset: the bios
        # role calls it a conflict (community.general cannot stage over it); here it fails, as the next reboot
        # takes the node out of the profile.
        undone = []
        for setting in sorted(wanted):
            item = mapped.get(setting) or {}
            if item.get("state") == wanted[setting] and item.get("pending_state") is not None \
                    and item.get("next_state") != wanted[setting]:
                undone.append("%s: %s now, but %s=%r pending makes it %s at the next reset" % (
                    setting, wanted[setting], item.get("attribute"), item.get("pending_value"), item.get("next_state")))
        shown = [s for s in BIOS_SETTINGS if s in wanted] or list(BIOS_SETTINGS)
        side = "; ".join(self.bios_words(s, mapped.get(s), runtime_words) for s in shown)
        measured = ", ".join("%s %s" % (s, (mapped.get(s) or {}).get("state") or "unknown") for s in shown)
        if "acs" in shown:
            measured += ", runtime acs %s" % ("enabled" if runtime else "disabled" if runtime is False else "unknown")
        pending = ""
        if verdict["pending"]:
            pending = ". Pending on the BMC (applied at the next reboot): %s" % "; ".join(verdict["pending"])
        problems = verdict["problems"] + undone
        unknown = "not judged: %s" % "; ".join(verdict["unknown"]) if verdict["unknown"] else None
        if require_known and unknown:
            problems, unknown = problems + ["%s (bios_require_known)" % u for u in verdict["unknown"]], None
        vendor = to_text(state.get("vendor") or state.get("manufacturer") or "vendor unknown")
        where = "BIOS of %s through BMC %s" % (vendor, to_text(state.get("bmc") or "?"))
        if problems:
            status, head = "fail", "; ".join(problems + ([unknown] if unknown else []))
        elif unknown:
            status, head = "skip", unknown
        elif not wanted:
            status, head = "skip", "no BIOS setting expected (bios_settings is empty)"
        else:
            status, head = "pass", "BIOS as bios_settings wants (%s)" % want_text
        self.add(check_id, host, status, "%s: %s. %s: %s%s" % (host, head, where, side, pending), measured=measured,
                 expected=want_text)

    # ---------------------------------------------------------------- InfiniBand ports
    def ib_ports(self, host, node, expected):
        info = node.get("ib_port_info")
        rate = _number(expected.get("ib_rate_gbps"))
        want_count = _number(expected.get("ib_port_count"))
        problem = _result_problem(info, "ib_port_info")
        ports = []
        if problem is None:
            ports = [p for p in info.get("ports") or [] if _is_map(p)]
            if _module_failed(info, "ports") and not ports:
                problem = ("fail", "ib_port_info failed: %s" % _failed_msg(info))
        if problem is not None:
            self.add("ib.port", host, problem[0], "%s: %s" % (host, problem[1]), expected=rate, unit="Gb/s")
            self.add("ib.port_count", host, "skip" if want_count is None else problem[0], "%s: %s" % (host, problem[1]),
                     expected=want_count, unit="ports")
            return
        # Judge the InfiniBand ports (a node's Ethernet ports, bonds for instance, are not the fabric); on a RoCE
        # node, where no port is InfiniBand, judge them all.
        ib = [p for p in ports if to_text(p.get("link_layer") or "InfiniBand").lower() == "infiniband"]
        judged = ib if ib else ports
        for port in judged:
            name = to_text(port.get("name") or "%s:%s" % (port.get("ca"), port.get("port")))
            subject = "%s %s" % (host, name)
            state, phys, have = port.get("state"), port.get("physical_state"), _number(port.get("rate_gbps"))
            problems = []
            if state != "Active" or phys != "LinkUp":
                problems.append("state %s/%s (expected Active/LinkUp)" % (state, phys))
            if rate is not None and have != rate:
                problems.append("rate %s Gb/s (expected %s Gb/s)" % (_whole(have), _whole(rate)))
            if problems:
                self.add("ib.port", subject, "fail", "%s: %s" % (subject, "; ".join(problems)), measured=have,
                         expected=rate, unit="Gb/s")
            else:
                self.add("ib.port", subject, "pass", "%s: Active/LinkUp at %s Gb/s%s" % (
                    subject, _whole(have), "" if rate is not None else " (no expected rate to compare with)"),
                    measured=have, expected=rate, unit="Gb/s")
        if not judged:
            self.add("ib.port", host, "fail" if want_count else "skip", "%s: no HCA port found" % host, expected=rate,
                     unit="Gb/s")
        active = sum(1 for p in judged if p.get("state") == "Active" and p.get("physical_state") == "LinkUp")
        if want_count is None:
            self.add("ib.port_count", host, "skip", "%s: %d port(s) found, %d active; no expected ib_port_count"
                     % (host, len(judged), active), measured=len(judged), unit="ports")
        else:
            status = "pass" if len(judged) == int(want_count) else "fail"
            self.add("ib.port_count", host, status, "%s: %d of %d HCA port(s) found (%d active)"
                     % (host, len(judged), int(want_count), active), measured=len(judged), expected=int(want_count),
                     unit="ports")

    def ib_fabric(self):
        diag = self.m.get("ibdiagnet")
        problem = _result_problem(diag, "ibdiagnet")
        if problem is not None:
            self.add("ib.fabric", "fabric", problem[0], "fabric: %s" % problem[1], expected=0, unit="errors")
            return
        stages = [s for s in diag.get("stages") or [] if _is_map(s)]
        errors = _number(diag.get("total_errors"))
        if errors is None:
            errors = sum(_number(s.get("errors")) or 0 for s in stages)
        errors = int(errors)
        if not errors and _module_failed(diag):
            # the tool did not run, printed no summary, or exceeded the module's max_warnings
            self.add("ib.fabric", "fabric", "fail", "fabric: ibdiagnet failed: %s" % _failed_msg(diag), expected=0,
                     unit="errors")
            return
        if not stages:
            self.add("ib.fabric", "fabric", "skip", "fabric: ibdiagnet gave no stage summary", expected=0,
                     unit="errors")
            return
        warnings = int(_number(diag.get("total_warnings")) or 0)
        if errors:
            bad = ", ".join("%s (%d)" % (s.get("name"), int(_number(s.get("errors")) or 0)) for s in stages
                            if _number(s.get("errors")))
            texts = [to_text(m.get("text")) for m in diag.get("messages") or []
                     if _is_map(m) and m.get("level") == "error"]
            self.add("ib.fabric", "fabric", "fail", "fabric: ibdiagnet reports %d error(s) in %s%s" % (
                errors, bad or "its summary", "; first: %s" % " | ".join(texts[:5]) if texts else ""),
                measured=errors, expected=0, unit="errors")
        else:
            self.add("ib.fabric", "fabric", "pass", "fabric: ibdiagnet reports no error in %d stage(s) (%d warning(s))"
                     % (len(stages), warnings), measured=0, expected=0, unit="errors")

    def ib_write_bw(self):
        pairs = self.m.get("ib_write_bw")
        fraction = self.t["ib_write_bw_min_fraction"]
        if not pairs:
            self.add("ib.write_bw", "pairs", "skip", "ib_write_bw was not measured")
            return
        if not _is_list(pairs):
            raise ValidationError("validation_judge: measured.ib_write_bw must be a list of pairs")
        nodes = self.m.get("nodes") if _is_map(self.m.get("nodes")) else {}
        for pair in pairs:
            if not _is_map(pair):
                raise ValidationError("validation_judge: each ib_write_bw entry must be a dict, got %r" % (pair,))
            subject = "%s->%s %s" % (pair.get("client"), pair.get("server"), pair.get("hca") or "")
            subject = subject.strip()
            line = _number(pair.get("line_rate_gbits"))
            if line is None:
                client = nodes.get(pair.get("client")) if _is_map(nodes.get(pair.get("client"))) else {}
                line = _number((client.get("expected") or {}).get("ib_rate_gbps"))
            result = pair.get("result")
            if isinstance(result, (str, bytes)):
                result = perftest_results(result)
            rc = pair.get("rc")
            if result is None and (rc not in (None, 0) or pair.get("msg")):
                # msg: why the test did not run or end (the module's message), when the entry has one
                why = to_text(pair.get("msg") or "").strip().splitlines()[:1]
                status = " with exit status %s" % rc if rc not in (None, 0) else ""
                self.add("ib.write_bw", subject, "fail", "%s: ib_write_bw failed%s%s" % (
                    subject, status, ": %s" % why[0][:300] if why else ""), expected=line, unit="Gb/s")
                continue
            if result is None:
                self.add("ib.write_bw", subject, "skip", "%s: ib_write_bw was not measured" % subject, expected=line,
                         unit="Gb/s")
                continue
            if not _is_map(result):
                raise ValidationError("validation_judge: ib_write_bw result of %s must be perftest_results output"
                                      % subject)
            if "bw_peak_gbits" not in result:
                result = perftest_results(result)
            have = _number(result.get("bw_peak_gbits"))
            if have is None:
                self.add("ib.write_bw", subject, "fail", "%s: ib_write_bw printed no bandwidth result" % subject,
                         expected=line, unit="Gb/s")
                continue
            if line is None:
                self.add("ib.write_bw", subject, "skip", "%s: ib_write_bw %s Gb/s; no line rate to compare with"
                         % (subject, _fmt(have)), measured=have, unit="Gb/s")
                self.chart_row("%s ib_write_bw" % subject, "InfiniBand", "Gb/s", have, None, "skip")
                continue
            threshold = round(fraction * line, 3)
            status = "pass" if have >= threshold else "fail"
            self.add("ib.write_bw", subject, status, "%s: ib_write_bw %s Gb/s %s %s Gb/s (%s of %s)" % (
                subject, _fmt(have), ">=" if status == "pass" else "<", _fmt(threshold), _pct(fraction), _whole(line)),
                measured=have, threshold=threshold, expected=line, unit="Gb/s")
            self.chart_row("%s ib_write_bw" % subject, "InfiniBand", "Gb/s", have, threshold, status)

    # ---------------------------------------------------------------- NCCL
    def nccl(self, check_id, subject, result, nominal_key, what, label, why=None, rc=None):
        fraction = self.t["nccl_min_fraction"]
        nominal = self.t[nominal_key]
        threshold = round(fraction * nominal, 3)
        if isinstance(result, (str, bytes)):
            result = nccl_tests_results(result)
        if _is_map(result) and result.get("error") and "rows" not in result:   # the run could not be made
            self.add(check_id, subject, "fail", "%s: %s could not run: %s" % (subject, what, to_text(result["error"])),
                     threshold=threshold, expected=nominal, unit="GB/s")
            return
        if result is None and rc not in (None, 0):
            self.add(check_id, subject, "fail", "%s: %s failed with exit status %s and no output" % (subject, what, rc),
                     threshold=threshold, expected=nominal, unit="GB/s")
            return
        if result is None:
            self.add(check_id, subject, "skip", "%s: %s %s" % (subject, what, why or "was not measured"),
                     threshold=threshold, expected=nominal, unit="GB/s")
            return
        if not _is_map(result):
            raise ValidationError("validation_judge: the %s result of %s must be nccl_tests_results output"
                                  % (what, subject))
        if "ok" not in result or "busbw_peak_gbps" not in result:
            result = nccl_tests_results(result)
        test = to_text((result.get("header") or {}).get("test") or "all_reduce_perf")
        have = _number(result.get("busbw_peak_gbps"))
        if not result.get("ok") or rc not in (None, 0):
            problems = [to_text(p) for p in result.get("problems") or []] or ["the test reported a failure"]
            if rc not in (None, 0):
                problems = ["exit status %s" % rc] + [p for p in problems if result.get("ok") is False]
            self.add(check_id, subject, "fail", "%s: %s failed: %s%s" % (
                subject, test, "; ".join(problems), " (busbw %s GB/s)" % _fmt(have) if have is not None else ""),
                measured=have, threshold=threshold, expected=nominal, unit="GB/s")
            self.chart_row(label, "NCCL", "GB/s", have, threshold, "fail")
            return
        if have is None:
            self.add(check_id, subject, "fail", "%s: %s printed no bus bandwidth" % (subject, test),
                     threshold=threshold, expected=nominal, unit="GB/s")
            return
        status = "pass" if have >= threshold else "fail"
        unchecked = " (data not validated: -c 0)" if (result.get("header") or {}).get("validation") == 0 else ""
        self.add(check_id, subject, status, "%s: %s busbw %s GB/s %s %s GB/s (%s of %s)%s" % (
            subject, test, _fmt(have), ">=" if status == "pass" else "<", _fmt(threshold), _pct(fraction),
            _whole(nominal), unchecked), measured=have, threshold=threshold, expected=nominal, unit="GB/s")
        self.chart_row(label, "NCCL", "GB/s", have, threshold, status)

    def nccl_isolation(self):
        """The nodes, pairs or node sets that the search behind a multi-node miss named (nccl_isolate's result).

        Absent (None) when the search did not run (the multi-node run passed, or ran on fewer than three nodes): no
        check. Each culprit node, each pair and each unresolved set is a failure of its own.
        """
        found = self.m.get("nccl_isolation")
        if found is None:
            return
        problem = _result_problem(found, "the isolation of the multi-node NCCL miss")
        if problem:
            self.add("nccl.isolation", "multi-node", problem[0], "multi-node: %s" % problem[1])
            return
        if _module_failed(found, "needed"):
            self.add("nccl.isolation", "multi-node", "fail", "multi-node: the isolation of the NCCL miss failed: %s"
                     % _failed_msg(found))
            return
        if found.get("needed") is False:
            return
        for key in ("culprits", "pairs", "unresolved"):
            if not _is_list(found.get(key) or []):
                raise ValidationError("validation_judge: measured.nccl_isolation.%s must be a list" % key)
        evidence = found.get("evidence") if _is_map(found.get("evidence")) else {}
        fraction = self.t["nccl_min_fraction"]
        nominal = self.t["nccl_multi_node_busbw_gbps"]
        threshold = round(fraction * nominal, 3)
        rounds = found.get("rounds")
        after = " (found in %s round(s) of runs after the run across all nodes)" % rounds if rounds else ""

        def how(run):
            have = _number(run.get("busbw_gbps"))
            problems = [to_text(p) for p in run.get("problems") or []]
            if run.get("rc") not in (None, 0) or run.get("ok") is False or have is None:
                what = "; ".join(problems) or "no bus bandwidth"
                return have, "failed (%s%s)" % (what, ", busbw %s GB/s" % _fmt(have) if have is not None else "")
            return have, "busbw %s GB/s < %s GB/s (%s of %s)" % (
                _fmt(have), _fmt(threshold), _pct(fraction), _whole(nominal))

        for culprit in found.get("culprits") or []:
            culprit = to_text(culprit)
            run = evidence.get(culprit) if _is_map(evidence.get(culprit)) else {}
            others = [to_text(n) for n in run.get("nodes") or [] if to_text(n) != culprit]
            have, text = how(run)
            with_whom = " with %s (which passes elsewhere)" % ", ".join(others) if others else ""
            self.add("nccl.isolation", culprit, "fail", "%s: slows the multi-node NCCL run down: all_reduce_perf%s %s; "
                     "%s passes in no run%s" % (culprit, with_whom, text, culprit, after), measured=have,
                     threshold=threshold, expected=nominal, unit="GB/s")
        for pair in found.get("pairs") or []:
            names = [to_text(n) for n in pair] if _is_list(pair) else _hosts(pair)
            subject = _subject_hosts(names)
            run = evidence.get(",".join(names)) if _is_map(evidence.get(",".join(names))) else {}
            have, text = how(run)
            self.add("nccl.isolation", subject, "fail", "%s: this pair misses the multi-node NCCL threshold although "
                     "each node passes with others (a link or route between them): all_reduce_perf %s%s"
                     % (subject, text, after), measured=have, threshold=threshold, expected=nominal, unit="GB/s")
        for item in found.get("unresolved") or []:
            item = item if _is_map(item) else {"nodes": item}
            subject = _subject_hosts(item.get("nodes"))
            self.add("nccl.isolation", subject, "fail", "%s: the multi-node NCCL miss could not be narrowed to a node "
                     "or pair: %s%s" % (subject, to_text(item.get("reason") or "no reason given"), after),
                     threshold=threshold, expected=nominal, unit="GB/s")
        if not (found.get("culprits") or found.get("pairs") or found.get("unresolved")):
            self.add("nccl.isolation", "multi-node", "skip", "multi-node: the search named no node: every run of it "
                     "reached %s GB/s (the miss did not repeat)" % _fmt(threshold), threshold=threshold,
                     expected=nominal, unit="GB/s")

    # ---------------------------------------------------------------- storage
    def storage_node(self, host, node):
        storage = node.get("storage")
        path = to_text(storage.get("path")) if _is_map(storage) and storage.get("path") else None
        subject = "%s:%s" % (host, path) if path else host
        for kind in ("write", "read"):
            key = "storage_%s_gbytes_per_s_per_node" % kind
            threshold = self.t[key]
            if _is_map(storage) and storage.get("error"):   # the test itself failed there (I/O error, time limit)
                self.add("storage.%s" % kind, subject, "fail", "%s: %s" % (host, to_text(storage["error"])),
                         threshold=threshold, expected=threshold, unit="GB/s")
                continue
            result = storage.get(kind) if _is_map(storage) else None
            if _is_map(result) and "gbytes_per_s" not in result and "stderr" in result:
                result = result.get("stderr") or ""  # the registered dd task itself
            if isinstance(result, (str, bytes)):
                try:
                    result = dd_results(result)
                except ValidationError as e:
                    self.add("storage.%s" % kind, subject, "fail", "%s: %s" % (subject, e), threshold=threshold,
                             expected=threshold, unit="GB/s")
                    continue
            have = _number(result.get("gbytes_per_s")) if _is_map(result) else None
            if have is None:
                self.add("storage.%s" % kind, subject, "skip", "%s: storage %s bandwidth %s"
                         % (subject, kind, self.busy(node) or "was not measured"), threshold=threshold,
                         expected=threshold, unit="GB/s")
                continue
            status = "pass" if have >= threshold else "fail"
            have_text, threshold_text = _fmt_apart(have, threshold, 2)
            self.add("storage.%s" % kind, subject, status, "%s: dd %s %s GB/s %s %s GB/s" % (
                subject, kind, have_text, ">=" if status == "pass" else "<", threshold_text),
                measured=have, threshold=threshold, expected=threshold, unit="GB/s")
            self.chart_row("%s %s" % (subject, kind), "Storage per node", "GB/s", have, threshold, status)

    def storage_aggregate(self):
        agg = self.m.get("storage_aggregate")
        path = to_text(agg.get("path")) if _is_map(agg) and agg.get("path") else None
        count = agg.get("nodes") if _is_map(agg) else None
        subject = "aggregate%s%s" % (" %s" % path if path else "", " (%s nodes)" % count if count is not None else "")
        for kind in ("write", "read"):
            threshold = self.t["storage_%s_gbytes_per_s_aggregate" % kind]
            have = _number(agg.get("%s_gbytes_per_s" % kind)) if _is_map(agg) else None
            check_id = "storage.aggregate_%s" % kind
            if have is None:
                self.add(check_id, subject, "skip", "%s: aggregate storage %s bandwidth was not measured"
                         % (subject, kind), threshold=threshold, expected=threshold, unit="GB/s")
                continue
            status = "pass" if have >= threshold else "fail"
            self.add(check_id, subject, status, "%s: %s %s GB/s %s %s GB/s" % (
                subject, kind, _fmt(have, 2), ">=" if status == "pass" else "<", _fmt(threshold, 2)),
                measured=have, threshold=threshold, expected=threshold, unit="GB/s")
            self.chart_row("%s %s" % (subject, kind), "Storage aggregate", "GB/s", have, threshold, status)

    # ---------------------------------------------------------------- Slurm
    def slurm(self):
        smoke = self.m.get("slurm_smoke")
        if smoke is None:
            self.add("slurm.smoke", "slurm", "skip", "slurm: the Slurm smoke job was not run")
            return
        if not _is_map(smoke):
            raise ValidationError("validation_judge: measured.slurm_smoke must be a dict")
        job = smoke.get("job_id")
        subject = "slurm job %s" % job if job not in (None, "") else "slurm"
        expected = _hosts(smoke.get("nodes_expected"))
        ran = _hosts(smoke.get("nodes_ran"))
        rc = smoke.get("rc")
        problems = []
        if rc is None or _number(rc) != 0:
            problems.append("exit status %s" % (rc if rc is not None else "unknown"))
        missing = [n for n in expected if n not in set(ran)]
        extra = sorted(set(ran) - set(expected))
        if missing:
            problems.append("did not run on %s" % ", ".join(missing))
        if extra:
            problems.append("ran on unexpected node(s) %s" % ", ".join(extra))
        if not expected:
            problems.append("no expected nodes given")
        if problems:
            self.add("slurm.smoke", subject, "fail", "%s: %s" % (subject, "; ".join(problems)), measured=len(set(ran)),
                     expected=len(expected), unit="nodes")
        else:
            self.add("slurm.smoke", subject, "pass", "%s: ran on all %d expected node(s) (%s), rc 0"
                     % (subject, len(expected), _subject_hosts(expected)), measured=len(set(ran)),
                     expected=len(expected), unit="nodes")

    # ---------------------------------------------------------------- checkpoint
    def checkpoint(self):
        models = self.m.get("models")
        interval = self.m.get("checkpoint_interval_minutes")
        agg = self.m.get("storage_aggregate")
        bandwidth = _number(agg.get("write_gbytes_per_s")) if _is_map(agg) else None
        limit = self.t["checkpoint_max_stall_percent"]
        if not models:
            self.add("checkpoint.stall", "checkpoint", "skip", "checkpoint: no models given", threshold=limit, unit="%")
            return []
        if not _is_list(models):
            raise ValidationError("validation_judge: measured.models must be a list of {name, parameters_billion}")
        reason = None
        if bandwidth is None or bandwidth <= 0:
            reason = "no aggregate storage write bandwidth measured"
        elif _number(interval) is None or _number(interval) <= 0:
            reason = "no checkpoint_interval_minutes given"
        if reason:
            for model in models:
                name = to_text(model.get("name")) if _is_map(model) else to_text(model)
                self.add("checkpoint.stall", name, "skip", "%s: %s" % (name, reason), threshold=limit, unit="%")
            return []
        estimates = checkpoint_estimate(models, bandwidth, interval, self.t["bytes_per_parameter"])
        for est in estimates:
            status = "pass" if est["stall_percent"] <= limit else "fail"
            message = "%s: a %s TB checkpoint every %s min takes %s s at %s GB/s: %s%% of training time %s %s%%" % (
                est["name"], _fmt(est["checkpoint_bytes"] / 1e12, 2), _whole(interval), _fmt(est["write_seconds"]),
                _fmt(bandwidth, 2), _fmt(est["stall_percent"], 2), "<=" if status == "pass" else ">", _fmt(limit, 2))
            self.add("checkpoint.stall", est["name"], status, message, measured=est["stall_percent"], threshold=limit,
                     unit="%")
        return estimates


def _probe_time(result, key, index):
    value = _number(result.get(key))
    if value is None:
        raise ValidationError("storage_aggregate: entry %d has no %s (a storage_probe measurement has started, written "
                              "and read_done)" % (index, key))
    return value


def storage_aggregate(results, path=None):
    """The bandwidth of every node writing (then reading) at once: ``{path, nodes, write_gbytes_per_s,
    read_gbytes_per_s}`` from each node's storage_probe ``measured`` (null and failed entries are left out; none
    left gives null). Write: every byte written / (last write's end - first write's start); read: every byte read /
    (last read's end - first write's end)."""
    if results is None:
        return None
    if not _is_list(results):
        raise ValidationError("storage_aggregate: expects a list of storage_probe measurements, got %s"
                              % type(results).__name__)
    done = [r for r in results if _is_map(r) and not r.get("error")]
    if not done:
        return None
    totals = {}
    for kind in ("write", "read"):
        total = 0
        for index, result in enumerate(done):
            nbytes = _number((result.get(kind) or {}).get("bytes")) if _is_map(result.get(kind)) else None
            if nbytes is None:
                raise ValidationError("storage_aggregate: entry %d has no %s.bytes" % (index, kind))
            total += nbytes
        totals[kind] = total
    started = min(_probe_time(r, "started", i) for i, r in enumerate(done))
    written = [_probe_time(r, "written", i) for i, r in enumerate(done)]
    read_done = max(_probe_time(r, "read_done", i) for i, r in enumerate(done))
    windows = {"write": max(written) - started, "read": read_done - min(written)}
    rates = {}
    for kind, seconds in windows.items():
        if seconds <= 0:
            raise ValidationError("storage_aggregate: the %s window is %s s (a clock went backwards, or a node's "
                                  "clock is far from the others')" % (kind, seconds))
        rates[kind] = totals[kind] / seconds / 1e9
    return {"path": path, "nodes": len(done), "write_gbytes_per_s": rates["write"],
            "read_gbytes_per_s": rates["read"]}


def held_nodes(nodes, own_prefixes):
    """{node: "DOWN+DRAIN: 'RMA 1234'"} of the nodes of a slurm_node_info result (its ``nodes``) that their owner
    holds out of service (module_utils/slurm.py held_by_its_owner): validation runs no job on them and judges nothing
    of them. ``own_prefixes``: the reason prefixes of this collection's own drains.

    The deep checks' drains (DEEP_REASON_PREFIX: a new node's burn-in, a failed deep check) are held too, whatever
    ``own_prefixes`` says: such a node waits for playbooks/health_deep.yml, which resumes it when it passes, and a
    validation job could not run on it (the smoke job would fail on a node the collection drained by design)."""
    if nodes is None:
        return {}
    if not _is_list(nodes):
        raise ValidationError("validation_held_nodes: expects slurm_node_info's nodes (a list), got %s"
                              % type(nodes).__name__)
    if not _is_list(own_prefixes) or not all(isinstance(p, str) and p.strip() for p in own_prefixes):
        raise ValidationError("validation_held_nodes: own_prefixes must be a list of non-empty reason prefixes, "
                              "got %r" % (own_prefixes,))
    held = {}
    for node in nodes:
        if not _is_map(node) or not node.get("name") or not node.get("state"):
            continue
        reason = node.get("reason")
        deep = (reason or "").startswith(DEEP_REASON_PREFIX)
        text = held_by_its_owner(state_flags(node["state"]), reason,
                                 [p for p in own_prefixes if not deep or p != DEEP_REASON_PREFIX], SLURM_REASONS)
        if text:
            held[to_text(node["name"])] = text + (" (the deep checks' drain: playbooks/health_deep.yml resumes it when "
                                                  "it passes)" if deep else "")
    return held


def _ran(result):
    """A registered task result, or None where the task was skipped (it measured nothing)."""
    return None if not _is_map(result) or result.get("skipped") else result


def node_record(results, idle, gpu_count, gpu_settings, profile, acs_disable=False, acs_require_disabled=False,
                ib_ports_per_node=None, bios_enabled=False, bios_settings=None, bios_require_known=False,
                bios_state=None, bios_error=None, storage_path=None):
    """One measured node as validation_judge takes it (``nodes[<node>]``): what the node must have (``expected``)
    and what its measuring tasks returned. ``results``: the registered results by module, ``nvidia_smi_info``,
    ``dcgm_diag``, ``pcie_acs_info``, ``ib_port_info``, ``nccl_tests``, ``storage_probe``; a skipped task measured
    nothing (None). ``profile``: the hardware profile's figures (validation_profile).

    - ACS must be disabled where pcie_acs disables it or requires it disabled.
    - InfiniBand is expected where its ports were read (the node has ibstat): the profile's rate, and the profile's
      port count unless ``ib_ports_per_node`` overrides it.
    - A local NCCL run that returned no result, or a storage test that measured nothing, is recorded as an error with
      the module's message, which the judge fails."""
    what = "validation_node_record"
    if not _is_map(results):
        raise ValidationError("%s: expects the measuring tasks' results by module, got %s" % (what, type(results).__name__))
    if not _is_map(profile) or "ib_rate_gbps" not in profile or "ib_ports_per_node" not in profile:
        raise ValidationError("%s: profile must be the hardware profile's figures (validation_profile), got %r"
                              % (what, profile))
    if bios_settings is not None and not _is_map(bios_settings):
        raise ValidationError("%s: bios_settings must be a dict, got %r" % (what, bios_settings))
    ran = dict((name, _ran(results.get(name))) for name in
               ("nvidia_smi_info", "dcgm_diag", "pcie_acs_info", "ib_port_info", "nccl_tests", "storage_probe"))
    ib, nccl, storage = ran["ib_port_info"], ran["nccl_tests"], ran["storage_probe"]
    if nccl is not None:
        nccl = nccl["result"] if "result" in nccl else {"error": nccl.get("msg", "no result")}
    if storage is not None:
        storage = storage["measured"] if storage.get("measured") is not None else {
            "path": storage_path, "error": storage.get("msg", "the test returned nothing")}
    return {
        "expected": {
            "gpu_count": gpu_count,
            "gpu_settings": gpu_settings,
            "acs_must_be_disabled": bool(_bool(acs_disable, "acs_disable")) or bool(
                _bool(acs_require_disabled, "acs_require_disabled")),
            "bios_enabled": bool(_bool(bios_enabled, "bios_enabled")),
            "bios_settings": bios_settings or {},
            "bios_require_known": bool(_bool(bios_require_known, "bios_require_known")),
            "ib_rate_gbps": None if ib is None else profile["ib_rate_gbps"],
            "ib_port_count": None if ib is None else (
                profile["ib_ports_per_node"] if ib_ports_per_node is None else ib_ports_per_node),
        },
        "idle": bool(_bool(idle, "idle")),
        "nvidia_smi_info": ran["nvidia_smi_info"],
        "dcgm_diag": ran["dcgm_diag"],
        "pcie_acs_info": ran["pcie_acs_info"],
        "bios_state": bios_state,
        "bios_error": bios_error,
        "ib_port_info": ib,
        "nccl_local": nccl,
        "storage": storage,
    }


HELD_MESSAGE = ("%s: not validated: Slurm has it out of service by its owner's decision (%s); validation ran no job "
                "on it and judged nothing of it")


def validation_judge(measured, thresholds=None):
    """Judge measured cluster results against thresholds; see validation_judge.yml for the input and the report."""
    if not _is_map(measured):
        raise ValidationError("validation_judge expects a dict of measured results, got %s"
                              % type(measured).__name__)
    limits = _thresholds(thresholds)
    judge = _Judge(measured, limits)
    nodes = measured.get("nodes")
    if nodes is not None and not _is_map(nodes):
        raise ValidationError("validation_judge: measured.nodes must be a dict of host -> node results")
    expected_nodes = _hosts(measured.get("nodes_expected"))
    unmeasured = [h for h in expected_nodes if h not in (nodes or {})]
    for host in unmeasured:
        judge.add("gpu.count", host, "fail", "%s: not measured: the node failed or was unreachable earlier in this "
                  "run, so nothing of it was judged" % host)
    if not nodes and not unmeasured:
        judge.add("gpu.count", "nodes", "skip", "no node was measured")
    for host, node in (nodes or {}).items():
        host = to_text(host)
        if node is None:
            node = {}
        if not _is_map(node):
            raise ValidationError("validation_judge: measured.nodes[%s] must be a dict" % host)
        if node.get("held"):
            judge.add("slurm.held", host, "skip", HELD_MESSAGE % (host, to_text(node["held"])))
            continue
        expected = node.get("expected") if _is_map(node.get("expected")) else {}
        judge.gpus(host, node, expected)
        judge.dcgm(host, node)
        judge.acs(host, node, expected)
        judge.bios(host, node, expected)
        judge.ib_ports(host, node, expected)
        judge.nccl("nccl.single_node", host, node.get("nccl_local"), "nccl_single_node_busbw_gbps",
                   "single-node NCCL test", "%s NCCL" % host, why=judge.busy(node))
        judge.storage_node(host, node)
    judge.ib_fabric()
    judge.ib_write_bw()
    multi = measured.get("nccl_multi")
    if multi is not None and not _is_map(multi):
        raise ValidationError("validation_judge: measured.nccl_multi must be a dict {nodes, result}")
    subject = _subject_hosts((multi or {}).get("nodes"))
    judge.nccl("nccl.multi_node", subject, (multi or {}).get("result"), "nccl_multi_node_busbw_gbps",
               "multi-node NCCL test", "%s NCCL multi-node" % subject, rc=(multi or {}).get("rc"))
    judge.nccl_isolation()
    judge.storage_aggregate()
    judge.slurm()
    estimates = judge.checkpoint()

    summary = {"pass": 0, "fail": 0, "skip": 0}
    for check in judge.checks:
        summary[check["status"]] += 1
    return {
        "cluster": _plain(measured.get("cluster")),
        "generated_at": _plain(measured.get("generated_at")),
        "ok": summary["fail"] == 0,
        "summary": summary,
        "checks": judge.checks,
        "failures": [c["message"] for c in judge.checks if c["status"] == "fail"],
        "bandwidth": judge.bandwidth,
        "checkpoint": _plain(estimates),
        "thresholds": _plain(limits),
    }


# ---------------------------------------------------------------- node verdicts (deep checks)
# The checks a node must have run and passed before the deep checks resume it (playbooks/health_deep.yml).
DEEP_REQUIRED_CHECKS = ("gpu.count", "dcgm.diag", "nccl.single_node", "ib.write_bw")
NOTHING_RECORDED = "not run (nothing recorded for the node: not reached, or its checks stopped)"
# Slurm keeps a reason of any length, but sinfo and scontrol show it on one line: keep it readable.
REASON_MAX_CHARS = 200


def _belongs(subject, node):
    """A check's subject names this node: the node itself, ``<node> GPU3 (...)``, ``<node> mlx5_0:1``,
    ``<node>->peer mlx5_0`` (or ``peer-><node> ...``), ``<node>:/path``."""
    subject = to_text(subject)
    if subject == node or subject.startswith((node + " ", node + "->", node + ":")):
        return True
    pair = subject.split(" ", 1)[0]
    return "->" in pair and node in pair.split("->")


def _why(check, node):
    """A check's message on one line, without the node's name it starts with: ``gpu02: DCGM ...`` -> ``DCGM ...``,
    ``gpu02 GPU3 (...): ...`` -> ``GPU3 (...): ...``, ``gpu02->gpu02 mlx5_0: ...`` (a loopback) -> ``mlx5_0: ...``."""
    message = " ".join(to_text(check.get("message") or "").split())
    for lead in (node + ": ", "%s->%s " % (node, node), node + " "):
        if message.startswith(lead):
            return message[len(lead):]
    return message


def _reason(text, limit):
    """A Slurm drain reason: one line, at most ``limit`` characters, no double quote (scontrol strips one at either
    end of a Reason= value) nor backslash."""
    text = " ".join(to_text(text).replace('"', "'").replace("\\", "/").split())
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def node_verdicts(report, nodes, reason_prefix=None, required=None, loopback=True):
    """Each node's verdict from a validation_judge report: see validation_node_verdicts.yml. Without ``required``
    the checks are DEEP_REQUIRED_CHECKS, less ib.write_bw when ``loopback`` is false (no loopback was planned)."""
    if not _is_map(report) or not _is_list(report.get("checks")):
        raise ValidationError("validation_node_verdicts expects the report of validation_judge (a dict with checks)")
    if not _is_map(nodes):
        raise ValidationError("validation_node_verdicts: nodes must be a dict of node -> {drain, reason, "
                              "loopback_hcas}, got %s" % type(nodes).__name__)
    prefix = DEEP_REASON_PREFIX if reason_prefix is None else to_text(reason_prefix)
    if not prefix.strip():
        raise ValidationError("validation_node_verdicts: reason_prefix must not be empty (it would own every drain)")
    loopback = _bool(loopback, "loopback")  # as Ansible reads a boolean (a string from -e too)
    if loopback is None:
        loopback = True
    if required is None:
        required = DEEP_REQUIRED_CHECKS if loopback else [c for c in DEEP_REQUIRED_CHECKS if c != "ib.write_bw"]
    if not _is_list(required) or not all(isinstance(r, (str, bytes)) for r in required):
        raise ValidationError("validation_node_verdicts: required must be a list of check ids")
    checks = [c for c in report["checks"] if _is_map(c)]
    out = {"ok": True, "reason_prefix": prefix, "required": [to_text(r) for r in required], "nodes": [],
           "passed": [], "failed": [], "resume": [], "relabel": [], "drain": [], "failures": []}
    for name, info in nodes.items():
        node = to_text(name)
        info = info if _is_map(info) else {}
        mine = [c for c in checks if _belongs(c.get("subject"), node)]
        problems = []
        ran = []
        for check_id in out["required"]:
            found = [c for c in mine if c.get("id") == check_id]
            if check_id == "ib.write_bw":
                hcas = info.get("loopback_hcas")
                found = [c for c in found if to_text(c.get("subject")).startswith("%s->%s " % (node, node))]
                if hcas is not None and not _is_list(hcas):
                    raise ValidationError("validation_node_verdicts: nodes[%s].loopback_hcas must be a list" % node)
                if hcas is not None and not hcas:
                    problems.append((check_id, "no HCA to test (no InfiniBand port found)"))
                for hca in hcas or []:
                    if not [c for c in found if to_text(c.get("subject")).endswith(" " + to_text(hca))]:
                        problems.append((check_id, "no loopback result for %s" % to_text(hca)))
            if not found:
                if check_id != "ib.write_bw" or info.get("loopback_hcas") is None:
                    problems.append((check_id, "not run (no result)" if mine else NOTHING_RECORDED))
                continue
            for check in found:
                if check.get("status") == "skip":
                    problems.append((check_id, "not run: %s" % _why(check, node)))
                elif check.get("status") != "pass":
                    problems.append((check_id, _why(check, node)))
            if all(c.get("status") == "pass" for c in found):
                ran.append("%s%s" % (check_id, " (%d)" % len(found) if len(found) > 1 else ""))
        for check in mine:
            if check.get("id") not in out["required"] and check.get("status") == "fail":
                problems.append((to_text(check.get("id")), _why(check, node)))
        reason_now = to_text(info.get("reason")) if info.get("reason") else None
        drain = bool(info.get("drain"))
        owned = drain and reason_now is not None and reason_now.startswith(prefix)
        ok = not problems
        new_reason = None
        if ok:
            action = "resume" if owned else ("keep" if drain else "none")
            message = "%s: passed %s" % (node, ", ".join(ran))
        else:
            first_id, first_why = problems[0]
            new_reason = _reason("%s %s: %s" % (prefix.rstrip(), first_id, first_why), REASON_MAX_CHARS)
            action = "relabel" if owned else ("keep" if drain else "drain")
            if all(why == NOTHING_RECORDED for _check, why in problems):
                message = "%s: failed: %s: %s" % (node, ", ".join(c for c, _why in problems), NOTHING_RECORDED)
            else:
                message = "%s: failed %s" % (node, "; ".join("%s: %s" % p for p in problems))
        entry = {"node": node, "ok": ok, "owned": owned, "drain": drain, "reason": reason_now, "action": action,
                 "new_reason": new_reason if action in ("relabel", "drain") else None,
                 "problems": [{"check": c, "why": w} for c, w in problems], "message": message}
        out["nodes"].append(entry)
        (out["passed"] if ok else out["failed"]).append(node)
        if action == "resume":
            out["resume"].append(node)
        elif action in ("relabel", "drain"):
            out[action].append({"node": node, "reason": new_reason})
        if not ok:
            out["failures"].append(message)
    out["ok"] = not out["failed"]
    return out
