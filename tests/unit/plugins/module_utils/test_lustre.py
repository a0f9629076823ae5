"""Unit tests for plugins/module_utils/lustre.py and tests/formats/lustre.py (recorded lfs outputs in the real
formats)."""

import os

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils import lustre as L
from ansible_collections.clusterforge.gpu.tests.formats.lustre import parse_getstripe_text, parse_lfs_df

FIX = os.path.join(os.path.dirname(__file__), "fixtures", "lustre")


def fixture(name):
    with open(os.path.join(FIX, name)) as f:
        return f.read()


@pytest.mark.parametrize("text,expected", [
    ("4M", 4194304), ("64k", 65536), ("1G", 1 << 30), ("2T", 2 << 40), (4096, 4096), ("1048576", 1048576),
    ("0", 0), ("1.5M", 1572864),
])
def test_parse_size(text, expected):
    assert L.parse_size(text) == expected


@pytest.mark.parametrize("bad", ["4X", "", "-1", "M", "1.3K", True, -5])
def test_parse_size_rejects(bad):
    with pytest.raises(ValueError):
        L.parse_size(bad)


@pytest.mark.parametrize("value,expected", [
    (-1, None), ("-1", None), ("eof", None), ("EOF", None), (None, None), ("256M", 256 << 20), (65536, 65536)])
def test_parse_extent(value, expected):
    assert L.parse_extent(value) == expected


@pytest.mark.parametrize("num,text", [(4194304, "4M"), (65536, "64K"), (1 << 30, "1G"), (17179869184, "16G"),
                                      (1000, "1000"), (0, "0"), (3 << 20, "3M")])
def test_format_size_roundtrip(num, text):
    assert L.format_size(num) == text
    assert L.parse_size(text) == num


def test_invalid_yaml_pfl_with_header_tabs_and_unknown_keys():
    lay = L.parse_getstripe_yaml(fixture("getstripe-y-d-pfl-invalid-yaml.txt"))
    assert lay["mirror_count"] == 1 and lay["composite"]
    comps = lay["components"]
    assert [(c["extent_start"], c["extent_end"]) for c in comps] == [
        (0, 268435456), (268435456, 17179869184), (17179869184, None)]
    assert [c["stripe_count"] for c in comps] == [1, 4, -1]
    assert comps[2]["stripe_size"] == 4194304 and comps[2]["pool"] == "flash"
    assert comps[0]["pool"] is None and comps[0]["mirror_id"] is None


def test_crlf_and_numeric_pattern_plain_layout():
    lay = L.parse_getstripe_yaml(fixture("getstripe-y-d-plain-crlf-numeric-pattern.txt"))
    assert lay["components"] == [{"mirror_id": None, "extent_start": 0, "extent_end": None, "stripe_count": 4,
                                  "stripe_size": 4194304, "pattern": "raid0", "pool": None}]
    assert lay["composite"] is False


def test_truncated_yaml_keeps_what_was_complete():
    lay = L.parse_getstripe_yaml(fixture("getstripe-y-truncated.txt"))
    assert len(lay["components"]) == 1
    comp = lay["components"][0]
    assert comp["extent_end"] == 1048576 and comp["stripe_count"] == 1 and comp["stripe_size"] is None


@pytest.mark.parametrize("text", ["", "\n", "/mnt/cflab/dir has no stripe info\n"])
def test_no_default_layout(text):
    assert L.parse_getstripe_yaml(text) == {"mirror_count": 0, "components": [], "composite": False}
    assert parse_getstripe_text(text)["components"] == []


def test_text_no_stripe_info_keeps_path():
    assert parse_getstripe_text("/mnt/cflab/d has no stripe info\n")["path"] == "/mnt/cflab/d"


def test_text_plain_dir_default_single_line():
    lay = parse_getstripe_text("/mnt/cflab/d\nstripe_count:  -1 stripe_size:   4194304 pattern:       0 "
                               "stripe_offset: -1\n")
    assert lay["path"] == "/mnt/cflab/d"
    assert lay["components"][0]["stripe_count"] == -1 and lay["components"][0]["pattern"] == "raid0"


def test_text_recursive_listing_stops_at_second_path():
    text = ("d1\nstripe_count:  2 stripe_size:   1048576 pattern:       raid0 stripe_offset: -1\n"
            "d1/f\nlmm_stripe_count:  8\nlmm_stripe_size:   1048576\n")
    lay = parse_getstripe_text(text)
    assert len(lay["components"]) == 1 and lay["components"][0]["stripe_count"] == 2


def test_lfs_df_inactive_ost_and_human_sizes():
    text = ("UUID                       bytes        Used   Available Use% Mounted on\n"
            "cflab-MDT0000_UUID         39.8G        3.8M       39.8G   1% /mnt/cflab[MDT:0]\n"
            "cflab-OST0000_UUID          7.3T        5.4G        7.3T   1% /mnt/cflab[OST:0]\n"
            "OST0001             : inactive device\n"
            "cflab-OST0002_UUID          : inactive device\n\n"
            "filesystem_summary:         7.3T        5.4G        7.3T   1% /mnt/cflab\n")
    df = parse_lfs_df(text)
    assert df["unit"] == "bytes"
    assert [(t["type"], t["index"], t["status"]) for t in df["targets"]] == [
        ("MDT", 0, "active"), ("OST", 0, "active"), ("OST", 2, "inactive")]
    assert df["targets"][1]["total"] == int(7.3 * (1 << 40))
    assert df["filesystems"]["/mnt/cflab"]["use_percent"] == 1


def test_lfs_df_inodes_header():
    df = parse_lfs_df("UUID                      Inodes       IUsed       IFree IUse% Mounted on\n"
                      "cflab-MDT0000_UUID       2621440         266     2621174   1% /mnt/cflab[MDT:0]\n")
    assert df["unit"] == "inodes" and df["targets"][0]["used"] == 266


def test_layout_from_params_plain_fills_extent():
    lay = L.layout_from_params(stripe_count=4, stripe_size="4M")
    assert lay["components"] == [{"mirror_id": None, "extent_start": 0, "extent_end": None, "stripe_count": 4,
                                  "stripe_size": 4194304, "pattern": None, "pool": None}]
    assert L.setstripe_args(lay) == ["-c", "4", "-S", "4M"]


def test_layout_from_params_pfl_chains_extents_and_args():
    lay = L.layout_from_params(components=[{"end": "256M", "stripe_count": 1}, {"end": "16G", "stripe_count": 4},
                                           {"end": "-1", "stripe_count": -1, "stripe_size": "4M"}])
    assert [(c["extent_start"], c["extent_end"]) for c in lay["components"]] == [
        (0, 256 << 20), (256 << 20, 16 << 30), (16 << 30, None)]
    assert L.setstripe_args(lay) == ["-E", "256M", "-c", "1", "-E", "16G", "-c", "4", "-E", "-1", "-c", "-1",
                                     "-S", "4M"]


@pytest.mark.parametrize("kwargs,needle", [
    (dict(stripe_size="100000"), "multiple of 64K"),
    (dict(stripe_size="4Q"), "not a size"),
    (dict(stripe_count=-2), "must be -1"),
    (dict(components=[{"end": "16G"}, {"end": "256M"}, {"end": "eof"}]), "must increase"),
    (dict(components=[{"end": "256M"}, {"end": "16G"}]), "last component must end at EOF"),
    (dict(components=[{"end": "eof"}, {"end": "eof"}]), "not the last"),
    (dict(components=[{"end": "100000"}, {"end": "eof"}]), "multiple of 64K"),
    (dict(components=[{"end": "1M", "stripe_size": "4M"}, {"end": "eof"}]), "multiple of its stripe_size"),
    (dict(stripe_count=2, components=[{"end": "eof"}]), "cannot be combined"),
])
def test_layout_from_params_rejects(kwargs, needle):
    with pytest.raises(L.LayoutError, match=needle):
        L.layout_from_params(**kwargs)


def test_layout_matches_only_compares_requested_fields():
    desired = L.layout_from_params(stripe_count=4)
    current = L.parse_getstripe_yaml("lmm_stripe_count:  4\nlmm_stripe_size:   1048576\nlmm_pattern: raid0\n")
    assert L.layout_matches(current, desired)
    assert not L.layout_matches(current, L.layout_from_params(stripe_count=4, stripe_size="4M"))
    assert not L.layout_matches(L.parse_getstripe_yaml(""), desired)
    pfl = L.layout_from_params(components=[{"end": "256M", "stripe_count": 1}, {"end": "eof", "stripe_count": 4}])
    assert not L.layout_matches(current, pfl)
