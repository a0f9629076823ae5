# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""tool_info: the roles find vendor programs with the modules' own finder; nothing is ever run."""

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import tool_info


def no_command(argv, data):
    raise AssertionError("tool_info must not run a command: %r" % (argv,))


def test_found_and_missing_are_reported_without_failing():
    r = run_module(tool_info, {"names": ["mlnx_qos", "nvidia-mig-parted"]}, Tool(no_command, missing=["nvidia-mig-parted"]))
    assert not r.get("failed") and r["changed"] is False
    assert r["found"] == {"mlnx_qos": "/usr/bin/mlnx_qos", "nvidia-mig-parted": None}
    assert r["missing"] == ["nvidia-mig-parted"]


def test_required_fails_naming_every_missing_program_and_the_hint():
    r = run_module(tool_info, {"names": ["a", "b", "c"], "required": True, "hint": "Install the vendor tools."},
                   Tool(no_command, missing=["a", "c"]))
    assert r["failed"]
    assert r["msg"].startswith("a, c not found on this host") and r["msg"].endswith(". Install the vendor tools.")
    assert r["missing"] == ["a", "c"]


def test_required_passes_when_all_are_there():
    r = run_module(tool_info, {"names": ["mlnx_qos"], "required": True}, Tool(no_command))
    assert not r.get("failed") and r["missing"] == []


def test_an_explicit_path_that_does_not_exist_fails_naming_the_option(tmp_path):
    # The helper's get_bin_path finds any name; make the explicit path one it refuses.
    r = run_module(tool_info, {"names": ["mlnx_qos"], "paths": {"mlnx_qos": "/opt/nope/mlnx_qos"}},
                   Tool(no_command, missing=["/opt/nope/mlnx_qos"]))
    assert r["failed"] and "mlnx_qos was not found at /opt/nope/mlnx_qos (paths.mlnx_qos)" in r["msg"]


def test_an_explicit_path_is_returned_as_given():
    r = run_module(tool_info, {"names": ["mlnx_qos"], "paths": {"mlnx_qos": "/opt/mellanox/bin/mlnx_qos"}},
                   Tool(no_command))
    assert r["found"] == {"mlnx_qos": "/opt/mellanox/bin/mlnx_qos"}


def test_bad_input_is_refused():
    r = run_module(tool_info, {"names": ["/usr/bin/mlnx_qos"]}, Tool(no_command))
    assert r["failed"] and "bare program names" in r["msg"]
    r = run_module(tool_info, {"names": ["a"], "paths": {"b": "/x/b"}}, Tool(no_command))
    assert r["failed"] and "not in names: b" in r["msg"]


def test_check_mode_reads_the_same():
    r = run_module(tool_info, {"names": ["mlnx_qos"]}, Tool(no_command), check_mode=True)
    assert r["found"] == {"mlnx_qos": "/usr/bin/mlnx_qos"} and r["changed"] is False
