# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):

    # The options of every module that runs dcgmi: which dcgmi, and which host engine it asks.
    DOCUMENTATION = r"""
options:
  dcgmi_path:
    description:
      - Path of the C(dcgmi) binary. Looked up on E(PATH) and the usual sbin directories when not set.
    type: path
  host:
    description:
      - The host engine C(dcgmi) connects to (C(dcgmi --host)), for example V(unix:///run/nvidia-dcgm/nv-hostengine.sock)
        or V(localhost:5555).
      - Not set, the address the collection's role clusterforge.gpu.dcgm recorded on the node in
        C(/etc/clusterforge/dcgm-hostengine) (a root-only Unix socket by default), and where there is no such file,
        C(dcgmi)'s own default (localhost:5555). A recorded file that is not root's own, or a bad address, fails the
        module before any command runs.
    type: str
"""
