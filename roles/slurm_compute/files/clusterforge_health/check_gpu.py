# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""The checks of `nvidia-smi --query-gpu`: gpu_count, ecc, retired_pages, row_remap and temperature from the
first query; pcie, throttle and mig from a second one, once the first answered."""

# pylint: disable=import-error
from clusterforge_nvidia_smi import parse_query_csv
# pylint: enable=import-error

from clusterforge_health.core import CHECKS_PHASE, find, is_yes, run, to_int, tristate


GPU_FIELDS = ["index", "ecc.errors.uncorrected.volatile.total", "retired_pages.pending",
              "remapped_rows.pending", "temperature.gpu"]
# The second nvidia-smi query (pcie, mig, throttle): apart from the first, so that a field an old driver does not
# know cannot cost the GPU count check its answer. The clock event reasons were clocks_throttle_reasons.* before R535.
EXTRA_FIELDS = ["index", "pcie.link.width.current", "pcie.link.width.max", "mig.mode.current"]
THROTTLE_REASONS = (("hw_slowdown", "HW slowdown"), ("hw_thermal_slowdown", "HW thermal slowdown"),
                    ("sw_thermal_slowdown", "SW thermal slowdown"))
EVENT_PREFIXES = ("clocks_event_reasons", "clocks_throttle_reasons")


def check_gpus(r):
    """nvidia-smi --query-gpu: gpu_count, ecc, retired_pages, row_remap, temperature."""
    mine = ("gpu_count", "ecc", "retired_pages", "row_remap", "temperature")
    if not any(r.on(c) for c in mine):
        return
    cfg = r.cfg
    expected = int(cfg["gpu_count"] or 0)
    owner = r.owner(*mine)
    smi = find("nvidia-smi", cfg["nvidia_smi_path"])
    if smi is None:
        r.fail(owner, "nvidia-smi not found (expected %d GPUs)" % expected)
        return
    res = run([smi, "--query-gpu=" + ",".join(GPU_FIELDS), "--format=csv,noheader,nounits"], r.budget, CHECKS_PHASE)
    if not r.answered(owner, res, "nvidia-smi", "nvidia-smi"):
        return
    r.gpus_answered = True
    # A line that is not a whole row (a warning nvidia-smi printed between the rows, a truncated line) is no GPU.
    rows = parse_query_csv(res.out, GPU_FIELDS)
    if r.on("gpu_count") and len(rows) < expected:
        r.fail("gpu_count", "GPU count %d < %d" % (len(rows), expected))
    limit_t = int(cfg["max_temperature_c"])
    for row in rows:
        index, ecc, retired, remap, temp = [row[f] for f in GPU_FIELDS]
        ecc_n = to_int(ecc)
        if r.on("ecc") and ecc_n is not None and ecc_n > int(cfg["max_ecc_uncorrectable"]):
            r.fail("ecc", "GPU %s uncorrectable ECC errors %d" % (index, ecc_n))
        if r.on("retired_pages") and is_yes(retired):
            r.fail("retired_pages", "GPU %s retired pages pending" % index)
        if r.on("row_remap") and is_yes(remap):
            r.fail("row_remap", "GPU %s row remap pending" % index)
        temp_n = to_int(temp)
        if r.on("temperature") and temp_n is not None and temp_n > limit_t:
            r.fail("temperature", "GPU %s temperature %d C > %d C" % (index, temp_n, limit_t))
    r.passed(*mine)


def _extra_query(r, smi, prefix):
    fields = EXTRA_FIELDS + ["%s.%s" % (prefix, name) for name, _label in THROTTLE_REASONS]
    return run([smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"], r.budget, CHECKS_PHASE)


def check_gpu_extras(r):
    """pcie, throttle and mig from one more nvidia-smi query, once the first one answered."""
    mine = ("pcie", "throttle", "mig")
    if not any(r.on(c) for c in mine) or not r.gpus_answered:
        return  # no nvidia-smi answer this run: not evaluated, their strike counts stay as they were
    cfg = r.cfg
    owner = r.owner("gpu_count", *mine)
    smi = find("nvidia-smi", cfg["nvidia_smi_path"])
    res = _extra_query(r, smi, EVENT_PREFIXES[0])
    if res.finished and res.rc != 0 and "is not a valid field" in res.out + res.err:
        res = _extra_query(r, smi, EVENT_PREFIXES[1])  # a driver before R535: clocks_throttle_reasons.*
    if not r.answered(owner, res, "nvidia-smi", "nvidia-smi --query-gpu (pcie, clock events, MIG)"):
        return
    mig_mode = tristate(cfg.get("mig_mode"))
    want_mig = None if mig_mode is None else ("Enabled" if mig_mode else "Disabled")
    # the prefix does not matter to the parser: the cells are read by position
    fields = EXTRA_FIELDS + ["throttle.%s" % name for name, _label in THROTTLE_REASONS]
    for row in parse_query_csv(res.out, fields):
        index, width, width_max, mig = [row[f] for f in EXTRA_FIELDS]
        mig = "[N/A]" if mig is None else mig  # nvidia-smi's own spelling of a GPU without MIG
        current, most = to_int(width), to_int(width_max)
        if r.on("pcie") and current is not None and most is not None and current < most:
            r.fail("pcie", "pcie: GPU %s link width x%d < x%d" % (index, current, most))
        active = [label for name, label in THROTTLE_REASONS if str(row["throttle." + name]).lower() == "active"]
        if r.on("throttle") and active:
            r.fail("throttle", "throttle: GPU %s %s" % (index, ", ".join(active)))
        if r.on("mig") and want_mig is not None:
            # a GPU without MIG ([N/A], [Not Supported]) is as good as one with MIG disabled, never as one with it on
            enabled = mig.lower() == "enabled"
            if enabled != (want_mig == "Enabled"):
                r.fail("mig", "mig: GPU %s MIG mode %s, configured %s" % (index, mig, want_mig))
    r.passed(*mine)
