# ClusterForge TEST EMULATOR helper: not a real tool. Test-only; installed only into lab and molecule containers.
"""The emulated node's own identity, which its GPU UUIDs and serials and its HCA GUIDs derive from.

Empty by default: every lab node then shows the same hardware identifiers, as the lab always has. The scale lab
(tests/bench/scale.py) clones one converged GPU node many times; each clone must look like its own machine, so its
image holds /etc/clusterforge-emu/identity with the text ``@hostname``: the identity is then the container's host
name. Any other text is used as it is. $CLUSTERFORGE_EMU_IDENTITY_FILE overrides the path (unit tests).

It also holds the hang switch every emulated tool obeys (:func:`hang_if_asked`): the file
$CLUSTERFORGE_EMU_STATE_DIR (default /var/lib/clusterforge-emu)/hang-<tool> makes <tool> never answer, as
nvidia-smi does when a GPU has fallen off the bus (a process in D state: it ignores SIGTERM; only the caller's
time limit ends the wait). ``rm`` the file to end it.
"""

import hashlib
import os
import signal
import socket
import time

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


def hang_if_asked(tool):
    """Never return when $CLUSTERFORGE_EMU_STATE_DIR/hang-<tool> exists: sleep with SIGTERM ignored (SIGKILL ends
    it, as the caller's time limit does; a real D-state process would not even die then, which the caller must
    not wait for either)."""
    state_dir = os.environ.get("CLUSTERFORGE_EMU_STATE_DIR", "/var/lib/clusterforge-emu")
    if not os.path.exists(os.path.join(state_dir, "hang-%s" % tool)):
        return
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(3600)
