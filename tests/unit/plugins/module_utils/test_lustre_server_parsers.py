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


def test_lctl_dl():
    text = ("  0 UP osd-ldiskfs lfs-MDT0000-osd lfs-MDT0000-osd_UUID 9\n"
            "  1 UP mgs MGS MGS 5\n"
            " 12 UP obdfilter lfs-OST0001 lfs-OST0001_UUID 5\n")
    dl = L.parse_lctl_dl(text)
    expected = [(0, "osd-ldiskfs", "lfs-MDT0000-osd"), (1, "mgs", "MGS"), (12, "obdfilter", "lfs-OST0001")]
    assert [(d["index"], d["type"], d["name"]) for d in dl] == expected
    assert dl[0]["refcount"] == 9 and dl[2]["status"] == "UP"
