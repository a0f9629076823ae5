# ClusterForge TEST EMULATOR support code for ibstat/ibdiagnet: not the real tools. Test-only; installed only into lab and molecule containers.
"""Shared state for the ibstat and ibdiagnet emulators.

Profile from $CLUSTERFORGE_EMU_IB_PROFILE: ``ndr`` (default, Rate 400) or ``hdr`` (Rate 200): 8 ConnectX-7
HCAs mlx5_0..mlx5_7 (CA type MT4129), one InfiniBand port each, Active/LinkUp, cabled to two Quantum-2 leaf
switches. Injections live in $CLUSTERFORGE_EMU_STATE_DIR/ib.json (default /var/lib/clusterforge-emu):
``{"ports": {"mlx5_3": {"down": true}, "mlx5_2": {"rate": 200}}, "ibdiagnet_errors": N}``, and
``"link_layer": "Ethernet"`` for RoCE NICs (``ibstat --emu-link-layer Ethernet``: LID 0, no subnet manager).
"""

import json
import os

import _cf_emu_identity

STATE_DIR = os.environ.get("CLUSTERFORGE_EMU_STATE_DIR", "/var/lib/clusterforge-emu")
STATE_FILE = os.path.join(STATE_DIR, "ib.json")
PROFILES = {"ndr": 400, "hdr": 200}


def profile():
    name = os.environ.get("CLUSTERFORGE_EMU_IB_PROFILE", "ndr").strip().lower() or "ndr"
    if name not in PROFILES:
        raise SystemExit("CLUSTERFORGE_EMU_IB_PROFILE must be one of %s, got %r" % (", ".join(PROFILES), name))
    return name


def load():
    try:
        with open(STATE_FILE) as f:
            return json.load(f)
    except (IOError, OSError, ValueError):
        return {"ports": {}, "ibdiagnet_errors": 0}


def save(state):
    os.makedirs(STATE_DIR, exist_ok=True)
    tmp = STATE_FILE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1, sort_keys=True)
    os.replace(tmp, STATE_FILE)


def reset():
    try:
        os.remove(STATE_FILE)
    except OSError:
        pass


def _guid(i):
    """Port GUID of HCA i: the lab's fixed GUIDs, or ones of this node's own identity (_cf_emu_identity)."""
    if not _cf_emu_identity.identity():
        return "0x946dae0300%06x" % (0x3c1a20 + i * 0x10)
    base = int(_cf_emu_identity.digest("hca-guid")[:8], 16)
    return "0x946dae03%08x" % ((base + i * 0x10) & 0xffffffff)


def hcas():
    """The 8 HCAs with their current port state."""
    rate = PROFILES[profile()]
    state = load()
    inj = state.get("ports", {})
    link_layer = state.get("link_layer", "InfiniBand")
    out = []
    for i in range(8):
        name = "mlx5_%d" % i
        guid = _guid(i)
        port = {"state": "Active", "phys": "LinkUp", "rate": rate, "lid": 0x80 + i * 3, "sm_lid": 1,
                "link_layer": link_layer}
        if link_layer == "Ethernet":
            port.update(lid=0, sm_lid=0)
        extra = inj.get(name, {})
        if extra.get("rate"):
            port["rate"] = int(extra["rate"])
        if extra.get("down"):
            port.update(state="Down", phys="Polling", rate=10, lid=65535 if link_layer == "InfiniBand" else 0, sm_lid=0)
        out.append({"name": name, "ca_type": "MT4129", "fw": "28.39.1002", "hw": "0", "guid": guid, "port": port,
                    "switch": "cf-leaf%02d" % (i // 4 + 1), "switch_port": (i % 4) * 2 + 1})
    return out
