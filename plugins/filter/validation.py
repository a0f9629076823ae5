# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the validation playbook: read benchmark output, judge a cluster against thresholds, render a report.

- ``nccl_tests_results`` / ``perftest_results`` / ``dd_results``: benchmark output -> numbers.
- ``checkpoint_estimate``: how long a checkpoint of each model stalls training at a measured write bandwidth.
- ``validation_judge``: measured results (module results and the numbers above) + thresholds -> a report of
  checks, one per subject (node, GPU, port, pair, path), each ``pass``, ``fail`` or ``skip``. What was not
  measured is a ``skip`` that says why, never a ``pass``.
- ``validation_node_record``: one node's measuring tasks' results -> the node as the judge takes it.
- ``validation_html``: that report as one self-contained HTML page (no external CSS, JS or fonts: clusters are
  often air-gapped).
- ``storage_aggregate``: each node's storage_probe measurement -> the bandwidth of every node at once.
- ``validation_node_verdicts``: that report -> each node's verdict for the deep checks on drained nodes (pass only
  when every required check ran and passed), and what to do with the node (resume, relabel, drain, keep).
- ``validation_loopback_plan`` / ``validation_loopback_results``: the deep checks' ib_write_bw loopback on each HCA
  of a node, and its results as the judge takes them.
- ``validation_ib_line_rate``: the line rate an ib_write_bw test of an HCA is judged against (its port's, else the
  profile's).
- ``validation_ib_client_results`` / ``validation_ib_round_results``: the fabric rounds' ib_write_bw results (a
  client through ssh, the rounds through srun) as the judge takes them, read like the loopback's.
- ``validation_deep_selection_lines`` / ``validation_deep_states`` / ``validation_deep_outcome_lines``: the deep
  checks' word on each node before they run, each node's state for the verdicts, and what they did to each node.

The work is done in module_utils, one file per job: validation_parsers (benchmark output, on top of the one
nccl-tests/perftest parser in perf), validation_thresholds (defaults, tolerances, overrides), validation_judge (and the
deep checks' node verdicts), validation_report (the HTML page), validation_deep (the deep checks' loopback) and
validation_common (coercion helpers). They raise ValidationError (a ValueError); this file turns it into
AnsibleFilterError with the same message.

Documentation lives beside this file in one ``<filter>.yml`` per filter.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import validation_deep as _deep
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import validation_judge as _judge
from ansible_collections.clusterforge.gpu.plugins.module_utils import validation_parsers as _parsers
from ansible_collections.clusterforge.gpu.plugins.plugin_utils import validation_report as _report
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_common import ValidationError


def _call(func, *args):
    try:
        return func(*args)
    except ValidationError as e:
        # the same error, message and (empty) cause chain as when the filters lived in this file
        raise AnsibleFilterError(to_native(e)) from None


def nccl_tests_results(stdout):
    """nccl-tests output (all_reduce_perf...) -> parse_nccl_tests() plus ``busbw_peak_gbps``, ``ok``, ``problems``."""
    return _call(_parsers.nccl_tests_results, stdout)


def perftest_results(stdout):
    """perftest output (ib_write_bw...) -> parse_perftest() plus ``bw_peak_gbits`` and ``ok``."""
    return _call(_parsers.perftest_results, stdout)


def dd_results(stderr):
    """GNU dd's final stderr line -> ``{bytes, seconds, gbytes_per_s}``."""
    return _call(_parsers.dd_results, stderr)


def checkpoint_estimate(models, write_gbytes_per_s, interval_minutes, bytes_per_parameter=16):
    """Per model: checkpoint size and how much of each hour training stalls writing it."""
    return _call(_parsers.checkpoint_estimate, models, write_gbytes_per_s, interval_minutes, bytes_per_parameter)


def validation_judge(measured, thresholds=None):
    """Judge measured cluster results against thresholds; see validation_judge.yml for the input and the report."""
    return _call(_judge.validation_judge, measured, thresholds)


def storage_aggregate(results, path=None):
    """Every node's storage_probe measurement -> the bandwidth of all of them at once; see storage_aggregate.yml."""
    return _call(_judge.storage_aggregate, results, path)


def validation_held_nodes(nodes, own_prefixes):
    """{node: state and reason} of the nodes their owner holds out of service; see validation_held_nodes.yml."""
    return _call(_judge.held_nodes, nodes, own_prefixes)


def validation_node_record(results, idle, gpu_count, gpu_settings, profile, acs_disable=False,
                           acs_require_disabled=False, ib_ports_per_node=None, bios_enabled=False, bios_settings=None,
                           bios_require_known=False, bios_state=None, bios_error=None, storage_path=None):
    """One measured node as validation_judge takes it; see validation_node_record.yml."""
    return _call(_judge.node_record, results, idle, gpu_count, gpu_settings, profile, acs_disable, acs_require_disabled,
                 ib_ports_per_node, bios_enabled, bios_settings, bios_require_known, bios_state, bios_error,
                 storage_path)


def validation_html(report):
    """A validation_judge report -> one self-contained HTML5 page (inline CSS and SVG; no script, no link)."""
    return _call(_report.validation_html, report)


def validation_node_verdicts(report, nodes, reason_prefix=None, required=None, loopback=True):
    """Each node's verdict from a validation_judge report; see validation_node_verdicts.yml."""
    return _call(_judge.node_verdicts, report, nodes, reason_prefix, required, loopback)


def validation_loopback_plan(ib_port_info, hcas=None, base_port=_deep.DEFAULT_BASE_PORT, rate_gbps=None):
    """One node's ib_write_bw loopback tests, one per HCA: [{hca, port, line_rate_gbits}]."""
    return _call(_deep.loopback_plan, ib_port_info, hcas, base_port, rate_gbps)


def validation_loopback_results(client, plan, node, timeout=None):
    """The loopback client's result -> validation_judge ib_write_bw entries, one per planned test."""
    return _call(_deep.loopback_results, client, plan, node, timeout)


def validation_ib_line_rate(ib_port_info, hca, rate_gbps=None):
    """An HCA's line rate in Gb/s from a node's ib_port_info result, else ``rate_gbps``; see validation_ib_line_rate.yml."""
    return _call(_deep.line_rate, ib_port_info, hca, rate_gbps)


def validation_ib_client_results(client, plan, node, server=None, timeout=None, ib_port_info=None, rate_gbps=None):
    """One client's ib_write_bw result -> validation_judge ib_write_bw entries; see validation_ib_client_results.yml."""
    return _call(_deep.client_results, client, plan, node, server, timeout, ib_port_info, rate_gbps)


def validation_ib_round_results(runs, planned_key, node_vars, rate_gbps=None):
    """The srun rounds' results -> validation_judge ib_write_bw entries; see validation_ib_round_results.yml."""
    return _call(_deep.round_results, runs, planned_key, node_vars, rate_gbps)


def validation_deep_selection_lines(selection, drain_failed, check_mode=False):
    """What the deep checks will do with each node; see validation_deep_selection_lines.yml."""
    return _call(_deep.selection_lines, selection, drain_failed, check_mode)


def validation_deep_states(nodes, node_vars):
    """Each node's Slurm state and recorded loopback HCAs; see validation_deep_states.yml."""
    return _call(_deep.node_states, nodes, node_vars)


def validation_deep_outcome_lines(verdicts, resume, maintenance_nodes, drain_failed):
    """What the deep checks did to each node; see validation_deep_outcome_lines.yml."""
    return _call(_deep.outcome_lines, verdicts, resume, maintenance_nodes, drain_failed)


class FilterModule(object):
    """Validation filters: benchmark parsers, the judge and its HTML report."""

    def filters(self):
        return {
            "nccl_tests_results": nccl_tests_results,
            "perftest_results": perftest_results,
            "dd_results": dd_results,
            "checkpoint_estimate": checkpoint_estimate,
            "validation_judge": validation_judge,
            "validation_html": validation_html,
            "validation_held_nodes": validation_held_nodes,
            "validation_node_record": validation_node_record,
            "storage_aggregate": storage_aggregate,
            "validation_node_verdicts": validation_node_verdicts,
            "validation_loopback_plan": validation_loopback_plan,
            "validation_loopback_results": validation_loopback_results,
            "validation_ib_line_rate": validation_ib_line_rate,
            "validation_ib_client_results": validation_ib_client_results,
            "validation_ib_round_results": validation_ib_round_results,
            "validation_deep_selection_lines": validation_deep_selection_lines,
            "validation_deep_states": validation_deep_states,
            "validation_deep_outcome_lines": validation_deep_outcome_lines,
        }
