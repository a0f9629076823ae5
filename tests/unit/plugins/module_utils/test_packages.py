# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""module_utils/packages.installed_versions, the one dpkg reader: what it returns to its callers (package_check and
nvidia_driver_state). The parsers are covered through package_check in tests/unit/plugins/modules/."""

from unittest import mock

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils import packages


@pytest.fixture(autouse=True)
def _execute_through_run_command(monkeypatch):
    """These tests script the module's run_command; the runner's time-limited executor hands over to it (the
    executor itself is tested in test_runner_time_limit.py)."""
    from ansible_collections.clusterforge.gpu.plugins.module_utils import _runner

    def execute(module, cmd, timeout_seconds, data=None, environ_update=None):
        return module.run_command(cmd, environ_update=environ_update, data=data, check_rc=False)
    monkeypatch.setattr(_runner, "execute", execute)


class FakeModule(object):
    def __init__(self, answer=(0, "", ""), found="/usr/bin/dpkg-query"):
        self.run_command = mock.Mock(return_value=answer)
        self.get_bin_path = mock.Mock(return_value=found)

    def fail_json(self, **kwargs):
        raise RuntimeError(kwargs)


def test_one_call_for_the_sorted_names_and_the_argv_that_ran():
    module = FakeModule((1, "libnvidia-ml1:amd64\t570.133.20-1\tii \nmunge\t0.5.15-2\trc \n",
                         "dpkg-query: no packages found matching slurmd\n"))
    supported, installed, cmd = packages.installed_versions(module, ["munge", "libnvidia-ml1", "slurmd", "munge"])
    assert supported is True
    assert installed == {"libnvidia-ml1:amd64": "570.133.20-1", "libnvidia-ml1": "570.133.20-1"}
    assert cmd == ["/usr/bin/dpkg-query", "-W", "-f=" + packages.FORMAT, "--", "libnvidia-ml1", "munge", "slurmd"]
    assert module.run_command.call_count == 1


def test_nothing_to_ask_runs_nothing():
    module = FakeModule()
    assert packages.installed_versions(module, []) == (True, {}, None)
    module.run_command.assert_not_called()


def test_without_dpkg_query_it_is_unsupported():
    module = FakeModule(found=None)
    assert packages.installed_versions(module, ["munge"]) == (False, {}, None)
    module.run_command.assert_not_called()


def test_an_error_of_dpkg_query_fails():
    module = FakeModule((2, "", "dpkg-query: error: cannot access archive: database locked\n"))
    with pytest.raises(RuntimeError) as e:
        packages.installed_versions(module, ["munge"])
    assert "database locked" in e.value.args[0]["msg"]


def test_a_wrong_dpkg_query_path_fails_naming_the_option():
    module = FakeModule(found=None)
    with pytest.raises(RuntimeError) as e:
        packages.installed_versions(module, ["munge"], dpkg_query_path="/opt/dpkg/dpkg-query")
    assert "dpkg-query was not found at /opt/dpkg/dpkg-query (dpkg_query_path)" in e.value.args[0]["msg"]


def test_specs_and_satisfied():
    assert packages.parse_spec("datacenter-gpu-manager-4-core=1:4.2.3*") == ("datacenter-gpu-manager-4-core",
                                                                             "1:4.2.3", True)
    assert packages.parse_spec("@nvidia-driver:535-open") is None
    installed = {"munge": "0.5.15-2"}
    assert packages.satisfied(("munge", "0.5.15", True), installed)
    assert not packages.satisfied(("munge", "0.5.15", False), installed)
    assert not packages.satisfied(("slurmd", None, False), installed)
