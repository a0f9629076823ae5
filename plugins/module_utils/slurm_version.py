# -*- coding: utf-8 -*-
# Copyright: ClusterForge developers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm versions: reading them, ordering Slurm's major releases, and what SchedMD supports in an upgrade.

Pure Python, standard library only. Used by the module slurm_version_info (and through it by the role
slurm_upgrade). The rules, from SchedMD's upgrade guide (slurm.schedmd.com/upgrades.html) and the release notes:

* A Slurm version is ``YY.MM.micro``: ``YY.MM`` names the major release (the year and month it came out), the micro
  is a maintenance release. Majors came out irregularly until 23.11, and every May and November from 24.05 on.
* A major release accepts state files, RPCs and the accounting database of the **two** previous majors; from 24.11
  on, of the **three** previous majors (22.05 -> 23.11 is supported, 22.05 -> 24.05 is not; 23.02 -> 24.11 is,
  22.05 -> 24.11 is not).
* Downgrades are not supported: state files and the accounting database are converted forward only.

Version strings are read from package managers (dpkg ``22.05.8-4+deb12u3``, ``1:24.11.5-1ubuntu1``,
``24.11.5-1+b2``; rpm ``%{VERSION}-%{RELEASE}`` ``24.11.5-1.el9``), from the programs (``slurmctld -V`` prints
``slurm 24.11.5``, Debian's build ``slurm-wlm 22.05.8``), from ``scontrol show node`` (``Version=24.11.5``) and from
the operator (``24.11.5`` or ``24.11.5-1``). Comparisons are on the upstream version (major and micro); a package
revision only matters where the operator named one (:func:`matches_target`).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from collections import namedtuple

# Every major release before the half-yearly cycle, in order (Slurm's release history); 24.05 starts the cycle.
MAJORS_BEFORE_CYCLE = ("14.03", "14.11", "15.08", "16.05", "17.02", "17.11", "18.08", "19.05", "20.02", "20.11",
                       "21.08", "22.05", "23.02", "23.11")
CYCLE_START = (24, 5)
# From this major on, a release accepts the three previous majors (before it, two).
WIDER_WINDOW_FROM = (24, 11)

# [epoch:]YY.MM.micro[.more][~pre][-revision]; a revision may hold anything but whitespace.
_VERSION_RE = re.compile(
    r"^(?:(?P<epoch>\d+):)?(?P<year>\d+)\.(?P<month>\d+)(?:\.(?P<micro>\d+))?(?P<extra>(?:\.\d+)*)"
    r"(?P<pre>~[0-9A-Za-z.+~]+)?(?:-(?P<revision>\S+))?$")
# A version token inside a program's output ("slurm 24.11.5", "slurm-wlm 22.05.8", "slurm 23.11.0-0rc1").
_OUTPUT_RE = re.compile(r"(?:^|[\s(])(\d+\.\d+\.\d+\S*)")


class SlurmVersion(namedtuple("SlurmVersion", "text epoch year month micro extra pre revision")):
    """A parsed version. ``key`` orders upstream versions; ``major`` is ``YY.MM``; ``upstream`` ``YY.MM.micro``."""

    __slots__ = ()

    @property
    def major(self):
        return "%02d.%02d" % (self.year, self.month)

    @property
    def major_key(self):
        return (self.year, self.month)

    @property
    def upstream(self):
        if self.micro is None:
            return self.major
        return "%s.%d%s%s" % (self.major, self.micro, self.extra or "", self.pre or "")

    @property
    def key(self):
        return (self.year, self.month, self.micro if self.micro is not None else -1)

    @property
    def without_epoch(self):
        """The string as given, without a package epoch (``1:24.11.5-1`` -> ``24.11.5-1``)."""
        text = self.text
        return text.split(":", 1)[1] if self.epoch is not None else text


def parse_version(text, require_micro=True):
    """Parse a version string of a package manager, scontrol or the operator into a :class:`SlurmVersion`.

    Raises ValueError for anything else (empty, letters, a major only where ``require_micro``).
    """
    raw = (text or "").strip() if isinstance(text, str) else str(text if text is not None else "").strip()
    match = _VERSION_RE.match(raw)
    if not match:
        raise ValueError("%r is not a Slurm version (expected YY.MM.micro, e.g. 24.11.5 or 24.11.5-1)" % raw)
    micro = match.group("micro")
    if micro is None and require_micro:
        raise ValueError("%r names a major release only; give the maintenance release too (e.g. %s.5)" % (raw, raw))
    return SlurmVersion(
        text=raw,
        epoch=int(match.group("epoch")) if match.group("epoch") else None,
        year=int(match.group("year")),
        month=int(match.group("month")),
        micro=int(micro) if micro is not None else None,
        extra=match.group("extra") or "",
        pre=match.group("pre") or "",
        revision=match.group("revision"),
    )


def parse_version_output(text):
    """The version a Slurm program prints with ``-V`` (``slurm 24.11.5``, ``slurm-wlm 22.05.8``), or None."""
    for line in (text or "").splitlines():
        match = _OUTPUT_RE.search(line.strip())
        if match:
            try:
                return parse_version(match.group(1))
            except ValueError:
                continue
    return None


def as_version(value):
    """A :class:`SlurmVersion` from a version or a string."""
    return value if isinstance(value, SlurmVersion) else parse_version(value)


def _major_tuple(major):
    if isinstance(major, SlurmVersion):
        return major.major_key
    if isinstance(major, tuple):
        return (int(major[0]), int(major[1]))
    match = re.match(r"^(\d+)\.(\d+)", str(major).strip())
    if not match:
        raise ValueError("%r is not a Slurm major release (YY.MM)" % (major,))
    return (int(match.group(1)), int(match.group(2)))


def major_index(major):
    """Position of a major release in Slurm's history (``"17.02"`` is 4; each later major one more).

    Takes ``"YY.MM"``, a full version string's major, a (year, month) tuple or a :class:`SlurmVersion`.
    From 24.05 on the majors are computed (every May and November). Raises ValueError for a month that was never a
    major release (``22.06``) or one older than 14.03.
    """
    year, month = _major_tuple(major)
    name = "%02d.%02d" % (year, month)
    if (year, month) < CYCLE_START:
        if name in MAJORS_BEFORE_CYCLE:
            return MAJORS_BEFORE_CYCLE.index(name)
        raise ValueError("%s is not a Slurm major release" % name)
    if month not in (5, 11):
        raise ValueError("%s is not a Slurm major release (from 24.05 on they come out in May and November)" % name)
    return len(MAJORS_BEFORE_CYCLE) + (year - CYCLE_START[0]) * 2 + (0 if month == 5 else 1)


def major_name(index):
    """The major release at ``index`` of :func:`major_index` (``"24.11"``)."""
    if index < 0:
        raise ValueError("no Slurm major release at index %d" % index)
    if index < len(MAJORS_BEFORE_CYCLE):
        return MAJORS_BEFORE_CYCLE[index]
    offset = index - len(MAJORS_BEFORE_CYCLE)
    return "%02d.%02d" % (CYCLE_START[0] + offset // 2, 5 if offset % 2 == 0 else 11)


def window(target):
    """How many major releases back ``target`` accepts state and upgrades from: 3 from 24.11 on, 2 before."""
    return 3 if _major_tuple(target) >= WIDER_WINDOW_FROM else 2


def majors_between(installed, target):
    """How many major releases ``target`` is ahead of ``installed`` (negative for a downgrade of the major)."""
    return major_index(target) - major_index(installed)


def upgrade_steps(installed, target):
    """The majors to go through, each a supported upgrade, ending with ``target``'s: 22.05 -> 24.11 gives
    ``["23.11", "24.11"]``. Each step goes as far as the release it lands on accepts."""
    current = major_index(installed)
    last = major_index(target)
    steps = []
    while current < last:
        step = last
        while step - current > window(major_name(step)):
            step -= 1
        if step == current:  # cannot happen with windows of at least 1; guards the loop
            raise ValueError("no supported upgrade from %s" % major_name(current))
        steps.append(major_name(step))
        current = step
    return steps


def matches_target(version, target):
    """Whether a package or program version is the operator's target.

    With a target without a revision (``24.11.5``) the upstream versions must be equal. With a revision
    (``24.11.5-1``) the version (epoch aside) must be the target or extend its revision with a build suffix
    (``24.11.5-1+b2``, ``24.11.5-1.el9``).
    """
    have = as_version(version)
    want = as_version(target)
    if want.revision is None:
        return have.key == want.key and have.extra == want.extra and have.pre == want.pre
    text = have.without_epoch
    goal = want.without_epoch
    return text == goal or any(text.startswith(goal + sep) for sep in ("+", ".", "~"))


def _names(packages):
    return ", ".join(packages)


def upgrade_refusals(installed_versions_by_host, target):
    """Human messages, one per host and reason, for every reason Slurm cannot upgrade to ``target``.

    ``installed_versions_by_host`` is ``{host: {package or program: version string}}`` (a list of version strings
    works too; None or empty means nothing to judge on that host). Refused: a version that does not parse, a major
    that never existed, a downgrade (``target`` older than what the host has), and a jump over more majors than
    ``target`` accepts (:func:`window`). Hosts with different majors are judged each on its own: a mix is refused
    only where one of them is too far from ``target``. Versions of one host that fail the same rule are named in
    one message (``slurmd, slurm-client 22.05.8-4; slurmd (registered) 22.05.8``). An empty list means the upgrade
    is supported.
    """
    want = as_version(target)
    try:
        target_index = major_index(want)
    except ValueError as e:
        return ["target %s: %s; nothing can be judged against it" % (want.text, e)]
    refusals = []
    for host, versions in (installed_versions_by_host or {}).items():
        if not versions:
            continue
        items = list(versions.items()) if isinstance(versions, dict) else [(None, v) for v in versions]
        by_text = []  # [(version text, [names])] in the order first seen
        for name, text in items:
            for entry in by_text:
                if entry[0] == text:
                    if name:
                        entry[1].append(name)
                    break
            else:
                by_text.append((text, [name] if name else []))
        by_rule = []  # [(rule key, [what], detail)] in the order first seen
        for text, names in by_text:
            what = ("%s %s" % (", ".join(names), text)) if names else str(text)
            found = _rule(text, want, target_index)
            if found is None:
                continue
            for entry in by_rule:
                if entry[0] == found[0]:
                    entry[1].append(what)
                    break
            else:
                by_rule.append((found[0], [what], found[1]))
        for key, whats, detail in by_rule:
            refusals.append(detail % ("%s: %s" % (host, "; ".join(whats))))
    return refusals


def _rule(text, want, target_index):
    """(rule key, message with %s for "<host>: <what>") for a version that cannot go to ``want``, else None."""
    try:
        have = parse_version(text)
    except ValueError:
        return ("unreadable",), ("%%s cannot be read as a Slurm version, so the upgrade to %s cannot be judged"
                                 % want.text)
    if have.key > want.key:
        return ("downgrade",), ("%%s is newer than the target %s: Slurm does not support downgrades (state files and "
                                "the accounting database are converted forward only)" % want.upstream)
    try:
        have_index = major_index(have)
    except ValueError as e:
        return ("unknown", have.major), "%%s: %s, so the upgrade to %s cannot be judged" % (e, want.upstream)
    jump = target_index - have_index
    allowed = window(want)
    if jump > allowed:
        return ("jump", have.major), (
            "%%s to %s is %d major releases (%s -> %s); Slurm %s accepts upgrades from at most %d major releases "
            "back (%s or newer). Upgrade in steps: %s"
            % (want.upstream, jump, have.major, want.major, want.major, allowed, major_name(target_index - allowed),
               " -> ".join([have.major] + upgrade_steps(have, want))))
    return None


def candidate_refusal(host, package, candidate, target):
    """The message when the package manager would not install ``target`` for ``package`` (a name, or several
    joined, that have the same candidate), else None."""
    want = as_version(target)
    if not candidate:
        return ("%s: the package manager offers no version of %s (no configured repository has it): add the "
                "repository that carries Slurm %s and refresh its index" % (host, package, want.text))
    try:
        ok = matches_target(candidate, want)
    except ValueError:
        ok = False
    if not ok:
        return ("%s: the package manager's candidate for %s is %s, not the target %s: the configured repositories "
                "do not offer it (add the repository that carries it, refresh the index, or name the version they "
                "offer)" % (host, package, candidate, want.text))
    return None


# --- tool outputs -----------------------------------------------------------------------------------------------

_APT_PACKAGE_RE = re.compile(r"^(\S+):\s*$")
_APT_FIELD_RE = re.compile(r"^\s+(Installed|Candidate):\s*(\S+)\s*$")


def parse_apt_cache_policy(text):
    """``{package: {"installed": version or None, "candidate": version or None}}`` from ``apt-cache policy <pkgs>``.

    ``(none)`` is None. A package apt does not know is absent from the result.
    """
    result = {}
    current = None
    for line in (text or "").splitlines():
        match = _APT_PACKAGE_RE.match(line)
        if match and not line[:1].isspace():
            current = match.group(1)
            result[current] = {"installed": None, "candidate": None}
            continue
        match = _APT_FIELD_RE.match(line)
        if match and current is not None:
            value = match.group(2)
            result[current][match.group(1).lower()] = None if value == "(none)" else value
    return result


def parse_dnf_list(text, names=None):
    """``{name: [{"arch", "version", "repo"}]}`` from ``dnf list --available <pkgs>`` (dnf 4 and dnf 5).

    Header lines ("Last metadata expiration check", "Available Packages") are skipped; a long ``name.arch`` that
    dnf prints alone on its line is joined with the next one. ``names``, when given, keeps only those packages.
    """
    lines = []
    for raw in (text or "").splitlines():
        if not raw.strip():
            continue
        if raw[:1].isspace() and lines and len(lines[-1].split()) < 3:
            lines[-1] = lines[-1] + " " + raw.strip()
        else:
            lines.append(raw.strip())
    result = {}
    for line in lines:
        fields = line.split()
        if len(fields) != 3 or "." not in fields[0] or not re.match(r"^(?:\d+:)?\d", fields[1]):
            continue
        name, arch = fields[0].rsplit(".", 1)
        if names is not None and name not in names:
            continue
        result.setdefault(name, []).append({"arch": arch, "version": fields[1], "repo": fields[2].lstrip("@")})
    return result


RPM_QUERY_FORMAT = "%{NAME}\\t%{VERSION}-%{RELEASE}\\n"


def parse_rpm_query(text):
    """``{name: version}`` from ``rpm -q --qf '%{NAME}\\t%{VERSION}-%{RELEASE}\\n' <pkgs>``; "package X is not
    installed" lines are left out."""
    installed = {}
    for line in (text or "").splitlines():
        fields = line.split("\t")
        if len(fields) == 2 and fields[0].strip() and fields[1].strip():
            installed.setdefault(fields[0].strip(), fields[1].strip())
    return installed


_CONFIG_RE = re.compile(r"^([A-Za-z][A-Za-z0-9_]*(?:\([^)]*\))?)\s+=\s?(.*)$")
_SECONDS_RE = re.compile(r"^(\d+)\s*(?:sec|secs|seconds)?$")


def parse_scontrol_config(text):
    """``{key: value}`` from ``scontrol show config`` (``SlurmdTimeout           = 300 sec``): the first value of
    each key, as printed (later sections such as the cgroup or MPI plugin settings do not override it)."""
    values = {}
    for line in (text or "").splitlines():
        match = _CONFIG_RE.match(line.strip())
        if match:
            values.setdefault(match.group(1), match.group(2).strip())
    return values


def seconds(value):
    """``300 sec`` (scontrol show config) or ``300`` as an integer, else None."""
    match = _SECONDS_RE.match((value or "").strip())
    return int(match.group(1)) if match else None
