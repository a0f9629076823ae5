#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: slurm_node_hardware_info
short_description: Describe this node for its Slurm node line - CPUs, sockets, cores, threads, memory and GPUs
version_added: "1.0.0"
description:
  - Returns what C(slurm.conf) and C(gres.conf) need about the node it runs on, in one module run, on the node
    itself (so a play gathers every node in parallel).
  - CPUs, sockets, cores per socket, threads per core and memory come from the same code as
    C(ansible.builtin.setup)'s C(processor_vcpus), C(processor_count), C(processor_cores),
    C(processor_threads_per_core) and C(memtotal_mb) facts (C(/proc/cpuinfo), C(/proc/meminfo)), without the rest
    of the C(hardware) subset (mounts, devices, DMI).
  - The GPUs come from one C(nvidia-smi -q -x), as C(clusterforge.gpu.nvidia_smi_info) reads them; the module
    fails, as that module does, when C(nvidia-smi) is missing or shows no GPU.
  - Whether Slurm's C(gpu_nvml) GRES plugin is installed decides RV(node.gres_autodetect).
author: ClusterForge developers (@clusterforge)
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.INFO_MODULE
options:
  nvidia_smi_path:
    description: Path of C(nvidia-smi). Looked up on E(PATH) and in the sbin directories when omitted.
    type: path
  nvml_plugin_paths:
    description:
      - Where Slurm's C(gpu_nvml.so) may be; the first that exists makes RV(node.gres_autodetect) C(nvml).
        C({arch}) is replaced by the machine architecture (C(x86_64), C(aarch64)).
    type: list
    elements: str
    default:
      - /usr/lib/{arch}-linux-gnu/slurm-wlm/gpu_nvml.so
      - /usr/lib64/slurm/gpu_nvml.so
requirements:
  - The NVIDIA driver and its C(nvidia-smi).
seealso:
  - module: clusterforge.gpu.nvidia_smi_info
  - module: clusterforge.gpu.slurm_node_info
"""

EXAMPLES = r"""
- name: Describe this node for slurm.conf and gres.conf
  clusterforge.gpu.slurm_node_hardware_info:
  register: __slurm_compute_register_node

- name: NodeName line
  ansible.builtin.debug:
    msg: >-
      NodeName={{ inventory_hostname }} CPUs={{ __slurm_compute_register_node.node.cpus }}
      Gres=gpu:{{ __slurm_compute_register_node.node.gpu_type }}:{{ __slurm_compute_register_node.node.gpu_count }}
"""

RETURN = r"""
node:
  description: The node's description.
  returned: always
  type: dict
  contains:
    cpus:
      description: Logical CPUs (C(processor_vcpus)).
      type: int
      sample: 224
    sockets:
      description: Sockets (C(processor_count)).
      type: int
      sample: 2
    cores_per_socket:
      description: Cores per socket (C(processor_cores)).
      type: int
      sample: 56
    threads_per_core:
      description: Threads per core (C(processor_threads_per_core)).
      type: int
      sample: 2
    memtotal_mb:
      description: MemTotal in MiB (C(memtotal_mb)).
      type: int
      sample: 2063937
    gpu_count:
      description: GPUs C(nvidia-smi) shows.
      type: int
      sample: 8
    gpu_model:
      description: The product name of the first GPU.
      type: str
      sample: NVIDIA H100 80GB HBM3
    gpu_type:
      description:
        - The GRES type, lower case, from the product name (its first letters-then-digits word, C(h100), C(a100),
          C(l40s)); C(gpu) when the name has none.
      type: str
      sample: h100
    gpu_indexes:
      description: The GPU indexes, in order.
      type: list
      elements: int
      sample: [0, 1, 2, 3, 4, 5, 6, 7]
    gres_autodetect:
      description: C(nvml) when Slurm's C(gpu_nvml) plugin is installed, else C(off).
      type: str
      sample: "off"
nvml_plugin:
  description: The C(gpu_nvml.so) found, or V(null).
  returned: always
  type: str
  sample: null
"""

import os
import platform
import re

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.facts.hardware.linux import LinuxHardware

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner
from ansible_collections.clusterforge.gpu.plugins.module_utils.nvidia_smi import read_gpus

_GPU_TYPE_RE = re.compile(r"[A-Za-z]+[0-9]+[A-Za-z]*")


def gpu_type(model):
    """``NVIDIA H100 80GB HBM3`` -> ``h100``; a name without such a word -> ``gpu``; no model -> ``''``."""
    if not model:
        return ""
    match = _GPU_TYPE_RE.search(model)
    return match.group(0).lower() if match else "gpu"


def cpu_memory(module, architecture):
    """The CPU and memory facts, computed by ansible.builtin.setup's own Linux hardware code."""
    hardware = LinuxHardware(module)
    cpu = hardware.get_cpu_facts(collected_facts={"ansible_architecture": architecture})
    memory = hardware.get_memory_facts()
    missing = [k for k in ("processor_vcpus", "processor_count", "processor_cores", "processor_threads_per_core")
               if k not in cpu] + [k for k in ("memtotal_mb",) if k not in memory]
    if missing:
        module.fail_json(msg="cannot read %s from /proc/cpuinfo and /proc/meminfo" % ", ".join(missing))
    return {
        "cpus": int(cpu["processor_vcpus"]),
        "sockets": int(cpu["processor_count"]),
        "cores_per_socket": int(cpu["processor_cores"]),
        "threads_per_core": int(cpu["processor_threads_per_core"]),
        "memtotal_mb": int(memory["memtotal_mb"]),
    }


def nvml_plugin(paths, architecture):
    for path in paths:
        path = path.replace("{arch}", architecture)
        if os.path.exists(path):
            return path
    return None


def describe(cpu_mem, gpus, plugin):
    model = gpus[0]["name"] if gpus else ""
    node = dict(cpu_mem)
    node.update({
        "gpu_count": len(gpus),
        "gpu_model": model or "",
        "gpu_type": gpu_type(model),
        "gpu_indexes": [g["index"] for g in gpus],
        "gres_autodetect": "nvml" if plugin else "off",
    })
    return node


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi_path=dict(type="path"),
            nvml_plugin_paths=dict(type="list", elements="str",
                                   default=["/usr/lib/{arch}-linux-gnu/slurm-wlm/gpu_nvml.so",
                                            "/usr/lib64/slurm/gpu_nvml.so"]),
        ),
        supports_check_mode=True,
    )
    architecture = platform.machine()
    cpu_mem = cpu_memory(module, architecture)

    runner = ToolRunner(module, "nvidia-smi", module.params["nvidia_smi_path"], option="nvidia_smi_path")
    data = read_gpus(runner, module.warn)

    plugin = nvml_plugin(module.params["nvml_plugin_paths"], architecture)
    module.exit_json(changed=False, node=describe(cpu_mem, data["gpus"], plugin), nvml_plugin=plugin)


if __name__ == "__main__":
    main()
