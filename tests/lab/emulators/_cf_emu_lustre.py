# ClusterForge TEST EMULATOR support code for mkfs.lustre, tunefs.lustre, mount.lustre, lctl and lnetctl:
# not the real tools. Test-only; installed only into lab and molecule containers.
"""State shared by the Lustre server-tool emulators (mkfs.lustre, tunefs.lustre, mount.lustre, lctl, lnetctl).

Nothing here talks to a kernel. What the emulators keep, and where:

* A "device" is any file (``truncate -s 64M /srv/lustre-devs/ost0``). ``mkfs.lustre`` writes a small header at
  offset 0 (``CFEMU-LUSTRE-LDD1`` + JSON of the lustre_disk_data fields, padded to 4 KiB); ``tunefs.lustre`` and
  ``mount.lustre`` read it back. Anything else in the file (an ext4 superblock made by ``mkfs.ext4 -F``) is left
  to the real ``blkid``.
* Per-node state in ``$CLUSTERFORGE_EMU_STATE_DIR`` (default /var/lib/clusterforge-emu): ``lnet.json`` (LNet),
  ``lctl.json`` (obd devices, their parameters, the MGS ``params`` llog), ``mkfs.lustre.log`` (one line per
  format: tests count them).
* Cluster-wide state in ``$CLUSTERFORGE_EMU_LUSTRE_SHARED`` (default /srv/cf-lustre-shared, a volume mounted in
  every lab container at the same path): ``.cf-emu/registry.json`` (which MGS NIDs serve, which targets
  registered) and ``<fsname>/`` (the file system's data, bind-mounted onto client mount points).

Devices in ``lctl dl`` and their parameters live only while the mount point they belong to is mounted
(read from /proc/self/mountinfo), like the real obd devices.
"""

import fcntl
import hashlib
import json
import os
import re
import socket
import struct
import sys
import uuid

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
# The hang switch, re-exported: the Lustre tools call emu.hang_if_asked.
from _cf_emu_identity import hang_if_asked  # noqa: E402,F401  pylint: disable=unused-import

MAGIC = b"CFEMU-LUSTRE-LDD1\n"
HEADER_SIZE = 4096
VERSION = "2.15.5"

F_MDT, F_OST, F_MGS = 0x1, 0x2, 0x4
F_NEED_INDEX, F_VIRGIN, F_UPDATE, F_WRITECONF, F_NO_PRIMNODE = 0x10, 0x20, 0x40, 0x100, 0x1000

EPERM, ENOENT, EIO, ENODEV, EEXIST, EINVAL, EADDRINUSE = 1, 2, 5, 19, 17, 22, 98


def state_dir():
    return os.environ.get("CLUSTERFORGE_EMU_STATE_DIR", "/var/lib/clusterforge-emu")


def shared_dir():
    return os.environ.get("CLUSTERFORGE_EMU_LUSTRE_SHARED", "/srv/cf-lustre-shared")


def _load(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def _save(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


class Locked:
    """``with Locked(path, default) as data:`` read-modify-write a JSON file under an exclusive lock."""

    def __init__(self, path, default):
        self.path, self.default = path, default

    def __enter__(self):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self.lock = open(self.path + ".lock", "a")
        fcntl.flock(self.lock, fcntl.LOCK_EX)
        self.data = _load(self.path, self.default)
        return self.data

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            _save(self.path, self.data)
        fcntl.flock(self.lock, fcntl.LOCK_UN)
        self.lock.close()
        return False


def lnet_path():
    return os.path.join(state_dir(), "lnet.json")


def lctl_path():
    return os.path.join(state_dir(), "lctl.json")


def registry_path():
    return os.path.join(shared_dir(), ".cf-emu", "registry.json")


def load_lnet():
    return _load(lnet_path(), {"configured": False, "nets": []})


def load_lctl():
    return _load(lctl_path(), {"devices": [], "params": {}, "llog_params": [], "llog_next": 2})


def err(prog, msg, rc):
    sys.stderr.write("%s: %s\n" % (prog, msg) if prog else msg + "\n")
    return rc


# ------------------------------------------------------------------------------------------------ network

def net_name(net):
    """``tcp0`` -> ``tcp``, ``o2ib0`` -> ``o2ib``, ``tcp1`` stays: what libcfs_net2str prints."""
    m = re.match(r"^([a-z]+?)(\d*)$", net or "")
    if not m:
        return net
    return m.group(1) if m.group(2) in ("", "0") else net


def iface_exists(name):
    return os.path.isdir(os.path.join("/sys/class/net", name))


def iface_ipv4(name):
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            raw = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))  # SIOCGIFADDR
        finally:
            s.close()
        return socket.inet_ntoa(raw[20:24])
    except OSError:
        return None


def local_nids(lnet=None):
    lnet = lnet if lnet is not None else load_lnet()
    nids = []
    if not lnet.get("configured"):
        return nids
    for net in lnet.get("nets", []):
        for ifname in net.get("interfaces", []):
            ip = iface_ipv4(ifname)
            if ip:
                nids.append("%s@%s" % (ip, net["net"]))
    return nids


def canon_nid(nid):
    """``10.0.0.1@tcp0`` -> ``10.0.0.1@tcp``."""
    if "@" not in nid:
        return nid
    addr, net = nid.rsplit("@", 1)
    return "%s@%s" % (addr, net_name(net))


# ------------------------------------------------------------------------------------------------ mounts

def dry_mounts_path():
    return os.path.join(state_dir(), "dry-mounts.json")


def dry_mount():
    """Unit tests set CLUSTERFORGE_EMU_LUSTRE_DRY_MOUNT=1: mounts are recorded in a file instead of made."""
    return os.environ.get("CLUSTERFORGE_EMU_LUSTRE_DRY_MOUNT") == "1"


def mounted_points():
    points = set(_load(dry_mounts_path(), [])) if dry_mount() else set()
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if len(fields) > 4:
                    points.add(fields[4].replace("\\040", " "))
    except OSError:
        pass
    return points


def live(entry, points=None):
    points = mounted_points() if points is None else points
    return entry.get("mount") is None or entry.get("mount") in points


# ------------------------------------------------------------------------------------------------ unreadable devices

def unreadable_path():
    return os.path.join(state_dir(), "unreadable-devices")


def unreadable(dev):
    """True when ``dev`` (or the file it links to) is listed, one path a line, in
    ``$CLUSTERFORGE_EMU_STATE_DIR/unreadable-devices``: a disk that answers every read with EIO. The emulators'
    own reads and writes of it (read_ldd, write_ldd: tunefs.lustre, mkfs.lustre, mount.lustre) and the blkid
    emulator then fail as the real tools fail on such a disk. Reads the emulators do not make (the module's own
    read-back of a lab file) still succeed."""
    try:
        with open(unreadable_path()) as f:
            listed = set(line.strip() for line in f if line.strip())
    except OSError:
        return False
    return bool(listed) and (dev in listed or os.path.realpath(dev) in set(os.path.realpath(p) for p in listed))


def check_readable(dev):
    if unreadable(dev):
        raise OSError(EIO, os.strerror(EIO), dev)


# ------------------------------------------------------------------------------------------------ device header

def read_ldd(dev):
    """The emulated lustre_disk_data of ``dev`` (dict), None when it holds none. Raises OSError if unreadable."""
    check_readable(dev)
    with open(dev, "rb") as f:
        head = f.read(HEADER_SIZE)
    if not head.startswith(MAGIC):
        return None
    body = head[len(MAGIC):].split(b"\n", 1)[0]
    try:
        return json.loads(body.decode())
    except ValueError:
        return None


def write_ldd(dev, ldd):
    body = MAGIC + json.dumps(ldd, sort_keys=True).encode() + b"\n"
    body = body.ljust(HEADER_SIZE, b"\0")
    check_readable(dev)
    with open(dev, "r+b") as f:
        f.seek(0)
        f.write(body)


def server_make_name(flags, index, fsname):
    if flags & (F_MDT | F_OST):
        if index is None:
            return "%s-%s" % (fsname[:8], "MDTffff" if flags & F_MDT else "OSTffff")
        return "%s%s%s%04x" % (fsname[:8], ":" if flags & F_VIRGIN else "-", "MDT" if flags & F_MDT else "OST", index)
    return "MGS"


def flag_words(flags):
    words = [("MDT ", F_MDT), ("OST ", F_OST), ("MGS ", F_MGS), ("needs_index ", F_NEED_INDEX),
             ("first_time ", F_VIRGIN), ("update ", F_UPDATE), ("writeconf ", F_WRITECONF),
             ("no_primnode ", F_NO_PRIMNODE)]
    return "".join(w for w, bit in words if flags & bit)


def print_ldd(title, ldd, out=sys.stdout):
    """Same lines as print_ldd() of lustre/utils/mkfs_lustre.c."""
    out.write("\n   %s:\n" % title)
    out.write("Target:     %s\n" % ldd["svname"])
    out.write("Index:      %s\n" % ("unassigned" if ldd.get("index") is None else ldd["index"]))
    out.write("Lustre FS:  %s\n" % ldd["fsname"])
    out.write("Mount type: %s\n" % ldd.get("mount_type", "ldiskfs"))
    out.write("Flags:      %#x\n" % ldd["flags"])
    out.write("              (%s)\n" % flag_words(ldd["flags"]))
    out.write("Persistent mount opts: %s\n" % ldd.get("mount_opts", ""))
    out.write("Parameters:%s\n" % "".join(" " + p for p in ldd.get("params", [])))
    out.write("\n")


def new_uuid():
    return str(uuid.uuid4())


def superblock_suffix(mountpoint):
    return "ffff" + hashlib.sha1(mountpoint.encode()).hexdigest()[:12]


def fmt_dl(index, dev):
    return "%3d %s %s %s %s %d" % (index, "UP", dev["type"], dev["name"], dev["uuid"], dev.get("refcount", 3))


# ------------------------------------------------------------------------------------------------ parameters

def param_match(pattern, path):
    """lctl-style match: dotted (or slashed) components, each a glob; same number of components."""
    import fnmatch
    pat = pattern.replace("/", ".").split(".")
    have = path.split(".")
    return len(pat) == len(have) and all(fnmatch.fnmatchcase(h, p) for h, p in zip(have, pat))


def live_params(state, points=None):
    points = mounted_points() if points is None else points
    return {path: p["value"] for path, p in state.get("params", {}).items() if live(p, points)}


def apply_persistent(state, records, points=None):
    """Apply the MGS ``params`` llog records (set_param -P) to the matching live parameters of this node."""
    points = mounted_points() if points is None else points
    for rec in records:
        for path, p in state.get("params", {}).items():
            if live(p, points) and param_match(rec["parameter"], path):
                p["value"] = str(rec["value"])
