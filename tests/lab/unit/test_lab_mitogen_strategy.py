"""The lab's Mitogen strategy (tests/lab/strategy_plugins/cf_mitogen_linear.py) lists collections once per run.

Mitogen's planner called ansible.collections.list.list_collection_dirs() in every forked worker that ran a module
from a collection. The wrapper replaces that function with one that scans once and serves the result after; these
tests check that the planner's own call goes through it, and that calls with arguments still reach the original.
"""

import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PLUGIN = os.path.join(ROOT, "tests", "lab", "strategy_plugins", "cf_mitogen_linear.py")

planner = pytest.importorskip("ansible_mitogen.planner")
collections_list = pytest.importorskip("ansible.collections.list")


class _Invocation:
    def __init__(self):
        self._extra_sys_paths = set()


@pytest.fixture
def scans(monkeypatch):
    calls = []

    def fake_list_collection_dirs(search_paths=None, coll_filter=None, artifacts_manager=None, dedupe=True):
        calls.append((search_paths, coll_filter))
        yield b"/opt/collections/ansible_collections/example/one"
        yield b"/opt/collections/ansible_collections/example/two"

    monkeypatch.setattr(collections_list, "list_collection_dirs", fake_list_collection_dirs)
    spec = importlib.util.spec_from_file_location("cf_mitogen_linear_under_test", PLUGIN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return calls


def test_the_planner_scans_collections_once(scans):
    first, second = _Invocation(), _Invocation()
    planner._load_collections(first)
    planner._load_collections(second)
    expected = {"/opt/collections/ansible_collections/example/one", "/opt/collections/ansible_collections/example/two"}
    assert first._extra_sys_paths == expected
    assert second._extra_sys_paths == expected
    assert len(scans) == 1


def test_calls_with_arguments_reach_the_original(scans):
    assert list(collections_list.list_collection_dirs()) == list(collections_list.list_collection_dirs())
    assert len(scans) == 1
    list(collections_list.list_collection_dirs(search_paths=["/elsewhere"]))
    list(collections_list.list_collection_dirs(coll_filter="example.one"))
    assert scans[1:] == [(["/elsewhere"], None), (None, "example.one")]
