# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST-ONLY parser for ``slurmd -G`` (the GRES autodetection dump).

No plugin reads ``slurmd -G``, so the parser lives here, not in plugins/module_utils/slurm.py. It proves on the
real samples (tests/conformance/test_slurm_perf_samples.py) that the format is read as slurmd prints it. The
``key=value`` reader comes from the plugin module.
"""

import re

from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm import _parse_kv_line


_SLURMD_LINE_RE = re.compile(r"^slurmd(?:-(?P<node>\S+?))?:\s+(?:\S+:\s+)?Gres\s+(?P<rest>.*)$")


def parse_slurmd_gres(text):
    """Parse ``slurmd -G`` (GRES autodetection dump) into a list of dicts.

    ``slurmd-gpu01: Gres Name=gpu Type=nvidia_h100_80gb_hbm3 Count=1 Index=0 ID=7696487 File=/dev/nvidia0
    Links=(null) Flags=HAS_FILE,...`` -> {"node": "gpu01", "Name": "gpu", "Type": ..., "Count": "1", ...}.
    Records hard-wrapped onto the next line (a line not starting with ``slurmd``) are joined back; values stay
    strings, as printed.
    """
    records = []
    for raw in (text or "").splitlines():
        line = raw.rstrip("\r\n")
        if not line.strip():
            continue
        if line.startswith("slurmd"):
            records.append(line.strip())
        elif records:
            records[-1] += line.strip()
    result = []
    for record in records:
        match = _SLURMD_LINE_RE.match(record)
        if not match:
            continue
        entry = {"node": match.group("node")}
        entry.update(_parse_kv_line(match.group("rest"), rest_of_line_first=False))
        result.append(entry)
    return result
