"""preflight_cross: values of one role that name what another role provides, one test per rule."""

import copy

import pytest

from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import Inventory
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_cross import check, mount_of

GROUPS = {
    "all": ["head01", "gpu01", "gpu02"],
    "slurm_controller": ["head01"],
    "gpu_nodes": ["gpu01", "gpu02"],
    "lustre_clients": ["gpu01", "gpu02", "head01"],
}
MOUNTS = [{"fsname": "scratch", "mgs_nids": ["10.2.0.31@o2ib"], "path": "/lustre/scratch"}]


def errors(groups=None, **gpu_vars):
    groups = groups or GROUPS
    hv = {h: {"cluster_fabric_type": gpu_vars.pop("fabric", "infiniband")} for h in groups["all"]}
    for host in groups["gpu_nodes"]:
        hv[host].update(copy.deepcopy(gpu_vars))
    return check(Inventory(hv, groups), {})


def test_sound_references_pass():
    assert errors() == []
    assert errors(lustre_client_mounts=MOUNTS, slurm_compute_healthcheck_lustre_mounts=["/lustre/scratch/"],
                  validate_storage_path="/lustre/scratch/validate", nccl_ib_hca=["mlx5_0"]) == []
    assert errors(fabric="ethernet", nccl_ib_hca=None, validate_storage_path=None) == []


def test_health_check_mount_that_lustre_client_does_not_mount():
    errs = errors(lustre_client_mounts=MOUNTS, slurm_compute_healthcheck_lustre_mounts=["/lustre/home"])
    assert errs[0] == ("gpu01: slurm_compute_healthcheck_lustre_mounts: /lustre/home is not a Lustre mount of this "
                       "node (lustre_client_mounts mounts /lustre/scratch): the health check would drain it for a "
                       "file system that is never mounted") and len(errs) == 2


def test_health_check_mount_on_a_node_that_is_no_lustre_client():
    groups = dict(GROUPS, lustre_clients=["head01"])
    errs = errors(groups, lustre_client_mounts=MOUNTS, slurm_compute_healthcheck_lustre_mounts=["/lustre/scratch"])
    assert len(errs) == 2 and "mounts nothing here: the host is not in lustre_clients" in errs[0], errs


@pytest.mark.parametrize("path", ["/lustre/scratchy/validate", "/tmp/validate", "/lustre"])
def test_storage_path_outside_every_lustre_mount(path):
    errs = errors(lustre_client_mounts=MOUNTS, validate_storage_path=path)
    assert len(errs) == 2 and errs[0].startswith("gpu01: validate_storage_path: %s is not under a Lustre mount of "
                                                 "this node" % path), errs
    assert "would measure the local disk" in errs[0]


def test_storage_path_with_no_lustre_mount_at_all():
    errs = errors(validate_storage_path="/lustre/scratch/validate")
    assert len(errs) == 2 and "mounts nothing here" in errs[0], errs


@pytest.mark.parametrize("fabric", ["ethernet", "none"])
def test_nccl_hcas_on_a_fabric_without_hcas(fabric):
    errs = errors(fabric=fabric, nccl_ib_hca=["mlx5_0"])
    assert errs[0] == ("gpu01: nccl_ib_hca: NCCL_IB_HCA is written although cluster_fabric_type is %s: there is no "
                       "InfiniBand or RoCE for NCCL to use; leave nccl_ib_hca null or set the fabric type" % fabric)


def test_nccl_hcas_on_roce_pass():
    assert errors(fabric="roce", nccl_ib_hca=["mlx5_0"]) == []


def test_mount_of_takes_the_longest_mount():
    assert mount_of("/lustre/a/b", ["/lustre", "/lustre/a"]) == "/lustre/a"
    assert mount_of("/lustre/ab", ["/lustre/a"]) is None
    assert mount_of("/lustre/a", ["/lustre/a"]) == "/lustre/a"


@pytest.mark.parametrize("value", [None, "x", 5, [None], [5], {"a": 1}, [{"path": None}]])
def test_wrong_shapes_do_not_raise(value):
    errors(lustre_client_mounts=value, slurm_compute_healthcheck_lustre_mounts=value, validate_storage_path=value,
           nccl_ib_hca=value)
