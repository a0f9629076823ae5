"""Readers shared by the tests that keep a role's playbook wrapper, entry points and defaults in step."""

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys

import yaml


def load_script(name, path):
    """A program without a .py suffix (an emulator, a role's helper script) imported as module `name`."""
    loader = importlib.machinery.SourceFileLoader(name, path)
    spec = importlib.util.spec_from_loader(loader.name, loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def load_yaml(*parts):
    with open(os.path.join(*parts)) as f:
        return yaml.safe_load(f)


def read_text(*parts):
    with open(os.path.join(*parts)) as f:
        return f.read()


def role_imports(tasks):
    """(name, tasks_from) of every import_role in a task list, blocks included, in order."""
    out = []
    for task in tasks or []:
        args = task.get("ansible.builtin.import_role")
        if args:
            out.append((args["name"], args.get("tasks_from")))
        for key in ("block", "rescue", "always"):
            out += role_imports(task.get(key))
    return out


def _trusted(value):
    """YAML read from a role's files, its strings marked as templates Ansible may render (as Ansible's loader does)."""
    from ansible.template import trust_as_template  # pylint: disable=import-outside-toplevel

    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: _trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    return value


def role_templar(root, role, **variables):
    """Ansible's templar over a role's defaults/main.yml and vars/main.yml (its vars win, as in a play), then
    `variables` (as the inventory's or -e's would, for the test)."""
    from ansible.parsing.dataloader import DataLoader  # pylint: disable=import-outside-toplevel
    from ansible.template import Templar  # pylint: disable=import-outside-toplevel

    merged = {}
    for name in ("defaults", "vars"):
        path = os.path.join(root, "roles", role, name, "main.yml")
        if os.path.isfile(path):
            merged.update(_trusted(load_yaml(path) or {}))
    merged.update(_trusted(variables))
    return Templar(loader=DataLoader(), variables=merged)


def render_role_template(root, role, template, **variables):
    """A role's template (path under its templates/) rendered as ansible.builtin.template renders it: trim_blocks on,
    lstrip_blocks off, backslashes kept, ansible_managed set to Ansible's default unless given."""
    from ansible.template import trust_as_template  # pylint: disable=import-outside-toplevel

    variables.setdefault("ansible_managed", "Ansible managed")
    templar = role_templar(root, role, **variables)
    text = trust_as_template(read_text(root, "roles", role, "templates", template))
    out = templar.template(text, escape_backslashes=False,
                           overrides={"trim_blocks": True, "lstrip_blocks": False, "newline_sequence": "\n"})
    return "" if out is None else out


def run_role_main(root, tmp_path, role, extra=None):
    """ansible-playbook (the checkout's collection) running `role` without tasks_from on localhost, `extra` as -e;
    (rc, its output with the whitespace folded)."""
    (tmp_path / "play.yml").write_text(yaml.safe_dump([{
        "name": "The role on its own", "hosts": "localhost", "gather_facts": False,
        "tasks": [{"name": "Run the role's main", "ansible.builtin.include_role": {"name": role}}]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(root, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(root, ".cache", "collections"), ANSIBLE_CACHE_PLUGIN="memory",
               ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0")
    argv = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", "-c", "local",
            str(tmp_path / "play.yml"), "-e", json.dumps(dict(extra or {}, ansible_python_interpreter=sys.executable))]
    proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, " ".join((proc.stdout + proc.stderr).split())
