# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""lctl_params_drift: one read of every Lustre client tuning, the differences for one lctl set_param."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter.lustre import lctl_params_drift

# Two OSCs (wildcard) and one llite instance, as `lctl get_param -n` prints them one value per line.
OUT = ["@@cf-param osc.*.max_rpcs_in_flight", "64", "8",
       "@@cf-param osc.*.max_pages_per_rpc", "1024", "1024",
       "@@cf-param llite.*.max_read_ahead_mb", "1024"]
WANTED = {"osc.*.max_rpcs_in_flight": 64, "osc.*.max_pages_per_rpc": "1024", "llite.*.max_read_ahead_mb": 2048}


def test_differences_on_any_device_in_wanted_order():
    drift = lctl_params_drift(OUT, WANTED)
    assert [d["param"] for d in drift] == ["osc.*.max_rpcs_in_flight", "llite.*.max_read_ahead_mb"]
    assert drift[0] == {"param": "osc.*.max_rpcs_in_flight", "expected": "64", "live": ["64", "8"],
                        "setting": "osc.*.max_rpcs_in_flight=64"}
    assert drift[1]["setting"] == "llite.*.max_read_ahead_mb=2048"


def test_no_difference_is_empty_and_a_string_input_parses_the_same():
    wanted = {"osc.*.max_rpcs_in_flight": 64}
    out = "@@cf-param osc.*.max_rpcs_in_flight\n64\n64\n"
    assert lctl_params_drift(out, wanted) == []


def test_a_parameter_without_devices_is_not_a_difference():
    assert lctl_params_drift(["@@cf-param mdc.*.max_rpcs_in_flight"], {"mdc.*.max_rpcs_in_flight": 128}) == []


def test_a_parameter_that_was_not_read_is_an_error():
    with pytest.raises(AnsibleFilterError, match="no output for llite"):
        lctl_params_drift(["@@cf-param osc.*.max_rpcs_in_flight", "64"],
                          {"osc.*.max_rpcs_in_flight": 64, "llite.*.max_read_ahead_mb": 1})


def test_wanted_must_be_a_dict():
    with pytest.raises(AnsibleFilterError, match="must be a dict"):
        lctl_params_drift(OUT, ["osc.*.max_rpcs_in_flight"])
