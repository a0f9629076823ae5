"""The deep checks on drained nodes (playbooks/health_deep.yml) end to end on the lab: real Slurm 24.11 drains,
resumes and a maintenance reservation, the emulated GPUs (dcgmi level 2, nvidia-smi), nccl-tests and ib_write_bw.

A node drained with a cf-deep: reason (a new node's burn-in drain) is checked and resumed when it passes; an idle
node in a MAINT reservation is checked where it is and left in service; a DCGM fault keeps the node drained with a
reason naming the check, and the play fails naming it; an admin's drain is checked but never resumed nor relabelled.
Each test restores the lab (faults, drains, reservation) whatever happens. Runs after test_lab_e2e.py on the same
converged lab (`make test-lab`).
"""

import json
import os

from labkit import BIN, podman_exec, run, settled_node_states, slurm  # pylint: disable=import-error

RESERVATION = "cf-deep-test"
BURN_IN = "cf-deep: burn-in: test"
ADMIN = "admin: fan check"


def deep(tmp_path, *extra):
    """playbooks/health_deep.yml on the lab, its report fetched into this test's directory."""
    return run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "playbooks/health_deep.yml",
                "-e", "validate_fetch_dir=%s" % tmp_path] + list(extra))


def drain(node, reason):
    rc, out = slurm("scontrol", "update", "NodeName=%s" % node, "State=DRAIN", "Reason=%s" % reason)
    assert rc == 0, out


def full_reason(node):
    """The reason as scontrol prints it (sinfo may shorten a long one), without Slurm's [user@time] tag."""
    rc, out = slurm("scontrol", "-o", "show", "node", node)
    assert rc == 0, out
    reason = out.split(" Reason=", 1)[1] if " Reason=" in out else ""
    return reason.rsplit(" [", 1)[0].strip()


def restore(*nodes):
    """Back to the state the other lab tests expect: no fault, no reservation, every GPU node idle."""
    for node in nodes:
        podman_exec(node, "dcgmi", "--emu-reset")
    slurm("scontrol", "delete", "ReservationName=%s" % RESERVATION)
    states = settled_node_states()
    for node, (state, _reason) in states.items():
        if state.rstrip("*") in ("drain", "drng"):
            slurm("scontrol", "update", "NodeName=%s" % node, "State=RESUME")
    states = settled_node_states({"gpu01": ("idle", "none"), "gpu02": ("idle", "none")})
    assert {n: s for n, (s, r) in states.items()} == {"gpu01": "idle", "gpu02": "idle"}, states


def report(tmp_path):
    with open(os.path.join(str(tmp_path), "validation-deep.json")) as handle:
        return json.load(handle)


def test_check_mode_names_the_nodes_and_changes_nothing(converged, tmp_path):
    states = settled_node_states()
    assert all(s == "idle" for s, r in states.values()), states
    drain("gpu02", BURN_IN)
    try:
        rc, out = deep(tmp_path, "--check")
        assert rc == 0, out
        flat = " ".join(out.split())
        assert "gpu02: checked: drained, no job left (IDLE+DRAIN; reason: %s); resumed if every check passes" \
            % BURN_IN in flat, out
        assert "gpu01: not checked: in service (IDLE)" in flat, out
        assert "Deep | verdict" not in out and not os.path.exists(os.path.join(str(tmp_path), "validation-deep.json"))
        states = settled_node_states()
        assert states["gpu02"] == ("drain", BURN_IN) and states["gpu01"][0] == "idle", states
    finally:
        restore("gpu02")


def test_a_burn_in_drain_passes_and_is_resumed_and_a_maintenance_node_is_checked_in_place(converged, tmp_path):
    drain("gpu02", BURN_IN)
    rc, out = slurm("scontrol", "create", "reservation", "ReservationName=%s" % RESERVATION, "Flags=MAINT",
                    "StartTime=now", "Duration=60", "Nodes=gpu01", "Users=root")
    assert rc == 0, out
    try:
        rc, out = deep(tmp_path)
        assert rc == 0, out
        flat = " ".join(out.split())
        assert "gpu01: checked: idle in maintenance reservation %s" % RESERVATION in flat, out
        assert "Deep checks passed on gpu01, gpu02" in flat and "gpu02 resumed" in flat, out
        verdicts = report(tmp_path)["verdicts"]
        assert verdicts["ok"] and verdicts["resume"] == ["gpu02"], verdicts
        by = dict((n["node"], n) for n in verdicts["nodes"])
        assert by["gpu01"]["action"] == "none" and by["gpu02"]["action"] == "resume"
        # Every required check ran on both: the count, level 2, NCCL and a loopback on each of the 8 HCAs.
        assert by["gpu02"]["message"] == "gpu02: passed gpu.count, dcgm.diag, nccl.single_node, ib.write_bw (8)"
        states = settled_node_states({"gpu02": ("idle", "none")})
        assert states["gpu02"] == ("idle", "none"), states
        # The reservation's node was not drained and is still in the reservation.
        assert states["gpu01"][1] == "none" and states["gpu01"][0] in ("maint", "resv", "idle"), states
        rc, out = slurm("scontrol", "-o", "show", "reservation", RESERVATION)
        assert rc == 0 and "Nodes=gpu01 " in out, out
    finally:
        restore("gpu02")


def test_a_failing_node_stays_drained_with_the_check_named_and_an_admin_drain_is_untouched(converged, tmp_path):
    # Level 2 runs DCGM's memory test; the node health check (level 0 or 1) does not, so it cannot drain gpu02 first.
    rc, out = podman_exec("gpu02", "dcgmi", "--emu-fail", "memory", "3")
    assert rc == 0, out
    drain("gpu02", BURN_IN)
    drain("gpu01", ADMIN)
    try:
        rc, out = deep(tmp_path)
        assert rc != 0, out
        flat = " ".join(out.split())
        assert "Deep checks failed on gpu02 ||" in flat, out
        assert "gpu02: failed dcgm.diag: DCGM diagnostic level 2: memory failed on GPU 3" in flat, out
        assert 'gpu01 stays drained by its owner ("%s" is not a cf-deep: drain)' % ADMIN in flat, out
        reason = full_reason("gpu02")
        assert reason.startswith("cf-deep: dcgm.diag: DCGM diagnostic level 2: memory failed on GPU 3"), reason
        states = settled_node_states()
        assert states["gpu02"][0] == "drain", states
        # The admin's node passed every check, and stays drained with its reason.
        assert states["gpu01"] == ("drain", ADMIN), states
        verdicts = report(tmp_path)["verdicts"]
        assert verdicts["failed"] == ["gpu02"] and verdicts["passed"] == ["gpu01"] and verdicts["resume"] == []
        assert [r["node"] for r in verdicts["relabel"]] == ["gpu02"]
        assert dict((n["node"], n["action"]) for n in verdicts["nodes"]) == {"gpu01": "keep", "gpu02": "relabel"}

        # The fault repaired, the next run finds gpu02 passing under its relabelled cf-deep drain and resumes it;
        # the admin's drain is still theirs.
        podman_exec("gpu02", "dcgmi", "--emu-reset")
        rc, out = deep(tmp_path)
        assert rc == 0, out
        states = settled_node_states({"gpu02": ("idle", "none")})
        assert states["gpu02"] == ("idle", "none") and states["gpu01"] == ("drain", ADMIN), states
    finally:
        restore("gpu02")
