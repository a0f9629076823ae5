# ClusterForge TEST EMULATOR helper: not a real tool. Test-only; installed only into lab and molecule containers.
"""The emulated node's own identity, which its GPU UUIDs and serials and its HCA GUIDs derive from.

Empty by default: every lab node then shows the same hardware identifiers, as the lab always has. The scale lab
(tests/bench/scale.py) clones one converged GPU node many times; each clone must look like its own machine, so its
image holds /etc/clusterforge-emu/identity with the text ``@hostname``: the identity is then the container's host
name. Any other text is used as it is. $CLUSTERFORGE_EMU_IDENTITY_FILE overrides the path (unit tests).
"""

import hashlib
import os
import socket

IDENTITY_FILE = "/etc/clusterforge-emu/identity"


def identity():
    try:
        with open(os.environ.get("CLUSTERFORGE_EMU_IDENTITY_FILE", IDENTITY_FILE)) as handle:
            text = handle.read().strip()
    except OSError:
        return ""
    return socket.gethostname().split(".")[0] if text == "@hostname" else text


def seeded(text):
    """text, prefixed with the node's identity when it has one (so an empty identity changes nothing)."""
    ident = identity()
    return "%s/%s" % (ident, text) if ident else text


def digest(text):
    return hashlib.sha1(seeded(text).encode()).hexdigest()
