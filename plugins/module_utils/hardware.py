# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The hardware catalogue: what ClusterForge knows of each GPU model and each validated platform, with sources.

One table for every reader (issue 41): preflight judges power limits, clocks, driver branches and MIG against
:data:`GPU_MODELS` (plugins/plugin_utils/preflight_gpu.py); validation judges NCCL bandwidth and InfiniBand rates
against :data:`VALIDATION_PROFILES` (the validate role through the filter ``validation_profile``, preflight's check
of ``validate_profile``, and the judge's default NCCL figures in module_utils/validation_thresholds.py). A figure that
is not known with confidence is ``None``, and the rule that needs it is skipped rather than guessed.

Stdlib only, no Ansible import.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# GPU models, keyed by cluster_gpu_type (preflight judges every GPU setting against them). Fields:
#   name                  what messages call the model
#   architecture          volta, ampere, ada, hopper or blackwell
#   gpus_per_node_max     GPUs one node can hold (HGX/DGX boards 8, GB200 compute trays 4, 4U PCIe servers 10)
#   power_min_watts       power.min_limit (nvidia-smi -pl floor); None: not known with confidence
#   power_max_watts       power.max_limit (nvidia-smi -pl ceiling); also the default limit the rack budget uses
#                         when no cap is set, unless power_default_watts says otherwise
#   power_default_watts   the default limit when it is below power_max_watts (None: same as power_max_watts)
#   sm_clock_max_mhz      clocks.max.sm: the highest -lgc max / -ac graphics value
#   memory_clock_max_mhz  clocks.max.memory: the highest -lmc max / -ac memory value
#   open_kernel_module    "unsupported" (pre-Turing), "supported", "recommended" (Hopper) or "required" (Blackwell)
#   min_branch/max_branch the driver branches that support the model (None: no bound known with confidence)
#   mig                   whether the model supports MIG (None: not listed by NVIDIA, rule skipped)
#   nvswitch              "hgx8": an 8-GPU node of this model is an HGX/DGX board whose GPUs talk through NVSwitch
#                         (Fabric Manager required); "never": no NVSwitch exists for the model; None: either
# Sources (abbreviated in the comments): PRACTICE = ../shared/PRACTICE.md section 1; DS = NVIDIA's product
# datasheet of the model; MIG = NVIDIA MIG user guide, "Supported GPUs"; KM = NVIDIA driver installation guide,
# "Kernel Modules" (open modules: Turing and newer, from R515; proprietary required for Maxwell/Pascal/Volta) and
# NVIDIA's "transitions fully towards open-source GPU kernel modules" (Grace Hopper and Blackwell: open only);
# R580 = NVIDIA: R580 is the last driver branch for Maxwell, Pascal and Volta (legacy 580 branch).
GPU_MODELS = {
    # PRACTICE: -pl range 200-700 W (SXM TDP 700 W), SM max 1980 MHz, -ac 2619,1980; DS; MIG; KM (open recommended);
    # Hopper support from R525 (first LTSB for H100).
    "h100": {"name": "H100 SXM", "architecture": "hopper", "gpus_per_node_max": 8,
             "power_min_watts": 200, "power_max_watts": 700, "power_default_watts": None,
             "sm_clock_max_mhz": 1980, "memory_clock_max_mhz": 2619,
             "open_kernel_module": "recommended", "min_branch": 525, "max_branch": None,
             "mig": True, "nvswitch": "hgx8"},
    # DS H100 PCIe: 300-350 W configurable; PRACTICE (NVIDIA final H100 spec table): PCIe boost 1755 MHz; MIG.
    "h100_pcie": {"name": "H100 PCIe", "architecture": "hopper", "gpus_per_node_max": 10,
                  "power_min_watts": None, "power_max_watts": 350, "power_default_watts": None,
                  "sm_clock_max_mhz": 1755, "memory_clock_max_mhz": None,
                  "open_kernel_module": "recommended", "min_branch": 525, "max_branch": None,
                  "mig": True, "nvswitch": "never"},
    # DS H100 NVL: 350-400 W configurable, NVLink bridges (no NVSwitch); MIG (H100-PCIE 94GB). Clocks not confirmed.
    "h100_nvl": {"name": "H100 NVL", "architecture": "hopper", "gpus_per_node_max": 10,
                 "power_min_watts": None, "power_max_watts": 400, "power_default_watts": None,
                 "sm_clock_max_mhz": None, "memory_clock_max_mhz": None,
                 "open_kernel_module": "recommended", "min_branch": 525, "max_branch": None,
                 "mig": True, "nvswitch": "never"},
    # DS H200 SXM: up to 700 W; PRACTICE: -q -d CLOCK Max Graphics 1980 MHz, -ac 3201,1980; MIG. Floor not confirmed.
    "h200": {"name": "H200 SXM", "architecture": "hopper", "gpus_per_node_max": 8,
             "power_min_watts": None, "power_max_watts": 700, "power_default_watts": None,
             "sm_clock_max_mhz": 1980, "memory_clock_max_mhz": 3201,
             "open_kernel_module": "recommended", "min_branch": 525, "max_branch": None,
             "mig": True, "nvswitch": "hgx8"},
    # DS H200 NVL: up to 600 W, NVLink bridges; MIG. Clocks not confirmed.
    "h200_nvl": {"name": "H200 NVL", "architecture": "hopper", "gpus_per_node_max": 10,
                 "power_min_watts": None, "power_max_watts": 600, "power_default_watts": None,
                 "sm_clock_max_mhz": None, "memory_clock_max_mhz": None,
                 "open_kernel_module": "recommended", "min_branch": 525, "max_branch": None,
                 "mig": True, "nvswitch": "never"},
    # H800 SXM: the H100 SXM5 board with fewer NVLinks (DS: 700 W, same clocks). MIG not listed by NVIDIA.
    "h800": {"name": "H800 SXM", "architecture": "hopper", "gpus_per_node_max": 8,
             "power_min_watts": None, "power_max_watts": 700, "power_default_watts": None,
             "sm_clock_max_mhz": 1980, "memory_clock_max_mhz": None,
             "open_kernel_module": "recommended", "min_branch": 525, "max_branch": None,
             "mig": None, "nvswitch": "hgx8"},
    # H800 PCIe: the H100 PCIe board (DS: 350 W). Clocks not confirmed.
    "h800_pcie": {"name": "H800 PCIe", "architecture": "hopper", "gpus_per_node_max": 10,
                  "power_min_watts": None, "power_max_watts": 350, "power_default_watts": None,
                  "sm_clock_max_mhz": None, "memory_clock_max_mhz": None,
                  "open_kernel_module": "recommended", "min_branch": 525, "max_branch": None,
                  "mig": None, "nvswitch": "never"},
    # DS A100 SXM4: 400 W TDP, up to 500 W on custom-thermal (CTS) HGX boards (the ceiling used here), boost
    # 1410 MHz; memory clock differs between 40 GB and 80 GB; MIG; Ampere support from R450 (CUDA 11.0).
    "a100": {"name": "A100 SXM4", "architecture": "ampere", "gpus_per_node_max": 8,
             "power_min_watts": None, "power_max_watts": 500, "power_default_watts": 400,
             "sm_clock_max_mhz": 1410, "memory_clock_max_mhz": None,
             "open_kernel_module": "supported", "min_branch": 450, "max_branch": None,
             "mig": True, "nvswitch": "hgx8"},
    # DS A100 PCIe: 250 W (40 GB) / 300 W (80 GB), boost 1410 MHz; MIG.
    "a100_pcie": {"name": "A100 PCIe", "architecture": "ampere", "gpus_per_node_max": 10,
                  "power_min_watts": None, "power_max_watts": 300, "power_default_watts": None,
                  "sm_clock_max_mhz": 1410, "memory_clock_max_mhz": None,
                  "open_kernel_module": "supported", "min_branch": 450, "max_branch": None,
                  "mig": True, "nvswitch": "never"},
    # A800 SXM4: the A100 SXM4 board with fewer NVLinks (DS: 400 W, boost 1410 MHz). MIG not listed by NVIDIA.
    "a800": {"name": "A800 SXM4", "architecture": "ampere", "gpus_per_node_max": 8,
             "power_min_watts": None, "power_max_watts": 400, "power_default_watts": None,
             "sm_clock_max_mhz": 1410, "memory_clock_max_mhz": None,
             "open_kernel_module": "supported", "min_branch": 450, "max_branch": None,
             "mig": None, "nvswitch": "hgx8"},
    # A800 PCIe (DS: 300 W, boost 1410 MHz).
    "a800_pcie": {"name": "A800 PCIe", "architecture": "ampere", "gpus_per_node_max": 10,
                  "power_min_watts": None, "power_max_watts": 300, "power_default_watts": None,
                  "sm_clock_max_mhz": 1410, "memory_clock_max_mhz": None,
                  "open_kernel_module": "supported", "min_branch": 450, "max_branch": None,
                  "mig": None, "nvswitch": "never"},
    # DS HGX B200: up to 1,000 W per GPU; KM: Blackwell needs the open modules; Blackwell support from R570; MIG.
    # Clocks not confirmed.
    "b200": {"name": "B200", "architecture": "blackwell", "gpus_per_node_max": 8,
             "power_min_watts": None, "power_max_watts": 1000, "power_default_watts": None,
             "sm_clock_max_mhz": None, "memory_clock_max_mhz": None,
             "open_kernel_module": "required", "min_branch": 570, "max_branch": None,
             "mig": True, "nvswitch": "hgx8"},
    # DS HGX B100: up to 700 W per GPU; KM; R570. MIG not listed by NVIDIA.
    "b100": {"name": "B100", "architecture": "blackwell", "gpus_per_node_max": 8,
             "power_min_watts": None, "power_max_watts": 700, "power_default_watts": None,
             "sm_clock_max_mhz": None, "memory_clock_max_mhz": None,
             "open_kernel_module": "required", "min_branch": 570, "max_branch": None,
             "mig": None, "nvswitch": "hgx8"},
    # DS GB200 NVL72: up to 1,200 W per Blackwell GPU, 4 GPUs per compute tray; KM; R570; MIG. The NVLink switch
    # trays are outside the node, so no NVSwitch rule.
    "gb200": {"name": "GB200", "architecture": "blackwell", "gpus_per_node_max": 4,
              "power_min_watts": None, "power_max_watts": 1200, "power_default_watts": None,
              "sm_clock_max_mhz": None, "memory_clock_max_mhz": None,
              "open_kernel_module": "required", "min_branch": 570, "max_branch": None,
              "mig": True, "nvswitch": None},
    # DS L40S: 350 W max, boost 2520 MHz; no MIG (MIG list).
    "l40s": {"name": "L40S", "architecture": "ada", "gpus_per_node_max": 8,
             "power_min_watts": None, "power_max_watts": 350, "power_default_watts": None,
             "sm_clock_max_mhz": 2520, "memory_clock_max_mhz": None,
             "open_kernel_module": "supported", "min_branch": None, "max_branch": None,
             "mig": False, "nvswitch": "never"},
    # DS L40: 300 W max, boost 2490 MHz; no MIG.
    "l40": {"name": "L40", "architecture": "ada", "gpus_per_node_max": 8,
            "power_min_watts": None, "power_max_watts": 300, "power_default_watts": None,
            "sm_clock_max_mhz": 2490, "memory_clock_max_mhz": None,
            "open_kernel_module": "supported", "min_branch": None, "max_branch": None,
            "mig": False, "nvswitch": "never"},
    # DS L4: 72 W max, configurable down to 40 W, boost 2040 MHz; no MIG.
    "l4": {"name": "L4", "architecture": "ada", "gpus_per_node_max": 8,
           "power_min_watts": 40, "power_max_watts": 72, "power_default_watts": None,
           "sm_clock_max_mhz": 2040, "memory_clock_max_mhz": None,
           "open_kernel_module": "supported", "min_branch": None, "max_branch": None,
           "mig": False, "nvswitch": "never"},
    # DS A10: 150 W max, boost 1695 MHz; no MIG.
    "a10": {"name": "A10", "architecture": "ampere", "gpus_per_node_max": 8,
            "power_min_watts": None, "power_max_watts": 150, "power_default_watts": None,
            "sm_clock_max_mhz": 1695, "memory_clock_max_mhz": None,
            "open_kernel_module": "supported", "min_branch": None, "max_branch": None,
            "mig": False, "nvswitch": "never"},
    # DS V100 SXM2: 300 W, boost 1530 MHz; KM: Volta needs the proprietary modules; R580 is its last branch;
    # no MIG; 8-GPU HGX-1 boards use a hybrid cube mesh (no NVSwitch), HGX-2 uses NVSwitch: no rule.
    "v100": {"name": "V100 SXM2", "architecture": "volta", "gpus_per_node_max": 8,
             "power_min_watts": None, "power_max_watts": 300, "power_default_watts": None,
             "sm_clock_max_mhz": 1530, "memory_clock_max_mhz": None,
             "open_kernel_module": "unsupported", "min_branch": None, "max_branch": 580,
             "mig": False, "nvswitch": None},
    # DS V100 PCIe: 250 W, boost 1380 MHz; KM; R580.
    "v100_pcie": {"name": "V100 PCIe", "architecture": "volta", "gpus_per_node_max": 10,
                  "power_min_watts": None, "power_max_watts": 250, "power_default_watts": None,
                  "sm_clock_max_mhz": 1380, "memory_clock_max_mhz": None,
                  "open_kernel_module": "unsupported", "min_branch": None, "max_branch": 580,
                  "mig": False, "nvswitch": "never"},
}

# Platforms validation measures against (validate_profile picks one; the role's default is
# <cluster_gpu_type>_sxm_ndr). Large-message figures, Ring algorithm for the network. Fields:
#   nccl_single_node_busbw_gbps   all_reduce_perf bus bandwidth of the node's GPUs (NVLink/NVSwitch)
#   nccl_multi_node_busbw_gbps    all_reduce_perf bus bandwidth across nodes (the fabric)
#   ib_rate_gbps                  each InfiniBand port's line rate (ibstat "Rate"; ib_write_bw is judged against it)
#   ib_ports_per_node             compute-fabric ports a node has (one HCA per GPU)
# A threshold is figure x validate_thresholds.nccl_min_fraction (default 0.9); ib_write_bw must reach
# ib_write_bw_min_fraction (default 0.95) of the port's line rate. Sources: ../shared/PRACTICE.md section 5 and
# docs/operations.md:
#   8x H100/H200 SXM NVLink4 in one node, Ring:   about 370 GB/s all_reduce busbw (NVLink SHARP peaks higher; not a
#                                                  wire rate)
#   8x HDR 200G across nodes:                      about 192 GB/s (DGX A100 measurement)
#   8x NDR 400G (ConnectX-7, 48-49 GB/s per NIC):  about 385 GB/s Ring ceiling
VALIDATION_PROFILES = {
    "h100_sxm_ndr": {"nccl_single_node_busbw_gbps": 370, "nccl_multi_node_busbw_gbps": 385,
                     "ib_rate_gbps": 400, "ib_ports_per_node": 8},
    "h100_sxm_hdr": {"nccl_single_node_busbw_gbps": 370, "nccl_multi_node_busbw_gbps": 192,
                     "ib_rate_gbps": 200, "ib_ports_per_node": 8},
    "h200_sxm_ndr": {"nccl_single_node_busbw_gbps": 370, "nccl_multi_node_busbw_gbps": 385,
                     "ib_rate_gbps": 400, "ib_ports_per_node": 8},
}
# The profile the judge's defaults come from (validate_thresholds without a profile).
DEFAULT_VALIDATION_PROFILE = "h100_sxm_ndr"

# The compute fabrics a cluster may have (cluster_fabric_type), and the one a role takes where the inventory sets
# none (preflight requires it; a role run on its own, without preflight, takes this).
FABRIC_TYPES = ("infiniband", "roce", "ethernet", "none")
DEFAULT_FABRIC = "infiniband"


def fabric_type(value):
    """The cluster's compute fabric: ``value`` (cluster_fabric_type), or DEFAULT_FABRIC where it is not set."""
    return DEFAULT_FABRIC if value is None or not str(value).strip() else str(value).strip()


def validation_profile(name):
    """The figures of validation profile ``name`` (a copy); ValueError naming the known ones when there is none."""
    if not isinstance(name, str) or name not in VALIDATION_PROFILES:
        raise ValueError("validate_profile %r is not a hardware profile of ClusterForge's catalogue "
                         "(plugins/module_utils/hardware.py); known: %s" % (name, ", ".join(sorted(VALIDATION_PROFILES))))
    return dict(VALIDATION_PROFILES[name])
