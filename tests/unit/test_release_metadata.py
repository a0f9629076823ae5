"""The release's metadata agrees with itself: galaxy.yml, requirements.yml, meta/runtime.yml, requirements.txt, the
plugins' version_added, the licence and the changelog configuration (docs/releasing.md)."""

import glob
import os
import re

import yaml
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load_yaml(*path):
    with open(os.path.join(ROOT, *path), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def galaxy():
    return load_yaml("galaxy.yml")


def pinned(name):
    with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as handle:
        for line in handle:
            line = line.split("#", 1)[0].strip()
            if line and Requirement(line).name == name:
                return Requirement(line)
    raise AssertionError("%s is not pinned in requirements.txt" % name)


def test_requirements_yml_lists_galaxy_yml_dependencies_with_the_same_ranges():
    listed = {c["name"]: str(c["version"]) for c in load_yaml("requirements.yml")["collections"]}
    assert listed == {name: str(version) for name, version in galaxy()["dependencies"].items()}


def test_requires_ansible_is_the_tested_ansible_core():
    # The lowest ansible-core the collection claims is the minor release it is tested with, pinned in requirements.txt.
    (pin,) = list(pinned("ansible-core").specifier)
    assert pin.operator == "=="
    tested = Version(pin.version)
    assert load_yaml("meta", "runtime.yml")["requires_ansible"] == ">=%d.%d.0" % (tested.major, tested.minor)


def test_the_release_tools_are_pinned():
    for name in ("antsibull-changelog", "antsibull-docs"):
        assert str(pinned(name).specifier).startswith("=="), name


def version_added_values():
    """(file, value) of every version_added in plugins/ (modules, filters, lookups, callbacks, doc fragments)."""
    found = []
    for path in sorted(glob.glob(os.path.join(ROOT, "plugins", "**", "*.*"), recursive=True)):
        if not path.endswith((".py", ".yml", ".yaml")):
            continue
        with open(path, encoding="utf-8") as handle:
            for value in re.findall(r"^\s*version_added:\s*['\"]?([^'\"\s]+)", handle.read(), flags=re.M):
                found.append((os.path.relpath(path, ROOT), value))
    return found


def test_every_version_added_is_the_first_release():
    values = version_added_values()
    assert len(values) > 30, "the scan lost the plugins' documentation: %s" % values
    wrong = [(path, value) for path, value in values if value != "1.0.0"]
    assert not wrong, "everything in plugins/ was added in 1.0.0, the first release: %s" % wrong


def test_galaxy_version_is_not_older_than_the_first_release():
    assert Version(galaxy()["version"]) >= Version("1.0.0")


def test_licence_file_is_the_gpl_3_text_galaxy_yml_names():
    assert galaxy()["license"] == ["GPL-3.0-or-later"]
    with open(os.path.join(ROOT, "LICENSE"), encoding="utf-8") as handle:
        text = handle.read()
    assert "GNU GENERAL PUBLIC LICENSE" in text and "Version 3, 29 June 2007" in text
    assert "END OF TERMS AND CONDITIONS" in text


def test_changelog_config_is_a_collections_with_standard_sections():
    config = load_yaml("changelogs", "config.yaml")
    assert config["title"] == "%s.%s" % (galaxy()["namespace"], galaxy()["name"])
    assert config["output"] == [{"file": "CHANGELOG.rst", "format": "rst"}]
    assert config["keep_fragments"] is False and config["use_fqcn"] is True
    sections = [name for name, _title in config["sections"]]
    assert sections == ["major_changes", "minor_changes", "breaking_changes", "deprecated_features", "removed_features",
                        "security_fixes", "bugfixes", "known_issues"]


def test_fragments_use_only_configured_sections():
    # A benchmark or work journal section (the former "performance") would be published as release notes.
    config = load_yaml("changelogs", "config.yaml")
    allowed = {name for name, _title in config["sections"]}
    allowed |= {config["prelude_section_name"], config["trivial_section_name"]}
    for path in sorted(glob.glob(os.path.join(ROOT, "changelogs", "fragments", "*.yml"))):
        with open(path, encoding="utf-8") as handle:
            sections = set(yaml.safe_load(handle) or {})
        assert sections <= allowed, "%s: %s" % (os.path.basename(path), sorted(sections - allowed))
