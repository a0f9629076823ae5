"""lnet module tests: a scripted lnetctl (the real `net show` YAML and error format) and a real file in tmp_path."""

import os

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import lnet
from ansible_collections.clusterforge.gpu.plugins.module_utils import lustre as L

# lnetctl's YAML error when LNet is not configured (as lnetctl prints errors: command, object, errno, descr)
DOWN = "show:\n    - net:\n          errno: -100\n          descr: \"cannot get networks: Network is down\"\n"


class FakeLnetctl(object):
    """Live nets: {net type: [interfaces]}; None = LNet not running. `net add` adds to them."""

    def __init__(self, nets, add_rc=0, add_sticks=True):
        self.nets = None if nets is None else dict((k, list(v)) for k, v in nets.items())
        self.add_rc = add_rc
        self.add_sticks = add_sticks

    def show(self):
        out = ["net:", "    - net type: lo", "      local NI(s):", "        - nid: 0@lo", "          status: up"]
        for net, ifaces in self.nets.items():
            out += ["    - net type: %s" % net, "      local NI(s):"]
            for pos, i in enumerate(ifaces):
                out += ["        - nid: 10.0.%d.5@%s" % (pos, net), "          status: up",
                        "          interfaces:", "              0: %s" % i,
                        "          statistics:", "              send_count: 0"]
        return "\n".join(out) + "\n"

    def __call__(self, argv, data):
        args = argv[1:]
        if args[:2] == ["net", "show"]:
            if self.nets is None:
                return 255, "", DOWN
            return 0, self.show(), ""
        if args[:2] == ["net", "add"]:
            if self.add_rc:
                return self.add_rc, "", "add:\n    - net:\n          errno: -19\n          descr: \"cannot add network: No such device\"\n"
            net = L.lnet_net_name(args[args.index("--net") + 1])
            if self.add_sticks:
                self.nets.setdefault(net, []).extend(args[args.index("--if") + 1].split(","))
            return 0, "", ""
        raise AssertionError(argv)


NETS = [{"net": "o2ib0", "interfaces": ["ib0", "ib1"]}, {"net": "tcp0", "interfaces": ["eth1"]}]


def run(args, fake, **kw):
    tool = Tool(fake)
    return run_module(lnet, args, tool, **kw), tool


def conf(tmp_path):
    return str(tmp_path / "lnet.conf")


def test_writes_file_and_adds_missing_interfaces_then_idempotent(tmp_path):
    fake = FakeLnetctl({"o2ib": ["ib0"]})
    args = {"networks": NETS, "config_path": conf(tmp_path)}
    result, tool = run(args, fake)
    assert result["changed"] is True and result["config_changed"] is True and result["running"] is True
    assert result["added"] == [{"net": "o2ib0", "interfaces": ["ib1"]}, {"net": "tcp0", "interfaces": ["eth1"]}]
    assert tool.calls[1:3] == [["/usr/bin/lnetctl", "net", "add", "--net", "o2ib0", "--if", "ib1"],
                               ["/usr/bin/lnetctl", "net", "add", "--net", "tcp0", "--if", "eth1"]]
    assert tool.count("net", "show") == 2  # read, read back
    text = open(conf(tmp_path)).read()
    assert text.startswith("# Managed by Ansible (clusterforge.gpu.lnet)")
    assert L.parse_lnetctl_net_show(text)["o2ib0"][1]["interfaces"] == ["ib1"]
    assert oct(os.stat(conf(tmp_path)).st_mode & 0o777) == "0o644"
    assert result["networks"]["o2ib"][1]["interfaces"] == ["ib1"]
    again, tool2 = run(args, fake)
    assert again["changed"] is False and again["added"] == [] and tool2.count("net", "add") == 0
    assert tool2.count("net", "show") == 1 and again["msg"] == "LNet has every network"


def test_lnet_not_running_only_writes_the_file(tmp_path):
    result, tool = run({"networks": NETS, "config_path": conf(tmp_path)}, FakeLnetctl(None))
    assert result["changed"] is True and result["running"] is False and result["added"] == []
    assert tool.count("net", "add") == 0 and os.path.exists(conf(tmp_path))
    assert "lnet.service imports" in result["msg"]
    again, _tool = run({"networks": NETS, "config_path": conf(tmp_path)}, FakeLnetctl(None))
    assert again["changed"] is False


def test_check_mode_writes_nothing_and_diffs(tmp_path):
    fake = FakeLnetctl({"o2ib": ["ib0", "ib1"]})
    result, tool = run({"networks": NETS, "config_path": conf(tmp_path)}, fake, check_mode=True, diff=True)
    assert result["changed"] is True and not os.path.exists(conf(tmp_path))
    assert tool.count("net", "add") == 0 and result["cmd"] == ["/usr/bin/lnetctl net add --net tcp0 --if eth1"]
    assert result["msg"] == "would add tcp0(eth1)"
    file_diff, live_diff = result["diff"]
    assert file_diff["before"] == "" and "net type: tcp0" in file_diff["after"]
    assert live_diff["before"] == {"lo": [], "o2ib": ["ib0", "ib1"]}
    assert live_diff["after"] == {"lo": [], "o2ib": ["ib0", "ib1"], "tcp": ["eth1"]}
    assert fake.nets == {"o2ib": ["ib0", "ib1"]}


def test_diff_only_in_diff_mode(tmp_path):
    result, _tool = run({"networks": NETS, "config_path": conf(tmp_path)}, FakeLnetctl({}))
    assert "diff" not in result


def test_unknown_live_networks_are_left_alone(tmp_path):
    fake = FakeLnetctl({"o2ib": ["ib0", "ib1"], "tcp": ["eth1"], "tcp5": ["eth9"]})
    result, tool = run({"networks": NETS, "persistent": False}, fake)
    assert result["changed"] is False and tool.calls == [["/usr/bin/lnetctl", "net", "show"]]


def test_changed_file_content_and_mode_are_fixed(tmp_path):
    path = conf(tmp_path)
    with open(path, "w") as f:
        f.write("net:\n    - net type: tcp0\n")
    os.chmod(path, 0o600)
    result, _tool = run({"networks": NETS, "config_path": path}, FakeLnetctl({"o2ib": ["ib0", "ib1"], "tcp": ["eth1"]}),
                        diff=True)
    assert result["changed"] is True and result["config_changed"] is True and result["added"] == []
    assert result["diff"][0]["before"] == "net:\n    - net type: tcp0\n"
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    again, _tool = run({"networks": NETS, "config_path": path}, FakeLnetctl({"o2ib": ["ib0", "ib1"], "tcp": ["eth1"]}))
    assert again["changed"] is False


def test_add_error_fails_with_command(tmp_path):
    result, _tool = run({"networks": NETS, "persistent": False}, FakeLnetctl({}, add_rc=255))
    assert result["failed"] is True and "No such device" in result["msg"] and "net add --net o2ib0" in result["cmd"]


def test_add_that_does_not_stick_fails(tmp_path):
    result, _tool = run({"networks": NETS, "persistent": False}, FakeLnetctl({}, add_sticks=False))
    assert result["failed"] is True and "still lacks o2ib0(ib0,ib1), tcp0(eth1)" in result["msg"]


def test_other_net_show_errors_fail(tmp_path):
    result, _tool = run({"networks": NETS, "persistent": False}, lambda argv, data: (1, "", "Permission denied\n"))
    assert result["failed"] is True and "lnetctl net show" in result["msg"]


def test_bad_input(tmp_path):
    for nets, needle in (([{"net": "o2ib0", "interfaces": []}], "needs one or more interface"),
                         ([{"net": "O2IB", "interfaces": ["ib0"]}], "not an LNet network name"),
                         ([{"net": "tcp0", "interfaces": ["eth0"]}, {"net": "tcp", "interfaces": ["eth1"]}],
                          "given twice")):
        result, tool = run({"networks": nets, "config_path": conf(tmp_path)}, FakeLnetctl({}))
        assert result["failed"] is True and needle in result["msg"] and tool.calls == []
        assert not os.path.exists(conf(tmp_path))


class FakeHost(FakeLnetctl):
    """lnetctl plus systemctl for one unit: LoadState, ActiveState, UnitFileState, NeedDaemonReload.

    Starting the unit configures LNet and imports the networks of `imports` (what the file holds), as the real
    lnet.service does; stopping it unconfigures LNet. `start_works=False`: the unit starts but LNet stays down.
    """

    def __init__(self, nets, load="loaded", active="inactive", enabled="disabled", reload_needed="no",
                 imports=None, start_works=True):
        super(FakeHost, self).__init__(nets)
        self.unit = dict(LoadState=load, ActiveState=active, UnitFileState=enabled, NeedDaemonReload=reload_needed)
        self.imports = imports if imports is not None else {"o2ib": ["ib0", "ib1"], "tcp": ["eth1"]}
        self.start_works = start_works
        self.on_disk = dict(self.unit, LoadState="loaded", NeedDaemonReload="no")

    def __call__(self, argv, data):
        if argv[0].endswith("systemctl"):
            verb = argv[1]
            if verb == "show":
                return 0, "".join("%s=%s\n" % kv for kv in sorted(self.unit.items())), ""
            if verb == "daemon-reload":
                self.unit = dict(self.on_disk)
                return 0, "", ""
            if verb == "enable":
                self.unit["UnitFileState"] = "enabled"
                return 0, "", ""
            if verb in ("start", "restart"):
                if verb == "restart" or self.unit["ActiveState"] != "active":
                    self.nets = dict((k, list(v)) for k, v in self.imports.items()) if self.start_works else None
                self.unit["ActiveState"] = "active"
                return 0, "", ""
            raise AssertionError(argv)
        return super(FakeHost, self).__call__(argv, data)


def systemctl_calls(tool):
    return [c[1:] for c in tool.calls if c[0].endswith("systemctl") and c[1] != "show"]


def net_shows(tool):
    return sum(1 for c in tool.calls if c[0].endswith("lnetctl") and c[1:3] == ["net", "show"])


def svc(tmp_path, **kw):
    return dict({"networks": NETS, "config_path": conf(tmp_path), "service": "lnet.service"}, **kw)


def test_service_new_node_enables_and_starts_the_unit_which_imports_the_file(tmp_path):
    fake = FakeHost(None)
    result, tool = run(svc(tmp_path), fake)
    assert result["changed"] is True and result["running"] is True and result["added"] == []
    assert result["service"] == {"name": "lnet.service", "daemon_reloaded": False, "enabled": True,
                                 "enabled_changed": True, "action": "started"}
    assert systemctl_calls(tool) == [["enable", "--", "lnet.service"], ["start", "--", "lnet.service"]]
    assert net_shows(tool) == 2  # before the start, and read back after it
    assert result["msg"] == "enabled lnet.service; started lnet.service (it imports %s)" % conf(tmp_path)
    assert result["networks"]["tcp"][0]["interfaces"] == ["eth1"]
    again, tool2 = run(svc(tmp_path), fake)
    assert again["changed"] is False and systemctl_calls(tool2) == [] and again["msg"] == "LNet has every network"


def test_service_active_but_lnet_unconfigured_is_restarted(tmp_path):
    fake = FakeHost(None, active="active", enabled="enabled")
    result, tool = run(svc(tmp_path, persistent=False), fake)
    assert result["changed"] is True and result["service"]["action"] == "restarted"
    assert systemctl_calls(tool) == [["restart", "--", "lnet.service"]] and result["running"] is True


def test_configured_lnet_is_never_restarted_missing_nets_are_added_live(tmp_path):
    fake = FakeHost({"o2ib": ["ib0"]}, active="active", enabled="enabled")
    result, tool = run(svc(tmp_path, persistent=False), fake)
    assert result["service"]["action"] == "none" and systemctl_calls(tool) == []
    assert result["added"] == [{"net": "o2ib0", "interfaces": ["ib1"]}, {"net": "tcp0", "interfaces": ["eth1"]}]


def test_configured_lnet_with_inactive_unit_is_enabled_not_started(tmp_path):
    fake = FakeHost({"o2ib": ["ib0", "ib1"], "tcp": ["eth1"]}, active="inactive", enabled="disabled")
    result, tool = run(svc(tmp_path, persistent=False), fake)
    assert systemctl_calls(tool) == [["enable", "--", "lnet.service"]]
    assert result["changed"] is True and result["service"]["action"] == "none"


def test_import_that_misses_a_network_is_completed_live(tmp_path):
    fake = FakeHost(None, imports={"o2ib": ["ib0", "ib1"]}, enabled="enabled")
    result, tool = run(svc(tmp_path), fake)
    assert result["service"]["action"] == "started" and result["added"] == [{"net": "tcp0", "interfaces": ["eth1"]}]
    assert net_shows(tool) == 3


def test_unit_that_starts_without_lnet_fails(tmp_path):
    result, _tool = run(svc(tmp_path, persistent=False), FakeHost(None, enabled="enabled", start_works=False))
    assert result["failed"] is True and "LNet is still not configured" in result["msg"]
    assert "journalctl -u lnet.service" in result["msg"]


def test_new_unit_file_is_loaded_with_a_daemon_reload(tmp_path, monkeypatch):
    monkeypatch.setattr(lnet, "unit_file_exists", lambda unit: True)
    fake = FakeHost(None, load="not-found", enabled="")
    fake.on_disk = dict(LoadState="loaded", ActiveState="inactive", UnitFileState="disabled", NeedDaemonReload="no")
    result, tool = run(svc(tmp_path, persistent=False), fake)
    assert systemctl_calls(tool) == [["daemon-reload"], ["enable", "--", "lnet.service"],
                                     ["start", "--", "lnet.service"]]
    assert result["service"]["daemon_reloaded"] is True and result["running"] is True
    fake2 = FakeHost({"o2ib": ["ib0", "ib1"], "tcp": ["eth1"]}, active="active", enabled="enabled", reload_needed="yes")
    again, tool2 = run(svc(tmp_path, persistent=False), fake2)
    assert systemctl_calls(tool2) == [["daemon-reload"]] and again["service"]["action"] == "none"


def test_missing_or_masked_unit_fails_before_any_change(tmp_path, monkeypatch):
    monkeypatch.setattr(lnet, "unit_file_exists", lambda unit: False)
    result, tool = run(svc(tmp_path, persistent=False), FakeHost(None, load="not-found", enabled=""))
    assert result["failed"] is True and "is not installed" in result["msg"] and systemctl_calls(tool) == []
    result, tool = run(svc(tmp_path, persistent=False), FakeHost(None, load="masked", enabled="masked"))
    assert result["failed"] is True and "systemctl unmask lnet.service" in result["msg"] and systemctl_calls(tool) == []


def test_service_check_mode_changes_nothing(tmp_path):
    fake = FakeHost(None)
    result, tool = run(svc(tmp_path), fake, check_mode=True, diff=True)
    assert result["changed"] is True and systemctl_calls(tool) == [] and fake.nets is None
    assert result["service"]["action"] == "started" and result["service"]["enabled_changed"] is True
    assert result["msg"].startswith("would enable lnet.service; would start lnet.service")
    assert result["diff"][1] == {"before_header": "lnet.service", "after_header": "lnet.service",
                                 "before": "enabled: false\nLNet configured: false\n",
                                 "after": "enabled: true\nLNet configured: true\n"}
    assert not os.path.exists(conf(tmp_path))


def test_bad_service_name_is_rejected(tmp_path):
    result, tool = run(svc(tmp_path, service="lnet; reboot"), FakeHost(None))
    assert result["failed"] is True and "not a systemd service unit name" in result["msg"] and tool.calls == []
