# -*- coding: utf-8 -*-
# Copyright (c) 2026 ClusterForge contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only connection of the container lab: run each command inside a lab container with nsenter.

Why it exists: on the 2-core lab machine one `podman exec` costs about 0.4 s (podman, conmon and runc start for
every call) and the podman connection plugin makes two or three such calls per task and host, without
pipelining. nsenter into the namespaces of the container's init costs about 5 ms and takes the module on stdin
(pipelining), so a warm site.yml spends its time in Ansible instead of in podman. Real clusters use SSH
(inventories/example); nothing under roles/ or plugins/ depends on this transport.

What a command sees is what `podman exec` gives it: every namespace of the container (mount, UTS, IPC, network,
PID, cgroup), the container's root and the environment of the container's init process. It needs root on the lab
machine (rootful podman, as the lab is).
"""

from __future__ import annotations

DOCUMENTATION = r"""
name: cf_lab_nsenter
short_description: Test-only lab transport, runs tasks in a local podman container through nsenter
description:
  - Runs commands in a running podman container on this machine by entering the namespaces of its init process
    with C(nsenter), with the container's root and environment. Modules are piped to the remote Python.
  - Used by the container lab only (inventories/lab); real clusters use SSH.
author: ClusterForge contributors
options:
  remote_addr:
    description: The name of the container.
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
  podman_executable:
    description: The podman binary used once per container to find its init process.
    default: podman
    vars:
      - name: ansible_podman_executable
    env:
      - name: ANSIBLE_PODMAN_EXECUTABLE
  pipelining:
    description: Pipe modules to the remote Python instead of copying them first.
    default: true
    type: boolean
    vars:
      - name: ansible_pipelining
"""

import json
import os
import shlex
import subprocess
import tempfile

from ansible.errors import AnsibleConnectionFailure, AnsibleError, AnsibleFileNotFound
from ansible.module_utils.common.text.converters import to_bytes, to_native
from ansible.plugins.connection import ConnectionBase
from ansible.utils.display import Display

display = Display()

# Container name -> init PID, shared by the forked workers of a run and by later runs. An entry is trusted only
# while that PID still has the start time recorded with it, so a restarted container is looked up again.
CACHE_DIR = os.path.join(tempfile.gettempdir(), "clusterforge-lab-pids-%d" % os.getuid())
NSENTER = "nsenter"


def _start_time(pid):
    """The start time (clock ticks since boot) of a process, or None when there is no such process."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as handle:
            stat = handle.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    # The command name (field 2) may hold spaces; the fields after it are plain numbers.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


class Connection(ConnectionBase):
    """Local nsenter transport into a podman container of the lab."""

    transport = "cf_lab_nsenter"
    has_pipelining = True

    def __init__(self, play_context, new_stdin, *args, **kwargs):
        super(Connection, self).__init__(play_context, new_stdin, *args, **kwargs)
        self._pid = None
        self._env = None

    def _container(self):
        return self.get_option("remote_addr") or self._play_context.remote_addr

    def _cached_pid(self, name):
        try:
            with open(os.path.join(CACHE_DIR, name), "r") as handle:
                entry = json.load(handle)
            pid = int(entry["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return pid if entry.get("start") is not None and _start_time(pid) == entry.get("start") else None

    def _lookup_pid(self, name):
        argv = [self.get_option("podman_executable"), "inspect", "--type", "container", "--format", "{{.State.Pid}}", name]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise AnsibleConnectionFailure("cannot inspect container %s: %s" % (name, exc))
        pid = proc.stdout.strip()
        if proc.returncode != 0 or not pid.isdigit() or int(pid) == 0:
            raise AnsibleConnectionFailure("container %s is not running (podman inspect rc=%d: %s)"
                                           % (name, proc.returncode, (proc.stderr or proc.stdout).strip()))
        pid = int(pid)
        start = _start_time(pid)
        try:
            os.makedirs(CACHE_DIR, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=CACHE_DIR)
            with os.fdopen(fd, "w") as handle:
                json.dump({"pid": pid, "start": start}, handle)
            os.replace(tmp, os.path.join(CACHE_DIR, name))
        except OSError as exc:
            display.vvv("could not cache the PID of %s: %s" % (name, exc))
        return pid

    @staticmethod
    def _environ(pid):
        with open("/proc/%d/environ" % pid, "rb") as handle:
            return handle.read()

    def _connect(self):
        if self._connected:
            return self
        if os.geteuid() != 0:
            raise AnsibleConnectionFailure("cf_lab_nsenter needs root on the lab machine (the lab uses rootful podman)")
        name = self._container()
        cached = self._cached_pid(name)
        pid = cached or self._lookup_pid(name)
        try:
            raw = self._environ(pid)
        except OSError as exc:
            if cached is None:
                raise AnsibleConnectionFailure("cannot read the environment of container %s (pid %d): %s"
                                               % (name, pid, exc))
            # The cached process ended between its check and the read (the container was stopped or replaced since):
            # ask podman again, once.
            display.vvv("cached PID %d of %s is gone (%s): looking it up again" % (pid, name, exc), host=name)
            pid = self._lookup_pid(name)
            try:
                raw = self._environ(pid)
            except OSError as again:
                raise AnsibleConnectionFailure("cannot read the environment of container %s (pid %d): %s"
                                               % (name, pid, again))
        env = {}
        for item in raw.split(b"\0"):
            key, sep, value = item.partition(b"=")
            if sep:
                env[to_native(key)] = to_native(value, errors="surrogate_or_strict")
        env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        env.setdefault("HOME", "/root")
        self._pid = pid
        self._env = env
        self._connected = True
        display.vvv("ESTABLISH NSENTER CONNECTION to %s (pid %d)" % (name, pid), host=name)
        return self

    def _run(self, shell_cmd, in_data=None):
        # --root and --wd without a value take the init process's own (a path given to them would be a host path).
        argv = [NSENTER, "--target", str(self._pid), "--mount", "--uts", "--ipc", "--net", "--pid", "--cgroup",
                "--root", "--wd", "--", "/bin/sh", "-c", shell_cmd]
        display.vvv("EXEC %s" % shlex.join(argv[-3:]), host=self._container())
        try:
            proc = subprocess.run(argv, input=in_data, capture_output=True, env=self._env, check=False)
        except OSError as exc:
            raise AnsibleConnectionFailure("cannot run nsenter for %s: %s" % (self._container(), exc))
        return proc.returncode, proc.stdout, proc.stderr

    def exec_command(self, cmd, in_data=None, sudoable=True):
        super(Connection, self).exec_command(cmd, in_data=in_data, sudoable=sudoable)
        return self._run(to_native(cmd, errors="surrogate_or_strict"), in_data)

    def put_file(self, in_path, out_path):
        super(Connection, self).put_file(in_path, out_path)
        display.vvv("PUT %s TO %s" % (in_path, out_path), host=self._container())
        try:
            with open(to_bytes(in_path, errors="surrogate_or_strict"), "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise AnsibleFileNotFound("file or module does not exist: %s (%s)" % (in_path, exc))
        rc, stdout, stderr = self._run("cat > %s" % shlex.quote(out_path), data)
        if rc != 0:
            raise AnsibleError("failed to write %s in container %s: %s" % (out_path, self._container(), to_native(stderr)))

    def fetch_file(self, in_path, out_path):
        super(Connection, self).fetch_file(in_path, out_path)
        display.vvv("FETCH %s TO %s" % (in_path, out_path), host=self._container())
        rc, stdout, stderr = self._run("cat %s" % shlex.quote(in_path))
        if rc != 0:
            raise AnsibleError("failed to read %s in container %s: %s" % (in_path, self._container(), to_native(stderr)))
        with open(to_bytes(out_path, errors="surrogate_or_strict"), "wb") as handle:
            handle.write(stdout)

    def close(self):
        self._connected = False
