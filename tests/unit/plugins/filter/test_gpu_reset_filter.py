# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_reset_slurm_verdict: "scontrol not found" on a node where slurmd runs means refuse, not "no job can run"."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter.gpu_reset import gpu_reset_slurm_verdict as verdict

ACTIVE = "LoadState=loaded\nActiveState=active\n"
INSTALLED = "LoadState=loaded\nActiveState=inactive\n"
ABSENT = "LoadState=not-found\nActiveState=inactive\n"


@pytest.mark.parametrize("slurmd, words", [(ACTIVE, "slurmd.service is active"),
                                           (INSTALLED, "slurmd.service is installed (inactive)"),
                                           ({"LoadState": "loaded", "ActiveState": "activating"}, "is activating")])
def test_no_scontrol_with_slurmd_there_is_refused(slurmd, words):
    v = verdict(False, None, slurmd)
    assert v["free"] is False
    assert v["state"].startswith("unreadable: scontrol was not found on this node") and words in v["state"]


@pytest.mark.parametrize("slurmd", [ABSENT, "", None])
def test_no_scontrol_and_no_slurmd_is_free(slurmd):
    v = verdict(False, None, slurmd)
    assert v["free"] is True and "no job can run here" in v["state"]


def test_a_node_slurm_does_not_know_is_free_only_without_slurmd():
    info = {"unknown": ["gpu01"], "nodes": [], "msg": "gpu01 is not in Slurm's node list"}
    assert verdict(True, info, ABSENT)["free"] is True
    refused = verdict(True, info, ACTIVE)
    assert refused["free"] is False and "gpu01 is not in Slurm's node list" in refused["state"]


@pytest.mark.parametrize("node, free, drain_first", [
    ({"state": "IDLE+DRAIN", "base": "IDLE", "drain": True, "drained": True, "flags": ["DRAIN"], "reason": "cf: x"},
     True, False),
    # idle and in service: free, but a job may start at any moment, so the caller drains it first
    ({"state": "IDLE", "base": "IDLE", "drain": False, "drained": False, "flags": []}, True, True),
    ({"state": "IDLE+COMPLETING", "base": "IDLE", "drain": False, "drained": False, "flags": ["COMPLETING"]},
     False, False),
    ({"state": "MIXED", "base": "MIXED", "drain": False, "drained": False, "flags": []}, False, False),
])
def test_the_node_state_decides_when_slurm_answers(node, free, drain_first):
    v = verdict(True, {"nodes": [node]}, ACTIVE)
    assert v["free"] is free and v["state"].startswith(node["state"])
    assert v["drain_first"] is drain_first


def test_a_read_that_failed_is_refused():
    v = verdict(True, {"nodes": [], "msg": "no answer in 60 s: /usr/bin/scontrol show node gpu01"}, ACTIVE)
    assert v["free"] is False and "no answer in 60 s" in v["state"]


def test_bad_input_is_rejected():
    with pytest.raises(AnsibleFilterError):
        verdict(True, ["not", "a", "result"], None)
    with pytest.raises(AnsibleFilterError):
        verdict(False, None, 42)
