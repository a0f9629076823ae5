# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""BIOS settings read out of band (Redfish ``Systems/{id}/Bios``): vendor attribute names -> four settings.

Stdlib only, no Ansible import: the filters of plugins/filter/bios.py, the unit tests and the lab's Redfish BMC
emulator use the same code.

The four settings are ``acs`` (PCIe Access Control Services), ``iommu`` (Intel VT-d / AMD-Vi), ``sriov`` and
``power_profile``. Each one is ``enabled``, ``disabled`` or ``unknown``; for ``power_profile`` ``enabled`` means
"the vendor's maximum-performance profile" and ``disabled`` a profile that is known not to be it.

The table below is the only place that knows vendor attribute names. Every entry names the public BIOS dump or
attribute registry (repository, path and commit) where the attribute and the values it maps were seen, and says
what that source shows. What no source showed is not in the table: an attribute, a value or a vendor the table does
not know is reported ``unknown`` with the reason, never guessed, and cannot be set. An operator who has checked
their own platform's attribute registry adds entries with ``merge_table`` (role variable ``bios_vendor_table_extra``),
each with its source too. docs/bios.md has the same table for people.

BIOSes whose attribute names are opaque codes (AMI-based BMCs: ``TCG003``) are read through the BMC's BIOS attribute
registry (the document ``/redfish/v1/Registries/<Bios.AttributeRegistry>`` points at, see ``registry_uri``): an
entry with ``match: display_name`` names the attribute by its registry ``DisplayName`` and its values by their
``ValueDisplayName``, and ``resolve_table`` turns it into the ``AttributeName`` and ``ValueName``s of that registry.

Redfish semantics followed here (DMTF DSP0266 "Settings resource", Bios schema): ``Bios.Attributes`` are the values
in effect; ``@Redfish.Settings.SettingsObject`` points at the pending settings, applied at the next reset. Some BMCs
list only the pending changes there (Dell, Supermicro), others a full copy of every attribute (HPE, Lenovo): an
attribute is pending when the settings object holds it with a value different from the current one, so both forms
read the same.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy

SETTINGS = ("acs", "iommu", "sriov", "power_profile")
STATES = ("enabled", "disabled", "unknown")
WANTED = ("enabled", "disabled")

_GH = "https://github.com/%s/blob/%s/%s"
_LIBREDFISH = "chet-nvidia/libredfish"
# Public BIOS dumps and registries the table was checked against. The libredfish mockups were captured from real
# BMCs with DMTF's Redfish-Mockup-Creator (tests/mockups/README of that repository); the crate is MIT-licensed
# (Cargo.toml). Copies of the parts the unit tests need are in tests/unit/plugins/module_utils/fixtures/bios/
# (PROVENANCE.md there).
SOURCES = {
    "dell_r750": _GH % (_LIBREDFISH, "4d447210a4ac39e8c9eb611b3f9493c2724efde7",
                        "tests/mockups/dell/redfish/v1/Systems/System.Embedded.1/Bios/index.json"),
    "hpe_a42": _GH % (_LIBREDFISH, "ce33f42406875d62ae8814af9edcbe56f7587968",
                      "tests/mockups/hpe/redfish/v1/Systems/1/Bios/index.json"),
    "lenovo_xcc": _GH % (_LIBREDFISH, "1bbcc7a74d114912bc181f90a395a4dd42e9af79",
                         "tests/mockups/lenovo/redfish/v1/Systems/1/Bios/index.json"),
    "lenovo_registry": _GH % (_LIBREDFISH, "1bbcc7a74d114912bc181f90a395a4dd42e9af79",
                              "docs/lenovo-registry/BiosAttributeRegistry.1.0.0.json"),
    "lenovo_lp1836": "https://lenovopress.lenovo.com/lp1836-tuning-uefi-settings-4th-gen-intel-xeon-scalable-processor",
    "supermicro_x13": _GH % (_LIBREDFISH, "25ff5a985ac875ce3affd43a3dd58eed810a7cc0",
                             "tests/mockups/supermicro/redfish/v1/Systems/1/Bios/index.json"),
    "supermicro_x11ddw_manual": "https://manualshive.com/en/manual/supermicro/x11ddw-l/1404049?page=93",
    # The R750's own BIOS attribute registry, from the same libredfish mockup as dell_r750.
    "dell_r750_registry": _GH % (_LIBREDFISH, "1bbcc7a74d114912bc181f90a395a4dd42e9af79",
                                 "tests/mockups/dell/redfish/v1/Systems/System.Embedded.1/Bios/BiosRegistry/index.json"),
    # A ProLiant Gen10 (Intel, BiosAttributeRegistryU31) Bios resource in proliantutils' unit-test samples (Apache-2.0).
    "hpe_u31": _GH % ("openstack-archive/proliantutils", "09d869326a35762b808b4e4f171f7bac22c79272",
                      "proliantutils/tests/redfish/json_samples/bios.json"),
    # OpenStack Ironic's iLO driver guide: the iLO BIOS attributes and their allowed values.
    "ironic_ilo_doc": _GH % ("openstack/ironic", "6d36b0b785b4b009fbb3e05d4dc5524faa71d6ba",
                             "doc/source/admin/drivers/ilo.rst"),
    # HP's technology brief "HP Power Regulator for ProLiant servers" (page 9 of the copy on manualshelf).
    "hp_power_regulator_brief": "https://www.manualshelf.com/manual/hp/hp-proliant-dl360-g5-server/"
                                "hp-power-regulator-for-proliant-servers/page-9.html",
    # An AMI BMC (ZT Systems board) in sushy's unit-test samples (Apache-2.0): Bios with opaque attribute names, its
    # registry file and its (sushy-trimmed) attribute registry. Used for the display-name lookup, not by the table.
    "ami_zt_bios": _GH % ("openstack/sushy", "bdbbf86df401fa3a0e154ffbbd0c6174b4c93af5",
                          "sushy/tests/unit/json_samples/bios_zt.json"),
    "ami_zt_registry": _GH % ("openstack/sushy", "bdbbf86df401fa3a0e154ffbbd0c6174b4c93af5",
                              "sushy/tests/unit/json_samples/bios_attribute_registry_zthardware.json"),
    "ami_zt_registry_file": _GH % ("openstack/sushy", "fbf44e92c4a820ce0063cfbb4d8a6ad4c224f7ca",
                                   "sushy/tests/unit/json_samples/bios_attribute_registry_file_zthardware.json"),
}


def _switch(on="Enabled", off="Disabled"):
    """``values`` and ``set`` of an attribute whose two values are the two states (a fresh copy each time)."""
    return {"values": {on: "enabled", off: "disabled"}, "set": {"enabled": on, "disabled": off}}


# vendor -> setting -> candidate entries, tried in order (the first whose attribute the BIOS has is used).
# Entry keys:
#   attribute  the attribute name; with match "hash_suffix" the part before '#' (Supermicro appends '#<hex id>'
#              that differs between boards: "IntelVTforDirectedI/O(VT-d)#1E12"); with match "display_name" the
#              DisplayName of the attribute in the BMC's attribute registry (for BIOSes whose names are opaque codes
#              such as AMI's "TCG003"); values and set then use the registry's ValueDisplayName, and the entry is
#              resolved to the attribute's name and ValueNames through the registry (resolve_table)
#   values     {raw value: state} for the values a source showed or documented
#   set        {wanted state: raw value to write}; a state missing here cannot be set through this entry
#   requires   attributes the BIOS must also have for the entry to apply (a platform marker), optional
#   source     URL of the dump/registry/manual; evidence: what it shows; note: anything a reader must know
VENDOR_TABLE = {
    "dell": {
        # PowerEdge R750 dump and registry: no ACS attribute, so acs stays unknown on Dell.
        "iommu": [{
            "attribute": "ProcVirtualization",
            "requires": ["IntelTxt"],
            **_switch(),
            "source": SOURCES["dell_r750_registry"],
            "evidence": 'R750 BiosAttributeRegistry.v1_0_3: ProcVirtualization, DisplayName "Virtualization Technology", '
                        'Enumeration Enabled|Disabled, HelpText "When set to Enabled, the BIOS will enable processor '
                        'Virtualization features and provide the virtualization support to the Operating System (OS) '
                        'through the DMAR table."; the R750 dump ' + SOURCES["dell_r750"] + ' has '
                        '"ProcVirtualization": "Enabled"',
            "note": "DMAR is the ACPI table of Intel VT-d, so the entry applies only to a BIOS that has IntelTxt (Intel "
                    "Trusted Execution Technology: an Intel platform; the R750 dump has it). The IOMMU attribute of AMD "
                    "PowerEdge BIOSes is not in a checked source: unknown there",
        }],
        "sriov": [{
            "attribute": "SriovGlobalEnable",
            **_switch(),
            "source": SOURCES["dell_r750"],
            "evidence": 'PowerEdge R750, BIOS 1.8.2, BiosAttributeRegistry.v1_0_3: "SriovGlobalEnable": "Disabled"',
        }],
        "power_profile": [{
            "attribute": "SysProfile",
            "values": {"PerfOptimized": "enabled", "PerfPerWattOptimizedDapc": "disabled",
                       "PerfPerWattOptimizedOs": "disabled"},
            "set": {"enabled": "PerfOptimized"},
            "source": SOURCES["dell_r750_registry"],
            "evidence": 'R750 BiosAttributeRegistry.v1_0_3: SysProfile "System Profile", values PerfPerWattOptimizedDapc '
                        '"Performance Per Watt (DAPC)", PerfPerWattOptimizedOs "Performance Per Watt (OS)", '
                        'PerfOptimized "Performance", Custom "Custom"; ProcPwrPerf\'s HelpText: "Maximum Performance '
                        'is typically selected for performance-centric workloads [...]", "OS DBPM is another '
                        'Performance Per Watt option"; the R750 dump ' + SOURCES["dell_r750"] + ' has '
                        '"SysProfile": "PerfOptimized" with "ProcPwrPerf": "MaxPerf"',
            "note": "Custom is unknown (each option is then set by hand), and so is any profile this registry does not "
                    "list; no power-saving profile is chosen for you, so power_profile cannot be set disabled",
        }],
    },
    "hpe": {
        "acs": [{
            "attribute": "AccessControlService",
            **_switch(),
            "source": SOURCES["hpe_a42"],
            "evidence": 'iLO BiosAttributeRegistryA42.v1_2_60 (AMD EPYC ProLiant): "AccessControlService": "Enabled"',
        }],
        "iommu": [{
            "attribute": "ProcAmdIoVt",
            **_switch(),
            "source": SOURCES["hpe_a42"],
            "evidence": 'AMD I/O Virtualization Technology (AMD-Vi): "ProcAmdIoVt": "Enabled"',
            "note": "AMD platforms; HPE Intel platforms have IntelProcVtd (next entry)",
        }, {
            "attribute": "IntelProcVtd",
            **_switch(),
            "source": SOURCES["hpe_u31"],
            "evidence": 'ProLiant Gen10 (Intel), BiosAttributeRegistryU31.v1_1_00: "IntelProcVtd": "Enabled"; Ironic\'s '
                        'iLO guide ' + SOURCES["ironic_ilo_doc"] + ': "IntelProcVtd: Hypervisor or operating system '
                        'supporting this option can use hardware capabilities provided by Intel\'s Virtualization '
                        'Technology for Directed I/O. Allowed values are Enabled, Disabled."',
        }],
        "sriov": [{
            "attribute": "Sriov",
            **_switch(),
            "source": SOURCES["hpe_a42"],
            "evidence": '"Sriov": "Enabled" (also in the Gen10 Intel sample ' + SOURCES["hpe_u31"] + '); Ironic\'s iLO '
                        'guide: "Sriov: If enabled, SR-IOV support enables a hypervisor to create virtual instances of '
                        'a PCI-express device [...] Allowed values are Enabled, Disabled."',
        }],
        "power_profile": [{
            "attribute": "PowerRegulator",
            "values": {"StaticHighPerf": "enabled", "DynamicPowerSavings": "disabled", "StaticLowPower": "disabled",
                       "OsControl": "disabled"},
            "set": {"enabled": "StaticHighPerf"},
            "source": SOURCES["ironic_ilo_doc"],
            "evidence": 'Ironic\'s iLO guide: "PowerRegulator: Determines how to regulate the power consumption. '
                        'Allowed values are DynamicPowerSavings, StaticLowPower, StaticHighPerf, OsControl."; HP\'s '
                        'Power Regulator brief ' + SOURCES["hp_power_regulator_brief"] + ': "Static High Performance '
                        'mode delivers the highest performance at every performance interval up to maximum processor '
                        'performance (100%)"; the dumps ' + SOURCES["hpe_a42"] + ' ("PowerRegulator": "OsControl") and '
                        + SOURCES["hpe_u31"] + ' ("DynamicPowerSavings")',
            "note": "WorkloadProfile (GeneralPowerEfficientCompute in both dumps) is not mapped: no checked source says "
                    "which preset profile is the maximum-performance one, and a preset profile other than Custom sets "
                    "dependent options, which may include the Power Regulator. No power-saving mode is chosen for you, "
                    "so power_profile cannot be set disabled",
        }],
    },
    "lenovo": {
        # Processors_PCIeACSCTL and the per-bit ACS attributes (Processors_SourceValidation, ..._P2PRequestRedirect)
        # are in the XCC dump, but no checked source documents what their values do: acs stays unknown on Lenovo.
        "iommu": [{
            "attribute": "DevicesandIOPorts_IntelVTforDirectedIOVTd",
            **_switch(),
            "source": SOURCES["lenovo_registry"],
            "evidence": 'XCC BiosAttributeRegistry.1.0.0: DisplayName "Intel(R) VT for Directed I/O (VT-d)", '
                        'Enumeration Disabled|Enabled, default Enabled, ResetRequired true; the XCC dump '
                        + SOURCES["lenovo_xcc"] + ' has "Enabled"',
        }],
        "power_profile": [{
            "attribute": "OperatingModes_ChooseOperatingMode",
            "values": {"MaximumPerformance": "enabled", "Efficiency_FavorPerformance": "disabled",
                       "Efficiency_FavorPower": "disabled"},
            "set": {"enabled": "MaximumPerformance"},
            "source": SOURCES["lenovo_xcc"],
            "evidence": 'XCC dump: "OperatingModes_ChooseOperatingMode": "Efficiency_FavorPerformance"; the four '
                        'preset modes (Minimal Power, Efficiency - Favor Power, Efficiency - Favor Performance, '
                        'Maximum Performance) are Lenovo Press LP1836 ' + SOURCES["lenovo_lp1836"],
            "note": "CustomMode and MinimalPower are not mapped (reported unknown)",
        }],
    },
    "supermicro": {
        "acs": [{
            "attribute": "PCIeACSCTL",
            "match": "hash_suffix",
            # The manual's wording: "Select Enable to program Access Control Services to Chipset PCI-E Root Port
            # Bridges. Select Disable to program Access Control Services to all PCI-E Root Port Bridges."
            **_switch("Disable", "Enable"),
            "source": SOURCES["supermicro_x11ddw_manual"],
            "evidence": 'X13 dump ' + SOURCES["supermicro_x13"] + ': "PCIeACSCTL#1E1C": "Disable"; X11DDW-L manual '
                        'p.93 "ACS (Access Control Services) Control"',
            "note": "inverted: Enable limits ACS to the chipset's root ports (GPU and NIC paths hang off the CPU "
                    "root ports and PCIe switches), Disable programs ACS on every root port",
        }],
        "iommu": [{
            "attribute": "IntelVTforDirectedI/O(VT-d)",
            "match": "hash_suffix",
            **_switch("Enable", "Disable"),
            "source": SOURCES["supermicro_x13"],
            "evidence": '"IntelVTforDirectedI/O(VT-d)#1E12": "Enable"; options Enable/Disable in the X11DDW-L '
                        'manual p.93 ' + SOURCES["supermicro_x11ddw_manual"],
        }],
        "sriov": [{
            "attribute": "SR-IOVSupport",
            "match": "hash_suffix",
            **_switch(),
            "source": SOURCES["supermicro_x13"],
            "evidence": '"SR-IOVSupport#0048": "Enabled" (this attribute spells Enabled/Disabled, unlike the '
                        'VT-d one)',
        }],
        # PowerTechnology ("Custom" in the dump) has no value a checked source documents as maximum performance.
    },
}

# Manufacturer strings (ComputerSystem.Manufacturer, service root Vendor) -> table key. Matched on the lower-case
# text with spaces, dots and commas removed, by prefix.
_VENDOR_PREFIXES = (
    ("dell", "dell"),
    ("hpe", "hpe"),
    ("hewlettpackardenterprise", "hpe"),
    ("hp", "hpe"),  # iLO of older ProLiants reports "HP"
    ("lenovo", "lenovo"),
    ("supermicro", "supermicro"),
    ("supermicrocomputer", "supermicro"),
)


MATCHES = ("exact", "hash_suffix", "display_name")


def _norm_vendor(manufacturer):
    return "".join(ch for ch in str(manufacturer).lower() if ch not in " .,-_")


def vendor_key(manufacturer):
    """The table key of a manufacturer string ('Dell Inc.' -> 'dell'), or None when the table does not know it."""
    if manufacturer is None:
        return None
    text = _norm_vendor(manufacturer)
    if text in VENDOR_TABLE:
        return text
    for prefix, key in _VENDOR_PREFIXES:
        if text.startswith(prefix):
            return key
    return None


def _table_key(table, vendor):
    """The key of ``vendor`` in ``table``: as given, through vendor_key, or the manufacturer text normalised as
    merge_table stores an operator's vendor ('GIGABYTE' and 'Gigabyte' both find 'gigabyte'); None otherwise."""
    if vendor is None:
        return None
    if vendor in table:
        return vendor
    key = vendor_key(vendor)
    if key is not None:
        return key
    text = _norm_vendor(vendor)
    return text if text in table else None


def merge_table(extra=None, table=None):
    """The vendor table with the operator's entries first: ``{vendor: {setting: [entry, ...]}}``.

    Every extra entry needs ``attribute``, ``values`` (raw value -> enabled|disabled) and ``source``; ``set``
    (enabled|disabled -> raw value), ``match`` (exact|hash_suffix|display_name) and ``requires`` (attribute names)
    are optional. A vendor the table does not know is stored under its manufacturer text in lower case without
    spaces, dots, commas, dashes or underscores ('Giga Computing' -> 'gigacomputing'). Raises ValueError naming the
    first problem.
    """
    merged = copy.deepcopy(VENDOR_TABLE if table is None else table)
    for vendor, settings in (extra or {}).items():
        key = vendor_key(vendor) or _norm_vendor(vendor)
        if not isinstance(settings, dict):
            raise ValueError("vendor %s: expected a dict of settings, got %s" % (vendor, type(settings).__name__))
        for setting, entries in settings.items():
            if setting not in SETTINGS:
                raise ValueError("vendor %s: unknown setting %r (one of %s)" % (vendor, setting, ", ".join(SETTINGS)))
            if isinstance(entries, dict):
                entries = [entries]
            checked = []
            for entry in entries or []:
                checked.append(_check_entry(vendor, setting, entry))
            merged.setdefault(key, {}).setdefault(setting, [])
            merged[key][setting] = checked + merged[key][setting]
    return merged


def _check_entry(vendor, setting, entry):
    where = "vendor %s, setting %s" % (vendor, setting)
    if not isinstance(entry, dict):
        raise ValueError("%s: an entry must be a dict, got %s" % (where, type(entry).__name__))
    for key in ("attribute", "values", "source"):
        if not entry.get(key):
            raise ValueError("%s: entry needs %r (every table entry names its source)" % (where, key))
    if not isinstance(entry["values"], dict):
        raise ValueError("%s: values must map raw values to enabled|disabled" % where)
    bad = sorted(str(v) for v in entry["values"].values() if v not in WANTED)
    if bad:
        raise ValueError("%s: values map to enabled or disabled only, got %s" % (where, ", ".join(bad)))
    set_values = entry.get("set")
    if set_values is None:
        # Derive the values to write from the first raw value of each state.
        set_values = {}
        for raw, state in entry["values"].items():
            set_values.setdefault(state, raw)
    if not isinstance(set_values, dict) or any(k not in WANTED for k in set_values):
        raise ValueError("%s: set must map enabled|disabled to the raw value to write" % where)
    match = entry.get("match", "exact")
    if match not in MATCHES:
        raise ValueError("%s: match must be one of %s, got %r" % (where, ", ".join(MATCHES), match))
    requires = entry.get("requires", [])
    if not isinstance(requires, list) or not all(isinstance(r, str) and r for r in requires):
        raise ValueError("%s: requires must be a list of attribute names" % where)
    out = dict(entry)
    out["set"] = dict(set_values)
    out["match"] = match
    return out


def _find(entry, attributes):
    """(attribute name in the BIOS, None) or (None, reason)."""
    name = entry["attribute"]
    match = entry.get("match", "exact")
    if match == "display_name":
        # Only an entry that resolve_table could not resolve gets here (a resolved one has match "exact").
        return None, entry.get("unresolved") or ("display name %r needs the BIOS attribute registry" % name)
    if match == "exact":
        if name not in attributes:
            return None, "no attribute %s" % name
        found = name
    else:
        candidates = sorted(a for a in attributes if a.split("#", 1)[0] == name)
        if not candidates:
            return None, "no attribute %s#<id>" % name
        if len(candidates) > 1:
            return None, "%d attributes match %s#<id> (%s): ambiguous" % (len(candidates), name, ", ".join(candidates))
        found = candidates[0]
    missing = [r for r in entry.get("requires", []) if r not in attributes]
    if missing:
        return None, "%s is read only on a BIOS that also has %s" % (found, ", ".join(missing))
    return found, None


# -- attribute registries (BIOSes whose attribute names are opaque codes) -----------------------------------------

def _norm_text(text):
    """Display names compared with runs of white space collapsed and the ends stripped (AMI writes
    '  Disable Block Sid')."""
    return " ".join(str(text).split())


def _norm_registry_id(name):
    """Registry names as the Bios resource and the registry spell them: 'BiosAttributeRegistry.v1_0_0' and
    'BiosAttributeRegistry.1.0.0' are the same registry."""
    text = str(name or "").strip().lower()
    for suffix in (".json",):
        if text.endswith(suffix):
            text = text[:-len(suffix)]
    return text.replace(".v", ".").replace("_", ".")


def registry_attributes(registry):
    """The ``RegistryEntries.Attributes`` list of an attribute registry document (empty when it has none)."""
    if not isinstance(registry, dict):
        return []
    entries = (registry.get("RegistryEntries") or {}).get("Attributes") or []
    return [a for a in entries if isinstance(a, dict) and a.get("AttributeName")]


def registry_lookup(registry, display_name):
    """Find an attribute by its DisplayName in an attribute registry document.

    Returns ``(attribute_name, {value display name: value name}, None)``, or ``(None, None, reason)`` when no
    attribute, or more than one, has that display name. The value map is empty for an attribute without a
    ``Value`` list (not an enumeration).
    """
    wanted = _norm_text(display_name)
    found = [a for a in registry_attributes(registry) if _norm_text(a.get("DisplayName", "")) == wanted]
    rid = registry.get("Id") if isinstance(registry, dict) else None
    if not found:
        return None, None, "the attribute registry %s has no attribute named %r" % (rid, wanted)
    if len(found) > 1:
        return None, None, "%d attributes of the registry %s are named %r (%s): ambiguous" % (
            len(found), rid, wanted, ", ".join(a["AttributeName"] for a in found))
    values = {}
    for value in found[0].get("Value") or []:
        if isinstance(value, dict) and "ValueName" in value:
            values[_norm_text(value.get("ValueDisplayName", value["ValueName"]))] = value["ValueName"]
    return found[0]["AttributeName"], values, None


def _resolve_entry(entry, registry, mismatch):
    out = dict(entry)
    if mismatch:
        out["unresolved"] = mismatch
        return out
    name, values, reason = registry_lookup(registry, entry["attribute"])
    if name is None:
        out["unresolved"] = reason
        return out

    def raw(shown):
        # An attribute without a Value list (boolean, integer, string) is written as the entry gives it.
        return values.get(_norm_text(shown)) if values else shown

    out.update(attribute=name, match="exact", display_name=_norm_text(entry["attribute"]),
               registry=registry.get("Id"), values={}, set={})
    for shown, state in entry["values"].items():
        if raw(shown) is not None:
            out["values"][raw(shown)] = state
    for state, shown in (entry.get("set") or {}).items():
        if raw(shown) is not None:
            out["set"][state] = raw(shown)
    if not out["values"]:
        out.update(match="display_name", unresolved="none of the values %s of %r is in the registry %s" % (
            ", ".join(repr(v) for v in entry["values"]), entry["attribute"], registry.get("Id")))
    return out


def resolve_table(table, registry, attribute_registry=None):
    """The table with every ``match: display_name`` entry resolved through an attribute registry document.

    A resolved entry names the attribute (``AttributeName``) and maps the registry's ``ValueName``s; it keeps
    ``display_name`` and ``registry`` (the registry's Id). An entry that cannot be resolved (no such display name,
    several, none of its values, no registry, or a registry that is not the one ``attribute_registry`` names: the
    Bios resource's ``AttributeRegistry``) keeps ``match: display_name`` with the reason in ``unresolved``, and
    reads as unknown. Other entries are unchanged.
    """
    mismatch = None
    if not isinstance(registry, dict) or not registry:
        mismatch = "no BIOS attribute registry was given to resolve display names"
    elif attribute_registry and _norm_registry_id(attribute_registry) != _norm_registry_id(registry.get("Id")):
        mismatch = "the attribute registry %s is not the one this BIOS names (%s)" % (
            registry.get("Id"), attribute_registry)
    out = {}
    for vendor, settings in table.items():
        out[vendor] = {}
        for setting, entries in settings.items():
            out[vendor][setting] = [_resolve_entry(e, registry, mismatch) if e.get("match") == "display_name" else e
                                    for e in entries]
    return out


def registry_uri(registry_file, language="en"):
    """The URI of the registry document a MessageRegistryFile (``/redfish/v1/Registries/<name>``) points at.

    Picks the ``Location`` whose ``Language`` is ``language``, else one whose language starts with it ('en-US' for
    'en'), else the first; its ``Uri`` (a path on the BMC), else ``PublicationUri``. None when there is none.
    """
    locations = [loc for loc in (registry_file or {}).get("Location") or [] if isinstance(loc, dict)]
    lang = str(language or "").lower()
    ordered = ([loc for loc in locations if str(loc.get("Language", "")).lower() == lang]
               + [loc for loc in locations if str(loc.get("Language", "")).lower().startswith(lang)]
               + locations)
    for loc in ordered:
        uri = loc.get("Uri") or loc.get("PublicationUri")
        if uri:
            return uri
    return None


def needs_registry(vendor, table=None):
    """Whether the table's entries for ``vendor`` (a manufacturer text) name an attribute by its display name: only
    then is the BMC's attribute registry worth reading (registries are large: Dell's is over 1 MB)."""
    table = VENDOR_TABLE if table is None else table
    settings = table.get(_table_key(table, vendor)) or {}
    return any(e.get("match") == "display_name" for entries in settings.values() for e in entries)


def _prepare(table, vendor, registry, attribute_registry):
    table = VENDOR_TABLE if table is None else table
    key = _table_key(table, vendor)
    settings = table.get(key) or {}
    if any(e.get("match") == "display_name" for entries in settings.values() for e in entries):
        table = dict(table)
        table.update(resolve_table({key: settings}, registry, attribute_registry))
    return table, key


def _same(a, b):
    """Equal values of the same JSON kind: True is not 1 and "1" is not 1 (subclasses of str, such as the tagged
    strings ansible-core hands to filters, are strings)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    return a == b


def _state(entry, value):
    for raw, state in entry["values"].items():
        if _same(raw, value):
            return state
    return "unknown"


def _entry_for(table, vendor, setting, attributes):
    """(entry, attribute, reason): the first entry whose attribute this BIOS has."""
    if vendor is None:
        return None, None, "vendor not in the table"
    entries = table.get(vendor, {}).get(setting) or []
    if not entries:
        return None, None, "the table has no %s attribute for %s" % (setting, vendor)
    reasons = []
    for entry in entries:
        attribute, reason = _find(entry, attributes)
        if attribute is not None:
            return entry, attribute, None
        reasons.append(reason)
    return None, None, "; ".join(reasons)


def pending_changes(current, pending):
    """``{attribute: {"current": value, "pending": value}}`` for every attribute the settings object would change
    (a full copy and a list of changes read the same); an attribute only in the pending set is listed with current
    None."""
    out = {}
    current = current or {}
    for name, value in (pending or {}).items():
        if name not in current or not _same(current[name], value):
            out[name] = {"current": current.get(name), "pending": value}
    return out


def map_bios(vendor, attributes, pending=None, table=None, registry=None, attribute_registry=None):
    """Map a BIOS to the four settings.

    ``vendor`` is a table key or a manufacturer string; ``attributes`` the ``Bios.Attributes`` in effect;
    ``pending`` the ``Attributes`` of the settings object (optional); ``registry`` the BIOS attribute registry
    document and ``attribute_registry`` the Bios resource's ``AttributeRegistry`` (both optional, needed only by
    ``match: display_name`` entries, see resolve_table). Returns ``{setting: {value, state, attribute, source,
    reason, pending_value, pending_state, next_state}}``: ``pending_value``/``pending_state`` are set only when a
    different value waits for the next reset, ``next_state`` is the state after it.
    """
    table, key = _prepare(table, vendor, registry, attribute_registry)
    attributes = attributes or {}
    changes = pending_changes(attributes, pending)
    out = {}
    for setting in SETTINGS:
        entry, attribute, reason = _entry_for(table, key, setting, attributes)
        if entry is None:
            if key is None:
                reason = "vendor %r is not in the table" % (vendor,)
            out[setting] = {"value": None, "state": "unknown", "attribute": None, "source": None,
                            "reason": reason, "pending_value": None, "pending_state": None, "next_state": "unknown"}
            continue
        value = attributes[attribute]
        state = _state(entry, value)
        item = {"value": value, "state": state, "attribute": attribute, "source": entry["source"],
                "reason": None if state != "unknown" else "value %r is not in the table for %s" % (value, attribute),
                "pending_value": None, "pending_state": None, "next_state": state}
        if attribute in changes:
            item["pending_value"] = changes[attribute]["pending"]
            item["pending_state"] = _state(entry, item["pending_value"])
            item["next_state"] = item["pending_state"]
        out[setting] = item
    return out


def map_bios_resource(vendor, bios, registry=None, settings=None, table=None):
    """map_bios from the Redfish resources themselves: the ``Bios`` resource (its ``Attributes`` and
    ``AttributeRegistry``), the attribute registry document it names (optional) and the settings object
    (optional)."""
    bios = bios or {}
    return map_bios(vendor, bios.get("Attributes") or {}, (settings or {}).get("Attributes"), table=table,
                    registry=registry, attribute_registry=bios.get("AttributeRegistry"))


def compute_patch(vendor, current, pending, wanted, table=None, registry=None, attribute_registry=None):
    """The attributes to stage so that the next reset brings ``wanted`` (``{setting: enabled|disabled|None}``).

    Already-pending values are honoured: a setting whose pending value already gives the wanted state is not staged
    again. Returns ``{"patch": {attribute: value}, "settings": {setting: {action, attribute, current, pending,
    target, reason}}, "unsupported": [...], "conflicts": [...]}`` where action is one of

    * ``none``: in effect, nothing pending against it;
    * ``already_pending``: the pending value gives the wanted state (a reset applies it);
    * ``stage``: the attribute goes into ``patch``;
    * ``conflict``: in effect now, but a pending value would undo it at the next reset. community.general's
      SetBiosAttributes drops an attribute whose current value equals the requested one, so it cannot override the
      pending value: the pending change must be cleared on the BMC first;
    * ``unsupported``: the table cannot read or set it on this BIOS (reason says why).

    ``registry`` and ``attribute_registry`` as for map_bios.
    """
    table, key = _prepare(table, vendor, registry, attribute_registry)
    current = current or {}
    changes = pending_changes(current, pending)
    result = {"patch": {}, "settings": {}, "unsupported": [], "conflicts": []}
    for setting, want in sorted((wanted or {}).items()):
        if want is None:
            continue
        if setting not in SETTINGS:
            raise ValueError("unknown setting %r (one of %s)" % (setting, ", ".join(SETTINGS)))
        if want not in WANTED:
            raise ValueError("%s: wanted state must be enabled or disabled, got %r" % (setting, want))
        item = {"action": None, "attribute": None, "current": None, "pending": None, "target": None, "reason": None}
        result["settings"][setting] = item
        entry, attribute, reason = _entry_for(table, key, setting, current)
        if entry is None:
            item.update(action="unsupported",
                        reason=reason if key is not None else "vendor %r is not in the table" % (vendor,))
            result["unsupported"].append(setting)
            continue
        item["attribute"] = attribute
        item["current"] = current[attribute]
        target = entry["set"].get(want)
        now = _state(entry, current[attribute])
        nxt = now
        if attribute in changes:
            item["pending"] = changes[attribute]["pending"]
            nxt = _state(entry, item["pending"])
        if now == want and nxt == want:
            item["action"] = "none"
        elif nxt == want:
            item["action"] = "already_pending"
        elif now == want:
            item.update(action="conflict", reason="pending value %r would change %s at the next reset; clear the "
                        "pending BIOS settings on the BMC first" % (item["pending"], attribute))
            result["conflicts"].append(setting)
        elif target is None:
            item.update(action="unsupported", reason="the table has no value of %s that sets %s %s"
                        % (attribute, setting, want))
            result["unsupported"].append(setting)
        else:
            item.update(action="stage", target=target)
            result["patch"][attribute] = target
    return result


def judge(mapped, expected, runtime_acs_enabled=None):
    """Compare the BIOS state (``map_bios``) and the runtime ACS state with what the hardware profile expects.

    ``expected`` is ``{setting: enabled|disabled}`` (settings left out are not judged); ``runtime_acs_enabled`` is
    whether ACS is enabled on a GPU/NIC path now (clusterforge.gpu.pcie_acs_info), None when not read. Returns
    ``{"problems": [...], "unknown": [...], "pending": [...]}``: a problem is a known state that disagrees with the
    profile (BIOS or runtime); a setting whose BIOS state is unknown is listed in ``unknown``, not failed; a setting
    whose pending value would fix or break it at the next reset is listed in ``pending``.
    """
    out = {"problems": [], "unknown": [], "pending": []}
    for setting, want in sorted((expected or {}).items()):
        if want is None:
            continue
        if setting not in SETTINGS or want not in WANTED:
            raise ValueError("expected %s=%r: setting must be one of %s and the state enabled or disabled"
                             % (setting, want, ", ".join(SETTINGS)))
        item = (mapped or {}).get(setting) or {"state": "unknown", "reason": "not read"}
        if item["state"] == "unknown":
            out["unknown"].append("%s: BIOS state unknown (%s)" % (setting, item.get("reason") or "no reason"))
        elif item["state"] != want:
            out["problems"].append("%s: BIOS %s=%r is %s, the profile wants %s" % (
                setting, item.get("attribute"), item.get("value"), item["state"], want))
        if item.get("pending_state") is not None and item.get("next_state") != item["state"]:
            out["pending"].append("%s: %s at the next reset (%s=%r pending)" % (
                setting, item["next_state"], item.get("attribute"), item.get("pending_value")))
    want_acs = (expected or {}).get("acs")
    if want_acs in WANTED and runtime_acs_enabled is not None:
        runtime = "enabled" if runtime_acs_enabled else "disabled"
        if runtime != want_acs:
            out["problems"].append("acs: runtime ACS on the GPU/NIC paths is %s, the profile wants %s" % (runtime, want_acs))
    return out


def report_lines(host, state, reboot_required):
    """What the bios role tells the operator about one node (``state``: its bios_state fact): the node, its maker,
    model and BMC, then each setting's state with the attribute and value it was read from (or why it is unknown) and
    the state after the next reboot where a change is pending, the pending attributes, what this run staged or would
    stage, and whether a reboot is needed. One list of sentences, joined by the caller."""
    import json  # pylint: disable=import-outside-toplevel
    lines = ["%s (%s %s, BMC %s):" % (host, state.get("manufacturer") or "unknown manufacturer", state.get("model") or "",
                                      state.get("bmc"))]
    settings = list((state.get("settings") or {}).items())
    for index, (name, item) in enumerate(settings):
        source = "%s=%s" % (item.get("attribute"), item.get("value")) if item.get("attribute") else item.get("reason")
        what = "%s %s (%s)" % (name, item.get("state"), source)
        if item.get("pending_value") is not None:
            what += ", %s after the next reboot" % item.get("next_state")
        lines.append(what + (";" if index < len(settings) - 1 else "."))
    if state.get("pending"):
        lines.append("Pending on the BMC: %s." % ", ".join(str(k) for k in state["pending"]))
    for key, label in (("staged", "Staged now"), ("would_stage", "Would stage")):
        if state.get(key):
            lines.append("%s: %s." % (label, json.dumps(state[key])))
    lines.append("Reboot needed: %s" % ("yes." if reboot_required else "no."))
    return lines


def choose_system(redfish_facts, system_id=None):
    """The systems of a redfish_info result (GetSystemInventory with GetBiosAttributes) that ``system_id`` names (every
    one when None), each ``{uri, inventory, attributes}`` (attributes None when the BMC gave none for it), with the
    number of systems and the modules' error messages: ``{found, count, error}``."""
    facts = redfish_facts if isinstance(redfish_facts, dict) else {}
    systems = facts.get("system") if isinstance(facts.get("system"), dict) else {}
    bios = facts.get("bios_attribute") if isinstance(facts.get("bios_attribute"), dict) else {}
    entries = [e for e in systems.get("entries") or [] if isinstance(e, (list, tuple)) and len(e) == 2]
    found = []
    for where, inventory in entries:
        if system_id is not None and (inventory or {}).get("Id", "") != system_id:
            continue
        uri = (where or {}).get("system_uri")
        attributes = [e[1] for e in bios.get("entries") or []
                      if isinstance(e, (list, tuple)) and len(e) == 2 and (e[0] or {}).get("system_uri") == uri]
        found.append({"uri": uri, "inventory": inventory, "attributes": attributes[0] if attributes else None})
    error = "; ".join(str(m) for m in (systems.get("msg"), bios.get("msg")) if m)
    return {"found": found, "count": len(systems.get("entries") or []), "error": error}


def plan_problems(plan, wanted):
    """One line per wanted setting the plan cannot stage (unsupported) or that a pending value would undo (conflict):
    ``<setting> <wanted state>: <why>``."""
    settings = plan.get("settings") or {}
    return ["%s %s: %s" % (name, wanted.get(name), (settings.get(name) or {}).get("reason"))
            for name in list(plan.get("unsupported") or []) + list(plan.get("conflicts") or [])]


def not_pending(patch, pending):
    """What was staged but is not pending on the BMC when read back: ``<attribute>=<value>`` each."""
    pending = pending or {}
    return ["%s=%s" % (name, value) for name, value in (patch or {}).items()
            if name not in pending or pending[name] != value]
