"""Conformance: the lfs and dcgmi parsers over every real sample in $CLUSTERFORGE_SAMPLES/{lfs,dcgmi}.

Every file must have an expectation below (a new sample without one fails), written by reading the sample.
"""

import os

import pytest

from conftest import SAMPLES

from ansible_collections.clusterforge.gpu.plugins.module_utils import dcgm as D
from ansible_collections.clusterforge.gpu.plugins.module_utils import lustre as L
from ansible_collections.clusterforge.gpu.tests.formats.dcgm import parse_discovery, parse_health, parse_nvlink_status
from ansible_collections.clusterforge.gpu.tests.formats.lustre import (
    parse_getdirstripe, parse_getstripe_text, parse_lfs_df,
)

pytestmark = pytest.mark.conformance

if not os.path.isdir(os.path.join(SAMPLES, "lfs")) and not os.path.isdir(os.path.join(SAMPLES, "dcgmi")):
    pytest.skip("no samples at %s" % SAMPLES, allow_module_level=True)

EOF = None
M = 1 << 20

# name -> (parser, expectations)
LFS = {
    "getdirstripe-D-two-dirs-lustre-demo.txt": ("dirstripe", [{"lmv_stripe_count": 0, "lmv_stripe_offset": 0,
                                                               "lmv_hash_type": "none", "lmv_max_inherit": 3},
                                                              {"lmv_stripe_count": 0, "lmv_stripe_offset": 1,
                                                               "lmv_hash_type": "none", "lmv_max_inherit": 3}]),
    "getstripe-dir-pfl-dom-default-lustre-demo.txt": ("text", [(0, 65536, 0, 65536, "mdt", None),
                                                               (65536, EOF, -1, M, "raid0", None)]),
    "getstripe-pfl-file-3comp-instantiated-lustre-manual.txt": ("text", [(0, 4 * M, 1, M, "raid0", None),
                                                                         (4 * M, 64 * M, 4, M, "raid0", None),
                                                                         (64 * M, EOF, 8, M, "raid0", None)]),
    "getstripe-plain-file-raid0-lustre-demo.txt": ("text", [(0, EOF, 1, M, "raid0", None)]),
    "getstripe-y-composite-1comp-widestripe-hpe.yaml.txt": ("yaml", [(0, EOF, 4, 2 * M, "raid0", None)]),
    "getstripe-y-pfl-4comp-pools-hpe.yaml.txt": ("yaml", [(0, M, 1, M, "raid0", "disk"),
                                                          (M, 8 * M, 2, M, "raid0", "flash"),
                                                          (8 * M, 100 << 30, 2, M, "raid0", "disk"),
                                                          (100 << 30, EOF, 2, M, "raid0", "disk")]),
    "getstripe-y-plain-widestripe-8ost-hpe.yaml.txt": ("yaml", [(0, EOF, 8, 2 * M, "raid0", None)]),
    # (fsname, MDT count, OST count, summary 1K-blocks total, summary used)
    "lfs-df-2mdt-2ost-zfs-lustre-demo.txt": ("df", ("demo", 2, 2, 198745088, 9206784)),
    "lfs-df-3mdt-2ost-zfs-lustre-demo.txt": ("df", ("demo", 3, 2, 195918848, 8390656)),
}

# diag: (result, failing test names, test count, dcgm_version, complete)
DCGMI = {
    "diag-r1-dcgm2x-deployment-fail-persistence-deepops.txt": (
        "diag", ("fail", ["Persistence Mode", "Environment Variables", "Page Retirement", "Graphics Processes",
                          "Inforom"], 9, None, True)),
    "diag-r1-dcgm2x-deployment-pass-deepops.txt": ("diag", ("pass", [], 9, None, False)),
    "diag-r2-dcgm4.2.3-4x-l40s-pcie-fail-internal-error-issue253.txt": ("diag", ("fail", ["pcie"], 3, "4.2.3", False)),
    "diag-r2-dcgm4.4.2-1x-a10g-pass-issue124.txt": ("diag", ("pass", [], 3, "4.4.2", True)),
    "diag-r3-dcgm4.4.2-1x-gb10-all-skip-notes.txt": ("diag", ("pass", [], 8, "4.4.2", True)),
    "diag-r3-fail-early-8x-h100-cuda-init-fail-nccltests264.txt": ("diag", ("fail", ["GPU Memory"], 13, "3.3.8", True)),
    "diag-r3-pass-dcgm4.0.0-4x-a16-dcgm-userguide.txt": ("diag", ("pass", [], 7, "4.0.0", True)),
    # discovery: (gpu count, first GPU name, nvswitch count)
    "discovery-l-1x-l4-dcgm4.6.1-connectx-cpu-sections.txt": ("discovery", (1, "NVIDIA L4", 0)),
    "discovery-l-8x-h800-0-nvswitch-dcgm3.1.8-llm-action.txt": ("discovery", (8, "NVIDIA H800", 0)),
    "discovery-l-dgx-a100-8gpu-6nvswitch-dcgm-docs.txt": ("discovery", (8, "A100-SXM4-40GB", 6)),
    "dmon-e-203-204-252-c5-1x-l4-dcgm4.6.1.txt": ("skip", "dcgmi dmon is not parsed by the collection"),
    # health: (overall, [(entity id, system, health)])
    "health-c-j-healthy-dcgm-issue263.json.txt": ("health", ("healthy", [])),
    "health-c-warning-power-1x-l4-dcgm4.6.1.txt": ("health", ("warning", [(0, "Power system", "warning")])),
    # nvlink: (gpus, links up per GPU, slots per GPU)
    "nvlink-s-8x-h800-8links-up-dcgm3.1.8-llm-action.txt": ("nvlink", (8, 8, 18)),
}


def files(kind):
    d = os.path.join(SAMPLES, kind)
    return sorted(os.listdir(d)) if os.path.isdir(d) else []


def read(kind, name):
    with open(os.path.join(SAMPLES, kind, name)) as f:
        return f.read()


@pytest.mark.parametrize("name", files("lfs"))
def test_lfs_sample(name):
    assert name in LFS, "new sample %s: add its expected values" % name
    kind, want = LFS[name]
    text = read("lfs", name)
    if kind == "dirstripe":
        assert parse_getdirstripe(text) == want
        return
    if kind == "df":
        fsname, mdts, osts, total, used = want
        df = parse_lfs_df(text)
        types = [t["type"] for t in df["targets"]]
        assert (types.count("MDT"), types.count("OST")) == (mdts, osts)
        assert set(t["fsname"] for t in df["targets"]) == {fsname}
        summary = list(df["filesystems"].values())[0]
        assert (summary["total"], summary["used"]) == (total, used)
        assert sum(t["total"] for t in df["targets"] if t["type"] == "OST") == total
        return
    layout = (L.parse_getstripe_yaml if kind == "yaml" else parse_getstripe_text)(text)
    got = [(c["extent_start"], c["extent_end"], c["stripe_count"], c["stripe_size"], c["pattern"], c["pool"])
           for c in layout["components"]]
    assert got == want
    assert layout["mirror_count"] == 1


@pytest.mark.parametrize("name", files("dcgmi"))
def test_dcgmi_sample(name):
    assert name in DCGMI, "new sample %s: add its expected values" % name
    kind, want = DCGMI[name]
    if kind == "skip":
        pytest.skip(want)
    text = read("dcgmi", name)
    if kind == "diag":
        result, failing, count, version, complete = want
        parsed = D.parse_diag(text)
        assert parsed["result"] == result
        assert [n for n, _g in D.failing_tests(parsed)] == failing
        assert len(parsed["tests"]) == count
        assert parsed["metadata"].get("dcgm_version") == version
        assert parsed["complete"] is complete
        assert parsed["errors"] == []
        for test in parsed["tests"]:
            assert test["result"] in D.RESULTS
    elif kind == "discovery":
        gpus, first, switches = want
        disc = parse_discovery(text)
        assert disc["gpu_count"] == gpus == len(disc["gpus"])
        assert disc["gpus"][0]["name"] == first
        assert disc["nvswitch_count"] == switches == len(disc["nvswitches"])
        assert all(g["uuid"].startswith("GPU-") and g["pci_bus_id"] for g in disc["gpus"])
    elif kind == "health":
        overall, incidents = want
        health = parse_health(text)
        assert health["overall"] == overall
        assert [(i["id"], i["system"], i["health"]) for i in health["incidents"]] == incidents
    elif kind == "nvlink":
        gpus, up, slots = want
        status = parse_nvlink_status(text)
        assert len(status["gpus"]) == gpus
        assert all(links.count("up") == up and len(links) == slots for links in status["gpus"].values())


def test_details_of_known_samples():
    """Spot checks of wrapped details and per-GPU results that the table above cannot express."""
    if "diag-r2-dcgm4.2.3-4x-l40s-pcie-fail-internal-error-issue253.txt" in files("dcgmi"):
        pcie = D.parse_diag(read("dcgmi", "diag-r2-dcgm4.2.3-4x-l40s-pcie-fail-internal-error-issue253.txt"))["tests"][2]
        assert pcie["gpus"] == {0: "pass", 1: "pass", 2: "pass", 3: "pass"} and len(pcie["details"]) == 4
        assert pcie["details"][0]["message"] == ("There was an internal error during the test: 'A child process "
                                                 "(152) exited with non-zero status 1' Check DCGM and system logs "
                                                 "for errors. Reset GPU. Restart DCGM. Rerun diagnostics.")
    if "diag-r3-fail-early-8x-h100-cuda-init-fail-nccltests264.txt" in files("dcgmi"):
        parsed = D.parse_diag(read("dcgmi", "diag-r3-fail-early-8x-h100-cuda-init-fail-nccltests264.txt"))
        mem = [t for t in parsed["tests"] if t["name"] == "GPU Memory"][0]
        assert len(mem["details"]) == 8 and "'system not yet initialized'" in mem["details"][7]["message"]
        assert parsed["metadata"]["gpu_device_ids"] == ["2330"] * 8
