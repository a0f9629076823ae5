# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/plugin_utils/bios_attributes.py over BIOS resources recorded from public dumps
(fixtures/bios/, PROVENANCE.md there): the vendor table maps real attribute names, unknown stays unknown, and the
patch honours values already pending."""

import json
import os

import pytest

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import bios_attributes as ba

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "bios")


def load(name):
    with open(os.path.join(FIX, name)) as f:
        return json.load(f)


def attrs(name):
    return load(name).get("Attributes", {})


# -- the table against the recorded dumps ------------------------------------------------------------------------

def test_every_table_entry_names_a_source_and_maps_only_known_states():
    for vendor, settings in ba.VENDOR_TABLE.items():
        assert vendor == ba.vendor_key(vendor)
        for setting, entries in settings.items():
            assert setting in ba.SETTINGS
            for entry in entries:
                assert entry["source"].startswith("https://"), (vendor, setting)
                assert entry["evidence"], (vendor, setting)
                assert set(entry["values"].values()) <= set(ba.WANTED), (vendor, setting)
                for state, raw in entry["set"].items():
                    assert entry["values"][raw] == state, (vendor, setting, raw)


@pytest.mark.parametrize("vendor,fixture", [
    ("dell", "dell-r750-bios.json"), ("hpe", "hpe-a42-bios.json"), ("lenovo", "lenovo-xcc-bios.json"),
    ("supermicro", "supermicro-x13-bios.json")])
def test_every_mapped_attribute_is_in_its_recorded_dump_with_a_mapped_value(vendor, fixture):
    """The table only names attributes a public dump has, and the dump's value is one the table knows."""
    current = attrs(fixture)
    for setting, entries in ba.VENDOR_TABLE[vendor].items():
        entry = entries[0]
        name, reason = ba._find(entry, current)  # pylint: disable=protected-access
        assert name is not None, (vendor, setting, reason)
        assert current[name] in entry["values"], (vendor, setting, current[name])


def test_lenovo_vtd_entry_is_proven_by_the_attribute_registry():
    registry = load("lenovo-xcc-registry-vtd.json")
    assert registry["OwningEntity"] == "Lenovo"
    (entry,) = [a for a in registry["RegistryEntries"]["Attributes"]
                if a["AttributeName"] == "DevicesandIOPorts_IntelVTforDirectedIOVTd"]
    assert "VT-d" in entry["DisplayName"] and entry["Type"] == "Enumeration" and entry["ResetRequired"] is True
    allowed = sorted(v["ValueName"] for v in entry["Value"])
    (table,) = ba.VENDOR_TABLE["lenovo"]["iommu"]
    assert table["attribute"] == entry["AttributeName"]
    assert sorted(table["values"]) == allowed
    assert sorted(table["set"].values()) == allowed


# -- vendor names ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,key", [
    ("Dell Inc.", "dell"), ("Dell", "dell"), ("HPE", "hpe"), ("HP", "hpe"), ("Hewlett Packard Enterprise", "hpe"),
    ("Lenovo", "lenovo"), ("LENOVO", "lenovo"), ("Supermicro", "supermicro"), ("Super Micro Computer, Inc.", "supermicro"),
    ("NVIDIA", None), ("", None), (None, None), ("Contoso", None)])
def test_vendor_key(text, key):
    assert ba.vendor_key(text) == key


# -- map_bios ---------------------------------------------------------------------------------------------------

def test_dell_r750_maps_sriov_and_profile_and_leaves_acs_iommu_unknown():
    out = ba.map_bios("Dell Inc.", attrs("dell-r750-bios.json"), attrs("dell-r750-bios-settings.json"))
    assert out["sriov"]["state"] == "disabled" and out["sriov"]["attribute"] == "SriovGlobalEnable"
    assert out["sriov"]["source"] == ba.SOURCES["dell_r750"]
    assert out["power_profile"]["state"] == "enabled" and out["power_profile"]["value"] == "PerfOptimized"
    for setting in ("acs", "iommu"):
        assert out[setting]["state"] == "unknown" and out[setting]["attribute"] is None
        assert "no %s attribute for dell" % setting in out[setting]["reason"]
    # The two pending Dell changes touch none of the four settings.
    assert all(out[s]["pending_value"] is None for s in ba.SETTINGS)


def test_hpe_amd_maps_all_four():
    out = ba.map_bios("HPE", attrs("hpe-a42-bios.json"), attrs("hpe-a42-bios-settings.json"))
    assert {s: out[s]["state"] for s in ba.SETTINGS} == {
        "acs": "enabled", "iommu": "enabled", "sriov": "enabled", "power_profile": "disabled"}
    assert out["iommu"]["attribute"] == "ProcAmdIoVt"
    # A full copy of the attributes as the settings object is not a pending change.
    assert ba.pending_changes(attrs("hpe-a42-bios.json"), attrs("hpe-a42-bios-settings.json")) == {}


def test_lenovo_maps_vtd_and_operating_mode_and_ignores_nic_sriov_and_acs_bits():
    out = ba.map_bios("Lenovo", attrs("lenovo-xcc-bios.json"), attrs("lenovo-xcc-bios-pending.json"))
    assert out["iommu"]["state"] == "enabled"
    assert out["power_profile"]["state"] == "disabled"
    assert out["power_profile"]["value"] == "Efficiency_FavorPerformance"
    # NvidiaNetworkAdapter_..._VirtualizationMode: SR_IOV is a NIC's own setting, not the system's SR-IOV switch.
    assert out["sriov"]["state"] == "unknown" and out["sriov"]["attribute"] is None
    # Processors_PCIeACSCTL and the boolean ACS bits are present but undocumented: not guessed.
    assert out["acs"]["state"] == "unknown"


def test_lenovo_full_copy_pending_lists_only_the_real_change():
    changes = ba.pending_changes(attrs("lenovo-xcc-bios.json"), attrs("lenovo-xcc-bios-pending.json"))
    assert changes == {"TrustedComputingGroup_DeviceOperation": {"current": "None", "pending": "Clear"}}


def test_supermicro_hash_suffix_names_and_inverted_acs_control():
    out = ba.map_bios("Supermicro", attrs("supermicro-x13-bios.json"), attrs("supermicro-x13-bios-sd.json"))
    assert out["iommu"] == dict(out["iommu"], state="enabled", attribute="IntelVTforDirectedI/O(VT-d)#1E12",
                                value="Enable")
    assert out["sriov"]["state"] == "enabled" and out["sriov"]["attribute"] == "SR-IOVSupport#0048"
    # "Disable" programs ACS on every root port (X11DDW-L manual p. 93): ACS enabled.
    assert out["acs"]["state"] == "enabled" and out["acs"]["value"] == "Disable"
    assert out["power_profile"]["state"] == "unknown"


def test_unknown_vendor_is_unknown_everywhere_with_the_reason():
    out = ba.map_bios("Contoso Servers", {"SriovGlobalEnable": "Enabled", "Sriov": "Enabled"})
    for setting in ba.SETTINGS:
        assert out[setting]["state"] == "unknown"
        assert "'Contoso Servers' is not in the table" in out[setting]["reason"]


def test_unknown_value_is_unknown_not_guessed():
    current = dict(attrs("dell-r750-bios.json"), SysProfile="PerfPerWattOptimizedDapc", SriovGlobalEnable="Auto")
    out = ba.map_bios("dell", current)
    assert out["power_profile"]["state"] == "unknown" and out["power_profile"]["value"] == "PerfPerWattOptimizedDapc"
    assert "not in the table" in out["power_profile"]["reason"]
    assert out["sriov"]["state"] == "unknown"


def test_bool_true_is_not_the_string_enabled_nor_one():
    entry = {"attribute": "X", "values": {"Enabled": "enabled", 1: "disabled"}, "set": {}, "source": "https://x"}
    assert ba._state(entry, True) == "unknown"  # pylint: disable=protected-access
    assert ba._state(entry, 1) == "disabled"  # pylint: disable=protected-access


def test_ambiguous_hash_suffix_is_unknown():
    current = dict(attrs("supermicro-x13-bios.json"))
    current["SR-IOVSupport#0099"] = "Disabled"
    out = ba.map_bios("supermicro", current)
    assert out["sriov"]["state"] == "unknown" and "ambiguous" in out["sriov"]["reason"]


def test_pending_value_gives_next_state():
    current = attrs("hpe-a42-bios.json")
    pending = dict(attrs("hpe-a42-bios-settings.json"), AccessControlService="Disabled")
    out = ba.map_bios("hpe", current, pending)
    assert out["acs"]["state"] == "enabled"
    assert out["acs"]["pending_value"] == "Disabled" and out["acs"]["pending_state"] == "disabled"
    assert out["acs"]["next_state"] == "disabled"
    assert out["sriov"]["pending_value"] is None and out["sriov"]["next_state"] == "enabled"


# -- compute_patch ----------------------------------------------------------------------------------------------

def test_patch_stages_only_what_differs():
    plan = ba.compute_patch("HPE", attrs("hpe-a42-bios.json"), attrs("hpe-a42-bios-settings.json"),
                            {"acs": "disabled", "iommu": "enabled", "sriov": "disabled", "power_profile": None})
    assert plan["patch"] == {"AccessControlService": "Disabled", "Sriov": "Disabled"}
    assert plan["settings"]["iommu"]["action"] == "none"
    assert plan["settings"]["acs"] == {"action": "stage", "attribute": "AccessControlService", "current": "Enabled",
                                       "pending": None, "target": "Disabled", "reason": None}
    assert "power_profile" not in plan["settings"]
    assert plan["unsupported"] == [] and plan["conflicts"] == []


def test_patch_honours_a_value_already_pending():
    current = attrs("hpe-a42-bios.json")
    pending = dict(attrs("hpe-a42-bios-settings.json"), AccessControlService="Disabled")
    plan = ba.compute_patch("hpe", current, pending, {"acs": "disabled"})
    assert plan["patch"] == {}
    assert plan["settings"]["acs"]["action"] == "already_pending"
    assert plan["settings"]["acs"]["pending"] == "Disabled"


def test_patch_reports_a_pending_value_that_would_undo_the_wanted_state():
    current = attrs("hpe-a42-bios.json")
    pending = dict(attrs("hpe-a42-bios-settings.json"), Sriov="Disabled")
    plan = ba.compute_patch("hpe", current, pending, {"sriov": "enabled"})
    assert plan["patch"] == {} and plan["conflicts"] == ["sriov"]
    assert "clear the pending BIOS settings" in plan["settings"]["sriov"]["reason"]


def test_patch_overrides_a_pending_value_that_goes_the_other_way():
    current = dict(attrs("hpe-a42-bios.json"), Sriov="Disabled")
    pending = {"Sriov": "Enabled"}  # delta form
    plan = ba.compute_patch("hpe", current, pending, {"sriov": "disabled"})
    assert plan["conflicts"] == ["sriov"]
    plan = ba.compute_patch("hpe", dict(current, Sriov="Enabled"), {"Sriov": "Enabled"}, {"sriov": "disabled"})
    assert plan["patch"] == {"Sriov": "Disabled"}


def test_patch_supermicro_uses_the_full_hash_name_and_the_inverted_value():
    plan = ba.compute_patch("Supermicro", attrs("supermicro-x13-bios.json"), attrs("supermicro-x13-bios-sd.json"),
                            {"acs": "disabled", "iommu": "disabled", "sriov": "enabled"})
    assert plan["patch"] == {"PCIeACSCTL#1E1C": "Enable", "IntelVTforDirectedI/O(VT-d)#1E12": "Disable"}
    assert plan["settings"]["sriov"]["action"] == "none"


def test_patch_cannot_set_what_the_table_does_not_know():
    # Dell: no ACS attribute at all; SysProfile has no value the table knows to mean "not maximum performance".
    plan = ba.compute_patch("dell", attrs("dell-r750-bios.json"), {}, {"acs": "disabled", "power_profile": "disabled"})
    assert plan["patch"] == {}
    assert plan["unsupported"] == ["acs", "power_profile"]
    assert plan["settings"]["acs"]["reason"] == "the table has no acs attribute for dell"
    assert plan["settings"]["power_profile"]["reason"] == \
        "the table has no value of SysProfile that sets power_profile disabled"


def test_patch_without_a_value_for_the_wanted_state_is_unsupported():
    current = dict(attrs("hpe-a42-bios.json"))
    plan = ba.compute_patch("hpe", current, {}, {"power_profile": "enabled"})
    assert plan["unsupported"] == ["power_profile"]
    assert "no value of PowerRegulator that sets power_profile enabled" in plan["settings"]["power_profile"]["reason"]
    plan = ba.compute_patch("Contoso", current, {}, {"sriov": "enabled"})
    assert plan["unsupported"] == ["sriov"] and "not in the table" in plan["settings"]["sriov"]["reason"]


def test_patch_rejects_bad_wanted_values():
    with pytest.raises(ValueError, match="enabled or disabled"):
        ba.compute_patch("hpe", {}, {}, {"acs": "off"})
    with pytest.raises(ValueError, match="unknown setting"):
        ba.compute_patch("hpe", {}, {}, {"vtd": "enabled"})


def test_patch_dell_profile_enabled_already_in_effect():
    plan = ba.compute_patch("dell", attrs("dell-r750-bios.json"), attrs("dell-r750-bios-settings.json"),
                            {"power_profile": "enabled", "sriov": "enabled"})
    assert plan["settings"]["power_profile"]["action"] == "none"
    assert plan["patch"] == {"SriovGlobalEnable": "Enabled"}


# -- merge_table ------------------------------------------------------------------------------------------------

def test_operator_entries_come_first_and_need_a_source():
    extra = {"Dell Inc.": {"iommu": {"attribute": "ProcVirtualization",
                                     "values": {"Enabled": "enabled", "Disabled": "disabled"},
                                     "source": "our R750 registry export, 2024-05"}}}
    table = ba.merge_table(extra)
    assert table["dell"]["iommu"][0]["set"] == {"enabled": "Enabled", "disabled": "Disabled"}
    out = ba.map_bios("dell", attrs("dell-r750-bios.json"), table=table)
    assert out["iommu"]["state"] == "enabled" and out["iommu"]["source"] == "our R750 registry export, 2024-05"
    assert ba.VENDOR_TABLE["dell"].get("iommu") is None  # the shipped table is untouched
    with pytest.raises(ValueError, match="names its source"):
        ba.merge_table({"dell": {"iommu": {"attribute": "X", "values": {"On": "enabled"}}}})
    with pytest.raises(ValueError, match="enabled or disabled only"):
        ba.merge_table({"dell": {"iommu": {"attribute": "X", "values": {"On": "yes"}, "source": "s"}}})
    with pytest.raises(ValueError, match="unknown setting"):
        ba.merge_table({"dell": {"vtd": {"attribute": "X", "values": {"On": "enabled"}, "source": "s"}}})
    # A new vendor can be added the same way.
    table = ba.merge_table({"gigabyte": {"sriov": [{"attribute": "SRIOV", "values": {"Enabled": "enabled"},
                                                    "source": "s"}]}})
    assert ba.map_bios("gigabyte", {"SRIOV": "Enabled"}, table=table)["sriov"]["state"] == "enabled"


# -- judge ------------------------------------------------------------------------------------------------------

def test_judge_bios_and_runtime_against_the_profile():
    mapped = ba.map_bios("hpe", attrs("hpe-a42-bios.json"))
    out = ba.judge(mapped, {"acs": "disabled", "sriov": "enabled"}, runtime_acs_enabled=True)
    assert out["problems"] == [
        "acs: BIOS AccessControlService='Enabled' is enabled, the profile wants disabled",
        "acs: runtime ACS on the GPU/NIC paths is enabled, the profile wants disabled"]
    assert out["unknown"] == [] and out["pending"] == []
    assert ba.judge(mapped, {"acs": "enabled", "sriov": "enabled"}, runtime_acs_enabled=True)["problems"] == []


def test_judge_unknown_is_reported_not_failed_and_pending_is_named():
    mapped = ba.map_bios("dell", attrs("dell-r750-bios.json"), {"SriovGlobalEnable": "Enabled"})
    out = ba.judge(mapped, {"acs": "disabled", "sriov": "disabled"}, runtime_acs_enabled=False)
    assert out["problems"] == []
    assert out["unknown"] == ["acs: BIOS state unknown (the table has no acs attribute for dell)"]
    assert out["pending"] == ["sriov: enabled at the next reset (SriovGlobalEnable='Enabled' pending)"]
    with pytest.raises(ValueError):
        ba.judge(mapped, {"acs": "off"})
