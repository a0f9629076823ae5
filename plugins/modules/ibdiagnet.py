#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: ibdiagnet
short_description: Run ibdiagnet and gate on its stage summary
description:
  - Runs C(ibdiagnet) once, with C(--ls <lane speed> --lw <width>) when O(expected_rate) is given, parses the
    C(Summary) stage table (ibdiagnet2; the legacy 1.x C(Stages Status Report) is also understood) and the
    C(-W-)/C(-E-) lines, and fails when the errors (or warnings) exceed the allowance.
  - C(--ls) takes the per-lane speed, derived from O(expected_rate) - C(edr) 25, C(hdr) 50, C(ndr) 100,
    C(xdr) 200. A link slower than that is reported by ibdiagnet as C(Unexpected actual link speed) and counted
    in the C(Speed / Width checks) stage.
  - The verdict comes from the Summary counts, not the screen. ibdiagnet prints at most a few messages of each
    type; RV(messages) is what was printed, the full list is in the C(ibdiagnet2.db_csv) file it writes.
  - A non-zero exit code means the tool failed to run (no umad device, no active port, bad option). The module
    then fails with the command, rc and stderr. ibdiagnet has no documented exit-code contract for fabric
    health.
  - It never changes the fabric and always reports C(changed=false). ibdiagnet does write its report files
    (O(output_dir), default C(/var/tmp/ibdiagnet2)).
version_added: "1.0.0"
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
attributes:
  check_mode:
    support: full
    details:
      - The check is read-only for the fabric, so it also runs in check mode (the report files are written
        then too).
  diff_mode:
    support: none
options:
  expected_rate:
    description:
      - Expected link rate name. Sets C(--ls) to its per-lane speed and C(--lw) to O(link_width).
      - Leave unset to run without speed/width expectations.
    type: str
    choices: [edr, hdr, ndr, xdr]
  link_width:
    description: Expected link width, passed as C(--lw) when O(expected_rate) is set.
    type: str
    choices: [1x, 2x, 4x, 8x, 12x]
    default: 4x
  output_dir:
    description: Directory for the ibdiagnet report files (C(-o)).
    type: path
  extra_args:
    description: More arguments for ibdiagnet, one list item per argument (for example C(["-P", "all=1"])).
    type: list
    elements: str
    default: []
  max_errors:
    description: Fail when the total number of errors in the stage summary is above this.
    type: int
    default: 0
  max_warnings:
    description: Fail when the total number of warnings is above this. Unset means no limit.
    type: int
  ibdiagnet_path:
    description: Path to C(ibdiagnet). By default it is looked up on C(PATH) and in the sbin directories.
    type: path
  timeout:
    description:
      - Seconds the sweep may run. At the limit ibdiagnet's process group is killed (SIGTERM, then SIGKILL) and the
        task fails with C(no answer in N s) and the command line. A sweep of a large fabric takes minutes.
    type: int
    default: 1800
    version_added: 1.0.0
notes:
  - Needs root and an active local HCA port. Clear counters beforehand with C(ibdiagnet --pc) if you gate on
    port counters (for example O(extra_args) C(["-P", "all=1"])).
seealso:
  - module: clusterforge.gpu.ib_port_info
"""

EXAMPLES = r"""
- name: Check an NDR fabric (4x, 100 Gb/s per lane)
  clusterforge.gpu.ibdiagnet:
    expected_rate: ndr
    output_dir: /var/tmp/ibdiagnet2
  register: __validation_register_ibdiagnet

- name: Allow a few warnings, no errors, and flag counters above threshold
  clusterforge.gpu.ibdiagnet:
    expected_rate: hdr
    max_errors: 0
    max_warnings: 20
    extra_args: ["-P", "all=1"]
"""

RETURN = r"""
stages:
  description: The stage summary rows.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "Speed / Width checks", "warnings": 0, "errors": 1, "comment": ""}]
total_errors:
  description: Sum of the stages' errors.
  returned: always
  type: int
  sample: 0
total_warnings:
  description: Sum of the stages' warnings.
  returned: always
  type: int
  sample: 3
messages:
  description: The C(-W-)/C(-E-) lines ibdiagnet printed, with the stage they appeared in.
  returned: always
  type: list
  elements: dict
  sample: [{"level": "error", "stage": "Speed / Width checks",
            "text": "Link: sw01/U1/P3<-->node07/U1/P1 - Unexpected actual link speed 50"}]
error_stages:
  description: Names of the stages with errors.
  returned: always
  type: list
  elements: str
  sample: ["Speed / Width checks"]
lane_speed:
  description: The C(--ls) value used, or null without O(expected_rate).
  returned: always
  type: int
  sample: 100
log_file:
  description: Where ibdiagnet says the full log is.
  returned: when printed
  type: str
  sample: /var/tmp/ibdiagnet2/ibdiagnet2.log
format:
  description: ibdiagnet2 or ibdiagnet1 (legacy), as detected.
  returned: always
  type: str
  sample: ibdiagnet2
cmd:
  description: The command that was run.
  returned: always
  type: str
  sample: /usr/bin/ibdiagnet --ls 100 --lw 4x -o /var/tmp/ibdiagnet2
stdout:
  description: The tool's output.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils import infiniband


def build_args(p):
    args = []
    lane = None
    if p["expected_rate"]:
        lane = infiniband.lane_speed_for_rate(p["expected_rate"])
        args += ["--ls", str(lane), "--lw", p["link_width"]]
    if p["output_dir"]:
        args += ["-o", p["output_dir"]]
    args += list(p["extra_args"] or [])
    return args, lane


def main():
    module = AnsibleModule(
        argument_spec=dict(
            expected_rate=dict(type="str", choices=["edr", "hdr", "ndr", "xdr"]),
            link_width=dict(type="str", choices=["1x", "2x", "4x", "8x", "12x"], default="4x"),
            output_dir=dict(type="path"),
            extra_args=dict(type="list", elements="str", default=[]),
            max_errors=dict(type="int", default=0),
            max_warnings=dict(type="int"),
            ibdiagnet_path=dict(type="path"),
            timeout=dict(type="int", default=1800),
        ),
        supports_check_mode=True,
    )
    p = module.params
    runner = ToolRunner(module, "ibdiagnet", p["ibdiagnet_path"], option="ibdiagnet_path")
    args, lane = build_args(p)
    # rc != 0: the tool failed to run; ToolRunner fails with cmd/rc/stdout/stderr.
    rc, out, err = runner.run(args, what="ibdiagnet (tool failed to run)", timeout_seconds=p["timeout"])
    cmd = quote([runner.bin] + args)
    report = infiniband.parse_ibdiagnet(out)
    error_stages = [s["name"] for s in report["stages"] if s["errors"]]
    result = dict(
        changed=False, cmd=cmd, lane_speed=lane, stages=report["stages"], total_errors=report["total_errors"],
        total_warnings=report["total_warnings"], messages=report["messages"], error_stages=error_stages,
        format=report["format"], stdout=out,
    )
    if report["log_file"]:
        result["log_file"] = report["log_file"]
    if not report["summary_found"]:
        module.fail_json(msg="ibdiagnet ran (rc=0) but printed no stage summary table; cannot judge the fabric",
                         rc=rc, stderr=err, **result)
    problems = []
    if report["total_errors"] > p["max_errors"]:
        firsts = [m["text"] for m in report["messages"] if m["level"] == "error"][:5]
        problems.append("%d error(s) (allowed %d) in stage(s) %s%s" % (
            report["total_errors"], p["max_errors"],
            ", ".join("%s (%d)" % (s["name"], s["errors"]) for s in report["stages"] if s["errors"]),
            "; first errors: " + " | ".join(firsts) if firsts else ""))
    if p["max_warnings"] is not None and report["total_warnings"] > p["max_warnings"]:
        firsts = [m["text"] for m in report["messages"] if m["level"] == "warning"][:5]
        problems.append("%d warning(s) (allowed %d) in stage(s) %s%s" % (
            report["total_warnings"], p["max_warnings"],
            ", ".join("%s (%d)" % (s["name"], s["warnings"]) for s in report["stages"] if s["warnings"]),
            "; first warnings: " + " | ".join(firsts) if firsts else ""))
    if problems:
        module.fail_json(msg="ibdiagnet: " + "; ".join(problems), rc=rc, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
