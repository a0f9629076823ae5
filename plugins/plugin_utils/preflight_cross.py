# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight rules across roles: a value of one role that names something another role provides.

* the health check's Lustre mounts (slurm_compute_healthcheck_lustre_mounts) are mounts lustre_client makes on
  that node, else the check drains every node for a file system that is never there;
* validation's storage path (validate_storage_path) is under a Lustre mount of the node, else the storage test
  measures the node's local disk and judges it against the Lustre figures;
* NCCL's HCAs (nccl_ib_hca) are written only where the fabric has HCAs for NCCL (InfiniBand or RoCE).

The dcgm-exporter port that monitoring scrapes is a reference between two roles' ports, judged with every other
port in plugins/plugin_utils/preflight_generic.py (``same_as`` in roles/monitoring/meta/preflight.yml).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import posixpath

from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import MISSING

IB_FABRICS = ("infiniband", "roce")


def lustre_mount_points(inv, host):
    """The mount points lustre_client mounts on a host ([] where the role does not run there)."""
    if host not in inv.role_hosts("lustre_client"):
        return []
    mounts = inv.effective(host, "lustre_client", "lustre_client_mounts")
    if not isinstance(mounts, list):
        return []
    return [posixpath.normpath(m["path"]) for m in mounts
            if isinstance(m, dict) and isinstance(m.get("path"), str) and m["path"].startswith("/")]


def mount_of(path, mounts):
    """The mount point among ``mounts`` that holds ``path``, or None."""
    path = posixpath.normpath(path)
    for mount in sorted(mounts, key=len, reverse=True):
        if path == mount or path.startswith(mount.rstrip("/") + "/"):
            return mount
    return None


def _mounts_text(mounts):
    return ", ".join(mounts) if mounts else "nothing here: the host is not in lustre_clients or the list is empty"


def check(inv, opts):
    errors = []
    fabric = inv.get_cluster("cluster_fabric_type")
    for host in inv.hosts("gpu_nodes"):
        mounts = lustre_mount_points(inv, host)
        wanted = inv.get(host, "slurm_compute_healthcheck_lustre_mounts", MISSING)
        if isinstance(wanted, list):
            for path in wanted:
                if isinstance(path, str) and path.startswith("/") and posixpath.normpath(path) not in mounts:
                    errors.append("%s: slurm_compute_healthcheck_lustre_mounts: %s is not a Lustre mount of this node "
                                  "(lustre_client_mounts mounts %s): the health check would drain it for a file "
                                  "system that is never mounted" % (host, path, _mounts_text(mounts)))
        storage = inv.get(host, "validate_storage_path", MISSING)
        if isinstance(storage, str) and storage.startswith("/") and mount_of(storage, mounts) is None:
            errors.append("%s: validate_storage_path: %s is not under a Lustre mount of this node (lustre_client_mounts "
                          "mounts %s): the storage test would measure the local disk against the Lustre figures; "
                          "mount the file system there or leave validate_storage_path null"
                          % (host, storage, _mounts_text(mounts)))
        hcas = inv.get(host, "nccl_ib_hca", MISSING)
        if fabric in ("ethernet", "none") and hcas not in (MISSING, None, []):
            errors.append("%s: nccl_ib_hca: NCCL_IB_HCA is written although cluster_fabric_type is %s: there is no "
                          "InfiniBand or RoCE for NCCL to use; leave nccl_ib_hca null or set the fabric type"
                          % (host, fabric))
    return errors
