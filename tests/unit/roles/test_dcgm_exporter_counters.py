# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The counters file the dcgm role starts dcgm-exporter with (roles/dcgm/templates/etc/dcgm-exporter/
clusterforge-counters.csv.j2, passed with -f), rendered by Ansible's templar as the template module renders it.

dcgm-exporter exports only the fields of that file, so every DCGM field the monitoring role's alert rules and its
Grafana dashboard read must be a counter of it, not a comment: otherwise the alert can never fire on real hardware
(the exporter's own default file leaves the ECC and NVLink error counters commented out). The file keeps every counter
of that default file, is read the way the exporter reads it (exactly three fields a line, '#' comments), and takes
the site's extra counters; the role refuses extra counters that would break it, before it writes anything.
"""

import base64
import json
import os
import re

import pytest
import yaml
from ansible.template import trust_as_template

from role_files import load_script, load_yaml, read_text, render_role_template, role_templar

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ROLE = os.path.join(ROOT, "roles", "dcgm")
TEMPLATE = "etc/dcgm-exporter/clusterforge-counters.csv.j2"
RULES = os.path.join(ROOT, "roles", "monitoring", "templates", "etc", "prometheus", "rules", "clusterforge.rules.yml.j2")
DASHBOARD = os.path.join(ROOT, "roles", "monitoring", "files", "grafana", "clusterforge-gpu-cluster.json")
FIELD = re.compile(r"\bDCGM_FI_[A-Z0-9_]+\b")
# What ansible.builtin.template gives the template as ansible_managed by default.
MANAGED = "Ansible managed"


# The lab's dcgm-exporter emulator: its record of the exporter's default counters, and its reader of a counters file.
EMULATOR = load_script("cf_dcgm_exporter_emulator_counters", os.path.join(ROOT, "tests", "lab", "emulators", "dcgm-exporter"))


def render(**variables):
    return render_role_template(ROOT, "dcgm", TEMPLATE, **variables)


def counters(text):
    """[(field, type, help)] of the counter lines, as dcgm-exporter reads the file (Go's encoding/csv, '#' comments,
    exactly three fields a line, spaces trimmed): a line it would refuse fails here."""
    return EMULATOR.parse_collectors(text, "clusterforge-counters.csv")


def commented_fields(text):
    """The DCGM fields named in comment lines."""
    return {m for line in text.splitlines() if line.lstrip().startswith("#") for m in FIELD.findall(line)}


@pytest.fixture(scope="module")
def rendered():
    return render()


def _alert_fields():
    """Every DCGM field the monitoring role's alert rules template names, expressions and comments alike."""
    return set(FIELD.findall(read_text(RULES)))


def _dashboard_fields():
    with open(DASHBOARD) as f:
        return set(FIELD.findall(json.dumps(json.load(f))))


# ------------------------------------------------------------------------------------------------ what it enables

def test_the_rules_name_the_fields_of_their_alerts():
    """The check below sees the rules' fields: at least those of the ECC, XID, temperature and NVLink alerts."""
    assert _alert_fields() >= {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_TEMP",
                               "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                               "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
                               "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
                               "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"}


def test_every_dcgm_field_the_alert_rules_read_is_enabled(rendered):
    enabled = {f for f, kind, _h in counters(rendered) if kind != "label"}
    missing = sorted(_alert_fields() - enabled)
    assert not missing, "the alert rules read %s, which the dcgm role's counters file does not enable" % missing
    # and none of them only as a comment (the way dcgm-exporter's own default file has them)
    assert not _alert_fields() & (commented_fields(rendered) - enabled)


def test_every_dcgm_field_the_dashboard_reads_is_enabled(rendered):
    enabled = {f for f, kind, _h in counters(rendered) if kind != "label"}
    assert _dashboard_fields() and not sorted(_dashboard_fields() - enabled)


def test_the_exporters_default_counters_are_all_kept(rendered):
    """The role's file replaces the exporter's default file: every counter that file enables stays, with its type."""
    got = {f: kind for f, kind, _h in counters(rendered)}
    for field, kind, _help in EMULATOR.DEFAULT_COUNTERS:
        assert got.get(field) == kind, field


def test_the_error_counters_the_default_file_leaves_out_are_on(rendered):
    got = {f: kind for f, kind, _h in counters(rendered)}
    for field in ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
                  "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
                  "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
                  "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"):
        assert got.get(field) == "counter", field
    assert got["DCGM_FI_DEV_XID_ERRORS"] == "gauge"
    assert got["DCGM_FI_DEV_ROW_REMAP_PENDING"] == "gauge"
    assert got["DCGM_FI_DRIVER_VERSION"] == "label"


def test_the_file_is_what_the_exporter_reads(rendered):
    lines = rendered.splitlines()
    marker = ("# Written by clusterforge.gpu.dcgm (dcgm_exporter_collectors_manage): "
              "the role overwrites only a file that has this line.")
    assert lines[:4] == ["#", "# " + MANAGED, "#", marker]
    rows = counters(rendered)
    fields = [f for f, _k, _h in rows]
    assert len(fields) == len(set(fields)), "a field twice"
    for field, kind, text in rows:
        assert re.match(r"^DCGM_(FI|EXP)_[A-Z0-9_]+$", field) and kind in ("gauge", "counter", "label") and text
    # every field the emulator knows, so the lab serves the whole file
    known = {f for f, _k, _h in EMULATOR.COUNTERS}
    assert set(fields) <= known, sorted(set(fields) - known)
    # comment lines start at column 0 (Go's csv skips only those) and no line carries a quote
    assert all(not line.startswith((" ", "\t")) for line in lines) and '"' not in rendered


def test_the_roles_field_list_matches_the_file(rendered):
    """__dcgm_exporter_counter_fields (the duplicate check of the extra counters) names the file's fields."""
    templar = role_templar(ROOT, "dcgm")
    listed = templar.template(trust_as_template("{{ __dcgm_exporter_counter_fields }}"))
    assert list(listed) == [f for f, _k, _h in counters(rendered)]


# ------------------------------------------------------------------------------------------------ extra counters

EXTRA = [{"field": "DCGM_FI_DEV_POWER_VIOLATION", "type": "counter",
          "help": "Throttling duration due to power constraints (in us)."},
         {"field": "DCGM_FI_DEV_SERIAL", "type": "label", "help": "Device Serial Number"}]


def test_extra_counters_are_appended():
    text = render(dcgm_exporter_extra_counters=EXTRA)
    rows = counters(text)
    assert rows[-2:] == [("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in us)."),
                         ("DCGM_FI_DEV_SERIAL", "label", "Device Serial Number")]
    assert rows[:-2] == counters(render())
    assert "# This site's counters (dcgm_exporter_extra_counters)" in text
    assert "dcgm_exporter_extra_counters)" not in render()


def _task(phase, name):
    with open(os.path.join(ROLE, "tasks", phase + ".yml")) as f:
        (task,) = [t for t in yaml.safe_load(f) if t.get("name") == name]
    return task


def _holds(task, **variables):
    """Whether every `that` of an assert task holds (and its `when`), for each item of its loop if it has one."""
    variables = {"dcgm_exporter_enabled": True, **variables}
    templar = role_templar(ROOT, "dcgm", **variables)
    when = task.get("when")
    if when is not None and not templar.evaluate_conditional(trust_as_template(str(when))):
        return True
    that = task["ansible.builtin.assert"]["that"]
    that = that if isinstance(that, list) else [that]
    items = [None]
    if "loop" in task:
        items = templar.template(trust_as_template(task["loop"]))
    for item in items:
        item_templar = role_templar(ROOT, "dcgm", item=item, **variables)
        if not all(item_templar.evaluate_conditional(trust_as_template(t)) for t in that):
            return False
    return True


SETTINGS = "Refuse a counters file setting the exporter cannot start with"
EXTRAS = "Refuse extra counters dcgm-exporter would not read"


@pytest.mark.parametrize("extra", [
    [],
    EXTRA,
    [{"field": "DCGM_EXP_XID_ERRORS_COUNT", "type": "counter", "help": "Count of XID errors within user-specified time window"}],
])
def test_sound_extra_counters_pass(extra):
    assert _holds(_task("set_vars", SETTINGS), dcgm_exporter_extra_counters=extra)
    assert _holds(_task("set_vars", EXTRAS), dcgm_exporter_extra_counters=extra)


@pytest.mark.parametrize("extra", [
    # a comma or a quote makes more than three CSV fields, or a bare quote: dcgm-exporter does not start
    [{"field": "DCGM_FI_DEV_POWER_VIOLATION", "type": "counter", "help": "Throttling, power (in us)."}],
    [{"field": "DCGM_FI_DEV_POWER_VIOLATION", "type": "counter", "help": 'Throttling "power" (in us).'}],
    [{"field": "DCGM_FI_DEV_POWER_VIOLATION", "type": "counter", "help": "Throttling\nduration"}],
    [{"field": "DCGM_FI_DEV_POWER_VIOLATION", "type": "counter", "help": "  "}],
    # not a field name
    [{"field": "dcgm_fi_dev_power_violation", "type": "counter", "help": "x"}],
    [{"field": "DCGM_FI_DEV_POWER VIOLATION", "type": "counter", "help": "x"}],
    # already in the role's file, or given twice
    [{"field": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "type": "counter", "help": "again"}],
    EXTRA + [EXTRA[0]],
])
def test_extra_counters_the_exporter_would_refuse_are_refused(extra):
    assert not _holds(_task("set_vars", EXTRAS), dcgm_exporter_extra_counters=extra)


def test_the_settings_of_the_file_are_checked():
    task = _task("set_vars", SETTINGS)
    assert _holds(task)
    # the operator's own file, or no -f at all
    assert _holds(task, dcgm_exporter_collectors_manage=False, dcgm_exporter_collectors_file="/etc/site/counters.csv")
    assert _holds(task, dcgm_exporter_collectors_manage=False, dcgm_exporter_collectors_file=None)
    # the role cannot write a file without a path, nor extra counters into a file it does not write
    assert not _holds(task, dcgm_exporter_collectors_file=None)
    assert not _holds(task, dcgm_exporter_collectors_manage=False, dcgm_exporter_extra_counters=EXTRA)
    # an exporter that is not run is not checked
    assert _holds(task, dcgm_exporter_enabled=False, dcgm_exporter_collectors_file=None)


# ------------------------------------------------------------------------------------------------ how the role uses it

def _config_task(name):
    return _task("config", name)


def test_the_file_is_written_only_when_the_role_manages_it_and_a_change_restarts_the_exporter():
    task = _config_task("Write dcgm-exporter's counters file (its default counters plus the error counters the alerts read)")
    args = task["ansible.builtin.template"]
    assert args["src"] == TEMPLATE and args["mode"] == "0644"
    for enabled in (True, False):
        for manage in (True, False):
            templar = role_templar(ROOT, "dcgm", dcgm_exporter_enabled=enabled, dcgm_exporter_collectors_manage=manage,
                                   dcgm_exporter_collectors_file="/etc/site/counters.csv")
            assert templar.evaluate_conditional(trust_as_template(task["when"])) is (enabled and manage), (enabled, manage)
            assert templar.template(trust_as_template(args["dest"])) == "/etc/site/counters.csv"
    assert task["notify"] == "Restart dcgm-exporter"
    handlers = load_yaml(ROLE, "handlers", "main.yml")
    assert [h["listen"] for h in handlers if h["name"] == "Restart dcgm-exporter"] == ["Restart dcgm-exporter"]


OVERWRITE = "Refuse to overwrite a counters file the role did not write"


def test_a_counters_file_the_role_did_not_write_is_never_overwritten(rendered):
    """Before the role wrote one, dcgm_exporter_collectors_file was always the operator's own file."""
    task = _config_task(OVERWRITE)
    slurp = _config_task("Read the counters file there now")
    assert slurp["ansible.builtin.slurp"]["src"] == "{{ dcgm_exporter_collectors_file }}"
    assert slurp["register"] == "__dcgm_register_collectors_current" and slurp["failed_when"] is False

    def read(text):
        if text is None:  # no file there: slurp failed, which the task ignores
            return {"failed": True, "msg": "file not found"}
        return {"content": base64.b64encode(text.encode()).decode(), "encoding": "base64"}

    assert _holds(task, __dcgm_register_collectors_current=read(None))
    assert _holds(task, __dcgm_register_collectors_current=read(rendered))
    assert _holds(task, __dcgm_register_collectors_current=read(render(dcgm_exporter_extra_counters=EXTRA)))
    assert not _holds(task, __dcgm_register_collectors_current=read(
        "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"))
    # the operator's own file is read only to check it is there, never written
    assert _holds(task, dcgm_exporter_collectors_manage=False, __dcgm_register_collectors_current=read("x\n"))
    tasks = yaml.safe_load(read_text(ROLE, "tasks", "config.yml"))
    order = [t["name"] for t in tasks]
    assert order.index("Read the counters file there now") < order.index(OVERWRITE) < order.index(
        "Write dcgm-exporter's counters file (its default counters plus the error counters the alerts read)")


def _unit(**variables):
    # where the exporter listens is decided by clusterforge.gpu.web_listen_address (tests/unit/plugins/plugin_utils/
    # test_web_security.py); here the node's management address, as the role's vars compute it
    variables.setdefault("__dcgm_exporter_listen_address", "10.77.0.21")
    variables.setdefault("__dcgm_exporter_listen", "10.77.0.21:9400")
    return render_role_template(ROOT, "dcgm", "etc/systemd/system/dcgm-exporter.service.j2", **variables)


def test_the_unit_passes_the_file_with_f_and_the_web_configuration():
    (start,) = [line for line in _unit().splitlines() if line.startswith("ExecStart=")]
    assert start == ("ExecStart=/usr/bin/dcgm-exporter -r unix:///run/nvidia-dcgm/nv-hostengine.sock "
                     "-a 10.77.0.21:9400 -f /etc/dcgm-exporter/clusterforge-counters.csv "
                     "--web-config-file /etc/clusterforge/monitoring/web-config.yml")
    (start,) = [line for line in _unit(dcgm_exporter_collectors_manage=False, dcgm_exporter_collectors_file="/etc/site/c.csv")
                .splitlines() if line.startswith("ExecStart=")]
    assert " -f /etc/site/c.csv --web-config-file " in start
    (start,) = [line for line in _unit(dcgm_exporter_collectors_manage=False, dcgm_exporter_collectors_file=None,
                                       dcgm_exporter_web_config_file=None, dcgm_hostengine_socket_path=None)
                .splitlines() if line.startswith("ExecStart=")]
    assert start == "ExecStart=/usr/bin/dcgm-exporter -r localhost:5555 -a 10.77.0.21:9400"


def test_the_unit_is_sandboxed_unless_switched_off():
    lines = _unit().splitlines()
    assert {"NoNewPrivileges=yes", "ProtectSystem=full", "ProtectHome=yes", "PrivateTmp=yes"} <= set(lines)
    lines = _unit(dcgm_exporter_sandboxing=False).splitlines()
    assert "NoNewPrivileges=yes" in lines and not any(line.startswith(("Protect", "PrivateTmp")) for line in lines)


def test_defaults_and_spec_agree():
    defaults = load_yaml(ROLE, "defaults", "main.yml")
    spec = load_yaml(ROLE, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert defaults["dcgm_exporter_collectors_file"] == spec["dcgm_exporter_collectors_file"]["default"] == \
        "/etc/dcgm-exporter/clusterforge-counters.csv"
    assert defaults["dcgm_exporter_collectors_manage"] is spec["dcgm_exporter_collectors_manage"]["default"] is True
    assert defaults["dcgm_exporter_extra_counters"] == spec["dcgm_exporter_extra_counters"]["default"] == []
    assert spec["dcgm_exporter_extra_counters"]["options"]["type"]["choices"] == ["gauge", "counter", "label"]
