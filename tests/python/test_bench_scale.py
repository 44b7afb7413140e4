"""bench/scale.py (`bash bench/run.sh --scale`) end to end on a tiny dataset: 2 tar
shards of 1,000 samples, one round, the cold pass included. Its JSON has every loader's
figures (RSS growth, peak, seconds to the first batch, bytes read from a cold cache), or
a stated reason it could not run; stoker and webdataset always run, Mosaic Streaming where
mosaicml-streaming is installed (bench/run.sh installs requirements-bench.txt; CI's
scripts/setup.sh does not). The figures are checked for sense, not speed."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "scale.py"
SAMPLES, PER_SHARD = 2000, 1000

pytest.importorskip("webdataset", reason="webdataset is one of the bench's peers (requirements-dev.txt)")
pytest.importorskip("torch", reason="the Mosaic and webdataset rows import torch")


@pytest.fixture(scope="module")
def result(tmp_path_factory) -> dict:
    d = tmp_path_factory.mktemp("scale")
    cmd = [sys.executable, str(SCRIPT), "--dir", str(d / "tar"), "--work", str(d / "work"), "--per-shard",
           str(PER_SHARD), "--sizes", str(SAMPLES), "--reps", "1", "--out", str(d / "out")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    payload = json.loads((d / "out.json").read_text())
    assert (d / "out.md").exists()
    payload["_md"] = (d / "out.md").read_text()
    return payload


def rows(result: dict) -> dict:
    assert list(result["results"]) == [str(SAMPLES)]
    return result["results"][str(SAMPLES)]["loaders"]


def check_figures(name: str, row: dict) -> None:
    assert "unavailable" not in row, (name, row["unavailable"])
    growth, peak, first = row["rss_growth_mb"], row["peak_growth_mb"], row["first_batch_s"]
    for median, lo, hi in (growth, peak, first, row["anon_growth_mb"], row["file_growth_mb"]):
        assert lo <= median <= hi, name
    # VmRSS is RssAnon + RssFile + RssShmem: the parts add up to the whole (each run's)
    for r in row["runs"]:
        parts = r["anon_growth_mb"] + r["file_growth_mb"] + r["shmem_growth_mb"]
        assert abs(parts - r["rss_growth_mb"]) < 1, (name, r)
        # RssFile's code part (mapped *.so, from smaps) is within RssFile's growth (from status)
        assert r["code_growth_mb"] <= r["file_growth_mb"] + 0.5, (name, r)
        if name.startswith("stoker"):  # its first batch runs native code that importing it did not
            assert r["code_growth_mb"] > 0, (name, r)
        assert 1 <= r["steady_batches"] <= 100, (name, r)
        assert r["steady_anon_growth_mb"] > -50, (name, r)
    assert growth[0] > -50 and peak[0] >= 0, name  # a start of hundreds of MB, measured twice in one process
    assert 0 < first[0] < 120, name
    assert row["batch_ok"], f"{name}: a first batch of other than 64 rows or labels outside 0-999"
    assert row["rss_before_mb"] > 10, name
    # from a cold cache it read something of its files, and not more than is there (pages round up)
    assert 0 < row["read_bytes_before_first_batch"] <= row["dataset_bytes"] + 4096 * row["files"], name
    assert row["cold_first_batch_s"] > 0, name


def test_every_loader_has_figures_or_a_reason(result):
    r = rows(result)
    assert set(r) == {"stoker, shards", "stoker, .idx", "stoker, manifest", "stoker, stream", "Mosaic Streaming",
                      "webdataset"}
    for name, row in r.items():
        assert "rss_growth_mb" in row or row.get("unavailable"), name
        line = next(line for line in result["_md"].splitlines() if line.startswith(f"| {name} |"))
        assert (row.get("unavailable") or "") in line
    if importlib.util.find_spec("streaming") is None:
        assert "mosaicml-streaming is not installed" in r["Mosaic Streaming"]["unavailable"]


def test_stoker_and_webdataset_figures(result):
    r = rows(result)
    for name in ("stoker, shards", "stoker, .idx", "webdataset"):
        check_figures(name, r[name])
    manifest = r["stoker, manifest"]
    if "unavailable" in manifest:
        assert manifest["unavailable"].startswith("not available in this build")
    else:
        check_figures("stoker, manifest", manifest)
        assert manifest["source"].endswith("stoker-manifest.json")
    assert r["webdataset"]["env"] == {"RANK": "0", "WORLD_SIZE": "8"}
    ratios = result["results"][str(SAMPLES)]["ratios"]
    assert "stoker, shards / webdataset" in ratios


@pytest.mark.skipif(importlib.util.find_spec("streaming") is None,
                    reason="mosaicml-streaming is not installed (requirements-bench.txt; bench/run.sh installs it, "
                           "scripts/setup.sh does not)")
def test_mosaic_figures(result):
    r = rows(result)
    check_figures("Mosaic Streaming", r["Mosaic Streaming"])
    assert r["Mosaic Streaming"]["env"]["WORLD_SIZE"] == "8"
    assert "stoker, shards / Mosaic Streaming" in result["results"][str(SAMPLES)]["ratios"]
    assert not result["machine"]["versions"]["mosaicml-streaming"].startswith("unavailable")

