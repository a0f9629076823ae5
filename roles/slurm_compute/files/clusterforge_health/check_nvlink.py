# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""The nvlink check: active NVLinks (`nvidia-smi nvlink -s`) and the growth of their error counters since the
last run (`nvidia-smi nvlink -e`)."""

# pylint: disable=import-error
from clusterforge_nvidia_smi import parse_nvlink_errors, parse_nvlink_status
# pylint: enable=import-error

from clusterforge_health.core import CHECKS_PHASE, find, run, whole


def check_nvlink(r):
    if not r.on("nvlink") or not r.gpus_answered:
        return
    cfg = r.cfg
    smi = find("nvidia-smi", cfg["nvidia_smi_path"])
    res = run([smi, "nvlink", "-s"], r.budget, CHECKS_PHASE)
    if not r.answered("nvlink", res, "nvidia-smi nvlink", "nvlink: nvidia-smi nvlink -s"):
        return
    gpus = parse_nvlink_status(res.out)
    expected = cfg.get("nvlink_active_links")
    expected = whole(expected, None, 0) if expected is not None else None
    if expected is None:
        expected = max([sum(links.values()) for _i, _u, links in gpus] + [0])
    for index, _uuid, links in gpus:
        up = sum(links.values())
        if up < expected:
            down = [str(n) for n in sorted(links) if not links[n]]
            r.fail("nvlink", "nvlink: GPU %s %d of %d links active%s" % (
                index, up, expected, (" (inactive: %s)" % ", ".join(down[:6] + (["..."] if len(down) > 6 else [])))
                if down else ""))
    res = run([smi, "nvlink", "-e"], r.budget, CHECKS_PHASE)
    if not r.answered("nvlink", res, "nvidia-smi nvlink -e", "nvlink: nvidia-smi nvlink -e"):
        return
    counters = parse_nvlink_errors(res.out)
    before = r.state["nvlink"]
    allowed = whole(cfg.get("nvlink_max_error_increase"), 0, 0)
    for gpu in sorted(counters):
        for link in sorted(counters[gpu], key=int):
            now = counters[gpu][link]
            then = (before.get(gpu) or {}).get(link) or {}
            grown = [(name, now[name] - then[name]) for name in sorted(now)
                     if isinstance(then.get(name), int) and now[name] > then[name]]
            if sum(n for _name, n in grown) > allowed:
                r.fail("nvlink", "nvlink: %s link %s %s since the last run" % (
                    gpu, link, ", ".join("%s +%d" % (name, n) for name, n in grown)))
    r.state["nvlink"] = counters  # a counter that went down (driver reload, GPU reset) is the new baseline
    r.passed("nvlink")
