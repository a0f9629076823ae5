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


def _test_outcome(run, timeout, why_none):
    """One ib_write_bw test as a module reported it (an entry of its ``tests``; None: no entry) -> (rc, msg, result).

    The one reading of a test's outcome for every path (the fabric rounds through ssh or srun, the deep checks'
    loopback): a message the module gave wins; a test that timed out or exited non-zero gets why (the limit, or the
    last line it printed on stderr); a test with neither an outcome nor a result did not run (``why_none``).
    """
    if not _is_map(run):
        return None, why_none, None
    rc = run.get("rc")
    if to_text(run.get("msg") or "").strip():
        return rc, to_text(run["msg"]).strip(), run.get("result") if rc == 0 else None
    if run.get("timed_out"):
        return rc, "no result within %s s" % (timeout if timeout is not None else "the time limit"), None
    if rc not in (None, 0):
        lines = to_text(run.get("stderr") or "").strip().splitlines()
        return rc, lines[-1].strip()[:300] if lines else "exit status %s" % rc, None
    if run.get("result") is None and rc is None:
        return rc, "the test did not run (%s)" % why_none, None
    return rc, None, run.get("result")


def _why_none(client, what):
    """Why a registered client result (of ``what``: "the ib_write_bw loopback") has no test: skipped (and why), its
    message, or that it did not run."""
    if _is_map(client) and client.get("skipped"):
        why = client.get("skip_reason") or client.get("msg") or "task skipped"
        return "%s was skipped (%s)" % (what, to_text(why))
    if _is_map(client) and to_text(client.get("msg") or "").strip():
        return to_text(client["msg"]).strip().splitlines()[0][:300]
    return "%s client did not run" % what


def client_results(client, plan, node, server=None, timeout=None, ib_port_info=None, rate_gbps=None):
    """One client's ib_write_bw result (registered; mode client) -> validation_judge ib_write_bw entries.

    One entry per test of ``plan`` (``{hca}``, with ``line_rate_gbits`` where the plan knows it, else the rate of the
    HCA's port in ``ib_port_info``, else ``rate_gbps``): {client (``node``), server (``server``, else ``node``: a
    loopback), hca, line_rate_gbits, rc, msg, result}. A test without an outcome carries an ``msg`` that says why,
    which the judge reports as a failure.
    """
    return _client_results(client, plan, node, server, timeout, ib_port_info, rate_gbps, "the ib_write_bw")


def _client_results(client, plan, node, server, timeout, ib_port_info, rate_gbps, what):
    if not _is_list(plan):
        raise ValidationError("validation_ib_client_results: the plan must be a list of tests, got %r" % (plan,))
    node = to_text(node)
    done = [t for t in (client.get("tests") or [] if _is_map(client) else []) if _is_map(t)]
    missing = _why_none(client, what)
    entries = []
    for test in plan:
        if not _is_map(test) or not test.get("hca"):
            raise ValidationError("validation_ib_client_results: each planned test must be a dict with hca, got %r"
                                  % (test,))
        hca = to_text(test["hca"])
        mine = [t for t in done if to_text(t.get("hca")) == hca]
        rc, msg, result = _test_outcome(mine[0] if mine else None, timeout, missing)
        if "line_rate_gbits" in test:
            rate = _number(test.get("line_rate_gbits"))
        else:
            rate = line_rate(ib_port_info, hca, rate_gbps)
        entries.append({"client": node, "server": to_text(server) if server is not None else node, "hca": hca,
                        "line_rate_gbits": rate, "rc": rc, "msg": msg, "result": result})
    return entries


def loopback_results(client, plan, node, timeout=None):
    """The loopback client's result (ib_write_bw mode=client, registered) -> validation_judge ib_write_bw entries:
    :func:`client_results` with the node as its own server and the plan's line rates."""
    if not _is_list(plan):
        raise ValidationError("validation_loopback_results: the plan must be validation_loopback_plan's list")
    return _client_results(client, plan, node, None, timeout, None, None, "the ib_write_bw loopback")


def round_results(runs, planned_key, node_vars, rate_gbps=None):
    """The rounds run through srun (each a registered result of the round, with its planned tests under
    ``planned_key``: ``{client, server, hca}``) -> validation_judge ib_write_bw entries, one per planned test, in
    order. ``node_vars`` maps a client to its variables (``hostvars``): the line rate is that of the HCA's port in its
    recorded ``__validate_node.ib_port_info``, else ``rate_gbps``. A round that gave no test fails each of its tests
    with the round's message."""
    entries = []
    for run in runs or []:
        if not _is_map(run):
            continue
        done = [t for t in run.get("tests") or [] if _is_map(t)]
        missing = to_text(run.get("msg") or "").strip() or "no result"
        for test in run.get(planned_key) or []:
            client, hca = to_text(test.get("client")), to_text(test.get("hca"))
            mine = [t for t in done if to_text(t.get("client")) == client and to_text(t.get("hca")) == hca]
            try:
                recorded = node_vars[client].get("__validate_node") or {}
            except (KeyError, TypeError, AttributeError):
                recorded = {}
            rc, msg, result = _test_outcome(mine[0] if mine else None, None, missing)
            entries.append({"client": client, "server": to_text(test.get("server")), "hca": hca,
                            "line_rate_gbits": line_rate(recorded.get("ib_port_info"), hca, rate_gbps),
                            "rc": rc, "msg": msg, "result": result})
    return entries


def selection_lines(selection, drain_failed, check_mode=False):
    """What the deep checks will do with each node, from slurm_maintenance_info's selection alone (before any check):
    one line per node, ``<node>: checked: <why>; <what happens after>`` or ``<node>: not checked: <why>``; in check
    mode first a line saying that a real run would do this."""
    if not _is_map(selection):
        raise ValidationError("validation_deep_selection_lines: expected slurm_maintenance_info's result, got %r"
                              % (selection,))
    lines = []
    if check_mode:
        lines.append("Check mode: nothing is run or changed; a real run would do this (%s drains only are resumed)."
                     % to_text(selection.get("reason_prefix")))
    for node in selection.get("nodes") or []:
        why = to_text(node.get("why"))
        if not node.get("selected"):
            line = "not checked: " + why
        elif node.get("ours"):
            line = ("checked: %s; resumed if every check passes, else it stays drained with a reason naming the check"
                    % why)
        elif node.get("drain"):
            line = "checked: %s; never resumed by the deep checks: the drain is not theirs" % why
        else:
            line = "checked: %s; %s" % (why, "drained with a reason naming the check if it fails" if drain_failed
                                        else "a failure is reported only")
        lines.append("%s: %s" % (to_text(node.get("name")), line))
    return lines


def node_states(nodes, node_vars):
    """Each node as Slurm has it now (slurm_maintenance_info's ``nodes``), in that order, with the loopback HCAs its
    deep check recorded (``node_vars[name].__validate_deep_node``; None: nothing recorded) -> ``{name: {drain, reason,
    loopback_hcas}}``, what validation_node_verdicts takes."""
    out = {}
    for node in nodes or []:
        name = to_text(node.get("name"))
        try:
            record = node_vars[name].get("__validate_deep_node")
        except (KeyError, TypeError, AttributeError):
            record = None
        out[name] = {"drain": node.get("drain"), "reason": node.get("reason"),
                     "loopback_hcas": record.get("loopback_hcas") if _is_map(record) else None}
    return out


def outcome_lines(verdicts, resume, maintenance_nodes, drain_failed):
    """What the deep checks did to each node (validation_node_verdicts' ``nodes``, after slurm_node resumed, relabelled
    or drained them): ``<node> resumed``, ``<node> stays drained as "<reason>"``... ``resume`` is the registered
    resume task (its ``skipped`` names the nodes whose reason changed during the checks; a task skipped by its
    condition has no ``nodes``); ``maintenance_nodes`` the checked nodes of a maintenance reservation (drained on a
    failure with ``drain_failed``)."""
    if not _is_map(verdicts):
        raise ValidationError("validation_deep_outcome_lines: expected validation_node_verdicts' result, got %r"
                              % (verdicts,))
    left = []
    if _is_map(resume) and "nodes" in resume:
        left = [s for s in resume.get("skipped") or [] if _is_map(s)]
    maintenance = set(to_text(n) for n in maintenance_nodes or [])
    lines = []
    for node in verdicts.get("nodes") or []:
        name, action = to_text(node.get("node")), node.get("action")
        not_resumed = [s for s in left if to_text(s.get("name")) == name]
        if action == "resume" and not_resumed:
            line = 'not resumed: its reason changed during the checks ("%s")' % to_text(not_resumed[0].get("reason"))
        elif action == "resume":
            line = "resumed"
        elif action == "relabel":
            line = 'stays drained as "%s"' % to_text(node.get("new_reason"))
        elif action == "drain" and drain_failed and name in maintenance:
            line = 'drained as "%s"' % to_text(node.get("new_reason"))
        elif action == "drain":
            line = "left as it is (not drained now; validate_deep_drain_failed or someone resumed it)"
        elif action == "keep":
            owner = to_text(node.get("reason"))
            line = 'stays drained by its owner ("%s" is not a %s drain)' % (owner, to_text(verdicts.get("reason_prefix")))
        else:
            line = "left in service as it was (not drained)"
        lines.append("%s %s" % (name, line))
    return lines
