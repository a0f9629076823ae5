# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The validation report of a synthetic 512-node cluster (3% of the nodes failing) rendered in headless Chromium
at 1280x900: the failing nodes show in the first screen, in red, and the page (details closed) stays under six
screens. Needs /usr/bin/chromium (tests/report/install-chromium.sh installs Debian's); without it the tests fail,
unless CLUSTERFORGE_SKIP_BROWSER=1.

The page itself has no script: to measure it, the test renders a copy to which it appends one that writes the
page height and the positions of the failing-nodes section into the DOM, and reads them from ``--dump-dom``.
"""

import html
import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import zlib

import pytest

from ansible_collections.clusterforge.gpu.plugins.plugin_utils.validation_report import validation_html

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = importlib.util.spec_from_file_location(
    "cf_report_synth", os.path.join(ROOT, "tests", "unit", "plugins", "module_utils", "report_synth.py"))
report_synth = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(report_synth)

WIDTH, SCREEN = 1280, 900
MAX_SCREENS = 6
FAIL_RED = (0xc6, 0x28, 0x28)
METRICS_SCRIPT = """<script>
(function () {
  function rect(el) {
    if (!el) { return null; }
    var r = el.getBoundingClientRect();
    return {top: r.top + window.scrollY, bottom: r.bottom + window.scrollY, left: r.left, right: r.right};
  }
  var rows = document.querySelectorAll("section.failing table.nodes th.node");
  var out = {
    height: document.documentElement.scrollHeight,
    failing: rect(document.querySelector("section.failing")),
    failing_heading: rect(document.getElementById("failing")),
    banner: rect(document.querySelector(".banner")),
    grid: rect(document.getElementById("grid")),
    nodes: Array.prototype.map.call(rows, function (th) { return [th.textContent, rect(th)]; })
  };
  var pre = document.createElement("pre");
  pre.id = "cf-metrics";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def chromium():
    path = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
    if path:
        return path
    if os.environ.get("CLUSTERFORGE_SKIP_BROWSER") == "1":
        pytest.skip("chromium is not installed (CLUSTERFORGE_SKIP_BROWSER=1)")
    pytest.fail("chromium is not installed: run tests/report/install-chromium.sh (or set CLUSTERFORGE_SKIP_BROWSER=1 "
                "to skip the browser tests)")
    return None


def run_chromium(tmp, *args):
    """Headless Chromium with a throwaway profile; stdout."""
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp / "xdg-config"), XDG_CACHE_HOME=str(tmp / "xdg-cache"))
    argv = [chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--hide-scrollbars", "--force-device-scale-factor=1", "--window-size=%d,%d" % (WIDTH, SCREEN),
            "--user-data-dir=%s" % (tmp / "profile")] + list(args)
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, (argv, proc.returncode, proc.stderr[-3000:])
    return proc.stdout


def png_pixels(path):
    """(width, height, rows): an 8-bit RGB or RGBA, non-interlaced PNG decoded with zlib; rows of (r, g, b)."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    width, height, depth, colour, _compression, _filter, interlace = header
    assert depth == 8 and colour in (2, 6) and interlace == 0, header
    channels = 4 if colour == 6 else 3
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    rows, previous = [], bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xff
        elif kind == 2:
            line = bytearray((a + b) & 0xff for a, b in zip(line, previous))
        elif kind == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + previous[i]) >> 1)) & 0xff
        elif kind == 4:
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b = previous[i]
                c = previous[i - channels] if i >= channels else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xff
        else:
            assert kind == 0, "unknown PNG filter %d" % kind
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, channels)])
        previous = line
    return width, height, rows


def is_red(pixel):
    return all(abs(a - b) <= 12 for a, b in zip(pixel, FAIL_RED))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    report, truth = report_synth.synth_report(512)
    page = validation_html(report)
    assert "<script" not in page.lower()
    (tmp / "report.html").write_text(page, encoding="utf-8")
    measured = page.replace("</body>", METRICS_SCRIPT + "\n</body>")
    (tmp / "measured.html").write_text(measured, encoding="utf-8")
    return {"tmp": tmp, "report": report, "truth": truth}


@pytest.fixture(scope="module")
def metrics(rendered):
    tmp = rendered["tmp"]
    dom = run_chromium(tmp, "--dump-dom", (tmp / "measured.html").as_uri())
    found = re.search(r'<pre id="cf-metrics">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1)))


def test_page_height_is_bounded_and_failing_nodes_come_first(rendered, metrics):
    print("page height %d px, failing section at %.0f px, failing nodes from %.0f to %.0f px" % (
        metrics["height"], metrics["failing"]["top"], metrics["nodes"][0][1]["top"], metrics["nodes"][-1][1]["top"]))
    assert metrics["height"] <= MAX_SCREENS * SCREEN, metrics["height"]
    assert metrics["failing_heading"]["top"] < SCREEN and metrics["failing"]["top"] < SCREEN
    failing = rendered["truth"]["failing"]
    assert sorted(name for name, _rect in metrics["nodes"]) == sorted(failing)
    for name, rect in metrics["nodes"]:
        assert rect["top"] < SCREEN, (name, rect)                    # every failing node starts in the first screen
    assert metrics["banner"]["bottom"] < metrics["failing"]["top"] + 40
    assert metrics["grid"]["top"] > metrics["failing"]["top"]


def test_failing_nodes_are_red_in_the_first_screen(rendered, metrics):
    tmp = rendered["tmp"]
    shot = tmp / "screen.png"
    run_chromium(tmp, "--screenshot=%s" % shot, (tmp / "report.html").as_uri())
    width, height, rows = png_pixels(str(shot))
    assert (width, height) == (WIDTH, SCREEN)
    section = metrics["failing"]
    top, bottom = int(section["top"]), min(SCREEN, int(section["bottom"]))
    left, right = int(section["left"]), min(WIDTH, int(section["right"]))
    red_rows = [y for y in range(top, bottom) if sum(1 for p in rows[y][left:right] if is_red(p)) >= 8]
    # a red square (10 px) and the node name on each failing node's first row: at least 10 rows per node
    assert len(red_rows) >= 10 * len(rendered["truth"]["failing"]), len(red_rows)
    # the first failing node's row is red from its top (its name and its square)
    first = metrics["nodes"][0][1]
    assert any(first["top"] <= y <= first["bottom"] for y in red_rows), first
