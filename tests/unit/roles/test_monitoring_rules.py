# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's Prometheus rules, prometheus.yml, alertmanager.yml and Grafana dashboard, rendered by
Ansible itself (ansible-playbook, local connection) for the lab's inventory.

Without tools: the alert names, labels and annotations, the scrape targets, the receivers, and that every metric the
rules and the dashboard read is one that dcgm-exporter (started with the dcgm role's counters file), the Slurm
node-state program or the health check writes. Where Prometheus's promtool and Alertmanager's amtool are installed
(Debian: prometheus, prometheus-alertmanager): `promtool check rules|config`, `amtool check-config` (what the role's
`validate:` runs), every dashboard query parsed by promtool, and `promtool test rules` cases that fire, and do not
fire, each alert on recorded series.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
import yaml
from ansible.template import trust_as_template

from role_files import load_script, render_role_template, role_templar

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = os.path.join(ROOT, "roles", "monitoring")
BIN = os.path.join(ROOT, ".venv", "bin")
TEMPLATES = {
    "rules.yml": "etc/prometheus/rules/clusterforge.rules.yml.j2",
    "prometheus.yml": "etc/prometheus/prometheus.yml.j2",
    "alertmanager.yml": "etc/prometheus/alertmanager.yml.j2",
    "node-exporter.default": "etc/default/prometheus-node-exporter.j2",
    "prometheus.default": "etc/default/prometheus.j2",
    "alertmanager.default": "etc/default/prometheus-alertmanager.j2",
    "slurm-metrics.service": "etc/systemd/system/clusterforge-slurm-metrics.service.j2",
    "slurm-metrics.timer": "etc/systemd/system/clusterforge-slurm-metrics.timer.j2",
}
DASHBOARD = os.path.join(ROLE, "files", "grafana", "clusterforge-gpu-cluster.json")
ALERTS = ["GPUUncorrectableECCError", "GPUXidError", "GPUTemperatureHigh", "GPUNVLinkErrors",
          "GPUErrorCountersNotExported", "HealthCheckCircuitBreakerOpen", "HealthCheckNotRunning",
          "HealthCheckMetricsMissing", "SlurmNodesDrainedShareHigh", "SlurmMetricsStale", "TargetDown"]
# The Slurm health check's metrics (slurm_compute), by name.
HEALTHCHECK_METRICS = {"clusterforge_healthcheck_status", "clusterforge_healthcheck_last_run_timestamp_seconds",
                       "clusterforge_healthcheck_duration_seconds", "clusterforge_healthcheck_fault",
                       "clusterforge_healthcheck_strikes", "clusterforge_healthcheck_breaker_open"}
PROMTOOL = shutil.which("promtool")
AMTOOL = shutil.which("amtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian package prometheus) not installed")
needs_amtool = pytest.mark.skipif(AMTOOL is None, reason="amtool (Debian package prometheus-alertmanager) not installed")

# The lab's inventory shape: the controller, two GPU nodes and a storage node, with management addresses.
INVENTORY = {"all": {"children": {
    "slurm_controller": {"hosts": {"head01": {"cluster_mgmt_ip": "10.77.0.10"}}},
    "gpu_nodes": {"hosts": {"gpu01": {"cluster_mgmt_ip": "10.77.0.21"}, "gpu02": {"cluster_mgmt_ip": "10.77.0.22"}}},
    "lustre_mds": {"hosts": {"stor01": {"cluster_mgmt_ip": "10.77.0.31"}}},
}, "vars": {"cluster_name": "cflab"}}}
PLAY = """---
- name: Render the monitoring role's templates
  hosts: head01
  connection: local
  gather_facts: false
  vars_files:
    - {role}/defaults/main.yml
    - {role}/vars/main.yml
    - {role}/vars/Debian.yml
  tasks:
    # Rendered on the controller (the template lookup: the variables and ansible_managed of the template action), then
    # written by one module run (a template task per file took about 0.5 s each).
    - name: Render
      ansible.builtin.set_fact:
        __rendered: >-
          {{{{ __rendered | default([]) + [{{'path': '{out}/' ~ item.key, 'mode': '0644',
               'content': lookup('ansible.builtin.template', '{role}/templates/' ~ item.value)}}] }}}}
      loop: "{{{{ templates | dict2items }}}}"
    - name: Write
      clusterforge.gpu.files:
        files: "{{{{ __rendered }}}}"
"""


EMULATOR = load_script("cf_dcgm_exporter_emulator", os.path.join(ROOT, "tests", "lab", "emulators", "dcgm-exporter"))
SLURM_METRICS = load_script("cf_slurm_metrics", os.path.join(ROLE, "files", "clusterforge-slurm-metrics"))
# The counters file the dcgm role starts dcgm-exporter with (-f), rendered with its defaults.
DCGM_COUNTERS = render_role_template(ROOT, "dcgm", "etc/dcgm-exporter/clusterforge-counters.csv.j2")


def _installed_versions():
    """dpkg-query's answer about node-exporter and Alertmanager on this machine, as config.yml asks it ('' without dpkg)."""
    if not shutil.which("dpkg-query"):
        return ""
    proc = subprocess.run(["dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev} ${Version}\n",
                           "prometheus-node-exporter", "prometheus-alertmanager"], capture_output=True, text=True, check=False)
    return proc.stdout


def render(out_dir, extra=None, inventory_data=None):
    """Render every template of TEMPLATES into out_dir with Ansible; returns {name: text}."""
    os.makedirs(out_dir, exist_ok=True)
    inventory = os.path.join(out_dir, "hosts.yml")
    play = os.path.join(out_dir, "play.yml")
    with open(inventory, "w") as f:
        yaml.safe_dump(inventory_data or INVENTORY, f)
    with open(play, "w") as f:
        f.write(PLAY.format(role=ROLE, out=out_dir))
    variables = {"templates": TEMPLATES, "ansible_python_interpreter": sys.executable,
                 # promtool check config reads the rule file named in prometheus.yml: the rendered one
                 "__monitoring_prometheus_rules_file": os.path.join(out_dir, "rules.yml"),
                 # and the password file every scrape and the alerts send (written by the role beside prometheus.yml)
                 "__monitoring_scrape_password_file": os.path.join(out_dir, "web.password")}
    with open(os.path.join(out_dir, "web.password"), "w") as f:
        f.write("test-password")
    # the web options of the versions installed here, read as the role reads them (amtool below checks the result)
    variables["__monitoring_register_versions"] = {"stdout": _installed_versions()}
    variables.update(extra or {})
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, ".cache", "collections"), ANSIBLE_CACHE_PLUGIN="memory")
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", inventory, play, "-e", json.dumps(variables)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    texts = {}
    for name in TEMPLATES:
        with open(os.path.join(out_dir, name)) as f:
            texts[name] = f.read()
    return texts


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("monitoring-default"))
    return out, render(out)


@pytest.fixture(scope="module")
def rendered_webhook(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("monitoring-webhook"))
    return out, render(out, {"monitoring_alertmanager_webhook_url": "https://hooks.example.test/cf?token=s3cr3t",
                             "monitoring_gpu_temperature_max_c": 80, "monitoring_slurm_metrics_enabled": False,
                             "monitoring_scrape_dcgm_exporter": False,
                             "monitoring_scrape_configs_extra": [{"job_name": "lustre", "static_configs": [
                                 {"targets": ["stor01:9169"]}]}]})


def _rules(text):
    return {r["alert"]: r for g in yaml.safe_load(text)["groups"] for r in g["rules"]}


def _metric_names(expr):
    """The metric names a PromQL expression reads (identifiers followed by a selector, a range, or standing alone)."""
    cleaned = re.sub(r'"[^"]*"', '""', expr)
    cleaned = re.sub(r"\{[^}]*\}", "{}", cleaned)
    cleaned = re.sub(r"\b(by|on|without|ignoring|group_left|group_right)\s*\([^)]*\)", " ", cleaned)
    cleaned = re.sub(r"\[[^\]]*\]", "", cleaned)
    names = set(re.findall(r"\b([A-Za-z_:][A-Za-z0-9_:]*)\b(?!\s*\()", cleaned))
    keywords = {"by", "on", "without", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool",
                "offset", "e", "s", "m", "h", "d", "inf", "nan"}
    return {n for n in names if n not in keywords and not re.match(r"^\d", n) and not n.startswith("__")}


def _known_metrics():
    dcgm = {f for f, kind, _h in EMULATOR.parse_collectors(DCGM_COUNTERS) if kind != "label"}
    slurm = set(re.findall(r"^# TYPE (clusterforge_slurm_[a-z_]+) ", SLURM_METRICS.render({}, [], 0, 0), re.M))
    return dcgm | slurm | HEALTHCHECK_METRICS | {"up", "ALERTS", "time"}


# --------------------------------------------------------------------------------------------- rules, no tools

def test_every_alert_is_there_in_its_group(rendered):
    groups = yaml.safe_load(rendered[1]["rules.yml"])["groups"]
    names = [r["alert"] for g in groups for r in g["rules"]]
    assert names == ALERTS
    assert [g["name"] for g in groups] == ["clusterforge-gpu", "clusterforge-healthcheck", "clusterforge-slurm",
                                           "clusterforge-targets"]


def test_the_roles_list_of_alerts_matches_the_rules(rendered):
    """verify.yml checks Prometheus loaded __monitoring_alerts: it must name the same alerts as the rules file."""
    with open(os.path.join(ROLE, "vars", "main.yml")) as f:
        text = f.read()
    listed = re.findall(r"'([A-Z][A-Za-z]+)'", text.split("__monitoring_alerts:", 1)[1])
    assert sorted(listed) == sorted(ALERTS)


def test_every_alert_names_the_node_and_where_it_applies_the_gpu_or_the_check(rendered):
    for name, rule in _rules(rendered[1]["rules.yml"]).items():
        text = rule["annotations"]["summary"] + " " + rule["annotations"]["description"]
        assert "$labels.node" in text, name
        assert rule["labels"]["severity"] in ("critical", "warning"), name
        if name.startswith("GPU") and name != "GPUErrorCountersNotExported":
            assert "$labels.gpu" in rule["annotations"]["summary"] and "$labels.UUID" in text, name
        if name != "SlurmNodesDrainedShareHigh":
            assert "$labels.instance" in text, name
    assert "$labels.check" in _rules(rendered[1]["rules.yml"])["HealthCheckCircuitBreakerOpen"]["annotations"]["summary"]


def test_the_expressions_read_the_real_metric_names_and_thresholds(rendered):
    rules = _rules(rendered[1]["rules.yml"])
    assert rules["GPUUncorrectableECCError"]["expr"] == "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL > 0"
    assert rules["GPUXidError"]["expr"] == "DCGM_FI_DEV_XID_ERRORS != 0"
    assert rules["GPUTemperatureHigh"]["expr"] == "DCGM_FI_DEV_GPU_TEMP >= 85"
    assert rules["GPUTemperatureHigh"]["for"] == "300s"
    nvlink = rules["GPUNVLinkErrors"]["expr"]
    for field in ("CRC_FLIT_ERROR_COUNT_TOTAL", "CRC_DATA_ERROR_COUNT_TOTAL", "REPLAY_ERROR_COUNT_TOTAL",
                  "RECOVERY_ERROR_COUNT_TOTAL"):
        assert "increase(DCGM_FI_DEV_NVLINK_%s[600s]) > 0" % field in nvlink
    assert rules["HealthCheckCircuitBreakerOpen"]["expr"] == "clusterforge_healthcheck_breaker_open == 1"
    assert rules["HealthCheckNotRunning"]["expr"] == (
        'time() - clusterforge_healthcheck_last_run_timestamp_seconds{source="slurmd"} > 900')
    assert "> 0.25" in rules["SlurmNodesDrainedShareHigh"]["expr"]
    assert 'up{job="node", node="head01"}' in rules["SlurmMetricsStale"]["expr"]
    assert rules["TargetDown"] == dict(rules["TargetDown"], expr="up == 0", **{"for": "300s"})
    known = _known_metrics()
    for name, rule in rules.items():
        unknown = _metric_names(rule["expr"]) - known
        assert not unknown, (name, unknown)


def test_rules_follow_the_variables(rendered_webhook):
    rules = _rules(rendered_webhook[1]["rules.yml"])
    assert rules["GPUTemperatureHigh"]["expr"] == "DCGM_FI_DEV_GPU_TEMP >= 80"
    # no Slurm node-state timer: no Slurm alerts; no dcgm-exporter scraped: no alert about its counters
    assert "SlurmNodesDrainedShareHigh" not in rules and "SlurmMetricsStale" not in rules
    assert "GPUErrorCountersNotExported" not in rules


def test_the_dcgm_fields_the_rules_read_are_the_exporters_field_names():
    """The ECC and NVLink fields are dcgm-exporter's own names (etc/default-counters.csv, commented out there; the
    dcgm role's counters file enables them: tests/unit/roles/test_dcgm_exporter_counters.py)."""
    fields = [f for f, _k, _h in EMULATOR.COUNTERS]
    for name in ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_TEMP",
                 "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
                 "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"):
        assert name in fields


# --------------------------------------------------------------------------------------- prometheus.yml, no tools

def test_scrape_targets_are_every_host_by_management_address_and_every_gpu_node(rendered):
    config = yaml.safe_load(rendered[1]["prometheus.yml"])
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert list(jobs) == ["prometheus", "alertmanager", "node", "dcgm-exporter"]
    node = sorted(((c["targets"], c["labels"]) for c in jobs["node"]["static_configs"]), key=lambda t: t[1]["node"])
    assert node == [(["10.77.0.21:9100"], {"node": "gpu01", "gpu_node": "true"}),
                    (["10.77.0.22:9100"], {"node": "gpu02", "gpu_node": "true"}),
                    (["10.77.0.10:9100"], {"node": "head01", "gpu_node": "false"}),
                    (["10.77.0.31:9100"], {"node": "stor01", "gpu_node": "false"})]
    assert jobs["node"]["honor_labels"] is True
    dcgm = sorted(((c["targets"], c["labels"]) for c in jobs["dcgm-exporter"]["static_configs"]),
                  key=lambda t: t[1]["node"])
    assert dcgm == [(["10.77.0.21:9400"], {"node": "gpu01"}), (["10.77.0.22:9400"], {"node": "gpu02"})]
    assert jobs["prometheus"]["static_configs"][0]["labels"] == {"node": "head01"}
    # Alertmanager listens on the loopback only; every scrape and the alerts carry the web user (basic auth)
    assert config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["127.0.0.1:9093"]
    assert jobs["prometheus"]["static_configs"][0]["targets"] == ["10.77.0.10:9090"]
    auth = {"username": "clusterforge", "password_file": os.path.join(rendered[0], "web.password")}
    assert config["alerting"]["alertmanagers"][0]["basic_auth"] == auth
    assert all(job["basic_auth"] == auth for job in jobs.values()), jobs
    assert not any("scheme" in job or "tls_config" in job for job in jobs.values())
    assert config["global"] == {"scrape_interval": "30s", "scrape_timeout": "10s", "evaluation_interval": "30s",
                                "external_labels": {"cluster": "cflab"}}
    assert config["rule_files"] == [os.path.join(rendered[0], "rules.yml")]


def test_extra_scrape_configs_are_appended_and_dcgm_can_be_left_out(rendered_webhook):
    config = yaml.safe_load(rendered_webhook[1]["prometheus.yml"])
    assert [j["job_name"] for j in config["scrape_configs"]] == ["prometheus", "alertmanager", "node", "lustre"]


def test_short_lab_intervals_keep_the_scrape_timeout_within_the_interval(tmp_path):
    config = yaml.safe_load(render(str(tmp_path), {"monitoring_scrape_interval_seconds": 5})["prometheus.yml"])
    assert config["global"]["scrape_interval"] == "5s" and config["global"]["scrape_timeout"] == "5s"


def test_daemon_options(rendered):
    texts = rendered[1]
    web = "--web.config.file=/etc/clusterforge/monitoring/web-config.yml"
    assert ('ARGS="--web.listen-address=10.77.0.10:9100 --collector.textfile.directory=/var/lib/prometheus/node-exporter '
            + web + '"') in texts["node-exporter.default"]
    assert ('ARGS="--config.file=/etc/prometheus/prometheus.yml --storage.tsdb.path=/var/lib/prometheus/metrics2/ '
            '--storage.tsdb.retention.time=15d --web.listen-address=10.77.0.10:9090 ' + web + '"') in texts["prometheus.default"]
    assert ('--web.listen-address=127.0.0.1:9093 --cluster.listen-address= ' + web + '"') in texts["alertmanager.default"]
    assert ("ExecStart=/usr/libexec/clusterforge/clusterforge-slurm-metrics --output "
            "/var/lib/prometheus/node-exporter/clusterforge_slurm.prom --scontrol scontrol") in texts["slurm-metrics.service"]
    assert "OnUnitActiveSec=60s" in texts["slurm-metrics.timer"] and "OnActiveSec=1s" in texts["slurm-metrics.timer"]


# ------------------------------------------------------------------------------------- alertmanager.yml, no tools

def test_without_a_webhook_the_receiver_sends_nothing(rendered):
    config = yaml.safe_load(rendered[1]["alertmanager.yml"])
    assert config["route"]["receiver"] == "clusterforge-null"
    assert config["receivers"] == [{"name": "clusterforge-null"}]
    assert config["route"]["group_by"] == ["alertname", "node"]


def test_a_webhook_receiver_gets_firing_and_resolved_alerts(rendered_webhook):
    config = yaml.safe_load(rendered_webhook[1]["alertmanager.yml"])
    assert config["route"]["receiver"] == "clusterforge-webhook"
    assert len(config["receivers"]) == 1 and config["receivers"][0]["name"] == "clusterforge-webhook"


def test_an_alertmanager_with_url_file_reads_the_url_from_its_file(tmp_path):
    # 0.26 and later (Debian 13's 0.28): the URL is in a file of its own, not in alertmanager.yml
    texts = render(str(tmp_path), {"monitoring_alertmanager_webhook_url": "https://hooks.example.test/cf?token=s3cr3t",
                                   "__monitoring_register_versions": {
                                       "stdout": "prometheus-alertmanager ii 0.28.1+ds-1\n"}})
    config = yaml.safe_load(texts["alertmanager.yml"])
    assert config["receivers"] == [{"name": "clusterforge-webhook", "webhook_configs": [
        {"url_file": "/etc/prometheus/alertmanager-webhook.url", "send_resolved": True}]}]
    assert "s3cr3t" not in texts["alertmanager.yml"]


def test_an_alertmanager_without_url_file_gets_the_url_inline(tmp_path):
    texts = render(str(tmp_path), {"monitoring_alertmanager_webhook_url": "https://hooks.example.test/cf?token=s3cr3t",
                                   "__monitoring_register_versions": {
                                       "stdout": "prometheus-node-exporter ii 1.5.0-1+b6\n"
                                                 "prometheus-alertmanager ii 0.25.0+ds-2+b7\n"}})
    config = yaml.safe_load(texts["alertmanager.yml"])
    assert config["receivers"][0]["webhook_configs"] == [
        {"url": "https://hooks.example.test/cf?token=s3cr3t", "send_resolved": True}]


def test_node_exporter_before_1_5_takes_the_old_web_flag(tmp_path):
    texts = render(str(tmp_path), {"__monitoring_register_versions": {
        "stdout": "prometheus-node-exporter ii 1.3.1-1ubuntu0.22.04.2\n"}})
    assert " --web.config=/etc/clusterforge/monitoring/web-config.yml\"" in texts["node-exporter.default"]


def test_without_auth_nothing_asks_for_a_password_and_tls_when_a_certificate_is_given(tmp_path):
    off = render(str(tmp_path / "off"), {"monitoring_web_auth_enabled": False})
    config = yaml.safe_load(off["prometheus.yml"])
    assert not any("basic_auth" in job for job in config["scrape_configs"])
    assert "web.config" not in off["node-exporter.default"] + off["prometheus.default"] + off["alertmanager.default"]
    tls = render(str(tmp_path / "tls"), {"monitoring_web_tls_cert_file": "/etc/pki/n.crt",
                                         "monitoring_web_tls_key_file": "/etc/pki/n.key",
                                         "monitoring_web_tls_ca_file": "/etc/pki/ca.crt"})
    config = yaml.safe_load(tls["prometheus.yml"])
    assert all(job["scheme"] == "https" and job["tls_config"] == {"ca_file": "/etc/pki/ca.crt"}
               for job in config["scrape_configs"])
    assert config["alerting"]["alertmanagers"][0]["scheme"] == "https"


def test_the_webhook_url_is_not_logged():
    with open(os.path.join(ROLE, "tasks", "config.yml")) as f:
        tasks = yaml.safe_load(f)
    (task,) = [t for t in tasks if t.get("ansible.builtin.template", {}).get("src") == "etc/prometheus/alertmanager.yml.j2"]
    # hidden whenever there is a URL to hide, unless the operator turned secure logging off
    for secure, url, hidden in ((True, "https://hooks.example.test/cf?token=s3cr3t", True), (True, None, False),
                                (False, "https://hooks.example.test/cf?token=s3cr3t", False)):
        templar = role_templar(ROOT, "monitoring", monitoring_secure_logging=secure,
                               monitoring_alertmanager_webhook_url=url, __monitoring_amtool="/usr/bin/amtool")
        assert templar.template(trust_as_template(task["no_log"])) is hidden, (secure, url)
        assert templar.template(trust_as_template(task["ansible.builtin.template"]["validate"])) == \
            "/usr/bin/amtool check-config %s"
    assert task["ansible.builtin.template"]["mode"] == "0640"


# --------------------------------------------------------------------------------------------- with the tools

@needs_promtool
@pytest.mark.parametrize("which", ["rendered", "rendered_webhook"])
def test_promtool_accepts_the_rules_and_the_configuration(which, request):
    out_dir, _texts = request.getfixturevalue(which)
    for args in (["check", "rules", os.path.join(out_dir, "rules.yml")],
                 ["check", "config", os.path.join(out_dir, "prometheus.yml")]):
        proc = subprocess.run([PROMTOOL] + args, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, (args, proc.stdout, proc.stderr)


@needs_amtool
@pytest.mark.parametrize("which", ["rendered", "rendered_webhook"])
def test_amtool_accepts_the_alertmanager_configuration(which, request):
    out_dir, _texts = request.getfixturevalue(which)
    proc = subprocess.run([AMTOOL, "check-config", os.path.join(out_dir, "alertmanager.yml")], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


GPU = 'gpu="3",UUID="GPU-0123",pci_bus_id="00000000:5D:00.0",device="nvidia3",modelName="NVIDIA H100 80GB HBM3"'
DCGM_TARGET = 'instance="10.77.0.21:9400",job="dcgm-exporter",node="gpu01"'
NODE_TARGET = 'instance="10.77.0.21:9100",job="node",node="gpu01",gpu_node="true"'
CTL_TARGET = 'instance="10.77.0.10:9100",job="node",node="head01",gpu_node="false"'


def _labels(text):
    return dict(re.findall(r'(\w+)="([^"]*)"', text))


# (name, input series, [(eval time, alert, expected label sets)]): promtool test rules, evaluated every 30 s.
CASES = [
    ("an uncorrectable ECC error fires at once, naming node and GPU, and clears after a driver reload", [
        ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{%s,%s}" % (GPU, DCGM_TARGET), "0 0 2 2 0 0"),
    ], [("30s", "GPUUncorrectableECCError", []),
        ("1m", "GPUUncorrectableECCError", [dict(_labels(GPU), **_labels(DCGM_TARGET), severity="critical")]),
        ("2m", "GPUUncorrectableECCError", [])]),
    ("an XID names its code", [
        ('DCGM_FI_DEV_XID_ERRORS{%s,%s,err_code="79",err_msg="GPU has fallen off the bus"}' % (GPU, DCGM_TARGET),
         "79 79"),
    ], [("30s", "GPUXidError", [dict(_labels(GPU), **_labels(DCGM_TARGET), err_code="79",
                                     err_msg="GPU has fallen off the bus", severity="critical")])]),
    ("a hot GPU fires only after five minutes at 85 C", [
        ("DCGM_FI_DEV_GPU_TEMP{%s,%s}" % (GPU, DCGM_TARGET), "84 85+0x12"),
    ], [("4m", "GPUTemperatureHigh", []),
        ("5m30s", "GPUTemperatureHigh", [dict(_labels(GPU), **_labels(DCGM_TARGET), severity="warning")])]),
    ("growing NVLink replay errors fire, naming the counter; steady counts clear", [
        ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{%s,%s}" % (GPU, DCGM_TARGET), "0 0 4 4+0x30"),
        ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{%s,%s}" % (GPU, DCGM_TARGET), "7+0x40"),
    ], [("30s", "GPUNVLinkErrors", []),
        ("2m", "GPUNVLinkErrors", [dict(_labels(GPU), **_labels(DCGM_TARGET), counter="replay", severity="warning")]),
        ("15m", "GPUNVLinkErrors", [])]),
    ("an open circuit breaker names the node and the check", [
        ('clusterforge_healthcheck_breaker_open{check="ecc",%s}' % NODE_TARGET, "0 1 1"),
        ('clusterforge_healthcheck_breaker_open{check="dcgm_health",%s}' % NODE_TARGET, "0 0 0"),
    ], [("0s", "HealthCheckCircuitBreakerOpen", []),
        ("1m", "HealthCheckCircuitBreakerOpen", [dict(_labels(NODE_TARGET), check="ecc", severity="critical")])]),
    ("slurmd's health check not run for 15 minutes", [
        # the last run at t=0 (0 s since the epoch), then no newer run
        ('clusterforge_healthcheck_last_run_timestamp_seconds{source="slurmd",%s}' % NODE_TARGET, "0+0x40"),
        ('clusterforge_healthcheck_last_run_timestamp_seconds{source="epilog",%s}' % NODE_TARGET, "0+0x40"),
    ], [("14m", "HealthCheckNotRunning", []),
        ("16m", "HealthCheckNotRunning", [dict(_labels(NODE_TARGET), source="slurmd", severity="warning")])]),
    ("a GPU node whose node-exporter answers without the health check's record", [
        ("up{%s}" % NODE_TARGET, "1+0x40"),
        ("up{%s}" % CTL_TARGET, "1+0x40"),
    ], [("16m", "HealthCheckMetricsMissing", [dict(_labels(NODE_TARGET), severity="warning")])]),
    ("half the Slurm nodes drained for 15 minutes", [
        ('clusterforge_slurm_nodes{state="drained",%s}' % CTL_TARGET, "1+0x40"),
        ('clusterforge_slurm_nodes{state="idle",%s}' % CTL_TARGET, "1+0x40"),
        ('clusterforge_slurm_node_drained{node="gpu01",reason_owner="cf-health",instance="10.77.0.10:9100",job="node",'
         'gpu_node="false"}', "1+0x40"),
        ('clusterforge_slurm_metrics_last_run_timestamp_seconds{%s}' % CTL_TARGET, "0+30x40"),
        ("up{%s}" % CTL_TARGET, "1+0x40"),
    ], [("10m", "SlurmNodesDrainedShareHigh", []),
        ("16m", "SlurmNodesDrainedShareHigh", [{"instance": "10.77.0.10:9100", "node": "head01", "severity": "warning"}]),
        ("16m", "SlurmMetricsStale", [])]),
    ("a fifth of the Slurm nodes drained is within the limit", [
        ('clusterforge_slurm_nodes{state="draining",%s}' % CTL_TARGET, "1+0x40"),
        ('clusterforge_slurm_nodes{state="idle",%s}' % CTL_TARGET, "4+0x40"),
    ], [("16m", "SlurmNodesDrainedShareHigh", [])]),
    ("the Slurm node states stop being updated", [
        ('clusterforge_slurm_metrics_last_run_timestamp_seconds{%s}' % CTL_TARGET, "0+0x40"),
        ("up{%s}" % CTL_TARGET, "1+0x40"),
    ], [("4m", "SlurmMetricsStale", []),
        ("8m", "SlurmMetricsStale", [dict(_labels(CTL_TARGET), severity="warning")])]),
    ("the controller's node-exporter answers without the Slurm node states", [
        ("up{%s}" % CTL_TARGET, "1+0x40"),
    ], [("3m", "SlurmMetricsStale", [dict(_labels(CTL_TARGET), severity="warning")])]),
    ("a target down for five minutes", [
        ("up{%s}" % DCGM_TARGET, "1 0+0x20"),
    ], [("4m", "TargetDown", []),
        ("6m", "TargetDown", [dict(_labels(DCGM_TARGET), severity="warning")])]),
    ("a dcgm-exporter without the ECC counters", [
        ("up{%s}" % DCGM_TARGET, "1+0x40"),
        ("DCGM_FI_DEV_GPU_TEMP{%s,%s}" % (GPU, DCGM_TARGET), "40+0x40"),
    ], [("16m", "GPUErrorCountersNotExported", [dict(_labels(DCGM_TARGET), severity="warning")])]),
    ("healthy GPUs: no alert of any kind", [
        ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{%s,%s}" % (GPU, DCGM_TARGET), "0+0x40"),
        ('DCGM_FI_DEV_XID_ERRORS{%s,%s,err_code="0",err_msg="No Error"}' % (GPU, DCGM_TARGET), "0+0x40"),
        ("DCGM_FI_DEV_GPU_TEMP{%s,%s}" % (GPU, DCGM_TARGET), "40+0x40"),
        ("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL{%s,%s}" % (GPU, DCGM_TARGET), "3+0x40"),
        ("up{%s}" % DCGM_TARGET, "1+0x40"),
    ], [("16m", alert, []) for alert in ALERTS if alert.startswith("GPU")] + [("16m", "TargetDown", [])]),
]


def _promtool_test(rule_file, tests, tmp_path):
    spec = {"rule_files": [rule_file], "evaluation_interval": "30s", "tests": tests}
    path = tmp_path / "rules_test.yml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, check=False)


@needs_promtool
def test_each_alert_fires_on_its_fault_and_not_on_healthy_series(rendered, tmp_path):
    """The logic of every rule: promtool compares the labels of the alerts exactly (the annotations are taken out of
    this copy of the rules; the next test checks them)."""
    groups = yaml.safe_load(rendered[1]["rules.yml"])
    for group in groups["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations")
    rule_file = tmp_path / "rules-without-annotations.yml"
    rule_file.write_text(yaml.safe_dump(groups))
    tests = [{"name": name, "interval": "30s",
              "input_series": [{"series": s, "values": v} for s, v in series],
              "alert_rule_test": [{"eval_time": t, "alertname": a, "exp_alerts": [{"exp_labels": e} for e in expected]}
                                  for t, a, expected in checks]}
             for name, series, checks in CASES]
    proc = _promtool_test(str(rule_file), tests, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@needs_promtool
def test_alert_texts_name_the_node_the_gpu_and_the_check(rendered, tmp_path):
    ecc = dict(_labels(GPU), **_labels(DCGM_TARGET), severity="critical")
    breaker = dict(_labels(NODE_TARGET), check="ecc", severity="critical")
    tests = [{"name": "texts", "interval": "30s", "input_series": [
        {"series": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{%s,%s}" % (GPU, DCGM_TARGET), "values": "2 2"},
        {"series": 'clusterforge_healthcheck_breaker_open{check="ecc",%s}' % NODE_TARGET, "values": "1 1"},
    ], "alert_rule_test": [
        {"eval_time": "30s", "alertname": "GPUUncorrectableECCError", "exp_alerts": [{"exp_labels": ecc, "exp_annotations": {
            "summary": "gpu01 GPU 3: 2 uncorrectable ECC error(s)",
            "description": "GPU 3 (GPU-0123, 00000000:5D:00.0) of gpu01 (10.77.0.21:9400) reports 2 uncorrectable ECC "
                           "errors since the driver loaded (DCGM_FI_DEV_ECC_DBE_VOL_TOTAL). Drain the node; a row "
                           "remap or page retirement needs a GPU reset."}}]},
        {"eval_time": "30s", "alertname": "HealthCheckCircuitBreakerOpen", "exp_alerts": [{
            "exp_labels": breaker, "exp_annotations": {
                "summary": "gpu01: the health check's circuit breaker is open for ecc",
                "description": "The Slurm health check on gpu01 (10.77.0.21:9100) found the check ecc failing but "
                               "did not drain the node: its circuit breaker is open, too many nodes are drained for "
                               "that check already (clusterforge_healthcheck_breaker_open). Find out why it fails on "
                               "so many nodes."}}]},
    ]}]
    proc = _promtool_test(os.path.join(rendered[0], "rules.yml"), tests, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------------------------- the dashboard

def _dashboard_exprs():
    with open(DASHBOARD) as f:
        dash = json.load(f)
    exprs = []
    for panel in dash["panels"]:
        for target in panel.get("targets", []):
            exprs.append((panel["title"], target["expr"]))
    return dash, exprs


def _concrete(expr):
    return expr.replace("$__rate_interval", "5m").replace("$node", ".*")


def test_dashboard_is_grafana_json_with_a_prometheus_datasource_variable():
    dash, exprs = _dashboard_exprs()
    assert dash["uid"] == "clusterforge-gpu-cluster"
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert all(p["datasource"]["uid"] == "${datasource}" for p in dash["panels"] if p["type"] != "row")
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    assert len(exprs) >= 15


def test_dashboard_queries_read_known_metrics():
    _dash, exprs = _dashboard_exprs()
    known = _known_metrics()
    read = set()
    for title, expr in exprs:
        names = _metric_names(_concrete(expr))
        assert names <= known, (title, names - known)
        read |= names
    # it shows what the alerts watch
    assert {"DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_XID_ERRORS",
            "clusterforge_slurm_nodes", "clusterforge_slurm_node_drained",
            "clusterforge_healthcheck_breaker_open"} <= read


@needs_promtool
def test_promtool_parses_every_dashboard_query(tmp_path):
    _dash, exprs = _dashboard_exprs()
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": "cf:dashboard_query_%d" % i, "expr": _concrete(expr)} for i, (_t, expr) in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules))
    proc = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --------------------------------------------------------------------------------------------- the stack on loopback
# The rendered configuration run for real on this machine's loopback, as the molecule scenario runs it in
# containers: Prometheus, Alertmanager, two node-exporters (the controller at 127.0.0.1, the GPU node at 127.0.0.2)
# and the lab's dcgm-exporter emulator over its nvidia-smi emulator; the Slurm node-state program with a fake
# scontrol. Needs the Debian packages prometheus, prometheus-alertmanager and prometheus-node-exporter.

DAEMONS = {name: shutil.which(name) for name in ("prometheus", "prometheus-alertmanager", "prometheus-node-exporter")}
needs_daemons = pytest.mark.skipif(not all(DAEMONS.values()) or PROMTOOL is None,
                                   reason="prometheus, prometheus-alertmanager and prometheus-node-exporter not installed")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get_json(url):
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read().decode())


def _until(what, probe, seconds=60):
    deadline = time.monotonic() + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except OSError as exc:  # not listening yet
            last = exc
        else:
            if last:
                return last
        time.sleep(0.5)
    raise AssertionError("%s: not within %d s (last: %r)" % (what, seconds, last))


@needs_daemons
def test_the_stack_on_loopback_fires_an_injected_ecc_error_into_alertmanager(tmp_path):  # pylint: disable=too-many-locals
    ports = {name: _free_port() for name in ("prometheus", "alertmanager", "node", "dcgm")}
    inventory = {"all": {"children": {
        "slurm_controller": {"hosts": {"head01": {"cluster_mgmt_ip": "127.0.0.1"}}},
        "gpu_nodes": {"hosts": {"gpu01": {"cluster_mgmt_ip": "127.0.0.2"}}}}, "vars": {"cluster_name": "loopback"}}}
    out = str(tmp_path / "conf")
    render(out, {"monitoring_prometheus_port": ports["prometheus"], "monitoring_alertmanager_port": ports["alertmanager"],
                 "monitoring_node_exporter_port": ports["node"], "monitoring_dcgm_exporter_port": ports["dcgm"],
                 "monitoring_scrape_interval_seconds": 1, "monitoring_evaluation_interval_seconds": 1,
                 "monitoring_alertmanager_group_wait_seconds": 1, "monitoring_slurm_drained_share_for_seconds": 0,
                 "monitoring_slurm_metrics_interval_seconds": 1}, inventory)
    textfiles = {host: tmp_path / ("textfile-" + host) for host in ("head01", "gpu01")}
    for path in textfiles.values():
        path.mkdir()
    # the GPU node's health check record, breaker closed; the controller's Slurm node states from a fake scontrol
    health = textfiles["gpu01"] / "clusterforge_healthcheck.prom"
    health.write_text('clusterforge_healthcheck_last_run_timestamp_seconds{source="slurmd"} 1e10\n'
                      'clusterforge_healthcheck_breaker_open{check="ecc"} 0\n')
    scontrol = tmp_path / "scontrol"
    scontrol.write_text("#!/bin/sh\ncat %s\n" % (tmp_path / "nodes.txt"))
    scontrol.chmod(0o755)
    (tmp_path / "nodes.txt").write_text("NodeName=gpu01 State=IDLE+DRAIN Partitions=gpu Reason=cf-health: ecc "
                                        "[root@2025-01-01T00:00:00]\nNodeName=gpu02 State=IDLE Partitions=gpu\n")
    assert SLURM_METRICS.main(["--output", str(textfiles["head01"] / "clusterforge_slurm.prom"),
                               "--scontrol", str(scontrol)]) == 0
    smi = tmp_path / "nvidia-smi"
    smi.write_text('#!/bin/sh\nexec "%s" "%s" "$@"\n' % (sys.executable, os.path.join(ROOT, "tests", "lab", "emulators",
                                                                                      "nvidia-smi")))
    smi.chmod(0o755)
    env = dict(os.environ, CLUSTERFORGE_EMU_STATE_DIR=str(tmp_path / "emu"), CLUSTERFORGE_EMU_RUN_DIR=str(tmp_path / "run"),
               CLUSTERFORGE_EMU_NVIDIA_SMI=str(smi), NODE_NAME="gpu01")
    env.pop("CLUSTERFORGE_EMU_GPU_COUNT", None)
    counters = tmp_path / "clusterforge-counters.csv"
    counters.write_text(DCGM_COUNTERS)
    logs = open(tmp_path / "daemons.log", "w")  # pylint: disable=consider-using-with
    argvs = [
        [DAEMONS["prometheus"], "--config.file=%s/prometheus.yml" % out, "--storage.tsdb.path=%s" % (tmp_path / "tsdb"),
         "--web.listen-address=127.0.0.1:%d" % ports["prometheus"]],
        [DAEMONS["prometheus-alertmanager"], "--config.file=%s/alertmanager.yml" % out,
         "--storage.path=%s" % (tmp_path / "am"), "--web.listen-address=127.0.0.1:%d" % ports["alertmanager"],
         "--cluster.listen-address="],
        # as the dcgm role's unit starts it: with the role's counters file (the ECC counters are not in the default)
        [sys.executable, os.path.join(ROOT, "tests", "lab", "emulators", "dcgm-exporter"),
         "-a", "127.0.0.2:%d" % ports["dcgm"], "-f", str(counters)],
    ] + [[DAEMONS["prometheus-node-exporter"], "--web.listen-address=%s:%d" % (ip, ports["node"]),
          "--collector.disable-defaults", "--collector.textfile",
          "--collector.textfile.directory=%s" % textfiles[host]] for host, ip in (("head01", "127.0.0.1"), ("gpu01", "127.0.0.2"))]
    procs = [subprocess.Popen(argv, env=env, stdout=logs, stderr=subprocess.STDOUT) for argv in argvs]  # pylint: disable=consider-using-with
    prom = "http://127.0.0.1:%d" % ports["prometheus"]

    def alerts(name, **labels):
        got = _get_json(prom + "/api/v1/alerts")["data"]["alerts"]
        return [a for a in got if a["labels"]["alertname"] == name and a["state"] == "firing"
                and all(a["labels"].get(k) == v for k, v in labels.items())]

    try:
        def all_up():
            active = _get_json(prom + "/api/v1/targets")["data"]["activeTargets"]
            return active if active and all(t["health"] == "up" for t in active) else None

        targets = _until("every target up", all_up)
        assert sorted((t["labels"]["job"], t["labels"]["node"]) for t in targets) == [
            ("alertmanager", "head01"), ("dcgm-exporter", "gpu01"), ("node", "gpu01"), ("node", "head01"),
            ("prometheus", "head01")]
        rules = _get_json(prom + "/api/v1/rules")["data"]["groups"]
        assert {r["name"] for g in rules for r in g["rules"]} == set(ALERTS)
        # healthy GPUs: a few evaluations on real data, and no GPU alert
        _until("ECC counters scraped", lambda: _get_json(prom + "/api/v1/query?query=DCGM_FI_DEV_ECC_DBE_VOL_TOTAL")[
            "data"]["result"])
        time.sleep(3)  # three evaluation intervals
        fired = [a["labels"]["alertname"] for a in _get_json(prom + "/api/v1/alerts")["data"]["alerts"]]
        assert not [a for a in fired if a.startswith("GPU")], fired
        # a drained Slurm node (half of two): the drained share alert and the drained series
        assert _until("SlurmNodesDrainedShareHigh", lambda: alerts("SlurmNodesDrainedShareHigh", node="head01"))
        drained = _get_json(prom + "/api/v1/query?query=clusterforge_slurm_node_drained")["data"]["result"]
        assert [(r["metric"]["node"], r["metric"]["reason_owner"]) for r in drained] == [("gpu01", "cf-health")]
        # an uncorrectable ECC error on GPU 3
        subprocess.run([str(smi), "--emu-ecc", "3", "2"], env=env, check=True, capture_output=True)
        (ecc,) = _until("GPUUncorrectableECCError", lambda: alerts("GPUUncorrectableECCError", node="gpu01", gpu="3"))
        assert ecc["annotations"]["summary"] == "gpu01 GPU 3: 2 uncorrectable ECC error(s)"
        flt = "filter=alertname%3D%22GPUUncorrectableECCError%22"
        (received,) = _until("the alert in Alertmanager", lambda: _get_json(
            "http://127.0.0.1:%d/api/v2/alerts?%s" % (ports["alertmanager"], flt)))
        assert received["labels"]["node"] == "gpu01" and received["labels"]["gpu"] == "3"
        assert [r["name"] for r in received["receivers"]] == ["clusterforge-null"]
        subprocess.run([str(smi), "--emu-ecc", "3", "0"], env=env, check=True, capture_output=True)
        _until("the alert cleared", lambda: not alerts("GPUUncorrectableECCError"))
        # the health check's circuit breaker
        health.write_text('clusterforge_healthcheck_last_run_timestamp_seconds{source="slurmd"} 1e10\n'
                          'clusterforge_healthcheck_breaker_open{check="ecc"} 1\n')
        assert _until("HealthCheckCircuitBreakerOpen",
                      lambda: alerts("HealthCheckCircuitBreakerOpen", node="gpu01", check="ecc"))
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=30)
        logs.close()
