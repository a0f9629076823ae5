"""playbooks/site.yml is the architecture in one file: its plays must follow the fixed order.

The root site.yml of a checkout only imports it (the installed collection runs it as clusterforge.gpu.site)."""

import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ORDER = ["preflight", "common_os", "nvidia_driver", "dcgm", "pcie_acs", "bios", "gpu_tuning", "slurm_controller",
         "slurm_compute", "lustre_server", "lustre_client", "nccl", "monitoring", "validate"]


def _stages():
    with open(os.path.join(ROOT, "playbooks", "site.yml")) as f:
        plays = yaml.safe_load(f)
    stages = []
    for play in plays:
        imported = play.get("ansible.builtin.import_playbook", play.get("import_playbook"))
        if imported:
            name = os.path.splitext(os.path.basename(imported))[0]
            stages.append(name)
            continue
        for role in play.get("roles", []):
            name = role["role"] if isinstance(role, dict) else role
            stages.append(name.split(".")[-1])
    return stages, plays


def test_stages_follow_the_fixed_order():
    stages = _stages()[0]
    known = [s for s in stages if s in ORDER]
    assert known == sorted(known, key=ORDER.index), stages
    assert len(known) == len(set(known)), "a stage appears twice: %s" % stages


def test_every_stage_is_a_known_stage():
    stages = _stages()[0]
    assert set(stages) <= set(ORDER), set(stages) - set(ORDER)


def test_preflight_first_and_fatal():
    stages, plays = _stages()
    assert stages[0] == "preflight"
    assert plays[0]["hosts"] == "all"
    assert plays[0]["any_errors_fatal"] is True
    assert plays[0]["gather_facts"] is False


# Roles that are not a stage of site.yml: each runs in phases from its own playbook (a day-two operation).
OWN_PLAYBOOK = {"rolling": "rolling_reconfigure.yml", "slurm_upgrade": "slurm_upgrade.yml"}


def test_every_role_of_the_collection_with_tasks_is_in_site_yml():
    stages = _stages()[0]
    roles = sorted(d for d in os.listdir(os.path.join(ROOT, "roles"))
                   if os.path.exists(os.path.join(ROOT, "roles", d, "tasks", "main.yml")))
    missing = set(roles) - set(stages) - set(OWN_PLAYBOOK)
    assert not missing, "roles missing from site.yml: %s" % missing
    assert not set(OWN_PLAYBOOK) & set(stages)


def test_roles_outside_site_yml_are_run_by_their_playbook():
    for role, playbook in OWN_PLAYBOOK.items():
        with open(os.path.join(ROOT, "playbooks", playbook)) as f:
            text = f.read()
        assert "name: clusterforge.gpu.%s\n" % role in text, (role, playbook)


def test_roles_are_referenced_by_fqcn():
    plays = _stages()[1]
    for play in plays:
        for role in play.get("roles", []):
            name = role["role"] if isinstance(role, dict) else role
            assert name.startswith("clusterforge.gpu."), name


def test_validation_is_the_last_stage_and_a_playbook():
    stages, plays = _stages()
    assert stages[-1] == "validate"
    assert plays[-1]["ansible.builtin.import_playbook"] == "validate.yml"
    assert os.path.exists(os.path.join(ROOT, "playbooks", "validate.yml"))


# One source of truth: no play may leave a host out of the role plays because of a record of an earlier run (the
# converged-node cache was removed). Every role play runs on whole groups; --limit and --tags are the targeted runs.
def test_no_role_play_excludes_hosts_by_a_cached_verdict():
    plays = _stages()[1]
    for play in plays:
        if play.get("roles"):
            assert "!" not in play["hosts"] and "&" not in play["hosts"], play["hosts"]
    text = open(os.path.join(ROOT, "playbooks", "site.yml")).read()
    assert "converged" not in text and "cf_converged" not in text
    assert not os.path.exists(os.path.join(ROOT, "plugins", "modules", "converged_state.py"))
    assert not os.path.exists(os.path.join(ROOT, "plugins", "lookup", "converged_inputs.py"))


def test_preflight_knows_the_hosts_of_every_role_play():
    """Preflight validates each role's variables on the hosts that role's play runs on (ROLE_HOSTS)."""
    from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import ROLE_HOSTS

    plays = _stages()[1]
    for play in plays:
        for role in play.get("roles", []):
            name = (role["role"] if isinstance(role, dict) else role).split(".")[-1]
            groups = [g for g in play["hosts"].split(":") if g]
            assert tuple(groups) == ROLE_HOSTS[name], (name, play["hosts"], ROLE_HOSTS[name])


def test_gpu_nodes_describe_themselves_in_parallel_right_before_the_controller():
    """The controller's node lines come from a play on the GPU nodes (parallel), not a serial delegated loop."""
    plays = _stages()[1]
    names = [p.get("name", "") for p in plays]
    facts = [i for i, n in enumerate(names) if n.startswith("Slurm node facts")]
    assert len(facts) == 1, names
    play = plays[facts[0]]
    following = plays[facts[0] + 1]
    assert [r["role"] for r in following.get("roles", [])] == ["clusterforge.gpu.slurm_controller"]
    assert play["hosts"] == "gpu_nodes" and play["gather_facts"] is False and "roles" not in play
    assert {"role::slurm_controller", "role::slurm_compute"} <= set(play["tags"])
    assert "serial" not in play
    (task,) = play["tasks"]
    assert task["ansible.builtin.import_role"] == {"name": "clusterforge.gpu.slurm_compute", "tasks_from": "facts"}
    nodes = open(os.path.join(ROOT, "roles", "slurm_controller", "tasks", "nodes.yml")).read()
    assert "delegate_to" not in nodes


def test_root_site_yml_only_imports_the_collection_playbook():
    with open(os.path.join(ROOT, "site.yml")) as f:
        plays = yaml.safe_load(f)
    assert [p.get("ansible.builtin.import_playbook") for p in plays] == ["playbooks/site.yml"]
