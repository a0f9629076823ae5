# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Lustre roles' targets and directories, with the names and mount points the module and preflight use."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter.lustre import FilterModule
from ansible_collections.clusterforge.gpu.plugins.module_utils.lustre import target_svname

FILTERS = FilterModule().filters()
TARGETS = [
    {"device": "/dev/sdc", "type": "ost", "fsname": "lfs", "index": 11, "mgs_nids": ["a"]},
    {"device": "/dev/sdb", "type": "mdt", "fsname": "lfs", "index": 0, "mount_options": "user_xattr",
     "backfstype": "zfs"},
    {"device": "/dev/sda", "type": "mgs"},
    {"device": "/dev/sdd", "type": "mgs_mdt", "fsname": "lfs2", "index": 0, "mountpoint": "/srv/m"},
    {"device": "/dev/sde", "type": "ost", "fsname": "lfs", "index": 2, "mount_options": ""},
]


def test_server_targets_are_named_placed_and_ordered():
    got = FILTERS["lustre_server_targets"](TARGETS, "/mnt/lustre", "noatime")
    assert [(t["device"], t["svname"], t["mountpoint"], t["mount_opts"], t["order"], t["backfstype"]) for t in got] == [
        ("/dev/sda", "MGS", "/mnt/lustre/mgs", "noatime", 0, "ldiskfs"),
        ("/dev/sdd", "lfs2-MDT0000", "/srv/m", "noatime", 1, "ldiskfs"),
        ("/dev/sdb", "lfs-MDT0000", "/mnt/lustre/lfs-mdt0", "noatime,user_xattr", 2, "zfs"),
        ("/dev/sdc", "lfs-OST000b", "/mnt/lustre/lfs-ost11", "noatime", 3, "ldiskfs"),   # the index in hex, as mkfs
        ("/dev/sde", "lfs-OST0002", "/mnt/lustre/lfs-ost2", "noatime", 3, "ldiskfs")]
    assert all(t["svname"] == target_svname(t) for t in got)
    assert got[3]["mgs_nids"] == ["a"] and "svname" not in TARGETS[0]   # the input's keys kept, the input untouched


def test_client_directories_get_their_own_layout_else_their_kinds():
    dirs = [{"path": "/lfs/a", "kind": "dataset"}, {"path": "/lfs/b", "kind": "checkpoint", "pool": "flash"},
            {"path": "/lfs/c"}, {"path": "/lfs/d", "kind": "plain", "stripe_count": 2},
            {"path": "/lfs/e", "kind": "checkpoint"}]
    got = FILTERS["lustre_client_directories"](dirs, {"stripe_count": -1}, {"stripe_count": 8, "stripe_size": "4M"})
    assert [d["layout"] for d in got] == [{"stripe_count": -1}, {"pool": "flash"}, {}, {"stripe_count": 2},
                                          {"stripe_count": 8, "stripe_size": "4M"}]


@pytest.mark.parametrize("name, value", [("lustre_server_targets", "x"), ("lustre_client_directories", [1])])
def test_not_a_list_of_dicts_is_refused(name, value):
    with pytest.raises(AnsibleFilterError, match="list of dicts"):
        FILTERS[name](value, "/mnt/lustre", "noatime") if name == "lustre_server_targets" else \
            FILTERS[name](value, {}, {})
