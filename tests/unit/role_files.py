"""Readers shared by the tests that keep a role's playbook wrapper, entry points and defaults in step."""

import os

import yaml


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
