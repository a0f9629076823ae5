# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""converged_inputs: the digest of a run's inputs changes with the inventory, the extra variables and the terms."""

import pytest

from ansible.errors import AnsibleLookupError
from ansible.parsing.dataloader import DataLoader

from ansible_collections.clusterforge.gpu.plugins.lookup import converged_inputs


def digest(tmp_path, monkeypatch, extra=None, terms=("munge key abc",), ignore=("cluster_converged_skip",), cli=None):
    monkeypatch.setattr(converged_inputs, "load_extra_vars", lambda loader: dict(extra or {}))
    monkeypatch.setattr(converged_inputs.context, "CLIARGS", dict({"extra_vars": ["x"]}, **(cli or {})))
    lookup = converged_inputs.LookupModule(loader=DataLoader())
    variables = {"ansible_inventory_sources": [str(tmp_path / "inventory")], "playbook_dir": str(tmp_path / "play")}
    return lookup.run(list(terms), variables, ignore_extra_vars=list(ignore))[0]


def test_the_digest_follows_every_input(tmp_path, monkeypatch):
    inv = tmp_path / "inventory" / "group_vars" / "all"
    inv.mkdir(parents=True)
    (inv / "cluster.yml").write_text("cluster_gpu_count_per_node: 8\n")
    first = digest(tmp_path, monkeypatch)
    assert len(first) == 64 and first == digest(tmp_path, monkeypatch)
    # an inventory edit
    (inv / "cluster.yml").write_text("cluster_gpu_count_per_node: 4\n")
    second = digest(tmp_path, monkeypatch)
    assert second != first
    # a new inventory file, and group_vars next to the playbook
    (inv / "more.yml").write_text("{}\n")
    third = digest(tmp_path, monkeypatch)
    assert third != second
    (tmp_path / "play" / "group_vars").mkdir(parents=True)
    (tmp_path / "play" / "group_vars" / "all.yml").write_text("nccl_debug: WARN\n")
    fourth = digest(tmp_path, monkeypatch)
    assert fourth != third
    # extra variables, except the ignored switch
    assert digest(tmp_path, monkeypatch, extra={"gpu_tuning_power_limit_watts": 600}) != fourth
    assert digest(tmp_path, monkeypatch, extra={"cluster_converged_skip": False}) == fourth
    # a run started at a task, or step by step, is not complete
    assert digest(tmp_path, monkeypatch, cli={"start_at_task": "Write nccl.conf"}) != fourth
    assert digest(tmp_path, monkeypatch, cli={"step": True}) != fourth
    assert digest(tmp_path, monkeypatch, cli={"step": False, "start_at_task": None}) == fourth
    # the caller's terms (the controller's munge key)
    assert digest(tmp_path, monkeypatch, terms=("munge key def",)) != fourth


def test_the_collection_itself_is_part_of_the_digest(tmp_path, monkeypatch):
    (tmp_path / "inventory").mkdir()
    real = digest(tmp_path, monkeypatch)
    fake = tmp_path / "collection"
    (fake / "roles" / "x").mkdir(parents=True)
    (fake / "roles" / "x" / "main.yml").write_text("---\n")
    monkeypatch.setattr(converged_inputs, "collection_root", lambda: str(fake))
    other = digest(tmp_path, monkeypatch)
    (fake / "roles" / "x" / "main.yml").write_text("--- # edited\n")
    assert other != real and digest(tmp_path, monkeypatch) != other


def test_bad_options_are_rejected(tmp_path, monkeypatch):
    lookup = converged_inputs.LookupModule(loader=DataLoader())
    with pytest.raises(AnsibleLookupError, match="ignore_extra_vars must be a list"):
        lookup.run([], {}, ignore_extra_vars="cluster_converged_skip")
    with pytest.raises(AnsibleLookupError, match="unknown option"):
        lookup.run([], {}, ignore_extra_var=["x"])
