# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import expand
from ansible_collections.clusterforge.gpu.plugins.modules import slurm_node

NODE_TEMPLATE = """NodeName={name} Arch=x86_64 CoresPerSocket=48
   CPUAlloc={alloc} CPUEfctv=192 CPUTot=192 CPULoad=1.00
   AvailableFeatures=h100,ib_ndr
   ActiveFeatures=h100,ib_ndr
   Gres=gpu:h100:8(S:0-1)
   NodeAddr={name} NodeHostName={name} Version=23.11.4
   OS=Linux 5.15.0-105-generic #115-Ubuntu SMP Mon Apr 15 09:52:04 UTC 2024
   RealMemory=2000000 AllocMem=0 FreeMem=1990000 Sockets=2 Boards=1
   State={state} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=gpu
   CfgTRES=cpu=192,mem=2000000M,billing=192,gres/gpu=8
   AllocTRES=
   CurrentWatts=0 AveWatts=0
"""

COMPACT = {"IDLE": "idle", "MIXED": "mix", "ALLOCATED": "alloc", "DOWN": "down", "COMPLETING": "comp"}


class FakeSlurm(object):
    """Keeps node states and reasons; answers scontrol show node / update and sinfo in Slurm's formats.

    ``busy_polls[name]`` = how many sinfo polls a busy node keeps running jobs after being drained.
    """

    def __init__(self, nodes, busy_polls=None):
        # nodes: name -> (base, drain(bool), reason or None)
        self.nodes = {}
        for name, (base, drain, reason) in nodes.items():
            self.nodes[name] = {"base": base, "drain": drain, "reason": reason, "extra": []}
        self.busy_polls = dict(busy_polls or {})
        self.tool = Tool(self.handle)

    def state(self, name):
        node = self.nodes[name]
        return "+".join([node["base"]] + (["DRAIN"] if node["drain"] else []) + node["extra"])

    def compact(self, name):
        node = self.nodes[name]
        if node["drain"]:
            busy = node["base"] in ("MIXED", "ALLOCATED", "COMPLETING")
            return "drng" if busy else "drain"
        return COMPACT[node["base"]]

    def handle(self, argv, data):
        tool = argv[0].rsplit("/", 1)[-1]
        args = argv[1:]
        if tool == "scontrol" and args[:2] == ["show", "node"]:
            out, rc = [], 0
            for name in expand(args[2]):
                if name not in self.nodes:
                    out.append("Node %s not found" % name)
                    rc = 1
                    continue
                node = self.nodes[name]
                block = NODE_TEMPLATE.format(name=name, state=self.state(name),
                                             alloc=96 if node["base"] in ("MIXED", "ALLOCATED") else 0)
                if node["reason"]:
                    block += "   Reason=%s [root@2024-05-01T10:00:00]\n" % node["reason"]
                out.append(block)
            return rc, "\n".join(out) + "\n", ""
        if tool == "scontrol" and args[0] == "update":
            kv = dict(a.split("=", 1) for a in args[1:])
            names = expand(kv["NodeName"])
            unknown = [n for n in names if n not in self.nodes]
            if unknown:
                return 1, "", "slurm_update error: Invalid node name specified\n"
            for name in names:
                node = self.nodes[name]
                if kv["State"] == "DRAIN":
                    if not kv.get("Reason"):
                        return 1, "", "You must specify a reason when DOWNING or DRAINING a node. Request denied\n"
                    node["drain"], node["reason"] = True, kv["Reason"]
                elif kv["State"] == "RESUME":
                    node["drain"], node["reason"] = False, None
                    if node["base"] == "DOWN":
                        node["base"] = "IDLE"
                elif kv["State"] == "DOWN":
                    node["base"], node["reason"] = "DOWN", kv.get("Reason")
                else:
                    return 1, "", "Invalid node state specified\n"
            return 0, "", ""
        if tool == "sinfo":
            assert args[:2] == ["-h", "-N"] and args[2] == "-n" and args[4] == "-o"
            assert args[5] == "%N %t %C"
            lines = []
            for name in expand(args[3]):
                node = self.nodes[name]
                if name in self.busy_polls:
                    if self.busy_polls[name] <= 0 and node["base"] in ("MIXED", "ALLOCATED"):
                        node["base"] = "IDLE"
                    self.busy_polls[name] -= 1
                alloc = 96 if node["base"] in ("MIXED", "ALLOCATED") else 0
                lines.append("%s %s %d/%d/0/192" % (name, self.compact(name), alloc, 192 - alloc))
            return 0, "\n".join(lines) + "\n", ""
        raise AssertionError("unexpected command %r" % argv)

    @property
    def calls(self):
        return self.tool.calls

    def count(self, *needles):
        return self.tool.count(*needles)


class Clock(object):
    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    clk = Clock()
    monkeypatch.setattr(slurm_node.time, "monotonic", clk.monotonic)
    monkeypatch.setattr(slurm_node.time, "sleep", clk.sleep)
    return clk


def run(fake, check_mode=False, diff=False, **args):
    return run_module(slurm_node, args, fake.tool, check_mode=check_mode, diff=diff)


def updates(fake):
    return [c for c in fake.calls if "update" in c]


def assert_never_down(fake):
    for call in fake.calls:
        assert not any(a.upper().startswith("STATE=DOWN") or a.upper() == "STATE=FAIL" for a in call), call


REASON = "cf-roll: kernel 6.8"


# -------------------------------------------------------------------------------------------------------- drain

def test_drain_idle_and_busy_nodes_with_one_update(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", False, None), "gpu02": ("MIXED", False, None),
                      "gpu03": ("IDLE", False, None)})
    result = run(fake, nodes="gpu[01-03]", state="drained", reason=REASON)
    assert result["changed"] is True
    assert fake.count("show", "node") == 1
    assert updates(fake) == [["/usr/bin/scontrol", "update", "NodeName=gpu[01-03]", "State=DRAIN",
                              "Reason=" + REASON]]
    assert result["cmd"] == ["/usr/bin/scontrol update 'NodeName=gpu[01-03]' State=DRAIN 'Reason=cf-roll: kernel 6.8'"]
    assert [n["action"] for n in result["nodes"]] == ["drain", "drain", "drain"]
    assert result["nodes"][1] == {"name": "gpu02", "state_before": "MIXED", "reason_before": None,
                                  "state_after": "MIXED+DRAIN", "reason_after": REASON, "action": "drain"}
    assert fake.state("gpu02") == "MIXED+DRAIN" and fake.nodes["gpu02"]["reason"] == REASON
    assert result["skipped"] == []
    assert "diff" not in result
    assert fake.count("sinfo") == 0
    assert_never_down(fake)


def test_drain_only_the_nodes_that_need_it(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", True, REASON), "gpu02": ("IDLE", False, None),
                      "gpu04": ("IDLE", False, None)})
    result = run(fake, nodes="gpu01,gpu02,gpu04", state="drained", reason=REASON)
    assert result["changed"] is True
    assert updates(fake)[0][2] == "NodeName=gpu[02,04]"
    assert [n["action"] for n in result["nodes"]] == ["none", "drain", "drain"]


def test_already_drained_by_us_is_unchanged(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", True, REASON), "gpu02": ("MIXED", True, REASON)})
    result = run(fake, nodes="gpu[01-02]", state="drained", reason=REASON)
    assert result["changed"] is False
    assert updates(fake) == []
    assert result["cmd"] == []
    assert [n["action"] for n in result["nodes"]] == ["none", "none"]
    assert result["nodes"][0]["reason_before"] == REASON
    assert fake.count("show", "node") == 1


def test_admin_drain_is_left_alone_and_reported(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", True, "bad DIMM B3, ticket 4711"), "gpu02": ("IDLE", False, None)})
    result = run(fake, nodes="gpu[01-02]", state="drained", reason=REASON)
    assert result["changed"] is True
    assert updates(fake) == [["/usr/bin/scontrol", "update", "NodeName=gpu02", "State=DRAIN", "Reason=" + REASON]]
    assert fake.nodes["gpu01"]["reason"] == "bad DIMM B3, ticket 4711"
    assert result["skipped"] == [{"name": "gpu01", "state": "IDLE+DRAIN", "reason": "bad DIMM B3, ticket 4711",
                                  "reason_user": "root", "reason_time": "2024-05-01T10:00:00",
                                  "why": "already drained with another reason; not overwritten"}]
    assert result["nodes"][0]["action"] == "skip"
    assert result["nodes"][0]["state_after"] == "IDLE+DRAIN"


def test_admin_drain_only_gives_no_change(clock):
    fake = FakeSlurm({"gpu01": ("MIXED", True, "cf-health: xid 79")})
    result = run(fake, nodes="gpu01", state="drained", reason=REASON, force=True)
    assert result["changed"] is False
    assert updates(fake) == []
    assert result["skipped"][0]["reason"] == "cf-health: xid 79"


def test_down_node_with_foreign_reason_is_not_overwritten(clock):
    fake = FakeSlurm({"gpu01": ("DOWN", False, "bad DIMM, ticket 4711"), "gpu02": ("DOWN", False, None)})
    result = run(fake, nodes="gpu[01-02]", state="drained", reason=REASON)
    assert updates(fake)[0][2] == "NodeName=gpu02"
    assert [s["name"] for s in result["skipped"]] == ["gpu01"]
    assert "DOWN" in result["skipped"][0]["why"]
    assert fake.nodes["gpu01"]["reason"] == "bad DIMM, ticket 4711"


def test_down_node_with_slurms_not_responding_is_drained_over(clock):
    # Slurm's own "Not responding" on a DOWN node belongs to nobody (Slurm clears it once slurmd answers).
    fake = FakeSlurm({"gpu01": ("DOWN", False, "Not responding")})
    result = run(fake, nodes="gpu01", state="drained", reason=REASON)
    assert updates(fake)[0][2] == "NodeName=gpu01"
    assert result["skipped"] == []
    assert fake.nodes["gpu01"]["reason"] == REASON


@pytest.mark.parametrize("reason", ["Kill task failed", "Prolog error", "bad DIMM, ticket 4711", "NHC: check_hw_ib",
                                    "cf-health: GPU count 7 < 8"])
def test_down_node_with_any_other_reason_is_not_drained_over(clock, reason):
    fake = FakeSlurm({"gpu01": ("DOWN", False, reason)})
    result = run(fake, nodes="gpu01", state="drained", reason=REASON, adopt=True)
    assert updates(fake) == []
    assert result["skipped"][0]["reason"] == reason


@pytest.mark.parametrize("reason", ["Kill task failed", "Not responding", "bad DIMM", "cf-health: xid 79"])
def test_foreign_drain_is_neither_rewritten_nor_resumed(clock, reason):
    fake = FakeSlurm({"gpu01": ("IDLE", True, reason)})
    drained = run(fake, nodes="gpu01", state="drained", reason=REASON, reason_prefix="cf-roll:", adopt=True)
    resumed = run(fake, nodes="gpu01", state="resumed", reason_prefix="cf-roll:")
    assert updates(fake) == []
    assert drained["skipped"][0]["why"] == "already drained with another reason; not overwritten"
    assert resumed["skipped"][0]["reason"] == reason
    assert fake.nodes["gpu01"]["reason"] == reason


def test_drain_check_mode_runs_no_update(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", False, None), "gpu02": ("ALLOCATED", False, None)})
    result = run(fake, check_mode=True, nodes="gpu[01-02]", state="drained", reason=REASON, wait=True)
    assert result["changed"] is True
    assert updates(fake) == []
    assert fake.count("sinfo") == 0
    assert result["cmd"] == []
    assert [n["action"] for n in result["nodes"]] == ["drain", "drain"]
    assert fake.state("gpu01") == "IDLE"
    assert len(fake.calls) == 1


def test_drain_diff(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", False, None), "gpu02": ("IDLE", True, "admin")})
    result = run(fake, diff=True, check_mode=True, nodes="gpu[01-02]", state="drained", reason=REASON)
    assert result["diff"] == {
        "before": {"gpu01": {"state": "IDLE", "reason": None}, "gpu02": {"state": "IDLE+DRAIN", "reason": "admin"}},
        "after": {"gpu01": {"state": "IDLE+DRAIN", "reason": REASON},
                  "gpu02": {"state": "IDLE+DRAIN", "reason": "admin"}},
    }


# ------------------------------------------------------------------------------------------------------- resume

def test_resume_only_our_reason(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", True, REASON), "gpu02": ("IDLE", True, "bad DIMM"),
                      "gpu03": ("IDLE", False, None), "gpu04": ("DOWN", True, "cf-roll: reboot")})
    result = run(fake, nodes="gpu[01-04]", state="resumed", reason_prefix="cf-roll:")
    assert result["changed"] is True
    assert updates(fake) == [["/usr/bin/scontrol", "update", "NodeName=gpu[01,04]", "State=RESUME"]]
    assert [n["action"] for n in result["nodes"]] == ["resume", "skip", "none", "resume"]
    assert fake.state("gpu02") == "IDLE+DRAIN" and fake.nodes["gpu02"]["reason"] == "bad DIMM"
    assert [s["name"] for s in result["skipped"]] == ["gpu02"]
    assert "force" in result["skipped"][0]["why"]
    assert result["nodes"][3]["state_after"] == "IDLE" and result["nodes"][3]["reason_after"] is None
    assert_never_down(fake)


def test_resume_prefix_is_ownership(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", True, "cf-health: xid 79")})
    result = run(fake, nodes="gpu01", state="resumed", reason_prefix="cf-roll:")
    assert result["changed"] is False
    assert updates(fake) == []
    assert fake.state("gpu01") == "IDLE+DRAIN"


def test_admin_drain_never_resumed_without_force(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", True, "bad DIMM")})
    result = run(fake, nodes="gpu01", state="resumed")
    assert result["changed"] is False and updates(fake) == []
    assert result["skipped"][0]["name"] == "gpu01"


def test_force_resumes_admin_drain(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", True, "bad DIMM"), "gpu02": ("MIXED", True, REASON)})
    result = run(fake, nodes="gpu[01-02]", state="resumed", force=True)
    assert result["changed"] is True
    assert updates(fake) == [["/usr/bin/scontrol", "update", "NodeName=gpu[01-02]", "State=RESUME"]]
    assert fake.state("gpu01") == "IDLE" and fake.state("gpu02") == "MIXED"
    assert result["skipped"] == []


def test_resume_not_drained_is_unchanged(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", False, None), "gpu02": ("MIXED", False, None)})
    result = run(fake, nodes="gpu[01-02]", state="resumed")
    assert result["changed"] is False and updates(fake) == [] and result["cmd"] == []
    assert [n["action"] for n in result["nodes"]] == ["none", "none"]


def test_resume_check_mode_and_diff(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", True, REASON)})
    result = run(fake, check_mode=True, diff=True, nodes="gpu01", state="resumed")
    assert result["changed"] is True and updates(fake) == []
    assert result["diff"]["before"]["gpu01"] == {"state": "IDLE+DRAIN", "reason": REASON}
    assert result["diff"]["after"]["gpu01"] == {"state": "IDLE", "reason": None}
    assert fake.state("gpu01") == "IDLE+DRAIN"


def test_round_trip_drain_then_resume_is_idempotent(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", False, None), "gpu02": ("IDLE", True, "admin")})
    assert run(fake, nodes="gpu[01-02]", state="drained", reason=REASON)["changed"] is True
    assert run(fake, nodes="gpu[01-02]", state="drained", reason=REASON)["changed"] is False
    assert run(fake, nodes="gpu[01-02]", state="resumed")["changed"] is True
    assert run(fake, nodes="gpu[01-02]", state="resumed")["changed"] is False
    assert fake.state("gpu01") == "IDLE" and fake.state("gpu02") == "IDLE+DRAIN"
    assert fake.count("show", "node") == 4
    assert_never_down(fake)


# --------------------------------------------------------------------------------------------------------- wait

def test_wait_until_drained_across_polls(clock):
    fake = FakeSlurm({"gpu01": ("MIXED", False, None), "gpu02": ("IDLE", False, None),
                      "gpu03": ("ALLOCATED", True, REASON)}, busy_polls={"gpu01": 2, "gpu03": 1})
    result = run(fake, nodes="gpu[01-03]", state="drained", reason=REASON, wait=True, poll_interval_seconds=30)
    assert result.get("failed") is not True, result
    assert result["changed"] is True
    polls = [c for c in fake.calls if c[0].endswith("sinfo")]
    assert len(polls) == 3
    assert polls[0] == ["/usr/bin/sinfo", "-h", "-N", "-n", "gpu[01-03]", "-o", "%N %t %C"]
    assert polls[1][4] == "gpu[01,03]" and polls[2][4] == "gpu01"     # only the nodes still draining
    assert clock.sleeps == [30, 30]
    assert result["waited_seconds"] == 60
    assert fake.count("show", "node") == 1
    assert len(updates(fake)) == 1
    assert [n["state_after"] for n in result["nodes"]] == ["IDLE+DRAIN", "IDLE+DRAIN", "IDLE+DRAIN"]
    assert_never_down(fake)


def test_wait_skips_nodes_drained_by_others(clock):
    fake = FakeSlurm({"gpu01": ("MIXED", True, "admin"), "gpu02": ("IDLE", False, None)})
    result = run(fake, nodes="gpu[01-02]", state="drained", reason=REASON, wait=True)
    polls = [c for c in fake.calls if c[0].endswith("sinfo")]
    assert [p[4] for p in polls] == ["gpu02"]
    assert result["changed"] is True


def test_wait_timeout_fails_cleanly_naming_nodes(clock):
    fake = FakeSlurm({"gpu01": ("MIXED", False, None), "gpu02": ("IDLE", False, None),
                      "gpu03": ("ALLOCATED", False, None)}, busy_polls={"gpu01": 1000, "gpu03": 1000})
    result = run(fake, nodes="gpu[01-03]", state="drained", reason=REASON, wait=True,
                 wait_timeout_seconds=100, poll_interval_seconds=30)
    assert result["failed"] is True
    assert "timed out after 100s" in result["msg"]
    assert "gpu01 (drng, 96 CPUs still allocated)" in result["msg"]
    assert "gpu03 (drng" in result["msg"] and "gpu02" not in result["msg"]
    assert result["still_draining"] == ["gpu01", "gpu03"]
    assert result["changed"] is True            # the drain itself happened
    assert clock.sleeps == [30, 30, 30, 10]     # never sleeps past the deadline
    assert result["waited_seconds"] == 100
    assert fake.state("gpu01") == "MIXED+DRAIN"
    assert_never_down(fake)


def test_wait_fails_when_someone_resumes_the_node(clock):
    fake = FakeSlurm({"gpu01": ("MIXED", False, None)}, busy_polls={"gpu01": 1000})
    original = fake.handle

    def handle(argv, data):
        if argv[0].endswith("sinfo") and fake.count("sinfo") == 2:
            fake.nodes["gpu01"]["drain"] = False
        return original(argv, data)

    fake.tool.handler = handle
    result = run(fake, nodes="gpu01", state="drained", reason=REASON, wait=True)
    assert result["failed"] is True
    assert "no longer drained" in result["msg"] and "gpu01" in result["msg"]


def test_wait_ignored_for_resume(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", True, REASON)})
    result = run(fake, nodes="gpu01", state="resumed", wait=True)
    assert result["changed"] is True and fake.count("sinfo") == 0


# ----------------------------------------------------------------------------------------------- failures/args

def test_unknown_node_fails_before_any_change(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", False, None), "gpu02": ("IDLE", False, None)})
    result = run(fake, nodes="gpu[01-02],gpu99,gpu98", state="drained", reason=REASON)
    assert result["failed"] is True
    assert "unknown Slurm node(s): gpu[98-99]" in result["msg"]
    assert result["unknown"] == ["gpu99", "gpu98"]
    assert sorted(result["not_found"]) == ["gpu98", "gpu99"]
    assert updates(fake) == []
    assert len(fake.calls) == 1
    assert fake.state("gpu01") == "IDLE"


def test_scontrol_error_fails_with_details(clock):
    tool = Tool(lambda argv, data: (1, "", "slurm_load_node error: Unable to contact slurm controller\n"))
    result = run_module(slurm_node, {"nodes": "gpu01", "state": "resumed"}, tool)
    assert result["failed"] is True
    assert "Unable to contact slurm controller" in result["msg"]
    assert result["rc"] == 1 and len(tool.calls) == 1


def test_update_failure_is_reported(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", False, None)})
    original = fake.handle

    def handle(argv, data):
        if "update" in argv:
            return 1, "", "slurm_update error: Access/permission denied\n"
        return original(argv, data)

    fake.tool.handler = handle
    result = run(fake, nodes="gpu01", state="drained", reason=REASON)
    assert result["failed"] is True
    assert "permission denied" in result["msg"]
    assert "State=DRAIN" in result["cmd"]


@pytest.mark.parametrize("args, fragment", [
    ({"nodes": "gpu01", "state": "drained"}, "reason"),
    ({"nodes": "gpu01", "state": "drained", "reason": "kernel upgrade"}, "must start with reason_prefix"),
    ({"nodes": "gpu01", "state": "drained", "reason": "  "}, "must not be empty"),
    ({"nodes": "gpu01", "state": "drained", "reason": "cf-a\ncf-b"}, "one line"),
    ({"nodes": "gpu[01-", "state": "resumed"}, "nodes:"),
    ({"nodes": "gpu01", "state": "down"}, "state"),
    ({"nodes": "gpu01", "state": "resumed", "poll_interval_seconds": 0}, "poll_interval_seconds"),
    ({"nodes": "gpu01", "state": "resumed", "wait_timeout_seconds": -1}, "wait_timeout_seconds"),
])
def test_invalid_arguments_fail_before_running_anything(clock, args, fragment):
    fake = FakeSlurm({"gpu01": ("IDLE", False, None)})
    result = run(fake, **args)
    assert result["failed"] is True
    assert fragment in result["msg"]
    assert fake.calls == []


def test_missing_scontrol_fails_cleanly(clock):
    tool = Tool(lambda argv, data: (0, "", ""), missing=["scontrol"])
    result = run_module(slurm_node, {"nodes": "gpu01", "state": "resumed"}, tool)
    assert result["failed"] is True and "scontrol was not found" in result["msg"]
    assert tool.calls == []


def test_custom_paths_are_used(clock):
    fake = FakeSlurm({"gpu01": ("MIXED", False, None)}, busy_polls={"gpu01": 0})
    result = run(fake, nodes="gpu01", state="drained", reason=REASON, wait=True,
                 scontrol_path="/opt/slurm/bin/scontrol", sinfo_path="/opt/slurm/bin/sinfo")
    assert result["changed"] is True
    assert {c[0] for c in fake.calls} == {"/opt/slurm/bin/scontrol", "/opt/slurm/bin/sinfo"}


def test_duplicate_names_are_read_once(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", False, None)})
    result = run(fake, nodes="gpu01,gpu[01-01]", state="drained", reason=REASON)
    assert [n["name"] for n in result["nodes"]] == ["gpu01"]
    assert fake.calls[0][-1] == "gpu01"


# --------------------------------------------------------------------------------------------------------- docs

def test_documentation_matches_argument_spec():
    import yaml

    doc = yaml.safe_load(slurm_node.DOCUMENTATION)
    options = doc["options"]
    assert set(options) == set(slurm_node.ARGUMENT_SPEC)
    for name, spec in slurm_node.ARGUMENT_SPEC.items():
        documented = options[name]
        assert documented["type"] == spec["type"], name
        assert documented.get("default") == spec.get("default"), name
        assert documented.get("choices") == spec.get("choices"), name
        assert bool(documented.get("required", False)) == bool(spec.get("required", False)), name
        assert documented.get("elements") == spec.get("elements"), name
    assert doc["attributes"]["check_mode"]["support"] == "full"
    assert doc["attributes"]["diff_mode"]["support"] == "full"
    returned = yaml.safe_load(slurm_node.RETURN)
    assert {"changed", "nodes", "skipped", "cmd", "waited_seconds"} <= set(returned)
    assert set(returned["nodes"]["contains"]) == {"name", "state_before", "reason_before", "state_after",
                                                  "reason_after", "action"}
    examples = yaml.safe_load(slurm_node.EXAMPLES)
    assert all("clusterforge.gpu.slurm_node" in task for task in examples)


# -------------------------------------------------------------------------------------------------------- adopt

def test_adopt_takes_over_an_earlier_run_of_the_same_workflow(clock):
    old = "cf-roll:20261120T1000 FAILED gres: 7 of 8 GPUs"
    fake = FakeSlurm({"gpu01": ("IDLE", True, old), "gpu02": ("IDLE", True, "bad fan, ticket 99"),
                      "gpu03": ("MIXED", False, None)}, busy_polls={"gpu03": 1})
    result = run(fake, nodes="gpu[01-03]", state="drained", reason="cf-roll:20261121T0900",
                 reason_prefix="cf-roll:", adopt=True, wait=True, poll_interval_seconds=5)
    assert result["changed"] is True
    assert updates(fake) == [["/usr/bin/scontrol", "update", "NodeName=gpu[01,03]", "State=DRAIN",
                              "Reason=cf-roll:20261121T0900"]]
    assert fake.nodes["gpu01"]["reason"] == "cf-roll:20261121T0900"
    # An admin's drain is never adopted, whatever adopt says.
    assert fake.nodes["gpu02"]["reason"] == "bad fan, ticket 99"
    assert [s["name"] for s in result["skipped"]] == ["gpu02"]
    assert [n["action"] for n in result["nodes"]] == ["drain", "skip", "drain"]
    assert result["nodes"][0]["state_after"] == "IDLE+DRAIN"
    assert result["waited_seconds"] > 0


def test_without_adopt_an_earlier_runs_drain_is_skipped(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", True, "cf-roll:old FAILED dcgm")})
    result = run(fake, nodes="gpu01", state="drained", reason="cf-roll:new", reason_prefix="cf-roll:")
    assert result["changed"] is False
    assert updates(fake) == []
    assert fake.nodes["gpu01"]["reason"] == "cf-roll:old FAILED dcgm"


def test_adopt_in_check_mode_changes_nothing(clock):
    fake = FakeSlurm({"gpu01": ("IDLE", True, "cf-roll:old")})
    result = run(fake, check_mode=True, diff=True, nodes="gpu01", state="drained", reason="cf-roll:new",
                 reason_prefix="cf-roll:", adopt=True)
    assert result["changed"] is True
    assert updates(fake) == []
    assert result["diff"]["after"]["gpu01"]["reason"] == "cf-roll:new"
