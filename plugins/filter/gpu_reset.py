# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter gpu_reset_slurm_verdict: may this node's GPUs be reset now, as far as Slurm's jobs go.

Documentation lives beside this file in gpu_reset_slurm_verdict.yml.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

try:  # ansible-core >= 2.19 hands lazy containers to filters; they are still mappings
    from collections.abc import Mapping
except ImportError:  # pragma: no cover
    Mapping = dict


def _properties(slurmd):
    """systemctl show's ``Key=Value`` lines (text), or a mapping already."""
    if slurmd is None:
        return {}
    if isinstance(slurmd, Mapping):
        return dict(slurmd)
    if isinstance(slurmd, str):
        return dict(line.split("=", 1) for line in slurmd.splitlines() if "=" in line)
    raise AnsibleFilterError("gpu_reset_slurm_verdict: slurmd must be systemctl show's text or a mapping, got %s"
                             % type(slurmd).__name__)


def _slurmd_text(slurmd):
    load, active = slurmd.get("LoadState"), slurmd.get("ActiveState")
    if active in ("active", "activating", "reloading", "deactivating"):
        return "slurmd.service is %s" % active
    if load == "loaded":
        return "slurmd.service is installed (%s)" % (active or "state unknown")
    return None


def gpu_reset_slurm_verdict(scontrol_found, node_info=None, slurmd=None):
    """The one decision whether Slurm runs (or may run) a job on this node. Returns {free, state}.

    ``scontrol_found``: whether scontrol was found on the node. ``node_info``: the slurm_node_info result for the
    node (or None when it was not read). ``slurmd``: systemd's properties of slurmd.service (LoadState,
    ActiveState), as ``systemctl show`` prints them or as a mapping; None or empty when unknown.

    A missing scontrol, or a node Slurm does not know, means "no job can run here" only when slurmd is not
    installed on the node either: with slurmd there, Slurm may be placing jobs that this node cannot see, and the
    answer is "refuse", naming what was found.

    ``drain_first``: the node is free because it is IDLE and in service, so Slurm may start a job on it at any
    moment: the GPUs are reset only after the caller drained it (and waited for it to be empty).
    """
    if node_info is not None and not isinstance(node_info, Mapping):
        raise AnsibleFilterError("gpu_reset_slurm_verdict: node_info must be slurm_node_info's result, got %s"
                                 % type(node_info).__name__)
    node_info = node_info or {}
    slurmd_here = _slurmd_text(_properties(slurmd))
    if not scontrol_found:
        if slurmd_here:
            return {"free": False, "drain_first": False, "state": "unreadable: scontrol was not found on this node, "
                    "but %s; a node that runs slurmd may be running jobs, so it is not taken as free (install "
                    "scontrol or fix PATH)" % slurmd_here}
        return {"free": True, "drain_first": False, "state": "not known to Slurm (scontrol and slurmd are not "
                "installed, so no job can run here)"}
    if node_info.get("unknown"):
        msg = node_info.get("msg") or "the node is not in Slurm's node list"
        if slurmd_here:
            return {"free": False, "drain_first": False, "state": "unreadable: Slurm does not know this node (%s), "
                    "but %s; it is not taken as free" % (msg, slurmd_here)}
        return {"free": True, "drain_first": False, "state": "not known to Slurm (%s), so no job can run here" % msg}
    nodes = node_info.get("nodes") or []
    if nodes:
        node = nodes[0]
        reason = node.get("reason")
        state = "%s%s" % (node.get("state"), " (reason: %s)" % reason if reason else "")
        drained = bool(node.get("drained"))
        idle = node.get("base") == "IDLE" and "COMPLETING" not in (node.get("flags") or [])
        return {"free": drained or idle, "drain_first": idle and not drained and not node.get("drain"), "state": state}
    return {"free": False, "drain_first": False,
            "state": "unreadable (%s)" % (node_info.get("msg") or "scontrol show node failed")}


class FilterModule(object):
    def filters(self):
        return {"gpu_reset_slurm_verdict": gpu_reset_slurm_verdict}
