# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The long tools' modules pass their time limit to the runner: ibdiagnet's timeout option, dcgm_diag's level (or
its timeout option, beyond coreutils timeout's own kill), and the per-tool default everywhere else."""

import json

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.module_utils import _runner
from ansible_collections.clusterforge.gpu.plugins.modules import dcgm_diag, ibdiagnet

DIAG = json.dumps({"DCGM Diagnostic": {"test_categories": [{"category": "Deployment", "tests": [
    {"name": "software", "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"}],
     "test_summary": {"status": "Pass"}}]}]}, "metadata": {"version": "4.4.2"}})


def test_ibdiagnet_timeout_option_is_the_runners_limit():
    t = Tool([(("ibdiagnet",), (0, "-I- Speed / Width checks                0          0\n", ""))])
    run_module(ibdiagnet, {"timeout": 77}, t)
    assert t.limits == [77]
    t = Tool([(("ibdiagnet",), (0, "", ""))])
    run_module(ibdiagnet, {}, t)
    assert t.limits == [1800]


def _diag(args):
    def handler(argv, data):
        if argv[-1] == "-v":
            return 0, "Version : 4.4.2\n", ""
        return 0, DIAG, ""
    t = Tool(handler, missing=("timeout",))
    r = run_module(dcgm_diag, args, t)
    return r, t


@pytest.mark.parametrize("level", [1, 2, 3, 4])
def test_dcgm_diag_without_a_timeout_gets_the_levels_limit(level):
    r, t = _diag({"level": level})
    assert not r.get("failed"), r
    assert t.limits[-1] == _runner.DCGM_DIAG_LEVEL_SECONDS[level]


def test_dcgm_diag_timeout_option_bounds_the_runner_beyond_coreutils_kill():
    _r, t = _diag({"level": 3, "timeout": 1000})
    assert t.limits[-1] == 1000 + dcgm_diag.KILL_GRACE + 30 + dcgm_diag.RUNNER_GRACE
    assert t.limits[0] == _runner.TOOL_TIME_LIMIT_SECONDS["dcgmi"]  # dcgmi -v
