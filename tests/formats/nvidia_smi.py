# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST-ONLY parsers for ``nvidia-smi -q`` (text), ``nvidia-smi -L`` and the messages of the ``-ac``, ``-pl``
and ``-pm`` setters.

No plugin reads these outputs (the modules read ``-q -x`` and ``--query-gpu``, and read the state back after a
setter), so the parsers live here, not in plugins/module_utils/nvidia_smi.py. They keep the lab's nvidia-smi
emulator (tests/lab/unit/test_emulator_nvidia_smi.py) and the real samples (tests/conformance/) honest about the
formats. Shared helpers come from the plugin module.
"""

import re

from ansible_collections.clusterforge.gpu.plugins.module_utils.nvidia_smi import (
    _first, _is_none, _pending, _scan, to_bool, to_number,
)


# ------------------------------------------------------------------------------------- -q (text) and -L

_Q_KEY_RE = re.compile(r"^(\s*)([^:]+?)\s*:\s?(.*)$")
_Q_GPU_RE = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$")


def parse_q_text(text):
    """Parse a few fields of ``nvidia-smi -q`` text output (any ``-d`` filter).

    Returns ``{driver_version, cuda_version, attached_gpus, gpus: [{pci_bus_id, name, uuid, persistence_mode,
    power_limit_w, default_power_limit_w, min_power_limit_w, max_power_limit_w, max_sm_clock_mhz,
    retired_pages_pending, remapped_rows_pending, fields}]}``; ``fields`` has every "Section/Key" read.
    """
    result = {"driver_version": None, "cuda_version": None, "attached_gpus": None, "gpus": []}
    gpu = None
    stack = []
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        start = _Q_GPU_RE.match(line)
        if start:
            gpu = {"pci_bus_id": start.group(1), "fields": {}}
            result["gpus"].append(gpu)
            stack = []
            continue
        indent = len(line) - len(line.lstrip(" "))
        match = _Q_KEY_RE.match(line)
        if match:
            key, value = match.group(2).strip(), match.group(3).strip()
            if gpu is None:
                if key == "Driver Version":
                    result["driver_version"] = value
                elif key == "CUDA Version":
                    result["cuda_version"] = value
                elif key == "Attached GPUs":
                    result["attached_gpus"] = to_number(value)
                continue
            while stack and stack[-1][0] >= indent:
                stack.pop()
            path = "/".join([s[1] for s in stack] + [key])
            gpu["fields"][path] = None if _is_none(value) else value
        elif gpu is not None:
            title = line.strip().rstrip(":").strip()
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, title))
    for gpu in result["gpus"]:
        fields = gpu["fields"]

        def power(name, fields=fields):
            return to_number(_first(fields.get("GPU Power Readings/" + name), fields.get("Power Readings/" + name)))

        gpu["name"] = fields.get("Product Name")
        gpu["uuid"] = fields.get("GPU UUID")
        gpu["persistence_mode"] = to_bool(fields.get("Persistence Mode"))
        gpu["power_limit_w"] = _first(power("Requested Power Limit"), power("Power Limit"))
        gpu["enforced_power_limit_w"] = _first(power("Enforced Power Limit"), power("Current Power Limit"))
        gpu["default_power_limit_w"] = power("Default Power Limit")
        gpu["min_power_limit_w"] = power("Min Power Limit")
        gpu["max_power_limit_w"] = power("Max Power Limit")
        gpu["max_sm_clock_mhz"] = to_number(fields.get("Max Clocks/SM"))
        gpu["max_mem_clock_mhz"] = to_number(fields.get("Max Clocks/Memory"))
        gpu["retired_pages_pending"] = _pending([fields.get("Retired Pages/Pending Page Blacklist"),
                                                 fields.get("Retired Pages/Pending Page Retirement")])
        gpu["remapped_rows_pending"] = _pending([fields.get("Remapped Rows/Pending")])
    return result


_LIST_RE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9A-Fa-f-]+)\)\s*$")


def parse_list(text):
    """Parse ``nvidia-smi -L``: ``[{index, name, uuid}]`` (MIG device lines are ignored)."""
    gpus = []
    for line in (text or "").splitlines():
        match = _LIST_RE.match(line.strip())
        if match:
            gpus.append({"index": int(match.group(1)), "name": match.group(2), "uuid": match.group(3)})
    return gpus


# ------------------------------------------------------------------------------------- setter messages

_AC_RE = re.compile(r'Applications clocks set to "\(MEM (\d+), SM (\d+)\)" for GPU (\S+?)\.?\s*$')
_PL_RE = re.compile(r"Power limit for GPU (\S+) was set to (\d+(?:\.\d+)?) W from (\d+(?:\.\d+)?) W\.?\s*$")
_PM_RE = re.compile(r"(?:(Enabled|Disabled) persistence mode|Persistence mode is already (Enabled|Disabled))"
                    r" for GPU (\S+?)\.?\s*$")
_PL_RANGE_RE = re.compile(r"Provided power limit (\d+(?:\.\d+)?) W is not a valid power limit which should be "
                          r"between (\d+(?:\.\d+)?) W and (\d+(?:\.\d+)?) W for GPU (\S+)")


def parse_application_clocks_output(text):
    """``-ac``: ``[{pci_bus_id, memory, graphics}]``."""
    return _scan(_AC_RE, text,
                 lambda m: {"pci_bus_id": m.group(3), "memory": int(m.group(1)), "graphics": int(m.group(2))})


def parse_power_limit_output(text):
    """``-pl``: ``[{pci_bus_id, power_limit_w, previous_w}]``."""
    return _scan(_PL_RE, text, lambda m: {"pci_bus_id": m.group(1), "power_limit_w": float(m.group(2)),
                                          "previous_w": float(m.group(3))})


def parse_power_limit_range_error(text):
    """The out-of-range ``-pl`` error: ``[{pci_bus_id, requested_w, min_w, max_w}]``."""
    return _scan(_PL_RANGE_RE, text, lambda m: {"pci_bus_id": m.group(4), "requested_w": float(m.group(1)),
                                                "min_w": float(m.group(2)), "max_w": float(m.group(3))})


def parse_persistence_output(text):
    """``-pm``: ``[{pci_bus_id, enabled, already}]``."""
    return _scan(_PM_RE, text, lambda m: {"pci_bus_id": m.group(3),
                                          "enabled": (m.group(1) or m.group(2)) == "Enabled",
                                          "already": m.group(2) is not None})
