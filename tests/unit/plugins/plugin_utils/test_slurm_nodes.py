# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The compute nodes' descriptions for slurm.conf and gres.conf (plugin_utils/slurm_nodes.py, filter
slurm_node_descriptions): this run's wins, a node not described in this run keeps its kept one, a node with neither
or with fewer GPUs than the inventory expects stops the run."""

from ansible_collections.clusterforge.gpu.plugins.filter.slurm_nodes import FilterModule
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.slurm_nodes import node_descriptions

NODES = ["gpu01", "gpu02", "gpu03"]


def hw(gpus, cpus=192):
    return {"slurm_compute_node_hardware": {"node": {"cpus": cpus, "gpu_count": gpus, "real_memory_mb": 2000000}},
            "cluster_gpu_count_per_node": 8}


def test_this_runs_descriptions_win_over_the_kept_ones():
    known = {"gpu01": {"cpus": 96, "gpu_count": 8}, "gpu02": {"cpus": 96, "gpu_count": 8}}
    out = node_descriptions(NODES, {n: hw(8) for n in NODES}, known=known)
    assert out == {"nodes": {n: {"cpus": 192, "gpu_count": 8, "real_memory_mb": 2000000} for n in NODES},
                   "problems": [], "kept": []}


def test_a_node_that_failed_earlier_in_the_run_keeps_its_kept_description_and_is_named():
    """The lab's hung nvidia-smi on gpu02: gpu02 failed before the facts play, so it has no description from this
    run. The controller keeps its last one and the run goes on for every other node (it used to stop site.yml for
    the whole cluster)."""
    hostvars = {"gpu01": hw(8), "gpu02": {"cluster_gpu_count_per_node": 8}, "gpu03": hw(8)}
    known = {"gpu02": {"cpus": 192, "gpu_count": 8, "real_memory_mb": 2000000}}
    out = node_descriptions(NODES, hostvars, known=known)
    assert out["problems"] == [] and out["kept"] == ["gpu02"]
    assert out["nodes"]["gpu02"] == known["gpu02"]
    # outside --limit it keeps its description too, and is not named (it was not asked for)
    out = node_descriptions(NODES, hostvars, known=known, scope=["gpu01", "gpu03", "head01"])
    assert out["problems"] == [] and out["kept"] == [] and out["nodes"]["gpu02"] == known["gpu02"]


def test_a_node_with_no_description_at_all_stops_the_run_naming_it():
    hostvars = {"gpu01": hw(8), "gpu02": {}, "gpu03": {}}
    out = node_descriptions(NODES, hostvars, known={"gpu03": {"gpu_count": 8}})
    assert out["problems"] == ["gpu02: " + out["problems"][0].split(": ", 1)[1]]
    assert out["problems"][0].startswith("gpu02: no description of CPUs, memory and GPUs from this run, and none kept")
    assert sorted(out["nodes"]) == ["gpu01", "gpu03"] and out["kept"] == ["gpu03"]


def test_fewer_gpus_than_the_inventory_expects_stops_the_run_only_for_a_fresh_description():
    hostvars = {"gpu01": hw(7), "gpu02": hw(8), "gpu03": {"cluster_gpu_count_per_node": 8}}
    out = node_descriptions(NODES, hostvars, known={"gpu03": {"gpu_count": 4}})
    assert out["problems"] == ["gpu01 has 7 GPUs, the inventory expects 8: fix or remove the node before adding it "
                               "to Slurm."]


def test_the_filter_is_the_same_rule():
    hostvars = {"gpu01": hw(8)}
    out = FilterModule().filters()["slurm_node_descriptions"](("gpu01",), hostvars, known=None, scope=("gpu01",))
    assert out == node_descriptions(["gpu01"], hostvars)


# ------------------------------------------------------------------------ slurm.conf and gres.conf lines

D8 = {"cpus": 224, "sockets": 2, "cores_per_socket": 56, "threads_per_core": 2, "memtotal_mb": 2063937,
      "gpu_type": "h100", "gpu_count": 8, "gres_autodetect": "nvml", "gpu_indexes": list(range(8))}
D4 = dict(D8, gpu_count=4, gres_autodetect=None, gpu_indexes=[0, 2, 4, 6])
D0 = {"cpus": 4, "sockets": 1, "cores_per_socket": 4, "threads_per_core": 1, "memtotal_mb": 16000, "gpu_type": None,
      "gpu_count": 0, "gres_autodetect": None, "gpu_indexes": []}
# The lines the role's template wrote with Jinja loops before they moved here (rendered by ansible-playbook from the
# same descriptions and variables): an upgrade must not rewrite slurm.conf.
TEMPLATE_NODE_LINES = [
    "NodeName=gpu03 CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=1960741 Gres=gpu:h100:4 "
    "Features=h100,roce,air,NVL State=UNKNOWN",
    "NodeName=gpu[10-11] CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=1960741 Gres=gpu:h100:8 "
    "Features=h100,air,hgx State=UNKNOWN",
    "NodeName=gpu01 CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=1960741 Gres=gpu:h100:8 "
    "Features=h100,infiniband,air,hgx State=UNKNOWN",
    "NodeName=gpu02 CPUs=224 Sockets=2 CoresPerSocket=56 ThreadsPerCore=2 RealMemory=1960741 Gres=gpu:h100:8 "
    "Features=h100,infiniband,liquid,hgx State=UNKNOWN",
    "NodeName=cpu01 CPUs=4 Sockets=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=11904 Features=Infiniband,air,hgx "
    "State=UNKNOWN"]


def test_node_and_gres_lines_are_the_templates_lines():
    nodes = {"gpu01": D8, "gpu02": D8, "gpu03": D4, "gpu10": D8, "cpu01": D0, "gpu11": D8}
    node_vars = {"gpu01": {"cluster_fabric_type": "infiniband"},
                 "gpu02": {"cluster_fabric_type": "infiniband", "slurm_controller_node_cooling": "liquid"},
                 "gpu03": {"cluster_fabric_type": "roce", "slurm_controller_node_features_extra": ["NVL", "H100"]},
                 "gpu10": {}, "cpu01": {"cluster_fabric_type": "Infiniband"}}  # gpu11: kept, not in the inventory
    filters = FilterModule().filters()
    assert filters["slurm_node_lines"](nodes, node_vars, 5, 4096, "air", ["hgx"]) == TEMPLATE_NODE_LINES
    assert filters["slurm_gres_lines"](nodes) == ["NodeName=gpu[01-02,10-11] AutoDetect=nvml Name=gpu Type=h100 Count=8",
                                                  "NodeName=gpu03 Name=gpu Type=h100 File=/dev/nvidia[0,2,4,6]"]


def test_the_memory_reserve_is_the_larger_of_the_share_and_the_floor():
    from ansible_collections.clusterforge.gpu.plugins.plugin_utils.slurm_nodes import node_attributes
    assert "RealMemory=11904 " in node_attributes(D0, "", "air", [], 5, 4096)      # 800 MB < 4096 MB floor
    assert "RealMemory=1960741 " in node_attributes(D8, "", "air", [], 5, 4096)    # 5 % = 103196 MB
    assert node_attributes(D0, None, "air", ["air", "AIR", "x"], 0, 0).endswith("Features=air,x State=UNKNOWN")
