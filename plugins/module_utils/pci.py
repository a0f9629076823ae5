# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for ``lspci -vvv`` output: PCIe ACS state, SR-IOV, VFIO and the bridge topology.

Stdlib only, no Ansible import, so the same code serves modules, tests and the lab emulators' checks.

Topology (design choice): the upstream path of a device is computed from the bus ranges that
``lspci -vvv`` prints for every bridge (``Bus: primary=38, secondary=39, subordinate=3d``). A device on bus
B of domain D lies below every bridge of D whose ``secondary <= B <= subordinate``. This needs no second
command (no ``lspci -t``), and it is what the kernel itself uses to route configuration cycles.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# ACS Control register bits, from Linux include/uapi/linux/pci_regs.h (PCI_ACS_SV ... PCI_ACS_DT).
ACS_FLAGS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
ACS_BITS = {
    "SrcValid": 0x01,     # SV
    "TransBlk": 0x02,     # TB
    "ReqRedir": 0x04,     # RR
    "CmpltRedir": 0x08,   # CR
    "UpstreamFwd": 0x10,  # UF
    "EgressCtrl": 0x20,   # EC
    "DirectTrans": 0x40,  # DT
}
ACS_SHORT = {"SV": 0x01, "TB": 0x02, "RR": 0x04, "CR": 0x08, "UF": 0x10, "EC": 0x20, "DT": 0x40}
# What Linux pci_std_enable_acs() sets on a downstream port with an active IOMMU: SV|RR|CR|UF.
ACS_DEFAULT_ENABLED = 0x001D

NVIDIA_VENDOR = "10de"
MELLANOX_VENDOR = "15b3"
GPU_CLASSES = ("0300", "0302")          # VGA compatible controller, 3D controller
NIC_CLASSES = ("0200", "0207", "0280")  # Ethernet, InfiniBand, other network
GPU_CLASS_NAMES = ("VGA compatible controller", "3D controller")
NIC_CLASS_NAMES = ("Ethernet controller", "Infiniband controller", "Network controller")

_BDF = r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
# "0000:38:00.0 PCI bridge [0604]: Broadcom / LSI PEX890xx PCIe Gen 5 Switch [1000:c030] (rev b0) (prog-if ...)"
_HEADER_RE = re.compile(r"^(?P<bdf>" + _BDF + r")\s+(?P<cls>[^\[:]+?)(?:\s+\[(?P<code>[0-9a-fA-F]{4})\])?:\s+(?P<rest>.*)$")
_IDS_RE = re.compile(r"\s\[(?P<vendor>[0-9a-fA-F]{4}):(?P<device>[0-9a-fA-F]{4})\]")
_FLAG_RE = re.compile(r"([A-Za-z]+)([+-])")
_BUS_RE = re.compile(r"Bus:\s*primary=([0-9a-fA-F]+),\s*secondary=([0-9a-fA-F]+),\s*subordinate=([0-9a-fA-F]+)")
_VFS_RE = re.compile(r"Total VFs:\s*(\d+),\s*Number of VFs:\s*(\d+)")


def acs_flags_to_value(flags):
    """{flag: bool} -> integer register value."""
    value = 0
    for name, bit in ACS_BITS.items():
        if flags.get(name):
            value |= bit
    return value


def acs_value_to_hex(value):
    """Integer -> the 4 hex digits setpci prints (``001d``)."""
    return "%04x" % (int(value) & 0xFFFF)


def decode_acs_ctl(hexword):
    """``'001d'`` (or ``'0x1d'``, or an int) -> {flag: bool} for the seven ACS control flags."""
    if isinstance(hexword, int):
        value = hexword
    else:
        text = str(hexword).strip().lower()
        if text.startswith("0x"):
            text = text[2:]
        if not text or not re.match(r"^[0-9a-f]{1,4}$", text):
            raise ValueError("not a 16-bit hex word: %r" % (hexword,))
        value = int(text, 16)
    return dict((name, bool(value & bit)) for name, bit in ACS_BITS.items())


def format_acs_flags(flags):
    """{flag: bool} -> ``SrcValid+ TransBlk- ...`` in lspci's order."""
    return " ".join("%s%s" % (name, "+" if flags.get(name) else "-") for name in ACS_FLAGS)


def _parse_flags(text):
    flags = {}
    for name, sign in _FLAG_RE.findall(text):
        if name in ACS_BITS:
            flags[name] = sign == "+"
    return flags


_BDF_PARTS_RE = re.compile(r"^(?:(?P<dom>[0-9a-f]{1,8}):)?(?P<bus>[0-9a-f]{1,2}):(?P<dev>[0-9a-f]{1,2})\.(?P<fn>[0-7])$")


def normalize_bdf(bdf, domain="0000"):
    """The one canonical form of a PCI address in the collection: ``dddd:bb:dd.f``, lower case (``lspci -D``).

    Every spelling the tools print maps to it: nvidia-smi's ``00000000:1B:00.0``, ``lspci -D``'s
    ``0000:1b:00.0`` and plain ``lspci``'s ``1b:00.0`` (``domain`` is added). Compare addresses only after
    normalising both sides. None, and a text that is not a PCI address, give None.
    """
    if bdf is None:
        return None
    m = _BDF_PARTS_RE.match(str(bdf).strip().lower())
    if not m:
        return None
    dom = m.group("dom") if m.group("dom") is not None else domain
    try:
        dom = int(dom, 16)
    except (TypeError, ValueError):
        return None
    return "%04x:%02x:%02x.%s" % (dom, int(m.group("bus"), 16), int(m.group("dev"), 16), m.group("fn"))


def _new_device(match):
    rest = match.group("rest")
    ids = None
    # The vendor:device pair is the last [xxxx:xxxx] before "(rev" / "(prog-if" (lspci -nn).
    for m in _IDS_RE.finditer(rest):
        ids = m
    description = rest
    vendor = device = None
    if ids:
        vendor, device = ids.group("vendor").lower(), ids.group("device").lower()
        description = (rest[:ids.start()] + rest[ids.end():]).strip()
    class_name = match.group("cls").strip()
    code = match.group("code")
    return {
        "bdf": normalize_bdf(match.group("bdf")),
        "slot": match.group("bdf"),
        "class_name": class_name,
        "class_code": code.lower() if code else None,
        "vendor_id": vendor,
        "device_id": device,
        "description": description,
        "driver": None,
        "is_bridge": class_name == "PCI bridge" or (code or "").startswith("0604"),
        "bus_range": None,
        "acs_cap": {},
        "acs_ctl": {},
        "acs_capable": False,
        "sriov": None,
        "is_vf": "Virtual Function" in description,
        "access_denied": False,
    }


def _bus(bdf):
    dom, bus = bdf.split(":")[0:2]
    return dom, int(bus, 16)


def parse_lspci_vvv(text):
    """Every device block of ``lspci [-D] [-nn] -vvv`` output, with the fields the ACS modules need.

    Keys: ``bdf`` (always with domain), ``slot`` (as printed), ``class_name``, ``class_code`` and
    ``vendor_id``/``device_id`` (only with ``-nn``, else None), ``description``, ``driver`` ("Kernel driver in
    use"), ``is_bridge``, ``bus_range`` ({primary, secondary, subordinate} ints for bridges), ``acs_capable``,
    ``acs_cap``/``acs_ctl`` ({flag: bool}), ``sriov`` ({total_vfs, num_vfs, enabled} or None), ``is_vf``,
    ``access_denied`` (lspci could not read the capabilities: not root).

    TABs or spaces for indentation are both accepted. Lines that are not understood are ignored. ``ACSCtl``/
    ``ACSCap`` lines without a device header (``lspci -vvv | grep ACS``) produce entries with ``bdf`` None.
    """
    devices = []
    current = None
    in_sriov = False
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        m = _HEADER_RE.match(line)
        if m and not raw[0].isspace():
            current = _new_device(m)
            devices.append(current)
            in_sriov = False
            continue
        body = line.strip()
        if body.startswith("ACSCap:") or body.startswith("ACSCtl:"):
            key = "acs_cap" if body.startswith("ACSCap:") else "acs_ctl"
            # A headerless excerpt: a new anonymous entry when there is no device, or when this one
            # already has this register (one grep line per device).
            if current is None or (current["bdf"] is None and current[key]):
                current = {
                    "bdf": None, "slot": None, "class_name": None, "class_code": None, "vendor_id": None,
                    "device_id": None, "description": None, "driver": None, "is_bridge": None,
                    "bus_range": None, "acs_cap": {}, "acs_ctl": {}, "acs_capable": False, "sriov": None,
                    "is_vf": False, "access_denied": False,
                }
                devices.append(current)
            current[key] = _parse_flags(body.split(":", 1)[1])
            current["acs_capable"] = True
            continue
        if current is None:
            continue
        if body.startswith("Capabilities:"):
            in_sriov = "SR-IOV" in body or "Single Root I/O Virtualization" in body
            if "Access Control Services" in body:
                current["acs_capable"] = True
            if "<access denied>" in body:
                current["access_denied"] = True
            continue
        if body.startswith("Kernel driver in use:"):
            current["driver"] = body.split(":", 1)[1].strip()
            continue
        bm = _BUS_RE.search(body)
        if bm and body.startswith("Bus:"):
            current["bus_range"] = {
                "primary": int(bm.group(1), 16),
                "secondary": int(bm.group(2), 16),
                "subordinate": int(bm.group(3), 16),
            }
            current["is_bridge"] = True
            continue
        if in_sriov:
            vm = _VFS_RE.search(body)
            if vm:
                sriov = current["sriov"] or {"enabled": False}
                sriov["total_vfs"] = int(vm.group(1))
                sriov["num_vfs"] = int(vm.group(2))
                current["sriov"] = sriov
            elif body.startswith("IOVCtl:"):
                sriov = current["sriov"] or {"total_vfs": None, "num_vfs": 0}
                sriov["enabled"] = "Enable+" in body
                current["sriov"] = sriov
    for dev in devices:
        dev["acs_ctl_value"] = acs_value_to_hex(acs_flags_to_value(dev["acs_ctl"])) if dev["acs_ctl"] else None
        dev["acs_enabled"] = any(dev["acs_ctl"].values()) if dev["acs_ctl"] else False
    return devices


def device_kind(dev):
    """``gpu`` (NVIDIA display/3D), ``nic`` (Mellanox network/IB, or any InfiniBand controller) or None."""
    code = dev.get("class_code") or ""
    cname = dev.get("class_name") or ""
    vendor = dev.get("vendor_id")
    desc = dev.get("description") or ""
    is_nvidia = vendor == NVIDIA_VENDOR if vendor else desc.startswith("NVIDIA")
    is_mellanox = vendor == MELLANOX_VENDOR if vendor else desc.startswith("Mellanox")
    gpu_class = code[:4] in GPU_CLASSES if code else cname in GPU_CLASS_NAMES
    nic_class = code[:4] in NIC_CLASSES if code else cname in NIC_CLASS_NAMES
    ib_class = code.startswith("0207") if code else cname == "Infiniband controller"
    if is_nvidia and gpu_class:
        return "gpu"
    if (is_mellanox and nic_class) or ib_class:
        return "nic"
    return None


def upstream_bridges(devices, bdf):
    """BDFs of the bridges above ``bdf``, root first, from the bridges' secondary/subordinate bus ranges."""
    target = normalize_bdf(bdf)
    if target is None:
        raise ValueError("not a PCI address: %r" % (bdf,))
    dom, bus = _bus(target)
    found = []
    for dev in devices:
        rng = dev.get("bus_range")
        if not rng or dev.get("bdf") is None or dev["bdf"] == target:
            continue
        ddom = dev["bdf"].split(":")[0]
        if ddom == dom and rng["secondary"] <= bus <= rng["subordinate"]:
            found.append(dev)
    # Wider ranges are closer to the root.
    found.sort(key=lambda d: (-(d["bus_range"]["subordinate"] - d["bus_range"]["secondary"]), d["bus_range"]["secondary"]))
    return [d["bdf"] for d in found]


def gpu_nic_paths(devices):
    """{bridge bdf: [gpu/nic bdfs below it]} for every bridge upstream of a GPU or a NIC."""
    paths = {}
    for dev in devices:
        if dev.get("bdf") and device_kind(dev) and not dev.get("is_vf"):
            for br in upstream_bridges(devices, dev["bdf"]):
                paths.setdefault(br, []).append(dev["bdf"])
    return paths


def vfio_devices(devices):
    """BDFs of devices bound to vfio-pci."""
    return [d["bdf"] for d in devices if d.get("driver") == "vfio-pci"]


def sriov_summary(devices):
    """SR-IOV use: {``vfs_in_use`` (sum of enabled PFs' Number of VFs, or the VF functions seen, whichever is
    larger), ``physical_functions``: [{bdf, total_vfs, num_vfs, enabled}], ``virtual_functions``: [bdf]}."""
    pfs = []
    for d in devices:
        if d.get("sriov"):
            s = d["sriov"]
            pfs.append({"bdf": d["bdf"], "total_vfs": s.get("total_vfs"), "num_vfs": s.get("num_vfs") or 0,
                        "enabled": bool(s.get("enabled"))})
    vfs = [d["bdf"] for d in devices if d.get("is_vf")]
    declared = sum(p["num_vfs"] for p in pfs if p["enabled"] or p["num_vfs"])
    return {"vfs_in_use": max(declared, len(vfs)), "physical_functions": pfs, "virtual_functions": vfs}


def acs_bridges(devices):
    """The ACS-capable bridges with what lies below them.

    Each: ``bdf``, ``description``, ``acs_cap``/``acs_ctl`` ({flag: bool}), ``acs_cap_value``/``acs_ctl_value``
    (hex words), ``acs_enabled``, ``upstream_of`` (GPU/NIC BDFs below this bridge), ``on_gpu_nic_path``.
    """
    paths = gpu_nic_paths(devices)
    out = []
    for d in devices:
        if not (d.get("is_bridge") and d.get("acs_capable") and d.get("bdf")):
            continue
        below = sorted(paths.get(d["bdf"], []))
        out.append({
            "bdf": d["bdf"],
            "description": d["description"],
            "acs_cap": d["acs_cap"],
            "acs_ctl": d["acs_ctl"],
            "acs_cap_value": acs_value_to_hex(acs_flags_to_value(d["acs_cap"])) if d["acs_cap"] else None,
            "acs_ctl_value": d["acs_ctl_value"],
            "acs_enabled": d["acs_enabled"],
            "upstream_of": below,
            "on_gpu_nic_path": bool(below),
        })
    return out


def parse_iommu_cmdline(cmdline):
    """IOMMU-related kernel parameters from /proc/cmdline: {param: value} for intel_iommu, amd_iommu, iommu,
    pci (``disable_acs_redir``), pcie_acs_override, vfio-pci.ids / vfio_pci.ids."""
    wanted = ("intel_iommu", "amd_iommu", "iommu", "pci", "pcie_acs_override", "vfio-pci.ids", "vfio_pci.ids")
    found = {}
    for tok in (cmdline or "").split():
        key, sep, value = tok.partition("=")
        if key in wanted:
            found[key] = value if sep else True
    return found


def iommu_state(cmdline, group_count):
    """{``enabled``: bool (IOMMU groups exist), ``groups``: int, ``passthrough``: iommu=pt,
    ``cmdline``: the IOMMU parameters, ``requested``: intel_iommu=on / amd_iommu=on present}."""
    params = parse_iommu_cmdline(cmdline)
    requested = any(str(params.get(k, "")).split(",", 1)[0] == "on" for k in ("intel_iommu", "amd_iommu"))
    return {
        "enabled": group_count > 0,
        "groups": group_count,
        "passthrough": params.get("iommu") == "pt",
        "requested": requested,
        "cmdline": params,
    }
