# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over BIOS attributes read through Redfish: bios_vendor, bios_map, bios_plan, bios_judge and
bios_registry_uri.

The logic and the vendor table are plugins/plugin_utils/bios_attributes.py; these filters hand it plain data and
turn its ValueError into a filter error. Documentation lives beside this file (bios_*.yml).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import bios_attributes as ba
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_bios import bmc_tls_problem

try:
    from collections.abc import Mapping
except ImportError:  # pragma: no cover
    Mapping = dict


def _plain(value, what):
    """JSON data as plain Python types (ansible-core >= 2.19 hands filters lazy containers and tagged values)."""
    if value is None:
        return None
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as e:
        raise AnsibleFilterError("%s: expected JSON data (%s)" % (what, e))


def _mapping(value, what, allow_none=True):
    if value is None and allow_none:
        return {}
    if not isinstance(value, Mapping):
        raise AnsibleFilterError("%s: expected a dict, got %s" % (what, type(value).__name__))
    return _plain(value, what)


def _table(table_extra):
    try:
        return ba.merge_table(_mapping(table_extra, "table_extra"))
    except ValueError as e:
        raise AnsibleFilterError("bios table_extra: %s" % e)


def bios_vendor(manufacturer):
    """The vendor table's key for a manufacturer string ('Dell Inc.' -> 'dell'); None when the table does not know it."""
    return ba.vendor_key(None if manufacturer is None else str(manufacturer))


def _text(value):
    return None if value is None else str(value)


def bios_map(attributes, vendor, pending=None, table_extra=None, registry=None, attribute_registry=None):
    """The four settings (acs, iommu, sriov, power_profile) of a BIOS, each {value, state, attribute, source, ...}."""
    return ba.map_bios(_text(vendor), _mapping(attributes, "bios_map input", False),
                       _mapping(pending, "bios_map pending"), table=_table(table_extra),
                       registry=_mapping(registry, "bios_map registry"), attribute_registry=_text(attribute_registry))


def bios_plan(attributes, vendor, pending=None, wanted=None, table_extra=None, registry=None,
              attribute_registry=None):
    """What to stage so that the next reset brings the wanted states, honouring values already pending."""
    try:
        plan = ba.compute_patch(_text(vendor), _mapping(attributes, "bios_plan input", False),
                                _mapping(pending, "bios_plan pending"), _mapping(wanted, "bios_plan wanted"),
                                table=_table(table_extra), registry=_mapping(registry, "bios_plan registry"),
                                attribute_registry=_text(attribute_registry))
    except ValueError as e:
        raise AnsibleFilterError("bios_plan: %s" % e)
    plan["pending_changes"] = ba.pending_changes(_mapping(attributes, "bios_plan input", False),
                                                 _mapping(pending, "bios_plan pending"))
    plan["problems"] = ba.plan_problems(plan, _mapping(wanted, "bios_plan wanted"))
    return plan


def bios_judge(settings, expected, runtime_acs_enabled=None):
    """Problems between the BIOS state (bios_map), the runtime ACS state and the hardware profile's expectations."""
    try:
        return ba.judge(_mapping(settings, "bios_judge input"), _mapping(expected, "bios_judge expected"),
                        None if runtime_acs_enabled is None else bool(runtime_acs_enabled))
    except ValueError as e:
        raise AnsibleFilterError("bios_judge: %s" % e)


def bios_registry_uri(registry_file, language="en"):
    """The URI of the registry document a Redfish MessageRegistryFile points at ('' when it names none)."""
    return ba.registry_uri(_mapping(registry_file, "bios_registry_uri input"), _text(language) or "en") or ""


def bios_system(redfish_facts, system_id=None):
    """The system(s) of a redfish_info result that system_id names, with their BIOS attributes: {found, count, error}."""
    return ba.choose_system(_mapping(redfish_facts, "bios_system input"), _text(system_id))


def bios_not_pending(patch, pending=None):
    """What was staged but is not pending when read back: ['<attribute>=<value>', ...]."""
    return ba.not_pending(_mapping(patch, "bios_not_pending input"), _mapping(pending, "bios_not_pending pending"))


def bios_needs_registry(manufacturer, table_extra=None):
    """Whether the (merged) table names attributes of this manufacturer by display name, resolved through the registry."""
    return ba.needs_registry(_text(manufacturer), table=_table(table_extra))


def bios_bmc_tls_problem(validate_certs, insecure_skip_tls_verify=False):
    """Why the BMC TLS settings are refused ('' when they are not): preflight's own rule."""
    return bmc_tls_problem(validate_certs, insecure_skip_tls_verify) or ""


def bios_report_lines(state, host, reboot_required=False):
    """What the bios role reports of one node's bios_state, as a list of sentences."""
    return ba.report_lines(_text(host), _mapping(state, "bios_report_lines input", allow_none=False),
                           bool(reboot_required))


class FilterModule(object):
    def filters(self):
        return {"bios_vendor": bios_vendor, "bios_map": bios_map, "bios_plan": bios_plan, "bios_judge": bios_judge,
                "bios_registry_uri": bios_registry_uri, "bios_bmc_tls_problem": bios_bmc_tls_problem,
                "bios_report_lines": bios_report_lines, "bios_needs_registry": bios_needs_registry,
                "bios_system": bios_system, "bios_not_pending": bios_not_pending}
