"""README.md's offline install, run as the README writes it, without Ansible Galaxy.

The README's offline block is read from README.md itself: its `pip install ansible==<version>` must be the pin of
requirements.txt that .venv has installed (pip is not run again here: .venv is the Python environment the block
describes), and its `ansible-galaxy` lines run word for word, with .venv's bin first on PATH, in a directory that holds
only the tarball built from this checkout, into an empty collections path (ANSIBLE_COLLECTIONS_PATH), with no
ansible.cfg. Then the README's preflight command runs from the installed copy against its own example inventory, as
step 2 copies it. A second test hides the ansible package's collections: the same install must fail naming the
dependency, as the README says, instead of fetching it."""

import importlib.metadata
import os
import re
import shlex
import shutil
import subprocess

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from integration.preflight_helpers import BIN, ROOT, checkout_lines

README = os.path.join(ROOT, "README.md")
GALAXY = yaml.safe_load(open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8"))
TARBALL = "clusterforge-gpu-%s.tar.gz" % GALAXY["version"]


def readme_block(marker):
    """The lines of the README's fenced sh block that contains `marker`, comments dropped."""
    with open(README, encoding="utf-8") as handle:
        blocks = re.findall(r"```sh\n(.*?)```", handle.read(), flags=re.S)
    (block,) = [b for b in blocks if marker in b]
    return [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]


def offline_commands():
    return readme_block("ansible-galaxy collection install --offline")


def run(argv, cwd, env):
    return subprocess.run(argv, cwd=str(cwd), env=env, capture_output=True, text=True, timeout=300, check=False)


def clean_env(collections, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update({"ANSIBLE_COLLECTIONS_PATH": str(collections), "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0",
                "ANSIBLE_RETRY_FILES_ENABLED": "0", "ANSIBLE_HOST_KEY_CHECKING": "0",
                "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}, **extra)
    return env


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A directory holding only the tarball built from this checkout, named as the README names it."""
    base = tmp_path_factory.mktemp("readme-install")
    build = run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(base)],
                ROOT, dict(os.environ))
    assert build.returncode == 0, build.stdout + build.stderr
    assert (base / TARBALL).is_file(), sorted(p.name for p in base.iterdir())
    return base


def test_readme_offline_block_is_pip_then_list_then_offline_install():
    cmds = offline_commands()
    assert len(cmds) == 3, cmds
    assert re.fullmatch(r"python3 -m pip install ansible==\S+", cmds[0]), cmds[0]
    assert cmds[1] == "ansible-galaxy collection list", cmds[1]
    assert cmds[2] == "ansible-galaxy collection install --offline " + TARBALL, cmds[2]


def test_readme_names_this_versions_tarball_everywhere():
    with open(README, encoding="utf-8") as handle:
        named = set(re.findall(r"clusterforge-gpu-[0-9][^\s`]*\.tar\.gz", handle.read()))
    assert named == {TARBALL}, named


def test_readme_pins_the_ansible_package_that_brings_galaxy_yml_dependencies():
    readme_pin = Requirement(offline_commands()[0].split()[-1])
    with open(os.path.join(ROOT, "requirements.txt"), encoding="utf-8") as handle:
        project = [Requirement(line.split("#", 1)[0].strip()) for line in handle
                   if line.split("#", 1)[0].strip().startswith("ansible==")]
    assert [str(readme_pin)] == [str(p) for p in project], "README and requirements.txt pin different ansible packages"
    assert importlib.metadata.version("ansible") in readme_pin.specifier, "run make venv: .venv has another ansible"


def test_readme_offline_install_then_preflight_from_the_installed_copy(workdir):
    collections = workdir / "collections"
    env = clean_env(collections)
    listing = install = None
    for line in offline_commands()[1:]:
        proc = run(shlex.split(line), workdir, env)
        out = proc.stdout + proc.stderr
        assert proc.returncode == 0, line + "\n" + out
        if line.endswith(" list"):
            listing = proc.stdout
        else:
            install = out
    # The list shows the ansible package's collections in the ranges galaxy.yml asks for, under site-packages.
    site = listing.split("site-packages/ansible_collections\n", 1)
    assert len(site) == 2, listing
    for name, wanted in GALAXY["dependencies"].items():
        found = re.search(r"(?m)^%s\s+(\S+)\s*$" % re.escape(name), site[1])
        assert found and found.group(1) in SpecifierSet(str(wanted)), "%s %s: %s" % (name, wanted, listing)
        assert "'%s:%s' is already installed" % (name, found.group(1)) in install, install
    installed = collections / "ansible_collections" / "clusterforge" / "gpu"
    assert (installed / "MANIFEST.json").is_file(), install

    # Step 2: the example inventory, copied from the installed collection; step 3: the README's preflight command.
    (preflight,) = readme_block("clusterforge.gpu.preflight")
    shutil.copytree(installed / "inventories" / "example", workdir / "inventory")
    argv = shlex.split(preflight.replace("<inventory>", "inventory"))
    proc = run(argv, workdir, env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "inventory passed preflight" in out, out
    where = run([os.path.join(BIN, "ansible-galaxy"), "collection", "list", "clusterforge.gpu"], workdir, env).stdout
    assert "# %s\n" % (collections / "ansible_collections") in where and ROOT not in where, where
    assert checkout_lines(out) == [], "the run used the checkout, not the installed collection: " + out


def test_readme_offline_install_names_a_missing_dependency_instead_of_fetching_it(workdir, tmp_path):
    # Without the ansible package's collections (as with ansible-core alone), --offline must install nothing.
    env = clean_env(tmp_path / "collections", ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false")
    proc = run(shlex.split(offline_commands()[2]), workdir, env)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Could not satisfy the following requirements" in out and "ansible.posix:>=" in out, out
    assert not (tmp_path / "collections" / "ansible_collections" / "clusterforge").exists()
