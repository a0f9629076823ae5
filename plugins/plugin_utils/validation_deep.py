# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The deep checks on drained nodes (playbooks/health_deep.yml): the reason prefix they own, and the ib_write_bw
loopback on each HCA of a node (the plan, and its results in the form validation_judge judges).

A loopback runs server and client of ``ib_write_bw`` on the same node and HCA (the client connects to the node
itself): it loads the HCA, its PCIe link and its firmware without a second node, so a drained node can be tested
alone. Each HCA gets its own TCP port (``base_port`` + its index), as in the fabric phase's rounds, so all HCAs of a
node test at once. The node verdicts are validation_judge.node_verdicts.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_common import (
    ValidationError,
    _is_list,
    _is_map,
    _number,
)

DEFAULT_BASE_PORT = 18515
# The address the loopback client connects to: the node itself.
LOOPBACK_PEER = "127.0.0.1"


def loopback_plan(ib_port_info, hcas=None, base_port=DEFAULT_BASE_PORT, rate_gbps=None):
    """The loopback tests of one node: a list of {hca, port, line_rate_gbits}, one per HCA.

    ``ib_port_info``: the node's ib_port_info result (or None when it did not run). ``hcas``: the HCAs to test;
    empty or None: every HCA with an InfiniBand port that ib_port_info found (every HCA on a node without one, as on
    RoCE), in its order. The line rate of a test is the rate of the HCA's first port (its active one when it has
    several), else ``rate_gbps`` (the profile's).
    """
    if hcas is not None and not _is_list(hcas):
        raise ValidationError("validation_loopback_plan: hcas must be a list of HCA names, got %s"
                              % type(hcas).__name__)
    base = _number(base_port)
    if base is None or base != int(base) or not 0 < base < 65536:
        raise ValidationError("validation_loopback_plan: base_port must be a TCP port, got %r" % (base_port,))
    ports = []
    if _is_map(ib_port_info) and not ib_port_info.get("skipped"):
        ports = [p for p in ib_port_info.get("ports") or [] if _is_map(p) and p.get("ca")]
    ib = [p for p in ports if to_text(p.get("link_layer") or "InfiniBand").lower() == "infiniband"]
    ports = ib or ports
    names = [to_text(h).strip() for h in hcas or [] if to_text(h).strip()]
    if not names:
        for port in ports:
            if to_text(port["ca"]) not in names:
                names.append(to_text(port["ca"]))
    if len(names) != len(set(names)):
        raise ValidationError("validation_loopback_plan: an HCA is named twice in %s" % ", ".join(names))
    if int(base) + len(names) > 65536:
        raise ValidationError("validation_loopback_plan: %d HCAs from base_port %d run past port 65535"
                              % (len(names), int(base)))
    return [{"hca": name, "port": int(base) + index, "line_rate_gbits": _rate_of(ports, name, rate_gbps)}
            for index, name in enumerate(names)]


def _rate_of(ports, hca, rate_gbps):
    mine = [p for p in ports if to_text(p.get("ca")) == hca]
    active = [p for p in mine if p.get("state") == "Active"] or mine
    rate = _number(active[0].get("rate_gbps")) if active else None
    return rate if rate is not None else _number(rate_gbps)


def line_rate(ib_port_info, hca, rate_gbps=None):
    """The line rate, in Gb/s, of HCA ``hca`` as an ib_port_info result read it: the rate of its active port (its
    first port when none is active); else ``rate_gbps`` (the profile's); None when neither is known.

    The one rule for every ib_write_bw test (the fabric rounds, through either launcher, and the deep checks'
    loopback): the judge compares each test's bandwidth with this rate.
    """
    if not to_text(hca or "").strip():
        raise ValidationError("validation_ib_line_rate: an HCA name is required")
    ports = []
    if _is_map(ib_port_info) and not ib_port_info.get("skipped"):
        ports = [p for p in ib_port_info.get("ports") or [] if _is_map(p) and p.get("ca")]
    rate = _rate_of(ports, to_text(hca).strip(), rate_gbps)
    if rate is None and rate_gbps is not None:
        raise ValidationError("validation_ib_line_rate: rate_gbps must be a number, got %r" % (rate_gbps,))
    return rate


def loopback_results(client, plan, node, timeout=None):
    """The loopback client's result (ib_write_bw mode=client, registered) -> validation_judge ib_write_bw entries.

    One entry per test of ``plan``: {client, server (both ``node``), hca, line_rate_gbits, rc, msg, result}. A test
    without an outcome (the client did not run, failed before testing, or timed out) carries an ``msg`` that says
    why, which the judge reports as a failure.
    """
    if not _is_list(plan):
        raise ValidationError("validation_loopback_results: the plan must be validation_loopback_plan's list")
    node = to_text(node)
    done = []
    why_none = "the ib_write_bw loopback client did not run"
    if _is_map(client):
        done = [t for t in client.get("tests") or [] if _is_map(t)]
        if client.get("skipped"):
            why = client.get("skip_reason") or client.get("msg") or "task skipped"
            why_none = "the ib_write_bw loopback was skipped (%s)" % to_text(why)
        elif to_text(client.get("msg") or "").strip():
            why_none = to_text(client["msg"]).strip().splitlines()[0][:300]
    entries = []
    for test in plan:
        if not _is_map(test) or not test.get("hca"):
            raise ValidationError("validation_loopback_results: each planned test must be a dict with hca, got %r"
                                  % (test,))
        mine = [t for t in done if to_text(t.get("hca")) == to_text(test["hca"])]
        rc, msg, result = None, why_none, None
        if mine:
            run = mine[0]
            rc = run.get("rc")
            if run.get("timed_out"):
                msg = "no result within %s s" % (timeout if timeout is not None else "the time limit")
            elif rc not in (None, 0):
                lines = to_text(run.get("stderr") or "").strip().splitlines()
                msg = lines[-1].strip()[:300] if lines else "exit status %s" % rc
            else:
                msg = None
                result = run.get("result")
                if result is None and rc is None:
                    msg = "the test did not run (%s)" % why_none
        entries.append({"client": node, "server": node, "hca": to_text(test["hca"]),
                        "line_rate_gbits": _number(test.get("line_rate_gbits")), "rc": rc, "msg": msg,
                        "result": result})
    return entries
