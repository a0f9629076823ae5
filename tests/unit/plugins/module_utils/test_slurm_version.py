# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm versions: parsing every form a host or an operator gives, the order of the major releases, and every rule
by which an upgrade is refused (SchedMD's upgrade guide: two majors back before 24.11, three from 24.11 on; no
downgrades), plus the package managers' and scontrol's outputs the module reads."""

import pytest

from ansible_collections.clusterforge.gpu.plugins.module_utils.slurm_version import (
    candidate_refusal,
    major_index,
    major_name,
    majors_between,
    matches_target,
    parse_apt_cache_policy,
    parse_dnf_list,
    parse_rpm_query,
    parse_scontrol_config,
    parse_version,
    parse_version_output,
    seconds,
    upgrade_refusals,
    upgrade_steps,
    window,
)


# -- parsing -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, major, upstream, revision, epoch", [
    ("24.11.5", "24.11", "24.11.5", None, None),
    ("24.11.5-1", "24.11", "24.11.5", "1", None),
    ("24.11.5-1+b2", "24.11", "24.11.5", "1+b2", None),                # Debian binNMU
    ("22.05.8-4+deb12u3", "22.05", "22.05.8", "4+deb12u3", None),       # Debian 12 security update
    ("1:24.11.5-1ubuntu1", "24.11", "24.11.5", "1ubuntu1", 1),          # an epoch
    ("24.11.5-1.el9", "24.11", "24.11.5", "1.el9", None),               # rpm VERSION-RELEASE
    ("23.11.4-1.2ubuntu5", "23.11", "23.11.4", "1.2ubuntu5", None),      # Ubuntu 24.04
    ("21.08.5-2ubuntu1", "21.08", "21.08.5", "2ubuntu1", None),          # Ubuntu 22.04
    ("23.11.0-0rc1", "23.11", "23.11.0", "0rc1", None),                  # SchedMD's pre-release tag
    ("23.11.0~rc1-1", "23.11", "23.11.0~rc1", "1", None),               # Debian's pre-release
    ("18.08.6.2-1", "18.08", "18.08.6.2", "1", None),                    # a fourth component
    (" 25.05.2 ", "25.05", "25.05.2", None, None),
])
def test_parse_package_and_operator_versions(text, major, upstream, revision, epoch):
    v = parse_version(text)
    assert (v.major, v.upstream, v.revision, v.epoch) == (major, upstream, revision, epoch)


def test_parse_orders_on_the_upstream_version():
    assert parse_version("24.11.5-1+b2").key == parse_version("24.11.5").key == (24, 11, 5)
    assert parse_version("24.11.10").key > parse_version("24.11.9").key
    assert parse_version("1:24.11.5-1").without_epoch == "24.11.5-1"


@pytest.mark.parametrize("text", ["", None, "latest", "v24.11.5", "24.11.5 1", "24", "24.x.5", "slurm 24.11.5"])
def test_parse_refuses_what_is_no_version(text):
    with pytest.raises(ValueError):
        parse_version(text)


def test_a_major_alone_is_no_target_but_can_be_read():
    with pytest.raises(ValueError, match="major release only"):
        parse_version("24.11")
    assert parse_version("24.11", require_micro=False).major == "24.11"


@pytest.mark.parametrize("output, upstream", [
    ("slurm 24.11.5\n", "24.11.5"),                  # slurmctld -V, sinfo -V (SchedMD's build)
    ("slurm-wlm 22.05.8\n", "22.05.8"),              # Debian's build
    ("slurm 23.11.0-0rc1\n", "23.11.0"),
    ("\nslurm 25.05.2\n", "25.05.2"),
])
def test_parse_program_output(output, upstream):
    assert parse_version_output(output).upstream == upstream


def test_program_output_without_a_version():
    assert parse_version_output("") is None
    assert parse_version_output("slurmd: error: Unable to open config\n") is None


# -- major releases ----------------------------------------------------------------------------------------------

def test_the_history_of_major_releases_in_order():
    history = ["17.02", "17.11", "18.08", "19.05", "20.02", "20.11", "21.08", "22.05", "23.02", "23.11", "24.05",
               "24.11", "25.05", "25.11"]
    indexes = [major_index(m) for m in history]
    assert indexes == list(range(indexes[0], indexes[0] + len(history)))
    assert [major_name(i) for i in indexes] == history


def test_majors_after_24_05_come_every_may_and_november():
    assert major_index("26.05") == major_index("25.11") + 1
    assert major_index("26.11") == major_index("26.05") + 1
    assert major_name(major_index("30.11")) == "30.11"
    assert major_index(parse_version("24.11.5-1")) == major_index("24.11") == major_index((24, 11))


@pytest.mark.parametrize("major", ["22.06", "24.08", "25.01", "13.12", "23.05"])
def test_a_month_that_was_never_a_major_release(major):
    with pytest.raises(ValueError, match="not a Slurm major release"):
        major_index(major)


def test_window_is_three_majors_from_24_11_on_and_two_before():
    assert window("24.11") == 3 and window("25.05") == 3 and window(parse_version("26.11.1")) == 3
    assert window("24.05") == 2 and window("23.02") == 2 and window("21.08") == 2


def test_the_examples_of_the_issue_counted():
    assert majors_between("22.05", "24.11") == 4
    assert majors_between("23.02", "24.11") == 3
    assert majors_between("21.08", "23.02") == 2


# -- refusals ----------------------------------------------------------------------------------------------------

def test_22_05_to_24_11_is_four_majors_and_refused_with_the_steps():
    (msg,) = upgrade_refusals({"head01": {"slurmctld": "22.05.8-4+deb12u3"}}, "24.11.5")
    assert msg.startswith("head01: slurmctld 22.05.8-4+deb12u3 to 24.11.5 is 4 major releases (22.05 -> 24.11)")
    assert "at most 3 major releases back (23.02 or newer)" in msg
    assert msg.endswith("Upgrade in steps: 22.05 -> 23.11 -> 24.11")


def test_23_02_to_24_11_is_three_majors_and_allowed():
    assert upgrade_refusals({"head01": {"slurmctld": "23.02.7-1"}}, "24.11.5") == []


def test_21_08_to_23_02_is_two_majors_and_allowed_before_24_11():
    assert upgrade_refusals({"gpu01": {"slurmd": "21.08.5-2ubuntu1"}}, "23.02.7") == []


def test_three_majors_are_too_many_for_a_target_before_24_11():
    (msg,) = upgrade_refusals({"gpu01": {"slurmd": "21.08.8"}}, "23.11.4")
    assert "is 3 major releases (21.08 -> 23.11); Slurm 23.11 accepts upgrades from at most 2" in msg
    # each step goes as far as the release it lands on accepts: 23.02 takes 21.08, then 23.11 takes 23.02
    assert "(22.05 or newer)" in msg and msg.endswith("Upgrade in steps: 21.08 -> 23.02 -> 23.11")


def test_24_05_to_25_11_three_majors_allowed_and_four_refused():
    assert upgrade_refusals({"a": ["24.05.8"]}, "25.11.1") == []
    (msg,) = upgrade_refusals({"a": ["23.11.10"]}, "25.11.1")
    assert "is 4 major releases (23.11 -> 25.11)" in msg and msg.endswith("23.11 -> 25.05 -> 25.11")


def test_a_downgrade_is_refused():
    (msg,) = upgrade_refusals({"gpu01": {"slurmd": "24.11.5-1"}}, "24.05.3")
    assert msg == ("gpu01: slurmd 24.11.5-1 is newer than the target 24.05.3: Slurm does not support downgrades "
                   "(state files and the accounting database are converted forward only)")


def test_a_micro_downgrade_within_the_major_is_refused_too():
    (msg,) = upgrade_refusals({"head01": {"slurmctld": "22.05.8-4"}}, "22.05.7")
    assert "newer than the target 22.05.7" in msg


def test_the_same_version_and_a_micro_upgrade_are_allowed():
    assert upgrade_refusals({"gpu01": {"slurmd": "22.05.8-4+deb12u3"}}, "22.05.8") == []
    assert upgrade_refusals({"gpu01": {"slurmd": "24.11.4-1"}}, "24.11.5-1") == []
    # a revision alone is no downgrade (the candidate rule judges revisions)
    assert upgrade_refusals({"gpu01": {"slurmd": "24.11.5-2"}}, "24.11.5-1") == []


def test_a_downgrade_on_any_host_is_refused_even_when_others_upgrade():
    out = upgrade_refusals({"head01": {"slurmctld": "23.11.4"}, "gpu01": {"slurmd": "24.11.1"},
                            "gpu02": {"slurmd": "23.11.4"}}, "24.05.2")
    assert len(out) == 1 and out[0].startswith("gpu01: slurmd 24.11.1 is newer than the target 24.05.2")


def test_mixed_majors_are_refused_only_where_one_is_too_far():
    # 23.02 and 23.11 hosts both reach 24.11: allowed
    assert upgrade_refusals({"head01": {"slurmctld": "23.11.4"}, "gpu01": {"slurmd": "23.02.7"}}, "24.11.5") == []
    # one node left at 22.05 is too far: only that node is named
    out = upgrade_refusals({"head01": {"slurmctld": "23.11.4"}, "gpu01": {"slurmd": "23.02.7"},
                            "gpu02": {"slurmd": "22.05.8"}}, "24.11.5")
    assert len(out) == 1 and out[0].startswith("gpu02: slurmd 22.05.8 to 24.11.5 is 4 major releases")


def test_packages_of_one_version_are_named_together():
    (msg,) = upgrade_refusals({"gpu01": {"slurmd": "22.05.8-4", "slurm-client": "22.05.8-4"}}, "24.11.5")
    assert msg.startswith("gpu01: slurmd, slurm-client 22.05.8-4 to 24.11.5")


def test_versions_of_one_host_failing_one_rule_are_named_in_one_message():
    (msg,) = upgrade_refusals({"gpu01": {"slurmd": "22.05.8-4", "slurm-client": "22.05.8-4", "slurmd -V": "22.05.8",
                                         "slurmd (registered)": "22.05.8"}}, "24.11.5")
    assert msg.startswith("gpu01: slurmd, slurm-client 22.05.8-4; slurmd -V, slurmd (registered) 22.05.8 to 24.11.5 "
                          "is 4 major releases")
    # two majors too far: one message each, as their steps differ
    out = upgrade_refusals({"gpu01": {"slurmd": "21.08.8", "slurm-client": "22.05.8"}}, "24.11.5")
    assert [m.split(" to ")[0] for m in out] == ["gpu01: slurmd 21.08.8", "gpu01: slurm-client 22.05.8"]


def test_every_host_and_version_is_reported_at_once():
    out = upgrade_refusals({"head01": {"slurmctld": "22.05.8", "slurmdbd": "24.11.9"},
                            "gpu01": {"slurmd": "garbage"}, "gpu02": {"slurmd": "22.06.1"}}, "24.11.5")
    assert len(out) == 4
    assert out[0].startswith("head01: slurmctld 22.05.8 to 24.11.5 is 4 major releases")
    assert out[1].startswith("head01: slurmdbd 24.11.9 is newer than the target")
    assert out[2] == "gpu01: slurmd garbage cannot be read as a Slurm version, so the upgrade to 24.11.5 cannot be judged"
    assert out[3].startswith("gpu02: slurmd 22.06.1: 22.06 is not a Slurm major release")


def test_hosts_without_versions_are_not_judged_here():
    assert upgrade_refusals({"login01": {}, "gpu01": None, "gpu02": []}, "24.11.5") == []


def test_a_target_that_is_no_major_release():
    (msg,) = upgrade_refusals({"gpu01": ["24.11.5"]}, "24.12.1")
    assert msg.startswith("target 24.12.1: 24.12 is not a Slurm major release")


def test_upgrade_steps():
    assert upgrade_steps("22.05", "24.11") == ["23.11", "24.11"]
    assert upgrade_steps("20.11", "24.11") == ["22.05", "23.11", "24.11"]
    assert upgrade_steps("24.11", "25.11") == ["25.11"]
    assert upgrade_steps("24.11", "24.11") == []
    # every step is within the window of the release it lands on
    path = ["19.05"] + upgrade_steps("19.05", "26.05")
    for a, b in zip(path, path[1:]):
        assert 0 < majors_between(a, b) <= window(b)


# -- the target and the package manager's candidate ----------------------------------------------------------------

@pytest.mark.parametrize("version, target, ok", [
    ("24.11.5-1", "24.11.5", True),
    ("24.11.5-1+b2", "24.11.5", True),
    ("1:24.11.5-1ubuntu1", "24.11.5", True),
    ("24.11.5", "24.11.5", True),                 # scontrol's Version=
    ("24.11.4-1", "24.11.5", False),
    ("24.11.5-1", "24.11.5-1", True),
    ("24.11.5-1+b2", "24.11.5-1", True),          # a binNMU of the named revision
    ("24.11.5-1.el9", "24.11.5-1", True),         # rpm release with the dist tag
    ("24.11.5-10", "24.11.5-1", False),
    ("24.11.5-2", "24.11.5-1", False),
    ("22.05.8-4", "22.05.8-4+deb12u3", False),    # a security update of the same upstream is a change
    ("22.05.8-4+deb12u3", "22.05.8-4+deb12u3", True),
    ("23.11.0~rc1-1", "23.11.0", False),
])
def test_matches_target(version, target, ok):
    assert matches_target(version, target) is ok


def test_candidate_refusals():
    assert candidate_refusal("gpu01", "slurmd", "24.11.5-1", "24.11.5") is None
    msg = candidate_refusal("gpu01", "slurmd", "22.05.8-4+deb12u3", "24.11.5")
    assert msg.startswith("gpu01: the package manager's candidate for slurmd is 22.05.8-4+deb12u3, not the target "
                          "24.11.5: the configured repositories do not offer it")
    msg = candidate_refusal("gpu01", "slurmd", None, "24.11.5")
    assert msg.startswith("gpu01: the package manager offers no version of slurmd")
    assert "not the target" in candidate_refusal("gpu01", "slurmd", "(weird)", "24.11.5")


# -- tool outputs ------------------------------------------------------------------------------------------------

APT_POLICY = """slurmd:
  Installed: 22.05.8-4+deb12u3
  Candidate: 22.05.8-4+deb12u3
  Version table:
 *** 22.05.8-4+deb12u3 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
        100 /var/lib/dpkg/status
slurm-client:
  Installed: (none)
  Candidate: 24.11.5-1
  Version table:
     24.11.5-1 990
        990 http://repo.example/slurm bookworm/main amd64 Packages
     22.05.8-4+deb12u3 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
slurm-smd-slurmd:
  Installed: (none)
  Candidate: (none)
  Version table:
"""


def test_apt_cache_policy():
    assert parse_apt_cache_policy(APT_POLICY) == {
        "slurmd": {"installed": "22.05.8-4+deb12u3", "candidate": "22.05.8-4+deb12u3"},
        "slurm-client": {"installed": None, "candidate": "24.11.5-1"},
        "slurm-smd-slurmd": {"installed": None, "candidate": None},
    }
    assert parse_apt_cache_policy("") == {}
    assert parse_apt_cache_policy("N: Unable to locate package nosuch\n") == {}


DNF_LIST = """Last metadata expiration check: 0:12:03 ago on Tue 01 Oct 2024 10:00:00 AM UTC.
Available Packages
slurm.x86_64                         24.11.5-1.el9                         slurm-local
slurm-slurmd.x86_64                  24.11.5-1.el9                         slurm-local
slurm-slurmdbd-with-a-very-long-package-name.x86_64
                                     24.11.5-1.el9                         slurm-local
slurm.i686                           24.11.5-1.el9                         slurm-local
"""


def test_dnf_list_available():
    out = parse_dnf_list(DNF_LIST)
    assert out["slurm-slurmd"] == [{"arch": "x86_64", "version": "24.11.5-1.el9", "repo": "slurm-local"}]
    assert [e["arch"] for e in out["slurm"]] == ["x86_64", "i686"]
    assert out["slurm-slurmdbd-with-a-very-long-package-name"][0]["version"] == "24.11.5-1.el9"
    assert parse_dnf_list(DNF_LIST, names=["slurm"]).keys() == {"slurm"}
    # dnf 5
    assert parse_dnf_list("Available packages\nslurm-slurmd.x86_64 24.11.5-1.el9 epel\n") == {
        "slurm-slurmd": [{"arch": "x86_64", "version": "24.11.5-1.el9", "repo": "epel"}]}


def test_rpm_query():
    text = "slurm\t22.05.9-1.el9\nslurm-slurmd\t22.05.9-1.el9\npackage slurm-slurmdbd is not installed\n"
    assert parse_rpm_query(text) == {"slurm": "22.05.9-1.el9", "slurm-slurmd": "22.05.9-1.el9"}


SHOW_CONFIG = """Configuration data as of 2026-11-24T10:00:00
AccountingStorageBackupHost = (null)
AccountingStorageHost   = head01
SLURM_CONF              = /etc/slurm/slurm.conf
SLURM_VERSION           = 22.05.8
SlurmctldTimeout        = 120 sec
SlurmdTimeout           = 300 sec
StateSaveLocation       = /var/lib/slurm/slurmctld
SuspendExcNodes         = (null)

Cgroup Support Configuration:
CgroupPlugin            = autodetect
SlurmdTimeout           = 999 sec

Slurmctld(primary) at head01 is UP
"""


def test_scontrol_show_config():
    values = parse_scontrol_config(SHOW_CONFIG)
    assert values["SLURM_VERSION"] == "22.05.8"
    assert values["StateSaveLocation"] == "/var/lib/slurm/slurmctld"
    assert values["SlurmdTimeout"] == "300 sec"        # the first section's value
    assert values["AccountingStorageBackupHost"] == "(null)"
    assert seconds(values["SlurmdTimeout"]) == 300 and seconds("60") == 60 and seconds("INFINITE") is None
