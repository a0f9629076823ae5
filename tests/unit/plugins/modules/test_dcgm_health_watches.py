"""dcgm_health_watches module tests: ``dcgmi health -f``/``-s`` answered by the lab's dcgmi emulator (run as a
subprocess with its own state directory), or by text in the real DCGM format where the emulator cannot say it."""

import os
import subprocess
import sys
import types

import pytest

from conftest import EMULATORS
from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.module_utils import dcgm as dcgm_module_utils
from ansible_collections.clusterforge.gpu.plugins.module_utils.dcgm import parse_health_watches
from ansible_collections.clusterforge.gpu.plugins.modules import dcgm_health_watches

DCGMI = os.path.join(EMULATORS, "dcgmi")
ROWS = ["PCIe", "NVLINK", "Memory", "InfoROM", "Thermal", "Power", "Driver", "NvSwitch NF", "NvSwitch F"]
NOT_RUNNING = ("Error: unable to establish a connection to the specified host: localhost\n"
               "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n")


@pytest.fixture
def emu_env(tmp_path):
    env = dict(os.environ)
    env.update(CLUSTERFORGE_EMU_STATE_DIR=str(tmp_path / "state"), CLUSTERFORGE_EMU_RUN_DIR=str(tmp_path / "run"))
    env.pop("CLUSTERFORGE_EMU_DCGM_GPUS", None)
    return env


def emulate(env):
    """A Tool handler that runs the dcgmi emulator for every dcgmi command the module runs."""
    def handler(argv, data):
        assert argv[0] == "/usr/bin/dcgmi", argv
        p = subprocess.run([sys.executable, DCGMI] + argv[1:], env=env, capture_output=True, text=True, timeout=60,
                           check=False)
        return p.returncode, p.stdout, p.stderr
    return handler


def emu_set(env, letters):
    assert emulate(env)(["/usr/bin/dcgmi", "health", "-s", letters], None)[0] == 0


def table(on):
    """``dcgmi health -f`` in DcgmiOutputTree's layout (18 + 70), the emulator's row set."""
    hline = "+" + "-" * 17 + "+" + "-" * 68 + "+\n"
    rows = "".join("| %s | %s |\n" % (row.ljust(15), ("On" if row in on else "Off").ljust(66)) for row in ROWS)
    return "Health monitor systems report\n" + hline + rows + hline


def run(args, handler, **kw):
    tool = Tool(handler)
    params = {"delay_seconds": 0}
    params.update(args)
    return run_module(dcgm_health_watches, params, tool, **kw), tool


def fake_sleep(monkeypatch):
    """Record the module's sleeps instead of sleeping (its own ``time`` only: subprocess waits still sleep)."""
    slept = []
    monkeypatch.setattr(dcgm_health_watches, "time", types.SimpleNamespace(sleep=slept.append))
    return slept


def sets(tool):
    return [c for c in tool.calls if c[1:3] == ["health", "-s"]]


def test_parser_reads_the_emulator_text_and_json_alike(emu_env):
    emu_set(emu_env, "pt")
    text = parse_health_watches(emulate(emu_env)(["/usr/bin/dcgmi", "health", "-f"], None)[1])
    as_json = parse_health_watches(emulate(emu_env)(["/usr/bin/dcgmi", "health", "-f", "-j"], None)[1])
    assert text["errors"] == [] and as_json["errors"] == []
    assert list(text["watches"]) == ROWS and as_json["watches"] == text["watches"]
    assert [row for row, on in text["watches"].items() if on] == ["PCIe", "Thermal", "Power"]
    assert table({"PCIe", "Thermal", "Power"}) == emulate(emu_env)(["/usr/bin/dcgmi", "health", "-f"], None)[1]


def test_all_on_is_unchanged_with_one_call(emu_env):
    emu_set(emu_env, "a")
    result, tool = run({"watches": "a"}, emulate(emu_env))
    assert "failed" not in result and result["changed"] is False
    assert tool.calls == [["/usr/bin/dcgmi", "health", "-f"]]
    assert result["watches"] == dict((row, True) for row in ROWS)
    assert result["missing"] == [] and "cmd" not in result


def test_some_off_sets_then_reads_back(emu_env):
    emu_set(emu_env, "p")
    result, tool = run({"watches": "pmt"}, emulate(emu_env))
    assert "failed" not in result and result["changed"] is True
    assert tool.calls == [["/usr/bin/dcgmi", "health", "-f"], ["/usr/bin/dcgmi", "health", "-s", "pmt"],
                          ["/usr/bin/dcgmi", "health", "-f"]]
    assert result["missing"] == ["Memory", "Thermal", "Power"]
    assert result["cmd"] == "/usr/bin/dcgmi health -s pmt"
    assert [row for row, on in result["watches"].items() if on] == ["PCIe", "Memory", "Thermal", "Power"]
    # idempotent: the second run reads once and changes nothing
    again, tool = run({"watches": "pmt"}, emulate(emu_env))
    assert again["changed"] is False and len(tool.calls) == 1


def test_extra_watches_on_are_fine(emu_env):
    emu_set(emu_env, "pmitn")
    result, tool = run({"watches": "pt"}, emulate(emu_env))
    assert result["changed"] is False and sets(tool) == []
    assert result["watches"]["NVLINK"] is True


def test_nothing_set_after_a_host_engine_restart(emu_env):
    result, tool = run({"watches": "a"}, emulate(emu_env))
    assert result["changed"] is True and sets(tool) == [["/usr/bin/dcgmi", "health", "-s", "a"]]
    assert result["missing"] == ["PCIe", "Memory", "InfoROM", "Thermal", "Power", "NVLINK"]
    assert all(result["watches"].values())


def test_check_mode_reports_and_sets_nothing(emu_env):
    emu_set(emu_env, "p")
    result, tool = run({"watches": "pm"}, emulate(emu_env), check_mode=True)
    assert "failed" not in result and result["changed"] is True
    assert sets(tool) == [] and tool.calls == [["/usr/bin/dcgmi", "health", "-f"]]
    assert result["missing"] == ["Memory"] and result["cmd"] == "/usr/bin/dcgmi health -s pm"
    assert result["watches"]["Memory"] is False  # as read: nothing was set
    after, _tool = run({"watches": "pm"}, emulate(emu_env))
    assert after["missing"] == ["Memory"]  # the check-mode run left the host engine as it was


def test_check_mode_unchanged(emu_env):
    emu_set(emu_env, "pm")
    result, tool = run({"watches": "mp"}, emulate(emu_env), check_mode=True)
    assert result["changed"] is False and "cmd" not in result and len(tool.calls) == 1


def test_diff_before_and_after(emu_env):
    emu_set(emu_env, "n")
    result, _tool = run({"watches": "pm"}, emulate(emu_env), diff=True)
    d = result["diff"]
    assert d["before"].splitlines()[:3] == ["PCIe: off", "NVLINK: on", "Memory: off"]
    assert d["after"].splitlines()[:3] == ["PCIe: on", "NVLINK: off", "Memory: on"]  # -s replaces the set
    assert len(d["after"].splitlines()) == len(ROWS)


def test_diff_in_check_mode_is_predicted(emu_env):
    emu_set(emu_env, "n")
    result, tool = run({"watches": "pm"}, emulate(emu_env), check_mode=True, diff=True)
    assert sets(tool) == []
    assert result["diff"]["before"].splitlines()[:3] == ["PCIe: off", "NVLINK: on", "Memory: off"]
    assert result["diff"]["after"].splitlines()[:3] == ["PCIe: on", "NVLINK: off", "Memory: on"]
    full, _tool = run({"watches": "pm"}, emulate(emu_env), diff=True)
    assert full["diff"] == result["diff"]  # the prediction is what the real run did


def test_diff_unchanged(emu_env):
    emu_set(emu_env, "a")
    result, _tool = run({"watches": "t"}, emulate(emu_env), diff=True)
    assert result["changed"] is False and result["diff"]["before"] == result["diff"]["after"]
    assert "Thermal: on\nPower: on\n" in result["diff"]["after"]


def test_set_that_does_not_stick_fails():
    def handler(argv, data):
        if argv[1:3] == ["health", "-s"]:
            return 0, "Health monitor systems set successfully.\n", ""
        return 0, table({"PCIe"}), ""
    result, tool = run({"watches": "pt"}, handler)
    assert result["failed"] is True
    assert result["msg"].startswith("DCGM health watches still not on after dcgmi health -s pt: Thermal, Power.")
    assert "| Thermal         | Off" in result["msg"]  # the output is in the message
    assert result["missing"] == ["Thermal", "Power"] and len(tool.calls) == 3


def test_set_rejected_by_dcgmi_fails_with_its_message():
    def handler(argv, data):
        if argv[1:3] == ["health", "-s"]:
            return 255, "", "PARSE ERROR: Argument: -s (--set)\n             Invalid flags detected\n"
        return 0, table({"PCIe"}), ""
    result, _tool = run({"watches": "pd"}, handler)
    assert result["failed"] and "dcgmi health -s pd failed (rc=255)" in result["msg"]
    assert "Invalid flags detected" in result["msg"] and result["missing"] == ["Driver"]


def test_host_engine_answers_on_the_third_try(emu_env, monkeypatch):
    slept = fake_sleep(monkeypatch)
    emu_set(emu_env, "a")
    answers = [(255, NOT_RUNNING, ""), (255, NOT_RUNNING, "")]

    def handler(argv, data):
        return answers.pop(0) if answers else emulate(emu_env)(argv, data)
    result, tool = run({"watches": "a", "delay_seconds": 5}, handler)
    assert "failed" not in result and result["changed"] is False
    assert tool.calls == [["/usr/bin/dcgmi", "health", "-f"]] * 3
    assert slept == [5, 5]


def test_host_engine_never_answers(monkeypatch):
    slept = fake_sleep(monkeypatch)
    result, tool = run({"watches": "a", "retries": 2, "delay_seconds": 1}, lambda argv, data: (255, NOT_RUNNING, ""))
    assert result["failed"] is True and result["rc"] == 255
    assert "dcgmi health -f failed 3 time(s), 1 s apart" in result["msg"]
    assert "nvidia-dcgm" in result["msg"] and "Unable to connect to host engine" in result["msg"]
    assert len(tool.calls) == 3 and slept == [1, 1]  # no sleep after the last try
    assert sets(tool) == []


def test_default_retries_with_zero_delay():
    result, tool = run({"watches": "p"}, lambda argv, data: (255, NOT_RUNNING, ""))
    assert result["failed"] and len(tool.calls) == 7  # retries 6: one try and six more


def test_unparseable_output_fails():
    result, _tool = run({"watches": "p"}, lambda argv, data: (0, "something unexpected\n", ""))
    assert result["failed"] and "printed no health watch rows: something unexpected" in result["msg"]


@pytest.mark.parametrize("letters,needle", [
    ("pq", "'q' is not a watch letter"), ("ap", "'a' is not a watch letter"), ("P", "'P' is not a watch letter"),
    ("", "it is empty"), ("pp", "'p' more than once"), ("s", "'s' is not a watch letter")])
def test_bad_letters_rejected_before_any_command(letters, needle):
    result, tool = run({"watches": letters}, lambda argv, data: pytest.fail("ran %r" % (argv,)))
    assert result["failed"] and tool.calls == []
    assert result["msg"].startswith("watches must be a, or letters of pmitndx each at most once; got %r" % letters)
    assert needle in result["msg"]


@pytest.mark.parametrize("args,needle", [({"retries": -1}, "retries must be 0 or more"),
                                         ({"delay_seconds": -1}, "delay_seconds must be 0 or more")])
def test_bad_numbers_rejected_before_any_command(args, needle):
    params = {"watches": "a"}
    params.update(args)
    result, tool = run(params, lambda argv, data: pytest.fail("ran %r" % (argv,)))
    assert result["failed"] and needle in result["msg"] and tool.calls == []


def test_a_means_all_rows_dcgmi_sets_for_a():
    """``a`` is sent as ``a``; it needs the rows every dcgmi's ``-s a`` turns on, not Driver (no dcgmi sets it)."""
    state = {"on": set()}
    real_a = {"PCIe", "NVLINK", "Memory", "InfoROM", "Thermal", "Power", "NvSwitch NF", "NvSwitch F"}  # DCGM 4.x

    def handler(argv, data):
        if argv[1:] == ["health", "-s", "a"]:
            state["on"] = set(real_a)
            return 0, "Health monitor systems set successfully.\n", ""
        return 0, table(state["on"]), ""
    result, tool = run({"watches": "a"}, handler)
    assert "failed" not in result and result["changed"] is True
    assert sets(tool) == [["/usr/bin/dcgmi", "health", "-s", "a"]]
    assert result["missing"] == ["PCIe", "Memory", "InfoROM", "Thermal", "Power", "NVLINK"]
    assert result["watches"]["Driver"] is False
    again, tool = run({"watches": "a"}, handler)
    assert again["changed"] is False and len(tool.calls) == 1


def test_every_letter_with_the_emulator(emu_env):
    result, tool = run({"watches": "pmitndx"}, emulate(emu_env))
    assert "failed" not in result and sets(tool) == [["/usr/bin/dcgmi", "health", "-s", "pmitndx"]]
    assert result["missing"] == ["PCIe", "Memory", "InfoROM", "Thermal", "Power", "NVLINK", "Driver", "NvSwitch NF",
                                 "NvSwitch F"]
    assert all(result["watches"].values())


def test_dcgmi_path_option_and_missing_tool():
    tool = Tool(lambda argv, data: (0, table(set(ROWS)), ""), missing=["dcgmi"])
    result = run_module(dcgm_health_watches, {"watches": "a"}, tool)
    assert result["failed"] and "dcgmi was not found" in result["msg"] and "dcgmi_path" in result["msg"]
    assert tool.calls == []
    result, tool = run({"watches": "a", "dcgmi_path": "dcgmi"}, lambda argv, data: (0, table(set(ROWS)), ""))
    assert result["changed"] is False and tool.calls == [["/usr/bin/dcgmi", "health", "-f"]]


# --- the host engine on its root-only socket (roles/dcgm: dcgm_hostengine_socket_path) ---------------------------

@pytest.fixture
def engine_env(emu_env, tmp_path):
    """The dcgmi emulator in host-engine mode, with an nv-hostengine emulator listening on a Unix socket."""
    env = dict(emu_env, CLUSTERFORGE_EMU_DCGM_HOSTENGINE="1")
    sock = str(tmp_path / "nv-hostengine.sock")
    proc = subprocess.Popen([sys.executable, os.path.join(EMULATORS, "nv-hostengine"), "-n", "--domain-socket", sock],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("Started host engine")
    yield env, "unix://" + sock
    proc.terminate()
    proc.wait(timeout=30)


def test_host_option_reaches_the_host_engine_on_its_socket(engine_env):
    env, host = engine_env
    result, tool = run({"watches": "pmt", "host": host}, emulate(env))
    assert "failed" not in result and result["changed"] is True, result
    assert tool.calls == [["/usr/bin/dcgmi", "health", "--host", host, "-f"],
                          ["/usr/bin/dcgmi", "health", "--host", host, "-s", "pmt"],
                          ["/usr/bin/dcgmi", "health", "--host", host, "-f"]]
    # without --host (DCGM's default TCP port) nothing answers: the watches were set at the socket
    assert emulate(env)(["/usr/bin/dcgmi", "health", "-f"], None)[:2] == (247, NOT_RUNNING)


def test_the_address_the_role_recorded_is_used(engine_env, tmp_path, monkeypatch):
    env, host = engine_env
    record = tmp_path / "dcgm-hostengine"
    record.write_text(host + "\n")
    monkeypatch.setattr(dcgm_module_utils, "HOSTENGINE_FILE", str(record))
    result, tool = run({"watches": "t"}, emulate(env))
    assert "failed" not in result and result["changed"] is True, result
    assert all(call[1:4] == ["health", "--host", host] for call in tool.calls), tool.calls


@pytest.mark.parametrize("mode,content,message", [
    (0o664, "localhost:5555\n", "is not a regular file owned by root that only root may write"),
    (0o644, "tcp://nowhere\n", "not unix:///<path>, <host> or <host>:<port>"),
])
def test_an_untrusted_or_bad_record_fails_before_dcgmi_runs(tmp_path, monkeypatch, mode, content, message):
    if os.geteuid() != 0 and mode == 0o644:
        pytest.skip("a root-owned record needs root")
    record = tmp_path / "dcgm-hostengine"
    record.write_text(content)
    record.chmod(mode)
    monkeypatch.setattr(dcgm_module_utils, "HOSTENGINE_FILE", str(record))
    result, tool = run({"watches": "a"}, lambda argv, data: (0, table(set(ROWS)), ""))
    assert result["failed"] is True and message in result["msg"], result["msg"]
    assert tool.calls == []


def test_a_bad_host_option_fails_before_dcgmi_runs():
    result, tool = run({"watches": "a", "host": "unix://relative.sock"}, lambda argv, data: (0, "", ""))
    assert result["failed"] is True and "absolute socket path" in result["msg"]
    assert tool.calls == []
