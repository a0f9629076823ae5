# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rack power budget's one rule: a node's planned draw (the nvidia_smi module's GPU selection) and each rack."""

import pytest

from ansible_collections.clusterforge.gpu.plugins.filter.gpu_power import gpu_node_power, gpu_rack_power
from ansible_collections.clusterforge.gpu.plugins.module_utils.gpu_settings import gpu_matches
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.gpu_power import node_power, rack_plan

GPUS = [{"index": i, "uuid": "GPU-%08d-AAAA" % i, "pci_bus_id": "00000000:%02X:00.0" % (0x18 + i), "power_limit_w": 700.0}
        for i in range(4)]


@pytest.mark.parametrize("selector", [0, "0", " 0 ", "gpu-00000000-aaaa", "0000:18:00.0", "18:00.0", "00000000:18:00.0"])
def test_every_spelling_the_module_accepts_names_gpu_0(selector):
    gpu = GPUS[0]
    assert gpu_matches(selector, gpu["index"], gpu["uuid"], gpu["pci_bus_id"])
    other = GPUS[1]
    assert not gpu_matches(selector, other["index"], other["uuid"], other["pci_bus_id"])


def test_a_node_plans_its_selected_gpus_at_the_cap_and_the_others_at_their_limit():
    # integers, as YAML gives an inventory's gpu_tuning_gpus: [0, 2] (the Jinja copy this replaces missed them)
    plan = node_power(GPUS, [0, "0000:1a:00.0"], 500, 2000)
    assert plan == {"gpus": 4, "gpu_watts": 2400.0, "overhead_watts": 2000, "total_watts": 4400.0}
    assert node_power(GPUS, None, 500, 2000)["gpu_watts"] == 2000.0
    assert node_power(GPUS, None, None, 0)["total_watts"] == 2800.0


def test_each_rack_is_held_to_the_smallest_budget_its_nodes_give():
    nodes = [dict(gpu_node_power(GPUS, None, 600, 4600), host="a", rack="r1", budget_watts=9000),
             dict(gpu_node_power(GPUS, None, 600, 4600), host="b", rack="r1", budget_watts=14000),
             dict(gpu_node_power(GPUS, None, 500, 1000), host="c", rack="r2", budget_watts="5000"),
             dict(gpu_node_power(GPUS, None, 500, 1000), host="d", rack=None, budget_watts=None)]
    plan = gpu_rack_power(nodes)
    assert [(r["rack"], r["nodes"], r["planned_watts"], r["budget_watts"], r["fits"]) for r in plan] == [
        ("r1", ["a", "b"], 14000.0, 9000, False), ("r2", ["c"], 3000.0, 5000, True)]
    assert rack_plan([]) == []
