# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation report at 512 nodes (issue 19): a synthetic cluster (report_synth.py, through the real judge)
rendered by validation_html must lead with the failing nodes and why, show a nodes-by-checks grid with the right
red squares, histograms instead of a bar per node, and keep every check in a collapsed table; self-contained."""

import html
import importlib.util
import os
import re
from html.parser import HTMLParser

import pytest

from ansible_collections.clusterforge.gpu.plugins.plugin_utils import validation_report
from ansible_collections.clusterforge.gpu.plugins.plugin_utils.validation_judge import validation_judge

SPEC = importlib.util.spec_from_file_location("cf_report_synth", os.path.join(os.path.dirname(__file__),
                                                                              "report_synth.py"))
report_synth = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(report_synth)

PER_NODE_IDS = ["gpu.count", "gpu.health", "gpu.persistence", "gpu.power_limit", "gpu.clocks", "dcgm.diag", "pcie.acs",
                "ib.port", "ib.port_count", "nccl.single_node", "storage.write", "storage.read", "ib.write_bw"]
CLUSTER_IDS = ["ib.fabric", "nccl.multi_node", "storage.aggregate_write", "storage.aggregate_read", "slurm.smoke",
               "checkpoint.stall"]
VOID = ("meta", "br", "hr", "img", "input", "link", "col", "wbr")


class Page(HTMLParser):
    """The parts of the page the tests read: grid rows, the failing-nodes tables, the collapsed sections."""

    def __init__(self, text):
        HTMLParser.__init__(self, convert_charrefs=True)
        self.stack = []
        self.grid = []            # [(node, [(class, title)]), ...] in page order, over every grid block
        self.grid_heads = []      # each block's column heads
        self.why = {}             # table id ("summary" or "all") -> [(node, check id, message), ...]
        self.cluster = {}         # table id -> [(check id, subject, message), ...]
        self.sections = {}        # element id -> text
        self.ids = []
        self.hrefs = []
        self.open_details = []
        self.texts = {}
        self._cell = None
        self._row = None
        self._node = None
        self.feed(text)
        self.close()

    def inside(self, tag, cls=None, ident=None):
        for name, attrs in self.stack:
            if name == tag and (cls is None or cls in (attrs.get("class") or "").split()) and \
                    (ident is None or attrs.get("id") == ident):
                return True
        return False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("id"):
            self.ids.append(attrs["id"])
        if tag == "a":
            self.hrefs.append(attrs.get("href"))
        if tag == "details" and "open" in attrs:
            self.open_details.append(attrs.get("id"))
        if tag in VOID:
            return
        self.stack.append((tag, attrs))
        if tag == "tr" and self.inside("table", "g") and attrs.get("data-node"):
            self.grid.append((attrs["data-node"], []))
        if tag == "td" and self.inside("table", "g") and self.inside("tbody"):
            self.grid[-1][1].append((attrs.get("class"), attrs.get("title")))
        if tag == "tr" and self.inside("table", "g") and self.inside("thead"):
            self.grid_heads.append([])
        if tag == "tr" and self.inside("table", "why") and self.inside("tbody"):
            self._row = []
        if tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in VOID:
            return
        while self.stack:
            name, _attrs = self.stack.pop()
            if name == tag:
                break
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        if tag == "tr" and self._row is not None:
            where = "all" if self.inside("details", ident="failing-all") else "summary"
            row = self._row
            self._row = None
            if self.inside("table", "cluster") and len(row) == 3:
                self.cluster.setdefault(where, []).append(tuple(row))
            elif self.inside("table", "nodes") and len(row) == 3:
                self._node = row[0]
                self.why.setdefault(where, []).append(tuple(row))
            elif self.inside("table", "nodes") and len(row) == 2:
                self.why.setdefault(where, []).append((self._node, row[0], row[1]))

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        if self.grid_heads and self.stack and self.stack[-1][0] == "th" and self.inside("thead") and \
                self.inside("table", "g"):
            self.grid_heads[-1].append(data)
        for name, attrs in self.stack:
            if attrs.get("id"):
                self.texts.setdefault(attrs["id"], []).append(data)

    def text(self, ident):
        return "".join(self.texts.get(ident, []))


@pytest.fixture(scope="module")
def big():
    report, truth = report_synth.synth_report()
    page = validation_report.validation_html(report)
    return {"report": report, "truth": truth, "page": page, "parsed": Page(page)}


def failed_checks(report):
    return [c for c in report["checks"] if c["status"] == "fail"]


# ------------------------------------------------------------------------------------------ the synthetic input

def test_synthetic_cluster_is_judged_as_designed(big):
    report, truth = big["report"], big["truth"]
    assert len(truth["nodes"]) == 512 and len(truth["failing"]) == 15          # about 3% of the nodes
    assert report["summary"]["fail"] == 15 and report["ok"] is False
    per_node = {}
    for check in failed_checks(report):
        subject = check["subject"]
        names = subject.split(" ")[0].split("->") if "->" in subject else [re.split(r"[ :]", subject)[0]]
        for name in names:
            per_node.setdefault(name, set()).add(check["id"])
    assert per_node == truth["failing"]
    skipped = set(re.split(r"[ :]", c["subject"])[0] for c in report["checks"] if c["status"] == "skip")
    assert skipped == set(truth["busy"])
    assert len(report["checks"]) > 24000


# ------------------------------------------------------------------------------------------------ summary first

def test_summary_comes_first_and_names_every_failing_node_and_why(big):
    page, parsed, report, truth = big["page"], big["parsed"], big["report"], big["truth"]
    order = [page.index(marker) for marker in ('<div class="banner fail">FAIL</div>', "<h2>Checks by id</h2>",
                                               '<h2 id="failing">Failing nodes and why</h2>', '<h2 id="grid">',
                                               '<h2 id="bandwidth">', '<h2 id="checks">')]
    assert order == sorted(order)
    assert "15 failing node(s) of 512" in page
    rows = parsed.why["summary"]
    listed = {}
    for node, check_id, message in rows:
        listed.setdefault(node, set()).add(check_id)
        assert message.startswith(node) or "->" in message            # the judge's message, subject first
    assert listed == truth["failing"]
    assert [n for n, _i, _m in rows] == sorted([n for n, _i, _m in rows])   # gpu006 ... gpu474, natural order
    summary_text = " ".join(m for _n, _i, m in rows)
    for check in failed_checks(report):
        assert check["message"] in summary_text
    # the slow pair names both of its nodes, each with the pair's message
    pair = [c for c in failed_checks(report) if c["id"] == "ib.write_bw"][0]
    assert ("gpu366", "ib.write_bw", pair["message"]) in rows and ("gpu367", "ib.write_bw", pair["message"]) in rows
    assert "failing-all" not in parsed.ids                           # nothing was cut: no collapsed rest


def test_counts_per_check_id(big):
    page, report = big["page"], big["report"]
    table = page[page.index('<table class="counts">'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r'<tr><td>([^<]+)</td><td class="num">(\d+)</td><td class="num(?: nf)?"(?: title="([^"]*)")?>'
                      r'(\d+)</td><td class="num">(\d+)</td></tr>', table)
    expected = {}
    for check in report["checks"]:
        expected.setdefault(check["id"], {"pass": 0, "fail": 0, "skip": 0})[check["status"]] += 1
    assert [r[0] for r in rows] == list(expected)
    titles = {}
    for check_id, passed, title, fail, skip in rows:
        assert (int(passed), int(fail), int(skip)) == tuple(expected[check_id][k] for k in ("pass", "fail", "skip"))
        titles[check_id] = title
    assert table.count('class="num nf"') == len(set(c["id"] for c in failed_checks(report)))
    assert titles["nccl.single_node"] == "nccl.single_node fails on 2 node(s): gpu[294,402]"
    assert titles["ib.write_bw"] == "ib.write_bw fails on 2 node(s): gpu[366-367]"
    assert titles["ib.port_count"] == ""


# ------------------------------------------------------------------------------------------------------- grid

def test_grid_has_a_row_per_node_failing_first_with_the_right_red_squares(big):
    parsed, report, truth = big["parsed"], big["report"], big["truth"]
    assert len(parsed.grid) == 512
    nodes = [node for node, _cells in parsed.grid]
    assert sorted(nodes) == truth["nodes"]
    assert set(nodes[:15]) == set(truth["failing"]) and nodes[15:] == sorted(nodes[15:])
    heads = parsed.grid_heads
    assert heads and all(h == PER_NODE_IDS for h in heads)           # per-node ids only, in the judge's order
    red = set()
    for node, cells in parsed.grid:
        assert len(cells) == len(PER_NODE_IDS)
        for check_id, (cls, title) in zip(PER_NODE_IDS, cells):
            if cls == "f":
                red.add((node, check_id))
                failing = [c["message"] for c in failed_checks(report) if c["id"] == check_id and
                           (c["subject"] == node or c["subject"].startswith((node + " ", node + ":", node + "->")) or
                            "->%s " % node in c["subject"])]
                assert failing and all(m in title for m in failing), (node, check_id, title)
                assert title.startswith("%s %s: 1 fail" % (node, check_id))
            else:
                assert cls in ("p", "s", "m"), (node, check_id, cls)
    assert red == set((node, check_id) for node, ids in truth["failing"].items() for check_id in ids)
    busy = dict(parsed.grid)[truth["busy"][0]]
    statuses = dict(zip(PER_NODE_IDS, [cls for cls, _title in busy]))
    assert [statuses[i] for i in ("dcgm.diag", "nccl.single_node", "storage.write", "storage.read")] == ["s"] * 4
    assert statuses["gpu.health"] == "p"
    # a green GPU cell's tooltip gives the eight GPUs' messages
    title = dict(parsed.grid)["gpu001"][1][1]
    assert title.startswith("gpu001 gpu.health: 8 pass\n") and title.count("\ngpu001 GPU") == 8


def test_grid_is_compact(big):
    page = big["page"]
    assert page.count('<table class="g">') == 5                      # 5 blocks of at most 103 rows side by side
    css = page[page.index("<style>"):page.index("</style>")]
    assert "table.g td{width:11px;min-width:11px;height:11px;}" in css and "border-spacing:1px" in css


# ------------------------------------------------------------------------------------------------ distributions

def test_histograms_replace_the_bars_per_node(big):
    page, report = big["page"], big["report"]
    figures = re.findall(r'<figure class="histogram"><figcaption><b>([^<]+)</b></figcaption>(.*?)</figure>', page,
                         re.S)
    assert [title for title, _body in figures] == ["nccl.single_node (NCCL)", "storage.write (Storage per node)",
                                                   "storage.read (Storage per node)", "ib.write_bw (InfiniBand)"]
    for title, body in figures:
        check_id = title.split(" ")[0]
        checks = [c for c in report["checks"] if c["id"] == check_id and c["measured"] is not None]
        values = sorted(c["measured"] for c in checks)
        below = [c for c in checks if c["measured"] < c["threshold"]]
        assert 'stroke-dasharray="5,3"' in body                        # the threshold line
        assert ">%d below %s" % (len(below), validation_report._short(checks[0]["threshold"])) in body
        assert "%d measured: min %.2f, median %.2f, max %.2f" % (
            len(values), values[0], validation_report._median(values), values[-1]) in html.unescape(body)
        assert body.count("<title>") >= len(below)                     # each low one named under the axis
        for check in below:
            assert html.escape(check["subject"]) in body
    assert [len(re.findall(r'font-weight="bold">(\d+) below', body)) for _t, body in figures] == [1, 1, 1, 1]
    # per-subject bars only for the few: the multi-node NCCL test and the two aggregate figures
    charts = re.findall(r'<svg class="chart".*?</svg>', page, re.S)
    assert sum(c.count("<rect") for c in charts) == 3


def test_a_small_cluster_keeps_a_bar_per_subject():
    report, _truth = report_synth.synth_report(8, faults={2: ["nccl_slow"]}, busy=())
    page = validation_report.validation_html(report)
    assert '<figure class="histogram">' not in page
    assert page.count('<svg class="chart"') == 4 and page.count("<rect") == len(report["bandwidth"])
    assert len(Page(page).grid) == 8


# ----------------------------------------------------------------------------------------------- the full table

def test_details_hold_every_check(big):
    page, parsed, report = big["page"], big["parsed"], big["report"]
    start = page.index('<details class="checks"><summary>All %d checks (failed first)</summary>' % len(report["checks"]))
    details = page[start:page.index("</details>", start)]
    rows = re.findall(r'<tr class="(pass|fail|skip)"><td class="status">\1</td><td>([^<]*)</td><td>([^<]*)</td>'
                      r'(?:<td[^>]*>[^<]*</td>){4}<td>([^<]*)</td></tr>', details)
    assert len(rows) == len(report["checks"])
    assert [r[0] for r in rows[:15]] == ["fail"] * 15
    assert sorted((r[1], html.unescape(r[2]), html.unescape(r[3])) for r in rows) == sorted(
        (c["id"], c["subject"], c["message"]) for c in report["checks"])
    assert not parsed.open_details


def test_the_page_is_self_contained(big):
    page, parsed = big["page"], big["parsed"]
    lowered = page.lower()
    for banned in ("<script", "http:", "https:", "<link", "url(", "@import", "src=", "<iframe", "<object"):
        assert banned not in lowered
    assert parsed.hrefs and all(h.startswith("#") and h[1:] in parsed.ids for h in parsed.hrefs)


# --------------------------------------------------------------------------------------------- caps and edges

def test_more_than_fifty_failing_nodes_are_capped_with_a_link_to_all():
    faults = dict((index, ["nccl_slow"]) for index in range(0, 480, 4))  # 120 nodes
    faults[0] = ["nccl_slow", "ecc", "clocks", "power", "persistence", "dcgm"]
    report, truth = report_synth.synth_report(512, faults=faults, busy=())
    page = validation_report.validation_html(report)
    parsed = Page(page)
    summary = parsed.why["summary"]
    assert len(set(n for n, _i, _m in summary)) == validation_report.SUMMARY_NODES
    assert '<a href="#failing-all">and 70 more failing node(s)</a>' in page
    assert '<a href="#failing-all">\u2026 and 2 more failing check(s) on gpu001</a>' in page
    assert len([r for r in summary if r[0] == "gpu001"]) == validation_report.SUMMARY_CHECKS_PER_NODE
    every = {}
    for node, check_id, _message in parsed.why["all"]:
        every.setdefault(node, set()).add(check_id)
    assert every == truth["failing"] and len(every) == 120
    assert "failing-all" in parsed.ids and page.index('id="failing-all"') < page.index('<h2 id="grid">')
    assert '<tr class="bad" data-node="gpu001">' in page


def test_cluster_wide_failures_are_listed_apart_not_on_every_node():
    report, truth = report_synth.synth_report(64, faults={3: ["acs"]}, busy=(),
                                              cluster_faults=("fabric", "nccl_multi", "slurm"))
    page = validation_report.validation_html(report)
    parsed = Page(page)
    assert sorted(r[0] for r in parsed.cluster["summary"]) == sorted(truth["cluster_failing"])
    assert "gpu[001-064]" in [r[1] for r in parsed.cluster["summary"]]
    assert set(n for n, _i, _m in parsed.why["summary"]) == set(["gpu004"]) == set(truth["failing"])
    assert "Cluster-wide and multi-node failures (3)" in page and "1 failing node(s) of 64" in page


@pytest.mark.parametrize("subject, expected", [
    ("gpu01", ("node", ["gpu01"])),
    ("gpu01 GPU3 (00000000:5D:00.0, GPU-8f2c)", ("node", ["gpu01"])),
    ("gpu01 mlx5_3:1", ("node", ["gpu01"])),
    ("gpu01:/lustre/validate", ("node", ["gpu01"])),
    ("node-a.example.org:/scratch", ("node", ["node-a.example.org"])),
    ("gpu01->gpu02 mlx5_0", ("pair", ["gpu01", "gpu02"])),
    ("gpu01 -> gpu02 mlx5_0", ("pair", ["gpu01", "gpu02"])),
    ("gpu[01-03]", ("group", ["gpu01", "gpu02", "gpu03"])),
    ("gpu[07]", ("node", ["gpu07"])),
    ("gpu[1-", ("other", [])),
    ("aggregate /lustre/validate (2 nodes)", ("node", ["aggregate"])),
    ("slurm job 12", ("node", ["slurm"])),
    ("(none)", ("other", [])),
    ("", ("other", [])),
])
def test_subject_names(subject, expected):
    assert validation_report._subject_names(subject) == expected


def test_any_check_id_is_handled_generically():
    """A check id the renderer does not know (the judge gains some) gets its column, count and failures."""
    report, _truth = report_synth.synth_report(6, faults={}, busy=())
    for index, name in enumerate(report_synth.node_name(i) for i in range(6)):
        status = "fail" if index == 4 else "pass"
        report["checks"].append({"id": "nccl.isolation", "category": "nccl", "subject": "%s GPU%d" % (name, index),
                                 "measured": None, "threshold": None, "expected": None, "unit": None, "status": status,
                                 "message": "%s GPU%d: isolation %s" % (name, index, status)})
    report["checks"].append({"id": "fabric.sharp", "subject": "fabric", "status": "fail", "message": "fabric: no SHARP"})
    page = validation_report.validation_html(report)
    parsed = Page(page)
    assert parsed.grid_heads[0][-1] == "nccl.isolation"
    cells = dict(parsed.grid)
    assert cells["gpu005"][-1][0] == "f" and "gpu005 GPU4: isolation fail" in cells["gpu005"][-1][1]
    assert [n for n, _c in parsed.grid][0] == "gpu005"
    assert ("gpu005", "nccl.isolation", "gpu005 GPU4: isolation fail") in parsed.why["summary"]
    assert ("fabric.sharp", "fabric", "fabric: no SHARP") in parsed.cluster["summary"]
    assert "fabric.sharp" not in parsed.grid_heads[0]


def test_failures_naming_one_node_two_or_a_set():
    """As the judge's nccl.isolation names them: a culprit node, a pair as a hostlist of two, an unresolved set."""
    report, _truth = report_synth.synth_report(8, faults={}, busy=())
    extra = [("gpu002", "fail"), ("gpu[003,005]", "fail"), ("gpu[001-006]", "fail"), ("multi-node", "skip")]
    for subject, status in extra:
        report["checks"].append({"id": "nccl.isolation", "category": "nccl", "subject": subject, "status": status,
                                 "message": "%s: isolation says %s" % (subject, status)})
    page = validation_report.validation_html(report)
    parsed = Page(page)
    assert sorted(parsed.why["summary"]) == [("gpu002", "nccl.isolation", "gpu002: isolation says fail"),
                                             ("gpu003", "nccl.isolation", "gpu[003,005]: isolation says fail"),
                                             ("gpu005", "nccl.isolation", "gpu[003,005]: isolation says fail")]
    assert parsed.cluster["summary"] == [("nccl.isolation", "gpu[001-006]", "gpu[001-006]: isolation says fail")]
    assert parsed.grid_heads[0][-1] == "nccl.isolation"
    cells = dict((node, dict(zip(parsed.grid_heads[0], c))) for node, c in parsed.grid)
    assert [n for n in sorted(cells) if cells[n]["nccl.isolation"][0] == "f"] == ["gpu002", "gpu003", "gpu005"]
    assert cells["gpu001"]["nccl.isolation"] == ("n", None)
    assert [n for n, _c in parsed.grid][:3] == ["gpu002", "gpu003", "gpu005"]


def test_cell_status_and_title():
    checks = [{"status": "pass", "message": "a"}, {"status": "skip", "message": "b"}]
    assert validation_report._cell_status(checks) == "mixed"
    assert validation_report._cell_status(checks + [{"status": "fail", "message": "c"}]) == "fail"
    assert validation_report._cell_status(checks[1:]) == "skip"
    many = [{"status": "pass", "message": "m%d" % i} for i in range(12)] + [{"status": "fail", "message": "bad"}]
    title = validation_report._cell_title("gpu01", "gpu.health", many)
    lines = title.split("\n")
    assert lines[0] == "gpu01 gpu.health: 1 fail, 12 pass" and lines[1] == "bad"
    assert len(lines) == 1 + validation_report.TITLE_MESSAGES + 1 and lines[-1] == "\u2026 and 5 more"


def test_a_report_without_nodes_has_no_grid():
    page = validation_report.validation_html(validation_judge({"cluster": "x"}))
    assert '<table class="g">' not in page and 'href="#grid"' not in page and "No check failed." in page
