# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""sysctl_settings against a scratch /proc/sys tree and sysctl.d directory: no command is ever run."""

import errno
import os
import stat

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import sysctl_settings

HEADER = "Managed by clusterforge.gpu.common_os (common_os_sysctl_defaults, common_os_sysctl)."
# Running values as the kernel prints them (tcp_rmem with tabs).
BOOT = {
    "net/core/somaxconn": "4096\n",
    "vm/max_map_count": "65530\n",
    "kernel/numa_balancing": "1\n",
    "net/ipv4/tcp_rmem": "4096\t131072\t6291456\n",
    "net/ipv4/conf/eth0.100/rp_filter": "1\n",
}
SETTINGS = {
    "net.core.somaxconn": 4096,
    "vm.max_map_count": 1048576,
    "kernel.numa_balancing": 0,
    "net.ipv4.tcp_rmem": "4096 131072 6291456",
}


def no_command(argv, data):
    raise AssertionError("sysctl_settings must not run a command: %r" % (argv,))


@pytest.fixture
def host(tmp_path):
    proc = tmp_path / "proc_sys"
    for rel, value in BOOT.items():
        f = proc / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(value)
    etc = tmp_path / "sysctl.d"
    etc.mkdir()
    return {"proc": proc, "file": etc / "90-clusterforge.conf"}


def run(host, check_mode=False, diff=False, **args):
    base = dict(settings=SETTINGS, path=str(host["file"]), header=HEADER, proc_root=str(host["proc"]), mode="0644")
    base.update(args)
    return run_module(sysctl_settings, base, Tool(no_command), check_mode=check_mode, diff=diff)


def live(host, rel):
    return (host["proc"] / rel).read_text().strip()


EXPECTED_FILE = (
    "# " + HEADER + "\n"
    "net.core.somaxconn=4096\n"
    "vm.max_map_count=1048576\n"
    "kernel.numa_balancing=0\n"
    "net.ipv4.tcp_rmem=4096 131072 6291456\n"
)


def test_check_mode_predicts_and_changes_nothing(host):
    result = run(host, check_mode=True, diff=True)
    assert result["changed"] and result["file_changed"]
    assert [d["key"] for d in result["runtime_changed"]] == ["vm.max_map_count", "kernel.numa_balancing"]
    assert not host["file"].exists()
    assert live(host, "vm/max_map_count") == "65530"
    file_diff, runtime_diff = result["diff"]
    assert file_diff["before"] == "" and file_diff["after"] == EXPECTED_FILE
    assert runtime_diff["before"] == "vm.max_map_count = 65530\nkernel.numa_balancing = 1\n"
    assert runtime_diff["after"] == "vm.max_map_count = 1048576\nkernel.numa_balancing = 0\n"


def test_apply_writes_one_file_and_the_differing_values_then_nothing(host):
    result = run(host)
    assert result["changed"] and result["file_changed"]
    assert host["file"].read_text() == EXPECTED_FILE
    assert stat.S_IMODE(os.stat(str(host["file"])).st_mode) == 0o644
    assert live(host, "vm/max_map_count") == "1048576" and live(host, "kernel/numa_balancing") == "0"
    # Multi-field value with tabs: equal, so never rewritten.
    assert live(host, "net/ipv4/tcp_rmem") == "4096\t131072\t6291456"
    again = run(host)
    assert again["changed"] is False and again["runtime_changed"] == [] and again["file_changed"] is False
    check = run(host, check_mode=True)
    assert check["changed"] is False


def test_a_value_changed_by_hand_is_put_back(host):
    run(host)
    (host["proc"] / "net/core/somaxconn").write_text("128\n")
    result = run(host)
    assert result["changed"] and not result["file_changed"]
    assert result["runtime_changed"] == [{"key": "net.core.somaxconn", "before": "128", "after": "4096"}]
    assert live(host, "net/core/somaxconn") == "4096"


def test_removed_keys_leave_the_file(host):
    run(host)
    result = run(host, settings={"net.core.somaxconn": 8192})
    assert result["changed"] and result["file_changed"]
    assert host["file"].read_text() == "# " + HEADER + "\nnet.core.somaxconn=8192\n"


def test_file_only_reads_no_running_value(host):
    result = run(host, apply_runtime=False, proc_root=str(host["proc"] / "absent"))
    assert result["changed"] and result["runtime_changed"] == []
    assert host["file"].read_text() == EXPECTED_FILE
    assert run(host, apply_runtime=False, proc_root="/nonexistent")["changed"] is False


def test_unknown_key_fails_before_anything_changes(host):
    result = run(host, settings=dict(SETTINGS, **{"net.bridge.bridge-nf-call-iptables": 1}))
    assert result["failed"] and "net.bridge.bridge-nf-call-iptables" in result["msg"]
    assert not host["file"].exists()
    assert live(host, "vm/max_map_count") == "65530"


def test_slash_form_and_dotted_interface_names(host):
    result = run(host, settings={"net/ipv4/conf/eth0.100/rp_filter": 2})
    assert result["changed"]
    assert live(host, "net/ipv4/conf/eth0.100/rp_filter") == "2"
    assert sysctl_settings.key_path("/p", "net.ipv4.conf.eth0/100.rp_filter") == "/p/net/ipv4/conf/eth0.100/rp_filter"
    assert sysctl_settings.key_path("/p", "net/ipv4/conf/eth0.100/rp_filter") == "/p/net/ipv4/conf/eth0.100/rp_filter"


def test_invalid_settings_are_refused(host):
    for bad in ({"net.core somaxconn": 1}, {"vm.swappiness": ""}, {"vm.swappiness": "1\n2"}, {"-x": 1}):
        result = run(host, settings=bad)
        assert result["failed"] and "invalid settings" in result["msg"], bad
    assert not host["file"].exists()


def test_booleans_and_lists(host):
    assert sysctl_settings.normalise_value(True) == "1"
    assert sysctl_settings.normalise_value([4096, 87380, 268435456]) == "4096 87380 268435456"
    assert sysctl_settings.same_value("4096\t87380  268435456", "4096 87380 268435456")


def test_value_the_kernel_does_not_keep_fails(host, monkeypatch):
    real_open = open

    def clamping_open(path, mode="r", *a, **kw):
        if str(path).endswith("vm/max_map_count") and "w" in mode:
            class Clamp(object):
                def __enter__(self):
                    return self

                def __exit__(self, *exc):
                    with real_open(path, "w") as f:
                        f.write("65530")

                def write(self, value):
                    pass
            return Clamp()
        return real_open(path, mode, *a, **kw)

    monkeypatch.setattr("builtins.open", clamping_open)
    result = run(host)
    assert result["failed"] and "did not keep vm.max_map_count=1048576" in result["msg"]


def test_read_only_proc_sys_says_what_to_do(host, monkeypatch):
    real_open = open

    def read_only_open(path, mode="r", *a, **kw):
        if str(path).startswith(str(host["proc"])) and "w" in mode:
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, mode, *a, **kw)

    monkeypatch.setattr("builtins.open", read_only_open)
    result = run(host)
    assert result["failed"] and "apply_runtime=false" in result["msg"]
    assert live(host, "vm/max_map_count") == "65530"
