"""Every role has a README whose variable tables are generated from its argument spec (tests/tools/role_readme.py)
and up to date: edit meta/argument_specs.yml, then run `python tests/tools/role_readme.py`."""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = importlib.util.spec_from_file_location("cf_role_readme", os.path.join(ROOT, "tests", "tools", "role_readme.py"))
role_readme = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(role_readme)

ROLES = sorted(d for d in os.listdir(os.path.join(ROOT, "roles")) if os.path.isdir(os.path.join(ROOT, "roles", d)))


def _readme(role):
    with open(os.path.join(ROOT, "roles", role, "README.md")) as f:
        return f.read()


def _options(options, prefix=""):
    """(table title, option name) of every option and suboption, recursively."""
    for name, opt in options.items():
        yield prefix, name
        if opt.get("options"):
            yield from _options(opt["options"], "%s.%s" % (prefix, name) if prefix else name)


def test_every_role_has_an_argument_spec_and_a_readme():
    assert role_readme.role_names(ROOT) == ROLES
    missing = [r for r in ROLES if not os.path.isfile(os.path.join(ROOT, "roles", r, "README.md"))]
    assert not missing, "roles without README.md (run python tests/tools/role_readme.py): %s" % missing


def test_readmes_are_up_to_date():
    stale = [os.path.relpath(path, ROOT) for _role, path, _text in role_readme.outdated(ROOT)]
    assert not stale, "out of date, run python tests/tools/role_readme.py: %s" % stale


@pytest.mark.parametrize("role", ROLES)
def test_every_option_is_in_its_entry_points_table(role):
    text = _readme(role)
    generated = text[text.index(role_readme.GENERATED):text.index(role_readme.END_GENERATED)]
    spec = role_readme.load_spec(role, ROOT)
    main = generated.split("## Entry point `main`\n", 1)[1].split("\n## ", 1)[0] if "main" in spec else ""
    for ep in spec:
        section = generated.split("## Entry point `%s`\n" % ep, 1)[1].split("\n## ", 1)[0]
        shared, _own = role_readme.shared_with_main(spec, ep)
        sentence = " ".join(section.split("\n\n|", 1)[0].split())
        for title, name in _options(spec[ep].get("options") or {}):
            table = section
            if name in shared and not title:
                # Described once, in main's table; named in this entry point's sentence.
                every = role_readme.SHARED_ALL_TEXT % len(spec["main"]["options"])
                assert every in sentence or "`%s`" % name in sentence.split("as described there:", 1)[1], \
                    (role, ep, name)
                table = main
            elif title and title.split(".")[0] in shared:
                table = main
            if title:
                table = table.split("### Suboptions of `%s`\n" % title, 1)[1].split("\n### ", 1)[0]
            assert "\n| `%s` |" % name in table, (role, ep, title, name)


def test_an_entry_point_names_the_options_it_shares_with_main_and_tables_only_its_own():
    spec = {"main": {"options": {"a": {"type": "int", "description": "A."}, "b": {"type": "str", "description": "B."}}},
            "phase": {"options": {"a": {"type": "int", "description": "A."},
                                  "b": {"type": "str", "description": "B, here otherwise."},
                                  "c": {"type": "bool", "description": "C."}}}}
    assert role_readme.shared_with_main(spec, "phase") == (["a"], {"b": spec["phase"]["options"]["b"],
                                                                   "c": spec["phase"]["options"]["c"]})
    text = role_readme.render_generated("validate", spec, {}, ROOT)
    phase = text.split("## Entry point `phase`\n", 1)[1].split("\n## ", 1)[0]
    assert "Takes these options of the entry point `main`, as described there: `a`." in " ".join(phase.split())
    assert "\n| `b` |" in phase and "\n| `c` |" in phase and "\n| `a` |" not in phase


@pytest.mark.parametrize("role", ROLES)
def test_readme_layout(role):
    text = _readme(role)
    assert text.startswith("# clusterforge.gpu.%s\n" % role)
    positions = [text.index(m) for m in role_readme.MARKERS]
    assert positions == sorted(positions) and all(text.count(m) == 1 for m in role_readme.MARKERS)
    assert "ansible.builtin.import_role:\n        name: clusterforge.gpu.%s\n" % role in text
    assert "`python tests/tools/role_readme.py`" in text


def test_hand_written_part_is_kept_and_text_outside_the_markers_is_refused(tmp_path):
    text = _readme("slurm_compute")
    intro = role_readme.current_intro(text, "README.md")
    assert intro and intro in text and "First GPU job" in intro
    edited = text.replace(role_readme.END_INTRO, "A new line.\n\n" + role_readme.END_INTRO)
    assert role_readme.render("slurm_compute", ROOT, existing=edited).count("A new line.") == 1
    with pytest.raises(role_readme.ReadmeError):
        role_readme.current_intro(text + "\nlost text\n", "README.md")
    # A README written by hand (no markers) becomes the hand-written part, without its title.
    assert role_readme.current_intro("# Title\n\nSome text.\n", "README.md") == "Some text."


def test_cell_escaping():
    assert role_readme.md("a|b <dir>/* `x|y` rolling_* cluster_name") == \
        "a\\|b \\<dir>/\\* `x\\|y` rolling\\_\\* cluster_name"
    assert role_readme.flow(None) == "null" and role_readme.flow("cf-health:") == "'cf-health:'"
    assert role_readme.flow([{"name": "gpu", "default": True}]) == "[{name: gpu, default: true}]"


def test_a_role_in_phases_names_its_playbook_and_where_each_phase_runs():
    phases = role_readme.playbook_phases(ROOT)["rolling"]
    assert [(p[0], p[1], p[4]) for p in phases] == [
        ("plan", "slurm_controller[0]", "rolling_reconfigure.yml")] + [
        (ep, "cf_roll_targets", "rolling_reconfigure.yml") for ep in ("drain", "apply", "gate", "resume", "hold")]
    flat = " ".join(_readme("rolling").split())
    assert "`site.yml` does not run this role: `playbooks/rolling_reconfigure.yml` runs it" in flat
    assert "`ansible-playbook -i <inventory> clusterforge.gpu.rolling_reconfigure`" in flat
    assert "Entry point `plan`: `ansible.builtin.import_role: {name: clusterforge.gpu.rolling, tasks_from: plan}`; " \
           "`playbooks/rolling_reconfigure.yml` runs it on `slurm_controller[0]`" in flat
    # a role with its own play in site.yml keeps site.yml's wording (its entry points imported there)
    assert "rolling" not in role_readme.site_stages(ROOT)
    assert "`site.yml` runs it on `gpu_nodes` in the play" in " ".join(_readme("slurm_compute").split())
