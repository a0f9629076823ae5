# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A validation_judge report as one self-contained HTML page: inline CSS and SVG bar charts, no script, no link, no
external CSS, JS or fonts (clusters are often air-gapped).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import html

from ansible.module_utils.common.text.converters import to_text

from ansible_collections.clusterforge.gpu.plugins.module_utils.validation_common import (
    ValidationError,
    _fmt,
    _is_list,
    _is_map,
    _number,
)

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;margin:1.5em;color:#222;}
h1{font-size:1.5em;margin-bottom:.2em;} h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ccc;}
h3{font-size:1em;margin:1em 0 .3em;}
.banner{font-size:1.6em;font-weight:bold;padding:.4em .8em;border-radius:6px;display:inline-block;color:#fff;}
.banner.pass{background:#2e7d32;} .banner.fail{background:#c62828;}
.summary span{display:inline-block;margin-right:1.2em;font-weight:bold;}
table{border-collapse:collapse;font-size:.9em;margin-top:.5em;}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top;}
th{background:#f0f0f0;} td.num{text-align:right;font-variant-numeric:tabular-nums;}
.status{font-weight:bold;text-transform:uppercase;}
tr.fail td.status,.s-fail{color:#fff;background:#c62828;} tr.pass td.status,.s-pass{color:#fff;background:#2e7d32;}
tr.skip td.status,.s-skip{color:#333;background:#bdbdbd;}
ul.failures li{color:#c62828;}
svg text{font-size:12px;font-family:inherit;}
.muted{color:#666;font-size:.85em;}
"""

_BAR_COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "skip": "#9e9e9e"}


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
    parts = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             "<title>%s</title>" % _e(title), "<style>%s</style>" % _CSS, "</head>", "<body>",
             "<h1>%s</h1>" % _e(title)]
    verdict = "PASS" if ok else "FAIL"
    note = ""
    if ok and counts["pass"] == 0:
        note = " (nothing was measured)"
    parts.append('<div class="banner %s">%s%s</div>' % ("pass" if ok else "fail", verdict, _e(note)))
    parts.append('<p class="summary"><span class="s-pass">&nbsp;%d passed&nbsp;</span>'
                 '<span class="s-fail">&nbsp;%d failed&nbsp;</span>'
                 '<span class="s-skip">&nbsp;%d skipped (not measured)&nbsp;</span></p>'
                 % (counts["pass"], counts["fail"], counts["skip"]))
    failures = [to_text(f) for f in report.get("failures") or []]
    if failures:
        parts.append("<h2>Failures</h2>")
        parts.append('<ul class="failures">%s</ul>' % "".join("<li>%s</li>" % _e(f) for f in failures))

    bandwidth = [b for b in report.get("bandwidth") or [] if _is_map(b) and _number(b.get("measured")) is not None]
    parts.append("<h2>Bandwidth</h2>")
    if bandwidth:
        parts.append('<p class="muted">Bar: measured; black tick: threshold. Green passed, red failed.</p>')
        groups = []
        for entry in bandwidth:
            key = (to_text(entry.get("group") or ""), to_text(entry.get("unit") or ""))
            if key not in [g[0] for g in groups]:
                groups.append((key, []))
            [g for g in groups if g[0] == key][0][1].append(entry)
        for (group, unit), entries in groups:
            parts.append("<h3>%s</h3>" % _e(" ".join(x for x in (group, "(%s)" % unit if unit else "") if x)))
            parts.append(_svg_chart(entries))
    else:
        parts.append('<p class="muted">No bandwidth was measured.</p>')

    parts.append("<h2>Checks</h2>")
    ordered = sorted(checks, key=lambda c: 0 if c.get("status") == "fail" else 1)
    parts.append("<table><thead><tr><th>Status</th><th>Check</th><th>Subject</th><th>Measured</th><th>Threshold</th>"
                 "<th>Expected</th><th>Unit</th><th>Message</th></tr></thead><tbody>")
    for c in ordered:
        status = to_text(c.get("status") or "")
        parts.append('<tr class="%s"><td class="status">%s</td><td>%s</td><td>%s</td><td class="num">%s</td>'
                     '<td class="num">%s</td><td class="num">%s</td><td>%s</td><td>%s</td></tr>' % (
                         _e(status), _e(status), _e(c.get("id")), _e(c.get("subject")), _cell_number(c.get("measured")),
                         _cell_number(c.get("threshold")), _cell_number(c.get("expected")), _e(c.get("unit")),
                         _e(c.get("message"))))
    parts.append("</tbody></table>")

    estimates = [x for x in report.get("checkpoint") or [] if _is_map(x)]
    parts.append("<h2>Checkpoint estimate</h2>")
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
