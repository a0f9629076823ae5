# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvidia_driver_state against a scratch /proc and /sys tree, scripted dpkg-query / rpm / nvidia-smi answers and a
fact file under tmp_path."""

import json
import os
import stat

import pytest

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import nvidia_driver_state

# /proc/driver/nvidia/version of the open kernel modules (570) and of the proprietary ones (535).
PROC_OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.20  Release Build  "
             "(dvs-builder@U16-I3-B03-4-3)  Fri Mar 14 12:44:48 UTC 2025\n"
             "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
PROC_PROPRIETARY = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n"
                    "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
# dpkg-query -W -f='${binary:Package}\t${Version}\t${db:Status-Abbrev}\n' -- libnvidia-ml1
DPKG_570 = "libnvidia-ml1:amd64\t570.133.20-1\tii \n"
DPKG_NOT_FOUND = (1, "", "dpkg-query: no packages found matching libnvidia-ml1\n")
SMI_OK = (0, "570.133.20\n570.133.20\n", "")
SMI_MISMATCH = (18, "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.133\n", "")
PKG = "libnvidia-ml1"
EXTRA = {"branch": "570", "kernel_module_type": "open", "nvswitch": False}


@pytest.fixture
def host(tmp_path):
    proc = tmp_path / "proc"
    (proc / "driver" / "nvidia").mkdir(parents=True)
    (proc / "driver" / "nvidia" / "version").write_text(PROC_OPEN)
    sys_root = tmp_path / "sys"
    (sys_root / "module" / "nvidia").mkdir(parents=True)
    return {"proc": proc, "sys": sys_root, "fact": tmp_path / "facts.d" / "clusterforge_nvidia_driver.fact"}


def tool(dpkg=(0, DPKG_570, ""), smi=SMI_OK, rpm=None, missing=()):
    answers = [(("dpkg-query",), dpkg), (("nvidia-smi",), smi)]
    if rpm is not None:
        answers.append((("rpm",), rpm))
    return Tool(answers, missing=missing)


def run(host, t=None, check_mode=False, diff=False, **args):
    base = dict(version_package=PKG, expected_version="570.", fact_file=str(host["fact"]), fact=EXTRA,
                proc_root=str(host["proc"]), sys_root=str(host["sys"]))
    base.update(args)
    t = t if t is not None else tool()
    return run_module(nvidia_driver_state, base, t, check_mode=check_mode, diff=diff), t


def no_module(host):
    os.unlink(str(host["proc"] / "driver" / "nvidia" / "version"))


def recorded(host):
    return json.loads(host["fact"].read_text())


def test_clean_node_records_the_fact_once(host):
    r, t = run(host)
    assert not r.get("failed")
    assert r["changed"] is True
    assert r["userspace_version"] == "570.133.20" and r["kernel_version"] == "570.133.20"
    assert r["reboot_required"] is False and r["reboot_reasons"] == [] and r["version_ok"] is True
    assert r["nvidia_smi"] == {"found": True, "rc": 0, "output": "570.133.20"}
    want = dict(EXTRA, userspace_version="570.133.20", kernel_version="570.133.20", reboot_required=False,
                reboot_reasons=[])
    assert r["fact"] == want and recorded(host) == want
    # to_nice_json with a final newline, mode 0644 in a directory made 0755
    assert host["fact"].read_text() == json.dumps(want, indent=4, sort_keys=True) + "\n"
    assert stat.S_IMODE(os.stat(str(host["fact"])).st_mode) == 0o644
    assert stat.S_IMODE(os.stat(str(host["fact"].parent)).st_mode) & 0o755 == 0o755
    # one dpkg-query for the one package, one nvidia-smi with the role's query
    assert [c[-2:] for c in t.calls if c[0] == "/usr/bin/dpkg-query"] == [["--", PKG]]
    assert ["/usr/bin/nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"] in t.calls
    again, dummy = run(host)
    assert again["changed"] is False and again["fact"] == want
    check, dummy = run(host, check_mode=True)
    assert check["changed"] is False


def test_loaded_module_older_than_the_libraries(host):
    r, dummy = run(host, t=tool(dpkg=(0, "libnvidia-ml1:amd64\t1:570.144.00-1\tii \n", "")))
    assert r["userspace_version"] == "570.144.00" and r["kernel_version"] == "570.133.20"
    assert r["reboot_required"] is True
    assert r["reboot_reasons"] == ["loaded kernel module 570.133.20 differs from the installed libraries 570.144.00"]
    assert recorded(host)["reboot_reasons"] == r["reboot_reasons"] and recorded(host)["reboot_required"] is True


def test_nvidia_smi_mismatch_and_every_reason_in_order(host):
    (host["proc"] / "driver" / "nvidia" / "version").write_text(PROC_PROPRIETARY)
    (host["sys"] / "module" / "nouveau").mkdir()
    r, dummy = run(host, t=tool(smi=SMI_MISMATCH))
    assert r["reboot_reasons"] == [
        "loaded kernel module 535.183.01 differs from the installed libraries 570.133.20",
        "nvidia-smi: Driver/library version mismatch",
        "nouveau is loaded",
    ]
    assert r["nvidia_smi"] == {"found": True, "rc": 18,
                               "output": "Failed to initialize NVML: Driver/library version mismatch"}


def test_nvidia_smi_mismatch_on_stderr(host):
    r, dummy = run(host, t=tool(smi=(18, "", "Failed to initialize NVML: Driver/library version mismatch\n")))
    assert r["reboot_reasons"] == ["nvidia-smi: Driver/library version mismatch"]
    assert r["nvidia_smi"]["output"] == "Failed to initialize NVML: Driver/library version mismatch"


def test_other_nvidia_smi_failure_is_no_reason(host):
    smi = (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "")
    r, dummy = run(host, t=tool(smi=smi))
    assert r["reboot_required"] is False and r["nvidia_smi"]["rc"] == 9


def test_nouveau_loaded_unless_not_checked(host):
    (host["sys"] / "module" / "nouveau").mkdir()
    r, dummy = run(host)
    assert r["reboot_reasons"] == ["nouveau is loaded"] and r["reboot_required"] is True
    r, dummy = run(host, check_nouveau=False)
    assert r["reboot_reasons"] == [] and r["reboot_required"] is False


def test_first_install_is_a_reason_outside_check_mode_only(host):
    no_module(host)
    r, dummy = run(host)
    assert r["kernel_version"] == ""
    assert r["reboot_reasons"] == ["the NVIDIA kernel module is not loaded (first install)"]
    check, dummy = run(host, check_mode=True)
    assert check["reboot_reasons"] == [] and check["reboot_required"] is False


def test_kernel_modules_not_managed_reads_no_kernel_version(host):
    # A container: the host's module may differ from the container's libraries; only nvidia-smi can tell.
    (host["proc"] / "driver" / "nvidia" / "version").write_text(PROC_PROPRIETARY)
    r, dummy = run(host, kernel_modules_managed=False)
    assert r["kernel_version"] == "" and r["reboot_reasons"] == []
    no_module(host)
    r, dummy = run(host, kernel_modules_managed=False)
    assert r["reboot_reasons"] == []


def test_expected_version_mismatch_fails_after_recording_the_fact(host):
    r, dummy = run(host, expected_version="580.")
    assert r["failed"] is True
    assert r["msg"] == "libnvidia-ml1 is 570.133.20, not 580.* (nvidia_driver_branch / nvidia_driver_version)"
    assert r["version_ok"] is False and r["changed"] is True
    assert recorded(host)["userspace_version"] == "570.133.20"


def test_expected_exact_version(host):
    r, dummy = run(host, expected_version="570.133.20")
    assert r["version_ok"] is True and not r.get("failed")
    r, dummy = run(host, expected_version="570.133.2")
    assert r["version_ok"] is True  # a prefix, as the role's pin (570.133.2*) means
    r, dummy = run(host, expected_version="570.124.06")
    assert r["failed"] and "is 570.133.20, not 570.124.06*" in r["msg"]


def test_not_installed_fails_with_not_installed(host):
    r, dummy = run(host, t=tool(dpkg=DPKG_NOT_FOUND))
    assert r["failed"] is True and r["userspace_version"] == ""
    assert r["msg"] == "libnvidia-ml1 is not installed, not 570.* (nvidia_driver_branch / nvidia_driver_version)"


def test_check_mode_only_reports_the_version_and_writes_nothing(host):
    no_module(host)
    r, t = run(host, t=tool(dpkg=DPKG_NOT_FOUND), check_mode=True)
    assert not r.get("failed")
    assert r["version_ok"] is False and r["changed"] is True and r["reboot_reasons"] == []
    assert not host["fact"].exists() and not host["fact"].parent.exists()
    # the reads still run in check mode
    assert t.count("dpkg-query") == 1 and t.count("nvidia-smi") == 1


def test_no_expected_version(host):
    r, dummy = run(host, t=tool(dpkg=DPKG_NOT_FOUND), expected_version=None)
    assert not r.get("failed") and r["version_ok"] is None


def test_diff_shows_the_file_before_and_after(host):
    r, dummy = run(host, check_mode=True, diff=True)
    after = json.dumps(r["fact"], indent=4, sort_keys=True) + "\n"
    assert r["diff"] == {"before": "", "after": after, "before_header": str(host["fact"]),
                         "after_header": str(host["fact"])}
    run(host)
    (host["sys"] / "module" / "nouveau").mkdir()
    r, dummy = run(host, diff=True)
    assert r["changed"] is True
    assert r["diff"]["before"] == after and '"nouveau is loaded"' in r["diff"]["after"]
    assert host["fact"].read_text() == r["diff"]["after"]


def test_module_keys_win_over_extra_fact_keys(host):
    r, dummy = run(host, fact={"branch": "570", "reboot_required": "yes", "userspace_version": "1.0"})
    assert r["fact"]["reboot_required"] is False and r["fact"]["userspace_version"] == "570.133.20"


def test_without_fact_file_nothing_is_written(host):
    r, dummy = run(host, fact_file=None)
    assert r["changed"] is False and "reboot_required" in r["fact"] and not host["fact"].parent.exists()


def test_rpm_when_dpkg_query_is_missing(host):
    t = tool(rpm=(0, "570.133.20-1.el9\n", ""), missing=["dpkg-query"])
    r, dummy = run(host, t=t, version_package="nvidia-driver-cuda-libs")
    assert r["userspace_version"] == "570.133.20" and r["reboot_required"] is False and r["version_ok"] is True
    rpm_call = [c for c in t.calls if c[0] == "/usr/bin/rpm"]
    assert rpm_call == [["/usr/bin/rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}\\n", "nvidia-driver-cuda-libs"]]
    assert t.count("dpkg-query") == 0


def test_rpm_package_not_installed(host):
    t = tool(rpm=(1, "package nvidia-driver-cuda-libs is not installed\n", ""), missing=["dpkg-query"])
    r, dummy = run(host, t=t, version_package="nvidia-driver-cuda-libs", expected_version=None)
    assert not r.get("failed") and r["userspace_version"] == ""


def test_rpm_error_fails(host):
    t = tool(rpm=(1, "", "error: rpmdb: BDB0113 Thread/process 1234 failed: Thread died in Berkeley DB library\n"),
             missing=["dpkg-query"])
    r, dummy = run(host, t=t, version_package="nvidia-driver-cuda-libs")
    assert r["failed"] is True and "Berkeley DB" in r["msg"]


def test_neither_dpkg_query_nor_rpm(host):
    r, t = run(host, t=tool(missing=["dpkg-query", "rpm"]), expected_version=None)
    assert r["userspace_version"] == "" and r["reboot_reasons"] == []
    assert t.count("dpkg-query") == 0 and t.count("rpm") == 0


def test_dpkg_query_error_fails(host):
    r, dummy = run(host, t=tool(dpkg=(2, "", "dpkg-query: error: cannot access archive: database locked\n")))
    assert r["failed"] is True and "database locked" in r["msg"]
    assert not host["fact"].exists()


def test_nvidia_smi_missing(host):
    r, t = run(host, t=tool(missing=["nvidia-smi"]))
    assert not r.get("failed")
    assert r["nvidia_smi"] == {"found": False, "rc": None, "output": ""}
    assert r["reboot_reasons"] == [] and t.count("nvidia-smi") == 0


def test_wrong_nvidia_smi_path_fails_naming_the_option(host):
    r, t = run(host, t=tool(missing=["/opt/nvidia/nvidia-smi"]), nvidia_smi_path="/opt/nvidia/nvidia-smi")
    assert r["failed"] is True
    assert "nvidia-smi was not found at /opt/nvidia/nvidia-smi (nvidia_smi_path)" in r["msg"]
    assert t.calls == [] and not host["fact"].exists()


def test_explicit_paths_are_used(host):
    r, t = run(host, nvidia_smi_path="/opt/nvidia/bin/nvidia-smi", dpkg_query_path="/opt/dpkg/dpkg-query")
    assert not r.get("failed")
    assert sorted(c[0] for c in t.calls) == ["/opt/dpkg/dpkg-query", "/opt/nvidia/bin/nvidia-smi"]


def test_parsers():
    assert nvidia_driver_state.kernel_version(PROC_OPEN) == "570.133.20"
    assert nvidia_driver_state.kernel_version(PROC_PROPRIETARY) == "535.183.01"
    assert nvidia_driver_state.kernel_version("NVRM version: NVIDIA UNIX Kernel Module  470.82\n") == "470.82"
    assert nvidia_driver_state.kernel_version("") == ""
    assert nvidia_driver_state.short_version("570.133.20-0ubuntu0.24.04.1") == "570.133.20"
    assert nvidia_driver_state.short_version("1:535.183.01-1~deb12u1") == "535.183.01"
    assert nvidia_driver_state.short_version("") == ""
    # like regex_replace: a version it does not understand is left as it is
    assert nvidia_driver_state.short_version("git20250101") == "git20250101"


def test_wrong_dpkg_query_path_fails_before_anything_runs(host):
    r, t = run(host, t=tool(missing=["/opt/dpkg/dpkg-query"]), dpkg_query_path="/opt/dpkg/dpkg-query")
    assert r["failed"] is True and "dpkg-query was not found at /opt/dpkg/dpkg-query (dpkg_query_path)" in r["msg"]
    assert t.calls == []
