# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The storage test's aggregate: every node's real storage_probe measurement, all bytes over the shared window; a
node whose test failed is failed by the judge, never counted and never skipped."""

import os

import pytest

from ansible.errors import AnsibleFilterError

from cf_module_helper import run_main

from ansible_collections.clusterforge.gpu.plugins.filter.validation import storage_aggregate
from ansible_collections.clusterforge.gpu.plugins.modules import storage_probe
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.validation_judge import validation_judge

P = "/lustre/hgx01/checkpoints/validate"
GIB = 1 << 30


def _m(started, written, read_done, nbytes=GIB):
    return {"path": P, "write": {"bytes": nbytes, "seconds": written - started, "gbytes_per_s": 1.0},
            "read": {"bytes": nbytes, "seconds": read_done - written, "gbytes_per_s": 1.0, "direct": True},
            "started": started, "written": written, "read_done": read_done}


def test_all_bytes_over_the_window_from_the_first_start_to_the_last_end():
    got = storage_aggregate([_m(100.0, 102.0, 103.0), _m(100.5, 104.0, 106.0), None], P)
    assert got["path"] == P and got["nodes"] == 2
    assert got["write_gbytes_per_s"] == pytest.approx(2 * GIB / 4.0 / 1e9)    # 100.0 .. 104.0
    assert got["read_gbytes_per_s"] == pytest.approx(2 * GIB / 4.0 / 1e9)     # 102.0 .. 106.0


def test_failed_and_missing_nodes_are_left_out_and_none_left_is_null():
    assert storage_aggregate([None, {"path": P, "error": "No space left on device"}], P) is None
    assert storage_aggregate([], P) is None and storage_aggregate(None, P) is None
    got = storage_aggregate([{"path": P, "error": "EIO"}, _m(1.0, 2.0, 3.0)], P)
    assert got["nodes"] == 1


@pytest.mark.parametrize("entries, words", [
    ("x", "expects a list"),
    ([{"write": {"bytes": 1}, "read": {"bytes": 1}, "written": 2, "read_done": 3}], "no started"),
    ([{"write": {}, "read": {"bytes": 1}, "started": 1, "written": 2, "read_done": 3}], "no write.bytes"),
    ([_m(5.0, 5.0, 6.0)], "write window is 0.0 s"),
])
def test_bad_input_is_named(entries, words):
    with pytest.raises(AnsibleFilterError, match=words):
        storage_aggregate(entries, P)


def test_a_node_whose_test_failed_fails_both_checks_with_its_message():
    report = validation_judge({"cluster": "x", "nodes": {
        "gpu01": {"storage": {"path": P, "error": "%s: the storage test failed: Input/output error" % P}}}})
    checks = [c for c in report["checks"] if c["id"] in ("storage.write", "storage.read")]
    assert [c["status"] for c in checks] == ["fail", "fail"]
    assert all("gpu01: %s: the storage test failed: Input/output error" % P == c["message"]
               for c in checks)


@pytest.mark.skipif(os.geteuid() != 0, reason="storage_probe writes as root")
def test_two_real_probes_aggregate_and_are_judged(tmp_path):
    path = str(tmp_path / "validate")
    measured = []
    for host in ("gpu01", "gpu02"):
        r = run_main(storage_probe, {"path": path, "file_name": "cf-validate-%s.bin" % host, "size_mib": 2,
                                     "block_size_kib": 512})
        assert not r.get("failed"), r
        measured.append(r["measured"])
    agg = storage_aggregate(measured, path)
    assert agg["nodes"] == 2 and agg["write_gbytes_per_s"] > 0 and agg["read_gbytes_per_s"] > 0
    report = validation_judge({"cluster": "x", "storage_aggregate": agg,
                               "nodes": {"gpu01": {"storage": measured[0]}, "gpu02": {"storage": measured[1]}}},
                              {"storage_write_gbytes_per_s_per_node": 1e-6, "storage_read_gbytes_per_s_per_node": 1e-6,
                               "storage_write_gbytes_per_s_aggregate": 1e-6, "storage_read_gbytes_per_s_aggregate": 1e-6})
    storage = [c for c in report["checks"] if c["id"].startswith("storage.")]
    assert len(storage) == 6 and all(c["status"] == "pass" for c in storage), storage
