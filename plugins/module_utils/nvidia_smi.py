# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for nvidia-smi output (no Ansible import, standard library only).

Every parser ignores lines it does not know and accepts partial or truncated output: the modules decide
what is missing, the parsers never raise on odd input. ``N/A``, ``[N/A]``, ``[Not Supported]`` and
"Requested functionality has been deprecated" all become ``None``.

Formats covered (see tests/unit/plugins/module_utils/test_nvidia_smi.py and the conformance tests that
run these parsers over real outputs):

- ``nvidia-smi -q -x``: both the old schema (``power_readings``/``power_limit``/``enforced_power_limit``,
  ``clocks_throttle_reasons``; DTD v11 and older) and the new one (``gpu_power_readings``/
  ``current_power_limit``/``requested_power_limit``, ``clocks_event_reasons``; DTD v12/v13, driver R535+).
- ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``.
- ``nvidia-smi topo -m`` (old ``mlx5_N`` column labels and new ``NICn`` labels with a "NIC Legend").
- the messages printed by the setters ``-lgc`` and ``-lmc`` (the clamped clocks, which cannot be read back).

The ``-q`` text, ``-L`` and ``-pm``/``-pl``/``-ac`` message parsers, which no plugin uses, are test-only:
tests/formats/nvidia_smi.py.

One function here does I/O, through a runner it is given: ``read_gpus``, the one ``nvidia-smi -q -x`` read of
every module that needs the GPUs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import csv
import re
import xml.etree.ElementTree as ET

# Values that mean "no value" in every nvidia-smi output format.
_NONE_VALUES = frozenset([
    "", "n/a", "[n/a]", "not supported", "[not supported]", "[unknown error]", "unknown error",
    "[insufficient permissions]", "insufficient permissions", "[gpu is lost]", "gpu is lost",
    "[gpu requires reset]", "requested functionality has been deprecated", "none",
])
# ``None`` is a real value for a few string fields (gpu_recovery_action, virtualization mode): keep it there.
_KEEP_NONE_WORD = frozenset(["gpu_recovery_action", "virtualization_mode", "compute_mode"])

# Units nvidia-smi appends to values when ``nounits`` is not given (and always in -q/-q -x output).
_UNIT_RE = re.compile(r"^(-?\d+(?:\.\d+)?)\s*(W|MHz|MiB|KiB|GiB|KB/s|%|C|mV|us|ms|s|bank\(s\))$")
_INT_RE = re.compile(r"^-?\d+$")
_FLOAT_RE = re.compile(r"^-?\d+\.\d+$")

# --query-gpu fields whose values look numeric but are identifiers or versions: never convert them.
STRING_FIELDS = frozenset([
    "name", "gpu_name", "uuid", "gpu_uuid", "serial", "gpu_serial", "pci.bus_id", "gpu_bus_id", "pci.bus",
    "pci.device", "pci.domain", "pci.device_id", "pci.sub_device_id", "driver_version", "vbios_version",
    "inforom.img", "inforom.image", "inforom.oem", "inforom.ecc", "inforom.pwr", "inforom.power",
    "timestamp", "pstate", "board_id", "module_id", "gpu_recovery_action", "compute_mode",
])

#: The fields the nvidia_smi module reads in its one ``--query-gpu`` call (csv,noheader,nounits).
STATE_QUERY_FIELDS = [
    "index", "uuid", "pci.bus_id", "name", "persistence_mode",
    "power.limit", "power.default_limit", "power.min_limit", "power.max_limit", "enforced.power.limit",
    "clocks.max.sm", "clocks.max.graphics", "clocks.max.memory",
    "clocks.applications.graphics", "clocks.applications.memory",
    "clocks.default_applications.graphics", "clocks.default_applications.memory",
]


def _is_none(value):
    return value is None or value.strip().lower() in _NONE_VALUES


def to_number(value):
    """``"700.00 W"`` -> 700.0, ``"1980 MHz"`` -> 1980, ``"42"`` -> 42; anything else unchanged."""
    if value is None:
        return None
    text = value.strip()
    match = _UNIT_RE.match(text)
    if match:
        text = match.group(1)
    if _INT_RE.match(text):
        return int(text)
    if _FLOAT_RE.match(text):
        return float(text)
    return value


def to_bool(value):
    """Enabled/Disabled, Yes/No, Active/Not Active, On/Off, 1/0 -> bool; anything else -> None."""
    if value is None:
        return None
    text = value.strip().lower()
    if text in ("enabled", "yes", "active", "on", "1", "true"):
        return True
    if text in ("disabled", "no", "not active", "off", "0", "false"):
        return False
    return None


# ----------------------------------------------------------------------------------------------- -q -x

def _xml_root(text):
    """Parse XML; on a parse error (truncated output) return what was built up to the error."""
    try:
        return ET.fromstring(text), False
    except ET.ParseError:
        pass
    parser = ET.XMLPullParser(events=("start",))
    root = None
    try:
        # Feed line by line so that everything before the broken spot is turned into elements.
        for line in text.splitlines(True):
            parser.feed(line)
            for _event, elem in parser.read_events():
                if root is None:
                    root = elem
    except ET.ParseError:
        pass
    try:
        for _event, elem in parser.read_events():
            if root is None:
                root = elem
    except ET.ParseError:
        pass
    return root, True


def _text(elem, path):
    if elem is None:
        return None
    node = elem.find(path)
    if node is None or node.text is None:
        return None
    value = node.text.strip()
    return None if _is_none(value) else value


def _num(elem, path):
    return to_number(_text(elem, path))


def _first(*values):
    for value in values:
        if value is not None:
            return value
    return None


def _sum(values):
    values = [v for v in values if isinstance(v, (int, float))]
    return sum(values) if values else None


def _ecc_counts(gpu):
    errors = gpu.find("ecc_errors")
    result = {
        "mode": _text(gpu, "ecc_mode/current_ecc"),
        "volatile_uncorrectable": None, "volatile_correctable": None,
        "aggregate_uncorrectable": None, "aggregate_correctable": None,
    }
    if errors is None:
        return result
    for scope in ("volatile", "aggregate"):
        node = errors.find(scope)
        if node is None:
            continue
        if node.find("double_bit") is not None or node.find("single_bit") is not None:
            # DTD v11 and older: single_bit (corrected) / double_bit (uncorrected) totals.
            unc = _num(node, "double_bit/total")
            cor = _num(node, "single_bit/total")
        else:
            # DTD v12+: SRAM/DRAM split (v12: sram_uncorrectable; v13: parity + SEC-DED).
            unc = _sum([_num(node, tag) for tag in
                        ("dram_uncorrectable", "sram_uncorrectable", "sram_uncorrectable_parity",
                         "sram_uncorrectable_secded")])
            cor = _sum([_num(node, tag) for tag in ("dram_correctable", "sram_correctable")])
        result[scope + "_uncorrectable"] = unc if isinstance(unc, (int, float)) else None
        result[scope + "_correctable"] = cor if isinstance(cor, (int, float)) else None
    return result


def _clock_event_reasons(gpu):
    reasons = {}
    for section, prefix in (("clocks_event_reasons", "clocks_event_reason_"),
                            ("clocks_throttle_reasons", "clocks_throttle_reason_")):
        node = gpu.find(section)
        if node is None:
            continue
        for child in node:
            name = child.tag[len(prefix):] if child.tag.startswith(prefix) else child.tag
            state = to_bool(child.text)
            if state is not None:
                reasons[name] = state
    return reasons


def _pending(node_text_values):
    """True when any value says Yes, False when at least one says No, else None."""
    states = [to_bool(v) for v in node_text_values]
    if any(s is True for s in states):
        return True
    if any(s is False for s in states):
        return False
    return None


def _parse_xml_gpu(gpu, position):
    power = gpu.find("gpu_power_readings")
    if power is None:
        power = gpu.find("power_readings")
    retired = gpu.find("retired_pages")
    remapped = gpu.find("remapped_rows")
    return {
        "index": position,
        "pci_bus_id": _first(gpu.get("id"), _text(gpu, "pci/pci_bus_id")),
        "uuid": _text(gpu, "uuid"),
        "name": _text(gpu, "product_name"),
        "serial": _text(gpu, "serial"),
        "architecture": _text(gpu, "product_architecture"),
        "persistence_mode": to_bool(_text(gpu, "persistence_mode")),
        "mig_enabled": to_bool(_text(gpu, "mig_mode/current_mig")),
        "mig_pending": to_bool(_text(gpu, "mig_mode/pending_mig")),
        # power_limit is what was requested (idempotence), enforced_power_limit what the driver enforces after
        # every limiter; the new schema calls them requested_power_limit and current_power_limit.
        "power_limit_w": _first(_num(power, "requested_power_limit"), _num(power, "power_limit")),
        "enforced_power_limit_w": _first(_num(power, "enforced_power_limit"), _num(power, "current_power_limit")),
        "default_power_limit_w": _num(power, "default_power_limit"),
        "min_power_limit_w": _num(power, "min_power_limit"),
        "max_power_limit_w": _num(power, "max_power_limit"),
        "power_draw_w": _first(_num(power, "power_draw"), _num(power, "instant_power_draw"),
                               _num(power, "average_power_draw")),
        "sm_clock_mhz": _num(gpu, "clocks/sm_clock"),
        "mem_clock_mhz": _num(gpu, "clocks/mem_clock"),
        "max_sm_clock_mhz": _num(gpu, "max_clocks/sm_clock"),
        "max_graphics_clock_mhz": _num(gpu, "max_clocks/graphics_clock"),
        "max_mem_clock_mhz": _num(gpu, "max_clocks/mem_clock"),
        "applications_graphics_clock_mhz": _num(gpu, "applications_clocks/graphics_clock"),
        "applications_mem_clock_mhz": _num(gpu, "applications_clocks/mem_clock"),
        "default_applications_graphics_clock_mhz": _num(gpu, "default_applications_clocks/graphics_clock"),
        "default_applications_mem_clock_mhz": _num(gpu, "default_applications_clocks/mem_clock"),
        "memory_total_mib": _num(gpu, "fb_memory_usage/total"),
        "memory_used_mib": _num(gpu, "fb_memory_usage/used"),
        "ecc": _ecc_counts(gpu),
        "retired_pages_pending": _pending([_text(retired, "pending_retirement"), _text(retired, "pending_blacklist")]),
        "remapped_rows_pending": _pending([_text(remapped, "remapped_row_pending")]),
        "remapped_rows_failure": _pending([_text(remapped, "remapped_row_failure")]),
        "clock_event_reasons": _clock_event_reasons(gpu),
        "temperature_c": _num(gpu, "temperature/gpu_temp"),
        "performance_state": _text(gpu, "performance_state"),
    }


def parse_xml(text):
    """Parse ``nvidia-smi -q -x``.

    Returns ``{driver_version, cuda_version, attached_gpus, truncated, gpus: [...]}``. A truncated document
    gives the GPUs (and fields) that were complete enough to read, with ``truncated: True``.
    """
    result = {"driver_version": None, "cuda_version": None, "attached_gpus": None, "truncated": False, "gpus": []}
    if not text or not text.strip():
        return result
    root, truncated = _xml_root(text)
    result["truncated"] = truncated
    if root is None:
        return result
    result["driver_version"] = _text(root, "driver_version")
    result["cuda_version"] = _text(root, "cuda_version")
    result["attached_gpus"] = _num(root, "attached_gpus")
    for position, gpu in enumerate(root.findall("gpu")):
        result["gpus"].append(_parse_xml_gpu(gpu, position))
    return result


def parse_supported_clocks(text):
    """The ``<supported_clocks>`` of ``nvidia-smi -q -x``: ``{uuid: {memory MHz: [graphics MHz, ...]}}``.

    A GPU whose section is missing or says N/A maps to ``None`` (the driver does not list its pairs). ``-q -x``
    cannot be narrowed with ``-d SUPPORTED_CLOCKS`` (the driver refuses -d with -x), so this reads the full document.
    """
    result = {}
    if not text or not text.strip():
        return result
    root, _truncated = _xml_root(text)
    if root is None:
        return result
    for position, gpu in enumerate(root.findall("gpu")):
        key = _text(gpu, "uuid") or str(position)
        section = gpu.find("supported_clocks")
        pairs = {}
        for mem in section.findall("supported_mem_clock") if section is not None else []:
            mem_mhz = _num(mem, "value")
            if not isinstance(mem_mhz, int):
                continue
            pairs[mem_mhz] = [g for g in (to_number(node.text) for node in mem.findall("supported_graphics_clock"))
                              if isinstance(g, int)]
        result[key] = pairs or None
    return result


# ----------------------------------------------------------------------------------------- --query-gpu

_HEADER_CELL_RE = re.compile(r"^[a-z][a-z0-9_.]*(?: \[[^\]]+\])?$")


def _header_names(cells):
    if cells and all(_HEADER_CELL_RE.match(c.strip()) for c in cells):
        return [c.strip().split(" [", 1)[0] for c in cells]
    return None


def convert_query_value(field, value):
    """One --query-gpu cell: ``None`` for N/A forms, numbers for numbers (units stripped), else the text."""
    if value is None:
        return None
    text = value.strip()
    if text.lower() == "none" and field in _KEEP_NONE_WORD:
        return text
    if _is_none(text):
        return None
    if field in STRING_FIELDS:
        return text
    return to_number(text)


def parse_query_csv(text, fields=None):
    """Parse ``--query-gpu`` CSV output into a list of dicts keyed by ``fields``.

    Works with and without the header line and with and without units. Without ``fields`` the names come
    from the header (the ``[unit]`` suffix removed). Rows with the wrong number of cells (a truncated last
    line, a warning printed between rows) are dropped. ``Enabled``/``Disabled`` stay strings.
    """
    rows = []
    if not text:
        return rows
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return rows
    parsed = list(csv.reader(lines, skipinitialspace=True))
    header = _header_names(parsed[0])
    if header is not None:
        parsed = parsed[1:]
        if fields is None:
            fields = header
    if not fields:
        return rows
    fields = list(fields)
    for cells in parsed:
        if len(cells) != len(fields):
            continue
        rows.append(dict((f, convert_query_value(f, c)) for f, c in zip(fields, cells)))
    return rows


# ------------------------------------------------------------------------------------ nvlink -s / -e

# `GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)`, then `\t Link 0: 26.562 GB/s` (-s) or counters (-e).
_NVLINK_GPU_RE = re.compile(r"^GPU (\d+): .*?(?:\(UUID: ([^)]+)\))?\s*$")
_NVLINK_LINK_RE = re.compile(r"^\s*Link (\d+):\s*(.*?)\s*$")
_NVLINK_COUNTER_RE = re.compile(r"^([A-Za-z][A-Za-z0-9 ()_/-]*?):\s*(\S+)\s*$")


def parse_nvlink_status(text):
    """``nvidia-smi nvlink -s``: [(index, uuid, {link: active})]. A link is inactive when the driver prints
    ``<inactive>`` or a speed of 0 GB/s. ``index`` is the text nvidia-smi printed; ``uuid`` None without one."""
    gpus = []
    for line in text.splitlines():
        head = _NVLINK_GPU_RE.match(line)
        if head:
            gpus.append((head.group(1), head.group(2), {}))
            continue
        link = _NVLINK_LINK_RE.match(line)
        if link and gpus:
            value = link.group(2).lower()
            speed = re.match(r"^([\d.]+)\s*gb/s", value)
            gpus[-1][2][int(link.group(1))] = "inactive" not in value and not (speed and float(speed.group(1)) == 0)
    return gpus


def parse_nvlink_errors(text):
    """``nvidia-smi nvlink -e``: {gpu key: {link: {counter: value}}}, from either layout the drivers print
    ("Link 0: Replay Errors: 0" lines, or "Link 0:" followed by "Replay Errors: 0" lines). The GPU key is its UUID,
    or "GPU <index>" without one; the link is the text printed; a counter that is not a whole number is left out."""
    counters = {}
    gpu = link = None
    for line in text.splitlines():
        head = _NVLINK_GPU_RE.match(line)
        if head:
            gpu = head.group(2) or "GPU %s" % head.group(1)
            counters.setdefault(gpu, {})
            link = None
            continue
        if gpu is None:
            continue
        found = _NVLINK_LINK_RE.match(line)
        if found:
            link = found.group(1)
            rest = found.group(2)
        elif link is not None and line.strip():
            rest = line.strip()
        else:
            continue
        pair = _NVLINK_COUNTER_RE.match(rest) if rest else None
        value = _nvlink_int(pair.group(2)) if pair else None
        if value is not None:
            counters[gpu].setdefault(link, {})[pair.group(1).strip()] = value
    return counters


def _nvlink_int(text):
    return int(text) if _INT_RE.match(text or "") else None


# --------------------------------------------------------------------------------------------- topo -m

_MULTIWORD_LABELS = (("GPU NUMA ID", "GPU_NUMA_ID"), ("CPU Affinity", "CPU_Affinity"),
                     ("NUMA Affinity", "NUMA_Affinity"))
_NIC_LEGEND_RE = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_GPU_LABEL_RE = re.compile(r"^GPU\d+$")
# Terminal escapes (CSI sequences): the driver underlines the header of ``topo -m`` with ESC[4m ... ESC[0m even when
# stdout is not a terminal (recorded on driver 580.159.04: tests/unit/.../fixtures/nvidia_smi/r580/topo-m-h200.txt).
_ANSI_CSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_terminal_escapes(text):
    """``text`` without terminal escape sequences (CSI: ESC [ ... final byte)."""
    return _ANSI_CSI_RE.sub("", text or "")


def _affinity_value(value, numeric=False):
    if value is None or _is_none(value):
        return None
    if numeric and _INT_RE.match(value):
        return int(value)
    return value


def parse_topo_matrix(text):
    """Parse ``nvidia-smi topo -m`` (also ``-mp``).

    Returns ``{gpus, nics, links, nic_names, cpu_affinity, numa_affinity, gpu_numa_id}``: ``links[a][b]`` is
    the connection type ("X", "NV18", "PIX", "SYS"...); ``nic_names`` maps a NIC column label to the device
    name (``NIC0`` -> ``mlx5_0`` from the "NIC Legend"; old output labels columns ``mlx5_0`` directly).
    Tabs and runs of spaces both separate cells. Terminal escapes (the driver's underlined header) are dropped
    first.
    """
    result = {"gpus": [], "nics": [], "links": {}, "nic_names": {}, "cpu_affinity": {}, "numa_affinity": {},
              "gpu_numa_id": {}}
    text = strip_terminal_escapes(text)
    if not text:
        return result
    devices = None
    extra = []
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        legend = _NIC_LEGEND_RE.match(line)
        if legend:
            result["nic_names"][legend.group(1)] = legend.group(2)
            continue
        if devices is None:
            header = line
            for words, token in _MULTIWORD_LABELS:
                header = header.replace(words, token)
            tokens = header.split()
            if tokens and _GPU_LABEL_RE.match(tokens[0]) and line[:1] in (" ", "\t"):
                devices = []
                for token in tokens:
                    if token in ("CPU_Affinity", "NUMA_Affinity", "GPU_NUMA_ID"):
                        extra.append(token)
                    elif not extra:
                        devices.append(token)
                for label in devices:
                    (result["gpus"] if _GPU_LABEL_RE.match(label) else result["nics"]).append(label)
            continue
        tokens = line.split()
        if not tokens or tokens[0] not in devices:
            continue
        label = tokens[0]
        values = tokens[1:]
        result["links"][label] = dict(zip(devices, values[:len(devices)]))
        if label in result["gpus"]:
            tail = values[len(devices):]
            for index, name in enumerate(extra):
                value = tail[index] if index < len(tail) else None
                if name == "CPU_Affinity":
                    result["cpu_affinity"][label] = _affinity_value(value)
                elif name == "NUMA_Affinity":
                    result["numa_affinity"][label] = _affinity_value(value, numeric=True)
                else:
                    result["gpu_numa_id"][label] = _affinity_value(value, numeric=True)
    for nic in result["nics"]:
        result["nic_names"].setdefault(nic, nic)
    return result


# ------------------------------------------------------------------------------------- setter messages

_LGC_RE = re.compile(r'GPU clocks set to "\(gpuClkMin (\d+), gpuClkMax (\d+)\)" for GPU (\S+?)\.?\s*$')
_LMC_RE = re.compile(r'Memory clocks set to "\(memClkMin (\d+), memClkMax (\d+)\)" for GPU (\S+?)\.?\s*$')


def _scan(regex, text, build):
    found = []
    for line in (text or "").splitlines():
        match = regex.search(line)
        if match:
            found.append(build(match))
    return found


def parse_locked_clocks_output(text):
    """``-lgc``: ``[{pci_bus_id, min, max}]`` as the driver applied them (clamped)."""
    return _scan(_LGC_RE, text, lambda m: {"pci_bus_id": m.group(3), "min": int(m.group(1)), "max": int(m.group(2))})


def parse_locked_memory_clocks_output(text):
    """``-lmc``: ``[{pci_bus_id, min, max}]`` as the driver applied them."""
    return _scan(_LMC_RE, text, lambda m: {"pci_bus_id": m.group(3), "min": int(m.group(1)), "max": int(m.group(2))})


def read_gpus(runner, warn):
    """The one ``nvidia-smi -q -x`` read of the modules: parse_xml's result. Fails the module (through the runner,
    with the command and output) when the tool fails or lists no GPU; ``warn`` is told when the output was cut
    short."""
    rc, out, err = runner.run(["-q", "-x"], what="nvidia-smi -q -x")
    data = parse_xml(out)
    if not data["gpus"]:
        runner.fail(runner.calls[-1], rc, out, err, what="nvidia-smi -q -x (no GPU in the output)")
    if data["truncated"]:
        warn("the output of nvidia-smi -q -x was cut short; only %d GPU(s) could be read" % len(data["gpus"]))
    return data
