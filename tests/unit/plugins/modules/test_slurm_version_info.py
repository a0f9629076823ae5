# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_version_info against scripted dpkg-query / apt-cache / rpm / dnf / <daemon> -V / scontrol answers in the
real tools' formats, and its judgement of an upgrade over several hosts' reads."""

import sys

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import expand
from ansible_collections.clusterforge.gpu.plugins.modules import slurm_version_info

DEBIAN_NAMES = ["slurmdbd", "slurmctld", "slurmd", "slurm-client"]
REDHAT_NAMES = ["slurm-slurmdbd", "slurm-slurmctld", "slurm-slurmd", "slurm"]

# dpkg-query -W -f='${binary:Package}\t${Version}\t${db:Status-Abbrev}\n' -- <names> on a Debian 12 controller:
# slurmd was removed with its configuration kept (rc), which is not installed.
DPKG_CONTROLLER = ("slurm-client\t22.05.8-4+deb12u3\tii \n"
                   "slurmctld\t22.05.8-4+deb12u3\tii \n"
                   "slurmd\t22.05.8-4+deb12u3\trc \n"
                   "slurmdbd\t22.05.8-4+deb12u3\tii \n")
DPKG_NODE = "slurm-client\t22.05.8-4+deb12u3\tii \nslurmd\t22.05.8-4+deb12u3\tii \n"


def apt_policy(names, candidates):
    """apt-cache policy output for ``names`` with the candidate of each (None: (none); absent: apt does not know it)."""
    out = []
    for name in names:
        if name not in candidates:
            continue
        cand = candidates[name]
        out += ["%s:" % name, "  Installed: 22.05.8-4+deb12u3", "  Candidate: %s" % (cand or "(none)"),
                "  Version table:"]
        if cand:
            out += [" *** %s 990" % cand, "        990 http://repo.example/slurm bookworm/main amd64 Packages"]
        out += ["     22.05.8-4+deb12u3 500", "        500 http://deb.debian.org/debian bookworm/main amd64 Packages",
                "        100 /var/lib/dpkg/status"]
    return "\n".join(out) + "\n"


SHOW_CONFIG = """Configuration data as of 2026-11-24T10:00:00
AccountingStorageHost   = head01
SLURM_CONF              = /etc/slurm/slurm.conf
SLURM_VERSION           = 22.05.8
SlurmdTimeout           = 300 sec
StateSaveLocation       = /var/lib/slurm/slurmctld

Slurmctld(primary) at head01 is UP
"""
NODE = """NodeName={name} Arch=x86_64 CoresPerSocket=1
   CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=0.01
   AvailableFeatures=h100
   ActiveFeatures=h100
   Gres=gpu:h100:2
   NodeAddr={name} NodeHostName={name} Version={version}
   OS=Linux 6.1.0-26-amd64 #1 SMP PREEMPT_DYNAMIC Debian 6.1.112-1 (2024-09-30)
   RealMemory=7000 AllocMem=0 FreeMem=6000 Sockets=2 Boards=1
   State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A
   Partitions=gpu
"""
CLUSTER = {"gpu01": ("22.05.8", "MIXED"), "gpu02": ("24.11.5", "IDLE"), "gpu03": ("22.05.8", "DOWN+NOT_RESPONDING")}


class Host(object):
    """A scripted host: what each tool answers."""

    def __init__(self, dpkg=DPKG_CONTROLLER, candidate="24.11.5-1", daemons=None, scontrol_up=True, cluster=None,
                 redhat=False, rpm=None, dnf=None, dnf_rc=0, missing=()):
        self.dpkg = dpkg
        self.candidate = candidate
        self.daemons = daemons if daemons is not None else {"slurmctld": "slurm-wlm 22.05.8\n"}
        self.scontrol_up = scontrol_up
        self.cluster = CLUSTER if cluster is None else cluster
        self.redhat = redhat
        self.rpm = rpm
        self.dnf = dnf
        self.dnf_rc = dnf_rc
        self.missing = set(missing) | ({"dpkg-query", "apt-cache"} if redhat else {"rpm", "dnf"})
        self.missing |= set(n for n in ("slurmdbd", "slurmctld", "slurmd", "sinfo") if n not in self.daemons)

    def __call__(self, argv, data):
        tool = argv[0].rsplit("/", 1)[-1]
        if tool == "dpkg-query":
            assert argv[1:3] == ["-W", "-f=${binary:Package}\t${Version}\t${db:Status-Abbrev}\n"] and argv[3] == "--"
            wanted = set(argv[4:])
            lines = [line for line in self.dpkg.splitlines() if line.split("\t")[0] in wanted]
            return (0 if len(lines) == len(wanted) else 1), "\n".join(lines) + "\n", ""
        if tool == "apt-cache":
            assert argv[1:3] == ["policy", "--"]
            cands = self.candidate if isinstance(self.candidate, dict) else dict((n, self.candidate) for n in argv[3:])
            return 0, apt_policy(argv[3:], cands), ""
        if tool == "rpm":
            assert argv[1:4] == ["-q", "--qf", "%{NAME}\\t%{VERSION}-%{RELEASE}\\n"] and argv[4] == "--"
            out, rc = [], 0
            for name in argv[5:]:
                if name in self.rpm:
                    out.append("%s\t%s" % (name, self.rpm[name]))
                else:
                    out.append("package %s is not installed" % name)
                    rc += 1
            return rc, "\n".join(out) + "\n", ""
        if tool == "dnf":
            assert argv[1:4] == ["list", "--available", "--"]
            if self.dnf_rc == 1:
                return 1, "Last metadata expiration check: 0:01:02 ago on Mon 24 Nov 2026 10:00:00 AM UTC.\n", \
                    "Error: No matching Packages to list\n"
            return self.dnf_rc, self.dnf, ""
        if tool in ("slurmdbd", "slurmctld", "slurmd", "sinfo"):
            assert argv[1:] == ["-V"]
            return 0, self.daemons[tool], ""
        if tool == "scontrol":
            if not self.scontrol_up:
                return 1, "", "slurm_load_ctl_conf error: Unable to contact slurm controller (connect failure)\n"
            if argv[1:] == ["show", "config"]:
                return 0, SHOW_CONFIG, ""
            assert argv[1:3] == ["show", "node"]
            names = expand(argv[3]) if len(argv) > 3 else sorted(self.cluster)
            out, rc = [], 0
            for name in names:
                if name not in self.cluster:
                    out.append("Node %s not found" % name)
                    rc = 1
                    continue
                version, state = self.cluster[name]
                out.append(NODE.format(name=name, version=version, state=state))
            return rc, "\n".join(out), ""
        raise AssertionError("unexpected command %r" % argv)


def run(host=None, check_mode=False, **args):
    host = host or Host()
    tool = Tool(host, missing=host.missing)
    return run_module(slurm_version_info, args, tool, check_mode=check_mode), tool


# -- reads -------------------------------------------------------------------------------------------------------

def test_debian_controller_read_in_one_call_per_tool():
    r, tool = run(packages=DEBIAN_NAMES, candidates=True, daemons=["slurmdbd", "slurmctld", "slurmd"], controller=True,
                  nodes="ALL")
    assert not r.get("failed") and r["changed"] is False
    assert r["package_manager"] == "dpkg"
    assert r["packages"] == {"slurmdbd": "22.05.8-4+deb12u3", "slurmctld": "22.05.8-4+deb12u3", "slurmd": None,
                             "slurm-client": "22.05.8-4+deb12u3"}
    # candidates only for the installed packages, in one apt-cache call
    assert r["candidates"] == {"slurmdbd": "24.11.5-1", "slurmctld": "24.11.5-1", "slurm-client": "24.11.5-1"}
    assert r["daemons"]["slurmctld"] == {"found": True, "path": "/usr/bin/slurmctld", "output": "slurm-wlm 22.05.8",
                                         "version": "22.05.8"}
    assert r["daemons"]["slurmd"]["found"] is False and r["daemons"]["slurmdbd"]["version"] is None
    assert r["controller"] == {"answered": True, "up": True, "version": "22.05.8",
                               "state_save_location": "/var/lib/slurm/slurmctld", "slurmd_timeout_seconds": 300,
                               "error": None}
    assert r["nodes_answered"] is True
    by = dict((n["name"], n) for n in r["nodes"])
    assert by["gpu01"] == {"name": "gpu01", "known": True, "version": "22.05.8", "state": "MIXED", "registered": True}
    assert by["gpu03"]["registered"] is False
    assert [c.split()[0] for c in r["cmd"]] == ["/usr/bin/dpkg-query", "/usr/bin/apt-cache", "/usr/bin/slurmctld",
                                                "/usr/bin/scontrol", "/usr/bin/scontrol"]
    assert tool.count("apt-cache") == 1 and tool.count("dpkg-query") == 1
    assert "target" not in r and "refusals" not in r


def test_check_mode_reads_the_same():
    r, tool = run(check_mode=True, packages=DEBIAN_NAMES, candidates=True)
    assert not r.get("failed") and r["changed"] is False and r["candidates"]["slurmctld"] == "24.11.5-1"
    assert tool.count("dpkg-query") == 1 and tool.count("apt-cache") == 1


def test_nothing_asked_runs_nothing():
    r, tool = run()
    assert tool.calls == [] and r["packages"] == {} and r["controller"] is None and r["nodes_answered"] is None


def test_a_candidate_apt_does_not_know_and_one_without_version():
    host = Host(dpkg=DPKG_NODE, candidate={"slurmd": None}, daemons={"slurmd": "slurm-wlm 22.05.8\n"})
    r, dummy = run(host, packages=["slurmd", "slurm-client"], candidates=True)
    assert r["candidates"] == {"slurmd": None, "slurm-client": None}


def test_named_nodes_some_unknown():
    r, tool = run(nodes="gpu[01-02],gpu09")
    assert tool.calls[-1] == ["/usr/bin/scontrol", "show", "node", "gpu[01-02,09]"]
    by = dict((n["name"], n) for n in r["nodes"])
    assert by["gpu02"]["version"] == "24.11.5" and by["gpu09"] == {
        "name": "gpu09", "known": False, "version": None, "state": None, "registered": False}


def test_a_controller_that_does_not_answer_is_reported_not_a_failure():
    r, dummy = run(Host(scontrol_up=False), controller=True, nodes="gpu01")
    assert not r.get("failed")
    assert r["controller"]["answered"] is False and "Unable to contact slurm controller" in r["controller"]["error"]
    assert r["controller"]["up"] is False
    assert r["nodes_answered"] is False and r["nodes"][0]["known"] is False


@pytest.mark.parametrize("ping, up", [
    ("Slurmctld(primary) at head01 is DOWN\n", False),                                          # answered, not serving
    ("Slurmctld(primary) at head01 is DOWN\nSlurmctld(backup) at head02 is UP\n", True),     # a backup took over
    ("", False)])                                                                               # no status lines
def test_the_controller_is_up_when_one_of_its_controllers_reports_up(monkeypatch, ping, up):
    monkeypatch.setattr(sys.modules[__name__], "SHOW_CONFIG", SHOW_CONFIG.replace(
        "Slurmctld(primary) at head01 is UP\n", ping))
    r, dummy = run(Host(), controller=True)
    assert r["controller"]["answered"] is True and r["controller"]["up"] is up


def test_redhat_reads_rpm_and_dnf():
    dnf = ("Last metadata expiration check: 0:01:02 ago on Mon 24 Nov 2026 10:00:00 AM UTC.\n"
           "Available Packages\n"
           "slurm.x86_64                 24.11.5-1.el9                 slurm-local\n"
           "slurm.i686                   24.11.5-1.el9                 slurm-local\n"
           "slurm-slurmd.x86_64          24.11.5-1.el9                 slurm-local\n")
    host = Host(redhat=True, rpm={"slurm": "24.05.8-1.el9", "slurm-slurmd": "24.05.8-1.el9"}, dnf=dnf,
                daemons={"slurmd": "slurm 24.05.8\n"})
    r, tool = run(host, packages=REDHAT_NAMES, candidates=True, daemons=["slurmd"])
    assert r["package_manager"] == "rpm"
    assert r["packages"] == {"slurm-slurmdbd": None, "slurm-slurmctld": None, "slurm-slurmd": "24.05.8-1.el9",
                             "slurm": "24.05.8-1.el9"}
    assert r["candidates"] == {"slurm-slurmd": "24.11.5-1.el9", "slurm": "24.11.5-1.el9"}
    assert tool.calls[1] == ["/usr/bin/dnf", "list", "--available", "--", "slurm-slurmd", "slurm"]
    assert r["daemons"]["slurmd"]["version"] == "24.05.8"


def test_redhat_nothing_newer_offered_is_the_installed_version():
    host = Host(redhat=True, rpm={"slurm-slurmd": "24.11.5-1.el9"}, dnf_rc=1, daemons={})
    r, dummy = run(host, packages=["slurm-slurmd"], candidates=True)
    assert r["candidates"] == {"slurm-slurmd": "24.11.5-1.el9"}


def test_a_dnf_error_fails_with_the_command():
    host = Host(redhat=True, rpm={"slurm-slurmd": "24.11.5-1.el9"}, dnf="", dnf_rc=2, daemons={})
    r, dummy = run(host, packages=["slurm-slurmd"], candidates=True)
    assert r["failed"] and r["msg"].startswith("dnf list --available failed (rc=2)")
    assert r["cmd"] == "/usr/bin/dnf list --available -- slurm-slurmd"


def test_no_package_database_at_all():
    host = Host(missing=("dpkg-query", "rpm"), daemons={})
    r, tool = run(host, packages=["slurmd"], candidates=True)
    assert r["package_manager"] is None and r["packages"] == {"slurmd": None} and r["candidates"] == {}


def test_a_wrong_path_fails_before_anything_runs():
    host = Host(missing=("/opt/nowhere/scontrol",))
    r, tool = run(host, controller=True, scontrol_path="/opt/nowhere/scontrol")
    assert r["failed"] and "scontrol was not found at /opt/nowhere/scontrol (scontrol_path)" in r["msg"]


def test_empty_package_name_and_bad_target_fail():
    r, dummy = run(packages=["slurmd", " "])
    assert r["failed"] and r["msg"] == "packages: a package name is empty"
    r, tool = run(target_version="latest")
    assert r["failed"] and r["msg"].startswith("target_version: 'latest' is not a Slurm version") and tool.calls == []
    r, dummy = run(versions_by_host={"a": None})
    assert r["failed"] and "target_version" in r["msg"]


# -- judging -----------------------------------------------------------------------------------------------------

def read(host, **args):
    base = dict(packages=DEBIAN_NAMES, candidates=True, daemons=["slurmdbd", "slurmctld", "slurmd", "sinfo"])
    base.update(args)
    r, dummy = run(host, **base)
    assert not r.get("failed"), r
    return r


def cluster_reads(node_dpkg=DPKG_NODE, candidate="24.11.5-1", cluster=None, node_daemon="slurm-wlm 22.05.8\n"):
    controller = Host(candidate=candidate, cluster=cluster,
                      daemons={"slurmdbd": "slurm-wlm 22.05.8\n", "slurmctld": "slurm-wlm 22.05.8\n"})
    node = Host(dpkg=node_dpkg, candidate=candidate, daemons={"slurmd": node_daemon, "sinfo": node_daemon})
    return {"head01": read(controller, controller=True, nodes="ALL"), "gpu01": read(node)}


def judge(reads, target):
    r, tool = run(target_version=target, versions_by_host=reads)
    assert not r.get("failed"), r
    assert tool.calls == []  # nothing is read for the judged hosts
    return r


def test_22_05_to_24_11_refused_on_every_host_before_anything_changes():
    r = judge(cluster_reads(), "24.11.5")
    assert r["target"] == {"version": "24.11.5", "upstream": "24.11.5", "major": "24.11", "revision": None, "window": 3}
    steps = ("to 24.11.5 is 4 major releases (22.05 -> 24.11); Slurm 24.11 accepts upgrades from at most 3 major "
             "releases back (23.02 or newer). Upgrade in steps: 22.05 -> 23.11 -> 24.11")
    # one message per host and rule, in the order of the host names; a Slurm node outside the inventory too
    assert r["refusals"] == [
        "gpu01: slurmd, slurm-client 22.05.8-4+deb12u3; slurmd -V, sinfo -V, slurmd (registered) 22.05.8 " + steps,
        "gpu03: slurmd (registered) 22.05.8 " + steps,
        "head01: slurmdbd, slurmctld, slurm-client 22.05.8-4+deb12u3; slurmdbd -V, slurmctld -V, slurmctld (running) "
        "22.05.8 " + steps,
    ]


def test_the_repository_does_not_offer_the_target():
    reads = cluster_reads(candidate="22.05.8-4+deb12u3", cluster={"gpu01": ("22.05.8", "IDLE")})
    r = judge(reads, "22.05.9")
    tail = (" is 22.05.8-4+deb12u3, not the target 22.05.9: the configured repositories do not offer it (add the "
            "repository that carries it, refresh the index, or name the version they offer)")
    assert r["refusals"] == ["gpu01: the package manager's candidate for slurmd, slurm-client" + tail,
                             "head01: the package manager's candidate for slurmdbd, slurmctld, slurm-client" + tail]
    assert r["plan"]["head01"]["changes"] == {} and r["plan"]["head01"]["up_to_date"] is False


def test_a_refused_downgrade():
    reads = cluster_reads(candidate="22.05.8-4+deb12u3", cluster={"gpu01": ("22.05.8", "IDLE")})
    r = judge(reads, "22.05.7")
    # the downgrade alone: what the repository offers does not matter for it
    assert not [m for m in r["refusals"] if "candidate" in m]
    assert r["plan"]["gpu01"]["changes"] == {} and r["plan"]["gpu01"]["behind"] == ["slurmd", "slurm-client"]
    assert r["refusals"][0] == (
        "gpu01: slurmd, slurm-client 22.05.8-4+deb12u3; slurmd -V, sinfo -V, slurmd (registered) 22.05.8 is newer than "
        "the target 22.05.7: Slurm does not support downgrades (state files and the accounting database are converted "
        "forward only)")
    assert r["refusals"][1].startswith("head01: slurmdbd, slurmctld, slurm-client 22.05.8-4+deb12u3; slurmdbd -V, "
                                       "slurmctld -V, slurmctld (running) 22.05.8 is newer")
    assert len(r["refusals"]) == 2


def test_same_major_upgrade_plan_with_exact_specs():
    old = DPKG_NODE.replace("22.05.8-4+deb12u3", "22.05.8-4")
    reads = cluster_reads(node_dpkg=old, candidate="22.05.8-4+deb12u3", cluster={"gpu01": ("22.05.8", "IDLE")})
    r = judge(reads, "22.05.8-4+deb12u3")
    assert r["refusals"] == []
    gpu = r["plan"]["gpu01"]
    assert gpu["changes"] == {"slurmd": "slurmd=22.05.8-4+deb12u3", "slurm-client": "slurm-client=22.05.8-4+deb12u3"}
    assert gpu["behind"] == ["slurmd", "slurm-client"]
    assert gpu["slurmd_registered_version"] == "22.05.8" and gpu["slurmd_at_target"] is True
    assert gpu["up_to_date"] is False
    head = r["plan"]["head01"]
    assert head["changes"] == {} and head["slurmctld_at_target"] is True and head["up_to_date"] is True
    assert r["summary"] == {"hosts_to_change": ["gpu01"], "hosts_up_to_date": ["head01"],
                            "changes": ["gpu01: slurmd=22.05.8-4+deb12u3, slurm-client=22.05.8-4+deb12u3"]}


def test_allowed_jump_plans_every_package_and_the_daemons():
    reads = cluster_reads(cluster={"gpu01": ("23.02.7", "MIXED")})
    for r in reads.values():
        for name in list(r["packages"]):
            if r["packages"][name]:
                r["packages"][name] = "23.02.7-1"
        for d in r["daemons"].values():
            if d["version"]:
                d["version"] = "23.02.7"
    reads["head01"]["controller"]["version"] = "23.02.7"
    r = judge(reads, "24.11.5")
    assert r["refusals"] == []
    assert r["plan"]["head01"]["changes"] == {"slurmdbd": "slurmdbd=24.11.5-1", "slurmctld": "slurmctld=24.11.5-1",
                                              "slurm-client": "slurm-client=24.11.5-1"}
    assert r["plan"]["head01"]["slurmctld_at_target"] is False
    assert r["plan"]["gpu01"]["slurmd_at_target"] is False and r["plan"]["gpu01"]["slurmd_registered_version"] == "23.02.7"
    assert r["summary"]["hosts_to_change"] == ["gpu01", "head01"]


def test_rerun_after_the_upgrade_changes_nothing():
    new = DPKG_NODE.replace("22.05.8-4+deb12u3", "24.11.5-1")
    reads = cluster_reads(node_dpkg=new, cluster={"gpu01": ("24.11.5", "IDLE")}, node_daemon="slurm 24.11.5\n")
    reads["head01"]["packages"] = dict((k, "24.11.5-1" if v else None) for k, v in reads["head01"]["packages"].items())
    for d in reads["head01"]["daemons"].values():
        if d["version"]:
            d["version"] = "24.11.5"
    reads["head01"]["controller"]["version"] = "24.11.5"
    r = judge(reads, "24.11.5")
    assert r["refusals"] == [] and r["summary"]["hosts_to_change"] == []
    installed = {"slurmdbd": None, "slurmctld": None, "slurmd": "24.11.5-1", "slurm-client": "24.11.5-1"}
    assert r["plan"]["gpu01"] == {"changes": {}, "behind": [], "installed": installed,
                                  "slurmctld_running_version": None, "slurmctld_at_target": None,
                                  "slurmd_registered_version": "24.11.5", "slurmd_at_target": True, "up_to_date": True}


def test_a_slurmd_that_did_not_restart_is_work_even_with_the_package_at_target():
    new = DPKG_NODE.replace("22.05.8-4+deb12u3", "22.05.9-1")
    reads = cluster_reads(node_dpkg=new, candidate="22.05.9-1", cluster={"gpu01": ("22.05.8", "IDLE")})
    reads["head01"]["packages"] = dict((k, "22.05.9-1" if v else None) for k, v in reads["head01"]["packages"].items())
    reads["head01"]["controller"]["version"] = "22.05.9"
    r = judge(reads, "22.05.9")
    assert r["plan"]["gpu01"]["changes"] == {} and r["plan"]["gpu01"]["slurmd_at_target"] is False
    assert r["summary"]["hosts_to_change"] == ["gpu01"]


def test_a_host_not_read_and_a_host_without_slurm_are_refused():
    reads = cluster_reads(cluster={})
    reads["gpu02"] = None
    reads["login01"] = read(Host(dpkg="", daemons={}), packages=["slurm-client"])
    r = judge(reads, "22.05.9")
    assert ("gpu02: its Slurm versions were not read in this run (unreachable, failed, or left out by --limit): the "
            "upgrade is judged on every Slurm host or not at all") in r["refusals"]
    assert ("login01: none of the Slurm packages slurm-client is installed: converge it with site.yml first, or take "
            "it out of the Slurm groups") in r["refusals"]
    assert "gpu02" not in r["plan"]


def test_candidates_not_read_are_refused_rather_than_guessed():
    reads = {"gpu01": read(Host(dpkg=DPKG_NODE, daemons={}), packages=["slurmd"], candidates=False)}
    r = judge(reads, "22.05.9")
    assert r["refusals"] == ["gpu01: the package manager's candidate for slurmd was not read (candidates: true), so it "
                             "is not known whether it offers 22.05.9"]


def test_reading_back_after_an_upgrade_names_what_is_behind():
    # the role's read-back: packages and target only, no candidates
    r, dummy = run(Host(dpkg=DPKG_NODE, daemons={}), packages=["slurmd", "slurm-client"], target_version="24.11.5")
    assert r["plan"]["this host"]["behind"] == ["slurmd", "slurm-client"]
    new = DPKG_NODE.replace("22.05.8-4+deb12u3", "24.11.5-1")
    r, dummy = run(Host(dpkg=new, daemons={}), packages=["slurmd", "slurm-client"], target_version="24.11.5-1")
    assert r["plan"]["this host"]["behind"] == [] and r["refusals"] == []


def test_judging_this_host_alone():
    r, dummy = run(Host(dpkg=DPKG_NODE, candidate="22.05.8-4+deb12u3", daemons={}), packages=["slurmd"],
                   candidates=True, target_version="22.05.7")
    assert r["refusals"] == ["this host: slurmd 22.05.8-4+deb12u3 is newer than the target 22.05.7: Slurm does not "
                             "support downgrades (state files and the accounting database are converted forward only)"]


@pytest.mark.parametrize("target, revision", [("24.11.5-1", "1"), ("24.11.5", None)])
def test_redhat_specs(target, revision):
    dnf = "Available Packages\nslurm-slurmd.x86_64   24.11.5-1.el9   slurm-local\n"
    host = Host(redhat=True, rpm={"slurm-slurmd": "24.05.8-1.el9"}, dnf=dnf, daemons={})
    reads = {"gpu01": read(host, packages=["slurm-slurmd"], daemons=[])}
    r = judge(reads, target)
    assert r["refusals"] == [] and r["target"]["revision"] == revision
    assert r["plan"]["gpu01"]["changes"] == {"slurm-slurmd": "slurm-slurmd-24.11.5-1.el9"}


def test_a_host_whose_packages_are_at_the_target_but_whose_daemon_is_not_is_a_restart_only():
    reads = cluster_reads(cluster={"gpu01": ("22.05.7", "IDLE")})
    r = judge(reads, "22.05.8-4+deb12u3")
    assert r["plan"]["gpu01"]["changes"] == {} and r["plan"]["gpu01"]["up_to_date"] is False
    assert "gpu01: restart only" in r["summary"]["changes"]
