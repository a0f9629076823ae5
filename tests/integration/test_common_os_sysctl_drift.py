"""common_os: which kernel tunables `sysctl -w` sets, from one `sysctl` read of the running values.

The lab and the molecule scenario run in containers, where /proc/sys is read-only (common_os_sysctl_apply_runtime
is false), so the runtime path is proven here: the role's own expression (roles/common_os/vars/main.yml) is
evaluated by the real ansible-playbook against `sysctl` output in its real format ("key = value", tabs between the
fields of multi-value entries).
"""

import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, ".venv", "bin")
PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars_files: [%s]
  tasks:
    - ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ {'drift': __common_os_sysctl_drift, 'argv': ['sysctl', '--'] + (__common_os_sysctl_all.keys() | list)} | to_json }}"
        mode: "0644"
""" % os.path.join(ROOT, "roles", "common_os", "vars", "main.yml")

DEFAULTS = {"net.ipv4.tcp_rmem": "4096 87380 16777216", "kernel.numa_balancing": 0, "net.core.somaxconn": 8192}


def drift(tmp_path, live_lines, overrides=None):
    play = tmp_path / "play.yml"
    play.write_text(PLAY)
    out = tmp_path / "out.json"
    extra = {"out": str(out), "ansible_python_interpreter": os.path.join(BIN, "python"),
             "common_os_sysctl_defaults": DEFAULTS, "common_os_sysctl": overrides or {},
             "__common_os_register_sysctl_live": {"stdout_lines": live_lines}}
    (tmp_path / "extra.json").write_text(json.dumps(extra))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", str(play),
                           "-e", "@" + str(tmp_path / "extra.json")], cwd=ROOT, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())


def test_only_differing_and_unread_values_are_set(tmp_path):
    live = ["net.ipv4.tcp_rmem = 4096\t87380\t16777216", "kernel.numa_balancing = 1", "net.core.somaxconn = 8192"]
    res = drift(tmp_path, live, overrides={"vm.swappiness": 1})
    # tcp_rmem matches once whitespace is normalised; vm.swappiness was not read at all, so it is set
    assert res["drift"] == ["kernel.numa_balancing=0", "vm.swappiness=1"]
    assert res["argv"] == ["sysctl", "--", "net.ipv4.tcp_rmem", "kernel.numa_balancing", "net.core.somaxconn",
                           "vm.swappiness"]


def test_nothing_differs_nothing_is_set(tmp_path):
    live = ["net.ipv4.tcp_rmem = 4096 87380 16777216", "kernel.numa_balancing = 0", "net.core.somaxconn = 8192"]
    assert drift(tmp_path, live)["drift"] == []


def test_an_override_wins_over_the_default(tmp_path):
    live = ["net.ipv4.tcp_rmem = 4096 87380 16777216", "kernel.numa_balancing = 0", "net.core.somaxconn = 8192"]
    assert drift(tmp_path, live, overrides={"net.core.somaxconn": 65535})["drift"] == ["net.core.somaxconn=65535"]
