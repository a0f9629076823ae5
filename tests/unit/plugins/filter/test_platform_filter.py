# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""os_vars_file: the roles' one OS refusal and variables-file choice."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.clusterforge.gpu.plugins.filter.platform import os_vars_file

SUPPORTED = {"Debian": ["12"], "Ubuntu": ["22", "24"], "RedHat": ["9"], "Rocky": ["9"]}


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
    assert os_vars_file(facts(dist, major, family), SUPPORTED, vars_dir) == "%s/%s" % (vars_dir, chosen)


@pytest.mark.parametrize("dist, major, family", [
    ("Debian", "11", "Debian"),      # a supported distribution, an unsupported release
    ("Ubuntu", "20", "Debian"),
    ("SLES", "15", "Suse"),          # an unsupported distribution
])
def test_an_unsupported_os_is_refused_naming_host_role_and_the_list(vars_dir, dist, major, family):
    with pytest.raises(AnsibleFilterError) as e:
        os_vars_file(facts(dist, major, family), SUPPORTED, vars_dir, host="gpu07", role="clusterforge.gpu.dcgm")
    assert str(e.value).startswith("gpu07: %s %s is not supported by clusterforge.gpu.dcgm (supported: " % (dist, major))
    assert "Debian 12, RedHat 9, Rocky 9, Ubuntu 22/24" in str(e.value)


def test_a_supported_os_without_a_file_is_an_error_not_a_guess(vars_dir):
    with pytest.raises(AnsibleFilterError, match="no variables file for Rocky 9"):
        os_vars_file(facts("Rocky", "9", "Rocky"), SUPPORTED, vars_dir, host="gpu01", role="r")


def test_missing_facts_say_which(vars_dir):
    with pytest.raises(AnsibleFilterError, match="needs the facts distribution_major_version, os_family"):
        os_vars_file({"distribution": "Debian"}, SUPPORTED, vars_dir, host="gpu01", role="r")


def test_every_role_that_uses_it_has_a_file_for_every_supported_os():
    """The roles' own tables and vars directories agree: no supported OS falls through to 'no variables file'."""
    import glob
    import os
    import yaml
    root = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
    families = {"Debian": "Debian", "Ubuntu": "Debian", "RedHat": "RedHat", "Rocky": "RedHat", "AlmaLinux": "RedHat"}
    checked = 0
    for tasks in glob.glob(os.path.join(root, "roles", "*", "tasks", "set_vars.yml")):
        if "os_vars_file" not in open(tasks).read():
            continue
        role_dir = os.path.dirname(os.path.dirname(tasks))
        role = os.path.basename(role_dir)
        table = yaml.safe_load(open(os.path.join(role_dir, "vars", "main.yml")))["__%s_supported" % role]
        for dist, majors in table.items():
            for major in majors:
                os_vars_file(facts(dist, major, families[dist]), table, os.path.join(role_dir, "vars"), role=role)
                checked += 1
    assert checked >= 7 * 6
