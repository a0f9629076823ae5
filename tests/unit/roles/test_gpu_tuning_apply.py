"""The gpu_tuning role's boot-time program re-applies the nvidia_smi module's state file."""

import importlib.machinery
import importlib.util
import json
import os
import stat

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROGRAM = os.path.join(ROOT, "roles", "gpu_tuning", "files", "clusterforge-gpu-tuning-apply")


def _load():
    loader = importlib.machinery.SourceFileLoader("cf_gpu_tuning_apply", PROGRAM)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


APPLY = _load()
UUID0 = "GPU-00000000-0000-0000-0000-000000000000"
UUID1 = "GPU-11111111-1111-1111-1111-111111111111"
STATE = {"version": 1, "gpus": {
    UUID1: {"index": 1, "pci_bus_id": "00000000:2A:00.0", "persistence_mode": True, "power_limit_watts": 500,
            "locked_gpu_clocks": None, "application_clocks": None},
    UUID0: {"index": 0, "pci_bus_id": "00000000:18:00.0", "persistence_mode": True, "power_limit_watts": 500,
            "locked_gpu_clocks": {"min": 1980, "max": 1980, "requested_min": 1980, "requested_max": 2100},
            "application_clocks": {"memory": 2619, "graphics": 1980}},
}}


def _fake_smi(tmp_path, uuids):
    log = tmp_path / "calls.log"
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho \"$*\" >> %s\ncase \"$*\" in --query-gpu=uuid*) printf '%s\\n';; esac\n"
                   % (log, "\\n".join(uuids)))
    smi.chmod(smi.stat().st_mode | stat.S_IXUSR)
    return smi, log


def test_order_persistence_then_clocks_then_power_and_requested_lock_values():
    cmds = APPLY.commands_for(UUID0, STATE["gpus"][UUID0], "nvidia-smi")
    assert [c[3:] for c in cmds] == [["-pm", "1"], ["-lgc", "1980,2100"], ["-ac", "2619,1980"], ["-pl", "500"]]
    assert all(c[1:3] == ["-i", UUID0] for c in cmds)


def test_null_means_driver_default_and_needs_no_command():
    cmds = APPLY.commands_for(UUID1, STATE["gpus"][UUID1], "nvidia-smi")
    assert [c[3:] for c in cmds] == [["-pm", "1"], ["-pl", "500"]]


def test_applies_every_gpu_in_index_order(tmp_path):
    state = tmp_path / "state.json"
    state.write_text(json.dumps(STATE))
    smi, log = _fake_smi(tmp_path, [UUID0, UUID1])
    assert APPLY.main(["--state-file", str(state), "--nvidia-smi", str(smi)]) == 0
    calls = log.read_text().splitlines()
    assert calls[0].startswith("--query-gpu=uuid")
    assert calls[1:] == ["-i %s -pm 1" % UUID0, "-i %s -lgc 1980,2100" % UUID0, "-i %s -ac 2619,1980" % UUID0,
                         "-i %s -pl 500" % UUID0, "-i %s -pm 1" % UUID1, "-i %s -pl 500" % UUID1]


def test_missing_gpu_fails_but_the_others_are_applied(tmp_path):
    state = tmp_path / "state.json"
    state.write_text(json.dumps(STATE))
    smi, log = _fake_smi(tmp_path, [UUID1])
    assert APPLY.main(["--state-file", str(state), "--nvidia-smi", str(smi)]) == 1
    assert "-i %s -pl 500" % UUID1 in log.read_text()
    assert UUID0 not in log.read_text()


def test_no_state_file_is_not_an_error(tmp_path):
    assert APPLY.main(["--state-file", str(tmp_path / "absent.json")]) == 0


def test_bad_state_file(tmp_path):
    state = tmp_path / "state.json"
    state.write_text("[]")
    assert APPLY.main(["--state-file", str(state)]) == 2
