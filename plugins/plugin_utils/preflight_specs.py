# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight rules: every role's argument spec, for every host the role runs on, before any role starts; typos.

Ansible validates a role's argument spec only when the role starts, after the roles before it have changed the
cluster, and it is loose where looseness is dangerous: it turns the string ``"no"`` into a boolean for its check but
the role's tasks still read the string (truthy in Jinja), it accepts ``"600"`` for an integer and ``"a,b"`` for a
list. These rules are strict instead, and run for every role at once:

* ``bool`` is a real boolean, ``int`` a real integer, ``list``/``dict`` the right container, every element and
  suboption checked (``elements``, ``choices``, nested ``options``, ``required``), unknown suboption keys named;
* a value given with ``-e name=value`` (always a string) gets the advice to give it as JSON, which keeps the type;
* a number where a string is expected is accepted only when it reads back the same (see :func:`_str_problem`);
* ``path`` options are absolute paths on the node.

:func:`typos` warns about a variable with one of ClusterForge's prefixes that no role or playbook reads;
:func:`typo_errors` makes it an error when it is one edit away from a variable of this collection.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import json
import os
import re

import yaml

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import preflight_generic
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import (
    COLLECTION_ROOT,
    MISSING,
    PLAYBOOK_ONLY_ROLES,
    bool_advice,
    from_cli,
    load_role_specs,
    read_yaml,
    role_argument_specs,
)
from ansible_collections.clusterforge.gpu.plugins.module_utils.values import is_int, is_number, type_name

# The cluster_*, validate_* and rolling_* variables that site.yml, playbooks/, roles/ and inventories/ read (playbook
# and task file names such as rolling_apply or validate_ib_pair are not variables). tests/unit/plugins/plugin_utils/
# test_preflight_specs.py greps the tree and fails when a variable read there is missing here and from the specs.
KNOWN_GLOBALS = (
    # Cluster-wide inventory (the preflight filter, common_os, slurm, lustre, nccl).
    "cluster_name", "cluster_domain", "cluster_fabric_type",
    "cluster_mgmt_network_cidr", "cluster_fabric_network_cidr", "cluster_mgmt_ip", "cluster_fabric_ip",
    "cluster_gpu_type", "cluster_gpu_count_per_node",
    # Helpers of the lab inventory's Lustre layout (inventories/lab/group_vars/lustre_*).
    "cluster_lustre_fsname", "cluster_lustre_mgs_nids", "cluster_lustre_mds_targets", "cluster_lustre_oss_targets",
    # playbooks/validate.yml.
    "validate_profile", "validate_thresholds", "validate_models",
    "validate_checkpoint_interval_minutes", "validate_dcgm_level", "validate_dcgm_timeout_seconds",
    "validate_fetch_dir", "validate_report_dir", "validate_gpus_per_node", "validate_ib_ports_per_node",
    "validate_ib_write_bw_hcas", "validate_ib_write_bw_iterations", "validate_ib_write_bw_size_bytes",
    "validate_ib_write_bw_timeout_seconds", "validate_ibdiagnet", "validate_nccl_max_bytes",
    "validate_nccl_srun_extra_args", "validate_nccl_time_limit_minutes", "validate_storage_path",
    "validate_storage_test_mib",
    # playbooks/rolling_apply.yml (the rolling role's variables are options of its spec).
    "rolling_apply_hosts",
    # The BMC of each GPU node, read by the bios role (plugins/plugin_utils/preflight_bios.py checks them).
    "cluster_bmc_address", "cluster_bmc_username", "cluster_bmc_password",
    # Not an inventory variable: the fact roles/validate/tasks/report.yml sets for the CLUSTERFORGE RECAP callback.
    "validate_verdict",
    # Not a variable: the option of community.general's Redfish modules that roles/bios passes
    # bios_bmc_validate_certs to (the tree grep reads "validate_certs:" as a validate_* name).
    "validate_certs",
)
# Prefixes of the variables that ClusterForge owns besides "<role>_" (a name with one that nothing reads is a typo).
GLOBAL_PREFIXES = ("cluster_", "rolling_", "validate_")
HOSTS_SHOWN = 4
TYPES = ("str", "int", "float", "bool", "list", "dict", "path", "raw")
# Suboption keys whose value YAML changes when written unquoted: a file mode (0755 is read as the octal number 493)
# and a Slurm time (1:00:00 is read as the sexagesimal number 3600, which Slurm would take as 3600 minutes).
MODE_KEYS = ("mode",)
TIME_KEYS = ("max_time",)
TIME_SUFFIXES = ("_half_life", "_max_age")
_ENTRY_RULES = {}
RELATIONS = ("mutually_exclusive", "required_together", "required_one_of", "required_if", "required_by")
COMPUTED = object()  # a role default computed from other variables (a template in defaults/main.yml)


def _advice(name, value, want):
    """How to give a value on the command line with its type (JSON keeps it; name=value gives a string)."""
    if want == "bool":
        return bool_advice(name)
    text = value.strip() if isinstance(value, str) else value
    example = text
    if want == "int" and isinstance(text, str) and re.match(r"^[+-]?[0-9]+$", text):
        example = int(text)
    elif want == "float" and isinstance(text, str):
        try:
            example = float(text)
        except ValueError:
            example = text
    elif want == "list":
        example = [item.strip() for item in str(text).split(",") if item.strip()]
    elif want == "dict":
        example = {"key": "value"}
    if isinstance(example, str) and want not in ("str", "path", "raw"):
        # The value itself is wrong, not only its type (e.g. "lots" for an integer): JSON would not help.
        return None
    return "give -e '%s' (JSON keeps the type; -e %s=%s passes the string %r)" % (
        json.dumps({name: example}), name, value, value)


def _null_ok(opt, role_default):
    """Whether null is a value the role understands: the option has no default, or its description says so."""
    if role_default is None:
        return True
    desc = opt.get("description") or ""
    if isinstance(desc, list):
        desc = " ".join(str(d) for d in desc)
    return bool(re.search(r"\bnull\b", str(desc), re.IGNORECASE))


def _str_problem(key, value):
    """Why a value given for a string is wrong, or None.

    A string is fine. An integer is fine (Ansible writes it back unchanged: nvidia_driver_branch: 570 is "570")
    except for a file mode (YAML reads 0755 as 493) and a Slurm time (YAML reads 1:00:00 as 3600). A float is never
    fine (570.10 reads back as "570.1", 1e3 as "1000.0"), nor a boolean (YAML reads unquoted yes/no/on/off as one),
    nor a list or a dict.
    """
    if isinstance(value, str):
        return None
    leaf = key.rsplit(".", 1)[-1].split("]")[-1]
    if is_int(value):
        if leaf in MODE_KEYS:
            return ("must be a quoted string such as '0755', got the number %d (YAML reads an unquoted 0755 as the "
                    "octal number 493)" % value)
        if leaf in TIME_KEYS or leaf.endswith(TIME_SUFFIXES):
            return ("must be a quoted Slurm time such as '1:00:00' or '7-00:00:00', got the number %d (YAML reads an "
                    "unquoted 1:00:00 as 3600, and Slurm reads a bare number as minutes)" % value)
        return None
    if isinstance(value, float):
        return ("must be a string, got the number %r; YAML drops digits of an unquoted number (570.10 reads as "
                "570.1): quote it as written" % value)
    if isinstance(value, bool):
        return ("must be a string, got the boolean %s (YAML reads unquoted yes/no/on/off/true/false as a boolean): "
                "quote it" % ("true" if value else "false"))
    return "must be a string, got %s %s" % (_article(value), _show(value))


def _article(value):
    name = type_name(value)
    return ("an " if name[0] in "aeiou" else "a ") + name


def _show(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


class _Walker(object):
    """Validates one host's values against one role's spec, collecting "<host>: <path>: <rule>" strings."""

    def __init__(self, host, errors, seen, cli_checked):
        self.host = host
        self.errors = errors
        self.seen = seen
        self.cli_checked = cli_checked

    def add(self, path, msg):
        line = "%s: %s: %s" % (self.host, path, msg)
        if line not in self.seen:
            self.seen.add(line)
            self.errors.append(line)

    def option(self, name, value, opt, role_default=MISSING, top=False):
        """Check ``value`` (at ``name``) against the option spec ``opt``; True when it has the right type."""
        want = opt.get("type", "str")
        if value is None:
            default = opt.get("default") if role_default is MISSING else role_default
            if opt.get("required"):
                self.add(name, "is required, got null")
                return False
            if want == "raw" or _null_ok(opt, default):
                return True
            use = "the role's default" if default is COMPUTED else "the default %s" % _show(default)
            self.add(name, "must be %s, got null (leave it out to use %s)" % (_want_words(want, opt), use))
            return False
        cli = top and from_cli(value)
        if cli:
            # -e gives every host the same value: it is checked (and reported) once, on the first host that reads it.
            if name in self.cli_checked:
                return False
            self.cli_checked.add(name)
        problem = self._type_problem(name, value, want, opt)
        if problem:
            if cli:
                advice = _advice(name, value, want)
                problem += " from -e, on every host" + ("; " + advice if advice else "")
            self.add(name, problem)
            return False
        self._choices(name, value, want, opt)
        self._range(name, value, want)
        if want == "list":
            self._elements(name, value, opt)
        elif want == "dict" and isinstance(opt.get("options"), dict):
            self._suboptions(name, value, opt)
        return True

    def _type_problem(self, name, value, want, opt):
        if want == "raw":
            return None
        if want == "bool":
            if isinstance(value, bool):
                return None
            return "must be a boolean (true/false), got %s" % _show(value)
        if want == "int":
            if is_int(value):
                return None
            if isinstance(value, float) and value.is_integer():
                return "must be a whole number, got %r" % value
            if isinstance(value, str):
                return "must be an integer, got the string %s" % _show(value)
            return "must be an integer, got %s %s" % (_article(value), _show(value))
        if want == "float":
            if is_number(value):
                return None
            if isinstance(value, str):
                return "must be a number, got the string %s" % _show(value)
            return "must be a number, got %s %s" % (_article(value), _show(value))
        if want in ("str", "path"):
            problem = _str_problem(name, value)
            if problem is None and want == "path" and not name.endswith("_src"):
                if not str(value).startswith("/"):
                    return "must be an absolute path on the node, got %s" % _show(value)
            return problem
        if want == "list":
            if isinstance(value, (list, tuple)):
                return None
            if isinstance(value, str):
                return "must be a list, got the string %s (write it as a YAML list: [a, b])" % _show(value)
            return "must be a list, got %s %s" % (_article(value), _show(value))
        if want == "dict":
            if isinstance(value, dict):
                return None
            return "must be a dict (key: value), got %s %s" % (_article(value), _show(value))
        return None  # an unknown type in a spec: the spec test reports it

    def _choices(self, name, value, want, opt):
        choices = opt.get("choices")
        if not isinstance(choices, list) or want == "list":
            return
        probe = str(value) if want in ("str", "path") and is_int(value) else value
        if probe not in choices:
            self.add(name, "%s is not one of %s" % (_show(value), ", ".join(str(c) for c in choices)))

    def _range(self, name, value, want):
        # Ranges, URLs and serial values are judged by name in one place (preflight_generic), for every role.
        for problem in preflight_generic.name_problems(name, value, want):
            self.add(name, problem)

    def _elements(self, name, value, opt):
        elements = opt.get("elements")
        choices = opt.get("choices")
        for i, item in enumerate(value):
            path = "%s[%d]" % (name, i)
            if elements:
                sub = {"type": elements}
                if isinstance(opt.get("options"), dict):
                    sub["options"] = opt["options"]
                for key in RELATIONS:
                    if key in opt:
                        sub[key] = opt[key]
                if item is None:
                    self.add(path, "must be %s, got null" % _want_words(elements, sub))
                    continue
                if not self.option(path, item, sub, role_default=MISSING):
                    continue
            if isinstance(choices, list) and item not in choices:
                self.add(path, "%s is not one of %s" % (_show(item), ", ".join(str(c) for c in choices)))

    def _suboptions(self, name, value, opt):
        options = opt.get("options") or {}
        for key in value:
            if key not in options:
                close = difflib.get_close_matches(str(key), list(options), n=1)
                self.add(name, "unknown key %s (known: %s)%s" % (
                    _show(key), ", ".join(sorted(options)), "; did you mean %s?" % close[0] if close else ""))
        required = [k for k, s in options.items() if isinstance(s, dict) and s.get("required")]
        for key, sub in options.items():
            if not isinstance(sub, dict):
                continue
            if key not in value:
                if sub.get("required"):
                    self.add(name, "the required key %s is missing (needs %s)" % (key, ", ".join(required)))
                continue
            if sub.get("required") and value[key] in ("", [], {}):
                self.add("%s.%s" % (name, key), "is required and must not be empty, got %s" % _show(value[key]))
                continue
            self.option("%s.%s" % (name, key), value[key], sub, role_default=sub.get("default"))
        _relations(self, opt, lambda k: value.get(k) is not None, value.get, where=name)


def _want_words(want, opt):
    words = {"str": "a string", "path": "an absolute path", "int": "an integer", "float": "a number",
             "bool": "a boolean (true/false)", "list": "a list", "dict": "a dict", "raw": "a value"}
    text = words.get(want, want)
    if want == "list" and opt.get("elements"):
        text += " of %s" % words.get(opt["elements"], opt["elements"]).split(" ", 1)[-1].split(" (")[0] + "s"
    return text


def _relations(walker, spec, is_set, value_of, where=None):
    """Ansible's mutually_exclusive, required_together, required_one_of, required_if and required_by.

    Between suboptions a message is filed under the dict's path (``where``); between a role's options, under the
    option the relation is about.
    """
    for group in spec.get("mutually_exclusive") or []:
        given = [k for k in group if is_set(k)]
        if len(given) > 1:
            walker.add(where or given[0], "%s are mutually exclusive; give only one" % " and ".join(given))
    for group in spec.get("required_together") or []:
        given = [k for k in group if is_set(k)]
        if given and len(given) < len(group):
            walker.add(where or given[0], "%s must be given together (missing %s)"
                       % (", ".join(group), ", ".join(k for k in group if k not in given)))
    for group in spec.get("required_one_of") or []:
        if group and not any(is_set(k) for k in group):
            walker.add(where or group[0], "one of %s is required" % ", ".join(group))
    for rule in spec.get("required_if") or []:
        if not isinstance(rule, list) or len(rule) < 3:
            continue
        key, val, needed = rule[0], rule[1], rule[2]
        any_of = len(rule) > 3 and rule[3]
        if value_of(key) != val:
            continue
        missing = [k for k in needed if not is_set(k)]
        if (any_of and len(missing) == len(needed)) or (not any_of and missing):
            walker.add(where or key, "%s is required when %s is %s" % (
                (" or " if any_of else " and ").join(missing), key, _show(val)))
    for key, needed in (spec.get("required_by") or {}).items():
        if is_set(key):
            for k in ([needed] if isinstance(needed, str) else needed):
                if not is_set(k):
                    walker.add(where or key, "%s is required when %s is given" % (k, key))


def _entry_rules(root=None):
    """``{role: entry point main}`` for the relations between options (mutually_exclusive, required_if...)."""
    root = root or COLLECTION_ROOT
    if root not in _ENTRY_RULES:
        _ENTRY_RULES[root] = dict((role, entries.get("main") or {})
                                  for role, entries in role_argument_specs(root).items())
    return _ENTRY_RULES[root]


def _role_defaults(role, root=None):
    """The role's defaults/main.yml (what the role uses when the inventory is silent)."""
    return read_yaml(os.path.join(root or COLLECTION_ROOT, "roles", role, "defaults", "main.yml"), default={})


def check(inv, opts):
    """Every option of every role's spec that a host the role runs on defines, checked against the spec."""
    errors = []
    seen = set()
    cli_checked = set()
    try:
        specs = load_role_specs()
        entries = _entry_rules()
    except (IOError, OSError, yaml.YAMLError) as e:
        return ["inventory: argument specs: a role's meta/argument_specs.yml cannot be read, so no role variable was "
                "checked: %s" % " ".join(str(e).split())]
    host_keys = {}
    own = _own_rules(opts)
    # A role that only its own playbook runs requires its options in that playbook's run only (slurm_upgrade.yml
    # passes preflight_playbook_roles); a value set for it is checked in every run.
    playbook_roles = tuple((opts or {}).get("playbook_roles") or ())
    for role in sorted(specs):
        options = specs[role] or {}
        defaults = _role_defaults(role)
        for host in inv.role_hosts(role):
            if host not in host_keys:
                host_keys[host] = set(inv.keys(host))
            keys = host_keys[host]
            walker = _Walker(host, errors, seen, cli_checked)
            values = {}
            for name in sorted(options):
                opt = options[name]
                if not isinstance(opt, dict):
                    continue
                if name not in keys:
                    if (opt.get("required") and opt.get("default") is None
                            and (role not in PLAYBOOK_ONLY_ROLES or role in playbook_roles)):
                        walker.add(name, "is required by the %s role but not set" % role)
                    continue
                value = inv.get(host, name, MISSING)
                if value is MISSING:  # unresolvable: the reader reported it
                    continue
                values[name] = value
                if role in own and own[role](host, name, value, inv):
                    continue  # the rule set that runs in this playbook says what is wrong, in its own words
                role_default = defaults.get(name, opt.get("default"))
                if isinstance(role_default, str) and "{{" in role_default:
                    # Computed from other variables: null is the role's own answer when the template can give it.
                    role_default = None if re.search(r"\bnone\b", role_default) else COMPUTED
                walker.option(name, value, opt, role_default=role_default, top=True)
            entry = entries.get(role) or {}
            if any(entry.get(k) for k in RELATIONS):
                # What the role will see: the inventory's value, else the spec's default.
                seen_by_role = dict((k, (options.get(k) or {}).get("default")) for k in options)
                seen_by_role.update(values)
                _relations(walker, entry, lambda k, v=seen_by_role: v.get(k) is not None,
                           lambda k, v=seen_by_role: v.get(k))
    return errors


def _own_rules(opts):
    """``{role: reports(host, name, value, inv)}``: roles whose variables a rule set of this run judges in its own
    words.

    Where that rule set reports a value (e.g. the rolling playbook's ``rolling_serial: [1, 0]`` or a switch given
    with ``-e name=true``), the spec's generic message about the same value would only repeat it, so it is left out;
    a value the rule set lets through is still checked against the spec. Only while the rule set runs (a rolling
    playbook): site.yml checks the rolling variables against the spec alone.
    """
    if not (opts or {}).get("rolling"):
        return {}
    # Imported late, as preflight_rolling imports preflight_common only.
    # pylint: disable-next=import-outside-toplevel
    from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_rolling import reports
    return {"rolling": reports}


def _rolling_variables():
    try:
        # Imported late: preflight_rolling may list its playbook's variables (ROLLING_VARIABLES), or not yet.
        # pylint: disable-next=import-outside-toplevel
        from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_rolling import ROLLING_VARIABLES
    except ImportError:
        return ()
    try:
        return tuple(ROLLING_VARIABLES)
    except TypeError:
        return ()


def known_names():
    """Every variable a role spec, a playbook or the preflight rules define."""
    names = set(KNOWN_GLOBALS) | set(_rolling_variables())
    for options in load_role_specs().values():
        names.update(options or {})
    return names


def prefixes():
    """ClusterForge's own prefixes: every role name + '_', and cluster_, rolling_, validate_."""
    return tuple(sorted(role + "_" for role in load_role_specs())) + GLOBAL_PREFIXES


def _loose_prefixes(own):
    """The first word of each role name (slurm_, lustre_, nvidia_...): a typo in the role part of the prefix."""
    return tuple(sorted(set(p.split("_", 1)[0] + "_" for p in own) - set(own)))


def _hosts_text(hosts, all_hosts):
    if len(hosts) <= HOSTS_SHOWN:
        return ", ".join(hosts)
    if len(all_hosts) == len(hosts) and set(all_hosts) == set(hosts):
        return "all %d hosts" % len(hosts)
    return "%s and %d more" % (", ".join(hosts[:HOSTS_SHOWN - 1]), len(hosts) - HOSTS_SHOWN + 1)


# Variables an earlier release read and this one does not: a precise word instead of "did you mean".
RETIRED = {
    "cluster_converged_skip": "the converged-node cache was removed (every complete run of site.yml runs every role "
                              "on every node of its hosts; use --limit or --tags for a targeted run)",
    "cluster_converged_extra_probes": "the converged-node cache was removed (every complete run of site.yml runs "
                                      "every role, RoCE QoS included)",
    "slurm_controller_nvidia_smi_path": "each GPU node now describes itself for slurm.conf (slurm_compute's facts "
                                        "play); set slurm_compute_nvidia_smi_path instead",
    "lustre_client_verify": "the role's verify phase was removed: ansible.posix.mount mounts what is not mounted and "
                            "clusterforge.gpu.lctl_param reads back every tuning it sets",
    "validate_profiles": "the validation profiles live in the collection's hardware catalogue "
                         "(plugins/module_utils/hardware.py); pick one with validate_profile, and adjust a threshold "
                         "with validate_thresholds",
}


def one_edit(a, b):
    """True when ``b`` is ``a`` with one letter added, dropped or changed, or two neighbours swapped."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
    short, long_ = (a, b) if len(a) < len(b) else (b, a)
    i = 0
    while i < len(short) and short[i] == long_[i]:
        i += 1
    return short[i:] == long_[i + 1:]


def _unknown_names(inv):
    """``[(name, hosts, closest known name or None, one edit away)]``: variables with one of our prefixes that no
    role or playbook reads (a site's own variable under a loose prefix with no close name is left out)."""
    known = known_names()
    own = prefixes()
    loose = _loose_prefixes(own)
    found = {}
    order = []
    for host in inv.all_hosts:
        for name in inv.keys(host):
            if name.startswith("__") or name in known:
                continue
            if not name.startswith(own) and not name.startswith(loose):
                continue
            if name not in found:
                found[name] = []
                order.append(name)
            if host not in found[name]:
                found[name].append(host)
    out = []
    candidates = sorted(known)
    for name in order:
        strict_prefix = name.startswith(own)
        close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.6 if strict_prefix else 0.8)
        if not strict_prefix and not close:
            continue  # slurm_site_notes: a site's own variable, not a misspelt one of ours
        near = [k for k in candidates if one_edit(name, k)]
        if near:
            close = [near[0]] if not close or close[0] not in near else close
        out.append((name, found[name], close[0] if close else None, bool(near)))
    return out


def typo_errors(inv, opts):
    """Errors: a variable one edit away from a variable of this collection (a typo for sure; the role would
    silently use its default instead), whatever preflight_strict says."""
    try:
        unknown = _unknown_names(inv)
    except (IOError, OSError, yaml.YAMLError):
        return []  # check() reports the unreadable spec
    return ["inventory: %s (on %s): no role or playbook defines this variable, and it is one letter away from %s: "
            "fix the spelling (the role would use its default for %s)" % (
                name, _hosts_text(hosts, inv.all_hosts), close, close)
            for name, hosts, close, near in unknown if near and name not in RETIRED]


def typos(inv, opts):
    """Warnings: a variable with one of our prefixes that no role or playbook reads (with the closest known name);
    one edit away from a known name is an error instead (:func:`typo_errors`)."""
    try:
        unknown = _unknown_names(inv)
    except (IOError, OSError, yaml.YAMLError):
        return []  # check() reports the unreadable spec
    warnings = []
    for name, hosts, close, near in unknown:
        where = _hosts_text(hosts, inv.all_hosts)
        if name in RETIRED:
            warnings.append("inventory: %s (on %s): no longer read: %s; remove it" % (name, where, RETIRED[name]))
            continue
        if near:
            continue  # typo_errors reports it
        if close:
            hint = "did you mean %s?" % close
        else:
            hint = "no defined variable has a similar name (a removed or misspelt variable?)"
        warnings.append("inventory: %s (on %s): no role or playbook defines this variable; %s" % (name, where, hint))
    return warnings
