# ClusterForge TEST EMULATOR support code for lspci/setpci: not the real tools. Test-only; installed only into lab and molecule containers.
"""Shared state and rendering for the lspci and setpci emulators.

An HGX H100-like PCIe tree (domain 0000):

- 00:00.0 host bridge;
- 16:01.0 root port -> 17:00.0 NVMe SSD (not on a GPU/NIC path);
- four root ports RB:01.0 (RB = 18, 38, 98, b8), each to a Broadcom PEX890xx Gen5 switch: upstream port
  (RB+1):00.0 (no ACS, like the real one) and downstream ports (RB+2):00.0-03.0 with ACS, leading to
  2 GPUs (10de:2330 H100 SXM5) on RB+3/RB+4 and 2 ConnectX-7 NICs (15b3:1021) on RB+5/RB+6.

Boot defaults: ACS control 001d (SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+) on root ports and switch
downstream ports, as Linux sets it with an IOMMU active.

Persistent state (injections: vfio, sriov) is $CLUSTERFORGE_EMU_STATE_DIR/pci.json (default
/var/lib/clusterforge-emu). The ACS control registers written by setpci are VOLATILE, kept in
$CLUSTERFORGE_EMU_RUN_DIR/pci-acs.json (default /run/clusterforge-emu, a tmpfs): a container restart resets
them to the boot defaults like a real reboot.
"""

import json
import os

STATE_DIR = os.environ.get("CLUSTERFORGE_EMU_STATE_DIR", "/var/lib/clusterforge-emu")
RUN_DIR = os.environ.get("CLUSTERFORGE_EMU_RUN_DIR", "/run/clusterforge-emu")
STATE_FILE = os.path.join(STATE_DIR, "pci.json")
RUN_FILE = os.path.join(RUN_DIR, "pci-acs.json")

ACS_FLAGS = (("SrcValid", 0x01), ("TransBlk", 0x02), ("ReqRedir", 0x04), ("CmpltRedir", 0x08),
             ("UpstreamFwd", 0x10), ("EgressCtrl", 0x20), ("DirectTrans", 0x40))
BOOT_ACS_CTL = 0x001D
SWITCH_ACS_CAP = 0x005F   # like the real PEX890xx: all but EgressCtrl
ROOT_ACS_CAP = 0x001F
ROOT_BUSES = (0x18, 0x38, 0x98, 0xB8)
NUMA = {0x16: 0, 0x18: 0, 0x38: 0, 0x98: 1, 0xB8: 1}


def _dev(bdf, kind, cls, code, vendor, device, desc, rev, **kw):
    d = {"bdf": bdf, "kind": kind, "class": cls, "code": code, "vendor": vendor, "device": device,
         "desc": desc, "rev": rev}
    d.update(kw)
    return d


def topology():
    """The static device list, in lspci (bus) order."""
    devs = [_dev("0000:00:00.0", "host", "Host bridge", "0600", "8086", "09a2", "Intel Corporation Ice Lake Memory Map/VT-d", "20",
                 numa=0)]
    devs.append(_dev("0000:16:01.0", "root", "PCI bridge", "0604", "8086", "352a", "Intel Corporation Device 352a", "04",
                     bus=(0x16, 0x17, 0x17), acs_cap=ROOT_ACS_CAP, numa=0, port=1))
    devs.append(_dev("0000:17:00.0", "nvme", "Non-Volatile memory controller", "0108", "144d", "a80c",
                     "Samsung Electronics Co Ltd NVMe SSD Controller S4LV008[Pascal]", None, numa=0))
    for i, rb in enumerate(ROOT_BUSES):
        numa = NUMA[rb]
        devs.append(_dev("0000:%02x:01.0" % rb, "root", "PCI bridge", "0604", "8086", "352a", "Intel Corporation Device 352a",
                         "04", bus=(rb, rb + 1, rb + 6), acs_cap=ROOT_ACS_CAP, numa=numa, port=1))
        devs.append(_dev("0000:%02x:00.0" % (rb + 1), "usp", "PCI bridge", "0604", "1000", "c030",
                         "Broadcom / LSI PEX890xx PCIe Gen 5 Switch", "b0", bus=(rb + 1, rb + 2, rb + 6), numa=numa,
                         port=200))
        for j in range(4):
            devs.append(_dev("0000:%02x:%02x.0" % (rb + 2, j), "dsp", "PCI bridge", "0604", "1000", "c030",
                             "Broadcom / LSI PEX890xx PCIe Gen 5 Switch", "b0", bus=(rb + 2, rb + 3 + j, rb + 3 + j),
                             acs_cap=SWITCH_ACS_CAP, numa=numa, port=j, slot=i * 4 + j + 1))
        for j in range(2):
            devs.append(_dev("0000:%02x:00.0" % (rb + 3 + j), "gpu", "3D controller", "0302", "10de", "2330",
                             "NVIDIA Corporation GH100 [H100 SXM5 80GB]", "a1", numa=numa))
        for j in range(2):
            devs.append(_dev("0000:%02x:00.0" % (rb + 5 + j), "nic", "Infiniband controller", "0207", "15b3", "1021",
                             "Mellanox Technologies MT2910 Family [ConnectX-7]", None, numa=numa, sriov=True))
    return devs


def _load(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except (IOError, OSError, ValueError):
        return default


def _save(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def load_state():
    """Persistent injections: {"vfio": [bdf], "sriov_vfs": int, "sriov_pf": bdf}."""
    return _load(STATE_FILE, {"vfio": [], "sriov_vfs": 0, "sriov_pf": "0000:1d:00.0"})


def save_state(state):
    _save(STATE_FILE, state)


def load_acs():
    """Volatile ACS control registers {bdf: int}; missing -> boot default."""
    return _load(RUN_FILE, {})


def save_acs(regs):
    _save(RUN_FILE, regs)


def reset():
    for path in (STATE_FILE, RUN_FILE):
        try:
            os.remove(path)
        except OSError:
            pass


def devices():
    """Topology plus injected SR-IOV VFs, with current driver and ACS register values."""
    state = load_state()
    regs = load_acs()
    out = []
    vfs = int(state.get("sriov_vfs") or 0)
    for d in topology():
        d = dict(d)
        if "acs_cap" in d:
            d["acs_ctl"] = int(regs.get(d["bdf"], BOOT_ACS_CTL))
        d["driver"] = {"host": None, "root": "pcieport", "usp": "pcieport", "dsp": "pcieport", "nvme": "nvme",
                       "gpu": "nvidia", "nic": "mlx5_core"}[d["kind"]]
        if d["bdf"] in state.get("vfio", []):
            d["driver"] = "vfio-pci"
        if d.get("sriov"):
            d["num_vfs"] = vfs if d["bdf"] == state.get("sriov_pf") else 0
        out.append(d)
        if d.get("sriov") and d["num_vfs"]:
            dom, bus = d["bdf"].split(":")[:2]
            for k in range(1, d["num_vfs"] + 1):
                vf = _dev("%s:%s:%02x.%d" % (dom, bus, k // 8, k % 8), "vf", "Infiniband controller", "0207", "15b3",
                          "101e", "Mellanox Technologies ConnectX Family mlx5Gen Virtual Function", None,
                          numa=d["numa"])
                vf["driver"] = "vfio-pci" if vf["bdf"] in state.get("vfio", []) else "mlx5_core"
                out.append(vf)
    return out


def find(bdf):
    want = normalize(bdf)
    for d in devices():
        if d["bdf"] == want:
            return d
    return None


def normalize(bdf):
    bdf = bdf.strip().lower()
    if bdf.count(":") == 1:
        bdf = "0000:" + bdf
    return bdf


def flags(value):
    return " ".join("%s%s" % (n, "+" if value & b else "-") for n, b in ACS_FLAGS)
