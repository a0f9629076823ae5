"""clusterforge.gpu.nvidia_smi_info with recorded nvidia-smi outputs (no GPU needed)."""

import os
from unittest import mock

import pytest

from ansible.module_utils import basic
from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import nvidia_smi_info as module

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "module_utils", "fixtures", "nvidia_smi")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


XML_V13 = fixture("r590/q-x-2x-rtx-a5000.xml")
XML_V11 = fixture("r510/q-x-tesla-p100.xml")
TOPO = fixture("r550/topo-m-hgx-h100-nic-legend.txt")


def handler(xml=XML_V13, topo=(0, TOPO, "")):
    def answer(argv, data):
        if argv[1:] == ["-q", "-x"]:
            return xml if isinstance(xml, tuple) else (0, xml, "")
        if argv[1:] == ["topo", "-m"]:
            return topo
        raise AssertionError("unexpected command %r" % (argv,))
    return answer


@pytest.fixture
def warnings():
    seen = []
    with mock.patch.object(basic.AnsibleModule, "warn", lambda self, msg: seen.append(msg)):
        yield seen


def test_reports_gpus_and_topology_with_one_call_each():
    tool = Tool(handler())
    result = run_module(module, {}, tool)
    assert result["changed"] is False
    assert tool.count("-q", "-x") == 1
    assert tool.count("topo", "-m") == 1
    assert len(tool.calls) == 2
    assert result["driver_version"] == "590.44.01" and result["cuda_version"] == "13.1"
    assert result["gpu_count"] == 2
    gpu = result["gpus"][1]
    assert gpu["index"] == 1 and gpu["pci_bus_id"] == "00000000:C1:00.0"
    assert gpu["name"] == "NVIDIA RTX A5000"
    assert gpu["min_power_limit_w"] == 100.0 and gpu["max_power_limit_w"] == 230.0
    assert gpu["clock_event_reasons"]["gpu_idle"] in (True, False)
    topo = result["topology"]
    assert topo["nic_names"]["NIC2"] == "mlx5_2"
    assert topo["numa_affinity"]["GPU3"] == 1
    assert topo["links"]["GPU0"]["GPU1"] == "NV18"


def test_old_driver_xml():
    result = run_module(module, {"topology": False}, Tool(handler(xml=XML_V11)))
    gpu = result["gpus"][0]
    assert gpu["power_limit_w"] == 250.0 and gpu["enforced_power_limit_w"] == 250.0
    assert gpu["ecc"]["aggregate_correctable"] == 3
    assert gpu["retired_pages_pending"] is False
    assert gpu["clock_event_reasons"]["gpu_idle"] is True


def test_topology_false_runs_no_topo():
    tool = Tool(handler())
    result = run_module(module, {"topology": False}, tool)
    assert result["topology"] is None
    assert tool.count("topo") == 0
    assert len(tool.calls) == 1


def test_topo_failure_warns_and_returns_none(warnings):
    tool = Tool(handler(topo=(2, "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n", "")))
    result = run_module(module, {}, tool)
    assert result.get("failed") is not True
    assert result["topology"] is None
    assert any("topo -m failed" in w for w in warnings)


def test_query_failure_reports_cmd_rc_output():
    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    result = run_module(module, {}, Tool(handler(xml=(9, msg, ""))))
    assert result["failed"] is True
    assert result["rc"] == 9 and result["stdout"] == msg
    assert result["cmd"].endswith("nvidia-smi -q -x")


def test_truncated_xml_warns_and_returns_what_was_read(warnings):
    cut = XML_V13[:XML_V13.index('<gpu id="00000000:C1:00.0">') + 300]
    result = run_module(module, {"topology": False}, Tool(handler(xml=cut)))
    assert result["truncated"] is True
    assert result["gpu_count"] == 2
    assert result["gpus"][0]["power_limit_w"] == 230.0
    assert any("cut short" in w for w in warnings)


def test_no_gpu_in_output_fails():
    result = run_module(module, {}, Tool(handler(xml="No devices were found\n")))
    assert result["failed"] is True and "no GPU" in result["msg"]


def test_tool_missing():
    tool = Tool(handler(), missing=("nvidia-smi",))
    result = run_module(module, {}, tool)
    assert result["failed"] is True and "nvidia-smi was not found" in result["msg"]
    assert tool.calls == []


def test_check_mode_reads_the_same():
    tool = Tool(handler())
    result = run_module(module, {}, tool, check_mode=True)
    assert result["changed"] is False and result["gpu_count"] == 2
    assert len(tool.calls) == 2


def test_nvidia_smi_path_is_used():
    tool = Tool(handler())
    run_module(module, {"nvidia_smi_path": "/opt/nvidia/bin/nvidia-smi", "topology": False}, tool)
    assert tool.calls[0][0] == "/opt/nvidia/bin/nvidia-smi"
