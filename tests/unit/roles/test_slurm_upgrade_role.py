"""The Slurm upgrade is the role clusterforge.gpu.slurm_upgrade, in phases; playbooks/slurm_upgrade.yml only imports
them, in SchedMD's order. These tests keep the wrapper, the role's entry points and its defaults in step."""

import os

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from role_files import load_yaml, read_text, role_imports, run_role_main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = os.path.join(ROOT, "roles", "slurm_upgrade")
PHASES = ["check", "backup", "slurmdbd", "slurmctld", "raise_slurmd_timeout", "slurmd", "restore_slurmd_timeout",
          "clients", "report"]
# Task files that are no entry point (included by the phases).
INTERNAL = ["judged", "packages", "set_vars", "slurmctld_stop"]


_yaml = load_yaml
_text = read_text
_imports = role_imports


def test_the_playbook_imports_the_phases_in_schedmds_order():
    plays = _yaml(ROOT, "playbooks", "slurm_upgrade.yml")
    preflight = plays[0]
    assert preflight["hosts"] == "all" and preflight["any_errors_fatal"] is True
    assert [r["role"] for r in preflight["roles"]] == ["clusterforge.gpu.preflight"]
    phases = []
    for play in plays[1:]:
        keys = {"name", "hosts", "gather_facts", "any_errors_fatal", "serial", "max_fail_percentage", "tasks"}
        assert set(play) <= keys, play["name"]
        for name, tasks_from in _imports(play["tasks"]):
            if name == "clusterforge.gpu.slurm_upgrade":
                phases.append((tasks_from, play["hosts"]))
            else:
                # slurm_controller renders slurm.conf from the GPU nodes' descriptions, as in site.yml
                assert (name, tasks_from, play["hosts"]) == ("clusterforge.gpu.slurm_compute", "facts", "gpu_nodes")
    assert phases == [("check", "slurm_controller:gpu_nodes:slurm_clients"), ("backup", "slurm_controller"),
                      ("slurmdbd", "slurm_controller"), ("slurmctld", "slurm_controller"),
                      ("raise_slurmd_timeout", "slurm_controller"), ("slurmd", "gpu_nodes"),
                      ("restore_slurmd_timeout", "slurm_controller"), ("clients", "slurm_clients"),
                      ("report", "slurm_controller[0]")]


def test_the_check_stops_every_host_and_nothing_before_it_changes_anything():
    plays = _yaml(ROOT, "playbooks", "slurm_upgrade.yml")
    check = plays[1]
    assert _imports(check["tasks"]) == [("clusterforge.gpu.slurm_upgrade", "check")]
    assert check["any_errors_fatal"] is True and check["gather_facts"] is False
    for task in _yaml(ROLE, "tasks", "check.yml"):
        assert "always" in task["tags"], task["name"]
        module = [k for k in task if "." in k][0]
        assert module in ("ansible.builtin.import_tasks", "ansible.builtin.apt", "ansible.builtin.dnf",
                          "clusterforge.gpu.slurm_version_info", "ansible.builtin.set_fact", "ansible.builtin.debug",
                          "ansible.builtin.assert"), module
        if module in ("ansible.builtin.apt", "ansible.builtin.dnf"):
            # only the index is refreshed, nothing is installed
            assert set(task[module]) == {"update_cache"}, task


def test_the_batch_size_fallback_is_the_roles_default():
    batches = [p for p in _yaml(ROOT, "playbooks", "slurm_upgrade.yml") if "serial" in p]
    assert len(batches) == 1 and batches[0]["hosts"] == "gpu_nodes" and batches[0]["max_fail_percentage"] == 0
    default = _yaml(ROLE, "defaults", "main.yml")["slurm_upgrade_slurmd_batch_size"]
    serial = trust_as_template(batches[0]["serial"])
    # the play's keyword is templated before the role's defaults are read: its fallback must be the same value
    assert Templar(loader=DataLoader(), variables={}).template(serial) == default
    assert Templar(loader=DataLoader(), variables={"slurm_upgrade_slurmd_batch_size": 7}).template(serial) == 7


def test_every_phase_is_an_entry_point_with_the_same_options():
    specs = _yaml(ROLE, "meta", "argument_specs.yml")["argument_specs"]
    assert list(specs) == ["main"] + PHASES
    tasks = sorted(os.path.splitext(f)[0] for f in os.listdir(os.path.join(ROLE, "tasks")))
    assert tasks == sorted(["main"] + PHASES + INTERNAL)
    for phase in PHASES:
        assert specs[phase]["options"] == specs["main"]["options"], phase
    text = _text(ROLE, "meta", "argument_specs.yml")
    assert text.count("&slurm_upgrade_options") == 1 and text.count("*slurm_upgrade_options") == len(PHASES)


def test_defaults_and_spec_list_the_same_variables():
    defaults = _yaml(ROLE, "defaults", "main.yml")
    options = _yaml(ROLE, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(options) - {"slurm_upgrade_version"} == set(defaults)
    assert options["slurm_upgrade_version"]["required"] is True and "slurm_upgrade_version" not in defaults
    for name, opt in options.items():
        assert name.startswith("slurm_upgrade_"), name
        if "default" in opt:
            assert opt["default"] == defaults[name], name


def test_every_later_phase_starts_with_the_judgement():
    for phase in PHASES[1:]:
        tasks = _yaml(ROLE, "tasks", phase + ".yml")
        assert tasks[0]["ansible.builtin.import_tasks"] == "judged.yml", phase


def test_slurm_conf_has_one_writer():
    """SlurmdTimeout is raised and restored through slurm_controller's own config tasks, never written here."""
    for name in os.listdir(os.path.join(ROLE, "tasks")):
        text = _text(ROLE, "tasks", name)
        assert "slurm.conf" not in text or "slurm_controller" in text, name
        assert "lineinfile" not in text and "ansible.builtin.template" not in text, name
    for phase in ("raise_slurmd_timeout", "restore_slurmd_timeout"):
        text = _text(ROLE, "tasks", phase + ".yml")
        assert "name: clusterforge.gpu.slurm_controller\n        tasks_from: config" in text, phase


def test_the_main_entry_point_refuses_and_names_the_playbook(tmp_path):
    rc, out = run_role_main(ROOT, tmp_path, "clusterforge.gpu.slurm_upgrade", {"slurm_upgrade_version": "24.11.1"})
    assert rc == 2, out
    assert "Refuse to run the role without a phase" in out and "failed=1" in out, out
    assert "phases from playbooks/slurm_upgrade.yml (ansible-playbook clusterforge.gpu.slurm_upgrade -e " \
           "slurm_upgrade_version=<version>)" in out, out
    assert "Nothing was changed." in out and "changed=0" in out, out
