"""preflight_specs: every role's argument spec checked strictly for the hosts the role runs on, and typos found.

Each rule has its own test with plain dicts (``Inventory(hostvars, groups)``); values "from -e" are strings tagged with
Ansible's command-line origin, as ansible-core 2.19 tags them.
"""

import copy
import os
import re
import subprocess

import pytest

from ansible_collections.clusterforge.gpu.plugins.filter.preflight import preflight_inventory_report
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import preflight_common, preflight_specs
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import (
    Inventory, bool_advice, load_role_specs,
)
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_specs import (
    KNOWN_GLOBALS, TYPES, check, known_names, typos,
)

ROOT = preflight_common.COLLECTION_ROOT
GROUPS = {
    "all": ["head01", "gpu01", "gpu02", "stor01"],
    "slurm_controller": ["head01"],
    "gpu_nodes": ["gpu01", "gpu02"],
    "lustre_mds": ["stor01"],
    "lustre_oss": ["stor01"],
    "lustre_clients": ["gpu01", "gpu02", "head01"],
    "ungrouped": [],
}
OPTS = {"lustre_enabled": True, "fabric_required": True, "strict": False, "rolling": False}


def hostvars(**per_host):
    """Empty hostvars for every host, then ``gpu01={...}`` etc. merged in; ``all={...}`` goes to every host."""
    hv = {host: {} for host in GROUPS["all"]}
    for host, values in per_host.items():
        for target in (GROUPS["all"] if host == "all" else [host]):
            hv[target].update(copy.deepcopy(values))
    return hv


def errors(**per_host):
    return check(Inventory(hostvars(**per_host), GROUPS), OPTS)


def warnings(**per_host):
    return typos(Inventory(hostvars(**per_host), GROUPS), OPTS)


def cli(text):
    """A string as ``-e name=value`` gives it: tagged with the command-line origin."""
    try:
        from ansible._internal._datatag._tags import Origin  # pylint: disable=import-outside-toplevel
    except ImportError:  # pragma: no cover
        pytest.skip("this ansible-core does not tag values with their origin")
    return Origin(description=preflight_common.CLI_ORIGIN).tag(text)


# -- types --------------------------------------------------------------------------------------------------------
def test_sound_values_pass():
    assert errors(
        all={"common_os_reboot_ok": False, "common_os_nofile_limit": 65536,
             "common_os_kernel_cmdline_params": ["iommu=pt"],
             "common_os_chrony_servers": [{"name": "ntp1", "type": "server"}],
             "common_os_sysctl": {"vm.swappiness": 1}},
        gpu01={"pcie_acs_disable": True, "nccl_roce_pfc_priority": 3, "gpu_tuning_gpus": [0, "1"],
               "nvidia_driver_branch": 570, "nvidia_driver_version": "570.124.06", "dcgm_exporter_listen_port": 9400,
               "lustre_client_mounts": [{"fsname": "scratch", "mgs_nids": ["10.2.0.31@o2ib"], "path": "/lustre"}],
               "lustre_client_directories": [{"path": "/lustre/ckpt", "kind": "checkpoint", "mode": "1777"}]},
        head01={"slurm_controller_partitions": [{"name": "gpu", "nodes": "gpu_nodes", "default": True,
                                                 "max_time": "7-00:00:00"}]},
    ) == []


def test_bool_from_yaml_string_keeps_the_old_message():
    errs = errors(all={"common_os_reboot_ok": "no"})
    assert "gpu01: common_os_reboot_ok: must be a boolean (true/false), got 'no'" in errs
    assert len([e for e in errs if e.startswith("gpu01: ")]) == 1


def test_bool_from_cli_gives_the_json_advice_once():
    errs = errors(all={"pcie_acs_disable": cli("true")})
    assert len(errs) == 1, errs
    assert errs[0].startswith("gpu01: pcie_acs_disable: must be a boolean (true/false), got 'true'")
    assert bool_advice("pcie_acs_disable") in errs[0]


def test_bool_as_integer_is_rejected():
    assert "gpu02: nvidia_driver_reboot_ok: must be a boolean (true/false), got 1" in \
        errors(gpu02={"nvidia_driver_reboot_ok": 1})


def test_int_as_string_is_rejected():
    assert "gpu01: dcgm_exporter_listen_port: must be an integer, got the string '9400'" in \
        errors(gpu01={"dcgm_exporter_listen_port": "9400"})


def test_int_from_cli_gives_the_json_advice():
    errs = errors(all={"nccl_ib_timeout": cli("22")})
    assert len(errs) == 1
    assert "give -e '{\"nccl_ib_timeout\": 22}' (JSON keeps the type" in errs[0]


def test_a_wrong_value_from_cli_gets_no_advice_that_would_not_work():
    errs = errors(all={"nccl_ib_timeout": cli("lots")})
    assert len(errs) == 1 and "from -e, on every host" in errs[0], errs
    assert "give -e" not in errs[0], errs


def test_int_as_bool_or_float_is_rejected():
    errs = errors(gpu01={"nccl_ib_timeout": True, "gpu_tuning_node_overhead_watts": 4600.0})
    assert "gpu01: nccl_ib_timeout: must be an integer, got a boolean True" in errs
    assert "gpu01: gpu_tuning_node_overhead_watts: must be a whole number, got 4600.0" in errs


def test_wrong_list_element_type():
    errs = errors(gpu01={"nccl_ib_hca": ["mlx5_0:1", ["mlx5_1:1"]]})
    assert errs == ["gpu01: nccl_ib_hca[1]: must be a string, got a list ['mlx5_1:1']"]


def test_unknown_choice():
    errs = errors(gpu01={"pcie_acs_scope": "everything", "nccl_roce_pfc_priority": 9})
    assert "gpu01: pcie_acs_scope: 'everything' is not one of gpu_nic_paths, all" in errs
    assert "gpu01: nccl_roce_pfc_priority: 9 is not one of 0, 1, 2, 3, 4, 5, 6, 7" in errs


def test_unknown_choice_of_a_suboption():
    errs = errors(all={"common_os_chrony_servers": [{"name": "ntp1", "type": "peer"}]})
    assert "head01: common_os_chrony_servers[0].type: 'peer' is not one of server, pool" in errs


def test_bad_suboption_key_with_suggestion():
    errs = errors(gpu01={"lustre_client_mounts": [{"fsname": "s", "mgs_nid": ["a@o2ib"], "path": "/s"}]})
    assert "gpu01: lustre_client_mounts[0]: unknown key 'mgs_nid' (known: fsname, mgs_nids, options, path); " \
           "did you mean mgs_nids?" in errs


def test_bad_suboption_type():
    errs = errors(stor01={"lustre_server_targets": [{"device": "/dev/md0", "type": "ost", "index": "zero"}]})
    assert "stor01: lustre_server_targets[0].index: must be an integer, got the string 'zero'" in errs


def test_required_suboption_missing():
    errs = errors(gpu01={"lustre_client_mounts": [{"fsname": "s", "mgs_nids": ["a@o2ib"]}]})
    assert errs == ["gpu01: lustre_client_mounts[0]: the required key path is missing (needs fsname, mgs_nids, path)"]


def test_required_suboption_null():
    errs = errors(gpu01={"lustre_client_lnet_networks": [{"net": None, "interfaces": ["ib0"]}]})
    assert errs == ["gpu01: lustre_client_lnet_networks[0].net: is required, got null"]


def test_required_suboption_empty():
    errs = errors(gpu01={"lustre_client_mounts": [{"fsname": "", "mgs_nids": [], "path": "/s"}]})
    assert errs == ["gpu01: lustre_client_mounts[0].fsname: is required and must not be empty, got ''",
                    "gpu01: lustre_client_mounts[0].mgs_nids: is required and must not be empty, got []"]


def test_wrong_choice_from_cli_is_reported_once():
    errs = errors(all={"pcie_acs_scope": cli("everything")})
    assert errs == ["gpu01: pcie_acs_scope: 'everything' is not one of gpu_nic_paths, all"]


def test_wrong_container():
    errs = errors(all={"common_os_sysctl": ["vm.swappiness=1"]}, gpu01={"nccl_ib_hca": "mlx5_0:1"})
    assert "head01: common_os_sysctl: must be a dict (key: value), got a list ['vm.swappiness=1']" in errs
    assert "gpu01: nccl_ib_hca: must be a list, got the string 'mlx5_0:1' (write it as a YAML list: [a, b])" in errs


def test_list_entry_that_is_not_a_dict():
    errs = errors(gpu01={"lustre_client_mounts": ["scratch@10.2.0.31:/lustre"]})
    assert errs == ["gpu01: lustre_client_mounts[0]: must be a dict (key: value), got a string "
                    "'scratch@10.2.0.31:/lustre'"]


def test_null_allowed_where_the_role_understands_it():
    assert errors(gpu01={"gpu_tuning_power_limit_watts": None, "slurm_compute_healthcheck_gpu_count": None,
                         "gpu_tuning_rack": None, "gpu_tuning_persistence_mode": None}) == []


def test_null_rejected_where_the_role_needs_a_value():
    errs = errors(gpu01={"common_os_nofile_limit": None})
    assert errs == ["gpu01: common_os_nofile_limit: must be an integer, got null "
                    "(leave it out to use the default 1048576)"]


def test_number_for_a_string_only_when_it_changes_meaning():
    errs = errors(gpu01={"nvidia_driver_branch": 570, "nvidia_driver_version": 570.1})
    assert errs == ["gpu01: nvidia_driver_version: must be a string, got the number 570.1; YAML drops digits of an "
                    "unquoted number (570.10 reads as 570.1): quote it as written"]


def test_boolean_for_a_string_is_rejected():
    errs = errors(all={"common_os_cpu_governor": False})
    assert "gpu01: common_os_cpu_governor: must be a string, got the boolean false (YAML reads unquoted " \
           "yes/no/on/off/true/false as a boolean): quote it" in errs


def test_unquoted_mode_and_slurm_time():
    errs = errors(gpu01={"lustre_client_directories": [{"path": "/l/d", "mode": 493}]},
                  head01={"slurm_controller_partitions": [{"name": "gpu", "nodes": "gpu_nodes", "max_time": 3600}]})
    assert any(e.startswith("gpu01: lustre_client_directories[0].mode: must be a quoted string such as '0755'")
               for e in errs), errs
    assert any(e.startswith("head01: slurm_controller_partitions[0].max_time: must be a quoted Slurm time")
               for e in errs), errs


def test_relative_path_is_rejected():
    errs = errors(gpu01={"gpu_tuning_state_file": "etc/state.json", "nccl_topo_file_src": "files/topo.xml"})
    assert errs == ["gpu01: gpu_tuning_state_file: must be an absolute path on the node, got 'etc/state.json'"]


def test_ports_and_units_ranges():
    errs = errors(gpu01={"dcgm_exporter_listen_port": 94000, "nvidia_driver_reboot_timeout_seconds": -1})
    assert "gpu01: dcgm_exporter_listen_port: 94000 is not a TCP port (1-65535)" in errs
    # The role's range (roles/nvidia_driver/meta/preflight.yml), with what the refused end would mean.
    assert ("gpu01: nvidia_driver_reboot_timeout_seconds: -1 is below the minimum 1 (0 would give the node no time "
            "to come back)") in errs


def test_only_hosts_the_role_runs_on():
    # gpu_tuning runs on gpu_nodes only: the same value on the controller is not its concern.
    errs = errors(all={"gpu_tuning_power_limit_watts": "700"})
    assert sorted(e.split(":", maxsplit=1)[0] for e in errs) == ["gpu01", "gpu02"]


def test_each_host_variable_rule_once():
    errs = errors(stor01={"lustre_server_lnet_networks": [{"net": "o2ib0", "interfaces": "ib0"}]})
    assert errs == ["stor01: lustre_server_lnet_networks[0].interfaces: must be a list, got the string 'ib0' "
                    "(write it as a YAML list: [a, b])"]


@pytest.mark.parametrize("value", [None, "", "x", -1, 1.5, True, [], [None], [{"a": 1}], {}, {"a": None}, [[1]],
                                   [{"name": ["x"], "nodes": {"a": 1}, "device": 5, "index": "one"}]])
def test_wrong_shapes_never_raise(value):
    for role, options in load_role_specs().items():
        per_host = {"all": {name: value for name in options}}
        assert isinstance(errors(**per_host), list), role


FAKE_SPEC = {"pcie_acs": {
    "pcie_acs_a": {"type": "str"}, "pcie_acs_b": {"type": "str"}, "pcie_acs_mode": {"type": "str"},
    "pcie_acs_c": {"type": "int"},
    "pcie_acs_list": {"type": "list", "elements": "str", "choices": ["x", "y"]},
    "pcie_acs_items": {"type": "list", "elements": "dict", "mutually_exclusive": [["servicenodes", "failnodes"]],
                       "options": {"servicenodes": {"type": "list", "elements": "str"},
                                   "failnodes": {"type": "list", "elements": "str"}}},
}}
FAKE_ENTRY = {"pcie_acs": {"options": FAKE_SPEC["pcie_acs"], "mutually_exclusive": [["pcie_acs_a", "pcie_acs_b"]],
                           "required_if": [["pcie_acs_mode", "strict", ["pcie_acs_c"]]]}}


def test_relations_between_options(monkeypatch):
    monkeypatch.setattr(preflight_specs, "load_role_specs", lambda: FAKE_SPEC)
    monkeypatch.setattr(preflight_specs, "_entry_rules", lambda: FAKE_ENTRY)
    errs = errors(gpu01={"pcie_acs_a": "1", "pcie_acs_b": "2"}, gpu02={"pcie_acs_mode": "strict"})
    assert errs == ["gpu01: pcie_acs_a: pcie_acs_a and pcie_acs_b are mutually exclusive; give only one",
                    "gpu02: pcie_acs_mode: pcie_acs_c is required when pcie_acs_mode is 'strict'"]


def test_relations_between_suboptions_and_list_choices(monkeypatch):
    monkeypatch.setattr(preflight_specs, "load_role_specs", lambda: FAKE_SPEC)
    monkeypatch.setattr(preflight_specs, "_entry_rules", lambda: {})
    errs = errors(gpu01={"pcie_acs_items": [{"servicenodes": ["a@o2ib"], "failnodes": ["b@o2ib"]}],
                         "pcie_acs_list": ["x", "z"]})
    assert errs == ["gpu01: pcie_acs_items[0]: servicenodes and failnodes are mutually exclusive; give only one",
                    "gpu01: pcie_acs_list[1]: 'z' is not one of x, y"]


def test_unreadable_spec_is_one_error_not_a_crash(monkeypatch):
    def broken():
        raise preflight_specs.yaml.YAMLError("mapping values are not allowed here")
    monkeypatch.setattr(preflight_specs, "load_role_specs", broken)
    assert errors(gpu01={"pcie_acs_disable": "no"}) == [
        "inventory: argument specs: a role's meta/argument_specs.yml cannot be read, so no role variable was checked: "
        "mapping values are not allowed here"]
    assert warnings(gpu01={"pcie_acs_disabel": True}) == []


# -- the specs themselves ------------------------------------------------------------------------------------------
def _walk(options, where):
    for name, opt in (options or {}).items():
        yield "%s.%s" % (where, name), opt
        if isinstance(opt, dict) and opt.get("options"):
            yield from _walk(opt["options"], "%s.%s" % (where, name))


def test_every_spec_option_has_a_known_type():
    for role, options in load_role_specs().items():
        for path, opt in _walk(options, role):
            assert opt.get("type") in TYPES, path
            if opt.get("type") == "list":
                assert opt.get("elements") in TYPES, "%s: a list needs elements" % path


def test_every_role_default_passes_its_own_spec():
    """A spec's default must satisfy the spec (else a sound inventory copying the default would be rejected)."""
    for role, options in load_role_specs().items():
        values = {name: opt["default"] for name, opt in options.items() if "default" in opt}
        assert errors(all=values) == [], role


# -- typos ---------------------------------------------------------------------------------------------------------
def test_typo_with_suggestion():
    assert warnings(gpu01={"gpu_tuning_power_limt_w": 700}, gpu02={"gpu_tuning_power_limt_w": 700}) == [
        "inventory: gpu_tuning_power_limt_w (on gpu01, gpu02): no role or playbook defines this variable; "
        "did you mean gpu_tuning_power_limit_watts?"]


def test_typo_without_suggestion():
    out = warnings(gpu01={"nccl_zzqqxx": 1})
    assert out == ["inventory: nccl_zzqqxx (on gpu01): no role or playbook defines this variable; no defined "
                   "variable has a similar name (a removed or misspelt variable?)"]


def typo_errors(**per_host):
    return preflight_specs.typo_errors(Inventory(hostvars(**per_host), GROUPS), OPTS)


def test_typo_in_the_role_part_of_the_prefix():
    # One letter dropped: an error by default (preflight_strict or not), and no warning besides.
    assert warnings(head01={"slurm_contoller_partitions": []}) == []
    assert typo_errors(head01={"slurm_contoller_partitions": []}) == [
        "inventory: slurm_contoller_partitions (on head01): no role or playbook defines this variable, and it is one "
        "letter away from slurm_controller_partitions: fix the spelling (the role would use its default for "
        "slurm_controller_partitions)"]


def test_site_variables_with_a_loose_prefix_are_not_flagged():
    assert warnings(all={"slurm_site_contact": "ops@example.com", "gpu_vendor_notes": "x"}) == []


def test_long_host_lists_are_abbreviated():
    out = typo_errors(all={"cluster_nmae": "x"})
    assert len(out) == 1 and out[0].startswith("inventory: cluster_nmae (on head01, gpu01, gpu02, stor01): "), out
    assert "one letter away from cluster_name" in out[0]
    groups = dict(GROUPS, all=["n%02d" % i for i in range(10)])
    inv = Inventory({h: {"validate_profle": "h100_sxm_ndr"} for h in groups["all"]}, groups)
    assert preflight_specs.typo_errors(inv, OPTS)[0].startswith("inventory: validate_profle (on all 10 hosts)")
    inv = Inventory(dict({h: {} for h in groups["all"]}, **{h: {"validate_profle": 1} for h in groups["all"][:6]}),
                    groups)
    assert preflight_specs.typo_errors(inv, OPTS)[0].startswith("inventory: validate_profle (on n00, n01, n02 and 3 more)")
    # Two edits away stays a warning (with the closest name), the same abbreviation.
    inv = Inventory({h: {"validate_proflle_x": 1} for h in groups["all"]}, groups)
    assert typos(inv, OPTS)[0].startswith("inventory: validate_proflle_x (on all 10 hosts)")


@pytest.mark.parametrize("typo, known", [
    ("pcie_acs_disabel", "pcie_acs_disable"),      # two neighbours swapped
    ("pcie_acs_disabl", "pcie_acs_disable"),       # a letter dropped
    ("pcie_acs_disablee", "pcie_acs_disable"),     # a letter added
    ("pcie_acs_dissble", "pcie_acs_disable"),      # a letter changed
])
def test_one_edit_away_is_an_error(typo, known):
    assert preflight_specs.one_edit(typo, known) and preflight_specs.one_edit(known, typo)
    out = typo_errors(gpu01={typo: True})
    assert len(out) == 1 and "one letter away from %s" % known in out[0], out
    assert warnings(gpu01={typo: True}) == []


def test_two_edits_away_stays_a_warning():
    assert not preflight_specs.one_edit("pcie_acs_dsiabel", "pcie_acs_disable")
    assert typo_errors(gpu01={"pcie_acs_dsiabel": True}) == []
    assert warnings(gpu01={"pcie_acs_dsiabel": True}) == [
        "inventory: pcie_acs_dsiabel (on gpu01): no role or playbook defines this variable; did you mean "
        "pcie_acs_disable?"]


def test_known_global_and_private_names_not_flagged():
    assert warnings(all={"cluster_name": "x", "validate_thresholds": {}, "rolling_serial": [1],
                         "cluster_domain": "x", "__gpu_tuning_internal": 1, "ansible_user": "root"}) == []


def test_a_retired_variable_is_named_as_such_not_as_a_typo():
    found = warnings(all={"cluster_converged_skip": False})
    assert len(found) == 1
    assert "cluster_converged_skip" in found[0] and "no longer read: the converged-node cache was removed" in found[0]
    assert "did you mean" not in found[0]
    found = warnings(head01={"slurm_controller_nvidia_smi_path": "/usr/bin/nvidia-smi"})
    assert len(found) == 1 and "no longer read: each GPU node now describes itself" in found[0], found
    assert "set slurm_compute_nvidia_smi_path instead" in found[0]
    # one letter from validate_profile, but retired (the hardware catalogue holds the profiles): named, not an error
    found = warnings(all={"validate_profiles": {"mine": {"ib_rate_gbps": 200}}})
    assert len(found) == 1 and "validate_profiles" in found[0] and "hardware catalogue" in found[0], found


def test_a_variable_another_role_defines_is_not_flagged():
    # slurm_compute's variable set for the controller's group too (it only runs on gpu_nodes): not a typo.
    assert warnings(head01={"slurm_compute_healthcheck_gpu_count": 8, "lustre_server_format_ok": False}) == []


def test_strict_mode_makes_typos_errors():
    hv = hostvars()
    for host, n in (("head01", 10), ("gpu01", 21), ("gpu02", 22), ("stor01", 31)):
        hv[host].update({"cluster_name": "testcl", "cluster_mgmt_network_cidr": "10.1.0.0/24",
                         "cluster_fabric_network_cidr": "10.2.0.0/24", "cluster_fabric_type": "infiniband",
                         "cluster_mgmt_ip": "10.1.0.%d" % n, "cluster_fabric_ip": "10.2.0.%d" % n})
    for host in GROUPS["gpu_nodes"]:
        hv[host].update({"cluster_gpu_type": "h100", "cluster_gpu_count_per_node": 8, "pcie_acs_disabel": True})
    for host in GROUPS["gpu_nodes"]:
        hv[host]["pcie_acs_dsiabel"] = hv[host].pop("pcie_acs_disabel")  # two edits away: a warning by default
    relaxed = preflight_inventory_report(hv, GROUPS)
    message = ("inventory: pcie_acs_dsiabel (on gpu01, gpu02): no role or playbook defines this variable; "
               "did you mean pcie_acs_disable?")
    assert relaxed["warnings"] == [message] and relaxed["errors"] == [], relaxed
    strict = preflight_inventory_report(hv, GROUPS, strict=True)
    assert strict["warnings"] == [] and message in strict["errors"], strict


def test_report_rejects_a_string_boolean_of_any_role():
    hv = hostvars(gpu01={"nvidia_driver_peermem": "false"})
    out = preflight_inventory_report(hv, GROUPS)
    assert "gpu01: nvidia_driver_peermem: must be a boolean (true/false), got 'false'" in out["errors"]


# -- KNOWN_GLOBALS cannot rot ----------------------------------------------------------------------------------------
def _read_in_tree():
    # A name right after the collection's FQCN prefix is one of its plugins (clusterforge.gpu.rolling_plan_result, a
    # filter), not a variable.
    proc = subprocess.run(["grep", "-rhoP", r"(?<!clusterforge\.gpu\.)\b(cluster|validate|rolling)_[a-z0-9_]+",
                           "site.yml", "playbooks", "roles", "inventories"], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    names = set(proc.stdout.split())
    files = set()
    registered = set()
    for top in ("site.yml", "playbooks", "roles", "inventories"):
        for dirpath, _dirs, filenames in os.walk(os.path.join(ROOT, top)):
            for filename in filenames:
                files.add(os.path.splitext(filename)[0])
                if filename.endswith((".yml", ".yaml")):
                    with open(os.path.join(dirpath, filename)) as f:
                        text = f.read()
                    registered.update(re.findall(r"^\s*register:\s*([A-Za-z0-9_]+)", text, re.M))
                    # YAML anchors and aliases (options: &rolling_options) name no variable either.
                    registered.update(re.findall(r"(?:^|\s)[&*]([A-Za-z0-9_]+)", text, re.M))
        if top.endswith(".yml"):
            files.add(os.path.splitext(top)[0])
    # A name that is only a file name (rolling_apply.yml, tasks/validate_ib_pair.yml), a registered result or a YAML
    # anchor is not an inventory variable.
    return names - registered - (files - set(KNOWN_GLOBALS))


def test_known_globals_cover_every_variable_the_tree_reads():
    missing = sorted(_read_in_tree() - known_names())
    assert missing == [], "read in site.yml/playbooks/roles/inventories but unknown to the typo check " \
                          "(add to KNOWN_GLOBALS in preflight_specs.py): %s" % missing


def test_known_globals_are_still_read_somewhere():
    proc = subprocess.run(["grep", "-rhoE", r"\b(cluster|validate|rolling)_[a-z0-9_]+", "site.yml", "playbooks",
                           "roles", "inventories", "plugins"], cwd=ROOT, capture_output=True, text=True, check=False)
    stale = sorted(set(KNOWN_GLOBALS) - set(proc.stdout.split()))
    assert stale == [], "KNOWN_GLOBALS lists variables nothing reads any more: %s" % stale
