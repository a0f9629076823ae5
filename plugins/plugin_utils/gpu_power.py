# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rack power budget, one definition (controller side): a node's planned draw and a rack's judgement.

The gpu_tuning role plans each node from its measured limits (filters ``gpu_node_power`` and ``gpu_rack_power``);
preflight plans every rack of the inventory from the GPU profile before anything changes (preflight_gpu.py). Both
judge a rack with :func:`rack_plan`, and a node's draw is always its GPUs plus its non-GPU overhead.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.clusterforge.gpu.plugins.module_utils.gpu_settings import selected


def node_power(gpus, selection=None, cap_watts=None, overhead_watts=0):
    """One node's planned draw: each GPU that ``selection`` names (every GPU when it is None) at ``cap_watts`` when a
    cap is set, every other GPU at its limit now (``power_limit_w``, the default limit when nothing capped it), plus
    the node's non-GPU overhead. ``gpus``: nvidia_smi_info's GPUs (``index``, ``uuid``, ``pci_bus_id``,
    ``power_limit_w``). Returns ``{gpus, gpu_watts, overhead_watts, total_watts}`` (watts rounded to 0.1)."""
    total = 0.0
    for gpu in gpus or []:
        chosen = selected(selection, gpu)
        watts = cap_watts if (chosen and cap_watts is not None) else gpu.get("power_limit_w")
        total += float(watts or 0)
    overhead = float(overhead_watts or 0)
    return {"gpus": len(gpus or []), "gpu_watts": round(total, 1), "overhead_watts": overhead_watts,
            "total_watts": round(total + overhead, 1)}


def rack_plan(nodes):
    """Every rack's planned draw against its budget. ``nodes``: ``{host, rack, budget_watts, total_watts}`` each
    (more keys are kept in ``detail``); a node without a rack or a budget is left out. A rack whose nodes give
    different budgets is held to the smallest. Returns one ``{rack, nodes, planned_watts, budget_watts, fits,
    detail}`` per rack, in rack order."""
    racks = {}
    for node in nodes or []:
        if node.get("rack") in (None, "") or node.get("budget_watts") in (None, "", 0):
            continue
        racks.setdefault(str(node["rack"]), []).append(node)
    plan = []
    for rack in sorted(racks):
        members = racks[rack]
        total = round(sum(float(n["total_watts"]) for n in members), 1)
        budget = min(int(float(n["budget_watts"])) for n in members)
        plan.append({"rack": rack, "nodes": [n.get("host") for n in members], "planned_watts": total,
                     "budget_watts": budget, "fits": total <= budget, "detail": list(members)})
    return plan
