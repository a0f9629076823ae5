"""module_utils/_files.py: the one atomic writer of the modules (lnet, sysctl_settings, nvidia_smi's state file)."""

import os
import shutil

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils._files import write_atomic


class Failed(Exception):
    pass


class FakeModule(object):
    """atomic_move as AnsibleModule does it for a same-file-system rename; fail_json raises."""

    def __init__(self, params=None):
        self.params = params or {}
        self.failure = None

    def atomic_move(self, src, dest, unsafe_writes=False):
        shutil.move(src, dest)

    def fail_json(self, **kw):
        self.failure = kw
        raise Failed(kw["msg"])


def test_replaces_the_file_with_the_mode_asked_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "lnet.conf"
    path.write_text("old\n")
    os.chmod(str(path), 0o600)
    write_atomic(FakeModule(), str(path), u"new\n", mode=0o644)
    assert path.read_text() == "new\n"
    assert os.stat(str(path)).st_mode & 0o7777 == 0o644
    assert sorted(os.listdir(str(tmp_path))) == ["lnet.conf"]


def test_a_missing_directory_fails_naming_it_unless_asked_to_create_it(tmp_path):
    module = FakeModule()
    target = tmp_path / "etc" / "clusterforge" / "state.json"
    with pytest.raises(Failed):
        write_atomic(module, str(target), "{}\n", changed=True, cmd=["nvidia-smi -pm 1"])
    assert "the directory %s does not exist" % target.parent in module.failure["msg"]
    assert module.failure["changed"] is True and module.failure["cmd"] == ["nvidia-smi -pm 1"]
    write_atomic(module, str(target), "{}\n", mode=0o644, make_dirs=True)
    assert target.read_text() == "{}\n"


def test_a_failed_rename_fails_the_module_and_removes_the_temporary(tmp_path):
    module = FakeModule()

    def broken(src, dest, unsafe_writes=False):
        raise OSError(13, "Permission denied")

    module.atomic_move = broken
    with pytest.raises(Failed):
        write_atomic(module, str(tmp_path / "f"), "x")
    assert "cannot write %s: " % (tmp_path / "f") in module.failure["msg"]
    assert os.listdir(str(tmp_path)) == []
