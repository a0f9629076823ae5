# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_node_hardware_info: recorded /proc/cpuinfo, /proc/meminfo and nvidia-smi -q -x; no GPU needed."""

import os

import pytest

from cf_module_helper import Tool, run_module

from ansible.module_utils.facts.hardware import linux as linux_hardware
from ansible_collections.clusterforge.gpu.plugins.modules import slurm_node_hardware_info as module

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "module_utils", "fixtures", "nvidia_smi")
XML_A5000 = open(os.path.join(FIXTURES, "r590", "q-x-2x-rtx-a5000.xml")).read()
XML_P100 = open(os.path.join(FIXTURES, "r510", "q-x-tesla-p100.xml")).read()


def cpuinfo(sockets, cores, threads):
    """/proc/cpuinfo of an x86 machine, in the kernel's format (the fields setup's code reads)."""
    blocks = []
    n = 0
    for s in range(sockets):
        for t in range(threads):
            for c in range(cores):
                blocks.append("\n".join([
                    "processor\t: %d" % n, "vendor_id\t: GenuineIntel", "cpu family\t: 6",
                    "model name\t: Intel(R) Xeon(R) Platinum 8480C", "physical id\t: %d" % s,
                    "siblings\t: %d" % (cores * threads), "core id\t\t: %d" % c, "cpu cores\t: %d" % cores,
                    "flags\t\t: fpu vme de pse tsc msr"]))
                n += 1
    return "\n\n".join(blocks) + "\n"


MEMINFO = "MemTotal:       2113470464 kB\nMemFree:        2000000000 kB\nBuffers:            1000 kB\nCached:           100000 kB\n"


@pytest.fixture
def proc(monkeypatch):
    files = {"/proc/cpuinfo": cpuinfo(2, 56, 2), "/proc/meminfo": MEMINFO}

    def lines(path, *a, **kw):
        return files[path].splitlines() if path in files else []
    monkeypatch.setattr(linux_hardware, "get_file_lines", lines)
    monkeypatch.setattr(module.platform, "machine", lambda: "x86_64")
    return files


def smi(xml):
    def answer(argv, data):
        assert argv[1:] == ["-q", "-x"], argv
        return (0, xml, "") if isinstance(xml, str) else xml
    return Tool(answer)


def test_describes_cpus_memory_and_gpus_with_one_command(proc, tmp_path):
    tool = smi(XML_A5000)
    result = run_module(module, {"nvml_plugin_paths": [str(tmp_path / "none.so")]}, tool)
    assert tool.calls == [["/usr/bin/nvidia-smi", "-q", "-x"]]
    assert result["changed"] is False
    assert result["node"] == {
        "cpus": 224, "sockets": 2, "cores_per_socket": 56, "threads_per_core": 2,
        "memtotal_mb": 2113470464 // 1024,
        "gpu_count": 2, "gpu_model": "NVIDIA RTX A5000", "gpu_type": "a5000", "gpu_indexes": [0, 1],
        "gres_autodetect": "off",
    }
    assert result["nvml_plugin"] is None


def test_the_same_numbers_as_setup(proc):
    """The values are setup's own: LinuxHardware's processor_* and memtotal_mb facts for the same files."""
    facts = linux_hardware.LinuxHardware(None).get_cpu_facts(collected_facts={"ansible_architecture": "x86_64"})
    facts.update(linux_hardware.LinuxHardware(None).get_memory_facts())
    result = run_module(module, {"nvml_plugin_paths": []}, smi(XML_P100))
    node = result["node"]
    assert (node["cpus"], node["sockets"], node["cores_per_socket"], node["threads_per_core"], node["memtotal_mb"]) == (
        facts["processor_vcpus"], facts["processor_count"], facts["processor_cores"],
        facts["processor_threads_per_core"], facts["memtotal_mb"])
    assert node["gpu_type"] == "p100"


def test_nvml_plugin_found_with_the_architecture(proc, tmp_path):
    plugin = tmp_path / "x86_64-linux-gnu" / "gpu_nvml.so"
    plugin.parent.mkdir()
    plugin.write_text("")
    result = run_module(module, {"nvml_plugin_paths": [str(tmp_path / "nope.so"), str(tmp_path / "{arch}-linux-gnu" / "gpu_nvml.so")]},
                        smi(XML_A5000))
    assert result["node"]["gres_autodetect"] == "nvml" and result["nvml_plugin"] == str(plugin)


def test_no_gpu_or_no_nvidia_smi_fails(proc):
    result = run_module(module, {}, smi((0, "<?xml version=\"1.0\" ?><nvidia_smi_log></nvidia_smi_log>", "")))
    assert result["failed"] and "no GPU" in result["msg"]
    result = run_module(module, {}, smi((9, "", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver")))
    assert result["failed"] and "couldn't communicate" in result["msg"]
    missing = Tool(lambda argv, data: (0, "", ""), missing=["nvidia-smi"])
    result = run_module(module, {}, missing)
    assert result["failed"] and "nvidia-smi was not found" in result["msg"] and missing.calls == []


@pytest.mark.parametrize("model, expected", [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA A100-SXM4-80GB", "a100"), ("NVIDIA L40S", "l40s"),
    ("NVIDIA GH200 480GB", "gh200"), ("Tesla V100-SXM2-32GB", "v100"), ("NVIDIA Graphics Device", "gpu"), ("", ""),
    (None, ""),
])
def test_gpu_type_as_the_controller_computed_it(model, expected):
    assert module.gpu_type(model) == expected
