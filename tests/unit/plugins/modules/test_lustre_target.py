"""lustre_target module tests: scripted tunefs.lustre / blkid / mkfs.lustre in the real output formats.

The fake devices are files under tmp_path (the module checks that a device exists); what each "holds" is kept in
FakeTools, and mkfs.lustre changes it, so read-back and idempotence are tested like on a host.
"""

import os

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import lustre_target

# print_ldd() of lustre/utils/mkfs_lustre.c, as tunefs.lustre --dryrun prints it
TUNEFS_FOUND = """checking for existing Lustre data: found
Reading CONFIGS/mountdata

   Read previous values:
Target:     {target}
Index:      {index}
Lustre FS:  {fsname}
Mount type: ldiskfs
Flags:      {flags:#x}
              ({words})
Persistent mount opts: ,errors=remount-ro
Parameters: mgsnode=10.0.0.1@tcp

exiting before disk write.
"""
NOT_FORMATTED = ("checking for existing Lustre data: not found\n",
                 "\ntunefs.lustre FATAL: Device {dev} has not been formatted with mkfs.lustre\n"
                 "tunefs.lustre: exiting with 19 (No such device)\n")
EXT4 = "DEVNAME={dev}\nUUID=0c3e6f1a-5d0b-4a63-9a43-3f0e0d5e2b11\nBLOCK_SIZE=1024\nLABEL=scratch\nTYPE=ext4\n"
FLAGS = {"ost": (0x2, "OST "), "mdt": (0x1, "MDT "), "mgs": (0x4, "MGS "), "mgs_mdt": (0x5, "MDT MGS ")}


class FakeTools(object):
    """Device contents: None (blank), ("ext4",) or a dict identity {type, fsname, index}."""

    def __init__(self, contents, mkfs_rc=0, mkfs_writes=True):
        self.contents = dict(contents)
        self.mkfs_rc = mkfs_rc
        self.mkfs_writes = mkfs_writes

    def __call__(self, argv, data):
        tool, dev = argv[0].rsplit("/", 1)[1], argv[-1]
        held = self.contents.get(dev)
        if tool == "tunefs.lustre":
            assert argv[1:-1] == ["--dryrun"]
            if isinstance(held, dict):
                flags, words = FLAGS[held["type"]]
                name = "MGS" if held["type"] == "mgs" else "%s-%s%04x" % (
                    held["fsname"], "OST" if held["type"] == "ost" else "MDT", held["index"])
                return 0, TUNEFS_FOUND.format(target=name, index=held.get("index", "unassigned"),
                                              fsname=held.get("fsname", ""), flags=flags, words=words), ""
            return 19, NOT_FORMATTED[0], NOT_FORMATTED[1].format(dev=dev)
        if tool == "blkid":
            assert argv[1:-1] == ["-p", "-o", "export"]
            if held == ("ext4",):
                return 0, EXT4.format(dev=dev), ""
            return 2, "", ""
        if tool == "mkfs.lustre":
            assert "--reformat" not in argv
            if self.mkfs_rc:
                return self.mkfs_rc, "", "mkfs.lustre FATAL: something went wrong\n"
            if self.mkfs_writes:
                opts = dict(a[2:].split("=", 1) for a in argv[1:-1] if "=" in a)
                kind = "mgs_mdt" if "--mgs" in argv and "--mdt" in argv else \
                    next(k for k in ("mgs", "mdt", "ost") if "--" + k in argv)
                self.contents[dev] = {"type": kind, "fsname": opts.get("fsname", ""),
                                      "index": int(opts.get("index", 0))}
            return 0, "Writing CONFIGS/mountdata\n", ""
        raise AssertionError(argv)


@pytest.fixture
def devs(tmp_path):
    paths = {}
    for name in ("mdt0", "ost0", "ost1", "foreign"):
        p = tmp_path / name
        p.write_bytes(b"")
        paths[name] = str(p)
    return paths


def targets(devs):
    return [{"device": devs["mdt0"], "type": "mgs_mdt", "fsname": "cflab", "index": 0},
            {"device": devs["ost0"], "type": "ost", "fsname": "cflab", "index": 0, "mgs_nids": ["10.0.0.1@tcp"]},
            {"device": devs["ost1"], "type": "ost", "fsname": "cflab", "index": 1, "mgs_nids": ["10.0.0.1@tcp"]}]


def run(args, fake, **kw):
    tool = Tool(fake)
    return run_module(lustre_target, args, tool, **kw), tool


def present(devs):
    return {devs["mdt0"]: {"type": "mgs_mdt", "fsname": "cflab", "index": 0},
            devs["ost0"]: {"type": "ost", "fsname": "cflab", "index": 0},
            devs["ost1"]: {"type": "ost", "fsname": "cflab", "index": 1}}


def test_blank_devices_formatted_with_format_ok_then_idempotent(devs):
    fake = FakeTools({})
    result, tool = run({"targets": targets(devs), "format_ok": True}, fake)
    assert result["changed"] is True and "failed" not in result, result
    assert [t["state"] for t in result["targets"]] == ["blank"] * 3
    assert [t["action"] for t in result["targets"]] == ["format"] * 3
    assert tool.count("mkfs.lustre") == 3
    assert result["cmd"][1] == ("/usr/bin/mkfs.lustre --backfstype=ldiskfs --fsname=cflab --ost --index=0 "
                                "--mgsnode=10.0.0.1@tcp %s" % devs["ost0"])
    # every device read before the first write
    first_mkfs = next(i for i, c in enumerate(tool.calls) if c[0].endswith("mkfs.lustre"))
    assert tool.count("tunefs.lustre") - 3 == 3 and first_mkfs == 6  # 3 tunefs + 3 blkid, then writes
    assert result["targets"][1]["identity"]["target"] == "cflab-OST0000"  # read back
    assert result["msg"].startswith("formatted ")
    again, tool2 = run({"targets": targets(devs), "format_ok": True}, fake)
    assert again["changed"] is False and [t["state"] for t in again["targets"]] == ["present"] * 3
    assert tool2.count("mkfs.lustre") == 0 and tool2.count("blkid") == 0 and tool2.count("tunefs.lustre") == 3


def test_present_targets_untouched(devs):
    result, tool = run({"targets": targets(devs)}, FakeTools(present(devs)))
    assert result["changed"] is False and result["cmd"] == [] and result["msg"] == "all 3 targets are present"
    assert [t["action"] for t in result["targets"]] == ["none"] * 3
    assert result["targets"][0]["svname"] == "cflab-MDT0000"


def test_blank_without_format_ok_fails_and_writes_nothing(devs):
    contents = present(devs)
    del contents[devs["ost1"]]
    for check_mode in (False, True):
        result, tool = run({"targets": targets(devs)}, FakeTools(contents), check_mode=check_mode)
        assert result["failed"] is True and result["changed"] is False
        assert "%s would be formatted with mkfs.lustre (ost cflab-OST0001 of cflab)" % devs["ost1"] in result["msg"]
        assert "format_ok=true" in result["msg"]
        assert tool.count("mkfs.lustre") == 0


def test_check_mode_would_format_and_diff(devs):
    contents = present(devs)
    del contents[devs["ost1"]]
    fake = FakeTools(contents)
    result, tool = run({"targets": targets(devs), "format_ok": True}, fake, check_mode=True, diff=True)
    assert result["changed"] is True and tool.count("mkfs.lustre") == 0
    assert result["msg"] == "would format %s (cflab-OST0001)" % devs["ost1"]
    assert result["cmd"] == ["/usr/bin/mkfs.lustre --backfstype=ldiskfs --fsname=cflab --ost --index=1 "
                             "--mgsnode=10.0.0.1@tcp %s" % devs["ost1"]]
    assert result["diff"]["before"][devs["ost1"]]["state"] == "blank"
    assert result["diff"]["after"][devs["ost1"]] == {"state": "present", "detail": "cflab-OST0001"}
    assert result["diff"]["before"][devs["ost0"]] == result["diff"]["after"][devs["ost0"]]
    assert devs["ost1"] not in fake.contents


def test_diff_only_in_diff_mode(devs):
    result, _tool = run({"targets": targets(devs)}, FakeTools(present(devs)))
    assert "diff" not in result


def test_one_foreign_device_stops_everything(devs):
    """A blank device is not formatted when another device of the host is foreign (classify ALL first)."""
    tg = targets(devs) + [{"device": devs["foreign"], "type": "ost", "fsname": "cflab", "index": 2,
                           "mgs_nids": ["10.0.0.1@tcp"]}]
    contents = {devs["foreign"]: ("ext4",), devs["ost1"]: {"type": "ost", "fsname": "cflab", "index": 1}}
    tg[2]["index"] = 5  # ost1 holds OST0001, the list asks for OST0005
    result, tool = run({"targets": tg, "format_ok": True}, FakeTools(contents))
    assert result["failed"] is True and result["changed"] is False and tool.count("mkfs.lustre") == 0
    msg = result["msg"]
    assert msg.startswith("refusing to touch these devices, nothing was formatted: ")
    assert "%s holds ext4 (label scratch), not Lustre data (expected ost cflab-OST0002 of cflab)" % devs["foreign"] in msg
    assert ("%s holds Lustre target cflab-OST0001 (fsname cflab, index 1, flags 0x2), not ost cflab-OST0005"
            % devs["ost1"]) in msg
    states = dict((t["device"], (t["state"], t["action"])) for t in result["targets"])
    assert states[devs["foreign"]] == ("foreign", "refuse") and states[devs["mdt0"]] == ("blank", "none")
    assert result["targets"][3]["identity"]["LABEL"] == "scratch"


def test_missing_device_refused(devs, tmp_path):
    tg = [{"device": str(tmp_path / "nosuch"), "type": "mgs"}]
    result, tool = run({"targets": tg, "format_ok": True}, FakeTools({}))
    assert result["failed"] is True and "does not exist (expected mgs MGS)" in result["msg"]
    assert tool.calls == []


def test_unidentifiable_device_refused(devs):
    def handler(argv, data):
        if argv[0].endswith("blkid"):
            return 8, "", "blkid: ambivalent result (probably more filesystems on the device)\n"
        return FakeTools({})(argv, data)
    result, tool = run({"targets": targets(devs)[:1], "format_ok": True}, handler)
    assert result["failed"] is True and "holds more than one signature (blkid: blkid: ambivalent result" in result["msg"]
    assert result["targets"][0]["state"] == "foreign" and tool.count("mkfs.lustre") == 0


@pytest.mark.parametrize("bad, needle", [
    ({"device": "relative/path", "type": "mgs"}, "absolute path"),
    ({"device": "/dev/x", "type": "ost", "fsname": "cflab", "index": 0}, "needs mgs_nids"),
    ({"device": "/dev/x", "type": "mdt", "fsname": "ninechars", "index": 0, "mgs_nids": ["a@tcp"]}, "fsname of 1-8"),
    ({"device": "/dev/x", "type": "mdt", "fsname": "fs", "mgs_nids": ["a@tcp"]}, "needs an index"),
    ({"device": "/dev/x", "type": "mgs", "servicenodes": ["a@tcp"], "failnodes": ["b@tcp"]}, "mutually exclusive"),
])
def test_bad_input_fails_before_any_command(bad, needle):
    result, tool = run({"targets": [bad], "format_ok": True}, FakeTools({}))
    assert result["failed"] is True and needle in result["msg"] and tool.calls == []


def test_bad_type_rejected_by_argument_spec():
    result, tool = run({"targets": [{"device": "/dev/x", "type": "raid"}]}, FakeTools({}))
    assert result["failed"] is True and "raid" in result["msg"] and tool.calls == []


def test_same_device_twice_fails(devs):
    tg = targets(devs)
    tg[2]["device"] = tg[1]["device"]
    result, tool = run({"targets": tg, "format_ok": True}, FakeTools({}))
    assert result["failed"] is True and "device already used by targets[1]" in result["msg"] and tool.calls == []


def test_mkfs_failure_reports_command(devs):
    result, _tool = run({"targets": targets(devs)[:1], "format_ok": True}, FakeTools({}, mkfs_rc=22))
    assert result["failed"] is True and result["rc"] == 22 and "something went wrong" in result["msg"]
    assert "mkfs.lustre" in result["cmd"]


def test_format_that_does_not_stick_fails(devs):
    result, _tool = run({"targets": targets(devs)[:1], "format_ok": True}, FakeTools({}, mkfs_writes=False))
    assert result["failed"] is True and result["changed"] is True and "does not hold cflab-MDT0000" in result["msg"]


def test_mkfs_not_needed_when_everything_is_present(devs):
    tool = Tool(FakeTools(present(devs)), missing=("mkfs.lustre",))
    result = run_module(lustre_target, {"targets": targets(devs)}, tool)
    assert result["changed"] is False and "failed" not in result


# ------------------------------------------------------------------------------------------------ require_raid6
# /proc/mdstat in the kernel's format (md_seq_show): md0 raid6, md1 raid6 auto-read-only, md2 raid5, md3 raid1,
# md4 raid6 read-only, md127 inactive.
MDSTAT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "module_utils", "fixtures", "md",
                      "mdstat-oss-raid6-raid5-inactive.txt")


@pytest.fixture
def mddevs(tmp_path):
    """Device files named like the kernel's block devices, and /dev/disk/by-id and /dev/md/<name> style links."""
    paths = {}
    for name in ("mdt0", "md0", "md1", "md2", "md3", "md4", "md127", "sdb"):
        p = tmp_path / name
        p.write_bytes(b"")
        paths[name] = str(p)
    (tmp_path / "by-id").mkdir()
    (tmp_path / "md").mkdir()
    for link, target in (("by-id/md-name-oss1:ost0", "../md0"), ("md/ost1", "../md1"), ("md/ost2", "../md2")):
        os.symlink(target, str(tmp_path / link))
        paths[link] = str(tmp_path / link)
    return paths


def ost(device, index):
    return {"device": device, "type": "ost", "fsname": "cflab", "index": index, "mgs_nids": ["10.0.0.1@tcp"]}


def raid_targets(mddevs, *osts):
    return [{"device": mddevs["mdt0"], "type": "mgs_mdt", "fsname": "cflab", "index": 0}] + \
        [ost(mddevs[name], i) for i, name in enumerate(osts)]


def test_raid6_osts_proceed(mddevs):
    """md0 (through a by-id link), md1 auto-read-only (through /dev/md/<name>) and md4 read-only are RAID-6."""
    tg = raid_targets(mddevs, "by-id/md-name-oss1:ost0", "md/ost1", "md4")
    result, tool = run({"targets": tg, "format_ok": True, "require_raid6": True, "mdstat_path": MDSTAT}, FakeTools({}))
    assert "failed" not in result and result["changed"] is True, result
    assert tool.count("mkfs.lustre") == 4
    assert [t["device"] for t in result["targets"]][1:] == [mddevs["by-id/md-name-oss1:ost0"], mddevs["md/ost1"],
                                                            mddevs["md4"]]


def test_non_raid6_osts_fail_before_any_command_naming_each(mddevs):
    tg = raid_targets(mddevs, "md0", "sdb", "md127", "md/ost2", "md3")
    for check_mode in (False, True):
        result, tool = run({"targets": tg, "format_ok": True, "require_raid6": True, "mdstat_path": MDSTAT},
                           FakeTools({}), check_mode=check_mode)
        assert result["failed"] is True and result["changed"] is False and tool.calls == []
        msg = result["msg"]
        assert msg.startswith("require_raid6 (lustre_server_ost_require_raid6 in the lustre_server role): these OST "
                              "devices are not active md RAID-6 arrays in %s, nothing was formatted: " % MDSTAT)
        problems = msg.split("nothing was formatted: ", 1)[1].split("; ")
        assert problems == ["%s (sdb) is not an md array" % mddevs["sdb"],
                            "%s (md127) is inactive" % mddevs["md127"],
                            "%s (md2) is raid5, not raid6" % mddevs["md/ost2"],
                            "%s (md3) is raid1, not raid6" % mddevs["md3"]]
        assert result["targets"] == [] and result["cmd"] == []


def test_raid6_not_checked_for_mdt_and_mgs(mddevs):
    """The MDT sits on a raid5 array and the MGS on a plain disk: only OSTs must be RAID-6."""
    tg = [{"device": mddevs["sdb"], "type": "mgs"},
          {"device": mddevs["md2"], "type": "mdt", "fsname": "cflab", "index": 0, "mgs_nids": ["10.0.0.1@tcp"]},
          ost(mddevs["md0"], 0)]
    result, tool = run({"targets": tg, "format_ok": True, "require_raid6": True, "mdstat_path": MDSTAT}, FakeTools({}))
    assert "failed" not in result, result
    assert tool.count("mkfs.lustre") == 3


def test_raid6_off_by_default(mddevs):
    tg = raid_targets(mddevs, "sdb", "md2")
    result, _tool = run({"targets": tg, "format_ok": True, "mdstat_path": MDSTAT}, FakeTools({}))
    assert "failed" not in result and result["changed"] is True, result


def test_raid6_without_mdstat(mddevs, tmp_path):
    """No /proc/mdstat (md driver not loaded): every OST fails, saying so; a host without OSTs does not read it."""
    nosuch = str(tmp_path / "nosuch-mdstat")
    result, tool = run({"targets": raid_targets(mddevs, "md0"), "format_ok": True, "require_raid6": True,
                        "mdstat_path": nosuch}, FakeTools({}))
    assert result["failed"] is True and tool.calls == []
    assert ("%s (md0) is not an md array (there is no %s: the md driver is not loaded)" % (mddevs["md0"], nosuch)
            in result["msg"])
    result, _tool = run({"targets": raid_targets(mddevs), "format_ok": True, "require_raid6": True,
                         "mdstat_path": nosuch}, FakeTools({}))
    assert "failed" not in result, result


def test_raid6_missing_ost_device(mddevs, tmp_path):
    tg = raid_targets(mddevs) + [ost(str(tmp_path / "md9"), 0)]
    result, tool = run({"targets": tg, "format_ok": True, "require_raid6": True, "mdstat_path": MDSTAT}, FakeTools({}))
    assert result["failed"] is True and tool.calls == []
    assert result["msg"].endswith("nothing was formatted: %s does not exist" % (tmp_path / "md9"))


# ------------------------------------------------------------------------------------------------ nothing unreadable is blank
# Real texts: blkid -p prints warn("error: %s") -> "blkid: error: <dev>: <strerror>" and exits 2 when open() fails,
# and exits 2 WITHOUT a word when a read fails inside the probe (util-linux misc-utils/blkid.c lowprobe_device()).

def eio_blkid(bad):
    """FakeTools, except that blkid answers for the devices in ``bad`` as util-linux does when open() gets EIO."""
    def handler(argv, data):
        if argv[0].endswith("blkid") and argv[-1] in bad:
            return 2, "", "blkid: error: %s: Input/output error\n" % argv[-1]
        return FakeTools({})(argv, data)
    return handler


def test_unreadable_device_refused_even_with_format_ok(devs):
    for check_mode in (False, True):
        result, tool = run({"targets": targets(devs), "format_ok": True}, eio_blkid([devs["ost1"]]),
                           check_mode=check_mode)
        assert result["failed"] is True and result["changed"] is False and tool.count("mkfs.lustre") == 0
        assert result["msg"].startswith("refusing to touch these devices, nothing was formatted: %s is unreadable, "
                                        "refusing to call it blank (expected ost cflab-OST0001 of cflab): blkid -p rc 2: "
                                        "blkid: error: %s: Input/output error" % (devs["ost1"], devs["ost1"]))
        states = [(t["state"], t["action"]) for t in result["targets"]]
        assert states == [("blank", "none"), ("blank", "none"), ("unreadable", "refuse")]


def test_silent_blkid_but_failing_read_back_refused(devs, monkeypatch):
    """blkid exit 2 with nothing on stderr and the real tunefs text, but the device's first MiB gives EIO."""
    real = lustre_target._read_ends

    def read_ends(path, length):
        if path == devs["ost0"]:
            raise OSError(5, "Input/output error")
        return real(path, length)
    monkeypatch.setattr(lustre_target, "_read_ends", read_ends)
    result, tool = run({"targets": targets(devs), "format_ok": True}, FakeTools({}))
    assert result["failed"] is True and tool.count("mkfs.lustre") == 0
    assert ("%s is unreadable, refusing to call it blank (expected ost cflab-OST0000 of cflab): reading its first and "
            "last MiB failed: Input/output error" % devs["ost0"]) in result["msg"]


def test_in_use_device_refused(devs, monkeypatch):
    monkeypatch.setattr(lustre_target, "device_usage",
                        lambda path: ["%s is mounted at /scratch" % path] if path == devs["mdt0"] else [])
    result, tool = run({"targets": targets(devs), "format_ok": True}, FakeTools({}))
    assert result["failed"] is True and tool.count("mkfs.lustre") == 0
    assert result["targets"][0]["state"] == "in_use"
    assert ("%s holds no signature but is in use, refusing to format it (expected mgs_mdt cflab-MDT0000 of cflab): "
            "%s is mounted at /scratch" % (devs["mdt0"], devs["mdt0"])) in result["msg"]


def test_present_target_is_not_read_back_or_checked_for_use(devs, monkeypatch):
    """A mounted, running target is the normal case on a second run: only blank candidates are checked."""
    monkeypatch.setattr(lustre_target, "device_usage", lambda path: ["%s is mounted" % path])
    monkeypatch.setattr(lustre_target, "device_read_error", lambda path, seconds: "Input/output error")
    result, _tool = run({"targets": targets(devs)}, FakeTools(present(devs)))
    assert "failed" not in result and result["changed"] is False, result


def test_by_id_link_of_a_listed_device_refused_before_any_command(devs, tmp_path):
    byid = tmp_path / "by-id"
    byid.mkdir()
    os.symlink(devs["ost0"], str(byid / "wwn-0x5000c500a1b2c3d4"))
    tg = targets(devs)
    tg[2]["device"] = str(byid / "wwn-0x5000c500a1b2c3d4")
    result, tool = run({"targets": tg, "format_ok": True}, FakeTools({}))
    assert result["failed"] is True and tool.calls == []
    assert result["msg"].startswith("invalid targets: targets[2] (%s) is the same device as targets[1] (%s): file "
                                    % (tg[2]["device"], devs["ost0"]))


def test_device_read_error_reads_both_ends(tmp_path):
    dev = tmp_path / "dev"
    with open(str(dev), "wb") as f:
        f.truncate(3 << 20)
    assert lustre_target.device_read_error(str(dev), 10) is None
    assert lustre_target.device_read_error(str(tmp_path / "nosuch"), 10) == "No such file or directory"


def test_device_read_error_time_limit(tmp_path, monkeypatch):
    import time
    dev = tmp_path / "dev"
    dev.write_bytes(b"x")
    monkeypatch.setattr(lustre_target, "_read_ends", lambda path, length: time.sleep(30))
    start = time.time()
    assert lustre_target.device_read_error(str(dev), 0.5) == "no answer in 0.5 s"
    assert time.time() - start < 5


def test_probe_without_an_answer_fails_naming_the_device(devs):
    from ansible_collections.clusterforge.gpu.plugins.module_utils import _runner
    if not hasattr(_runner, "ToolTimeout"):
        pytest.skip("the runner has no time limit in this tree")

    def handler(argv, data):
        if argv[0].endswith("blkid"):
            raise _runner.ToolTimeout(argv, 60)
        return FakeTools({})(argv, data)
    result, tool = run({"targets": targets(devs)[:1], "format_ok": True}, handler)
    assert result["failed"] is True and tool.count("mkfs.lustre") == 0
    assert result["msg"] == "no answer in 60 s: /usr/bin/blkid -p -o export %s" % devs["mdt0"]
