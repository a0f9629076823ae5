"""Every module's DOCUMENTATION, EXAMPLES and RETURN parse as YAML (ansible-test sanity checks them in depth, and
ansible-lint and ansible-doc cannot read a module whose documentation does not parse): a fast guard for the inner
loop."""

import ast
import glob
import os

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
MODULES = sorted(glob.glob(os.path.join(ROOT, "plugins", "modules", "*.py")))


def _docs(path):
    with open(path) as f:
        tree = ast.parse(f.read())
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            if node.targets[0].id in ("DOCUMENTATION", "EXAMPLES", "RETURN"):
                found[node.targets[0].id] = node.value.value
    return found


@pytest.mark.parametrize("path", MODULES, ids=[os.path.basename(p) for p in MODULES])
def test_documentation_examples_and_return_parse(path):
    docs = _docs(path)
    assert set(docs) == {"DOCUMENTATION", "EXAMPLES", "RETURN"}, sorted(docs)
    doc = yaml.safe_load(docs["DOCUMENTATION"])
    assert doc["module"] == os.path.splitext(os.path.basename(path))[0]
    assert isinstance(yaml.safe_load(docs["EXAMPLES"]), list)
    ret = yaml.safe_load(docs["RETURN"])
    assert ret is None or isinstance(ret, dict)


def _texts(doc, where="DOCUMENTATION"):
    """Every description and note of a module's documentation, with where it is (options and suboptions too)."""
    for key in ("description", "notes"):
        value = doc.get(key)
        for i, item in enumerate(value if isinstance(value, list) else [value] if value is not None else []):
            yield "%s.%s[%d]" % (where, key, i), item
    for name, option in (doc.get("options") or doc.get("suboptions") or {}).items():
        if isinstance(option, dict):
            yield from _texts(dict(option, options=option.get("suboptions") or {}), "%s.%s" % (where, name))


@pytest.mark.parametrize("path", MODULES, ids=[os.path.basename(p) for p in MODULES])
def test_every_description_and_note_is_text(path):
    """A line like "- Not for secrets: the content..." is a YAML mapping, not a sentence (validate-modules refuses it)."""
    doc = yaml.safe_load(_docs(path)["DOCUMENTATION"])
    bad = [where for where, text in _texts(doc) if not isinstance(text, str)]
    assert not bad, bad
