"""Dependencies point one way (issue 41). python/stoker's modules: the graph of their
relative imports, function-level ones included (a lazy import is still a dependency),
has no cycle (read with ast). src/pipeline and src/device: no two units (a .h and its
.cc) include each other. Read from the sources, so the checks need nothing built."""
from __future__ import annotations

import ast
import re

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


def include_graph(*folders: str) -> dict[str, set[str]]:
    """unit ("src/pipeline/epoch_run", its .h and .cc together) -> the units it includes."""
    graph: dict[str, set[str]] = {}
    for folder in folders:
        for path in (ROOT / folder).iterdir():
            if path.suffix not in (".h", ".cc"):
                continue
            unit = str(path.relative_to(ROOT).with_suffix(""))
            included = {"src/" + m.rsplit(".", 1)[0] for m in re.findall(r'#include "([^"]+)"', path.read_text())}
            graph.setdefault(unit, set()).update(u for u in included if u != unit)
    return graph


def test_no_two_units_of_the_engine_include_each_other():
    graph = include_graph("src/pipeline", "src/device")
    assert "src/pipeline/sample_decoder" in graph["src/pipeline/epoch_run"]  # the graph is read
    mutual = sorted({tuple(sorted((a, b))) for a, deps in graph.items() for b in deps if a in graph.get(b, ())})
    assert mutual == [], mutual


def private_names(path, classes: set[str] | None = None) -> set[str]:
    """The private attributes the classes of a module define (all of them, or those named):
    methods, class attributes and what their methods assign to self._x."""
    out: set[str] = set()
    for cls in ast.parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(cls, ast.ClassDef) or (classes is not None and cls.name not in classes):
            continue
        for node in ast.walk(cls):
            names = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names = [node.name]
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and \
                    isinstance(node.value, ast.Name) and node.value.id == "self":
                names = [node.attr]
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node in cls.body:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            out.update(n for n in names if n.startswith("_") and not n.startswith("__"))
    return out


def foreign_reaches(path, privates: set[str]) -> list[str]:
    """`obj._x` in this module with _x one of `privates` that no class of the module defines
    itself, on anything but self/cls (a subclass's own use of what it inherits)."""
    own = private_names(path)
    return [f"{path.name}:{node.lineno}: {ast.unparse(node)}"
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Attribute) and node.attr in privates - own
            and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))]


def test_no_module_reaches_into_a_loader():
    """Loaders built on a Loader (RayLoader, a worker's share) use `loader.engine`
    (stoker.loader.Engine) and its public calls; a subclass (TokenLoader) uses what it
    inherits through self. Nothing else reads or writes a Loader's private attributes."""
    privates = private_names(PACKAGE / "loader.py", {"Loader", "Engine", "_EpochIterator"})
    assert {"_native", "_cursor", "_skip", "_worker_loaders"} <= privates  # the names are read
    reaches = [r for p in sorted(PACKAGE.glob("*.py")) if p.name != "loader.py" for r in foreign_reaches(p, privates)]
    assert reaches == [], reaches


def test_a_reach_is_found(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("class R:\n    def f(self, loader):\n        self._own = loader._native\n        return self._own\n")
    assert foreign_reaches(module, {"_native", "_own"}) == ["m.py:3: loader._native"]
