"""`stoker report RUN.jsonl -o report.html`, checked by what headless
Chromium renders: the DOM it builds (slow markers, histogram bars, axis
labels, the verdict) and a screenshot's pixels."""
from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import stoker
from conftest import stoker_env, write_vision_shards
from stoker import report as report_mod

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (scripts/setup.sh installs the Debian package)")


def paced(waits):
    for i, w in enumerate(waits):
        time.sleep(w)
        yield i


@pytest.fixture(scope="module")
def profile_run(tmp_path_factory) -> Path:
    """A wrapped iterable with three planted stalls: no stage evidence."""
    path = tmp_path_factory.mktemp("report") / "profile.jsonl"
    waits = [0.002] * 40
    for i in (9, 22, 35):
        waits[i] = 0.1
    prof = stoker.profile(paced(waits), window=20, log_every=10, jsonl=path)
    for _ in prof:
        with prof.step():
            time.sleep(0.003)
    prof.close()
    return path


@pytest.fixture(scope="module")
def loader_run(tmp_path_factory) -> Path:
    """stoker.Loader with stage evidence (throttled storage)."""
    d = tmp_path_factory.mktemp("report_shards")
    write_vision_shards(d, shards=1, per_shard=64, seed=9)
    path = d / "loader.jsonl"
    loader = stoker.Loader(str(d / "shard-000000.tar"), {"jpg": stoker.image(64), "cls": stoker.scalar("int64")},
                           batch_size=4, output="numpy", decode_threads=1, io_depth=2,
                           max_read_bytes_per_s=400_000, log_every=5, jsonl=path)
    for _ in itertools.islice(loader, 12):
        with loader.step():
            time.sleep(0.002)
    loader.close()
    return path


def run_cli(jsonl: Path, out: Path) -> subprocess.CompletedProcess:
    """The `stoker` entry point as pip installs it, with the stoker this test imports."""
    env = stoker_env()
    return subprocess.run([sys.executable, "-c", "from stoker._cli import main; main()", "report", str(jsonl),
                           "-o", str(out)], capture_output=True, text=True, env=env, timeout=60)


def chromium(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--no-first-run", "--no-default-browser-check", *args],
                          capture_output=True, text=True, timeout=90)


def test_page_is_self_contained(profile_run, tmp_path):
    out = tmp_path / "r.html"
    res = run_cli(profile_run, out)
    assert res.returncode == 0, res.stderr
    page = out.read_text()
    # Nothing to fetch: no scripts, links, images or stylesheets by URL.
    assert "<script" not in page
    assert not re.search(r"\b(src|href)\s*=", page)
    assert not re.search(r"https?://(?!www\.w3\.org/2000/svg)", page)


def test_cli_reports_a_bad_file(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    res = run_cli(bad, tmp_path / "x.html")
    assert res.returncode == 1 and "not JSON" in res.stderr


@needs_chromium
def test_chromium_renders_slow_markers_histogram_and_verdict(profile_run, tmp_path):
    out = tmp_path / "profile.html"
    assert run_cli(profile_run, out).returncode == 0
    run = report_mod.load(profile_run)
    res = chromium("--dump-dom", out.as_uri())
    assert res.returncode == 0, res.stderr[-2000:]
    dom = res.stdout
    # One marker per slow batch, as the JSON lines recorded them (the three
    # planted stalls at least; a very noisy machine may add one).
    assert {9, 22, 35} <= {s["batch"] for s in run["slow"]}
    assert dom.count('class="slow-marker"') == len(run["slow"])
    # Histogram: the bars hold every batch exactly once.
    bars = re.findall(r'class="hist-bar"[^>]*><title>[^<]*: (\d+)</title>', dom)
    assert bars and sum(map(int, bars)) == len(run["batches"]) == 40
    assert len(bars) >= 2  # fast and slow waits land in different bins
    for label in ("t_wait (ms)", "batch", "t_wait (ms, log scale)", "batches"):
        assert f">{label}</text>" in dom
    bottleneck = re.search(r'<span id="bottleneck">([^<]*)</span>', dom)[1]
    assert bottleneck == run["verdict"]["bottleneck"]
    assert "Recommended:" in dom and "SLOW BATCH #9" in dom
    assert 'class="no-evidence"' in dom  # no stage plot for a wrapped iterable


@needs_chromium
def test_chromium_renders_stage_utilisation_and_pixels(loader_run, tmp_path):
    from PIL import Image

    out = tmp_path / "loader.html"
    assert run_cli(loader_run, out).returncode == 0
    run = report_mod.load(loader_run)
    dom = chromium("--dump-dom", out.as_uri()).stdout
    assert 'class="series util-read"' in dom and 'class="series util-decode"' in dom
    assert ">utilisation (%)</text>" in dom
    # The page shows the run's verdict (a throttled read: storage, or on a machine busy with
    # other processes, cpu contention; test_observe.py holds the classification itself).
    assert re.search(r'<span id="bottleneck">([^<]*)</span>', dom)[1] == run["verdict"]["bottleneck"]
    assert run["verdict"]["bottleneck"] in ("storage", "cpu contention"), run["verdict"]
    # The wait line has one vertex per batch.
    points = re.search(r'class="series wait"[^>]*points="([^"]*)"', dom)[1].split()
    assert len(points) == len(run["batches"]) == 12

    png = tmp_path / "shot.png"
    res = chromium(f"--screenshot={png}", "--window-size=1000,4000", "--hide-scrollbars", out.as_uri())
    assert png.exists(), res.stderr[-2000:]
    pixels = np.asarray(Image.open(png).convert("RGB")).astype(int)
    def share(rgb):  # fraction of pixels close to a plot colour
        return (np.abs(pixels - np.array(rgb)).sum(axis=2) < 60).mean()
    assert share((0x1F, 0x5F, 0xBF)) > 1e-4   # the blue wait line and bars drew
    # The green read-utilisation line drew: told by its hue, since a 1.5 px line laid on a
    # half pixel is antialiased towards white, further than 60 from #2ca02c (it was, flat at
    # 100%, in two runs) while still plainly green.
    r, g, b = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    assert ((g - r >= 40) & (g - b >= 40)).mean() > 1e-5
    assert (pixels.std(axis=(0, 1)) > 5).all()  # not a blank page
