"""Renders roles/<role>/README.md for every role from its meta/argument_specs.yml (a developer tool).

Each README has a title, a hand-written part kept verbatim between the intro markers, and a generated part: for each
entry point of the argument spec (main first) a table of its options, a table for the suboptions of each option that
has them, and how to use the role. A README without markers is taken whole as the hand-written part (its "# " title
line dropped); a role without a README gets one seeded from its spec's main entry point and its play in site.yml.

Where a role runs is read from the playbooks: its play in site.yml (playbooks/site.yml, which the checkout's site.yml
imports), and the plays of playbooks/*.yml that import its entry points with tasks_from. A role that has no play of
its own in site.yml but whose entry points those plays import (rolling: playbooks/rolling_reconfigure.yml; validate:
playbooks/validate.yml, itself a stage of site.yml) is a role in phases: its README says which playbook runs it, and
which phase runs on which hosts.

    python tests/tools/role_readme.py            # writes every README that differs
    python tests/tools/role_readme.py --check    # exits 1 naming the READMEs that differ, writes nothing

tests/unit/test_role_readmes.py runs the check.
"""

import argparse
import os
import sys
import textwrap

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLLECTION = "clusterforge.gpu"
SCRIPT = "tests/tools/role_readme.py"
INTRO = "<!-- role-readme:intro -->"
END_INTRO = "<!-- role-readme:end-intro -->"
GENERATED = "<!-- role-readme:generated -->"
END_GENERATED = "<!-- role-readme:end-generated -->"
MARKERS = (INTRO, END_INTRO, GENERATED, END_GENERATED)
WIDTH = 115
HEADER = ["| %s | Type | Default | Required | Description |", "|---|---|---|---|---|"]


class ReadmeError(Exception):
    """A README this tool cannot rewrite without losing text."""


def role_names(root=ROOT):
    """The roles that have an argument spec, sorted."""
    roles_dir = os.path.join(root, "roles")
    return sorted(d for d in os.listdir(roles_dir)
                  if os.path.isfile(os.path.join(roles_dir, d, "meta", "argument_specs.yml")))


def load_spec(role, root=ROOT):
    """``argument_specs`` of a role, in the file's order."""
    with open(os.path.join(root, "roles", role, "meta", "argument_specs.yml")) as f:
        return yaml.safe_load(f)["argument_specs"]


def entry_points(spec):
    """Entry point names: main first, then the others in the spec's order."""
    names = list(spec)
    return (["main"] if "main" in spec else []) + [n for n in names if n != "main"]


def _short(name):
    return name.split(".")[-1]


ROLE_KEYS = ("ansible.builtin.import_role", "import_role", "ansible.builtin.include_role", "include_role")


def _tasks(items):
    """Every task of a play's task list, those inside blocks (block, rescue, always) included."""
    for task in items or []:
        if not isinstance(task, dict):
            continue
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _phase_imports(plays):
    """``[(role, tasks_from, play)]`` of every import_role/include_role with tasks_from in ``plays``."""
    found = []
    for play in plays or []:
        for section in ("pre_tasks", "tasks", "post_tasks"):
            for task in _tasks(play.get(section)):
                for key in ROLE_KEYS:
                    args = task.get(key)
                    if isinstance(args, dict) and args.get("tasks_from"):
                        found.append((_short(args["name"]), args["tasks_from"], play))
    return found


def site_file(root=ROOT):
    """The file that holds site.yml's plays: playbooks/site.yml (the checkout's site.yml only imports it)."""
    path = os.path.join(root, "playbooks", "site.yml")
    return path if os.path.exists(path) else os.path.join(root, "site.yml")


def site_stages(root=ROOT):
    """What site.yml says about each role.

    ``{role: {"hosts", "gather_facts", "stage", "prev", "next", "entry_points": {name: (hosts, play name)}}}``;
    stages are numbered like README.md's table (every role play and imported playbook, in order). An imported
    playbook's stage is also listed under ``"_playbooks"``: ``{playbook file name: (stage, total, prev)}``.
    """
    with open(site_file(root)) as f:
        plays = yaml.safe_load(f)
    stages = []
    info = {}
    imported_files = []
    for play in plays:
        imported = play.get("ansible.builtin.import_playbook", play.get("import_playbook"))
        if imported:
            stages.append(os.path.splitext(os.path.basename(imported))[0])
            imported_files.append((os.path.basename(imported), len(stages)))
            continue
        for role in play.get("roles", []):
            name = _short(role["role"] if isinstance(role, dict) else role)
            stages.append(name)
            info[name] = {"hosts": play["hosts"], "gather_facts": play.get("gather_facts", True),
                          "stage": len(stages), "entry_points": {}}
    for name, data in info.items():
        i = data["stage"] - 1
        data["prev"] = stages[i - 1] if i > 0 else None
        data["next"] = stages[i + 1] if i + 1 < len(stages) else None
        data["total"] = len(stages)
    for role, tasks_from, play in _phase_imports(plays):
        if role in info:
            info[role]["entry_points"][tasks_from] = (play["hosts"], play.get("name", ""))
    info["_playbooks"] = dict((name, (stage, len(stages), stages[stage - 2] if stage > 1 else None))
                              for name, stage in imported_files)
    return info


def playbook_phases(root=ROOT):
    """The entry points that playbooks/*.yml (site.yml's own file aside) import with tasks_from, per role:
    ``{role: [(tasks_from, hosts, gather_facts, play name, playbook file name)]}``, in the playbooks' order."""
    phases = {}
    site = os.path.abspath(site_file(root))
    directory = os.path.join(root, "playbooks")
    # A playbook that is a stage of site.yml first: its phases are the role's main use (validate: validate.yml,
    # then health_deep.yml).
    staged = set(site_stages(root).get("_playbooks", {}))
    for name in sorted(os.listdir(directory), key=lambda n: (n not in staged, n)) if os.path.isdir(directory) else []:
        path = os.path.join(directory, name)
        if not name.endswith(".yml") or os.path.abspath(path) == site:
            continue
        with open(path) as f:
            plays = yaml.safe_load(f)
        if not isinstance(plays, list):
            continue
        for role, tasks_from, play in _phase_imports(plays):
            entry = (tasks_from, play["hosts"], play.get("gather_facts", True), play.get("name", ""), name)
            if entry[:1] not in [e[:1] for e in phases.get(role, [])]:
                phases.setdefault(role, []).append(entry)
    return phases


# Markdown ------------------------------------------------------------------------------------------------------------

def _escape_prose(text):
    """Backslash-escapes what Markdown would take for markup (HTML tags, emphasis) in plain text."""
    out = []
    for i, ch in enumerate(text):
        if ch in "\\<*|":
            out.append("\\" + ch)
        elif ch == "_" and not (i > 0 and text[i - 1].isalnum() and i + 1 < len(text) and text[i + 1].isalnum()):
            out.append("\\_")
        else:
            out.append(ch)
    return "".join(out)


def md(text):
    """Text for Markdown: escaped outside `code spans`; inside them only a table's pipe is escaped."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code spans
        return _escape_prose(text)
    return "`".join(_escape_prose(p) if i % 2 == 0 else p.replace("|", "\\|") for i, p in enumerate(parts))


def one_line(description):
    """A spec description (string or list of paragraphs) as one line."""
    if description is None:
        return ""
    if isinstance(description, (list, tuple)):
        description = " ".join(str(d) for d in description)
    return " ".join(str(description).split())


def paragraphs(description):
    if description is None:
        return []
    if not isinstance(description, (list, tuple)):
        description = [description]
    return [one_line(d) for d in description if one_line(d)]


def code(text):
    """A code span for a table cell."""
    text = text.replace("|", "\\|")
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return fence + pad + text + pad + fence


def flow(value):
    """A value as YAML flow, on one line."""
    text = yaml.safe_dump(value, default_flow_style=True, width=float("inf"), sort_keys=False, allow_unicode=True)
    if text.endswith("\n...\n"):
        text = text[:-len("\n...\n")]
    return " ".join(text.strip().splitlines())


def type_text(opt):
    text = opt.get("type", "str")
    if opt.get("elements"):
        text += " of " + opt["elements"]
    if opt.get("choices"):
        text += ", one of " + ", ".join(code(flow(c)) for c in opt["choices"])
    return text


def option_row(name, opt, role_defaults=None):
    """One table row. Without a default in the spec, the role's defaults/main.yml value is shown (often a Jinja
    expression computed from other variables), else null."""
    if "default" in opt:
        value = opt["default"]
    else:
        value = (role_defaults or {}).get(name)
    # A string as it is (a Jinja expression reads better without YAML's quoting), anything else as YAML flow.
    default = code(value if isinstance(value, str) and value.strip() == value and value else flow(value))
    required = "yes" if opt.get("required") else "no"
    description = md(one_line(opt.get("description")))
    return "| %s | %s | %s | %s | %s |" % (code(name), type_text(opt), default, required, description)


def options_tables(options, title=None, level=3, role_defaults=None):
    """The table of ``options``, then one table per option that has suboptions (recursively, dotted names)."""
    lines = []
    if title:
        lines += ["#" * level + " Suboptions of %s" % code(title), ""]
    lines += [HEADER[0] % ("Option" if title else "Variable"), HEADER[1]]
    lines += [option_row(name, opt, None if title else role_defaults) for name, opt in options.items()]
    for name, opt in options.items():
        if opt.get("options"):
            lines += [""] + options_tables(opt["options"], title="%s.%s" % (title, name) if title else name, level=level)
    return lines


def _hosts(hosts):
    groups = ["`%s`" % g for g in hosts.split(":") if g]
    if groups == ["`all`"]:
        return "every host (`all`)"
    return groups[0] if len(groups) == 1 else "%s and %s" % (", ".join(groups[:-1]), groups[-1])


def _where(role, site, phases=None):
    data = site.get(role)
    if not data and phases:
        return _where_phases(role, site, phases)
    if not data:
        return "`site.yml` does not run this role."
    order = ["after `%s`" % data["prev"]] if data["prev"] else []
    order += ["before `%s`" % data["next"]] if data["next"] else []
    return "`site.yml` runs it on %s, as stage %d of %d in its fixed order%s." % (
        _hosts(data["hosts"]), data["stage"], data["total"], " (%s)" % " and ".join(order) if order else "")


def _playbooks(phases):
    """The playbooks that run a role in phases, in the order their phases come."""
    out = []
    for phase in phases:
        if phase[4] not in out:
            out.append(phase[4])
    return out


def _by_name(playbook):
    return "%s.%s" % (COLLECTION, os.path.splitext(playbook)[0])


def _where_phases(role, site, phases):
    """Where a role in phases runs: its playbook (and site.yml's stage that imports it), and each phase's hosts."""
    texts = []
    in_site = any(p in site.get("_playbooks", {}) for p in _playbooks(phases))
    for playbook in _playbooks(phases):
        run = "`playbooks/%s` runs it (`ansible-playbook -i <inventory> %s` when the collection is installed)" % (
            playbook, _by_name(playbook))
        stage = site.get("_playbooks", {}).get(playbook)
        if stage:
            run += ", as stage %d of %d of `site.yml`%s" % (
                stage[0], stage[1], " (after `%s`)" % stage[2] if stage[2] else "")
        elif not in_site:
            run = "`site.yml` does not run this role: " + run
        groups = []
        for phase in phases:
            if phase[4] != playbook:
                continue
            if groups and groups[-1][0] == phase[1]:
                groups[-1][1].append(phase[0])
            else:
                groups.append((phase[1], [phase[0]]))
        parts = ["%s on %s" % (_and(["`%s`" % p for p in names]), _hosts(hosts)) for hosts, names in groups]
        texts.append("%s, in phases (`tasks_from`): %s." % (run, "; then ".join(parts)))
    return " ".join(texts)


def _and(items):
    return items[0] if len(items) == 1 else "%s and %s" % (", ".join(items[:-1]), items[-1])


def _sentence(text):
    text = text.strip()
    return text if text.endswith((".", "!", "?", ":")) else text + "."


def _wrap(text):
    """Wrapped at WIDTH, never inside a `code span`."""
    parts = text.split("`")
    if len(parts) % 2 == 1:
        text = "`".join(p.replace(" ", "\0") if i % 2 else p for i, p in enumerate(parts))
    return textwrap.fill(text, width=WIDTH, break_long_words=False, break_on_hyphens=False).replace("\0", " ")


def seed_intro(role, spec, site, phases=None):
    """The hand-written part of a role that has no README yet: its main entry point's descriptions, and its play."""
    main = spec.get("main", {})
    parts = [_wrap(md(_sentence(one_line(main.get("short_description", role)))))]
    parts += [_wrap(md(p)) for p in paragraphs(main.get("description"))]
    parts.append(_wrap(_where(role, site, phases)))
    return "\n\n".join(parts)


def role_defaults(role, root=ROOT):
    path = os.path.join(root, "roles", role, "defaults", "main.yml")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return yaml.safe_load(f) or {}


SHARED_ALL_TEXT = "Takes every option of the entry point `main` (%d), as described there."
SHARED_TEXT = "Takes these options of the entry point `main`, as described there: %s."


def shared_with_main(spec, ep):
    """(names of the options of entry point `ep` whose spec is the same as main's, in ep's order, {name: spec} of the
    others). Entry points that run phases of one role take most of main's options: each is described once."""
    options = (spec.get(ep) or {}).get("options") or {}
    if ep == "main":
        return [], dict(options)
    main = (spec.get("main") or {}).get("options") or {}
    shared = [name for name, opt in options.items() if main.get(name) == opt]
    return shared, dict((name, opt) for name, opt in options.items() if name not in shared)


def render_generated(role, spec, site, root=ROOT, phases=None):
    fqcn = "%s.%s" % (COLLECTION, role)
    defaults = role_defaults(role, root)
    data = site.get(role)
    phases = None if data else phases  # a role with its own play in site.yml is no role in phases
    lines = []
    for ep in entry_points(spec):
        entry = spec[ep] or {}
        lines += ["## Entry point `%s`" % ep, ""]
        if entry.get("short_description"):
            lines += [_wrap(md(_sentence(one_line(entry["short_description"])))), ""]
        if ep != "main":
            for p in paragraphs(entry.get("description")):
                lines += [_wrap(md(p)), ""]
        options = entry.get("options") or {}
        shared, own = shared_with_main(spec, ep)
        if shared and len(shared) == len((spec.get("main") or {}).get("options") or {}):
            lines += [_wrap(SHARED_ALL_TEXT % len(shared)), ""]
        elif shared:
            lines += [_wrap(SHARED_TEXT % ", ".join(code(n) for n in shared)), ""]
        if own:
            lines += options_tables(own, role_defaults=defaults) + [""]
        elif not options:
            lines += ["No options.", ""]
    lines += ["## Using the role", ""]
    if phases:
        first = phases[0]
        lines += [_wrap("Run its playbook: `ansible-playbook -i <inventory> %s` (installed collection) or "
                        "`ansible-playbook -i <inventory> playbooks/%s` (checkout). Each of its plays imports a phase "
                        "of the role; the main entry point holds the options every phase takes and runs nothing. "
                        "The first phase, as the playbook imports it:" % (_by_name(first[4]), first[4])), ""]
        play = ["```yaml", "- name: %s, phase %s" % (fqcn, first[0]), "  hosts: %s" % first[1],
                "  gather_facts: %s" % ("true" if first[2] else "false"), "  tasks:",
                "    - name: Run %s, phase %s" % (fqcn, first[0]), "      ansible.builtin.import_role:",
                "        name: %s" % fqcn, "        tasks_from: %s" % first[0], "```"]
    else:
        hosts = data["hosts"] if data else "all"
        play = ["```yaml", "- name: %s" % fqcn, "  hosts: %s" % hosts]
        if data:
            play.append("  gather_facts: %s" % ("true" if data["gather_facts"] else "false"))
        play += ["  tasks:", "    - name: Run %s" % fqcn, "      ansible.builtin.import_role:",
                 "        name: %s" % fqcn, "```"]
    lines += play + [""]
    for ep in entry_points(spec):
        if ep == "main":
            continue
        text = "Entry point `%s`: `ansible.builtin.import_role: {name: %s, tasks_from: %s}`" % (ep, fqcn, ep)
        where = data["entry_points"].get(ep) if data else None
        phase = [p for p in phases or [] if p[0] == ep]
        if where:
            text += "; `site.yml` runs it on %s in the play \"%s\"" % (_hosts(where[0]), md(where[1]))
        elif phase:
            playbook, hosts, play_name = phase[0][4], phase[0][1], phase[0][3]
            text += "; `playbooks/%s` runs it on %s in the play \"%s\"" % (playbook, _hosts(hosts), md(play_name))
        lines += [_wrap(text + "."), ""]
    if data or phases:
        lines += [_wrap(_where(role, site, phases)), ""]
    if phases:
        lines += [_wrap("Ansible checks these variables against the spec whenever a phase starts, and preflight (the "
                        "first play of %s, and `playbooks/preflight.yml`) checks them up front, on the hosts the role "
                        "runs on, before any host is changed. Defaults come from the spec, else from the role's "
                        "`defaults/main.yml` (where some are computed from other variables)."
                        % _and(["`playbooks/%s`" % p for p in _playbooks(phases)])), ""]
    else:
        lines += [_wrap("Ansible checks these variables against the spec when the role starts, and "
                        "`playbooks/preflight.yml` (also the first stage of `site.yml`) checks them up front, on the "
                        "hosts the role runs on, before any host is changed. Defaults come from the spec, else from "
                        "the role's `defaults/main.yml` (where some are computed from other variables)."), ""]
    lines += [_wrap("This part is generated by %s from meta/argument_specs.yml; edit the spec, then run "
                    "`python %s`." % (SCRIPT, SCRIPT))]
    return "\n".join(lines)


# README files --------------------------------------------------------------------------------------------------------

def readme_path(role, root=ROOT):
    return os.path.join(root, "roles", role, "README.md")


def _between(text, start, end, path):
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise ReadmeError("%s: expected one %s followed by one %s" % (path, start, end))
    i = text.index(start)
    j = text.index(end)
    return text[:i], text[i + len(start):j], text[j + len(end):]


def current_intro(text, path):
    """The hand-written part of an existing README (None where there is no README)."""
    if text is None:
        return None
    if not any(m in text for m in MARKERS):
        lines = text.strip("\n").splitlines()
        if lines and lines[0].startswith("# "):
            lines = lines[1:]
        return "\n".join(lines).strip("\n").rstrip()
    before, intro, rest = _between(text, INTRO, END_INTRO, path)
    between, _generated, after = _between(rest, GENERATED, END_GENERATED, path)
    title = [line for line in before.splitlines() if line.strip()]
    if len(title) > 1 or (title and not title[0].startswith("# ")) or between.strip() or after.strip():
        raise ReadmeError("%s: text outside the markers (only the title may be): move it between %s and %s"
                          % (path, INTRO, END_INTRO))
    return intro.strip("\n").rstrip()


def render(role, root=ROOT, site=None, existing=None):
    """The README of ``role``; ``existing`` is its current text (None: read from disk)."""
    path = readme_path(role, root)
    if existing is None and os.path.exists(path):
        with open(path) as f:
            existing = f.read()
    site = site_stages(root) if site is None else site
    phases = playbook_phases(root).get(role)
    spec = load_spec(role, root)
    intro = current_intro(existing, path)
    if intro is None:
        intro = seed_intro(role, spec, site, None if site.get(role) else phases)
    return "\n".join(["# %s.%s" % (COLLECTION, role), "", INTRO, "", intro, "", END_INTRO, "", GENERATED, "",
                      render_generated(role, spec, site, root, phases), "", END_GENERATED, ""])


def outdated(root=ROOT, roles=None):
    """``[(role, path, new text)]`` of the READMEs that differ from what this tool renders."""
    site = site_stages(root)
    result = []
    for role in roles or role_names(root):
        path = readme_path(role, root)
        old = None
        if os.path.exists(path):
            with open(path) as f:
                old = f.read()
        new = render(role, root, site, old)
        if new != old:
            result.append((role, path, new))
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description="Render roles/<role>/README.md from meta/argument_specs.yml.")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 naming the READMEs that differ")
    parser.add_argument("--root", default=ROOT, help="the collection's checkout (default: this one)")
    parser.add_argument("roles", nargs="*", help="roles to render (default: every role with an argument spec)")
    args = parser.parse_args(argv)
    try:
        changes = outdated(args.root, args.roles or None)
    except ReadmeError as e:
        sys.stderr.write("role_readme: %s\n" % e)
        return 2
    for _role, path, new in changes:
        rel = os.path.relpath(path, args.root)
        if args.check:
            sys.stderr.write("out of date: %s\n" % rel)
        else:
            with open(path, "w") as f:
                f.write(new)
            sys.stdout.write("wrote %s\n" % rel)
    if args.check and changes:
        sys.stderr.write("run: python %s\n" % SCRIPT)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
