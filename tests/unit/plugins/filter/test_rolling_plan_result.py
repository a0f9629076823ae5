# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""rolling_plan_result: the ansible.posix.json document of a nested run, beside other callbacks' lines."""

import json
import os

import yaml

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
