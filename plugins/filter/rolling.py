# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the rolling change: rolling_plan_result reads the plan's nested check-mode run.

The work is module_utils/playbook_output.py. Documentation lives beside this file in rolling_plan_result.yml.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.clusterforge.gpu.plugins.module_utils.playbook_output import json_callback_document


def rolling_plan_result(stdout):
    """The ansible.posix.json document of a nested run's stdout, or {}."""
    return json_callback_document(stdout)


class FilterModule(object):
    """Rolling change filters."""

    def filters(self):
        return {"rolling_plan_result": rolling_plan_result}
