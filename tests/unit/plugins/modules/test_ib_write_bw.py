# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""ib_write_bw module tests: a fake ib_write_bw on PATH that prints perftest's layout (its own numbers), logs every
start and can refuse connections for a while (a server that does not listen yet)."""

import json
import os
import time

import pytest

from ansible_collections.clusterforge.gpu.plugins.modules import ib_write_bw
from cf_module_helper import install_fake, run_main

# Fake ib_write_bw: the server side prints the banner and its header and exits 0 (after FAKE_IB_SERVER_SECONDS);
# the client side prints the result table with FAKE_IB_GBPS_<hca> Gb/s (default 388.4), or refuses the first
# FAKE_IB_REFUSE connections per port, or exits 1 when FAKE_IB_FAIL names the HCA.
FAKE = r'''
import json, os, sys, time
args = sys.argv[1:]
opts, host, i = {}, None, 0
while i < len(args):
    a = args[i]
    if a in ("-d", "-p", "-s", "-n", "-x"):
        opts[a] = args[i + 1]
        i += 2
        continue
    if not a.startswith("-"):
        host = a
    i += 1
log = os.environ["FAKE_IB_LOG"]
with open(log, "a") as f:
    f.write(json.dumps({"argv": args, "t": time.time(), "side": "client" if host else "server"}) + "\n")
hca, port = opts.get("-d"), opts.get("-p", "18515")
line = " " + "-" * 87
def done():
    with open(log + ".end", "a") as f:
        f.write("%r\n" % time.time())
if host is None:
    time.sleep(float(os.environ.get("FAKE_IB_SERVER_SECONDS", "0")))
    done()
    print("\n************************************\n* Waiting for client to connect... *\n"
          "************************************")
    print(line)
    print("                     RDMA_Write BW Test")
    print(" Dual-port       : OFF          Device         : %s" % hca)
    sys.exit(0)
state = os.path.join(os.path.dirname(log), "refused-%s" % port)
refused = int(open(state).read()) if os.path.exists(state) else 0
if refused < int(os.environ.get("FAKE_IB_REFUSE", "0")):
    open(state, "w").write(str(refused + 1))
    sys.stderr.write("Couldn't connect to %s:%s\nUnable to open file descriptor for socket connection Unable to "
                     "init the socket connection\n" % (host, port))
    sys.exit(1)
if hca in os.environ.get("FAKE_IB_FAIL", "").split(","):
    sys.stderr.write(" Couldn't get context for the device\n")
    sys.exit(1)
time.sleep(float(os.environ.get("FAKE_IB_CLIENT_SECONDS", "0")))
done()
gbps = float(os.environ.get("FAKE_IB_GBPS_%s" % hca, "388.4"))
print(line)
print("                     RDMA_Write BW Test")
print(" Dual-port       : OFF          Device         : %s" % hca)
print(" Number of qps   : 1            Transport type : IB")
print(" Connection type : RC           Using SRQ      : OFF")
print(" TX depth        : 128")
print(" CQ Moderation   : 1")
print(" Mtu             : 4096[B]")
print(" Link type       : IB")
print(" Max inline data : 0[B]")
print(" rdma_cm QPs     : OFF")
print(" Data ex. method : Ethernet")
print(line)
print(" local address: LID 0x11 QPN 0x0123 PSN 0x4a3b2c RKey 0x1fff00 VAddr 0x007f2a4c000000")
print(" remote address: LID 0x12 QPN 0x0456 PSN 0x5b4c3d RKey 0x2fff00 VAddr 0x007f3b5d000000")
print(line)
print(" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]")
print(" %-7s    %-7s          %-7.2f            %-7.2f            %-7.6f" % (opts.get("-s", "65536"),
      opts.get("-n", "5000"), gbps + 0.3, gbps, gbps * 1e9 / 8 / int(opts.get("-s", "65536")) / 1e6))
print(line)
'''


@pytest.fixture
def fake(tmp_path, monkeypatch):
    install_fake(tmp_path, monkeypatch, "ib_write_bw", FAKE)
    monkeypatch.setenv("FAKE_IB_LOG", str(tmp_path / "log"))
    for key in list(os.environ):
        if key.startswith("FAKE_IB_") and key != "FAKE_IB_LOG":
            monkeypatch.delenv(key)
    return tmp_path


def calls(tmp_path):
    path = tmp_path / "log"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def overlapped(tmp_path):
    """Every test started before the first one ended: they ran at once."""
    ends = [float(x) for x in (tmp_path / "log.end").read_text().split()]
    return max(c["t"] for c in calls(tmp_path)) < min(ends)


def run(args, check_mode=False):
    return run_main(ib_write_bw, args, check_mode)


TESTS = [{"hca": "mlx5_0", "port": 18515}, {"hca": "mlx5_1", "port": 18516}, {"hca": "mlx5_2", "port": 18517}]


def test_plan_runs_nothing_and_gives_rounds_and_schedule(fake):
    out = run({"mode": "plan", "nodes": ["a", "b", "c", "d", "e"], "hcas": ["mlx5_0", "mlx5_1"],
               "max_concurrent_pairs": 1})
    assert "failed" not in out and out["changed"] is False and out["node_pairs"] == 5
    assert len(out["rounds"]) == 5  # 2 + 2 + 1 pairs, one pair per round
    assert out["rounds"][0] == [{"client": "a", "server": "b", "hca": "mlx5_0", "port": 18515},
                                {"client": "a", "server": "b", "hca": "mlx5_1", "port": 18516}]
    assert out["schedule"]["e"][4] == {"side": "client", "peer": "a",
                                       "tests": [{"hca": "mlx5_0", "port": 18515}, {"hca": "mlx5_1", "port": 18516}]}
    assert calls(fake) == []
    assert run({"mode": "plan", "nodes": ["a", "b"], "hcas": ["mlx5_0"]}, check_mode=True)["node_pairs"] == 1


def test_plan_refuses_bad_input(fake):
    out = run({"mode": "plan", "nodes": ["a", "b", "a"], "hcas": ["mlx5_0"]})
    assert out["failed"] and out["msg"] == "cannot plan ib_write_bw: nodes: a appears twice"
    out = run({"mode": "plan", "nodes": ["a", "b"], "hcas": ["mlx5_0"], "max_concurrent_pairs": -1})
    assert out["failed"] and "max_concurrent_pairs" in out["msg"]
    out = run({"mode": "plan", "nodes": ["a", "b"]})
    assert out["failed"] and "hcas" in out["msg"]


def test_client_runs_every_hca_at_once_and_parses_each(fake, monkeypatch):
    monkeypatch.setenv("FAKE_IB_CLIENT_SECONDS", "1")
    monkeypatch.setenv("FAKE_IB_GBPS_mlx5_1", "190.0")
    out = run({"mode": "client", "peer": "10.2.0.22", "tests": TESTS, "size_bytes": 1048576, "iterations": 5000})
    assert "failed" not in out, out
    assert overlapped(fake)
    assert [t["hca"] for t in out["tests"]] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert [t["bw_peak_gbits"] for t in out["tests"]] == [388.4, 190.0, 388.4]
    assert all(t["rc"] == 0 and t["attempts"] == 1 and t["result"]["ok"] for t in out["tests"])
    assert out["tests"][0]["cmd"].endswith("ib_write_bw -d mlx5_0 -p 18515 --report_gbits -s 1048576 -n 5000 "
                                           "10.2.0.22")
    logged = calls(fake)
    assert sorted(c["argv"][1] for c in logged) == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert all(c["side"] == "client" for c in logged)


def test_server_runs_every_hca_at_once_on_its_port(fake, monkeypatch):
    monkeypatch.setenv("FAKE_IB_SERVER_SECONDS", "1")
    out = run({"mode": "server", "tests": TESTS, "extra_args": ["-F"]})
    assert "failed" not in out, out
    assert overlapped(fake)
    assert [t["rc"] for t in out["tests"]] == [0, 0, 0] and all(t["result"] is None for t in out["tests"])
    assert sorted(c["argv"][3] for c in calls(fake)) == ["18515", "18516", "18517"]
    assert all(c["side"] == "server" and "-F" in c["argv"] for c in calls(fake))


def test_client_retries_while_the_server_does_not_listen(fake, monkeypatch):
    monkeypatch.setenv("FAKE_IB_REFUSE", "2")
    out = run({"mode": "client", "peer": "gpu02", "tests": TESTS[:1], "connect_timeout": 20})
    assert "failed" not in out, out
    assert out["tests"][0]["attempts"] == 3 and out["tests"][0]["bw_peak_gbits"] == 388.4


def test_client_gives_up_after_connect_timeout(fake, monkeypatch):
    monkeypatch.setenv("FAKE_IB_REFUSE", "100")
    out = run({"mode": "client", "peer": "gpu02", "tests": TESTS[:1], "connect_timeout": 2})
    assert out["failed"] and out["tests"][0]["rc"] == 1 and 1 < out["tests"][0]["attempts"] <= 3
    assert out["msg"].startswith("ib_write_bw client to gpu02 failed: mlx5_0: exit status 1: ")


def test_a_failing_hca_is_named_and_the_others_still_measured(fake, monkeypatch):
    monkeypatch.setenv("FAKE_IB_FAIL", "mlx5_2")
    out = run({"mode": "client", "peer": "gpu02", "tests": TESTS})
    assert out["failed"] and out["msg"] == ("ib_write_bw client to gpu02 failed: mlx5_2: exit status 1: Couldn't get "
                                            "context for the device")
    assert [t["rc"] for t in out["tests"]] == [0, 0, 1]
    assert out["tests"][2]["bw_peak_gbits"] is None and out["tests"][2]["result"]["ok"] is False
    assert out["tests"][0]["bw_peak_gbits"] == 388.4


def test_a_server_without_client_times_out(fake, monkeypatch):
    monkeypatch.setenv("FAKE_IB_SERVER_SECONDS", "30")
    start = time.time()
    out = run({"mode": "server", "tests": TESTS[:2], "timeout": 1})
    assert time.time() - start < 25  # stopped, not the 30 s the servers would wait
    assert out["failed"] and [t["timed_out"] for t in out["tests"]] == [True, True]
    assert [t["rc"] for t in out["tests"]] == [None, None]
    assert out["msg"] == "ib_write_bw server failed: mlx5_0: no result within 1 s; mlx5_1: no result within 1 s"


def test_check_mode_measures_nothing(fake):
    out = run({"mode": "client", "peer": "gpu02", "tests": TESTS}, check_mode=True)
    assert out["skipped"] is True and out["changed"] is False and calls(fake) == []
    assert [t["rc"] for t in out["tests"]] == [None, None, None]
    assert "ib_write_bw -d mlx5_1 -p 18516" in out["tests"][1]["cmd"]


def test_argument_errors(fake):
    assert "peer" in run({"mode": "client", "tests": TESTS})["msg"]
    out = run({"mode": "server", "tests": [{"hca": "mlx5_0", "port": 1}, {"hca": "mlx5_1", "port": 1}]})
    assert out["failed"] and "its own TCP port" in out["msg"]


def test_missing_tool_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    out = run({"mode": "server", "tests": TESTS})
    assert out["failed"] and out["msg"] == ("ib_write_bw was not found on this host; install it or set "
                                            "ib_write_bw_path")
