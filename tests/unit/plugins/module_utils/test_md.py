# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/md.py (/proc/mdstat).

No real /proc/mdstat is in ../shared/fixtures (see its PROVENANCE.md). fixtures/md/ follows md_seq_show() of the
kernel's drivers/md/md.c byte for byte: ``%s : %sactive``, `` (read-only)`` / `` (auto-read-only)``, the personality,
members ``%pg[%d]`` with ``(W)``, ``(J)``, ``(F)``, ``(S)``, ``(R)``, the indented blocks / level / ``[n/m] [UU_]``
line (raid5.c and raid1.c status), ``\\tresync=PENDING`` and the recovery bar (status_resync), the bitmap line, the
whitespace-only lines after arrays without a bitmap, and the ``Personalities : [raid1] `` line with its trailing space.
"""

import os

from ansible_collections.clusterforge.gpu.plugins.module_utils import md

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "md")


def load(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


MDSTAT = load("mdstat-oss-raid6-raid5-inactive.txt")


def test_mdstat_arrays_states_and_levels():
    arrays = md.parse_mdstat(MDSTAT)
    assert list(arrays) == ["md0", "md1", "md2", "md3", "md4", "md127"]
    got = dict((n, (a["state"], a["readonly"], a["auto_read_only"], a["level"])) for n, a in arrays.items())
    assert got == {"md0": ("active", False, False, "raid6"), "md1": ("active", True, True, "raid6"),
                   "md2": ("active", False, False, "raid5"), "md3": ("active", False, False, "raid1"),
                   "md4": ("active", True, False, "raid6"), "md127": ("inactive", False, False, None)}


def test_mdstat_members_and_flags():
    arrays = md.parse_mdstat(MDSTAT)
    assert arrays["md0"]["members"][0] == {"device": "sdf", "number": 5, "flags": []}
    assert [m["device"] for m in arrays["md0"]["members"]] == ["sdf", "sde", "sdd", "sdc", "sdb", "sda"]
    assert arrays["md3"]["members"] == [{"device": "nvme1n1p2", "number": 1, "flags": []},
                                        {"device": "nvme0n1p2", "number": 0, "flags": ["W"]}]
    flags = dict((m["device"], m["flags"]) for m in arrays["md4"]["members"])
    assert flags == {"sdv": ["S"], "sdu": [], "sdt": ["F"], "sds": [], "sdr": [], "sdq": [], "nvme2n1": ["J"]}
    assert arrays["md127"]["members"] == [{"device": "sdx", "number": 1, "flags": ["S"]},
                                          {"device": "sdw", "number": 0, "flags": ["S"]}]


def test_mdstat_continuation_lines():
    arrays = md.parse_mdstat(MDSTAT)
    md0 = arrays["md0"]
    assert (md0["blocks"], md0["super"], md0["raid_disks"], md0["working_disks"], md0["status"]) == \
        (62511161344, "1.2", 6, 6, "UUUUUU")
    # the recovery bar and the bitmap line are not the disk counts
    assert (arrays["md2"]["raid_disks"], arrays["md2"]["working_disks"], arrays["md2"]["status"]) == (4, 3, "UUU_")
    assert arrays["md4"]["status"] == "UUU_UU"
    assert arrays["md127"]["blocks"] == 31255580672 and arrays["md127"]["raid_disks"] is None


def test_mdstat_empty_old_metadata_and_noise():
    assert md.parse_mdstat("") == {} and md.parse_mdstat(None) == {}
    assert md.parse_mdstat("Personalities : \nunused devices: <none>\n") == {}
    # 0.90 metadata prints no "super"; partitionable md_d0 names; a 2.4 kernel's read_ahead line
    text = ("Personalities : [raid6] [raid5] [raid4] \nread_ahead 1024 sectors\n"
            "md_d0 : active raid6 sdd1[3] sdc1[2] sdb1[1] sda1[0]\n      3907039744 blocks level 6, 64k chunk, "
            "algorithm 2 [4/4] [UUUU]\n      \nunused devices: sde1 sdf1\n")
    arrays = md.parse_mdstat(text)
    assert list(arrays) == ["md_d0"]
    assert arrays["md_d0"]["super"] is None and arrays["md_d0"]["blocks"] == 3907039744
    assert arrays["md_d0"]["level"] == "raid6" and len(arrays["md_d0"]["members"]) == 4


def test_mdstat_replacement_and_faulty_spare_order():
    text = "md9 : active raid6 sdk[7](R) sdj[6](W)(F) sdi[5]\n      100 blocks super 1.2 level 6 [3/3] [UUU]\n"
    members = md.parse_mdstat(text)["md9"]["members"]
    assert [m["flags"] for m in members] == [["R"], ["W", "F"], []]


def test_md_level_problem():
    arrays = md.parse_mdstat(MDSTAT)
    assert md.md_level_problem("md0", arrays, "raid6") is None
    assert md.md_level_problem("md1", arrays, "raid6") is None  # auto-read-only counts as active
    assert md.md_level_problem("md4", arrays, "raid6") is None  # read-only too
    assert md.md_level_problem("md2", arrays, "raid6") == "is raid5, not raid6"
    assert md.md_level_problem("md127", arrays, "raid6") == "is inactive"
    assert md.md_level_problem("sdb", arrays, "raid6") == "is not an md array"
    assert md.md_level_problem("md9", {}, "raid6") == "is not an md array"
