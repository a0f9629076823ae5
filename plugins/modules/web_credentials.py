#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: web_credentials
short_description: Keep one generated web user, its password and the password's bcrypt hash in a root-only file
version_added: "1.0.0"
description:
  - Keeps a JSON file, mode 0600 and owned by root, holding a user name, a generated password and the bcrypt hash of
    that password, as the Prometheus web configuration (exporter-toolkit C(basic_auth_users)) needs it. The file is
    the single source of the credentials the monitoring daemons check and Prometheus sends.
  - A missing file is created with a new random password (32 letters and digits). An existing file is kept as it is
    when its hash matches its password, so the hash (salted, different at every hashing) stays the same from run to
    run and nothing is restarted. A hash that does not match its password (edited by hand) is made again from the
    password; a different O(username) is written without changing the password.
  - Hashes with the Python C(bcrypt) library (Debian and Ubuntu C(python3-bcrypt)), else with the C library's
    C(crypt) where it offers bcrypt (Python 3.12 and older). Fails naming the package when neither is there.
author: ClusterForge developers (@clusterforge)
requirements:
  - python3-bcrypt (the Python bcrypt library) on the host, or a Python 3.12 or older whose crypt module offers bcrypt
extends_documentation_fragment:
  - clusterforge.gpu.attributes
attributes:
  check_mode:
    support: full
    details:
      - A file that would be created returns no password and no hash (there is none yet).
  diff_mode:
    support: none
options:
  path:
    description: The credentials file (JSON). Its directory is created root-only (0700) when missing.
    type: path
    required: true
  username:
    description: The web user name.
    type: str
    required: true
notes:
  - Run it with C(no_log), the password is returned.
"""

EXAMPLES = r"""
- name: The monitoring web user (generated once on the monitoring server)
  clusterforge.gpu.web_credentials:
    path: /etc/clusterforge/secrets/monitoring_web.json
    username: clusterforge
  register: __monitoring_register_credentials
  no_log: true
"""

RETURN = r"""
username:
  description: The user name.
  returned: always
  type: str
  sample: clusterforge
password:
  description: The password (null in check mode when the file does not exist yet).
  returned: always
  type: str
password_hash:
  description: The bcrypt hash of the password (null in check mode when the file does not exist yet).
  returned: always
  type: str
  sample: "$2b$12$...."
action:
  description: What was done, C(keep), C(generate), C(rehash) or C(rename).
  returned: always
  type: str
  sample: keep
"""

import json
import os
import secrets
import string
import tempfile

from ansible.module_utils.basic import AnsibleModule

PASSWORD_LENGTH = 32
_ALPHABET = string.ascii_letters + string.digits


def _bcrypt_backend():
    """(hash(password) -> str, verify(password, hash) -> bool) or None."""
    try:
        import bcrypt  # pylint: disable=import-outside-toplevel

        return (lambda pw: bcrypt.hashpw(pw.encode(), bcrypt.gensalt(rounds=12)).decode(),
                lambda pw, h: bcrypt.checkpw(pw.encode(), h.encode()))
    except ImportError:
        pass
    try:
        import crypt  # pylint: disable=import-outside-toplevel,deprecated-module

        method = getattr(crypt, "METHOD_BLOWFISH", None)
        if method is not None and method in getattr(crypt, "methods", []):
            return (lambda pw: crypt.crypt(pw, crypt.mksalt(method, rounds=1 << 12)),
                    lambda pw, h: crypt.crypt(pw, h) == h)
    except ImportError:
        pass
    return None


def plan(existing, username, verify):
    """What to do with the credentials file: (action, record). existing: the file's parsed content or None.
    verify(password, hash) -> bool. Actions: keep, rename (new user name, same password and hash), rehash (the
    hash does not match the password), generate (no file, or one without a usable password)."""
    if not isinstance(existing, dict) or not isinstance(existing.get("password"), str) or len(existing["password"]) < 16:
        return "generate", None
    record = dict(existing)
    pw_hash = record.get("password_hash")
    try:
        matches = isinstance(pw_hash, str) and verify(record["password"], pw_hash)
    except ValueError:
        matches = False
    if not matches:
        return "rehash", record
    if record.get("username") != username:
        record["username"] = username
        return "rename", record
    return "keep", record


def _write(path, record):
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".web_credentials.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(record, handle, sort_keys=True)
            handle.write("\n")
        os.rename(tmp, path)
    except Exception:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def main():
    module = AnsibleModule(argument_spec=dict(path=dict(type="path", required=True),
                                              username=dict(type="str", required=True)),
                           supports_check_mode=True)
    path, username = module.params["path"], module.params["username"]
    if not username or ":" in username:
        module.fail_json(msg="username must be non-empty and without ':' (HTTP basic auth), got %r" % username)
    existing = None
    if os.path.exists(path):
        try:
            with open(path) as handle:
                existing = json.load(handle)
        except ValueError:
            existing = None
    backend = _bcrypt_backend()
    action, record = plan(existing, username, backend[1] if backend else (lambda pw, h: False))
    result = dict(changed=action != "keep", action=action, username=username, password=None, password_hash=None)
    if action == "keep" or (action == "rename" and module.check_mode):
        result.update(password=record["password"], password_hash=record["password_hash"])
        module.exit_json(**result)
    # In check mode on a new server, bcrypt is one of the packages the role would install: report the plan.
    if backend is None and action != "rename" and not module.check_mode:
        module.fail_json(msg="no bcrypt on this host: install python3-bcrypt (the web password must be stored as a "
                             "bcrypt hash)", **result)
    if action == "generate":
        record = {"username": username,
                  "password": "".join(secrets.choice(_ALPHABET) for _index in range(PASSWORD_LENGTH))}
    if action in ("generate", "rehash"):
        if module.check_mode:
            if action == "rehash":
                result["password"] = record["password"]
            module.exit_json(**result)
        record["username"] = username
        record["password_hash"] = backend[0](record["password"])
    if not module.check_mode:
        _write(path, record)
    result.update(password=record["password"], password_hash=record["password_hash"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
