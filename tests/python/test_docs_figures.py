"""Every measured figure in README.md and on the docs/ pages names the results file that
holds it, and is in it.

The convention (issue 45, item 4; issue 47 carried it to every page):

* A block (a paragraph, a list item, a table) that states measured figures cites
  the run they come from by its path, `bench/results/<UTC>-<kind>.md` (or `.json`,
  `.log`). A figure written after a citation is checked against that file, the one
  cited last before it; a figure before the block's first citation against any file the
  block cites.
* A table, or a paragraph that continues a list item (indented), with no citation of
  its own takes the citations of the block just before it: the paragraph that
  introduces the table. A table row that cites a file of its own is checked against
  it alone (a table of headline figures, one results file a row).
* A block that states a measured throughput or ratio (N samples/s, images/s, MB/s,
  GB/s, N.N×) without a results file says so in words: "no results file" (e.g. a GPU
  figure measured in a device session that kept none, with the command that reproduces
  it).

What is checked, in a cited block (code blocks and `inline code` left out: commands and
log lines, not figures): every figure, that is every number with a decimal point or a
thousands separator, and every whole number followed by a unit (s, ms, MB, GB, KB,
MB/s, GB/s, samples/s, images/s, members/s, %, ×, x), must occur in one of the cited
files as a number of equal value:

* in a .md or .log file, as written (thousands separators dropped, so 2,570 is 2570;
  0.9 equals 0.90; an en dash in a range is just a separator). A percentage matches its
  number or its fraction (17.5% is 17.5 or 0.175), since the files give fractions.
* in a .json file, any number there rounded to the figure's decimals (the JSON keeps
  full precision; 3.41 matches 3.4125077...).

A figure that is derived, not in any file (a quotient of two files' figures), must be
listed in DERIVED with how it is derived; an entry no longer in the README fails, so the
list cannot go stale. Pure text, no package import: it runs in milliseconds.

Its limit: a figure edited into another number that the cited file also holds passes
(a figure is matched by value, not by its row: the remote paragraph's 0.91 made 0.92
passes, since the file's shuffle table holds a 0.92). Checked by hand (2026-11-28):
its 3.26× made 3.27×, or the scale table's 11.3 made 11.4, fails here;
test_an_edited_figure_fails does the same for the first figure of every cited block.
"""
from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RESULTS = ROOT / "bench" / "results"
# The pages held to the convention: the README and every docs/ page but those in NOT_YET.
ALL_PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs").glob("*/*.md"))]
# Pages written before the convention, page -> why they are not held to it yet. Each must
# still fail the check (test_pages_not_held_yet_still_fail): a page fixed leaves the list.
NOT_YET = {
    "docs/benchmarks.md": "the log of the suite's runs since 2026-11-22: each section names its run in its "
                          "heading or by brace form (2026-11-22T0116Z.{json,md,png}), not per block, and "
                          "cites 2026-11-22T0124Z.json, which was never kept",
    "docs/ray_at_scale.md": "a design note: its figures are estimates and measurements of other sessions",
}
PAGES = [p for p in ALL_PAGES if p.relative_to(ROOT).as_posix() not in NOT_YET]

CITATION = re.compile(r"bench/results/([A-Za-z0-9_.:-]+?\.(?:md|json|log))(?![A-Za-z0-9_])")

# A number: 1,234,567.8 (thousands separators) or 12.5 or 12; not part of a word
# (sm_80, T1327Z, q50) nor of a dotted version (2.13.0 gives no figure).
_NUM = r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\w.]*\.\d)"
_UNIT = r"(?:samples/s|images/s|members/s|MB/s|GB/s|ms|MB|GB|KB|s|%|×|x)(?![\w/])"
# × followed by a digit is a size (500×375), not a ratio.
FIGURE = re.compile(rf"({_NUM})(\s?{_UNIT})?(?!\d)")
MEASURED = re.compile(
    r"\d[\d,.]*\s?(?:samples|images|members)/s|\d[\d,.]*\s?[MG]B/s|\d+\.\d+\s?×(?!\s?\d)")
NUMBER_IN_FILE = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)")

# Figures the README derives from its cited files rather than copies: figure as written
# -> how it is derived. Each must still occur in the README.
DERIVED = {
    "2.2×": "29,504 (2026-11-27T1344Z-gpu_decode.log) / 13,337 (2026-11-27T0156Z-gpu_decode.log)",
}


def _strip(text: str) -> str:
    """The block without `inline code` and link targets; a citation stays, as the marker
    @@NAME@@ (it carries no figure)."""
    text = re.sub(r"`[^`]*`",
                  lambda m: " " + " ".join(f"@@{n}@@" for n in CITATION.findall(m.group(0))) + " ",
                  text)
    text = CITATION.sub(lambda m: f" @@{m.group(1)}@@ ", text)
    return re.sub(r"\]\([^)]*\)", "]", text)


MARKER = re.compile(r"@@([^@]+)@@")


def blocks(text: str) -> list[dict]:
    """README blocks outside code: {"line", "text", "kind"} with kind paragraph, item,
    continuation or table."""
    out: list[dict] = []
    cur: list[str] = []
    start = 0
    fenced = False
    in_list = False  # inside a list item: indented blocks continue it

    def flush():
        nonlocal cur
        if cur:
            first = cur[0]
            if first.lstrip().startswith("|"):
                kind = "table"
            elif first.startswith("- "):
                kind = "item"
            elif (first.startswith("    ") and all(l.startswith("    ") or not l.strip() for l in cur)
                  and not in_list):
                kind = "code"   # an indented code block (indented text inside a list item continues it)
            elif first.startswith(" "):
                kind = "continuation"
            else:
                kind = "paragraph"
            if kind != "code" and not first.startswith("#"):
                out.append({"line": start, "text": "\n".join(cur), "kind": kind})
        cur = []

    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            flush()
            fenced = not fenced
            continue
        if fenced:
            continue
        if line.startswith("- "):
            in_list = True
        elif line.strip() and not line.startswith(" "):
            in_list = False
        is_table = line.lstrip().startswith("|")
        new_block = (not line.strip()
                     or line.startswith("- ")
                     or line.startswith("#")
                     or (cur and is_table != cur[-1].lstrip().startswith("|")))
        if new_block:
            flush()
        if line.strip():
            if not cur:
                start = number
            cur.append(line)
    flush()
    return out


def cited_blocks(text: str) -> list[dict]:
    """The blocks with their citations (own, or inherited by a table or continuation)."""
    result = []
    previous: list[str] = []
    for b in blocks(text):
        own = CITATION.findall(b["text"])
        if not own and b["kind"] in ("table", "continuation"):
            own = previous
        b["cites"] = own
        previous = own
        result.append(b)
    return result


def figures(block_text: str) -> list[str]:
    """The figures of a block as written (number and unit)."""
    return [fig for fig, _ in figures_with_citation(block_text)]


def figures_with_citation(block_text: str) -> list[tuple[str, str | None]]:
    """(figure, the citation written last before it in the block, or None)."""
    stripped = _strip(block_text)
    markers = [(m.start(), m.group(1)) for m in MARKER.finditer(stripped)]
    stripped = MARKER.sub(lambda m: " " * len(m.group(0)), stripped)
    found = []
    for m in FIGURE.finditer(stripped):
        number, unit = m.group(1), (m.group(2) or "").strip()
        if "." in number or "," in number or unit:
            before = [name for at, name in markers if at < m.start()]
            found.append((number + (m.group(2) or ""), before[-1] if before else None))
    return found


def _value(number: str) -> Decimal:
    return Decimal(number.replace(",", ""))


_file_cache: dict[str, tuple[set, list]] = {}


def file_numbers(name: str) -> tuple[set, list]:
    """(values written in the file, JSON numbers) of a results file."""
    if name not in _file_cache:
        text = (RESULTS / name).read_text(encoding="utf-8", errors="replace")
        written = {_value(n) for n in NUMBER_IN_FILE.findall(text)}
        json_numbers: list = []
        if name.endswith(".json"):
            def walk(node):
                if isinstance(node, bool):
                    return
                if isinstance(node, (int, float)):
                    json_numbers.append(node)
                elif isinstance(node, dict):
                    for v in node.values():
                        walk(v)
                elif isinstance(node, list):
                    for v in node:
                        walk(v)
            walk(json.loads(text))
        _file_cache[name] = (written, json_numbers)
    return _file_cache[name]


def _in_file(figure: str, name: str) -> bool:
    number = re.match(r"[\d,.]+", figure).group(0)
    decimals = len(number.split(".")[1]) if "." in number else 0
    wanted = [_value(number)]
    if figure.endswith("%"):
        wanted.append(_value(number) / 100)
    written, json_numbers = file_numbers(name)
    if any(w in written for w in wanted):
        return True
    for v in json_numbers:
        if any(f"{v:.{decimals + 2 * i}f}" == f"{w:.{decimals + 2 * i}f}"
               for i, w in enumerate(wanted)):
            return True
    return False


def _units(b: dict) -> list[tuple[str, list[str]]]:
    """(text, citations) to check: the block, or for a table each row, a row that cites a
    file of its own with that file alone."""
    if b["kind"] != "table":
        return [(b["text"], b["cites"])]
    return [(row, CITATION.findall(row) or b["cites"]) for row in b["text"].splitlines()]


def check(text: str, name: str = "README.md") -> list[str]:
    """Every problem with a page's figures, as lines to print."""
    problems = []
    for b in cited_blocks(text):
        where = f"{name}:{b['line']}"
        for cited in b["cites"]:
            if not (RESULTS / cited).is_file():
                problems.append(f"{where}: cites bench/results/{cited}, which does not exist")
        if not any(cites for _, cites in _units(b)):
            if MEASURED.search(_strip(b["text"])) and "no results file" not in " ".join(b["text"].split()):
                problems.append(f"{where}: measured figures ({MEASURED.search(_strip(b['text'])).group(0)}) "
                                "cite no bench/results file and do not say there is none")
            continue
        for unit, unit_cites in _units(b):
            cites = [n for n in unit_cites if (RESULTS / n).is_file()]
            if not cites:
                continue
            for fig, last in figures_with_citation(unit):
                if fig.replace("x", "×") in DERIVED or fig in DERIVED:
                    continue
                # After a citation, a figure is checked against that file alone; before
                # the block's first citation (or in a table), against any it cites.
                files = [last] if last in cites else sorted(set(cites))
                if not any(_in_file(fig, n) for n in files):
                    problems.append(f"{where}: {fig} is in none of {', '.join(files)}")
    return problems


def page_texts() -> list[tuple[str, str]]:
    return [(p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8")) for p in PAGES]


def test_cited_files_exist_and_hold_every_figure():
    problems = [p for name, text in page_texts() for p in check(text, name)]
    assert not problems, "figures without their run:\n" + "\n".join(problems)


def test_the_pages_cite_results_files():
    # The convention is in use: the figures named in issue 45 cite their runs, and the
    # README's headline figures cite one file each.
    cited = {n for _, text in page_texts() for b in cited_blocks(text) for n in b["cites"]}
    for name in ("2026-11-25T1327Z-remote.md", "2026-11-27T1829Z-scale.md",
                 "2026-11-27T0808Z-ray.md", "2026-11-27T1344Z-gpu_decode.log",
                 "2026-12-06T0430Z-shuffle.md"):
        assert name in cited, name
    readme = {n for b in cited_blocks(README.read_text(encoding="utf-8")) for n in b["cites"]}
    assert len(readme) >= 8, readme


def test_derived_figures_are_still_on_a_page():
    text = "\n".join(_strip(t) for _, t in page_texts())
    for figure in DERIVED:
        assert figure in text, f"DERIVED lists {figure!r}, on no page any more: remove it"


def test_an_edited_figure_fails():
    # Each cited unit's first figure (a block, or a table row citing its own file),
    # changed by one in its last digit, is caught.
    edited = 0
    for name, text in page_texts():
        for b in cited_blocks(text):
            for unit, cites in _units(b):
                figs = [f for f in figures(unit) if f not in DERIVED and cites]
                cites = [n for n in cites if (RESULTS / n).is_file()]
                if not figs or not cites:
                    continue
                fig = figs[0]
                number = re.match(r"[\d,.]+", fig).group(0)
                # The last digit changed to one that makes a number none of the cited files
                # holds (a file with many numbers may hold some neighbours: a known limit).
                candidates = [number[:-1] + str(d) for d in range(10) if str(d) != number[-1]]
                candidates = [c for c in candidates if not any(_in_file(c, n) for n in cites)]
                if not candidates:
                    continue
                bumped = candidates[0]
                new_unit = re.sub(rf"(?<![\w.,]){re.escape(number)}(?![\d,])", bumped, unit, count=1)
                assert new_unit != unit
                problems = check(text.replace(unit, new_unit, 1), name)
                assert any(bumped in p or f"{name}:{b['line']}" in p for p in problems), (name, b["line"], fig)
                edited += 1
    assert edited >= 10


def test_pages_not_held_yet_still_fail():
    for name, why in NOT_YET.items():
        assert (ROOT / name).is_file(), f"NOT_YET lists {name}, which is gone: remove it"
        assert check((ROOT / name).read_text(encoding="utf-8"), name), (
            f"{name} now meets the convention: remove it from NOT_YET ({why})")


def test_the_shuffle_quality_table_is_the_results_file():
    # Issue 44: the shuffle quality per source kind (docs/guides/shuffling.md) is
    # bench/shuffle_quality.py's saved output, row for row: the source kind, then labels per
    # batch, x uniform, sources per batch, x uniform (the file's last column, seconds per
    # epoch, left out).
    text = (ROOT / "docs" / "guides" / "shuffling.md").read_text(encoding="utf-8")
    name = "2026-12-06T0430Z-shuffle.md"
    saved = (RESULTS / name).read_text(encoding="utf-8")
    want = [(r[0], *r[-5:-1]) for r in (line.split() for line in saved.splitlines())
            if r and r[0] in ("parquet", "tar", "mixture")]
    table = next(b for b in cited_blocks(text) if b["kind"] == "table" and name in b["cites"])
    got = []
    for line in table["text"].splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        got.append((cells[0].lower(), *cells[3:7]))
    assert len(want) == 12
    assert got == want


def test_a_missing_file_and_an_uncited_figure_fail():
    problems = check("Ran at 1.23× (`bench/results/2026-01-01T0000Z-nothing.md`).\n\n"
                     "Another ran at 4,321 samples/s.\n")
    assert any("does not exist" in p for p in problems)
    assert any("cite no bench/results file" in p for p in problems)
    assert not check("Another ran at 4,321 samples/s (measured by hand, no results file kept).\n")
