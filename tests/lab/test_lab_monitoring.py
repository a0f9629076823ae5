"""The lab's monitoring end to end (clusterforge.gpu.monitoring, converged by site.yml): Prometheus on head01 scrapes
every host's node-exporter and both GPU nodes' dcgm-exporter (the lab's emulator over the nvidia-smi emulator);
an uncorrectable ECC error injected on gpu01 fires GPUUncorrectableECCError in Prometheus's API and reaches
Alertmanager, and the time from the injection to the firing alert is measured and printed; a drain shows in the
Slurm node-state metrics. Prometheus is asked from head01 (python3 urllib), as an operator on the controller would,
with the monitoring web user (basic auth, its password from the root-only file on head01); every daemon refuses a
query without it. The lab's intervals are seconds (inventories/lab/group_vars/all/lab_monitoring.yml)."""

import json
import os
import time
import urllib.parse

import pytest
import yaml

from labkit import BIN, ROOT, http_get, monitoring_credentials, podman_exec, run, settled_node_states, slurm  # pylint: disable=import-error

# Prometheus listens on head01's management address, Alertmanager on its loopback only, the exporters on each
# node's management address (inventories/lab/hosts.yml).
PROMETHEUS = "http://10.77.0.10:9090"
ALERTMANAGER = "http://127.0.0.1:9093"
EXPORTERS = {"node-exporter gpu01": "http://10.77.0.21:9100/metrics", "node-exporter stor01": "http://10.77.0.31:9100/metrics",
             "dcgm-exporter gpu01": "http://10.77.0.21:9400/metrics", "dcgm-exporter gpu02": "http://10.77.0.22:9400/metrics"}
ALERTS = {"GPUUncorrectableECCError", "GPUXidError", "GPUTemperatureHigh", "GPUNVLinkErrors",
          "GPUErrorCountersNotExported", "HealthCheckCircuitBreakerOpen", "HealthCheckNotRunning",
          "HealthCheckMetricsMissing", "SlurmNodesDrainedShareHigh", "SlurmMetricsStale", "TargetDown"}
TARGETS = {("prometheus", "head01"), ("alertmanager", "head01"), ("node", "head01"), ("node", "gpu01"),
           ("node", "gpu02"), ("node", "stor01"), ("dcgm-exporter", "gpu01"), ("dcgm-exporter", "gpu02")}
# GPU slot 5 of gpu01 (the nvidia-smi emulator's --emu-ecc takes the slot; all eight GPUs present: gpu="5").
ECC_GPU = "5"


# "refused" when nothing listens there, else the HTTP status.
CONNECT = """import sys, urllib.error, urllib.request
try:
    sys.stdout.write(str(urllib.request.urlopen(sys.argv[1], timeout=5).status))
except urllib.error.HTTPError as exc:
    sys.stdout.write(str(exc.code))
except urllib.error.URLError as exc:
    sys.stdout.write("refused" if isinstance(exc.reason, ConnectionRefusedError) else repr(exc.reason))
"""
_AUTH = []


def auth():
    if not _AUTH:
        _AUTH.append(monitoring_credentials())
    return _AUTH[0]


def get(url):
    status, body = http_get("head01", url, auth())
    assert status == 200, (url, status, body)
    return json.loads(body)


def test_every_daemon_refuses_a_query_without_the_web_user_and_answers_with_it(converged):  # pylint: disable=unused-argument
    asked = dict(EXPORTERS, prometheus=PROMETHEUS + "/api/v1/query?query=up", alertmanager=ALERTMANAGER + "/api/v2/status")
    for name, url in sorted(asked.items()):
        status, _body = http_get("head01", url)
        assert status == 401, (name, url, status)
        status, _body = http_get("head01", url, (auth()[0], "wrong-" + auth()[1]))
        assert status == 401, (name, url, "wrong password", status)
        status, body = http_get("head01", url, auth())
        assert status == 200, (name, url, status, body[:200])
    # Alertmanager's configuration (its receiver, a webhook URL) is not served to anyone without the password
    assert "config" not in http_get("head01", ALERTMANAGER + "/api/v2/status")[1]
    # the credentials file is root-only
    rc, out = podman_exec("head01", "stat", "-c", "%U %a", "/etc/clusterforge/secrets/monitoring_web_credentials.json")
    assert rc == 0 and out.split() == ["root", "600"], out
    print("every exporter, Prometheus and Alertmanager refuse a query without the monitoring web user (401)")


def test_nothing_listens_on_every_interface(converged):  # pylint: disable=unused-argument
    # Prometheus is not on head01's loopback (it is bound to the management address), Alertmanager not on the
    # management network (bound to the loopback).
    for host, url in (("head01", "http://127.0.0.1:9090/-/ready"), ("gpu01", "http://10.77.0.10:9093/-/ready"),
                      ("head01", "http://127.0.0.1:9100/metrics"), ("gpu01", "http://127.0.0.1:9400/metrics")):
        rc, out = podman_exec(host, "python3", "-c", CONNECT, url)
        assert rc == 0 and out == "refused", (host, url, out)
    # and where they listen, they answer (the probe tells a refused connection from an HTTP answer)
    rc, out = podman_exec("head01", "python3", "-c", CONNECT, PROMETHEUS + "/-/ready")
    assert rc == 0 and out == "401", out


def query(expr):
    return get("%s/api/v1/query?query=%s" % (PROMETHEUS, urllib.parse.quote(expr)))["data"]["result"]


def firing(alertname, **labels):
    """The firing alerts of that name whose labels include `labels`, from Prometheus's /api/v1/alerts."""
    alerts = get(PROMETHEUS + "/api/v1/alerts")["data"]["alerts"]
    return [a for a in alerts if a["labels"].get("alertname") == alertname and a["state"] == "firing"
            and all(a["labels"].get(k) == v for k, v in labels.items())]


def wait(what, probe, seconds, step=1.0):
    deadline = time.monotonic() + seconds
    while True:
        value = probe()
        if value:
            return value
        assert time.monotonic() < deadline, "%s: not within %d s" % (what, seconds)
        time.sleep(step)


def test_prometheus_loaded_the_rules_and_reports_every_target_up(converged):  # pylint: disable=unused-argument
    groups = get(PROMETHEUS + "/api/v1/rules?type=alert")["data"]["groups"]
    loaded = {r["name"]: r for g in groups for r in g["rules"]}
    assert ALERTS <= set(loaded), sorted(loaded)
    assert all(r["health"] == "ok" for r in loaded.values()), [(n, r.get("lastError")) for n, r in loaded.items()
                                                               if r["health"] != "ok"]

    def all_up():
        targets = get(PROMETHEUS + "/api/v1/targets?state=active")["data"]["activeTargets"]
        seen = {(t["labels"]["job"], t["labels"]["node"]): t["health"] for t in targets}
        return seen if set(seen) == TARGETS and set(seen.values()) == {"up"} else None

    seen = wait("every target up", all_up, 120, step=2)
    print("Prometheus on head01: %d targets up: %s" % (len(seen), ", ".join("%s@%s" % t for t in sorted(seen))))
    # the GPU nodes' exporters serve the eight emulated GPUs each, named by node and GPU
    gpus = {(r["metric"]["node"], r["metric"]["gpu"]) for r in query("DCGM_FI_DEV_GPU_TEMP")}
    assert gpus == {(n, str(g)) for n in ("gpu01", "gpu02") for g in range(8)}, sorted(gpus)


def test_an_uncorrectable_ecc_error_on_gpu01_fires_its_alert_and_the_latency_is_measured(converged):  # pylint: disable=unused-argument
    # The lab is healthy first: no such alert, and the counter is there and 0.
    wait("no GPUUncorrectableECCError before the injection", lambda: not firing("GPUUncorrectableECCError"), 120, 2)
    before = query('DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{node="gpu01",gpu="%s"}' % ECC_GPU)
    assert [r["value"][1] for r in before] == ["0"], before
    injected = time.time()
    assert podman_exec("gpu01", "nvidia-smi", "--emu-ecc", ECC_GPU, "1")[0] == 0
    try:
        alerts = wait("GPUUncorrectableECCError firing for gpu01 GPU %s" % ECC_GPU,
                      lambda: firing("GPUUncorrectableECCError", node="gpu01", gpu=ECC_GPU), 120, step=0.5)
        seen = time.time()
        (alert,) = alerts
        assert alert["labels"]["severity"] == "critical" and alert["labels"]["UUID"].startswith("GPU-")
        assert alert["annotations"]["summary"] == "gpu01 GPU %s: 1 uncorrectable ECC error(s)" % ECC_GPU
        # Prometheus's own record of when the alert became active (no `for`: it fired in that evaluation).
        active_at = alert["activeAt"]
        print("GPUUncorrectableECCError latency on the lab (scrape and evaluation every 5 s): %.1f s from the "
              "injection to the firing alert seen in the API (activeAt %s)" % (seen - injected, active_at))
        assert seen - injected < 60, seen - injected

        def in_alertmanager():
            flt = urllib.parse.quote('alertname="GPUUncorrectableECCError"')
            got = get("%s/api/v2/alerts?filter=%s" % (ALERTMANAGER, flt))
            return [a for a in got if a["labels"].get("node") == "gpu01" and a["labels"].get("gpu") == ECC_GPU
                    and a["status"]["state"] == "active"]

        wait("the alert in Alertmanager", in_alertmanager, 60)
        print("GPUUncorrectableECCError reached Alertmanager %.1f s after the injection" % (time.time() - injected))
        # Only that GPU of that node.
        assert {(a["labels"]["node"], a["labels"]["gpu"]) for a in firing("GPUUncorrectableECCError")} == \
            {("gpu01", ECC_GPU)}
    finally:
        podman_exec("gpu01", "nvidia-smi", "--emu-ecc", ECC_GPU, "0")
    restored = time.time()
    wait("GPUUncorrectableECCError cleared after the restore", lambda: not firing("GPUUncorrectableECCError"), 120, 0.5)
    print("GPUUncorrectableECCError cleared %.1f s after the restore" % (time.time() - restored))
    _give_back_a_health_check_drain("gpu01")


def _give_back_a_health_check_drain(node):
    """The health check (HealthCheckInterval, CYCLE) may have run on the node while the fault was there and drained
    it: its next run resumes its own drain; run it now, as slurmd does, instead of waiting up to five minutes."""
    state, reason = settled_node_states().get(node, ("", ""))
    if state.startswith(("drain", "drng")) and reason.startswith("cf-health:"):
        rc, out = podman_exec(node, "env", "-i", "SLURMD_NODENAME=" + node, "/usr/libexec/clusterforge/slurm-healthcheck")
        assert rc == 0, out
        wait("%s resumed by its health check" % node,
             lambda: not settled_node_states()[node][0].startswith(("drain", "drng")), 60, 2)


def test_slurm_drained_metrics_reflect_a_drain(converged):  # pylint: disable=unused-argument
    states = settled_node_states()
    free = [n for n in ("gpu02", "gpu01") if not states[n][0].startswith(("drain", "drng", "down"))]
    if not free:
        pytest.fail("no GPU node in service to drain: %s" % states)
    node = free[0]
    assert not query('clusterforge_slurm_node_drained{node="%s"}' % node)
    drained_before = sum(float(r["value"][1]) for r in query('clusterforge_slurm_nodes{state=~"drained|draining"}'))
    start = time.time()
    rc, out = slurm("scontrol", "update", "NodeName=" + node, "State=DRAIN", "Reason=lab-test: monitoring drain")
    assert rc == 0, out
    try:
        series = wait("clusterforge_slurm_node_drained for %s" % node,
                      lambda: query('clusterforge_slurm_node_drained{node="%s"} == 1' % node), 60, 0.5)
        print("the drain of %s showed in Prometheus %.1f s after scontrol update" % (node, time.time() - start))
        assert [r["metric"]["reason_owner"] for r in series] == ["lab-test"], series
        assert series[0]["metric"]["instance"].endswith(":9100") and series[0]["metric"]["job"] == "node"
        after = sum(float(r["value"][1]) for r in query('clusterforge_slurm_nodes{state=~"drained|draining"}'))
        assert after == drained_before + 1, (drained_before, after)
        total = sum(float(r["value"][1]) for r in query("clusterforge_slurm_nodes"))
        assert total == len(settled_node_states()), total
    finally:
        rc, out = slurm("scontrol", "update", "NodeName=" + node, "State=RESUME")
    assert rc == 0, out
    wait("the drain of %s gone from the metrics" % node,
         lambda: not query('clusterforge_slurm_node_drained{node="%s"}' % node), 60, 0.5)
    # the node-state metrics are fresh: no SlurmMetricsStale
    assert not firing("SlurmMetricsStale")


# ------------------------------------------------------------- the example inventory's monitoring and DCGM settings

# Lab overrides that exist only because the lab is containers with emulators (no NVIDIA repository, no user or mount
# namespaces for the units' sandboxing, the emulators' paths, the switch that installs the host engine emulator): kept.
# Every other monitoring and DCGM setting of the lab takes the value a cluster built from inventories/example gets.
CONTAINER_ONLY = {"monitoring_service_sandboxing", "dcgm_install_packages", "cf_emu_dcgm_hostengine",
                  "dcgm_hostengine_binary", "dcgm_exporter_binary", "dcgm_exporter_sandboxing"}
LAB_OVERRIDES = ("inventories/lab/group_vars/all/lab_monitoring.yml", "inventories/lab/group_vars/gpu_nodes/lab_dcgm.yml")


def _yaml(path):
    with open(os.path.join(ROOT, path)) as handle:
        return yaml.safe_load(handle) or {}


def example_settings():
    """{variable: the value inventories/example gives it} for each monitoring and DCGM setting the lab overrides,
    container necessities aside: the example's own value where it sets one, else the role's default."""
    example = {}
    for folder, dummy, files in os.walk(os.path.join(ROOT, "inventories", "example", "group_vars")):
        for name in files:
            example.update(_yaml(os.path.relpath(os.path.join(folder, name), ROOT)))
    defaults = dict(_yaml("roles/monitoring/defaults/main.yml"), **_yaml("roles/dcgm/defaults/main.yml"))
    settings = {}
    for path in LAB_OVERRIDES:
        for name in _yaml(path):
            if name not in CONTAINER_ONLY:
                settings[name] = example[name] if name in example else defaults[name]
    return settings


def converge_monitoring(*extra):
    rc, out = run([os.path.join(BIN, "ansible-playbook"), "-i", "inventories/lab", "site.yml",
                   "--tags", "role::dcgm,role::monitoring"] + list(extra))
    assert rc == 0, out[-5000:]
    return out


def test_a_cluster_with_the_example_monitoring_and_dcgm_settings_has_every_target_up_and_no_alert(converged, tmp_path):  # pylint: disable=unused-argument
    """Issue 40: the defaults agree. With inventories/example's settings (the roles' defaults: 30 s scrape and
    evaluation, five-minute delays, dcgm-exporter on), Prometheus scrapes every exporter the dcgm role runs and no
    alert is pending or firing on the healthy lab. The lab's own intervals are restored after."""
    settings = example_settings()
    assert settings["monitoring_scrape_interval_seconds"] == 30 and settings["dcgm_exporter_enabled"] is True, settings
    extra = tmp_path / "example.json"
    extra.write_text(json.dumps(settings))
    try:
        converge_monitoring("-e", "@%s" % extra)
        config = get(PROMETHEUS + "/api/v1/status/config")["data"]["yaml"]
        assert "scrape_interval: 30s" in config and "evaluation_interval: 30s" in config, config[:800]

        def all_up_after_a_fresh_scrape():
            targets = get(PROMETHEUS + "/api/v1/targets?state=active")["data"]["activeTargets"]
            seen = {(t["labels"]["job"], t["labels"]["node"]): t["health"] for t in targets}
            return seen if set(seen) == TARGETS and set(seen.values()) == {"up"} else None

        seen = wait("every target up with the example's settings", all_up_after_a_fresh_scrape, 180, step=5)
        # Two evaluations of every rule at the example's 30 s interval after every target answered: a rule that a
        # healthy cluster trips (a `for` of minutes keeps it pending, so pending counts too) shows by then.
        time.sleep(65)
        alerts = get(PROMETHEUS + "/api/v1/alerts")["data"]["alerts"]
        assert alerts == [], [(a["labels"], a["state"]) for a in alerts]
        assert not get(ALERTMANAGER + "/api/v2/alerts?active=true"), "Alertmanager holds an alert"
        print("example settings: %d targets up, no alert pending or firing, with %s" % (len(seen), json.dumps(settings)))
    finally:
        converge_monitoring()
    config = get(PROMETHEUS + "/api/v1/status/config")["data"]["yaml"]
    assert "scrape_interval: 5s" in config, config[:800]
