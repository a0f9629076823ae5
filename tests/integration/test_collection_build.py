"""`ansible-galaxy collection build` works and the artefact carries no venv, lab cache or test output."""

import os
import subprocess
import tarfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, ".venv", "bin")


def test_build_excludes_local_state(tmp_path):
    proc = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--force",
                           "--output-path", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (artefact,) = [p for p in tmp_path.iterdir() if p.name.endswith(".tar.gz")]
    assert artefact.name == "clusterforge-gpu-0.1.0.tar.gz"
    with tarfile.open(artefact) as tar:
        names = tar.getnames()
    assert "MANIFEST.json" in names and "FILES.json" in names
    for forbidden in (".venv/", ".cache/", "tests/lab/cache/", ".git/", "__pycache__", "tests/output/"):
        assert not [n for n in names if forbidden in n + "/"], forbidden
    for expected in ("plugins/modules/nvidia_smi.py", "roles/common_os/tasks/main.yml", "site.yml",
                     "meta/runtime.yml", "playbooks/preflight.yml"):
        assert expected in names, expected
