# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST-ONLY parser for ``iblinkinfo``.

No plugin reads iblinkinfo, so the parser lives here, not in plugins/module_utils/infiniband.py. It proves on the
real samples (tests/conformance/test_pci_ib_samples.py) that the format is read as the tools print it.
"""

import re

_LINK_RE = re.compile(
    r"^\s*(?:(?P<guid>0x[0-9a-f]+)\s+)?(?P<lid>\d+)\s+(?P<port>\d+)\[\s*\]\s+==\(\s*"
    r"(?:(?P<width>\d+X)\s+(?P<speed>[\d.]+)\s+Gbps\s+)?(?P<state>\w+)/\s*(?P<phys>\w+)\s*\)==>\s*"
    r"(?:(?P<plid>\d+)\s+(?P<pport>\d+))?\[\s*\]\s+\"(?P<peer>[^\"]*)\"")


def parse_iblinkinfo(text):
    """``iblinkinfo`` -> list of links: {``node_type`` CA|Switch, ``node``, ``lid``, ``port``, ``width``,
    ``lane_gbps``, ``rate_gbps`` (width x lane speed), ``state``, ``physical_state``, ``peer_lid``, ``peer_port``,
    ``peer``}. Ports that are down have width/speed None."""
    links = []
    node_type = node = None
    for raw in (text or "").splitlines():
        line = raw.rstrip()
        m = re.match(r"^(CA|Switch):\s+(.*?):?$", line)
        if m:
            node_type = m.group(1)
            node = m.group(2)
            if node_type == "Switch":
                node = re.sub(r"^0x[0-9a-f]+\s+", "", node)
            continue
        m = _LINK_RE.match(line)
        if not m or node_type is None:
            continue
        width = m.group("width")
        lane = float(m.group("speed")) if m.group("speed") else None
        rate = None
        if width and lane is not None:
            rate = round(int(width[:-1]) * lane, 2)
            rate = int(rate) if float(rate).is_integer() else rate
        links.append({
            "node_type": node_type, "node": node, "lid": int(m.group("lid")), "port": int(m.group("port")),
            "width": width, "lane_gbps": lane, "rate_gbps": rate, "state": m.group("state"),
            "physical_state": m.group("phys"),
            "peer_lid": int(m.group("plid")) if m.group("plid") else None,
            "peer_port": int(m.group("pport")) if m.group("pport") else None,
            "peer": m.group("peer") or None,
        })
    return links
