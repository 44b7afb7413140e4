"""Parquet support is a plugin per pyarrow major, loaded on first use
(src/formats/parquet/plugin_loader.h): `import stoker` never imports pyarrow,
and a pyarrow with no plugin, or no plugin at all, fails naming the pyarrow
versions that work. Each case runs in a fresh process (a loaded plugin stays
for the process). What each wheel does beside real pyarrow 21 to 26 and none:
scripts/release.sh."""
import os
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import stoker_bin, stoker_env


@pytest.fixture(scope="module")
def parquet_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("plugin") / "rows.parquet"
    pq.write_table(pa.table({"x": list(range(10))}), path, row_group_size=4)
    return str(path)


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    # A fresh process as a user starts it: this one's STOKER_PYARROW_DIR, set by
    # the Parquet loaders of the tests before, is not passed on.
    base = {k: v for k, v in stoker_env().items() if k != "STOKER_PYARROW_DIR"}
    return subprocess.run([sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True,
                          timeout=120)


def test_import_stoker_does_not_import_pyarrow_and_a_parquet_source_does(parquet_file):
    out = run_python(f"""
import sys, stoker
assert "pyarrow" not in sys.modules
batches = list(stoker.Loader({parquet_file!r}, {{"x": stoker.scalar()}}, batch_size=5, output="numpy"))
print(sorted(int(v) for b in batches for v in b["x"]), "pyarrow" in sys.modules)
""")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == f"{list(range(10))} True"


def test_a_pyarrow_major_without_a_plugin_names_the_versions_that_work(parquet_file, tmp_path):
    # A pyarrow directory as the loader sees it: its libarrow.so.<major>00 (never loaded: no plugin matches).
    (tmp_path / "libarrow.so.9900").write_bytes(b"")
    out = run_python(f"""
import stoker
try:
    next(iter(stoker.Loader({parquet_file!r}, {{"x": stoker.scalar()}}, batch_size=5, output="numpy")))
except stoker.StokerError as e:
    print(e)
""", STOKER_PYARROW_DIR=str(tmp_path))
    assert out.returncode == 0, out.stderr
    major = pa.__version__.split(".")[0]
    assert "rows.parquet" in out.stdout
    assert f"reading Parquet needs pyarrow {major}" in out.stdout, out.stdout  # this build's plugin (its pyarrow)
    assert "pip install 'pyarrow>=" in out.stdout and "the pyarrow installed is 99" in out.stdout, out.stdout


def test_the_command_line_takes_the_same_errors(parquet_file, tmp_path):
    binary = stoker_bin()
    if binary is None:
        pytest.skip("no native `stoker` command built")
    out = subprocess.run([binary, "inspect", parquet_file], env={**os.environ, "STOKER_PARQUET_PLUGIN_DIR": str(tmp_path)},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
    assert "built without Parquet support" in out.stderr and "rows.parquet" in out.stderr, out.stderr
