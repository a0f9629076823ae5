# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter import hostlist as hostlist_filter

FILTERS = hostlist_filter.FilterModule().filters()
FILTER_DIR = os.path.dirname(hostlist_filter.__file__)


def test_filter_module_exposes_both_filters():
    assert set(FILTERS) == {"hostlist_expand", "hostlist_compress"}


@pytest.mark.parametrize("value, expected", [
    ("gpu[01-03]", ["gpu01", "gpu02", "gpu03"]),
    (["gpu[01-02]", "head1"], ["gpu01", "gpu02", "head1"]),
    (("r[1-2]n1",), ["r1n1", "r2n1"]),
    (b"gpu[1-2]", ["gpu1", "gpu2"]),
    ([], []),
])
def test_hostlist_expand(value, expected):
    assert FILTERS["hostlist_expand"](value) == expected


@pytest.mark.parametrize("value, expected", [
    (["gpu02", "gpu01", "gpu03", "head01"], "gpu[01-03],head01"),
    (["gpu[01-02]", "gpu03"], "gpu[01-03]"),
    ("gpu05", "gpu05"),
    (["gpu1", "gpu1"], "gpu1"),
])
def test_hostlist_compress(value, expected):
    assert FILTERS["hostlist_compress"](value) == expected


@pytest.mark.parametrize("name, value", [
    ("hostlist_expand", "gpu[1-3"),
    ("hostlist_expand", "gpu[3-1]"),
    ("hostlist_expand", ""),
    ("hostlist_expand", 42),
    ("hostlist_expand", {"gpu": 1}),
    ("hostlist_expand", ["gpu1", 7]),
    ("hostlist_compress", []),
    ("hostlist_compress", ["gpu[1-"]),
    ("hostlist_compress", 42),
    ("hostlist_compress", [None]),
])
def test_errors_are_filter_errors(name, value):
    with pytest.raises(AnsibleFilterError) as excinfo:
        FILTERS[name](value)
    assert name in str(excinfo.value)


@pytest.mark.parametrize("name", ["hostlist_expand", "hostlist_compress"])
def test_docs_beside_the_filter(name):
    with open(os.path.join(FILTER_DIR, name + ".yml")) as f:
        doc = yaml.safe_load(f)
    assert doc["DOCUMENTATION"]["name"] == name
    assert "_input" in doc["DOCUMENTATION"]["options"]
    assert "clusterforge.gpu.%s" % name in doc["EXAMPLES"]
    assert "_value" in doc["RETURN"]


def test_filters_work_in_a_playbook_run(tmp_path):
    """The FQCN filters resolve through Ansible's collection loader (plugin routing, docs beside the file)."""
    ansible = os.path.join(os.path.dirname(sys.executable), "ansible")
    if not os.path.exists(ansible):
        pytest.skip("ansible CLI not installed beside this Python")
    repo_root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
    collections_path = os.path.join(repo_root, ".cache", "collections")  # conftest.py makes the link
    assert os.path.isdir(os.path.join(collections_path, "ansible_collections", "clusterforge", "gpu"))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=collections_path, ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_CONFIG=str(tmp_path / "none.cfg"),
               ANSIBLE_LOCAL_TEMP=str(tmp_path), ANSIBLE_HOME=str(tmp_path))
    expr = "{{ ['gpu02', 'gpu01', 'head1'] | clusterforge.gpu.hostlist_compress }}|" \
           "{{ 'r[1-2]n[1-2]' | clusterforge.gpu.hostlist_expand | join(' ') }}"
    proc = subprocess.run([ansible, "localhost", "-c", "local", "-i", "localhost,", "-m", "ansible.builtin.debug",
                           "-a", "msg=" + expr], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    msg = result["plays"][0]["tasks"][0]["hosts"]["localhost"]["msg"]
    assert msg == "gpu[01-02],head1|r1n1 r1n2 r2n1 r2n2"
