#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: nvidia_smi
short_description: Set persistence mode, power limit, locked clocks and application clocks of NVIDIA GPUs
version_added: 1.0.0
description:
  - Reads the state of every GPU with one C(nvidia-smi --query-gpu=... --format=csv,noheader,nounits) call,
    compares it with the requested settings and runs the C(nvidia-smi) setters only for the GPUs that differ
    (C(-i <index> -pm 1), C(-pl <W>), C(-ac <mem>,<gfx>)/C(-rac), C(-lgc <min>,<max>)/C(-rgc), C(-lmc <min>,<max>)/C(-rmc)).
  - Clock values are checked before C(nvidia-smi) runs at all. They must be whole numbers of MHz, C(min) not greater
    than C(max), and C(max), C(memory) and C(graphics) above 0.
  - Every request is checked against each selected GPU before anything is changed. A power limit must lie in
    [C(power.min_limit), C(power.max_limit)]; clock requests must not exceed C(clocks.max.sm) (C(clocks.max.graphics)
    for application clocks) or C(clocks.max.memory). One bad GPU fails the task and no GPU is changed.
  - After changing anything the module reads the GPUs once more and fails, with the setter's C(cmd), C(rc),
    C(stdout) and C(stderr), when a value did not stick.
  - B(Locked clocks cannot be read back); NVML has no getter for them. The module therefore compares locked-clock
    requests with its O(state_file), which records what was applied (the clamped values the driver reported).
    A GPU with no record there counts as different, so the first run always applies the lock or the reset.
    Locks set outside this module are not seen.
  - The O(state_file) records every setting this module applied, per GPU UUID. The boot-time unit of the
    C(clusterforge.gpu.gpu_tuning) role reads that file and applies it again at every boot, because
    B(none of these settings survives a reboot or a driver reload).
  - The record of a GPU whose PCI slot now holds another GPU (a replaced GPU, or a system disk moved to other
    hardware) is dropped, with a warning, when the file is written; the record of a GPU missing from an empty slot
    (off the bus) is kept.
options:
  gpus:
    description:
      - The GPUs to manage, each given as an index (V(0)), a UUID (V(GPU-...)) or a PCI bus id
        (V(00000000:18:00.0); V(0000:18:00.0) and V(18:00.0) work too).
      - Target the physical GPU, not MIG device UUIDs; clocks and power limits are per physical GPU.
      - All GPUs when omitted.
    type: list
    elements: str
  persistence_mode:
    description:
      - Enable (V(true)) or disable (V(false)) the legacy persistence mode with C(nvidia-smi -pm).
      - NVIDIA recommends the C(nvidia-persistenced) daemon instead; the C(gpu_tuning) role enables that unit.
        Without persistence the driver may unload when idle and drop every other setting of this module.
    type: bool
  power_limit_watts:
    description:
      - The power limit in watts (C(nvidia-smi -pl)). Compared with C(power.limit), the requested limit;
        C(enforced.power.limit), which out-of-band caps can lower, is only reported.
    type: int
  locked_gpu_clocks:
    description:
      - Lock the GPU (SM) clock to a range with C(nvidia-smi -lgc <min>,<max>).
      - The driver may clamp the request; the clamped values it reports are what the state file records and what
        RV(gpus[].after) shows.
      - To remove the lock, use O(reset_locked_gpu_clocks) instead (the two are mutually exclusive).
    type: dict
    suboptions:
      min:
        description:
          - The lowest SM clock in MHz, V(0) or more and not greater than O(locked_gpu_clocks.max).
            V(0) asks for the lowest clock the GPU supports (the driver raises it).
        type: int
        required: true
      max:
        description:
          - The highest SM clock in MHz, above V(0) and not above the GPU's C(clocks.max.sm) (1980 on H100 SXM).
        type: int
        required: true
  reset_locked_gpu_clocks:
    description:
      - V(true) removes the SM clock lock with C(nvidia-smi -rgc).
      - Mutually exclusive with O(locked_gpu_clocks); leave it out, rather than set it to V(false), when that
        option is given.
    type: bool
  locked_memory_clocks:
    description:
      - Lock the memory clock to a range with C(nvidia-smi -lmc <min>,<max>) (Ampere and newer).
      - Clamped like O(locked_gpu_clocks). To remove the lock, use O(reset_locked_memory_clocks) instead.
    type: dict
    suboptions:
      min:
        description:
          - The lowest memory clock in MHz, V(0) or more and not greater than O(locked_memory_clocks.max).
        type: int
        required: true
      max:
        description:
          - The highest memory clock in MHz, above V(0) and not above the GPU's C(clocks.max.memory).
        type: int
        required: true
  reset_locked_memory_clocks:
    description:
      - V(true) removes the memory clock lock with C(nvidia-smi -rmc).
      - Mutually exclusive with O(locked_memory_clocks); leave it out, rather than set it to V(false), when that
        option is given.
    type: bool
  application_clocks:
    description:
      - Set the application clocks with C(nvidia-smi -ac <memory>,<graphics>) (for example V(2619) and V(1980)
        on H100 SXM, V(3201) and V(1980) on H200). Only pairs listed by C(nvidia-smi -q -d SUPPORTED_CLOCKS) are
        accepted by the driver. When a selected GPU has other application clocks now, the module reads that list
        (one more C(nvidia-smi -q -x)) and fails before any change when the pair is not on it, naming the memory
        clocks the GPU has (an H100's memory value, 2619 MHz, is refused on an H200).
      - Locked GPU clocks take precedence over application clocks.
      - To go back to C(clocks.default_applications.*), use O(reset_application_clocks) instead.
    type: dict
    suboptions:
      memory:
        description:
          - The memory clock in MHz, above V(0) and not above the GPU's C(clocks.max.memory).
        type: int
        required: true
      graphics:
        description:
          - The graphics clock in MHz, above V(0) and not above the GPU's C(clocks.max.graphics).
        type: int
        required: true
  reset_application_clocks:
    description:
      - V(true) restores the default application clocks with C(nvidia-smi -rac), on the GPUs whose application
        clocks differ from C(clocks.default_applications.*).
      - Mutually exclusive with O(application_clocks); leave it out, rather than set it to V(false), when that
        option is given.
    type: bool
  state_file:
    description:
      - JSON file recording the settings this module applied, per GPU UUID (see the notes for its format).
        Written atomically (mode 0644, parent directory created) only when its content changes and never in
        check mode.
    type: path
    default: /etc/clusterforge/nvidia_smi_state.json
  nvidia_smi_path:
    description:
      - Path of the C(nvidia-smi) binary. Looked up on E(PATH) and in the sbin directories when omitted.
    type: path
extends_documentation_fragment:
  - clusterforge.gpu.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the GPUs and the state file, predicts C(changed) and RV(gpus[].after), runs no setter and writes no file.
  diff_mode:
    support: full
    details:
      - Shows the managed settings of every selected GPU before and after.
requirements:
  - The NVIDIA driver and its C(nvidia-smi). Setters need root (every NVML device command does).
notes:
  - None of persistence mode, power limit, locked clocks or application clocks survives a reboot or a driver reload.
    The C(gpu_tuning) role installs a C(Type=oneshot) unit, ordered after C(nvidia-persistenced.service), that reads
    O(state_file) at boot and applies it again.
  - 'State file format: C({"version": 1, "gpus": {"<uuid>": {"index": 0, "pci_bus_id": "...", "name": "...",
    "persistence_mode": true, "power_limit_watts": 500, "application_clocks": {"memory": 2619, "graphics": 1980},
    "locked_gpu_clocks": {"min": 1980, "max": 1980, "requested_min": 1980, "requested_max": 1980},
    "locked_memory_clocks": null}}}). A key is present only for settings this module manages on that GPU;
    V(null) means "reset to the driver default"; C(min)/C(max) are the values the driver applied (clamped).'
  - Apply the MIG layout before clocks and power limits; enabling MIG may reset the GPU and drop them.
seealso:
  - module: clusterforge.gpu.nvidia_smi_info
author:
  - ClusterForge developers (@clusterforge)
"""

EXAMPLES = r"""
- name: Cap every GPU at 500 W
  clusterforge.gpu.nvidia_smi:
    power_limit_watts: 500

- name: Lock SM clocks at the H100 SXM maximum and set application clocks on two GPUs
  clusterforge.gpu.nvidia_smi:
    gpus: ["0", "GPU-9e698665-a4d3-ab5e-4786-e4ff011a36a8"]
    locked_gpu_clocks:
      min: 1980
      max: 1980
    application_clocks:
      memory: 2619
      graphics: 1980

- name: Remove clock locks and restore default application clocks
  clusterforge.gpu.nvidia_smi:
    reset_locked_gpu_clocks: true
    reset_locked_memory_clocks: true
    reset_application_clocks: true

- name: Use a specific nvidia-smi and state file
  clusterforge.gpu.nvidia_smi:
    persistence_mode: true
    nvidia_smi_path: /usr/bin/nvidia-smi
    state_file: /etc/clusterforge/nvidia_smi_state.json
"""

RETURN = r"""
gpus:
  description:
    - One entry per selected GPU with the managed settings before and after the run (the prediction in check mode).
    - C(locked_gpu_clocks)/C(locked_memory_clocks) come from the state file, not from the driver; V(null) in
      RV(gpus[].before) means that nothing is recorded (unknown), V(reset) that a reset was recorded.
  returned: always
  type: list
  elements: dict
  contains:
    index:
      description: The GPU index.
      type: int
      sample: 0
    uuid:
      description: The GPU UUID.
      type: str
      sample: GPU-b1e053f1-6789-f495-7e49-37a1e102685c
    pci_bus_id:
      description: The PCI bus id.
      type: str
      sample: "00000000:18:00.0"
    changed:
      description: Whether this GPU needed (or, in check mode, would need) a change.
      type: bool
      sample: true
    before:
      description: The managed settings before the run (only the options that were given).
      type: dict
      sample: {"power_limit_watts": 700, "locked_gpu_clocks": null}
    after:
      description: The managed settings after the run.
      type: dict
      sample: {"power_limit_watts": 500, "locked_gpu_clocks": {"min": 1980, "max": 1980}}
cmd:
  description:
    - The setter commands that were run, shell-quoted, in order. Empty in check mode and when nothing differed.
    - When a setter fails or a value does not stick, the task fails and C(cmd) is that one command (a string),
      with RV(rc), RV(stdout) and RV(stderr); the list of commands run until then is in RV(commands).
  returned: always
  type: list
  elements: str
  sample: ["/usr/bin/nvidia-smi -i 0 -pl 500", "/usr/bin/nvidia-smi -i 0 -lgc 1980,1980"]
commands:
  description: The setter commands run before the failure.
  returned: when a setter failed or a value did not stick
  type: list
  elements: str
  sample: ["/usr/bin/nvidia-smi -i 0 -pl 500"]
rc:
  description: The exit status of the failed command.
  returned: when a command failed or a value did not stick
  type: int
  sample: 4
stdout:
  description: The standard output of the failed command.
  returned: when a command failed or a value did not stick
  type: str
  sample: "Failed to set power management limit for GPU 00000000:5D:00.0: Insufficient Permissions"
stderr:
  description: The standard error of the failed command.
  returned: when a command failed or a value did not stick
  type: str
  sample: ""
state_file:
  description: The path of the state file.
  returned: always
  type: str
  sample: /etc/clusterforge/nvidia_smi_state.json
state_file_changed:
  description: Whether the state file content changed (or would change in check mode).
  returned: always
  type: bool
  sample: true
diff:
  description: Per-GPU settings before and after, keyed C(GPU <index> <uuid>).
  returned: when diff mode is on
  type: dict
  sample: {"before": {"GPU 0 GPU-b1e0...": {"power_limit_watts": 700}}, "after": {"GPU 0 GPU-b1e0...": {"power_limit_watts": 500}}}
"""

import copy
import json

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterforge.gpu.plugins.module_utils._files import write_atomic
from ansible_collections.clusterforge.gpu.plugins.module_utils._runner import ToolRunner, quote
from ansible_collections.clusterforge.gpu.plugins.module_utils.gpu_settings import (
    LOCKS,
    SETTING_ORDER,
    SETTING_RESET,
    STATE_FILE,
    STATE_VERSION,
    gpu_matches,
    parse_setting,
    read_records,
    setter_args,
)
from ansible_collections.clusterforge.gpu.plugins.module_utils.nvidia_smi import (
    STATE_QUERY_FIELDS,
    parse_locked_clocks_output,
    parse_locked_memory_clocks_output,
    parse_query_csv,
    parse_supported_clocks,
    to_bool,
)
from ansible_collections.clusterforge.gpu.plugins.module_utils.pci import normalize_bdf

META_KEYS = ("index", "pci_bus_id", "name")
SETTING_KEYS = SETTING_ORDER
RESET = SETTING_RESET
# Locked clocks (LOCKS) have no NVML getter: they are compared with the state file and verified from the setter's
# message.
# Each clock option and its reset switch.
CLOCK_OPTIONS = (
    ("locked_gpu_clocks", "reset_locked_gpu_clocks"),
    ("locked_memory_clocks", "reset_locked_memory_clocks"),
    ("application_clocks", "reset_application_clocks"),
)


def _display(value):
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def gpu_label(row):
    return "GPU %s (%s, %s)" % (row.get("index"), row.get("uuid"), row.get("pci.bus_id"))


class GpuPlan(object):
    """One selected GPU through the phases.

    ``plan`` fills ``row`` (its query row), ``before`` and ``todo`` (``(option, nvidia-smi argv tail, predicted
    after-value)`` in a safe order); ``apply`` fills ``applied`` and ``after`` (``predict``, in check mode, only
    ``after``); ``verify`` drops from ``applied`` what did not stick and puts in ``after`` what the hardware took.
    """

    def __init__(self, row, before, todo):
        self.row = row
        self.before = before
        self.todo = todo
        self.after = dict(before)
        self.applied = []

    @property
    def uuid(self):
        return self.row["uuid"]

    @property
    def pending(self):
        return [option for option, _args, _predicted in self.todo]


class NvidiaSmi(object):
    """``run`` goes through four phases: plan (one read), apply (the setters), verify (one read-back), persist."""

    def __init__(self, module):
        self.module = module
        self.params = module.params
        self.setter_cmds = []
        self.setter_results = {}
        self.old_gpus = {}
        # The argument spec has checked the shapes; the contract's one reader (module_utils/gpu_settings.py, as
        # preflight and the judges read the inventory) checks what a spec cannot say: no boolean or negative number,
        # a positive power, max and graphics, min <= max. A reset switch asks the value reset.
        asked = dict((option, self.params[option]) for option in ("persistence_mode", "power_limit_watts"))
        for option, reset_option in CLOCK_OPTIONS:
            asked[option] = RESET if self.params.get(reset_option) else self.params.get(option)
        self.want = {}
        problems = []
        for option in SETTING_ORDER:
            value, problem = parse_setting(option, asked[option])
            if problem:
                problems.append(problem)
            elif value is not None:
                self.want[option] = value
        if problems:
            module.fail_json(msg="; ".join(problems), problems=problems)
        self.runner = ToolRunner(module, "nvidia-smi", self.params["nvidia_smi_path"], option="nvidia_smi_path")
        self.state_path = self.params["state_file"]

    def run(self):
        plans = self.plan()
        if self.module.check_mode:
            self.predict(plans)
            failures = []
        else:
            failures = self.apply(plans)
            failures.extend(self.verify(plans))
        state_changed = self.persist(plans)
        self.report(plans, state_changed, failures)

    # ------------------------------------------------------------------------------------------- reading

    def query(self):
        rc, out, err = self.runner.run(["--query-gpu=" + ",".join(STATE_QUERY_FIELDS), "--format=csv,noheader,nounits"],
                                       what="nvidia-smi --query-gpu")
        rows = parse_query_csv(out, STATE_QUERY_FIELDS)
        if not rows:
            self.runner.fail(self.runner.calls[-1], rc, out, err, what="nvidia-smi --query-gpu (no GPU in the output)")
        for row in rows:
            row["persistence_mode"] = to_bool(row.get("persistence_mode"))
        return rows

    def select(self, rows):
        selectors = self.params["gpus"]
        if not selectors:
            return rows
        chosen = []
        for item in selectors:
            text = str(item).strip()
            match = None
            for row in rows:
                if gpu_matches(item, row.get("index"), row.get("uuid"), row.get("pci.bus_id")):
                    match = row
            if match is None:
                hint = " (MIG device UUIDs are not accepted: name the parent GPU)" if text.upper().startswith("MIG-") else ""
                self.module.fail_json(msg="GPU %r not found%s; this host has: %s"
                                      % (text, hint, ", ".join(gpu_label(r) for r in rows)))
            if match not in chosen:
                chosen.append(match)
        return sorted(chosen, key=lambda r: r["index"])

    def load_state(self):
        records, problem = read_records(self.state_path)
        if problem:
            self.module.warn("ignoring the state file: %s" % problem)
        return {"version": STATE_VERSION, "gpus": records}

    # ---------------------------------------------------------------------------------------------- plan

    def plan(self):
        """Read the GPUs once, check every request against them and work out what each selected GPU needs.

        Fails, listing every problem, before anything changes.
        """
        rows = self.query()
        gpus = self.select(rows)
        self.validate(gpus)
        self.old_gpus = copy.deepcopy(self.load_state().get("gpus", {}))
        self.replaced = self.replaced_records(rows)
        plans = []
        for row in gpus:
            entry = self.old_gpus.get(row["uuid"], {})
            plans.append(GpuPlan(row, self.current(row, entry), self.actions(row, entry)))
        return plans

    def replaced_records(self, rows):
        """{recorded UUID: (PCI bus id, UUID now there)} for records whose PCI slot now holds another GPU: the GPU was
        replaced (or the disk moved to other hardware), and the boot unit would fail on a GPU that is gone for good.
        A record whose slot is empty (a GPU off the bus) is kept: that GPU may come back."""
        present = set(row["uuid"] for row in rows)
        by_bus = dict((normalize_bdf(row.get("pci.bus_id")), row["uuid"]) for row in rows
                      if normalize_bdf(row.get("pci.bus_id")) is not None)
        out = {}
        for uuid, entry in self.old_gpus.items():
            bus = normalize_bdf((entry or {}).get("pci_bus_id")) if isinstance(entry, dict) else None
            if uuid not in present and bus is not None and bus in by_bus:
                out[uuid] = (entry.get("pci_bus_id"), by_bus[bus])
        return out

    def validate(self, gpus):
        """Check every request against every selected GPU; fail listing all problems before any change."""
        problems = []
        for row in gpus:
            label = gpu_label(row)
            watts = self.want.get("power_limit_watts")
            if watts is not None:
                low, high = row.get("power.min_limit"), row.get("power.max_limit")
                if not isinstance(low, (int, float)) or not isinstance(high, (int, float)):
                    problems.append("%s does not report power.min_limit/power.max_limit: setting a power limit is not "
                                    "supported" % label)
                elif watts < low or watts > high:
                    problems.append("power_limit_watts=%d is outside the range of %s: %s-%s W"
                                    % (watts, label, _display(low), _display(high)))
            for option, field in (("locked_gpu_clocks", "clocks.max.sm"), ("locked_memory_clocks", "clocks.max.memory")):
                request = self.want.get(option)
                top = row.get(field)
                if isinstance(request, dict) and isinstance(top, (int, float)) and request["max"] > top:
                    problems.append("%s max %d MHz is above the maximum of %s: %s=%s MHz"
                                    % (option, request["max"], label, field, _display(top)))
            request = self.want.get("application_clocks")
            if request is not None:
                if request == RESET:
                    fields = ("clocks.default_applications.memory", "clocks.default_applications.graphics")
                else:
                    fields = ("clocks.applications.memory", "clocks.applications.graphics")
                if any(not isinstance(row.get(f), (int, float)) for f in fields):
                    problems.append("%s does not report application clocks (%s): setting them is not supported"
                                    % (label, ", ".join(fields)))
                elif isinstance(request, dict):
                    max_gfx = row.get("clocks.max.graphics")
                    if not isinstance(max_gfx, (int, float)):
                        max_gfx = row.get("clocks.max.sm")
                    max_mem = row.get("clocks.max.memory")
                    if isinstance(max_mem, (int, float)) and request["memory"] > max_mem:
                        problems.append("application_clocks memory %d MHz is above the maximum of %s: "
                                        "clocks.max.memory=%s MHz" % (request["memory"], label, _display(max_mem)))
                    if isinstance(max_gfx, (int, float)) and request["graphics"] > max_gfx:
                        problems.append("application_clocks graphics %d MHz is above the maximum of %s: "
                                        "clocks.max.graphics=%s MHz" % (request["graphics"], label, _display(max_gfx)))
        if not problems:
            problems = self.unsupported_pairs(gpus)
        if problems:
            self.module.fail_json(msg="; ".join(problems), problems=problems)

    def unsupported_pairs(self, gpus):
        """Application clocks the driver would refuse: a pair missing from a GPU's SUPPORTED_CLOCKS list.

        Read with one more ``nvidia-smi -q -x``, only when application clocks are requested and some selected GPU
        has other ones now (a converged run reads nothing more). A GPU that lists no pairs is left to the driver.
        """
        request = self.want.get("application_clocks")
        if not isinstance(request, dict):
            return []
        pair = (request["memory"], request["graphics"])
        differ = [row for row in gpus
                  if (row.get("clocks.applications.memory"), row.get("clocks.applications.graphics")) != pair]
        if not differ:
            return []
        rc, out, err = self.runner.run(["-q", "-x"], check_rc=False)
        if rc != 0:
            self.module.warn("nvidia-smi -q -x failed (rc=%s), so the supported clock pairs were not checked: %s"
                             % (rc, (out or err or "").strip()[:300]))
            return []
        supported = parse_supported_clocks(out)
        problems = []
        for row in differ:
            pairs = supported.get(row.get("uuid"))
            if not pairs:
                continue
            graphics = pairs.get(pair[0])
            if graphics is None:
                problems.append("application_clocks memory %d MHz is not supported by %s: its memory clocks are %s MHz "
                                "(nvidia-smi -q -d SUPPORTED_CLOCKS)"
                                % (pair[0], gpu_label(row), ", ".join(str(m) for m in sorted(pairs, reverse=True))))
            elif pair[1] not in graphics:
                listed = ("%d graphics clocks from %d to %d MHz are" % (len(graphics), min(graphics), max(graphics))
                          if graphics else "no graphics clock is listed with it")
                problems.append("application_clocks graphics %d MHz is not supported with memory %d MHz by %s: %s "
                                "(nvidia-smi -q -d SUPPORTED_CLOCKS)" % (pair[1], pair[0], gpu_label(row), listed))
        return problems

    def current(self, row, entry):
        """The managed settings of one GPU as they are now (locked clocks from the state file)."""
        have = {}
        if "persistence_mode" in self.want:
            have["persistence_mode"] = row.get("persistence_mode")
        if "power_limit_watts" in self.want:
            have["power_limit_watts"] = _display(row.get("power.limit"))
        if "application_clocks" in self.want:
            have["application_clocks"] = {"memory": row.get("clocks.applications.memory"),
                                          "graphics": row.get("clocks.applications.graphics")}
        for option in LOCKS:
            if option in self.want:
                if option not in entry:
                    have[option] = None
                elif entry[option] is None:
                    have[option] = RESET
                else:
                    have[option] = {"min": entry[option].get("min"), "max": entry[option].get("max")}
        return have

    def actions(self, row, entry):
        """The setters one GPU needs, as (option, argv tail, predicted after-value) tuples, in SETTING_ORDER (the
        boot program applies the state file in the same order, with the same setter_args)."""
        todo = []
        want = self.want
        if "persistence_mode" in want and row.get("persistence_mode") != want["persistence_mode"]:
            todo.append(("persistence_mode", setter_args("persistence_mode", want["persistence_mode"]),
                         want["persistence_mode"]))
        if "power_limit_watts" in want:
            limit = row.get("power.limit")
            if not isinstance(limit, (int, float)) or abs(limit - want["power_limit_watts"]) >= 0.5:
                todo.append(("power_limit_watts", setter_args("power_limit_watts", want["power_limit_watts"]),
                             want["power_limit_watts"]))
        if "application_clocks" in want:
            have = (row.get("clocks.applications.memory"), row.get("clocks.applications.graphics"))
            if want["application_clocks"] == RESET:
                target = (row.get("clocks.default_applications.memory"), row.get("clocks.default_applications.graphics"))
            else:
                target = (want["application_clocks"]["memory"], want["application_clocks"]["graphics"])
            if have != target:
                todo.append(("application_clocks", setter_args("application_clocks", want["application_clocks"]),
                             {"memory": target[0], "graphics": target[1]}))
        for option in LOCKS:
            if option not in want:
                continue
            request = want[option]
            recorded = entry.get(option, "absent")
            if request == RESET:
                if recorded is not None:
                    todo.append((option, setter_args(option, RESET), RESET))
            elif not (isinstance(recorded, dict) and recorded.get("requested_min") == request["min"]
                      and recorded.get("requested_max") == request["max"]):
                todo.append((option, setter_args(option, request), {"min": request["min"], "max": request["max"]}))
        return todo

    # ------------------------------------------------------------------------------------- check mode

    def predict(self, plans):
        """Check mode: every planned setter is assumed to work; nothing runs."""
        for gpu in plans:
            for option, _args, predicted in gpu.todo:
                gpu.after[option] = predicted

    # --------------------------------------------------------------------------------------------- apply

    def run_setter(self, row, option, args):
        argv = ["-i", str(row["index"])] + args
        rc, out, err = self.runner.run(argv, check_rc=False)
        cmd = self.runner.calls[-1]
        self.setter_cmds.append(quote(cmd))
        self.setter_results[(row["uuid"], option)] = (cmd, rc, out, err)
        return cmd, rc, out, err

    def apply(self, plans):
        """Run the planned setters GPU by GPU, in order; stop at the first that fails.

        Returns the failure, if any, as a one-item list of (msg, cmd, rc, stdout, stderr).
        """
        for gpu in plans:
            for option, args, predicted in gpu.todo:
                cmd, rc, out, err = self.run_setter(gpu.row, option, args)
                if rc != 0:
                    return [("%s failed on %s (rc=%s): %s" % (option, gpu_label(gpu.row), rc,
                                                              (out or err or "").strip()[:2000]), cmd, rc, out, err)]
                gpu.after[option] = predicted
                gpu.applied.append(option)
        return []

    # -------------------------------------------------------------------------------------------- verify

    def clamped(self, option, row, out, request):
        parse = parse_locked_clocks_output if option == "locked_gpu_clocks" else parse_locked_memory_clocks_output
        found = parse(out)
        bus = normalize_bdf(row.get("pci.bus_id"))
        for item in found:
            if bus is not None and normalize_bdf(item["pci_bus_id"]) == bus:
                return {"min": item["min"], "max": item["max"]}
        if found:
            return {"min": found[0]["min"], "max": found[0]["max"]}
        self.module.warn("%s: could not read the applied %s from nvidia-smi's output; recording the request"
                         % (gpu_label(row), option))
        return dict(request)

    def verify(self, plans):
        """After any setter ran, read the GPUs back once and check that what was applied is what the hardware has.

        Locked clocks cannot be read back: their after-value becomes the clamped range the setter reported. A
        readable value that differs from the request is a failure (with the setter's cmd, rc and output) and is
        not recorded in the state file. Returns the failures as (msg, cmd, rc, stdout, stderr).
        """
        if not self.setter_cmds:
            return []
        live = dict((r["uuid"], r) for r in self.query())
        mismatches = []
        for gpu in plans:
            now = live.get(gpu.uuid)
            for option in list(gpu.applied):
                cmd, rc, out, err = self.setter_results[(gpu.uuid, option)]
                if option in LOCKS:
                    if gpu.after[option] != RESET:
                        gpu.after[option] = self.clamped(option, gpu.row, out, gpu.after[option])
                    continue
                got = None if now is None else self.current(now, {}).get(option)
                if got != gpu.after[option]:
                    gpu.applied.remove(option)
                    mismatches.append(("%s did not stick on %s: wanted %r, nvidia-smi now reports %r"
                                       % (option, gpu_label(gpu.row), gpu.after[option], got), cmd, rc, out, err))
                    gpu.after[option] = got
        return mismatches

    # ------------------------------------------------------------------------------------------- persist

    def state_value(self, option, after, request):
        """What the state file records for one applied setting."""
        if option in LOCKS:
            if after == RESET:
                return None
            return {"min": after["min"], "max": after["max"], "requested_min": request["min"],
                    "requested_max": request["max"]}
        if option == "application_clocks" and self.want[option] == RESET:
            return None
        return after

    def persist(self, plans):
        """Record every managed setting that is in place (already right, or applied and verified) in the state file.

        The file is written only when its settings change, never in check mode. Returns whether they change.
        """
        check_mode = self.module.check_mode
        new_gpus = copy.deepcopy(self.old_gpus)
        for uuid, (bus, now) in sorted(self.replaced.items()):
            new_gpus.pop(uuid, None)
            self.module.warn("the record of GPU %s at %s is dropped from %s: that slot now holds GPU %s (a replaced GPU)"
                             % (uuid, bus, self.state_path, now))
        for gpu in plans:
            entry = new_gpus.setdefault(gpu.uuid, {})
            for option in self.want:
                if option in gpu.pending and option not in gpu.applied and not check_mode:
                    continue  # its setter failed, did not run or did not stick
                if option in LOCKS and option not in gpu.pending:
                    continue  # already recorded as wanted
                entry[option] = self.state_value(option, gpu.after[option], self.want[option])
            if any(k in entry for k in SETTING_KEYS):
                entry.update({"index": gpu.row["index"], "pci_bus_id": gpu.row.get("pci.bus_id"),
                              "name": gpu.row.get("name")})
            else:
                new_gpus.pop(gpu.uuid, None)

        def settings(gpus_map):
            return dict((u, dict((k, v) for k, v in e.items() if k not in META_KEYS)) for u, e in gpus_map.items())

        state_changed = settings(new_gpus) != settings(self.old_gpus)
        if state_changed and not check_mode:
            write_atomic(self.module, self.state_path,
                         json.dumps({"version": STATE_VERSION,
                                     "comment": "Written by clusterforge.gpu.nvidia_smi; applied again at boot by the "
                                                "gpu_tuning unit. These settings do not survive a reboot or driver "
                                                "reload.",
                                     "gpus": new_gpus}, indent=2, sort_keys=True) + "\n",
                         mode=0o644, make_dirs=True, changed=bool(self.setter_cmds), cmd=self.setter_cmds)
        return state_changed

    # -------------------------------------------------------------------------------------------- report

    def report(self, plans, state_changed, failures):
        module = self.module
        gpus_out = []
        persistence_off = []
        for gpu in plans:
            row = gpu.row
            gpus_out.append({"index": row["index"], "uuid": gpu.uuid, "pci_bus_id": row.get("pci.bus_id"),
                             "changed": bool(gpu.todo), "before": gpu.before, "after": gpu.after})
            if gpu.todo and gpu.after.get("persistence_mode", row.get("persistence_mode")) is False:
                persistence_off.append(str(row["index"]))
        changed = bool(self.setter_cmds) or state_changed or (module.check_mode and any(g.todo for g in plans))
        if failures:
            msg, cmd, rc, out, err = failures[0]
            module.fail_json(msg=msg, cmd=quote(cmd), rc=rc, stdout=out, stderr=err, changed=changed,
                             commands=self.setter_cmds, gpus=gpus_out, state_file=self.state_path,
                             state_file_changed=state_changed)
        result = {"changed": changed, "gpus": gpus_out, "cmd": self.setter_cmds, "state_file": self.state_path,
                  "state_file_changed": state_changed}
        if module._diff:
            def key(g):
                return "GPU %s %s" % (g["index"], g["uuid"])

            result["diff"] = {"before": dict((key(g), g["before"]) for g in gpus_out),
                              "after": dict((key(g), g["after"]) for g in gpus_out)}
        if persistence_off and set(self.want) - set(["persistence_mode"]):
            module.warn("persistence mode is disabled on GPU(s) %s: the driver may unload when idle and drop these "
                        "settings; enable nvidia-persistenced" % ", ".join(persistence_off))
        module.exit_json(**result)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gpus=dict(type="list", elements="str"),
            persistence_mode=dict(type="bool"),
            power_limit_watts=dict(type="int"),
            locked_gpu_clocks=dict(type="dict", options=dict(min=dict(type="int", required=True),
                                                             max=dict(type="int", required=True))),
            locked_memory_clocks=dict(type="dict", options=dict(min=dict(type="int", required=True),
                                                                max=dict(type="int", required=True))),
            application_clocks=dict(type="dict", options=dict(memory=dict(type="int", required=True),
                                                              graphics=dict(type="int", required=True))),
            reset_locked_gpu_clocks=dict(type="bool"),
            reset_locked_memory_clocks=dict(type="bool"),
            reset_application_clocks=dict(type="bool"),
            state_file=dict(type="path", default=STATE_FILE),
            nvidia_smi_path=dict(type="path"),
        ),
        mutually_exclusive=[[option, reset_option] for option, reset_option in CLOCK_OPTIONS],
        required_one_of=[["persistence_mode", "power_limit_watts", "locked_gpu_clocks", "locked_memory_clocks",
                          "application_clocks", "reset_locked_gpu_clocks", "reset_locked_memory_clocks",
                          "reset_application_clocks"]],
        supports_check_mode=True,
    )
    NvidiaSmi(module).run()


if __name__ == "__main__":
    main()
