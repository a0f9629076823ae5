# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Root writes the storage test only into a directory no other user controls."""

import pytest

from ansible_collections.clusterforge.gpu.plugins.filter.safe_paths import root_dir_problem
from ansible_collections.clusterforge.gpu.plugins.module_utils import safe_paths

P = "/lustre/hgx01/checkpoints/validate"
ROOT_700 = {"exists": True, "isdir": True, "islnk": False, "uid": 0, "pw_name": "root", "mode": "0700"}


def test_missing_or_root_owned_and_writable_by_root_only_passes():
    assert safe_paths.root_dir_problem({"exists": False}, P) == ""
    assert root_dir_problem(ROOT_700, P) == ""
    # a root-owned 0755 directory (as earlier releases made it): nobody else can plant there; the role sets 0700
    assert root_dir_problem(dict(ROOT_700, mode="0755"), P) == ""


@pytest.mark.parametrize("change, words", [
    ({"islnk": True, "isdir": False, "lnk_source": "/etc"}, ["symbolic link", "/etc"]),
    ({"isdir": False}, ["not a directory"]),
    ({"uid": 1000, "pw_name": "alice"}, ["owned by alice (uid 1000), not root"]),
    ({"mode": "0775"}, ["mode 0775, writable by others than its owner"]),
    ({"mode": "1777"}, ["mode 1777"]),
    ({"mode": "0702"}, ["mode 0702"]),
    ({"uid": 1000, "pw_name": "alice", "mode": "0777"}, ["alice", "0777"]),
])
def test_anything_a_user_could_plant_into_is_refused(change, words):
    msg = safe_paths.root_dir_problem(dict(ROOT_700, **change), P)
    assert msg.startswith(P) and all(w in msg for w in words), msg
