#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: converged_state
short_description: Fingerprint a node's managed state and compare it with the record of its last complete run
description:
  - Reads, in one module call, a fingerprint of what ClusterForge's roles manage on a node, and compares it with the
    record written at the end of the node's last complete, successful C(site.yml) run. C(site.yml) uses it to skip
    the role plays on GPU nodes where neither the inputs nor the state changed (docs/performance.md).
  - "The fingerprint has these parts: C(files): every file, link and directory under O(file_roots) (type, mode,
    owner, group, SHA-256 of the content or the link target); C(packages): the package database (name, version,
    status); C(units): the systemd units that are loaded and not inactive (active and sub state) and the enablement
    of every unit file; C(kernel): the kernel release, C(/proc/cmdline) and the loaded kernel modules; C(sysctl):
    the live value of every key set in C(/etc/sysctl.conf) and C(/etc/sysctl.d); C(mounts): every mount outside
    C(/proc), C(/sys), C(/dev) and C(/run); C(paths): the paths of O(stat_paths); and one part per entry of
    O(commands), the hardware state read back from the tools (GPU settings, ACS control bits, HCA ports, LNet,
    Lustre tunings)."
  - A difference in any part, a different O(inputs_digest), or no record makes RV(converged) false, and
    RV(differences) names what differs (file paths, packages, units, keys, commands).
  - With O(state=present) it writes the record of the current fingerprint; with O(state=absent) it removes it. The
    record is ClusterForge's own bookkeeping under C(/var/lib/clusterforge), not configuration.
version_added: "1.0.0"
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
attributes:
  check_mode:
    support: full
    details:
      - With O(state=present) or O(state=absent) it reports what it would write or remove and writes nothing.
  diff_mode:
    support: full
    details:
      - The digest of each part before and after.
options:
  state:
    description:
      - V(query) compares and changes nothing; V(present) writes the record of the current fingerprint;
        V(absent) removes the record.
    type: str
    choices: [query, present, absent]
    default: query
  path:
    description: Where the record is kept on the node.
    type: path
    default: /var/lib/clusterforge/converged.json
  inputs_digest:
    description:
      - The digest of the run's inputs, made on the controller (the C(clusterforge.gpu.converged_inputs) lookup).
      - Required unless O(state=absent).
    type: str
  file_roots:
    description:
      - The directory trees whose files are part of the fingerprint (a file is taken as itself). Other file systems
        are not entered.
    type: list
    elements: path
    default: [/etc, /usr/local/sbin, /usr/libexec/clusterforge]
  exclude:
    description: Paths left out of the C(files) part (exact paths, or a directory and everything under it).
    type: list
    elements: path
    default: [/etc/mtab, /etc/ld.so.cache]
  commands:
    description:
      - Hardware and file system state read back from tools. A tool that is not installed is recorded as absent
        (a node without that hardware); a tool that fails is recorded with its exit status.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The part's name in RV(differences).
        type: str
        required: true
      argv:
        description: The command, as a list (never a shell string).
        type: list
        elements: str
        required: true
      keep:
        description: A regular expression; only the output lines that match are part of the fingerprint.
        type: str
  stat_paths:
    description:
      - Paths whose own type, mode, owner and group are a part of the fingerprint (the C(paths) part), without
        their content. For directories whose content changes with work, such as a daemon's spool and log directories.
    type: list
    elements: path
    default: []
  lctl_params_unit:
    description:
      - A systemd unit whose C(ExecStart=lctl set_param name=value) lines name Lustre parameters; their live values
        (C(lctl get_param)) are a part of the fingerprint, when the unit and C(lctl) exist.
    type: path
notes:
  - The fingerprint covers what the collection's roles write and start. A change the roles do not manage (a file
    under C(/opt), a job's files) does not count as drift.
seealso:
  - module: clusterforge.gpu.nvidia_smi
  - module: clusterforge.gpu.pcie_acs
"""

EXAMPLES = r"""
- name: Compare the node with its converged record
  clusterforge.gpu.converged_state:
    inputs_digest: "{{ cf_converged_inputs }}"
    commands:
      - {name: gpu, argv: [nvidia-smi, "--query-gpu=index,persistence_mode,power.limit", "--format=csv,noheader"]}
  register: __cf_converged

- name: Record the state a complete run left
  clusterforge.gpu.converged_state:
    state: present
    inputs_digest: "{{ cf_converged_inputs }}"
"""

RETURN = r"""
converged:
  description: Whether a record exists and matches the inputs digest and every part of the fingerprint.
  returned: always
  type: bool
differences:
  description: What differs from the record (at most 20 entries, then a count).
  returned: always
  type: list
  elements: str
  sample: ["files: /etc/nccl.conf changed", "command gpu: output changed"]
parts:
  description:
    - The SHA-256 digest of each part of the current fingerprint.
    - Empty when the node was not read, that is with O(state=absent), and with O(state=query) when there is no
      record of this version to compare with.
  returned: always
  type: dict
  sample: {"files": "5f1c...", "packages": "9a0e...", "command gpu": "77b2..."}
record_exists:
  description: Whether a record was found at O(path).
  returned: always
  type: bool
"""

import grp
import hashlib
import json
import os
import pwd
import re
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner

RECORD_VERSION = 1
# What the roles write on a GPU node (tests/unit/test_converged_coverage.py checks every writing task): /etc, the
# boot programs in /usr/local/sbin, and the health check in /usr/libexec/clusterforge. Not all of /usr/local, which
# can hold a CUDA toolkit of several GB.
DEFAULT_FILE_ROOTS = ["/etc", "/usr/local/sbin", "/usr/libexec/clusterforge"]
MAX_DIFFERENCES = 20
PSEUDO_MOUNTS = ("/proc", "/sys", "/dev", "/run")
LCTL_SET_RE = re.compile(r"^ExecStart=\S*lctl\s+set_param\s+(.*)$")


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _owner(uid, gid):
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    try:
        group = grp.getgrgid(gid).gr_name
    except KeyError:
        group = str(gid)
    return user, group


def _excluded(path, exclude):
    return any(path == e or path.startswith(e.rstrip("/") + "/") for e in exclude)


def _lstat(path):
    try:
        return os.lstat(path)
    except OSError:
        return None   # removed while the tree was read, or never there


def _describe(path, st, content=True):
    """"type mode owner group", then a link's target or (with content) a regular file's SHA-256."""
    kind = "d" if stat.S_ISDIR(st.st_mode) else ("l" if stat.S_ISLNK(st.st_mode) else
                                                 ("f" if stat.S_ISREG(st.st_mode) else "s"))
    text = "%s %o %s %s" % ((kind, stat.S_IMODE(st.st_mode)) + _owner(st.st_uid, st.st_gid))
    try:
        if kind == "l":
            text += " -> " + os.readlink(path)
        elif kind == "f" and content:
            digest = hashlib.sha256()
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            text += " " + digest.hexdigest()
    except (IOError, OSError):
        text += " unreadable"
    return text


def read_files(roots, exclude):
    """{path: description} for every entry under the roots (a file root is taken as itself), on their own file
    systems; a socket, fifo or device counts by its existence and mode."""
    out = {}
    for root in roots:
        st = _lstat(root)
        if st is None or _excluded(root, exclude):
            continue
        if not stat.S_ISDIR(st.st_mode):
            out[root] = _describe(root, st)
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            keep = []
            for name in sorted(dirnames) + sorted(filenames):
                full = os.path.join(dirpath, name)
                entry = None if _excluded(full, exclude) else _lstat(full)
                if entry is None:
                    continue
                if stat.S_ISDIR(entry.st_mode):
                    if entry.st_dev != st.st_dev:
                        continue   # another file system mounted here
                    keep.append(name)
                out[full] = _describe(full, entry)
            dirnames[:] = keep   # a link to a directory is recorded as a link, not entered
    return out


def read_paths(paths):
    """{path: description without content} of each path itself (not what a directory holds), or "absent"."""
    out = {}
    for path in paths:
        st = _lstat(path)
        out[path] = "absent" if st is None else _describe(path, st, content=False)
    return out


def parse_dpkg_status(text):
    """{package[:arch]: "version status"} from /var/lib/dpkg/status."""
    out = {}
    for stanza in text.split("\n\n"):
        fields = {}
        for line in stanza.splitlines():
            if line and not line[0].isspace() and ":" in line:
                key, value = line.split(":", 1)
                fields[key] = value.strip()
        if "Package" in fields:
            name = fields["Package"]
            if fields.get("Architecture") not in (None, "all"):
                name += ":" + fields["Architecture"]
            out[name] = "%s %s" % (fields.get("Version", ""), fields.get("Status", ""))
    return out


def read_packages(module):
    status = "/var/lib/dpkg/status"
    if os.path.exists(status):
        with open(status, "rb") as handle:
            return parse_dpkg_status(handle.read().decode("utf-8", "replace"))
    rpm = ToolRunner(module, "rpm", required=False)
    if rpm.available:
        rc, out, err = rpm.run(["-qa", "--qf", "%{NAME}.%{ARCH} %{EPOCHNUM}:%{VERSION}-%{RELEASE}\\n"], what="rpm -qa")
        return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)
    return {}


def parse_list_units(text):
    """{unit: "active/sub"} for loaded units that are not inactive (``systemctl list-units --plain --no-legend``)."""
    out = {}
    for line in text.splitlines():
        fields = line.split(None, 4)
        if len(fields) < 4 or fields[1] != "loaded" or fields[2] == "inactive":
            continue
        # Transient units (systemd-run, sessions) come and go with commands and logins, not with configuration.
        if fields[0].startswith(("run-", "session-", "user@", "user-runtime-dir@")):
            continue
        out[fields[0]] = "%s/%s" % (fields[2], fields[3])
    return out


def parse_list_unit_files(text):
    """{unit file: enablement} (``systemctl list-unit-files --no-legend``); transient and generated are left out."""
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1] not in ("transient", "generated"):
            out[fields[0]] = fields[1]
    return out


def read_units(module):
    systemctl = ToolRunner(module, "systemctl", required=False)
    if not systemctl.available:
        return {}
    out = {}
    rc, text, err = systemctl.run(["list-units", "--all", "--plain", "--no-legend", "--no-pager",
                                   "--type=service,socket,timer,path"], what="systemctl list-units")
    for unit, value in parse_list_units(text).items():
        out["state " + unit] = value
    rc, text, err = systemctl.run(["list-unit-files", "--no-legend", "--no-pager"], what="systemctl list-unit-files")
    for unit, value in parse_list_unit_files(text).items():
        out["enabled " + unit] = value
    return out


def _read(path, default=""):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except (IOError, OSError):
        return default


def read_kernel():
    modules = sorted(line.split()[0] for line in _read("/proc/modules").splitlines() if line.strip())
    return {"release": os.uname()[2], "cmdline": _read("/proc/cmdline").strip(), "modules": " ".join(modules)}


def sysctl_keys(paths):
    keys = set()
    for path in paths:
        for line in _read(path).splitlines():
            line = line.strip()
            if not line or line[0] in "#;" or "=" not in line:
                continue
            keys.add(line.split("=", 1)[0].strip().lstrip("-"))
    return sorted(keys)


def read_sysctl():
    paths = ["/etc/sysctl.conf"]
    if os.path.isdir("/etc/sysctl.d"):
        paths += [os.path.join("/etc/sysctl.d", n) for n in sorted(os.listdir("/etc/sysctl.d")) if n.endswith(".conf")]
    out = {}
    for key in sysctl_keys(paths):
        value = _read(os.path.join("/proc/sys", key.replace(".", "/")), None)
        out[key] = " ".join(value.split()) if value is not None else "absent"
    return out


def parse_mounts(text):
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        mountpoint = fields[1].replace("\\040", " ")
        if any(mountpoint == p or mountpoint.startswith(p + "/") for p in PSEUDO_MOUNTS):
            continue
        out[mountpoint] = "%s %s %s" % (fields[0], fields[2], fields[3])
    return out


def run_probe(module, argv, keep):
    """The digest of a tool's output (the lines that match keep) and its exit status, or "absent"."""
    if os.path.isabs(argv[0]) and not os.path.exists(argv[0]):
        return "absent"
    tool = ToolRunner(module, os.path.basename(argv[0]), argv[0] if os.path.isabs(argv[0]) else None, required=False)
    if not tool.available:
        return "absent"
    rc, out, err = tool.run(list(argv[1:]), check_rc=False)
    lines = out.splitlines()
    if keep:
        pattern = re.compile(keep)
        lines = [line for line in lines if pattern.search(line)]
    return "rc=%d %s" % (rc, _sha256("\n".join(lines).encode("utf-8")))


def lctl_params(unit_text):
    names = []
    for line in unit_text.splitlines():
        match = LCTL_SET_RE.match(line.strip())
        if match:
            names += [arg.split("=", 1)[0] for arg in match.group(1).split() if "=" in arg]
    return names


def fingerprint(module):
    p = module.params
    parts = {
        "files": read_files(p["file_roots"], [p["path"]] + p["exclude"]),
        "packages": read_packages(module),
        "units": read_units(module),
        "kernel": read_kernel(),
        "sysctl": read_sysctl(),
        "mounts": parse_mounts(_read("/proc/mounts")),
    }
    if p["stat_paths"]:
        parts["paths"] = read_paths(p["stat_paths"])
    for probe in p["commands"]:
        parts["command " + probe["name"]] = {"output": run_probe(module, probe["argv"], probe.get("keep"))}
    if p["lctl_params_unit"] and os.path.exists(p["lctl_params_unit"]):
        names = lctl_params(_read(p["lctl_params_unit"]))
        if names:
            parts["lustre tunings"] = {"output": run_probe(module, ["lctl", "get_param"] + names, None)}
    return parts


def digest(part):
    return _sha256(json.dumps(part, sort_keys=True).encode("utf-8"))


def compare(record, inputs_digest, parts):
    """The differences between a record and the current fingerprint, most specific first."""
    if record is None:
        return ["no record of a complete run"]
    diffs = []
    if record.get("version") != RECORD_VERSION:
        return ["record version %s, not %s" % (record.get("version"), RECORD_VERSION)]
    if record.get("inputs_digest") != inputs_digest:
        diffs.append("inputs: the collection, inventory, extra variables or facts changed")
    old_parts = record.get("parts", {})
    for name in sorted(set(parts) | set(old_parts)):
        old, new = old_parts.get(name), parts.get(name)
        if old == new:
            continue
        if old is None or new is None:
            diffs.append("%s: %s" % (name, "new" if old is None else "gone"))
            continue
        for key in sorted(set(old) | set(new)):
            if old.get(key) != new.get(key):
                what = "added" if key not in old else ("removed" if key not in new else "changed")
                diffs.append("%s: %s %s" % (name, key, what))
    return diffs


def load_record(path):
    try:
        with open(path) as handle:
            return json.load(handle)
    except (IOError, OSError, ValueError):
        return None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["query", "present", "absent"], default="query"),
            path=dict(type="path", default="/var/lib/clusterforge/converged.json"),
            inputs_digest=dict(type="str"),
            file_roots=dict(type="list", elements="path", default=list(DEFAULT_FILE_ROOTS)),
            exclude=dict(type="list", elements="path", default=["/etc/mtab", "/etc/ld.so.cache"]),
            commands=dict(type="list", elements="dict", default=[], options=dict(
                name=dict(type="str", required=True),
                argv=dict(type="list", elements="str", required=True),
                keep=dict(type="str"),
            )),
            lctl_params_unit=dict(type="path"),
            stat_paths=dict(type="list", elements="path", default=[]),
        ),
        required_if=[("state", "query", ["inputs_digest"]), ("state", "present", ["inputs_digest"])],
        supports_check_mode=True,
    )
    p = module.params
    for probe in p["commands"]:
        if not probe["argv"]:
            module.fail_json(msg="commands: %s has an empty argv" % probe["name"])
        if probe.get("keep"):
            try:
                re.compile(probe["keep"])
            except re.error as exc:
                module.fail_json(msg="commands: %s: keep is not a valid regular expression: %s" % (probe["name"], exc))
    record = load_record(p["path"])
    result = dict(changed=False, record_exists=record is not None)

    if p["state"] == "absent":
        result.update(converged=False, differences=["record removed"] if record is not None else [], parts={})
        if os.path.lexists(p["path"]):
            result["changed"] = True
            if not module.check_mode:
                os.remove(p["path"])
        module.exit_json(**result)

    # A query with no usable record cannot find the node converged: the node is not read (a first run, or a record of
    # another version). state=present reads it, to write the record.
    if p["state"] == "query" and (record is None or record.get("version") != RECORD_VERSION):
        result.update(converged=False, differences=compare(record, p["inputs_digest"], {}), parts={})
        module.exit_json(**result)

    parts = fingerprint(module)
    diffs = compare(record, p["inputs_digest"], parts)
    summary = dict((name, digest(part)) for name, part in parts.items())
    shown = diffs[:MAX_DIFFERENCES] + (["and %d more" % (len(diffs) - MAX_DIFFERENCES)] if len(diffs) > MAX_DIFFERENCES else [])
    result.update(converged=not diffs, differences=shown, parts=summary)

    if p["state"] == "present" and diffs:
        result["changed"] = True
        before = dict((name, digest(part)) for name, part in (record or {}).get("parts", {}).items())
        result["diff"] = dict(before=json.dumps(before, sort_keys=True, indent=1) + "\n",
                              after=json.dumps(summary, sort_keys=True, indent=1) + "\n",
                              before_header=p["path"], after_header=p["path"])
        if not module.check_mode:
            directory = os.path.dirname(p["path"])
            if not os.path.isdir(directory):
                os.makedirs(directory, 0o755)
            tmp = p["path"] + ".tmp"
            with open(tmp, "w") as handle:
                json.dump(dict(version=RECORD_VERSION, inputs_digest=p["inputs_digest"], parts=parts), handle,
                          sort_keys=True)
            os.chmod(tmp, 0o600)
            module.atomic_move(tmp, p["path"])
            os.chmod(p["path"], 0o600)   # file digests of the node (of /etc/shadow too): root only
        result["converged"] = True   # recorded now; differences says what the old record did not match
    module.exit_json(**result)


if __name__ == "__main__":
    main()
