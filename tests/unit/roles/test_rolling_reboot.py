"""A reboot in a rolling change goes through Slurm (roles/rolling/tasks/apply.yml), and this run's drain is
recognised by its whole reason, with or without the notes Slurm appends while it reboots a node.

The role's own expressions (read from its task and vars files) are evaluated with Ansible's templar against node
records that slurm_node_info's parser makes from `scontrol show node` text, state by state of a Slurm reboot."""

import json
import os
import re
import subprocess
import sys

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import parse_scontrol_nodes
from ansible_collections.clusterforge.gpu.plugins.filter import rolling as rolling_filters
from ansible_collections.clusterforge.gpu.plugins.modules import slurm_node_info
from role_files import load_yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = os.path.join(ROOT, "roles", "rolling")
REASON = "cf-roll:20261125T100000Z"


def _yaml(*parts):
    with open(os.path.join(*parts)) as f:
        return yaml.safe_load(f)


def _tasks(tasks):
    """Every task of a task list, blocks flattened, in order."""
    for task in tasks or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _task(phase, name):
    (task,) = [t for t in _tasks(_yaml(ROLE, "tasks", phase + ".yml")) if t.get("name") == name]
    return task


def _trusted(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: _trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    return value


def templar(**extra):
    variables = _trusted(_yaml(ROLE, "vars", "main.yml"))
    variables.update(_trusted(_yaml(ROLE, "defaults", "main.yml")))
    variables.update(__rolling_reason=REASON, inventory_hostname="gpu02", ansible_check_mode=False,
                     groups={"slurm_controller": ["head01"]}, rolling_reboot_ok=True)
    variables.update(extra)
    return Templar(loader=DataLoader(), variables=variables)


def true(tmpl, expression):
    return tmpl.evaluate_conditional(trust_as_template(expression))


def render(tmpl, text):
    return tmpl.template(trust_as_template(text))


def node(state, reason=None):
    """One entry of slurm_node_info's `nodes`, from the `scontrol show node` text of gpu02 in that state."""
    text = ("NodeName=gpu02 Arch=x86_64 CoresPerSocket=48\n   CPUAlloc=0 CPUEfctv=192 CPUTot=192\n"
            "   Gres=gpu:h100:8(S:0-1)\n   State=%s ThreadsPerCore=2 TmpDisk=0 Weight=1\n   Partitions=gpu\n" % state)
    if reason:
        text += "   Reason=%s [slurm@2026-11-25T10:00:00]\n" % reason
    (record,) = parse_scontrol_nodes(text)
    return slurm_node_info.describe(record, "cf-roll:")


# ------------------------------------------------------------------------------------------------ the reboot task

def test_the_reboot_goes_through_slurm_on_the_controller_and_never_through_ansible():
    task = _task("apply", "Ask Slurm to reboot the node, kept drained (RebootProgram, then HealthCheckProgram as "
                          "slurmd starts)")
    # No ASAP (it sets nextstate=UNDRAIN) and no nextstate=RESUME: the node comes back drained, for the gate.
    tmpl = templar()
    assert [render(tmpl, arg) for arg in task["ansible.builtin.command"]["argv"]] == [
        "scontrol", "reboot", "reason=" + REASON, "gpu02"]
    assert render(tmpl, task["delegate_to"]) == "head01"
    for name in os.listdir(os.path.join(ROLE, "tasks")):
        for t in _tasks(_yaml(ROLE, "tasks", name)):
            assert not {"ansible.builtin.reboot", "reboot", "ansible.legacy.reboot"} & set(t), (name, t["name"])
    # the roles of the change never reboot by themselves inside a roll
    include = _task("apply", "Apply each role of the change")
    assert include["vars"] == {"common_os_reboot_ok": False, "nvidia_driver_reboot_ok": False}


def test_check_mode_reboots_nothing_and_says_what_would_reboot():
    apply = _yaml(ROLE, "tasks", "apply.yml")
    (block,) = [t for t in apply if t.get("name") == "Reboot through Slurm"]
    say = _task("apply", "Say that the node would reboot through Slurm (check mode reboots nothing)")
    # (reboot needed, check mode): whether the reboot block runs, whether the check-mode line is said
    for why, check_mode, reboots, says in ((["x"], False, True, False), (["x"], True, False, True),
                                           ([], False, False, False), ([], True, False, False)):
        tmpl = templar(__rolling_reboot_why=why, ansible_check_mode=check_mode)
        assert (true(tmpl, block["when"]), true(tmpl, say["when"])) == (reboots, says), (why, check_mode)
    tmpl = templar(__rolling_reboot_why=["/run/reboot-required"])
    msg = " ".join(render(tmpl, say["ansible.builtin.debug"]["msg"]).split())
    assert msg == ("gpu02 would reboot through Slurm (/run/reboot-required): scontrol reboot reason=%s gpu02 "
                   "(kept drained until the gate passes)" % REASON)


def test_a_needed_reboot_is_refused_unless_rolling_reboot_ok_is_true():
    task = _task("apply", "A needed reboot that is not allowed stops the roll here")
    # why: the one function the plan's rolling_would_reboot also asks (the apply task runs it through ansible-playbook
    # in the lab's rolling reboot test)
    why = rolling_filters.FilterModule().filters()["rolling_reboot_why"]
    assert why({"nvidia_driver_reboot_required": True, "common_os_reboot_required": "false"}, True) == [
        "NVIDIA driver (nvidia_driver_reboot_required)", "/run/reboot-required"]
    assert why({"bios_reboot_required": "yes", "common_os_reboot_required": True}, False) == [
        "kernel parameters (common_os_reboot_required)", "BIOS settings pending on the BMC (bios_reboot_required)"]
    assert why({}, False) == []
    for ok, stops in ((False, True), (True, False), ("true", True)):
        assert true(templar(__rolling_reboot_why=["x"], rolling_reboot_ok=ok), task["when"]) is stops
    assert true(templar(__rolling_reboot_why=[], rolling_reboot_ok=False), task["when"]) is False  # nothing to refuse


# ------------------------------------------------------------------------------------------------- ownership

@pytest.mark.parametrize("reason, ours", [
    (REASON, True),
    (REASON + " : reboot issued", True),
    (REASON + " : reboot complete", True),
    (REASON + " : reboot timed out", True),
    (REASON + "2", False),                              # another run whose id starts with this one's
    (REASON + " FAILED gate: x", False),                 # this run's failure: the hold's, never resumed
    (REASON + " : reboot issued please", False),
    ("cf-roll:20261125T100000Zx : reboot issued", False),
    ("cf-roll:other", False),
    ("admin: psu", False),
    ("Reboot ASAP : reboot issued", False),
    (None, False),
])
def test_this_runs_drain_is_its_whole_reason_with_or_without_slurms_reboot_notes(reason, ours):
    assert true(templar(r=reason), "r | default('', true) is match(__rolling_reason_re)") is ours


def test_a_run_id_with_regex_characters_is_matched_literally():
    tmpl = templar(__rolling_reason="cf-roll:a.b")
    assert true(templar(__rolling_reason="cf-roll:a.b", r="cf-roll:a.b : reboot issued"),
                "r is match(__rolling_reason_re)")
    assert not true(templar(__rolling_reason="cf-roll:a.b", r="cf-roll:aXb"), "r is match(__rolling_reason_re)")
    assert render(tmpl, "{{ __rolling_reason_re }}") == "^" + re.escape("cf-roll:a.b") + \
        "( : reboot (issued|complete|timed out))*$"


# ------------------------------------------------------------------------------- waiting for Slurm's reboot

WAIT = "Wait until Slurm has rebooted the node and slurmd has registered again"
BACK = "Slurm rebooted the node and slurmd registered again"
GIVE_BACK = "Give the node back to whoever drained it during the reboot"


def _wait(state, reason=None):
    tmpl = templar(__rolling_reboot_wait={"nodes": [node(state, reason)]})
    done = true(tmpl, _task("apply", WAIT)["until"])
    taken_over = all(true(tmpl, cond) for cond in _task("apply", GIVE_BACK)["when"])
    back = _task("apply", BACK)["ansible.builtin.assert"]
    ok = all(true(tmpl, cond) for cond in back["that"])
    return done, taken_over, ok, " ".join(render(tmpl, back["fail_msg"]).split())


def test_the_wait_goes_on_while_slurm_has_the_reboot_pending_or_issued():
    for state, reason in (("IDLE+DRAIN+REBOOT_REQUESTED", REASON),
                          ("DOWN+DRAIN+REBOOT_ISSUED", REASON + " : reboot issued"),
                          ("DOWN+DRAIN+REBOOT_ISSUED+NOT_RESPONDING", REASON + " : reboot issued"),
                          ("DOWN+REBOOT_ISSUED", REASON + " : reboot issued")):
        done, taken_over, ok, msg = _wait(state, reason)
        assert (done, taken_over, ok) == (False, False, False), state
        assert "not back from the Slurm reboot within 1800 s (state %s, reason %s" % (state, reason) in msg
        assert "slurmd needs -b" in msg


def test_the_node_is_back_drained_with_this_runs_reason():
    # what Slurm 24.11 shows after `scontrol reboot reason=...` of a drained node (the lab)
    assert _wait("IDLE+DRAIN", REASON + " : reboot issued")[:3] == (True, False, True)
    # someone resumed it meanwhile: back all the same (the resume phase then leaves it to them)
    assert _wait("IDLE")[:3] == (True, False, True)


def test_slurm_giving_up_or_refusing_the_registration_ends_the_wait_and_fails():
    done, taken_over, ok, msg = _wait("DOWN", REASON + " : reboot timed out")
    assert (done, taken_over, ok) == (True, False, False)
    assert msg.startswith("gpu02: Slurm gave up on the reboot (state DOWN, reason %s : reboot timed out)" % REASON)
    done, taken_over, ok, msg = _wait("IDLE+DRAIN+REBOOT_ISSUED+INVALID_REG",
                                      "gres/gpu count reported lower than configured (7 < 8)")
    assert done and not ok
    done, taken_over, ok, msg = _wait("DOWN+DRAIN+REBOOT_ISSUED+INVALID_REG", REASON + " : reboot issued")
    assert (done, taken_over, ok) == (True, False, False)
    assert "registered after the reboot with a configuration Slurm refuses" in msg


def test_a_drain_by_someone_else_during_the_reboot_ends_the_wait_and_is_given_back():
    for reason in ("admin: psu", "admin: psu : reboot issued", REASON + "2", "cf-health: 7 GPUs"):
        done, taken_over, ok, dummy = _wait("DOWN+DRAIN+REBOOT_ISSUED", reason)
        assert (done, taken_over, ok) == (True, True, False), reason
    tmpl = templar(__rolling_reboot_wait={"nodes": [node("DOWN+DRAIN+REBOOT_ISSUED", "admin: psu : reboot issued")]})
    their = _task("apply", GIVE_BACK)["vars"]["__rolling_their_reason"]
    assert render(tmpl, their) == "admin: psu"
    redrain = _task("apply", "Drain the node again with their reason where Slurm's resume cleared it")
    assert redrain["clusterforge.gpu.slurm_node"]["reason"] == redrain["clusterforge.gpu.slurm_node"]["reason_prefix"]
    assert "adopt" not in redrain["clusterforge.gpu.slurm_node"]


def test_nothing_returns_the_node_to_service_before_the_gate_passed():
    """The node stays drained from the drain phase to the resume phase, through a reboot too: no task of apply or
    gate resumes it, and none asks Slurm to resume it after a reboot."""
    for phase in ("apply", "gate"):
        for t in _tasks(_yaml(ROLE, "tasks", phase + ".yml")):
            assert (t.get("clusterforge.gpu.slurm_node") or {}).get("state") != "resumed", (phase, t["name"])
            argv = (t.get("ansible.builtin.command") or {}).get("argv") or []
            assert not {"ASAP", "nextstate=RESUME", "State=RESUME"} & set(argv), (phase, t["name"])


# ---------------------------------------------------------------------------------------------------- resume

def _resume(state, reason=None):
    task = _task("resume", "Note whether the drain on the node is this run's")
    facts = task["ansible.builtin.set_fact"]
    # the task's vars: whether the reason is this run's, decided once for both facts
    tmpl = templar(__rolling_resume_node={"nodes": [node(state, reason)]}, **_trusted(task.get("vars", {})))
    return render(tmpl, facts["__rolling_resume_ours"]), render(tmpl, facts["__rolling_resume_theirs"])


def test_resume_resumes_only_this_runs_drain_and_leaves_a_resumed_node_alone():
    assert _resume("IDLE+DRAIN", REASON) == (True, False)
    assert _resume("IDLE+DRAIN", REASON + " : reboot issued") == (True, False)
    assert _resume("IDLE") == (False, False)                     # someone else resumed it
    assert _resume("IDLE+DRAIN", REASON + "2") == (False, True)
    assert _resume("IDLE+DRAIN", "admin: fan") == (False, True)
    resume = _task("resume", "Resume the node if its reason is still this run's")
    for ours in (True, False):
        assert true(templar(__rolling_resume_ours=ours), resume["when"]) is ours
    # slurm_node checks the reason again as it resumes: still this run's
    assert render(templar(), resume["clusterforge.gpu.slurm_node"]["reason_prefix"]) == REASON


# ------------------------------------------------------------------------------------------------------ plan

def test_the_plan_names_the_nodes_that_would_reboot_and_why():
    """The filters the plan's tasks call (their wiring through ansible-playbook: the test after this one)."""
    filters = rolling_filters.FilterModule().filters()

    def read_facts(doc):
        stdout = "PLAY RECAP (another callback's line)\n" + json.dumps(doc, indent=4)
        return filters["rolling_plan_summary"](filters["rolling_plan_result"](stdout))["reboot_facts"]

    plan_json = {"plays": [{"tasks": [
        {"task": {"name": "Work out whether the running kernel lacks any of the parameters"},
         "hosts": {"gpu01": {"ansible_facts": {"common_os_reboot_required": False}},
                   "gpu03": {"ansible_facts": {"common_os_reboot_required": True}}}},
        {"task": {"name": "Note whether a reboot is needed"},
         "hosts": {"gpu01": {"ansible_facts": {"nvidia_driver_reboot_required": True, "other": 1}}}},
    ]}]}
    facts = read_facts(plan_json)
    assert facts == {"gpu01": {"common_os_reboot_required": False, "nvidia_driver_reboot_required": True},
                     "gpu03": {"common_os_reboot_required": True}}

    markers = {"results": [{"item": "gpu01", "stat": {"exists": False}},
                           {"item": "gpu02", "stat": {"exists": True}},
                           {"item": "gpu04", "stat": {"exists": False}}]}
    targets = ["gpu01", "gpu02", "gpu04"]
    # rolling_plan false: no check-mode run, the marker read from the controller, node by node
    would_reboot = filters["rolling_would_reboot"](targets, facts, markers)
    assert would_reboot == {"gpu01": ["NVIDIA driver (nvidia_driver_reboot_required)"],
                            "gpu02": ["/run/reboot-required"]}
    # with a plan: each node reported its marker in its own check-mode run (rolling_apply.yml), read with the other
    # reboot facts; the controller's loop was skipped
    plan_json["plays"][0]["tasks"].append(
        {"task": {"name": "Report the reboot marker to the plan (check mode)"},
         "hosts": {"gpu01": {"ansible_facts": {"__rolling_apply_reboot_marker": False}},
                   "gpu02": {"ansible_facts": {"__rolling_apply_reboot_marker": True}},
                   "gpu04": {"ansible_facts": {"__rolling_apply_reboot_marker": False}}}})
    facts = read_facts(plan_json)
    assert facts["gpu02"] == {"__rolling_apply_reboot_marker": True}
    skipped = {"results": [{"item": n, "skipped": True} for n in targets], "skipped": True}
    assert filters["rolling_would_reboot"](targets, facts, skipped) == would_reboot
    assert filters["rolling_would_reboot"](targets, facts) == would_reboot   # the marker loop not registered at all
    marker = _task("plan", "Plan | look for the package manager's reboot marker on the nodes to roll (without a "
                           "check-mode run)")
    for plan in (True, False):
        assert true(templar(rolling_plan=plan), marker["when"]) is not plan
    apply_tasks = [t for play in load_yaml(ROOT, "playbooks", "rolling_apply.yml") for t in play.get("tasks", [])]
    (stat,) = [t for t in apply_tasks if t.get("ansible.builtin.stat")]
    # one marker: the playbook (which reads no role's files), the role's variable and the reasons' name of it
    from ansible_collections.clusterforge.gpu.plugins.plugin_utils.playbook_output import REBOOT_MARKER
    assert stat["ansible.builtin.stat"]["path"] == REBOOT_MARKER == _yaml(ROLE, "vars", "main.yml")[
        "__rolling_reboot_marker_path"]
    for check_mode in (True, False):
        assert true(templar(ansible_check_mode=check_mode), stat["when"]) is check_mode

    lines = _task("plan", "Plan | report")["ansible.builtin.debug"]["msg"]
    (report,) = [line for line in lines if "would reboot" in line]
    line = " ".join(render(templar(__rolling_would_reboot=would_reboot), report).split())
    assert line == ("would reboot through Slurm, kept drained (scontrol reboot): "
                    "gpu01 (NVIDIA driver (nvidia_driver_reboot_required)), gpu02 (/run/reboot-required)")
    line = " ".join(render(templar(__rolling_would_reboot={}, rolling_reboot_ok=False), report).split())
    assert line.startswith("need a reboot, which rolling_reboot_ok false does not allow") and line.endswith(": none")


def test_a_controller_that_does_not_answer_is_named():
    tmpl = templar(__rolling_reboot_wait={"failed": True, "msg": "scontrol: Unable to contact slurm controller"})
    assert not true(tmpl, _task("apply", WAIT)["until"])
    back = _task("apply", BACK)["ansible.builtin.assert"]
    assert not true(tmpl, back["that"][0])
    msg = " ".join(render(tmpl, back["fail_msg"]).split())
    assert msg == "gpu02: the controller did not answer: scontrol: Unable to contact slurm controller"


# ------------------------------------------------------------------------------------------ did it reboot?

def _b64(text):
    import base64
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("boot_after, marker_after, rebooted", [
    ("2222", False, True),    # a machine of its own: new boot id, /run emptied
    ("1111", False, True),    # a container (the lab): the host's boot id, /run emptied
    ("2222", True, True),
    ("1111", True, False),    # Slurm says back, but nothing rebooted
])
def test_the_node_has_rebooted_when_its_boot_id_changed_or_run_was_emptied(boot_after, marker_after, rebooted):
    check = _task("apply", "The node has really rebooted (a new boot id, or /run emptied)")["ansible.builtin.assert"]
    tmpl = templar(__rolling_boot_id_before={"content": _b64("1111\n")},
                   __rolling_boot_id_after={"content": _b64(boot_after + "\n")},
                   __rolling_boot_marker_after={"stat": {"exists": marker_after}})
    assert true(tmpl, check["that"]) is rebooted
    if not rebooted:
        assert " ".join(render(tmpl, check["fail_msg"]).split()) == (
            "Slurm shows gpu02 back, but it has not rebooted: boot id 1111 unchanged and "
            "/run/clusterforge-rolling.boot still there")
    say = _task("apply", "Say that the node rebooted through Slurm")["ansible.builtin.debug"]["msg"]
    tmpl.available_variables = dict(tmpl.available_variables, __rolling_reboot_why=["/run/reboot-required"],
                                    __rolling_boot_state={"stdout": "running\n"},
                                    __rolling_reboot_wait={"nodes": [node("IDLE")]})
    assert " ".join(render(tmpl, say).split()).startswith(
        "gpu02 rebooted through Slurm (/run/reboot-required): boot id 1111 -> %s" % boot_after)


# ------------------------------------------------------------------------------------- the plan's check-mode output

@pytest.mark.parametrize("callbacks", ["", "ansible.posix.profile_tasks,ansible.posix.timer"])
def test_the_plan_reads_its_check_mode_run_beside_the_operators_callbacks(tmp_path, callbacks):
    """The plan reads the check-mode run's stdout (ansible.posix.json). Callbacks an operator enables in ansible.cfg
    (profile_tasks, timer) print into the same stdout, before and after the document: the plan must still read it.
    The stdout here is a real ansible-playbook run's."""
    playbook_bin = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    if not os.path.exists(playbook_bin):
        pytest.skip("ansible-playbook not installed beside this Python")
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "name": "Check", "hosts": "localhost", "gather_facts": False,
        "tasks": [{"name": "Note whether a reboot is needed",
                   "ansible.builtin.set_fact": {"nvidia_driver_reboot_required": True}}]}]))
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith("ANSIBLE_"))
    # The plan's own environment for its run, and an operator's ansible.cfg that asks for single-line JSON.
    from ansible_collections.clusterforge.gpu.plugins.plugin_utils.rolling_plan import PLAN_ENV
    env.update(PLAN_ENV)
    env.update(ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
               ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"))
    (tmp_path / "ansible.cfg").write_text("[defaults]\njson_indent = 0\n"
                                          + ("callbacks_enabled = %s\n" % callbacks if callbacks else ""))
    proc = subprocess.run([playbook_bin, "--check", str(tmp_path / "play.yml")], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    if callbacks:
        assert not proc.stdout.lstrip().startswith("{") or not proc.stdout.rstrip().endswith("}"), proc.stdout
    read = _task("plan", "Plan | read the result of the check-mode run (ansible.posix.json callback)")
    would = _task("plan", "Plan | the nodes that would reboot, and why")
    cut = proc.stdout[:len(proc.stdout) // 2]
    stdouts = {"real": proc.stdout, "empty": "", "error": "ERROR! the playbook could not be read", "cut": cut}
    (tmp_path / "stdouts.json").write_text(json.dumps(stdouts))
    # The task's own expressions, through Ansible and the collection's filters (ansible-playbook, not a bare templar).
    (tmp_path / "read.yml").write_text(yaml.safe_dump([{
        "name": "Read", "hosts": "localhost", "gather_facts": False,
        "vars": {"stdouts": "{{ lookup('ansible.builtin.file', 'stdouts.json') | from_json }}"},
        "tasks": [{"name": "Each stdout", "ansible.builtin.copy": {
            "content": "{{ {'recap': recap, 'facts': facts, 'would': would} | to_json }}",
            "dest": str(tmp_path / "{{ item }}.json"),
            "mode": "0644"},
            "loop": list(stdouts),
            "vars": dict(read["vars"], __rolling_plan_run={"stdout": "{{ stdouts[item] }}"},
                         recap=read["ansible.builtin.set_fact"]["__rolling_recap"],
                         facts=read["ansible.builtin.set_fact"]["__rolling_plan_reboot_facts"],
                         __rolling_plan_reboot_facts="{{ facts }}", __rolling_targets=["localhost"],
                         would=would["ansible.builtin.set_fact"]["__rolling_would_reboot"])}]}]))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    env.pop("ANSIBLE_CONFIG", None)
    proc2 = subprocess.run([playbook_bin, str(tmp_path / "read.yml")], cwd=str(tmp_path), env=env,
                           capture_output=True, text=True, timeout=300, check=False)
    assert proc2.returncode == 0, proc2.stdout + proc2.stderr
    got = dict((k, json.loads((tmp_path / ("%s.json" % k)).read_text())) for k in stdouts)
    assert got["real"]["recap"] == {"localhost": {"changed": 0, "unreachable": 0, "failed": 0}}
    assert got["real"]["facts"] == {"localhost": {"nvidia_driver_reboot_required": True}}
    assert got["real"]["would"] == {"localhost": ["NVIDIA driver (nvidia_driver_reboot_required)"]}
    # a run that stopped before its callback wrote the document: no result, and the assert below names the nodes
    for key in ("empty", "error", "cut"):
        assert got[key] == {"recap": {}, "facts": {}, "would": {}}, key


# ------------------------------------------------------------------------------------ the node's own health check

HC_ASSERT = "The node's health check finds no fault"


@pytest.mark.parametrize("rc, stdout, passes", [
    (0, "cf-health: gpu02: healthy; state IDLE+DRAIN; action none; 0.41 s of a 40 s budget", True),
    (1, "cf-health: gpu02: faults: boot_units: clusterforge-gpu-tuning.service failed; state IDLE+DRAIN; "
        "action none; 0.52 s of a 40 s budget", False),
    (1, "cf-health: gpu02: pending: temperature 1/2 (GPU 3 temperature 86 C > 85 C); state IDLE+DRAIN; action none; "
        "0.50 s of a 40 s budget", False),
    (2, "", False),
    # another run held the lock: this one checked beside it, and its verdict is the gate's
    (0, "cf-health: gpu02: another health check run holds /run/clusterforge/healthcheck.lock: this run checks "
        "beside it, counting no strike and resuming nothing\ncf-health: gpu02: healthy; state IDLE+DRAIN; action "
        "none; 10.41 s of a 40 s budget", True),
    (1, "cf-health: gpu02: another health check run holds /run/clusterforge/healthcheck.lock: this run checks "
        "beside it, counting no strike and resuming nothing\ncf-health: gpu02: boot_units: "
        "clusterforge-gpu-tuning.service failed; state IDLE+DRAIN; action none; 10.52 s of a 40 s budget", False),
])
def test_the_gate_fails_on_any_fault_of_the_nodes_own_health_check_naming_it(rc, stdout, passes):
    check = _task("gate", HC_ASSERT)["ansible.builtin.assert"]
    tmpl = templar(__rolling_gate_hc={"rc": rc, "stdout": stdout, "stdout_lines": stdout.splitlines(),
                                      "stderr": "cf-health: cannot read /etc/slurm/clusterforge-healthcheck.json"
                                      if rc == 2 else ""})
    assert all(true(tmpl, cond) for cond in check["that"]) is passes
    if not passes:
        msg = " ".join(render(tmpl, check["fail_msg"]).split())
        assert msg == (stdout.splitlines()[-1] if stdout else "cf-health: cannot read "
                       "/etc/slurm/clusterforge-healthcheck.json")
    run = _task("gate", "Run the node's health check as slurmd runs it, reporting only")
    assert run["ansible.builtin.command"]["argv"][-1] == "--dry-run" and run["timeout"] == 90
