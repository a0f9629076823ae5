# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""TEST-ONLY ACS view of ``lspci -vvv`` output.

The modules use plugins/module_utils/pci.py's ``parse_lspci_vvv`` directly; this narrower view of it keeps the
lab's lspci emulator (tests/lab/unit/test_emulator_pci_ib.py) and the real samples (tests/conformance/) honest about
the ACS lines of the format.
"""

from ansible_collections.clusterforge.gpu.plugins.module_utils.pci import parse_lspci_vvv


def parse_lspci_acs(text):
    """ACS view of ``lspci -vvv`` output: one dict per device (or per headerless ``ACSCtl`` line).

    Each: ``bdf`` (None in grep excerpts), ``description``, ``is_bridge``, ``acs_capable``, ``acs_enabled``
    (any ACSCtl flag set, i.e. the control register is not 0000), ``acs_cap`` and ``acs_ctl`` ({flag: bool}),
    plus ``acs_ctl_value`` (the register as setpci prints it, e.g. ``001d``; None without ACS).
    """
    keys = ("bdf", "description", "is_bridge", "acs_capable", "acs_enabled", "acs_cap", "acs_ctl", "acs_ctl_value")
    return [dict((k, d[k]) for k in keys) for d in parse_lspci_vvv(text)]
