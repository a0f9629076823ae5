"""Helpers shared by the lab's end-to-end test modules (tests/lab/test_lab_*.py): run a command against the lab,
read a play recap, run a command in a lab container, read Slurm's node states on the controller."""

import json
import os
import re
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, ".venv", "bin")
ENV = dict(os.environ)
ENV.update({
    "CONTAINERS_CONF": os.path.join(ROOT, "tests", "lab", "containers.conf"),
    "ANSIBLE_CONFIG": os.path.join(ROOT, "tests", "lab", "ansible.cfg"),
    "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".cache", "collections"),
    "ANSIBLE_NOCOLOR": "1",
    "ANSIBLE_FORCE_COLOR": "0",
    "PATH": BIN + os.pathsep + os.environ.get("PATH", ""),
    # validate.yml fetches its report to $PWD/validation-reports (the operator's current directory).
    "PWD": ROOT,
})
SESSION_START = time.time()
RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def run(cmd, timeout=3000):
    proc = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=timeout, check=False)
    out = proc.stdout + proc.stderr
    print(out[-20000:])
    return proc.returncode, out


def recap(out):
    return {m.group(1): dict(ok=int(m.group(2)), changed=int(m.group(3)), unreachable=int(m.group(4)),
                             failed=int(m.group(5))) for m in RECAP.finditer(out)}


HEADER = re.compile(r"^(?:TASK|RUNNING HANDLER) \[(.+?)\] \**$")


def host_tasks(out, host, statuses=("changed",)):
    """The names of the tasks and handlers that reported one of statuses on host in an ansible-playbook output
    (default callback: a "TASK [name]" or "RUNNING HANDLER [name]" header, then one "<status>: [host]" line per host
    or item)."""
    names, current = set(), None
    starts = tuple("%s: [%s%s" % (status, host, end) for status in statuses for end in ("]", " -> "))
    for line in out.splitlines():
        header = HEADER.match(line)
        if header:
            current = header.group(1)
        elif current and line.startswith(starts):
            names.add(current)
    return names


def changed_tasks(out, host):
    """The tasks and handlers that reported changed on host."""
    return host_tasks(out, host)


def roles_run(out, host):
    """The collection's roles that ran a task on host (ok or changed; skipped tasks do not count)."""
    return {name.split(" : ", 1)[0].rsplit(".", 1)[-1] for name in host_tasks(out, host, ("ok", "changed"))
            if name.startswith("clusterforge.gpu.") and " : " in name}


def podman_exec(host, *argv):
    proc = subprocess.run(["podman", "exec", host] + list(argv), env=ENV, capture_output=True, text=True, timeout=120, check=False)
    return proc.returncode, proc.stdout


def installed(host, package):
    rc, out = podman_exec(host, "dpkg-query", "-W", "-f=${db:Status-Abbrev}", package)
    return rc == 0 and out.startswith("ii")


def slurm(*argv):
    return podman_exec("head01", *argv)


def node_states():
    """{node: (compact state, reason)} of the GPU partition, read on the controller."""
    rc, out = slurm("sinfo", "-h", "-N", "-p", "gpu", "-o", "%N|%t|%E")
    assert rc == 0, out
    states = {}
    for line in out.splitlines():
        name, state, reason = line.split("|", 2)
        states[name] = (state, reason)
    return states


def settled_node_states(want=None, seconds=120):
    """node_states() once Slurm hears from every node, and, when `want` ({node: (state, reason)}) is given, once those
    nodes are in those states. A trailing '*' (not responding) is left briefly by a RESUME of a node that was down and
    by a ping that timed out on a loaded 2-core machine; it clears at slurmctld's next ping."""
    deadline = time.time() + seconds
    while True:
        states = node_states()
        settled = not any(s.endswith("*") for s, r in states.values())
        if settled and all(states.get(n) == v for n, v in (want or {}).items()):
            return states
        if time.time() > deadline:
            return states
        time.sleep(2)


# --- the monitoring web user (clusterforge.gpu.monitoring: basic auth on every exporter, Prometheus, Alertmanager)
MONITORING_CREDENTIALS = "/etc/clusterforge/secrets/monitoring_web_credentials.json"
# python3 in a container: GET argv[1], with basic auth when argv[2] (user) is given; prints the status, a newline,
# the body (an HTTP error's status and body too, so that a refusal can be told from a failure to connect).
HTTP_GET = """import base64, sys, urllib.error, urllib.request
req = urllib.request.Request(sys.argv[1])
if len(sys.argv) > 2:
    req.add_header("Authorization", "Basic " + base64.b64encode((sys.argv[2] + ":" + sys.argv[3]).encode()).decode())
try:
    resp = urllib.request.urlopen(req, timeout=10)
    sys.stdout.write("%d\\n%s" % (resp.status, resp.read().decode()))
except urllib.error.HTTPError as exc:
    sys.stdout.write("%d\\n%s" % (exc.code, exc.read().decode()))
"""


def monitoring_credentials():
    """(user, password) of the monitoring web user, from the root-only file on the monitoring server (head01)."""
    rc, out = podman_exec("head01", "cat", MONITORING_CREDENTIALS)
    assert rc == 0, out
    record = json.loads(out)
    return record["username"], record["password"]


def http_get(host, url, auth=None):
    """(status, body) of a GET from inside the container `host`, with basic auth when auth=(user, password)."""
    rc, out = podman_exec(host, "python3", "-c", HTTP_GET, url, *(auth or ()))
    assert rc == 0, (host, url, out)
    status, _sep, body = out.partition("\n")
    return int(status), body
