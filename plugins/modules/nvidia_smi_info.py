#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nvidia_smi_info
short_description: Report NVIDIA GPUs, their power, clock and health state, and the GPU/NIC topology
version_added: 1.0.0
description:
  - Runs C(nvidia-smi -q -x) once and, unless O(topology=false), C(nvidia-smi topo -m) once, and returns
    the parsed result. Never changes anything.
  - Works with the XML of old drivers (C(power_readings), C(clocks_throttle_reasons)) and of R535 and newer
    (C(gpu_power_readings), C(clocks_event_reasons)); values the driver reports as N/A are V(null).
options:
  topology:
    description:
      - Also run C(nvidia-smi topo -m) and return the GPU/NIC connection matrix with CPU and NUMA affinity.
      - When that command fails (some virtual machines), the module warns and returns RV(topology) as V(null).
    type: bool
    default: true
  nvidia_smi_path:
    description:
      - Path of the C(nvidia-smi) binary. Looked up on E(PATH) and in the sbin directories when omitted.
    type: path
  state_file:
    description:
      - "The state file of M(clusterforge.gpu.nvidia_smi) (its O(clusterforge.gpu.nvidia_smi#module:state_file)):
        each GPU's RV(gpus[].applied) is what that module recorded as applied to it. Only read."
    type: path
    default: /etc/clusterforge/nvidia_smi_state.json
extends_documentation_fragment:
  - clusterforge.gpu.attributes
  - clusterforge.gpu.attributes.INFO_MODULE
requirements:
  - The NVIDIA driver and its C(nvidia-smi).
seealso:
  - module: clusterforge.gpu.nvidia_smi
author:
  - ClusterForge developers (@clusterforge)
"""

EXAMPLES = r"""
- name: Read the GPUs
  clusterforge.gpu.nvidia_smi_info:
  register: __gpu_info

- name: Every GPU is an H100 without pending row remaps or uncorrectable ECC errors
  ansible.builtin.assert:
    that:
      - __gpu_info.gpus | length == 8
      - __gpu_info.gpus | selectattr('remapped_rows_pending') | list | length == 0
      - __gpu_info.gpus | map(attribute='ecc.volatile_uncorrectable') | select('gt', 0) | list | length == 0

- name: GPUs only, no topology
  clusterforge.gpu.nvidia_smi_info:
    topology: false
    nvidia_smi_path: /usr/bin/nvidia-smi
"""

RETURN = r"""
driver_version:
  description: The driver version.
  returned: always
  type: str
  sample: "550.90.07"
cuda_version:
  description: The highest CUDA version the driver supports.
  returned: always
  type: str
  sample: "12.4"
gpu_count:
  description: The number of GPUs in the output.
  returned: always
  type: int
  sample: 8
truncated:
  description: Whether the XML was cut short (the GPUs read up to that point are still returned).
  returned: always
  type: bool
  sample: false
state_file:
  description: The state file read for RV(gpus[].applied).
  returned: always
  type: str
  sample: /etc/clusterforge/nvidia_smi_state.json
state_file_problem:
  description: Why the state file could not be read (then no GPU has a record); V(null) when it was read or is absent.
  returned: always
  type: str
  sample: null
gpus:
  description: One entry per GPU, in index order. Values the driver does not report are V(null).
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: The GPU index (its position in the output).
      type: int
      sample: 0
    uuid:
      description: The GPU UUID.
      type: str
      sample: GPU-b1e053f1-6789-f495-7e49-37a1e102685c
    pci_bus_id:
      description: The PCI bus id.
      type: str
      sample: "00000000:18:00.0"
    name:
      description: The product name.
      type: str
      sample: NVIDIA H100 80GB HBM3
    persistence_mode:
      description: Whether persistence mode is enabled.
      type: bool
      sample: true
    mig_enabled:
      description: Whether MIG mode is enabled; V(null) on GPUs without MIG.
      type: bool
      sample: false
    power_limit_w:
      description: The requested power limit (C(power.limit); C(requested_power_limit) in the new XML).
      type: float
      sample: 700.0
    enforced_power_limit_w:
      description: The power limit the driver enforces after every limiter, including out-of-band caps.
      type: float
      sample: 700.0
    default_power_limit_w:
      description: The default power limit.
      type: float
      sample: 700.0
    min_power_limit_w:
      description: The lowest settable power limit.
      type: float
      sample: 200.0
    max_power_limit_w:
      description: The highest settable power limit.
      type: float
      sample: 700.0
    power_draw_w:
      description: The current power draw.
      type: float
      sample: 72.0
    max_sm_clock_mhz:
      description: The maximum SM clock.
      type: int
      sample: 1980
    max_mem_clock_mhz:
      description: The maximum memory clock.
      type: int
      sample: 2619
    applications_graphics_clock_mhz:
      description: The application graphics clock; V(null) where deprecated.
      type: int
      sample: 1980
    applications_mem_clock_mhz:
      description: The application memory clock; V(null) where deprecated.
      type: int
      sample: 2619
    ecc:
      description: ECC mode and error counts (sums of SRAM and DRAM counts on new drivers).
      type: dict
      sample: {"mode": "Enabled", "volatile_uncorrectable": 0, "volatile_correctable": 0,
               "aggregate_uncorrectable": 0, "aggregate_correctable": 0}
    retired_pages_pending:
      description: Whether a page retirement is pending (V(null) on GPUs that use row remapping instead).
      type: bool
      sample: false
    remapped_rows_pending:
      description: Whether a row remap is pending (needs a GPU reset); V(null) on GPUs without row remapping.
      type: bool
      sample: false
    clock_event_reasons:
      description: The clock event (formerly "throttle") reasons, name to active.
      type: dict
      sample: {"gpu_idle": true, "sw_power_cap": false, "hw_slowdown": false}
    temperature_c:
      description: The GPU temperature in Celsius.
      type: int
      sample: 34
    applied:
      description:
        - What M(clusterforge.gpu.nvidia_smi) recorded as applied to this GPU (by UUID) in O(state_file), the record
          its boot program restores; V(null) when it recorded nothing for this GPU.
        - C(locked_gpu_clocks)/C(locked_memory_clocks) hold the range the driver clamped the lock to and the one
          requested; V(null) for a setting means it was reset to the driver's default.
      type: dict
      sample: {"persistence_mode": true, "power_limit_watts": 700,
               "locked_gpu_clocks": {"min": 1980, "max": 1980, "requested_min": 1980, "requested_max": 1980}}
topology:
  description:
    - The C(nvidia-smi topo -m) matrix. V(null) when O(topology=false) or when the command failed.
  returned: always
  type: dict
  contains:
    gpus:
      description: The GPU labels.
      type: list
      elements: str
      sample: ["GPU0", "GPU1"]
    nics:
      description: The NIC column labels (C(NIC0) on new drivers, C(mlx5_0) on old ones).
      type: list
      elements: str
      sample: ["NIC0", "NIC1"]
    nic_names:
      description: NIC label to device name, from the "NIC Legend".
      type: dict
      sample: {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    links:
      description: The connection type between two devices, C(links[a][b]).
      type: dict
      sample: {"GPU0": {"GPU0": "X", "GPU1": "NV18", "NIC0": "PIX"}}
    cpu_affinity:
      description: The CPU list per GPU.
      type: dict
      sample: {"GPU0": "0-55,112-167"}
    numa_affinity:
      description: The NUMA node per GPU (V(null) for N/A).
      type: dict
      sample: {"GPU0": 0}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner
from ansible_collections.clusterforge.gpu.plugins.module_utils.gpu_settings import STATE_FILE, read_records, record_of
from ansible_collections.clusterforge.gpu.plugins.module_utils.nvidia_smi import parse_topo_matrix, read_gpus


def main():
    module = AnsibleModule(
        argument_spec=dict(
            topology=dict(type="bool", default=True),
            nvidia_smi_path=dict(type="path"),
            state_file=dict(type="path", default=STATE_FILE),
        ),
        supports_check_mode=True,
    )
    runner = ToolRunner(module, "nvidia-smi", module.params["nvidia_smi_path"], option="nvidia_smi_path")
    data = read_gpus(runner, module.warn)
    records, problem = read_records(module.params["state_file"])
    for gpu in data["gpus"]:
        gpu["applied"] = record_of(records, gpu.get("uuid"))

    topology = None
    if module.params["topology"]:
        rc, out, err = runner.run(["topo", "-m"], check_rc=False)
        if rc == 0:
            topology = parse_topo_matrix(out)
        else:
            module.warn("nvidia-smi topo -m failed (rc=%s): %s" % (rc, (out or err or "").strip()[:500]))

    module.exit_json(
        changed=False,
        driver_version=data["driver_version"],
        cuda_version=data["cuda_version"],
        gpu_count=len(data["gpus"]),
        truncated=data["truncated"],
        gpus=data["gpus"],
        state_file=module.params["state_file"],
        state_file_problem=problem,
        topology=topology,
    )


if __name__ == "__main__":
    main()
