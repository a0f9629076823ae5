"""The dcgm-exporter TEST EMULATOR (tests/lab/emulators/dcgm-exporter), run as a subprocess over the nvidia-smi
emulator: the exposition format dcgm-exporter prints (HELP and TYPE lines, its labels in its order, %d and %f values),
values read from nvidia-smi on every scrape (injected ECC errors, temperatures, a GPU that fell off the bus), the
faults nvidia-smi cannot show (XID, NVLink), and its HTTP server on /metrics. Its counters are the real exporter's:
without -f exactly what dcgm-exporter's default file enables (no ECC or NVLink error totals), with -f the fields of
the file; the lab and molecule start it with the dcgm role's file (roles/dcgm, rendered here as Ansible renders it),
which serves every counter the alerts read."""

import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from conftest import EMULATORS, ROOT
from role_files import load_script, render_role_template

EXPORTER = os.path.join(EMULATORS, "dcgm-exporter")
NVIDIA_SMI = os.path.join(EMULATORS, "nvidia-smi")
PROMTOOL = shutil.which("promtool")
# A line dcgm-exporter 3.3 printed on a 4 x T4 node (from the exporter's own unit test data, TestFilterMetrics):
# the labels and their order are what the emulator must print.
REAL_LINE = ('DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-0781f3bb-da15-f334-d5db-37b3f19542d0",pci_bus_id="00000000:00:1B.0",'
             'device="nvidia0",modelName="Tesla T4",Hostname="ip-172-31-16-106",DCGM_FI_DRIVER_VERSION="535.183.06"} 1365')
SAMPLE = re.compile(r'^([A-Z_][A-Z0-9_]*)\{((?:[A-Za-z_]+="[^"]*",?)+)\} (-?\d+(?:\.\d{6})?)$')
# The counters ClusterForge's alert rules read (roles/monitoring), all commented out in dcgm-exporter's default file
# but XID.
ALERT_FIELDS = ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
                "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"]


EMULATOR = load_script("cf_dcgm_exporter_emulator_lab", EXPORTER)


def _exe(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def env(tmp_path):
    smi = tmp_path / "nvidia-smi"
    _exe(smi, '#!/bin/sh\nexec "%s" "%s" "$@"\n' % (sys.executable, NVIDIA_SMI))
    e = dict(os.environ, CLUSTERFORGE_EMU_STATE_DIR=str(tmp_path / "state"), CLUSTERFORGE_EMU_RUN_DIR=str(tmp_path / "run"),
             CLUSTERFORGE_EMU_NVIDIA_SMI=str(smi), NODE_NAME="gpu01")
    e.pop("CLUSTERFORGE_EMU_GPU_COUNT", None)
    e.pop("CLUSTERFORGE_EMU_IDENTITY_FILE", None)
    return e


@pytest.fixture
def role_counters(tmp_path):
    """The dcgm role's counters file with its defaults (/etc/dcgm-exporter/clusterforge-counters.csv on a node)."""
    path = tmp_path / "clusterforge-counters.csv"
    path.write_text(render_role_template(ROOT, "dcgm", "etc/dcgm-exporter/clusterforge-counters.csv.j2"))
    return path


def run(tool, args, env, timeout=60):
    p = subprocess.run([sys.executable, tool] + [str(a) for a in args], env=env, capture_output=True, text=True,
                       timeout=timeout, check=False)
    return p.returncode, p.stdout, p.stderr


def scrape(env, *args):
    rc, out, err = run(EXPORTER, ["--emu-print"] + list(args), env)
    assert rc == 0, (out, err)
    return out


def parse(text):
    """[(field, [(label, value)], value text)] of the samples; HELP and TYPE checked to come first for each field."""
    samples, declared, order = [], {}, []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert name not in declared, "HELP twice for %s" % name
            declared[name] = None
            order.append(name)
            continue
        if line.startswith("# TYPE "):
            _h, _t, name, kind = line.split()
            assert declared.get(name, "x") is None and kind in ("gauge", "counter"), line
            declared[name] = kind
            continue
        m = SAMPLE.match(line)
        assert m, line
        assert declared.get(m.group(1)) in ("gauge", "counter") and order[-1] == m.group(1), line
        samples.append((m.group(1), re.findall(r'([A-Za-z_]+)="([^"]*)"', m.group(2)), m.group(3)))
    return samples


def by_field(samples, field):
    return {dict(labels)["gpu"]: (dict(labels), value) for name, labels, value in samples if name == field}


def test_emulator_says_it_is_an_emulator():
    with open(EXPORTER) as f:
        first, second = f.readline(), f.readline()
    assert first == "#!/usr/bin/env python3\n"
    assert second.startswith("# ClusterForge TEST EMULATOR of dcgm-exporter: not the real tool.")
    assert os.access(EXPORTER, os.X_OK)


def test_format_is_dcgm_exporters(env, role_counters):
    text = scrape(env, "-f", role_counters)
    samples = parse(text)
    real_labels = [k for k, _v in re.findall(r'([A-Za-z_]+)="([^"]*)"', REAL_LINE)]
    for field, labels, value in samples:
        names = [k for k, _v in labels]
        if field == "DCGM_FI_DEV_XID_ERRORS":
            assert names == real_labels + ["err_code", "err_msg"], names
        else:
            assert names == real_labels, names
        if field == "DCGM_FI_DEV_POWER_USAGE":
            assert re.match(r"^\d+\.\d{6}$", value), value
        else:
            assert re.match(r"^\d+$", value), (field, value)
    temps = by_field(samples, "DCGM_FI_DEV_GPU_TEMP")
    assert sorted(temps, key=int) == [str(i) for i in range(8)]
    labels, value = temps["0"]
    assert labels["device"] == "nvidia0" and labels["modelName"] == "NVIDIA H100 80GB HBM3"
    assert labels["Hostname"] == "gpu01" and labels["DCGM_FI_DRIVER_VERSION"] == "550.90.07"
    assert labels["pci_bus_id"] == "00000000:18:00.0" and value == "30"
    assert "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).\n# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n" in text
    assert "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter\n" in text


def test_without_a_collectors_file_it_serves_exactly_the_exporters_default_counters(env):
    """dcgm-exporter without -f reads /etc/dcgm-exporter/default-counters.csv: the ECC and NVLink error totals are
    commented out there, and it has no label line (so no DCGM_FI_DRIVER_VERSION label)."""
    samples = parse(scrape(env))
    served = list(dict.fromkeys(name for name, _l, _v in samples))
    assert served == [f for f, _k, _h in EMULATOR.DEFAULT_COUNTERS]
    for field in ALERT_FIELDS:
        assert (field in served) == (field == "DCGM_FI_DEV_XID_ERRORS"), field
    assert not [f for f in served if "ECC" in f or "ERROR_COUNT" in f], served
    real_labels = [k for k, _v in re.findall(r'([A-Za-z_]+)="([^"]*)"', REAL_LINE)]
    labels, _value = by_field(samples, "DCGM_FI_DEV_GPU_TEMP")["0"]
    assert list(labels) == [k for k in real_labels if k != "DCGM_FI_DRIVER_VERSION"]


def test_the_dcgm_roles_counters_file_serves_every_counter_the_alerts_read(env, role_counters):
    rc, out, err = run(EXPORTER, ["--emu-print", "-f", role_counters], env)
    assert rc == 0, err
    served = {name for name, _l, _v in parse(out)}
    assert set(ALERT_FIELDS) <= served, sorted(set(ALERT_FIELDS) - served)
    # every counter of the role's file is emulated: the lab serves the whole file, none left out
    assert "not emulated" not in err, err
    listed = {f for f, kind, _h in EMULATOR.parse_collectors(role_counters.read_text()) if kind != "label"}
    assert served == listed
    assert {f for f, _k, _h in EMULATOR.DEFAULT_COUNTERS} <= served


def test_uuids_are_nvidia_smis(env):
    smi = env["CLUSTERFORGE_EMU_NVIDIA_SMI"]
    out = subprocess.run([smi, "--query-gpu=index,uuid", "--format=csv,noheader"], env=env, capture_output=True,
                         text=True, check=True).stdout
    want = dict(line.split(", ") for line in out.splitlines())
    got = {gpu: labels["UUID"] for gpu, (labels, _v) in by_field(parse(scrape(env)), "DCGM_FI_DEV_SM_CLOCK").items()}
    assert got == want


def test_every_scrape_reads_nvidia_smi_injected_ecc_and_temperature(env, role_counters):
    smi = env["CLUSTERFORGE_EMU_NVIDIA_SMI"]
    assert all(v == "0" for _l, v in by_field(parse(scrape(env, "-f", role_counters)),
                                              "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL").values())
    subprocess.run([smi, "--emu-ecc", "3", "2"], env=env, check=True, capture_output=True)
    subprocess.run([smi, "--emu-temp", "5", "91"], env=env, check=True, capture_output=True)
    samples = parse(scrape(env, "-f", role_counters))
    dbe = by_field(samples, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")
    assert {gpu for gpu, (_l, v) in dbe.items() if v != "0"} == {"3"} and dbe["3"][1] == "2"
    assert by_field(samples, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL")["3"][1] == "2"
    assert by_field(samples, "DCGM_FI_DEV_GPU_TEMP")["5"][1] == "91"
    # restored: the volatile count is 0 again, the aggregate keeps its history
    subprocess.run([smi, "--emu-ecc", "3", "0"], env=env, check=True, capture_output=True)
    samples = parse(scrape(env, "-f", role_counters))
    assert by_field(samples, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")["3"][1] == "0"
    assert by_field(samples, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL")["3"][1] == "2"


def test_a_gpu_that_fell_off_the_bus_is_not_exported(env):
    smi = env["CLUSTERFORGE_EMU_NVIDIA_SMI"]
    subprocess.run([smi, "--emu-drop-gpu", "2"], env=env, check=True, capture_output=True)
    assert len(by_field(parse(scrape(env)), "DCGM_FI_DEV_GPU_TEMP")) == 7


def test_xid_and_nvlink_faults_from_the_emulators_state(env, role_counters):
    assert run(EXPORTER, ["--emu-xid", "1", "79"], env)[0] == 0
    assert run(EXPORTER, ["--emu-nvlink", "0", "replay", "5"], env)[0] == 0
    samples = parse(scrape(env, "-f", role_counters))
    labels, value = by_field(samples, "DCGM_FI_DEV_XID_ERRORS")["1"]
    assert value == "79" and labels["err_code"] == "79" and labels["err_msg"] == "GPU has fallen off the bus"
    labels, value = by_field(samples, "DCGM_FI_DEV_XID_ERRORS")["0"]
    assert value == "0" and labels["err_msg"] == "No Error"
    assert by_field(samples, "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL")["0"][1] == "5"
    assert by_field(samples, "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL")["0"][1] == "0"
    assert run(EXPORTER, ["--emu-reset"], env)[0] == 0
    assert by_field(parse(scrape(env, "-f", role_counters)), "DCGM_FI_DEV_XID_ERRORS")["1"][1] == "0"
    # without -f the XID is served, the NVLink error totals are not (commented out in the exporter's default file)
    assert run(EXPORTER, ["--emu-nvlink", "0", "replay", "5"], env)[0] == 0
    default = parse(scrape(env))
    assert by_field(default, "DCGM_FI_DEV_XID_ERRORS") and not by_field(default, "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL")


@pytest.mark.parametrize("args, message", [
    (["--emu-nvlink", "0", "bogus", "1"], "NVLink counter is one of"),
    (["--emu-xid", "x", "79"], "GPU index must be a number"),
    (["--emu-xid", "0"], "takes 2 argument(s)"),
])
def test_bad_injections_are_refused(env, args, message):
    rc, _out, err = run(EXPORTER, args, env)
    assert rc == 1 and message in err


def test_a_collectors_file_picks_the_fields(env, tmp_path):
    csv = tmp_path / "counters.csv"
    csv.write_text("# Format\n# DCGM FIELD, Prometheus metric type, help message\n\n"
                   "DCGM_FI_DEV_GPU_TEMP,    gauge, GPU temperature (in C).\n"
                   "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, counter, Total number of double-bit volatile ECC errors.\n"
                   "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, gauge, Ratio of cycles the tensor (HMMA) pipe is active.\n")
    rc, out, err = run(EXPORTER, ["--emu-print", "-f", csv], env)
    assert rc == 0, err
    assert sorted({name for name, _l, _v in parse(out)}) == ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_GPU_TEMP"]
    assert "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (gauge) is not emulated" in err
    # without the DCGM_FI_DRIVER_VERSION label line, no driver label (as the exporter)
    assert "DCGM_FI_DRIVER_VERSION" not in out


@pytest.mark.parametrize("line, message", [
    ("DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature, in C.", "expected 3 fields"),
    ("DCGM_FI_DEV_GPU_TEMP, gauge", "expected 3 fields"),
    ("DCGM_FI_DEV_GPU_TEMP, gaugee, GPU temperature (in C).", "could not find Prometheus metric type 'gaugee'"),
])
def test_a_malformed_collectors_file_is_refused_as_the_exporter_refuses_it(env, tmp_path, line, message):
    csv = tmp_path / "counters.csv"
    csv.write_text("# a comment, with commas, is skipped\nDCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).\n"
                   + line + "\n")
    rc, _out, err = run(EXPORTER, ["--emu-print", "-f", csv], env)
    assert rc == 1 and message in err, err


@pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian package prometheus) not installed")
def test_promtool_parses_a_scrape(env, role_counters):
    proc = subprocess.run([PROMTOOL, "check", "metrics"], input=scrape(env, "-f", role_counters), capture_output=True,
                          text=True, check=False)
    # exit 3: lint findings only (dcgm-exporter's own names break Prometheus's naming advice); a parse error exits 1.
    assert proc.returncode in (0, 3) and "error while linting" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.headers.get("Content-Type"), resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type"), exc.read().decode()


def test_serves_metrics_over_http_like_the_exporter(env, tmp_path, role_counters):
    port = _free_port()
    # as the dcgm role's unit starts it (dcgm-exporter.service), plus the collect interval
    proc = subprocess.Popen([sys.executable, EXPORTER, "-r", "localhost:5555", "-a", "127.0.0.1:%d" % port,
                             "-f", str(role_counters), "-c", "30000"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                status, ctype, body = _get("http://127.0.0.1:%d/metrics" % port)
                break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else ""
                time.sleep(0.2)
        assert status == 200 and ctype.startswith("text/plain; version=0.0.4")
        assert len(by_field(parse(body), "DCGM_FI_DEV_GPU_TEMP")) == 8
        # each scrape asks nvidia-smi again
        subprocess.run([env["CLUSTERFORGE_EMU_NVIDIA_SMI"], "--emu-ecc", "6", "1"], env=env, check=True,
                       capture_output=True)
        assert by_field(parse(_get("http://127.0.0.1:%d/metrics" % port)[2]), "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")["6"][1] == "1"
        assert _get("http://127.0.0.1:%d/health" % port)[0] == 200
        assert _get("http://127.0.0.1:%d/other" % port)[0] == 404
        # nvidia-smi failing: the scrape fails (Prometheus then marks the target down)
        _exe(tmp_path / "nvidia-smi", "#!/bin/sh\necho 'No devices were found'\nexit 6\n")
        status, _ctype, body = _get("http://127.0.0.1:%d/metrics" % port)
        assert status == 500 and "No devices were found" in body
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_web_password_check_remembers_its_verdicts(monkeypatch):
    """One bcrypt comparison per password and hash, as the real exporter's web layer: Prometheus scrapes every few
    seconds with the same credentials, and a comparison at cost 12 costs about 0.37 s of CPU. A wrong password stays
    wrong, a right one right, and a new hash is compared again."""
    calls = []

    class FakeBcrypt(object):
        @staticmethod
        def checkpw(password, hashed):
            calls.append((password, hashed))
            return hashed == b"$2b$12$right-for-" + password

    monkeypatch.setitem(sys.modules, "bcrypt", FakeBcrypt)
    check = EMULATOR._bcrypt_check()  # pylint: disable=protected-access
    assert [check("pw", "$2b$12$right-for-pw") for dummy in range(5)] == [True] * 5
    assert [check("wrong", "$2b$12$right-for-pw") for dummy in range(3)] == [False] * 3
    assert check("pw", "$2b$12$right-for-other") is False
    assert len(calls) == 3, calls
