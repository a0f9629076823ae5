# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""How many times a task with ``until`` polls to wait a given time: the one rule every wait of the roles uses."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError


def _whole(value, what):
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise AnsibleFilterError("poll_count: %s must be a number of seconds, got %r" % (what, value))
    if number != int(number):
        raise AnsibleFilterError("poll_count: %s must be whole seconds, got %r" % (what, value))
    return int(number)


def poll_count(seconds, interval_seconds):
    """The retries of a task that polls every ``interval_seconds`` and may wait ``seconds`` in all: seconds divided
    by the interval, rounded up (a wait never ends before its time), at least 1."""
    total = _whole(seconds, "the time to wait")
    interval = _whole(interval_seconds, "the interval")
    if total < 0:
        raise AnsibleFilterError("poll_count: the time to wait must not be negative, got %d" % total)
    if interval < 1:
        raise AnsibleFilterError("poll_count: the interval must be at least 1 second, got %d" % interval)
    return max(1, -(-total // interval))


class FilterModule(object):
    def filters(self):
        return {"poll_count": poll_count}
