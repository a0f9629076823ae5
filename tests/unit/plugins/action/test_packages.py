# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The packages action: read with package_check (the real module, against recorded dpkg-query output), then the
package manager only for the difference; check mode never installs."""

import os
import subprocess
from unittest import mock

import pytest

from cf_module_helper import Tool, run_module

from ansible.errors import AnsibleActionFail
from ansible_collections.clusterforge.gpu.plugins.action import packages as action
from ansible_collections.clusterforge.gpu.plugins.modules import package_check

# dpkg-query -W -f='${binary:Package}\t${Version}\t${db:Status-Abbrev}\n' -- ... on Debian 12: munge installed,
# slurmd removed with its configuration left (rc), datacenter-gpu-manager (DCGM 3) installed; names dpkg never
# saw are on stderr and make it exit 1.
DPKG = ("munge\t0.5.15-2\tii \n"
        "slurmd\t22.05.8-4+deb12u3\trc \n"
        "datacenter-gpu-manager\t1:3.3.9\tii \n")
APT_INSTALLED = {"changed": True, "cache_updated": True, "stdout": "Setting up slurmd (22.05.8-4+deb12u3) ...\n",
                 "stderr": ""}
APT_FAILED = {"failed": True, "msg": "No package matching 'datacenter-gpu-manager-4-core' is available",
              "rc": 100, "stdout": "", "stderr": "E: Unable to locate package datacenter-gpu-manager-4-core\n"}


def dpkg(out=DPKG, rc=1):
    return Tool([(("dpkg-query",), (rc, out, "dpkg-query: no packages found matching nvidia-smi\n" if rc else ""))])


class Host(object):
    """The host side: package_check runs for real against a scripted dpkg-query; the package manager's module
    answers from a script and records what it was asked."""

    def __init__(self, tool=None, backend_replies=None, pkg_mgr="apt"):
        self.tool = tool if tool is not None else dpkg()
        self.replies = list(backend_replies or [])
        self.calls = []  # (module name, args without the _ansible_* keys)
        self.pkg_mgr = pkg_mgr

    policy = None  # a scratch path standing for /usr/sbin/policy-rc.d (tests of start_services)
    policy_fail = None  # a module name whose run fails
    seen_by_manager = None  # what the package manager's run found at the policy path: (exists, its exit status)

    def execute(self, module_name=None, module_args=None, task_vars=None, **kwargs):
        args = dict(module_args or {})
        self.calls.append((module_name, args))
        if module_name == self.policy_fail:
            return {"failed": True, "rc": 4, "msg": "%s failed" % module_name, "stderr": "Read-only file system"}
        if module_name == "ansible.legacy.command":
            # the action's own script, run for real against the scratch path
            argv = [a.replace(action.POLICY_RC, self.policy) for a in args["argv"]]
            proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=60)
            return {"rc": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "changed": True}
        if module_name == "ansible.legacy.file":
            assert args == {"path": action.POLICY_RC, "state": "absent"}
            os.unlink(self.policy)
            return {"changed": True}
        if self.policy and module_name.startswith("ansible.legacy.") and module_name != "ansible.legacy.setup" \
                and module_name != action.READER:
            exists = os.path.exists(self.policy)
            self.seen_by_manager = (exists, subprocess.run(["/bin/sh", self.policy], check=False).returncode
                                    if exists else None)
        if module_name == action.READER:
            return run_module(package_check, args, self.tool, check_mode=self.check_mode)
        if module_name == "ansible.legacy.setup":
            return {"ansible_facts": {"ansible_pkg_mgr": self.pkg_mgr}}
        if not self.replies:
            return {"changed": True}
        return self.replies.pop(0)

    def managers(self):
        return [c for c in self.calls if c[0] not in (action.READER, "ansible.legacy.setup", "ansible.legacy.command",
                                                      "ansible.legacy.file")]


def run(args, host, check_mode=False, facts=True, task_vars=None):
    task = mock.MagicMock()
    task.args = dict(args)
    task.check_mode = check_mode
    task.async_val = 0
    task.delegate_to = None
    task.action = "clusterforge.gpu.packages"
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    plugin = action.ActionModule(task, connection, mock.MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    host.check_mode = check_mode
    tvars = dict(task_vars or {})
    if facts:
        tvars.setdefault("ansible_facts", {"pkg_mgr": host.pkg_mgr, "os_family": "Debian"})
    with mock.patch.object(plugin, "_execute_module", side_effect=host.execute), \
            mock.patch.object(plugin._shared_loader_obj.module_loader, "has_plugin", return_value=True):
        return plugin.run(task_vars=tvars)


# ------------------------------------------------------------------------------------------- real runs

def test_all_present_runs_only_the_dpkg_read():
    host = Host(dpkg(rc=0))
    r = run({"names": ["munge"], "weak_dependencies": False, "cache_valid_time": 3600}, host)
    assert r["changed"] is False and not r.get("failed")
    assert r["missing"] == [] and r["supported"] is True and r["versions"] == {"munge": "0.5.15-2"}
    assert r["msg"] == "All 1 packages are installed"
    assert [c[0] for c in host.calls] == [action.READER]
    assert len(host.tool.calls) == 1


def test_missing_ones_only_go_to_apt_with_the_roles_options():
    host = Host(backend_replies=[APT_INSTALLED])
    r = run({"names": ["munge", "slurmd", "slurm-client"], "weak_dependencies": False, "cache_valid_time": 3600}, host)
    assert r["changed"] is True and r["missing"] == ["slurmd", "slurm-client"]
    assert host.managers() == [("ansible.legacy.apt", {"name": ["slurmd", "slurm-client"], "state": "present",
                                                       "install_recommends": False, "update_cache": True,
                                                       "cache_valid_time": 3600})]
    assert r["msg"] == "Installed: slurmd, slurm-client" and "_ansible_verbose_always" not in r


def test_second_run_is_idempotent():
    first = Host(dpkg(out="", rc=1), backend_replies=[APT_INSTALLED])
    assert run({"names": ["munge"]}, first)["changed"] is True
    second = Host(dpkg(out="munge\t0.5.15-2\tii \n", rc=0))
    r = run({"names": ["munge"]}, second)
    assert r["changed"] is False and second.managers() == []


def test_unset_apt_options_are_left_to_apt():
    host = Host()
    run({"names": ["slurmd"]}, host)
    assert host.managers() == [("ansible.legacy.apt", {"name": ["slurmd"], "state": "present"})]


def test_cache_valid_time_zero_refreshes_the_index():
    host = Host()
    run({"names": ["slurmd"], "cache_valid_time": 0}, host)
    assert host.managers()[0][1]["update_cache"] is True and host.managers()[0][1]["cache_valid_time"] == 0


def test_install_failure_surfaces_the_package_managers_message():
    host = Host(backend_replies=[APT_FAILED])
    r = run({"names": ["datacenter-gpu-manager-4-core=1:4.2.3*"]}, host)
    assert r["failed"] is True and r["changed"] is False
    assert r["msg"].startswith("apt could not install datacenter-gpu-manager-4-core=1:4.2.3*: No package matching")
    assert r["rc"] == 100 and "Unable to locate package" in r["stderr"]


def test_dpkg_read_failure_fails_before_the_package_manager():
    host = Host(Tool([(("dpkg-query",), (2, "", "dpkg-query: error: database locked\n"))]))
    r = run({"names": ["munge"]}, host)
    assert r["failed"] and "database locked" in r["msg"] and host.managers() == []


def test_blank_and_repeated_names_are_dropped():
    host = Host()
    r = run({"names": ["slurmd", " ", "slurmd", "munge"]}, host)
    assert r["missing"] == ["slurmd"]
    assert host.calls[0][1]["names"] == ["slurmd", "munge"]


def test_nothing_asked_nothing_run():
    host = Host()
    r = run({"names": []}, host)
    assert r["changed"] is False and host.calls == []


# ------------------------------------------------------------------------------------------ check mode

def test_check_mode_names_the_missing_and_never_calls_the_package_manager():
    host = Host()
    r = run({"names": ["munge", "slurmd", "nvidia-smi"], "cache_valid_time": 3600}, host, check_mode=True)
    assert r["changed"] is True and r["missing"] == ["slurmd", "nvidia-smi"]
    assert r["msg"] == "Would install (services and checks that need them are not run in check mode): slurmd, nvidia-smi"
    assert r["_ansible_verbose_always"] is True  # printed without -v, as the debug task it replaces was
    assert host.managers() == []


def test_check_mode_with_everything_installed_is_unchanged():
    host = Host(dpkg(rc=0))
    r = run({"names": ["munge"]}, host, check_mode=True)
    assert r["changed"] is False and "_ansible_verbose_always" not in r


def test_check_mode_without_dpkg_names_every_package_and_asks_nobody():
    host = Host(Tool([], missing=["dpkg-query"]))
    r = run({"names": ["munge", "slurmd"]}, host, check_mode=True)
    assert r["changed"] is True and r["supported"] is False and r["missing"] == ["munge", "slurmd"]
    assert "Would install" in r["msg"] and host.managers() == []


# ---------------------------------------------------------------------------------- without dpkg / not apt

def test_without_dpkg_the_package_manager_decides():
    host = Host(Tool([], missing=["dpkg-query"]), backend_replies=[{"changed": False}])
    r = run({"names": ["munge", "slurmd"], "weak_dependencies": False}, host)
    assert r["changed"] is False and r["supported"] is False
    assert host.managers() == [("ansible.legacy.apt", {"name": ["munge", "slurmd"], "state": "present",
                                                       "install_recommends": False})]
    assert r["msg"] == "All 2 packages are installed (apt)"


def test_dnf_hosts_skip_the_dpkg_read_and_get_dnf_options():
    host = Host(pkg_mgr="dnf", backend_replies=[{"changed": True}])
    r = run({"names": ["munge", "@nvidia-driver:535-open"], "weak_dependencies": False, "cache_valid_time": 3600},
            host)
    assert r["changed"] is True and r["backend"] == "dnf"
    # no dpkg-query on dnf hosts; cache_valid_time is apt's
    assert host.calls == [("ansible.legacy.dnf", {"name": ["munge", "@nvidia-driver:535-open"], "state": "present",
                                                  "install_weak_deps": False})]
    assert r["msg"] == "dnf installed what was missing of: munge, @nvidia-driver:535-open"


def test_without_facts_the_package_manager_is_asked_once():
    host = Host(dpkg(rc=0), pkg_mgr="apt")
    r = run({"names": ["munge"]}, host, facts=False)
    assert r["changed"] is False and [c[0] for c in host.calls] == ["ansible.legacy.setup", action.READER]


def test_use_and_ansible_package_use_win_over_the_fact():
    host = Host(pkg_mgr="apt", backend_replies=[{"changed": False}])
    r = run({"names": ["munge"], "use": "dnf"}, host)
    assert r["backend"] == "dnf" and host.calls[0][0] == "ansible.legacy.dnf"
    host = Host(pkg_mgr="apt", backend_replies=[{"changed": False}])
    r = run({"names": ["munge"]}, host, task_vars={"ansible_package_use": "dnf"})
    assert r["backend"] == "dnf"


def test_unknown_package_manager_fails_clearly():
    with pytest.raises(AnsibleActionFail, match="could not find the package manager"):
        run({"names": ["munge"]}, Host(pkg_mgr="unknown"))


def test_bad_arguments_are_refused():
    with pytest.raises(AnsibleActionFail, match="Invalid options"):
        run({"names": ["munge"], "state": "latest"}, Host())
    with pytest.raises(AnsibleActionFail, match="names"):
        run({}, Host())


# -------------------------------------------------------------------------------- removing first (dcgm)

def test_installed_legacy_package_is_removed_before_the_install():
    host = Host(backend_replies=[{"changed": True}, APT_INSTALLED])
    r = run({"names": ["datacenter-gpu-manager-4-core=1:4.2.3*"], "remove": ["datacenter-gpu-manager"]}, host)
    assert r["changed"] is True and r["removed"] == ["datacenter-gpu-manager"]
    # one dpkg read for both lists
    assert host.calls[0] == (action.READER, {"names": ["datacenter-gpu-manager-4-core=1:4.2.3*",
                                                       "datacenter-gpu-manager"]})
    assert host.managers() == [
        ("ansible.legacy.apt", {"name": ["datacenter-gpu-manager"], "state": "absent"}),
        ("ansible.legacy.apt", {"name": ["datacenter-gpu-manager-4-core=1:4.2.3*"], "state": "present"})]
    assert r["msg"] == "Removed: datacenter-gpu-manager; Installed: datacenter-gpu-manager-4-core=1:4.2.3*"


def test_absent_legacy_package_is_not_asked_about():
    host = Host(dpkg(out="datacenter-gpu-manager-4-core\t1:4.2.3-1\tii \n", rc=1))
    r = run({"names": ["datacenter-gpu-manager-4-core=1:4.2.3*"], "remove": ["datacenter-gpu-manager"]}, host)
    assert r["changed"] is False and r["removed"] == [] and host.managers() == []


def test_check_mode_names_the_removal_from_dpkg():
    host = Host()
    r = run({"names": ["datacenter-gpu-manager-4-core"], "remove": ["datacenter-gpu-manager"]}, host, check_mode=True)
    assert r["changed"] is True and r["removed"] == ["datacenter-gpu-manager"] and host.managers() == []
    assert r["msg"].startswith("Would remove: datacenter-gpu-manager; Would install")


def test_without_dpkg_the_removal_asks_the_package_manager_even_in_check_mode():
    host = Host(Tool([], missing=["dpkg-query"]), backend_replies=[{"changed": False}])
    r = run({"names": ["datacenter-gpu-manager-4-core"], "remove": ["datacenter-gpu-manager"]}, host, check_mode=True)
    assert r["removed"] == [] and r["changed"] is True  # the install is still predicted
    assert host.managers() == [("ansible.legacy.apt", {"name": ["datacenter-gpu-manager"], "state": "absent"})]


def test_removal_failure_stops_before_the_install():
    host = Host(backend_replies=[{"failed": True, "msg": "dpkg was interrupted", "rc": 100}])
    r = run({"names": ["datacenter-gpu-manager-4-core"], "remove": ["datacenter-gpu-manager"]}, host)
    assert r["failed"] and r["msg"] == "apt could not remove datacenter-gpu-manager: dpkg was interrupted"
    assert len(host.managers()) == 1


def test_a_name_in_both_lists_is_installed_not_removed():
    host = Host(dpkg(rc=0))
    r = run({"names": ["munge"], "remove": ["munge"]}, host)
    assert r["changed"] is False and host.managers() == []


def test_backend_args_per_package_manager():
    assert action.backend_args("apt", ["a"], "absent", False, 3600) == {"name": ["a"], "state": "absent"}
    expected = {"name": ["a"], "state": "present", "install_weak_deps": True}
    assert action.backend_args("dnf5", ["a"], "present", True, 3600) == expected
    assert action.backend_args("zypper", ["a"], "present", False, 3600) == {"name": ["a"], "state": "present"}


# ------------------------------------------------------------------------ start_services: false (policy-rc.d)

def blocking_host(tmp_path, **kwargs):
    host = Host(**kwargs)
    host.policy = str(tmp_path / "policy-rc.d")
    return host


def test_no_service_starts_while_apt_installs_and_the_policy_goes_right_after(tmp_path):
    host = blocking_host(tmp_path, backend_replies=[APT_INSTALLED])
    r = run({"names": ["munge", "slurmd"], "start_services": False}, host)
    assert r["changed"] is True and not r.get("failed") and r["missing"] == ["slurmd"]
    assert [c[0] for c in host.calls] == [action.READER, "ansible.legacy.command", "ansible.legacy.apt",
                                          "ansible.legacy.file"]
    assert host.calls[1][1]["argv"][:2] == ["timeout", "30"]  # a time limit on the host
    assert host.seen_by_manager == (True, 101)  # apt ran while policy-rc.d forbade every service action
    assert not os.path.exists(host.policy)


def test_a_hosts_own_policy_rc_d_is_left_alone(tmp_path):
    host = blocking_host(tmp_path, backend_replies=[APT_INSTALLED])
    with open(host.policy, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    r = run({"names": ["slurmd"], "start_services": False}, host)
    assert r["changed"] is True and not r.get("failed")
    assert [c[0] for c in host.calls] == [action.READER, "ansible.legacy.command", "ansible.legacy.apt"]
    assert open(host.policy).read() == "#!/bin/sh\nexit 0\n"  # untouched, not removed: the site's policy decides
    assert host.seen_by_manager == (True, 0)


def test_a_failed_install_still_removes_the_policy(tmp_path):
    host = blocking_host(tmp_path, backend_replies=[APT_FAILED])
    r = run({"names": ["slurmd"], "start_services": False}, host)
    assert r["failed"] is True and "No package matching" in r["msg"]
    assert host.calls[-1][0] == "ansible.legacy.file" and not os.path.exists(host.policy)


@pytest.mark.parametrize("why, args, check_mode, tool", [
    ("nothing to install", {"names": ["munge"]}, False, dpkg(rc=0)),
    ("check mode", {"names": ["slurmd"]}, True, None),
    ("services may start", {"names": ["slurmd"], "start_services": True}, False, None)])
def test_no_policy_is_written_when_there_is_nothing_to_block(tmp_path, why, args, check_mode, tool):
    host = blocking_host(tmp_path, tool=tool)
    run(dict({"start_services": False}, **args), host, check_mode=check_mode)
    assert "ansible.legacy.command" not in [c[0] for c in host.calls], why
    assert not os.path.exists(host.policy)


def test_dnf_hosts_write_no_policy(tmp_path):
    host = blocking_host(tmp_path, pkg_mgr="dnf")
    run({"names": ["slurm-slurmd"], "start_services": False}, host, task_vars={"ansible_facts": {"pkg_mgr": "dnf"}})
    assert [c[0] for c in host.calls] == ["ansible.legacy.dnf"]


def test_a_policy_that_cannot_be_written_stops_before_the_package_manager(tmp_path):
    host = blocking_host(tmp_path)
    host.policy_fail = "ansible.legacy.command"
    r = run({"names": ["slurmd"], "start_services": False}, host)
    assert r["failed"] is True and "could not write /usr/sbin/policy-rc.d" in r["msg"] and "Read-only" in r["msg"]
    assert host.managers() == []


def test_a_policy_that_cannot_be_removed_fails_loudly(tmp_path):
    host = blocking_host(tmp_path, backend_replies=[APT_INSTALLED])
    host.policy_fail = "ansible.legacy.file"
    with pytest.raises(AnsibleActionFail, match="was left on the host"):
        run({"names": ["slurmd"], "start_services": False}, host)


def test_allow_held_lets_apt_change_held_packages():
    host = Host()
    run({"names": ["slurmd=24.11.5-1"], "allow_held": True}, host)
    assert host.managers() == [("ansible.legacy.apt", {"name": ["slurmd=24.11.5-1"], "state": "present",
                                                       "allow_change_held_packages": True})]
    assert "allow_change_held_packages" not in action.backend_args("dnf", ["x"], "present", allow_held=True)
