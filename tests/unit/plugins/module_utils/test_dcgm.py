"""Unit tests for plugins/module_utils/dcgm.py and tests/formats/dcgm.py (recorded dcgmi outputs in the real
formats)."""

import os

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils import dcgm as D
from ansible_collections.clusterforge.gpu.tests.formats.dcgm import parse_discovery, parse_health

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "dcgm")


def fixture(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


@pytest.mark.parametrize("word,expected", [
    ("Pass", "pass"), ("PASS", "pass"), ("Fail - All", "fail"), ("Skip - All", "skip"), ("Warn", "warn"),
    ("Warning", "warn"), ("SKIPPED", "skip"), ("Not Run", None), ("", None), (None, None), ("Inconclusive", None)])
def test_normalize_result(word, expected):
    assert D.normalize_result(word) == expected


def test_worst_order():
    assert D.worst(["pass", "skip", "warn"]) == "warn"
    assert D.worst(["pass", "fail", "warn"]) == "fail"
    assert D.worst(["skip", "skip"]) == "skip"
    assert D.worst([None]) is None


def test_dcgm4_json_failure_names_test_and_gpu():
    parsed = D.parse_diag_json(fixture("diag-r2-j-dcgm4-memory-fail-gpu1.json.txt"))
    assert parsed["result"] == "fail"
    assert [(t["category"], t["name"], t["result"]) for t in parsed["tests"]] == [
        ("Deployment", "software", "pass"), ("Hardware", "memory", "fail"), ("Integration", "pcie", "pass")]
    assert D.failing_tests(parsed) == [("memory", [1])]
    memory = parsed["tests"][1]
    assert memory["gpus"] == {0: "pass", 1: "fail"}
    assert memory["details"][0]["gpu"] == 1 and memory["details"][0]["error_id"] == 39
    assert parsed["metadata"]["dcgm_version"] == "4.4.2"
    assert parsed["metadata"]["driver_version"] == "580.105.08"
    assert parsed["metadata"]["gpu_device_ids"] == ["2330", "2330"]
    assert D.gpu_results(parsed)[1] == {"software": "pass", "memory": "fail", "pcie": "pass"}


def test_dcgm3_json_with_banner_nulls_and_csv_gpu_ids():
    parsed = D.parse_diag_json(fixture("diag-r1-j-dcgm3-deployment-nulls.json.txt"))
    assert [t["name"] for t in parsed["tests"]] == ["Denylist", "Persistence Mode"]
    assert parsed["tests"][1]["result"] == "warn"
    assert parsed["tests"][1]["gpus"] == {0: "warn", 1: "warn"}
    assert parsed["result"] == "warn"
    assert parsed["metadata"]["dcgm_version"] == "3.1.0"
    assert "Persistence mode for GPU 0" in parsed["tests"][1]["details"][0]["message"]


@pytest.mark.parametrize("text", ["", "Error: unable to connect to host engine", "{not json",
                                  '{"something": "else"}', "[1, 2]"])
def test_diag_json_rejects_non_documents(text):
    with pytest.raises(ValueError):
        D.parse_diag_json(text)


def test_diag_json_runtime_error_is_a_failure():
    parsed = D.parse_diag_json('{"DCGM Diagnostic": {"runtime_error": "Error: Unable to complete diagnostic for '
                               'entities 9.", "version": "4.4.2"}}')
    assert parsed["result"] == "fail" and parsed["tests"] == []
    assert "entities 9" in parsed["errors"][0]


def test_dcgm3_table_gpu_lists_and_wrapped_warnings():
    parsed = D.parse_diag(fixture("diag-r2-dcgm3-mixed-gpus.txt"))
    assert parsed["complete"] is True
    pcie = [t for t in parsed["tests"] if t["name"] == "PCIe"][0]
    assert pcie["gpus"] == {0: "pass", 1: "pass", 3: "pass", 2: "fail"}
    assert pcie["result"] == "fail"  # "Pass - GPUs: 0, 1, 3" first, but GPU 2 failed
    assert pcie["details"][0]["message"] == ("GPU 2 host-to-device bandwidth 2.35 GB/s is below the minimum "
                                             "threshold 15.00 GB/s.")
    power = [t for t in parsed["tests"] if t["name"] == "Targeted Power"][0]
    assert power["result"] == "warn" and power["gpus"] == {}
    assert power["details"][0]["message"] == "Max power of 412.0 did not reach desired power minimum 595.0."
    assert D.failing_tests(parsed) == [("PCIe", [2])]


def test_dcgm4_table_per_gpu_warning_rows():
    text = ("Successfully ran diagnostic for group.\n"
            "+---------------------------+------------------------------------------------+\n"
            "| Diagnostic                | Result                                         |\n"
            "+===========================+================================================+\n"
            "|-----  Deployment  --------+------------------------------------------------|\n"
            "| software                  | Pass                                           |\n"
            "|                           | GPU0: Pass                                     |\n"
            "|                           | GPU1: Pass                                     |\n"
            "+-----  Hardware  ----------+------------------------------------------------+\n"
            "| memory                    | Fail                                           |\n"
            "|                           | GPU0: Pass                                     |\n"
            "|                           | GPU1: Fail                                     |\n"
            "| Warning: GPU1             | A memory mismatch was detected on GPU 1, but   |\n"
            "|                           | no error was reported.                         |\n"
            "+---------------------------+------------------------------------------------+\n")
    parsed = D.parse_diag(text)
    memory = parsed["tests"][1]
    assert memory["gpus"] == {0: "pass", 1: "fail"}
    assert memory["details"] == [{"kind": "warning", "gpu": 1,
                                  "message": "A memory mismatch was detected on GPU 1, but no error was reported."}]
    assert parsed["result"] == "fail" and parsed["metadata"] == {}


def test_truncated_table_without_footer_and_unknown_lines():
    text = ("| Diagnostic                | Result                                         |\n"
            "|-----  Deployment  --------+------------------------------------------------|\n"
            "| software                  | Pass                                           |\n"
            "|                           | GPU0: Pass                                     |\n"
            "|                           |   Code: (000000000000)                         |\n"
            "+-----  Hardware  ----------+------------------------------------------------+\n"
            "| memory                    | Skip                                           |\n")
    parsed = D.parse_diag(text)
    assert parsed["complete"] is False
    assert [(t["name"], t["result"]) for t in parsed["tests"]] == [("software", "pass"), ("memory", "skip")]
    assert parsed["result"] == "pass" and parsed["errors"] == []


def test_table_error_output_is_a_failure():
    parsed = D.parse_diag("Error: Unable to complete diagnostic for group 2. Return: (-40) : Timeout\n")
    assert parsed["result"] == "fail" and parsed["tests"] == []
    assert parsed["errors"] == ["Error: Unable to complete diagnostic for group 2. Return: (-40) : Timeout"]


def test_health_json_with_incidents():
    text = ('{"body": {"GPU": {"children": {"3": {"value": "Failure", "children": {"Errors": {"children": '
            '{"Memory system": {"value": "Failure", "overflow": ["Detected a volatile double-bit ECC error", '
            '"in GPU 3."]}}}}}}}, "Overall Health": {"value": "Failure"}}, "header": ["Health Monitor Report"]}')
    health = parse_health(text)
    assert health["overall"] == "failure"
    assert health["entities"] == [{"group": "GPU", "id": 3, "health": "failure"}]
    assert health["incidents"][0]["system"] == "Memory system"
    assert health["incidents"][0]["message"] == "Detected a volatile double-bit ECC error in GPU 3."


def test_health_watches_not_enabled():
    health = parse_health("Error: Health watches not enabled. Please enable watches. \n")
    assert health["overall"] is None and "not enabled" in health["errors"][0]


def test_discovery_singular_and_sections():
    text = ("1 GPU found.\n"
            "+--------+----------------------------------------------------------------------+\n"
            "| GPU ID | Device Information                                                   |\n"
            "+--------+----------------------------------------------------------------------+\n"
            "| 0      | Name: NVIDIA H100 80GB HBM3                                          |\n"
            "|        | PCI Bus ID: 00000000:18:00.0                                         |\n"
            "|        | Device UUID: GPU-aaaa                                                |\n"
            "+--------+----------------------------------------------------------------------+\n"
            "2 NvSwitches found.\n+-----------+\n| Switch ID |\n+-----------+\n| 8         |\n| 9         |\n"
            "+-----------+\n")
    disc = parse_discovery(text)
    assert disc["gpu_count"] == 1 and disc["gpus"][0]["name"] == "NVIDIA H100 80GB HBM3"
    assert disc["gpus"][0]["pci_bus_id"] == "00000000:18:00.0"
    assert disc["nvswitch_count"] == 2 and disc["nvswitches"] == [8, 9]


# ------------------------------------------------------------------------------------------------ health -f

def watches_table(rows):
    """``dcgmi health -f`` as Health::GetWatches prints it: a title, then a DcgmiOutputTree 18 + 70 wide."""
    hline = "+" + "-" * 17 + "+" + "-" * 68 + "+\n"
    body = "".join("| %s | %s |\n" % (name.ljust(15), value.ljust(66)) for name, value in rows)
    return "Health monitor systems report\n" + hline + body + hline


# The rows of DCGM 4.x's dcgmi (dcgmi/Health.cpp, GetWatches: PMU and MCU are not printed, SM is) after
# `dcgmi health -s a`, which sets PCIe, Memory, InfoROM, Thermal, Power, NVLINK and both NvSwitch watches.
DCGM4_AFTER_A = [("PCIe", "On"), ("NVLINK", "On"), ("Memory", "On"), ("SM", "Off"), ("InfoROM", "On"),
                 ("Thermal", "On"), ("Power", "On"), ("Driver", "Off"), ("NvSwitch NF", "On"), ("NvSwitch F", "On")]


def test_health_watches_table_rows_in_order():
    parsed = D.parse_health_watches(watches_table(DCGM4_AFTER_A))
    assert parsed["errors"] == []
    assert list(parsed["watches"].items()) == [(name, value == "On") for name, value in DCGM4_AFTER_A]


def test_health_watches_all_off_and_crlf():
    text = watches_table([(name, "Off") for name, _v in DCGM4_AFTER_A]).replace("\n", "\r\n")
    parsed = D.parse_health_watches(text)
    assert parsed["errors"] == [] and len(parsed["watches"]) == 10 and not any(parsed["watches"].values())


def test_health_watches_json():
    text = ("Health monitor systems report\n{\n\t\"body\" : \n\t{\n\t\t\"Driver\" : \n\t\t{\n\t\t\t\"value\" : \"Off\"\n"
            "\t\t},\n\t\t\"PCIe\" : \n\t\t{\n\t\t\t\"value\" : \"On\"\n\t\t}\n\t}\n}\n")
    assert D.parse_health_watches(text) == {"watches": {"Driver": False, "PCIe": True}, "errors": []}


@pytest.mark.parametrize("text,error", [
    ("Error: Unable to get health watches. Return: Host engine connection invalid/disconnected\n",
     "Error: Unable to get health watches. Return: Host engine connection invalid/disconnected"),
    ("", "no health watch rows in the output"),
    ("Health monitor systems report\n", "no health watch rows in the output"),
    ("Health monitor systems report\n{\"body\" : \n", "output is not valid JSON"),
])
def test_health_watches_errors(text, error):
    parsed = D.parse_health_watches(text)
    assert parsed["watches"] == {} and parsed["errors"][0].startswith(error)


def test_health_watches_unknown_value_is_an_error_not_a_watch():
    parsed = D.parse_health_watches(watches_table([("PCIe", "On"), ("Memory", "Pending")]))
    assert parsed["watches"] == {"PCIe": True} and parsed["errors"] == ["Memory: Pending"]


def test_watch_rows_letters_and_a():
    assert D.watch_rows("t") == ["Thermal", "Power"]
    assert D.watch_rows("xp") == ["PCIe", "NvSwitch NF", "NvSwitch F"]  # WATCH_LETTERS' order, not the option's
    assert D.watch_rows("a") == ["PCIe", "Memory", "InfoROM", "Thermal", "Power", "NVLINK"]
    assert D.watch_rows(D.WATCH_LETTERS) == ["PCIe", "Memory", "InfoROM", "Thermal", "Power", "NVLINK", "Driver",
                                             "NvSwitch NF", "NvSwitch F"]
    with pytest.raises(ValueError):
        D.watch_rows("q")


@pytest.mark.parametrize("letters,reason", [
    ("a", None), ("p", None), ("pmitndx", None), ("xdntimp", None), ("", "it is empty"),
    ("pq", "'q' is not a watch letter"), ("zq", "'q', 'z' are not a watch letter"), ("aa", "'a' is not a watch letter"),
    ("tt", "'t' more than once (dcgmi rejects repeated letters)")])
def test_validate_watch_letters(letters, reason):
    assert D.validate_watch_letters(letters) == reason


# --- where the host engine listens (roles/dcgm records it; the modules and the health check read it) -------------

@pytest.mark.parametrize("address,problem", [
    ("unix:///run/nvidia-dcgm/nv-hostengine.sock", None), ("localhost", None), ("localhost:5555", None),
    ("10.1.0.5:5555", None), ("[::1]:5555", None),
    ("unix://run/x.sock", "absolute socket path"), ("unix:///run/a b.sock", "absolute socket path"),
    ("localhost:0", "port 0 is not 1-65535"), ("localhost:70000", "port 70000 is not 1-65535"),
    ("tcp://x:1", "not unix:///<path>"), ("", "an address is required"), (None, "an address is required"),
])
def test_hostengine_problem(address, problem):
    found = D.hostengine_problem(address)
    assert (found is None) if problem is None else (problem in found), found


@pytest.mark.parametrize("path,ok", [
    ("/run/nvidia-dcgm/nv-hostengine.sock", True), ("/run/x/y", True),
    ("/var/run/dcgm/he.sock", False), ("/run/he.sock", False), ("/run/a/b/c.sock", False), ("/run/../x/y", False),
    ("/run/x/..", False), ("relative/x", False), (5, False),
])
def test_socket_path_problem(path, ok):
    assert (D.socket_path_problem(path) is None) is ok


def test_recorded_hostengine(tmp_path):
    record = tmp_path / "dcgm-hostengine"
    assert D.recorded_hostengine(str(record)) is None and D.hostengine_args(path=str(record)) == []
    record.write_text("unix:///run/nvidia-dcgm/nv-hostengine.sock\n")
    if os.geteuid() == 0:
        assert D.hostengine_args(path=str(record)) == ["--host", "unix:///run/nvidia-dcgm/nv-hostengine.sock"]
    # the host option wins over the record
    assert D.hostengine_args("localhost:5555", str(record)) == ["--host", "localhost:5555"]
    link = tmp_path / "link"
    link.symlink_to(record)
    with pytest.raises(ValueError, match="cannot be read"):
        D.recorded_hostengine(str(link))  # never followed: a link could point root's dcgmi anywhere
    record.chmod(0o666)
    with pytest.raises(ValueError, match="only root may write"):
        D.recorded_hostengine(str(record))
    with pytest.raises(ValueError, match="absolute socket path"):
        D.hostengine_args("unix://x")
