"""roles/dcgm: nv-hostengine on a Unix socket in a root-only directory (issue 39), rendered as the role renders it;
the running host engine is proven by the dcgm molecule scenario and the lab's attack test (tests/lab/
test_lab_security.py), and the emulators by tests/lab/unit/test_emulator_hostengine.py."""

import os

from role_files import load_yaml, render_role_template

from ansible_collections.clusterforge.gpu.plugins.module_utils import dcgm as D

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ROLE = os.path.join(ROOT, "roles", "dcgm")
DROP_IN = "etc/systemd/system/nvidia-dcgm.service.d/clusterforge.conf.j2"
WATCH_UNIT = "etc/systemd/system/clusterforge-dcgm-health.service.j2"


def lines(template, **variables):
    return render_role_template(ROOT, "dcgm", template, **variables).splitlines()


def test_the_host_engine_listens_on_its_socket_in_a_root_only_directory_by_default():
    drop_in = lines(DROP_IN)
    service = drop_in[drop_in.index("[Service]"):]
    assert service == [
        "[Service]", "RuntimeDirectory=nvidia-dcgm", "RuntimeDirectoryMode=0700",
        "ExecStart=",  # replaces the package's ExecStart
        "ExecStart=/usr/bin/nv-hostengine -n --service-account nvidia-dcgm "
        "--domain-socket /run/nvidia-dcgm/nv-hostengine.sock"]
    assert "ExecStart=dcgmi health --host unix:///run/nvidia-dcgm/nv-hostengine.sock -s a" in lines(WATCH_UNIT)


def test_without_a_socket_the_package_unit_is_left_as_it_is():
    drop_in = lines(DROP_IN, dcgm_hostengine_socket_path=None)
    assert "[Service]" not in drop_in and not any(line.startswith("ExecStart") for line in drop_in)
    assert "ExecStart=dcgmi health --host localhost:5555 -s a" in lines(WATCH_UNIT, dcgm_hostengine_socket_path=None)
    drop_in = lines(DROP_IN, dcgm_hostengine_service_account=None, dcgm_hostengine_socket_path="/run/d/s")
    assert drop_in[-1] == "ExecStart=/usr/bin/nv-hostengine -n --domain-socket /run/d/s"


def test_the_role_records_the_address_where_the_modules_and_the_health_check_read_it():
    role_vars = load_yaml(ROLE, "vars", "main.yml")
    assert role_vars["__dcgm_hostengine_file"] == D.HOSTENGINE_FILE
    defaults = load_yaml(ROLE, "defaults", "main.yml")
    spec = load_yaml(ROLE, "meta", "argument_specs.yml")["argument_specs"]["main"]["options"]
    assert defaults["dcgm_hostengine_socket_path"] == spec["dcgm_hostengine_socket_path"]["default"]
    assert D.socket_path_problem(defaults["dcgm_hostengine_socket_path"]) is None
