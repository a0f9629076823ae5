# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""rolling_plan_result: the ansible.posix.json document of a nested run, beside other callbacks' lines."""

import json
import os

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter import rolling

FILTERS = rolling.FilterModule().filters()
DOC = {"plays": [{"tasks": [{"hosts": {"gpu01": {"failed": True, "msg": "a }\n{ b"}}}]}],
       "stats": {"gpu01": {"changed": 0, "failures": 1}}}
TEXT = json.dumps(DOC, indent=4, sort_keys=True)
PROFILE = ("Friday 27 November 2026  19:32:04 +0000 (0:00:00.032)       0:00:00.057 *******\n"
           "===============================================================================\n"
           "ansible.builtin.fail ---------------------------------------------------- 0.03s\n")


def test_the_document_beside_other_callbacks_lines():
    read = FILTERS["rolling_plan_result"]
    assert read(TEXT) == DOC
    assert read(PROFILE + TEXT + "\n" + PROFILE + "Playbook run took 0 days, 0 hours, 0 minutes, 1 seconds\n") == DOC


def test_no_document_or_part_of_one_is_no_result():
    read = FILTERS["rolling_plan_result"]
    for stdout in ("", None, 42, "ERROR! the playbook could not be read", TEXT[:len(TEXT) // 2], PROFILE,
                   json.dumps(DOC)):  # single-line JSON: the plan asks for the indented form
        assert read(stdout) == {}, stdout
    assert read("{\n    [1, 2]\n}") == {}


def test_docs_beside_the_filter():
    with open(os.path.join(os.path.dirname(rolling.__file__), "rolling_plan_result.yml")) as f:
        doc = yaml.safe_load(f)
    assert doc["DOCUMENTATION"]["name"] == "rolling_plan_result"
    assert "clusterforge.gpu.rolling_plan_result" in doc["EXAMPLES"]


def test_the_plan_summary_reads_recap_failures_and_reboot_facts():
    summary = FILTERS["rolling_plan_summary"]
    doc = {"plays": [{"tasks": [
        {"task": {"name": "Apply the power limit"},
         "hosts": {"gpu01": {"failed": True, "msg": "x" * 400}, "gpu02": {"changed": True},
                   "gpu03": {"unreachable": True, "msg": "ssh: connect to host gpu03 port 22: No route to host"}}},
        {"task": {"name": "Note whether a reboot is needed"},
         "hosts": {"gpu02": {"ansible_facts": {"nvidia_driver_reboot_required": "yes", "unrelated": 1}}}},
        {"task": {}, "hosts": {"gpu02": {"ansible_facts": {
            "nvidia_driver_reboot_required": False, "bios_reboot_required": "no"}}}}]}],
        "stats": {"gpu01": {"failures": 1, "ok": 3}, "gpu02": {"changed": "2"}, "gpu03": {"unreachable": 1}}}
    got = summary(doc)
    assert got["recap"] == {"gpu01": {"changed": 0, "unreachable": 0, "failed": 1},
                            "gpu02": {"changed": 2, "unreachable": 0, "failed": 0},
                            "gpu03": {"changed": 0, "unreachable": 1, "failed": 0}}
    assert got["failures"] == ["gpu01: Apply the power limit: " + "x" * 300,
                               "gpu03: Apply the power limit: ssh: connect to host gpu03 port 22: No route to host"]
    # the last value reported, read as Jinja's bool reads it ("no" is false)
    assert got["reboot_facts"] == {"gpu02": {"nvidia_driver_reboot_required": False, "bios_reboot_required": False}}
    assert summary({}) == {"recap": {}, "failures": [], "reboot_facts": {}}
    with pytest.raises(AnsibleFilterError, match="expects the document"):
        summary("not a document")


@pytest.mark.parametrize("name", ["rolling_plan_summary", "rolling_would_reboot"])
def test_the_new_filters_are_documented_beside_the_file(name):
    with open(os.path.join(os.path.dirname(rolling.__file__), name + ".yml")) as f:
        doc = yaml.safe_load(f)
    assert doc["DOCUMENTATION"]["name"] == name and "clusterforge.gpu.%s" % name in doc["EXAMPLES"]


def test_rolling_role_names_qualify_bare_names_as_preflight_reads_them():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.clusterforge.gpu.plugins.filter.rolling import FilterModule
    names = FilterModule().filters()["rolling_role_names"]
    assert names(["gpu_tuning", " clusterforge.gpu.nccl ", "other.coll.role"]) == [
        "clusterforge.gpu.gpu_tuning", "clusterforge.gpu.nccl", "other.coll.role"]
    assert names([]) == []
    with pytest.raises(AnsibleFilterError):
        names("gpu_tuning")
