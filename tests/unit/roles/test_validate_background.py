"""The validate role's checks that run in the background (async, poll 0) are measurements: starting one changes
nothing, so that a re-run of site.yml reports changed=0 (a clean-clone run caught the DCGM and NCCL launches
reporting changed on every run), and each is waited for by the task right after it, on the job it started."""

import glob
import os

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _tasks(tasks):
    for task in tasks or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def background_tasks():
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", "validate", "tasks", "*.yml"))):
        with open(path) as handle:
            tasks = list(_tasks(yaml.safe_load(handle)))
        for index, task in enumerate(tasks):
            if task.get("poll") == 0:
                yield os.path.basename(path), task, tasks[index + 1] if index + 1 < len(tasks) else None


def test_every_background_check_reports_no_change_and_is_waited_for_next():
    found = list(background_tasks())
    assert len(found) >= 8, [t["name"] for _f, t, _n in found]
    for name, task, wait in found:
        assert task.get("changed_when") is False, (name, task["name"])
        assert wait is not None, (name, task["name"])
        status = wait.get("ansible.builtin.async_status") or wait.get("clusterforge.gpu.async_progress")
        if status is None:  # the ib_write_bw rounds start both sides before waiting for either
            continue
        assert task["register"] in status["jid"], (name, task["name"], wait["name"])
