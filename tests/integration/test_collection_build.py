"""`ansible-galaxy collection build` works and the artefact carries no venv, lab cache or test output."""

import os
import subprocess
import tarfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, ".venv", "bin")


def test_build_excludes_local_state(tmp_path):
    proc = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--force",
                           "--output-path", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (artefact,) = [p for p in tmp_path.iterdir() if p.name.endswith(".tar.gz")]
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as handle:
        version = yaml.safe_load(handle)["version"]
    assert artefact.name == "clusterforge-gpu-%s.tar.gz" % version
    with tarfile.open(artefact) as tar:
        names = tar.getnames()
    assert "MANIFEST.json" in names and "FILES.json" in names
    for forbidden in (".venv/", ".cache/", "tests/lab/cache/", ".git/", "__pycache__", "tests/output/"):
        assert not [n for n in names if forbidden in n + "/"], forbidden
    for expected in ("plugins/modules/nvidia_smi.py", "roles/common_os/tasks/main.yml", "site.yml",
                     "meta/runtime.yml", "playbooks/preflight.yml", "LICENSE"):
        assert expected in names, expected
