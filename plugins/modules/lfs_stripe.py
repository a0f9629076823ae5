#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: lfs_stripe
short_description: Manage the default Lustre striping (plain or progressive file layout) of a directory
version_added: 1.0.0
description:
  - Reads the default layout of a Lustre directory with C(lfs getstripe -y -d), compares it with the requested
    layout and runs C(lfs setstripe) only when they differ, then reads it back and fails if it did not stick.
  - A plain layout uses O(stripe_count), O(stripe_size) and O(pool); a progressive file layout (PFL) uses
    O(components), one C(-E) extent each (for example C(lfs setstripe -E 256M -c 1 -E 16G -c 4 -E -1 -S 4M -c -1 <dir>)).
  - Options left unset are not compared. When the layout is rewritten, C(lfs) applies its own defaults to them.
  - A directory layout applies only to files created afterwards; existing files keep theirs (use C(lfs migrate)).
  - O(state=absent) removes the directory's default layout with C(lfs setstripe -d), so new files get the
    filesystem default again.
  - No root privileges are needed on directories the user owns.
author:
  - ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.idempotent
attributes:
  check_mode:
    support: full
    details:
      - Reads the layout and predicts the change; C(lfs setstripe) is never run in check mode.
  diff_mode:
    support: full
    details:
      - Shows the normalised layout before and after (components with extents, stripe count, size and pool).
  idempotent:
    support: full
options:
  path:
    description:
      - An existing directory on a mounted Lustre filesystem.
    type: path
    required: true
  state:
    description:
      - V(present) sets the requested default layout; V(absent) removes the directory's default layout.
    type: str
    choices: [present, absent]
    default: present
  stripe_count:
    description:
      - Number of OSTs each file is striped over; V(-1) stripes over all OSTs, V(0) uses the filesystem default.
      - Mutually exclusive with O(components).
    type: int
  stripe_size:
    description:
      - Stripe size in bytes or with a K, M or G suffix (V(4M)). Must be a multiple of 64K.
      - Mutually exclusive with O(components).
    type: str
  pool:
    description:
      - OST pool to allocate objects from.
      - Mutually exclusive with O(components).
    type: str
  components:
    description:
      - Progressive file layout, one entry per C(-E) component, in increasing order of O(components[].end).
      - The last component must end at EOF (V(-1) or V(eof)).
    type: list
    elements: dict
    suboptions:
      end:
        description:
          - End of the component extent (V(256M), V(16G)), or V(-1)/V(eof) for the last one.
          - Must be a multiple of 64K and of the component's stripe size.
        type: str
        required: true
      stripe_count:
        description: Stripe count of this component (V(-1) for all OSTs).
        type: int
      stripe_size:
        description: Stripe size of this component (bytes or K/M/G suffix, multiple of 64K).
        type: str
      pool:
        description: OST pool of this component.
        type: str
  lfs_path:
    description:
      - Path of the C(lfs) binary. Looked up on E(PATH) and the usual sbin directories when not set.
    type: path
notes:
  - Some C(lfs) versions print YAML that is not strictly valid; the output is parsed line by line, without a YAML library.
  - A directory without a default layout makes C(lfs getstripe -d) print nothing or a message; both mean "no default layout".
seealso:
  - name: Lustre Operations Manual, Managing File Layout (Striping)
    description: Plain and progressive file layouts, C(lfs setstripe) and C(lfs getstripe).
    link: https://doc.lustre.org/lustre_manual.xhtml#managingstripingfreespace
"""

EXAMPLES = r"""
- name: Stripe new checkpoint files over 4 OSTs in 4 MiB stripes
  clusterforge.gpu.lfs_stripe:
    path: /mnt/lustre/checkpoints
    stripe_count: 4
    stripe_size: 4M

- name: Stripe a dataset directory over every OST
  clusterforge.gpu.lfs_stripe:
    path: /mnt/lustre/datasets
    stripe_count: -1

- name: Progressive file layout - small files on one OST, large files over all OSTs
  clusterforge.gpu.lfs_stripe:
    path: /mnt/lustre/scratch
    components:
      - end: 256M
        stripe_count: 1
      - end: 16G
        stripe_count: 4
      - end: eof
        stripe_count: -1
        stripe_size: 4M

- name: Put the first MiB on the flash pool
  clusterforge.gpu.lfs_stripe:
    path: /mnt/lustre/projects
    components:
      - end: 1M
        pool: flash
      - end: -1
        stripe_count: 2
        pool: disk

- name: Go back to the filesystem default layout
  clusterforge.gpu.lfs_stripe:
    path: /mnt/lustre/scratch
    state: absent
"""

RETURN = r"""
layout:
  description:
    - The directory's default layout after the run (in check mode, the predicted one).
    - An empty O(components) list means the directory has no default layout of its own.
  returned: always
  type: dict
  contains:
    mirror_count:
      description: Number of mirrors (1 for an unmirrored layout, 0 when there is no layout).
      type: int
    composite:
      description: Whether the layout is composite (PFL), as printed by lfs.
      type: bool
    components:
      description: One entry per component; a plain layout is one component from 0 to EOF.
      type: list
      elements: dict
  sample:
    mirror_count: 1
    composite: true
    components:
      - {mirror_id: null, extent_start: 0, extent_end: 268435456, stripe_count: 1, stripe_size: 1048576, pattern: raid0, pool: null}
      - {mirror_id: null, extent_start: 268435456, extent_end: null, stripe_count: -1, stripe_size: 4194304, pattern: raid0, pool: null}
previous_layout:
  description: The directory's default layout before the run, in the same shape as RV(layout).
  returned: always
  type: dict
  sample:
    mirror_count: 0
    composite: false
    components: []
cmd:
  description: The C(lfs setstripe) command that was run (or would run in check mode); null when nothing needed changing.
  returned: always
  type: str
  sample: /usr/bin/lfs setstripe -E 256M -c 1 -E -1 -c -1 -S 4M /mnt/lustre/scratch
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils.lustre import (
    LayoutError,
    layout_from_params,
    layout_matches,
    parse_getstripe_yaml,
    setstripe_args,
)

NO_LAYOUT = {"mirror_count": 0, "components": [], "composite": False}


def read_layout(runner, path):
    _rc, out, _err = runner.run(["getstripe", "-y", "-d", path], what="lfs getstripe")
    return parse_getstripe_yaml(out)


def predicted(desired):
    """What getstripe will show after setstripe: the request with lfs' own fill-ins left unknown."""
    return {"mirror_count": desired["mirror_count"], "composite": desired["composite"],
            "components": [dict(c) for c in desired["components"]]}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            stripe_count=dict(type="int"),
            stripe_size=dict(type="str"),
            pool=dict(type="str"),
            components=dict(type="list", elements="dict", options=dict(
                end=dict(type="str", required=True),
                stripe_count=dict(type="int"),
                stripe_size=dict(type="str"),
                pool=dict(type="str"),
            )),
            lfs_path=dict(type="path"),
        ),
        mutually_exclusive=[
            ["components", "stripe_count"],
            ["components", "stripe_size"],
            ["components", "pool"],
        ],
        required_if=[["state", "present", ["stripe_count", "stripe_size", "pool", "components"], True]],
        supports_check_mode=True,
    )
    p = module.params
    path = os.path.abspath(p["path"])
    state = p["state"]

    # Validate everything before running any command.
    desired = None
    if state == "present":
        try:
            desired = layout_from_params(p["stripe_count"], p["stripe_size"], p["pool"], p["components"])
        except LayoutError as e:
            module.fail_json(msg="invalid layout for %s: %s" % (path, e), changed=False)
    elif any(p[k] is not None for k in ("stripe_count", "stripe_size", "pool", "components")):
        module.fail_json(msg="stripe_count, stripe_size, pool and components cannot be used with state=absent",
                         changed=False)
    if not os.path.exists(path):
        module.fail_json(msg="path %s does not exist; lfs_stripe sets the default layout of an existing directory"
                         % path, changed=False)
    if not os.path.isdir(path):
        module.fail_json(msg="path %s is not a directory; lfs_stripe manages directory default layouts "
                         "(use lfs migrate for existing files)" % path, changed=False)

    runner = ToolRunner(module, "lfs", p["lfs_path"], option="lfs_path")
    before = read_layout(runner, path)

    if state == "present":
        changed = not layout_matches(before, desired)
        args = ["setstripe"] + setstripe_args(desired) + [path]
    else:
        changed = bool(before["components"])
        args = ["setstripe", "-d", path]

    cmd = None
    after = before
    if changed:
        cmd = quote([runner.bin] + args)
        if module.check_mode:
            after = predicted(desired) if state == "present" else dict(NO_LAYOUT)
        else:
            runner.run(args, what="lfs setstripe")
            after = read_layout(runner, path)
            ok = layout_matches(after, desired) if state == "present" else not after["components"]
            if not ok:
                module.fail_json(
                    msg="lfs setstripe ran but the default layout of %s did not stick" % path,
                    cmd=cmd, changed=True, layout=after, previous_layout=before,
                    wanted=predicted(desired) if desired else dict(NO_LAYOUT))

    result = dict(changed=changed, layout=after, previous_layout=before, cmd=cmd)
    if module._diff:
        result["diff"] = dict(before=before, after=after,
                              before_header="%s (lfs getstripe -d)" % path, after_header=path)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
