"""lustre_device_info module tests: a scripted `lctl dl` in the kernel's format (obd_device_list_seq_show():
"%3d %s %s %s %s %d"), on a combined MGS/MDT server with two OSTs."""

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import lustre_device_info

# The obd devices of a server after mounting cflab's combined MGS/MDT0, then OST0000 and OST0001
DL = """  0 UP osd-ldiskfs MGS-osd MGS-osd_UUID 3
  1 UP mgs MGS MGS 3
  2 UP mgc MGC10.89.0.5@tcp 5b0f1c2e-8d3a-4e6f-9a1b-2c3d4e5f6a7b 3
  3 UP osd-ldiskfs cflab-MDT0000-osd cflab-MDT0000-osd_UUID 3
  4 UP mds MDS MDS_uuid 3
  5 UP lod cflab-MDT0000-mdtlov cflab-MDT0000-mdtlov_UUID 3
  6 UP mdt cflab-MDT0000 cflab-MDT0000_UUID 3
  7 UP mdd cflab-MDD0000 cflab-MDD0000_UUID 3
  8 UP osd-ldiskfs cflab-OST0000-osd cflab-OST0000-osd_UUID 3
  9 UP ost OSS OSS_uuid 3
 10 UP obdfilter cflab-OST0000 cflab-OST0000_UUID 3
 11 UP osd-ldiskfs cflab-OST0001-osd cflab-OST0001-osd_UUID 3
 12 UP obdfilter cflab-OST0001 cflab-OST0001_UUID 3
"""
TARGETS = [{"svname": "cflab-MDT0000", "type": "mgs_mdt"}, {"svname": "cflab-OST0000", "type": "ost"},
           {"svname": "cflab-OST0001", "type": "ost"}]


def run(args, out=DL, rc=0, err="", **kw):
    tool = Tool([(("dl",), (rc, out, err))])
    return run_module(lustre_device_info, args, tool, **kw), tool


def test_all_targets_up():
    result, tool = run({"expect_up": TARGETS})
    assert "failed" not in result and result["changed"] is False, result
    assert tool.calls == [["/usr/bin/lctl", "dl"]] and result["cmd"] == "/usr/bin/lctl dl"
    assert result["not_up"] == [] and result["msg"] == "all 3 expected targets are UP"
    assert len(result["devices"]) == 13
    assert result["devices"][10] == {"index": 10, "status": "UP", "type": "obdfilter", "name": "cflab-OST0000",
                                     "uuid": "cflab-OST0000_UUID", "refcount": 3}


def test_info_only_without_expect_up():
    result, tool = run({})
    assert "failed" not in result and result["changed"] is False and result["msg"] == "13 devices"
    result, _tool = run({}, out="")
    assert result["devices"] == [] and result["msg"] == "0 devices"


def test_check_mode_reads_too():
    result, tool = run({"expect_up": TARGETS}, check_mode=True)
    assert "failed" not in result and len(tool.calls) == 1


def test_missing_and_stopping_targets_fail_naming_each():
    out = DL.replace(" 12 UP obdfilter cflab-OST0001", " 12 ST obdfilter cflab-OST0001")
    out = "".join(line + "\n" for line in out.splitlines() if " mgs MGS " not in line)
    expect = TARGETS + [{"svname": "cflab-OST0002", "type": "ost"}]
    result, _tool = run({"expect_up": expect}, out=out)
    assert result["failed"] is True and result["changed"] is False
    assert result["not_up"] == [
        {"svname": "cflab-MDT0000", "type": "mgs_mdt", "obd_type": "mgs", "name": "MGS", "status": None},
        {"svname": "cflab-OST0001", "type": "ost", "obd_type": "obdfilter", "name": "cflab-OST0001", "status": "ST"},
        {"svname": "cflab-OST0002", "type": "ost", "obd_type": "obdfilter", "name": "cflab-OST0002", "status": None}]
    msg = result["msg"]
    assert msg.startswith("not UP in lctl dl: mgs MGS (not listed), obdfilter cflab-OST0001 (ST), "
                          "obdfilter cflab-OST0002 (not listed). lctl dl lists: UP osd-ldiskfs MGS-osd, ")
    assert "ST obdfilter cflab-OST0001" in msg and msg.endswith("UP obdfilter cflab-OST0000, UP osd-ldiskfs "
                                                                "cflab-OST0001-osd, ST obdfilter cflab-OST0001")
    assert len(result["devices"]) == 12


def test_type_is_checked_not_only_the_name():
    """An MDT name asked for as an OST is not UP: there is no obdfilter of that name."""
    result, _tool = run({"expect_up": [{"svname": "cflab-MDT0000", "type": "ost"}]})
    assert result["failed"] is True and result["not_up"][0]["obd_type"] == "obdfilter"


def test_nothing_mounted():
    result, _tool = run({"expect_up": [{"svname": "MGS", "type": "mgs"}]}, out="")
    assert result["failed"] is True and result["msg"] == "not UP in lctl dl: mgs MGS (not listed). lctl dl lists: no devices"


def test_lctl_dl_failure():
    result, _tool = run({"expect_up": TARGETS}, out="", rc=2,
                        err="error: device_list: No such file or directory\n")
    assert result["failed"] is True and result["rc"] == 2
    assert result["msg"] == "lctl dl failed (rc=2): error: device_list: No such file or directory"
    assert result["devices"] == [] and result["not_up"] == []


def test_lctl_not_installed():
    tool = Tool([], missing=("lctl",))
    result = run_module(lustre_device_info, {"expect_up": TARGETS}, tool)
    assert result["failed"] is True and "lctl was not found on this host" in result["msg"] and tool.calls == []


def test_bad_type_rejected_by_argument_spec():
    result, tool = run({"expect_up": [{"svname": "x", "type": "raid"}]})
    assert result["failed"] is True and "raid" in result["msg"] and tool.calls == []
