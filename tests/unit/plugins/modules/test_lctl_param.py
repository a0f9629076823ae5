"""lctl_param module tests: a scripted lctl printing the real get_param (path=value per device), error and
`llog_print params` formats; set_param changes its state, so read-back and idempotence are tested."""

import fnmatch

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import lctl_param

OSC = ["osc.cflab-OST0000-osc-ffff9a1c2e4d7000", "osc.cflab-OST0001-osc-ffff9a1c2e4d7000"]


def no_param(pattern):
    return 2, "", "error: get_param: param_path '%s': No such file or directory\n" % pattern.replace(".", "/")


class FakeLctl(object):
    def __init__(self, live=None, llog=None, sticks=True, mgs=True):
        self.live = dict(live or {})      # device path -> value
        self.llog = list(llog or [])      # [(parameter, value or None)]
        self.sticks = sticks
        self.mgs = mgs

    def match(self, pattern):
        pat = pattern.split(".")
        return sorted(p for p in self.live if len(p.split(".")) == len(pat)
                      and all(fnmatch.fnmatchcase(h, q) for h, q in zip(p.split("."), pat)))

    def llog_text(self):
        out = []
        for pos, (name, value) in enumerate(self.llog):
            if value is None:
                out.append("- { index: %d, event: set_param, device: general, parameter: %s }" % (pos + 2, name))
            else:
                out.append("- { index: %d, event: set_param, device: general, parameter: %s, value: %s }"
                           % (pos + 2, name, value))
        return "".join(line + "\n" for line in out)

    def __call__(self, argv, data):
        args = argv[1:]
        if args == ["--device", "MGS", "llog_print", "params"]:
            if not self.mgs:
                return 19, "", "error: llog_print: Can't find device 'MGS': No such device\n"
            return 0, self.llog_text(), ""
        if args[0] == "get_param":
            assert len(args) == 2 and not args[1].startswith("-")
            hits = self.match(args[1])
            if not hits:
                return no_param(args[1])
            return 0, "".join("%s=%s\n" % (p, self.live[p]) for p in hits), ""
        if args[:2] == ["set_param", "-P"]:
            if args[2] == "-d":
                for name in args[3:]:
                    self.llog.append((name, None))
            else:
                for pair in args[2:]:
                    self.llog.append(tuple(pair.split("=", 1)) if self.sticks else (pair.split("=")[0], "0"))
            return 0, "", ""
        if args[0] == "set_param":
            for pair in args[1:]:
                pattern, value = pair.split("=", 1)
                for p in self.match(pattern):
                    if self.sticks:
                        self.live[p] = value
            return 0, "", ""
        raise AssertionError(argv)


def client(values=("8", "8"), read_ahead="64"):
    live = dict(("%s.max_rpcs_in_flight" % o, v) for o, v in zip(OSC, values))
    live["llite.cflab-ffff9a1c2e4d7000.max_read_ahead_mb"] = read_ahead
    return live


def run(args, fake, **kw):
    tool = Tool(fake)
    return run_module(lctl_param, args, tool, **kw), tool


TUNINGS = {"osc.*.max_rpcs_in_flight": 32, "llite.*.max_read_ahead_mb": 1024}


def test_runtime_sets_what_differs_in_one_call_then_idempotent():
    fake = FakeLctl(client(values=("8", "32"), read_ahead="1024"))
    result, tool = run({"params": TUNINGS}, fake)
    assert result["changed"] is True and "failed" not in result, result
    assert tool.calls[2] == ["/usr/bin/lctl", "set_param", "osc.*.max_rpcs_in_flight=32"]
    assert result["cmd"] == "/usr/bin/lctl set_param 'osc.*.max_rpcs_in_flight=32'"
    assert tool.count("get_param") == 3  # two reads, one read-back of the changed parameter
    osc = result["params"][0]
    assert osc["changed"] is True and osc["value"] == "32"
    assert sorted(osc["before"].values()) == ["32", "8"] and set(osc["after"].values()) == {"32"}
    assert result["params"][1]["changed"] is False
    again, tool2 = run({"params": TUNINGS}, fake)
    assert again["changed"] is False and again["cmd"] is None and tool2.count("set_param") == 0


def test_runtime_check_mode_and_diff():
    fake = FakeLctl(client())
    result, tool = run({"params": TUNINGS}, fake, check_mode=True, diff=True)
    assert result["changed"] is True and tool.count("set_param") == 0 and tool.count("get_param") == 2
    assert result["cmd"] == "/usr/bin/lctl set_param 'osc.*.max_rpcs_in_flight=32' 'llite.*.max_read_ahead_mb=1024'"
    before, after = result["diff"]["before"], result["diff"]["after"]
    assert before["llite.*.max_read_ahead_mb"] == {"llite.cflab-ffff9a1c2e4d7000.max_read_ahead_mb": "64"}
    assert after["llite.*.max_read_ahead_mb"] == {"llite.cflab-ffff9a1c2e4d7000.max_read_ahead_mb": "1024"}
    assert fake.live == client()


def test_diff_only_in_diff_mode():
    result, _tool = run({"params": TUNINGS}, FakeLctl(client()))
    assert "diff" not in result


def test_booleans_are_written_as_numbers():
    fake = FakeLctl({"osc.cflab-OST0000-osc-ffff9a1c2e4d7000.checksums": "0"})
    result, tool = run({"params": {"osc.*.checksums": True}}, fake)
    assert result["changed"] is True and tool.calls[1][-1] == "osc.*.checksums=1"


def test_runtime_unknown_parameter_fails():
    result, tool = run({"params": {"osc.*.no_such_param": 1}}, FakeLctl(client()))
    assert result["failed"] is True and "No such file or directory" in result["msg"]
    assert "is the file system mounted" in result["msg"] and tool.count("set_param") == 0


def test_runtime_value_that_does_not_stick_fails():
    result, _tool = run({"params": TUNINGS}, FakeLctl(client(), sticks=False))
    assert result["failed"] is True and result["changed"] is True and "did not stick" in result["msg"]
    assert "osc.*.max_rpcs_in_flight=32 (now 8)" in result["msg"]


def test_persistent_sets_what_the_llog_lacks_then_idempotent():
    fake = FakeLctl(llog=[("obdfilter.*.brw_size", "4"), ("osc.*.max_dirty_mb", "512")])
    args = {"params": {"obdfilter.*.brw_size": 16, "osc.*.max_dirty_mb": 512}, "persistent": True}
    result, tool = run(args, fake)
    assert result["changed"] is True
    assert tool.calls == [["/usr/bin/lctl", "--device", "MGS", "llog_print", "params"],
                          ["/usr/bin/lctl", "set_param", "-P", "obdfilter.*.brw_size=16"],
                          ["/usr/bin/lctl", "--device", "MGS", "llog_print", "params"]]
    assert [(p["name"], p["before"], p["after"], p["changed"]) for p in result["params"]] == [
        ("obdfilter.*.brw_size", "4", "16", True), ("osc.*.max_dirty_mb", "512", "512", False)]
    again, tool2 = run(args, fake)
    assert again["changed"] is False and tool2.count("set_param") == 0 and tool2.count("llog_print") == 1


def test_persistent_deleted_record_is_absent_and_set_again():
    fake = FakeLctl(llog=[("osc.*.max_dirty_mb", "512"), ("osc.*.max_dirty_mb", None)])
    result, tool = run({"params": {"osc.*.max_dirty_mb": 512}, "persistent": True}, fake, check_mode=True, diff=True)
    assert result["changed"] is True and tool.count("set_param") == 0
    assert result["diff"] == {"before": {"osc.*.max_dirty_mb": None}, "after": {"osc.*.max_dirty_mb": "512"},
                              "before_header": "MGS params log", "after_header": "MGS params log"}


def test_persistent_absent_deletes_then_idempotent():
    fake = FakeLctl(llog=[("osc.*.max_dirty_mb", "512"), ("obdfilter.*.brw_size", "16")])
    args = {"params": ["osc.*.max_dirty_mb", "llite.*.statahead_max"], "persistent": True, "state": "absent"}
    result, tool = run(args, fake)
    assert result["changed"] is True
    assert tool.calls[1] == ["/usr/bin/lctl", "set_param", "-P", "-d", "osc.*.max_dirty_mb"]
    assert [(p["name"], p["before"], p["after"]) for p in result["params"]] == [
        ("osc.*.max_dirty_mb", "512", None), ("llite.*.statahead_max", None, None)]
    again, tool2 = run(args, fake)
    assert again["changed"] is False and tool2.count("set_param") == 0


def test_persistent_absent_accepts_a_dict():
    fake = FakeLctl(llog=[("osc.*.max_dirty_mb", "512")])
    result, _tool = run({"params": {"osc.*.max_dirty_mb": None}, "persistent": True, "state": "absent"}, fake,
                        check_mode=True)
    assert result["changed"] is True and result["cmd"] == "/usr/bin/lctl set_param -P -d 'osc.*.max_dirty_mb'"


def test_persistent_without_mgs_fails():
    result, tool = run({"params": {"obdfilter.*.brw_size": 16}, "persistent": True}, FakeLctl(mgs=False))
    assert result["failed"] is True and "the MGS must run on this node" in result["msg"]
    assert tool.count("set_param") == 0


def test_persistent_value_not_logged_fails():
    result, _tool = run({"params": {"obdfilter.*.brw_size": 16}, "persistent": True}, FakeLctl(sticks=False))
    assert result["failed"] is True and "does not show: obdfilter.*.brw_size=16 (logged 0)" in result["msg"]


@pytest.mark.parametrize("args, needle", [
    ({"params": {"osc.*.max_rpcs_in_flight": 8}, "state": "absent"}, "needs persistent=true"),
    ({"params": ["osc.*.max_rpcs_in_flight"]}, "must be a dict"),
    ({"params": {}}, "params is empty"),
    ({"params": {"max_rpcs_in_flight": 8}}, "not an lctl parameter name"),
    ({"params": {"osc.*.x=1 osc.*.y": 8}}, "not an lctl parameter name"),
    ({"params": {"osc.*.max_rpcs_in_flight": None}}, "must be a string, number or boolean"),
    ({"params": {"osc.*.max_rpcs_in_flight": "a\nb"}}, "one non-empty line"),
    ({"params": {"osc.*.max_rpcs_in_flight": [1]}}, "must be a string, number or boolean"),
])
def test_bad_input_fails_before_any_command(args, needle):
    result, tool = run(args, FakeLctl(client()))
    assert result["failed"] is True and needle in result["msg"] and tool.calls == []
