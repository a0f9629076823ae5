# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nccl role's RoCE QoS boot unit runs exactly the commands the roce_qos module returned (one argv builder,
module_utils/roce.py), within a time limit, and its task file parses no tool output itself."""

import os

import pytest

from cf_module_helper import Tool, run_module
from role_files import load_yaml, render_role_template

from ansible_collections.clusterforge.gpu.plugins.modules import roce_qos

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TEMPLATE = "etc/systemd/system/clusterforge-roce-qos.service.j2"
OUTPUT = os.path.join(ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "roce", "mlnx_qos-i-pcp-pfc-off-buffers.txt")


def module_result(tmp_path, ifaces, **args):
    for iface in ifaces:
        for point in ("np", "rp"):
            d = tmp_path / "class" / "net" / iface / "ecn" / ("roce_%s" % point) / "enable"
            d.mkdir(parents=True, exist_ok=True)
            (d / str(args.get("pfc_priority", 3))).write_text("0\n")
    with open(OUTPUT) as f:
        text = f.read()
    r = run_module(roce_qos, dict(args, interfaces=ifaces, sysfs_root=str(tmp_path)),
                   Tool(lambda argv, data: (0, text, "")), check_mode=True)
    assert not r.get("failed"), r
    return r


def exec_lines(text):
    return [line[len("ExecStart="):] for line in text.splitlines() if line.startswith("ExecStart=")]


def test_the_unit_runs_the_module_argv_and_ecn_files(tmp_path):
    reg = module_result(tmp_path, ["ens1f0np0", "ens2f0np0"])
    text = render_role_template(ROOT, "nccl", TEMPLATE, __nccl_register_roce_qos=reg)
    root = str(tmp_path)
    assert exec_lines(text) == [
        "/usr/bin/mlnx_qos -i ens1f0np0 --trust dscp --pfc 0,0,0,1,0,0,0,0",
        "/bin/sh -c 'echo 1 > %s/class/net/ens1f0np0/ecn/roce_np/enable/3'" % root,
        "/bin/sh -c 'echo 1 > %s/class/net/ens1f0np0/ecn/roce_rp/enable/3'" % root,
        "/usr/bin/mlnx_qos -i ens2f0np0 --trust dscp --pfc 0,0,0,1,0,0,0,0",
        "/bin/sh -c 'echo 1 > %s/class/net/ens2f0np0/ecn/roce_np/enable/3'" % root,
        "/bin/sh -c 'echo 1 > %s/class/net/ens2f0np0/ecn/roce_rp/enable/3'" % root,
    ]
    assert "TimeoutStartSec=150\n" in text  # 60 s per interface (the default) + 30 s
    assert "Before=slurmd.service\n" in text and "Type=oneshot\n" in text
    assert "Description=ClusterForge: RoCE PFC, ECN and trust on ens1f0np0, ens2f0np0\n" in text


def test_other_settings_reach_the_unit_and_ecn_false_writes_nothing(tmp_path):
    reg = module_result(tmp_path, ["ens1f0np0"], trust="pcp", pfc_priority=5, ecn=False)
    text = render_role_template(ROOT, "nccl", TEMPLATE, __nccl_register_roce_qos=reg, nccl_roce_qos_timeout_seconds=20)
    assert exec_lines(text) == ["/usr/bin/mlnx_qos -i ens1f0np0 --trust pcp --pfc 0,0,0,0,0,1,0,0"]
    assert "TimeoutStartSec=50\n" in text


def test_a_path_systemd_would_split_is_quoted(tmp_path):
    reg = module_result(tmp_path / "a b", ["ens1f0np0"])
    text = render_role_template(ROOT, "nccl", TEMPLATE, __nccl_register_roce_qos=reg)
    assert exec_lines(text)[1] == "/bin/sh -c 'echo 1 > \\'%s/class/net/ens1f0np0/ecn/roce_np/enable/3\\''" % (tmp_path / "a b")


def test_the_task_file_calls_the_module_and_parses_nothing():
    tasks = load_yaml(ROOT, "roles", "nccl", "tasks", "roce_qos.yml")
    modules = [next(k for k in t if k.startswith(("ansible.builtin.", "clusterforge.gpu."))) for t in tasks]
    assert modules == ["ansible.builtin.slurp", "ansible.builtin.set_fact", "clusterforge.gpu.roce_qos",
                       "ansible.builtin.template"]
    with open(os.path.join(ROOT, "roles", "nccl", "tasks", "roce_qos.yml")) as f:
        text = f.read()
    assert "regex" not in text.replace("regex_replace', '^=', ''", "") and "ansible.builtin.command" not in text


@pytest.mark.parametrize("name", ["nccl_roce_qos_timeout_seconds", "nccl_sysfs_root_path"])
def test_new_variables_are_in_defaults_and_the_spec(name):
    defaults = load_yaml(ROOT, "roles", "nccl", "defaults", "main.yml")
    spec = load_yaml(ROOT, "roles", "nccl", "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert name in defaults and spec[name]["default"] == defaults[name]
