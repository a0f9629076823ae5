"""The Lustre server-tool TEST EMULATORS (mkfs.lustre, tunefs.lustre, mount.lustre, lctl, lnetctl), run as
subprocesses and read through the collection's own parsers, so they cannot drift from the real formats.

Mounts are recorded, not made (CLUSTERFORGE_EMU_LUSTRE_DRY_MOUNT=1); LNet uses the loopback interface.
"""

import os
import subprocess
import sys

import pytest

from conftest import EMULATORS

from ansible_collections.clusterforge.gpu.plugins.module_utils import lustre as L

TOOLS = ["mkfs.lustre", "tunefs.lustre", "mount.lustre", "lctl", "lnetctl", "blkid"]


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    e.update(CLUSTERFORGE_EMU_STATE_DIR=str(tmp_path / "state"), CLUSTERFORGE_EMU_LUSTRE_SHARED=str(tmp_path / "shared"),
             CLUSTERFORGE_EMU_LUSTRE_DRY_MOUNT="1")
    (tmp_path / "devs").mkdir()
    for name in ("mdt0", "ost0", "ost1", "blank"):
        with open(tmp_path / "devs" / name, "wb") as f:
            f.truncate(64 << 20)
    return e


def emu(tool, args, env):
    p = subprocess.run([sys.executable, os.path.join(EMULATORS, tool)] + [str(a) for a in args], env=env,
                       capture_output=True, text=True, timeout=60, check=False)
    return p.returncode, p.stdout, p.stderr


def nid(env):
    return emu("lctl", ["list_nids"], env)[1].split()[0]


@pytest.fixture
def lnet(env):
    assert emu("lnetctl", ["lnet", "configure"], env)[0] == 0
    assert emu("lnetctl", ["net", "add", "--net", "tcp0", "--if", "lo"], env)[0] == 0
    return env


@pytest.mark.parametrize("tool", TOOLS)
def test_emulators_say_they_are_emulators(tool):
    path = os.path.join(EMULATORS, tool)
    with open(path) as f:
        first, second = f.readline(), f.readline()
    assert first == "#!/usr/bin/env python3\n"
    assert second == ("# ClusterForge TEST EMULATOR of %s: not the real tool. Test-only; installed only into lab "
                      "and molecule containers.\n" % tool)
    assert os.access(path, os.X_OK)


def test_helper_says_it_is_emulator_code():
    with open(os.path.join(EMULATORS, "_cf_emu_lustre.py")) as f:
        assert f.readline().startswith("# ClusterForge TEST EMULATOR support code for mkfs.lustre")


def test_lnetctl_show_export_import(lnet, tmp_path):
    nets = L.parse_lnetctl_net_show(emu("lnetctl", ["net", "show"], lnet)[1])
    expected = {"nid": "127.0.0.1@tcp", "status": "up", "interfaces": ["lo"]}
    assert list(nets) == ["lo", "tcp"] and nets["tcp"][0] == expected
    rc, dummy, err = emu("lnetctl", ["net", "add", "--net", "tcp", "--if", "lo"], lnet)
    assert rc != 0 and "errno: -17" in err and "File exists" in err
    rc, dummy, err = emu("lnetctl", ["net", "add", "--net", "o2ib0", "--if", "ib-nosuch"], lnet)
    assert rc != 0 and "No such device" in err
    conf = tmp_path / "lnet.conf"
    assert emu("lnetctl", ["export", "--backup", conf], lnet)[0] == 0
    assert L.parse_lnetctl_net_show(conf.read_text()) == {"tcp": [{"nid": None, "status": None, "interfaces": ["lo"]}]}
    assert emu("lnetctl", ["lnet", "unconfigure"], lnet)[0] == 0
    assert emu("lnetctl", ["net", "show"], lnet)[0] != 0
    assert emu("lnetctl", ["lnet", "configure"], lnet)[0] == 0
    assert emu("lnetctl", ["import", conf], lnet)[0] == 0
    assert "tcp" in L.parse_lnetctl_net_show(emu("lnetctl", ["net", "show", "-v"], lnet)[1])


def test_mkfs_tunefs_identity_and_refusal(lnet, tmp_path):
    dev = tmp_path / "devs" / "ost0"
    args = ["--fsname=cflab", "--ost", "--index=3", "--mgsnode=10.0.0.1@tcp0",
            "--servicenode=10.0.0.5@tcp", "--servicenode=10.0.0.6@tcp", dev]
    rc, out, dummy = emu("mkfs.lustre", args, lnet)
    assert rc == 0 and "Writing CONFIGS/mountdata" in out
    made = L.parse_tunefs_dryrun(out)
    assert made["permanent"]["target"] == "cflab:OST0003" and made["permanent"]["first_time"] is True
    r = L.parse_tunefs_dryrun(emu("tunefs.lustre", ["--dryrun", dev], lnet)[1])
    assert r["found"] is True
    ldd = r["previous"]
    assert (ldd["fsname"], ldd["index"], ldd["types"]) == ("cflab", 3, ["OST"])
    assert ldd["params"] == ["mgsnode=10.0.0.1@tcp", "failover.node=10.0.0.5@tcp:10.0.0.6@tcp"]
    assert ldd["flags"] & 0x1000  # no_primnode with --servicenode
    before = dev.read_bytes()
    rc, dummy, err = emu("mkfs.lustre", ["--fsname=cflab", "--ost", "--index=3", "--mgsnode=10.0.0.1@tcp", dev], lnet)
    assert rc == 17 and "was previously formatted for lustre. Use --reformat" in err
    assert dev.read_bytes() == before
    log = (tmp_path / "state" / "mkfs.lustre.log").read_text().splitlines()
    assert len(log) == 1 and str(dev) in log[0]


def test_tunefs_on_blank_and_missing(env, tmp_path):
    rc, out, err = emu("tunefs.lustre", ["--dryrun", tmp_path / "devs" / "blank"], env)
    assert rc == 19 and "has not been formatted with mkfs.lustre" in err
    assert L.parse_tunefs_dryrun(out)["found"] is False
    assert emu("tunefs.lustre", ["--dryrun", tmp_path / "nosuch"], env)[0] != 0


def test_mkfs_argument_checks(env, tmp_path):
    dev = tmp_path / "devs" / "blank"
    assert emu("mkfs.lustre", ["--fsname=waytoolongname", "--ost", "--index=0", "--mgsnode=1.2.3.4@tcp", dev], env)[0] != 0
    assert emu("mkfs.lustre", ["--fsname=fs", "--ost", "--index=0", dev], env)[0] != 0  # no MGS
    assert emu("mkfs.lustre", ["--fsname=fs", "--ost", "--mdt", "--index=0", "--mgsnode=a@tcp", dev], env)[0] != 0
    rc, out, dummy = emu("mkfs.lustre", ["--dryrun", "--fsname=fs", "--mgs", "--mdt", "--index=0", dev], env)
    assert rc == 0 and "exiting before disk write." in out
    assert L.parse_tunefs_dryrun(out)["permanent"]["types"] == ["MGS", "MDT"]
    assert emu("tunefs.lustre", ["--dryrun", dev], env)[0] == 19  # dry run wrote nothing


def _format_fs(env, tmp_path):
    devs = tmp_path / "devs"
    mgs = nid(env)
    assert emu("mkfs.lustre", ["-q", "--fsname=cflab", "--mgs", "--mdt", "--index=0", devs / "mdt0"], env)[0] == 0
    for i in (0, 1):
        assert emu("mkfs.lustre", ["-q", "--fsname=cflab", "--ost", "--index=%d" % i, "--mgsnode=" + mgs,
                                   devs / ("ost%d" % i)], env)[0] == 0
    return mgs


def test_server_mount_order_params_and_client(lnet, tmp_path):
    devs = tmp_path / "devs"
    mgs = _format_fs(lnet, tmp_path)
    rc, dummy, err = emu("mount.lustre", [devs / "ost0", "/mnt/t/ost0"], lnet)
    assert rc != 0 and "Is the MGS running?" in err  # OST before MGS: refused
    assert emu("mount.lustre", [devs / "mdt0", "/mnt/t/mdt0", "-o", "rw,_netdev"], lnet)[0] == 0
    assert emu("mount.lustre", [devs / "ost0", "/mnt/t/ost0"], lnet)[0] == 0
    assert emu("mount.lustre", [devs / "ost1", "/mnt/t/ost1"], lnet)[0] == 0
    rc, dummy, err = emu("mount.lustre", [devs / "ost1", "/mnt/t/ost1b"], lnet)
    assert rc != 0 and "already running" in err
    ldd = L.parse_tunefs_dryrun(emu("tunefs.lustre", ["--dryrun", devs / "ost1"], lnet)[1])["previous"]
    assert ldd["target"] == "cflab-OST0001" and ldd["first_time"] is False
    dl = L.parse_lctl_dl(emu("lctl", ["dl"], lnet)[1])
    up = {(d["type"], d["name"]) for d in dl if d["status"] == "UP"}
    assert {("mgs", "MGS"), ("mdt", "cflab-MDT0000"), ("obdfilter", "cflab-OST0000"),
            ("obdfilter", "cflab-OST0001")} <= up
    # persistent parameters: llog records, applied to this node
    assert emu("lctl", ["--device", "MGS", "llog_print", "params"], lnet)[1] == ""
    assert emu("lctl", ["set_param", "-P", "obdfilter.*.brw_size=16"], lnet)[0] == 0
    assert emu("lctl", ["set_param", "-P", "osc.*.max_rpcs_in_flight=32"], lnet)[0] == 0
    llog = L.parse_llog_params(emu("lctl", ["--device", "MGS", "llog_print", "params"], lnet)[1])
    assert llog["params"] == {"obdfilter.*.brw_size": "16", "osc.*.max_rpcs_in_flight": "32"}
    assert [r["index"] for r in llog["records"]] == [2, 3]
    assert emu("lctl", ["get_param", "-n", "obdfilter.cflab-OST*.brw_size"], lnet)[1].split() == ["16", "16"]
    # client: MGS NID must match, file system must exist
    rc, dummy, err = emu("mount.lustre", ["10.9.9.9@tcp:/cflab", "/mnt/cflab"], lnet)
    assert rc != 0 and "Is the MGS running?" in err
    rc, dummy, err = emu("mount.lustre", [mgs + ":/nofs", "/mnt/nofs"], lnet)
    assert rc != 0 and "Is the filesystem name correct?" in err
    assert emu("mount.lustre", [mgs.replace("@tcp", "@tcp0") + ":/cflab", "/mnt/cflab", "-o", "flock"], lnet)[0] == 0
    assert (tmp_path / "shared" / "cflab").is_dir()
    rc, out, dummy = emu("lctl", ["get_param", "osc.*.max_rpcs_in_flight"], lnet)
    lines = out.split()
    assert rc == 0 and len(lines) == 2 and all(x.startswith("osc.cflab-OST000") and x.endswith("=32") for x in lines)
    got = L.parse_lctl_get_param(out)  # what clusterforge.gpu.lctl_param reads
    assert [g["value"] for g in got] == ["32", "32"] and got[0]["path"].startswith("osc.cflab-OST0000-osc-")
    assert emu("lctl", ["get_param", "-n", "osc.*.max_pages_per_rpc"], lnet)[1].split() == ["1024", "1024"]
    rc, out, dummy = emu("lctl", ["set_param", "osc.*.max_pages_per_rpc=16M"], lnet)
    assert rc == 0 and out.count("=4096") == 2
    assert emu("lctl", ["get_param", "-n", "osc.cflab-OST*.max_pages_per_rpc"], lnet)[1].split() == ["4096", "4096"]
    assert emu("lctl", ["get_param", "-n", "llite.*.max_read_ahead_mb"], lnet)[1].split() == ["64"]
    rc, dummy, err = emu("lctl", ["get_param", "-n", "osc.*.no_such_param"], lnet)
    assert rc != 0 and "No such file or directory" in err
    assert emu("lctl", ["get_param", "-n", "health_check"], lnet)[1].strip() == "healthy"


def test_set_param_persistent_needs_mgs(lnet):
    rc, dummy, err = emu("lctl", ["set_param", "-P", "osc.*.max_dirty_mb=512"], lnet)
    assert rc != 0 and "MGS" in err
    assert emu("lctl", ["--device", "MGS", "llog_print", "params"], lnet)[0] != 0


def test_mount_refuses_unformatted_and_lnet_down(env, tmp_path):
    rc, dummy, err = emu("mount.lustre", [tmp_path / "devs" / "blank", "/mnt/x"], env)
    assert rc != 0 and "has not been formatted with mkfs.lustre" in err
    assert emu("mkfs.lustre", ["-q", "--fsname=fs", "--mgs", "--mdt", "--index=0", tmp_path / "devs" / "mdt0"], env)[0] == 0
    rc, dummy, err = emu("mount.lustre", [tmp_path / "devs" / "mdt0", "/mnt/x"], env)
    assert rc != 0 and "Network is down" in err


def test_unreadable_device_switch(env, tmp_path):
    """A device listed in unreadable-devices: tunefs.lustre says what the real one says (its debugfs probe filters
    the I/O error away: "not found", as for a blank disk), blkid what util-linux prints when open() gets EIO, and
    mkfs.lustre fails without writing or logging a format. Other devices are not affected."""
    dev = tmp_path / "devs" / "blank"
    (tmp_path / "state").mkdir(exist_ok=True)
    (tmp_path / "state" / "unreadable-devices").write_text("%s\n" % dev)
    rc, out, err = emu("tunefs.lustre", ["--dryrun", dev], env)
    assert (rc, out, err) == (19, "checking for existing Lustre data: not found\n",
                              "\ntunefs.lustre FATAL: Device %s has not been formatted with mkfs.lustre\n"
                              "tunefs.lustre: exiting with 19 (No such device)\n" % dev)
    assert L.tunefs_says_not_lustre(rc, out, err)  # the module cannot tell it from blank by tunefs alone
    rc, out, err = emu("blkid", ["-p", "-o", "export", dev], env)
    assert (rc, out, err) == (2, "", "blkid: error: %s: Input/output error\n" % dev)
    assert not L.blkid_says_nothing(rc, out, err)
    rc, dummy, err = emu("mkfs.lustre", ["--fsname=fs", "--mgs", "--mdt", "--index=0", dev], env)
    assert rc == 5 and "Input/output error" in err
    assert not (tmp_path / "state" / "mkfs.lustre.log").exists()
    assert emu("tunefs.lustre", ["--dryrun", tmp_path / "devs" / "ost0"], env)[0] == 19  # not listed: blank


@pytest.mark.skipif(not any(os.access(p, os.X_OK) for p in ("/usr/sbin/blkid", "/sbin/blkid")),
                    reason="util-linux blkid is not installed here")
def test_blkid_hands_other_devices_to_the_real_blkid(env, tmp_path):
    rc, out, err = emu("blkid", ["-p", "-o", "export", tmp_path / "devs" / "ost0"], env)
    assert (rc, out, err) == (2, "", "")  # a zero-filled file: no signature
