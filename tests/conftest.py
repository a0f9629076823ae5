"""Test-wide setup: make the checkout importable as ``ansible_collections.clusterforge.gpu``.

The Makefile makes the same link for ansible-playbook; doing it here too lets a developer run plain
``pytest tests/unit`` from a fresh clone.
"""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COLL_ROOT = os.path.join(ROOT, ".cache", "collections")
LINK = os.path.join(COLL_ROOT, "ansible_collections", "clusterforge", "gpu")

if not os.path.lexists(LINK):
    os.makedirs(os.path.dirname(LINK), exist_ok=True)
    os.symlink(ROOT, LINK)
if COLL_ROOT not in sys.path:
    sys.path.insert(0, COLL_ROOT)
# Site-wide collections (ansible.posix, community.general...) stay importable from site-packages: keep the
# namespace package open to both locations.
try:
    import ansible_collections  # noqa: E402

    extra = os.path.join(COLL_ROOT, "ansible_collections")
    if extra not in list(ansible_collections.__path__):
        ansible_collections.__path__.append(extra)
except ImportError:  # pragma: no cover - ansible package not installed
    pass

sys.path.insert(0, os.path.join(ROOT, "tests", "unit"))
# Test files may `from conftest import SAMPLES, EMULATORS`.
sys.path.insert(0, os.path.join(ROOT, "tests"))

SAMPLES = os.environ.get("CLUSTERFORGE_SAMPLES", os.path.join(os.path.dirname(ROOT), "shared", "fixtures"))
EMULATORS = os.path.join(ROOT, "tests", "lab", "emulators")
