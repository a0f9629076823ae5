# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Redfish BMC TEST EMULATOR (tests/lab/emulators/redfish-bmc), run as a process on a free localhost port:

* its profiles are the recorded public BIOS dumps (fixtures/bios), and it follows Redfish where the bios role
  relies on it (authentication, the read-only Bios resource, the settings object with ETag/If-Match, pending values
  applied by a ComputerSystem.Reset that boots the host, state kept across restarts);
* community.general's own redfish_info, redfish_config, redfish_command and xcc_redfish_command run against it
  unchanged (python -m, as Ansible would run them);
* the bios role runs end to end against it (ansible-playbook on localhost): read, check mode (nothing staged),
  stage, reset, read back; the refusal on a host using VFIO; credentials never in the output.
"""

import base64
import json
import os
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
EMULATORS = os.path.join(ROOT, "tests", "lab", "emulators")
EMULATOR = os.path.join(EMULATORS, "redfish-bmc")
FIX = os.path.join(ROOT, "tests", "unit", "plugins", "module_utils", "fixtures", "bios")
BIN = os.path.dirname(sys.executable)
PASSWORD = "Rf-only-in-tests-7b1e"  # distinctive: the role's output is searched for it
HEADER = "# ClusterForge TEST EMULATOR of a Redfish BMC: not a real BMC. Test-only; never installed by a role."
FIXTURES = {"dell": ("dell-r750-bios.json", "dell-r750-bios-settings.json"),
            "hpe": ("hpe-a42-bios.json", "hpe-a42-bios-settings.json"),
            "lenovo": ("lenovo-xcc-bios.json", "lenovo-xcc-bios-pending.json"),
            "supermicro": ("supermicro-x13-bios.json", "supermicro-x13-bios-sd.json")}
NO_VERIFY = ssl._create_unverified_context()  # pylint: disable=protected-access  # the emulator's cert is self-signed


def fixture(name):
    with open(os.path.join(FIX, name)) as f:
        return json.load(f)


class Bmc(object):
    """One emulator process; stopped by the fixture."""

    def __init__(self, tmp, profile="dell", *args):
        self.tmp = str(tmp)
        self.profile = profile
        self.state_file = os.path.join(self.tmp, "bmc-%s.json" % profile)
        self.args = list(args)
        self.proc = None
        self.start()

    def start(self, *extra):
        env = dict(os.environ, CF_EMU_BMC_PASSWORD=PASSWORD)
        self.proc = subprocess.Popen(  # pylint: disable=consider-using-with
            [sys.executable, EMULATOR, "--profile", self.profile, "--port", "0", "--state-file", self.state_file,
             "--log", os.path.join(self.tmp, "requests.log")] + self.args + list(extra),
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert "listening on https://127.0.0.1:" in line, (line, self.proc.stderr.read() if self.proc.poll() else "")
        self.url = line.split(" listening on ")[1].strip().rsplit("/redfish/v1/", 1)[0]
        self.baseuri = self.url[len("https://"):]

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        if self.proc:
            self.proc.stdout.close()
            self.proc.stderr.close()

    def request(self, method, path, body=None, auth=("admin", PASSWORD), headers=None):
        """(status, headers, json body or None)."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if auth:
            req.add_header("Authorization", "Basic " + base64.b64encode(("%s:%s" % auth).encode()).decode())
        if data is not None:
            req.add_header("Content-Type", "application/json")
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, context=NO_VERIFY, timeout=10) as resp:
                raw = resp.read()
                return resp.status, dict(resp.headers), json.loads(raw) if raw else None
        except urllib.error.HTTPError as e:
            raw = e.read()
            return e.code, dict(e.headers), json.loads(raw) if raw else None

    def get(self, path, **kw):
        status, headers, body = self.request("GET", path, **kw)
        assert status == 200, (path, status, body)
        return body, headers

    def uris(self):
        system = self.get("/redfish/v1/Systems/")[0]["Members"][0]["@odata.id"] if self.profile != "hpe" else \
            self.get("/redfish/v1/systems/")[0]["Members"][0]["@odata.id"]
        bios_uri = self.get(system)[0]["Bios"]["@odata.id"]
        settings_uri = self.get(bios_uri)[0]["@Redfish.Settings"]["SettingsObject"]["@odata.id"]
        return system, bios_uri, settings_uri


@pytest.fixture
def bmcs(tmp_path):
    started = []

    def start(profile="dell", *args):
        b = Bmc(tmp_path, profile, *args)
        started.append(b)
        return b
    yield start
    for b in started:
        b.stop()


def test_emulator_header_and_exec_bit():
    with open(EMULATOR) as f:
        lines = f.read().splitlines()
    assert lines[0] == "#!/usr/bin/env python3"
    assert lines[1] == HEADER
    assert os.access(EMULATOR, os.X_OK)


# -- the profiles are the recorded dumps --------------------------------------------------------------------------

@pytest.mark.parametrize("profile", sorted(FIXTURES))
def test_profile_serves_the_recorded_attributes_uris_and_pending_form(bmcs, profile):
    bios_fix, settings_fix = (fixture(n) for n in FIXTURES[profile])
    bmc = bmcs(profile, "--recorded-pending")
    _system, bios_uri, settings_uri = bmc.uris()
    bios = bmc.get(bios_uri)[0]
    assert bios["Attributes"] == bios_fix["Attributes"]
    assert bios["AttributeRegistry"] == bios_fix["AttributeRegistry"]
    assert bios_uri == bios_fix["@odata.id"]
    assert settings_uri == bios_fix["@Redfish.Settings"]["SettingsObject"]["@odata.id"]
    served = bmc.get(settings_uri)[0].get("Attributes")
    recorded = settings_fix.get("Attributes")
    if profile in ("hpe", "lenovo"):  # a full copy: every recorded attribute with the recorded value
        assert {k: served[k] for k in recorded} == recorded
    else:  # only the changes (Dell's two; Supermicro's SD has no Attributes at all)
        assert served == recorded


def test_service_root_names_the_vendor_as_the_real_ones_do(bmcs):
    assert bmcs("dell").get("/redfish/v1/", auth=None)[0]["Vendor"] == "Dell"
    assert "Hpe" in bmcs("hpe").get("/redfish/v1/", auth=None)[0]["Oem"]
    system = bmcs("lenovo").get("/redfish/v1/Systems/1")[0]
    assert system["Manufacturer"] == "Lenovo" and system["PowerState"] == "On"


# -- authentication ----------------------------------------------------------------------------------------------

def test_authentication_basic_and_session(bmcs):
    bmc = bmcs("dell")
    assert bmc.request("GET", "/redfish/v1/", auth=None)[0] == 200
    status, headers, body = bmc.request("GET", "/redfish/v1/Systems", auth=None)
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    assert body["error"]["code"] == "Base.1.8.NoValidSession"
    assert bmc.request("GET", "/redfish/v1/Systems", auth=("admin", "wrong"))[0] == 401
    assert bmc.request("GET", "/redfish/v1/Systems")[0] == 200
    status, headers, body = bmc.request("POST", "/redfish/v1/SessionService/Sessions", auth=None,
                                        body={"UserName": "admin", "Password": PASSWORD})
    assert status == 201 and headers["Location"] == body["@odata.id"]
    token = headers["X-Auth-Token"]
    assert bmc.request("GET", "/redfish/v1/Systems", auth=None, headers={"X-Auth-Token": token})[0] == 200
    assert bmc.request("DELETE", body["@odata.id"], auth=None, headers={"X-Auth-Token": token})[0] == 204
    assert bmc.request("GET", "/redfish/v1/Systems", auth=None, headers={"X-Auth-Token": token})[0] == 401
    assert bmc.request("POST", "/redfish/v1/SessionService/Sessions", auth=None,
                       body={"UserName": "admin", "Password": "nope"})[0] == 401
    with open(os.path.join(bmc.tmp, "requests.log")) as f:
        log = f.read()
    assert "GET /redfish/v1/Systems" in log and PASSWORD not in log and token not in log


# -- the settings object -----------------------------------------------------------------------------------------

def test_bios_is_read_only_and_the_settings_object_stages_all_or_nothing(bmcs):
    bmc = bmcs("hpe")
    _system, bios_uri, settings_uri = bmc.uris()
    status, headers, body = bmc.request("PATCH", bios_uri, body={"Attributes": {"Sriov": "Disabled"}})
    assert status == 405 and settings_uri in body["error"]["message"]
    status, _h, body = bmc.request("PATCH", settings_uri, body={"Attributes": {"Sriov": "Disabled", "NoSuch": "X"}})
    assert status == 400 and body["error"]["code"] == "Base.1.8.PropertyUnknown"
    status, _h, body = bmc.request("PATCH", settings_uri, body={"Attributes": {"MinimumSevAsid": "one"}})
    assert status == 400 and body["error"]["code"] == "Base.1.8.PropertyValueTypeError"
    assert bmc.get(settings_uri)[0]["Attributes"]["Sriov"] == "Enabled"  # nothing staged by a rejected PATCH
    settings, headers = bmc.get(settings_uri)
    assert headers["ETag"] == settings["@odata.etag"]
    status, _h, body = bmc.request("PATCH", settings_uri, body={"Attributes": {"Sriov": "Disabled"}},
                                   headers={"If-Match": 'W/"stale"'})
    assert status == 412 and body["error"]["code"] == "Base.1.8.PreconditionFailed"
    status, _h, body = bmc.request("PATCH", settings_uri, body={"Attributes": {"Sriov": "Disabled"}},
                                   headers={"If-Match": headers["ETag"]})
    assert status == 200
    assert bmc.get(settings_uri)[0]["Attributes"]["Sriov"] == "Disabled"
    assert bmc.get(bios_uri)[0]["Attributes"]["Sriov"] == "Enabled"  # in effect only after a reset
    assert bmc.get(settings_uri)[1]["ETag"] != headers["ETag"]
    # Staging the value in effect withdraws the pending change.
    assert bmc.request("PATCH", settings_uri, body={"Attributes": {"Sriov": "Enabled"}})[0] == 200
    assert bmc.get(settings_uri)[0]["Attributes"]["Sriov"] == "Enabled"
    status, _h, body = bmc.request("PATCH", settings_uri, body={
        "Attributes": {"Sriov": "Disabled"}, "@Redfish.SettingsApplyTime": {"ApplyTime": "Immediate"}})
    assert status == 400 and body["error"]["code"] == "Base.1.8.PropertyValueNotInList"


def test_a_reset_that_boots_the_host_applies_the_pending_settings(bmcs):
    bmc = bmcs("dell")
    system, bios_uri, settings_uri = bmc.uris()
    reset = system + "/Actions/ComputerSystem.Reset"
    assert bmc.request("PATCH", settings_uri, body={"Attributes": {"SriovGlobalEnable": "Enabled"}})[0] == 200
    assert bmc.request("POST", reset, body={"ResetType": "Nmi"})[0] == 204
    assert bmc.get(bios_uri)[0]["Attributes"]["SriovGlobalEnable"] == "Disabled"
    assert bmc.request("POST", reset, body={"ResetType": "ForceOff"})[0] == 204
    assert bmc.get(system)[0]["PowerState"] == "Off"
    assert bmc.get(bios_uri)[0]["Attributes"]["SriovGlobalEnable"] == "Disabled"  # off: not booted yet
    assert bmc.request("POST", reset, body={"ResetType": "On"})[0] == 204
    assert bmc.get(bios_uri)[0]["Attributes"]["SriovGlobalEnable"] == "Enabled"
    assert bmc.get(settings_uri)[0].get("Attributes") is None
    assert bmc.request("PATCH", settings_uri, body={"Attributes": {"SysProfile": "Custom"}})[0] == 200
    assert bmc.request("POST", reset, body={"ResetType": "GracefulRestart"})[0] == 204
    assert bmc.get(bios_uri)[0]["Attributes"]["SysProfile"] == "Custom"
    status, _h, body = bmc.request("POST", reset, body={"ResetType": "Reboot"})
    assert status == 400 and body["error"]["code"] == "Base.1.8.ActionParameterValueNotInList"
    assert bmc.get(system)[0]["Oem"]["ClusterForgeEmulator"]["Resets"] == 4


def test_state_survives_a_restart_and_boot_applies_pending(bmcs):
    bmc = bmcs("lenovo")
    _system, bios_uri, settings_uri = bmc.uris()
    assert bmc.request("PATCH", settings_uri, body={
        "Attributes": {"OperatingModes_ChooseOperatingMode": "MaximumPerformance"}})[0] == 200
    bmc.stop()
    bmc.start()
    assert bmc.get(settings_uri)[0]["Attributes"]["OperatingModes_ChooseOperatingMode"] == "MaximumPerformance"
    assert bmc.get(bios_uri)[0]["Attributes"]["OperatingModes_ChooseOperatingMode"] == "Efficiency_FavorPerformance"
    bmc.stop()
    bmc.start("--boot")  # the emulated host has just booted: its BIOS applied what was pending at POST
    assert bmc.get(bios_uri)[0]["Attributes"]["OperatingModes_ChooseOperatingMode"] == "MaximumPerformance"


def test_another_profiles_state_file_is_refused(tmp_path):
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"profile": "hpe"}))
    proc = subprocess.run([sys.executable, EMULATOR, "--profile", "dell", "--port", "0", "--state-file", str(state)],
                          env=dict(os.environ, CF_EMU_BMC_PASSWORD=PASSWORD), capture_output=True, text=True,
                          timeout=30, check=False)
    assert proc.returncode != 0 and "holds the state of profile 'hpe'" in proc.stderr


# -- community.general's modules, unchanged ------------------------------------------------------------------------

def module(name, **args):
    """Run a community.general module as Ansible does (its own process, arguments from a file); its JSON result."""
    env = dict(os.environ)
    proc = subprocess.run([sys.executable, "-m", "ansible_collections.community.general.plugins.modules.%s" % name],
                          input=json.dumps({"ANSIBLE_MODULE_ARGS": args}), env=env, capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.stdout.strip(), proc.stderr
    return json.loads(proc.stdout)


def test_community_general_redfish_modules_read_stage_reset_and_read_back(bmcs):
    bmc = bmcs("dell")
    creds = {"baseuri": bmc.baseuri, "username": "admin", "password": PASSWORD}
    info = module("redfish_info", category="Systems", command=["GetSystemInventory", "GetBiosAttributes"], **creds)
    assert not info.get("failed"), info
    (system_uri, inventory), = [(e[0]["system_uri"], e[1]) for e in info["redfish_facts"]["system"]["entries"]]
    assert inventory["Manufacturer"] == "Dell Inc." and system_uri == "/redfish/v1/Systems/System.Embedded.1"
    attrs = info["redfish_facts"]["bios_attribute"]["entries"][0][1]
    assert attrs == fixture("dell-r750-bios.json")["Attributes"]

    # SetBiosAttributes: drops what is already set, sends @Redfish.SettingsApplyTime OnReset to a Dell (its service
    # root says Vendor Dell), PATCHes the settings object with If-Match.
    staged = module("redfish_config", category="Systems", command=["SetBiosAttributes"],
                    bios_attributes={"SriovGlobalEnable": "Enabled", "SysProfile": "PerfOptimized"}, **creds)
    assert staged["changed"] and "SriovGlobalEnable" in staged["msg"] and "SysProfile" not in staged["msg"], staged
    raw = module("xcc_redfish_command", category="Raw", command=["GetResource"],
                 resource_uri="/redfish/v1/Systems/System.Embedded.1/Bios/Settings", **creds)
    assert raw["redfish_facts"]["data"]["Attributes"] == {"SriovGlobalEnable": "Enabled"}
    again = module("redfish_config", category="Systems", command=["SetBiosAttributes"],
                   bios_attributes={"SriovGlobalEnable": "Enabled"}, **creds)
    assert again["changed"]  # community.general compares with the values in effect only: staged again

    session = module("redfish_command", category="Sessions", command=["CreateSession"], **creds)
    token = session["session"]["token"]
    assert token and PASSWORD not in json.dumps(session)
    by_token = {"baseuri": bmc.baseuri, "auth_token": token}
    reset = module("redfish_command", category="Systems", command=["PowerGracefulRestart"], **by_token)
    assert reset["changed"], reset
    after = module("redfish_info", category="Systems", command=["GetBiosAttributes"], **by_token)
    assert after["redfish_facts"]["bios_attribute"]["entries"][0][1]["SriovGlobalEnable"] == "Enabled"
    assert module("redfish_command", category="Sessions", command=["DeleteSession"],
                  session_uri=session["session"]["uri"], **by_token)["changed"]
    denied = module("redfish_info", category="Systems", command=["GetBiosAttributes"], **by_token)
    assert denied.get("failed") and "401" in denied["msg"]


# -- the bios role end to end ---------------------------------------------------------------------------------------

PLAYBOOK = """
- name: The bios role against an emulated BMC
  hosts: all
  gather_facts: false
  roles:
    - role: clusterforge.gpu.bios
  post_tasks:
    - name: Hand the facts to the test
      ansible.builtin.copy:
        content: >-
          {{ {'bios_state': bios_state | default(none),
              'bios_reboot_required': bios_reboot_required | default(none)} | to_json }}
        dest: "{{ out }}"
        mode: "0600"
      delegate_to: localhost
      check_mode: false
      changed_when: false  # the test's plumbing: the recap counts the role's changes only
"""


@pytest.fixture
def role(tmp_path):
    """Run the bios role on one inventory host (local connection) whose BMC is an emulator; its facts and output."""
    tmp = str(tmp_path)
    with open(os.path.join(tmp, "play.yml"), "w") as f:
        f.write(PLAYBOOK)
    # The lab's lspci emulator answers pcie_acs_info (VFIO, SR-IOV) on the "node".
    fake = os.path.join(tmp, "bin")
    os.makedirs(fake)
    for tool in ("lspci", "_cf_emu_pci.py"):
        os.symlink(os.path.join(EMULATORS, tool), os.path.join(fake, tool))
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_CACHE_PLUGIN="memory",
               ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="0",
               CLUSTERFORGE_EMU_STATE_DIR=os.path.join(tmp, "emu"), CLUSTERFORGE_EMU_RUN_DIR=os.path.join(tmp, "emu"),
               PATH=fake + os.pathsep + BIN + os.pathsep + os.environ.get("PATH", ""))

    def run(bmc, check=False, verbose=False, **extra):
        inv = {"all": {"hosts": {"bmc-test-node": {
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "cluster_bmc_address": bmc.baseuri, "cluster_bmc_username": "admin",
            "cluster_bmc_password": PASSWORD,
            # the emulator's certificate is self-signed: the bios role's explicit opt-in for an unverified BMC
            "bios_bmc_validate_certs": False, "bios_bmc_insecure_skip_tls_verify": True}}}}
        with open(os.path.join(tmp, "inv.json"), "w") as f:
            json.dump(inv, f)
        out = os.path.join(tmp, "facts.json")
        if os.path.exists(out):
            os.unlink(out)
        cmd = [os.path.join(BIN, "ansible-playbook"), "-i", os.path.join(tmp, "inv.json"), os.path.join(tmp, "play.yml"),
               "-e", json.dumps(dict({"bios_enabled": True}, **dict(extra, out=out)))] + (["--check"] if check else []) + (["-vvv"] if verbose else [])
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
        text = proc.stdout + proc.stderr
        facts = None
        if os.path.exists(out):
            with open(out) as f:
                facts = json.load(f)
        recap = [line for line in text.splitlines() if line.startswith("bmc-test-node")]
        return proc.returncode, facts, text, recap[-1] if recap else ""
    run.env = env
    return run


@pytest.mark.skipif(not shutil.which("ansible-playbook", path=BIN), reason="ansible-playbook not in the venv")
def test_bios_role_read_check_stage_reset_read_back(bmcs, role):
    bmc = bmcs("hpe")
    wanted = {"bios_apply": True, "bios_settings": {"acs": "disabled", "iommu": "enabled", "power_profile": "enabled"}}

    # Read: all four mapped from the recorded HPE attributes; nothing pending; bios_apply off changes nothing.
    rc, facts, out, recap = role(bmc)
    assert rc == 0, out
    state = facts["bios_state"]
    assert state["vendor"] == "hpe" and state["manufacturer"] == "HPE"
    assert {k: v["state"] for k, v in state["settings"].items()} == {
        "acs": "enabled", "iommu": "enabled", "sriov": "enabled", "power_profile": "disabled"}
    assert state["pending"] == {} and facts["bios_reboot_required"] is False
    assert "changed=0" in recap and "failed=0" in recap

    # Check mode: the plan is reported (as a change), nothing reaches the BMC. Power Regulator's Static High
    # Performance mode is HPE's maximum-performance value.
    staged = {"AccessControlService": "Disabled", "PowerRegulator": "StaticHighPerf"}
    rc, facts, out, recap = role(bmc, check=True, **wanted)
    assert rc == 0, out
    assert facts["bios_state"]["would_stage"] == staged
    assert facts["bios_state"]["plan"]["power_profile"]["action"] == "stage"
    assert facts["bios_reboot_required"] is True
    assert "would stage on its BMC" in out
    assert "changed=0" not in recap
    _system, bios_uri, settings_uri = bmc.uris()
    assert bmc.get(settings_uri)[0]["Attributes"]["AccessControlService"] == "Enabled"

    # Stage: on the BMC as pending, not in effect; the node needs a reboot.
    rc, facts, out, recap = role(bmc, **wanted)
    assert rc == 0, out
    assert facts["bios_state"]["staged"] == staged
    assert facts["bios_state"]["settings"]["acs"]["next_state"] == "disabled"
    assert facts["bios_state"]["settings"]["power_profile"]["next_state"] == "enabled"
    assert facts["bios_reboot_required"] is True
    assert bmc.get(settings_uri)[0]["Attributes"]["AccessControlService"] == "Disabled"
    assert bmc.get(bios_uri)[0]["Attributes"]["AccessControlService"] == "Enabled"
    assert "rolling_reconfigure.yml" in out and '"rolling_reboot_ok": true' in out

    # Again: the pending value is honoured (not staged twice); still waiting for the reboot.
    rc, facts, out, recap = role(bmc, **wanted)
    assert rc == 0, out
    assert facts["bios_state"]["staged"] == {} and facts["bios_state"]["plan"]["acs"]["action"] == "already_pending"

    # Reset (what the reboot through Slurm does to a real server's BIOS), then read back through a session.
    module("redfish_command", category="Systems", command=["PowerForceRestart"], baseuri=bmc.baseuri,
           username="admin", password=PASSWORD)
    rc, facts, out, recap = role(bmc, bios_bmc_auth="session", **wanted)
    assert rc == 0, out
    assert facts["bios_state"]["settings"]["acs"]["state"] == "disabled"
    assert facts["bios_state"]["settings"]["power_profile"]["state"] == "enabled"
    assert facts["bios_state"]["pending"] == {} and facts["bios_reboot_required"] is False
    assert facts["bios_state"]["plan"]["acs"]["action"] == "none"
    assert bmc.get("/redfish/v1/SessionService/Sessions")[0]["Members"] == []  # the role closed its session


@pytest.mark.skipif(not shutil.which("ansible-playbook", path=BIN), reason="ansible-playbook not in the venv")
def test_bios_role_refuses_vfio_hosts_and_never_logs_credentials(bmcs, role):
    bmc = bmcs("supermicro")
    subprocess.run([os.path.join(EMULATORS, "lspci"), "--emu-vfio", "0000:1b:00.0"], env=role.env, check=True,
                   capture_output=True)
    rc, facts, out, _recap = role(bmc, verbose=True, bios_apply=True, bios_bmc_auth="session",
                                  bios_settings={"acs": "disabled"})
    assert rc != 0
    assert "devices bound to vfio-pci ['0000:1b:00.0']" in out and "Nothing was staged" in out
    _system, _bios_uri, settings_uri = bmc.uris()
    assert bmc.get(settings_uri)[0].get("Attributes") is None  # Supermicro's SD: nothing pending
    assert PASSWORD not in out
    # bios_force stages it: Supermicro's ACS Control "Enable" limits ACS to the chipset's root ports. The table has
    # no Supermicro power profile: that setting is reported as one that cannot be set, and the rest is staged.
    rc, facts, out, _recap = role(bmc, verbose=True, bios_apply=True, bios_force=True,
                                  bios_settings={"acs": "disabled", "power_profile": "enabled"})
    assert rc == 0, out
    assert bmc.get(settings_uri)[0]["Attributes"] == {"PCIeACSCTL#1E1C": "Enable"}
    assert "WARNING bmc-test-node: power_profile enabled: the table has no power_profile attribute for supermicro" \
        in " ".join(out.split())  # the callback wraps long lines
    assert PASSWORD not in out


@pytest.mark.skipif(not shutil.which("ansible-playbook", path=BIN), reason="ansible-playbook not in the venv")
def test_bios_role_reports_an_unknown_vendor_as_unknown_and_is_off_by_default(bmcs, role):
    bmc = bmcs("generic")
    rc, facts, out, _recap = role(bmc, bios_enabled=False, bios_settings={"acs": "disabled"}, bios_apply=True)
    assert rc == 0, out
    assert facts == {"bios_state": None, "bios_reboot_required": None}
    assert not os.path.exists(os.path.join(bmc.tmp, "requests.log"))  # not one request reached the BMC
    rc, facts, out, _recap = role(bmc, bios_settings={"acs": "disabled"}, bios_require_known=True)
    assert rc != 0 and "vendor 'ClusterForge Lab' is not in the table" in out
    rc, facts, out, _recap = role(bmc, bios_settings={"acs": "disabled"})
    assert rc == 0, out
    assert all(s["state"] == "unknown" for s in facts["bios_state"]["settings"].values())
    assert facts["bios_state"]["vendor"] is None


@pytest.mark.skipif(not shutil.which("ansible-playbook", path=BIN), reason="ansible-playbook not in the venv")
def test_bios_role_resolves_display_name_entries_through_the_bmcs_attribute_registry(bmcs, role):
    """An operator's entries that name attributes by display name (BMCs whose names are opaque codes) are resolved
    through the registry the Bios resource names: read, staged under the attribute's real name, read back."""
    bmc = bmcs("generic")
    extra = {"ClusterForge Lab": {
        "acs": {"attribute": "PCIe Access Control Services", "match": "display_name",
                "values": {"Enable": "enabled", "Disable": "disabled"}, "set": {"disabled": "Disable"},
                "source": "the emulator's registry (tests/lab/emulators/redfish-bmc, profile generic)"},
        "iommu": {"attribute": "Input-Output MMU", "match": "display_name", "values": {"Enable": "enabled"},
                  "source": "a display name the registry does not have"}}}
    rc, facts, out, _recap = role(bmc, bios_vendor_table_extra=extra, bios_apply=True,
                                  bios_settings={"acs": "disabled"})
    assert rc == 0, out
    acs = facts["bios_state"]["settings"]["acs"]
    assert (acs["state"], acs["attribute"], acs["value"]) == ("enabled", "AcsControl", "Enabled"), acs
    assert acs["next_state"] == "disabled" and acs["pending_value"] == "Disabled", acs
    assert facts["bios_state"]["staged"] == {"AcsControl": "Disabled"}
    iommu = facts["bios_state"]["settings"]["iommu"]
    assert iommu["state"] == "unknown" and "has no attribute named 'Input-Output MMU'" in iommu["reason"], iommu
    requests = os.path.join(bmc.tmp, "requests.log")

    def registry_reads():
        with open(requests) as handle:
            return sum(1 for line in handle if "/redfish/v1/Registries/" in line)
    assert registry_reads() >= 2  # the registry's file, then its document
    # without display-name entries the registry is not read at all (registries are large)
    before = registry_reads()
    rc, facts, out, _recap = role(bmc, bios_settings={"acs": "disabled"})
    assert rc == 0, out
    assert registry_reads() == before
    assert facts["bios_state"]["settings"]["acs"]["state"] == "unknown"
