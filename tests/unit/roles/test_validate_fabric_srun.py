# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation's fabric phase with validate_ib_write_bw_launcher=slurm, run by ansible-playbook: one srun per
round of the ring (a fake srun that starts the real node program on each node of the round at once, with a fake
ib_write_bw), and the entries the judge takes: every pair and HCA, with the client port's line rate, failures named.
The real Slurm runs it in the lab (tests/lab/test_lab_e2e.py, the validation tests). With
validate_ib_write_bw_launcher=ansible, phase fabric_ib runs the same ring from the GPU nodes' own plays (async servers
and clients, here all on this machine), and its entries must be the same as the srun path's."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from cf_module_helper import install_fake
from fake_fabric import FAKE_IB_WRITE_BW, FAKE_SRUN, ROOT, install_round_program

PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
NODES = ["gpu01", "gpu02", "gpu03", "gpu04", "gpu05"]


def five_nodes(tmp_path, monkeypatch):
    """Fake ib_write_bw and srun, an inventory of five local GPU nodes and a controller; returns what the measure
    phase records on each node (mlx5_0 at 200 Gb/s in ib_port_info; mlx5_1 unknown, so the profile's rate)."""
    install_fake(tmp_path, monkeypatch, "ib_write_bw", FAKE_IB_WRITE_BW)
    install_fake(tmp_path, monkeypatch, "srun", FAKE_SRUN)
    for key in ("FAKE_IB_FAIL", "FAKE_SRUN_BUSY", "FAKE_SRUN_LOST", "FAKE_IB_REFUSE"):
        monkeypatch.delenv(key, raising=False)
    inventory = {"all": {"children": {
        "gpu_nodes": {"hosts": dict((n, {"cluster_fabric_ip": "10.78.0.%d" % (20 + i)}) for i, n in enumerate(NODES, 1))},
        "slurm_controller": {"hosts": {"head01": {}}}},
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    node = {"idle": True, "nccl_local": None,
            "ib_port_info": {"ports": [{"ca": "mlx5_0", "port": 1, "rate_gbps": 200}]}}
    return node


def run_fabric(tmp_path, monkeypatch, held=(), smoke=None, **env):
    """The measure phase's facts on five idle GPU nodes (mlx5_0 at 200 Gb/s in ib_port_info; mlx5_1 unknown, so the
    profile's rate), but those of `held`, which recorded only that their owner holds them out of service; then phase
    fabric on the controller; returns (rc, output, recorded entries, srun calls). `smoke`: a list that gets the smoke
    job's srun calls."""
    program = install_round_program(tmp_path / "libexec")
    node = five_nodes(tmp_path, monkeypatch)
    (tmp_path / "play.yml").write_text(yaml.safe_dump([
        {"name": "Measured", "hosts": "gpu_nodes", "gather_facts": False,
         "vars": {"measured": node, "held": list(held),
                  "held_node": {"held": "DOWN+DRAIN: 'RMA 1234'", "idle": False}},
         "tasks": [{"name": "The measure phase's facts", "ansible.builtin.set_fact": {
             "__validate_node": "{{ held_node if inventory_hostname in held else measured }}"}}]},
        {"name": "Fabric", "hosts": "slurm_controller[0]", "gather_facts": False,
         "vars": {"validate_ibdiagnet": False, "validate_ib_write_bw_hcas": ["mlx5_0", "mlx5_1"],
                  "validate_ib_write_bw_node_program": program, "validate_ib_write_bw_timeout_seconds": 20,
                  "validate_profile": "h100_sxm_ndr"},
         "tasks": [
             {"name": "Phase fabric",
              "ansible.builtin.import_role": {"name": "clusterforge.gpu.validate", "tasks_from": "fabric"}},
             {"name": "Keep what the judge takes", "ansible.builtin.copy": {
                 "content": "{{ __validate_ib_results_srun | to_nice_json }}", "dest": str(tmp_path / "ib.json"),
                 "mode": "0644"}}]},
    ]))
    run_env = dict(os.environ, FAKE_IB_LOG=str(tmp_path / "ib.log"), FAKE_SRUN_LOG=str(tmp_path / "srun.log"),
                   ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"), ANSIBLE_NOCOLOR="1",
                   ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0", **env)
    proc = subprocess.run([PLAYBOOK_BIN, "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")],
                          cwd=str(tmp_path), env=run_env, capture_output=True, text=True, timeout=600, check=False)
    entries = json.loads((tmp_path / "ib.json").read_text()) if (tmp_path / "ib.json").exists() else None
    calls = ([json.loads(line) for line in (tmp_path / "srun.log").read_text().splitlines()]
             if (tmp_path / "srun.log").exists() else [])
    if smoke is not None:
        smoke.extend(c for c in calls if "hostname" in c)
    return proc.returncode, proc.stdout + proc.stderr, entries, [c for c in calls if "hostname" not in c]


@pytest.fixture(autouse=True)
def needs_ansible_playbook():
    if not os.path.exists(PLAYBOOK_BIN):
        pytest.skip("ansible-playbook not installed beside this Python")


def test_each_round_is_one_srun_and_every_pair_and_hca_is_recorded(tmp_path, monkeypatch):
    rc, out, entries, calls = run_fabric(tmp_path, monkeypatch)
    assert rc == 0, out
    # A ring of five nodes: 3 rounds (2, 2 and the closing pair), one srun each, on the round's nodes only.
    assert [c[:4] for c in calls] == [["-N", "4", "-w", "gpu01,gpu02,gpu03,gpu04"],
                                      ["-N", "4", "-w", "gpu02,gpu03,gpu04,gpu05"],
                                      ["-N", "2", "-w", "gpu05,gpu01"]], calls
    assert [(e["client"], e["server"], e["hca"]) for e in entries] == [
        (c, s, h) for c, s in (("gpu01", "gpu02"), ("gpu03", "gpu04"), ("gpu02", "gpu03"), ("gpu04", "gpu05"),
                               ("gpu05", "gpu01")) for h in ("mlx5_0", "mlx5_1")]
    assert all(e["rc"] == 0 and e["msg"] is None and e["result"]["bw_peak_gbits"] == 388.4 for e in entries), entries
    # The client port's rate where ib_port_info has it, else the profile's (h100_sxm_ndr: 400 Gb/s).
    assert {(e["hca"], e["line_rate_gbits"]) for e in entries} == {("mlx5_0", 200.0), ("mlx5_1", 400.0)}


def test_a_node_its_owner_holds_out_of_service_gets_no_job(tmp_path, monkeypatch):
    """gpu03 is DOWN for an RMA: the ring closes over the four others and the smoke job runs on them alone."""
    smoke = []
    rc, out, entries, calls = run_fabric(tmp_path, monkeypatch, held=["gpu03"], smoke=smoke)
    assert rc == 0, out
    assert [c[:4] for c in calls] == [["-N", "4", "-w", "gpu01,gpu02,gpu04,gpu05"],
                                      ["-N", "4", "-w", "gpu02,gpu04,gpu05,gpu01"]], calls
    assert not [e for e in entries if "gpu03" in (e["client"], e["server"])] and len(entries) == 8, entries
    assert [c[:4] for c in smoke] == [["-N", "4", "-w", "gpu01,gpu02,gpu04,gpu05"]], smoke


def test_a_failed_hca_and_a_lost_node_are_named_in_the_entries(tmp_path, monkeypatch):
    rc, out, entries, calls = run_fabric(tmp_path, monkeypatch, FAKE_IB_FAIL="mlx5_1", FAKE_SRUN_LOST="gpu03")
    assert rc == 0, out  # failed tests are results for the judge, not a failed play
    by_test = dict(((e["client"], e["server"], e["hca"]), e) for e in entries)
    assert by_test[("gpu01", "gpu02", "mlx5_1")]["rc"] == 1
    assert by_test[("gpu01", "gpu02", "mlx5_1")]["msg"] == "Couldn't get context for the device"
    assert by_test[("gpu01", "gpu02", "mlx5_1")]["result"] is None
    assert by_test[("gpu01", "gpu02", "mlx5_0")]["rc"] == 0
    # gpu03 is the client of gpu03 -> gpu04 (round 1): no result, and srun's reason.
    lost = by_test[("gpu03", "gpu04", "mlx5_0")]
    assert lost["rc"] is None and lost["msg"].startswith("no result from gpu03 (srun exit 137"), lost
    assert len(entries) == 10 and len(calls) == 3


def test_busy_nodes_fail_every_test_with_the_reason(tmp_path, monkeypatch):
    rc, out, entries, _calls = run_fabric(tmp_path, monkeypatch, FAKE_SRUN_BUSY="1")
    assert rc == 0, out
    assert len(entries) == 10 and all(e["rc"] is None for e in entries)
    assert all("Requested nodes are busy" in e["msg"] for e in entries), entries


def test_the_ansible_launcher_records_the_same_entries(tmp_path, monkeypatch):
    """Phase fabric_ib on the GPU nodes (validate_ib_write_bw_launcher=ansible): no srun, every pair and HCA of the
    ring with the same line rates as the srun path, a failed HCA named with ib_write_bw's own stderr line."""
    node = five_nodes(tmp_path, monkeypatch)
    (tmp_path / "play.yml").write_text(yaml.safe_dump([
        {"name": "Fabric IB", "hosts": "gpu_nodes", "gather_facts": False,
         "vars": {"validate_ib_write_bw_launcher": "ansible", "validate_ib_write_bw_hcas": ["mlx5_0", "mlx5_1"],
                  "validate_ib_write_bw_timeout_seconds": 20, "validate_profile": "h100_sxm_ndr"},
         "tasks": [
             {"name": "The measure phase's facts", "ansible.builtin.set_fact": {"__validate_node": node}},
             {"name": "Phase fabric_ib",
              "ansible.builtin.import_role": {"name": "clusterforge.gpu.validate", "tasks_from": "fabric_ib"}}]},
        {"name": "Keep what the judge takes", "hosts": "gpu_nodes", "gather_facts": False,
         "tasks": [{"name": "Each client node's entries", "ansible.builtin.copy": {
             "content": "{{ __validate_ib_results | to_nice_json }}",
             "dest": str(tmp_path / "ib-{{ inventory_hostname }}.json"), "mode": "0644"}}]},
    ]))
    run_env = dict(os.environ, FAKE_IB_LOG=str(tmp_path / "ib.log"), FAKE_SRUN_LOG=str(tmp_path / "srun.log"),
                   FAKE_IB_FAIL="mlx5_1", ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"),
                   ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="0", ANSIBLE_INVENTORY_UNPARSED_WARNING="0",
                   ANSIBLE_ASYNC_DIR=str(tmp_path / "async"))
    proc = subprocess.run([PLAYBOOK_BIN, "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "play.yml")],
                          cwd=str(tmp_path), env=run_env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not (tmp_path / "srun.log").exists()
    entries = [e for n in NODES for e in json.loads((tmp_path / ("ib-%s.json" % n)).read_text())]
    assert sorted((e["client"], e["server"], e["hca"]) for e in entries) == sorted(
        (c, s, h) for c, s in (("gpu01", "gpu02"), ("gpu03", "gpu04"), ("gpu02", "gpu03"), ("gpu04", "gpu05"),
                               ("gpu05", "gpu01")) for h in ("mlx5_0", "mlx5_1"))
    assert {(e["hca"], e["line_rate_gbits"]) for e in entries} == {("mlx5_0", 200.0), ("mlx5_1", 400.0)}
    good = [e for e in entries if e["hca"] == "mlx5_0"]
    assert all(e["rc"] == 0 and e["msg"] is None and e["result"]["bw_peak_gbits"] == 388.4 for e in good), good
    bad = [e for e in entries if e["hca"] == "mlx5_1"]
    assert all(e["rc"] == 1 and e["result"] is None and e["msg"] == "Couldn't get context for the device"
               for e in bad), bad
