# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU settings contract, one definition for every caller (standard library only at import).

The settings are persistence mode, the power limit, application clocks and the locked GPU and memory clocks. Each
is read, applied, recorded and judged here and nowhere else:

- :func:`parse_setting` / :func:`requested`: what the inventory (the gpu_tuning role's variables) or the
  nvidia_smi module's options ask, normalised, or the problem with it. Preflight, the module, the validation judge
  and the rolling gate read a request with these.
- :func:`gpu_matches` / :func:`selected`: which GPUs a selection (``gpu_tuning_gpus``, the module's ``gpus``) names.
- :func:`setter_args` / :func:`restore_args`: the nvidia-smi arguments of one setting, in :data:`SETTING_ORDER`;
  the module applies with them and the boot program (gpu_tuning's clusterforge-gpu-tuning-apply, which installs
  this file beside it) restores the record with them.
- :func:`read_records`: the module's state file, which records per GPU UUID what it applied (the clamped locks and
  the values requested). The module, the boot program and nvidia_smi_info read it with this.
- :func:`judge_gpu` / :func:`judge_node`: a GPU's live state (nvidia_smi_info) against the record and the request,
  with one tolerance per quantity. The validation judge and the rolling gate both judge with these, only the GPUs
  the selection names.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os

#: The order GPU settings are applied in, by the nvidia_smi module and by gpu_tuning's boot program: persistence mode
#: first (what is set on a GPU no process holds open is lost when the driver unloads), then the power limit,
#: application clocks and the locked clocks.
SETTING_ORDER = ("persistence_mode", "power_limit_watts", "application_clocks", "locked_gpu_clocks",
                 "locked_memory_clocks")
#: The value of a clock option that returns it to the driver's default.
SETTING_RESET = "reset"
#: The keys of each clock option's value.
CLOCK_KEYS = {"application_clocks": ("memory", "graphics"), "locked_gpu_clocks": ("min", "max"),
              "locked_memory_clocks": ("min", "max")}
LOCKS = ("locked_gpu_clocks", "locked_memory_clocks")
# Each clock option's setter and reset switch.
_CLOCK_SETTERS = {"application_clocks": ("-ac", "-rac"), "locked_gpu_clocks": ("-lgc", "-rgc"),
                  "locked_memory_clocks": ("-lmc", "-rmc")}

#: The gpu_tuning role's variable for each option, and for the selection and the state file.
ROLE_VARIABLES = (("gpus", "gpu_tuning_gpus"), ("persistence_mode", "gpu_tuning_persistence_mode"),
                  ("power_limit_watts", "gpu_tuning_power_limit_watts"),
                  ("application_clocks", "gpu_tuning_application_clocks"),
                  ("locked_gpu_clocks", "gpu_tuning_locked_gpu_clocks"),
                  ("locked_memory_clocks", "gpu_tuning_locked_memory_clocks"),
                  ("state_file", "gpu_tuning_state_file"))
#: How messages name each setting: by its gpu_tuning variable.
ROLE_NAMES = dict(ROLE_VARIABLES)

#: Where the nvidia_smi module records what it applied (its state_file option, gpu_tuning_state_file).
STATE_FILE = "/etc/clusterforge/nvidia_smi_state.json"
STATE_VERSION = 1

#: How far a live power limit may be from the recorded one (nvidia-smi prints limits with two decimals and the
#: driver may round a request to its own step).
POWER_TOLERANCE_W = 1.0
#: How far a live clock may be from a locked range: the driver moves in steps of about 15 MHz.
CLOCK_TOLERANCE_MHZ = 15

# How a message names each setting.
_LABELS = {"persistence_mode": "persistence mode", "power_limit_watts": "power limit",
           "application_clocks": "application clocks", "locked_gpu_clocks": "SM clock lock",
           "locked_memory_clocks": "memory clock lock"}
_TRUE = frozenset(["true", "yes", "on", "1", "y", "t"])
_FALSE = frozenset(["false", "no", "off", "0", "n", "f"])
_ABSENT = object()


# ------------------------------------------------------------------------------------------------------ requests

def _bool(value):
    """Ansible's booleans (true, "yes", 1, ...), or None when the value is not one."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def _clock(name, value, keys):
    from ansible_collections.clusterforge.gpu.plugins.module_utils.values import type_name, whole  # pylint: disable=import-outside-toplevel
    shape = "a dict {%s: MHz, %s: MHz}, the string reset, or null" % keys
    if isinstance(value, str):
        if value == SETTING_RESET:
            return SETTING_RESET, None
        if value.strip().lower() == SETTING_RESET:
            return None, "%s: write reset in lower case (the role compares it exactly), got %r" % (name, value)
        return None, "%s: must be %s; got the string %r" % (name, shape, value)
    if isinstance(value, (list, tuple)):
        return None, "%s: must be %s; a list (%r) is not accepted" % (name, shape, list(value))
    if not isinstance(value, dict):
        return None, "%s: must be %s; got %s %r" % (name, shape, type_name(value), value)
    missing = [k for k in keys if k not in value]
    unknown = sorted(str(k) for k in value if k not in keys)
    if missing or unknown:
        return None, ("%s: takes exactly the keys %s and %s (missing: %s; unknown: %s)"
                      % (name, keys[0], keys[1], ", ".join(missing) or "none", ", ".join(unknown) or "none"))
    parsed = {}
    problems = []
    for key in keys:
        number = whole(value[key])
        if number is None:
            problems.append("%s must be a whole number of MHz, got %s %r" % (key, type_name(value[key]), value[key]))
        elif number < 0 and key == "min":
            problems.append("%s must not be negative, got %d" % (key, number))
        elif number <= 0 and key != "min":
            problems.append("%s must be a positive number of MHz, got %d" % (key, number))
        else:
            parsed[key] = number
    if problems:
        return None, "%s: %s" % (name, "; ".join(problems))
    if "min" in parsed and parsed["min"] > parsed["max"]:
        return None, "%s: min (%d MHz) must not be greater than max (%d MHz)" % (name, parsed["min"], parsed["max"])
    return parsed, None


def parse_setting(option, value, name=None):
    """One setting as asked, normalised: ``(value, problem)``.

    ``value`` is None (not managed), a bool (persistence), whole watts (power), ``reset`` or a dict of whole MHz
    (clocks: ``{min, max}`` locks, ``{memory, graphics}`` application clocks, min <= max). Strings of digits count
    as numbers (``-e`` gives them). ``problem`` names the setting as ``name`` (the option by default)."""
    from ansible_collections.clusterforge.gpu.plugins.module_utils.values import type_name, whole  # pylint: disable=import-outside-toplevel
    name = name or option
    if value is None:
        return None, None
    if option == "persistence_mode":
        flag = _bool(value)
        if flag is None:
            return None, "%s: must be a boolean, got %s %r" % (name, type_name(value), value)
        return flag, None
    if option == "power_limit_watts":
        watts = whole(value, allow_float=True)
        if watts is None:
            hint = ""
            if isinstance(value, str) and value.strip().lower() in ("reset", "default", "none"):
                hint = "; to remove a cap set the model's default limit (e.g. 700 for H100 SXM) or null"
            return None, ("%s: must be a whole number of watts per GPU (or null for no cap), got %s %r%s"
                          % (name, type_name(value), value, hint))
        if watts <= 0:
            return None, "%s: must be a positive number of watts, got %d" % (name, watts)
        return watts, None
    return _clock(name, value, CLOCK_KEYS[option])


def requested(settings, names=None):
    """Every setting of ``settings`` (a dict keyed by the options of SETTING_ORDER; absent or None is "not
    managed"), normalised: ``(wanted, problems)``, wanted holding only the managed options. ``names`` maps an option
    to the name a message gives it (a role variable)."""
    wanted = {}
    problems = []
    for option in SETTING_ORDER:
        value, problem = parse_setting(option, (settings or {}).get(option), (names or {}).get(option))
        if problem:
            problems.append(problem)
        elif value is not None:
            wanted[option] = value
    return wanted, problems


def role_settings(variables):
    """The gpu_tuning variables of a host (any mapping of variable names, e.g. ``hostvars[host]``) as the contract's
    settings: ``{gpus, state_file, <option>: value}``, None where unset."""
    out = {}
    for key, variable in ROLE_VARIABLES:
        out[key] = variables[variable] if variable in variables else None
    if out["state_file"] in (None, ""):
        out["state_file"] = STATE_FILE
    return out


# ------------------------------------------------------------------------------------------------------ selection

def gpu_matches(selector, index, uuid, bus_id):
    """Whether one GPU selector (an item of the nvidia_smi module's ``gpus``, gpu_tuning_gpus) names this GPU: its
    index (a number or its digits), its UUID (any case) or its PCI bus id (nvidia-smi's, ``lspci -D``'s or plain
    ``lspci``'s spelling)."""
    from ansible_collections.clusterforge.gpu.plugins.module_utils.pci import normalize_bdf  # pylint: disable=import-outside-toplevel
    text = str(selector).strip()
    if isinstance(selector, bool):
        return False
    if text.isdigit():
        return index is not None and str(index).strip() == str(int(text))
    if uuid is not None and text.lower() == str(uuid).strip().lower():
        return True
    return ":" in text and normalize_bdf(text) is not None and normalize_bdf(text) == normalize_bdf(bus_id)


def selected(selection, gpu):
    """Whether ``selection`` (None: every GPU) names ``gpu`` (``index``, ``uuid``, ``pci_bus_id``, as nvidia_smi_info
    reports it)."""
    if selection is None:
        return True
    return any(gpu_matches(s, gpu.get("index"), gpu.get("uuid"), gpu.get("pci_bus_id")) for s in selection)


# ------------------------------------------------------------------------------------------------------ commands

def setter_args(option, value):
    """The nvidia-smi arguments (after ``-i <gpu>``) that set one option of SETTING_ORDER to ``value``: a boolean
    (persistence), watts, ``{"memory", "graphics"}`` (application clocks), ``{"min", "max"}`` (locks), or
    SETTING_RESET for a clock option."""
    if option == "persistence_mode":
        return ["-pm", "1" if value else "0"]
    if option == "power_limit_watts":
        return ["-pl", str(value)]
    setter, reset = _CLOCK_SETTERS[option]
    if value == SETTING_RESET:
        return [reset]
    if option == "application_clocks":
        return [setter, "%d,%d" % (value["memory"], value["graphics"])]
    return [setter, "%d,%d" % (value["min"], value["max"])]


def restore_args(record):
    """The setters, in SETTING_ORDER, that put a GPU back into the state the nvidia_smi module recorded for it (one
    GPU's entry of its state file). A null value is the driver's default, which is what a boot leaves: it needs no
    command. Locks are set again with the values that were requested, so the driver clamps them as it did."""
    out = []
    for option in SETTING_ORDER:
        value = record.get(option)
        if value is None or (option in _CLOCK_SETTERS and not isinstance(value, dict)):
            continue
        if option in LOCKS:
            value = {"min": value.get("requested_min", value["min"]), "max": value.get("requested_max", value["max"])}
        out.append(setter_args(option, value))
    return out


# ------------------------------------------------------------------------------------------------------ records

def read_records(path):
    """The state file's records, ``({uuid: entry}, problem)``: no file is no record (``({}, None)``); a file that
    cannot be read or is not ``{"version": 1, "gpus": {...}}`` gives ``({}, problem)``."""
    if not os.path.exists(path):
        return {}, None
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError) as exc:
        return {}, "%s cannot be read: %s" % (path, exc)
    if not isinstance(data, dict) or not isinstance(data.get("gpus", {}), dict):
        return {}, "%s is not a state file of the nvidia_smi module (expected {\"version\": 1, \"gpus\": {...}})" % path
    return data.get("gpus", {}), None


def record_of(records, uuid):
    """One GPU's record of the state file (the settings only), or None."""
    entry = (records or {}).get(uuid) if uuid else None
    if not isinstance(entry, dict):
        return None
    return dict((k, v) for k, v in entry.items() if k in SETTING_ORDER)


# ------------------------------------------------------------------------------------------------------ judgement

def _num(value):
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _w(value):
    return ("%d" % value) if float(value).is_integer() else ("%s" % value)


def _range(low, high):
    return ("%s MHz" % _w(low)) if low == high else ("%s-%s MHz" % (_w(low), _w(high)))


def _shown(option, value):
    """A recorded or requested value in words; a record of a shape the module never writes is shown as it is."""
    if value is None:
        return "the driver's default (reset)"
    if option == "persistence_mode" and isinstance(value, bool):
        return "enabled" if value else "disabled"
    if option == "power_limit_watts" and _num(value) is not None:
        return "%s W" % _w(_num(value))
    if option == "application_clocks" and isinstance(value, dict):
        memory, graphics = _num(value.get("memory")), _num(value.get("graphics"))
        if memory is not None and graphics is not None:
            return "memory %s MHz, graphics %s MHz" % (_w(memory), _w(graphics))
    if option in LOCKS and isinstance(value, dict):
        low = _num(value.get("requested_min", value.get("min")))
        high = _num(value.get("requested_max", value.get("max")))
        if low is not None and high is not None:
            return _range(low, high)
    return repr(value)


def _record_problem(option, want, record, missing):
    """Whether the record holds what is asked; the text of the difference, or None."""
    rec = _ABSENT if record is None else record.get(option, _ABSENT)
    label = _LABELS[option]
    if rec is _ABSENT:
        return "%s not recorded as applied (%s)" % (label, missing)
    if option in CLOCK_KEYS:
        if want == SETTING_RESET:
            agrees = rec is None
        elif option in LOCKS:
            agrees = (isinstance(rec, dict) and rec.get("requested_min") == want["min"]
                      and rec.get("requested_max") == want["max"])
        else:
            keys = CLOCK_KEYS[option]
            agrees = isinstance(rec, dict) and [rec.get(k) for k in keys] == [want[k] for k in keys]
    elif option == "power_limit_watts":
        agrees = _num(rec) is not None and abs(_num(rec) - want) < 0.5
    else:
        agrees = isinstance(rec, bool) and rec == want
    if agrees:
        return None
    return ("%s recorded as applied is %s, the inventory asks %s (gpu_tuning has not applied the inventory's value)"
            % (label, _shown(option, rec), _shown(option, None if want == SETTING_RESET else want)))


def _finding(check, status, text, measured=None, expected=None, unit=None):
    return {"check": check, "status": status, "message": text, "measured": measured, "expected": expected,
            "unit": unit}


def _judge_persistence(want, record, live, missing):
    problems = [p for p in [_record_problem("persistence_mode", want, record, missing)] if p]
    have = live.get("persistence_mode")
    word = {True: "enabled", False: "disabled"}
    if have is None:
        if problems:
            return _finding("persistence", "fail", "; ".join(problems), expected=want)
        return _finding("persistence", "skip", "nvidia-smi does not report persistence mode", expected=want)
    text = "persistence mode %s (expected %s)" % (word[bool(have)], word[want])
    status = "pass" if bool(have) == want and not problems else "fail"
    return _finding("persistence", status, "; ".join(problems + [text]) if status == "fail" else text,
                    measured=bool(have), expected=want)


def _judge_power(want, record, live, missing):
    problems = [p for p in [_record_problem("power_limit_watts", want, record, missing)] if p]
    have = _num(live.get("power_limit_w"))
    enforced = _num(live.get("enforced_power_limit_w"))
    if have is None:
        if problems:
            return _finding("power_limit", "fail", "; ".join(problems), expected=want, unit="W")
        return _finding("power_limit", "skip", "nvidia-smi does not report a power limit", expected=want, unit="W")
    if abs(have - want) > POWER_TOLERANCE_W:
        problems.append("power limit %s W, expected %s W (+/- %s W)" % (_w(have), _w(want), _w(POWER_TOLERANCE_W)))
    elif enforced is not None and enforced < want - POWER_TOLERANCE_W:
        problems.append("power limit %s W but the driver enforces %s W (another limiter caps it)"
                        % (_w(have), _w(enforced)))
    if problems:
        return _finding("power_limit", "fail", "; ".join(problems), measured=have, expected=want, unit="W")
    return _finding("power_limit", "pass", "power limit %s W (expected %s W +/- %s W)"
                    % (_w(have), _w(want), _w(POWER_TOLERANCE_W)), measured=have, expected=want, unit="W")


def _judge_lock(option, want, rec, live, problems, passes):
    """A lock's live clock against the range the record holds (the driver's clamped one) or, where the record does
    not hold the request, the requested range. Returns (measured, expected)."""
    if option == "locked_gpu_clocks":
        field, what = "sm_clock_mhz", "SM clock"
    else:
        field, what = "mem_clock_mhz", "memory clock"
    if want == SETTING_RESET:
        passes.append("%s lock reset" % what)
        return None, None
    if isinstance(rec, dict) and rec.get("requested_min") == want["min"] and rec.get("requested_max") == want["max"]:
        low, high = _num(rec.get("min")), _num(rec.get("max"))
        low = want["min"] if low is None else low
        high = want["max"] if high is None else high
    else:
        low, high = want["min"], want["max"]
    expected = low if low == high else [low, high]
    have = _num(live.get(field))
    if have is None:
        passes.append("nvidia-smi does not report the %s" % what)
        return None, expected
    if low - CLOCK_TOLERANCE_MHZ <= have <= high + CLOCK_TOLERANCE_MHZ:
        passes.append("%s %s MHz, locked at %s" % (what, _w(have), _range(low, high)))
    else:
        reasons = live.get("clock_event_reasons") if isinstance(live.get("clock_event_reasons"), dict) else {}
        active = sorted(k for k, v in reasons.items() if v is True and k != "gpu_idle")
        why = " (active clock event reasons: %s)" % ", ".join(active) if active else ""
        problems.append("%s %s MHz, expected locked at %s (+/- %d MHz): clocks not locked or held down%s"
                        % (what, _w(have), _range(low, high), CLOCK_TOLERANCE_MHZ, why))
    return have, expected


def _judge_application(want, live, problems, passes):
    if want == SETTING_RESET:
        target = (_num(live.get("default_applications_mem_clock_mhz")),
                  _num(live.get("default_applications_graphics_clock_mhz")))
        label = "the default application clocks"
    else:
        target = (float(want["memory"]), float(want["graphics"]))
        label = "application clocks memory %s MHz, graphics %s MHz" % (want["memory"], want["graphics"])
    have = (_num(live.get("applications_mem_clock_mhz")), _num(live.get("applications_graphics_clock_mhz")))
    if None in have or None in target:
        passes.append("nvidia-smi does not report the application clocks")
    elif have == target:
        passes.append(label)
    else:
        problems.append("application clocks memory %s MHz, graphics %s MHz, expected %s"
                        % (_w(have[0]), _w(have[1]), label.replace("application clocks ", "")))


def _judge_clocks(wanted, record, live, missing):
    problems = []
    passes = []
    measured = expected = None
    for option in ("locked_gpu_clocks", "locked_memory_clocks", "application_clocks"):
        if option not in wanted:
            continue
        want = wanted[option]
        problem = _record_problem(option, want, record, missing)
        if problem:
            problems.append(problem)
        if option == "application_clocks":
            _judge_application(want, live, problems, passes)
            continue
        rec = None if record is None else record.get(option)
        have, target = _judge_lock(option, want, rec, live, problems, passes)
        if expected is None and target is not None:
            measured, expected = have, target
    if problems:
        return _finding("clocks", "fail", "; ".join(problems), measured=measured, expected=expected, unit="MHz")
    if all(p.startswith("nvidia-smi does not report") for p in passes):
        return _finding("clocks", "skip", "; ".join(passes), expected=expected, unit="MHz")
    return _finding("clocks", "pass", "; ".join(passes), measured=measured, expected=expected, unit="MHz")


def judge_gpu(wanted, record, live, record_problem=None):
    """One managed GPU: its live state ``live`` (a GPU of nvidia_smi_info) against the settings ``wanted`` (from
    :func:`requested`) and the module's record of it (:func:`record_of`; None when it has none).

    A setting must be recorded as applied with the value asked (a GPU without the record loses the setting at the
    next boot, since the boot program restores only the record), and the live value must match: persistence
    exactly, the power limit within POWER_TOLERANCE_W (and not held lower by another limiter), a locked clock within
    CLOCK_TOLERANCE_MHZ of the range the driver clamped the lock to, application clocks exactly (a reset: the
    defaults). Returns one finding per judged group (``check``: persistence, power_limit, clocks) with ``status``
    (pass, fail or skip: nothing to read), ``message``, ``measured``, ``expected`` and ``unit``."""
    missing = record_problem or "the state file has no record of it on this GPU: it is not gpu_tuning's, and no boot restores it"
    findings = []
    if "persistence_mode" in wanted:
        findings.append(_judge_persistence(wanted["persistence_mode"], record, live, missing))
    if "power_limit_watts" in wanted:
        findings.append(_judge_power(float(wanted["power_limit_watts"]), record, live, missing))
    if any(option in wanted for option in CLOCK_KEYS):
        findings.append(_judge_clocks(wanted, record, live, missing))
    return findings


def judge_node(settings, info):
    """Every GPU of one node (``info``: nvidia_smi_info's result, with ``applied`` per GPU and ``state_file_problem``)
    against ``settings`` (:func:`role_settings`). Returns ``(findings, problems)``: ``problems`` lists what is wrong
    with the settings themselves (nothing is judged then); each finding is :func:`judge_gpu`'s with ``gpu`` (the
    GPU's entry) added; a GPU the selection does not name gives one skip per group, saying so."""
    wanted, problems = requested(settings, ROLE_NAMES)
    selection = settings.get("gpus")
    if selection is not None and (isinstance(selection, (str, dict)) or not isinstance(selection, (list, tuple))):
        problems.append("gpu_tuning_gpus: must be a list of GPU indexes, UUIDs or PCI bus ids, or null")
    if problems or not wanted:
        return [], problems
    findings = []
    groups = [g for g, options in (("persistence", ("persistence_mode",)), ("power_limit", ("power_limit_watts",)),
                                   ("clocks", tuple(CLOCK_KEYS))) if any(o in wanted for o in options)]
    for gpu in (info or {}).get("gpus") or []:
        if not isinstance(gpu, dict):
            continue
        if not selected(selection, gpu):
            for group in groups:
                item = _finding(group, "skip", "not managed: gpu_tuning_gpus names %s"
                                % ", ".join(str(s) for s in selection))
                item["gpu"] = gpu
                findings.append(item)
            continue
        applied = gpu.get("applied")
        for item in judge_gpu(wanted, applied if isinstance(applied, dict) else None, gpu,
                              (info or {}).get("state_file_problem")):
            item["gpu"] = gpu
            findings.append(item)
    return findings, problems
