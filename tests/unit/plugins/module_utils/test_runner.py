"""The shared tool runner: PATH order decides which binary runs, argv lists, C locale, recorded calls."""

from unittest import mock

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import C_LOCALE, ToolRunner, find_tool, quote


@pytest.fixture(autouse=True)
def _execute_through_run_command(monkeypatch):
    """These tests script the module's run_command; the runner's time-limited executor hands over to it (the
    executor itself is tested in test_runner_time_limit.py)."""
    from ansible_collections.clusterforge.gpu.plugins.module_utils import _runner

    def execute(module, cmd, timeout_seconds, data=None, environ_update=None):
        return module.run_command(cmd, environ_update=environ_update, data=data, check_rc=False)
    monkeypatch.setattr(_runner, "execute", execute)


class FakeModule(object):
    def __init__(self, found="/usr/local/bin/nvidia-smi", rc=0):
        self.found = found
        self.rc = rc
        self.get_bin_path = mock.Mock(return_value=found)
        self.run_command = mock.Mock(return_value=(rc, "out", "err"))

    def fail_json(self, **kwargs):
        raise RuntimeError(kwargs)


def test_lookup_uses_path_order_without_preferring_usr_bin():
    module = FakeModule()
    runner = ToolRunner(module, "nvidia-smi")
    assert runner.bin == "/usr/local/bin/nvidia-smi"
    args, kwargs = module.get_bin_path.call_args
    assert args == ("nvidia-smi",)
    assert not kwargs.get("opt_dirs"), "opt_dirs are searched before PATH and would shadow a PATH wrapper"


def test_explicit_path_wins_and_no_path_lookup():
    module = FakeModule()
    runner = ToolRunner(module, "nvidia-smi", path="/opt/nv/nvidia-smi", option="nvidia_smi_path")
    assert runner.bin == "/opt/nv/nvidia-smi"
    # the override is only checked (exists, a file, executable), never replaced by a PATH search for the tool
    assert module.get_bin_path.call_args_list == [mock.call("/opt/nv/nvidia-smi", required=False)]


def test_explicit_path_that_is_wrong_fails_with_path_and_option_even_when_optional():
    module = FakeModule(found=None)
    with pytest.raises(RuntimeError) as e:
        ToolRunner(module, "dpkg-query", path="/opt/nope/dpkg-query", required=False, option="dpkg_query_path")
    msg = e.value.args[0]["msg"]
    assert "dpkg-query was not found at /opt/nope/dpkg-query (dpkg_query_path)" in msg
    module.run_command.assert_not_called()


def test_bare_name_in_the_path_option_is_looked_up_on_path():
    module = FakeModule(found="/usr/sbin/dcgmi-wrapper")
    assert ToolRunner(module, "dcgmi", path="dcgmi-wrapper").bin == "/usr/sbin/dcgmi-wrapper"


def test_real_lookup_of_an_explicit_path(tmp_path):
    """Against Ansible's own get_bin_path: an absolute override must exist and be executable."""
    from ansible.module_utils.common.process import get_bin_path

    tool = tmp_path / "lspci"
    tool.write_text("#!/bin/sh\n")

    class Real(FakeModule):
        def __init__(self):
            super().__init__()
            self.get_bin_path = lambda arg, required=False: _lookup(get_bin_path, arg)

    with pytest.raises(RuntimeError, match="not executable"):
        find_tool(Real(), "lspci", str(tool), option="lspci_path")
    tool.chmod(0o755)
    assert find_tool(Real(), "lspci", str(tool), option="lspci_path") == str(tool)
    with pytest.raises(RuntimeError, match="not found at"):
        find_tool(Real(), "lspci", str(tmp_path), option="lspci_path")  # a directory


def _lookup(get_bin_path, arg):
    try:
        return get_bin_path(arg)
    except ValueError:
        return None


def test_optional_tool_that_is_missing_is_none():
    module = FakeModule(found=None)
    runner = ToolRunner(module, "timeout", required=False)
    assert runner.bin is None and not runner.available


def test_missing_tool_fails_before_anything_runs():
    module = FakeModule(found=None)
    with pytest.raises(RuntimeError, match="setpci was not found on this host; install it or set setpci_path"):
        ToolRunner(module, "setpci", option="setpci_path")
    module.run_command.assert_not_called()


def test_run_records_argv_and_forces_c_locale():
    module = FakeModule()
    runner = ToolRunner(module, "nvidia-smi")
    assert runner.run(["-i", 0, "-pl", 500]) == (0, "out", "err")
    cmd = module.run_command.call_args[0][0]
    assert cmd == ["/usr/local/bin/nvidia-smi", "-i", "0", "-pl", "500"]
    assert module.run_command.call_args[1]["environ_update"] == C_LOCALE
    assert runner.calls == [cmd]


def test_non_zero_rc_fails_with_command_rc_and_output():
    module = FakeModule(rc=3)
    runner = ToolRunner(module, "setpci")
    with pytest.raises(RuntimeError) as e:
        runner.run(["-s", "00:01.0", "ECAP_ACS+0x6.w=0000"])
    info = e.value.args[0]
    assert info["rc"] == 3 and info["stderr"] == "err" and "ECAP_ACS+0x6.w=0000" in info["cmd"]


def test_quote():
    assert quote(["a b", "c"]) == "'a b' c"
