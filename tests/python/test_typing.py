"""The package is typed: py.typed and a stub for the native module that is
what nanobind's stubgen makes of the module now (regenerate with
`python -m nanobind.stubgen -m stoker._stoker -o python/stoker/_stoker.pyi`)."""
from __future__ import annotations

from pathlib import Path

import pytest

import stoker


def test_stub_is_current(tmp_path):
    stubgen = pytest.importorskip("nanobind.stubgen")
    pkg = Path(stoker.__file__).parent
    assert (pkg / "py.typed").exists()
    shipped = (pkg / "_stoker.pyi").read_text()
    out = tmp_path / "_stoker.pyi"
    sg = stubgen.StubGen(stoker._stoker)
    sg.put(stoker._stoker)
    out.write_text(sg.get())
    assert out.read_text() == shipped, "python/stoker/_stoker.pyi is stale: regenerate it (see this file's docstring)"
