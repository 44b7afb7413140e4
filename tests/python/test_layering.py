"""python/stoker's modules import one another one way (issue 41): the graph of their
relative imports, function-level ones included (a lazy import is still a dependency),
has no cycle. Read from the source with ast, so the check needs nothing installed."""
from __future__ import annotations

import ast

from conftest import ROOT

PACKAGE = ROOT / "python" / "stoker"


def imports_of(path) -> set[str]:
    """The package's modules this file imports (relative imports, anywhere in it)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:  # from .loader import Loader
                out.add(node.module.split(".")[0])
            else:  # from . import _exit, observe
                out.update(alias.name for alias in node.names)
    return {m for m in out if (PACKAGE / f"{m}.py").exists()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return path[path.index(n):] + [n]
            if n not in state and (cycle := visit(n)):
                return cycle
        state[m] = 2
        path.pop()
        return None

    for m in sorted(graph):
        if m not in state and (cycle := visit(m)):
            return cycle
    return None


def test_the_package_has_no_import_cycle():
    graph = {p.stem: imports_of(p) for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert graph["ray_workers"] >= {"loader"}  # the graph is read: RayLoader builds on Loader
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def test_a_cycle_is_found():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
