"""The execution environment (execution-environment.yml) renders, carries the collection, and cannot drift from the code.

`ansible-builder create` writes the build context (the Containerfile and everything it copies) without building an
image, so no container runtime and no registry are needed. The build context is rendered from a copy of the
definition and the files it names, next to a tarball of this checkout built with `ansible-galaxy collection build`
(what `make build` writes to .cache/build), so the test leaves the checkout alone.

The drift checks: every third-party library that the collection's controller-side code imports is in the EE's Python
requirements, and the pins and collections of the EE are those of requirements.txt and galaxy.yml.

No collection comes from Ansible Galaxy: clusterforge.gpu is installed from its tarball with --offline, and its
dependencies come with the pinned `ansible` package; the galaxy stage's install command is run here against the same
pinned package in .venv, and fails when that package's collections are hidden.
"""

import ast
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, ".venv", "bin")
BUILDER = os.path.join(BIN, "ansible-builder")
EE_FILE = os.path.join(ROOT, "execution-environment.yml")
COLLECTION_EE_FILE = os.path.join(ROOT, "meta", "execution-environment.yml")
PLUGINS = os.path.join(ROOT, "plugins")
# Modules run on the managed nodes, not in the execution environment: their imports are checked apart.
MODULES = os.path.join(PLUGINS, "modules")
OWN_NAMESPACE = ("ansible_collections", "clusterforge", "gpu")

needs_builder = pytest.mark.skipif(
    not os.access(BUILDER, os.X_OK),
    reason="ansible-builder is not installed in .venv (requirements.txt pins it; `make venv` installs it)")


def load_yaml(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def read_lines(path):
    """The requirement lines of a pip or bindep file: comments and blank lines dropped."""
    with open(path, encoding="utf-8") as handle:
        lines = [line.split("#", 1)[0].strip() for line in handle]
    return [line for line in lines if line]


def ee():
    return load_yaml(EE_FILE)


def ee_path(key):
    """A dependency file of the EE (python or system), as an absolute path."""
    value = ee()["dependencies"][key]
    assert isinstance(value, str), "dependencies.%s must name a file, so the collection's metadata can name it too" % key
    return os.path.join(ROOT, value)


def python_requirements():
    """{canonical distribution name: requirement line} of the EE's Python requirements file."""
    return {canonicalize_name(Requirement(line).name): line for line in read_lines(ee_path("python"))}


def pinned(requirements_file, name):
    """The `name==version` line of requirements.txt."""
    for line in read_lines(requirements_file):
        req = Requirement(line)
        if canonicalize_name(req.name) == canonicalize_name(name):
            return line
    raise AssertionError("%s is not in %s" % (name, requirements_file))


def python_files(top):
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for filename in sorted(filenames):
            if filename.endswith(".py"):
                yield os.path.join(dirpath, filename)


def imported_names(path):
    """Every absolute module name a file imports (at any depth: try/except ImportError and functions included)."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), filename=path)
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def third_party_imports(top, exclude=None):
    """{top-level module: [files]} of the imports outside the standard library, ansible and ansible_collections."""
    found = {}
    for path in python_files(top):
        if exclude and path.startswith(exclude + os.sep):
            continue
        for name in imported_names(path):
            top_level = name.split(".", 1)[0]
            if top_level in sys.stdlib_module_names or top_level in ("ansible", "ansible_collections"):
                continue
            found.setdefault(top_level, []).append(os.path.relpath(path, ROOT))
    return found


def collection_imports(top):
    """{namespace.name: [files]} of the imports of other collections' Python code (ansible_collections.<ns>.<name>)."""
    found = {}
    for path in python_files(top):
        for name in imported_names(path):
            parts = tuple(name.split("."))
            if parts[0] == "ansible_collections" and len(parts) >= 3 and parts[:3] != OWN_NAMESPACE:
                found.setdefault("%s.%s" % parts[1:3], []).append(os.path.relpath(path, ROOT))
    return found


# --- the definition against the code and the project's pins ----------------------------------------------------------

def test_definition_is_version_3_with_the_dependency_files():
    doc = ee()
    assert doc["version"] == 3
    assert ":" in doc["images"]["base_image"]["name"].rsplit("/", 1)[-1], "the base image needs a tag"
    for key in ("python", "system"):
        assert os.path.isfile(ee_path(key)), doc["dependencies"][key]


def test_controller_side_imports_are_in_the_ee_python_requirements():
    imports = third_party_imports(PLUGINS, exclude=MODULES)
    assert "netaddr" in imports, "the scan lost the filters' netaddr import: %s" % sorted(imports)
    providers = importlib.metadata.packages_distributions()
    listed = python_requirements()
    missing = []
    for module, files in sorted(imports.items()):
        dists = providers.get(module)
        if not dists:
            missing.append("%s (imported by %s) is not installed in .venv, so it cannot be mapped to a distribution"
                           % (module, ", ".join(sorted(set(files)))))
        elif not any(canonicalize_name(dist) in listed for dist in dists):
            missing.append("%s (distribution %s, imported by %s)" % (module, " or ".join(dists), ", ".join(sorted(set(files)))))
    assert not missing, "add to %s: %s" % (os.path.relpath(ee_path("python"), ROOT), "; ".join(missing))


def test_modules_import_no_third_party_library():
    # A module runs on the managed node: a library it imports must be installed there by a role (and named in the
    # module's `requirements`), not in the execution environment. One does, by that decision: web_credentials hashes
    # the monitoring web password with bcrypt on the monitoring server, where the monitoring role installs
    # python3-bcrypt (roles/monitoring/vars/main.yml, __monitoring_bcrypt_package).
    allowed = {"bcrypt": ["plugins/modules/web_credentials.py"]}
    imports = third_party_imports(MODULES)
    unexpected = {m: f for m, f in imports.items() if sorted(set(f)) != allowed.get(m)}
    assert not unexpected, "modules importing third-party libraries (install them on the nodes): %s" % unexpected
    with open(os.path.join(ROOT, "plugins", "modules", "web_credentials.py")) as f:
        assert "requirements:\n  - python3-bcrypt" in f.read()
    with open(os.path.join(ROOT, "roles", "monitoring", "vars", "main.yml")) as f:
        assert "__monitoring_bcrypt_package: python3-bcrypt" in f.read()


def galaxy_yml():
    return load_yaml(os.path.join(ROOT, "galaxy.yml"))


def tarball_name():
    return "clusterforge-gpu-%s.tar.gz" % galaxy_yml()["version"]


def test_other_collections_imported_by_plugins_are_galaxy_yml_dependencies():
    wanted = set(galaxy_yml()["dependencies"])
    missing = {name: files for name, files in collection_imports(PLUGINS).items() if name not in wanted}
    assert not missing, "plugins import collections galaxy.yml does not depend on: %s" % missing


def test_ee_installs_only_this_version_of_the_collection_from_its_tarball():
    # galaxy.yml's dependencies are not listed: a name there would send ansible-galaxy to Galaxy.
    assert ee()["dependencies"]["galaxy"] == {"collections": [{"name": "collection/" + tarball_name(), "type": "file"}]}
    sources = [entry for entry in ee()["additional_build_files"] if entry["dest"] == "collection"]
    assert sources == [{"src": ".cache/build/" + tarball_name(), "dest": "collection"}]


def test_ee_collection_install_is_offline():
    assert "--offline" in ee()["build_arg_defaults"]["ANSIBLE_GALAXY_CLI_COLLECTION_OPTS"].split()


def test_ee_installs_the_projects_ansible_package():
    project = pinned(os.path.join(ROOT, "requirements.txt"), "ansible")
    assert "RUN $PYCMD -m pip install --no-cache-dir %s\n" % project in ee()["additional_build_steps"]["append_base"]


def bundled_collection_version(name):
    """The version of a collection in the ansible package installed in .venv (site-packages/ansible_collections)."""
    namespace, collection = name.split(".")
    dist = importlib.metadata.distribution("ansible")
    path = dist.locate_file(os.path.join("ansible_collections", namespace, collection, "MANIFEST.json"))
    assert os.path.isfile(path), "%s is not in the ansible package %s" % (name, dist.version)
    return load_yaml(path)["collection_info"]["version"]


def test_the_pinned_ansible_package_satisfies_galaxy_yml_dependencies():
    project = Requirement(pinned(os.path.join(ROOT, "requirements.txt"), "ansible"))
    assert importlib.metadata.version("ansible") in project.specifier, "run make venv: .venv has another ansible"
    for name, wanted in galaxy_yml()["dependencies"].items():
        version = bundled_collection_version(name)
        assert version in SpecifierSet(str(wanted)), "%s %s of ansible %s is outside galaxy.yml's %s" % (
            name, version, importlib.metadata.version("ansible"), wanted)


def test_ansible_core_pin_is_the_projects():
    project = pinned(os.path.join(ROOT, "requirements.txt"), "ansible-core")
    assert ee()["dependencies"]["ansible_core"]["package_pip"] == project


def test_ansible_runner_is_pinned():
    assert str(Requirement(ee()["dependencies"]["ansible_runner"]["package_pip"]).specifier).startswith("==")


def test_collection_metadata_names_the_ee_files():
    # ansible-builder reads meta/execution-environment.yml of every collection an EE installs; without it, it would
    # take the root requirements.txt (this repository's development tool chain) as the collection's requirements.
    meta = load_yaml(COLLECTION_EE_FILE)
    deps = ee()["dependencies"]
    assert meta["dependencies"] == {"python": deps["python"], "system": deps["system"]}


def test_bindep_has_the_ssh_client():
    packages = [line.split()[0] for line in read_lines(ee_path("system"))]
    assert "openssh-clients" in packages


# --- ansible-builder create: the rendered build context ----------------------------------------------------------------

@pytest.fixture(scope="module")
def tarball(tmp_path_factory):
    out = tmp_path_factory.mktemp("build")
    proc = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--force", "--output-path", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    path = out / tarball_name()
    assert path.is_file(), sorted(p.name for p in out.iterdir())
    return path


@pytest.fixture(scope="module")
def context(tarball, tmp_path_factory):
    """`ansible-builder create` of a copy of the definition, the files it names and the built tarball."""
    src = tmp_path_factory.mktemp("ee")
    shutil.copy(EE_FILE, src / "execution-environment.yml")
    doc = ee()
    for key in ("python", "system"):
        (src / doc["dependencies"][key]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ee_path(key), src / doc["dependencies"][key])
    for entry in doc.get("additional_build_files", []):
        if entry["src"].endswith(".tar.gz"):
            where = src / os.path.dirname(entry["src"])
            where.mkdir(parents=True, exist_ok=True)
            shutil.copy(tarball, where / tarball.name)
    ctx = src / "context"
    proc = subprocess.run([BUILDER, "create", "--file", str(src / "execution-environment.yml"), "--context", str(ctx),
                           "--output-filename", "Containerfile"],
                          cwd=str(src), capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "No matches" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    return ctx


def stage(containerfile, name):
    """The lines of one build stage of the Containerfile."""
    text = containerfile.split("AS %s\n" % name, 1)[1]
    return text.split("\nFROM ", 1)[0]


@needs_builder
def test_containerfile_installs_the_pinned_ansible_on_the_base_image(context):
    containerfile = (context / "Containerfile").read_text(encoding="utf-8")
    doc = ee()
    assert 'ARG EE_BASE_IMAGE="%s"' % doc["images"]["base_image"]["name"] in containerfile
    assert 'ARG PYCMD="%s"' % doc["dependencies"]["python_interpreter"]["python_path"] in containerfile
    refs = containerfile.split('ARG ANSIBLE_INSTALL_REFS="', 1)[1].split('"', 1)[0].split()
    assert doc["dependencies"]["ansible_core"]["package_pip"] in refs
    assert doc["dependencies"]["ansible_runner"]["package_pip"] in refs


@needs_builder
def test_context_carries_the_python_requirements_and_bindep(context):
    assert read_lines(context / "_build" / "requirements.txt") == read_lines(ee_path("python"))
    assert read_lines(context / "_build" / "bindep.txt") == read_lines(ee_path("system"))
    builder = stage((context / "Containerfile").read_text(encoding="utf-8"), "builder")
    assert "COPY _build/requirements.txt requirements.txt" in builder
    assert "COPY _build/bindep.txt bindep.txt" in builder
    assert "--user-pip=requirements.txt" in builder and "--user-bindep=bindep.txt" in builder


@needs_builder
def test_context_carries_the_collection_and_installs_it_offline(context, tarball):
    assert (context / "_build" / "collection" / tarball.name).is_file()
    assert load_yaml(context / "_build" / "requirements.yml") == ee()["dependencies"]["galaxy"]
    containerfile = (context / "Containerfile").read_text(encoding="utf-8")
    assert 'ARG ANSIBLE_GALAXY_CLI_COLLECTION_OPTS="--offline"' in containerfile
    galaxy = stage(containerfile, "galaxy")
    assert "WORKDIR /build" in galaxy
    assert "ansible-galaxy collection install $ANSIBLE_GALAXY_CLI_COLLECTION_OPTS -r requirements.yml" in galaxy
    base = stage(containerfile, "base")
    assert "pip install --no-cache-dir %s" % pinned(os.path.join(ROOT, "requirements.txt"), "ansible") in base


def galaxy_stage_install(context, collections, **extra_env):
    """The galaxy stage's collection install, run in the build context against the ansible package of .venv."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update({"ANSIBLE_GALAXY_DISABLE_GPG_VERIFY": "1", "ANSIBLE_COLLECTIONS_PATH": str(collections),
                "PATH": BIN + os.pathsep + os.environ.get("PATH", "")}, **extra_env)
    return subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install",
                           *ee()["build_arg_defaults"]["ANSIBLE_GALAXY_CLI_COLLECTION_OPTS"].split(),
                           "-r", "requirements.yml", "--collections-path", str(collections)],
                          cwd=str(context / "_build"), env=env, capture_output=True, text=True, timeout=300, check=False)


@needs_builder
def test_galaxy_stage_installs_the_collection_without_galaxy(context, tmp_path):
    proc = galaxy_stage_install(context, tmp_path / "collections")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    manifest = load_yaml(tmp_path / "collections" / "ansible_collections" / "clusterforge" / "gpu" / "MANIFEST.json")
    assert manifest["collection_info"]["version"] == galaxy_yml()["version"]
    for name in galaxy_yml()["dependencies"]:
        assert "'%s:%s' is already installed" % (name, bundled_collection_version(name)) in out, out


@needs_builder
def test_galaxy_stage_fails_naming_a_dependency_the_ansible_package_does_not_bring(context, tmp_path):
    # With the ansible package's collections hidden, --offline must fail (not fetch from Galaxy) and name them.
    proc = galaxy_stage_install(context, tmp_path / "collections", ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Could not satisfy the following requirements" in out and "ansible.posix:>=" in out, out


@needs_builder
def test_introspection_of_the_built_collection_yields_the_ee_requirements(tarball, tmp_path):
    # What the EE's builder stage runs over the installed collections: the collection's own requirements must be
    # those of meta/ee-requirements.txt and bindep.txt, not the development tool chain of the root requirements.txt.
    dest = tmp_path / "ansible_collections" / "clusterforge" / "gpu"
    dest.mkdir(parents=True)
    with tarfile.open(tarball) as tar:
        tar.extractall(dest, filter="data")
    proc = subprocess.run([BUILDER, "introspect", str(tmp_path)], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = yaml.safe_load(proc.stdout.split("---", 1)[1])
    found = sorted(canonicalize_name(Requirement(line.split("#", 1)[0]).name) for line in data["python"])
    # ansible-builder drops PyYAML from collections' requirements (its EXCLUDE_REQUIREMENTS: ansible-core has it).
    assert found == sorted(name for name in python_requirements() if name != "pyyaml"), data
    assert sorted(line.split("#", 1)[0].strip() for line in data["system"]) == sorted(read_lines(ee_path("system")))
