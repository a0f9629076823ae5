# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST-ONLY parsers for ``dcgmi health -c``, ``dcgmi discovery -l`` and ``dcgmi nvlink -s``.

No plugin reads these outputs, so the parsers live here, not in plugins/module_utils/dcgm.py. They keep the lab's
dcgmi emulator (tests/lab/unit/test_emulator_lfs_dcgm.py) and the real samples (tests/conformance/) honest about the
formats. Shared helpers come from the plugin modules; the JSON form's incidents are read by the health check's own
reader, so that the samples test the code that runs on the nodes.
"""

import re

from ansible_collections.clusterforge.gpu.plugins.module_utils.dcgm import _extract_json
from ansible_collections.clusterforge.gpu.plugins.module_utils.healthcheck import parse_health_incidents

_HEALTH_WORDS = {"healthy": "healthy", "warning": "warning", "failure": "failure", "internal error": "error"}


def _health_word(value):
    if value is None:
        return None
    return _HEALTH_WORDS.get(str(value).strip().lower(), str(value).strip().lower() or None)


def _health_from_json(data):
    """The JSON form: its incidents read by the health check's own reader (parse_health_incidents of
    plugins/module_utils/healthcheck.py, which the node program imports), the entities and their health here."""
    body = data.get("body") or {}
    overall = _health_word((body.get("Overall Health") or {}).get("value"))
    entities = []
    for group, node in body.items():
        if group == "Overall Health" or not isinstance(node, dict):
            continue
        for eid, enode in (node.get("children") or {}).items():
            if isinstance(enode, dict):
                entities.append({"group": group, "id": _entity_id(eid), "health": _health_word(enode.get("value"))})
    incidents = [{"group": item["group"], "id": _entity_id(item["entity"]), "system": item["system"],
                  "health": _health_word(item["health"]), "message": item["text"]}
                 for item in parse_health_incidents(body)]
    return {"overall": overall, "entities": entities, "incidents": incidents, "errors": []}


def _entity_id(value):
    return int(value) if str(value).isdigit() else value


def parse_health(text):
    """Parse ``dcgmi health -c`` (tree table) or ``dcgmi health -c -j``.

    Returns ``{"overall": "healthy"|"warning"|"failure"|None, "entities": [{"group", "id", "health"}],
    "incidents": [{"group", "id", "system", "health", "message"}], "errors": [...]}``. ``errors`` holds dcgmi
    error lines such as ``Error: Health watches not enabled. Please enable watches.`` (``overall`` is None then).
    """
    text = text or ""
    if text.lstrip().startswith("{"):
        try:
            return _health_from_json(_extract_json(text))
        except ValueError:
            pass
    result = {"overall": None, "entities": [], "incidents": [], "errors": []}
    group = None
    entity = None
    incident = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        if not line.startswith("|"):
            if not line.startswith("+") and line.strip().lower().startswith("error"):
                result["errors"].append(line.strip())
            continue
        parts = line[1:].rstrip("|").split("|")
        if len(parts) < 2:
            continue  # header row spans both columns
        label = parts[0][1:] if parts[0].startswith(" ") else parts[0]
        value = "|".join(parts[1:]).strip()
        text_label = label.strip()
        if text_label == "Overall Health":
            result["overall"] = _health_word(value)
            continue
        if not text_label:
            if incident is not None and value:
                incident["message"] = (incident["message"] + " " + value).strip()
            continue
        if not text_label.startswith("->"):
            group, entity, incident = text_label, None, None
            continue
        level = (len(label) - len(label.lstrip(" "))) // 3 + 1
        name = text_label[2:].strip()
        if level == 1:
            entity = {"group": group, "id": int(name) if name.isdigit() else name, "health": _health_word(value)}
            result["entities"].append(entity)
            incident = None
        elif level == 2:
            incident = None  # "-> Errors"
        elif entity is not None:
            incident = {"group": group, "id": entity["id"], "system": name, "health": _health_word(value),
                        "message": ""}
            result["incidents"].append(incident)
    return result


# ---------------------------------------------------------------------------------------------------- discovery

def parse_discovery(text):
    """Parse ``dcgmi discovery -l``: GPUs (id, name, PCI bus id, UUID), NvSwitch ids, ConnectX and CPU counts."""
    result = {"gpu_count": None, "gpus": [], "nvswitch_count": None, "nvswitches": [],
              "connectx_count": None, "cpu_count": None}
    section = None
    gpu = None
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        m = re.match(r"^(\d+)\s+(GPU|NvSwitch|ConnectX|CPU)(?:es|s)?\b.*found", line.strip())
        if m:
            section = m.group(2)
            key = {"GPU": "gpu_count", "NvSwitch": "nvswitch_count", "ConnectX": "connectx_count",
                   "CPU": "cpu_count"}[section]
            result[key] = int(m.group(1))
            gpu = None
            continue
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if section == "GPU" and len(cells) >= 2:
            if cells[0] == "GPU ID":
                continue
            if cells[0].isdigit():
                gpu = {"id": int(cells[0]), "name": None, "pci_bus_id": None, "uuid": None}
                result["gpus"].append(gpu)
            if gpu is not None:
                info = cells[1]
                for prefix, key in (("Name:", "name"), ("PCI Bus ID:", "pci_bus_id"), ("Device UUID:", "uuid")):
                    if info.startswith(prefix):
                        gpu[key] = info[len(prefix):].strip()
        elif section == "NvSwitch" and cells and cells[0].isdigit():
            result["nvswitches"].append(int(cells[0]))
    if result["gpu_count"] is None and result["gpus"]:
        result["gpu_count"] = len(result["gpus"])
    return result


def parse_nvlink_status(text):
    """Parse ``dcgmi nvlink -s``: {"gpus": {id: [state per link]}, "nvswitches": {...}} with states
    ``up``/``down``/``disabled``/``unsupported`` (DCGM's key: U, D, X, _)."""
    states = {"U": "up", "D": "down", "X": "disabled", "_": "unsupported"}
    result = {"gpus": {}, "nvswitches": {}}
    section = None
    current = None
    for raw in (text or "").splitlines():
        line = raw.strip()
        if line == "GPUs:":
            section = "gpus"
            continue
        if line == "NvSwitches:":
            section = "nvswitches"
            continue
        m = re.match(r"^(?:gpuId|physicalId)\s+(\d+):$", line)
        if m and section:
            current = int(m.group(1))
            result[section][current] = []
            continue
        if current is not None and section and line and all(tok in states for tok in line.split()):
            result[section][current] = [states[tok] for tok in line.split()]
            current = None
    return result
