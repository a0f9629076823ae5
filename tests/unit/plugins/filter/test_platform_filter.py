# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""os_vars_file: the roles' one OS refusal and variables-file choice, against the collection's one platform table."""

import glob
import os
import re

import pytest
import yaml

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter.platform import PLATFORMS, os_vars_file

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
FAMILIES = {"Debian": "Debian", "Ubuntu": "Debian", "RedHat": "RedHat", "Rocky": "RedHat", "AlmaLinux": "RedHat"}
# Galaxy's names (meta/main.yml platforms) of the distributions' releases.
GALAXY = {("Debian", "12"): ("Debian", "bookworm"), ("Debian", "13"): ("Debian", "trixie"),
          ("Ubuntu", "22"): ("Ubuntu", "jammy"), ("Ubuntu", "24"): ("Ubuntu", "noble"),
          ("RedHat", "9"): ("EL", "9"), ("Rocky", "9"): ("EL", "9"), ("AlmaLinux", "9"): ("EL", "9")}


def facts(dist, major, family):
    return {"distribution": dist, "distribution_major_version": major, "os_family": family}


@pytest.fixture
def vars_dir(tmp_path):
    for name in ("Debian.yml", "Ubuntu_22.yml", "RedHat.yml"):
        (tmp_path / name).write_text("---\n")
    return str(tmp_path)


@pytest.mark.parametrize("dist, major, family, chosen", [
    ("Ubuntu", "22", "Debian", "Ubuntu_22.yml"),    # the most specific file wins
    ("Ubuntu", "24", "Debian", "Debian.yml"),       # no Ubuntu_24.yml, no Ubuntu.yml: the family's
    ("Debian", "12", "Debian", "Debian.yml"),
    ("Rocky", "9", "RedHat", "RedHat.yml"),
])
def test_the_most_specific_existing_file(vars_dir, dist, major, family, chosen):
    assert os_vars_file(facts(dist, major, family), vars_dir) == "%s/%s" % (vars_dir, chosen)


@pytest.mark.parametrize("dist, major, family", [
    ("Debian", "11", "Debian"),      # a supported distribution, an unsupported release
    ("Ubuntu", "20", "Debian"),
    ("SLES", "15", "Suse"),          # an unsupported distribution
])
def test_an_unsupported_os_is_refused_naming_host_role_and_the_list(vars_dir, dist, major, family):
    with pytest.raises(AnsibleFilterError) as e:
        os_vars_file(facts(dist, major, family), vars_dir, host="gpu07", role="clusterforge.gpu.dcgm")
    assert str(e.value).startswith("gpu07: %s %s is not supported by clusterforge.gpu.dcgm (supported: " % (dist, major))
    assert "AlmaLinux 9, Debian 12/13, RedHat 9, Rocky 9, Ubuntu 22/24" in str(e.value)


def test_a_role_that_names_its_distributions_refuses_the_others(vars_dir):
    assert os_vars_file(facts("Ubuntu", "24", "Debian"), vars_dir, distributions=["Debian", "Ubuntu"]).endswith(
        "/Debian.yml")
    with pytest.raises(AnsibleFilterError) as e:
        os_vars_file(facts("RedHat", "9", "RedHat"), vars_dir, host="mon01", role="clusterforge.gpu.monitoring",
                     distributions=["Debian", "Ubuntu"])
    assert "RedHat 9 is not supported by clusterforge.gpu.monitoring (supported: Debian 12/13, Ubuntu 22/24)" in str(e.value)


@pytest.mark.parametrize("distributions, words", [
    ("Debian", "non-empty list"), ([], "non-empty list"), (["Debian", "SLES"], "SLES not among the collection's")])
def test_a_role_cannot_name_a_distribution_the_collection_does_not_support(vars_dir, distributions, words):
    with pytest.raises(AnsibleFilterError, match=words):
        os_vars_file(facts("Debian", "12", "Debian"), vars_dir, distributions=distributions)


def test_a_supported_os_without_a_file_is_an_error_not_a_guess(vars_dir):
    with pytest.raises(AnsibleFilterError, match="no variables file for Rocky 9"):
        os_vars_file(facts("Rocky", "9", "Rocky"), vars_dir, host="gpu01", role="r")


def test_missing_facts_say_which(vars_dir):
    with pytest.raises(AnsibleFilterError, match="needs the facts distribution_major_version, os_family"):
        os_vars_file({"distribution": "Debian"}, vars_dir, host="gpu01", role="r")


def _roles_and_distributions():
    """(role directory, the distributions it names or None) of every role that loads its OS variables this way."""
    found = []
    for tasks in sorted(glob.glob(os.path.join(ROOT, "roles", "*", "tasks", "set_vars.yml"))):
        text = open(tasks).read()
        if "os_vars_file" not in text:
            continue
        role_dir = os.path.dirname(os.path.dirname(tasks))
        named = re.search(r"distributions=(__\w+)", text)
        distributions = None
        if named:
            distributions = yaml.safe_load(open(os.path.join(role_dir, "vars", "main.yml")))[named.group(1)]
        found.append((role_dir, distributions))
    return found


def test_every_role_that_uses_it_has_a_file_for_every_supported_os():
    """No supported OS falls through to 'no variables file'."""
    checked = 0
    for role_dir, distributions in _roles_and_distributions():
        for dist in distributions or PLATFORMS:
            for major in PLATFORMS[dist]:
                os_vars_file(facts(dist, major, FAMILIES[dist]), os.path.join(role_dir, "vars"),
                             role=os.path.basename(role_dir), distributions=distributions)
                checked += 1
    assert checked >= 8 * 7


def test_galaxy_metadata_names_the_platforms_each_role_supports():
    """meta/main.yml's platforms (Galaxy's names) are the role's platforms of the one table, no more, no fewer."""
    roles = _roles_and_distributions()
    assert len(roles) >= 9
    for role_dir, distributions in roles:
        want = {}
        for dist in distributions or PLATFORMS:
            for major in PLATFORMS[dist]:
                name, version = GALAXY[(dist, major)]
                want.setdefault(name, set()).add(version)
        meta = yaml.safe_load(open(os.path.join(role_dir, "meta", "main.yml")))["galaxy_info"]["platforms"]
        got = dict((p["name"], set(str(v) for v in p["versions"])) for p in meta)
        assert got == want, os.path.basename(role_dir)
