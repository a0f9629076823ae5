# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight rules: the variables of the validate role (playbooks/validate.yml, the last stage of site.yml).

Validation runs after every role has changed the cluster and takes minutes of stress tests; a threshold key with a
typo or a hardware profile that does not exist would only be found at its very end. These rules find them first.
The thresholds are judged by the same table the judge uses (plugins/module_utils/validation_thresholds.py), so the two cannot
disagree.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.clusterforge.gpu.plugins.module_utils.hardware import VALIDATION_PROFILES
from ansible_collections.clusterforge.gpu.plugins.module_utils.nccl_tests import size_problem
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_thresholds import DEFAULT_THRESHOLDS
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.preflight_common import MISSING
from ansible_collections.clusterforge.gpu.plugins.module_utils.values import is_number, type_name

FRACTIONS = ("nccl_min_fraction", "ib_write_bw_min_fraction")
# The type and range of every number (and an absolute path for a type path option) are judged for every role by
# the spec rules with the ranges of roles/validate/meta/preflight.yml (preflight_specs, preflight_generic).
ABSOLUTE_PATHS = ("validate_storage_path", "validate_report_dir")
HCA_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def profiles():
    """The validation profiles of the hardware catalogue (module_utils/hardware.py), as the role reads them."""
    return VALIDATION_PROFILES


def check(inv, opts):
    errors = []
    known = profiles()
    for host in inv.hosts("gpu_nodes"):
        profile = inv.get(host, "validate_profile", MISSING)
        if profile is MISSING:
            gtype = inv.get(host, "cluster_gpu_type", "h100")
            profile = "%s_sxm_ndr" % gtype
            if isinstance(gtype, str) and profile not in known:
                errors.append("%s: validate_profile: not set, and the default for cluster_gpu_type %s (%s) is not a "
                              "hardware profile of the catalogue; set validate_profile to one of %s"
                              % (host, gtype, profile, ", ".join(sorted(known))))
        elif not isinstance(profile, str) or profile not in known:
            errors.append("%s: validate_profile: %r is not a hardware profile of the catalogue (known: %s)"
                          % (host, profile, ", ".join(sorted(known))))
    for host in inv.all_hosts:
        thresholds = inv.get(host, "validate_thresholds", MISSING)
        if thresholds is not MISSING:
            errors.extend(_threshold_errors(host, thresholds))
        for name in ABSOLUTE_PATHS:
            value = inv.get(host, name, MISSING)
            if not isinstance(value, str) or not value.startswith("/"):
                continue  # null, or not an absolute path: the spec rules report it
            if any(c in value for c in "\n\"'`$;&|"):
                errors.append("%s: %s: must be an absolute path without quotes or shell characters, got %r"
                              % (host, name, value))
        value = inv.get(host, "validate_nccl_max_bytes", MISSING)
        if value is not MISSING and size_problem(value, "validate_nccl_max_bytes"):
            # the modules' own rule (module_utils/nccl_tests.py)
            errors.append("%s: %s" % (host, size_problem(value, "validate_nccl_max_bytes")))
        value = inv.get(host, "validate_ib_write_bw_hcas", MISSING)
        if value is not MISSING and (not isinstance(value, list) or not value
                                     or not all(isinstance(h, str) and HCA_RE.match(h) for h in value)):
            errors.append("%s: validate_ib_write_bw_hcas: must be a non-empty list of HCA names (e.g. [mlx5_0]), "
                          "got %r" % (host, value))
        value = inv.get(host, "validate_models", MISSING)
        if value is not MISSING:
            errors.extend(_model_errors(host, value))
    return errors


def _threshold_errors(host, thresholds):
    if thresholds is None:
        return []
    if not isinstance(thresholds, dict):
        return ["%s: validate_thresholds: must be a dict of threshold overrides, got a %s"
                % (host, type_name(thresholds))]
    errors = []
    known = set(DEFAULT_THRESHOLDS) | set(k for p in profiles().values() if isinstance(p, dict) for k in p)
    for key, value in thresholds.items():
        if str(key) not in known:
            errors.append("%s: validate_thresholds.%s: not a threshold validation knows (known: %s)"
                          % (host, key, ", ".join(sorted(known))))
            continue
        if value is None:
            continue
        if not is_number(value) or value <= 0:
            errors.append("%s: validate_thresholds.%s: must be a positive number, got %r" % (host, key, value))
        elif str(key) in FRACTIONS and value > 1:
            errors.append("%s: validate_thresholds.%s: is a fraction of the nominal figure (0 < x <= 1), got %r"
                          % (host, key, value))
    return errors


def _model_errors(host, models):
    if models is None:
        return []
    if not isinstance(models, list):
        return ["%s: validate_models: must be a list of {name, parameters_billion}, got a %s" % (host, type_name(models))]
    errors = []
    for i, model in enumerate(models):
        if not isinstance(model, dict):
            errors.append("%s: validate_models[%d]: must be a dict with name and parameters_billion, got %r"
                          % (host, i, model))
            continue
        params = model.get("parameters_billion")
        if not is_number(params) or params <= 0:
            errors.append("%s: validate_models[%d].parameters_billion: must be a positive number (billions of "
                          "parameters), got %r" % (host, i, params))
    return errors
