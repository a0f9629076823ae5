"""The converged fingerprint covers every file the GPU node roles write.

site.yml leaves a GPU node out of the role plays when its fingerprint (clusterforge.gpu.converged_state) matches the
record of its last complete run. A file a role writes outside the fingerprint's roots would drift unseen: this test
resolves the destination of every writing task of those roles (from the role's defaults and vars, and literal loop
items) and fails on one outside the roots.
"""

import glob
import os
import re

import yaml

from ansible_collections.clusterforge.gpu.plugins.modules import converged_state

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLES = ["common_os", "nvidia_driver", "dcgm", "pcie_acs", "gpu_tuning", "slurm_compute", "lustre_client", "nccl"]
WRITERS = {"ansible.builtin.template": "dest", "ansible.builtin.copy": "dest", "ansible.builtin.file": "path",
           "ansible.builtin.lineinfile": "path", "ansible.builtin.blockinfile": "path",
           "ansible.builtin.get_url": "dest", "ansible.builtin.unarchive": "dest",
           "ansible.builtin.apt_repository": "filename", "ansible.builtin.deb822_repository": "name"}
VAR = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(\|\s*dirname\s*)?\}\}")
# Destinations that are not files on the node, each with the reason it needs no fingerprint root.
NOT_NODE_FILES = {
    ("lustre_client", "{{ item.path }}"): "directories on the Lustre file system: the probe reads their layouts "
                                          "(lfs getstripe -d) and mode and owner (stat), playbooks/vars/converged_probes.yml",
}
DEFAULT_ROOTS = converged_state.DEFAULT_FILE_ROOTS
with open(os.path.join(ROOT, "playbooks", "vars", "converged_probes.yml")) as _handle:
    PROBES = yaml.safe_load(_handle)
STAT_PATHS = PROBES["__cf_converged_stat_paths"]


def _role_vars(role):
    values = {}
    for path in [os.path.join(ROOT, "roles", role, "defaults", "main.yml")] + \
            sorted(glob.glob(os.path.join(ROOT, "roles", role, "vars", "*.yml"))):
        with open(path) as handle:
            for key, value in (yaml.safe_load(handle) or {}).items():
                if isinstance(value, str):
                    values.setdefault(key, value)
    return values


def _tasks(items):
    for task in items or []:
        if not isinstance(task, dict):
            continue
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))
        yield task


def _resolve(text, values, item=None, depth=0):
    if item is not None:
        text = re.sub(r"\{\{\s*item\s*\}\}", item, text)

    def sub(match):
        value = values.get(match.group(1))
        if not isinstance(value, str):
            return match.group(0)
        return os.path.dirname(value) if match.group(2) else value
    new = VAR.sub(sub, text)
    return new if new == text or depth > 5 else _resolve(new, values, None, depth + 1)


def destinations(role):
    values = _role_vars(role)
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "roles", role, "tasks", "*.yml"))):
        with open(path) as handle:
            for task in _tasks(yaml.safe_load(handle)):
                for module, key in WRITERS.items():
                    args = task.get(module)
                    if not isinstance(args, dict) or key not in args:
                        continue
                    if module == "ansible.builtin.file" and args.get("state") not in ("directory", "touch", "link", "hard", None):
                        continue
                    if module == "ansible.builtin.file" and args.get("state") is None and "mode" not in args:
                        continue
                    raw = str(args[key])
                    if module == "ansible.builtin.deb822_repository":
                        raw = "/etc/apt/sources.list.d/%s.sources" % raw
                    elif module == "ansible.builtin.apt_repository":
                        raw = "/etc/apt/sources.list.d/%s.list" % raw
                    loop = task.get("loop") if isinstance(task.get("loop"), list) else [None]
                    for item in loop:
                        text = raw
                        if isinstance(item, dict):
                            text = re.sub(r"\{\{\s*item\.([a-z_]+)\s*\}\}", lambda m: str(item.get(m.group(1), m.group(0))), raw)
                            item = None
                        out.append((raw, _resolve(text, values, _resolve(str(item), values) if item is not None else None)))
    return out


def test_every_file_the_gpu_node_roles_write_is_under_a_fingerprint_root():
    outside = []
    for role in ROLES:
        for raw, dest in destinations(role):
            if (role, raw) in NOT_NODE_FILES:
                continue
            whole = re.match(r"^\{\{\s*([a-z_]+)\s*\}\}$", raw)
            if whole and whole.group(1) in PROBES["__cf_converged_file_roots"]:
                continue   # a path the inventory names (no default): the probe adds it to the file roots
            if module_root(dest) is None and dest not in STAT_PATHS:
                outside.append("%s: %s -> %s" % (role, raw, dest))
    assert not outside, "written outside the converged fingerprint's roots %s: %s" % (DEFAULT_ROOTS, outside)


def module_root(dest):
    for root in DEFAULT_ROOTS:
        if dest == root or dest.startswith(root.rstrip("/") + "/"):
            return root
    return None


def test_the_probe_uses_these_roots_and_every_path_an_inventory_can_move():
    roots = PROBES["__cf_converged_file_roots"]
    for root in ("'/etc'", "'/usr/local/sbin'", "slurm_compute_healthcheck_path | default(", "| dirname"):
        assert root in roots, root
    public = set()
    for role in ROLES:
        for raw, dest in destinations(role):
            public |= set(n for n, dummy in VAR.findall(raw) if not n.startswith("__") and n != "item")
    assert public >= {"nccl_conf_path", "slurm_compute_healthcheck_path"}, public
    missing = sorted(n for n in public if n not in roots)
    assert not missing, "public path variables the probe's file roots do not follow: %s" % missing
    with open(os.path.join(ROOT, "roles", "slurm_compute", "defaults", "main.yml")) as handle:
        health = yaml.safe_load(handle)["slurm_compute_healthcheck_path"]
    assert os.path.dirname(health) in DEFAULT_ROOTS


def test_the_resolver_finds_the_files_it_must():
    found = dict((role, [d for r, d in destinations(role)]) for role in ROLES)
    assert "/etc/nccl.conf" in found["nccl"]
    assert "/usr/libexec/clusterforge/slurm-healthcheck" in found["slurm_compute"]
    assert "/etc/slurm/epilog.d/00-clusterforge" in found["slurm_compute"]
    assert "/var/log/slurm" in found["slurm_compute"] and "/var/lib/slurm/slurmd" in found["slurm_compute"]
    assert "/usr/local/sbin/clusterforge-gpu-tuning-apply" in found["gpu_tuning"]
    assert sum(len(v) for v in found.values()) >= 30
