"""Renders roles/<role>/README.md for every role from its meta/argument_specs.yml (a developer tool).

Each README has a title, a hand-written part kept verbatim between the intro markers, and a generated part: for each
entry point of the argument spec (main first) a table of its options, a table for the suboptions of each option that
has them, and how to use the role. A README without markers is taken whole as the hand-written part (its "# " title
line dropped); a role without a README gets one seeded from its spec's main entry point and its play in site.yml.

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


def site_stages(root=ROOT):
    """What site.yml says about each role.

    ``{role: {"hosts", "gather_facts", "stage", "prev", "next", "entry_points": {name: (hosts, play name)}}}``;
    stages are numbered like README.md's table (every role play and imported playbook, in order).
    """
    with open(os.path.join(root, "site.yml")) as f:
        plays = yaml.safe_load(f)
    stages = []
    info = {}
    imports = []
    for play in plays:
        imported = play.get("ansible.builtin.import_playbook", play.get("import_playbook"))
        if imported:
            stages.append(os.path.splitext(os.path.basename(imported))[0])
            continue
        for role in play.get("roles", []):
            name = _short(role["role"] if isinstance(role, dict) else role)
            stages.append(name)
            info[name] = {"hosts": play["hosts"], "gather_facts": play.get("gather_facts", True),
                          "stage": len(stages), "entry_points": {}}
        for task in play.get("tasks", []):
            for key in ("ansible.builtin.import_role", "import_role", "ansible.builtin.include_role", "include_role"):
                args = task.get(key)
                if isinstance(args, dict) and args.get("tasks_from"):
                    imports.append((_short(args["name"]), args["tasks_from"], play["hosts"], play.get("name", "")))
    for name, data in info.items():
        i = data["stage"] - 1
        data["prev"] = stages[i - 1] if i > 0 else None
        data["next"] = stages[i + 1] if i + 1 < len(stages) else None
        data["total"] = len(stages)
    for role, tasks_from, hosts, play_name in imports:
        if role in info:
            info[role]["entry_points"][tasks_from] = (hosts, play_name)
    return info


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


def _where(role, site):
    data = site.get(role)
    if not data:
        return "`site.yml` does not run this role."
    order = ["after `%s`" % data["prev"]] if data["prev"] else []
    order += ["before `%s`" % data["next"]] if data["next"] else []
    return "`site.yml` runs it on %s, as stage %d of %d in its fixed order%s." % (
        _hosts(data["hosts"]), data["stage"], data["total"], " (%s)" % " and ".join(order) if order else "")


def _sentence(text):
    text = text.strip()
    return text if text.endswith((".", "!", "?", ":")) else text + "."


def _wrap(text):
    """Wrapped at WIDTH, never inside a `code span`."""
    parts = text.split("`")
    if len(parts) % 2 == 1:
        text = "`".join(p.replace(" ", "\0") if i % 2 else p for i, p in enumerate(parts))
    return textwrap.fill(text, width=WIDTH, break_long_words=False, break_on_hyphens=False).replace("\0", " ")


def seed_intro(role, spec, site):
    """The hand-written part of a role that has no README yet: its main entry point's descriptions, and its play."""
    main = spec.get("main", {})
    parts = [_wrap(md(_sentence(one_line(main.get("short_description", role)))))]
    parts += [_wrap(md(p)) for p in paragraphs(main.get("description"))]
    parts.append(_wrap(_where(role, site)))
    return "\n\n".join(parts)


def role_defaults(role, root=ROOT):
    path = os.path.join(root, "roles", role, "defaults", "main.yml")
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return yaml.safe_load(f) or {}


def render_generated(role, spec, site, root=ROOT):
    fqcn = "%s.%s" % (COLLECTION, role)
    defaults = role_defaults(role, root)
    data = site.get(role)
    lines = []
    for ep in entry_points(spec):
        entry = spec[ep] or {}
        lines += ["## Entry point `%s`" % ep, ""]
        if entry.get("short_description"):
            lines += [_wrap(md(_sentence(one_line(entry["short_description"])))), ""]
        if ep != "main":
            for p in paragraphs(entry.get("description")):
                lines += [_wrap(md(p)), ""]
        if entry.get("options"):
            lines += options_tables(entry["options"], role_defaults=defaults) + [""]
        else:
            lines += ["No options.", ""]
    lines += ["## Using the role", ""]
    hosts = data["hosts"] if data else "all"
    play = ["```yaml", "- name: %s" % fqcn, "  hosts: %s" % hosts]
    if data:
        play.append("  gather_facts: %s" % ("true" if data["gather_facts"] else "false"))
    play += ["  tasks:", "    - name: Run %s" % fqcn, "      ansible.builtin.import_role:", "        name: %s" % fqcn,
             "```"]
    lines += play + [""]
    for ep in entry_points(spec):
        if ep == "main":
            continue
        text = "Entry point `%s`: `ansible.builtin.import_role: {name: %s, tasks_from: %s}`" % (ep, fqcn, ep)
        where = data["entry_points"].get(ep) if data else None
        if where:
            text += "; `site.yml` runs it on %s in the play \"%s\"" % (_hosts(where[0]), md(where[1]))
        lines += [_wrap(text + "."), ""]
    if data:
        lines += [_wrap(_where(role, site)), ""]
    lines += [_wrap("Ansible checks these variables against the spec when the role starts, and `playbooks/preflight.yml` "
                    "(also the first stage of `site.yml`) checks them up front, on the hosts the role runs on, before "
                    "any host is changed. Defaults come from the spec, else from the role's `defaults/main.yml` (where "
                    "some are computed from other variables)."), ""]
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
    spec = load_spec(role, root)
    intro = current_intro(existing, path)
    if intro is None:
        intro = seed_intro(role, spec, site)
    return "\n".join(["# %s.%s" % (COLLECTION, role), "", INTRO, "", intro, "", END_INTRO, "", GENERATED, "",
                      render_generated(role, spec, site, root), "", END_GENERATED, ""])


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
