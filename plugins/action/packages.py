# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin of ``clusterforge.gpu.packages``: the one package task of every role (documented in
plugins/modules/packages.py).

On the host it runs ``clusterforge.gpu.package_check`` (one ``dpkg-query``, the collection's one dpkg reader), then
the package manager's own module (``apt``, ``dnf``... as ``ansible.builtin.package`` picks it) only for what has to
change: packages to remove that are installed, then packages that are missing. On a node where everything is in
place that is one short module run, not an ``apt`` run that opens the package cache (about a second of CPU a
node and role). Check mode never calls the package manager to install: a new host's index may not know the
packages yet (repositories are added, and the index refreshed, only by a real run), so the plugin names them
("Would install: ...") and reports changed.

Why an action plugin: a module cannot run another module on the host, and three tasks per role (read, install,
name in check mode) cost a task dispatch each on every node. Action plugins calling ``_execute_module`` work
under Ansible's executor and under Mitogen (the lab's cf_mitogen_linear strategy).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleActionFail
from ansible.module_utils.facts.system.pkg_mgr import PKG_MGRS
from ansible.plugins.action import ActionBase

READER = "clusterforge.gpu.package_check"
# Package managers with an option for recommended packages / weak dependencies.
WEAK_DEPS_OPTION = {"apt": "install_recommends", "dnf": "install_weak_deps", "dnf5": "install_weak_deps"}
ARGUMENT_SPEC = dict(
    names=dict(type="list", elements="str", required=True),
    remove=dict(type="list", elements="str", default=[]),
    weak_dependencies=dict(type="bool"),
    cache_valid_time=dict(type="int"),
    use=dict(type="str", default="auto"),
    dpkg_query_path=dict(type="path"),
    start_services=dict(type="bool", default=True),
    allow_held=dict(type="bool", default=False),
)
# Debian's policy layer: while /usr/sbin/policy-rc.d exits 101 ("action forbidden"), maintainer scripts start, stop
# and restart no service (invoke-rc.d, deb-systemd-invoke). start_services=false writes it for the package manager's
# run, only where the host has none of its own (created exclusively: set -C), and removes it right after.
POLICY_RC = "/usr/sbin/policy-rc.d"
POLICY_RC_WRITE = (
    "set -C; umask 022; "
    "if printf '%%s\\n' '#!/bin/sh' '# Written by clusterforge.gpu.packages while it installs packages; removed right "
    "after.' 'exit 101' > %(path)s 2>/dev/null; then chmod 0755 %(path)s; exit 0; fi; "
    "[ -e %(path)s ] && exit 3; exit 4" % {"path": POLICY_RC})
POLICY_RC_THEIRS = 3  # the exit status of POLICY_RC_WRITE where the host has its own policy-rc.d


def _clean(specs):
    """The specs without blanks and repeats, in their order."""
    seen = []
    for spec in specs or []:
        spec = spec.strip() if spec else ""
        if spec and spec not in seen:
            seen.append(spec)
    return seen


def backend_args(backend, names, state, weak_dependencies=None, cache_valid_time=None, allow_held=False):
    """The arguments of the package manager's module for one install (state=present) or removal (absent)."""
    args = {"name": list(names), "state": state}
    if state == "present":
        if weak_dependencies is not None and backend in WEAK_DEPS_OPTION:
            args[WEAK_DEPS_OPTION[backend]] = weak_dependencies
        if cache_valid_time is not None and backend == "apt":
            # apt refreshes its index when it is older than this (0: on every install).
            args["update_cache"] = True
            args["cache_valid_time"] = cache_valid_time
        if allow_held and backend == "apt":
            # the site held the packages (apt-mark hold); asking for this version is the site's decision, and the
            # hold stays in place afterwards
            args["allow_change_held_packages"] = True
    return args


class ActionModule(ActionBase):

    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(ARGUMENT_SPEC)
    BUILTIN_PKG_MGR_MODULES = frozenset(manager["name"] for manager in PKG_MGRS)

    def run(self, tmp=None, task_vars=None):
        self._supports_check_mode = True
        self._supports_async = False
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # tmp no longer has any effect
        task_vars = task_vars or {}

        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        names = _clean(args["names"])
        remove = [r for r in _clean(args["remove"]) if r not in names]
        check_mode = bool(self._task.check_mode)

        backend = self._backend(task_vars, args["use"])
        result.update(changed=False, backend=backend, supported=False, missing=list(names), removed=[], versions={})

        # 1. Read: one dpkg-query where apt manages the packages. Elsewhere every package counts as missing and
        # the package manager's own idempotence decides (a real run), as ansible.builtin.package would.
        to_remove = list(remove)
        if backend == "apt" and (names or remove):
            reader_args = {"names": names + remove}
            if args["dpkg_query_path"]:
                reader_args["dpkg_query_path"] = args["dpkg_query_path"]
            read = self._execute_module(module_name=READER, module_args=reader_args, task_vars=task_vars)
            if read.get("failed"):
                read.setdefault("msg", "%s failed" % READER)
                return dict(read, changed=False, backend=backend)
            if read.get("supported"):
                gone = set(read.get("missing") or [])
                result.update(supported=True, cmd=read.get("cmd"), versions=read.get("installed") or {},
                              missing=[n for n in names if n in gone])
                to_remove = [r for r in remove if r not in gone]

        # 2.-3. The package manager, with services kept from starting where asked (Debian family, real runs).
        block = (not args["start_services"] and backend == "apt" and not check_mode
                 and bool(to_remove or result["missing"]))
        if block:
            written = self._execute_module(module_name="ansible.legacy.command", task_vars=task_vars, module_args={
                "argv": ["timeout", "30", "/bin/sh", "-c", POLICY_RC_WRITE]})
            if written.get("rc") not in (0, POLICY_RC_THEIRS):
                return dict(result, failed=True, msg="could not write %s to keep package scripts from starting "
                            "services: %s" % (POLICY_RC, (written.get("stderr") or written.get("msg") or "").strip()))
            block = written.get("rc") == 0  # the host's own policy-rc.d is left alone: it decides
        try:
            return self._change(result, args, backend, names, to_remove, check_mode, task_vars)
        finally:
            if block:
                removed = self._execute_module(module_name="ansible.legacy.file", task_vars=task_vars,
                                               module_args={"path": POLICY_RC, "state": "absent"})
                if removed.get("failed"):
                    raise AnsibleActionFail("%s was left on the host (no service will start there until it is "
                                            "removed): %s" % (POLICY_RC, removed.get("msg")), result=removed)

    def _change(self, result, args, backend, names, to_remove, check_mode, task_vars):
        """Remove, then install, what has to change."""
        # 2. Remove what must go first (a package the new ones replace). Check mode: named from dpkg's answer,
        # or asked of the package manager's own check mode where dpkg could not say.
        if to_remove:
            if check_mode and result["supported"]:
                result.update(changed=True, removed=to_remove)
            else:
                done = self._package_manager(backend, backend_args(backend, to_remove, "absent"), task_vars)
                if done.get("failed"):
                    return self._failed(result, done, backend, "remove", to_remove)
                if done.get("changed"):
                    result.update(changed=True, removed=to_remove)

        # 3. Install only what is missing.
        missing = result["missing"]
        if missing and check_mode:
            result["changed"] = True
        elif missing:
            done = self._package_manager(backend, backend_args(backend, missing, "present", args["weak_dependencies"],
                                                               args["cache_valid_time"], args["allow_held"]),
                                         task_vars)
            if done.get("failed"):
                return self._failed(result, done, backend, "install", missing)
            result["changed"] = result["changed"] or bool(done.get("changed"))
            if done.get("diff"):
                result["diff"] = done["diff"]

        result["msg"] = self._message(result, check_mode, len(names))
        if check_mode and (missing or result["removed"]):
            # Like debug: the plan is printed without -v, so a check run shows what a real run installs.
            result["_ansible_verbose_always"] = True
        return result

    # ------------------------------------------------------------------------------------------------ helpers

    def _backend(self, task_vars, use):
        """The package manager's module name (apt, dnf...), chosen as ansible.builtin.package chooses it."""
        module = use if use and use != "auto" else None
        if module is None:
            host_vars = task_vars
            if self._task.delegate_to:
                host_vars = (task_vars.get("hostvars") or {}).get(self._task.delegate_to, {})
            module = task_vars.get("ansible_package_use") or (host_vars.get("ansible_facts") or {}).get("pkg_mgr")
        if not module:
            # No facts: ask the host (what ansible.builtin.package does too).
            facts = self._execute_module(module_name="ansible.legacy.setup",
                                         module_args=dict(filter="ansible_pkg_mgr", gather_subset="!all"),
                                         task_vars=task_vars)
            if facts.get("failed"):
                raise AnsibleActionFail("could not find the package manager: %s" % facts.get("msg"), result=facts)
            module = (facts.get("ansible_facts") or {}).get("ansible_pkg_mgr")
        if not module or module == "unknown":
            raise AnsibleActionFail("could not find the package manager; gather facts or set the use option")
        if not self._shared_loader_obj.module_loader.has_plugin(self._module_name(module)):
            raise AnsibleActionFail("no module for the package manager %r" % module)
        return module

    def _module_name(self, backend):
        # ansible.legacy for the builtin ones: a library/ override still applies, as with ansible.builtin.package.
        return "ansible.legacy." + backend if backend in self.BUILTIN_PKG_MGR_MODULES else backend

    def _package_manager(self, backend, module_args, task_vars):
        return self._execute_module(module_name=self._module_name(backend), module_args=module_args,
                                    task_vars=task_vars)

    @staticmethod
    def _failed(result, done, backend, what, names):
        failed = dict(result)
        failed.update(failed=True, changed=bool(result.get("changed")),
                      msg="%s could not %s %s: %s" % (backend, what, ", ".join(names), done.get("msg") or "failed"))
        for key in ("rc", "stdout", "stderr", "cache_updated"):
            if key in done:
                failed[key] = done[key]
        return failed

    @staticmethod
    def _message(result, check_mode, count):
        parts = []
        if result["removed"]:
            parts.append("%s %s" % ("Would remove:" if check_mode else "Removed:", ", ".join(result["removed"])))
        if result["missing"]:
            if check_mode:
                parts.append("Would install (services and checks that need them are not run in check mode): %s"
                             % ", ".join(result["missing"]))
            elif result["supported"]:
                parts.append("Installed: %s" % ", ".join(result["missing"]))
            elif result["changed"]:
                # without dpkg's answer only the package manager knows which of them it installed
                parts.append("%s installed what was missing of: %s" % (result["backend"], ", ".join(result["missing"])))
            else:
                parts.append("All %d packages are installed (%s)" % (count, result["backend"]))
        if not parts:
            parts.append("All %d packages are installed" % count)
        return "; ".join(parts)
