"""lfs_stripe module tests: scripted lfs replies in the real getstripe formats, every argv recorded."""

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import lfs_stripe

PLAIN_4_4M = ("lmm_stripe_count:  4\nlmm_stripe_size:   4194304\nlmm_pattern:       raid0\n"
              "lmm_layout_gen:    0\nlmm_stripe_offset: -1\n")
PLAIN_1_1M = ("lmm_stripe_count:  1\nlmm_stripe_size:   1048576\nlmm_pattern:       raid0\n"
              "lmm_layout_gen:    0\nlmm_stripe_offset: -1\n")


def pfl_yaml(comps):
    lines = ["  lcm_layout_gen:    %d" % len(comps), "  lcm_mirror_count:  1", "  lcm_entry_count:   %d" % len(comps)]
    start = 0
    for i, (end, count, size) in enumerate(comps):
        lines += ["  component%d:" % i, "    lcme_id:             N/A", "    lcme_mirror_id:      N/A",
                  "    lcme_flags:          0", "    lcme_extent.e_start: %d" % start,
                  "    lcme_extent.e_end:   %s" % ("EOF" if end is None else end), "    sub_layout:",
                  "      lmm_stripe_count:  %d" % count, "      lmm_stripe_size:   %d" % size,
                  "      lmm_pattern:       raid0", "      lmm_layout_gen:    0", "      lmm_stripe_offset: -1", ""]
        start = end
    return "\n".join(lines) + "\n"


PFL_WANTED = pfl_yaml([(256 << 20, 1, 1 << 20), (16 << 30, 4, 1 << 20), (None, -1, 4 << 20)])
PFL_ARGS = {"components": [{"end": "256M", "stripe_count": 1}, {"end": "16G", "stripe_count": 4},
                           {"end": "-1", "stripe_count": -1, "stripe_size": "4M"}]}


class FakeLfs(object):
    """getstripe answers from a list (before, after...); setstripe succeeds unless told otherwise."""

    def __init__(self, *getstripe_outputs, setstripe=(0, "", "")):
        self.outputs = list(getstripe_outputs)
        self.setstripe = setstripe

    def __call__(self, argv, data):
        if argv[1] == "getstripe":
            return 0, self.outputs.pop(0) if len(self.outputs) > 1 else self.outputs[0], ""
        if argv[1] == "setstripe":
            return self.setstripe
        raise AssertionError(argv)


def run(args, handler, **kw):
    tool = Tool(handler)
    return run_module(lfs_stripe, args, tool, **kw), tool


def test_plain_changed_sets_and_reads_back(tmp_path):
    result, tool = run({"path": str(tmp_path), "stripe_count": 4, "stripe_size": "4M"}, FakeLfs("", PLAIN_4_4M))
    assert result["changed"] is True and "failed" not in result
    assert tool.calls == [["/usr/bin/lfs", "getstripe", "-y", "-d", str(tmp_path)],
                          ["/usr/bin/lfs", "setstripe", "-c", "4", "-S", "4M", str(tmp_path)],
                          ["/usr/bin/lfs", "getstripe", "-y", "-d", str(tmp_path)]]
    assert result["previous_layout"]["components"] == []
    assert result["layout"]["components"][0]["stripe_count"] == 4
    assert result["cmd"] == "/usr/bin/lfs setstripe -c 4 -S 4M %s" % tmp_path


def test_plain_unchanged_runs_no_setstripe(tmp_path):
    result, tool = run({"path": str(tmp_path), "stripe_count": 4, "stripe_size": 4194304}, FakeLfs(PLAIN_4_4M))
    assert result["changed"] is False and result["cmd"] is None
    assert tool.count("setstripe") == 0 and tool.count("getstripe") == 1


def test_unset_options_are_not_compared(tmp_path):
    result, tool = run({"path": str(tmp_path), "stripe_count": 4}, FakeLfs(PLAIN_4_4M))
    assert result["changed"] is False and tool.count("setstripe") == 0


def test_stripe_size_difference_is_a_change(tmp_path):
    result, tool = run({"path": str(tmp_path), "stripe_count": 4, "stripe_size": "1M"},
                       FakeLfs(PLAIN_4_4M, PLAIN_4_4M.replace("4194304", "1048576")))
    assert result["changed"] is True and tool.count("setstripe") == 1


def test_check_mode_reads_but_never_writes(tmp_path):
    result, tool = run({"path": str(tmp_path), "stripe_count": -1}, FakeLfs(PLAIN_1_1M), check_mode=True, diff=True)
    assert result["changed"] is True
    assert tool.count("setstripe") == 0 and tool.count("getstripe") == 1
    assert result["layout"]["components"][0]["stripe_count"] == -1
    assert result["diff"]["before"]["components"][0]["stripe_count"] == 1
    assert result["diff"]["after"]["components"][0]["stripe_count"] == -1
    assert result["cmd"].endswith("setstripe -c -1 %s" % tmp_path)


def test_diff_only_in_diff_mode(tmp_path):
    result, _tool = run({"path": str(tmp_path), "stripe_count": 4, "stripe_size": "4M"}, FakeLfs("", PLAIN_4_4M))
    assert "diff" not in result
    result, _tool = run({"path": str(tmp_path), "stripe_count": 4, "stripe_size": "4M"}, FakeLfs("", PLAIN_4_4M),
                        diff=True)
    assert result["diff"]["before"]["components"] == []
    assert result["diff"]["after"]["components"][0]["stripe_size"] == 4194304


def test_pfl_components_command(tmp_path):
    result, tool = run(dict(PFL_ARGS, path=str(tmp_path)), FakeLfs(PLAIN_1_1M, PFL_WANTED))
    assert result["changed"] is True, result
    assert tool.calls[1] == ["/usr/bin/lfs", "setstripe", "-E", "256M", "-c", "1", "-E", "16G", "-c", "4",
                             "-E", "-1", "-c", "-1", "-S", "4M", str(tmp_path)]
    assert len(result["layout"]["components"]) == 3


def test_pfl_idempotent(tmp_path):
    result, tool = run(dict(PFL_ARGS, path=str(tmp_path)), FakeLfs(PFL_WANTED))
    assert result["changed"] is False and tool.count("setstripe") == 0


def test_pfl_different_extent_is_a_change(tmp_path):
    current = pfl_yaml([(128 << 20, 1, 1 << 20), (16 << 30, 4, 1 << 20), (None, -1, 4 << 20)])
    result, tool = run(dict(PFL_ARGS, path=str(tmp_path)), FakeLfs(current, PFL_WANTED))
    assert result["changed"] is True and tool.count("setstripe") == 1


def test_absent_restores_default(tmp_path):
    result, tool = run({"path": str(tmp_path), "state": "absent"}, FakeLfs(PLAIN_4_4M, ""))
    assert result["changed"] is True
    assert tool.calls[1] == ["/usr/bin/lfs", "setstripe", "-d", str(tmp_path)]
    assert result["layout"]["components"] == [] and result["previous_layout"]["components"]


def test_absent_already_default_accepts_message_output(tmp_path):
    result, tool = run({"path": str(tmp_path), "state": "absent"}, FakeLfs("%s has no stripe info\n" % tmp_path))
    assert result["changed"] is False and tool.count("setstripe") == 0


def test_absent_check_mode(tmp_path):
    result, tool = run({"path": str(tmp_path), "state": "absent"}, FakeLfs(PLAIN_4_4M), check_mode=True)
    assert result["changed"] is True and tool.count("setstripe") == 0 and result["layout"]["components"] == []


def test_readback_mismatch_fails(tmp_path):
    result, tool = run({"path": str(tmp_path), "stripe_count": 4, "stripe_size": "4M"}, FakeLfs("", PLAIN_1_1M))
    assert result["failed"] is True and "did not stick" in result["msg"]
    assert tool.count("setstripe") == 1 and tool.count("getstripe") == 2


def test_absent_readback_mismatch_fails(tmp_path):
    result, _tool = run({"path": str(tmp_path), "state": "absent"}, FakeLfs(PLAIN_4_4M, PLAIN_4_4M))
    assert result["failed"] is True and "did not stick" in result["msg"]


def test_setstripe_error_fails_with_command(tmp_path):
    err = "error: bad stripe count 4096: Invalid argument (22)"
    result, _tool = run({"path": str(tmp_path), "stripe_count": 4}, FakeLfs("", setstripe=(22, "", err)))
    assert result["failed"] is True and result["rc"] == 22 and err in result["msg"]
    assert "setstripe" in result["cmd"]


@pytest.mark.parametrize("args,needle", [
    ({"stripe_size": "100000"}, "multiple of 64K"),
    ({"stripe_size": "banana"}, "not a size"),
    ({"stripe_count": -3}, "must be -1"),
    ({"components": [{"end": "16G"}, {"end": "256M"}, {"end": "-1"}]}, "must increase"),
    ({"components": [{"end": "256M"}, {"end": "16G"}]}, "must end at EOF"),
    ({"components": [{"end": "256M"}, {"end": "-1"}], "stripe_count": 4}, "mutually exclusive"),
    ({"state": "absent", "stripe_count": 2}, "cannot be used with state=absent"),
    ({}, "stripe_count"),
])
def test_bad_input_fails_before_any_command(tmp_path, args, needle):
    result, tool = run(dict(args, path=str(tmp_path)), FakeLfs(PLAIN_1_1M))
    assert result["failed"] is True and needle in result["msg"]
    assert tool.calls == []


def test_path_must_be_an_existing_directory(tmp_path):
    missing = tmp_path / "nope"
    result, tool = run({"path": str(missing), "stripe_count": 2}, FakeLfs(""))
    assert result["failed"] and "does not exist" in result["msg"] and tool.calls == []
    afile = tmp_path / "f"
    afile.write_text("x")
    result, tool = run({"path": str(afile), "stripe_count": 2}, FakeLfs(""))
    assert result["failed"] and "not a directory" in result["msg"] and tool.calls == []


def test_lfs_missing(tmp_path):
    tool = Tool(FakeLfs(""), missing=["lfs"])
    result = run_module(lfs_stripe, {"path": str(tmp_path), "stripe_count": 2}, tool)
    assert result["failed"] and "lfs was not found" in result["msg"] and tool.calls == []


def test_lfs_path_override_and_getstripe_error(tmp_path):
    tool = Tool(lambda argv, data: (2, "", "lfs getstripe: cannot open '%s': No such device (19)" % argv[-1]))
    result = run_module(lfs_stripe, {"path": str(tmp_path), "stripe_count": 2, "lfs_path": "/opt/lustre/lfs"}, tool)
    assert result["failed"] and tool.calls[0][0] == "/opt/lustre/lfs" and "No such device" in result["msg"]
