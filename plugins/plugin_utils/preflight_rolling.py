# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Preflight rules: rolling (work in progress)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def check(inv, opts):
    """Errors of this rule set: a list of "<host or inventory>: <variable>: <rule>" strings."""
    return []
