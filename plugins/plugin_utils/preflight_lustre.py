# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight rules: Lustre, across every server and client, before ``mkfs.lustre`` or a mount runs.

What the lustre_server and lustre_client roles can only see host by host (and only once earlier plays have changed
things) is checked here over the whole inventory:

* targets (``lustre_server_targets``): devices, types, file system names, indexes unique per file system over ALL
  servers, MDT0 and one MGS, the MGS NIDs every target registers with;
* LNet (``lustre_server_lnet_networks``, ``lustre_client_lnet_networks``): network names, interfaces, and that each
  client shares a network with the MGS and the servers of what it mounts;
* client mounts (``lustre_client_mounts``): the file system and MGS NIDs the servers define, distinct mount points;
* layouts (``lustre_client_dataset_layout``, ``lustre_client_checkpoint_layout``, ``lustre_client_directories``):
  parsed with the same code as the ``lfs_stripe`` module (plugins/module_utils/lustre.py), so preflight refuses
  what the module would refuse, plus stripe counts against the OSTs the servers define;
* tunings (``lustre_client_tunings``, ``lustre_client_tunings_extra``, ``lustre_server_params``): lctl parameter
  names, scalar values, the RPC size against the servers' brw_size (docs/lustre-striping.md).

The rules run when ``preflight_lustre_enabled`` is true, or when any host of the Lustre groups sets a Lustre
variable (the Lustre plays of site.yml run on those groups whatever the switch says).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import posixpath
import re

from ansible.module_utils.six.moves.collections_abc import Mapping

from ansible_collections.clusterforge.gpu.plugins.module_utils.lustre import (
    STRIPE_SIZE_ALIGN,
    LayoutError,
    layout_from_params,
    lnet_net_name,
    parse_extent,
    parse_size,
    target_mount_leaf,
)
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import _JinjaUndefined, is_host_name
from ansible_collections.clusterforge.gpu.plugins.module_utils.values import is_int, type_name

SERVER_GROUPS = ("lustre_mds", "lustre_oss")
CLIENT_GROUP = "lustre_clients"
LUSTRE_PREFIXES = ("lustre_server_", "lustre_client_", "cluster_lustre_")

FSNAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,8}$")
TARGET_TYPES = ("mgs", "mgs_mdt", "mdt", "ost")
TARGET_KEYS = ("device", "type", "fsname", "index", "mgs_nids", "servicenodes", "failnodes", "backfstype",
               "mkfs_options", "params", "mountpoint", "mount_options")
BACKFSTYPES = ("ldiskfs", "zfs")
# mkfs.lustre: an index of 0xFFFF means "unassigned" (INDEX_UNASSIGNED), so 0..65534; the Lustre manual's limit
# is 256 MDTs per file system.
MAX_OST_INDEX = 65534
MAX_MDT_INDEX = 255
# LNet network types a Lustre 2.15 node can use (socklnd, o2iblnd, gnilnd, kfilnd); a number may follow.
LNET_NET_RE = re.compile(r"^(tcp|o2ib|gni|kfi)(\d{0,5})$")
IPV4_RE = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$")
# Linux interface names: 1-15 characters (IFNAMSIZ 16 with the NUL), no '/', ':' or white space.
IFACE_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}$")
# A device or mount path: absolute, no white space or characters the shell or fstab would read specially.
PATH_RE = re.compile(r"^/[A-Za-z0-9_.,+=@%:/-]*$")
SYSTEM_DIRS = ("/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/proc", "/root", "/run", "/sbin", "/sys",
               "/tmp", "/usr", "/var")
# lctl parameter names: dot-separated words with glob characters (osc.*.max_pages_per_rpc, osc.lfs-OST*.checksums,
# ldlm.namespaces.*.lru_size); never '=', white space, quotes or shell characters (the names go into a systemd
# ExecStart= line and into lctl set_param key=value).
PARAM_NAME_RE = re.compile(r"^[A-Za-z0-9_*?\[\]-]+(\.[A-Za-z0-9_*?\[\]-]+)*$")
PARAM_VALUE_RE = re.compile(r"^[A-Za-z0-9_.,:@/+*=-]+$")
# Parameters that exist only on servers: on a client `lctl get_param` fails on them and the role stops.
SERVER_PARAM_PREFIXES = ("obdfilter", "ofd", "ost", "mdt", "mds", "mdd", "mgs", "lod", "osp", "qmt", "qsd",
                         "osd-ldiskfs", "osd-zfs", "mdt_coordinator", "hsm")
LAYOUT_KEYS = ("stripe_count", "stripe_size", "pool", "components")
COMPONENT_KEYS = ("end", "stripe_count", "stripe_size", "pool")
DIRECTORY_KEYS = ("path", "kind", "stripe_count", "stripe_size", "pool", "components", "owner", "group", "mode")
DIRECTORY_KINDS = ("dataset", "checkpoint", "plain")
MOUNT_KEYS = ("fsname", "mgs_nids", "path", "options")
LNET_KEYS = ("net", "interfaces")
MAX_STRIPE_COUNT = 2000
MAX_STRIPE_SIZE = 4 << 30
POOL_RE = re.compile(r"^([A-Za-z0-9_-]{1,8}\.)?[A-Za-z0-9_-]{1,15}$")
MODE_RE = re.compile(r"^(0?[0-7]{3,4}|[ugoa]*[-+=][rwxXst]*([,][ugoa]*[-+=][rwxXst]*)*)$")
PAGE_SIZES_KIB = (4, 16, 64)
MAX_BRW_SIZE_MB = 16
DEFAULT_BRW_SIZE_MB = 4
BRW_PARAM_RE = re.compile(r"^obdfilter\.[^.]+\.brw_size$")


class _Unresolvable(Exception):
    pass


def _plain(value):
    """A deep copy in plain Python types; templating of nested values happens here (and may raise)."""
    if _JinjaUndefined and isinstance(value, _JinjaUndefined):
        raise _Unresolvable("a variable in its template is undefined")
    if isinstance(value, Mapping):
        return dict((k, _plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _short(exc):
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _show(value):
    """A value as the operator wrote it, for messages."""
    if isinstance(value, str):
        return "'%s'" % value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    return str(value)


def _shape(value):
    if isinstance(value, (dict, list)):
        return "a %s" % type_name(value)
    return "%s %s" % (type_name(value), _show(value))


def fsname_problem(value):
    """Why a value is not a Lustre file system name, or None."""
    if not isinstance(value, str):
        return "must be a string of 1-8 letters, digits, '_' or '-', got %s" % _shape(value)
    if FSNAME_RE.match(value):
        return None
    if not value:
        return "is empty: a Lustre file system name has 1-8 letters, digits, '_' or '-'"
    if len(value) > 8:
        return ("'%s' has %d characters: a Lustre file system name has at most 8 (letters, digits, '_', '-')"
                % (value, len(value)))
    return "'%s' is not a Lustre file system name: only letters, digits, '_' and '-' are allowed" % value


def _int_value(value):
    """An integer from an int or a string of digits (what the roles accept), else None."""
    if is_int(value):
        return value
    if isinstance(value, str) and re.match(r"^-?\d+$", value.strip()):
        return int(value.strip())
    return None


# ----------------------------------------------------------------------------------------------------- NIDs
def nid_problem(nid):
    """Why a string is not one LNet NID (address@network), or None."""
    if not isinstance(nid, str):
        return "must be a string address@network, got %s" % _shape(nid)
    text = nid.strip()
    if not text:
        return "is empty (an LNet NID is address@network, e.g. 10.0.0.1@o2ib)"
    if "@" not in text:
        return ("'%s' has no LNet network: a NID is address@network (e.g. %s@o2ib or %s@tcp)"
                % (text, text, text))
    if text.count("@") > 1:
        return "'%s' is not one LNet NID (address@network): it has several '@'" % text
    addr, net = text.split("@", 1)
    m = LNET_NET_RE.match(net)
    if not m:
        return ("the network '%s' of NID '%s' is not an LNet network name (tcp, tcp0, tcp1, o2ib, o2ib0, o2ib1...)"
                % (net, text))
    kind = m.group(1)
    if kind in ("tcp", "o2ib"):
        ip = IPV4_RE.match(addr)
        if ip:
            if any(int(part) > 255 for part in ip.groups()):
                return "the address '%s' of NID '%s' is not an IPv4 address" % (addr, text)
            return None
        if not is_host_name(addr):
            return "the address '%s' of NID '%s' is not an IPv4 address (or a host name)" % (addr, text)
        return None
    if not re.match(r"^\d+$", addr):
        return "the address '%s' of NID '%s' must be a number on a %s network" % (addr, text, kind)
    return None


def _norm_nid(nid):
    addr, net = nid.strip().split("@", 1)
    return "%s@%s" % (addr.lower(), lnet_net_name(net))


def _nid_net(nid):
    return lnet_net_name(nid.strip().split("@", 1)[1])


def _nid_addr(nid):
    return nid.strip().split("@", 1)[0].lower()


def parse_mgs_nids(value, label):
    """``mgs_nids`` (one entry per MGS node, NIDs of one node comma-separated, ':' also splits nodes) ->
    (problems, nodes) where nodes is a list of lists of normalised NIDs; problems are "<label...>: <msg>"."""
    problems = []
    if not isinstance(value, list):
        if isinstance(value, str):
            return (["%s: must be a list with one entry per MGS node (primary first), got the string '%s': the role "
                     "would take it character by character; write [%s]" % (label, value, value)], None)
        return (["%s: must be a list of MGS NIDs with one entry per MGS node (primary first), got %s"
                 % (label, _shape(value))], None)
    if not value:
        return (["%s: is empty: give the NIDs of the MGS (e.g. ['10.0.0.1@o2ib'])" % label], None)
    nodes = []
    for i, entry in enumerate(value):
        where = "%s[%d]" % (label, i)
        if not isinstance(entry, str):
            problems.append("%s: must be a string of NIDs (address@network, several of one node joined by ','), "
                            "got %s" % (where, _shape(entry)))
            continue
        for node in entry.split(":"):
            nids = []
            for nid in node.split(","):
                why = nid_problem(nid)
                if why:
                    problems.append("%s: %s" % (where, why))
                else:
                    nids.append(_norm_nid(nid))
            if nids:
                nodes.append(nids)
    return problems, (nodes if not problems else None)


def _show_nodes(nodes):
    return "[%s]" % ", ".join("'%s'" % ",".join(n) for n in nodes)


# ------------------------------------------------------------------------------------------------- layouts
def _size_problem(value, what):
    """Why a stripe size is refused, or None (parse_size is the lfs_stripe module's own parser)."""
    if isinstance(value, bool) or isinstance(value, (dict, list)) or value is None:
        return "%s must be a size (bytes or a K, M or G suffix, e.g. 4M), got %s" % (what, _shape(value))
    try:
        size = parse_size(value)
    except ValueError:
        return "%s %s is not a size (bytes or a K, M or G suffix, e.g. 4M)" % (what, _show(value))
    if size <= 0:
        return "%s %s must be positive" % (what, _show(value))
    if size % STRIPE_SIZE_ALIGN:
        return ("%s %s is not a multiple of 64 KiB (65536 bytes): lfs setstripe refuses it (use 64K, 1M, 4M...)"
                % (what, _show(value)))
    if size >= MAX_STRIPE_SIZE:
        return "%s %s is not below 4 GiB, the largest stripe size Lustre accepts" % (what, _show(value))
    return None


def _count_problem(value, what, osts):
    """Why a stripe count is refused, or None. ``osts`` is ``(count, fsname)`` or None when unknown."""
    if isinstance(value, bool) or not (is_int(value) or (isinstance(value, str) and re.match(r"^-?\d+$", value))):
        return "%s must be a whole number (-1 for every OST), got %s" % (what, _shape(value))
    count = int(value)
    if count < -1:
        return "%s %d is not -1 (every OST), 0 (the file system default) or a positive count" % (what, count)
    if count > MAX_STRIPE_COUNT:
        return "%s %d is above Lustre's limit of %d stripes per file" % (what, count, MAX_STRIPE_COUNT)
    if osts and count > osts[0]:
        return ("%s %d is more than the %d OSTs of file system %s (counted over every OSS): "
                "use -1 to stripe over every OST" % (what, count, osts[0], osts[1]))
    return None


def _pool_problem(value, what):
    if not isinstance(value, str) or not POOL_RE.match(value):
        return ("%s %s is not an OST pool name (1-15 letters, digits, '_' or '-', optionally fsname.pool)"
                % (what, _show(value) if not isinstance(value, (dict, list)) else _shape(value)))
    return None


def layout_problems(layout, osts=None, directory=False):
    """Problems of one layout (the dict given to lfs_stripe), each a message without the variable name.

    ``osts`` is ``(count, fsname)`` for the file system the layout is applied on (None when unknown): plain
    stripe counts above it are refused. PFL component counts are not held to it: a progressive layout is a
    template shared by file systems of any size and Lustre caps each component at the OSTs there are.
    """
    if not isinstance(layout, dict):
        return ["must be a dict of lfs_stripe options (stripe_count, stripe_size, pool or components), got %s"
                % _shape(layout)]
    out = []
    if not directory:
        for key in layout:
            if key not in LAYOUT_KEYS:
                out.append("%s is not a layout option the role applies (only stripe_count, stripe_size, pool and "
                           "components are passed to lfs_stripe): it would be ignored" % _show(key))
    comps = layout.get("components")
    plain = [k for k in ("stripe_count", "stripe_size", "pool") if layout.get(k) is not None]
    if comps is not None and plain:
        out.append("components cannot be combined with %s: a layout is either plain or progressive (PFL)"
                   % ", ".join(plain))
    if layout.get("stripe_count") is not None:
        why = _count_problem(layout["stripe_count"], "stripe_count", osts)
        if why:
            out.append(why)
    if layout.get("stripe_size") is not None:
        why = _size_problem(layout["stripe_size"], "stripe_size")
        if why:
            out.append(why)
    if layout.get("pool") is not None:
        why = _pool_problem(layout["pool"], "pool")
        if why:
            out.append(why)
    if comps is not None:
        out.extend(_components_problems(comps))
    if out:
        return out
    # Everything above passed: the lfs_stripe module's own validation must agree.
    try:
        if comps is not None:
            layout_from_params(components=[dict(c, end=str(c.get("end"))) for c in comps])
        else:
            layout_from_params(layout.get("stripe_count"), _str_or_none(layout.get("stripe_size")),
                               layout.get("pool"))
    except LayoutError as e:
        out.append("lfs_stripe would refuse this layout: %s" % e)
    except (TypeError, ValueError, AttributeError) as e:
        out.append("lfs_stripe would refuse this layout: %s" % _short(e))
    return out


def _str_or_none(value):
    return None if value is None else str(value)


def _components_problems(comps):
    if not isinstance(comps, list):
        return ["components must be a list of {end, stripe_count, stripe_size, pool}, got %s" % _shape(comps)]
    if not comps:
        return ["components is empty: a progressive layout needs at least one component ending at -1 (EOF)"]
    out = []
    prev_end = 0
    prev_label = None
    for i, comp in enumerate(comps):
        label = "components[%d]" % i
        last = i == len(comps) - 1
        if not isinstance(comp, dict):
            out.append("%s must be a dict {end, stripe_count, stripe_size, pool}, got %s" % (label, _shape(comp)))
            prev_end = None
            continue
        for key in comp:
            if key not in COMPONENT_KEYS:
                out.append("%s: %s is not a component option (end, stripe_count, stripe_size, pool): lfs_stripe "
                           "refuses it" % (label, _show(key)))
        if comp.get("stripe_count") is not None:
            why = _count_problem(comp["stripe_count"], "%s stripe_count" % label, None)
            if why:
                out.append(why)
        size = None
        if comp.get("stripe_size") is not None:
            why = _size_problem(comp["stripe_size"], "%s stripe_size" % label)
            if why:
                out.append(why)
            else:
                size = parse_size(comp["stripe_size"])
        if comp.get("pool") is not None:
            why = _pool_problem(comp["pool"], "%s pool" % label)
            if why:
                out.append(why)
        end_value = comp.get("end")
        if end_value is None:
            out.append("%s has no end: each component needs one (a size, or -1/eof for the last)" % label)
            prev_end = None
            continue
        if isinstance(end_value, (bool, dict, list)):
            out.append("%s end must be a size or -1/eof, got %s" % (label, _shape(end_value)))
            prev_end = None
            continue
        try:
            end = parse_extent(end_value)
        except ValueError:
            out.append("%s end %s is not a size (K, M, G suffix) or -1/eof" % (label, _show(end_value)))
            prev_end = None
            continue
        if end is None:
            if not last:
                out.append("%s ends at EOF (%s) but is not the last component: only the last may end at EOF"
                           % (label, end_value))
            prev_end = None
            continue
        if last:
            out.append("the last component (%s) must end at EOF (-1 or eof), not %s: writes beyond it would fail"
                       % (label, end_value))
        if prev_end is not None and end <= prev_end and i > 0:
            out.append("%s end %s is not after the previous component's end %s: PFL component ends must increase"
                       % (label, end_value, prev_label))
        elif end % STRIPE_SIZE_ALIGN:
            out.append("%s end %s is not a multiple of 64 KiB" % (label, end_value))
        elif size and end % size:
            out.append("%s end %s is not a multiple of its stripe_size %s" % (label, end_value, comp["stripe_size"]))
        prev_end = end
        prev_label = end_value
    return out


# ----------------------------------------------------------------------------------------------------- tunings
def param_name_problem(name):
    if not isinstance(name, str):
        return "the key %s is not an lctl parameter name" % _show(name)
    if not PARAM_NAME_RE.match(name):
        return ("%s is not an lctl parameter name (dot-separated words with * or ? wildcards, such as "
                "osc.*.max_pages_per_rpc; no spaces, '=', quotes or shell characters)" % _show(name))
    return None


def param_value_problem(name, value):
    if isinstance(value, bool):
        return ("%s: the value is the boolean %s: lctl expects 1 or 0 (write 1 or 0)"
                % (name, "true" if value else "false"))
    if isinstance(value, (dict, list)) or value is None:
        return "%s: the value must be a single number or word, got %s" % (name, _shape(value))
    if isinstance(value, float):
        return None
    text = str(value)
    if not is_int(value) and not PARAM_VALUE_RE.match(text):
        return ("%s: the value %s is not a single lctl value (no spaces, quotes or shell characters; it is written "
                "into lctl set_param %s=<value>)" % (name, _show(value), name))
    return None


def _leaf(name):
    return name.rsplit(".", 1)[-1] if isinstance(name, str) else ""


def _prefix(name):
    return name.split(".", 1)[0] if isinstance(name, str) else ""


# --------------------------------------------------------------------------------------------------- the checker
class _Check(object):
    def __init__(self, inv, opts):
        self.inv = inv
        self.opts = opts or {}
        self.errors = []
        self.servers = inv.hosts(*SERVER_GROUPS)
        self.clients = inv.hosts(CLIENT_GROUP)
        self._cache = {}
        # Collected over every server: target records (dicts with host, pos, type, fsname, index...).
        self.targets = []
        self.server_lnet = {}   # host -> set (servers)
        self.client_lnet = {}   # host -> set (clients)
        self._dir_paths = {}    # host -> {directory path: position}
        self._owners = None     # NID address or host name -> inventory host
        self._fs_osts = None

    def err(self, host, name, msg):
        self.errors.append("%s: %s: %s" % (host, name, msg))

    def read(self, host, name, role=None):
        """A host's value in plain Python types (role default when unset and a role is named); None if unset.
        An unresolvable value is reported once and read as None."""
        key = (host, name, role)
        if key in self._cache:
            return self._cache[key]
        value = self.inv.effective(host, role, name) if role else self.inv.get(host, name)
        try:
            value = _plain(value)
        except Exception as e:  # pylint: disable=broad-except
            self.inv._report(host, name, "cannot be resolved: %s" % _short(e))  # pylint: disable=protected-access
            value = None
        self._cache[key] = value
        return value

    def host_ips(self, host):
        out = set()
        for name in ("cluster_fabric_ip", "cluster_mgmt_ip", "ansible_host"):
            value = self.read(host, name)
            if isinstance(value, str) and IPV4_RE.match(value.strip()):
                out.add(value.strip())
        return out

    def owner_of(self, addr):
        """The inventory host an NID address belongs to (one of its addresses, or its name), or None."""
        if self._owners is None:
            self._owners = {}
            for host in reversed(self.inv.all_hosts):  # the first host wins, as in inventory order
                for key in [str(host).lower(), str(host).split(".", maxsplit=1)[0].lower()] + sorted(self.host_ips(host)):
                    self._owners[key] = host
        return self._owners.get(addr)

    # -- when --------------------------------------------------------------------------------------------
    def wanted(self):
        if self.opts.get("lustre_enabled", True):
            return True
        for host in self.servers + self.clients:
            if any(k.startswith(LUSTRE_PREFIXES) for k in self.inv.keys(host)):
                return True
        return False

    def run(self):
        if not self.wanted():
            return []
        for host in self.servers:
            self.server_lnet[host] = self.check_lnet(host, "lustre_server", "lustre_server_lnet_networks")
            self.check_targets(host)
            self.check_server_misc(host)
        for host in self.inv.all_hosts:
            if host in self.servers:
                continue
            value = self.read(host, "lustre_server_targets")
            if isinstance(value, list) and value:
                self.err(host, "lustre_server_targets", "this host is in neither lustre_mds nor lustre_oss, so "
                         "lustre_server never runs here and its targets would never be formatted or mounted")
        self.check_cluster_vars()
        self.check_targets_across()
        self.check_server_params()
        for host in self.clients:
            self.client_lnet[host] = self.check_lnet(host, "lustre_client", "lustre_client_lnet_networks")
            self.check_client(host)
        self.check_directories_across()
        return self.errors

    # -- LNet ----------------------------------------------------------------------------------------------
    def check_lnet(self, host, role, name):
        """Validate a host's LNet networks; returns the set of normalised network names (empty if unusable)."""
        nets = self.read(host, name, role)
        found = set()
        if nets is None:
            return found
        if not isinstance(nets, list):
            self.err(host, name, "must be a list of {net, interfaces} (e.g. [{net: o2ib0, interfaces: [ib0]}]), got %s"
                     % _shape(nets))
            return found
        if not nets:
            self.err(host, name, "is empty: LNet would have no network and no Lustre traffic could flow "
                                 "(e.g. [{net: o2ib0, interfaces: [ib0]}])")
            return found
        seen_net = {}
        seen_if = {}
        fabric = self.read(host, "cluster_fabric_type")
        for i, entry in enumerate(nets):
            where = "%s[%d]" % (name, i)
            if not isinstance(entry, dict):
                self.err(host, where, "must be a dict {net, interfaces}, got %s" % _shape(entry))
                continue
            for key in entry:
                if key not in LNET_KEYS:
                    self.err(host, where, "%s is not an LNet network option (net, interfaces)" % _show(key))
            net = entry.get("net")
            if net is None:
                self.err(host, where, "has no net: name the LNet network (o2ib0 on InfiniBand, tcp0 on Ethernet)")
            elif not isinstance(net, str) or not LNET_NET_RE.match(net):
                self.err(host, where + ".net", "%s is not an LNet network name (tcp, tcp0, tcp1, o2ib, o2ib0, o2ib1...)"
                         % (_show(net) if not isinstance(net, (dict, list)) else _shape(net)))
            else:
                norm = lnet_net_name(net)
                if norm in seen_net:
                    self.err(host, where + ".net", "%s is the same LNet network as %s[%d] (%s): give all its "
                             "interfaces in one entry" % (net, name, seen_net[norm][0], seen_net[norm][1]))
                else:
                    seen_net[norm] = (i, net)
                    found.add(norm)
                if (net.startswith("o2ib") and fabric == "ethernet" and host in self.inv.hosts("gpu_nodes")):
                    self.err(host, where + ".net", "%s needs RDMA (InfiniBand or RoCE) but cluster_fabric_type is "
                             "ethernet: use a tcp network (e.g. tcp0) on this fabric" % net)
            ifaces = entry.get("interfaces")
            if ifaces is None:
                self.err(host, where, "has no interfaces: list the interfaces of the network (e.g. [ib0])")
                continue
            if not isinstance(ifaces, list):
                self.err(host, where + ".interfaces", "must be a list of interface names (e.g. [ib0, ib1]), got %s"
                         % _shape(ifaces))
                continue
            if not ifaces:
                self.err(host, where + ".interfaces", "is empty: a network needs at least one interface")
                continue
            for j, iface in enumerate(ifaces):
                if not isinstance(iface, str) or not IFACE_RE.match(iface):
                    self.err(host, "%s.interfaces[%d]" % (where, j),
                             "%s is not a Linux interface name (1-15 letters, digits, '_', '.' or '-')"
                             % (_show(iface) if not isinstance(iface, (dict, list)) else _shape(iface)))
                    continue
                if iface in seen_if:
                    self.err(host, "%s.interfaces[%d]" % (where, j), "%s is already in LNet network %s: an interface "
                             "belongs to one network, listed once" % (iface, seen_if[iface]))
                else:
                    seen_if[iface] = net
        return found

    # -- server targets --------------------------------------------------------------------------------
    def check_targets(self, host):
        name = "lustre_server_targets"
        targets = self.read(host, name, "lustre_server")
        if targets is None:
            return
        if not isinstance(targets, list):
            self.err(host, name, "must be a list of targets ({device, type, fsname, index, mgs_nids...}), got %s"
                     % _shape(targets))
            return
        root = self.read(host, "lustre_server_mount_root", "lustre_server")
        devices = {}
        mounts = {}
        for i, t in enumerate(targets):
            where = "%s[%d]" % (name, i)
            if not isinstance(t, dict):
                self.err(host, where, "must be a dict (device, type, fsname, index, mgs_nids...), got %s" % _shape(t))
                continue
            for key in t:
                if key not in TARGET_KEYS:
                    self.err(host, where, "%s is not a target option the role knows (%s): it would be ignored"
                             % (_show(key), ", ".join(TARGET_KEYS)))
            rec = {"host": host, "pos": i, "where": where, "type": None, "fsname": None, "index": None,
                   "nodes": None, "device": None, "service": []}
            ttype = t.get("type")
            if ttype is None:
                self.err(host, where, "has no type: one of mgs, mgs_mdt (a combined MGS and MDT0), mdt, ost")
            elif ttype not in TARGET_TYPES:
                self.err(host, where + ".type", "%s is not a target type the role supports (mgs, mgs_mdt for a "
                         "combined MGS and MDT0, mdt, ost)" % (_show(ttype) if not isinstance(ttype, (dict, list))
                                                               else _shape(ttype)))
            else:
                rec["type"] = ttype
            self._check_device(host, where, t, rec, devices)
            self._check_fsname_index(host, where, t, rec)
            self._check_target_nids(host, where, t, rec)
            backfs = t.get("backfstype")
            if backfs is not None and backfs not in BACKFSTYPES:
                self.err(host, where + ".backfstype", "%s is not a backing file system the role supports (ldiskfs, "
                         "zfs)" % (_show(backfs) if not isinstance(backfs, (dict, list)) else _shape(backfs)))
            self._check_target_strings(host, where, t)
            self._check_target_mountpoint(host, where, t, rec, root, mounts)
            self.targets.append(rec)

    def _check_device(self, host, where, t, rec, devices):
        dev = t.get("device")
        if dev is None:
            self.err(host, where, "has no device: the block device to format, an absolute path such as "
                                  "/dev/disk/by-id/...")
            return
        if not isinstance(dev, str):
            self.err(host, where + ".device", "must be a device path (/dev/...), got %s" % _shape(dev))
            return
        if not dev.startswith("/"):
            self.err(host, where + ".device", "'%s' is not an absolute path: give the full device path (/dev/%s, "
                     "/dev/disk/by-id/..., /dev/mapper/...)" % (dev, dev))
            return
        if not PATH_RE.match(dev) or dev.rstrip("/") in ("", "/dev") or dev.endswith("/"):
            self.err(host, where + ".device", "'%s' is not a device path (no spaces, quotes or shell characters; "
                     "a device, not a directory)" % dev)
            return
        norm = posixpath.normpath(dev)
        rec["device"] = norm
        if norm in devices:
            self.err(host, where + ".device", "%s is also the device of %s on this host: two targets cannot share a "
                     "device (the second mkfs.lustre would destroy the first)" % (dev, devices[norm]))
        else:
            devices[norm] = where

    def _check_fsname_index(self, host, where, t, rec):
        ttype = rec["type"]
        fsname = t.get("fsname")
        if fsname is None:
            if ttype in ("mgs_mdt", "mdt", "ost"):
                self.err(host, where, "has no fsname: a %s target needs the file system name (1-8 characters)" % ttype)
        else:
            why = fsname_problem(fsname)
            if why:
                self.err(host, where + ".fsname", why)
            else:
                rec["fsname"] = fsname
        index = t.get("index")
        if index is None:
            if ttype in ("mgs_mdt", "mdt", "ost"):
                self.err(host, where, "has no index: a %s target needs its index in the file system (unique per "
                         "type: OST0, OST1...)" % ttype)
            return
        if ttype == "mgs":
            return
        value = _int_value(index)
        if value is None or isinstance(index, bool):
            self.err(host, where + ".index", "must be a whole number (the target's index), got %s" % _shape(index))
            return
        if ttype == "ost" and not 0 <= value <= MAX_OST_INDEX:
            self.err(host, where + ".index", "OST index %d is outside Lustre's range 0-%d" % (value, MAX_OST_INDEX))
            return
        if ttype in ("mdt", "mgs_mdt") and not 0 <= value <= MAX_MDT_INDEX:
            self.err(host, where + ".index", "MDT index %d is outside 0-%d (Lustre supports at most 256 MDTs per "
                     "file system)" % (value, MAX_MDT_INDEX))
            return
        if ttype == "mgs_mdt" and value != 0:
            self.err(host, where + ".index", "a combined mgs_mdt target is MDT0 and must have index 0, got %d: "
                     "use type mdt for other MDTs" % value)
            return
        rec["index"] = value

    def _check_target_nids(self, host, where, t, rec):
        ttype = rec["type"]
        nids = t.get("mgs_nids")
        if nids is None:
            if ttype in ("mdt", "ost"):
                self.err(host, where, "has no mgs_nids: a %s target registers with the MGS and needs its NIDs (e.g. "
                         "['10.0.0.1@o2ib'], the active MGS first)" % ttype)
        else:
            problems, nodes = parse_mgs_nids(nids, where + ".mgs_nids")
            for p in problems:
                self.errors.append("%s: %s" % (host, p))
            rec["nodes"] = nodes
        has = []
        for key in ("servicenodes", "failnodes"):
            value = t.get(key)
            if value is None or value == []:
                continue
            has.append(key)
            problems, nodes = parse_mgs_nids(value, "%s.%s" % (where, key))
            for p in problems:
                self.errors.append("%s: %s" % (host, p.replace("MGS node", "server").replace("of the MGS",
                                                                                             "of the servers")))
            if nodes:
                rec["service"].extend(n for node in nodes for n in node)
                self._check_service_owners(host, "%s.%s" % (where, key), key, nodes)
        if len(has) == 2:
            self.err(host, where, "servicenodes and failnodes are mutually exclusive: mkfs.lustre takes one or the "
                                  "other (servicenodes lists every server that may serve the target)")

    def _check_service_owners(self, host, label, key, nodes):
        """servicenodes name every server of the target, this one included; failnodes only the partners."""
        owners = set(self.owner_of(_nid_addr(n)) for node in nodes for n in node) - set([None])
        if key == "servicenodes" and owners and host not in owners and self.host_ips(host):
            self.err(host, label, "names %s but not this host (%s): servicenodes lists every server that may serve "
                     "the target, this one included" % (", ".join(sorted(owners)), host))
        elif key == "failnodes" and host in owners:
            self.err(host, label, "includes this host's own NID: failnodes lists only the failover partner(s) "
                     "(use servicenodes to list every server)")

    def _check_target_strings(self, host, where, t):
        for key in ("mkfs_options", "mount_options"):
            value = t.get(key)
            if value is None:
                continue
            if not isinstance(value, str):
                self.err(host, "%s.%s" % (where, key), "must be a string, got %s" % _shape(value))
            elif key == "mount_options" and (re.search(r"\s", value) or value.startswith(",")):
                self.err(host, "%s.%s" % (where, key), "'%s' is not a mount option list (comma-separated, no "
                         "spaces: it goes into /etc/fstab)" % value)
        params = t.get("params")
        if params is None:
            return
        if not isinstance(params, list):
            self.err(host, where + ".params", "must be a list of key=value strings (mkfs.lustre --param), got %s"
                     % _shape(params))
            return
        for j, p in enumerate(params):
            if not isinstance(p, str) or not re.match(r"^[A-Za-z0-9_.*-]+=\S+$", p):
                self.err(host, "%s.params[%d]" % (where, j), "%s is not key=value (an mkfs.lustre --param, e.g. "
                         "sys.timeout=40)" % (_show(p) if not isinstance(p, (dict, list)) else _shape(p)))

    def _check_target_mountpoint(self, host, where, t, rec, root, mounts):
        mp = t.get("mountpoint")
        if mp is not None:
            if not isinstance(mp, str) or not mp.startswith("/") or not PATH_RE.match(mp) or mp.rstrip("/") == "":
                self.err(host, where + ".mountpoint", "%s is not an absolute mount point (e.g. /mnt/lustre/lfs-ost0)"
                         % (_show(mp) if not isinstance(mp, (dict, list)) else _shape(mp)))
                return
            path = posixpath.normpath(mp)
        else:
            if not isinstance(root, str) or not rec["type"]:
                return
            if rec["type"] != "mgs" and (rec["fsname"] is None or rec["index"] is None):
                return
            path = posixpath.normpath(root.rstrip("/") + "/" + target_mount_leaf(rec))
        if path in mounts:
            self.err(host, where + ".mountpoint", "%s is also the mount point of %s on this host: each target "
                     "needs its own" % (path, mounts[path]))
        else:
            mounts[path] = where

    def check_server_misc(self, host):
        root = self.read(host, "lustre_server_mount_root")
        if root is not None and (not isinstance(root, str) or not root.startswith("/") or not PATH_RE.match(root)):
            self.err(host, "lustre_server_mount_root", "%s is not an absolute directory (e.g. /mnt/lustre)"
                     % (_show(root) if not isinstance(root, (dict, list)) else _shape(root)))
        opts = self.read(host, "lustre_server_mount_options")
        if isinstance(opts, str) and (re.search(r"\s", opts) or not opts):
            self.err(host, "lustre_server_mount_options", "'%s' is not a mount option list (comma-separated, no "
                     "spaces: it goes into /etc/fstab)" % opts)

    # -- cluster_lustre_* conventions -----------------------------------------------------------------
    def check_cluster_vars(self):
        seen = set()
        for host in self.servers + [h for h in self.clients if h not in self.servers]:
            fsname = self.read(host, "cluster_lustre_fsname")
            if fsname is not None:
                why = fsname_problem(fsname)
                key = ("cluster_lustre_fsname", repr(fsname))
                if why and key not in seen:
                    seen.add(key)
                    self.err(host, "cluster_lustre_fsname", why)
                elif not why and host in self.servers:
                    for rec in self.targets:
                        if rec["host"] == host and rec["fsname"] and rec["fsname"] != fsname:
                            self.err(host, rec["where"] + ".fsname", "%s differs from cluster_lustre_fsname %s"
                                     % (rec["fsname"], fsname))
            nids = self.read(host, "cluster_lustre_mgs_nids")
            if nids is not None:
                problems, nodes = parse_mgs_nids(nids, "cluster_lustre_mgs_nids")
                key = ("cluster_lustre_mgs_nids", repr(nids))
                if problems and key not in seen:
                    seen.add(key)
                    for p in problems:
                        self.errors.append("%s: %s" % (host, p))
                elif nodes and host in self.servers:
                    for rec in self.targets:
                        if rec["host"] == host and rec["nodes"] and not _same_nodes(rec["nodes"], nodes):
                            self.err(host, rec["where"] + ".mgs_nids", "%s differ from cluster_lustre_mgs_nids %s"
                                     % (_show_nodes(rec["nodes"]), _show_nodes(nodes)))

    # -- across servers ---------------------------------------------------------------------------------
    def fs_osts(self):
        if self._fs_osts is not None:
            return self._fs_osts
        out = {}
        for rec in self.targets:
            if rec["type"] == "ost" and rec["fsname"] and rec["index"] is not None:
                out.setdefault(rec["fsname"], set()).add(rec["index"])
        self._fs_osts = dict((fs, len(idx)) for fs, idx in out.items())
        return self._fs_osts

    def mgs_records(self):
        return [r for r in self.targets if r["type"] in ("mgs", "mgs_mdt")]

    def mgs_hosts(self):
        return [r["host"] for r in self.mgs_records()]

    def check_targets_across(self):
        seen = {}
        filesystems = {}
        for rec in self.targets:
            fs = rec["fsname"]
            if rec["type"] in ("mdt", "mgs_mdt", "ost") and fs:
                info = filesystems.setdefault(fs, {"mdt": set(), "ost": set(), "nodes": None, "first": None})
                kind = "ost" if rec["type"] == "ost" else "mdt"
                if rec["index"] is not None:
                    key = (fs, kind, rec["index"])
                    if key in seen:
                        other = seen[key]
                        there = ("%s on this host" % other["where"] if other["host"] == rec["host"]
                                 else "on %s (%s%s)" % (other["host"], other["where"],
                                                        ", " + other["device"] if other["device"] else ""))
                        self.err(rec["host"], rec["where"] + ".index", "%s index %d of file system %s is also %s: "
                                 "each %s index must be unique in a file system, over every server"
                                 % (kind.upper(), rec["index"], fs, there, kind.upper()))
                    else:
                        seen[key] = rec
                    info[kind].add(rec["index"])
        for fs in sorted(filesystems):
            info = filesystems[fs]
            if 0 not in info["mdt"]:
                self.errors.append("inventory: lustre_server_targets: file system %s has %s but no MDT0 (a target of "
                                   "type mdt or mgs_mdt with index 0): Lustre cannot mount it without MDT0"
                                   % (fs, "OSTs" if info["ost"] else "MDTs"))
            if info["mdt"] and not info["ost"]:
                self.errors.append("inventory: lustre_server_targets: file system %s has no OST on any server: files "
                                   "could not be stored (add ost targets on the lustre_oss hosts)" % fs)
        mgs = self.mgs_records()
        if len(mgs) > 1:
            self.errors.append("inventory: lustre_server_targets: %d MGS targets (%s): a cluster has exactly one MGS, "
                               "shared by its file systems (an HA partner is given with servicenodes, not a second "
                               "MGS)" % (len(mgs), ", ".join("%s %s" % (r["host"], r["device"] or r["where"])
                                                             for r in mgs)))
        self._check_mgs_nids_across(filesystems)

    def _check_mgs_nids_across(self, filesystems):
        mgs = self.mgs_records()
        mgs_hosts = [r["host"] for r in mgs]
        mgs_addrs = set()
        for r in mgs:
            mgs_addrs |= self.host_ips(r["host"])
            mgs_addrs.add(str(r["host"]).lower())
            mgs_addrs |= set(_nid_addr(n) for n in r["service"])
        referenced = [r for r in self.targets if r["nodes"] and r["type"] in ("mdt", "ost", "mgs_mdt")]
        if not mgs and referenced:
            internal = [r for r in referenced if any(self.owner_of(_nid_addr(n)) for n in r["nodes"][0])]
            if internal:
                r = internal[0]
                self.errors.append("inventory: lustre_server_targets: no host serves an MGS (a target of type mgs or "
                                   "mgs_mdt), yet the targets name an MGS in this inventory (%s gives %s): add the MGS "
                                   "target" % (r["host"], _show_nodes(r["nodes"])))
        # Every target of one file system registers with the same MGS NIDs.
        first = {}
        for r in referenced:
            fs = r["fsname"]
            if not fs:
                continue
            if fs not in first:
                first[fs] = r
            elif not _same_nodes(r["nodes"], first[fs]["nodes"]):
                f = first[fs]
                self.err(r["host"], r["where"] + ".mgs_nids", "%s differ from the MGS NIDs %s that %s gives on %s: "
                         "every target of file system %s must name the same MGS (active one first)"
                         % (_show_nodes(r["nodes"]), _show_nodes(f["nodes"]), f["where"], f["host"], fs))
        # The primary MGS entry names the MGS host, on a network the MGS host and this server have.
        for r in referenced:
            if not mgs or r["type"] == "mgs_mdt":
                continue
            primary = r["nodes"][0]
            owners = [self.owner_of(_nid_addr(n)) for n in primary]
            wrong = [(n, o) for n, o in zip(primary, owners)
                     if o and o not in mgs_hosts and _nid_addr(n) not in mgs_addrs]
            for n, o in wrong:
                self.err(r["host"], r["where"] + ".mgs_nids", "the primary MGS NID %s is an address of %s, which "
                         "serves no MGS (the MGS is on %s)" % (n, o, ", ".join(mgs_hosts)))
            if wrong:
                continue
            stray = self._stray_addresses(primary, mgs_addrs, mgs_hosts[0])
            if stray:
                self.err(r["host"], r["where"] + ".mgs_nids", "the primary MGS NID %s is no address of the MGS host "
                         "%s (%s), yet it lies in the cluster's network %s: a mistyped address?"
                         % (stray[0][0], mgs_hosts[0], ", ".join(sorted(self.host_ips(mgs_hosts[0]))) or "none known",
                            stray[0][1]))
                continue
            self._check_reach(r["host"], r["where"] + ".mgs_nids", primary, self.server_lnet.get(r["host"]),
                              "this server")
            for mh in mgs_hosts:
                nets = self.server_lnet.get(mh)
                if nets and any(self.owner_of(_nid_addr(n)) == mh for n in primary) \
                        and not any(_nid_net(n) in nets for n in primary if self.owner_of(_nid_addr(n)) == mh):
                    self.err(r["host"], r["where"] + ".mgs_nids", "the MGS host %s has no LNet network %s (its "
                             "networks: %s): the MGS cannot be reached at %s"
                             % (mh, "/".join(sorted(set(_nid_net(n) for n in primary))), ", ".join(sorted(nets)),
                                ",".join(primary)))

    def _stray_addresses(self, primary, mgs_addrs, mgs_host):
        """NIDs of the primary MGS entry whose address belongs to no host although it lies in the cluster's
        management or fabric network (an MGS on a separate storage network is left alone): [(nid, network)]."""
        if any(_nid_addr(n) in mgs_addrs for n in primary):
            return []
        networks = []
        for name in ("cluster_fabric_network_cidr", "cluster_mgmt_network_cidr"):
            value = self.read(mgs_host, name)
            try:
                networks.append(ipaddress.ip_network(u"%s" % value, strict=False))
            except (ValueError, TypeError):
                continue
        out = []
        for n in primary:
            addr = _nid_addr(n)
            if self.owner_of(addr) or not IPV4_RE.match(addr):
                continue
            try:
                ip = ipaddress.ip_address(u"%s" % addr)
            except ValueError:
                continue
            for net in networks:
                if ip in net:
                    out.append((n, str(net)))
                    break
        return out

    def _check_reach(self, host, label, primary, nets, who):
        if not nets:
            return
        if not any(_nid_net(n) in nets for n in primary):
            self.err(host, label, "no NID of the primary MGS (%s) is on an LNet network of %s (%s): it cannot reach "
                     "the MGS" % (",".join(primary), who, ", ".join(sorted(nets))))

    def servers_nodes(self, fs):
        """The MGS NIDs (nodes) the servers of a file system give, or None."""
        for r in self.targets:
            if r["fsname"] == fs and r["nodes"] and r["type"] in ("mdt", "ost"):
                return r["nodes"]
        for r in self.targets:
            if r["fsname"] == fs and r["nodes"]:
                return r["nodes"]
        return None

    def servers_of(self, fs):
        out = []
        for r in self.targets:
            if r["fsname"] == fs and r["host"] not in out:
                out.append(r["host"])
        for r in self.mgs_records():
            if r["host"] not in out:
                out.append(r["host"])
        return out

    def server_brw_mb(self):
        """The servers' obdfilter brw_size (MiB) from the MGS host's lustre_server_params, default 4; None when the
        inventory has no MGS (the servers are not ours to know)."""
        hosts = self.mgs_hosts()
        if not hosts:
            return None
        params = self.read(hosts[0], "lustre_server_params", "lustre_server")
        if params is None:
            return DEFAULT_BRW_SIZE_MB
        if not isinstance(params, dict):
            return None  # reported with lustre_server_params
        found = []
        for key, value in params.items():
            if isinstance(key, str) and BRW_PARAM_RE.match(key):
                v = _int_value(value)
                if v is None or isinstance(value, bool) or not 1 <= v <= MAX_BRW_SIZE_MB:
                    return None  # reported with lustre_server_params
                found.append(v)
        return min(found) if found else DEFAULT_BRW_SIZE_MB

    def check_server_params(self):
        mgs_hosts = self.mgs_hosts()
        mgs_params = self.read(mgs_hosts[0], "lustre_server_params", "lustre_server") if mgs_hosts else None
        for host in self.servers:
            name = "lustre_server_params"
            params = self.read(host, name, "lustre_server")
            if params is None:
                continue
            if not isinstance(params, dict):
                self.err(host, name, "must be a dict of lctl parameters (name: value, e.g. "
                         "{obdfilter.*.brw_size: 16}), got %s" % _shape(params))
                continue
            for key, value in params.items():
                why = param_name_problem(key)
                if why:
                    self.err(host, name, why)
                    continue
                why = param_value_problem(key, value)
                if why:
                    self.err(host, name, why)
                    continue
                if BRW_PARAM_RE.match(key):
                    v = _int_value(value)
                    if v is None or not 1 <= v <= MAX_BRW_SIZE_MB:
                        self.err(host, name, "%s: %s is not a bulk RPC size in MiB from 1 to %d" % (key, _show(value),
                                                                                                    MAX_BRW_SIZE_MB))
            self._check_params_absent(host, params)
            if params and mgs_hosts and host not in mgs_hosts and params != mgs_params:
                self.err(host, name, "is applied only on the host that serves the MGS (%s), whose "
                         "lustre_server_params differ: these would be ignored; set them for %s"
                         % (mgs_hosts[0], mgs_hosts[0]))

    def _check_params_absent(self, host, params):
        name = "lustre_server_params_absent"
        absent = self.read(host, name, "lustre_server")
        if not isinstance(absent, list):
            return  # None (unset) or reported by the argument-spec rules
        for key in absent:
            why = param_name_problem(key)
            if why:
                self.err(host, name, why)
            elif key in params:
                self.err(host, name, "%s is also in lustre_server_params: the role would set it and delete it in "
                         "the same run; keep it in one of the two" % key)

    # -- clients -------------------------------------------------------------------------------------
    def check_client(self, host):
        mounts = self._check_mounts(host)
        self._check_tunings(host, mounts)
        osts = self.fs_osts()
        dirs = self.read(host, "lustre_client_directories", "lustre_client")
        kinds_used = {}
        if isinstance(dirs, list):
            for i, d in enumerate(dirs):
                self._check_directory(host, i, d, mounts, osts, kinds_used)
        elif dirs is not None:
            self.err(host, "lustre_client_directories", "must be a list of {path, kind, ...}, got %s" % _shape(dirs))
        for kind, var in (("dataset", "lustre_client_dataset_layout"),
                          ("checkpoint", "lustre_client_checkpoint_layout")):
            layout = self.read(host, var, "lustre_client")
            if layout is None:
                continue
            candidates = kinds_used.get(kind)
            if not candidates:
                # No directory uses this layout yet: hold it to the largest file system this client mounts.
                mounted = sorted((osts[m["fsname"]], m["fsname"]) for m in mounts if m["fsname"] in osts)
                candidates = [mounted[-1]] if mounted else [None]
            reported = set()
            for cand in candidates:
                for msg in layout_problems(layout, cand):
                    if msg not in reported:
                        reported.add(msg)
                        self.err(host, var, msg)

    def _check_mounts(self, host):
        """Validate lustre_client_mounts; returns the sound mounts as dicts {fsname, path, nodes, pos}."""
        name = "lustre_client_mounts"
        mounts = self.read(host, name, "lustre_client")
        good = []
        if mounts is None:
            return good
        if not isinstance(mounts, list):
            self.err(host, name, "must be a list of {fsname, mgs_nids, path}, got %s" % _shape(mounts))
            return good
        paths = {}
        fsnames = {}
        nets = self.client_lnet.get(host) or set()
        served = sorted(set(r["fsname"] for r in self.targets if r["fsname"]))
        our_mgs = set()
        for r in self.mgs_records():
            our_mgs.add(r["host"])
        for i, m in enumerate(mounts):
            where = "%s[%d]" % (name, i)
            if not isinstance(m, dict):
                self.err(host, where, "must be a dict {fsname, mgs_nids, path}, got %s" % _shape(m))
                continue
            for key in m:
                if key not in MOUNT_KEYS:
                    self.err(host, where, "%s is not a mount option the role knows (fsname, mgs_nids, path, "
                             "options): it would be ignored" % _show(key))
            rec = {"pos": i, "fsname": None, "path": None, "nodes": None}
            fs = m.get("fsname")
            if fs is None:
                self.err(host, where, "has no fsname: the file system to mount (1-8 characters)")
            else:
                why = fsname_problem(fs)
                if why:
                    self.err(host, where + ".fsname", why)
                else:
                    rec["fsname"] = fs
                    if fs in fsnames:
                        self.err(host, where + ".fsname", "%s is already mounted by %s: mount each file system once"
                                 % (fs, fsnames[fs]))
                    else:
                        fsnames[fs] = where
            nids = m.get("mgs_nids")
            if nids is None:
                self.err(host, where, "has no mgs_nids: the NIDs of the MGS to mount from (e.g. ['10.0.0.1@o2ib'])")
            else:
                problems, nodes = parse_mgs_nids(nids, where + ".mgs_nids")
                for p in problems:
                    self.errors.append("%s: %s" % (host, p))
                rec["nodes"] = nodes
            path = m.get("path")
            if path is None:
                self.err(host, where, "has no path: the mount point (e.g. /mnt/lfs)")
            elif not isinstance(path, str) or not path.startswith("/"):
                self.err(host, where + ".path", "%s is not an absolute mount point (e.g. /mnt/lfs)"
                         % (_show(path) if not isinstance(path, (dict, list)) else _shape(path)))
            elif not PATH_RE.match(path):
                self.err(host, where + ".path", "'%s' is not a usable mount point (no spaces, quotes or shell "
                         "characters: it goes into /etc/fstab and a systemd unit)" % path)
            else:
                norm = posixpath.normpath(path)
                if norm in SYSTEM_DIRS:
                    self.err(host, where + ".path", "%s is a system directory: mount Lustre on its own directory "
                             "(e.g. /mnt/lfs or /lustre/<fsname>)" % path)
                elif norm in paths:
                    self.err(host, where + ".path", "%s is also the mount point of %s: each mount needs its own "
                             "directory" % (path, paths[norm]))
                else:
                    paths[norm] = where
                    rec["path"] = norm
            options = m.get("options")
            if options is not None and (not isinstance(options, str) or re.search(r"\s", options)):
                self.err(host, where + ".options", "%s is not a mount option list (comma-separated, no spaces: it "
                         "goes into /etc/fstab)" % (_show(options) if not isinstance(options, (dict, list))
                                                    else _shape(options)))
            if rec["fsname"] and rec["nodes"]:
                self._check_mount_against_servers(host, where, rec, served, our_mgs, nets)
            if rec["path"]:
                good.append(rec)
        opts = self.read(host, "lustre_client_mount_options")
        if isinstance(opts, str) and (re.search(r"\s", opts) or not opts):
            self.err(host, "lustre_client_mount_options", "'%s' is not a mount option list (comma-separated, no "
                     "spaces: it goes into /etc/fstab)" % opts)
        return good

    def _check_mount_against_servers(self, host, where, rec, served, our_mgs, nets):
        fs = rec["fsname"]
        nodes = rec["nodes"]
        primary = nodes[0]
        owners = set(self.owner_of(_nid_addr(n)) for n in primary) - set([None])
        self._check_reach(host, where + ".mgs_nids", primary, nets, "this client")
        if served and fs not in served:
            if owners & our_mgs or (self.servers_nodes(served[0]) and
                                    any(_same_nodes(nodes, self.servers_nodes(s)) for s in served)):
                self.err(host, where + ".fsname", "no server in the inventory serves file system %s (the servers "
                         "serve %s), yet its mgs_nids name this inventory's MGS: the mount would fail"
                         % (fs, ", ".join(served)))
            return
        if fs in served:
            expected = self.servers_nodes(fs)
            if expected and not _same_nodes(nodes, expected):
                if sorted(n for node in nodes for n in node) == sorted(n for node in expected for n in node):
                    self.err(host, where + ".mgs_nids", "%s group the NIDs of %s's MGS differently from its servers "
                             "%s: ',' joins the NIDs of one MGS node, a new list entry starts the failover MGS"
                             % (_show_nodes(nodes), fs, _show_nodes(expected)))
                else:
                    self.err(host, where + ".mgs_nids", "%s differ from the MGS NIDs of %s's servers %s: the client "
                             "would ask the wrong MGS (or miss the failover MGS)" % (_show_nodes(nodes), fs,
                                                                                     _show_nodes(expected)))
            elif not expected and our_mgs:
                if owners and not owners & our_mgs:
                    self.err(host, where + ".mgs_nids", "the primary MGS NID %s is an address of %s, which serves no "
                             "MGS (the MGS of %s is on %s)" % (",".join(primary), ", ".join(sorted(owners)), fs,
                                                               ", ".join(sorted(our_mgs))))
            if nets:
                for server in self.servers_of(fs):
                    snets = self.server_lnet.get(server)
                    if snets and not snets & nets:
                        self.err(host, "lustre_client_lnet_networks", "this client's LNet networks (%s) include none "
                                 "of the networks of %s (%s), a server of %s: the client cannot reach it"
                                 % (", ".join(sorted(nets)), server, ", ".join(sorted(snets)), fs))
                        break

    def _check_tunings(self, host, mounts):
        merged = {}
        origin = {}
        for name in ("lustre_client_tunings", "lustre_client_tunings_extra"):
            value = self.read(host, name, "lustre_client")
            if value is None:
                continue
            if not isinstance(value, dict):
                self.err(host, name, "must be a dict of lctl parameters (name: value, e.g. {osc.*.max_rpcs_in_flight: "
                         "32}), got %s" % _shape(value))
                continue
            for key, val in value.items():
                why = param_name_problem(key)
                if why:
                    self.err(host, name, why)
                    continue
                if _prefix(key) in SERVER_PARAM_PREFIXES:
                    self.err(host, name, "%s is a server parameter (%s): a client has no such device and the role's "
                             "lctl get_param would fail; set it with lustre_server_params on the MGS host"
                             % (key, _prefix(key)))
                    continue
                why = param_value_problem(key, val)
                if why:
                    self.err(host, name, why)
                    continue
                merged[key] = val
                origin[key] = name
        page = self.read(host, "lustre_client_page_size_kib", "lustre_client")
        if page is not None and (not is_int(page) or page not in PAGE_SIZES_KIB):
            self.err(host, "lustre_client_page_size_kib", "%s is not a kernel page size in KiB (4 on x86_64; 16 or 64 "
                     "on some aarch64 kernels)" % (_show(page) if not isinstance(page, (dict, list)) else _shape(page)))
            page = None
        brw = self.read(host, "lustre_client_server_brw_size_mb", "lustre_client")
        if brw is not None and (not is_int(brw) or not 1 <= brw <= MAX_BRW_SIZE_MB):
            self.err(host, "lustre_client_server_brw_size_mb", "%s is not the servers' brw_size in MiB (1 to %d)"
                     % (_show(brw) if not isinstance(brw, (dict, list)) else _shape(brw), MAX_BRW_SIZE_MB))
            brw = None
        # Only where this client mounts a file system of our servers (an appliance mounted beside it has its own).
        ours = set(r["fsname"] for r in self.targets if r["fsname"])
        servers_brw = self.server_brw_mb() if any(m["fsname"] in ours for m in mounts) else None
        if brw is not None and servers_brw is not None and brw > servers_brw:
            self.err(host, "lustre_client_server_brw_size_mb", "%d MiB is more than the servers' obdfilter.*.brw_size "
                     "of %d MiB (lustre_server_params on the MGS host; 4 when unset): the clients would ask for RPCs "
                     "the OSTs refuse" % (brw, servers_brw))
        nums = {}
        for key, val in merged.items():
            leaf = _leaf(key)
            if leaf in ("max_pages_per_rpc", "max_rpcs_in_flight", "max_dirty_mb", "max_read_ahead_mb",
                        "max_read_ahead_per_file_mb", "max_read_ahead_whole_mb", "checksums"):
                n = _int_value(val)
                if leaf == "max_pages_per_rpc" and n is None and isinstance(val, str) and page:
                    try:
                        n = parse_size(val) // (page * 1024)
                    except ValueError:
                        n = None
                if n is None or n < 0:
                    self.err(host, origin[key], "%s: %s is not a whole number" % (key, _show(val)))
                    continue
                nums[(_prefix(key), leaf)] = (n, key)
        rpc = nums.get(("osc", "max_pages_per_rpc"))
        if rpc:
            n, key = rpc
            if n < 1:
                self.err(host, origin[key], "%s: must be at least 1 page" % key)
            elif page and brw and n * page > brw * 1024:
                self.err(host, origin[key], "%s %d x %d KiB pages = %d KiB RPCs exceed the servers' brw_size of %d MiB "
                         "(lustre_client_server_brw_size_mb): raise obdfilter.*.brw_size on the servers first, or "
                         "lower max_pages_per_rpc" % (key, n, page, n * page, brw))
        for prefix in ("osc", "mdc"):
            rif = nums.get((prefix, "max_rpcs_in_flight"))
            if rif and not 1 <= rif[0] <= 256:
                self.err(host, origin[rif[1]], "%s: %d is outside Lustre's range 1-256" % (rif[1], rif[0]))
        rif = nums.get(("osc", "max_rpcs_in_flight"))
        dirty = nums.get(("osc", "max_dirty_mb"))
        if rpc and rif and dirty and page and 1 <= rif[0] <= 256 and rpc[0] >= 1:
            rpc_mb = rpc[0] * page / 1024.0
            need = int(4 * rpc_mb * rif[0])
            if dirty[0] < need:
                self.err(host, origin[dirty[1]], "%s: %d MiB is below 4 x RPC size (%g MiB) x max_rpcs_in_flight (%d) "
                         "= %d MiB: the RPC pipeline cannot be kept full (docs/lustre-striping.md)"
                         % (dirty[1], dirty[0], rpc_mb, rif[0], need))
        total = nums.get(("llite", "max_read_ahead_mb"))
        per_file = nums.get(("llite", "max_read_ahead_per_file_mb"))
        whole = nums.get(("llite", "max_read_ahead_whole_mb"))
        if total and per_file and per_file[0] > total[0]:
            self.err(host, origin[per_file[1]], "%s: %d MiB exceeds %s %d MiB (Lustre refuses a per-file read-ahead "
                     "above the total)" % (per_file[1], per_file[0], total[1], total[0]))
        if per_file and whole and whole[0] > per_file[0]:
            self.err(host, origin[whole[1]], "%s: %d MiB exceeds %s %d MiB (Lustre refuses it)"
                     % (whole[1], whole[0], per_file[1], per_file[0]))
        checks = nums.get(("osc", "checksums"))
        if checks and checks[0] not in (0, 1):
            self.err(host, origin[checks[1]], "%s: %d is not 0 or 1" % (checks[1], checks[0]))

    def _check_directory(self, host, i, d, mounts, osts, kinds_used):
        name = "lustre_client_directories[%d]" % i
        if not isinstance(d, dict):
            self.err(host, name, "must be a dict {path, kind, ...}, got %s" % _shape(d))
            return
        for key in d:
            if key not in DIRECTORY_KEYS:
                self.err(host, name, "%s is not a directory option the role knows (%s): it would be ignored"
                         % (_show(key), ", ".join(DIRECTORY_KEYS)))
        path = d.get("path")
        fs = None
        if path is None:
            self.err(host, name, "has no path: the directory to create on a Lustre mount")
        elif not isinstance(path, str) or not path.startswith("/") or not PATH_RE.match(path):
            self.err(host, name + ".path", "%s is not an absolute directory path (e.g. /mnt/lfs/datasets)"
                     % (_show(path) if not isinstance(path, (dict, list)) else _shape(path)))
        else:
            norm = posixpath.normpath(path)
            owner = None
            for m in mounts:
                if norm == m["path"] or norm.startswith(m["path"].rstrip("/") + "/"):
                    if owner is None or len(m["path"]) > len(owner["path"]):
                        owner = m
            if owner is None:
                if mounts:
                    self.err(host, name + ".path", "%s is not on a Lustre mount of this client (%s): the directory "
                             "would be made on the local disk and lfs setstripe would fail"
                             % (path, ", ".join(m["path"] for m in mounts)))
                else:
                    self.err(host, name + ".path", "%s cannot be on Lustre: this client mounts no Lustre file system "
                             "(lustre_client_mounts is empty)" % path)
            else:
                fs = owner["fsname"]
            dup = self._dir_paths.setdefault(host, {})
            if norm in dup:
                self.err(host, name + ".path", "%s is also lustre_client_directories[%d]: give each directory once "
                         "(two layouts would replace each other at every run)" % (path, dup[norm]))
            else:
                dup[norm] = i
        kind = d.get("kind", "plain")
        if kind not in DIRECTORY_KINDS:
            self.err(host, name + ".kind", "%s is not a directory kind (dataset, checkpoint, plain)"
                     % (_show(kind) if not isinstance(kind, (dict, list)) else _shape(kind)))
            kind = None
        mode = d.get("mode")
        if mode is not None:
            if is_int(mode):
                self.err(host, name + ".mode", "%d is a number: quote the mode ('%s') so that it is read as octal"
                         % (mode, "%04d" % mode if mode < 10000 else mode))
            elif not isinstance(mode, str) or not MODE_RE.match(mode):
                self.err(host, name + ".mode", "%s is not a file mode (e.g. '0755', '1777' or u=rwx,g=rx)"
                         % (_show(mode) if not isinstance(mode, (dict, list)) else _shape(mode)))
        cand = (osts[fs], fs) if fs in osts else None
        own = dict((k, d[k]) for k in LAYOUT_KEYS if k in d)
        if own:
            for msg in layout_problems(own, cand, directory=True):
                self.err(host, name, msg)
        elif kind in ("dataset", "checkpoint"):
            kinds_used.setdefault(kind, [])
            if cand not in kinds_used[kind]:
                kinds_used[kind].append(cand)

    def check_directories_across(self):
        """With lustre_client_directories_run_once (the default) one client creates the directories: two clients
        with different non-empty lists mean one list is silently never applied."""
        first = None
        for host in self.clients:
            once = self.read(host, "lustre_client_directories_run_once", "lustre_client")
            if once is False:
                continue
            dirs = self.read(host, "lustre_client_directories", "lustre_client")
            if not isinstance(dirs, list) or not dirs:
                continue
            if first is None:
                first = (host, dirs)
            elif dirs != first[1]:
                self.err(host, "lustre_client_directories", "differs from %s's list, but "
                         "lustre_client_directories_run_once is true: the role creates directories from one client "
                         "only, so one of the lists would never be applied (set it for the whole lustre_clients group)"
                         % first[0])


def _same_nodes(a, b):
    """Two mgs_nids lists name the same MGS nodes in the same order (NIDs of a node in any order)."""
    if a is None or b is None or len(a) != len(b):
        return False
    return all(sorted(x) == sorted(y) for x, y in zip(a, b))


def check(inv, opts):
    """Errors of this rule set: a list of "<host or inventory>: <variable>: <rule>" strings."""
    return _Check(inv, opts).run()
