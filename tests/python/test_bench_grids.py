"""bench/suite.py gives every workload a grid and a quick grid: `bash bench/run.sh
--quick --workloads S` ran into KeyError: 'S' when S had none. Read with ast, so
the bench's imports (peers, DALI, SPDL) are not needed here."""
from __future__ import annotations

import ast
from pathlib import Path

SUITE = Path(__file__).resolve().parents[2] / "bench" / "suite.py"


def _assignments() -> dict[str, ast.expr]:
    tree = ast.parse(SUITE.read_text())
    return {t.id: node.value for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)}


def test_every_workload_has_a_grid_and_a_quick_grid():
    a = _assignments()
    workloads = {ast.literal_eval(k) for k in a["WORKLOADS"].keys}
    grids, quick = ast.literal_eval(a["GRIDS"]), ast.literal_eval(a["QUICK_GRIDS"])
    assert "S" in workloads
    assert set(grids) == workloads
    assert set(quick) == workloads, f"no quick grid for {sorted(workloads - set(quick))}"
    for w, loaders in quick.items():
        assert set(loaders) <= set(grids[w]), w
        for kind, settings in loaders.items():
            assert len(settings) == 1 and settings[0] in grids[w][kind], (w, kind)
