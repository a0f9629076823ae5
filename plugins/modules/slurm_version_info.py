#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: slurm_version_info
short_description: Read the Slurm versions of a host, and judge an upgrade to a target version
version_added: "1.0.0"
description:
  - Reads, on the host it runs on, what a Slurm upgrade needs to know, each part only when asked, and never
    changes anything.
  - O(packages) - the installed version of each package, with one C(dpkg-query) call (the collection's one dpkg
    reader) or, where C(dpkg-query) does not exist, one C(rpm -q) call.
  - O(candidates) - the version the package manager would install for each of those packages that is installed
    (C(apt-cache policy), its C(Candidate:) line; C(dnf list --available), where nothing newer than the installed
    version is the installed version). It reads the package index as it is; refresh it first.
  - O(daemons) - what each Slurm program reports with C(-V) (C(slurm 24.11.5); Debian's build prints
    C(slurm-wlm 22.05.8)) - the program on disk, which is what a daemon runs after its next start.
  - O(controller) - C(scontrol show config) - the version of the running slurmctld (C(SLURM_VERSION)), its
    C(StateSaveLocation) and C(SlurmdTimeout). A controller that does not answer is reported, not a failure.
  - O(nodes) - C(scontrol show node) - the version each slurmd registered with (C(Version=)), i.e. the running
    slurmd's, and whether it is registered.
  - With O(target_version) it also judges an upgrade to that version, for the hosts of O(versions_by_host) (the
    registered results of this module on every Slurm host) or else for this host's own reads - RV(refusals) lists
    every reason Slurm would not support it (a downgrade, a jump over more major releases than the target accepts -
    two before 24.11, three from 24.11 on - a version that cannot be read, a package manager that does not offer
    the target, a host not read) and RV(plan) what each host has to change.
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.info_module
options:
  packages:
    description:
      - Slurm packages whose installed version to read (V(slurmd), V(slurm-client) on Debian; V(slurm-slurmd),
        V(slurm) on the Red Hat family; a site's own package names likewise). One that is not installed is
        reported as V(null).
    type: list
    elements: str
    default: []
  candidates:
    description:
      - Also read the package manager's candidate version of each installed package of O(packages).
    type: bool
    default: false
  daemons:
    description:
      - Slurm programs to run with C(-V) (V(slurmdbd), V(slurmctld), V(slurmd), V(sinfo)). One that is not found on
        E(PATH) or in the sbin directories is reported with V(false) in its C(found) (RV(daemons)).
    type: list
    elements: str
    default: []
  controller:
    description:
      - Ask the running slurmctld with C(scontrol show config).
    type: bool
    default: false
  nodes:
    description:
      - Slurm nodes whose registered slurmd version to read, as a hostlist expression (C(gpu[01-16])), or V(ALL) for
        every node the controller knows. A node the controller does not know is reported with
        RV(nodes[].known=false).
    type: str
  target_version:
    description:
      - The version to upgrade to, V(24.11.5) or with a package revision V(24.11.5-1). Versions are compared on the
        upstream version (major release C(YY.MM) and maintenance release); a revision, when given, must also match
        the packages to install.
    type: str
  versions_by_host:
    description:
      - The registered results of this module, one per host to judge, keyed by host name; V(null) for a host that
        was not read. Needs O(target_version). Nothing is read for these hosts; their results are judged together.
    type: dict
  dpkg_query_path:
    description: Path of C(dpkg-query). By default it is looked up on E(PATH); where it does not exist C(rpm) is used.
    type: path
  rpm_path:
    description: Path of C(rpm), used where C(dpkg-query) does not exist. By default it is looked up on E(PATH).
    type: path
  apt_cache_path:
    description: Path of C(apt-cache), for O(candidates) on the Debian family. By default it is looked up on E(PATH).
    type: path
  dnf_path:
    description: Path of C(dnf), for O(candidates) on the Red Hat family. By default it is looked up on E(PATH).
    type: path
  scontrol_path:
    description: Path of C(scontrol). By default it is looked up on E(PATH) and in the sbin directories.
    type: path
notes:
  - Supports Debian and Ubuntu (C(dpkg-query), C(apt-cache)) and the Red Hat family (C(rpm), C(dnf)).
  - SchedMD's upgrade guide is the source of the rules; see also the role clusterforge.gpu.slurm_upgrade.
seealso:
  - name: Slurm upgrade guide
    description: The order, the compatibility window and what is backed up first.
    link: https://slurm.schedmd.com/upgrades.html
  - name: slurmdbd(8)
    description: C(slurmdbd -u) tells whether a database conversion is needed (from Slurm 24.11 on).
    link: https://slurm.schedmd.com/slurmdbd.html
"""

EXAMPLES = r"""
- name: Read the Slurm packages, programs and candidate versions of a compute node
  clusterforge.gpu.slurm_version_info:
    packages: [slurmd, slurm-client]
    candidates: true
    daemons: [slurmd, sinfo]
  register: slurm_versions

- name: Read the running controller and every registered slurmd
  clusterforge.gpu.slurm_version_info:
    controller: true
    nodes: ALL
  register: slurm_running

- name: Judge an upgrade to 24.11.5 over every Slurm host read above, once
  clusterforge.gpu.slurm_version_info:
    target_version: "24.11.5"
    versions_by_host: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, 'slurm_versions'))) }}"
  register: slurm_judged
  run_once: true

- name: Refuse what Slurm does not support
  ansible.builtin.assert:
    that: slurm_judged.refusals | length == 0
    fail_msg: "{{ slurm_judged.refusals }}"
  run_once: true
"""

RETURN = r"""
package_manager:
  description: The package database read - V(dpkg), V(rpm), or V(null) where neither exists (or none was asked).
  returned: always
  type: str
  sample: dpkg
packages:
  description: The installed version of each package of O(packages), as the package manager prints it; V(null) when not installed.
  returned: always
  type: dict
  sample: {"slurmd": "22.05.8-4+deb12u3", "slurm-client": "22.05.8-4+deb12u3", "slurmctld": null}
candidates:
  description:
    - The package manager's candidate version of each installed package of O(packages) (with O(candidates));
      V(null) when no configured repository has the package.
  returned: always
  type: dict
  sample: {"slurmd": "24.11.5-1", "slurm-client": "24.11.5-1"}
daemons:
  description: What each program of O(daemons) reported with C(-V).
  returned: always
  type: dict
  sample: {"slurmd": {"found": true, "path": "/usr/sbin/slurmd", "output": "slurm-wlm 22.05.8", "version": "22.05.8"}}
controller:
  description: What C(scontrol show config) answered (with O(controller)); V(null) without O(controller).
  returned: always
  type: dict
  contains:
    answered:
      description: Whether slurmctld answered.
      type: bool
    up:
      description:
        - Whether a controller it reports at the end of its answer (the lines of C(scontrol ping)) is C(UP), the
          primary or a backup that took over.
      type: bool
    version:
      description: The running slurmctld's version (C(SLURM_VERSION)).
      type: str
      sample: 22.05.8
    state_save_location:
      description: C(StateSaveLocation).
      type: str
      sample: /var/lib/slurm/slurmctld
    slurmd_timeout_seconds:
      description: C(SlurmdTimeout) in seconds.
      type: int
      sample: 300
    error:
      description: Why it did not answer; V(null) when it did.
      type: str
nodes:
  description: One entry per node read with O(nodes), in the order C(scontrol) printed them, then the unknown ones.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Slurm node name.
      type: str
    known:
      description: Whether the controller knows the node.
      type: bool
    version:
      description: The version its slurmd registered with (C(Version=)); V(null) when none.
      type: str
      sample: 24.11.5
    state:
      description: C(State=) as printed.
      type: str
      sample: MIXED
    registered:
      description: Its slurmd has registered and answers (not UNKNOWN, INVAL, NOT_RESPONDING or INVALID_REG).
      type: bool
nodes_answered:
  description: Whether the controller answered the O(nodes) read (V(null) without O(nodes)).
  returned: always
  type: bool
target:
  description: O(target_version) read (with O(target_version)).
  returned: when O(target_version) is given
  type: dict
  sample: {"version": "24.11.5-1", "upstream": "24.11.5", "major": "24.11", "revision": "1", "window": 3}
refusals:
  description: Every reason the upgrade to O(target_version) is refused, one message each, naming host, package and rule; empty when it is supported.
  returned: when O(target_version) is given
  type: list
  elements: str
  sample: ["gpu01: slurmd, slurm-client 22.05.8-4; slurmd (registered) 22.05.8 to 24.11.5 is 4 major releases (22.05 -> 24.11);
            Slurm 24.11 accepts upgrades from at most 3 major releases back (23.02 or newer). Upgrade in steps: 22.05 -> 23.11 -> 24.11"]
plan:
  description:
    - Per judged host, what the upgrade changes there (with O(target_version)) - C(changes), the package manager
      spec of each package to install (V(name=version) for apt, V(name-version) for dnf, the candidate version);
      C(behind), the installed packages not at the target (changes or not, e.g. when refused); C(installed); the
      running slurmctld's version and the version its slurmd registered with, each with whether it is at the
      target (V(null) where not known); C(up_to_date), nothing to change or restart.
  returned: when O(target_version) is given
  type: dict
  sample:
    head01:
      changes: {"slurmdbd": "slurmdbd=24.11.5-1", "slurmctld": "slurmctld=24.11.5-1"}
      behind: [slurmdbd, slurmctld]
      installed: {"slurmdbd": "23.11.4-1", "slurmctld": "23.11.4-1", "slurmd": null}
      slurmctld_running_version: 23.11.4
      slurmctld_at_target: false
      slurmd_registered_version: null
      slurmd_at_target: null
      up_to_date: false
summary:
  description:
    - "The judged hosts that change and those already at the target (with O(target_version)), and what changes on
      each host that changes - C(<host>: <package=version>, ...), or C(<host>: restart only) for a host whose
      packages are at the target but whose daemon is not."
  returned: when O(target_version) is given
  type: dict
  sample: {"hosts_to_change": ["head01", "gpu01"], "hosts_up_to_date": ["gpu02"],
           "changes": ["head01: slurmctld=24.11.1-1, slurm-client=24.11.1-1", "gpu01: restart only"]}
cmd:
  description: The commands that were run, in order.
  returned: always
  type: list
  elements: str
  sample: ["/usr/bin/dpkg-query -W '-f=${binary:Package}\\t${Version}\\t${db:Status-Abbrev}\\n' -- slurm-client slurmd"]
"""

import platform

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import compress
from ansible_collections.clusterforge.gpu.plugins.module_utils.packages import installed_versions
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import (
    controller_up,
    parse_not_found,
    parse_scontrol_nodes,
    state_flags,
)
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm_nodes import unique_names
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm_version import (
    RPM_QUERY_FORMAT,
    as_version,
    candidate_refusal,
    matches_target,
    parse_apt_cache_policy,
    parse_dnf_list,
    parse_rpm_query,
    parse_scontrol_config,
    parse_version,
    parse_version_output,
    seconds,
    upgrade_refusals,
    window,
)


class Reader(object):
    """The reads of one run; every command is recorded in ``cmd``."""

    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.cmd = []

    def run(self, tool, args, ok_rcs=(0,), what=None):
        rc, out, err = tool.run(args, check_rc=False)
        self.cmd.append(quote(tool.calls[-1]))
        if rc not in ok_rcs:
            tool.fail(tool.calls[-1], rc, out, err, what=what)
        return rc, out, err

    # -- packages --------------------------------------------------------------------------------------------
    def packages(self, names):
        """(package manager, {name: version or None})."""
        if not names:
            return None, {}
        supported, installed, cmd = installed_versions(self.module, names, self.params["dpkg_query_path"])
        if supported:
            if cmd:
                self.cmd.append(quote(cmd))
            return "dpkg", dict((n, installed.get(n)) for n in names)
        rpm = ToolRunner(self.module, "rpm", self.params["rpm_path"], required=False, option="rpm_path")
        if not rpm.available:
            return None, dict((n, None) for n in names)
        # rpm -q exits with the number of packages that are not installed: an answer, not an error.
        rc, out, err = rpm.run(["-q", "--qf", RPM_QUERY_FORMAT, "--"] + list(names), check_rc=False)
        self.cmd.append(quote(rpm.calls[-1]))
        found = parse_rpm_query(out)
        if rc != 0 and not found and "is not installed" not in (out or "") + (err or ""):
            rpm.fail(rpm.calls[-1], rc, out, err, what="rpm -q")
        return "rpm", dict((n, found.get(n)) for n in names)

    def candidates(self, manager, installed):
        names = [n for n, v in installed.items() if v]
        if not names or manager is None:
            return {}
        if manager == "dpkg":
            apt = ToolRunner(self.module, "apt-cache", self.params["apt_cache_path"], option="apt_cache_path")
            dummy, out, dummy2 = self.run(apt, ["policy", "--"] + names, what="apt-cache policy")
            policy = parse_apt_cache_policy(out)
            return dict((n, (policy.get(n) or {}).get("candidate")) for n in names)
        dnf = ToolRunner(self.module, "dnf", self.params["dnf_path"], option="dnf_path")
        # dnf exits 1 with "No matching Packages to list" when nothing newer than the installed versions is offered.
        rc, out, err = self.run(dnf, ["list", "--available", "--"] + names, ok_rcs=(0, 1), what="dnf list --available")
        if rc == 1 and "no matching packages" not in ((out or "") + (err or "")).lower():
            dnf.fail(dnf.calls[-1], rc, out, err, what="dnf list --available")
        offered = parse_dnf_list(out, names)
        result = {}
        for name in names:
            entries = offered.get(name) or []
            preferred = [e for e in entries if e["arch"] in (platform.machine(), "noarch")] or entries
            # dnf lists only what is newer than the installed version: nothing listed is the installed one.
            result[name] = preferred[0]["version"] if preferred else installed[name]
        return result

    # -- programs --------------------------------------------------------------------------------------------
    def daemons(self, names):
        result = {}
        for name in names:
            tool = ToolRunner(self.module, name, None, required=False)
            if not tool.available:
                result[name] = {"found": False, "path": None, "output": None, "version": None}
                continue
            rc, out, err = tool.run(["-V"], check_rc=False)
            self.cmd.append(quote(tool.calls[-1]))
            text = ((out or "") + "\n" + (err or "")).strip()
            version = parse_version_output(text) if rc == 0 else None
            result[name] = {"found": True, "path": tool.bin, "output": text.splitlines()[0] if text else "",
                            "version": version.upstream if version else None}
        return result

    # -- the controller --------------------------------------------------------------------------------------
    def scontrol(self):
        return ToolRunner(self.module, "scontrol", self.params["scontrol_path"], option="scontrol_path")

    def controller(self, scontrol):
        rc, out, err = scontrol.run(["show", "config"], check_rc=False)
        self.cmd.append(quote(scontrol.calls[-1]))
        values = parse_scontrol_config(out) if rc == 0 else {}
        if rc != 0 or "SLURM_VERSION" not in values:
            return {"answered": False, "up": False, "version": None, "state_save_location": None,
                    "slurmd_timeout_seconds": None, "error": ((err or "") + " " + (out or "")).strip()[:500] or "rc=%s" % rc}
        return {"answered": True, "up": controller_up(out), "version": values.get("SLURM_VERSION"),
                "state_save_location": values.get("StateSaveLocation"),
                "slurmd_timeout_seconds": seconds(values.get("SlurmdTimeout")), "error": None}

    def nodes(self, scontrol, expression):
        names = None if expression.strip().upper() == "ALL" else unique_names(self.module, expression)
        rc, out, err = scontrol.run(["show", "node"] + ([compress(names)] if names else []), check_rc=False)
        self.cmd.append(quote(scontrol.calls[-1]))
        not_found = parse_not_found((out or "") + "\n" + (err or ""))
        if rc != 0 and not not_found:
            # The controller does not answer: nothing is known of the nodes (not a failure of this read).
            return False, [{"name": n, "known": False, "version": None, "state": None, "registered": False}
                           for n in names or []]
        entries = []
        for record in parse_scontrol_nodes(out):
            name = record.get("NodeName")
            if not name:
                continue
            state = record.get("State") or ""
            try:
                info = state_flags(state)
                # As slurm_node_info: an admin's DOWN (still answering) is registered, DOWN+NOT_RESPONDING is not.
                registered = (not info["not_responding"] and info["base"] not in ("UNKNOWN", "INVAL")
                              and "INVALID_REG" not in info["flags"])
            except ValueError:
                registered = False
            version = record.get("Version")
            entries.append({"name": name, "known": True,
                            "version": None if version in (None, "", "(null)", "N/A") else version,
                            "state": state, "registered": registered})
        seen = set(e["name"] for e in entries)
        entries += [{"name": n, "known": False, "version": None, "state": None, "registered": False}
                    for n in (names or []) if n not in seen]
        return True, entries


# --- judging ----------------------------------------------------------------------------------------------------

def _spec(manager, name, version):
    """How the role's package task names one package at one version (apt: name=version; dnf: name-version)."""
    return "%s=%s" % (name, version) if manager == "dpkg" else "%s-%s" % (name, version)


def _at_target(version, target):
    try:
        return as_version(version).key == target.key
    except ValueError:
        return False


def judge(reads, target):
    """(refusals, plan, summary) for ``reads`` ({host: a result of this module or None}) against ``target``.

    Hosts are judged in the order of their names, so that the messages come in the same order on every run."""
    reads = dict((host, reads[host]) for host in sorted(reads))
    refusals = []
    versions = {}
    registered = {}
    for host, read in reads.items():
        if not read:
            continue
        for node in read.get("nodes") or []:
            if node.get("known"):
                registered[node["name"]] = node
    for host, read in reads.items():
        if not read:
            refusals.append("%s: its Slurm versions were not read in this run (unreachable, failed, or left out by "
                            "--limit): the upgrade is judged on every Slurm host or not at all" % host)
            continue
        installed = dict((n, v) for n, v in (read.get("packages") or {}).items() if v)
        found = dict(("%s -V" % n, d["version"]) for n, d in (read.get("daemons") or {}).items()
                     if d and d.get("version"))
        if not installed and not found:
            names = sorted((read.get("packages") or {}).keys())
            refusals.append("%s: none of the Slurm packages %s is installed: converge it with site.yml first, or take it "
                            "out of the Slurm groups" % (host, ", ".join(names) if names else "(none asked)"))
            continue
        versions[host] = dict(installed)
        versions[host].update(found)
        controller = read.get("controller") or {}
        if controller.get("answered") and controller.get("version"):
            versions[host]["slurmctld (running)"] = controller["version"]
    for name, node in registered.items():
        if node.get("version"):
            versions.setdefault(name, {})["slurmd (registered)"] = node["version"]
    refusals += upgrade_refusals(dict((h, versions[h]) for h in sorted(versions)), target)

    plan = {}
    for host, read in reads.items():
        if not read:
            continue
        manager = read.get("package_manager")
        installed = read.get("packages") or {}
        candidates = read.get("candidates") or {}
        changes = {}
        behind = []
        offered = []  # [(candidate, [packages])] that are not the target, in the order first seen
        for name, version in installed.items():
            if not version:
                continue
            try:
                current = matches_target(version, target)
                newer = as_version(version).key > target.key
            except ValueError:
                behind.append(name)
                continue  # already refused: the version cannot be read
            if current:
                continue
            behind.append(name)
            if newer:
                continue  # a downgrade, refused above: its candidate does not matter
            if name not in candidates:
                refusals.append("%s: the package manager's candidate for %s was not read (candidates: true), so it is "
                                "not known whether it offers %s" % (host, name, target.text))
                continue
            if candidate_refusal(host, name, candidates.get(name), target):
                for entry in offered:
                    if entry[0] == candidates.get(name):
                        entry[1].append(name)
                        break
                else:
                    offered.append((candidates.get(name), [name]))
                continue
            changes[name] = _spec(manager, name, candidates[name])
        for candidate, names in offered:
            refusals.append(candidate_refusal(host, ", ".join(names), candidate, target))
        controller = read.get("controller") or {}
        node = registered.get(host)
        entry = {
            "changes": changes,
            "behind": behind,
            "installed": dict(installed),
            "slurmctld_running_version": controller.get("version") if controller.get("answered") else None,
            "slurmctld_at_target": (_at_target(controller["version"], target)
                                    if controller.get("answered") and controller.get("version") else None),
            "slurmd_registered_version": node.get("version") if node else None,
            "slurmd_at_target": (bool(node.get("registered")) and _at_target(node.get("version"), target)
                                 if node else None),
        }
        entry["up_to_date"] = (not changes and entry["slurmctld_at_target"] is not False
                               and entry["slurmd_at_target"] is not False)
        plan[host] = entry
    summary = {"hosts_to_change": [h for h in plan if not plan[h]["up_to_date"]],
               "hosts_up_to_date": [h for h in plan if plan[h]["up_to_date"]],
               "changes": ["%s: %s" % (h, ", ".join(plan[h]["changes"].values()) or "restart only")
                           for h in plan if not plan[h]["up_to_date"]]}
    return refusals, plan, summary


def main():
    module = AnsibleModule(
        argument_spec=dict(
            packages=dict(type="list", elements="str", default=[]),
            candidates=dict(type="bool", default=False),
            daemons=dict(type="list", elements="str", default=[]),
            controller=dict(type="bool", default=False),
            nodes=dict(type="str"),
            target_version=dict(type="str"),
            versions_by_host=dict(type="dict"),
            dpkg_query_path=dict(type="path"),
            rpm_path=dict(type="path"),
            apt_cache_path=dict(type="path"),
            dnf_path=dict(type="path"),
            scontrol_path=dict(type="path"),
        ),
        required_by={"versions_by_host": "target_version"},
        supports_check_mode=True,
    )
    params = module.params
    target = None
    if params["target_version"] is not None:
        try:
            target = parse_version(params["target_version"])
        except ValueError as e:
            module.fail_json(msg="target_version: %s" % e)

    reader = Reader(module)
    names = []
    for name in params["packages"]:
        name = (name or "").strip()
        if not name:
            module.fail_json(msg="packages: a package name is empty")
        if name not in names:
            names.append(name)
    manager, installed = reader.packages(names)
    candidates = reader.candidates(manager, installed) if params["candidates"] else {}
    daemons = reader.daemons([d for d in params["daemons"] if d])
    controller = None
    nodes = []
    nodes_answered = None
    if params["controller"] or params["nodes"]:
        scontrol = reader.scontrol()
        if params["controller"]:
            controller = reader.controller(scontrol)
        if params["nodes"]:
            nodes_answered, nodes = reader.nodes(scontrol, params["nodes"])

    result = dict(changed=False, package_manager=manager, packages=installed, candidates=candidates, daemons=daemons,
                  controller=controller, nodes=nodes, nodes_answered=nodes_answered, cmd=reader.cmd)
    if target is not None:
        reads = params["versions_by_host"]
        if reads is None:
            reads = {"this host": result}
        refusals, plan, summary = judge(reads, target)
        result.update(
            target={"version": target.text, "upstream": target.upstream, "major": target.major,
                    "revision": target.revision, "window": window(target)},
            refusals=refusals, plan=plan, summary=summary)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
