# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""package_check over dpkg-query output in its real format (binary:Package, Version, db:Status-Abbrev)."""

from cf_module_helper import Tool, run_module

from ansible_collections.clusterforge.gpu.plugins.modules import package_check

# dpkg-query -W -f='${binary:Package}\t${Version}\t${db:Status-Abbrev}\n' munge slurmd slurm-client chrony nvidia-smi
# on Debian 12 after `apt-get remove slurmd` (rc status: config files left) with nvidia-smi never installed
# (dpkg-query prints "dpkg-query: no packages found matching nvidia-smi" on stderr and exits 1).
DPKG = ("chrony\t4.3-2+deb12u1\tii \n"
        "munge\t0.5.15-2\tii \n"
        "slurm-client\t22.05.8-4+deb12u3\tii \n"
        "slurmd\t22.05.8-4+deb12u3\trc \n")
NOT_FOUND = "dpkg-query: no packages found matching nvidia-smi\n"


def dpkg(out=DPKG, rc=1, err=NOT_FOUND):
    return Tool([(("dpkg-query",), (rc, out, err))])


def test_missing_are_the_unknown_and_the_removed_in_the_callers_order():
    tool = dpkg()
    r = run_module(package_check, {"names": ["slurmd", "munge", "nvidia-smi", "slurm-client", "chrony"]}, tool)
    assert r["changed"] is False and r["supported"] is True
    assert r["missing"] == ["slurmd", "nvidia-smi"]
    assert r["installed"] == {"chrony": "4.3-2+deb12u1", "munge": "0.5.15-2", "slurm-client": "22.05.8-4+deb12u3"}
    # one dpkg-query for every name, sorted, after "--"
    assert len(tool.calls) == 1
    argv = tool.calls[0]
    assert argv[1] == "-W" and argv[2].startswith("-f=${binary:Package}")
    assert argv[argv.index("--") + 1:] == ["chrony", "munge", "nvidia-smi", "slurm-client", "slurmd"]


def test_all_present_is_an_empty_list():
    r = run_module(package_check, {"names": ["munge", "chrony"]}, dpkg(rc=0, err=""))
    assert r["missing"] == [] and not r.get("failed")


def test_exact_and_prefix_versions():
    out = "datacenter-gpu-manager-4-core\t1:4.2.3-1\tii \nmunge\t0.5.15-2\tii \n"
    names = ["datacenter-gpu-manager-4-core=1:4.2.3*", "munge=0.5.15-2", "munge=0.5.14-1"]
    r = run_module(package_check, {"names": names}, dpkg(out=out, rc=0, err=""))
    assert r["missing"] == ["munge=0.5.14-1"]
    r = run_module(package_check, {"names": ["datacenter-gpu-manager-4-core=1:4.3*"]}, dpkg(out=out, rc=0, err=""))
    assert r["missing"] == ["datacenter-gpu-manager-4-core=1:4.3*"]


def test_half_installed_and_held_states():
    # "iU " unpacked but not configured counts as missing (apt must finish it); "hi " held and installed is present.
    out = "slurmd\t22.05.8-4\tiU \nmunge\t0.5.15-2\thi \n"
    r = run_module(package_check, {"names": ["slurmd", "munge"]}, dpkg(out=out, rc=0, err=""))
    assert r["missing"] == ["slurmd"]


def test_multiarch_qualified_name_matches_the_bare_name():
    out = "libnvidia-ml1:amd64\t535.183.01-1\tii \n"
    r = run_module(package_check, {"names": ["libnvidia-ml1", "libnvidia-ml1:amd64"]}, dpkg(out=out, rc=0, err=""))
    assert r["missing"] == []


def test_specs_it_does_not_understand_go_to_the_package_manager():
    tool = dpkg(rc=0, err="")
    r = run_module(package_check, {"names": ["@nvidia-driver:535-open", "munge>=0.5", "munge"]}, tool)
    assert r["missing"] == ["@nvidia-driver:535-open", "munge>=0.5"]
    assert tool.calls[0][tool.calls[0].index("--") + 1:] == ["munge"]


def test_without_dpkg_every_spec_is_missing_and_nothing_runs():
    tool = Tool([], missing=["dpkg-query"])
    r = run_module(package_check, {"names": ["munge", "slurm"]}, tool)
    assert r["supported"] is False and r["missing"] == ["munge", "slurm"] and tool.calls == []


def test_dpkg_query_error_fails_with_its_message():
    tool = dpkg(out="", rc=2, err="dpkg-query: error: cannot access archive: database locked\n")
    r = run_module(package_check, {"names": ["munge"]}, tool)
    assert r["failed"] and "database locked" in r["msg"]


def test_check_mode_reads_the_same():
    r = run_module(package_check, {"names": ["slurmd", "munge"]}, dpkg(), check_mode=True)
    assert r["missing"] == ["slurmd"] and r["changed"] is False


def test_dpkg_query_path_that_does_not_exist_fails():
    tool = Tool([], missing=["/opt/dpkg/dpkg-query"])
    r = run_module(package_check, {"names": ["munge"], "dpkg_query_path": "/opt/dpkg/dpkg-query"}, tool)
    assert r["failed"] and "(dpkg_query_path)" in r["msg"] and tool.calls == []
