# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/pci.py and tests/formats/pci.py over recorded lspci output (fixtures/pci/)."""

import os

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils import pci
from ansible_collections.clusterforge.gpu.tests.formats.pci import parse_lspci_acs

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "pci")


def load(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


def by_bdf(devs):
    return dict((d["bdf"], d) for d in devs)


@pytest.mark.parametrize("name", ["lspci-vvv-pex890xx-one-port-acs-enabled-with-gpu-nic.txt",
                                  "lspci-vvv-pex890xx-spaces.txt"])
def test_acs_tabs_and_spaces_give_same_result(name):
    devs = by_bdf(parse_lspci_acs(load(name)))
    assert list(devs) == ["0000:38:00.0", "0000:39:00.0", "0000:39:01.0", "0000:3a:00.0", "0000:3b:00.0"]
    usp, dsp0, dsp1 = devs["0000:38:00.0"], devs["0000:39:00.0"], devs["0000:39:01.0"]
    assert usp["is_bridge"] and not usp["acs_capable"] and not usp["acs_enabled"]
    assert dsp0["acs_capable"] and dsp0["acs_enabled"] and dsp0["acs_ctl_value"] == "001d"
    assert dsp0["acs_ctl"] == {"SrcValid": True, "TransBlk": False, "ReqRedir": True, "CmpltRedir": True,
                               "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": False}
    assert dsp0["acs_cap"]["DirectTrans"] is True and dsp0["acs_cap"]["EgressCtrl"] is False
    assert dsp1["acs_capable"] and not dsp1["acs_enabled"] and dsp1["acs_ctl_value"] == "0000"
    assert devs["0000:3b:00.0"]["is_bridge"] is False
    assert dsp0["description"].startswith("Broadcom / LSI PEX890xx PCIe Gen 5 Switch")


def test_bus_ranges_and_upstream_path():
    devs = pci.parse_lspci_vvv(load("lspci-vvv-pex890xx-one-port-acs-enabled-with-gpu-nic.txt"))
    d = by_bdf(devs)
    assert d["0000:38:00.0"]["bus_range"] == {"primary": 0x38, "secondary": 0x39, "subordinate": 0x3d}
    # GPU on bus 3b sits below the upstream port 38:00.0 and downstream port 39:01.0 (secondary 3b)
    assert pci.upstream_bridges(devs, "3b:00.0") == ["0000:38:00.0", "0000:39:01.0"]
    assert pci.upstream_bridges(devs, "0000:3a:00.0") == ["0000:38:00.0", "0000:39:00.0"]
    assert pci.device_kind(d["0000:3b:00.0"]) == "gpu"
    assert pci.device_kind(d["0000:3a:00.0"]) == "nic"
    assert pci.device_kind(d["0000:39:00.0"]) is None


def test_acs_bridges_report_paths():
    devs = pci.parse_lspci_vvv(load("lspci-vvv-pex890xx-one-port-acs-enabled-with-gpu-nic.txt"))
    bridges = by_bdf(pci.acs_bridges(devs))
    assert sorted(bridges) == ["0000:39:00.0", "0000:39:01.0"]  # 38:00.0 has no ACS capability
    assert bridges["0000:39:00.0"]["upstream_of"] == ["0000:3a:00.0"]
    assert bridges["0000:39:01.0"]["upstream_of"] == ["0000:3b:00.0"]
    assert bridges["0000:39:00.0"]["acs_cap_value"] == "005f"


def test_drivers_and_sriov_capability_without_vfs():
    devs = by_bdf(pci.parse_lspci_vvv(load("lspci-vvv-pex890xx-one-port-acs-enabled-with-gpu-nic.txt")))
    assert devs["0000:3b:00.0"]["driver"] == "nvidia"
    assert devs["0000:3a:00.0"]["sriov"] == {"enabled": False, "total_vfs": 16, "num_vfs": 0}
    s = pci.sriov_summary(list(devs.values()))
    assert s["vfs_in_use"] == 0 and s["virtual_functions"] == []
    assert pci.vfio_devices(list(devs.values())) == []


def test_dnn_output_ids_classes_sriov_vfio():
    devs = pci.parse_lspci_vvv(load("lspci-Dnn-vvv-hgx-switch-sriov-vfio.txt"))
    d = by_bdf(devs)
    gpu = d["0000:1b:00.0"]
    assert (gpu["vendor_id"], gpu["device_id"], gpu["class_code"]) == ("10de", "2330", "0302")
    assert gpu["description"] == "NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)"
    assert d["0000:1a:00.0"]["class_code"] == "0604" and d["0000:1a:00.0"]["vendor_id"] == "1000"
    assert d["0000:1d:00.1"]["is_vf"] and pci.device_kind(d["0000:1d:00.1"]) == "nic"
    s = pci.sriov_summary(devs)
    assert s["vfs_in_use"] == 2
    assert s["physical_functions"] == [{"bdf": "0000:1d:00.0", "total_vfs": 16, "num_vfs": 2, "enabled": True}]
    assert s["virtual_functions"] == ["0000:1d:00.1", "0000:1d:00.2"]
    assert pci.vfio_devices(devs) == ["0000:1d:00.1"]
    # VFs do not make their own paths, the PF does
    paths = pci.gpu_nic_paths(devs)
    assert paths["0000:1a:02.0"] == ["0000:1d:00.0"]
    assert paths["0000:18:01.0"] == ["0000:1b:00.0", "0000:1d:00.0"]


def test_truncated_output_keeps_complete_devices():
    devs = by_bdf(parse_lspci_acs(load("lspci-vvv-pex890xx-truncated.txt")))
    assert list(devs) == ["0000:38:00.0", "0000:39:00.0", "0000:39:01.0"]
    assert devs["0000:39:00.0"]["acs_ctl_value"] == "001d"
    # 39:01.0 was cut after "ACSCtl:": capability known, control register not
    assert devs["0000:39:01.0"]["acs_capable"] and devs["0000:39:01.0"]["acs_ctl"] == {}
    assert devs["0000:39:01.0"]["acs_ctl_value"] is None and not devs["0000:39:01.0"]["acs_enabled"]


def test_grep_excerpt_pairs_without_headers():
    devs = parse_lspci_acs(load("lspci-vvv-grep-acs-pairs.txt"))
    assert [d["bdf"] for d in devs] == [None, None, None]
    assert [d["acs_ctl_value"] for d in devs] == ["001d", "0000", "0001"]
    assert [d["acs_enabled"] for d in devs] == [True, False, True]
    assert devs[2]["acs_cap"]["TransBlk"] is False


def test_grep_acsctl_only_lines():
    text = ("\t\tACSCtl:\tSrcValid+ TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n"
            "                ACSCtl: SrcValid- TransBlk- ReqRedir- CmpltRedir- UpstreamFwd- EgressCtrl- DirectTrans-\n")
    devs = parse_lspci_acs(text)
    assert [(d["bdf"], d["acs_enabled"], d["acs_cap"]) for d in devs] == [(None, True, {}), (None, False, {})]


def test_access_denied_detected():
    devs = pci.parse_lspci_vvv(load("lspci-vvv-nonroot-access-denied.txt"))
    assert devs[0]["access_denied"] and not devs[0]["acs_capable"]


def test_unknown_lines_and_empty_input_ignored():
    assert parse_lspci_acs("") == []
    assert parse_lspci_acs("garbage line\n\tMore: garbage+\n") == []
    text = "00:00.0 Host bridge: Intel Corporation Device 09a2 (rev 20)\n\tFrobnicate: yes\n\tACSViol+\n"
    devs = parse_lspci_acs(text)
    assert len(devs) == 1 and devs[0]["is_bridge"] is False and devs[0]["acs_capable"] is False


@pytest.mark.parametrize("word,expected", [
    ("0000", {}), ("001d", {"SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"}), ("0x7f", set(pci.ACS_FLAGS)),
    ("02", {"TransBlk"}), ("0040", {"DirectTrans"}), (0x20, {"EgressCtrl"}),
])
def test_decode_acs_ctl(word, expected):
    flags = pci.decode_acs_ctl(word)
    assert set(flags) == set(pci.ACS_FLAGS)
    assert set(k for k, v in flags.items() if v) == set(expected)


def test_acs_bit_values_match_pci_regs_h():
    assert pci.ACS_SHORT == {"SV": 0x01, "TB": 0x02, "RR": 0x04, "CR": 0x08, "UF": 0x10, "EC": 0x20, "DT": 0x40}
    assert [pci.ACS_BITS[f] for f in pci.ACS_FLAGS] == [1, 2, 4, 8, 16, 32, 64]
    assert pci.acs_value_to_hex(pci.acs_flags_to_value(pci.decode_acs_ctl("001d"))) == "001d"
    assert pci.format_acs_flags(pci.decode_acs_ctl("0001")).startswith("SrcValid+ TransBlk- ")


@pytest.mark.parametrize("bad", ["zz", "12345", "", "0x"])
def test_decode_acs_ctl_rejects_garbage(bad):
    with pytest.raises(ValueError):
        pci.decode_acs_ctl(bad)


def test_iommu_state_from_cmdline():
    st = pci.iommu_state("BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu=pt quiet", 87)
    assert st["enabled"] and st["groups"] == 87 and st["passthrough"] and st["requested"]
    assert st["cmdline"] == {"intel_iommu": "on", "iommu": "pt"}
    st = pci.iommu_state("ro quiet pci=disable_acs_redir=pci:1000:c030", 0)
    assert not st["enabled"] and not st["requested"] and st["cmdline"] == {"pci": "disable_acs_redir=pci:1000:c030"}


# ------------------------------------------------------------------- the one PCI bus-id normaliser

@pytest.mark.parametrize("spelling", [
    "00000000:1B:00.0",   # nvidia-smi --query-gpu=pci.bus_id, nvidia-smi -q
    "0000:1b:00.0",       # lspci -D
    "1b:00.0",            # lspci
    "1B:00.0",
    " 0000:1b:0.0\n",     # hand-written, zero-padding left out
    "0:1b:00.0",
])
def test_normalize_bdf_maps_every_spelling_to_lspci_d(spelling):
    assert pci.normalize_bdf(spelling) == "0000:1b:00.0"


def test_normalize_bdf_keeps_domain_and_function():
    assert pci.normalize_bdf("00000001:AB:1F.7") == "0001:ab:1f.7"
    assert pci.normalize_bdf("3b:00.1", domain="0002") == "0002:3b:00.1"


@pytest.mark.parametrize("bad", [None, "", "zz:00.0", "1b:00", "1b:00.8", "GPU-1234", "0000:1b:00.0:1", "123:00.0"])
def test_normalize_bdf_is_none_for_what_is_not_an_address(bad):
    assert pci.normalize_bdf(bad) is None


def test_upstream_bridges_refuses_a_non_address():
    with pytest.raises(ValueError, match="not a PCI address"):
        pci.upstream_bridges([], "GPU-1234")
