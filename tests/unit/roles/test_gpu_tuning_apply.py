"""The gpu_tuning role's boot-time program re-applies the nvidia_smi module's state file; its MIG layout is applied
only with gpu_tuning_mig_apply_ok on a node that runs no job."""

import json
import os
import stat
import subprocess
import tempfile

import pytest
import yaml
from role_files import load_script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROGRAM = os.path.join(ROOT, "roles", "gpu_tuning", "files", "clusterforge-gpu-tuning-apply")


SETTINGS_SOURCE = os.path.join(ROOT, "plugins", "module_utils", "gpu_settings.py")


def install_program(directory):
    """The boot program and the module code it imports, in ``directory`` as the role installs them; its path."""
    os.makedirs(str(directory), exist_ok=True)
    for src, name in ((PROGRAM, "clusterforge-gpu-tuning-apply"), (SETTINGS_SOURCE, "clusterforge_gpu_settings.py")):
        with open(src) as handle, open(os.path.join(str(directory), name), "w") as out:
            out.write(handle.read())
    path = os.path.join(str(directory), "clusterforge-gpu-tuning-apply")
    os.chmod(path, 0o755)
    return path


# Loaded from where it imports the module code as on a node (removed when the test process ends).
_INSTALLED = tempfile.TemporaryDirectory(prefix="cf-gpu-tuning-apply-")  # pylint: disable=consider-using-with
APPLY = load_script("cf_gpu_tuning_apply", install_program(_INSTALLED.name))
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


def test_the_modules_order_and_arguments_with_the_requested_lock_values():
    cmds = APPLY.commands_for(UUID0, STATE["gpus"][UUID0], "nvidia-smi")
    assert [c[3:] for c in cmds] == [["-pm", "1"], ["-pl", "500"], ["-ac", "2619,1980"], ["-lgc", "1980,2100"]]
    assert all(c[1:3] == ["-i", UUID0] for c in cmds)
    # the module's own function and order, not a copy: what the nvidia_smi module runs for the same settings
    nvsmi = APPLY.settings
    assert nvsmi.__file__ == os.path.join(os.path.dirname(APPLY.__file__), "clusterforge_gpu_settings.py")
    wanted = {"persistence_mode": True, "power_limit_watts": 500, "application_clocks": {"memory": 2619, "graphics": 1980},
              "locked_gpu_clocks": {"min": 1980, "max": 2100}}
    assert [c[3:] for c in cmds] == [nvsmi.setter_args(o, wanted[o]) for o in nvsmi.SETTING_ORDER if o in wanted]


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
    assert calls[1:] == ["-i %s -pm 1" % UUID0, "-i %s -pl 500" % UUID0, "-i %s -ac 2619,1980" % UUID0,
                         "-i %s -lgc 1980,2100" % UUID0, "-i %s -pm 1" % UUID1, "-i %s -pl 500" % UUID1]


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


# --------------------------------------------------------------------------------------------- MIG apply gate
# roles/gpu_tuning/tasks/mig.yml run for real (ansible-playbook, local connection) with a fake nvidia-mig-parted and
# a fake scontrol: applying a layout resets the GPUs, so it needs gpu_tuning_mig_apply_ok and a node without jobs.

BIN = os.path.join(ROOT, ".venv", "bin")
MIG_PARTED = """#!/bin/sh
echo "$*" >> "$FAKE_DIR/mig.calls"
case "$1" in
  assert) if [ -f "$FAKE_DIR/mig.applied" ]; then exit 0; fi
          echo "Assertion failure: selected configuration not currently applied" >&2; exit 1;;
  apply) if [ -f "$FAKE_DIR/mig.apply-fails" ]; then echo "Error applying MIG configuration: GPU in use" >&2; exit 1; fi
         : > "$FAKE_DIR/mig.applied"; echo "MIG configuration applied successfully"; exit 0;;
esac
exit 2
"""
SCONTROL = """#!/bin/sh
# `scontrol show node` prints $FAKE_DIR/scontrol.out; `scontrol update ... State=DRAIN Reason=<text>` and
# `State=RESUME` change it as slurmctld would for an idle node.
echo "$*" >> "$FAKE_DIR/scontrol.calls"
out="$FAKE_DIR/scontrol.out"
case "$1 $3" in
  "update State=DRAIN")
    reason=$(printf '%s' "$4" | sed 's/^Reason=//')
    sed -i -e "s/State=IDLE /State=IDLE+DRAIN /" -e "s/Reason=.*/Reason=$reason [root@2026-11-29T16:00:00]/" "$out"
    exit 0;;
  "update State=RESUME")
    sed -i -e "s/State=IDLE+DRAIN /State=IDLE /" -e "s/Reason=.*/Reason=none/" "$out"
    exit 0;;
esac
[ -f "$out" ] && cat "$out"
exit $(cat "$FAKE_DIR/scontrol.rc" 2>/dev/null || echo 0)
"""
SINFO = """#!/bin/sh
# sinfo -h -N -n gpu01 -o "%N %t %C": drained and empty once scontrol.out says DRAIN
echo "$*" >> "$FAKE_DIR/sinfo.calls"
if grep -q "State=IDLE+DRAIN " "$FAKE_DIR/scontrol.out"; then echo "gpu01 drain 0/2/0/2"; else echo "gpu01 idle 0/2/0/2"; fi
"""
SYSTEMCTL = """#!/bin/sh
# systemctl show slurmd.service --property=LoadState --property=ActiveState, from $FAKE_DIR/slurmd.unit
[ -f "$FAKE_DIR/slurmd.unit" ] && cat "$FAKE_DIR/slurmd.unit" && exit 0
printf 'LoadState=not-found\nActiveState=inactive\n'
"""
NODE = ("NodeName=gpu01 Arch=x86_64 CoresPerSocket=2 CPUAlloc={alloc} CPUTot=2 Gres=gpu:h100:8 NodeAddr=gpu01\n"
        "   State={state} ThreadsPerCore=1\n   Partitions=gpu\n   Reason={reason}\n")
PLAY = """---
- name: MIG gate
  hosts: gpu01
  gather_facts: false
  tasks:
    - name: Run the role's MIG tasks
      ansible.builtin.include_role:
        name: clusterforge.gpu.gpu_tuning
        tasks_from: mig.yml
"""


def _exe(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _mig_run(tmp_path, apply_ok, scontrol=None, scontrol_rc=0, check=False, applied=False, slurmd=None,
             apply_fails=False):
    """Run the MIG tasks; scontrol: the output of `scontrol show node` (None: scontrol is not installed); slurmd:
    what `systemctl show slurmd.service` prints (None: no such unit)."""
    fake = tmp_path / "fake"
    fake.mkdir()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    _exe(fake / "nvidia-mig-parted", MIG_PARTED)
    if applied:
        (fake / "mig.applied").write_text("")
    if apply_fails:
        (fake / "mig.apply-fails").write_text("")
    _exe(bindir / "systemctl", SYSTEMCTL)
    if slurmd is not None:
        (fake / "slurmd.unit").write_text(slurmd)
    if scontrol is not None:
        _exe(bindir / "scontrol", SCONTROL)
        _exe(bindir / "sinfo", SINFO)
        (fake / "scontrol.out").write_text(scontrol)
        (fake / "scontrol.rc").write_text(str(scontrol_rc))
    inv = {"all": {"hosts": {"gpu01": {
        "ansible_connection": "local", "ansible_python_interpreter": os.path.join(BIN, "python"),
        "gpu_tuning_mig_config": "all-1g.10gb", "gpu_tuning_mig_apply_ok": apply_ok}}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inv))
    (tmp_path / "play.yml").write_text(PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"), ANSIBLE_CACHE_PLUGIN="memory",
               ANSIBLE_CALLBACK_RESULT_FORMAT="json", FAKE_DIR=str(fake),
               PATH=os.pathsep.join([str(bindir), BIN, "/usr/bin", "/bin"]))
    argv = [os.path.join(BIN, "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml"),
            "-e", json.dumps({"__gpu_tuning_mig_parted": str(fake / "nvidia-mig-parted")})]
    argv += ["--check"] if check else []
    proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    calls = (fake / "mig.calls").read_text().splitlines() if (fake / "mig.calls").exists() else []
    updates = [c for c in (fake / "scontrol.calls").read_text().splitlines() if c.startswith("update ")] \
        if (fake / "scontrol.calls").exists() else []
    _mig_run.updates = updates
    return proc.returncode, proc.stdout + proc.stderr, [c.split()[0] for c in calls]


SYSTEM_DIRS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/sbin", "/usr/local/bin")
# The "no scontrol" case needs a machine without one (the role also looks in the sbin directories).
needs_no_system_scontrol = pytest.mark.skipif(any(os.path.exists(os.path.join(d, "scontrol")) for d in SYSTEM_DIRS),
                                              reason="this machine has a real scontrol")


@needs_no_system_scontrol
def test_mig_applied_layout_needs_nothing(tmp_path):
    rc, out, calls = _mig_run(tmp_path, apply_ok=False, applied=True)
    assert rc == 0, out
    assert calls == ["assert"], out
    assert "changed=0" in out, out


@needs_no_system_scontrol
def test_mig_differing_layout_without_the_switch_fails_naming_it_and_the_state(tmp_path):
    rc, out, calls = _mig_run(tmp_path, apply_ok=False, scontrol=NODE.format(alloc=0, state="IDLE", reason="none"))
    assert rc != 0, out
    assert "gpu_tuning_mig_apply_ok is false, so nothing was applied" in out, out
    assert "Slurm state of the node: IDLE" in out, out
    assert "apply" not in calls, out


@needs_no_system_scontrol
def test_mig_busy_node_fails_even_with_the_switch(tmp_path):
    rc, out, calls = _mig_run(tmp_path, apply_ok=True, scontrol=NODE.format(alloc=2, state="MIXED", reason="none"))
    assert rc != 0, out
    assert "Slurm's state of the node is MIXED" in out, out
    assert "would kill the jobs there" in out, out
    assert "apply" not in calls, out


@needs_no_system_scontrol
def test_mig_draining_node_still_runs_jobs(tmp_path):
    rc, out, calls = _mig_run(tmp_path, apply_ok=True,
                              scontrol=NODE.format(alloc=2, state="MIXED+DRAIN",
                                                   reason="cf-roll:r1 [root@2025-01-01T00:00:00]"))
    assert rc != 0, out
    assert "Slurm's state of the node is MIXED+DRAIN" in out, out
    assert "apply" not in calls, out


@needs_no_system_scontrol
def test_mig_drained_node_is_applied_with_the_switch_and_left_drained(tmp_path):
    node = NODE.format(alloc=0, state="IDLE+DRAIN", reason="admin: MIG change")
    rc, out, calls = _mig_run(tmp_path, apply_ok=True, scontrol=node)
    assert rc == 0, out
    assert calls == ["assert", "apply", "assert"], out
    assert "changed=1" in out, out
    assert _mig_run.updates == [], _mig_run.updates  # someone else's drain: neither set nor resumed


@needs_no_system_scontrol
def test_mig_idle_node_is_drained_first_then_applied_checked_and_resumed(tmp_path):
    """An idle node in service could take a job during the GPU reset: the role drains it with its own reason, waits
    until it is empty, applies, checks the layout and resumes only its own drain."""
    rc, out, calls = _mig_run(tmp_path, apply_ok=True, scontrol=NODE.format(alloc=0, state="IDLE", reason="none"))
    assert rc == 0, out
    assert calls == ["assert", "apply", "assert"], out
    assert _mig_run.updates == ["update NodeName=gpu01 State=DRAIN Reason=cf-mig: MIG layout all-1g.10gb",
                                "update NodeName=gpu01 State=RESUME"], _mig_run.updates
    assert "changed=3" in out, out


@needs_no_system_scontrol
def test_mig_failed_apply_leaves_the_idle_node_drained_with_the_layout_named(tmp_path):
    rc, out, calls = _mig_run(tmp_path, apply_ok=True, scontrol=NODE.format(alloc=0, state="IDLE", reason="none"),
                              apply_fails=True)
    assert rc != 0, out
    assert calls == ["assert", "apply"], out
    assert _mig_run.updates == ["update NodeName=gpu01 State=DRAIN Reason=cf-mig: MIG layout all-1g.10gb"]


@needs_no_system_scontrol
def test_mig_node_slurm_does_not_know_counts_as_idle(tmp_path):
    rc, out, calls = _mig_run(tmp_path, apply_ok=True, scontrol="Node gpu01 not found\n", scontrol_rc=1)
    assert rc == 0, out
    assert calls == ["assert", "apply", "assert"], out


@needs_no_system_scontrol
def test_mig_first_install_without_scontrol_counts_as_idle(tmp_path):
    rc, out, calls = _mig_run(tmp_path, apply_ok=True, scontrol=None)
    assert rc == 0, out
    assert calls == ["assert", "apply", "assert"], out


@needs_no_system_scontrol
@pytest.mark.parametrize("slurmd", ["LoadState=loaded\nActiveState=active\n", "LoadState=loaded\nActiveState=inactive\n"])
def test_mig_without_scontrol_where_slurmd_is_installed_is_refused(tmp_path, slurmd):
    rc, out, calls = _mig_run(tmp_path, apply_ok=True, scontrol=None, slurmd=slurmd)
    assert rc != 0, out
    assert "Slurm's state of the node is unreadable: scontrol was not found on this node, but slurmd.service is" in out, out
    assert "apply" not in calls, out


@needs_no_system_scontrol
def test_mig_node_slurm_does_not_know_while_slurmd_runs_is_refused(tmp_path):
    rc, out, calls = _mig_run(tmp_path, apply_ok=True, scontrol="Node gpu01 not found\n", scontrol_rc=1,
                              slurmd="LoadState=loaded\nActiveState=active\n")
    assert rc != 0, out
    assert "Slurm does not know this node" in out and "slurmd.service is active" in out, out
    assert "apply" not in calls, out


@needs_no_system_scontrol
def test_mig_unreadable_slurm_state_is_not_taken_for_idle(tmp_path):
    rc, out, calls = _mig_run(tmp_path, apply_ok=True,
                              scontrol="slurm_load_node error: Unable to contact slurm controller (connect failure)\n",
                              scontrol_rc=1)
    assert rc != 0, out
    assert "Slurm's state of the node is unreadable" in out, out
    assert "apply" not in calls, out


@needs_no_system_scontrol
def test_mig_check_mode_reports_the_change_and_applies_nothing(tmp_path):
    rc, out, calls = _mig_run(tmp_path, apply_ok=True, check=True,
                              scontrol=NODE.format(alloc=2, state="ALLOCATED", reason="none"))
    assert rc == 0, out
    assert "Would apply the MIG layout 'all-1g.10gb'" in out, out
    assert "the real run needs the node drained or idle" in out, out
    assert "changed=1" in out, out
    assert calls == ["assert"], out


@needs_no_system_scontrol
def test_mig_check_mode_without_the_switch_fails_before_any_drain(tmp_path):
    rc, out, calls = _mig_run(tmp_path, apply_ok=False, check=True,
                              scontrol=NODE.format(alloc=0, state="IDLE", reason="none"))
    assert rc != 0, out
    assert "gpu_tuning_mig_apply_ok is false" in out, out
    assert calls == ["assert"], out


def test_mig_apply_switch_is_declared_off_by_default():
    with open(os.path.join(ROOT, "roles", "gpu_tuning", "defaults", "main.yml")) as f:
        defaults = yaml.safe_load(f)
    with open(os.path.join(ROOT, "roles", "gpu_tuning", "meta", "argument_specs.yml")) as f:
        spec = yaml.safe_load(f)["argument_specs"]["main"]["options"]["gpu_tuning_mig_apply_ok"]
    assert defaults["gpu_tuning_mig_apply_ok"] is False
    assert spec["type"] == "bool" and spec["default"] is False
