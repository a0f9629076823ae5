# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Shared by every preflight rule set (controller side only): a safe reader of the inventory.

Rules read host variables through :class:`Inventory`, never through ``hostvars`` directly, so that

* a value that cannot be resolved (an undefined variable inside a template) becomes one error naming the host and
  the variable instead of an exception that hides every other problem;
* a value given on the command line (``-e name=value``) can be recognised, so a message can say how to give it
  with the right type;
* the hosts a role runs on are found the same way everywhere (``ROLE_HOSTS``, the groups of site.yml's plays).

Every error is one string ``"<host or inventory>: <variable>: <rule and what was found>"``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import re

import yaml


try:
    from jinja2 import Undefined as _JinjaUndefined
except ImportError:  # pragma: no cover - jinja2 always comes with ansible-core
    _JinjaUndefined = ()

MISSING = object()

# The groups each role's play in site.yml runs on (tests/unit/test_site_order.py keeps the two in step).
ROLE_HOSTS = {
    "preflight": ("all",),
    "common_os": ("all",),
    "nvidia_driver": ("gpu_nodes",),
    "dcgm": ("gpu_nodes",),
    "pcie_acs": ("gpu_nodes",),
    "bios": ("gpu_nodes",),
    "gpu_tuning": ("gpu_nodes",),
    "slurm_controller": ("slurm_controller",),
    "slurm_compute": ("gpu_nodes",),
    "lustre_server": ("lustre_mds", "lustre_oss"),
    "lustre_client": ("lustre_clients",),
    "nccl": ("gpu_nodes",),
    "monitoring": ("all",),
    # Not a play of site.yml: playbooks/rolling_reconfigure.yml plans on the controller and rolls the GPU nodes.
    "rolling": ("slurm_controller", "gpu_nodes"),
    "validate": ("gpu_nodes", "slurm_controller"),
    # Not a play of site.yml: playbooks/slurm_upgrade.yml reads and upgrades every Slurm host.
    "slurm_upgrade": ("slurm_controller", "gpu_nodes", "slurm_clients"),
}

# Roles that no play of site.yml runs, only a playbook of their own: their required options are required only when
# that playbook's preflight names the role (preflight_playbook_roles).
PLAYBOOK_ONLY_ROLES = ("slurm_upgrade",)

CLI_ORIGIN = "<CLI option '-e'>"

# The collection's root (plugins/plugin_utils/ is two levels below it): roles/ sits beside plugins/ in a checkout
# and in an installed collection alike.
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_SPECS = {}
_YAML = {}
# libyaml's parser where PyYAML was built with it (the pure-Python one took 2.5 of preflight's 3.7 seconds).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path, default=None):
    """A YAML file of the collection (a role's spec, defaults or rules), parsed once per process; ``default`` (or
    ``{}``) when it is empty, or, given a ``default``, when it cannot be read. Callers must not change what it returns."""
    if path not in _YAML:
        try:
            with open(path) as f:
                _YAML[path] = yaml.load(f, Loader=_LOADER)  # nosec B506 - a safe loader (CSafeLoader or SafeLoader)
        except (IOError, OSError, yaml.YAMLError):
            if default is None:
                raise
            return default
    data = _YAML[path]
    return data if data is not None else ({} if default is None else default)


def role_argument_specs(root=None):
    """``{role: argument_specs}`` (every entry point) of every role's ``meta/argument_specs.yml``, in role order."""
    root = root or COLLECTION_ROOT
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "roles", "*", "meta", "argument_specs.yml"))):
        out[path.split(os.sep)[-3]] = read_yaml(path).get("argument_specs") or {}
    return out


def load_role_specs(root=None):
    """``{role: options}`` of every role's ``meta/argument_specs.yml``, read once: the options of ``main`` and of
    every other entry point (``tasks_from``: slurm_upgrade's phases, validate's deep checks), main's spec first."""
    root = root or COLLECTION_ROOT
    if root not in _SPECS:
        specs = {}
        for role, entries in role_argument_specs(root).items():
            options = {}
            for entry in ["main"] + sorted(k for k in entries if k != "main"):
                for name, opt in ((entries.get(entry) or {}).get("options") or {}).items():
                    options.setdefault(name, opt)
            specs[role] = options
        _SPECS[root] = specs
    return _SPECS[root]


def spec_default(role, name, default=None):
    """The default a role's argument spec gives a variable (what the role uses when the inventory is silent)."""
    opt = load_role_specs().get(role, {}).get(name)
    if not isinstance(opt, dict) or "default" not in opt:
        return default
    return opt["default"]


# Host names (RFC 1123): labels of 1-63 letters, digits and inner hyphens; at most 253 characters in all.
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_LABEL_RE = re.compile(r"^%s$" % _LABEL)
_HOST_NAME_RE = re.compile(r"^(?=.{1,253}$)%s(\.%s)*$" % (_LABEL, _LABEL))
_DIGITS_AND_DOTS_RE = re.compile(r"^[0-9.]+$")


def is_host_label(value):
    """One label of a host name (an inventory host's short name): RFC 1123, 1-63 characters."""
    return isinstance(value, str) and bool(_HOST_LABEL_RE.match(value))


def is_host_name(value):
    """A host name (RFC 1123, dotted labels, at most 253 characters). Digits and dots alone are not one: they are an
    IPv4 address or nothing, which each caller judges as an address."""
    return (isinstance(value, str) and bool(_HOST_NAME_RE.match(value))
            and not _DIGITS_AND_DOTS_RE.match(value))


def origin_of(value):
    """Where Ansible read a value (ansible-core >= 2.19 tags values with their origin), or None."""
    try:
        from ansible.module_utils._internal._datatag import AnsibleTagHelper  # pylint: disable=import-outside-toplevel
    except ImportError:  # pragma: no cover - older ansible-core
        return None
    try:
        for tag in AnsibleTagHelper.tags(value):
            desc = getattr(tag, "description", None)
            path = getattr(tag, "path", None)
            if desc or path:
                return desc or path
    except Exception:  # pylint: disable=broad-except
        return None
    return None


def from_cli(value):
    """True when the value came from ``-e name=value`` (always a string there)."""
    return origin_of(value) == CLI_ORIGIN


class Inventory(object):
    """Read-only view of ``hostvars`` and ``groups`` that never raises on a bad value."""

    def __init__(self, hostvars, groups):
        self._hostvars = hostvars if hostvars is not None else {}
        self.groups = dict(groups or {})
        self.errors = []
        self._reported = set()
        # One host's variables, looked up once per judgement: hostvars[host] merges every source of the host's
        # variables again on each lookup (1.2 of preflight's 3.7 seconds on a 4-host inventory).
        self._vars = {}
        self._keys = {}

    # -- hosts ---------------------------------------------------------------------------------------------
    @property
    def all_hosts(self):
        return list(self.groups.get("all", []))

    def hosts(self, *group_names):
        """Members of the groups, in inventory order, each once."""
        out = []
        for name in group_names:
            for host in self.groups.get(name, []) or []:
                if host not in out:
                    out.append(host)
        return out

    def role_hosts(self, role):
        return self.hosts(*ROLE_HOSTS.get(role, ()))

    @property
    def first_host(self):
        hosts = self.all_hosts
        return hosts[0] if hosts else None

    # -- variables -----------------------------------------------------------------------------------------
    def _hv(self, host):
        if host not in self._vars:
            try:
                self._vars[host] = self._hostvars[host]
            except Exception:  # pylint: disable=broad-except
                self._vars[host] = None
        return self._vars[host]

    def keys(self, host):
        """Names of the variables defined for a host (inventory, group and extra vars, facts)."""
        if host not in self._keys:
            hv = self._hv(host)
            try:
                self._keys[host] = [] if hv is None else [str(k) for k in (hv.keys() if hasattr(hv, "keys") else hv)]
            except Exception:  # pylint: disable=broad-except
                self._keys[host] = []
        return list(self._keys[host])

    def has(self, host, key):
        return key in self.keys(host)

    def get(self, host, key, default=None):
        """The host's value of a variable, ``default`` when not set; an unresolvable value is reported once."""
        hv = self._hv(host)
        if hv is None:
            return default
        try:
            if hasattr(hv, "get"):
                value = hv.get(key, MISSING)
            else:
                value = hv[key] if key in hv else MISSING
        except Exception as e:  # pylint: disable=broad-except
            self._report(host, key, "cannot be resolved: %s" % _short(e))
            return default
        if value is MISSING:
            return default
        if _JinjaUndefined and isinstance(value, _JinjaUndefined):
            self._report(host, key, "cannot be resolved: %s" % _undefined_message(value))
            return default
        return value

    def effective(self, host, role, key):
        """The value a role will use on a host: the inventory's, else the role's spec default."""
        value = self.get(host, key, MISSING)
        return spec_default(role, key) if value is MISSING else value

    def get_cluster(self, key, default=None):
        """A cluster-wide value, read from the first host (group_vars/all)."""
        host = self.first_host
        return self.get(host, key, default) if host else default

    def _report(self, host, key, msg):
        if (host, key) in self._reported:
            return
        self._reported.add((host, key))
        self.errors.append("%s: %s: %s" % (host, key, msg))


def _short(exc):
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _undefined_message(value):
    for attr in ("_undefined_message",):
        try:
            msg = getattr(value, attr)
            if msg:
                return str(msg).splitlines()[0]
        except Exception:  # pylint: disable=broad-except
            pass
    name = getattr(value, "_undefined_name", None)
    return "%r is undefined" % name if name else "a variable in its template is undefined"


def bool_advice(name):
    """How to give a boolean on the command line so that it arrives as one (the advice our messages print)."""
    return "give -e '{\"%s\": true}' (JSON keeps the type; -e %s=true passes the string 'true')" % (name, name)
