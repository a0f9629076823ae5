"""The rolling change's drain wait (roles/rolling/tasks/drain.yml): the node is read until Slurm has it DRAINED, and
the roll stops, naming why, when someone resumed it or its jobs outlast rolling_drain_timeout_seconds.

The role's own expressions are evaluated with Ansible's templar against node records that slurm_node_info makes from
`scontrol show node` text (with the jobs its `jobs` option adds)."""

import json
import os
import subprocess
import sys

import yaml

from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import parse_scontrol_nodes
from ansible_collections.clusterforge.gpu.plugins.modules import slurm_node_info
from role_files import load_yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
# Ansible's templar with the collection's filters (poll_count), in a process of its own where Ansible's plugin loader
# may start: each expression rendered (a template) or evaluated (a condition) over the role's defaults and vars.
SCRIPT = """
import json, sys
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.loader import init_plugin_loader
from ansible.template import Templar, trust_as_template
init_plugin_loader()
given = json.load(sys.stdin)
def trusted(value):
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return dict((k, trusted(v)) for k, v in value.items())
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value
tmpl = Templar(loader=DataLoader(), variables=trusted(given["vars"]))
out = {}
for name, (kind, expr) in given["exprs"].items():
    out[name] = (tmpl.evaluate_conditional(trust_as_template(expr)) if kind == "condition"
                 else tmpl.template(trust_as_template(expr)))
json.dump(out, sys.stdout)
"""


def _task(name):
    with open(os.path.join(ROOT, "roles", "rolling", "tasks", "drain.yml")) as f:
        (task,) = [t for t in yaml.safe_load(f) if t.get("name") == name]
    return task


WAIT = _task("Wait until its jobs have finished (the jobs left are printed every 30 s)")
STOP = _task("Stop unless the node drained (its jobs finished) in time and is still drained")


def read(state, jobs=(), reason="cf-roll:20261207T100000Z"):
    """The registered result of one read: slurm_node_info's entry for gpu02 in `state`."""
    text = ("NodeName=gpu02 Arch=x86_64\n   CPUAlloc=%d CPUTot=192\n   Gres=gpu:h100:8\n   State=%s\n"
            "   Partitions=gpu\n" % (64 if jobs else 0, state))
    if reason and "DRAIN" in state:
        text += "   Reason=%s [slurm@2026-12-07T10:00:00]\n" % reason
    (record,) = parse_scontrol_nodes(text)
    entry = slurm_node_info.describe(record, "cf-roll:")
    entry["jobs"] = list(jobs)
    return {"nodes": [entry], "changed": False}


def evaluate(result, **extra):
    variables = {}
    for name in ("defaults", "vars"):
        variables.update(load_yaml(ROOT, "roles", "rolling", name, "main.yml") or {})
    variables.update(inventory_hostname="gpu02", ansible_check_mode=False, __rolling_drain_wait=result, **extra)
    exprs = {"polls": ("template", WAIT["retries"]), "delay": ("template", WAIT["delay"]),
             "done": ("condition", WAIT["until"]), "failed": ("condition", WAIT["failed_when"]),
             "ok": ("condition", STOP["ansible.builtin.assert"]["that"]),
             "msg": ("template", STOP["ansible.builtin.assert"]["fail_msg"])}
    if "nodes" not in result:  # a failed read: only the wait's own conditions apply
        exprs = {k: v for k, v in exprs.items() if k in ("done", "failed")}
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], input=json.dumps({"vars": variables, "exprs": exprs}),
                          env=env, capture_output=True, text=True, check=False, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key in ("polls", "delay"):
        if key in out:
            out[key] = int(out[key])
    if "msg" in out:
        out["msg"] = " ".join(out["msg"].split())
    return out


def test_a_draining_node_is_read_again_until_it_is_drained():
    running = evaluate(read("MIXED+DRAIN", jobs=["4711", "4712_3"]))
    assert (running["done"], running["failed"]) == (False, False)
    # An hour, one read every 10 s (the defaults); an interval that does not divide the time rounds up.
    assert (running["polls"], running["delay"]) == (360, 10)
    assert evaluate(read("MIXED+DRAIN"), rolling_drain_timeout_seconds=95)["polls"] == 10
    drained = evaluate(read("IDLE+DRAIN"))
    assert (drained["done"], drained["ok"]) == (True, True)


def test_jobs_that_outlast_the_wait_stop_the_roll_naming_them():
    late = evaluate(read("MIXED+DRAIN", jobs=["4711", "4712_3"]))
    assert not late["ok"]
    assert late["msg"] == "timed out after 3600 s waiting for gpu02 to drain (MIXED+DRAIN, jobs 4711, 4712_3)"


def test_a_node_someone_resumed_while_the_roll_waited_stops_it():
    resumed = evaluate(read("MIXED", jobs=["4711"], reason=None))
    assert (resumed["done"], resumed["ok"]) == (True, False)
    assert resumed["msg"] == "gpu02 is no longer drained while waiting (Slurm state MIXED): someone resumed it"


def test_a_read_that_failed_fails_the_wait_at_once():
    failed = evaluate({"failed": True, "msg": "scontrol show node: no answer in 60 s"})
    assert failed == {"done": True, "failed": True}
