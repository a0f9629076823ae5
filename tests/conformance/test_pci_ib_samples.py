# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for lspci/ibstat/ibstatus/iblinkinfo/ibdiagnet over the real tool outputs in $CLUSTERFORGE_SAMPLES.

Expected values were read off each sample by hand. Every file in the three directories must have an entry
here, so a new sample cannot go untested.
"""

import os

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils import infiniband as ib
from ansible_collections.clusterforge.gpu.plugins.module_utils import pci
from ansible_collections.clusterforge.gpu.tests.formats.infiniband import parse_iblinkinfo
from ansible_collections.clusterforge.gpu.tests.formats.pci import parse_lspci_acs

try:
    from conftest import SAMPLES
except ImportError:  # pragma: no cover - conftest not importable as a module
    SAMPLES = os.environ.get("CLUSTERFORGE_SAMPLES", os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "..", "shared", "fixtures"))

pytestmark = pytest.mark.conformance

if not os.path.isdir(SAMPLES):
    pytest.skip("no samples directory at %s" % SAMPLES, allow_module_level=True)


def files(sub):
    d = os.path.join(SAMPLES, sub)
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def read(sub, name):
    with open(os.path.join(SAMPLES, sub, name)) as f:
        return f.read()


# name -> (devices, bridges, acs_capable, acs_enabled, headerless entries, gpus)
LSPCI = {
    "vvv-pex890xx-gen5-switch-acs-disabled-dell-h100-gpud.txt": (3, 3, 2, 0, 0, 0),
    "vvv-grep-acsctl-amd-epyc-mixed-srcvalid-nccl-issue606.txt": (9, 0, 9, 4, 9, 0),
    "nn-grep-nvidia-4x-h100-sxm5-stackhpc.txt": (4, 0, 0, 0, 0, 4),
}


@pytest.mark.parametrize("name", files("lspci"))
def test_lspci_sample(name):
    assert name in LSPCI, "new lspci sample %s: add its expected values" % name
    n_dev, n_bridge, n_acs, n_enabled, n_anon, n_gpu = LSPCI[name]
    text = read("lspci", name)
    acs = parse_lspci_acs(text)
    devs = pci.parse_lspci_vvv(text)
    assert len(acs) == n_dev
    assert sum(1 for d in acs if d["is_bridge"]) == n_bridge
    assert sum(1 for d in acs if d["acs_capable"]) == n_acs
    assert sum(1 for d in acs if d["acs_enabled"]) == n_enabled
    assert sum(1 for d in acs if d["bdf"] is None) == n_anon
    assert sum(1 for d in devs if pci.device_kind(d) == "gpu") == n_gpu


def test_lspci_dell_switch_details():
    devs = pci.parse_lspci_vvv(read("lspci", "vvv-pex890xx-gen5-switch-acs-disabled-dell-h100-gpud.txt"))
    d = dict((x["bdf"], x) for x in devs)
    assert d["0000:38:00.0"]["bus_range"] == {"primary": 0x38, "secondary": 0x39, "subordinate": 0x3d}
    assert d["0000:39:01.0"]["acs_cap"] == {"SrcValid": True, "TransBlk": True, "ReqRedir": True, "CmpltRedir": True,
                                            "UpstreamFwd": True, "EgressCtrl": False, "DirectTrans": True}
    assert d["0000:39:01.0"]["acs_ctl_value"] == "0000" and d["0000:39:01.0"]["driver"] == "pcieport"
    assert pci.upstream_bridges(devs, "0000:3b:00.0") == ["0000:38:00.0", "0000:39:01.0"]


def test_lspci_nccl_issue_srcvalid_order():
    acs = parse_lspci_acs(read("lspci", "vvv-grep-acsctl-amd-epyc-mixed-srcvalid-nccl-issue606.txt"))
    assert [d["acs_ctl_value"] for d in acs] == ["0001", "0001", "0000", "0000", "0000", "0000", "0000", "0001", "0001"]


# name -> list of (ca, port, state, physical_state, rate_gbps, link_layer)
def _ndr8():
    return [("mlx5_%d" % i, 1, "Active", "LinkUp", 400, "InfiniBand") for i in (0, 1, 4, 5, 6, 7, 8, 9)] + [
        ("mlx5_bond_0", 1, "Active", "LinkUp", 200, "Ethernet")]


IBSTAT = {
    "ibstat-cx4-edr-mt4115-single-port-linpack.txt": [("mlx5_0", 1, "Active", "LinkUp", 100, "InfiniBand")],
    "ibstat-h100-8x-cx7-ndr400-ib-plus-bond-gpud.txt": _ndr8(),
    "ibstatus-a100-8x-hdr200-plus-eth-gpud.txt": [("mlx5_%d" % i, 1, "Active", "LinkUp", 200, "InfiniBand")
                                                  for i in range(8)] + [("mlx5_8", 1, "Active", "LinkUp", 40, "Ethernet")],
    "ibstatus-cx3-qdr-ib-port1-eth-port2-down-cc_rdma_test.txt": [
        ("mlx4_0", 1, "Active", "LinkUp", 40, "InfiniBand"), ("mlx4_0", 2, "Down", "Disabled", 10, "Ethernet")],
}
# iblinkinfo: (links, active links, distinct rates of active links)
IBLINKINFO = {
    "iblinkinfo-edr-sb7700-2hca-partial-linpack.txt": (20, 4, {103.12}),
    "iblinkinfo-qdr-infiniscale-iv-18port-8hca-dualport-cc_rdma_test.txt": (27, 18, {40}),
}


@pytest.mark.parametrize("name", files("ibstat"))
def test_ibstat_dir_sample(name):
    text = read("ibstat", name)
    if name.startswith("iblinkinfo"):
        assert name in IBLINKINFO, "new iblinkinfo sample %s: add its expected values" % name
        n, n_active, rates = IBLINKINFO[name]
        links = parse_iblinkinfo(text)
        assert len(links) == n
        active = [x for x in links if x["state"] == "Active"]
        assert len(active) == n_active and set(x["rate_gbps"] for x in active) == rates
        assert all(x["physical_state"] == "Polling" for x in links if x["state"] == "Down")
        return
    assert name in IBSTAT, "new ibstat sample %s: add its expected values" % name
    ports = ib.parse_ibstat(text)
    assert [(p["ca"], p["port"], p["state"], p["physical_state"], p["rate_gbps"], p["link_layer"])
            for p in ports] == IBSTAT[name]


def test_ibstat_h100_details():
    ports = ib.parse_ibstat(read("ibstat", "ibstat-h100-8x-cx7-ndr400-ib-plus-bond-gpud.txt"))
    assert ports[0]["ca_type"] == "MT4129" and ports[0]["firmware"] == "28.41.1000"
    assert ports[0]["base_lid"] == 128 and ports[0]["port_guid"] == "0x58a2e10300a7820e"
    assert ports[-1]["ca_type"] == "MT41692" and ports[-1]["firmware"] == "32.38.3056"


# name -> (format, summary_found, stages, total_warnings, total_errors, warning lines, error lines)
IBDIAGNET = {
    "ibdiagnet-console-2.7.0-42nodes-warn-err-logparsertask.txt": ("ibdiagnet2", True, 11, 19, 15, 5, 3),
    "ibdiagnet1-legacy-1.5.7-2ca-back2back-ipoib-warn-archwiki.txt": ("ibdiagnet1", True, 8, 1, 0, 2, 0),
    "ibdiagnet2-routing-ar-dump-tail-fabric-summary-nvidia-recipe.txt": ("ibdiagnet2", True, 3, 3, 0, 0, 0),
    "ibdiagnet2-sharp-tail-fabric-summary-nvidia-recipe.txt": (None, False, 0, 0, 0, 0, 0),
}


@pytest.mark.parametrize("name", files("ibdiagnet"))
def test_ibdiagnet_sample(name):
    assert name in IBDIAGNET, "new ibdiagnet sample %s: add its expected values" % name
    fmt, found, n_stages, warns, errs, n_w, n_e = IBDIAGNET[name]
    r = ib.parse_ibdiagnet(read("ibdiagnet", name))
    assert (r["format"], r["summary_found"], len(r["stages"])) == (fmt, found, n_stages)
    assert (r["total_warnings"], r["total_errors"]) == (warns, errs)
    assert sum(1 for m in r["messages"] if m["level"] == "warning") == n_w
    assert sum(1 for m in r["messages"] if m["level"] == "error") == n_e


def test_ibdiagnet_2_7_stage_rows():
    r = ib.parse_ibdiagnet(read("ibdiagnet", "ibdiagnet-console-2.7.0-42nodes-warn-err-logparsertask.txt"))
    rows = dict((s["name"], (s["warnings"], s["errors"])) for s in r["stages"])
    assert rows["Discovery"] == (3, 0) and rows["Nodes Information"] == (16, 0)
    assert rows["Speed / Width checks"] == (0, 15) and rows["Create IBNetDiscover File"] == (0, 0)
    assert r["log_file"] == "/var/tmp/ibdiagnet2/ibdiagnet2.log"
    assert "Unexpected width, actual link width is 2x" in r["messages"][-1]["text"]


def test_ibdiagnet_legacy_ipoib_warning_stage():
    r = ib.parse_ibdiagnet(read("ibdiagnet", "ibdiagnet1-legacy-1.5.7-2ca-back2back-ipoib-warn-archwiki.txt"))
    assert [s["name"] for s in r["stages"] if s["warnings"]] == ["IPoIB Subnets Check"]
    assert r["log_file"] == "/tmp/ibdiagnet.log"
    assert r["messages"][0]["text"].endswith("Reports regarding cluster links will use direct routes.")
