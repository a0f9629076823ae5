# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one read of Slurm nodes that slurm_node and slurm_node_info share: hostlist in, parsed records out."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import quote
from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import compress, expand
from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import parse_not_found, parse_scontrol_nodes


def unique_names(module, expression):
    """Expand a hostlist expression into names, first occurrence kept; fails the module on a bad expression."""
    names = []
    try:
        for name in expand(expression):
            if name not in names:
                names.append(name)
    except ValueError as e:
        module.fail_json(msg="nodes: %s" % e)
    return names


def read_nodes(module, scontrol, names=None, unknown_note=""):
    """Read ``names`` (every node when None) with one ``scontrol show node`` call.

    Returns (records in the printed order, the command run). Fails the module when the controller does not
    answer, and when a listed node is unknown (``unknown_note`` is appended to that message).
    """
    rc, out, err = scontrol.run(["show", "node"] + ([compress(names)] if names else []), check_rc=False)
    read_cmd = scontrol.calls[-1]
    records = [node for node in parse_scontrol_nodes(out) if node.get("NodeName")]
    not_found = parse_not_found(out + "\n" + err)
    if rc != 0 and not not_found:
        # Not a "Node X not found" answer: the controller is unreachable, permission denied, ...
        scontrol.fail(read_cmd, rc, out, err, what="scontrol show node")
    if names:
        known = set(node["NodeName"] for node in records)
        missing = [name for name in names if name not in known]
        if missing:
            module.fail_json(msg="unknown Slurm node(s): %s%s" % (compress(missing), unknown_note), unknown=missing,
                             not_found=not_found, cmd=quote(read_cmd), rc=rc, stdout=out, stderr=err)
    return records, read_cmd
