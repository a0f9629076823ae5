# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A validation_judge report as one self-contained HTML page: inline CSS and SVG, no script, no link, no
external CSS, JS or fonts (clusters are often air-gapped).

The page reads at 512 nodes (some 25,000 checks): the verdict, the counts per check id and the failing nodes
with their reasons come first; then a nodes-by-checks grid (a coloured square per node and check id), the
bandwidth figures (bars for up to ``SMALL_SERIES`` subjects, a histogram with the threshold above that) and,
collapsed in ``<details>``, the complete table of checks.

Which subjects are nodes is read from the subjects themselves, for any check id: the first word of a subject
(``gpu01`` in ``gpu01``, ``gpu01 GPU3 (...)``, ``gpu01 mlx5_0``, ``gpu01:/lustre``) is a node when it leads the
subjects of checks of at least two categories and four ids (the judge gives every node eight ids or more;
``aggregate``, ``fabric``, ``slurm``, a model name lead one or two); ``a->b hca`` names the pair's two nodes; a
hostlist (``gpu[01-64]``) its expansion. A failure is listed under the nodes it names when they are one or two
(a node, a node's GPU or port, a pair); wider ones (the multi-node NCCL test on ``gpu[01-64]``, the fabric, the
Slurm job) are listed as cluster-wide.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import html
import re

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import compress as hostlist_compress
from ansible_collections.clusterforge.gpu.plugins.module_utils.hostlist import expand as hostlist_expand
from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_common import (
    ValidationError,
    _fmt,
    _is_list,
    _is_map,
    _number,
)

# A series (one check id in a bandwidth group) with more measurements than this is drawn as a histogram.
SMALL_SERIES = 16
# The first screen lists this many failing nodes (and cluster-wide failures), the rest in a collapsed list.
SUMMARY_NODES = 50
SUMMARY_CLUSTER = 10
# Failing checks shown per node in the summary, messages in a grid cell's tooltip.
SUMMARY_CHECKS_PER_NODE = 4
TITLE_MESSAGES = 8
# Grid: at most this many node rows per block; blocks wrap side by side.
GRID_BLOCK_ROWS = 128
GRID_MIN_BLOCK_ROWS = 32
# Blocks that fit side by side in about 1200 px (a 1280 px window) at 12 px a column and 6 px a character.
GRID_LINE_PX = 1200
HISTOGRAM_BINS = 40
# The first word of a subject is a node when it names checks of this many categories and ids at least.
NODE_MIN_CATEGORIES = 2
NODE_MIN_IDS = 4
# Below-threshold measurements marked one by one (with their subject) under a histogram.
HISTOGRAM_RUG = 200

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:1.5em;color:#222;}
h1{font-size:1.5em;margin:0 0 .3em;} h2{font-size:1.2em;margin-top:1.4em;border-bottom:1px solid #ccc;}
h3{font-size:1em;margin:.8em 0 .3em;}
a{color:#1565c0;}
.head{display:flex;flex-wrap:wrap;align-items:center;gap:.4em 1.2em;}
.banner{font-size:1.6em;font-weight:bold;padding:.3em .8em;border-radius:6px;display:inline-block;color:#fff;}
.banner.pass{background:#2e7d32;} .banner.fail{background:#c62828;}
.summary{margin:.4em 0;} .summary span{display:inline-block;margin-right:1.2em;font-weight:bold;}
nav.toc{font-size:.85em;margin:.3em 0;} nav.toc a{margin-right:1em;}
table{border-collapse:collapse;font-size:.9em;margin-top:.5em;}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top;}
th{background:#f0f0f0;} td.num{text-align:right;font-variant-numeric:tabular-nums;}
.status{font-weight:bold;text-transform:uppercase;}
tr.fail td.status,.s-fail{color:#fff;background:#c62828;} tr.pass td.status,.s-pass{color:#fff;background:#2e7d32;}
tr.skip td.status,.s-skip{color:#333;background:#bdbdbd;}
.top{display:flex;flex-wrap:wrap;align-items:flex-start;gap:0 2em;}
.top h2{margin-top:.6em;}
.top .failing{flex:1 1 560px;min-width:0;}
table.counts{font-size:.8em;} table.counts td,table.counts th{padding:.1em .45em;}
table.counts td.nf{color:#fff;background:#c62828;font-weight:bold;}
table.why{font-size:.85em;width:100%;} table.why td,table.why th{padding:.15em .4em;}
table.why th.node{white-space:nowrap;color:#c62828;background:#fff5f5;}
table.why td.id{white-space:nowrap;}
.sq{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:-1px;}
.sq.f,table.g td.f{background:#c62828;} .sq.p,table.g td.p{background:#2e7d32;}
.sq.s,table.g td.s{background:#bdbdbd;} .sq.m,table.g td.m{background:#a5d6a7;}
.sq.n{background:#fff;outline:1px solid #ddd;outline-offset:-1px;}
.grid{display:flex;flex-wrap:wrap;align-items:flex-start;gap:.5em 22px;}
table.g{border-collapse:separate;border-spacing:1px;font-size:10px;margin:0;}
table.g th,table.g td{border:0;padding:0;background:none;}
table.g td{width:11px;min-width:11px;height:11px;}
table.g td.n{background:#f4f4f4;}
table.g tbody th{font-weight:normal;text-align:right;padding-right:4px;white-space:nowrap;line-height:11px;}
table.g tbody tr.bad th{color:#c62828;font-weight:bold;}
table.g tbody tr:hover th{background:#fff3c4;}
table.g thead th{writing-mode:vertical-rl;transform:rotate(180deg);text-align:left;font-weight:normal;
 padding:2px 0;line-height:11px;white-space:nowrap;}
.charts{display:flex;flex-wrap:wrap;align-items:flex-start;gap:.2em 2.5em;}
.charts>div{display:flex;flex-wrap:wrap;align-items:flex-start;gap:0 2.5em;max-width:100%;}
.charts>div>h3{flex-basis:100%;margin:.5em 0 0;}
figure{margin:.2em 0;} figcaption{font-size:.85em;max-width:580px;}
.bad{color:#c62828;font-weight:bold;}
svg text{font-size:12px;font-family:inherit;}
svg.hist text{font-size:11px;}
.muted{color:#666;font-size:.85em;}
details>summary{cursor:pointer;font-weight:bold;margin:.4em 0;}
"""

_BAR_COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "skip": "#9e9e9e"}
_CELL_CLASS = {"pass": "p", "fail": "f", "skip": "s", "mixed": "m"}
# The first word of a subject: a host name or a hostlist expression, followed by the end, a space or a colon.
_HOST_RE = re.compile(r"^([A-Za-z0-9_.\-]+(?:\[[0-9,\-]+\][A-Za-z0-9_.\-]*)*)(?=$|[\s:])")
_NAT_RE = re.compile(r"(\d+)")


def _e(value):
    return html.escape(to_text("" if value is None else value), quote=True)


def _cell_number(value, digits=2):
    """A table cell: whole numbers without decimals (8 GPUs, 400 Gb/s), others with ``digits``; text as is."""
    if isinstance(value, bool):
        return _e(str(value).lower())
    number = _number(value)
    if number is None:
        return _e("" if value is None else value)
    if number.is_integer() and abs(number) < 1e15:
        return _e("%d" % number)
    return _e(_fmt(number, digits))


def _natural(text):
    """Sort key: ``gpu2`` before ``gpu10``."""
    return [(0, int(chunk), "") if chunk.isdigit() else (1, 0, chunk) for chunk in _NAT_RE.split(text) if chunk]


def _short(value):
    """A number for axes and captions: three significant figures at most, no exponent for usual magnitudes."""
    number = _number(value)
    if number is None:
        return "n/a"
    if number.is_integer() and abs(number) < 1e6:
        return "%d" % number
    if abs(number) >= 100:
        return "%.0f" % number
    if abs(number) >= 10:
        return "%.1f" % number
    return "%.2f" % number


# ---------------------------------------------------------------------------------------------- subjects

def _host_word(text):
    match = _HOST_RE.match(to_text(text).strip())
    return match.group(1) if match else None


def _subject_names(subject):
    """What a subject names: ("pair", [client, server]), ("group", hosts of a hostlist), ("node", [word]) or
    ("other", [])."""
    text = to_text(subject or "").strip()
    if "->" in text:
        left, right = text.split("->", 1)
        names = [n for n in (_host_word(left), _host_word(right)) if n]
        return ("pair", names) if names else ("other", [])
    word = _host_word(text)
    if not word:
        return "other", []
    if "[" in word or "," in word:
        try:
            names = [n for n in hostlist_expand(word) if n]
        except ValueError:
            return "other", []
        if len(names) > 1:
            return "group", names
        return ("node", names) if names else ("other", [])
    return "node", [word]


class _Model(object):
    """The report's checks seen by node: which words are nodes, the per-node check ids, the failures per node."""

    def __init__(self, checks):
        self.checks = checks
        self.names = [_subject_names(c.get("subject")) for c in checks]
        categories = {}
        ids = {}
        named = set()
        for check, (kind, names) in zip(checks, self.names):
            if kind == "node":
                check_id = to_text(check.get("id") or "")
                categories.setdefault(names[0], set()).add(to_text(check.get("category") or check_id.split(".", 1)[0]))
                ids.setdefault(names[0], set()).add(check_id)
            elif kind in ("pair", "group"):
                named.update(names)
        # The judge gives every node at least 8 check ids in 5 categories (gpu, dcgm, pcie, ib, nccl, storage);
        # fabric, aggregate, slurm or a model name: one or two ids.
        self.nodes = set(n for n in categories if len(categories[n]) >= NODE_MIN_CATEGORIES and
                         len(ids[n]) >= NODE_MIN_IDS) | named
        # Check ids in order of appearance; a grid column for each id with checks about one node or two (a node,
        # its GPU or port, a pair): those checks fill the cells, the others (on wider subjects) only the table.
        self.ids = []
        self.pair_ids = set()
        self.cells = {}
        self.node_failures = {}
        self.cluster_failures = []
        for check, (kind, names) in zip(checks, self.names):
            check_id = to_text(check.get("id") or "")
            if check_id not in self.ids:
                self.ids.append(check_id)
            mapped = self.node_names(kind, names)
            for node in mapped:
                self.cells.setdefault((node, check_id), []).append(check)
            if mapped and kind != "node":
                self.pair_ids.add(check_id)
            if check.get("status") != "fail":
                continue
            if mapped:
                for node in mapped:
                    self.node_failures.setdefault(node, []).append(check)
            else:
                self.cluster_failures.append(check)
        columns = set(check_id for _node, check_id in self.cells)
        self.grid_ids = [i for i in self.ids if i in columns]
        self.grid_nodes = sorted(set(node for node, _check_id in self.cells), key=_natural)

    def node_names(self, kind, names):
        """The nodes a check is about: its node, the two ends of a pair, a hostlist of two; none for wider ones."""
        if kind == "node" and names[0] in self.nodes:
            return names
        if kind == "pair" or (kind == "group" and len(names) <= 2):
            return [n for n in names if n in self.nodes]
        return []

    def failing_nodes(self):
        return sorted(self.node_failures, key=_natural)


def _cell_status(checks):
    statuses = set(to_text(c.get("status")) for c in checks)
    if "fail" in statuses:
        return "fail"
    if statuses == set(["pass"]):
        return "pass"
    if "pass" in statuses:
        return "mixed"
    return "skip"


def _cell_title(node, check_id, checks):
    counts = [(s, sum(1 for c in checks if c.get("status") == s)) for s in ("fail", "pass", "skip")]
    head = "%s %s: %s" % (node, check_id, ", ".join("%d %s" % (n, s) for s, n in counts if n))
    order = {"fail": 0, "skip": 1}
    ordered = sorted(checks, key=lambda c: order.get(c.get("status"), 2))
    lines = [head] + [to_text(c.get("message")) for c in ordered[:TITLE_MESSAGES]]
    if len(ordered) > TITLE_MESSAGES:
        lines.append("\u2026 and %d more" % (len(ordered) - TITLE_MESSAGES))
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- charts

def _svg_chart(entries):
    """One inline SVG horizontal bar chart: a bar per entry (measured), a dark tick at its threshold."""
    label_w, bar_w, value_w, row_h, top = 330, 480, 110, 24, 8
    width = label_w + bar_w + value_w
    height = top * 2 + row_h * len(entries)
    scale = max([_number(x.get(k)) or 0 for x in entries for k in ("measured", "threshold")])
    scale = scale * 1.05 if scale > 0 else 1.0
    out = ['<svg class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="bandwidth chart">'
           % (width, height, width, height)]
    for row, entry in enumerate(entries):
        y = top + row * row_h
        measured = _number(entry.get("measured")) or 0.0
        threshold = _number(entry.get("threshold"))
        colour = _BAR_COLOURS.get(entry.get("status"), "#1565c0")
        length = max(1.0, measured / scale * bar_w)
        unit = to_text(entry.get("unit") or "")
        title = "%s: %s %s%s" % (entry.get("label"), _fmt(measured, 2), unit,
                                 " (threshold %s %s)" % (_fmt(threshold, 2), unit) if threshold is not None else "")
        out.append('<g><title>%s</title>' % _e(title))
        label = to_text(entry.get("label") or "")
        if len(label) > 46:  # the whole label is in the tooltip
            label = label[:45] + "\u2026"
        out.append('<text x="%d" y="%d" text-anchor="end">%s</text>' % (label_w - 6, y + 16, _e(label)))
        out.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>'
                   % (label_w, y + 4, length, row_h - 8, colour))
        if threshold is not None:
            tx = label_w + threshold / scale * bar_w
            out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#111" stroke-width="2"/>'
                       % (tx, y + 1, tx, y + row_h - 1))
        out.append('<text x="%d" y="%d">%s</text></g>'
                   % (label_w + bar_w + 6, y + 16, _e("%s %s" % (_fmt(measured, 1), unit))))
    out.append("</svg>")
    return "\n".join(out)


def _median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def _below(entry):
    measured, threshold = _number(entry.get("measured")), _number(entry.get("threshold"))
    return threshold is not None and measured is not None and measured < threshold


def _svg_histogram(title, entries):
    """An inline SVG histogram of ``entries`` (bandwidth rows): bins stacked by status, the threshold(s) as a
    vertical line, the measurements below it marked one by one under the axis (their subject in the tooltip)."""
    values = [_number(x.get("measured")) for x in entries]
    thresholds = sorted(set(t for t in (_number(x.get("threshold")) for x in entries) if t is not None))
    unit = to_text(entries[0].get("unit") or "")
    low, high = min(values + thresholds), max(values + thresholds)
    span = high - low
    if span <= 0:
        span = abs(high) * 0.1 or 1.0
        low, high = low - span / 2, high + span / 2
    else:
        low, high = low - span * 0.02, high + span * 0.02
    if low < 0 <= min(values + thresholds):
        low = 0.0
    width, left, right, top, plot_h = 580, 44, 16, 30, 100
    plot_w = width - left - right
    bottom = top + plot_h
    height = bottom + 46
    bins = HISTOGRAM_BINS
    step = (high - low) / bins
    counts = [dict(fail=0, passed=0, other=0) for _i in range(bins)]
    for entry, value in zip(entries, values):
        index = min(bins - 1, max(0, int((value - low) / step)))
        key = {"fail": "fail", "pass": "passed"}.get(entry.get("status"), "other")
        counts[index][key] += 1
    peak = max(sum(c.values()) for c in counts) or 1

    def xpos(value):
        return left + (value - low) / (high - low) * plot_w

    below = [x for x in entries if _below(x)]
    out = ['<svg class="hist" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s">'
           % (width, height, width, height, _e("histogram of %s" % title))]
    out.append('<text x="%d" y="14" fill="#555">subjects per bin (of %d)</text>' % (left, len(entries)))
    bar_w = plot_w / bins
    for index, count in enumerate(counts):
        total = sum(count.values())
        if not total:
            continue
        x = left + index * bar_w
        y = bottom
        out.append('<g><title>%s</title>' % _e("%s-%s %s: %d (%d pass, %d fail%s)" % (
            _short(low + index * step), _short(low + (index + 1) * step), unit, total, count["passed"], count["fail"],
            ", %d other" % count["other"] if count["other"] else "")))
        for key, colour in (("fail", _BAR_COLOURS["fail"]), ("passed", _BAR_COLOURS["pass"]),
                            ("other", _BAR_COLOURS["skip"])):
            if not count[key]:
                continue
            h = max(2.0, count[key] / float(peak) * plot_h)  # one failing node among 500 stays visible
            y -= h
            out.append('<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>'
                       % (x + 0.5, y, max(1.0, bar_w - 1), h, colour))
        out.append("</g>")
    out.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888" stroke-width="1"/>'
               % (left, bottom, width - right, bottom))
    for tick in range(5):
        value = low + (high - low) * tick / 4.0
        anchor = "start" if tick == 0 else "end" if tick == 4 else "middle"
        out.append('<text x="%.1f" y="%d" text-anchor="%s" fill="#555">%s</text>'
                   % (xpos(value), bottom + 30, anchor, _e(_short(value))))
    for entry in below[:HISTOGRAM_RUG]:
        x = xpos(_number(entry.get("measured")))
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"><title>%s</title></line>'
                   % (x, bottom + 3, x, bottom + 15, _BAR_COLOURS["fail"], _e("%s: %s %s" % (
                       entry.get("label"), _fmt(_number(entry.get("measured")), 2), unit))))
    for index, threshold in enumerate(thresholds[:4]):
        x = xpos(threshold)
        out.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#111" stroke-width="2" stroke-dasharray="5,3">'
                   '<title>%s</title></line>' % (x, top - 6, x, bottom + 2, _e("threshold %s %s" % (
                       _fmt(threshold, 2), unit))))
        if index == 0:
            anchor = "end" if x > width / 2 else "start"
            dx = -5 if anchor == "end" else 5
            out.append('<text x="%.1f" y="%d" text-anchor="%s" fill="%s" font-weight="bold">%s</text>' % (
                x + dx, top + 4, anchor, _BAR_COLOURS["fail"] if below else "#111",
                _e("%d below %s %s" % (len(below), _short(threshold), unit))))
    out.append('<text x="%d" y="%d" fill="#555">%s</text>' % (left, height - 2, _e(unit)))
    out.append("</svg>")
    return "\n".join(out), below, thresholds


def _histogram_figure(title, entries):
    svg, below, thresholds = _svg_histogram(title, entries)
    values = [_number(x.get("measured")) for x in entries]
    unit = to_text(entries[0].get("unit") or "")
    stats = "%d measured: min %s, median %s, max %s %s" % (
        len(values), _fmt(min(values), 2), _fmt(_median(values), 2), _fmt(max(values), 2), unit)
    if thresholds:
        limit = _fmt(thresholds[0], 2) if len(thresholds) == 1 else "their thresholds"
        note = '; <span class="%s">%d below %s%s</span>' % (
            "bad" if below else "muted", len(below), _e(limit), " %s" % _e(unit) if len(thresholds) == 1 else "")
    else:
        note = "; no threshold"
    lowest = ""
    if below:
        worst = sorted(below, key=lambda x: _number(x.get("measured")))[:5]
        lowest = "<br>lowest: %s%s" % (", ".join(_e("%s %s" % (x.get("label"), _fmt(_number(x.get("measured")), 1)))
                                                 for x in worst), ", \u2026" if len(below) > 5 else "")
    return ('<figure class="histogram"><figcaption><b>%s</b></figcaption>%s<figcaption>%s%s%s</figcaption></figure>'
            % (_e(title), svg, _e(stats), note, lowest))


def _chart_series(bandwidth, checks):
    """Each bandwidth row's series: the id of the check it charts (matched on subject, measured value and status),
    else the last word of its label."""
    by_subject = {}
    for check in checks:
        if _number(check.get("measured")) is not None:
            by_subject.setdefault(to_text(check.get("subject")), []).append(check)
    series = []
    for entry in bandwidth:
        label = to_text(entry.get("label") or "")
        found = None
        cut = len(label)
        while found is None:
            cut = label.rfind(" ", 0, cut)
            if cut <= 0:
                break
            candidates = by_subject.get(label[:cut]) or []
            for index, check in enumerate(candidates):
                if _number(check.get("measured")) == _number(entry.get("measured")) and \
                        check.get("status") == entry.get("status"):
                    found = to_text(check.get("id"))
                    del candidates[index]
                    break
        series.append(found or label.rsplit(" ", 1)[-1])
    return series


def _bandwidth_section(bandwidth, checks):
    parts = []
    groups = []
    index = {}
    for entry, series in zip(bandwidth, _chart_series(bandwidth, checks)):
        key = (to_text(entry.get("group") or ""), to_text(entry.get("unit") or ""))
        if key not in index:
            index[key] = len(groups)
            groups.append((key, []))
        groups[index[key]][1].append((series, entry))
    if any(len(rows) > SMALL_SERIES for _key, rows in groups):
        parts.append('<p class="muted">Up to %d subjects: a bar each (measured; black tick: threshold). More: a '
                     'histogram (bins stacked red failed, green passed; dashed line: threshold; red marks under the '
                     'axis: each measurement below it, named in its tooltip).</p>' % SMALL_SERIES)
    else:
        parts.append('<p class="muted">Bar: measured; black tick: threshold. Green passed, red failed.</p>')
    parts.append('<div class="charts">')
    for (group, unit), rows in groups:
        parts.append("<div><h3>%s</h3>" % _e(" ".join(x for x in (group, "(%s)" % unit if unit else "") if x)))
        if len(rows) <= SMALL_SERIES:
            parts.append(_svg_chart([entry for _series, entry in rows]))
            parts.append("</div>")
            continue
        order = []
        members = {}
        for series, entry in rows:
            if series not in members:
                order.append(series)
                members[series] = []
            members[series].append(entry)
        figures = []
        bars = []
        for series in order:
            if len(members[series]) > SMALL_SERIES:
                figures.append(_histogram_figure("%s (%s)" % (series, group) if group else series, members[series]))
            else:
                bars.extend(members[series])
        parts.append("\n".join(figures))
        if bars:
            parts.append(_svg_chart(bars))
        parts.append("</div>")
    parts.append("</div>")
    return parts


# ---------------------------------------------------------------------------------------------- sections

def _hostlist(names):
    try:
        return hostlist_compress(names)
    except ValueError:
        return ",".join(names)


def _counts_table(model):
    """Pass, fail and skip counts per check id; a fail count's tooltip names the failing nodes (as a hostlist)."""
    checks, ids = model.checks, model.ids
    counts = dict((i, {"pass": 0, "fail": 0, "skip": 0}) for i in ids)
    failing = {}
    for node, failures in model.node_failures.items():
        for check in failures:
            failing.setdefault(to_text(check.get("id") or ""), set()).add(node)
    for check in checks:
        status = check.get("status")
        if status in ("pass", "fail", "skip"):
            counts[to_text(check.get("id") or "")][status] += 1
    rows = []
    for check_id in ids:
        count = counts[check_id]
        title = ""
        if failing.get(check_id):
            nodes = sorted(failing[check_id], key=_natural)
            title = ' title="%s"' % _e("%s fails on %d node(s): %s" % (check_id, len(nodes), _hostlist(nodes)))
        rows.append('<tr><td>%s</td><td class="num">%d</td><td class="num%s"%s>%d</td><td class="num">%d</td></tr>'
                    % (_e(check_id), count["pass"], " nf" if count["fail"] else "", title, count["fail"],
                       count["skip"]))
    return ('<table class="counts"><thead><tr><th>Check</th><th>Pass</th><th>Fail</th><th>Skip</th></tr></thead>'
            '<tbody>%s</tbody></table>' % "".join(rows))


def _why_rows(model, nodes, per_node):
    rows = []
    for node in nodes:
        failures = model.node_failures[node]
        shown = failures if per_node is None else failures[:per_node]
        extra = len(failures) - len(shown)
        span = len(shown) + (1 if extra else 0)
        for index, check in enumerate(shown):
            head = '<th class="node" rowspan="%d">%s</th>' % (span, _e(node)) if index == 0 else ""
            rows.append('<tr>%s<td class="id"><span class="sq f"></span>%s</td><td>%s</td></tr>'
                        % (head, _e(check.get("id")), _e(check.get("message"))))
        if extra:
            rows.append('<tr><td colspan="2" class="muted"><a href="#failing-all">\u2026 and %d more failing check(s) '
                        'on %s</a></td></tr>' % (extra, _e(node)))
    return rows


_CLUSTER_HEAD = "<thead><tr><th>Check</th><th>Subject</th><th>Why</th></tr></thead>"
_NODE_HEAD = "<thead><tr><th>Node</th><th>Check</th><th>Why</th></tr></thead>"


def _cluster_rows(failures):
    return ['<tr><td class="id"><span class="sq f"></span>%s</td><td>%s</td><td>%s</td></tr>'
            % (_e(c.get("id")), _e(c.get("subject")), _e(c.get("message"))) for c in failures]


def _failing_section(model, others, all_nodes):
    """The first screen's "failing nodes and why": cluster-wide failures, then failing nodes (capped)."""
    parts = ['<section class="failing"><h2 id="failing">Failing nodes and why</h2>']
    failing = model.failing_nodes()
    cluster = model.cluster_failures
    if not failing and not cluster and not others:
        parts.append('<p class="muted">No check failed.</p></section>')
        return parts, False
    cut = False
    if cluster or others:
        parts.append("<h3>Cluster-wide and multi-node failures (%d)</h3>" % (len(cluster) + len(others)))
        parts.append('<table class="why cluster">%s<tbody>%s%s</tbody></table>' % (
            _CLUSTER_HEAD, "".join(_cluster_rows(cluster[:SUMMARY_CLUSTER])),
            "".join('<tr><td colspan="3">%s</td></tr>' % _e(f) for f in others[:SUMMARY_CLUSTER])))
        if len(cluster) > SUMMARY_CLUSTER or len(others) > SUMMARY_CLUSTER:
            cut = True
            parts.append('<p><a href="#failing-all">and %d more cluster-wide failure(s)</a></p>'
                         % (max(0, len(cluster) - SUMMARY_CLUSTER) + max(0, len(others) - SUMMARY_CLUSTER)))
    if failing:
        parts.append("<h3>%d failing node(s)%s</h3>" % (
            len(failing), " of %d" % len(all_nodes) if all_nodes else ""))
        shown = failing[:SUMMARY_NODES]
        parts.append('<table class="why nodes">%s<tbody>%s</tbody></table>'
                     % (_NODE_HEAD, "".join(_why_rows(model, shown, SUMMARY_CHECKS_PER_NODE))))
        if len(failing) > len(shown):
            cut = True
            parts.append('<p class="more"><a href="#failing-all">and %d more failing node(s)</a></p>'
                         % (len(failing) - len(shown)))
        elif any(len(model.node_failures[n]) > SUMMARY_CHECKS_PER_NODE for n in shown):
            cut = True
    parts.append("</section>")
    return parts, cut


def _failing_all(model, others):
    """Every failing node with every failing check, and every cluster-wide failure, collapsed."""
    failing = model.failing_nodes()
    parts = ['<details id="failing-all"><summary>All %d failing node(s) and %d cluster-wide failure(s)</summary>'
             % (len(failing), len(model.cluster_failures) + len(others))]
    if model.cluster_failures or others:
        parts.append('<table class="why cluster">%s<tbody>%s%s</tbody></table>' % (
            _CLUSTER_HEAD, "".join(_cluster_rows(model.cluster_failures)),
            "".join('<tr><td colspan="3">%s</td></tr>' % _e(f) for f in others)))
    if failing:
        parts.append('<table class="why nodes">%s<tbody>%s</tbody></table>'
                     % (_NODE_HEAD, "".join(_why_rows(model, failing, None))))
    parts.append("</details>")
    return parts


def _grid(model):
    """Rows: nodes (failing first); columns: per-node check ids; cells: a square coloured by status."""
    nodes = model.grid_nodes
    failing = set(model.node_failures)
    nodes = [n for n in nodes if n in failing] + [n for n in nodes if n not in failing]
    ids = model.grid_ids
    block_px = 8 + 6 * max(len(n) for n in nodes) + 12 * len(ids) + 22
    per_line = max(1, GRID_LINE_PX // block_px)
    blocks = max(1, min(per_line, -(-len(nodes) // GRID_MIN_BLOCK_ROWS)))
    blocks = max(blocks, -(-len(nodes) // GRID_BLOCK_ROWS))
    per_block = -(-len(nodes) // blocks)
    head = "<thead><tr><th></th>%s</tr></thead>" % "".join(
        '<th title="%s">%s</th>' % (_e("%s%s" % (i, ": the pairs this node is in" if i in model.pair_ids else "")),
                                    _e(i)) for i in ids)
    parts = ['<p class="muted">A row per node (%d; failing first), a column per check id judged per node, GPU, port '
             'or pair. <span class="sq f"></span>failed <span class="sq p"></span>passed <span class="sq m"></span>'
             'passed in part, the rest skipped <span class="sq s"></span>skipped (not measured) '
             '<span class="sq n"></span>no such check. Hover a square for its messages.</p>' % len(nodes),
             '<div class="grid">']
    for start in range(0, len(nodes), per_block):
        rows = []
        for node in nodes[start:start + per_block]:
            cells = []
            for check_id in ids:
                checks = model.cells.get((node, check_id))
                if not checks:
                    cells.append('<td class="n"></td>')
                    continue
                cells.append('<td class="%s" title="%s"></td>' % (
                    _CELL_CLASS[_cell_status(checks)], _e(_cell_title(node, check_id, checks))))
            rows.append('<tr%s data-node="%s"><th>%s</th>%s</tr>' % (
                ' class="bad"' if node in failing else "", _e(node), _e(node), "".join(cells)))
        parts.append('<table class="g">%s<tbody>%s</tbody></table>' % (head, "\n".join(rows)))
    parts.append("</div>")
    return parts


def validation_html(report):
    """A validation_judge report -> one self-contained HTML5 page (inline CSS and SVG; no script, no link)."""
    if not _is_map(report) or not _is_list(report.get("checks")):
        raise ValidationError("validation_html expects the report of validation_judge (a dict with checks), got %s"
                              % type(report).__name__)
    checks = [c for c in report.get("checks") or [] if _is_map(c)]
    summary = report.get("summary") if _is_map(report.get("summary")) else {}
    counts = dict((k, int(_number(summary.get(k)) or 0)) for k in ("pass", "fail", "skip"))
    if not summary:
        for c in checks:
            if c.get("status") in counts:
                counts[c["status"]] += 1
    ok = report.get("ok")
    if ok is None:
        ok = counts["fail"] == 0
    cluster = report.get("cluster") or "cluster"
    when = report.get("generated_at") or ""
    title = "ClusterForge validation: %s%s" % (cluster, " at %s" % when if when else "")
    model = _Model(checks)
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             "<title>%s</title>" % _e(title), "<style>%s</style>" % _CSS, "</head>", "<body>",
             "<h1>%s</h1>" % _e(title)]
    verdict = "PASS" if ok else "FAIL"
    note = ""
    if ok and counts["pass"] == 0:
        note = " (nothing was measured)"
    parts.append('<div class="head"><div class="banner %s">%s%s</div>' % ("pass" if ok else "fail", verdict, _e(note)))
    parts.append('<p class="summary"><span class="s-pass">&nbsp;%d passed&nbsp;</span>'
                 '<span class="s-fail">&nbsp;%d failed&nbsp;</span>'
                 '<span class="s-skip">&nbsp;%d skipped (not measured)&nbsp;</span>%s</p></div>'
                 % (counts["pass"], counts["fail"], counts["skip"],
                    " %d node(s), %d check(s)" % (len(model.grid_nodes), len(checks)) if model.grid_nodes else ""))
    parts.append('<nav class="toc"><a href="#failing">Failing nodes</a>%s<a href="#bandwidth">Bandwidth</a>'
                 '<a href="#checks">All checks</a><a href="#checkpoint">Checkpoint</a></nav>'
                 % ('<a href="#grid">Nodes by checks</a>' if model.grid_ids and model.grid_nodes else ""))

    failing_messages = set(to_text(c.get("message")) for c in checks if c.get("status") == "fail")
    others = [to_text(f) for f in report.get("failures") or [] if to_text(f) not in failing_messages]
    parts.append('<div class="top"><section><h2>Checks by id</h2>%s</section>' % _counts_table(model))
    failing_parts, cut = _failing_section(model, others, model.grid_nodes)
    parts.extend(failing_parts)
    parts.append("</div>")
    if cut:
        parts.extend(_failing_all(model, others))

    if model.grid_ids and model.grid_nodes:
        parts.append('<h2 id="grid">Nodes by checks</h2>')
        parts.extend(_grid(model))

    bandwidth = [b for b in report.get("bandwidth") or [] if _is_map(b) and _number(b.get("measured")) is not None]
    parts.append('<h2 id="bandwidth">Bandwidth</h2>')
    if bandwidth:
        parts.extend(_bandwidth_section(bandwidth, checks))
    else:
        parts.append('<p class="muted">No bandwidth was measured.</p>')

    parts.append('<h2 id="checks">Checks</h2>')
    ordered = sorted(checks, key=lambda c: 0 if c.get("status") == "fail" else 1)
    parts.append('<details class="checks"><summary>All %d checks (failed first)</summary>' % len(checks))
    parts.append("<table><thead><tr><th>Status</th><th>Check</th><th>Subject</th><th>Measured</th><th>Threshold</th>"
                 "<th>Expected</th><th>Unit</th><th>Message</th></tr></thead><tbody>")
    for c in ordered:
        status = to_text(c.get("status") or "")
        parts.append('<tr class="%s"><td class="status">%s</td><td>%s</td><td>%s</td><td class="num">%s</td>'
                     '<td class="num">%s</td><td class="num">%s</td><td>%s</td><td>%s</td></tr>' % (
                         _e(status), _e(status), _e(c.get("id")), _e(c.get("subject")), _cell_number(c.get("measured")),
                         _cell_number(c.get("threshold")), _cell_number(c.get("expected")), _e(c.get("unit")),
                         _e(c.get("message"))))
    parts.append("</tbody></table></details>")

    estimates = [x for x in report.get("checkpoint") or [] if _is_map(x)]
    parts.append('<h2 id="checkpoint">Checkpoint estimate</h2>')
    if estimates:
        parts.append("<table><thead><tr><th>Model</th><th>Parameters (billion)</th><th>Checkpoint (TB)</th>"
                     "<th>Write time (s)</th><th>Stall (s per hour)</th><th>Stall (%)</th></tr></thead><tbody>")
        for x in estimates:
            parts.append('<tr><td>%s</td><td class="num">%s</td><td class="num">%s</td><td class="num">%s</td>'
                         '<td class="num">%s</td><td class="num">%s</td></tr>' % (
                             _e(x.get("name")), _cell_number(x.get("parameters_billion"), 1),
                             _e(_fmt((_number(x.get("checkpoint_bytes")) or 0) / 1e12, 2)),
                             _cell_number(x.get("write_seconds"), 1), _cell_number(x.get("stall_seconds_per_hour"), 1),
                             _cell_number(x.get("stall_percent"), 2)))
        parts.append("</tbody></table>")
    else:
        parts.append('<p class="muted">No checkpoint estimate (no models, or no aggregate write bandwidth).</p>')

    limits = report.get("thresholds") if _is_map(report.get("thresholds")) else {}
    if limits:
        parts.append("<h2>Thresholds</h2><table><tbody>")
        for key in sorted(limits):
            parts.append('<tr><th>%s</th><td class="num">%s</td></tr>' % (_e(key), _cell_number(limits[key], 3)))
        parts.append("</tbody></table>")
    parts.append("</body>")
    parts.append("</html>")
    return "\n".join(parts) + "\n"
