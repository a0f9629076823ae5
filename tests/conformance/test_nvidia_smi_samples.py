"""nvidia-smi parsers over the real outputs in $CLUSTERFORGE_SAMPLES (default ../shared/fixtures).

Every file in nvidia-smi/, nvidia-smi-query-gpu/ and nvidia-smi-topo/ is a test case. The expected values
below were read off each sample by hand; a new sample without expectations still has to parse to something
non-empty.
"""

import os

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils import nvidia_smi as smi
from ansible_collections.clusterforge.gpu.tests.formats.nvidia_smi import parse_list, parse_q_text

try:
    from conftest import SAMPLES
except ImportError:  # pragma: no cover - conftest not importable under another rootdir
    SAMPLES = os.environ.get("CLUSTERFORGE_SAMPLES", os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
        "shared", "fixtures"))

pytestmark = [
    pytest.mark.conformance,
    pytest.mark.skipif(not os.path.isdir(SAMPLES), reason="no samples directory at %s" % SAMPLES),
]


def files(sub):
    path = os.path.join(SAMPLES, sub)
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def read(sub, name):
    with open(os.path.join(SAMPLES, sub, name)) as f:
        return f.read()


# ------------------------------------------------------------------------------------------ nvidia-smi/

def _xml_p100(data):
    assert data["driver_version"] == "510.47.03" and data["cuda_version"] == "11.6"
    gpu, = data["gpus"]
    assert gpu["name"] == "Tesla P100-PCIE-16GB"
    assert (gpu["power_limit_w"], gpu["min_power_limit_w"], gpu["max_power_limit_w"]) == (250.0, 125.0, 250.0)
    assert gpu["clock_event_reasons"]["gpu_idle"] is True  # from clocks_throttle_reasons
    assert gpu["ecc"]["aggregate_correctable"] == 3


def _xml_a5000(data):
    assert data["driver_version"] == "590.44.01" and data["cuda_version"] == "13.1"
    assert len(data["gpus"]) == 2
    assert {g["name"] for g in data["gpus"]} == {"NVIDIA RTX A5000"}
    assert data["gpus"][0]["power_limit_w"] == 230.0  # from gpu_power_readings/requested_power_limit
    assert data["gpus"][0]["max_sm_clock_mhz"] == 2100
    assert data["gpus"][0]["remapped_rows_pending"] is False


def _text_della_560(data):
    assert data["driver_version"] == "560.35.03" and data["cuda_version"] == "12.6"
    gpu, = data["gpus"]
    assert gpu["pci_bus_id"] == "00000000:DB:00.0" and gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert (gpu["power_limit_w"], gpu["min_power_limit_w"], gpu["max_power_limit_w"]) == (700.0, 200.0, 700.0)
    assert (gpu["max_sm_clock_mhz"], gpu["max_mem_clock_mhz"]) == (1980, 2619)


def _text_della_545(data):
    assert data["driver_version"] == "545.23.08" and data["cuda_version"] == "12.3"
    gpu, = data["gpus"]
    assert gpu["pci_bus_id"] == "00000000:19:00.0"
    assert gpu["max_sm_clock_mhz"] == 1980 and gpu["max_power_limit_w"] == 700.0


def _text_azure_retirement(data):
    assert data["driver_version"] == "535.86.10" and data["attached_gpus"] == 8
    assert [g["pci_bus_id"] for g in data["gpus"]] == ["0000000%d:00:00.0" % i for i in range(1, 9)]
    assert {g["retired_pages_pending"] for g in data["gpus"]} == {False}


def _list(count, name):
    def check(gpus):
        assert len(gpus) == count
        assert {g["name"] for g in gpus} == {name}
        assert [g["index"] for g in gpus] == list(range(count))
    return check


NVIDIA_SMI = {
    "q-x-tesla-p100-pcie-v11-netdata.xml.txt": (smi.parse_xml, _xml_p100),
    "q-x-2x-rtx-a5000-v13-drv590-telegraf.xml.txt": (smi.parse_xml, _xml_a5000),
    "q-text-h100-sxm5-della-1gpu.txt": (parse_q_text, _text_della_560),
    "q-text-h100-sxm5-della-pli-drv545.txt": (parse_q_text, _text_della_545),
    "q-d-page-retirement-8gpu-azure-hpchc.txt": (parse_q_text, _text_azure_retirement),
    "L-2x-a100-pcie-40gb-insights.txt": (parse_list, _list(2, "NVIDIA A100-PCIE-40GB")),
    "L-8x-quadro-rtx8000-insights.txt": (parse_list, _list(8, "Quadro RTX 8000")),
}
NVIDIA_SMI_SKIP = {"mig-lgip-4x-h100-sxm5-80gb-stackhpc.txt": "nvidia-smi mig -lgip: no parser in this collection"}


@pytest.mark.parametrize("name", files("nvidia-smi"))
def test_nvidia_smi_sample(name):
    if name in NVIDIA_SMI_SKIP:
        pytest.skip(NVIDIA_SMI_SKIP[name])
    text = read("nvidia-smi", name)
    if name in NVIDIA_SMI:
        parser, check = NVIDIA_SMI[name]
        check(parser(text))
    elif name.startswith("q-x"):
        assert smi.parse_xml(text)["gpus"]
    elif name.startswith("L-"):
        assert parse_list(text)
    else:
        assert parse_q_text(text)["gpus"]


# ------------------------------------------------------------------------------- nvidia-smi-query-gpu/

QUERY = {
    # file: (fields for noheader files or None, row count, {row index: {field: value}})
    "gpu_name-noheader-gtx1050-gist.csv.txt": (["gpu_name"], 1, {0: {"gpu_name": "GeForce GTX 1050"}}),
    "index-gpu_recovery_action-noheader-8gpu-dcgm-issue263.csv.txt": (
        ["index", "gpu_recovery_action"], 8, {1: {"index": 1, "gpu_recovery_action": "Reset"},
                                              7: {"index": 7, "gpu_recovery_action": "None"}}),
    "index-name-driver-mem-clocks.max.sm-max.memory-2x-l40s.csv.txt": (
        None, 2, {1: {"index": 1, "name": "NVIDIA L40S", "driver_version": "575.51.03", "memory.total": 46068,
                      "clocks.max.sm": 2520, "clocks.max.memory": 9001}}),
    "name-mem-driver-power.limit-clocks.max-1x-rtx4090-48gb.csv.txt": (
        None, 1, {0: {"memory.total": 49140, "driver_version": "570.195.03", "power.limit": 450.0,
                      "clocks.max.sm": 3105, "clocks.max.memory": 10501}}),
    "power.draw-limit-clocks.sm-max.sm-temp-util-1x-l4-gcp.csv.txt": (
        None, 1, {0: {"power.draw": 34.19, "power.limit": 72.0, "clocks.current.sm": 2040, "clocks.max.sm": 2040,
                      "temperature.gpu": 71, "utilization.gpu": 0}}),
    "power.draw-limit-util-temp-1x-l4-gcp-loaded.csv.txt": (
        None, 1, {0: {"power.draw": 70.93, "power.limit": 72.0, "utilization.gpu": 100, "temperature.gpu": 83}}),
    "power.limit-default-min-max-clocks.max-1x-rtx3090-oc.csv.txt": (
        None, 1, {0: {"power.limit": 450.0, "power.default_limit": 420.0, "power.min_limit": 100.0,
                      "power.max_limit": 450.0, "clocks.max.graphics": 2220, "clocks.max.memory": 10151}}),
    "tesla-p100-netdata.csv.txt": (
        None, 1, {0: {"name": "Tesla P100-PCIE-16GB", "uuid": "GPU-ef1b2c9b-38d8-2090-2bd1-f567a3eb42a6",
                      "fan.speed": None, "pstate": "P0", "memory.free": 16280, "power.draw": 28.16,
                      "clocks.current.memory": 715, "clocks.current.video": 835}}),
    "timestamp-name-pci-driver-pstate-pcie-temp-util-mem-loop-gtx1050-gist.csv.txt": (
        None, 8, {7: {"timestamp": "2018/10/10 13:06:10.428", "pci.bus_id": "00000000:01:00.0",
                      "driver_version": "396.45", "pcie.link.gen.max": 3, "utilization.gpu": 0,
                      "memory.total": 4040, "memory.used": 2}}),
}


@pytest.mark.parametrize("name", files("nvidia-smi-query-gpu"))
def test_query_gpu_sample(name):
    text = read("nvidia-smi-query-gpu", name)
    if name not in QUERY:
        assert smi.parse_query_csv(text), "new sample %s: add expectations (noheader files need their fields)" % name
        return
    fields, count, expected = QUERY[name]
    rows = smi.parse_query_csv(text, fields)
    assert len(rows) == count
    for index, values in expected.items():
        for field, value in values.items():
            assert rows[index][field] == value, (field, rows[index][field], value)


# ------------------------------------------------------------------------------------- nvidia-smi-topo/

def _dgx_a100(topo):
    assert topo["gpus"] == ["GPU%d" % i for i in range(8)]
    assert topo["nics"] == ["mlx5_%d" % i for i in range(12)]
    assert topo["nic_names"]["mlx5_11"] == "mlx5_11"
    assert topo["links"]["GPU0"]["GPU7"] == "NV12" and topo["links"]["GPU0"]["mlx5_0"] == "PXB"
    assert topo["links"]["mlx5_10"]["mlx5_11"] == "PIX"
    assert topo["cpu_affinity"]["GPU0"] == "48-63,176-191"
    assert topo["numa_affinity"] == {"GPU0": 3, "GPU1": 3, "GPU2": 1, "GPU3": 1, "GPU4": 7, "GPU5": 7,
                                     "GPU6": 5, "GPU7": 5}


def _dgx1(topo):
    assert len(topo["gpus"]) == 8 and topo["nics"] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert topo["links"]["GPU0"]["GPU1"] == "PIX" and topo["links"]["GPU0"]["GPU4"] == "SYS"
    assert topo["links"]["mlx5_3"]["GPU7"] == "PIX"
    assert topo["cpu_affinity"]["GPU4"] == "20-39,60-79" and topo["numa_affinity"]["GPU4"] == 1


TOPO = {"topo-m-dgx-a100-8gpu-12mlx5.txt": _dgx_a100, "topo-mp-dgx1-v100-8gpu-4mlx5.txt": _dgx1}


@pytest.mark.parametrize("name", files("nvidia-smi-topo"))
def test_topo_sample(name):
    if "p2p" in name:
        pytest.skip("nvidia-smi topo -p2p output: the collection reads topo -m only")
    topo = smi.parse_topo_matrix(read("nvidia-smi-topo", name))
    if name in TOPO:
        TOPO[name](topo)
    else:
        assert topo["gpus"] and topo["links"]
