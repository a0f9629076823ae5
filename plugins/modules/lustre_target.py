#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: lustre_target
short_description: Format Lustre targets (MGS, MDT, OST) safely, only on blank devices
version_added: 1.0.0
description:
  - Reads the identity of every device of O(targets) before anything is written. C(tunefs.lustre --dryrun <dev>)
    shows the Lustre target a device holds (type, fsname, index); where it finds no Lustre data,
    C(blkid -p -o export <dev>) probes the device itself (not the blkid cache) for any other signature.
  - Each device is then classified. B(The same target already there) is left untouched. B(Anything else) on it
    (another Lustre target, a file system, a partition table) fails the module, naming the device and its content.
    B(A blank device) is formatted with C(mkfs.lustre), and only when O(format_ok=true).
  - B(Nothing unreadable is blank.) A device is blank only when every probe answered cleanly that it holds nothing
    (C(tunefs.lustre) exit 19 with its "has not been formatted with mkfs.lustre" text and no other line; C(blkid -p)
    exit 2 with no output at all), AND its first and last MiB read back without error within a time limit (C(blkid)
    also exits 2, silently, when its read fails). Any other answer (an I/O or permission error, no answer in time,
    an unknown message) makes the device B(unreadable), and the module fails naming the device and the error, also
    with O(format_ok=true).
  - A device that looks blank but is in use is refused too, before any format. In use means holders in
    C(/sys/class/block/<dev>/holders) (device-mapper, md, LVM), the device or one of its partitions mounted
    (C(/proc/self/mountinfo), by device number) or active swap, or a partition with holders.
  - Two targets on one device are refused before any device is read. Devices are compared by device number after
    links are followed, so C(/dev/sdb) and its C(/dev/disk/by-id/...) link are the same device.
  - The module takes B(all the targets of the host in one call), because the safety rule is about the host
    as a whole. ALL devices are classified before ANY is written, and if one of them is foreign or missing,
    nothing is formatted at all. A module called once per target in a loop could format the first devices
    before it reached the foreign one.
  - C(--reformat) is never used. A device that already holds Lustre data is never formatted again, whatever
    O(format_ok) says.
  - After formatting, each device is read again with C(tunefs.lustre --dryrun). The module fails if the new
    identity is not the requested one.
  - With O(require_raid6=true), every OST device must be an active Linux md RAID-6 array, checked in C(/proc/mdstat)
    before any device is read or written.
  - The module formats only. Mounting (which starts the target and registers it with the MGS) is left to
    M(ansible.posix.mount), in the order MGS, MDTs, OSTs.
author:
  - ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.idempotent
attributes:
  check_mode:
    support: full
    details:
      - Reads and classifies every device, fails exactly where a real run would fail, and reports the
        C(mkfs.lustre) commands it would run ("would format"). It writes nothing.
  diff_mode:
    support: full
    details:
      - Shows what each device holds before the run and after it (or after it would run, in check mode).
  idempotent:
    support: full
options:
  targets:
    description:
      - Every Lustre target of this host. Devices are classified in list order and formatted in list order.
    type: list
    elements: dict
    required: true
    suboptions:
      device:
        description: Absolute path of the block device (or, in a test lab, a file).
        type: str
        required: true
      type:
        description: Target type. V(mgs_mdt) is a combined MGS and MDT0.
        type: str
        required: true
        choices: [mgs, mgs_mdt, mdt, ost]
      fsname:
        description: File system name, 1 to 8 characters. Required except for V(mgs).
        type: str
      index:
        description: Target index, unique per type in a file system. Required except for V(mgs).
        type: int
      mgs_nids:
        description:
          - MGS NIDs, one entry per MGS node (several NIDs of one node comma-separated). The first entry must
            be the active MGS. Required for V(mdt) and V(ost).
        type: list
        elements: str
      servicenodes:
        description: NIDs of every server that may serve the target (HA). Mutually exclusive with O(targets[].failnodes).
        type: list
        elements: str
      failnodes:
        description: Failover NIDs (the older way). Mutually exclusive with O(targets[].servicenodes).
        type: list
        elements: str
      backfstype:
        description: Backing file system.
        type: str
        choices: [ldiskfs, zfs]
        default: ldiskfs
      mkfs_options:
        description: Extra C(--mkfsoptions) for the backing file system.
        type: str
      params:
        description: Extra C(--param key=value) settings written at format time.
        type: list
        elements: str
  format_ok:
    description:
      - Allow C(mkfs.lustre) on blank devices. This is the one irreversible action, so it is off by default.
      - With V(false), a blank device makes the module fail and name the devices it would format. Nothing is
        written, in check mode or not.
      - A device that holds anything at all is never formatted, whatever this option says.
    type: bool
    default: false
  tunefs_lustre_path:
    description: Path of C(tunefs.lustre). By default it is looked up on E(PATH) and in the sbin directories.
    type: path
  mkfs_lustre_path:
    description: Path of C(mkfs.lustre). By default it is looked up on E(PATH) and in the sbin directories.
    type: path
  blkid_path:
    description: Path of C(blkid). By default it is looked up on E(PATH) and in the sbin directories.
    type: path
  require_raid6:
    description:
      - Require every target of type V(ost) to be an active Linux md RAID-6 array, for sites whose OSTs are software
        RAID. The device path is resolved first (symbolic links such as C(/dev/disk/by-id/md-uuid-...) or
        C(/dev/md/<name>) are followed), and the kernel device it names (C(md127)) must be listed in
        O(mdstat_path) as C(active) (read-only and auto-read-only count as active) with personality C(raid6).
      - The check runs before any device is read or written. If one OST device fails it, the module fails naming
        every such device and what C(/proc/mdstat) says about it, and nothing is formatted. Other target types are
        not checked.
    type: bool
    default: false
  mdstat_path:
    description: The md status file read for O(require_raid6). Change it only for tests.
    type: path
    default: /proc/mdstat
notes:
  - Needs root, because it reads raw devices and formats them.
  - C(tunefs.lustre --dryrun) and C(blkid -p) only read. Each is run at most once per device and run. The
    read-back after a format adds one more C(tunefs.lustre --dryrun) for each formatted device.
  - A device that both probes call empty is read (its first and last MiB, in a child process that is abandoned
    after 60 seconds) before it may be called blank. Devices that hold a target are not read this way.
  - Combined with O(format_ok=false), check mode is a safe way to see what a host's devices hold.
  - O(require_raid6) reads C(/proc/mdstat) once and runs no command.
seealso:
  - module: ansible.posix.mount
  - name: Lustre Operations Manual, Configuring a Lustre File System
    description: mkfs.lustre for the MGS, MDTs and OSTs, and tunefs.lustre.
    link: https://doc.lustre.org/lustre_manual.xhtml#configuringlustre
"""

EXAMPLES = r"""
- name: Format the blank target devices of this OSS (nothing is written if any device holds something else)
  clusterforge.gpu.lustre_target:
    targets:
      - device: /dev/mapper/ost0
        type: ost
        fsname: lfs
        index: 0
        mgs_nids: [10.0.0.1@o2ib]
        servicenodes: [10.0.0.21@o2ib, 10.0.0.22@o2ib]
      - device: /dev/mapper/ost1
        type: ost
        fsname: lfs
        index: 1
        mgs_nids: [10.0.0.1@o2ib]
        servicenodes: [10.0.0.21@o2ib, 10.0.0.22@o2ib]
    format_ok: true

- name: Format the OSTs of an OSS whose OSTs are md RAID-6 arrays (fails, formatting nothing, if one is not)
  clusterforge.gpu.lustre_target:
    targets:
      - {device: /dev/md/ost0, type: ost, fsname: lfs, index: 0, mgs_nids: [10.0.0.1@o2ib]}
      - {device: /dev/md/ost1, type: ost, fsname: lfs, index: 1, mgs_nids: [10.0.0.1@o2ib]}
    require_raid6: true
    format_ok: true

- name: Only look at what the devices hold (fails on a foreign device, never formats)
  clusterforge.gpu.lustre_target:
    targets:
      - {device: /dev/sdb, type: mgs_mdt, fsname: lfs, index: 0}
  check_mode: true
  register: devices
"""

RETURN = r"""
targets:
  description: One entry per target, in the order of O(targets). Returned on failure too.
  returned: always
  type: list
  elements: dict
  contains:
    device:
      description: The device.
      type: str
    svname:
      description: The name the target registers under (V(MGS), V(lfs-MDT0000), V(lfs-OST0001)).
      type: str
    type:
      description: The requested type.
      type: str
    state:
      description:
        - What the device held before the run. V(present) means the same target; V(blank) means nothing at all.
        - V(foreign) is another Lustre target or another signature. V(missing) means no such device.
        - V(unreadable) means a probe or the read-back did not answer cleanly (the detail has the error), and
          V(in_use) that it holds nothing but something holds, mounts or swaps on it.
      type: str
      sample: blank
    action:
      description: V(format) (done, or would be done in check mode), V(none), or V(refuse) (the reason the module failed).
      type: str
      sample: format
    detail:
      description: What was found, in words (the failure message repeats it for refused devices).
      type: str
      sample: holds ext4 (label scratch), not Lustre data (expected ost lfs-OST0002 of lfs)
    identity:
      description:
        - What the tools read, or null for a blank or missing device. For Lustre data this is the parsed
          C(tunefs.lustre) values (target, index, fsname, flags, types, params...). For another signature it
          is the C(blkid) properties (TYPE, LABEL, UUID...).
        - For a device formatted by this run, the values read back after C(mkfs.lustre) (null in check mode).
      type: dict
  sample:
    - {device: /dev/mapper/ost0, svname: lfs-OST0000, type: ost, state: blank, action: format, detail: ost lfs-OST0000 of lfs,
       identity: null}
cmd:
  description: The C(mkfs.lustre) commands that were run (or would run, in check mode).
  returned: always
  type: list
  elements: str
  sample: ["/usr/sbin/mkfs.lustre --backfstype=ldiskfs --fsname=lfs --ost --index=0 --mgsnode=10.0.0.1@o2ib /dev/mapper/ost0"]
msg:
  description: A summary ("would format ...", "formatted ...", or "all targets are present").
  returned: always
  type: str
"""

import errno
import os
import select
import signal
import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils.lustre import (
    READBACK_BYTES,
    TARGET_TYPES,
    blkid_says_nothing,
    check_targets,
    classify_device,
    device_usage,
    duplicate_devices,
    mkfs_args,
    parse_tunefs_dryrun,
    target_svname,
    tunefs_says_not_lustre,
)
from ansible_collections.clusterforge.gpu.plugins.module_utils.md import md_level_problem, parse_mdstat

REFUSED = ("foreign", "missing", "unreadable", "in_use")

# Seconds the read-back of a device's first and last MiB may take (two 1 MiB reads; a healthy disk answers in
# milliseconds, a failing one retries for minutes in the SCSI error handler).
DEVICE_READ_SECONDS = 60


def _read_ends(path, length):
    """Read the first and last ``length`` bytes of ``path``; raise OSError on any error or short read."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.lseek(fd, 0, os.SEEK_END)
        for offset in sorted(set([0, max(0, size - length)])):
            os.lseek(fd, offset, os.SEEK_SET)
            left = min(length, size - offset)
            while left > 0:
                chunk = os.read(fd, left)
                if not chunk:
                    raise OSError(errno.EIO, "short read at byte %d of %d" % (size - left, size))
                left -= len(chunk)
    finally:
        os.close(fd)


def device_read_error(path, seconds=DEVICE_READ_SECONDS, length=READBACK_BYTES):
    """Read ``path``'s first and last ``length`` bytes within ``seconds``: None when both read back, else the error
    text (``Input/output error``, ``Permission denied``, ``no answer in 60 s``...).

    The read runs in a child process with its standard streams on /dev/null: a read stuck in the kernel (D state)
    can then be left behind, killed, without holding the module's output open or stopping the run.
    """
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report on the pipe, never return into the module
        code = 1
        try:
            os.close(rfd)
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            try:
                _read_ends(path, length)
                message = b"ok"
            except (IOError, OSError) as e:
                message = ("error:" + (e.strerror or str(e))).encode("utf-8", "replace")
            os.write(wfd, message[:4096])
            code = 0
        finally:
            os._exit(code)
    os.close(wfd)
    deadline = time.time() + seconds
    data = b""
    timed_out = False
    try:
        while True:
            left = deadline - time.time()
            if left <= 0:
                timed_out = True
                os.kill(pid, signal.SIGKILL)
                return "no answer in %s s" % seconds
            ready, _w, _x = select.select([rfd], [], [], left)
            if not ready:
                continue
            chunk = os.read(rfd, 4096)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(rfd)
        try:
            # a child stuck in the kernel cannot die yet: do not wait for it (init reaps it)
            os.waitpid(pid, os.WNOHANG if timed_out else 0)
        except OSError:
            pass
    text = data.decode("utf-8", "replace")
    if text == "ok":
        return None
    return text[len("error:"):] if text.startswith("error:") else "the read gave no answer"


def read_device(module, tunefs, blkid, target, read_seconds=DEVICE_READ_SECONDS):
    """Classify one device (lustre.classify_device decides): tunefs.lustre --dryrun; when it found no Lustre data,
    blkid -p; when both said cleanly that the device holds nothing, the read-back of its first and last MiB and the
    check that nothing holds or mounts it. Nothing is written."""
    device = target["device"]
    if not os.path.exists(device):
        return classify_device(target, False)
    tu = tunefs.run(["--dryrun", device], check_rc=False)
    if tu[0] == 0 and parse_tunefs_dryrun(tu[1])["found"]:
        return classify_device(target, True, tunefs=tu)
    bl = blkid.run(["-p", "-o", "export", device], check_rc=False)
    if not (tunefs_says_not_lustre(*tu) and blkid_says_nothing(*bl)):
        return classify_device(target, True, tunefs=tu, blkid=bl)
    read_error = device_read_error(device, read_seconds)
    try:
        in_use = device_usage(device)
    except (IOError, OSError) as e:
        in_use = ["its use cannot be checked: %s" % to_native(e)]
    return classify_device(target, True, tunefs=tu, blkid=bl, read_error=read_error, in_use=in_use)


def raid6_problems(module, targets, mdstat_path):
    """``device (md name) problem`` for each OST device that is not an active md RAID-6 array in mdstat."""
    osts = [t["device"] for t in targets if t["type"] == "ost"]
    if not osts:
        return []
    try:
        with open(mdstat_path) as handle:
            arrays = parse_mdstat(handle.read())
        missing = ""
    except (IOError, OSError) as e:
        if os.path.exists(mdstat_path):
            module.fail_json(msg="cannot read %s: %s" % (mdstat_path, to_native(e)), changed=False, targets=[], cmd=[])
        arrays, missing = {}, " (there is no %s: the md driver is not loaded)" % mdstat_path
    problems = []
    for device in osts:
        if not os.path.exists(device):
            problems.append("%s does not exist" % device)
            continue
        name = os.path.basename(os.path.realpath(device))
        problem = md_level_problem(name, arrays, "raid6")
        if problem:
            problems.append("%s (%s) %s%s" % (device, name, problem, missing))
    return problems


def describe(entry):
    return {"state": entry["state"], "detail": entry["detail"]}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            targets=dict(type="list", elements="dict", required=True, options=dict(
                device=dict(type="str", required=True),
                type=dict(type="str", required=True, choices=list(TARGET_TYPES)),
                fsname=dict(type="str"),
                index=dict(type="int"),
                mgs_nids=dict(type="list", elements="str"),
                servicenodes=dict(type="list", elements="str"),
                failnodes=dict(type="list", elements="str"),
                backfstype=dict(type="str", choices=["ldiskfs", "zfs"], default="ldiskfs"),
                mkfs_options=dict(type="str"),
                params=dict(type="list", elements="str"),
            )),
            format_ok=dict(type="bool", default=False),
            tunefs_lustre_path=dict(type="path"),
            mkfs_lustre_path=dict(type="path"),
            blkid_path=dict(type="path"),
            require_raid6=dict(type="bool", default=False),
            mdstat_path=dict(type="path", default="/proc/mdstat"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    targets = p["targets"]

    # Bad input fails before any device is read.
    problems = check_targets(targets)
    if not problems:
        # /dev/sdb and /dev/disk/by-id/wwn-... are one disk: compared by device number, not by path
        problems = duplicate_devices(targets)
    if problems:
        module.fail_json(msg="invalid targets: %s" % "; ".join(problems), changed=False, targets=[], cmd=[])

    # OSTs that must be md RAID-6 arrays are checked before any device is read.
    if p["require_raid6"]:
        problems = raid6_problems(module, targets, p["mdstat_path"])
        if problems:
            module.fail_json(msg="require_raid6 (lustre_server_ost_require_raid6 in the lustre_server role): these OST "
                                 "devices are not active md RAID-6 arrays in %s, nothing was formatted: %s"
                                 % (p["mdstat_path"], "; ".join(problems)),
                             changed=False, targets=[], cmd=[])

    tunefs = ToolRunner(module, "tunefs.lustre", p["tunefs_lustre_path"], option="tunefs_lustre_path")
    blkid = ToolRunner(module, "blkid", p["blkid_path"], option="blkid_path")

    # 1. Read and classify EVERY device before anything is written.
    entries = []
    for t in targets:
        found = read_device(module, tunefs, blkid, t)
        entries.append({"device": t["device"], "svname": target_svname(t), "type": t["type"],
                        "state": found["state"], "action": "none", "detail": found["detail"],
                        "identity": found["identity"]})

    refused = [e for e in entries if e["state"] in REFUSED]
    for e in refused:
        e["action"] = "refuse"
    blank = [(t, e) for t, e in zip(targets, entries) if e["state"] == "blank"]

    # 2. One foreign, missing or unidentified device stops everything: nothing has been written.
    if refused:
        module.fail_json(
            msg="refusing to touch these devices, nothing was formatted: %s. Fix the target list, or wipe the "
                "device yourself if its content is really unwanted."
                % "; ".join("%s %s" % (e["device"], e["detail"]) for e in refused),
            changed=False, targets=entries, cmd=[])

    # 3. Blank devices are formatted only with format_ok.
    if blank and not p["format_ok"]:
        module.fail_json(
            msg="%s would be formatted with mkfs.lustre (%s). Formatting is irreversible: set format_ok=true "
                "(lustre_server_format_ok in the lustre_server role) for this run to allow it."
                % (", ".join(e["device"] for _t, e in blank), ", ".join(e["detail"] for _t, e in blank)),
            changed=False, targets=entries, cmd=[])

    before = dict((e["device"], describe(e)) for e in entries)
    cmds = []
    if blank:
        # Found only now: a host whose targets are all present never needs mkfs.lustre.
        mkfs = ToolRunner(module, "mkfs.lustre", p["mkfs_lustre_path"], option="mkfs_lustre_path",
                          required=not module.check_mode)
        mkfs_bin = mkfs.bin or "mkfs.lustre"
        for t, e in blank:
            args = mkfs_args(t)
            cmds.append(quote([mkfs_bin] + args))
            e["action"] = "format"
            if module.check_mode:
                continue
            mkfs.run(args, what="mkfs.lustre %s" % t["device"])
            again = read_device(module, tunefs, blkid, t)
            if again["state"] != "present":
                module.fail_json(msg="mkfs.lustre ran on %s but the device does not hold %s now: %s"
                                     % (t["device"], e["svname"], again["detail"]),
                                 changed=True, targets=entries, cmd=cmds)
            e["identity"] = again["identity"]

    formatted = [e for e in entries if e["action"] == "format"]
    if formatted:
        what = ", ".join("%s (%s)" % (e["device"], e["svname"]) for e in formatted)
        msg = ("would format " if module.check_mode else "formatted ") + what
    else:
        msg = "all %d targets are present" % len(entries)
    result = dict(changed=bool(formatted), targets=entries, cmd=cmds, msg=msg)
    if module._diff:
        # a present target's detail is its name (what tunefs.lustre shows once it has registered)
        after = dict((e["device"], {"state": "present", "detail": e["svname"]} if e["action"] == "format"
                      else describe(e)) for e in entries)
        result["diff"] = dict(before=before, after=after, before_header="target devices (read before any write)",
                              after_header="target devices")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
