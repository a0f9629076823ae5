"""The rolling change is the role clusterforge.gpu.rolling, in phases; playbooks/rolling_reconfigure.yml only
imports them. These tests keep the wrapper, the role's entry points and its defaults in step."""

import os
import re

from role_files import load_yaml, read_text, role_imports

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = os.path.join(ROOT, "roles", "rolling")
PHASES = ["plan", "drain", "apply", "gate", "resume", "hold"]


_yaml = load_yaml
_text = read_text


def _imports(tasks):
    """tasks_from of every import_role of clusterforge.gpu.rolling in a task list (blocks included), in order."""
    found = role_imports(tasks)
    assert all(entry[0] == "clusterforge.gpu.rolling" for entry in found), found
    return [entry[1] for entry in found]


def test_the_playbook_only_imports_the_phases():
    plays = _yaml(ROOT, "playbooks", "rolling_reconfigure.yml")
    assert [p["hosts"] for p in plays] == ["all", "slurm_controller[0]", "cf_roll_targets"]
    preflight, plan, batches = plays
    assert preflight["any_errors_fatal"] is True and preflight["gather_facts"] is False
    assert preflight["roles"] == [{"role": "clusterforge.gpu.preflight", "vars": {"preflight_rolling": True},
                                   "tags": ["preflight", "role::preflight"]}]
    assert _imports(plan["tasks"]) == ["plan"]
    assert batches["max_fail_percentage"] == 0 and batches["gather_facts"] is False
    (block,) = batches["tasks"]
    assert block["tags"] == ["always"]
    assert _imports(block["block"]) == ["drain", "apply", "gate", "resume"]
    assert _imports(block["rescue"]) == ["hold"]
    for play in plays[1:]:
        for task in play["tasks"]:
            assert set(task) <= {"name", "tags", "block", "rescue", "ansible.builtin.import_role"}, task


def test_the_batch_size_fallback_is_the_roles_default():
    batches = _yaml(ROOT, "playbooks", "rolling_reconfigure.yml")[2]
    default = _yaml(ROLE, "defaults", "main.yml")["rolling_serial"]
    assert batches["serial"] == "{{ rolling_serial | default(%s) }}" % repr(default).replace('"', "'")


def test_every_phase_is_an_entry_point_with_the_same_options():
    specs = _yaml(ROLE, "meta", "argument_specs.yml")["argument_specs"]
    assert list(specs) == ["main"] + PHASES
    tasks = sorted(os.path.splitext(f)[0] for f in os.listdir(os.path.join(ROLE, "tasks")))
    assert tasks == sorted(["main"] + PHASES)
    for phase in PHASES:
        assert specs[phase]["options"] == specs["main"]["options"], phase
        assert specs[phase]["short_description"] and specs[phase]["description"], phase
    # one anchor: Ansible validates the same options whichever phase starts
    text = _text(ROLE, "meta", "argument_specs.yml")
    assert text.count("&rolling_options") == 1 and text.count("*rolling_options") == len(PHASES)


def test_main_refuses_to_run_and_names_the_playbook():
    (task,) = _yaml(ROLE, "tasks", "main.yml")
    assert "playbooks/rolling_reconfigure.yml" in task["ansible.builtin.fail"]["msg"]
    assert "clusterforge.gpu.rolling_reconfigure" in task["ansible.builtin.fail"]["msg"]


def test_no_inline_default_for_a_rolling_variable():
    for name in os.listdir(os.path.join(ROLE, "tasks")):
        text = _text(ROLE, "tasks", name)
        assert not re.findall(r"(?<![\w.])rolling_[a-z0-9_]+\s*\|\s*default\(", text), name


def test_the_plan_runs_the_apply_playbook_of_its_own_collection():
    plan = _text(ROLE, "tasks", "plan.yml")
    assert "role_path | dirname | dirname ~ '/playbooks/rolling_apply.yml'" in plan
    assert os.path.isfile(os.path.join(ROLE, "..", "..", "playbooks", "rolling_apply.yml"))
    run = [t for t in _yaml(ROLE, "tasks", "plan.yml")
           if t.get("name") == "Plan | run the change in check mode on the candidate nodes"][0]
    assert "ansible_config_file" in run["clusterforge.gpu.rolling_plan_run"]["config_file"]
    assert "ansible_config_file" in run["clusterforge.gpu.rolling_plan_run"]["chdir"]
    # run by name from an installed collection, the apply playbook reads nothing outside playbooks/
    files = ("vars_files", "import_playbook", "ansible.builtin.import_playbook", "import_tasks", "include_tasks",
             "ansible.builtin.import_tasks", "ansible.builtin.include_tasks", "include_vars",
             "ansible.builtin.include_vars")
    for play in _yaml(ROOT, "playbooks", "rolling_apply.yml"):
        assert not set(play) & set(files), play
        for task in play.get("tasks", []):
            assert not set(task) & set(files), task
        for role in play.get("roles", []):
            assert role["role"].startswith("clusterforge.gpu."), role


def test_the_plan_gathers_the_facts_of_the_apply_and_does_not_judge_the_inventory_twice():
    """The check-mode run sees the facts the real apply gathers (no more), and its preflight is skipped only
    because this run's own preflight passed (plan.yml asserts that first)."""
    apply_play = _yaml(ROOT, "playbooks", "rolling_apply.yml")[1]
    setup = [t for t in _yaml(ROLE, "tasks", "apply.yml") if "ansible.builtin.setup" in t]
    assert apply_play["gather_facts"] is True
    assert apply_play["gather_subset"] == setup[0]["ansible.builtin.setup"]["gather_subset"]
    plan = _yaml(ROLE, "tasks", "plan.yml")
    assert plan[0]["ansible.builtin.assert"]["that"] == "__preflight_passed | default(false)"
    run = [t for t in plan if t.get("name") == "Plan | run the change in check mode on the candidate nodes"][0]
    assert run["clusterforge.gpu.rolling_plan_run"]["plan_vars"]["__preflight_passed"] is True


def test_the_drain_reason_and_the_failure_message_are_unchanged():
    assert _yaml(ROLE, "vars", "main.yml")["__rolling_prefix"] == "cf-roll:"
    hold = _text(ROLE, "tasks", "hold.yml")
    assert "{{ __rolling_reason }} FAILED {{ __rolling_step | default('state') }}:" in hold
    assert "failed at '{{ __rolling_step | default('state') }}'" in hold
    gate = _yaml(ROLE, "tasks", "gate.yml")
    steps = [t["ansible.builtin.set_fact"]["__rolling_step"] for t in gate[0]["block"]
             if "__rolling_step" in (t.get("ansible.builtin.set_fact") or {})]
    assert steps == ["slurmd-registered", "gres-count", "dcgm-diag", "tuned-values", "health-check", "nccl-test"]
    assert gate[0]["when"] == "not ansible_check_mode"
