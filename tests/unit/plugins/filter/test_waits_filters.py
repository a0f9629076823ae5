# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""poll_count: the retries of every wait given in seconds."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter.waits import poll_count


def test_rounds_up_so_that_a_wait_never_ends_early():
    assert poll_count(3600, 10) == 360
    assert poll_count(3601, 10) == 361
    assert poll_count("1020", "10") == 102  # Ansible passes templated strings
    assert poll_count(1, 30) == 1
    assert poll_count(0, 5) == 1


@pytest.mark.parametrize("seconds,interval,words", [
    (-1, 10, "must not be negative"),
    (60, 0, "at least 1 second"),
    ("an hour", 10, "number of seconds"),
    (60, 2.5, "whole seconds"),
])
def test_refuses_what_is_not_a_wait(seconds, interval, words):
    with pytest.raises(AnsibleFilterError, match=words):
        poll_count(seconds, interval)
