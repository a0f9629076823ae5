# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""common_os's site repositories on apt: a repository marked absent has exactly the files removed that the role
writes for a present one (before, the removal's paths kept a literal \\1 and removed nothing)."""

import os

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                    "roles", "common_os")
REPOS = [{"name": "slurm-site", "uris": "https://repo.example/slurm", "suites": "bookworm", "components": "main",
          "pin_packages": ["slurmd"]},
         {"name": "mirror", "uris": "https://mirror.example", "suites": "bookworm", "components": "main",
          "state": "present"},
         {"name": "old-slurm", "uris": "https://old.example", "suites": "bookworm", "components": "main",
          "state": "absent"},
         {"name": "old.mirror_2", "uris": "https://old2.example", "suites": "bookworm", "components": "main",
          "state": "absent"}]


def _trusted(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return dict((k, _trusted(v)) for k, v in value.items())
    if isinstance(value, list):
        return [_trusted(v) for v in value]
    return value


def _load(*parts):
    with open(os.path.join(ROLE, *parts)) as f:
        return yaml.safe_load(f)


def _task(name):
    (task,) = [t for t in _load("tasks", "repositories.yml") if t["name"] == name]
    return task


def templar(**extra):
    variables = _trusted(_load("vars", "main.yml"))
    variables.update(common_os_package_repositories=REPOS, ansible_check_mode=False)
    variables.update(extra)
    return Templar(loader=DataLoader(), variables=variables)


def render(tmpl, text, **item):
    if item:
        tmpl = Templar(loader=DataLoader(), variables=dict(tmpl.available_variables, **item))
    return tmpl.template(trust_as_template(text))


def test_absent_repositories_lose_exactly_the_files_a_present_one_gets():
    tmpl = templar()
    write = _task("Write the site package repositories (apt)")
    pin = _task("Prefer the site repositories for the packages they name (apt)")
    remove = _task("Remove the site repositories marked absent (apt)")
    written = [render(tmpl, write["ansible.builtin.template"]["dest"], item=repo)
               for repo in render(tmpl, write["loop"])]
    pinned = [render(tmpl, pin["ansible.builtin.template"]["dest"], item=repo) for repo in render(tmpl, pin["loop"])]
    assert written == ["/etc/apt/sources.list.d/clusterforge-slurm-site.sources",
                       "/etc/apt/sources.list.d/clusterforge-mirror.sources"]
    assert pinned == ["/etc/apt/preferences.d/clusterforge-slurm-site"]
    removed = [render(tmpl, remove["ansible.builtin.file"]["path"], item=item) for item in render(tmpl, remove["loop"])]
    assert removed == ["/etc/apt/sources.list.d/clusterforge-old-slurm.sources",
                       "/etc/apt/preferences.d/clusterforge-old-slurm",
                       "/etc/apt/sources.list.d/clusterforge-old.mirror_2.sources",
                       "/etc/apt/preferences.d/clusterforge-old.mirror_2"]
    # the same names present would have been written at exactly those paths
    for repo in REPOS[2:]:
        present = dict(repo, state="present", pin_packages=["x"])
        assert render(tmpl, write["ansible.builtin.template"]["dest"], item=present) in removed
        assert render(tmpl, pin["ansible.builtin.template"]["dest"], item=present) in removed
