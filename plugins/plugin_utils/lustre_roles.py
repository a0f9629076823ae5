# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PRIVATE to clusterforge.gpu: what the Lustre roles make of their inventory, behind the filters of
plugins/filter/lustre.py. A target's name and default mount point are the rules of module_utils/lustre.py
(target_svname, target_mount_leaf), which the lustre_target module and preflight use too."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.clusterforge.gpu.plugins.module_utils.lustre import target_mount_leaf, target_svname

# Mount order: MGS first, then MDTs, then OSTs.
TARGET_ORDER = {"mgs": 0, "mgs_mdt": 1, "mdt": 2, "ost": 3}
# The keys of a directory of lustre_client_directories that give it a layout of its own.
LAYOUT_KEYS = ("stripe_count", "stripe_size", "pool", "components")


def server_targets(targets, mount_root, mount_options):
    """The targets of a host (lustre_server_targets), each with its name (``svname``), ``mountpoint`` (its own, else
    ``<mount_root>/<leaf>``), ``mount_opts`` (``mount_options`` and the target's own ``mount_options``), ``order``
    and ``backfstype`` (ldiskfs unless given), sorted MGS, MDTs, OSTs (the order given within each)."""
    out = []
    for target in targets or []:
        own = target.get("mount_options")
        out.append(dict(target, **{
            "svname": target_svname(target),
            "mountpoint": target["mountpoint"] if "mountpoint" in target
            else "%s/%s" % (mount_root, target_mount_leaf(target)),
            "order": TARGET_ORDER.get(target["type"], 9),
            "backfstype": target["backfstype"] if "backfstype" in target else "ldiskfs",
            "mount_opts": ",".join([str(mount_options)] + ([str(own)] if own else [])),
        }))
    return sorted(out, key=lambda t: t["order"])


def client_directories(directories, dataset_layout, checkpoint_layout):
    """The directories of lustre_client_directories, each with its ``layout``: its own layout keys, else the dataset
    or checkpoint layout of its kind, else none ({})."""
    out = []
    for directory in directories or []:
        own = dict((k, v) for k, v in directory.items() if k in LAYOUT_KEYS)
        kind = directory.get("kind", "plain")
        base = dataset_layout if kind == "dataset" else (checkpoint_layout if kind == "checkpoint" else {})
        out.append(dict(directory, layout=own if own else base))
    return out
