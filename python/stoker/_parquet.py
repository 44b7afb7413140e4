"""Where the native side finds pyarrow for Parquet sources.

Parquet is read by a plugin built per pyarrow major (formats/parquet/engine.h);
the native side loads the one matching the pyarrow installed, from the
directory named by $STOKER_PYARROW_DIR (formats/parquet/plugin_loader.h). It is
set here only once a Parquet source is given, so `import stoker` never
imports pyarrow, and never needs it.
"""
from __future__ import annotations

import importlib.util
import os
from typing import Iterable

ENV = "STOKER_PYARROW_DIR"


def prepare(sources: Iterable[str]) -> None:
    """Before a loader opens `sources`: if one is Parquet, import pyarrow (so
    the plugin binds to the very libarrow it loaded) and name its directory."""
    if os.environ.get(ENV) or not any(".parquet" in s.lower() for s in sources):
        return
    try:
        import pyarrow
    except ImportError:
        return  # the native side says which pyarrow versions stoker reads Parquet with
    os.environ[ENV] = os.path.dirname(pyarrow.__file__)


def unimported_dir() -> str | None:
    """pyarrow's directory, found without importing it (the CLI's start-up)."""
    try:
        spec = importlib.util.find_spec("pyarrow")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]
