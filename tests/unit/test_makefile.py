"""The Makefile's phase banners are printed through the shell inside double quotes: a backtick or `$(` in one
would run as a command (the `make lab` banner once ran `make lab-down` and removed the lab it had just built)."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def phase_messages():
    with open(os.path.join(ROOT, "Makefile"), encoding="utf-8") as handle:
        return re.findall(r"\$\(call phase,(.*)\)\s*$", handle.read(), re.M)


def test_phase_banners_are_found():
    assert len(phase_messages()) > 5


def test_no_phase_banner_runs_a_command():
    bad = [msg for msg in phase_messages() if "`" in msg or "$$(" in msg or '"' in msg]
    assert not bad, "phase banners run through the shell in double quotes; these would execute: %s" % bad
