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


# Every recorded Bios resource of each vendor; every table entry must read one of them with a value it maps.
DUMPS = {"dell": ["dell-r750-bios.json"], "hpe": ["hpe-a42-bios.json", "hpe-u31-bios.json"],
         "lenovo": ["lenovo-xcc-bios.json"], "supermicro": ["supermicro-x13-bios.json"]}


@pytest.mark.parametrize("vendor,setting,index", [
    (v, s, i) for v, settings in sorted(ba.VENDOR_TABLE.items()) for s, entries in sorted(settings.items())
    for i in range(len(entries))])
def test_every_table_entry_reads_a_recorded_dump(vendor, setting, index):
    """Not only the first candidate: each entry (HPE's IntelProcVtd after ProcAmdIoVt) is seen in some dump."""
    entry = ba.VENDOR_TABLE[vendor][setting][index]
    seen = []
    for fixture in DUMPS[vendor]:
        current = attrs(fixture)
        name, _reason = ba._find(entry, current)  # pylint: disable=protected-access
        if name is not None:
            seen.append((fixture, current[name]))
    assert seen, (vendor, setting, entry["attribute"])
    assert all(value in entry["values"] for _fixture, value in seen), seen


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

def test_dell_r750_maps_iommu_sriov_and_profile_and_leaves_acs_unknown():
    out = ba.map_bios("Dell Inc.", attrs("dell-r750-bios.json"), attrs("dell-r750-bios-settings.json"))
    assert out["sriov"]["state"] == "disabled" and out["sriov"]["attribute"] == "SriovGlobalEnable"
    assert out["sriov"]["source"] == ba.SOURCES["dell_r750"]
    assert out["power_profile"]["state"] == "enabled" and out["power_profile"]["value"] == "PerfOptimized"
    assert out["iommu"] == dict(out["iommu"], state="enabled", attribute="ProcVirtualization", value="Enabled",
                                source=ba.SOURCES["dell_r750_registry"])
    assert out["acs"]["state"] == "unknown" and out["acs"]["attribute"] is None
    assert "no acs attribute for dell" in out["acs"]["reason"]
    # The two pending Dell changes touch none of the four settings.
    assert all(out[s]["pending_value"] is None for s in ba.SETTINGS)


def test_dell_entries_are_proven_by_the_r750_attribute_registry():
    registry = load("dell-r750-registry.json")
    assert registry["OwningEntity"] == "Dell"
    assert registry["Id"] == load("dell-r750-bios.json")["AttributeRegistry"]
    entries = {a["AttributeName"]: a for a in ba.registry_attributes(registry)}
    vt = entries["ProcVirtualization"]
    assert vt["DisplayName"] == "Virtualization Technology" and "through the DMAR table" in vt["HelpText"]
    (iommu,) = ba.VENDOR_TABLE["dell"]["iommu"]
    assert sorted(iommu["values"]) == sorted(v["ValueName"] for v in vt["Value"])
    profile = {v["ValueName"]: v["ValueDisplayName"] for v in entries["SysProfile"]["Value"]}
    (table,) = ba.VENDOR_TABLE["dell"]["power_profile"]
    assert set(table["values"]) <= set(profile)
    assert profile["PerfOptimized"] == "Performance"
    assert {profile[v] for v, state in table["values"].items() if state == "disabled"} == {
        "Performance Per Watt (DAPC)", "Performance Per Watt (OS)"}
    # Custom is in the registry and deliberately not in the table.
    assert "Custom" in profile and "Custom" not in table["values"]


def test_dell_iommu_is_read_only_on_an_intel_bios():
    current = dict(attrs("dell-r750-bios.json"))
    del current["IntelTxt"]  # as a BIOS without Intel TXT (an AMD PowerEdge) would be
    out = ba.map_bios("dell", current)
    assert out["iommu"]["state"] == "unknown"
    assert out["iommu"]["reason"] == "ProcVirtualization is read only on a BIOS that also has IntelTxt"
    plan = ba.compute_patch("dell", current, {}, {"iommu": "disabled"})
    assert plan["patch"] == {} and plan["unsupported"] == ["iommu"]


def test_dell_performance_per_watt_profiles_read_disabled_and_performance_can_be_staged():
    current = dict(attrs("dell-r750-bios.json"), SysProfile="PerfPerWattOptimizedDapc")
    assert ba.map_bios("dell", current)["power_profile"]["state"] == "disabled"
    current["SysProfile"] = "PerfPerWattOptimizedOs"
    assert ba.map_bios("dell", current)["power_profile"]["state"] == "disabled"
    plan = ba.compute_patch("dell", current, {}, {"power_profile": "enabled", "iommu": "disabled"})
    assert plan["patch"] == {"SysProfile": "PerfOptimized", "ProcVirtualization": "Disabled"}


def test_hpe_amd_maps_all_four():
    out = ba.map_bios("HPE", attrs("hpe-a42-bios.json"), attrs("hpe-a42-bios-settings.json"))
    assert {s: out[s]["state"] for s in ba.SETTINGS} == {
        "acs": "enabled", "iommu": "enabled", "sriov": "enabled", "power_profile": "disabled"}
    assert out["iommu"]["attribute"] == "ProcAmdIoVt"
    # A full copy of the attributes as the settings object is not a pending change.
    assert ba.pending_changes(attrs("hpe-a42-bios.json"), attrs("hpe-a42-bios-settings.json")) == {}


def test_hpe_gen10_intel_maps_vtd_sriov_and_power_regulator_and_leaves_acs_unknown():
    out = ba.map_bios("HPE", attrs("hpe-u31-bios.json"), attrs("hpe-u31-bios-settings.json"))
    assert out["iommu"] == dict(out["iommu"], state="enabled", attribute="IntelProcVtd", source=ba.SOURCES["hpe_u31"])
    assert out["sriov"]["state"] == "enabled"
    assert out["power_profile"]["state"] == "disabled" and out["power_profile"]["value"] == "DynamicPowerSavings"
    # This sample has no AccessControlService attribute: unknown, not guessed from anything else.
    assert out["acs"]["state"] == "unknown" and out["acs"]["reason"] == "no attribute AccessControlService"
    # ProcAmdIoVt is tried first and is absent here: the Intel entry is used, no AMD value is read.
    assert "ProcAmdIoVt" not in attrs("hpe-u31-bios.json")


def test_hpe_static_high_performance_is_the_maximum_performance_mode():
    current = attrs("hpe-u31-bios.json")
    plan = ba.compute_patch("hpe", current, attrs("hpe-u31-bios-settings.json"),
                            {"power_profile": "enabled", "iommu": "enabled"})
    assert plan["patch"] == {"PowerRegulator": "StaticHighPerf"}
    assert plan["settings"]["iommu"]["action"] == "none"
    out = ba.map_bios("hpe", dict(current, PowerRegulator="StaticHighPerf"))
    assert out["power_profile"]["state"] == "enabled"
    for mode in ("DynamicPowerSavings", "StaticLowPower", "OsControl"):
        assert ba.map_bios("hpe", dict(current, PowerRegulator=mode))["power_profile"]["state"] == "disabled"
    # WorkloadProfile is not mapped: a value no source ranks stays out of the verdict.
    assert ba.map_bios("hpe", dict(current, WorkloadProfile="HighPerformanceCompute"))["power_profile"]["value"] == \
        "DynamicPowerSavings"


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


def test_a_known_vendor_missing_from_a_given_table_is_unknown():
    out = ba.map_bios("Dell Inc.", attrs("dell-r750-bios.json"), table={})
    assert out["iommu"]["state"] == "unknown" and out["iommu"]["reason"] == "the table has no iommu attribute for dell"


def test_unknown_vendor_is_unknown_everywhere_with_the_reason():
    out = ba.map_bios("Contoso Servers", {"SriovGlobalEnable": "Enabled", "Sriov": "Enabled"})
    for setting in ba.SETTINGS:
        assert out[setting]["state"] == "unknown"
        assert "'Contoso Servers' is not in the table" in out[setting]["reason"]


def test_unknown_value_is_unknown_not_guessed():
    # Custom is a value the R750 registry lists; what it means depends on every other option: not mapped.
    current = dict(attrs("dell-r750-bios.json"), SysProfile="Custom", SriovGlobalEnable="Auto")
    out = ba.map_bios("dell", current)
    assert out["power_profile"]["state"] == "unknown" and out["power_profile"]["value"] == "Custom"
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
    current = dict(attrs("hpe-a42-bios.json"), PowerRegulator="StaticHighPerf")
    plan = ba.compute_patch("hpe", current, {}, {"power_profile": "disabled"})
    assert plan["unsupported"] == ["power_profile"]
    assert "no value of PowerRegulator that sets power_profile disabled" in plan["settings"]["power_profile"]["reason"]
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
    assert len(table["dell"]["iommu"]) == 2 and len(ba.VENDOR_TABLE["dell"]["iommu"]) == 1  # shipped table untouched
    with pytest.raises(ValueError, match="names its source"):
        ba.merge_table({"dell": {"iommu": {"attribute": "X", "values": {"On": "enabled"}}}})
    with pytest.raises(ValueError, match="enabled or disabled only"):
        ba.merge_table({"dell": {"iommu": {"attribute": "X", "values": {"On": "yes"}, "source": "s"}}})
    with pytest.raises(ValueError, match="unknown setting"):
        ba.merge_table({"dell": {"vtd": {"attribute": "X", "values": {"On": "enabled"}, "source": "s"}}})
    with pytest.raises(ValueError, match="match must be one of exact, hash_suffix, display_name"):
        ba.merge_table({"dell": {"iommu": {"attribute": "X", "values": {"On": "enabled"}, "source": "s",
                                           "match": "prefix"}}})
    with pytest.raises(ValueError, match="requires must be a list of attribute names"):
        ba.merge_table({"dell": {"iommu": {"attribute": "X", "values": {"On": "enabled"}, "source": "s",
                                           "requires": "IntelTxt"}}})
    # A new vendor can be added the same way, and is found under its manufacturer string however it is written.
    table = ba.merge_table({"GIGABYTE": {"sriov": [{"attribute": "SRIOV", "values": {"Enabled": "enabled"},
                                                    "source": "s"}]}})
    assert "gigabyte" in table
    for manufacturer in ("gigabyte", "GIGABYTE", "Gigabyte"):
        assert ba.map_bios(manufacturer, {"SRIOV": "Enabled"}, table=table)["sriov"]["state"] == "enabled"
    assert ba.map_bios("Giga Computing", {"SRIOV": "Enabled"}, table=table)["sriov"]["state"] == "unknown"


# -- attribute registries: display names for opaque attribute names ------------------------------------------

def test_registry_lookup_resolves_opaque_ami_names():
    registry, bios = load("ami-zt-registry.json"), load("ami-zt-bios.json")
    assert registry["OwningEntity"] == "AMI" and bios["AttributeRegistry"] == registry["Id"]
    assert ba.registry_lookup(registry, "TPM SUPPORT") == ("TCG003", {"Disable": "Disable", "Enable": "Enable"}, None)
    # AMI pads display names with spaces: compared with white space collapsed.
    assert ba.registry_lookup(registry, "Disable Block Sid")[0] == "TCG023"
    name, values, reason = ba.registry_lookup(registry, "IOMMU")
    assert name is None and values is None
    assert reason == "the attribute registry BiosAttributeRegistryProt0.208.208.0 has no attribute named 'IOMMU'"
    assert bios["Attributes"]["TCG003"] == "Enable"


def test_registry_uri_follows_the_registry_file():
    registry_file = load("ami-zt-registry-file.json")
    uri = "/redfish/v1/Registries/BiosAttributeRegistryProt0.208.208.0.json"
    assert ba.registry_uri(registry_file) == uri  # 'en' finds 'en-US'
    assert ba.registry_uri(registry_file, "de") == uri  # no German copy: the first location
    assert registry_file["Registry"] == load("ami-zt-bios.json")["AttributeRegistry"]
    assert ba.registry_uri({}) is None and ba.registry_uri(None) is None


DISPLAY = {"Dell Inc.": {
    "iommu": {"attribute": "Virtualization Technology", "match": "display_name",
              "values": {"Enabled": "enabled", "Disabled": "disabled"}, "source": "R750 registry, display name"},
    "power_profile": {"attribute": "System Profile", "match": "display_name",
                      "values": {"Performance": "enabled", "Performance Per Watt (OS)": "disabled",
                                 "Turbo Everything": "enabled"},
                      "set": {"enabled": "Performance", "disabled": "Performance Per Watt (OS)"},
                      "source": "R750 registry, display names"}}}


def test_display_name_entries_resolve_through_the_registry_the_bios_names():
    table = ba.merge_table(DISPLAY)
    bios, registry = load("dell-r750-bios.json"), load("dell-r750-registry.json")
    out = ba.map_bios_resource("Dell Inc.", bios, registry, load("dell-r750-bios-settings.json"), table=table)
    assert out["iommu"] == dict(out["iommu"], state="enabled", attribute="ProcVirtualization",
                                source="R750 registry, display name")
    assert out["power_profile"] == dict(out["power_profile"], state="enabled", attribute="SysProfile",
                                        value="PerfOptimized")
    resolved = ba.resolve_table(table, registry, bios["AttributeRegistry"])["dell"]["power_profile"][0]
    # Values and the value to write are the registry's ValueNames; a display value it does not list is left out.
    assert resolved["values"] == {"PerfOptimized": "enabled", "PerfPerWattOptimizedOs": "disabled"}
    assert resolved["set"] == {"enabled": "PerfOptimized", "disabled": "PerfPerWattOptimizedOs"}
    assert resolved["display_name"] == "System Profile" and resolved["registry"] == "BiosAttributeRegistry.v1_0_3"
    plan = ba.compute_patch("Dell Inc.", bios["Attributes"], {}, {"power_profile": "disabled"}, table=table,
                            registry=registry, attribute_registry=bios["AttributeRegistry"])
    assert plan["patch"] == {"SysProfile": "PerfPerWattOptimizedOs"}


def test_display_name_entries_without_the_right_registry_stay_unknown():
    only = ba.merge_table(DISPLAY, table={})  # the display-name entries alone, no shipped ones behind them
    bios = load("dell-r750-bios.json")
    out = ba.map_bios_resource("Dell Inc.", bios, None, table=only)
    assert out["power_profile"]["state"] == "unknown" and out["power_profile"]["attribute"] is None
    assert out["power_profile"]["reason"] == "no BIOS attribute registry was given to resolve display names"
    out = ba.map_bios_resource("Dell Inc.", bios, load("ami-zt-registry.json"), table=only)
    assert out["iommu"]["state"] == "unknown"
    assert out["iommu"]["reason"] == ("the attribute registry BiosAttributeRegistryProt0.208.208.0 is not the one "
                                      "this BIOS names (BiosAttributeRegistry.v1_0_3)")
    ambiguous = ba.merge_table({"dell": {"iommu": {"attribute": "Brand", "match": "display_name",
                                                   "values": {"x": "enabled"}, "source": "s"}}}, table={})
    out = ba.map_bios_resource("dell", bios, load("dell-r750-registry.json"), table=ambiguous)
    assert out["iommu"]["reason"] == ("2 attributes of the registry BiosAttributeRegistry.v1_0_3 are named 'Brand' "
                                      "(Proc1Brand, Proc2Brand): ambiguous")
    # Behind the shipped table, an unresolved display-name entry falls through to the next entry, like an entry
    # whose attribute the BIOS does not have.
    out = ba.map_bios_resource("Dell Inc.", bios, None, table=ba.merge_table(DISPLAY))
    assert out["iommu"]["attribute"] == "ProcVirtualization" and out["iommu"]["source"] == ba.SOURCES[
        "dell_r750_registry"]


def test_registry_names_compare_across_spellings():
    table = ba.merge_table(DISPLAY)
    registry = dict(load("dell-r750-registry.json"), Id="BiosAttributeRegistry.1.0.3")
    out = ba.map_bios("Dell Inc.", attrs("dell-r750-bios.json"), table=table, registry=registry,
                      attribute_registry="BiosAttributeRegistry.v1_0_3")
    assert out["iommu"]["attribute"] == "ProcVirtualization"


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
