"""The preflight report as a whole: every rule set together never raises, whatever shape a value has.

A crash in one rule would hide every other error (the operator would see a Python traceback instead of the list),
so each known variable is given values of every wrong shape, one at a time, and the report must come back with
errors and without the "stopped on a value of an unexpected shape" error that the filter adds when a rule set raises.
"""

import copy

import pytest

from ansible_collections.clusterforge.gpu.plugins.filter.preflight import preflight_inventory_report
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import preflight_common
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import Inventory, load_role_specs

try:
    from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_specs import KNOWN_GLOBALS
except ImportError:  # pragma: no cover - until the typo check lists the globals
    KNOWN_GLOBALS = ()

GROUPS = {
    "all": ["head01", "gpu01", "gpu02", "stor01"],
    "slurm_controller": ["head01"],
    "gpu_nodes": ["gpu01", "gpu02"],
    "lustre_mds": ["stor01"],
    "lustre_oss": ["stor01"],
    "lustre_clients": ["gpu01", "gpu02", "head01"],
    "ungrouped": [],
}
ADDR = {"head01": 10, "gpu01": 21, "gpu02": 22, "stor01": 31}


def sound_hostvars():
    hv = {}
    for host, n in ADDR.items():
        hv[host] = {
            "cluster_name": "testcl",
            "cluster_mgmt_network_cidr": "10.1.0.0/24",
            "cluster_fabric_network_cidr": "10.2.0.0/24",
            "cluster_fabric_type": "infiniband",
            "cluster_mgmt_ip": "10.1.0.%d" % n,
            "cluster_fabric_ip": "10.2.0.%d" % n,
        }
    for host in GROUPS["gpu_nodes"]:
        hv[host].update({"cluster_gpu_type": "h100", "cluster_gpu_count_per_node": 8})
    return hv


def report(hv, **kw):
    return preflight_inventory_report(hv, GROUPS, **kw)


def test_sound_inventory_has_no_errors():
    out = report(sound_hostvars())
    assert out["errors"] == [], out


WRONG_SHAPES = [None, "", "x; rm -rf /", -1, 0, 1.5, True, [], ["a"], [None], [{"a": 1}], {}, {"a": None},
                {"name": ["x"]}, [[1]], [{"name": "gpu", "nodes": ["gpu01"], "default": "yes", "max_time": 5}],
                [{"name": ["x"], "nodes": {"a": 1}, "device": 5, "index": "one", "fsname": None}]]


def _all_variables():
    names = set(KNOWN_GLOBALS)
    for options in load_role_specs().values():
        names.update(options)
    names.update(["cluster_name", "cluster_gpu_type", "cluster_gpu_count_per_node", "cluster_fabric_type",
                  "cluster_mgmt_ip", "cluster_fabric_ip", "cluster_mgmt_network_cidr", "cluster_fabric_network_cidr"])
    return sorted(names)


@pytest.mark.parametrize("name", _all_variables())
def test_no_rule_raises_on_a_wrong_shape(name):
    for value in WRONG_SHAPES:
        hv = sound_hostvars()
        for host in hv:
            hv[host][name] = copy.deepcopy(value)
        out = report(hv, rolling=True)
        crashed = [e for e in out["errors"] if "stopped on a value of an unexpected shape" in e
                   or "check stopped (" in e]
        assert not crashed, "%s=%r: %s" % (name, value, crashed)


class _Undefined(preflight_common._JinjaUndefined):  # pylint: disable=protected-access
    pass


def test_an_unresolvable_value_is_one_error_naming_host_and_variable():
    hv = sound_hostvars()
    hv["gpu01"]["gpu_tuning_power_limit_watts"] = _Undefined(name="my_cap")
    out = report(hv)
    msgs = [e for e in out["errors"] if e.startswith("gpu01: gpu_tuning_power_limit_watts: cannot be resolved")]
    assert len(msgs) == 1, out["errors"]
    assert "my_cap" in msgs[0]


def test_a_hostvars_that_raises_is_reported_not_raised():
    class Exploding(dict):
        def get(self, key, default=None):
            if key == "cluster_gpu_type":
                raise RuntimeError("template error: boom")
            return dict.get(self, key, default)

    hv = sound_hostvars()
    hv["gpu02"] = Exploding(hv["gpu02"])
    out = report(hv)
    assert any(e.startswith("gpu02: cluster_gpu_type: cannot be resolved: template error: boom")
               for e in out["errors"]), out["errors"]


def test_inventory_reader_effective_value_falls_back_to_the_role_default():
    inv = Inventory({"gpu01": {"gpu_tuning_rack": "r1"}}, {"all": ["gpu01"], "gpu_nodes": ["gpu01"]})
    assert inv.effective("gpu01", "gpu_tuning", "gpu_tuning_rack") == "r1"
    assert inv.effective("gpu01", "gpu_tuning", "gpu_tuning_node_overhead_watts") == \
        load_role_specs()["gpu_tuning"]["gpu_tuning_node_overhead_watts"]["default"]


def test_extra_var_names_are_read_from_the_command_line(monkeypatch, tmp_path):
    from ansible import context
    from ansible.module_utils.common.collections import ImmutableDict
    from ansible_collections.clusterforge.gpu.plugins.filter.preflight import extra_var_names

    extra = tmp_path / "extra.yml"
    extra.write_text("cluster_fabric_type: roce\n")
    monkeypatch.setattr(context, "CLIARGS", ImmutableDict(extra_vars=(
        '{"rolling_roles": ["gpu_tuning"], "gpu_tuning_power_limit_watts": 600}', "nccl_ib_timeout=22",
        "@" + str(extra))))
    assert extra_var_names() == ["cluster_fabric_type", "gpu_tuning_power_limit_watts", "nccl_ib_timeout",
                                 "rolling_roles"]
    monkeypatch.setattr(context, "CLIARGS", ImmutableDict())
    assert extra_var_names() == []


class CountingHostvars(dict):
    """hostvars that count their lookups (Ansible's merges every source of a host's variables on each one)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.lookups = []

    def __getitem__(self, host):
        self.lookups.append(host)
        return dict.__getitem__(self, host)


def test_the_report_reads_each_hosts_variables_once():
    hv = CountingHostvars(sound_hostvars())
    report = preflight_inventory_report(hv, GROUPS)
    assert report["errors"] == []
    assert sorted(hv.lookups) == sorted(ADDR), hv.lookups


def test_a_spec_file_is_parsed_once_per_process():
    path = preflight_common.os.path.join(preflight_common.COLLECTION_ROOT, "roles", "dcgm", "meta", "argument_specs.yml")
    assert preflight_common.read_yaml(path) is preflight_common.read_yaml(path)
    assert "main" in preflight_common.role_argument_specs()["dcgm"]


def test_one_host_name_rule_for_every_rule_set():
    assert preflight_common.is_host_name("mgs01.ib.example.org") and preflight_common.is_host_name("bmc-7")
    for bad in ("10.1.0.300", "1.2.3.4", "-gpu01", "gpu01-", "a..b", "gpu_01", "x" * 64, ".".join(["a" * 63] * 5), "", None):
        assert not preflight_common.is_host_name(bad), bad
    assert preflight_common.is_host_label("gpu01") and not preflight_common.is_host_label("gpu01.example.org")
