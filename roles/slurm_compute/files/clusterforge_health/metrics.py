# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""What a run writes: files replaced atomically, the run's record (<state_dir>/healthcheck-<source>.json) and the
metrics file for node-exporter's textfile collector (<textfile_dir>/clusterforge_healthcheck.prom)."""

import json
import os
import re
import sys
import tempfile

from clusterforge_health.core import DEFAULTS


PROM_FILE = "clusterforge_healthcheck.prom"


def write_atomically(path, text, mode=0o644):
    """Replace `path` with `text` at once. The temporary file is new and unpredictable (mkstemp: O_CREAT|O_EXCL,
    a random name, 0600 until written), in the target's own directory, so that a name planted there beforehand
    (a file or a link a user made) is never opened or written through, and readers see the old or the new file."""
    tmp = None
    try:
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix="." + os.path.basename(path) + ".")
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return str(exc)
    return None


def write_record(cfg, node, record):
    """The run's summary in <state_dir>/healthcheck-<source>.json, written atomically; a failure to write it is
    reported and never changes the run's outcome."""
    path = os.path.join(str(cfg.get("state_dir") or DEFAULTS["state_dir"]), "healthcheck-%s.json" % record["source"])
    problem = write_atomically(path, json.dumps(record, sort_keys=True) + "\n")
    if problem:
        print("cf-health: %s: cannot write %s: %s" % (node, path, problem), file=sys.stderr)


# --- metrics for node-exporter's textfile collector -------------------------------------------------------------

SOURCE_SERIES_RE = re.compile(r'^clusterforge_healthcheck_(status|last_run_timestamp_seconds|duration_seconds)'
                              r'\{source="([a-z][a-z0-9_-]{0,31})"\} (\S+)$')
SOURCE_KEYS = {"status": "status", "last_run_timestamp_seconds": "finished_at", "duration_seconds": "duration"}


def read_back_sources(path):
    """The per-caller series of an existing metrics file: {source: {status, finished_at, duration}}."""
    sources = {}
    try:
        with open(path) as handle:
            for line in handle:
                m = SOURCE_SERIES_RE.match(line.strip())
                if m:
                    try:
                        sources.setdefault(m.group(2), {})[SOURCE_KEYS[m.group(1)]] = float(m.group(3))
                    except ValueError:
                        continue
    except OSError:
        pass
    return sources


def _number(value):
    if isinstance(value, float) and not value.is_integer():
        return "%.3f" % value
    return "%d" % int(value)


def render_metrics(sources, checks, failed, counts, breaker):
    families = [
        ("clusterforge_healthcheck_status", "Result of the node health check's last run by this caller: 0 healthy, "
         "1 faults found, 2 the check could not run or act.", "source",
         [(s, sources[s].get("status", 2)) for s in sorted(sources)]),
        ("clusterforge_healthcheck_last_run_timestamp_seconds", "When the node health check's last run by this "
         "caller finished, in seconds since the epoch.", "source",
         [(s, sources[s].get("finished_at", 0)) for s in sorted(sources)]),
        ("clusterforge_healthcheck_duration_seconds", "How long the node health check's last run by this caller "
         "took, in seconds.", "source", [(s, sources[s].get("duration", 0)) for s in sorted(sources)]),
        ("clusterforge_healthcheck_fault", "1 when the check failed in the node health check's last run (drained, "
         "pending its strikes or held back by the breaker), 0 otherwise.", "check",
         [(c, 1 if c in failed else 0) for c in checks]),
        ("clusterforge_healthcheck_strikes", "Runs in a row the check has failed (it drains the node at its "
         "configured strikes).", "check", [(c, counts.get(c, 0)) for c in checks]),
        ("clusterforge_healthcheck_breaker_open", "1 when the circuit breaker (max_drained_percent) held back this "
         "node's drain for the check in the last run.", "check", [(c, 1 if c in breaker else 0) for c in checks]),
    ]
    lines = []
    for name, text, label, rows in families:
        lines.append("# HELP %s %s" % (name, text))
        lines.append("# TYPE %s gauge" % name)
        for key, value in rows:
            lines.append(name + "{" + '%s="%s"} %s' % (label, key, _number(value)))
    return "\n".join(lines) + "\n"


def write_metrics(cfg, node, state, source, record, report, checks):
    directory = cfg.get("textfile_dir")
    if not directory:
        return
    path = os.path.join(str(directory), PROM_FILE)
    sources = read_back_sources(path)
    for name, values in (state.get("sources") or {}).items():
        if isinstance(values, dict):
            sources[name] = values
    sources[source] = {"status": record["status"], "finished_at": record["finished_at"],
                       "duration": record["elapsed_seconds"]}
    state["sources"] = sources
    problem = write_atomically(path, render_metrics(sources, checks, set(report.get("failed") or []),
                                                    report.get("counts") or {}, set(report.get("breaker") or [])))
    if problem:
        print("cf-health: %s: cannot write %s: %s" % (node, path, problem), file=sys.stderr)
