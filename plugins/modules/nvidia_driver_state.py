#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nvidia_driver_state
short_description: Compare the loaded NVIDIA kernel module with the installed driver libraries and record the result
version_added: "1.0.0"
description:
  - After a driver upgrade the libraries are new and the loaded kernel module is the old one until a reboot;
    C(nvidia-smi) then fails with C(Driver/library version mismatch). This module reads
    both versions and returns whether the node needs a reboot, and why, in one run.
  - It reads the version of the loaded kernel module from C(/proc/driver/nvidia/version), the installed version of
    O(version_package) with one C(dpkg-query) call (the collection's one dpkg reader, shared with
    M(clusterforge.gpu.package_check)) or, where C(dpkg-query) does not exist, with C(rpm -q), asks
    C(nvidia-smi --query-gpu=driver_version) whether it reports a driver/library mismatch, and looks for
    C(/sys/module/nouveau). These reads run in check mode too; they never change anything.
  - The reasons for a reboot, in this order, are RV(kernel_version) differing from RV(userspace_version) (both
    known), the NVIDIA kernel module not loaded at all (a first install; only with O(kernel_modules_managed=true)
    and not in check mode, where a check run may come before the install), C(nvidia-smi) reporting the mismatch,
    and C(nouveau) loaded (only with O(check_nouveau=true)).
  - With O(fact_file) it records the result as a local fact (JSON, for C(ansible_local) on later runs), rewriting
    the file only when its content differs.
  - With O(expected_version) it fails, outside check mode and after recording the fact, when the installed
    libraries are not of that version.
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.idempotent
attributes:
  check_mode:
    support: full
    details:
      - Reads everything and reports whether O(fact_file) would change; writes nothing. A kernel module that is not
        loaded is not a reboot reason, and O(expected_version) is only reported in RV(version_ok).
  diff_mode:
    support: full
    details:
      - Gives the content of O(fact_file) before and after.
  idempotent:
    support: full
options:
  version_package:
    description:
      - The package that carries the version of the driver's userspace libraries (V(libnvidia-ml1) on Debian,
        V(libnvidia-compute-570) on Ubuntu, V(nvidia-driver-cuda-libs) on the Red Hat family).
      - Its installed version is compared without an epoch and without the Debian or RPM revision
        (V(1:570.133.20-1) is compared as V(570.133.20)).
    type: str
    required: true
  expected_version:
    description:
      - The pinned version, matched as a prefix of RV(userspace_version) (V(570.) for a branch, V(570.133.20) for an
        exact version).
      - Outside check mode the module fails when the installed libraries do not start with it (or
        O(version_package) is not installed). In check mode it only sets RV(version_ok).
    type: str
  kernel_modules_managed:
    description:
      - Whether the node loads the NVIDIA kernel modules itself. With V(true), a module that is not loaded
        (no C(/proc/driver/nvidia/version)) is a reboot reason outside check mode.
      - With V(false) (a container, which cannot load kernel modules) the loaded module's version is not read,
        RV(kernel_version) is empty and only C(nvidia-smi) and C(nouveau) can require a reboot.
    type: bool
    default: true
  check_nouveau:
    description: Whether a loaded C(nouveau) driver (C(/sys/module/nouveau) exists) is a reboot reason.
    type: bool
    default: true
  fact_file:
    description:
      - Where to record RV(fact) as JSON (a local fact, for example
        C(/etc/ansible/facts.d/clusterforge_nvidia_driver.fact)). Written with mode C(0644) only when its content
        differs; a missing directory is created with mode C(0755).
      - Without it nothing is written.
    type: path
  fact:
    description:
      - Extra keys recorded in O(fact_file) beside the module's own (C(userspace_version), C(kernel_version),
        C(reboot_required), C(reboot_reasons)), which win over keys of the same name here.
    type: dict
    default: {}
  nvidia_smi_path:
    description:
      - Path of C(nvidia-smi). By default it is looked up on E(PATH) and in the sbin directories.
      - Where it is not found (and this option is not set) no C(nvidia-smi) reason is given and RV(nvidia_smi) says
        so. A path set here that does not exist fails the module.
    type: path
  dpkg_query_path:
    description: Path of C(dpkg-query). By default it is looked up on E(PATH). Where it does not exist C(rpm) is used.
    type: path
  rpm_path:
    description:
      - Path of C(rpm), used only where C(dpkg-query) does not exist. By default it is looked up on E(PATH).
      - Where neither exists RV(userspace_version) is empty.
    type: path
  proc_root:
    description: Where C(/proc) is read. Change it only for tests.
    type: path
    default: /proc
  sys_root:
    description: Where C(/sys) is read. Change it only for tests.
    type: path
    default: /sys
notes:
  - One C(dpkg-query) (or C(rpm -q)) call and one C(nvidia-smi) call per run.
  - The module does not reboot; act on RV(reboot_required), for example with M(ansible.builtin.reboot).
seealso:
  - module: clusterforge.gpu.package_check
  - module: clusterforge.gpu.nvidia_smi_info
  - module: ansible.builtin.reboot
"""

EXAMPLES = r"""
- name: Compare the loaded driver with the installed libraries, record it and check the pinned branch
  clusterforge.gpu.nvidia_driver_state:
    version_package: libnvidia-ml1
    expected_version: "570."
    fact_file: /etc/ansible/facts.d/clusterforge_nvidia_driver.fact
    fact:
      branch: "570"
      kernel_module_type: open
      nvswitch: false
  register: __nvidia_driver_register_state

- name: Reboot for the new driver
  ansible.builtin.reboot:
    msg: "NVIDIA driver: {{ __nvidia_driver_register_state.reboot_reasons | join('; ') }}"
  when: __nvidia_driver_register_state.reboot_required

- name: Userspace only (a container that cannot load kernel modules)
  clusterforge.gpu.nvidia_driver_state:
    version_package: nvidia-driver-cuda-libs
    kernel_modules_managed: false
    check_nouveau: false
"""

RETURN = r"""
userspace_version:
  description:
    - The installed version of O(version_package) without epoch and revision. Empty when it is not installed or
      neither C(dpkg-query) nor C(rpm) exists.
  returned: always
  type: str
  sample: 570.133.20
kernel_version:
  description:
    - The version of the loaded NVIDIA kernel module. Empty when it is not loaded, or with
      O(kernel_modules_managed=false).
  returned: always
  type: str
  sample: 570.124.06
reboot_required:
  description: Whether RV(reboot_reasons) is not empty.
  returned: always
  type: bool
  sample: true
reboot_reasons:
  description: Why the node needs a reboot for the driver, in a fixed order.
  returned: always
  type: list
  elements: str
  sample: ["loaded kernel module 570.124.06 differs from the installed libraries 570.133.20",
           "nvidia-smi: Driver/library version mismatch"]
version_ok:
  description:
    - Whether RV(userspace_version) starts with O(expected_version). V(null) without O(expected_version).
  returned: always
  type: bool
  sample: true
nvidia_smi:
  description: What C(nvidia-smi --query-gpu=driver_version --format=csv,noheader) answered.
  returned: always
  type: dict
  contains:
    found:
      description: Whether C(nvidia-smi) was found (with V(false) it was not run).
      type: bool
      sample: true
    rc:
      description: Its exit status; V(null) when it was not run.
      type: int
      sample: 18
    output:
      description: The first line it printed (standard output, else standard error); empty when it was not run.
      type: str
      sample: "Failed to initialize NVML: Driver/library version mismatch"
  sample: {"found": true, "rc": 0, "output": "570.133.20"}
fact:
  description:
    - The fact recorded in O(fact_file) (or that would be recorded, without O(fact_file)) - O(fact) with the
      module's own keys.
  returned: always
  type: dict
  sample: {"branch": "570", "kernel_module_type": "open", "nvswitch": false, "userspace_version": "570.133.20",
           "kernel_version": "570.133.20", "reboot_required": false, "reboot_reasons": []}
"""

import errno
import json
import os
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.clusterforge.gpu.plugins.module_utils._files import write_atomic
from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner
from ansible_collections.clusterforge.gpu.plugins.module_utils.packages import installed_versions

KERNEL_RE = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)")
VERSION_RE = re.compile(r"^(?:\d+:)?(\d+\.\d+(?:\.\d+)?).*$")
SMI_MISMATCH = "Driver/library version mismatch"
RPM_FORMAT = "%{VERSION}-%{RELEASE}\\n"


def kernel_version(text):
    """The loaded module's version from /proc/driver/nvidia/version ("NVRM version: NVIDIA UNIX Open Kernel Module
    for x86_64  570.133.20  Release Build ..."), or ""."""
    match = KERNEL_RE.search(text or "")
    return match.group(1) if match else ""


def short_version(version):
    """The version without an epoch and a Debian or RPM revision: 1:570.133.20-0ubuntu1 -> 570.133.20."""
    return VERSION_RE.sub(r"\1", version or "")


def reboot_reasons(kernel, userspace, kernel_modules_managed, smi_text, nouveau_loaded, check_mode):
    reasons = []
    if kernel and userspace and kernel != userspace:
        reasons.append("loaded kernel module %s differs from the installed libraries %s" % (kernel, userspace))
    if kernel_modules_managed and not kernel and not check_mode:
        reasons.append("the NVIDIA kernel module is not loaded (first install)")
    if SMI_MISMATCH in smi_text:
        reasons.append("nvidia-smi: " + SMI_MISMATCH)
    if nouveau_loaded:
        reasons.append("nouveau is loaded")
    return reasons


def render_fact(fact):
    """The file content, as the filter to_nice_json writes it, with a final newline."""
    return json.dumps(fact, indent=4, sort_keys=True, separators=(",", ": ")) + "\n"


def _read_text(path):
    """The file's text, or None when it does not exist."""
    try:
        with open(path, "rb") as f:
            return to_native(f.read(), errors="surrogate_or_strict")
    except (IOError, OSError) as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            return None
        raise


def read_kernel_version(proc_root):
    try:
        text = _read_text(os.path.join(proc_root, "driver", "nvidia", "version"))
    except (IOError, OSError):
        # Like the slurp it replaces: a file that cannot be read is a module that is not loaded.
        text = None
    return kernel_version(text)


def read_userspace_version(module, package):
    supported, installed, dummy = installed_versions(module, [package], module.params["dpkg_query_path"])
    if supported:
        return short_version(installed.get(package, ""))
    rpm = ToolRunner(module, "rpm", module.params["rpm_path"], required=False, option="rpm_path")
    if not rpm.available:
        return ""
    rc, out, err = rpm.run(["-q", "--qf", RPM_FORMAT, package], check_rc=False)
    if rc == 0:
        lines = [line.strip() for line in out.splitlines() if line.strip()]
        return short_version(lines[0]) if lines else ""
    if "is not installed" in (out or "") + (err or ""):
        return ""
    rpm.fail(rpm.calls[-1], rc, out, err)
    return ""


def ask_nvidia_smi(tool):
    """({found, rc, output}, stdout and stderr) of the driver version query; nvidia-smi prints the mismatch."""
    if not tool.available:
        return {"found": False, "rc": None, "output": ""}, ""
    rc, out, err = tool.run(["--query-gpu=driver_version", "--format=csv,noheader"], check_rc=False)
    lines = [line.strip() for line in ((out or "") + "\n" + (err or "")).splitlines() if line.strip()]
    return {"found": True, "rc": rc, "output": lines[0] if lines else ""}, "%s %s" % (out or "", err or "")


def main():
    module = AnsibleModule(
        argument_spec=dict(
            version_package=dict(type="str", required=True),
            expected_version=dict(type="str"),
            kernel_modules_managed=dict(type="bool", default=True),
            check_nouveau=dict(type="bool", default=True),
            fact_file=dict(type="path"),
            fact=dict(type="dict", default={}),
            nvidia_smi_path=dict(type="path"),
            dpkg_query_path=dict(type="path"),
            rpm_path=dict(type="path"),
            proc_root=dict(type="path", default="/proc"),
            sys_root=dict(type="path", default="/sys"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    package = params["version_package"].strip()
    if not package:
        module.fail_json(msg="version_package must not be empty")
    managed = params["kernel_modules_managed"]

    # Reads (check mode included): none of them changes anything. A wrong nvidia_smi_path fails before any runs.
    smi_tool = ToolRunner(module, "nvidia-smi", params["nvidia_smi_path"], required=False, option="nvidia_smi_path")
    kernel = read_kernel_version(params["proc_root"]) if managed else ""
    userspace = read_userspace_version(module, package)
    smi, smi_text = ask_nvidia_smi(smi_tool)
    nouveau = params["check_nouveau"] and os.path.isdir(os.path.join(params["sys_root"], "module", "nouveau"))
    reasons = reboot_reasons(kernel, userspace, managed, smi_text, nouveau, module.check_mode)

    expected = params["expected_version"]
    version_ok = userspace.startswith(expected) if expected else None

    fact = dict(params["fact"] or {})
    fact.update(userspace_version=userspace, kernel_version=kernel, reboot_required=bool(reasons),
                reboot_reasons=reasons)
    result = dict(changed=False, userspace_version=userspace, kernel_version=kernel, reboot_required=bool(reasons),
                  reboot_reasons=reasons, version_ok=version_ok, nvidia_smi=smi, fact=fact)

    path = params["fact_file"]
    if path:
        try:
            before = _read_text(path)
        except (IOError, OSError) as e:
            module.fail_json(msg="cannot read %s: %s" % (path, e.strerror or to_native(e)), **result)
        after = render_fact(fact)
        if before != after:
            result["changed"] = True
            if not module.check_mode:
                write_atomic(module, path, after, mode=0o644, make_dirs=True, **result)
        if module._diff:
            result["diff"] = {"before": before or "", "after": after, "before_header": path, "after_header": path}

    # After the fact is recorded, as the role's assert came after its copy: a later run still sees the state.
    if expected and not version_ok and not module.check_mode:
        module.fail_json(msg="%s is %s, not %s* (nvidia_driver_branch / nvidia_driver_version)"
                         % (package, userspace or "not installed", expected), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
