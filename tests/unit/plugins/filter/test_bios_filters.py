# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bios_* filters (plugins/filter/bios.py): plain data to plugin_utils/bios_attributes.py, errors as filter
errors, and values as ansible-core hands them to filters (tagged str subclasses) read like plain ones."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter import bios
from ansible_collections.clusterforge.gpu.plugins.filter.bios import FilterModule

HPE = {"AccessControlService": "Enabled", "ProcAmdIoVt": "Enabled", "Sriov": "Enabled", "PowerRegulator": "OsControl"}


class Tagged(str):
    """Stands in for the tagged strings ansible-core >= 2.19 hands to filters (a str subclass)."""


def test_filters_registered():
    assert sorted(FilterModule().filters()) == ["bios_bmc_tls_problem", "bios_judge", "bios_map", "bios_plan", "bios_vendor"]


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
