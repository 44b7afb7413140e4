"""Every error the Python layer's own checks raise is on the troubleshooting page.

What counts: each `raise SomeError(message)` in python/stoker/*.py whose message is
text written there (a string, an f-string, a concatenation, or a module constant),
read from the source with `ast`, not by running it. A message is reduced to its
template: the literal text, with `…` where a value is filled in
(`f"output must be 'torch' or 'numpy', not {output!r}"` is
`output must be 'torch' or 'numpy', not …`). A message built wholly elsewhere
(`raise StokerError(self._used_up_message())`) has no text of its own and is
left out.

What it must match: docs/guides/troubleshooting.md lists the families in tables whose
first column is headed "message"; each row's first cell is a pattern in `inline code`,
literal text where `…` stands for anything. A message belongs to a family when the
pattern occurs in its template, so a family is named by a stable part of the message
(a prefix, or the words that say what is wrong) and survives changes to the values it
names. A pattern must hold at least MIN_LITERAL characters of literal text (no family
of one word), and every family must still match some message (no stale rows).

Pure text, no package import: it runs in milliseconds.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "stoker"
PAGE = ROOT / "docs" / "guides" / "troubleshooting.md"
MIN_LITERAL = 8
HOLE = "…"


def _constants(tree: ast.Module) -> dict[str, str]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out[target.id] = node.value.value
    return out


def _template(node: ast.AST, constants: dict[str, str]) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else HOLE for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _template(node.left, constants) + _template(node.right, constants)
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    return HOLE


def raised_messages(package: Path = PACKAGE) -> list[tuple[str, str, str]]:
    """(where, exception, template) of every raise with a message of its own text."""
    found = []
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = _constants(tree)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args):
                continue
            template = re.sub(r"(…)+", HOLE, _template(node.exc.args[0], constants))
            if not template.replace(HOLE, "").strip():
                continue  # no text of its own
            found.append((f"python/stoker/{path.name}:{node.lineno}", ast.unparse(node.exc.func),
                          " ".join(template.split())))
    return found


def families(page: Path = PAGE) -> list[str]:
    """The patterns of the page's message tables (first cell, in `inline code`)."""
    patterns = []
    header = None
    for line in page.read_text(encoding="utf-8").splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if header is None:
            header = cells
            continue
        if header[0] != "message" or set(cells[0]) <= set("-: "):
            continue
        m = re.fullmatch(r"`([^`]+)`", cells[0])
        assert m, f"troubleshooting.md: a message cell that is not one `pattern`: {cells[0]}"
        patterns.append(m.group(1).replace("\\|", "|"))
    return patterns


def _regex(pattern: str) -> re.Pattern:
    return re.compile(".*?".join(re.escape(" ".join(part.split())) for part in pattern.split(HOLE)), re.S)


def matches(pattern: str, template: str) -> bool:
    return _regex(pattern).search(template) is not None


def test_every_raised_message_has_its_family_on_the_page():
    pats = families()
    missing = [f"{where}: {exc}: {template}" for where, exc, template in raised_messages()
               if not any(matches(p, template) for p in pats)]
    assert not missing, ("messages with no family on docs/guides/troubleshooting.md (add a row: "
                         "`pattern` | raised as | cause | fix):\n" + "\n".join(missing))


def test_every_family_names_something_raised():
    templates = [t for _, _, t in raised_messages()]
    stale = [p for p in families() if not any(matches(p, t) for t in templates)]
    assert not stale, f"families that no message matches any more: {stale}"


def test_families_are_specific():
    pats = families()
    assert len(pats) >= 40, len(pats)
    short = [p for p in pats if len(p.replace(HOLE, "").strip()) < MIN_LITERAL]
    assert not short, f"patterns with fewer than {MIN_LITERAL} characters of text: {short}"


def test_the_reading_sees_every_kind_of_message(tmp_path):
    (tmp_path / "m.py").write_text(
        "X = 'a constant message'\n"
        "def f(v, e):\n"
        "    raise ValueError(f'{v}() takes no thing=, not {v!r}')\n"
        "    raise TypeError('plain ' 'joined')\n"
        "    raise RuntimeError('prefix: ' + '; '.join(e))\n"
        "    raise ImportError(X)\n"
        "    raise RuntimeError(e.message())\n"
        "    raise e\n")
    got = [t for _, _, t in raised_messages(tmp_path)]
    assert got == ["…() takes no thing=, not …", "plain joined", "prefix: …", "a constant message"]
    assert matches("takes no thing=", got[0]) and matches("… takes no …, not …", got[0])
    assert not matches("takes no other=", got[0])
