"""Shared by the preflight integration tests: a sound 4-host inventory, and runs of the real playbooks against it.

The hosts point at containers that do not exist (not even while the lab runs): had preflight let an inventory through, the next play would try to
connect and the run would show ``unreachable``. So "rejected before anything changed" is proven by rc != 0, the
specific message, a recap with changed=0 and no unreachable host, and no task of a later play in the output.
"""

import copy
import os
import subprocess

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, ".venv", "bin")
REJECTED = "preflight rejected the inventory; nothing was changed"


def checkout_lines(out):
    """The lines of an ansible run's output that name a file of this checkout: a run of the installed collection
    has none. Python's warnings about the virtual environment's own packages (cryptography 51 warns of DSA at import,
    naming its file under .venv) are not the collection and do not count."""
    venv = os.path.join(ROOT, ".venv") + os.sep
    return [line for line in out.splitlines() if ROOT in line.replace(venv, "")]


def base_inventory():
    hosts = {
        "head01": {"cluster_mgmt_ip": "10.1.0.10", "cluster_fabric_ip": "10.2.0.10"},
        "gpu01": {"cluster_mgmt_ip": "10.1.0.21", "cluster_fabric_ip": "10.2.0.21"},
        "gpu02": {"cluster_mgmt_ip": "10.1.0.22", "cluster_fabric_ip": "10.2.0.22"},
        "stor01": {"cluster_mgmt_ip": "10.1.0.31", "cluster_fabric_ip": "10.2.0.31"},
    }
    return {
        "all": {
            "vars": {
                "ansible_connection": "containers.podman.podman",
                # Container names that never exist, even while the lab (whose containers carry these host names)
                # runs: a play that got past preflight can only fail to connect, never change a lab node.
                "ansible_host": "cf-preflight-test-absent-{{ inventory_hostname }}",
                "ansible_python_interpreter": "/usr/bin/python3",
                "cluster_name": "testcl",
                "cluster_mgmt_network_cidr": "10.1.0.0/24",
                "cluster_fabric_network_cidr": "10.2.0.0/24",
                "cluster_fabric_type": "infiniband",
            },
            "children": {
                "slurm_controller": {"hosts": {"head01": hosts["head01"]}},
                "gpu_nodes": {
                    "hosts": {"gpu01": hosts["gpu01"], "gpu02": hosts["gpu02"]},
                    "vars": {"cluster_gpu_type": "h100", "cluster_gpu_count_per_node": 8},
                },
                "lustre_mds": {"hosts": {"stor01": hosts["stor01"]}},
                "lustre_oss": {"hosts": {"stor01": None}},
                "lustre_clients": {"children": {"gpu_nodes": None, "slurm_controller": None}},
            },
        }
    }


def children(inv):
    return inv["all"]["children"]


def host(inv, group, name):
    """A host's own variables (created as a dict when the inventory lists the host with no variables)."""
    hosts = children(inv)[group]["hosts"]
    if hosts[name] is None:
        hosts[name] = {}
    return hosts[name]


def group_vars(inv, group):
    return children(inv)[group].setdefault("vars", {})


def all_vars(inv):
    return inv["all"]["vars"]


def ansible_env():
    env = dict(os.environ)
    env.update({
        "ANSIBLE_CONFIG": os.path.join(ROOT, "ansible.cfg"),
        "ANSIBLE_COLLECTIONS_PATH": os.path.join(ROOT, ".cache", "collections"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_CACHE_PLUGIN": "memory",
        "PATH": BIN + os.pathsep + env.get("PATH", ""),
    })
    return env


def run_playbook(tmp_path, inventory, playbook="site.yml", extra_args=()):
    """Run a playbook of this checkout against the inventory; returns (rc, stdout + stderr)."""
    inv = tmp_path / "hosts.yml"
    inv.write_text(yaml.safe_dump(inventory))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(inv), os.path.join(ROOT, playbook)]
                          + list(extra_args),
                          cwd=ROOT, env=ansible_env(), capture_output=True, text=True, timeout=300, check=False)
    return proc.returncode, proc.stdout + proc.stderr


def assert_rejected_before_any_change(rc, out, message):
    """The run failed in preflight with this message, changed nothing and contacted no host."""
    assert rc != 0, out
    assert message in out, out
    assert REJECTED in out, out
    assert "unreachable=1" not in out and "UNREACHABLE" not in out, out
    assert "changed=1" not in out, out
    for later in ("Common OS", "Converged GPU nodes", "Rolling change - preflight and plan"):
        assert later not in out, "a later play started: " + out


def case_ids(cases):
    """pytest ids for a list of (mutate_<name>, message) cases: the <name>."""
    return [c[0].__name__[len("mutate_"):] for c in cases]


def reject_case(tmp_path, mutate, message, prepare=None, playbook="site.yml"):
    """One case: the base inventory (prepared, then broken by ``mutate``) is rejected before any change."""
    inv = copy.deepcopy(base_inventory())
    if prepare is not None:
        inv = prepare(inv) or inv
    mutate(inv)
    rc, out = run_playbook(tmp_path, inv, playbook)
    assert_rejected_before_any_change(rc, out, message)


def assert_distinct_messages(messages, at_least):
    """Each case asserts its own message: none equals or is contained in another's, so no case passes on another's."""
    assert len(messages) >= at_least, len(messages)
    for i, message in enumerate(messages):
        assert not [m for j, m in enumerate(messages) if j != i and message in m], message
