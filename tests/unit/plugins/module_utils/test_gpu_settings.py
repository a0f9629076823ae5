"""The GPU settings contract (plugins/module_utils/gpu_settings.py): one reader of a request, one selection, one
record, one judgement.

The agreement test drives an emulated node end to end with a partial gpu_tuning_gpus: the nvidia_smi module applies
and records, the boot program restores the record after a reboot with the module's own arguments, and the rolling
gate's filter and the validation judge give the same verdict on the same GPUs, before and after a drift.
"""

import os
import subprocess
import sys

import pytest

from cf_module_helper import Tool, run_module
from conftest import EMULATORS

from ansible_collections.clusterforge.gpu.plugins.filter.gpu_settings import gpu_settings_failures, gpu_tuning_settings
from ansible_collections.clusterforge.gpu.plugins.module_utils import gpu_settings as gs
from ansible_collections.clusterforge.gpu.plugins.modules import nvidia_smi as nvidia_smi_module
from ansible_collections.clusterforge.gpu.plugins.modules import nvidia_smi_info as nvidia_smi_info_module
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.validation_judge import validation_judge

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
BOOT_PROGRAM = os.path.join(ROOT, "roles", "gpu_tuning", "files", "clusterforge-gpu-tuning-apply")
LOCK = {"min": 1980, "max": 1980, "requested_min": 1980, "requested_max": 1980}


def live(**values):
    gpu = {"index": 0, "uuid": "GPU-0", "pci_bus_id": "00000000:18:00.0", "persistence_mode": True,
           "power_limit_w": 700.0, "enforced_power_limit_w": 700.0, "sm_clock_mhz": 1980, "mem_clock_mhz": 2619,
           "applications_mem_clock_mhz": 2619, "applications_graphics_clock_mhz": 1980,
           "default_applications_mem_clock_mhz": 2619, "default_applications_graphics_clock_mhz": 1980,
           "clock_event_reasons": {}}
    gpu.update(values)
    return gpu


def verdicts(findings):
    return dict((f["check"], f["status"]) for f in findings)


# ------------------------------------------------------------------------------------------------ requests

@pytest.mark.parametrize("option,value,want", [
    ("persistence_mode", "yes", True), ("persistence_mode", False, False),
    ("power_limit_watts", "500", 500), ("power_limit_watts", 500.0, 500),
    ("locked_gpu_clocks", "reset", "reset"), ("locked_gpu_clocks", {"min": "1500", "max": 1980}, {"min": 1500, "max": 1980}),
    ("application_clocks", {"memory": 2619, "graphics": 1980}, {"memory": 2619, "graphics": 1980}),
    ("locked_memory_clocks", None, None),
])
def test_a_request_is_read_one_way(option, value, want):
    assert gs.parse_setting(option, value) == (want, None)


@pytest.mark.parametrize("option,value,problem", [
    ("persistence_mode", "sometimes", "persistence_mode: must be a boolean, got string 'sometimes'"),
    ("power_limit_watts", 0, "power_limit_watts: must be a positive number of watts, got 0"),
    ("power_limit_watts", 500.5, "power_limit_watts: must be a whole number of watts per GPU (or null for no cap), "
                                 "got number 500.5"),
    ("locked_gpu_clocks", {"min": 1980, "max": 1500}, "locked_gpu_clocks: min (1980 MHz) must not be greater than "
                                                      "max (1500 MHz)"),
    ("locked_gpu_clocks", "Reset", "locked_gpu_clocks: write reset in lower case (the role compares it exactly), "
                                   "got 'Reset'"),
    ("application_clocks", {"min": 1, "max": 2}, "application_clocks: takes exactly the keys memory and graphics "
                                                 "(missing: memory, graphics; unknown: max, min)"),
])
def test_a_bad_request_names_the_setting(option, value, problem):
    assert gs.parse_setting(option, value) == (None, problem)
    assert gs.requested({option: value}, gs.ROLE_NAMES)[1] == [problem.replace(option, gs.ROLE_NAMES[option], 1)]


def test_role_settings_reads_the_gpu_tuning_variables_once():
    settings = gs.role_settings({"gpu_tuning_gpus": ["0"], "gpu_tuning_power_limit_watts": 500, "other": 1})
    assert settings == {"gpus": ["0"], "persistence_mode": None, "power_limit_watts": 500, "application_clocks": None,
                        "locked_gpu_clocks": None, "locked_memory_clocks": None, "state_file": gs.STATE_FILE}
    assert gpu_tuning_settings({"gpu_tuning_state_file": "/x.json"})["state_file"] == "/x.json"


# ------------------------------------------------------------------------------------------------ judgement

def test_a_gpu_that_holds_its_record_passes():
    wanted = {"persistence_mode": True, "power_limit_watts": 700, "locked_gpu_clocks": {"min": 1980, "max": 1980}}
    record = {"persistence_mode": True, "power_limit_watts": 700, "locked_gpu_clocks": LOCK}
    assert verdicts(gs.judge_gpu(wanted, record, live())) == {"persistence": "pass", "power_limit": "pass",
                                                              "clocks": "pass"}


def test_without_a_record_the_live_value_alone_does_not_pass():
    """Right now, but nothing of ours applied it: the boot program would not restore it after a reboot."""
    findings = gs.judge_gpu({"power_limit_watts": 700}, None, live())
    assert verdicts(findings) == {"power_limit": "fail"}
    assert findings[0]["message"].startswith("power limit not recorded as applied (the state file has no record")


def test_a_record_of_another_request_fails_naming_both():
    findings = gs.judge_gpu({"power_limit_watts": 500}, {"power_limit_watts": 700}, live(power_limit_w=500.0))
    assert findings[0]["status"] == "fail"
    assert findings[0]["message"] == ("power limit recorded as applied is 700 W, the inventory asks 500 W (gpu_tuning "
                                      "has not applied the inventory's value)")


@pytest.mark.parametrize("power,enforced,status", [(699.5, 699.5, "pass"), (698.0, 698.0, "fail"),
                                                   (700.0, 650.0, "fail")])
def test_power_has_one_tolerance_and_sees_another_limiter(power, enforced, status):
    findings = gs.judge_gpu({"power_limit_watts": 700}, {"power_limit_watts": 700},
                            live(power_limit_w=power, enforced_power_limit_w=enforced))
    assert findings[0]["status"] == status, findings


def test_a_lock_is_judged_against_the_range_the_driver_clamped_it_to():
    """Asked 1980-2100, clamped to 1980-1980: a clock at 2050 is outside what the driver holds."""
    wanted = {"locked_gpu_clocks": {"min": 1980, "max": 2100}}
    record = {"locked_gpu_clocks": {"min": 1980, "max": 1980, "requested_min": 1980, "requested_max": 2100}}
    assert verdicts(gs.judge_gpu(wanted, record, live(sm_clock_mhz=1995))) == {"clocks": "pass"}
    finding = gs.judge_gpu(wanted, record, live(sm_clock_mhz=2050,
                                                clock_event_reasons={"gpu_idle": True, "sw_power_cap": True}))[0]
    assert finding["status"] == "fail" and finding["expected"] == 1980
    assert finding["message"] == ("SM clock 2050 MHz, expected locked at 1980 MHz (+/- 15 MHz): clocks not locked or "
                                  "held down (active clock event reasons: sw_power_cap)")


def test_reset_and_memory_locks_and_application_clocks():
    wanted = {"locked_gpu_clocks": "reset", "locked_memory_clocks": {"min": 2619, "max": 2619},
              "application_clocks": "reset"}
    record = {"locked_gpu_clocks": None, "application_clocks": None,
              "locked_memory_clocks": {"min": 2619, "max": 2619, "requested_min": 2619, "requested_max": 2619}}
    assert verdicts(gs.judge_gpu(wanted, record, live())) == {"clocks": "pass"}
    finding = gs.judge_gpu(wanted, record, live(applications_graphics_clock_mhz=1755, mem_clock_mhz=1593))[0]
    assert finding["status"] == "fail"
    assert "memory clock 1593 MHz, expected locked at 2619 MHz" in finding["message"]
    assert "application clocks memory 2619 MHz, graphics 1755 MHz, expected the default application clocks" in (
        finding["message"])
    finding = gs.judge_gpu(wanted, dict(record, locked_gpu_clocks=LOCK), live())[0]
    assert finding["message"] == ("SM clock lock recorded as applied is 1980 MHz, the inventory asks the driver's "
                                  "default (reset) (gpu_tuning has not applied the inventory's value)")


def test_judge_node_leaves_the_gpus_the_selection_does_not_name():
    info = {"gpus": [live(index=0, uuid="GPU-0", applied={"power_limit_watts": 500}, power_limit_w=500.0),
                     live(index=1, uuid="GPU-1", applied=None, power_limit_w=700.0)]}
    findings, problems = gs.judge_node({"gpus": ["0"], "power_limit_watts": 500}, info)
    assert problems == []
    assert [(f["gpu"]["index"], f["status"]) for f in findings] == [(0, "pass"), (1, "skip")]
    assert findings[1]["message"] == "not managed: gpu_tuning_gpus names 0"
    assert gs.judge_node({"gpus": "0", "power_limit_watts": 500}, info)[1] == [
        "gpu_tuning_gpus: must be a list of GPU indexes, UUIDs or PCI bus ids, or null"]


def test_an_unreadable_state_file_is_named_in_every_finding(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("{not json")
    records, problem = gs.read_records(str(path))
    assert records == {} and problem.startswith("%s cannot be read: " % path)
    findings, _problems = gs.judge_node({"power_limit_watts": 700},
                                        {"gpus": [live()], "state_file_problem": problem})
    assert findings[0]["message"].startswith("power limit not recorded as applied (%s cannot be read" % path)


# ------------------------------------------------------------------------------------------------ agreement

class EmulatedNode(object):
    """One GPU node of the nvidia-smi emulator: its hardware and its volatile settings (lost at a reboot)."""

    def __init__(self, root):
        self.root = root
        self.env = {"CLUSTERFORGE_EMU_STATE_DIR": str(root / "state"), "CLUSTERFORGE_EMU_RUN_DIR": str(root / "run"),
                    "LC_ALL": "C"}
        self.state_file = str(root / "nvidia_smi_state.json")
        self.smi = root / "nvidia-smi"
        self.smi.write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (sys.executable, os.path.join(EMULATORS, "nvidia-smi")))
        self.smi.chmod(0o755)

    def run(self, *args):
        env = dict((k, v) for k, v in os.environ.items() if not k.startswith(("CLUSTERFORGE_EMU_", "SLURM_")))
        env.update(self.env)
        proc = subprocess.run([str(self.smi)] + [str(a) for a in args], env=env, capture_output=True, text=True,
                              timeout=120, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    def module(self, module, args):
        return run_module(module, args, Tool(lambda argv, data: self.run(*argv[1:])))

    def reboot(self):
        os.remove(str(self.root / "run" / "nvidia-smi.json"))


SETTINGS = {"gpus": ["0", "3"], "persistence_mode": True, "power_limit_watts": 500,
            "locked_gpu_clocks": {"min": 1755, "max": 1980}, "application_clocks": {"memory": 2619, "graphics": 1755},
            "locked_memory_clocks": None, "state_file": None}


def gate_and_judge(node, settings):
    """What the rolling gate and validation say of the node: (the gate's failures, the judge's GPU checks that are not
    a pass, as (check id, GPU index, status))."""
    info = node.module(nvidia_smi_info_module, {"state_file": node.state_file, "topology": False})
    failures = gpu_settings_failures(info, settings)
    report = validation_judge({"nodes": {"gpu01": {"nvidia_smi_info": info,
                                                   "expected": {"gpu_count": 8, "gpu_settings": settings}}}})
    index = dict((g["uuid"], g["index"]) for g in info["gpus"])
    judged = sorted((c["id"], int(index[c["subject"].rsplit(", ", 1)[1].rstrip(")")]), c["status"])
                    for c in report["checks"] if c["id"] in ("gpu.persistence", "gpu.power_limit", "gpu.clocks")
                    and c["status"] != "pass")
    return failures, judged, report


def test_module_boot_program_gate_and_judge_agree_on_a_partial_selection(tmp_path, monkeypatch):
    node = EmulatedNode(tmp_path)
    settings = dict(SETTINGS, state_file=node.state_file)
    wanted, problems = gs.requested(settings)
    assert problems == []
    args = dict((k, v) for k, v in wanted.items())
    args.update(gpus=settings["gpus"], state_file=node.state_file)

    # the module applies to GPUs 0 and 3 only, and records what the driver took
    result = node.module(nvidia_smi_module, args)
    assert not result.get("failed") and result["changed"] is True, result
    assert [g["index"] for g in result["gpus"]] == [0, 3]
    records, problem = gs.read_records(node.state_file)
    assert problem is None and len(records) == 2
    assert all(r["locked_gpu_clocks"] == {"min": 1755, "max": 1980, "requested_min": 1755, "requested_max": 1980}
               for r in records.values())

    # gate and judge: nothing fails; the six GPUs the selection leaves alone (700 W, unlocked) are not judged
    failures, judged, report = gate_and_judge(node, settings)
    assert failures == [] and report["ok"] is True, (failures, report["failures"])
    unmanaged = [1, 2, 4, 5, 6, 7]
    assert judged == sorted((cid, i, "skip") for cid in ("gpu.clocks", "gpu.persistence", "gpu.power_limit")
                            for i in unmanaged)

    # a converged second run of the module changes nothing: it sees what the judges see
    again = node.module(nvidia_smi_module, args)
    assert again["changed"] is False and again["cmd"] == [], again

    # a drift on GPU 3 (another tool lowered its limit): both fail exactly that GPU and setting
    assert node.run("-i", "3", "-pl", "450")[0] == 0
    failures, judged, report = gate_and_judge(node, settings)
    assert len(failures) == 1 and failures[0].startswith("GPU3 (00000000:5D:00.0, ")
    assert failures[0].endswith("power limit 450 W, expected 500 W (+/- 1 W)")
    assert [j for j in judged if j[2] == "fail"] == [("gpu.power_limit", 3, "fail")]
    assert report["failures"][0].endswith(failures[0].split("): ", 1)[1])

    # a reboot loses every volatile setting; the boot program restores the record with the module's own setters
    node.reboot()
    failures, judged, _report = gate_and_judge(node, settings)
    assert len(failures) == 6  # persistence, power and clocks on GPUs 0 and 3
    program_dir = tmp_path / "sbin"
    program_dir.mkdir()
    for src, name in ((BOOT_PROGRAM, "clusterforge-gpu-tuning-apply"),
                      (os.path.join(ROOT, "plugins", "module_utils", "gpu_settings.py"), "clusterforge_gpu_settings.py")):
        with open(src) as handle:
            (program_dir / name).write_text(handle.read())
    for key, value in node.env.items():
        monkeypatch.setenv(key, value)
    proc = subprocess.run([sys.executable, str(program_dir / "clusterforge-gpu-tuning-apply"), "--state-file",
                           node.state_file, "--nvidia-smi", str(node.smi)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    restored = [line[2:].split(" ", 3)[3].split() for line in proc.stdout.splitlines() if line.startswith("+ ")]
    record = records[sorted(records, key=lambda u: records[u]["index"])[0]]
    assert restored[:4] == gs.restore_args(record) == [gs.setter_args(o, v) for o, v in (
        ("persistence_mode", True), ("power_limit_watts", 500), ("application_clocks", wanted["application_clocks"]),
        ("locked_gpu_clocks", {"min": 1755, "max": 1980}))]
    failures, judged, report = gate_and_judge(node, settings)
    assert failures == [] and report["ok"] is True, (failures, report["failures"])
    assert [j for j in judged if j[2] == "fail"] == []


def test_a_record_of_a_shape_the_module_never_writes_fails_as_it_is():
    """The state file is read on the node and judged on the controller: a damaged record is named, never a crash."""
    findings = gs.judge_gpu({"locked_gpu_clocks": {"min": 1980, "max": 1980}, "power_limit_watts": 700},
                            {"locked_gpu_clocks": "reset", "power_limit_watts": "abc"}, live())
    assert [f["status"] for f in findings] == ["fail", "fail"]
    assert findings[0]["message"].startswith("power limit recorded as applied is 'abc', the inventory asks 700 W")
    assert findings[1]["message"].startswith("SM clock lock recorded as applied is 'reset', the inventory asks 1980 MHz")
