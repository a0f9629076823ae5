# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import expand
from ansible_collections.clusterforge.gpu.plugins.modules import slurm_node_info

NODE = """NodeName={name} Arch=x86_64 CoresPerSocket=48
   CPUAlloc={alloc} CPUEfctv=192 CPUTot=192 CPULoad=1.00
   Gres={gres}
   NodeAddr={name} NodeHostName={name} Version=23.11.4
   State={state} ThreadsPerCore=2 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions={partitions}
{reason}"""

CLUSTER = {
    "gpu01": ("MIXED", 96, "gpu:h100:8(S:0-1)", "gpu", None),
    "gpu02": ("IDLE+DRAIN", 0, "gpu:h100:8(S:0-1)", "gpu", "bad fan, ticket 99 [root@2026-11-20T10:00:00]"),
    "gpu03": ("MIXED+DRAIN", 32, "gpu:h100:8(S:0-1)", "gpu", "cf-roll:r1 [slurm@2026-11-21T09:00:00]"),
    "gpu04": ("DOWN+NOT_RESPONDING", 0, "gpu:h100:8(S:0-1)", "gpu", "Not responding [slurm@2026-11-21T08:00:00]"),
    "gpu05": ("IDLE+DRAIN+INVALID_REG", 0, "gpu:h100:8", "gpu",
              "gres/gpu count reported lower than configured (7 < 8) [slurm@2026-11-21T08:00:00]"),
    "head01": ("IDLE", 0, "(null)", "debug", None),
}


def answer(argv, data):
    assert argv[1:3] == ["show", "node"], argv
    names = expand(argv[3]) if len(argv) > 3 else sorted(CLUSTER)
    out, rc = [], 0
    for name in names:
        if name not in CLUSTER:
            out.append("Node %s not found" % name)
            rc = 1
            continue
        state, alloc, gres, parts, reason = CLUSTER[name]
        out.append(NODE.format(name=name, state=state, alloc=alloc, gres=gres, partitions=parts,
                               reason="   Reason=%s\n" % reason if reason else ""))
    return rc, "\n".join(out), ""


def run(**args):
    tool = Tool(answer)
    return run_module(slurm_node_info, args, tool), tool


def test_every_node_read_with_one_call_and_classified():
    result, tool = run(reason_prefix="cf-roll:")
    assert tool.calls == [["/usr/bin/scontrol", "show", "node"]]
    assert result["changed"] is False
    by = {n["name"]: n for n in result["nodes"]}
    assert by["gpu01"]["available"] and by["gpu01"]["responding"] and by["gpu01"]["gpus"] == 8
    assert by["gpu02"]["drained"] and not by["gpu02"]["ours"] and by["gpu02"]["reason"] == "bad fan, ticket 99"
    assert by["gpu02"]["reason_user"] == "root"
    assert by["gpu03"]["draining"] and by["gpu03"]["ours"] and by["gpu03"]["cpus_allocated"] == 32
    assert not by["gpu04"]["responding"] and not by["gpu04"]["available"]
    assert not by["gpu05"]["available"] and "INVALID_REG" in by["gpu05"]["flags"]
    assert by["head01"]["gpus"] == 0 and by["head01"]["partitions"] == ["debug"]
    summary = result["summary"]
    assert summary["total"] == 6 and summary["available"] == 2
    # Our own drain is not "unavailable": a re-run of the same workflow is what will bring it back.
    assert summary["unavailable_nodes"] == ["gpu02", "gpu04", "gpu05"]
    assert summary["unavailable_percent"] == 50.0
    assert summary["drained_by_us"] == ["gpu03"]
    assert summary["gpus"] == 40


def test_partition_and_nodes_filter():
    result, tool = run(nodes="gpu[01-02],head01", partition="gpu")
    assert tool.calls == [["/usr/bin/scontrol", "show", "node", "gpu[01-02],head01"]]
    assert [n["name"] for n in result["nodes"]] == ["gpu01", "gpu02"]
    assert result["summary"]["unavailable_percent"] == 50.0


def test_unknown_node_fails():
    result, _tool = run(nodes="gpu[01-02],gpu99")
    assert result["failed"] and "gpu99" in result["msg"]


def test_ownership_follows_the_prefix():
    result, _tool = run(reason_prefix="cf-health:")
    by = {n["name"]: n for n in result["nodes"]}
    assert by["gpu03"]["ours"] is False
    assert "gpu03" in result["summary"]["unavailable_nodes"]
    result, _tool = run()
    assert [n["name"] for n in result["nodes"] if n["ours"]] == ["gpu03"]


def test_registered_means_slurmd_answered_with_a_valid_registration():
    CLUSTER["gpu06"] = ("UNKNOWN", 0, "gpu:h100:8", "gpu", None)
    CLUSTER["gpu07"] = ("IDLE+NOT_RESPONDING", 0, "gpu:h100:8", "gpu", None)
    try:
        result, _tool = run(nodes="gpu[01-07]")
    finally:
        del CLUSTER["gpu06"], CLUSTER["gpu07"]
    registered = [n["name"] for n in result["nodes"] if n["registered"]]
    # A drained node has registered; DOWN+NOT_RESPONDING, INVALID_REG, UNKNOWN and NOT_RESPONDING have not.
    assert registered == ["gpu01", "gpu02", "gpu03"]


SQUEUE = "1201 gpu03\n1202_4 gpu[03-04]\n1203 gpu01\n"


def answer_with_jobs(argv, data):
    if argv[0].endswith("squeue"):
        return 0, SQUEUE, ""
    return answer(argv, data)


def test_jobs_listed_per_node_with_one_squeue_call():
    tool = Tool(answer_with_jobs)
    result = run_module(slurm_node_info, {"nodes": "gpu[02-03],gpu01", "jobs": True}, tool)
    assert tool.calls[1] == ["/usr/bin/squeue", "-h", "-w", "gpu[01-03]",
                             "--states=CONFIGURING,RUNNING,COMPLETING,SUSPENDED,STOPPED", "-o", "%i %N"]
    assert len(tool.calls) == 2
    by = {n["name"]: n["jobs"] for n in result["nodes"]}
    # A job of several nodes counts on each of them; a node of the list that runs nothing has none; gpu04 is not listed.
    assert by == {"gpu01": ["1203"], "gpu02": [], "gpu03": ["1201", "1202_4"]}
    assert "squeue" in result["jobs_cmd"]


def test_jobs_not_read_unless_asked():
    result, tool = run(nodes="gpu03")
    assert len(tool.calls) == 1 and "jobs" not in result["nodes"][0] and "jobs_cmd" not in result


def test_a_node_list_squeue_printed_that_is_not_a_hostlist_fails_naming_it():
    tool = Tool(lambda argv, data: (0, "1201 gpu[03-\n", "") if argv[0].endswith("squeue") else answer(argv, data))
    result = run_module(slurm_node_info, {"nodes": "gpu03", "jobs": True}, tool)
    assert result["failed"] and "gpu[03-" in result["msg"]
