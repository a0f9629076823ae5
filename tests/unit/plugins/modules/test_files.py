# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""files against a scratch tree: every state, drift in content and mode, check and diff mode, bad input."""

import grp
import os
import pwd
import stat

from cf_module_helper import run_main

from ansible_collections.clusterforge.gpu.plugins.modules import files

USER = pwd.getpwuid(os.getuid()).pw_name
GROUP = grp.getgrgid(os.getgid()).gr_name


def entries(root):
    return [
        {"path": str(root / "etc" / "slurm"), "state": "directory", "owner": USER, "group": GROUP, "mode": "0750"},
        {"path": str(root / "etc" / "slurm" / "drop.conf"), "content": "[Service]\nX=1\n", "owner": USER,
         "group": GROUP, "mode": "0640"},
        {"path": str(root / "old.conf"), "state": "absent"},
    ]


def run(items, check_mode=False, diff=False):
    args = {"files": items, "_ansible_diff": diff}
    return run_main(files, args, check_mode=check_mode)


def mode_of(path):
    return stat.S_IMODE(os.stat(str(path)).st_mode)


def test_creates_writes_and_removes_then_a_second_run_changes_nothing(tmp_path):
    (tmp_path / "old.conf").write_text("stale\n")
    result = run(entries(tmp_path))
    assert result["changed"] is True
    assert result["changed_paths"] == [e["path"] for e in entries(tmp_path)]
    assert mode_of(tmp_path / "etc" / "slurm") == 0o750
    assert (tmp_path / "etc" / "slurm" / "drop.conf").read_text() == "[Service]\nX=1\n"
    assert mode_of(tmp_path / "etc" / "slurm" / "drop.conf") == 0o640
    assert not (tmp_path / "old.conf").exists()
    again = run(entries(tmp_path))
    assert again["changed"] is False and again["changed_paths"] == []


def test_check_mode_reports_the_same_changes_and_makes_none(tmp_path):
    (tmp_path / "old.conf").write_text("stale\n")
    result = run(entries(tmp_path), check_mode=True, diff=True)
    assert result["changed_paths"] == [e["path"] for e in entries(tmp_path)]
    assert not (tmp_path / "etc").exists() and (tmp_path / "old.conf").exists()
    afters = [d["after"] for d in result["diff"]]
    assert {"state": "directory"} in afters and "[Service]\nX=1\n" in afters and {"state": "absent"} in afters


def test_only_the_drifted_path_changes_with_its_diff(tmp_path):
    run(entries(tmp_path))
    drop = tmp_path / "etc" / "slurm" / "drop.conf"
    os.chmod(str(tmp_path / "etc" / "slurm"), 0o777)
    drop.write_text("[Service]\nX=2\n")
    result = run(entries(tmp_path), diff=True)
    assert result["changed_paths"] == [str(tmp_path / "etc" / "slurm"), str(drop)]
    assert mode_of(tmp_path / "etc" / "slurm") == 0o750
    assert drop.read_text() == "[Service]\nX=1\n"
    assert {"before": "[Service]\nX=2\n", "after": "[Service]\nX=1\n"}.items() <= result["diff"][1].items()
    assert result["diff"][0]["before"]["mode"] == "0777" and result["diff"][0]["after"]["mode"] == "0750"


def test_a_mode_only_drift_on_a_file_keeps_its_content(tmp_path):
    run(entries(tmp_path))
    drop = tmp_path / "etc" / "slurm" / "drop.conf"
    os.chmod(str(drop), 0o666)
    result = run(entries(tmp_path))
    assert result["changed_paths"] == [str(drop)]
    assert mode_of(drop) == 0o640 and drop.read_text() == "[Service]\nX=1\n"


def test_bad_input_is_rejected_before_anything_changes(tmp_path):
    items = entries(tmp_path)
    items[1]["mode"] = "420"  # what YAML makes of an unquoted 0644, as a string
    items.append({"path": "relative/path", "state": "directory"})
    items.append(dict(items[0]))
    items.append({"path": str(tmp_path / "x"), "state": "file"})
    result = run(items)
    assert result["failed"] is True
    assert len(result["problems"]) == 4, result["problems"]
    assert "nothing was changed" in result["msg"]
    assert not (tmp_path / "etc").exists()


def test_a_directory_with_files_in_it_is_not_removed(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "keep").write_text("x")
    result = run([{"path": str(tmp_path / "d"), "state": "absent"}])
    assert result["failed"] is True and "cannot remove" in result["msg"]
    assert (tmp_path / "d" / "keep").exists()


def test_a_file_where_a_directory_stands_fails_and_leaves_it(tmp_path):
    (tmp_path / "d").mkdir()
    result = run([{"path": str(tmp_path / "d"), "content": "x"}])
    assert result["failed"] is True and "is a directory, not a file" in result["msg"]
    assert (tmp_path / "d").is_dir()


def test_a_link_is_never_written_through(tmp_path):
    target = tmp_path / "target"
    target.write_text("keep\n")
    link = tmp_path / "link.conf"
    link.symlink_to(target)
    result = run([{"path": str(link), "content": "x\n"}])
    assert result["failed"] is True and "non-regular file" in result["msg"]
    assert target.read_text() == "keep\n"
    removed = run([{"path": str(link), "state": "absent"}])
    assert removed["changed_paths"] == [str(link)] and not link.is_symlink() and target.read_text() == "keep\n"


def test_a_file_that_cannot_be_read_fails_naming_it(tmp_path, monkeypatch):
    conf = tmp_path / "x.conf"
    conf.write_text("old\n")

    def refuse(path):
        raise IOError(13, "Permission denied")

    monkeypatch.setattr(files, "_read", refuse)
    result = run([{"path": str(conf), "content": "new\n"}])
    assert result["failed"] is True and result["msg"] == "cannot read %s: Permission denied" % conf
    assert conf.read_text() == "old\n"
