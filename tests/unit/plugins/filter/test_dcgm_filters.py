# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The dcgm role's checks of its settings are preflight's and the modules' rules (module_utils/dcgm.py)."""

import pytest

from ansible_collections.clusterforge.gpu.plugins.filter.dcgm import FilterModule
from ansible_collections.clusterforge.gpu.plugins.module_utils import dcgm

FILTERS = FilterModule().filters()


@pytest.mark.parametrize("path, ok", [
    (None, True), ("/run/nvidia-dcgm/nv-hostengine.sock", True),
    ("/run/x/../y", False), ("/run/../x", False), ("/run/x/.", False),   # the role's old regex let these through
    ("/var/run/dcgm/x.sock", False), ("/run/x.sock", False), ("/run/a/b/c", False)])
def test_the_socket_path_rule_is_the_modules(path, ok):
    problem = FILTERS["dcgm_socket_path_problem"](path)
    assert (problem is None) is ok
    if path is not None:
        assert problem == dcgm.socket_path_problem(path)


@pytest.mark.parametrize("letters, ok", [
    ("a", True), ("pmitndx", True), ("pm", True), ("", False), ("pmp", False), ("pz", False), ("A", False),
    (5, False)])
def test_the_watch_letters_rule_is_the_modules(letters, ok):
    problem = FILTERS["dcgm_watches_problem"](letters)
    assert (problem is None) is ok
    if isinstance(letters, str):
        assert problem == dcgm.validate_watch_letters(letters)
