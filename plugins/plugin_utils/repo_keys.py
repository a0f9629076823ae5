# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""PRIVATE to clusterforge.gpu: whether a downloaded repository signing key is the one pinned by fingerprint."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re


def normalize_fingerprint(value):
    """Upper-case hex without spaces ('EB69 3B30 ...' -> 'EB693B30...'); ValueError when it is not 40 hex digits."""
    fpr = re.sub(r"\s+", "", str(value or "")).upper()
    if not re.match(r"^[0-9A-F]{40}$", fpr):
        raise ValueError("a key fingerprint is 40 hexadecimal digits (v4 OpenPGP), got %r" % (value,))
    return fpr


def primary_fingerprints(colons):
    """The primary keys' fingerprints in `gpg --batch --show-keys --with-colons FILE` output (the fpr line that
    follows each pub line; subkeys' fpr lines follow sub lines and are not counted)."""
    fprs, after_pub = [], False
    for line in (colons or "").splitlines():
        fields = line.split(":")
        if fields[0] == "pub":
            after_pub = True
        elif fields[0] == "fpr" and after_pub and len(fields) > 9:
            fprs.append(fields[9].upper())
            after_pub = False
        elif fields[0] in ("sub", "sec", "ssb"):
            after_pub = False
    return fprs


def key_problem(colons, expected, what="the key"):
    """Why the downloaded key file is refused ('' when it holds exactly the pinned key)."""
    want = normalize_fingerprint(expected)
    found = primary_fingerprints(colons)
    if not found:
        return "%s holds no OpenPGP public key" % what
    if found != [want]:
        return "%s has the fingerprint(s) %s, not the pinned %s" % (what, ", ".join(found), want)
    return ""
