"""Nothing unreadable is blank: lustre.classify_device with the real texts of every probe outcome, device_usage
(holders, mounts, partitions, swap) against a fake sysfs tree, and duplicate targets compared by device number.

Texts, from the tools' sources:
* tunefs.lustre (lustre/utils/mkfs_lustre.c with TUNEFS, mount_utils.c): osd_is_lustre() prints "checking for
  existing Lustre data: not found" on stdout; fatal() prints "\\n<prog> FATAL: " then "Device <dev> has not been
  formatted with mkfs.lustre"; main() ends with "<prog>: exiting with 19 (No such device)" (verrprint, stderr).
  A read failure of the Lustre data is "Failed to read previous Lustre data from <dev> (<rc>)"; osd_init()'s failure
  is "<prog>: osd_init() failed: <rc> (<strerror>)".
* blkid -p (util-linux misc-utils/blkid.c, lowprobe_device()): open() failing prints warn("error: %s") ->
  "blkid: error: <dev>: <strerror>" and exits 2; a read failing inside the probe exits 2 WITHOUT any output (the
  reason the read-back exists); "ambivalent result (probably more filesystems on the device, use wipefs(8) to see
  more details)" exits 8.
"""

import os
import stat

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils import lustre as L

OST = {"device": "/dev/sdb", "type": "ost", "fsname": "lfs", "index": 2, "mgs_nids": ["10.0.0.1@o2ib"]}

TUNEFS_NOT_LUSTRE = (19, "checking for existing Lustre data: not found\n",
                     "\ntunefs.lustre FATAL: Device /dev/sdb has not been formatted with mkfs.lustre\n"
                     "tunefs.lustre: exiting with 19 (No such device)\n")
TUNEFS_READ_FAILED = (5, "checking for existing Lustre data: found\n",
                      "\ntunefs.lustre FATAL: Failed to read previous Lustre data from /dev/sdb (5)\n"
                      "tunefs.lustre: exiting with 5 (Input/output error)\n")
TUNEFS_OSD_INIT = (2, "", "tunefs.lustre: osd_init() failed: 2 (No such file or directory)\n"
                          "tunefs.lustre: exiting with 2 (No such file or directory)\n")
# The "not formatted" text, with a line the clean answer never has (here debugfs's complaint about the device).
TUNEFS_NOT_LUSTRE_NOISE = (19, TUNEFS_NOT_LUSTRE[1],
                           "/dev/sdb: Attempt to read block from filesystem resulted in short read while opening "
                           "filesystem\n" + TUNEFS_NOT_LUSTRE[2])
BLKID_NOTHING = (2, "", "")
BLKID_EIO = (2, "", "blkid: error: /dev/sdb: Input/output error\n")
BLKID_EACCES = (2, "", "blkid: error: /dev/sdb: Permission denied\n")
BLKID_NOMEDIUM = (2, "", "blkid: error: /dev/sdb: No medium found\n")
BLKID_AMBIVALENT = (8, "", "blkid: /dev/sdb: ambivalent result (probably more filesystems on the device, use "
                           "wipefs(8) to see more details)\n")


def classify(tunefs=TUNEFS_NOT_LUSTRE, blkid=BLKID_NOTHING, read_error=None, in_use=()):
    return L.classify_device(OST, True, tunefs=tunefs, blkid=blkid, read_error=read_error, in_use=list(in_use))


def test_blank_only_when_every_probe_answered_cleanly_and_the_ends_read_back():
    r = classify()
    assert r == {"state": "blank", "detail": "ost lfs-OST0002 of lfs", "identity": None}
    assert L.tunefs_says_not_lustre(*TUNEFS_NOT_LUSTRE) and L.blkid_says_nothing(*BLKID_NOTHING)
    # the emulator and older versions print only the FATAL line (no "exiting with")
    assert L.tunefs_says_not_lustre(19, TUNEFS_NOT_LUSTRE[1],
                                    "\ntunefs.lustre FATAL: Device /dev/sdb has not been formatted with mkfs.lustre\n")


@pytest.mark.parametrize("tunefs, needle", [
    (TUNEFS_READ_FAILED, "tunefs.lustre --dryrun rc 5: tunefs.lustre FATAL: Failed to read previous Lustre data "
                         "from /dev/sdb (5) / tunefs.lustre: exiting with 5 (Input/output error)"),
    (TUNEFS_OSD_INIT, "tunefs.lustre --dryrun rc 2: tunefs.lustre: osd_init() failed: 2 (No such file or directory)"),
    (TUNEFS_NOT_LUSTRE_NOISE, "tunefs.lustre --dryrun rc 19: /dev/sdb: Attempt to read block from filesystem resulted "
                              "in short read"),
    ((19, "", "tunefs.lustre: exiting with 19 (No such device)\n"), "tunefs.lustre --dryrun rc 19: tunefs.lustre: "
                                                                    "exiting with 19"),  # no "not formatted" text
    ((1, "", ""), "tunefs.lustre --dryrun rc 1: no output"),
    ((None, "", ""), "tunefs.lustre --dryrun gave no answer in time"),
])
def test_tunefs_failing_any_other_way_is_unreadable(tunefs, needle):
    r = classify(tunefs=tunefs)
    assert r["state"] == "unreadable" and not L.tunefs_says_not_lustre(*tunefs), r
    assert r["detail"].startswith("is unreadable, refusing to call it blank (expected ost lfs-OST0002 of lfs): ")
    assert needle in r["detail"], r["detail"]


@pytest.mark.parametrize("blkid, needle", [
    (BLKID_EIO, "blkid -p rc 2: blkid: error: /dev/sdb: Input/output error"),
    (BLKID_EACCES, "blkid -p rc 2: blkid: error: /dev/sdb: Permission denied"),
    (BLKID_NOMEDIUM, "blkid -p rc 2: blkid: error: /dev/sdb: No medium found"),
    ((4, "", "blkid: unsupported output format export\n"), "blkid -p rc 4: blkid: unsupported output format"),
    ((0, "DEVNAME=/dev/sdb\n", ""), "blkid -p rc 0: DEVNAME=/dev/sdb"),  # "found" nothing but DEVNAME
    ((None, "", ""), "blkid -p gave no answer in time"),
])
def test_blkid_answering_anything_but_silence_is_unreadable(blkid, needle):
    r = classify(blkid=blkid)
    assert r["state"] == "unreadable" and needle in r["detail"], r


def test_silent_blkid_with_a_failed_read_back_is_unreadable():
    """blkid exits 2 without a word when its read fails: only the read-back tells this from a blank disk."""
    r = classify(read_error="Input/output error")
    assert r["state"] == "unreadable"
    assert r["detail"].endswith("reading its first and last MiB failed: Input/output error")
    assert classify(read_error="no answer in 60 s")["state"] == "unreadable"
    r = L.classify_device(OST, True, tunefs=TUNEFS_NOT_LUSTRE, blkid=BLKID_NOTHING)  # never read back
    assert r["state"] == "unreadable" and "its first and last MiB were not read back" in r["detail"]


def test_ambivalent_blkid_is_foreign():
    r = classify(blkid=BLKID_AMBIVALENT)
    assert r["state"] == "foreign"
    assert r["detail"].startswith("holds more than one signature (blkid: blkid: /dev/sdb: ambivalent result")


def test_in_use_refused_even_when_it_reads_blank():
    r = classify(in_use=["/dev/sdb (sdb) is held by dm-3", "partition sdb1 of /dev/sdb is mounted at /scratch"])
    assert r["state"] == "in_use"
    assert r["detail"] == ("holds no signature but is in use, refusing to format it (expected ost lfs-OST0002 of lfs): "
                           "/dev/sdb (sdb) is held by dm-3; partition sdb1 of /dev/sdb is mounted at /scratch")


def test_lustre_data_and_signatures_decided_before_the_read_back():
    ext4 = (0, "DEVNAME=/dev/sdb\nLABEL=scratch\nTYPE=ext4\n", "")
    assert L.classify_device(OST, True, tunefs=TUNEFS_NOT_LUSTRE, blkid=ext4)["state"] == "foreign"


# ------------------------------------------------------------------------------------------------ device identity

class FakeStat(object):
    def __init__(self, mode, rdev=0, dev=2049, ino=1):
        self.st_mode, self.st_rdev, self.st_dev, self.st_ino = mode, rdev, dev, ino


BLOCK = {"/dev/sdb": os.makedev(8, 16), "/dev/sdb1": os.makedev(8, 17), "/dev/sdc": os.makedev(8, 32),
         "/dev/dm-3": os.makedev(253, 3)}
LINKS = {"/dev/disk/by-id/wwn-0x5000c500a1b2c3d4": "/dev/sdb", "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4-part1":
         "/dev/sdb1", "/dev/mapper/ost0": "/dev/dm-3"}


def fake_realpath(path):
    return LINKS.get(path, path)


def fake_stat(path):
    real = fake_realpath(path)
    if real not in BLOCK:
        raise OSError(2, "No such file or directory")
    return FakeStat(stat.S_IFBLK | 0o660, rdev=BLOCK[real])


def test_by_id_link_and_its_disk_are_one_target():
    tg = [dict(OST, device="/dev/sdb", index=0), dict(OST, device="/dev/sdc", index=1),
          dict(OST, device="/dev/disk/by-id/wwn-0x5000c500a1b2c3d4", index=2)]
    assert L.duplicate_devices(tg, stat=fake_stat) == [
        "targets[2] (/dev/disk/by-id/wwn-0x5000c500a1b2c3d4) is the same device as targets[0] (/dev/sdb): "
        "block device 8:16"]
    # a partition of that disk is another device; a device that does not exist is left to the caller
    tg[2]["device"] = "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4-part1"
    tg.append(dict(OST, device="/dev/nosuch", index=3))
    assert L.duplicate_devices(tg, stat=fake_stat) == []


def test_files_compared_by_inode(tmp_path):
    dev = tmp_path / "ost0"
    dev.write_bytes(b"")
    os.symlink(str(dev), str(tmp_path / "link"))
    tg = [dict(OST, device=str(dev)), dict(OST, device=str(tmp_path / "link"), index=3)]
    problems = L.duplicate_devices(tg)
    assert len(problems) == 1 and problems[0].startswith("targets[1] (%s/link) is the same device as targets[0]"
                                                         % tmp_path)


@pytest.fixture
def sysfs(tmp_path):
    """sys/class/block/{sdb (8:16) with partition sdb1 (8:17), sdc (8:32), dm-3 (253:3)}, and mountinfo/swaps."""
    block = tmp_path / "sys" / "class" / "block"
    for rel, devno in (("sdb", "8:16"), ("sdb/sdb1", "8:17"), ("sdc", "8:32"), ("dm-3", "253:3")):
        d = block / rel
        (d / "holders").mkdir(parents=True)
        (d / "dev").write_text(devno + "\n")
        if "/" in rel:
            (d / "partition").write_text("1\n")
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text("22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
                         "29 1 253:0 / / rw,relatime shared:1 - xfs /dev/mapper/rhel-root rw\n")
    swaps = tmp_path / "swaps"
    swaps.write_text("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n")
    return {"root": str(tmp_path / "sys"), "block": block, "mountinfo": mountinfo, "swaps": swaps}


def usage(sysfs, path):
    return L.device_usage(path, sys_root=sysfs["root"], mountinfo_path=str(sysfs["mountinfo"]),
                          swaps_path=str(sysfs["swaps"]), stat=fake_stat, realpath=fake_realpath)


def test_unused_disk(sysfs):
    assert usage(sysfs, "/dev/sdb") == [] and usage(sysfs, "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4") == []


def test_holders_of_the_disk_and_of_a_partition(sysfs):
    (sysfs["block"] / "sdb" / "holders" / "dm-3").mkdir()
    (sysfs["block"] / "sdb" / "sdb1" / "holders" / "md127").mkdir()
    assert usage(sysfs, "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4") == [
        "/dev/disk/by-id/wwn-0x5000c500a1b2c3d4 (sdb) is held by dm-3",
        "partition sdb1 of /dev/disk/by-id/wwn-0x5000c500a1b2c3d4 is held by md127"]


def test_mounted_disk_or_partition_by_device_number_or_source(sysfs):
    with open(str(sysfs["mountinfo"]), "a") as f:
        f.write("97 29 8:17 / /scratch\\040data rw,relatime shared:50 - ext4 /dev/sdb1 rw\n")
        f.write("98 29 0:52 / /srv/btrfs rw,relatime shared:51 - btrfs /dev/sdc rw\n")  # anonymous dev number
    assert usage(sysfs, "/dev/sdb") == ["partition sdb1 of /dev/sdb is mounted at /scratch data"]
    assert usage(sysfs, "/dev/sdc") == ["/dev/sdc (sdc) is mounted at /srv/btrfs"]


def test_swap_and_a_device_sysfs_does_not_list(sysfs):
    with open(str(sysfs["swaps"]), "a") as f:
        f.write("/dev/mapper/ost0                        partition\t8388604\t\t0\t\t-2\n")
    assert usage(sysfs, "/dev/dm-3") == ["/dev/dm-3 (dm-3) is active swap"]
    BLOCK["/dev/sdz"] = os.makedev(65, 144)
    try:
        assert usage(sysfs, "/dev/sdz") == ["/dev/sdz (65:144) is not listed in %s, so its holders and partitions "
                                            "cannot be checked" % sysfs["block"]]
    finally:
        del BLOCK["/dev/sdz"]


def test_lab_file_device_mounted_by_its_path(sysfs, tmp_path):
    dev = tmp_path / "ost0"
    dev.write_bytes(b"")
    with open(str(sysfs["mountinfo"]), "a") as f:
        f.write("120 29 0:60 / /mnt/lustre/cflab-ost0 rw,relatime - tmpfs %s rw,size=1024k\n" % dev)
    assert L.device_usage(str(dev), mountinfo_path=str(sysfs["mountinfo"]), swaps_path=str(sysfs["swaps"])) == [
        "%s is mounted at /mnt/lustre/cflab-ost0" % dev]
    other = tmp_path / "ost1"
    other.write_bytes(b"")
    assert L.device_usage(str(other), mountinfo_path=str(sysfs["mountinfo"]), swaps_path=str(sysfs["swaps"])) == []


def test_parse_mountinfo():
    text = "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"  # proc(5) example
    assert L.parse_mountinfo(text) == [{"devno": "98:0", "mountpoint": "/mnt2", "source": "/dev/root"}]
