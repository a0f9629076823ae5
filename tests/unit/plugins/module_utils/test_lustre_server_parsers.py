"""Parsers for the Lustre server tools: tunefs.lustre --dryrun, lctl llog_print params, lnetctl net show, lctl dl.

No real outputs of these tools are in tests/fixtures (see ../shared/fixtures/PROVENANCE.md); the samples below
follow the print statements of lustre-release (print_ldd() in lustre/utils/mkfs_lustre.c, the
``- { index: ... }`` records of the manual's "Listing Persistent Parameters", the lnetctl YAML show format).
"""

from ansible_collections.clusterforge.gpu.plugins.module_utils import lustre as L

TUNEFS_OST = """checking for existing Lustre data: found
Reading CONFIGS/mountdata

   Read previous values:
Target:     testfs-OST0002
Index:      2
Lustre FS:  testfs
Mount type: ldiskfs
Flags:      0x1002
              (OST no_primnode )
Persistent mount opts: ,errors=remount-ro
Parameters: mgsnode=10.0.0.1@o2ib:10.0.0.2@o2ib failover.node=10.0.0.21@o2ib:10.0.0.22@o2ib


   Permanent disk data:
Target:     testfs-OST0002
Index:      2
Lustre FS:  testfs
Mount type: ldiskfs
Flags:      0x1002
              (OST no_primnode )
Persistent mount opts: ,errors=remount-ro
Parameters: mgsnode=10.0.0.1@o2ib:10.0.0.2@o2ib failover.node=10.0.0.21@o2ib:10.0.0.22@o2ib

exiting before disk write.
"""

TUNEFS_MGS_MDT_NEW = """checking for existing Lustre data: found
Reading CONFIGS/mountdata

   Read previous values:
Target:     lfs:MDT0000
Index:      0
Lustre FS:  lfs
Mount type: ldiskfs
Flags:      0x65
              (MDT MGS first_time update )
Persistent mount opts: user_xattr,errors=remount-ro
Parameters:

"""

TUNEFS_BLANK = "checking for existing Lustre data: not found\n"


def test_tunefs_ost_with_failover():
    r = L.parse_tunefs_dryrun(TUNEFS_OST)
    assert r["found"] is True
    prev = r["previous"]
    assert prev["target"] == "testfs-OST0002" and prev["index"] == 2 and prev["fsname"] == "testfs"
    assert prev["flags"] == 0x1002 and prev["types"] == ["OST"] and prev["first_time"] is False
    assert prev["params"] == ["mgsnode=10.0.0.1@o2ib:10.0.0.2@o2ib", "failover.node=10.0.0.21@o2ib:10.0.0.22@o2ib"]
    assert prev["mount_opts"] == ",errors=remount-ro"
    assert r["permanent"] == prev


def test_tunefs_combined_mgs_mdt_not_yet_registered():
    r = L.parse_tunefs_dryrun(TUNEFS_MGS_MDT_NEW)
    assert r["previous"]["types"] == ["MGS", "MDT"] and r["previous"]["first_time"] is True
    assert r["previous"]["target"] == "lfs:MDT0000" and r["previous"]["params"] == []
    assert r["permanent"] is None


def test_tunefs_blank_device():
    assert L.parse_tunefs_dryrun(TUNEFS_BLANK) == {"found": False, "previous": None, "permanent": None}
    assert L.parse_tunefs_dryrun("")["found"] is False


def test_llog_params_manual_example_and_last_wins():
    text = ("- { index: 2, event: set_param, device: general, parameter: osc.*.max_dirty_mb, value: 1024 }\n"
            "- { index: 3, event: set_param, device: general, param: obdfilter.*.brw_size, value: 16 }\n"
            "- { index: 4, event: set_param, device: general, parameter: osc.*.max_dirty_mb, value: 512 }\n")
    r = L.parse_llog_params(text)
    assert [rec["index"] for rec in r["records"]] == [2, 3, 4]
    assert r["params"] == {"osc.*.max_dirty_mb": "512", "obdfilter.*.brw_size": "16"}


def test_llog_params_empty_and_noise():
    assert L.parse_llog_params("") == {"records": [], "params": {}}
    assert L.parse_llog_params("error: llog_print: No such device\n")["params"] == {}


NET_SHOW = """net:
    - net type: lo
      local NI(s):
        - nid: 0@lo
          status: up
    - net type: o2ib
      local NI(s):
        - nid: 10.10.0.5@o2ib
          status: up
          interfaces:
              0: ib0
          statistics:
              send_count: 10
        - nid: 10.10.1.5@o2ib
          status: down
          interfaces:
              0: ib1
    - net type: tcp
      local NI(s):
        - nid: 192.168.1.5@tcp
          status: up
          interfaces:
              0: eth1
"""

EXPORT_BACKUP = """net:
    - net type: tcp
      local NI(s):
        - interfaces:
              0: eth1
"""


def test_lnetctl_net_show_multirail():
    nets = L.parse_lnetctl_net_show(NET_SHOW)
    assert list(nets) == ["lo", "o2ib", "tcp"]
    assert nets["lo"] == [{"nid": "0@lo", "status": "up", "interfaces": []}]
    assert [ni["interfaces"] for ni in nets["o2ib"]] == [["ib0"], ["ib1"]]
    assert nets["o2ib"][1]["status"] == "down"
    assert nets["tcp"][0]["nid"] == "192.168.1.5@tcp"


def test_lnetctl_export_backup_format():
    assert L.parse_lnetctl_net_show(EXPORT_BACKUP) == {"tcp": [{"nid": None, "status": None, "interfaces": ["eth1"]}]}


def test_lnet_net_name():
    assert [L.lnet_net_name(n) for n in ("tcp0", "o2ib0", "tcp1", "o2ib", "o2ib10")] == \
        ["tcp", "o2ib", "tcp1", "o2ib", "o2ib10"]


# --------------------------------------------------------------------------------------------- blkid -p -o export
# util-linux blkid prints DEVNAME first and escapes shell specials (`blkid -p -o export` of an mkfs.ext4 -L device).
BLKID_EXT4 = ("DEVNAME=/srv/lustre-devs/foreign\nUUID=5b1e3f0a-9a6e-4c4e-9d1c-0a6f2d3e4b5c\n"
              "BLOCK_SIZE=1024\nLABEL=my\\ scratch\nVERSION=1.0\nTYPE=ext4\nUSAGE=filesystem\n")
BLKID_GPT = "DEVNAME=/dev/sdc\nPTUUID=0f3c2a9e-1d2b-4c5d-8e7f-001122334455\nPTTYPE=gpt\n"


def test_blkid_export():
    props = L.parse_blkid_export(BLKID_EXT4)
    assert props["TYPE"] == "ext4" and props["LABEL"] == "my scratch" and props["DEVNAME"] == "/srv/lustre-devs/foreign"
    assert L.parse_blkid_export(BLKID_GPT)["PTTYPE"] == "gpt"
    assert L.parse_blkid_export("") == {}
    assert L.parse_blkid_export("blkid: error: /dev/nosuch: No such file or directory\n") == {}


# --------------------------------------------------------------------------------------------- target decisions
OST2 = {"device": "/dev/ost2", "type": "ost", "fsname": "testfs", "index": 2, "mgs_nids": ["10.0.0.1@o2ib"]}


def test_target_svname():
    assert L.target_svname({"type": "mgs"}) == "MGS"
    assert L.target_svname({"type": "mgs_mdt", "fsname": "lfs", "index": 0}) == "lfs-MDT0000"
    assert L.target_svname({"type": "ost", "fsname": "lfs", "index": 26}) == "lfs-OST001a"


def test_check_targets():
    assert L.check_targets([OST2, {"device": "/dev/mgs", "type": "mgs"}]) == []
    problems = L.check_targets([
        {"device": "dev/x", "type": "ost", "fsname": "waytoolongname", "index": None},
        {"device": "/dev/y", "type": "mdt", "fsname": "fs", "index": 0, "mgs_nids": ["a@tcp"],
         "servicenodes": ["a@tcp"], "failnodes": ["b@tcp"]},
        dict(OST2), dict(OST2)])
    text = "\n".join(problems)
    for needle in ("device must be an absolute path", "fsname of 1-8", "needs an index", "needs mgs_nids",
                   "mutually exclusive", "device already used by targets[2]"):
        assert needle in text
    assert len(problems) == 6


def test_mkfs_args_never_reformat():
    t = dict(OST2, servicenodes=["10.0.0.21@o2ib", "10.0.0.22@o2ib"], mkfs_options="-E stride=32",
             params=["sys.timeout=40"], backfstype="ldiskfs")
    assert L.mkfs_args(t) == ["--backfstype=ldiskfs", "--fsname=testfs", "--ost", "--index=2",
                              "--mgsnode=10.0.0.1@o2ib", "--servicenode=10.0.0.21@o2ib",
                              "--servicenode=10.0.0.22@o2ib", "--mkfsoptions=-E stride=32",
                              "--param=sys.timeout=40", "/dev/ost2"]
    assert L.mkfs_args({"device": "/dev/m", "type": "mgs"}) == ["--backfstype=ldiskfs", "--mgs", "/dev/m"]
    assert L.mkfs_args({"device": "/dev/m", "type": "mgs_mdt", "fsname": "lfs", "index": 0})[2:4] == ["--mgs", "--mdt"]
    assert not any("reformat" in a for a in L.mkfs_args(t))


TUNEFS_NOT_FOUND = (19, "checking for existing Lustre data: not found\n",
                    "\ntunefs.lustre FATAL: Device /dev/ost2 has not been formatted with mkfs.lustre\n")


def test_classify_same_target_is_present():
    r = L.classify_device(OST2, True, tunefs=(0, TUNEFS_OST, ""))
    assert r["state"] == "present" and r["detail"] == "testfs-OST0002" and r["identity"]["source"] == "tunefs.lustre"


def test_classify_other_lustre_target_is_foreign():
    r = L.classify_device(dict(OST2, index=5), True, tunefs=(0, TUNEFS_OST, ""))
    assert r["state"] == "foreign"
    assert r["detail"] == ("holds Lustre target testfs-OST0002 (fsname testfs, index 2, flags 0x1002), "
                           "not ost testfs-OST0005 of testfs")
    mdt = {"device": "/dev/ost2", "type": "mdt", "fsname": "testfs", "index": 2, "mgs_nids": ["x@tcp"]}
    assert L.classify_device(mdt, True, tunefs=(0, TUNEFS_OST, ""))["state"] == "foreign"  # type bits differ
    other_fs = dict(OST2, fsname="other")
    assert L.classify_device(other_fs, True, tunefs=(0, TUNEFS_OST, ""))["state"] == "foreign"


def test_classify_mgs_ignores_index_and_fsname():
    mgs_mdt = {"device": "/dev/m", "type": "mgs_mdt", "fsname": "lfs", "index": 0}
    assert L.classify_device(mgs_mdt, True, tunefs=(0, TUNEFS_MGS_MDT_NEW, ""))["state"] == "present"
    mgs = {"device": "/dev/m", "type": "mgs"}
    assert L.classify_device(mgs, True, tunefs=(0, TUNEFS_MGS_MDT_NEW, ""))["state"] == "foreign"  # has MDT bit


def test_classify_other_signature_is_foreign():
    r = L.classify_device(OST2, True, tunefs=TUNEFS_NOT_FOUND, blkid=(0, BLKID_EXT4, ""))
    assert r["state"] == "foreign" and r["identity"]["TYPE"] == "ext4"
    assert r["detail"] == "holds ext4 (label my scratch), not Lustre data (expected ost testfs-OST0002 of testfs)"
    r = L.classify_device(OST2, True, tunefs=TUNEFS_NOT_FOUND, blkid=(0, BLKID_GPT, ""))
    assert r["detail"].startswith("holds gpt, not Lustre data")


def test_classify_blank_missing_unreadable():
    """Blank needs every probe's clean answer AND the read-back (tests/unit/plugins/module_utils/test_lustre_blank.py
    has every outcome with the real texts)."""
    assert L.classify_device(OST2, True, tunefs=TUNEFS_NOT_FOUND, blkid=(2, "", ""), read_error=None,
                             in_use=[])["state"] == "blank"
    # not read back: never blank
    assert L.classify_device(OST2, True, tunefs=TUNEFS_NOT_FOUND, blkid=(2, "", ""))["state"] == "unreadable"
    missing = L.classify_device(OST2, False)
    assert missing["state"] == "missing" and missing["detail"] == "does not exist (expected ost testfs-OST0002 of testfs)"
    # blkid exit 8: ambivalent probing result (two signatures) - never formatted
    r = L.classify_device(OST2, True, tunefs=TUNEFS_NOT_FOUND, blkid=(8, "", "blkid: /dev/ost2: ambivalent result "
                                                                             "(probably more filesystems on the device, "
                                                                             "use wipefs(8) to see more details)\n"))
    assert r["state"] == "foreign" and "holds more than one signature" in r["detail"] and "ambivalent" in r["detail"]
    # blkid found nothing but tunefs "succeeded" without Lustre data: not provably blank
    r = L.classify_device(OST2, True, tunefs=(0, "", ""), blkid=(2, "", ""), read_error=None, in_use=[])
    assert r["state"] == "unreadable" and "tunefs.lustre --dryrun rc 0: no output" in r["detail"]


# --------------------------------------------------------------------------------------------- LNet
def test_lnet_config_text_round_trips_through_the_parser():
    nets = [{"net": "o2ib0", "interfaces": ["ib0", "ib1"]}, {"net": "tcp1", "interfaces": ["eth1"]}]
    text = L.lnet_config_text(nets, "Managed by Ansible\nsecond line")
    assert text.startswith("# Managed by Ansible\n# second line\nnet:\n    - net type: o2ib0\n")
    assert L.parse_lnetctl_net_show(text) == {
        "o2ib0": [{"nid": None, "status": None, "interfaces": ["ib0"]},
                  {"nid": None, "status": None, "interfaces": ["ib1"]}],
        "tcp1": [{"nid": None, "status": None, "interfaces": ["eth1"]}]}


def test_lnet_missing():
    live = L.parse_lnetctl_net_show(NET_SHOW)
    assert L.lnet_missing([{"net": "o2ib0", "interfaces": ["ib0", "ib1"]}, {"net": "tcp0", "interfaces": ["eth1"]}],
                          live) == []
    assert L.lnet_missing([{"net": "o2ib0", "interfaces": ["ib0", "ib2"]}, {"net": "tcp1", "interfaces": ["eth2"]}],
                          live) == [{"net": "o2ib0", "missing": ["ib2"]}, {"net": "tcp1", "missing": ["eth2"]}]
    assert L.lnet_missing([{"net": "tcp0", "interfaces": ["eth0"]}], {}) == [{"net": "tcp0", "missing": ["eth0"]}]


# --------------------------------------------------------------------------------------------- lctl get_param
def test_lctl_get_param_devices_and_multiline_values():
    text = ("osc.lfs-OST0000-osc-ffff8d4b3a5e1000.max_rpcs_in_flight=8\n"
            "osc.lfs-OST0001-osc-ffff8d4b3a5e1000.max_rpcs_in_flight=32\n"
            "obdfilter.lfs-OST0000.recovery_status=\nstatus: COMPLETE\nrecovery_start: 1700000000\n")
    got = L.parse_lctl_get_param(text)
    assert [g["path"] for g in got] == ["osc.lfs-OST0000-osc-ffff8d4b3a5e1000.max_rpcs_in_flight",
                                        "osc.lfs-OST0001-osc-ffff8d4b3a5e1000.max_rpcs_in_flight",
                                        "obdfilter.lfs-OST0000.recovery_status"]
    assert [g["value"] for g in got[:2]] == ["8", "32"]
    assert got[2]["value"] == "status: COMPLETE\nrecovery_start: 1700000000"
    assert L.parse_lctl_get_param("") == []


def test_lctl_value():
    assert [L.lctl_value(v) for v in (True, False, 16, " 4M ", "1024")] == ["1", "0", "16", "4M", "1024"]


def test_llog_params_deletion_record_removes_the_parameter():
    text = ("- { index: 2, event: set_param, device: general, parameter: osc.*.max_dirty_mb, value: 1024 }\n"
            "- { index: 3, event: set_param, device: general, parameter: osc.*.max_dirty_mb }\n")
    assert L.parse_llog_params(text)["params"] == {}


# --------------------------------------------------------------------------------------------- lctl dl
# obd_device_list_seq_show() of lustre/obdclass/class_obd.c: "%3d %s %s %s %s %d\n" (index, status, type, name,
# uuid, refcount); status UP, ST (stopping), IN (inactive), AT (attached) or --. A combined MGS/MDT0 and two OSTs,
# one OST stopping and one only attached; a client's osc line with the connection `lctl dl -t` appends.
LCTL_DL = """  0 UP osd-ldiskfs MGS-osd MGS-osd_UUID 4
  1 UP mgs MGS MGS 7
  2 UP mgc MGC10.0.0.1@o2ib 7c1f0e4a-2b6d-4f3e-9a8b-1c2d3e4f5a6b 4
  3 UP osd-ldiskfs lfs-MDT0000-osd lfs-MDT0000-osd_UUID 9
  4 UP mds MDS MDS_uuid 2
  5 UP lod lfs-MDT0000-mdtlov lfs-MDT0000-mdtlov_UUID 3
  6 UP mdt lfs-MDT0000 lfs-MDT0000_UUID 9
  7 UP mdd lfs-MDD0000 lfs-MDD0000_UUID 3
  8 UP osd-ldiskfs lfs-OST0000-osd lfs-OST0000-osd_UUID 4
  9 UP ost OSS OSS_uuid 2
 10 UP obdfilter lfs-OST0000 lfs-OST0000_UUID 5
 11 ST obdfilter lfs-OST0001 lfs-OST0001_UUID 3
 12 AT obdfilter lfs-OST0002 lfs-OST0002_UUID 1
 13 UP osc lfs-OST0000-osc-ffff8d4b3a5e1000 e2a1c3b4-5d6e-4f70-8192-a3b4c5d6e7f8 4 10.0.0.21@o2ib
"""


def test_lctl_dl():
    dl = L.parse_lctl_dl(LCTL_DL)
    assert len(dl) == 14
    assert dl[1] == {"index": 1, "status": "UP", "type": "mgs", "name": "MGS", "uuid": "MGS", "refcount": 7}
    assert (dl[10]["type"], dl[10]["name"], dl[10]["uuid"], dl[10]["refcount"]) == \
        ("obdfilter", "lfs-OST0000", "lfs-OST0000_UUID", 5)
    assert [d["status"] for d in dl[10:13]] == ["UP", "ST", "AT"]
    assert dl[13]["name"] == "lfs-OST0000-osc-ffff8d4b3a5e1000" and dl[13]["refcount"] == 4  # -t connection ignored
    assert L.parse_lctl_dl("") == [] and L.parse_lctl_dl(None) == []
    assert L.parse_lctl_dl("error: device_list: No such file or directory\n") == []


def test_targets_not_up():
    dl = L.parse_lctl_dl(LCTL_DL)
    up = [{"svname": "lfs-MDT0000", "type": "mgs_mdt"}, {"svname": "lfs-OST0000", "type": "ost"}]
    assert L.targets_not_up(up, dl) == []
    assert L.targets_not_up([{"svname": "MGS", "type": "mgs"}, {"svname": "lfs-MDT0000", "type": "mdt"}], dl) == []
    missing = L.targets_not_up(up + [{"svname": "lfs-OST0001", "type": "ost"}, {"svname": "lfs-OST0002", "type": "ost"},
                                     {"svname": "lfs-OST0003", "type": "ost"}], dl)
    assert missing == [
        {"svname": "lfs-OST0001", "type": "ost", "obd_type": "obdfilter", "name": "lfs-OST0001", "status": "ST"},
        {"svname": "lfs-OST0002", "type": "ost", "obd_type": "obdfilter", "name": "lfs-OST0002", "status": "AT"},
        {"svname": "lfs-OST0003", "type": "ost", "obd_type": "obdfilter", "name": "lfs-OST0003", "status": None}]
    # the type matters: an MDT name is not an OST, and a combined MGS/MDT needs the MGS too
    assert [m["obd_type"] for m in L.targets_not_up([{"svname": "lfs-MDT0000", "type": "ost"}], dl)] == ["obdfilter"]
    no_mgs = [d for d in dl if d["type"] != "mgs"]
    assert L.targets_not_up([{"svname": "lfs-MDT0000", "type": "mgs_mdt"}], no_mgs) == [
        {"svname": "lfs-MDT0000", "type": "mgs_mdt", "obd_type": "mgs", "name": "MGS", "status": None}]
    # each obd device is reported once
    assert len(L.targets_not_up([{"svname": "MGS", "type": "mgs"}, {"svname": "lfs-MDT0000", "type": "mgs_mdt"}],
                                no_mgs)) == 1
