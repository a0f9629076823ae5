# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight rules that come from the specs and the names, for every role, with no code per role.

* a number option has a range: ``*_port`` 1-65535 and ``*_percent`` 0-100 from the name, every other one from the
  role's ``meta/preflight.yml`` (``ranges:``; a unit test fails when a number option of any entry point has none);
* a ``*_url`` is a URL of an allowed scheme (:data:`URL_SCHEMES`) with a host;
* a serial-like value (``*_serial``, ``*_batch_size``: Ansible's ``serial``) holds no 0 and no share above 100 %;
* every port a host listens on, over every role that runs there, is that host's alone (``ports:`` and
  ``fixed_ports:`` of each role's ``meta/preflight.yml`` say where a port listens and when it is on); a port that
  refers to another role's (``same_as``) equals it where that service runs, and the service is on there.

The ranges sit beside the argument specs, not in them. Tried with ``min: 1`` in an option: ansible-lint's schema
for ``meta/argument_specs.yml`` (``role-arg-spec.json``, ``additionalProperties: false``) refuses it
(``schema[role-arg-spec]``); ansible-core's role argument validation accepts the key and ignores it (0 passes); and
ansible-test sanity does not read role argument specs. So the lint would fail and the range would do nothing.
:func:`name_problems` is the one place a value is judged by its name; the spec rules
(plugins/plugin_utils/preflight_specs.py) call it for every option and suboption they check.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re


from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import (
    COLLECTION_ROOT,
    read_yaml,
    role_argument_specs,
)
from ansible_collections.clusterforge.gpu.plugins.module_utils.values import is_int, is_number

RULES_FILE = "preflight.yml"
PORT_RANGE = {"min": 1, "max": 65535, "what": "a TCP port"}
PERCENT_RANGE = {"min": 0, "max": 100, "what": "a percentage"}
URL_SCHEMES = ("http", "https")
SERIAL_SUFFIXES = ("_serial", "_batch_size")
# Whole-number units in names with no range of their own (suboptions): the value cannot be negative.
NON_NEGATIVE_SUFFIXES = ("_seconds", "_minutes", "_days", "_mb", "_mib", "_kib", "_watts", "_c", "_limit", "_bytes")
# Words in a name that make it a count, an interval, a size or a limit: with a number type it needs a range.
RANGE_WORDS = re.compile(r"(_seconds|_minutes|_hours|_days|_mb|_mib|_kib|_gib|_bytes|_watts|_c|_count|_size|_iterations|"
                         r"_level|_percent|_port|_gbps|_increase|_links|_runs|_pairs|_per_node|_index|_priority)$|"
                         r"_(count|interval|retention|concurrent|timeout|batch|limit|weight)_")
HOSTS_SHOWN = 4
_RULES = {}


def load_rules(root=None):
    """``{role: {"ranges": {}, "ports": {}, "fixed_ports": []}}`` from every role's ``meta/preflight.yml``."""
    root = root or COLLECTION_ROOT
    if root not in _RULES:
        rules = {}
        for path in sorted(glob.glob(os.path.join(root, "roles", "*", "meta", RULES_FILE))):
            data = read_yaml(path)
            rules[path.split(os.sep)[-3]] = {
                "ranges": data.get("ranges") or {},
                "ports": data.get("ports") or {},
                "fixed_ports": data.get("fixed_ports") or [],
            }
        _RULES[root] = rules
    return _RULES[root]


def all_options(root=None):
    """``{option: (role, spec)}`` over every entry point of every role's argument spec (main first)."""
    root = root or COLLECTION_ROOT
    out = {}
    for role, entries in role_argument_specs(root).items():
        for name in ["main"] + sorted(k for k in entries if k != "main"):
            for opt, spec in ((entries.get(name) or {}).get("options") or {}).items():
                out.setdefault(opt, (role, spec if isinstance(spec, dict) else {}))
    return out


def needs_range(name, spec):
    """Whether an option must have a range: every number, and a raw value named like a count or a size; not one
    whose ``choices`` already bound it."""
    if (spec or {}).get("choices"):
        return False
    kind = (spec or {}).get("type", "str")
    if kind in ("int", "float"):
        return True
    return kind == "raw" and bool(RANGE_WORDS.search(name)) and not name.endswith(SERIAL_SUFFIXES)


def _leaf(name):
    """The variable or key a path ends in: 'x.y[2]' -> 'y'."""
    return re.sub(r"\[[0-9]+\]$", "", name.rsplit(".", 1)[-1])


def range_of(name, root=None):
    """The range of a variable or key (``{"min", "max", "why", "what"}``, any of them absent), or None."""
    leaf = _leaf(name)
    implied = None
    if leaf.endswith("_port"):
        implied = dict(PORT_RANGE)
    elif leaf.endswith("_percent"):
        implied = dict(PERCENT_RANGE)
    own = None
    for role_rules in load_rules(root).values():
        if leaf in role_rules["ranges"]:
            own = role_rules["ranges"][leaf] or {}
            break
    if own is None:
        return implied
    merged = dict(implied or {})
    for key in ("min", "max"):
        if key in own:
            # The file may narrow a range its name implies, never widen it.
            if key in merged:
                merged[key] = max(merged[key], own[key]) if key == "min" else min(merged[key], own[key])
            else:
                merged[key] = own[key]
    if own.get("why"):
        merged["why"] = own["why"]
    return merged


def _num(value):
    return ("%d" % value) if is_int(value) else ("%g" % value)


def number_problem(name, value, root=None):
    """Why a number is out of the range its name or its role gives it, or None."""
    if not is_number(value):
        return None
    rng = range_of(name, root)
    if rng is None:
        if _leaf(name).endswith(NON_NEGATIVE_SUFFIXES) and value < 0:
            return "must not be negative, got %s" % _num(value)
        return None
    low, high = rng.get("min"), rng.get("max")
    if (low is None or value >= low) and (high is None or value <= high):
        return None
    if rng.get("what") and (low, high) in ((1, 65535), (0, 100)):
        text = "%s is not %s (%s-%s)" % (_num(value), rng["what"], _num(low), _num(high))
    elif high is None:
        text = "%s is below the minimum %s" % (_num(value), _num(low))
    elif low is None:
        text = "%s is above the maximum %s" % (_num(value), _num(high))
    else:
        text = "%s is outside %s-%s" % (_num(value), _num(low), _num(high))
    if rng.get("why"):
        text += " (%s)" % rng["why"]
    return text


def url_problem(name, value):
    """Why a ``*_url`` value is not a URL of an allowed scheme with a host, or None (empty and null mean unset)."""
    if not _leaf(name).endswith("_url") or not isinstance(value, str) or value == "":
        return None
    if "{{" in value:
        return None  # a template: its value is known on the node only
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*)://([^/?#\s]+)([^\s]*)$", value)
    if not match:
        return "%r is not a URL (scheme://host/path; allowed schemes: %s)" % (value, ", ".join(URL_SCHEMES))
    if match.group(1).lower() not in URL_SCHEMES:
        return "%r: the scheme %s is not allowed (allowed: %s)" % (value, match.group(1), ", ".join(URL_SCHEMES))
    return None


def _serial_item_problem(item):
    if is_int(item):
        return None if item >= 1 else "%d hosts per batch would run no host (or, in Ansible, every host at once)" % item
    if isinstance(item, str):
        text = item.strip()
        if re.match(r"^[0-9]+$", text):
            return _serial_item_problem(int(text))
        match = re.match(r"^([0-9]+(?:\.[0-9]+)?)%$", text)
        if match:
            share = float(match.group(1))
            if share <= 0:
                return "%r is no share of the hosts (a batch of 0 %%)" % item
            if share > 100:
                return "%r is more than every host (at most 100%%)" % item
            return None
    return "%r is neither a number of hosts nor a percentage such as '25%%'" % (item,)


def serial_problem(name, value):
    """Why a serial-like value (``*_serial``, ``*_batch_size``) is wrong, or None: no 0, no share above 100 %."""
    if not _leaf(name).endswith(SERIAL_SUFFIXES) or "[" in name or value is None:
        return None
    items = value if isinstance(value, (list, tuple)) else [value]
    if not items:
        return "is an empty list; give a number of hosts, a percentage, or a list of them"
    problems = [p for p in (_serial_item_problem(i) for i in items) if p]
    return "; ".join(problems) if problems else None


def name_problems(name, value, want="raw", root=None):
    """Every rule a value breaks because of its name: range, URL, serial. The one place these are decided."""
    problems = []
    if want in ("int", "float", "raw"):
        problems.append(number_problem(name, value, root))
    if want in ("str", "raw"):
        problems.append(url_problem(name, value))
    if want in ("list", "raw", "int", "str"):
        problems.append(serial_problem(name, value))
    return [p for p in problems if p]


# -- ports --------------------------------------------------------------------------------------------------------
def _hosts_text(hosts):
    if len(hosts) <= HOSTS_SHOWN:
        return ", ".join(hosts)
    return "%s and %d more" % (", ".join(hosts[:HOSTS_SHOWN - 1]), len(hosts) - HOSTS_SHOWN + 1)


def _where(inv, role, entry, key="hosts_var"):
    """The hosts a port entry is about: hosts_group, else the group its hosts_var names, else the role's hosts."""
    if entry.get("hosts_group"):
        return inv.hosts(entry["hosts_group"])
    var = entry.get(key)
    if var:
        first = (inv.role_hosts(role) or [None])[0]
        group = inv.effective(first, role, var) if first else None
        return inv.hosts(group) if isinstance(group, str) else []
    return inv.role_hosts(role) if key == "hosts_var" else None


def _reader(inv, role, host):
    """The host whose value of a role's option applies on ``host``: itself if it runs the role, else the first."""
    hosts = inv.role_hosts(role)
    return host if host in hosts else (hosts[0] if hosts else host)


def _off(inv, role, host, entry):
    """The switches (``when``) of a port entry that are not true on a host (the port is then not listened on)."""
    src = _reader(inv, role, host)
    return [w for w in entry.get("when") or [] if inv.effective(src, role, w) is not True]


def _listeners(inv, rules):
    """``{host: [(port, label)]}``: every port a host listens on, from every role's ports and fixed_ports."""
    out = {}
    for role in sorted(rules):
        for name, entry in sorted(rules[role]["ports"].items()):
            entry = entry or {}
            if entry.get("same_as"):
                continue  # a reference to another role's port, not a listener
            for host in _where(inv, role, entry):
                if _off(inv, role, host, entry):
                    continue
                value = inv.effective(_reader(inv, role, host), role, name)
                if is_int(value):
                    out.setdefault(host, []).append((value, name, "%s (%s)" % (name, entry.get("service", role))))
        for fixed in rules[role]["fixed_ports"]:
            for host in inv.role_hosts(role):
                if any(inv.effective(host, role, name) not in (None, False, "") for name in fixed.get("unless") or []):
                    continue  # an option that moves the daemon off this port is set (nv-hostengine on its socket)
                out.setdefault(host, []).append((fixed["port"], None, "%s (a fixed port)" % fixed["service"]))
    return out


def port_errors(inv, root=None):
    """Two services on one port of one host; a port that refers to another role's disagreeing or turned off."""
    rules = load_rules(root)
    found = {}
    order = []

    def add(host, text):
        if text not in found:
            found[text] = []
            order.append(text)
        if host not in found[text]:
            found[text].append(host)

    for host, ports in sorted(_listeners(inv, rules).items()):
        first = {}
        for port, name, label in ports:
            if port in first and first[port] != label:
                add(host, "%s: port %d is also the port of %s on this host; each service needs its own port"
                    % (label, port, first[port]))
            first.setdefault(port, label)
    owners = dict((name, role) for role in rules for name in rules[role]["ports"])
    for role in sorted(rules):
        for name, entry in sorted(rules[role]["ports"].items()):
            entry = entry or {}
            target = entry.get("same_as")
            if not target or target not in owners:
                continue
            trole = owners[target]
            tentry = rules[trole]["ports"].get(target) or {}
            targets = _where(inv, trole, tentry)
            only = _where(inv, role, entry, key="targets_var")
            if only is not None:
                targets = [h for h in targets if h in only]
            for host in _where(inv, role, entry):
                if _off(inv, role, host, entry):
                    continue
                value = inv.effective(_reader(inv, role, host), role, name)
                if not is_int(value):
                    continue
                off, differ = {}, {}
                for thost in targets:
                    switches = _off(inv, trole, thost, tentry)
                    if switches:
                        off.setdefault(", ".join(switches), []).append(thost)
                        continue
                    tvalue = inv.effective(_reader(inv, trole, thost), trole, target)
                    if is_int(tvalue) and tvalue != value:
                        differ.setdefault(tvalue, []).append(thost)
                for switches, thosts in sorted(off.items()):
                    add(host, "%s: %s expects %s on %s, which is off there (%s: false); turn it on or stop "
                        "expecting it" % (name, entry.get("service", name), target, _hosts_text(thosts), switches))
                for tvalue, thosts in sorted(differ.items()):
                    add(host, "%s: %s uses port %d, but %s is %d on %s; give both the same port"
                        % (name, entry.get("service", name), value, target, tvalue, _hosts_text(thosts)))
    return ["%s: %s" % (_hosts_text(found[text]), text) for text in order]


def check(inv, opts):
    """The rules of this module that need more than one value: the ports of every host."""
    return port_errors(inv)


def spec_gaps(root=None):
    """Options that need a range and have none (tests/unit: a new number option fails the suite until it has one),
    ports with no word on where they listen, and entries that name no option of their role (a renamed option
    leaves its range behind)."""
    options = all_options(root)
    rules = load_rules(root)
    gaps = []
    for name, (role, spec) in sorted(options.items()):
        if needs_range(name, spec) and range_of(name, root) is None:
            gaps.append("%s: %s (%s) has no range: add it to roles/%s/meta/%s" % (
                role, name, spec.get("type"), role, RULES_FILE))
    listed = set(name for role_rules in rules.values() for name in role_rules["ports"])
    for name, (role, spec) in sorted(options.items()):
        if name.endswith("_port") and spec.get("type") == "int" and name not in listed:
            gaps.append("%s: %s is a port with no entry under ports: in roles/%s/meta/%s (where it listens, or "
                        "same_as the port it refers to)" % (role, name, role, RULES_FILE))
    for role, role_rules in sorted(rules.items()):
        for section in ("ranges", "ports"):
            for name in role_rules[section]:
                if options.get(name, (None,))[0] != role:
                    gaps.append("%s: %s: %s names no option of the role's argument spec" % (role, section, name))
                elif section == "ranges" and (options[name][1] or {}).get("choices"):
                    gaps.append("%s: ranges: %s has choices in its spec: a range would repeat them" % (role, name))
    return gaps
