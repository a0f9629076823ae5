# Installed by the clusterforge.gpu collection (role slurm_compute); local changes are overwritten.
"""The checks of the node's services: fabric_manager (`systemctl is-active`), peermem (the nvidia_peermem module
loaded) and boot_units (`systemctl is-failed` of the units that re-apply at boot what a reboot undoes)."""

import os

from clusterforge_health.core import CHECKS_PHASE, DEFAULTS, boot_units, find, first_line, run, unfinished


def check_fabric_manager(r):
    if not r.on("fabric_manager"):
        return
    unit = str(r.cfg.get("fabric_manager_unit") or DEFAULTS["fabric_manager_unit"])
    systemctl = find("systemctl", r.cfg.get("systemctl_path"))
    if systemctl is None:
        r.fail("fabric_manager", "fabric_manager: systemctl not found, %s unknown" % unit)
        return
    res = run([systemctl, "is-active", unit], r.budget, CHECKS_PHASE)
    if not res.finished:
        r.fail("fabric_manager", unfinished(r.budget, "systemctl is-active", res), timeout=True)
        return
    state = first_line(res.out) or "unknown"
    if res.rc != 0 or state != "active":
        r.fail("fabric_manager", "fabric_manager: %s is %s" % (unit, state))
    r.passed("fabric_manager")


def check_peermem(r):
    if not r.on("peermem"):
        return
    if not os.path.isdir(os.path.join(r.cfg.get("sys_module_dir") or DEFAULTS["sys_module_dir"], "nvidia_peermem")):
        r.fail("peermem", "peermem: nvidia_peermem is not loaded")
    r.passed("peermem")


def check_boot_units(r):
    """A boot unit that failed is a fault naming it: `systemctl is-failed` prints one state per unit, in order
    ("failed", "active", "inactive" for one that did not run or is not installed)."""
    if not r.on("boot_units"):
        return
    units = boot_units(r.cfg)
    systemctl = find("systemctl", r.cfg.get("systemctl_path"))
    if systemctl is None:
        r.fail("boot_units", "boot_units: systemctl not found, %s unknown" % ", ".join(units))
        return
    res = run([systemctl, "is-failed"] + units, r.budget, CHECKS_PHASE)
    if not res.finished:
        r.fail("boot_units", unfinished(r.budget, "systemctl is-failed", res), timeout=True)
        return
    states = [line.strip() for line in res.out.splitlines()]
    if len(states) != len(units):
        r.fail("boot_units", "boot_units: systemctl is-failed gave %d state(s) for %d unit(s) (rc %s)"
               % (len(states), len(units), res.rc))
        return
    failed = [unit for unit, state in zip(units, states) if state == "failed"]
    if failed:
        r.fail("boot_units", "boot_units: %s failed" % ", ".join(failed))
    r.passed("boot_units")
