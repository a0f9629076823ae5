"""Helpers shared by the lab's end-to-end test modules (tests/lab/test_lab_*.py): run a command against the lab,
read a play recap, run a command in a lab container, read Slurm's node states on the controller."""

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
