# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation check bios.settings (issue 22): the BIOS read through the BMC (the bios role's bios_state, made here
with bios_attributes.map_bios from the recorded dumps of fixtures/bios/) beside the runtime ACS state (pcie_acs_info),
judged against bios_settings by the real validation judge. The case the issue is about: ACS enabled in the BIOS while
the profile wants it disabled fails even though setpci cleared it at runtime."""

import copy
import json
import os

import pytest

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import bios_attributes as ba
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import validation_report
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_common import ValidationError
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.validation_judge import node_verdicts, validation_judge

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "bios")
CHECK = "bios.settings"
# pcie_acs_info after pcie_acs cleared ACS at runtime (setpci), and at boot (ACS still enabled on the GPU path).
ACS_RUNTIME_DISABLED = {"changed": False, "bridges": [
    {"bdf": "0000:1a:00.0", "acs_enabled": False, "on_gpu_nic_path": True, "acs_ctl_value": "0000",
     "upstream_of": ["0000:1b:00.0"]}], "gpu_nic_acs_enabled_bridges": [], "access_denied": False}
ACS_RUNTIME_ENABLED = {"changed": False, "bridges": [
    {"bdf": "0000:1a:00.0", "acs_enabled": True, "on_gpu_nic_path": True, "acs_ctl_value": "001d",
     "upstream_of": ["0000:1b:00.0"]}], "gpu_nic_acs_enabled_bridges": ["0000:1a:00.0"], "access_denied": False}


def attributes(name):
    with open(os.path.join(FIX, name)) as f:
        return json.load(f).get("Attributes", {})


def bios_state(vendor, fixture, current=None, pending=None, manufacturer=None):
    """What roles/bios/tasks/report.yml records as bios_state, from a recorded dump (attributes overridden by
    ``current``), with ``pending`` the settings object's attributes."""
    attrs = dict(attributes(fixture), **(current or {}))
    maker = manufacturer or vendor
    return {"bmc": "10.0.0.1", "manufacturer": maker, "model": None, "vendor": ba.vendor_key(maker),
            "settings": ba.map_bios(maker, attrs, pending), "pending": ba.pending_changes(attrs, pending)}


def node(state, acs=None, wanted=None, enabled=True, require_known=False, error=None):
    return {"expected": {"acs_must_be_disabled": True, "bios_enabled": enabled, "bios_settings": wanted or {},
                         "bios_require_known": require_known},
            "pcie_acs_info": copy.deepcopy(ACS_RUNTIME_DISABLED if acs is None else acs),
            "bios_state": state, "bios_error": error}


def judge(**nodes):
    return validation_judge({"cluster": "test", "nodes": nodes})


def rows(report, host=None):
    return [c for c in report["checks"] if c["id"] == CHECK and (host is None or c["subject"] == host)]


def only(report, host):
    found = rows(report, host)
    assert len(found) == 1, report["checks"]
    return found[0]


HPE_ACS_ON = bios_state("hpe", "hpe-a42-bios.json")  # the recorded dump: AccessControlService Enabled
HPE_ACS_OFF = bios_state("hpe", "hpe-a42-bios.json", {"AccessControlService": "Disabled"})
SMC_ACS_OFF = bios_state("supermicro", "supermicro-x13-bios.json", {"PCIeACSCTL#1E1C": "Enable"})  # inverted
WANT_ACS_OFF = {"acs": "disabled"}


def test_bios_acs_enabled_fails_although_runtime_acs_is_disabled():
    """The issue's case: setpci cleared ACS at runtime, the BIOS still enables it (and will at the next boot)."""
    report = judge(gpu01=node(HPE_ACS_ON, ACS_RUNTIME_DISABLED, WANT_ACS_OFF))
    check = only(report, "gpu01")
    assert check["status"] == "fail" and check["category"] == "bios"
    assert report["ok"] is False and check["message"] in report["failures"]
    message = check["message"]
    assert message.startswith("gpu01: acs: BIOS AccessControlService='Enabled' is enabled, the profile wants "
                              "disabled. ")
    # the BIOS state beside the runtime state
    assert "acs: BIOS enabled (AccessControlService='Enabled'), runtime disabled" in message
    assert "runtime ACS on the GPU/NIC paths" not in message  # runtime agrees with the profile: not a problem
    assert check["measured"] == "acs enabled, runtime acs disabled" and check["expected"] == "acs disabled"
    # the runtime check is its own: pcie.acs passes on the same node
    assert [c["status"] for c in report["checks"] if c["id"] == "pcie.acs"] == ["pass"]


def test_bios_and_runtime_acs_both_disabled_pass_naming_both_states():
    for vendor_state, attribute in ((HPE_ACS_OFF, "AccessControlService='Disabled'"),
                                    (SMC_ACS_OFF, "PCIeACSCTL#1E1C='Enable'")):
        check = only(judge(gpu01=node(vendor_state, ACS_RUNTIME_DISABLED, WANT_ACS_OFF)), "gpu01")
        assert check["status"] == "pass", check
        assert check["message"].startswith("gpu01: BIOS as bios_settings wants (acs disabled). BIOS of ")
        assert "acs: BIOS disabled (%s), runtime disabled" % attribute in check["message"]


def test_runtime_acs_enabled_fails_although_the_bios_disables_it():
    check = only(judge(gpu01=node(HPE_ACS_OFF, ACS_RUNTIME_ENABLED, WANT_ACS_OFF)), "gpu01")
    assert check["status"] == "fail"
    assert "acs: runtime ACS on the GPU/NIC paths is enabled, the profile wants disabled" in check["message"]
    assert "runtime enabled on 1 bridge(s) on GPU/NIC paths" in check["message"]


def test_runtime_acs_not_read_leaves_the_bios_verdict():
    state = node(HPE_ACS_OFF, None, WANT_ACS_OFF)
    state["pcie_acs_info"] = None
    check = only(judge(gpu01=state), "gpu01")
    assert check["status"] == "pass" and "runtime not read (no pcie_acs_info)" in check["message"]


def test_bios_off_is_a_skip_that_says_why_and_no_check_without_any_bios_expectation():
    report = judge(gpu01=node(None, wanted=WANT_ACS_OFF, enabled=False),
                   gpu02=node(None, enabled=False),
                   gpu03={"expected": {"acs_must_be_disabled": True}, "pcie_acs_info": ACS_RUNTIME_DISABLED})
    check = only(report, "gpu01")
    assert check["status"] == "skip"
    assert check["message"] == ("gpu01: BIOS not read: bios_enabled is not true for this node "
                                "(bios_settings wants acs disabled)")
    # Nothing asked of the BIOS (no bios_settings, bios off; or a caller that knows nothing of BIOS, as the deep
    # checks): no row, so a cluster without BMC access keeps an all-pass report.
    assert rows(report, "gpu02") == [] and rows(report, "gpu03") == []


def test_unknown_vendor_is_never_a_pass():
    generic = bios_state("generic", "hpe-a42-bios.json", manufacturer="Contoso Servers")
    check = only(judge(gpu01=node(generic, wanted=WANT_ACS_OFF)), "gpu01")
    assert check["status"] == "skip"
    assert "not judged: acs: BIOS state unknown (vendor 'Contoso Servers' is not in the table)" in check["message"]
    # bios_require_known: unknown fails
    check = only(judge(gpu01=node(generic, wanted=WANT_ACS_OFF, require_known=True)), "gpu01")
    assert check["status"] == "fail"
    assert "acs: BIOS state unknown (vendor 'Contoso Servers' is not in the table) (bios_require_known)" \
        in check["message"]


def test_unknown_setting_beside_a_problem_fails_and_lists_both():
    dell = bios_state("dell", "dell-r750-bios.json")  # no ACS attribute in the table for Dell; SR-IOV Disabled
    check = only(judge(gpu01=node(dell, wanted={"acs": "disabled", "sriov": "enabled"})), "gpu01")
    assert check["status"] == "fail"
    assert check["message"].startswith("gpu01: sriov: BIOS SriovGlobalEnable='Disabled' is disabled, the profile "
                                       "wants enabled; not judged: acs: BIOS state unknown (the table has no acs "
                                       "attribute for dell). ")


def test_pending_value_is_named_staged_fix_still_fails_until_the_reboot():
    staged = bios_state("hpe", "hpe-a42-bios.json", pending={"AccessControlService": "Disabled"})
    check = only(judge(gpu01=node(staged, wanted=WANT_ACS_OFF)), "gpu01")
    assert check["status"] == "fail"
    assert check["message"].endswith("Pending on the BMC (applied at the next reboot): acs: disabled at the next "
                                     "reset (AccessControlService='Disabled' pending)")


def test_pending_value_that_undoes_a_wanted_state_fails():
    undone = bios_state("hpe", "hpe-a42-bios.json", {"AccessControlService": "Disabled"},
                        pending={"AccessControlService": "Enabled"})
    check = only(judge(gpu01=node(undone, wanted=WANT_ACS_OFF)), "gpu01")
    assert check["status"] == "fail"
    assert check["message"].startswith("gpu01: acs: disabled now, but AccessControlService='Enabled' pending makes it "
                                       "enabled at the next reset. ")
    assert "(AccessControlService='Enabled' pending)" in check["message"]


def test_bios_enabled_without_settings_reports_the_state_as_a_skip():
    check = only(judge(gpu01=node(HPE_ACS_ON, wanted={"acs": None})), "gpu01")  # null: left alone
    assert check["status"] == "skip" and check["expected"] is None
    assert check["message"].startswith("gpu01: no BIOS setting expected (bios_settings is empty). BIOS of hpe through "
                                       "BMC 10.0.0.1: acs: BIOS enabled (AccessControlService='Enabled'), runtime "
                                       "disabled; iommu: BIOS enabled (ProcAmdIoVt='Enabled'); sriov: ")


def test_a_failed_read_fails_naming_why():
    check = only(judge(gpu01=node(None, wanted=WANT_ACS_OFF, error="BMC 10.0.0.1: HTTP Error 401: Unauthorized\nmore")),
                 "gpu01")
    assert check["status"] == "fail"
    assert check["message"] == "gpu01: the BIOS could not be read through the BMC: BMC 10.0.0.1: HTTP Error 401: " \
                               "Unauthorized"


def test_a_wrong_wanted_state_fails_the_check_and_a_wrong_type_is_rejected():
    check = only(judge(gpu01=node(HPE_ACS_OFF, wanted={"acs": "off"})), "gpu01")
    assert check["status"] == "fail" and "bios_settings cannot be judged: expected acs='off'" in check["message"]
    bad = node(HPE_ACS_OFF)
    bad["expected"]["bios_settings"] = ["acs"]
    with pytest.raises(ValidationError, match="bios_settings must be a dict"):
        judge(gpu01=bad)


def test_the_report_grid_has_a_bios_column_and_names_the_failing_node():
    measured = {"gpu01": node(HPE_ACS_OFF, wanted=WANT_ACS_OFF), "gpu02": node(HPE_ACS_ON, wanted=WANT_ACS_OFF)}
    report = validation_judge({"cluster": "test", "nodes": measured})
    page = validation_report.validation_html(report)
    assert CHECK in page and "gpu02: acs: BIOS AccessControlService=&#x27;Enabled&#x27; is enabled" in page
    verdicts = node_verdicts(report, {"gpu01": {}, "gpu02": {}}, required=[])
    assert verdicts["passed"] == ["gpu01"] and verdicts["failed"] == ["gpu02"]
    assert verdicts["nodes"][1]["problems"][0]["check"] == CHECK
