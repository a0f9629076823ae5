"""The lfs and dcgmi TEST EMULATORS, run as subprocesses and read through the collection's own parsers (and the
test-only ones of tests/formats/ for outputs no plugin reads), so the emulators cannot drift from the real formats;
plus lfs_stripe end to end against the lfs emulator."""

import os
import subprocess
import sys

import pytest

from conftest import EMULATORS
from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.module_utils import dcgm as D
from ansible_collections.clusterforge.gpu.plugins.module_utils import lustre as L
from ansible_collections.clusterforge.gpu.plugins.modules import lfs_stripe
from ansible_collections.clusterforge.gpu.tests.formats.dcgm import parse_discovery, parse_health
from ansible_collections.clusterforge.gpu.tests.formats.lustre import parse_getstripe_text, parse_lfs_df

LFS = os.path.join(EMULATORS, "lfs")
DCGMI = os.path.join(EMULATORS, "dcgmi")


@pytest.fixture
def env(tmp_path):
    e = dict(os.environ)
    e.update(CLUSTERFORGE_EMU_STATE_DIR=str(tmp_path / "state"), CLUSTERFORGE_EMU_RUN_DIR=str(tmp_path / "run"),
             CLUSTERFORGE_EMU_LFS_MOUNT=str(tmp_path / "lustre"))
    e.pop("CLUSTERFORGE_EMU_LFS_OSTS", None)
    e.pop("CLUSTERFORGE_EMU_DCGM_GPUS", None)
    (tmp_path / "lustre" / "data").mkdir(parents=True)
    return e


def emu(tool, args, env):
    p = subprocess.run([sys.executable, tool] + [str(a) for a in args], env=env, capture_output=True, text=True,
                       timeout=60, check=False)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("path", [LFS, DCGMI])
def test_emulators_say_they_are_emulators(path):
    with open(path) as f:
        first, second = f.readline(), f.readline()
    assert first == "#!/usr/bin/env python3\n"
    assert second.startswith("# ClusterForge TEST EMULATOR of %s: not the real tool." % os.path.basename(path))
    assert os.access(path, os.X_OK)


# ------------------------------------------------------------------------------------------------ lfs

def test_lfs_plain_roundtrip_yaml_and_text(env, tmp_path):
    d = tmp_path / "lustre" / "data"
    assert emu(LFS, ["getstripe", "-y", "-d", d], env)[1] == ""
    assert emu(LFS, ["setstripe", "-c", "-1", "-S", "4M", d], env)[0] == 0
    lay = L.parse_getstripe_yaml(emu(LFS, ["getstripe", "-y", "-d", d], env)[1])
    assert lay["components"][0]["stripe_count"] == -1 and lay["components"][0]["stripe_size"] == 4 << 20
    text = parse_getstripe_text(emu(LFS, ["getstripe", "-d", d], env)[1])
    assert text["components"] == lay["components"] and text["path"] == str(d)


def test_lfs_pfl_and_files_inherit_capped_count(env, tmp_path):
    d = tmp_path / "lustre" / "data"
    rc, _o, err = emu(LFS, ["setstripe", "-E", "256M", "-c", "1", "-E", "-1", "-c", "-1", "-S", "4M", "-p", "flash",
                            d], env)
    assert rc == 0, err
    lay = L.parse_getstripe_yaml(emu(LFS, ["getstripe", "-y", "-d", d], env)[1])
    assert [(c["extent_end"], c["stripe_count"], c["pool"]) for c in lay["components"]] == [
        (256 << 20, 1, None), (None, -1, "flash")]
    (d / "ckpt").write_text("x")
    for args, parse in ((["getstripe", d / "ckpt"], parse_getstripe_text),
                        (["getstripe", "-y", d / "ckpt"], L.parse_getstripe_yaml)):
        flay = parse(emu(LFS, args, env)[1])
        assert flay["components"][1]["stripe_count"] == 4  # -1 = all 4 OSTs of the profile


def test_lfs_ost_count_env(env, tmp_path):
    env["CLUSTERFORGE_EMU_LFS_OSTS"] = "8"
    df = parse_lfs_df(emu(LFS, ["df"], env)[1])
    assert [t["type"] for t in df["targets"]].count("OST") == 8 and df["targets"][0]["fsname"] == "cflab"
    assert df["filesystems"][str(tmp_path / "lustre")]["total"] == 8 * df["targets"][1]["total"]
    assert parse_lfs_df(emu(LFS, ["df", "-h"], env)[1])["unit"] == "bytes"
    assert parse_lfs_df(emu(LFS, ["df", "-i"], env)[1])["unit"] == "inodes"


def test_lfs_errors(env, tmp_path):
    d = tmp_path / "lustre" / "data"
    rc, _o, err = emu(LFS, ["setstripe", "-S", "100000", d], env)
    assert rc == 22 and "must be an even multiple of 65536 bytes" in err
    rc, _o, err = emu(LFS, ["setstripe", "-c", "2", tmp_path / "nope" / "x"], env)
    assert rc == 2 and "No such file or directory" in err
    rc, _o, err = emu(LFS, ["getstripe", "-d", tmp_path / "nope"], env)
    assert rc == 2 and "No such file or directory" in err
    rc, _o, err = emu(LFS, ["setstripe", "-E", "16G", "-c", "1", "-E", "1G", "-c", "2", d], env)
    assert rc == 22


def test_lfs_delete_default(env, tmp_path):
    d = tmp_path / "lustre" / "data"
    emu(LFS, ["setstripe", "-c", "2", d], env)
    assert emu(LFS, ["setstripe", "-d", d], env)[0] == 0
    assert L.parse_getstripe_yaml(emu(LFS, ["getstripe", "-y", "-d", d], env)[1])["components"] == []
    assert "has no stripe info" in emu(LFS, ["getstripe", "-d", d], env)[1]


def lfs_handler(env):
    def handler(argv, data):
        return emu(LFS, argv[1:], env)
    return handler


def test_lfs_stripe_end_to_end(env, tmp_path):
    d = str(tmp_path / "lustre" / "data")
    args = {"path": d, "components": [{"end": "256M", "stripe_count": 1}, {"end": "16G", "stripe_count": 4},
                                      {"end": "eof", "stripe_count": -1, "stripe_size": "4M"}]}
    tool = Tool(lfs_handler(env))
    first = run_module(lfs_stripe, args, tool)
    assert first["changed"] is True and "failed" not in first, first
    assert tool.count("setstripe") == 1 and tool.count("getstripe") == 2
    tool = Tool(lfs_handler(env))
    again = run_module(lfs_stripe, args, tool)
    assert again["changed"] is False and tool.count("setstripe") == 0
    tool = Tool(lfs_handler(env))
    gone = run_module(lfs_stripe, {"path": d, "state": "absent"}, tool)
    assert gone["changed"] is True and gone["layout"]["components"] == []
    assert ["/usr/bin/lfs", "setstripe", "-d", d] in tool.calls
    tool = Tool(lfs_handler(env))
    assert run_module(lfs_stripe, {"path": d, "state": "absent"}, tool)["changed"] is False


# ------------------------------------------------------------------------------------------------ dcgmi

def test_dcgmi_diag_pass_json_and_table(env):
    for level, count in ((1, 1), (2, 3), (3, 8), (4, 10)):
        rc, out, _e = emu(DCGMI, ["diag", "-r", level, "-j"], env)
        parsed = D.parse_diag_json(out)
        assert rc == 0 and parsed["result"] == "pass" and len(parsed["tests"]) == count
        assert sorted(D.gpu_results(parsed)) == list(range(8))
    rc, out, _e = emu(DCGMI, ["diag", "-r", "2"], env)
    table = D.parse_diag(out)
    assert table["complete"] and table["metadata"]["dcgm_version"] == "4.4.2"
    assert [t["name"] for t in table["tests"]] == ["software", "memory", "pcie"]


def test_dcgmi_fail_injection(env):
    assert emu(DCGMI, ["--emu-fail", "memory", "3"], env)[0] == 0
    rc, out, _e = emu(DCGMI, ["diag", "-r", "2", "-j"], env)
    assert rc == 226 and D.failing_tests(D.parse_diag_json(out)) == [("memory", [3])]
    rc, out, _e = emu(DCGMI, ["diag", "-r", "2"], env)
    table = D.parse_diag(out)
    assert D.failing_tests(table) == [("memory", [3])]
    assert "memory mismatch was detected on GPU 3" in table["tests"][1]["details"][0]["message"]
    rc, out, _e = emu(DCGMI, ["diag", "-r", "1", "-j"], env)  # memory is not part of level 1
    assert rc == 0
    rc, out, _e = emu(DCGMI, ["diag", "-r", "2", "-j", "-i", "0,1"], env)  # GPU 3 not selected
    assert rc == 0 and sorted(D.gpu_results(D.parse_diag_json(out))) == [0, 1]
    emu(DCGMI, ["--emu-reset"], env)
    assert emu(DCGMI, ["diag", "-r", "2", "-j"], env)[0] == 0


def test_dcgmi_bad_gpu_id(env):
    rc, out, _e = emu(DCGMI, ["diag", "-r", "1", "-j", "-i", "9"], env)
    parsed = D.parse_diag_json(out)
    assert rc != 0 and parsed["result"] == "fail" and "entities 9" in parsed["errors"][0]


def test_dcgmi_health_watches_and_injection(env, tmp_path):
    rc, out, _e = emu(DCGMI, ["health", "-c"], env)
    assert rc != 0 and parse_health(out)["errors"]
    assert emu(DCGMI, ["health", "-s", "a"], env)[0] == 0
    assert parse_health(emu(DCGMI, ["health", "-c", "-j"], env)[1])["overall"] == "healthy"
    emu(DCGMI, ["--emu-health", "2", "memory", "fail"], env)
    emu(DCGMI, ["--emu-health", "5", "power", "warn"], env)
    for args in (["health", "-c"], ["health", "-c", "-j"]):
        health = parse_health(emu(DCGMI, args, env)[1])
        assert health["overall"] == "failure"
        assert [(i["id"], i["system"], i["health"]) for i in health["incidents"]] == [
            (2, "Memory system", "failure"), (5, "Power system", "warning")]
        assert health["incidents"][0]["message"].startswith("Detected a volatile double-bit ECC error in GPU 2.")
    # a host-engine restart (the run dir is lost) forgets the watches but not the hardware fault
    import shutil
    shutil.rmtree(str(tmp_path / "run"))
    assert parse_health(emu(DCGMI, ["health", "-c"], env)[1])["overall"] is None
    emu(DCGMI, ["health", "-s", "p"], env)  # memory not watched: the ECC fault is not reported
    assert parse_health(emu(DCGMI, ["health", "-c"], env)[1])["overall"] == "healthy"


def test_dcgmi_discovery_and_version(env):
    disc = parse_discovery(emu(DCGMI, ["discovery", "-l"], env)[1])
    assert disc["gpu_count"] == 8 and len(disc["gpus"]) == 8
    assert disc["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3" and disc["nvswitch_count"] == 0
    assert len(set(g["uuid"] for g in disc["gpus"])) == 8
    env["CLUSTERFORGE_EMU_DCGM_GPUS"] = "4"
    assert parse_discovery(emu(DCGMI, ["discovery", "-l"], env)[1])["gpu_count"] == 4
    assert "Version : 4.4.2" in emu(DCGMI, ["-v"], env)[1]
