# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every task that runs a command on a node has a time limit (issue 38): an ansible.builtin.command, shell, raw or
script task in roles/*/tasks, roles/*/handlers or playbooks/ needs the ``timeout:`` task keyword, or ``async:``
(its own limit). A hung tool (nvidia-smi in D state after a GPU fell off the bus) must fail its host, not stall
the play. Tasks delegated to the controller (``delegate_to: localhost``) run no tool on a node and are exempt."""

import glob
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMAND_MODULES = frozenset("ansible.builtin.%s" % m for m in ("command", "shell", "raw", "script")) | frozenset(
    ("command", "shell", "raw", "script", "ansible.legacy.command", "ansible.legacy.shell"))
BLOCK_KEYS = ("block", "rescue", "always")


def task_files():
    patterns = ("roles/*/tasks/**/*.yml", "roles/*/handlers/**/*.yml", "playbooks/**/*.yml")
    files = set()
    for pattern in patterns:
        files.update(glob.glob(os.path.join(ROOT, pattern), recursive=True))
    return sorted(files)


def _tasks(items, where):
    """Every task in a list of tasks or plays (blocks and a play's tasks/handlers/pre_tasks/post_tasks walked)."""
    for item in items or []:
        if not isinstance(item, dict):
            continue
        if any(k in item for k in BLOCK_KEYS):
            for key in BLOCK_KEYS:
                yield from _tasks(item.get(key), where)
            continue
        if "hosts" in item or "import_playbook" in item or "ansible.builtin.import_playbook" in item:
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from _tasks(item.get(key), where)
            continue
        yield item


def runs_a_command_on_a_node(task):
    if not any(m in task for m in COMMAND_MODULES):
        return False
    return str(task.get("delegate_to", "")).strip() not in ("localhost", "127.0.0.1")


def has_time_limit(task):
    return "timeout" in task or "async" in task


def missing_time_limits(path):
    with open(path) as handle:
        data = yaml.safe_load(handle)
    if not isinstance(data, list):
        return []
    return ["%s: %s" % (os.path.relpath(path, ROOT), task.get("name", "(unnamed)"))
            for task in _tasks(data, path) if runs_a_command_on_a_node(task) and not has_time_limit(task)]


def test_the_scan_finds_task_files_and_command_tasks():
    files = task_files()
    assert len(files) > 20
    commands = 0
    for path in files:
        with open(path) as handle:
            data = yaml.safe_load(handle)
        if isinstance(data, list):
            commands += sum(1 for t in _tasks(data, path) if runs_a_command_on_a_node(t))
    assert commands > 10, "the scan must see the roles' command tasks"


def test_every_command_task_on_a_node_has_a_time_limit():
    missing = [m for path in task_files() for m in missing_time_limits(path)]
    assert not missing, "tasks that run a command on a node without timeout: (or async:):\n  " + "\n  ".join(missing)


@pytest.mark.parametrize("task, flagged", [
    ({"name": "x", "ansible.builtin.command": ["nvidia-smi"]}, True),
    ({"name": "x", "ansible.builtin.command": ["nvidia-smi"], "timeout": 60}, False),
    ({"name": "x", "ansible.builtin.shell": "sleep 1", "async": 60, "poll": 5}, False),
    ({"name": "x", "ansible.builtin.raw": "true", "delegate_to": "localhost"}, False),
    ({"name": "x", "ansible.builtin.copy": {"dest": "/x", "content": ""}}, False),
])
def test_the_rule(task, flagged):
    assert (runs_a_command_on_a_node(task) and not has_time_limit(task)) is flagged


def test_a_command_in_a_block_rescue_or_play_is_found(tmp_path):
    path = tmp_path / "t.yml"
    path.write_text(yaml.safe_dump([
        {"hosts": "all", "tasks": [{"block": [{"name": "in block", "ansible.builtin.shell": "x"}],
                                    "rescue": [{"name": "in rescue", "ansible.builtin.command": "y", "timeout": 5}]}]},
    ]))
    assert [m.rsplit(": ", 1)[1] for m in missing_time_limits(str(path))] == ["in block"]


def test_boot_units_that_run_tools_have_a_start_time_limit():
    units = glob.glob(os.path.join(ROOT, "roles/*/templates/**/*.service*"), recursive=True)
    units += glob.glob(os.path.join(ROOT, "roles/*/files/**/*.service"), recursive=True)
    missing = []
    for path in [u for u in units if os.path.isfile(u)]:
        with open(path) as handle:
            text = handle.read()
        if "ExecStart" in text and "Type=oneshot" in text and "TimeoutStartSec=" not in text:
            missing.append(os.path.relpath(path, ROOT))
    assert not missing, "oneshot units without TimeoutStartSec=: %s" % missing
