"""Roles and playbooks read facts as ansible_facts['...'], never as injected ansible_* variables.

ansible.cfg sets inject_facts_as_vars = False (less controller CPU on every task and host), and ansible-core is
deprecating injected facts. A role that used, say, ansible_hostname would then fail on an undefined variable, so
this test fails first: every ansible_* name in our YAML and templates must be one of Ansible's special
variables or a connection variable.
"""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCANNED = ["roles", "playbooks", "site.yml", os.path.join("tests", "lab")]
SPECIAL = {
    "ansible_facts", "ansible_check_mode", "ansible_diff_mode", "ansible_managed", "ansible_failed_result",
    "ansible_failed_task", "ansible_skip_tags", "ansible_run_tags", "ansible_limit", "ansible_playbook_python",
    "ansible_play_hosts", "ansible_play_hosts_all", "ansible_play_batch", "ansible_play_name", "ansible_job_id",
    "ansible_inventory_sources", "ansible_loop", "ansible_loop_var", "ansible_index_var", "ansible_parent_role_names",
    "ansible_role_names", "ansible_search_path", "ansible_config_file", "ansible_verbosity", "ansible_version",
    "ansible_local", "ansible_forks", "ansible_collection_name", "ansible_dependent_role_names", "ansible_play_role_names",
}
CONNECTION = re.compile(r"ansible_(host|port|user|connection|python_interpreter|become\w*|ssh_\w*|password|"
                        r"private_key_file|shell_\w*|remote_tmp|timeout|pipelining|podman_\w*|docker_\w*)$")
NAME = re.compile(r"(?<![\w/.-])ansible_[a-z0-9_]+\b(?!/)")


def _files():
    for entry in SCANNED:
        path = os.path.join(ROOT, entry)
        if os.path.isfile(path):
            yield path
            continue
        for dirpath, dirnames, filenames in os.walk(path):
            dirnames[:] = [d for d in dirnames if d not in ("__pycache__", "files")]
            for name in filenames:
                if name.endswith((".yml", ".yaml", ".j2")):
                    yield os.path.join(dirpath, name)


def test_no_role_or_playbook_reads_an_injected_fact():
    found = []
    for path in _files():
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if line.lstrip().startswith("#"):
                    continue
                for name in NAME.findall(line):
                    if name not in SPECIAL and not CONNECTION.match(name):
                        found.append("%s:%d: %s" % (os.path.relpath(path, ROOT), lineno, name))
    assert not found, "injected fact names (use ansible_facts['...']):\n" + "\n".join(found)


def test_the_scan_sees_an_injected_fact():
    assert NAME.findall("when: ansible_hostname == 'gpu01'") == ["ansible_hostname"]
    assert NAME.findall("path: ansible_collections/clusterforge/gpu") == []
    assert not CONNECTION.match("ansible_distribution") and CONNECTION.match("ansible_host")


def test_ansible_cfg_does_not_inject_facts():
    with open(os.path.join(ROOT, "ansible.cfg"), encoding="utf-8") as f:
        assert re.search(r"^inject_facts_as_vars\s*=\s*False\s*$", f.read(), re.M)
