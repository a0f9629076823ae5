"""module_utils/progress.py: the progress file of a module in the background."""

import json
import os

from ansible_collections.clusterforge.gpu.plugins.module_utils.progress import ProgressFile


def test_written_replaced_and_removed_and_a_failed_write_does_not_stop_the_work(tmp_path):
    path = tmp_path / "run" / "p.json"
    progress = ProgressFile(str(path))
    progress.write("round 1")
    progress.write("round 2")
    assert json.loads(path.read_text()) == {"progress": "round 2"}
    # The directory is gone (a write that cannot be made): the work goes on, nothing is raised.
    os.close(progress.fd)
    progress.fd = os.open(str(tmp_path), os.O_RDONLY)
    os.chmod(str(tmp_path / "run"), 0o700)
    progress.name = "missing-dir/p.json"
    progress.write("round 3")
    progress.name = "p.json"
    progress.close()
    assert not (tmp_path / "p.json").exists()


def test_no_path_does_nothing():
    progress = ProgressFile(None)
    progress.write("x")
    progress.close()
