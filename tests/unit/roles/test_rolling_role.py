"""The rolling change is the role clusterforge.gpu.rolling, in phases; playbooks/rolling_reconfigure.yml only
imports them. These tests keep the wrapper, the role's entry points and its defaults in step."""

import os
import re

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from role_files import load_yaml, read_text, role_imports, run_role_main

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
    serial = trust_as_template(batches["serial"])
    # the play's keyword is templated before the role's defaults are read: its fallback must be the same value
    assert _templar().template(serial) == default
    assert _templar(rolling_serial=[2, "50%"]).template(serial) == [2, "50%"]


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


def test_main_refuses_to_run_and_names_the_playbook(tmp_path):
    rc, out = run_role_main(ROOT, tmp_path, "clusterforge.gpu.rolling")
    assert rc == 2, out
    assert "Refuse to run the role without a phase" in out and "failed=1" in out, out
    assert "playbooks/rolling_reconfigure.yml" in out and "clusterforge.gpu.rolling_reconfigure" in out, out
    assert "Nothing was changed." in out and "changed=0" in out, out


def test_no_inline_default_for_a_rolling_variable():
    for name in os.listdir(os.path.join(ROLE, "tasks")):
        text = _text(ROLE, "tasks", name)
        assert not re.findall(r"(?<![\w.])rolling_[a-z0-9_]+\s*\|\s*default\(", text), name


def test_the_plan_runs_the_apply_playbook_of_its_own_collection():
    run = [t for t in _yaml(ROLE, "tasks", "plan.yml")
           if t.get("name") == "Plan | run the change in check mode on the candidate nodes"][0]
    # found from the role's own path, wherever the collection is (a checkout, or installed under another name)
    playbook = trust_as_template(run["clusterforge.gpu.rolling_plan_run"]["playbook"])
    installed = "/usr/share/ansible/collections/ansible_collections/clusterforge/gpu"
    for root, playbook_dir in ((ROOT, "/somewhere/else"), (installed, ROOT)):
        templar = Templar(loader=DataLoader(), variables={"role_path": root + "/roles/rolling",
                                                          "playbook_dir": playbook_dir})
        assert templar.template(playbook) == root + "/playbooks/rolling_apply.yml"
    assert os.path.isfile(os.path.join(ROLE, "..", "..", "playbooks", "rolling_apply.yml"))
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
    refuse = plan[0]["ansible.builtin.assert"]["that"]
    assert _templar().evaluate_conditional(trust_as_template(refuse)) is False  # preflight skipped: no plan
    assert _templar(__preflight_passed=True).evaluate_conditional(trust_as_template(refuse)) is True
    run = [t for t in plan if t.get("name") == "Plan | run the change in check mode on the candidate nodes"][0]
    assert run["clusterforge.gpu.rolling_plan_run"]["plan_vars"]["__preflight_passed"] is True


def _templar(**variables):
    return Templar(loader=DataLoader(), variables=variables)


def test_the_drain_reason_and_the_failure_message_are_unchanged():
    """The hold phase's drain reason and message, rendered by Ansible's templar as the rescue renders them."""
    assert _yaml(ROLE, "vars", "main.yml")["__rolling_prefix"] == "cf-roll:"
    hold = _yaml(ROLE, "tasks", "hold.yml")
    (keep,) = [t for t in hold if "clusterforge.gpu.slurm_node" in t]
    (stop,) = [t for t in hold if "ansible.builtin.fail" in t]
    failed = {"msg": "dcgmi diag  level 1:\n software on GPU 3 " + "x" * 200}
    for step in ("dcgm-diag", "state", None):
        variables = {"__rolling_reason": "cf-roll:20261125T100000Z", "__rolling_plan_run_id": "20261125T100000Z",
                     "inventory_hostname": "gpu02", "ansible_failed_result": failed}
        if step is not None:
            variables["__rolling_step"] = step
        tmpl = _templar(**variables)
        # no drain over a node that was not drained yet (a failure before the first step, or in the state step)
        assert tmpl.evaluate_conditional(trust_as_template(keep["when"])) is (step == "dcgm-diag"), step
        reason = tmpl.template(trust_as_template(keep["clusterforge.gpu.slurm_node"]["reason"]))
        assert reason.startswith("cf-roll:20261125T100000Z FAILED %s: dcgmi diag level 1: software on GPU 3 xxx"
                                 % (step or "state")), reason
        assert reason.endswith("...") and len(reason) < len("cf-roll:20261125T100000Z FAILED dcgm-diag: ") + 151
        assert tmpl.template(trust_as_template(keep["clusterforge.gpu.slurm_node"]["reason_prefix"])) == \
            "cf-roll:20261125T100000Z"
        msg = " ".join(tmpl.template(trust_as_template(stop["ansible.builtin.fail"]["msg"])).split())
        assert msg.startswith("Rolling change stopped: gpu02 failed at '%s': dcgmi diag level 1: software on GPU 3"
                              % (step or "state")), msg
        assert "It stays drained (cf-roll:20261125T100000Z FAILED ...)" in msg
        assert msg.endswith("re-run with -e rolling_run_id=20261125T100000Z: that re-run adopts this drain and "
                            "finishes the work."), msg
    gate = _yaml(ROLE, "tasks", "gate.yml")
    steps = [t["ansible.builtin.set_fact"]["__rolling_step"] for t in gate[0]["block"]
             if "__rolling_step" in (t.get("ansible.builtin.set_fact") or {})]
    assert steps == ["slurmd-registered", "gres-count", "dcgm-diag", "tuned-values", "health-check", "nccl-test"]
    # the gate judges the node for real only: check mode changed nothing there to judge
    for check_mode in (True, False):
        assert _templar(ansible_check_mode=check_mode).evaluate_conditional(
            trust_as_template(gate[0]["when"])) is not check_mode
