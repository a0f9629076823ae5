#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: dcgm_diag
short_description: Run NVIDIA DCGM diagnostics (dcgmi diag) and fail when a test fails
version_added: 1.0.0
description:
  - Runs C(dcgmi diag -r <level>) on the node's GPUs (or the GPUs in O(gpus)), parses the per-test and per-GPU
    results and fails when any test fails, naming the tests and GPUs.
  - Prefers DCGM's JSON output (C(-j)); when the output is not a JSON diagnostic document (older DCGM, a banner
    only), the box table in the same output is parsed instead. The diagnostic is never run twice.
  - A test that only warns does not fail the module; its messages are returned in RV(diag_warnings).
  - Level 1 takes seconds and suits a job prolog; level 2 about two minutes; levels 3 and 4 stress the GPUs, power
    and fabric for 15 minutes or more. Run diagnostics only on idle or drained nodes.
  - DCGM has no HTTP health API; this module talks to the host engine through C(dcgmi) only.
  - The module never changes anything on the node and always returns C(changed=false).
author:
  - ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.dcgm
attributes:
  check_mode:
    support: partial
    details:
      - A diagnostic stresses the GPUs, so in check mode it is B(not) run. The module returns C(skipped=true) with
        a message and the command it would have run; a missing C(dcgmi) still fails.
  diff_mode:
    support: none
    details:
      - Nothing is changed, so there is nothing to diff.
options:
  level:
    description:
      - Diagnostic level (C(-r)). 1 quick (deployment checks), 2 medium, 3 long, 4 extended.
    type: int
    choices: [1, 2, 3, 4]
    default: 1
  gpus:
    description:
      - GPU ids to test (C(-i 0,1)). All GPUs when not set.
    type: list
    elements: str
  timeout:
    description:
      - Seconds the diagnostic may run. Passed to C(dcgmi diag --timeout) on DCGM 3 and later (the version is read
        with C(dcgmi -v)), and enforced on the process with C(timeout) from coreutils, which stops it 60 seconds
        later if DCGM did not.
      - When not set, the collection's limit for the level (level 1 300 s, 2 900 s, 3 2700 s, 4 and named tests
        7200 s) still applies; at it the process group is killed and the task fails with C(no answer in N s).
    type: int
  json_output:
    description:
      - Ask for JSON output (C(-j)). When false, the box table is parsed.
    type: bool
    default: true
notes:
  - Requires a running C(nv-hostengine) (the C(nvidia-dcgm) service) or lets C(dcgmi) start an embedded one.
  - C(dcgmi diag) exits non-zero when a test fails; the module reads the results and reports them instead of the
    bare exit code. A non-zero exit without any parseable result fails with C(rc), C(stdout) and C(stderr).
seealso:
  - name: DCGM diagnostics
    description: Levels, plugins and result codes of C(dcgmi diag).
    link: https://docs.nvidia.com/datacenter/dcgm/latest/user-guide/dcgm-diagnostics.html
"""

EXAMPLES = r"""
- name: Quick readiness check of every GPU
  clusterforge.gpu.dcgm_diag:
    level: 1

- name: Medium diagnostic on two GPUs, bounded to 10 minutes
  clusterforge.gpu.dcgm_diag:
    level: 2
    gpus: ["0", "1"]
    timeout: 600

- name: Long diagnostic on a drained node, keeping the result
  clusterforge.gpu.dcgm_diag:
    level: 3
    timeout: 3600
  register: diag

- name: Show per-GPU results
  ansible.builtin.debug:
    var: diag.gpus
"""

RETURN = r"""
result:
  description: Overall verdict, the worst of all tests (C(fail) > C(warn) > C(pass) > C(skip)); null in check mode.
  returned: always
  type: str
  sample: pass
tests:
  description: One entry per test, in DCGM's order, with the test name as DCGM spells it.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Test name (C(software), C(memory), C(pcie), C(targeted_stress), or DCGM 3 names like C(GPU Memory)).
      type: str
    category:
      description: DCGM category (Deployment, Hardware, Integration, Stress).
      type: str
    result:
      description: pass, fail, warn or skip.
      type: str
    gpus:
      description: Result per GPU id (empty when DCGM reported one result for all GPUs).
      type: dict
    details:
      description: Warning and info messages, with the GPU they concern when DCGM said.
      type: list
      elements: dict
  sample:
    - {name: memory, category: Hardware, result: fail, gpus: {"0": pass, "3": fail},
       details: [{kind: warning, gpu: 3, message: "A memory mismatch was detected on GPU 3"}]}
gpus:
  description: Results per GPU id, then per test.
  returned: always
  type: dict
  sample: {"0": {software: pass, memory: pass, pcie: pass}, "3": {software: pass, memory: fail, pcie: pass}}
failed_tests:
  description: The failing tests and the GPUs they failed on (an empty GPU list means DCGM did not say which).
  returned: always
  type: list
  elements: dict
  sample: [{name: memory, gpus: ["3"]}]
diag_warnings:
  description:
    - "Warning messages of the tests, as C(<test> (GPU n): <message>); also shown as Ansible warnings."
  returned: when DCGM reported warnings
  type: list
  elements: str
  sample: ["pcie: There was an internal error during the test"]
metadata:
  description: What DCGM reported about itself and the node (C(dcgm_version), C(driver_version), C(gpu_device_ids)).
  returned: always
  type: dict
  sample: {dcgm_version: 4.4.2, driver_version: 580.105.08, gpu_device_ids: ["2330", "2330"]}
output_format:
  description: Which output was parsed, C(json) or C(table); null in check mode.
  returned: always
  type: str
  sample: json
cmd:
  description: The command that was run (in check mode, the one that would run).
  returned: always
  type: str
  sample: /usr/bin/dcgmi diag -r 2 -i 0,1 -j
rc:
  description: Exit status of C(dcgmi diag) (DCGM exits non-zero when a test fails); null in check mode.
  returned: always
  type: int
  sample: 0
skipped:
  description: True in check mode, where the diagnostic is not run.
  returned: in check mode
  type: bool
  sample: true
"""

import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote, time_limit_seconds
from ansible_collections.clusterforge.gpu.plugins.module_utils.dcgm import (
    failing_tests,
    gpu_results,
    hostengine_args,
    parse_diag,
    parse_diag_json,
)

# coreutils timeout: exit status when the command timed out (124) or had to be killed (137)
TIMEOUT_RCS = (124, 137)
KILL_GRACE = 60
# Seconds after coreutils timeout's own SIGKILL before the collection's runner kills the process group itself.
RUNNER_GRACE = 30


def dcgm_major(runner):
    rc, out, _err = runner.run(["-v"], check_rc=False)
    m = re.search(r"^\s*Version\s*:\s*(\d+)\.", out or "", re.M)
    return int(m.group(1)) if (rc == 0 and m) else None


def parse_output(out, want_json):
    """(parsed, format) from one dcgmi diag output; JSON first when asked for, then the table."""
    if want_json:
        try:
            return parse_diag_json(out), "json"
        except ValueError:
            pass
    parsed = parse_diag(out)
    return parsed, "table"


def warning_lines(parsed):
    lines = []
    for test in parsed["tests"]:
        for d in test["details"]:
            if d["kind"] != "warning" or not d["message"]:
                continue
            where = " (GPU %s)" % d["gpu"] if d.get("gpu") is not None else ""
            line = "%s%s: %s" % (test["name"], where, d["message"])
            if line not in lines:
                lines.append(line)
    return lines


def main():
    module = AnsibleModule(
        argument_spec=dict(
            level=dict(type="int", choices=[1, 2, 3, 4], default=1),
            gpus=dict(type="list", elements="str"),
            timeout=dict(type="int"),
            json_output=dict(type="bool", default=True),
            dcgmi_path=dict(type="path"),
            host=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["timeout"] is not None and p["timeout"] <= 0:
        module.fail_json(msg="timeout must be a positive number of seconds, got %s" % p["timeout"])
    gpus = [str(g).strip() for g in (p["gpus"] or [])]
    if p["gpus"] is not None and (not gpus or any(not g for g in gpus)):
        module.fail_json(msg="gpus must be a non-empty list of GPU ids")

    try:
        host_args = hostengine_args(p["host"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    dcgmi = ToolRunner(module, "dcgmi", p["dcgmi_path"], option="dcgmi_path")
    args = ["diag"] + host_args + ["-r", str(p["level"])]
    if gpus:
        args += ["-i", ",".join(gpus)]
    if p["json_output"]:
        args.append("-j")

    empty = dict(changed=False, result=None, tests=[], gpus={}, failed_tests=[], metadata={}, output_format=None,
                 rc=None)
    if module.check_mode:
        module.exit_json(skipped=True, cmd=quote([dcgmi.bin] + args),
                         msg="check mode: dcgmi diag was not run (a diagnostic stresses the GPUs)", **empty)

    limiter = None
    if p["timeout"]:
        major = dcgm_major(dcgmi)
        if major is None or major >= 3:
            args += ["--timeout", str(p["timeout"])]
        limiter = ToolRunner(module, "timeout", required=False)
        if not limiter.available:
            limiter = None
            module.warn("coreutils timeout was not found; only dcgmi's own --timeout bounds the diagnostic")

    # The runner's own limit stops a dcgmi that hangs (a GPU off the bus) even where DCGM and coreutils did not.
    if p["timeout"]:
        hard_limit = p["timeout"] + KILL_GRACE + 30 + RUNNER_GRACE
    else:
        hard_limit = time_limit_seconds("dcgmi", dcgm_diag_level=p["level"])
    if limiter is not None:
        argv = ["-k", "30", str(p["timeout"] + KILL_GRACE), dcgmi.bin] + args
        cmd_list = [limiter.bin] + argv
        rc, out, err = limiter.run(argv, check_rc=False, timeout_seconds=hard_limit)
    else:
        cmd_list = [dcgmi.bin] + args
        rc, out, err = dcgmi.run(args, check_rc=False, timeout_seconds=hard_limit)
    cmd = quote(cmd_list)

    if limiter is not None and rc in TIMEOUT_RCS:
        res = dict(empty)
        res.update(cmd=cmd, stdout=out, stderr=err, rc=rc)
        module.fail_json(msg="dcgmi diag -r %s timed out after %s seconds" % (p["level"], p["timeout"]), **res)

    parsed, fmt = parse_output(out, p["json_output"])
    if not parsed["tests"]:
        reason = "; ".join(parsed["errors"]) or (err or out or "").strip()[:2000] or "no output"
        res = dict(empty)
        res.update(cmd=cmd, stdout=out, stderr=err, rc=rc, output_format=fmt, metadata=parsed["metadata"])
        module.fail_json(msg="dcgmi diag -r %s produced no test results (rc=%s): %s" % (p["level"], rc, reason), **res)

    per_gpu = dict((str(g), r) for g, r in gpu_results(parsed).items())
    tests = []
    for t in parsed["tests"]:
        entry = dict(t)
        entry["gpus"] = dict((str(g), r) for g, r in t["gpus"].items())
        tests.append(entry)
    failed = [{"name": name, "gpus": [str(g) for g in ids]} for name, ids in failing_tests(parsed)]
    result = dict(changed=False, result=parsed["result"], tests=tests, gpus=per_gpu, failed_tests=failed,
                  metadata=parsed["metadata"], output_format=fmt, cmd=cmd, rc=rc)
    warnings = warning_lines(parsed)
    if warnings:
        result["diag_warnings"] = warnings
        for line in warnings:
            module.warn(line)

    if failed or parsed["result"] == "fail":
        what = []
        for item in failed:
            what.append("%s on %s" % (item["name"], ("GPU " + ", ".join(item["gpus"])) if item["gpus"] else "all GPUs"))
        if parsed["errors"]:
            what.append("; ".join(parsed["errors"]))
        module.fail_json(msg="DCGM diagnostic level %s failed: %s" % (p["level"], "; ".join(what)),
                         stdout=out, stderr=err, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
