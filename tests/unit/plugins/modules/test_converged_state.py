# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""converged_state: the fingerprint of a node's managed state, its record, and what differs from it."""

import json
import os

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import converged_state

# systemctl list-units --all --plain --no-legend --no-pager --type=service,socket,timer,path (systemd 252, Debian 12
# lab container): loaded units, not-found ones, and inactive ones.
LIST_UNITS = """auditd.service                          not-found inactive dead      auditd.service
chrony.service                          loaded    active   running   chrony, an NTP client/server
clusterforge-gpu-tuning.service         loaded    active   exited    ClusterForge: re-apply GPU persistence, clocks and power limits
clusterforge-lustre-client-tune.service loaded    inactive dead      ClusterForge Lustre client tunings
munge.service                           loaded    active   running   MUNGE authentication service
nvidia-persistenced.service             loaded    failed   failed    NVIDIA Persistence Daemon
run-r0b5c0e0c.service                   loaded    active   running   /usr/bin/true
systemd-journald.socket                 loaded    active   running   Journal Socket
"""
# systemctl list-unit-files --no-legend --no-pager (same container).
LIST_UNIT_FILES = """proc-sys-fs-binfmt_misc.automount       static          -
mnt-cflab.mount                         generated       -
chrony.service                          enabled         enabled
munge.service                           enabled         enabled
slurmd.service                          enabled         enabled
run-r0b5c0e0c.service                   transient       -
"""
GPUS = "0, GPU-b1e053f1-6789-f495-7e49-37a1e102685c, 00000000:18:00.0, Enabled, 700.00, 700.00, 1980, 2619, 550.90.07\n"
UNIT = """[Service]
Type=oneshot
ExecStart=lctl set_param osc.*.max_pages_per_rpc=4096
ExecStart=/usr/sbin/lctl set_param osc.*.max_rpcs_in_flight=32 llite.*.max_read_ahead_mb=1024
ExecStartPost=/bin/true
"""


class Node(object):
    """The tools of one node, with state the tests change."""

    def __init__(self):
        self.units = LIST_UNITS
        self.gpus = GPUS
        self.tool = Tool(self.answer, missing=("ibstat",))

    def answer(self, argv, data):
        if "list-units" in argv:
            return 0, self.units, ""
        if "list-unit-files" in argv:
            return 0, LIST_UNIT_FILES, ""
        if argv[0].endswith("nvidia-smi"):
            return 0, self.gpus, ""
        if argv[0].endswith("lctl"):
            return 0, "".join("%s=1\n" % a for a in argv[2:]), ""
        raise AssertionError("unexpected command: %r" % (argv,))


def args(tmp_path, **extra):
    etc = tmp_path / "etc"
    etc.mkdir(exist_ok=True)
    a = {"path": str(tmp_path / "record.json"), "inputs_digest": "d1", "file_roots": [str(etc)], "exclude": [],
         "commands": [{"name": "gpus", "argv": ["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"]},
                      {"name": "hca ports", "argv": ["ibstat"]}]}
    a.update(extra)
    return a


def test_parsers_keep_what_configuration_decides():
    units = converged_state.parse_list_units(LIST_UNITS)
    assert units == {"chrony.service": "active/running", "clusterforge-gpu-tuning.service": "active/exited",
                     "munge.service": "active/running", "nvidia-persistenced.service": "failed/failed",
                     "systemd-journald.socket": "active/running"}
    files = converged_state.parse_list_unit_files(LIST_UNIT_FILES)
    assert "mnt-cflab.mount" not in files and "run-r0b5c0e0c.service" not in files
    assert files["slurmd.service"] == "enabled"
    assert converged_state.lctl_params(UNIT) == ["osc.*.max_pages_per_rpc", "osc.*.max_rpcs_in_flight",
                                                 "llite.*.max_read_ahead_mb"]
    mounts = converged_state.parse_mounts("proc /proc proc rw 0 0\n10.78.0.31@tcp:/cflab /mnt/cflab lustre rw,flock 0 0\n"
                                          "tmpfs /run/lock tmpfs rw 0 0\n")
    assert mounts == {"/mnt/cflab": "10.78.0.31@tcp:/cflab lustre rw,flock"}
    status = converged_state.parse_dpkg_status("Package: munge\nStatus: install ok installed\nArchitecture: amd64\n"
                                               "Version: 0.5.15-2\n\nPackage: tzdata\nStatus: deinstall ok config-files\n"
                                               "Architecture: all\nVersion: 2024a-0+deb12u1\n")
    assert status == {"munge:amd64": "0.5.15-2 install ok installed", "tzdata": "2024a-0+deb12u1 deinstall ok config-files"}


def test_sysctl_keys_come_from_the_files(tmp_path):
    conf = tmp_path / "90-clusterforge.conf"
    conf.write_text("# comment\nnet.core.rmem_max = 268435456\n-vm.zone_reclaim_mode=0\n; other\n")
    assert converged_state.sysctl_keys([str(conf), str(tmp_path / "missing")]) == ["net.core.rmem_max", "vm.zone_reclaim_mode"]


def test_no_record_then_record_then_converged(tmp_path):
    node = Node()
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "nccl.conf").write_text("NCCL_IB_HCA=mlx5_0\n")
    r = run_module(converged_state, args(tmp_path), node.tool)
    assert r["converged"] is False and r["differences"] == ["no record of a complete run"] and not r["changed"]
    assert not os.path.exists(str(tmp_path / "record.json"))
    # With nothing to compare with, the node is not read: no tool runs (a first, cold run pays no fingerprint).
    assert node.tool.calls == [] and r["parts"] == {}
    r = run_module(converged_state, args(tmp_path, state="present"), node.tool)
    assert r["changed"] is True and r["converged"] is True
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["inputs_digest"] == "d1"
    assert record["parts"]["command hca ports"] == {"output": "absent"}
    assert str(tmp_path / "etc" / "nccl.conf") in record["parts"]["files"]
    assert oct(os.stat(str(tmp_path / "record.json")).st_mode & 0o777) == "0o600"
    r = run_module(converged_state, args(tmp_path), node.tool)
    assert r["converged"] is True and r["differences"] == [] and r["record_exists"] is True
    # Writing the same state again changes nothing.
    r = run_module(converged_state, args(tmp_path, state="present"), node.tool)
    assert r["changed"] is False


def test_each_kind_of_drift_is_named(tmp_path):
    node = Node()
    (tmp_path / "etc").mkdir()
    nccl = tmp_path / "etc" / "nccl.conf"
    nccl.write_text("NCCL_IB_HCA=mlx5_0\n")
    run_module(converged_state, args(tmp_path, state="present"), node.tool)

    nccl.write_text("NCCL_IB_HCA=mlx5_0\nNCCL_DEBUG=TRACE\n")
    r = run_module(converged_state, args(tmp_path), node.tool)
    assert r["converged"] is False and r["differences"] == ["files: %s changed" % nccl]
    nccl.write_text("NCCL_IB_HCA=mlx5_0\n")
    os.chmod(str(nccl), 0o600)
    assert run_module(converged_state, args(tmp_path), node.tool)["differences"] == ["files: %s changed" % nccl]
    os.chmod(str(nccl), 0o644)
    (tmp_path / "etc" / "new.conf").write_text("x")
    assert run_module(converged_state, args(tmp_path), node.tool)["differences"] == [
        "files: %s added" % (tmp_path / "etc" / "new.conf")]
    os.remove(str(tmp_path / "etc" / "new.conf"))
    assert run_module(converged_state, args(tmp_path), node.tool)["converged"] is True

    node.gpus = GPUS.replace("Enabled", "Disabled")
    assert run_module(converged_state, args(tmp_path), node.tool)["differences"] == ["command gpus: output changed"]
    node.gpus = GPUS

    node.units = LIST_UNITS.replace("munge.service                           loaded    active   running",
                                    "munge.service                           loaded    inactive dead   ")
    assert run_module(converged_state, args(tmp_path), node.tool)["differences"] == ["units: state munge.service removed"]
    node.units = LIST_UNITS

    r = run_module(converged_state, args(tmp_path, inputs_digest="d2"), node.tool)
    assert r["differences"] == ["inputs: the collection, inventory, extra variables or facts changed"]
    assert run_module(converged_state, args(tmp_path), node.tool)["converged"] is True


def test_lustre_tunings_are_read_from_the_boot_unit(tmp_path):
    node = Node()
    unit = tmp_path / "tune.service"
    unit.write_text(UNIT)
    r = run_module(converged_state, args(tmp_path, state="present", lctl_params_unit=str(unit)), node.tool)
    assert "lustre tunings" in r["parts"]
    lctl = [c for c in node.tool.calls if c[0].endswith("lctl")]
    assert lctl == [["/usr/bin/lctl", "get_param", "osc.*.max_pages_per_rpc", "osc.*.max_rpcs_in_flight",
                     "llite.*.max_read_ahead_mb"]]


def test_check_mode_and_absent(tmp_path):
    node = Node()
    r = run_module(converged_state, args(tmp_path, state="present"), node.tool, check_mode=True, diff=True)
    assert r["changed"] is True and "diff" in r
    assert not os.path.exists(str(tmp_path / "record.json"))
    run_module(converged_state, args(tmp_path, state="present"), node.tool)
    r = run_module(converged_state, {"path": str(tmp_path / "record.json"), "state": "absent"}, node.tool, check_mode=True)
    assert r["changed"] is True and os.path.exists(str(tmp_path / "record.json"))
    r = run_module(converged_state, {"path": str(tmp_path / "record.json"), "state": "absent"}, node.tool)
    assert r["changed"] is True and not os.path.exists(str(tmp_path / "record.json"))
    r = run_module(converged_state, {"path": str(tmp_path / "record.json"), "state": "absent"}, node.tool)
    assert r["changed"] is False


def test_a_record_of_another_version_or_unreadable_is_not_converged(tmp_path):
    node = Node()
    run_module(converged_state, args(tmp_path, state="present"), node.tool)
    record = json.loads((tmp_path / "record.json").read_text())
    record["version"] = 0
    (tmp_path / "record.json").write_text(json.dumps(record))
    calls = len(node.tool.calls)
    r = run_module(converged_state, args(tmp_path), node.tool)
    assert r["converged"] is False and r["differences"] == ["record version 0, not 1"]
    assert len(node.tool.calls) == calls
    (tmp_path / "record.json").write_text("{not json")
    r = run_module(converged_state, args(tmp_path), node.tool)
    assert r["converged"] is False and r["differences"] == ["no record of a complete run"]


def test_bad_input_is_rejected_before_anything_runs(tmp_path):
    node = Node()
    r = run_module(converged_state, args(tmp_path, commands=[{"name": "x", "argv": ["lspci"], "keep": "("}]), node.tool)
    assert r["failed"] and "keep is not a valid regular expression" in r["msg"]
    r = run_module(converged_state, {"path": str(tmp_path / "r.json")}, node.tool)
    assert r["failed"] and "inputs_digest" in r["msg"]
    assert node.tool.calls == []


def test_a_tool_given_by_a_path_that_does_not_exist_is_absent(tmp_path):
    node = Node()
    r = run_module(converged_state, args(tmp_path, state="present",
                                         commands=[{"name": "qos", "argv": [str(tmp_path / "no-such-tool"), "-i", "x"]}]),
                   node.tool)
    assert json.loads((tmp_path / "record.json").read_text())["parts"]["command qos"] == {"output": "absent"}
    assert not [c for c in node.tool.calls if "no-such-tool" in c[0]] and not r.get("failed")


def test_stat_paths_count_their_mode_and_owner_not_their_content_and_a_file_can_be_a_root(tmp_path):
    node = Node()
    spool = tmp_path / "spool"
    spool.mkdir()
    os.chmod(str(spool), 0o755)
    topo = tmp_path / "topo.xml"
    topo.write_text("<system/>\n")
    a = args(tmp_path, state="present", stat_paths=[str(spool), str(tmp_path / "not-yet")],
             file_roots=[str(tmp_path / "etc"), str(topo)])
    run_module(converged_state, a, node.tool)
    record = json.loads((tmp_path / "record.json").read_text())
    assert record["parts"]["paths"][str(tmp_path / "not-yet")] == "absent"
    assert str(topo) in record["parts"]["files"]
    a["state"] = "query"
    (spool / "job.42").write_text("work")   # work, not configuration
    assert run_module(converged_state, a, node.tool)["converged"] is True
    os.chmod(str(spool), 0o700)
    assert run_module(converged_state, a, node.tool)["differences"] == ["paths: %s changed" % spool]
    os.chmod(str(spool), 0o755)
    topo.write_text("<system version='2'/>\n")
    assert run_module(converged_state, a, node.tool)["differences"] == ["files: %s changed" % topo]
