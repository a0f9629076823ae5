"""The shared tool runner: PATH order decides which binary runs, argv lists, C locale, recorded calls."""

from unittest import mock

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import C_LOCALE, ToolRunner, quote


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


def test_explicit_path_wins_and_no_lookup():
    module = FakeModule()
    runner = ToolRunner(module, "nvidia-smi", path="/opt/nv/nvidia-smi")
    assert runner.bin == "/opt/nv/nvidia-smi"
    module.get_bin_path.assert_not_called()


def test_missing_tool_fails_before_anything_runs():
    module = FakeModule(found=None)
    with pytest.raises(RuntimeError, match="was not found"):
        ToolRunner(module, "setpci")
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
