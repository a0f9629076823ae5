"""Parsers of plugins/module_utils/nvidia_smi.py and tests/formats/nvidia_smi.py on recorded nvidia-smi outputs
(fixtures/nvidia_smi/<branch>/)."""

import os

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils import nvidia_smi as smi
from ansible_collections.clusterforge.gpu.tests.formats.nvidia_smi import (
    parse_application_clocks_output, parse_list, parse_persistence_output, parse_power_limit_output,
    parse_power_limit_range_error, parse_q_text,
)

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "nvidia_smi")


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


# ------------------------------------------------------------------------------------------------ -q -x

def test_xml_old_schema_p100():
    data = smi.parse_xml(fixture("r510/q-x-tesla-p100.xml"))
    assert data["driver_version"] == "510.47.03"
    assert data["cuda_version"] == "11.6"
    assert data["truncated"] is False
    assert len(data["gpus"]) == 1
    gpu = data["gpus"][0]
    assert gpu["index"] == 0
    assert gpu["pci_bus_id"] == "00000000:00:04.0"
    assert gpu["uuid"] == "GPU-d3da8716-eaab-75db-efc1-60e88e1cd55e"
    assert gpu["name"] == "Tesla P100-PCIE-16GB"
    assert gpu["persistence_mode"] is False
    assert gpu["mig_enabled"] is None  # N/A on Pascal
    # old schema: power_readings/power_limit/enforced_power_limit
    assert gpu["power_limit_w"] == 250.0
    assert gpu["enforced_power_limit_w"] == 250.0
    assert gpu["min_power_limit_w"] == 125.0
    assert gpu["max_power_limit_w"] == 250.0
    assert gpu["default_power_limit_w"] == 250.0
    assert gpu["max_sm_clock_mhz"] == 1328
    assert gpu["max_mem_clock_mhz"] == 715
    assert gpu["temperature_c"] == 38


def test_xml_old_schema_ecc_single_double_bit():
    ecc = smi.parse_xml(fixture("r510/q-x-tesla-p100.xml"))["gpus"][0]["ecc"]
    assert ecc == {"mode": "Enabled", "volatile_uncorrectable": 0, "volatile_correctable": 0,
                   "aggregate_uncorrectable": 0, "aggregate_correctable": 3}


def test_xml_old_schema_throttle_reasons_and_retired_pages():
    gpu = smi.parse_xml(fixture("r510/q-x-tesla-p100.xml"))["gpus"][0]
    assert gpu["clock_event_reasons"]["gpu_idle"] is True
    assert gpu["clock_event_reasons"]["sw_power_cap"] is False
    assert len(gpu["clock_event_reasons"]) == 9
    assert gpu["retired_pages_pending"] is False
    assert gpu["remapped_rows_pending"] is None  # <remapped_rows>N/A</remapped_rows>


def test_xml_new_schema_two_gpus():
    data = smi.parse_xml(fixture("r590/q-x-2x-rtx-a5000.xml"))
    assert (data["driver_version"], data["cuda_version"], data["attached_gpus"]) == ("590.44.01", "13.1", 2)
    assert [g["index"] for g in data["gpus"]] == [0, 1]
    assert [g["pci_bus_id"] for g in data["gpus"]] == ["00000000:81:00.0", "00000000:C1:00.0"]
    gpu = data["gpus"][0]
    # new schema: requested_power_limit is the set value, current_power_limit the enforced one
    assert gpu["power_limit_w"] == 230.0
    assert gpu["enforced_power_limit_w"] == 230.0
    assert gpu["min_power_limit_w"] == 100.0
    assert gpu["persistence_mode"] is True
    assert gpu["max_sm_clock_mhz"] == 2100
    assert gpu["max_mem_clock_mhz"] == 8001


def test_xml_new_schema_event_reasons_remap_and_deprecated_values():
    gpu = smi.parse_xml(fixture("r590/q-x-2x-rtx-a5000.xml"))["gpus"][0]
    assert gpu["clock_event_reasons"]["gpu_idle"] is True
    assert gpu["clock_event_reasons"]["hw_slowdown"] is False
    assert gpu["remapped_rows_pending"] is False
    assert gpu["retired_pages_pending"] is None
    # "Requested functionality has been deprecated" -> None
    assert gpu["applications_graphics_clock_mhz"] is None
    assert gpu["ecc"]["mode"] == "Disabled"
    assert gpu["ecc"]["volatile_uncorrectable"] is None


def test_xml_requested_differs_from_current_power_limit():
    text = fixture("r590/q-x-2x-rtx-a5000.xml").replace(
        "<current_power_limit>230.00 W</current_power_limit>", "<current_power_limit>180.00 W</current_power_limit>", 1
    ).replace("<requested_power_limit>230.00 W</requested_power_limit>",
              "<requested_power_limit>200.00 W</requested_power_limit>", 1)
    gpu = smi.parse_xml(text)["gpus"][0]
    assert gpu["power_limit_w"] == 200.0
    assert gpu["enforced_power_limit_w"] == 180.0


NEW_ECC = """<?xml version="1.0" ?>
<nvidia_smi_log>
\t<driver_version>550.90.07</driver_version>
\t<gpu id="00000000:18:00.0">
\t\t<uuid>GPU-1</uuid>
\t\t<ecc_mode><current_ecc>Enabled</current_ecc></ecc_mode>
\t\t<ecc_errors>
\t\t\t<volatile>
\t\t\t\t<sram_correctable>1</sram_correctable>
\t\t\t\t<sram_uncorrectable_parity>2</sram_uncorrectable_parity>
\t\t\t\t<sram_uncorrectable_secded>0</sram_uncorrectable_secded>
\t\t\t\t<dram_correctable>4</dram_correctable>
\t\t\t\t<dram_uncorrectable>3</dram_uncorrectable>
\t\t\t</volatile>
\t\t\t<aggregate>
\t\t\t\t<sram_correctable>0</sram_correctable>
\t\t\t\t<sram_uncorrectable>7</sram_uncorrectable>
\t\t\t\t<dram_correctable>0</dram_correctable>
\t\t\t\t<dram_uncorrectable>1</dram_uncorrectable>
\t\t\t</aggregate>
\t\t</ecc_errors>
\t\t<remapped_rows>
\t\t\t<remapped_row_pending>Yes</remapped_row_pending>
\t\t</remapped_rows>
\t</gpu>
</nvidia_smi_log>
"""


def test_xml_new_ecc_sums_sram_and_dram_both_v12_spellings():
    gpu = smi.parse_xml(NEW_ECC)["gpus"][0]
    assert gpu["ecc"]["volatile_uncorrectable"] == 5
    assert gpu["ecc"]["volatile_correctable"] == 5
    assert gpu["ecc"]["aggregate_uncorrectable"] == 8
    assert gpu["remapped_rows_pending"] is True


@pytest.mark.parametrize("cut", [0, 40, 200, 1500, 4000, 9000, 12000])
def test_xml_truncated_never_raises(cut):
    text = fixture("r510/q-x-tesla-p100.xml")[:cut]
    data = smi.parse_xml(text)
    assert isinstance(data["gpus"], list)
    if cut >= 200:
        assert data["driver_version"] == "510.47.03"
        assert data["truncated"] is True


def test_xml_truncated_keeps_complete_fields_and_gpus():
    text = fixture("r590/q-x-2x-rtx-a5000.xml")
    second = text.index('<gpu id="00000000:C1:00.0">')
    data = smi.parse_xml(text[:second + 400])
    assert data["truncated"] is True
    assert len(data["gpus"]) == 2
    assert data["gpus"][0]["power_limit_w"] == 230.0  # the first GPU is complete
    assert data["gpus"][1]["pci_bus_id"] == "00000000:C1:00.0"
    assert data["gpus"][1]["power_limit_w"] is None  # not reached


def test_xml_garbage_and_empty():
    assert smi.parse_xml("")["gpus"] == []
    assert smi.parse_xml("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")["gpus"] == []


# ----------------------------------------------------------------------------------------- --query-gpu

def test_query_noheader_nounits_state_fields():
    rows = smi.parse_query_csv(fixture("r550/query-state-noheader-nounits.csv"), smi.STATE_QUERY_FIELDS)
    assert len(rows) == 4
    assert rows[0]["index"] == 0
    assert rows[0]["uuid"] == "GPU-b1e053f1-6789-f495-7e49-37a1e102685c"
    assert rows[0]["pci.bus_id"] == "00000000:18:00.0"
    assert rows[0]["persistence_mode"] == "Enabled"  # stays a string
    assert rows[1]["power.limit"] == 500.0
    assert rows[1]["enforced.power.limit"] == 480.0
    assert rows[0]["clocks.max.sm"] == 1980
    assert rows[0]["clocks.applications.memory"] == 2619


def test_query_na_and_not_supported_become_none():
    rows = smi.parse_query_csv(fixture("r550/query-state-noheader-nounits.csv"), smi.STATE_QUERY_FIELDS)
    assert rows[2]["clocks.applications.graphics"] is None  # [N/A]
    assert rows[3]["power.min_limit"] is None  # [Not Supported]
    assert rows[3]["enforced.power.limit"] is None


def test_query_with_header_and_units():
    text = ("index, name, driver_version, memory.total [MiB], clocks.max.sm [MHz], clocks.max.memory [MHz]\n"
            "0, NVIDIA L40S, 575.51.03, 46068 MiB, 2520 MHz, 9001 MHz\n"
            "1, NVIDIA L40S, 575.51.03, 46068 MiB, 2520 MHz, 9001 MHz\n")
    rows = smi.parse_query_csv(text)
    assert rows[1] == {"index": 1, "name": "NVIDIA L40S", "driver_version": "575.51.03", "memory.total": 46068,
                       "clocks.max.sm": 2520, "clocks.max.memory": 9001}


def test_query_header_skipped_when_fields_given():
    text = "power.limit [W], power.min_limit [W]\n450.00 W, 100.00 W\n"
    assert smi.parse_query_csv(text, ["power.limit", "power.min_limit"]) == [
        {"power.limit": 450.0, "power.min_limit": 100.0}]


def test_query_header_without_units_nounits():
    text = "index, power.limit\n0, 700.00\n"
    assert smi.parse_query_csv(text) == [{"index": 0, "power.limit": 700.0}]


def test_query_percent_and_bracketed_na():
    text = ("name, fan.speed [%], utilization.gpu [%], temperature.gpu\n"
            "Tesla P100-PCIE-16GB, [N/A], 0 %, 37")
    assert smi.parse_query_csv(text) == [
        {"name": "Tesla P100-PCIE-16GB", "fan.speed": None, "utilization.gpu": 0, "temperature.gpu": 37}]


def test_query_serial_and_versions_stay_strings():
    rows = smi.parse_query_csv("0324217145110, 550.90.07, 96.00.99.00.01\n", ["serial", "driver_version", "vbios_version"])
    assert rows == [{"serial": "0324217145110", "driver_version": "550.90.07", "vbios_version": "96.00.99.00.01"}]


def test_query_none_word_kept_for_recovery_action():
    rows = smi.parse_query_csv("0, None\n1, Reset\n", ["index", "gpu_recovery_action"])
    assert rows == [{"index": 0, "gpu_recovery_action": "None"}, {"index": 1, "gpu_recovery_action": "Reset"}]


def test_query_truncated_last_row_dropped_and_blank_lines_ignored():
    text = "0, 700.00, 200.00\n\n1, 700.00, 200.00\n2, 70"
    rows = smi.parse_query_csv(text, ["index", "power.limit", "power.min_limit"])
    assert [r["index"] for r in rows] == [0, 1]


def test_query_empty():
    assert smi.parse_query_csv("", ["index"]) == []
    assert smi.parse_query_csv(None, ["index"]) == []


# --------------------------------------------------------------------------------------------- topo -m

def test_topo_new_nic_legend():
    topo = smi.parse_topo_matrix(fixture("r550/topo-m-hgx-h100-nic-legend.txt"))
    assert topo["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert topo["nics"] == ["NIC0", "NIC1", "NIC2", "NIC3"]
    assert topo["nic_names"] == {"NIC0": "mlx5_0", "NIC1": "mlx5_1", "NIC2": "mlx5_2", "NIC3": "mlx5_3"}
    assert topo["links"]["GPU0"]["GPU0"] == "X"
    assert topo["links"]["GPU0"]["GPU3"] == "NV18"
    assert topo["links"]["GPU2"]["NIC2"] == "PIX"
    assert topo["links"]["NIC3"]["GPU2"] == "NODE"
    assert topo["cpu_affinity"] == {"GPU0": "0-55,112-167", "GPU1": "0-55,112-167",
                                    "GPU2": "56-111,168-223", "GPU3": "56-111,168-223"}
    assert topo["numa_affinity"] == {"GPU0": 0, "GPU1": 0, "GPU2": 1, "GPU3": 1}
    assert topo["gpu_numa_id"]["GPU0"] is None


def test_topo_tabs_rendered_as_spaces_parse_the_same():
    text = fixture("r550/topo-m-hgx-h100-nic-legend.txt")
    spaced = "\n".join(line.expandtabs(8) for line in text.splitlines())
    assert smi.parse_topo_matrix(spaced) == smi.parse_topo_matrix(text)


def test_topo_old_mlx5_labels_map_to_themselves():
    text = ("\tGPU0\tGPU1\tmlx5_0\tmlx5_1\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tNV12\tPXB\tSYS\t48-63,176-191\t3\n"
            "GPU1\tNV12\t X \tSYS\tPXB\t16-31,144-159\t1\n"
            "mlx5_0\tPXB\tSYS\t X \tSYS\n"
            "mlx5_1\tSYS\tPXB\tSYS\t X\n\nLegend:\n\n  X    = Self\n  NV#  = Connection traversing a bonded set of # NVLinks\n")
    topo = smi.parse_topo_matrix(text)
    assert topo["nics"] == ["mlx5_0", "mlx5_1"]
    assert topo["nic_names"] == {"mlx5_0": "mlx5_0", "mlx5_1": "mlx5_1"}
    assert topo["links"]["mlx5_1"]["mlx5_1"] == "X"
    assert topo["numa_affinity"] == {"GPU0": 3, "GPU1": 1}


def test_topo_truncated_and_trailing_blanks():
    text = fixture("r550/topo-m-hgx-h100-nic-legend.txt")
    cut = text[:text.index("\nGPU2\t") + 12]
    topo = smi.parse_topo_matrix(cut + "\n\n   \n")
    assert topo["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert set(topo["links"]) == {"GPU0", "GPU1", "GPU2"}
    assert topo["cpu_affinity"]["GPU1"] == "0-55,112-167"
    assert "GPU2" not in topo["cpu_affinity"] or topo["cpu_affinity"]["GPU2"] is None


def test_topo_empty_and_unrelated():
    assert smi.parse_topo_matrix("")["gpus"] == []
    assert smi.parse_topo_matrix("No devices were found\n")["gpus"] == []


# -------------------------------------------------------------------------------------- -q text and -L

Q_TEXT = """
==============NVSMI LOG==============

Timestamp                                 : Thu Sep 26 14:13:55 2024
Driver Version                            : 560.35.03
CUDA Version                              : 12.6

Attached GPUs                             : 1
GPU 00000000:DB:00.0
    Product Name                          : NVIDIA H100 80GB HBM3
    Persistence Mode                      : Enabled
    GPU UUID                              : GPU-f7b02328-d6fe-5b1f-9683-15041689bb03
    Retired Pages
        Single Bit ECC                    : N/A
        Pending Page Blacklist            : N/A
    Remapped Rows
        Pending                           : No
    GPU Power Readings
        Power Draw                        : 71.53 W
        Current Power Limit               : 650.00 W
        Requested Power Limit             : 700.00 W
        Default Power Limit               : 700.00 W
        Min Power Limit                   : 200.00 W
        Max Power Limit                   : 700.00 W
    Max Clocks
        Graphics                          : 1980 MHz
        SM                                : 1980 MHz
        Memory                            : 2619 MHz
"""


def test_q_text_fields():
    data = parse_q_text(Q_TEXT)
    assert (data["driver_version"], data["cuda_version"], data["attached_gpus"]) == ("560.35.03", "12.6", 1)
    gpu = data["gpus"][0]
    assert gpu["pci_bus_id"] == "00000000:DB:00.0"
    assert gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["power_limit_w"] == 700.0
    assert gpu["enforced_power_limit_w"] == 650.0
    assert gpu["max_sm_clock_mhz"] == 1980
    assert gpu["remapped_rows_pending"] is False
    assert gpu["retired_pages_pending"] is None


def test_list_gpus():
    text = ("GPU 0: NVIDIA A100-PCIE-40GB (UUID: GPU-63110aaa-3561-c8f5-e125-4ab40bbcf838)\n"
            "  MIG 3g.20gb     Device  0: (UUID: MIG-aaaa)\n"
            "GPU 1: NVIDIA A100-PCIE-40GB (UUID: GPU-c9bd25dc-c0c4-3ab6-8f7f-3ad16d6bde4a)\n")
    assert parse_list(text) == [
        {"index": 0, "name": "NVIDIA A100-PCIE-40GB", "uuid": "GPU-63110aaa-3561-c8f5-e125-4ab40bbcf838"},
        {"index": 1, "name": "NVIDIA A100-PCIE-40GB", "uuid": "GPU-c9bd25dc-c0c4-3ab6-8f7f-3ad16d6bde4a"}]


# ------------------------------------------------------------------------------------------- setters

def test_setter_messages():
    text = fixture("r550/setters.txt")
    assert parse_persistence_output(text) == [
        {"pci_bus_id": "00000000:18:00.0", "enabled": True, "already": False},
        {"pci_bus_id": "00000000:2A:00.0", "enabled": True, "already": True}]
    assert parse_power_limit_output(text) == [
        {"pci_bus_id": "00000000:07:00.0", "power_limit_w": 500.0, "previous_w": 700.0}]
    # -lgc 0,2100 on a 1860 MHz GPU: the clamped value is what the driver reports
    assert smi.parse_locked_clocks_output(text) == [{"pci_bus_id": "00000000:07:00.0", "min": 0, "max": 1860}]
    assert smi.parse_locked_memory_clocks_output(text) == [{"pci_bus_id": "00000000:07:00.0", "min": 2619, "max": 2619}]
    assert parse_application_clocks_output(text) == [
        {"pci_bus_id": "00000000:18:00.0", "memory": 2619, "graphics": 1980}]
    assert parse_power_limit_range_error(text) == [
        {"pci_bus_id": "00000000:18:00.0", "requested_w": 800.0, "min_w": 200.0, "max_w": 700.0}]


def test_setter_parsers_ignore_unrelated_output():
    assert smi.parse_locked_clocks_output("All done.\n") == []
    assert parse_power_limit_output(None) == []


@pytest.mark.parametrize("value,expected", [
    ("700.00 W", 700.0), ("1980 MHz", 1980), ("81559 MiB", 81559), ("0 %", 0), ("38 C", 38), ("12", 12),
    ("P0", "P0"), ("-8 C", -8),
])
def test_to_number(value, expected):
    assert smi.to_number(value) == expected


@pytest.mark.parametrize("value,expected", [
    ("Enabled", True), ("Disabled", False), ("Yes", True), ("No", False), ("Active", True), ("Not Active", False),
    ("N/A", None), (None, None),
])
def test_to_bool(value, expected):
    assert smi.to_bool(value) is expected


# ------------------------------------------- recorded on a lent H200, driver 580.159.04 (fixtures/nvidia_smi/r580)

def test_r580_h200_xml():
    data = smi.parse_xml(fixture("r580/q-x-h200.xml"))
    assert (data["driver_version"], data["cuda_version"], data["attached_gpus"]) == ("580.159.04", "13.0", 1)
    gpu = data["gpus"][0]
    assert gpu["name"] == "NVIDIA H200" and gpu["architecture"] == "Hopper"
    assert gpu["pci_bus_id"] == "00000000:00:06.0"
    assert (gpu["power_limit_w"], gpu["min_power_limit_w"], gpu["max_power_limit_w"]) == (700.0, 200.0, 700.0)
    assert (gpu["max_sm_clock_mhz"], gpu["max_mem_clock_mhz"]) == (1980, 3201)
    assert (gpu["applications_graphics_clock_mhz"], gpu["applications_mem_clock_mhz"]) == (1980, 3201)
    assert gpu["memory_total_mib"] == 143771
    # Hopper has no page retirement (row remapping instead): N/A, not "no".
    assert gpu["retired_pages_pending"] is None and gpu["remapped_rows_pending"] is False
    assert gpu["ecc"]["volatile_uncorrectable"] == 0 and gpu["clock_event_reasons"]["gpu_idle"] is True


def test_r580_h200_supported_clocks():
    pairs = smi.parse_supported_clocks(fixture("r580/q-x-h200.xml"))
    h200 = pairs["GPU-20925cba-6a8d-6b08-86fc-cd87ffd86d29"]
    assert sorted(h200) == [2201, 3201]
    assert max(h200[3201]) == 1980 and 1965 in h200[3201] and 1972 not in h200[3201]
    # the text form lists the same pairs
    text = fixture("r580/q-d-supported-clocks-h200.txt")
    assert text.count("Graphics") == sum(len(v) for v in h200.values())


def test_supported_clocks_missing_section_and_garbage():
    assert smi.parse_supported_clocks("") == {}
    assert smi.parse_supported_clocks("<nvidia_smi_log><gpu><uuid>GPU-1</uuid></gpu></nvidia_smi_log>") == {"GPU-1": None}
    assert smi.parse_supported_clocks("<nvidia_smi_log><gpu><uuid>GPU-1</uuid><supported_clocks>N/A"
                                      "</supported_clocks></gpu></nvidia_smi_log>") == {"GPU-1": None}


def test_r580_h200_topo_underlined_header():
    """The driver underlines the header with terminal escapes even into a file; before they were dropped, the
    parser found no GPU at all in this recording."""
    text = fixture("r580/topo-m-h200.txt")
    assert "\x1b[4m" in text and "\x1b[0m" in text
    topo = smi.parse_topo_matrix(text)
    assert topo["gpus"] == ["GPU0"] and topo["nics"] == []
    assert topo["links"] == {"GPU0": {"GPU0": "X"}}
    assert topo["cpu_affinity"] == {"GPU0": "0-15"} and topo["numa_affinity"] == {"GPU0": 0}
    assert topo["gpu_numa_id"] == {"GPU0": None}


def test_topo_escapes_on_a_many_gpu_header_parse_as_without():
    text = fixture("r550/topo-m-hgx-h100-nic-legend.txt")
    lines = text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("GPU0"))
    lines[header] = "\t\x1b[4m" + lines[header].lstrip("\t") + "\x1b[0m"
    assert smi.parse_topo_matrix("\n".join(lines)) == smi.parse_topo_matrix(text)


def test_r580_h200_state_query():
    rows = smi.parse_query_csv(fixture("r580/query-state-noheader-nounits.csv"), smi.STATE_QUERY_FIELDS)
    assert len(rows) == 1
    row = rows[0]
    assert row["uuid"] == "GPU-20925cba-6a8d-6b08-86fc-cd87ffd86d29" and row["persistence_mode"] == "Enabled"
    assert (row["power.limit"], row["power.max_limit"], row["clocks.max.memory"]) == (700.0, 700.0, 3201)
    with_header = smi.parse_query_csv(fixture("r580/query-state-header.csv"))
    assert with_header == rows


def _healthcheck_fields():
    import ast
    path = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, os.pardir, os.pardir, "roles",
                        "slurm_compute", "files", "clusterforge_health", "check_gpu.py")
    with open(path) as f:
        source = f.read()
    values = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name in ("GPU_FIELDS", "EXTRA_FIELDS", "THROTTLE_REASONS", "EVENT_PREFIXES"):
                values[name] = ast.literal_eval(node.value)
    fields = values["GPU_FIELDS"] + values["EXTRA_FIELDS"]
    fields += ["%s.%s" % (prefix, name) for prefix in values["EVENT_PREFIXES"]
               for name, _label in values["THROTTLE_REASONS"]]
    return fields


def test_every_queried_field_is_known_to_the_r580_driver():
    """Each --query-gpu field that the modules and the health check ask for is in the recorded driver's own list
    (`nvidia-smi --help-query-gpu`); a field it does not know fails the whole query."""
    import re
    known = set()
    for line in fixture("r580/help-query-gpu.txt").splitlines():
        if line.startswith('"'):  # a field and its aliases: "clocks_event_reasons.x" or "clocks_throttle_reasons.x"
            known.update(re.findall(r'"([^"]+)"', line))
    assert len(known) > 200 and "clocks_throttle_reasons.hw_slowdown" in known
    asked = set(smi.STATE_QUERY_FIELDS) | set(_healthcheck_fields()) | {"driver_version", "uuid"}
    assert sorted(asked - known) == []


def test_r580_h200_module_result_judged_by_validation():
    """nvidia_smi_info's own result on the H200 (before the topo fix: its topology is empty), judged as validate.yml
    judges a node: count, health, persistence and power pass; the idle, unlocked GPU (345 MHz) fails a lock at 1980."""
    import json
    from ansible_collections.clusterforge.gpu.plugins.plugin_utils.validation_judge import validation_judge
    info = json.loads(fixture("r580/module-nvidia_smi_info-h200.json"))
    assert info["topology"]["gpus"] == []
    assert info["gpus"] == smi.parse_xml(fixture("r580/q-x-h200.xml"))["gpus"]
    settings = {"persistence_mode": True, "power_limit_watts": 700, "locked_gpu_clocks": {"min": 1980, "max": 1980}}
    expected = {"gpu_count": 1, "gpu_settings": settings}
    # the recording predates the record: as gpu_tuning would have left it after applying the three settings
    info["gpus"][0]["applied"] = {"persistence_mode": True, "power_limit_watts": 700, "locked_gpu_clocks": {
        "min": 1980, "max": 1980, "requested_min": 1980, "requested_max": 1980}}
    report = validation_judge({"nodes": {"dev01": {"nvidia_smi_info": info, "expected": expected}}})
    status = {c["id"]: c["status"] for c in report["checks"] if c["id"].startswith("gpu.")}
    assert status == {"gpu.count": "pass", "gpu.health": "pass", "gpu.persistence": "pass",
                      "gpu.power_limit": "pass", "gpu.clocks": "fail"}
    assert "SM clock 345 MHz, expected locked at 1980 MHz" in " ".join(report["failures"])
    # the same live state with no record (the H200 as it was lent: nothing of ours applied or restores it)
    info["gpus"][0]["applied"] = None
    report = validation_judge({"nodes": {"dev01": {"nvidia_smi_info": info, "expected": expected}}})
    status = {c["id"]: c["status"] for c in report["checks"] if c["id"].startswith("gpu.")}
    assert status == {"gpu.count": "pass", "gpu.health": "pass", "gpu.persistence": "fail",
                      "gpu.power_limit": "fail", "gpu.clocks": "fail"}
    assert "power limit not recorded as applied" in " ".join(report["failures"])


# ------------------------------------------ recorded on a lent H100 80GB HBM3 (SXM), driver 580.159.04 (r580)

def test_r580_h100_xml_and_supported_clocks():
    gpu = smi.parse_xml(fixture("r580/q-x-h100.xml"))["gpus"][0]
    assert gpu["name"] == "NVIDIA H100 80GB HBM3" and gpu["architecture"] == "Hopper"
    # PRACTICE.md's H100 SXM: 200-700 W, SM 1980 MHz, memory 2619 MHz
    assert (gpu["min_power_limit_w"], gpu["max_power_limit_w"], gpu["default_power_limit_w"]) == (200.0, 700.0, 700.0)
    assert (gpu["max_sm_clock_mhz"], gpu["max_mem_clock_mhz"]) == (1980, 2619)
    assert (gpu["default_applications_mem_clock_mhz"], gpu["default_applications_graphics_clock_mhz"]) == (2619, 1980)
    pairs = list(smi.parse_supported_clocks(fixture("r580/q-x-h100.xml")).values())[0]
    assert sorted(pairs) == [1593, 2619]
    assert pairs[2619] == pairs[1593] == list(range(1980, 344, -15))
    assert smi.parse_topo_matrix(fixture("r580/topo-m-h100.txt"))["gpus"] == ["GPU0"]
    row = smi.parse_query_csv(fixture("r580/query-state-header-h100.csv"))[0]
    assert (row["power.max_limit"], row["clocks.max.sm"], row["clocks.max.memory"]) == (700.0, 1980, 2619)


# --- nvlink -s / -e (the health check's nvlink check reads them through these parsers) ---------------------------
# Written in the driver's format: "GPU <i>: <name> (UUID: <uuid>)" then one tab-and-space indented line per link.
NVLINK_S = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"
            "\t Link 2: 0 GB/s\n"
            "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)\n\t Link 0: 26.562 GB/s\n")
# The two layouts drivers print for -e: every counter on its link's line, or the link's line then one per counter.
NVLINK_E_INLINE = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\n\t Link 0: Replay Errors: 2\n"
                   "\t Link 0: Recovery Errors: 0\n\t Link 0: CRC Errors: 5\n\t Link 1: Replay Errors: 0\n")
NVLINK_E_BLOCK = ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)\n\t Link 0:\n\t\t Replay Errors: 2\n"
                  "\t\t Recovery Errors: 0\n\t\t CRC Errors: 5\n\t Link 1:\n\t\t Replay Errors: 0\n")


def test_nvlink_status_tells_active_links_from_inactive_and_zero_speed_ones():
    assert smi.parse_nvlink_status(NVLINK_S) == [("0", "GPU-aaaa", {0: True, 1: False, 2: False}),
                                                 ("1", "GPU-bbbb", {0: True})]
    assert smi.parse_nvlink_status("") == []


@pytest.mark.parametrize("text", [NVLINK_E_INLINE, NVLINK_E_BLOCK])
def test_nvlink_errors_read_both_layouts(text):
    assert smi.parse_nvlink_errors(text) == {"GPU-aaaa": {"0": {"Replay Errors": 2, "Recovery Errors": 0,
                                                                "CRC Errors": 5}, "1": {"Replay Errors": 0}}}


def test_nvlink_errors_key_a_gpu_without_uuid_by_index_and_skip_counters_that_are_not_numbers():
    text = "GPU 3: NVIDIA H100 80GB HBM3\n\t Link 4: Replay Errors: N/A\n\t Link 4: CRC Errors: 7\n"
    assert smi.parse_nvlink_errors(text) == {"GPU 3": {"4": {"CRC Errors": 7}}}
