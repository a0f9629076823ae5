# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bios_* filters (plugins/filter/bios.py): plain data to plugin_utils/bios_attributes.py, errors as filter
errors, and values as ansible-core hands them to filters (tagged str subclasses) read like plain ones."""

import json
import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter import bios
from ansible_collections.clusterforge.gpu.plugins.filter.bios import FilterModule

FIX = os.path.join(os.path.dirname(__file__), "..", "module_utils", "fixtures", "bios")


def load(name):
    with open(os.path.join(FIX, name)) as f:
        return json.load(f)


HPE = {"AccessControlService": "Enabled", "ProcAmdIoVt": "Enabled", "Sriov": "Enabled", "PowerRegulator": "OsControl"}


class Tagged(str):
    """Stands in for the tagged strings ansible-core >= 2.19 hands to filters (a str subclass)."""


def test_filters_registered():
    assert sorted(FilterModule().filters()) == ["bios_bmc_tls_problem", "bios_judge", "bios_map", "bios_needs_registry",
                                                "bios_not_pending", "bios_plan", "bios_registry_uri",
                                                "bios_report_lines", "bios_system", "bios_vendor"]


def test_vendor():
    assert bios.bios_vendor("Dell Inc.") == "dell" and bios.bios_vendor(None) is None


def test_map_reads_subclassed_strings_like_plain_ones():
    attrs = dict((Tagged(k), Tagged(v)) for k, v in HPE.items())
    out = bios.bios_map(attrs, Tagged("HPE"), {Tagged("Sriov"): Tagged("Disabled")})
    assert out["acs"]["state"] == "enabled" and out["sriov"]["next_state"] == "disabled"


def test_plan_includes_every_pending_change():
    plan = bios.bios_plan(HPE, "HPE", {"Sriov": "Disabled", "BootMode": "Uefi"}, {"acs": "disabled"})
    assert plan["patch"] == {"AccessControlService": "Disabled"}
    assert plan["pending_changes"] == {"Sriov": {"current": "Enabled", "pending": "Disabled"},
                                       "BootMode": {"current": None, "pending": "Uefi"}}


def test_errors_are_filter_errors():
    with pytest.raises(AnsibleFilterError, match="wanted state must be enabled or disabled"):
        bios.bios_plan(HPE, "HPE", {}, {"acs": "off"})
    with pytest.raises(AnsibleFilterError, match="expected a dict"):
        bios.bios_map(["not", "a", "dict"], "HPE")
    with pytest.raises(AnsibleFilterError, match="names its source"):
        bios.bios_map(HPE, "HPE", table_extra={"hpe": {"acs": {"attribute": "X", "values": {"A": "enabled"}}}})
    with pytest.raises(AnsibleFilterError, match="bios_judge"):
        bios.bios_judge({}, {"acs": "off"})


def test_judge_takes_the_map_output():
    # The role and validation chain them in templates (exercised through ansible-playbook in
    # tests/lab/unit/test_emulator_redfish_bmc.py); here the same chain in Python.
    verdict = bios.bios_judge(bios.bios_map(HPE, "HPE"), {"acs": "disabled"}, runtime_acs_enabled=False)
    assert verdict["problems"] == ["acs: BIOS AccessControlService='Enabled' is enabled, the profile wants disabled"]


def test_map_and_plan_resolve_display_names_through_the_registry():
    """An operator entry by display name, read from the recorded R750 Bios and its registry."""
    bios_resource, registry = load("dell-r750-bios.json"), load("dell-r750-registry.json")
    extra = {"Dell Inc.": {"power_profile": {"attribute": "System Profile", "match": "display_name",
                                             "values": {"Performance": "enabled",
                                                        "Performance Per Watt (DAPC)": "disabled"},
                                             "source": "R750 registry"}}}
    attrs = dict(bios_resource["Attributes"], SysProfile=Tagged("PerfPerWattOptimizedDapc"))
    out = bios.bios_map(attrs, "Dell Inc.", None, extra, registry, Tagged(bios_resource["AttributeRegistry"]))
    assert out["power_profile"]["state"] == "disabled" and out["power_profile"]["source"] == "R750 registry"
    plan = bios.bios_plan(attrs, "Dell Inc.", {}, {"power_profile": "enabled"}, extra, registry,
                          bios_resource["AttributeRegistry"])
    assert plan["patch"] == {"SysProfile": "PerfOptimized"}
    # Without the registry the display-name entry is unknown and the shipped entry behind it is read.
    assert bios.bios_map(attrs, "Dell Inc.", table_extra=extra)["power_profile"]["source"] != "R750 registry"
    with pytest.raises(AnsibleFilterError, match="bios_map registry: expected a dict"):
        bios.bios_map(attrs, "Dell Inc.", registry=["not", "a", "registry"])


def test_registry_uri():
    assert bios.bios_registry_uri(load("ami-zt-registry-file.json")) == \
        "/redfish/v1/Registries/BiosAttributeRegistryProt0.208.208.0.json"
    assert bios.bios_registry_uri({"Location": []}) == ""
    with pytest.raises(AnsibleFilterError, match="expected a dict"):
        bios.bios_registry_uri("BiosAttributeRegistry.v1_0_0")


def test_report_lines_say_each_setting_what_is_pending_and_whether_to_reboot():
    """The bios role's report of a node (filter bios_report_lines, in place of a Jinja loop in tasks/report.yml)."""
    state = {"bmc": "10.0.1.11", "manufacturer": "HPE", "model": "ProLiant XL675d Gen10 Plus",
             "settings": {"acs": {"state": "enabled", "attribute": "AccessControlService", "value": "Enabled",
                                  "pending_value": "Disabled", "next_state": "disabled"},
                          "sriov": {"state": "unknown", "attribute": None, "value": None, "pending_value": None,
                                    "reason": "no attribute of the table in this BIOS"}},
             "pending": {"AccessControlService": "Disabled"}, "staged": {"AccessControlService": "Disabled"},
             "would_stage": {}}
    lines = FilterModule().filters()["bios_report_lines"](state, "gpu01", True)
    assert " ".join(lines) == (
        "gpu01 (HPE ProLiant XL675d Gen10 Plus, BMC 10.0.1.11): acs enabled (AccessControlService=Enabled), disabled "
        "after the next reboot; sriov unknown (no attribute of the table in this BIOS). Pending on the BMC: "
        "AccessControlService. Staged now: {\"AccessControlService\": \"Disabled\"}. Reboot needed: yes.")
    assert FilterModule().filters()["bios_report_lines"](
        {"bmc": "b", "settings": {}, "pending": {}}, "gpu02")[-1] == "Reboot needed: no."


def test_the_registry_is_needed_only_for_display_name_entries():
    needs = FilterModule().filters()["bios_needs_registry"]
    assert needs("Dell Inc.") is False and needs("Giga Computing") is False
    extra = {"Giga Computing": {"acs": {"attribute": "PCIe ACS Control", "match": "display_name",
                                        "values": {"Enabled": "enabled"}, "source": "the site's registry"}}}
    assert needs("Giga Computing", extra) is True and needs("GIGA COMPUTING", extra) is True
    assert needs("Dell Inc.", extra) is False


def test_the_system_is_chosen_with_its_attributes_and_the_modules_errors():
    """In place of Jinja loops in the bios role's read and apply tasks and its vars."""
    facts = {"system": {"entries": [[{"system_uri": "/redfish/v1/Systems/1"}, {"Id": "1", "Manufacturer": "HPE"}],
                                    [{"system_uri": "/redfish/v1/Systems/2"}, {"Id": "2"}]]},
             "bios_attribute": {"entries": [[{"system_uri": "/redfish/v1/Systems/2"}, {"Sriov": "Enabled"}]],
                                "msg": "partial"}}
    choose = FilterModule().filters()["bios_system"]
    both = choose(facts)
    assert both["count"] == 2 and both["error"] == "partial"
    assert [(f["uri"], f["attributes"]) for f in both["found"]] == [
        ("/redfish/v1/Systems/1", None), ("/redfish/v1/Systems/2", {"Sriov": "Enabled"})]
    assert [f["inventory"]["Id"] for f in choose(facts, "2")["found"]] == ["2"]
    assert choose({}, None) == {"found": [], "count": 0, "error": ""}
    not_pending = FilterModule().filters()["bios_not_pending"]
    assert not_pending({"Sriov": "Disabled", "AccessControlService": "Disabled"},
                       {"Sriov": "Disabled", "AccessControlService": "Enabled"}) == ["AccessControlService=Disabled"]
    assert not_pending({"Sriov": "Disabled"}, None) == ["Sriov=Disabled"]
