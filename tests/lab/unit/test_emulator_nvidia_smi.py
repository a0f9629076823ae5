"""The nvidia-smi test emulator (tests/lab/emulators/nvidia-smi), run as a subprocess.

Everything it prints goes through the collection's parsers (or, for outputs no module reads: ``-q`` text, ``-L``
and the ``-pm``/``-pl``/``-ac`` messages, the test-only ones of tests/formats/nvidia_smi.py), so the emulator cannot
drift away from the formats the parsers (and so the modules) accept. The end-to-end tests run the modules against
the emulator.
"""

import json
import re
import os
import shutil
import subprocess
import sys

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.module_utils import nvidia_smi as smi
from ansible_collections.clusterforge.gpu.plugins.modules import nvidia_smi as nvidia_smi_module
from ansible_collections.clusterforge.gpu.plugins.modules import nvidia_smi_info as nvidia_smi_info_module
from ansible_collections.clusterforge.gpu.tests.formats.nvidia_smi import (
    parse_application_clocks_output, parse_list, parse_persistence_output, parse_power_limit_output,
    parse_power_limit_range_error, parse_q_text,
)

EMULATORS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "emulators")
EMU = os.path.join(EMULATORS, "nvidia-smi")
BUSES = ["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"]
QUERY = ["--query-gpu=" + ",".join(smi.STATE_QUERY_FIELDS), "--format=csv,noheader,nounits"]


class Emu(object):
    def __init__(self, tmp_path, count=None):
        self.state_dir = str(tmp_path / "var-lib")
        self.run_dir = str(tmp_path / "run")
        self.env = dict(os.environ, CLUSTERFORGE_EMU_STATE_DIR=self.state_dir, CLUSTERFORGE_EMU_RUN_DIR=self.run_dir,
                        LC_ALL="C")
        if count is not None:
            self.env["CLUSTERFORGE_EMU_GPU_COUNT"] = str(count)
        else:
            self.env.pop("CLUSTERFORGE_EMU_GPU_COUNT", None)

    def __call__(self, *args):
        proc = subprocess.run([sys.executable, EMU] + list(args), env=self.env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=30, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    def ok(self, *args):
        rc, out, err = self(*args)
        assert rc == 0, (args, rc, out, err)
        return out

    def rows(self, *ids):
        args = list(QUERY) + (["-i", ",".join(ids)] if ids else [])
        return smi.parse_query_csv(self.ok(*args), smi.STATE_QUERY_FIELDS)

    def reboot(self):
        shutil.rmtree(self.run_dir, ignore_errors=True)


@pytest.fixture
def emu(tmp_path):
    return Emu(tmp_path)


def test_emulator_file_header():
    with open(EMU) as f:
        lines = f.read().splitlines()
    assert lines[0] == "#!/usr/bin/env python3"
    assert lines[1] == ("# ClusterForge TEST EMULATOR of nvidia-smi: not the real tool. Test-only; installed only "
                        "into lab and molecule containers.")
    assert os.access(EMU, os.X_OK)


def test_list_gpus_profile_and_deterministic_uuids(emu, tmp_path):
    gpus = parse_list(emu.ok("-L"))
    assert [g["index"] for g in gpus] == list(range(8))
    assert {g["name"] for g in gpus} == {"NVIDIA H100 80GB HBM3"}
    other = Emu(tmp_path / "other")
    assert parse_list(other.ok("-L")) == gpus
    assert len({g["uuid"] for g in gpus}) == 8


def test_gpu_count_env(tmp_path):
    emu = Emu(tmp_path, count=4)
    assert len(parse_list(emu.ok("-L"))) == 4
    assert smi.parse_topo_matrix(emu.ok("topo", "-m"))["gpus"] == ["GPU0", "GPU1", "GPU2", "GPU3"]


def test_state_query_parses_with_the_h100_profile(emu):
    rows = emu.rows()
    assert [r["pci.bus_id"] for r in rows] == ["00000000:%s:00.0" % b for b in BUSES]
    row = rows[0]
    assert row["name"] == "NVIDIA H100 80GB HBM3"
    assert row["persistence_mode"] == "Disabled"
    assert (row["power.limit"], row["power.default_limit"], row["power.min_limit"], row["power.max_limit"]) == (
        700.0, 700.0, 200.0, 700.0)
    assert row["enforced.power.limit"] == 700.0
    assert (row["clocks.max.sm"], row["clocks.max.memory"]) == (1980, 2619)
    assert (row["clocks.applications.memory"], row["clocks.applications.graphics"]) == (2619, 1980)
    assert (row["clocks.default_applications.memory"], row["clocks.default_applications.graphics"]) == (2619, 1980)


def test_units_and_header_parse_to_the_same_values(emu):
    fields = ["index", "power.limit", "clocks.max.sm", "memory.total", "utilization.gpu", "temperature.gpu", "fan.speed"]
    plain = smi.parse_query_csv(emu.ok("--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"), fields)
    with_units = smi.parse_query_csv(emu.ok("--query-gpu=" + ",".join(fields), "--format=csv"))
    header_line = emu.ok("--query-gpu=" + ",".join(fields), "--format=csv").splitlines()[0]
    assert header_line == ("index, power.limit [W], clocks.max.sm [MHz], memory.total [MiB], utilization.gpu [%], "
                           "temperature.gpu, fan.speed [%]")
    assert with_units == plain
    assert plain[0]["fan.speed"] is None  # [N/A]
    assert plain[0]["memory.total"] == 81559


def test_every_documented_field_is_answered(emu):
    fields = ["index", "uuid", "name", "pci.bus_id", "persistence_mode", "power.limit", "power.default_limit",
              "power.min_limit", "power.max_limit", "enforced.power.limit", "power.draw", "clocks.sm", "clocks.max.sm",
              "clocks.mem", "clocks.max.memory", "clocks.applications.graphics", "clocks.applications.memory",
              "clocks.default_applications.graphics", "clocks.default_applications.memory", "temperature.gpu",
              "ecc.errors.uncorrected.volatile.total", "ecc.errors.corrected.volatile.total", "retired_pages.pending",
              "remapped_rows.pending", "mig.mode.current", "driver_version", "count", "utilization.gpu",
              "memory.total", "memory.used", "clocks_event_reasons.active", "clocks_throttle_reasons.active"]
    rows = smi.parse_query_csv(emu.ok("--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"), fields)
    assert len(rows) == 8
    assert rows[7]["count"] == 8 and rows[7]["index"] == 7
    assert rows[0]["driver_version"] == "550.90.07"
    assert rows[0]["retired_pages.pending"] is None  # Hopper remaps rows instead
    assert rows[0]["remapped_rows.pending"] == "No"
    assert rows[0]["mig.mode.current"] == "Disabled"
    assert rows[0]["ecc.errors.uncorrected.volatile.total"] == 0


def test_unknown_field_gives_the_real_error(emu):
    rc, out, _err = emu("--query-gpu=index,cuda_version", "--format=csv")
    assert rc == 2
    assert out.startswith('Field "cuda_version" is not a valid field to query.')


def test_compute_apps_query_lists_no_process(emu):
    """An emulated GPU runs no process: the header only (the health check's GPU-in-use test reads no pid)."""
    assert emu.ok("--query-compute-apps=pid", "--format=csv,noheader") == ""
    assert emu.ok("--query-compute-apps=pid,used_memory", "--format=csv") == "pid, used_gpu_memory [MiB]\n"
    assert emu("--query-compute-apps=pid")[0] == 2  # no --format
    rc, out, _err = emu("--query-compute-apps=pid,sm_clock", "--format=csv")
    assert rc == 2 and out.startswith('Field "sm_clock" is not a valid field to query.')


def test_bad_arguments(emu):
    assert emu("--query-gpu=index")[0] == 2  # no --format
    assert emu("--bogus")[0] == 2
    rc, out, _err = emu("-i", "9", "-L")
    assert (rc, out.strip()) == (6, "No devices were found")


def test_q_x_is_well_formed_and_parses(emu):
    data = smi.parse_xml(emu.ok("-q", "-x"))
    assert data["truncated"] is False
    assert (data["driver_version"], data["cuda_version"], data["attached_gpus"]) == ("550.90.07", "12.4", 8)
    assert len(data["gpus"]) == 8
    gpu = data["gpus"][4]
    assert gpu["pci_bus_id"] == "00000000:9A:00.0"
    assert gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert (gpu["power_limit_w"], gpu["enforced_power_limit_w"], gpu["min_power_limit_w"],
            gpu["max_power_limit_w"], gpu["default_power_limit_w"]) == (700.0, 700.0, 200.0, 700.0, 700.0)
    assert (gpu["max_sm_clock_mhz"], gpu["max_mem_clock_mhz"]) == (1980, 2619)
    assert gpu["mig_enabled"] is False
    assert gpu["ecc"]["volatile_uncorrectable"] == 0
    assert gpu["remapped_rows_pending"] is False
    assert gpu["retired_pages_pending"] is None
    assert gpu["clock_event_reasons"]["gpu_idle"] is True
    assert gpu["uuid"] == parse_list(emu.ok("-L"))[4]["uuid"]


def test_q_text_parses(emu):
    data = parse_q_text(emu.ok("-q", "-i", "1"))
    assert data["driver_version"] == "550.90.07"
    assert len(data["gpus"]) == 1
    assert data["gpus"][0]["pci_bus_id"] == "00000000:2A:00.0"
    assert data["gpus"][0]["max_power_limit_w"] == 700.0


def test_topo_matrix_hgx_h100(emu):
    topo = smi.parse_topo_matrix(emu.ok("topo", "-m"))
    assert topo["gpus"] == ["GPU%d" % i for i in range(8)]
    assert topo["nics"] == ["NIC%d" % i for i in range(8)]
    assert topo["nic_names"] == dict(("NIC%d" % i, "mlx5_%d" % i) for i in range(8))
    for a in topo["gpus"]:
        for b in topo["gpus"]:
            assert topo["links"][a][b] == ("X" if a == b else "NV18")
    assert topo["links"]["GPU5"]["NIC5"] == "PIX"
    assert topo["cpu_affinity"]["GPU0"] != topo["cpu_affinity"]["GPU7"]
    assert topo["numa_affinity"] == dict(("GPU%d" % i, 0 if i < 4 else 1) for i in range(8))


def test_topo_header_underlined_as_the_recorded_driver(emu):
    """The header line has the recorded driver's form (r580/topo-m-h200.txt): a tab, ESC[4m, the labels, the
    three affinity columns, ESC[0m; each GPU row has an empty cell before GPU NUMA ID."""
    recorded_path = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "unit", "plugins", "module_utils",
                                 "fixtures", "nvidia_smi", "r580", "topo-m-h200.txt")
    with open(recorded_path) as f:
        recorded = f.read().splitlines()
    emulated = emu.ok("topo", "-m").splitlines()
    shape = re.compile(r"^\t\x1b\[4mGPU0\t(?:.*\t)?CPU Affinity\tNUMA Affinity\tGPU NUMA ID\x1b\[0m$")
    assert shape.match(recorded[0]) and shape.match(emulated[0])
    assert recorded[1].endswith("\t\tN/A") and emulated[1].endswith("\t\tN/A")


R580 = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "unit", "plugins", "module_utils", "fixtures",
                    "nvidia_smi", "r580")


def test_state_and_supported_clocks_match_the_recorded_h100(emu):
    """The emulated GPU's limits, clocks and SUPPORTED_CLOCKS are the ones a real H100 80GB HBM3 reported
    (driver 580.159.04, recorded by tests/device/check.sh); only the identity fields differ."""
    with open(os.path.join(R580, "query-state-header-h100.csv")) as f:
        real = smi.parse_query_csv(f.read())[0]
    emulated = emu.rows()[0]
    same = [f for f in smi.STATE_QUERY_FIELDS if f not in ("index", "uuid", "pci.bus_id", "persistence_mode")]
    assert {f: emulated[f] for f in same} == {f: real[f] for f in same}
    with open(os.path.join(R580, "q-x-h100.xml")) as f:
        real_pairs = list(smi.parse_supported_clocks(f.read()).values())[0]
    assert list(smi.parse_supported_clocks(emu.ok("-q", "-x")).values())[0] == real_pairs
    # the driver's own rule: a pair outside the list is refused, one on it is applied
    rc, out, _err = emu("-i", "0", "-ac", "2619,1972")
    assert rc != 0 and "is not supported" in out
    assert "Applications clocks set to" in emu.ok("-i", "0", "-ac", "1593,1980")


def test_power_limit_set_and_out_of_range(emu):
    out = emu.ok("-i", "3", "-pl", "500")
    assert parse_power_limit_output(out) == [
        {"pci_bus_id": "00000000:5D:00.0", "power_limit_w": 500.0, "previous_w": 700.0}]
    assert [r["power.limit"] for r in emu.rows()] == [700.0] * 3 + [500.0] + [700.0] * 4
    rc, out, _err = emu("-pl", "800")
    assert rc != 0
    errors = parse_power_limit_range_error(out)
    assert len(errors) == 8 and errors[0]["min_w"] == 200.0 and errors[0]["max_w"] == 700.0
    assert "Terminating early due to previous errors." in out
    assert [r["power.limit"] for r in emu.rows()][3] == 500.0  # unchanged


def test_select_by_uuid_and_bus_id(emu):
    uuid = emu.rows()[6]["uuid"]
    assert [r["index"] for r in emu.rows(uuid, "00000000:2A:00.0")] == [6, 1]
    assert [r["index"] for r in emu.rows("0000:5d:00.0")] == [3]


def test_lock_clocks_clamped_and_reset(emu):
    out = emu.ok("-i", "1", "-lgc", "1000,2500")
    assert smi.parse_locked_clocks_output(out) == [{"pci_bus_id": "00000000:2A:00.0", "min": 1000, "max": 1980}]
    sm = smi.parse_query_csv(emu.ok("--query-gpu=clocks.sm", "--format=csv,noheader,nounits"), ["clocks.sm"])
    assert sm[1]["clocks.sm"] == 1000 and sm[0]["clocks.sm"] != 1000
    assert emu.ok("-i", "1", "-rgc").strip() == "All done."
    assert json.loads(emu.ok("--emu-state"))["volatile"]["gpus"][emu.rows()[1]["uuid"]]["locked_gpu_clocks"] is None
    out = emu.ok("-i", "0", "-lmc", "2619,2619")
    assert smi.parse_locked_memory_clocks_output(out)[0]["max"] == 2619


def test_application_clocks_supported_pairs_only(emu):
    rc, out, _err = emu("-i", "0", "-ac", "2619,1981")
    assert rc != 0 and "is not supported" in out
    out = emu.ok("-i", "0", "-ac", "2619,1755")
    assert parse_application_clocks_output(out)[0] == {"pci_bus_id": "00000000:18:00.0", "memory": 2619,
                                                       "graphics": 1755}
    assert emu.rows("0")[0]["clocks.applications.graphics"] == 1755
    emu.ok("-i", "0", "-rac")
    assert emu.rows("0")[0]["clocks.applications.graphics"] == 1980


def test_persistence_messages(emu):
    out = emu.ok("-i", "0", "-pm", "1")
    assert parse_persistence_output(out) == [{"pci_bus_id": "00000000:18:00.0", "enabled": True, "already": False}]
    out = emu.ok("-i", "0", "-pm", "1")
    assert parse_persistence_output(out)[0]["already"] is True
    assert emu("-pm", "maybe")[0] == 2


def test_setters_warn_without_persistence(emu):
    assert "persistence mode is disabled" in emu.ok("-i", "0", "-pl", "600")
    emu.ok("-i", "0", "-pm", "1")
    assert "persistence mode is disabled" not in emu.ok("-i", "0", "-pl", "600")


def test_volatile_settings_are_lost_on_reboot_faults_are_not(emu):
    emu.ok("-pl", "500")
    emu.ok("-pm", "1")
    emu.ok("--emu-drop-gpu", "2")
    assert {r["power.limit"] for r in emu.rows()} == {500.0}
    emu.reboot()  # /run is a tmpfs: a container restart empties it
    rows = emu.rows()
    assert {r["power.limit"] for r in rows} == {700.0}
    assert {r["persistence_mode"] for r in rows} == {"Disabled"}
    assert len(rows) == 7  # the injected fault lives in the state dir


def test_fault_drop_and_restore_gpu(emu):
    emu.ok("--emu-drop-gpu", "2")
    rows = emu.rows()
    assert len(rows) == 7
    assert "00000000:3A:00.0" not in [r["pci.bus_id"] for r in rows]
    assert [r["index"] for r in rows] == list(range(7))
    assert smi.parse_xml(emu.ok("-q", "-x"))["attached_gpus"] == 7
    assert len(smi.parse_topo_matrix(emu.ok("topo", "-m"))["gpus"]) == 7
    emu.ok("--emu-restore-gpus")
    assert len(emu.rows()) == 8


def test_fault_ecc_temperature_and_row_remap(emu):
    emu.ok("--emu-ecc", "1", "5")
    emu.ok("--emu-temp", "0", "91")
    emu.ok("--emu-row-remap-pending", "4", "1")
    gpus = smi.parse_xml(emu.ok("-q", "-x"))["gpus"]
    assert gpus[1]["ecc"]["volatile_uncorrectable"] == 5
    assert gpus[0]["ecc"]["volatile_uncorrectable"] == 0
    assert gpus[0]["temperature_c"] == 91
    assert gpus[0]["clock_event_reasons"]["hw_slowdown"] is True
    assert gpus[4]["remapped_rows_pending"] is True
    fields = ["ecc.errors.uncorrected.volatile.total", "temperature.gpu", "remapped_rows.pending"]
    rows = smi.parse_query_csv(emu.ok("--query-gpu=" + ",".join(fields), "--format=csv,noheader"), fields)
    assert rows[1]["ecc.errors.uncorrected.volatile.total"] == 5
    assert rows[0]["temperature.gpu"] == 91
    assert rows[4]["remapped_rows.pending"] == "Yes"


def test_fault_flags_validate_and_reset(emu):
    assert emu("--emu-drop-gpu", "12")[0] != 0
    assert emu("--emu-row-remap-pending", "1", "yes")[0] != 0
    assert emu("--emu-ecc", "1")[0] != 0
    emu.ok("--emu-drop-gpu", "0")
    emu.ok("-pl", "300")
    emu.ok("--emu-reset")
    rows = emu.rows()
    assert len(rows) == 8 and {r["power.limit"] for r in rows} == {700.0}
    state = json.loads(emu.ok("--emu-state"))
    assert len(state["hardware"]["gpus"]) == 8
    assert state["paths"]["run"].startswith(emu.run_dir)


# ------------------------------------------------------------------------------ modules end to end

def emulator_tool(emu):
    def handler(argv, data):
        assert argv[0] == EMU
        return emu(*argv[1:])
    return Tool(handler)


def test_module_end_to_end_set_idempotent_check_mode(emu, tmp_path):
    state_file = str(tmp_path / "etc" / "nvidia_smi_state.json")
    args = {"nvidia_smi_path": EMU, "state_file": state_file, "power_limit_watts": 500, "persistence_mode": True,
            "locked_gpu_clocks": {"min": 1500, "max": 1980}, "application_clocks": {"memory": 2619, "graphics": 1755}}

    tool = emulator_tool(emu)
    result = run_module(nvidia_smi_module, args, tool)
    assert result.get("failed") is not True, result
    assert result["changed"] is True
    assert tool.count("--query-gpu=") == 2
    assert tool.count("-pl", "500") == 8 and tool.count("-lgc") == 8
    assert {r["power.limit"] for r in emu.rows()} == {500.0}
    assert {r["clocks.applications.graphics"] for r in emu.rows()} == {1755}
    recorded = json.load(open(state_file))["gpus"]
    assert len(recorded) == 8
    assert {e["locked_gpu_clocks"]["max"] for e in recorded.values()} == {1980}

    tool = emulator_tool(emu)
    result = run_module(nvidia_smi_module, args, tool)
    assert result["changed"] is False
    assert len(tool.calls) == 1  # the one query, no setter

    tool = emulator_tool(emu)
    result = run_module(nvidia_smi_module, dict(args, power_limit_watts=450, gpus=["2"]), tool, check_mode=True)
    assert result["changed"] is True
    assert len(tool.calls) == 1
    assert emu.rows("2")[0]["power.limit"] == 500.0

    # a reboot drops the volatile settings: the module sees the readable ones again
    emu.reboot()
    tool = emulator_tool(emu)
    result = run_module(nvidia_smi_module, args, tool)
    assert result["changed"] is True
    assert tool.count("-pl", "500") == 8 and tool.count("-pm", "1") == 8
    assert {r["power.limit"] for r in emu.rows()} == {500.0}


def test_module_end_to_end_out_of_range_changes_nothing(emu, tmp_path):
    tool = emulator_tool(emu)
    result = run_module(nvidia_smi_module, {"nvidia_smi_path": EMU, "state_file": str(tmp_path / "s.json"),
                                            "power_limit_watts": 750}, tool)
    assert result["failed"] is True and "200-700 W" in result["msg"]
    assert len(tool.calls) == 1
    assert {r["power.limit"] for r in emu.rows()} == {700.0}


def test_info_module_end_to_end(emu):
    emu.ok("--emu-ecc", "3", "2")
    tool = emulator_tool(emu)
    result = run_module(nvidia_smi_info_module, {"nvidia_smi_path": EMU}, tool)
    assert result["gpu_count"] == 8 and len(tool.calls) == 2
    assert result["gpus"][3]["ecc"]["volatile_uncorrectable"] == 2
    assert result["topology"]["nic_names"]["NIC7"] == "mlx5_7"


def test_a_node_identity_gives_its_own_gpu_uuids_and_serials(tmp_path):
    """The scale lab's clones (identity "@hostname" in their image) each show their own GPUs; without an identity
    file every node shows the lab's one set of identifiers."""
    plain = Emu(tmp_path / "plain")
    ident = tmp_path / "identity"
    ident.write_text("gpu17\n")
    first = Emu(tmp_path / "a")
    first.env["CLUSTERFORGE_EMU_IDENTITY_FILE"] = str(ident)
    same = Emu(tmp_path / "b")
    same.env["CLUSTERFORGE_EMU_IDENTITY_FILE"] = str(ident)
    other_file = tmp_path / "identity2"
    other_file.write_text("gpu18\n")
    other = Emu(tmp_path / "c")
    other.env["CLUSTERFORGE_EMU_IDENTITY_FILE"] = str(other_file)
    fields = ["--query-gpu=uuid,serial", "--format=csv,noheader"]
    rows = {name: emu.ok(*fields).splitlines() for name, emu in
            (("plain", plain), ("first", first), ("same", same), ("other", other))}
    plain.env["CLUSTERFORGE_EMU_IDENTITY_FILE"] = str(tmp_path / "missing")
    assert Emu(tmp_path / "plain2").ok(*fields).splitlines() == rows["plain"]
    assert rows["first"] == rows["same"]
    assert len({tuple(r) for r in rows.values()}) == 3
    uuids = [line.split(", ")[0] for line in rows["first"] + rows["other"]]
    assert len(set(uuids)) == 16 and all(re.match(r"^GPU-[0-9a-f]{8}-([0-9a-f]{4}-){3}[0-9a-f]{12}$", u) for u in uuids)
    assert all(re.match(r"^\d{13}$", line.split(", ")[1]) for line in rows["first"])


def test_a_slurm_step_sees_only_the_gpus_of_its_allocation(emu):
    """What cgroup device confinement shows a real step: its GPUs alone, numbered from 0. Outside a step (the health
    check, prolog and epilog: SLURM_JOB_GPUS without SLURM_STEP_ID) every GPU is listed."""
    every = emu.rows()
    for key in [k for k in emu.env if k.startswith("SLURM_")]:
        emu.env.pop(key)
    emu.env.update({"SLURM_STEP_ID": "0", "SLURM_STEP_GPUS": "3"})
    lines = emu.ok("-L").splitlines()
    assert len(lines) == 1 and lines[0].startswith("GPU 0: ") and every[3]["uuid"] in lines[0]
    emu.env["SLURM_STEP_GPUS"] = "1,5-6"
    assert [r["uuid"] for r in emu.rows()] == [every[i]["uuid"] for i in (1, 5, 6)]
    assert [r["index"] for r in emu.rows()] == [0, 1, 2]
    emu.env.pop("SLURM_STEP_GPUS")
    emu.env["SLURM_JOB_GPUS"] = "7"  # a batch step: the job's GPUs
    assert [r["uuid"] for r in emu.rows()] == [every[7]["uuid"]]
    emu.env.pop("SLURM_STEP_ID")  # a prolog or epilog: the job's GPUs are named, but nothing confines it
    assert len(emu.rows()) == 8
