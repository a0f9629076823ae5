# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The thresholds of the validation judge: their defaults, the tolerances the checks allow and the reading of a
user's overrides (``_thresholds``).

plugins/plugin_utils/preflight_validate.py checks validate_thresholds against the same DEFAULT_THRESHOLDS, so the
preflight and the judge cannot disagree on which keys exist.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.clusterforge.gpu.plugins.module_utils.hardware import DEFAULT_VALIDATION_PROFILE, VALIDATION_PROFILES
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_common import (
    ValidationError,
    _is_map,
    _number,
)

# The NCCL figures default to the catalogue's default platform (module_utils/hardware.py); the role passes its
# profile's figures (validate_profile), which a user's validate_thresholds override.
DEFAULT_THRESHOLDS = {
    "nccl_single_node_busbw_gbps": VALIDATION_PROFILES[DEFAULT_VALIDATION_PROFILE]["nccl_single_node_busbw_gbps"],
    "nccl_multi_node_busbw_gbps": VALIDATION_PROFILES[DEFAULT_VALIDATION_PROFILE]["nccl_multi_node_busbw_gbps"],
    "nccl_min_fraction": 0.9,
    "ib_write_bw_min_fraction": 0.95,
    "storage_write_gbytes_per_s_per_node": 1.0,
    "storage_read_gbytes_per_s_per_node": 1.0,
    "storage_write_gbytes_per_s_aggregate": 2.0,
    "storage_read_gbytes_per_s_aggregate": 2.0,
    "checkpoint_max_stall_percent": 5.0,
    "bytes_per_parameter": 16,
}
# Thresholds that are fractions of a nominal figure.
_FRACTIONS = ("nccl_min_fraction", "ib_write_bw_min_fraction")

# The GPU settings' tolerances are the contract's (module_utils/gpu_settings.py), shared with the rolling gate.
# Clock event reasons that mean the GPU protects itself (heat, power brake); not the idle or power-cap reasons.
_BAD_CLOCK_REASONS = ("hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown")


def _thresholds(thresholds):
    if thresholds is None:
        thresholds = {}
    if not _is_map(thresholds):
        raise ValidationError("validation_judge: thresholds must be a dict, got %s" % type(thresholds).__name__)
    unknown = sorted(to_text(k) for k in thresholds if to_text(k) not in DEFAULT_THRESHOLDS)
    if unknown:
        raise ValidationError("validation_judge: unknown threshold key(s) %s; known keys: %s"
                              % (", ".join(unknown), ", ".join(sorted(DEFAULT_THRESHOLDS))))
    merged = dict(DEFAULT_THRESHOLDS)
    for key, value in thresholds.items():
        key = to_text(key)
        if value is None:
            continue  # null means "use the default"
        number = _number(value)
        if number is None or number <= 0:
            raise ValidationError("validation_judge: threshold %s must be a positive number, got %r" % (key, value))
        if key in _FRACTIONS and number > 1:
            raise ValidationError("validation_judge: threshold %s is a fraction (0 < x <= 1), got %r" % (key, value))
        merged[key] = int(number) if isinstance(value, int) and not isinstance(value, bool) else number
    return merged
