"""Secure defaults on the converged lab (issue 39): what a job user on a node, or root on another node, may not do,
each attempt also made the owner's way so that a refusal can be told from a broken lab. Not destructive; under a
minute. Unprivileged attempts run as nobody (setpriv), the lab having no job accounts."""

import json
import os
import subprocess

import pytest

from labkit import ENV, http_get, monitoring_credentials, podman_exec  # pylint: disable=import-error

# A machine on the management network that is no cluster node: no inventory entry, no munge key, no credentials.
OUTSIDER = "cf-lab-outsider"
OUTSIDER_IP = "10.77.0.99"
LAB_IMAGE = "localhost/clusterforge-lab:%s" % os.environ.get("CF_LAB_SUITE", "trixie")
AS_NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
SECRETS = {"head01": ["/etc/munge/munge.key", "/etc/clusterforge/secrets/monitoring_web_credentials.json",
                      "/etc/clusterforge/secrets/slurmdbd_storage_pass", "/etc/slurm/slurmdbd.conf",
                      "/etc/prometheus/clusterforge-web.password"],
           "gpu01": ["/etc/munge/munge.key"]}
# POST a silence (argv: url, user, password or nothing); prints the HTTP status and the body.
POST_SILENCE = """import base64, json, sys, urllib.error, urllib.request
body = json.dumps({"matchers": [{"name": "alertname", "value": "TargetDown", "isRegex": False}],
                   "startsAt": "2020-01-01T00:00:00Z", "endsAt": "2099-01-01T00:00:00Z",
                   "createdBy": "lab-security", "comment": "test_lab_security"}).encode()
req = urllib.request.Request(sys.argv[1] + "/api/v2/silences", data=body, headers={"Content-Type": "application/json"})
if len(sys.argv) > 2:
    req.add_header("Authorization", "Basic " + base64.b64encode((sys.argv[2] + ":" + sys.argv[3]).encode()).decode())
try:
    resp = urllib.request.urlopen(req, timeout=10)
    sys.stdout.write("%d\\n%s" % (resp.status, resp.read().decode()))
except urllib.error.HTTPError as exc:
    sys.stdout.write("%d\\n%s" % (exc.code, exc.read().decode()))
"""
DELETE = """import base64, sys, urllib.request
req = urllib.request.Request(sys.argv[1], method="DELETE")
req.add_header("Authorization", "Basic " + base64.b64encode((sys.argv[2] + ":" + sys.argv[3]).encode()).decode())
sys.stdout.write(str(urllib.request.urlopen(req, timeout=10).status))
"""
CONNECT = """import socket, sys
s = socket.socket()
s.settimeout(5)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    sys.stdout.write("open")
except ConnectionRefusedError:
    sys.stdout.write("refused")
"""


@pytest.mark.parametrize("host", sorted(SECRETS))
def test_a_job_user_reads_no_secret_and_root_does(converged, host):  # pylint: disable=unused-argument
    for path in SECRETS[host]:
        rc, _out = podman_exec(host, "test", "-s", path)
        assert rc == 0, "%s:%s missing: the lab is not converged" % (host, path)
        rc, out = podman_exec(host, *(AS_NOBODY + ["cat", path]))
        assert rc != 0 and out == "", (host, path, "readable by nobody")


def test_alertmanager_refuses_a_silence_without_the_web_user(converged):  # pylint: disable=unused-argument
    url = "http://127.0.0.1:9093"
    rc, out = podman_exec("head01", *(AS_NOBODY + ["python3", "-c", POST_SILENCE, url]))
    assert rc == 0 and out.split("\n", 1)[0] == "401", out
    user, password = monitoring_credentials()
    rc, out = podman_exec("head01", "python3", "-c", POST_SILENCE, url, user, password)
    status, _sep, body = out.partition("\n")
    assert rc == 0 and status == "200", out
    silence = json.loads(body)["silenceID"]
    rc, out = podman_exec("head01", "python3", "-c", DELETE, "%s/api/v2/silence/%s" % (url, silence), user, password)
    assert rc == 0 and out == "200", out


def test_exporters_refuse_other_nodes_without_the_web_user(converged):  # pylint: disable=unused-argument
    auth = monitoring_credentials()
    for src, url in (("gpu02", "http://10.77.0.21:9100/metrics"), ("stor01", "http://10.77.0.21:9400/metrics"),
                     ("gpu01", "http://10.77.0.10:9090/api/v1/query?query=up")):
        assert http_get(src, url)[0] == 401, (src, url)
        assert http_get(src, url, auth)[0] == 200, (src, url)


def test_mariadb_answers_on_its_socket_only(converged):  # pylint: disable=unused-argument
    rc, out = podman_exec("head01", "python3", "-c", CONNECT, "127.0.0.1", "3306")
    assert rc == 0 and out == "refused", out
    rc, out = podman_exec("head01", "mariadb", "--batch", "--skip-column-names", "-e",
                          "SELECT COUNT(*) FROM mysql.user WHERE user = ''")
    assert rc == 0 and out.strip() == "0", out


def test_a_job_user_cannot_clear_the_dcgm_health_watches_and_root_can(converged):  # pylint: disable=unused-argument
    """nv-hostengine listens on a socket in a root-only directory and on no TCP port (dcgm_hostengine_socket_path):
    a job user reaches it neither way, so the watches the health check relies on stay; root clears and sets them."""
    host = "unix:///run/nvidia-dcgm/nv-hostengine.sock"
    rc, out = podman_exec("gpu01", "stat", "-c", "%U %a", "/run/nvidia-dcgm")
    assert rc == 0 and out.split() == ["root", "700"], out
    rc, out = podman_exec("gpu01", "cat", "/etc/clusterforge/dcgm-hostengine")
    assert rc == 0 and out.strip() == host, out

    def watches():
        rc, out = podman_exec("gpu01", "dcgmi", "health", "--host", host, "-f")
        assert rc == 0, out
        return [line.split("|")[1].strip() for line in out.splitlines() if line.count("|") == 3 and "| On " in line]

    before = watches()
    assert "PCIe" in before and "Memory" in before, before
    for argv in (["dcgmi", "health", "--host", host, "--clear"], ["dcgmi", "health", "--clear"]):
        rc, out = podman_exec("gpu01", *(AS_NOBODY + argv))
        assert rc == 247 and "unable to establish a connection to the specified host" in out, (argv, rc, out)
    assert watches() == before
    rc, out = podman_exec("gpu01", "python3", "-c", CONNECT, "127.0.0.1", "5555")
    assert rc == 0 and out == "refused", out
    # the owner's way: root clears them, and sets them back as the dcgm role does
    rc, out = podman_exec("gpu01", "dcgmi", "health", "--host", host, "--clear")
    assert rc == 0 and watches() == [], out
    rc, out = podman_exec("gpu01", "dcgmi", "health", "--host", host, "-s", "a")
    assert rc == 0 and watches() == before, out


def test_no_one_else_can_plant_a_file_where_the_storage_test_writes(converged):  # pylint: disable=unused-argument
    path = "/mnt/cflab/checkpoints/validate"
    rc, out = podman_exec("gpu01", "stat", "-c", "%u %a", path)
    if rc != 0:
        pytest.skip("validation has not run on this lab yet (%s missing)" % path)
    assert out.split() == ["0", "700"], out
    rc, _out = podman_exec("gpu01", *(AS_NOBODY + ["ln", "-s", "/etc/passwd", path + "/cf-validate-gpu01.bin"]))
    assert rc != 0, "nobody planted a link where root writes"
    rc, _out = podman_exec("gpu01", "test", "-w", path)
    assert rc == 0   # root (the owner's way) may


@pytest.fixture(scope="module")
def outsider(converged):  # pylint: disable=unused-argument
    """A container of the lab's image on the lab's management network, started for this test and removed after."""
    subprocess.run(["podman", "rm", "-f", "-t", "0", OUTSIDER], env=ENV, capture_output=True, timeout=120, check=False)
    proc = subprocess.run(["podman", "run", "-d", "--rm", "--name", OUTSIDER, "--hostname", OUTSIDER,
                           "--network", "%s:ip=%s" % (os.environ.get("CF_LAB_NETWORK", "cflab"), OUTSIDER_IP),
                           LAB_IMAGE, "sleep", "900"], env=ENV, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    yield OUTSIDER
    subprocess.run(["podman", "rm", "-f", "-t", "0", OUTSIDER], env=ENV, capture_output=True, timeout=120, check=False)


def test_a_machine_on_the_management_network_gets_nothing_without_the_web_user(outsider):
    """From outside the cluster: every web endpoint on the management address asks for the web user (and answers the
    owner who has it); Alertmanager and MariaDB do not listen there at all (the owner reaches them on head01 itself,
    as the tests above do)."""
    auth = monitoring_credentials()
    for url in ("http://10.77.0.21:9100/metrics", "http://10.77.0.21:9400/metrics",
                "http://10.77.0.10:9090/api/v1/query?query=up", "http://10.77.0.10:9100/metrics"):
        assert http_get(outsider, url)[0] == 401, url
        assert http_get(outsider, url, auth)[0] == 200, url
    for port in ("9093", "3306"):
        rc, out = podman_exec(outsider, "python3", "-c", CONNECT, "10.77.0.10", port)
        assert rc == 0 and out == "refused", (port, out)
    # The same probe reaches a port that does listen there, so "refused" is the daemon's address, not the network.
    rc, out = podman_exec(outsider, "python3", "-c", CONNECT, "10.77.0.10", "9090")
    assert rc == 0 and out == "open", out
