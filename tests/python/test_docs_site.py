"""The documentation site opens from disk: two of its pages, loaded from file:// in
headless Chromium, render what a reader comes for.

* The home page with `?q=TERM` (Material opens its search with that query): the search
  index is there and searched, and a term that one page alone holds finds that page.
  From disk a page can neither fetch `search_index.json` nor start the Web Worker that
  Material searches in; scripts/mkdocs_hooks.py writes the index as a script and
  docs/js/file_worker.js runs the worker in a frame (checked by hand, 2026-12-06: without
  the polyfill the results stay empty and this test fails).
* The API page: mkdocstrings rendered `stoker.Loader` with its docstring, and a symbol
  of the native module's stubs (`_stoker.pyi`).

The site is built here (`mkdocs build --strict`, as scripts/test.sh builds it) into a
temporary folder, so the test needs nothing built before it.
"""
from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium is not installed (scripts/setup.sh installs the Debian package)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-f", str(ROOT / "mkdocs.yml"),
                          "-d", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                         env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out


def dom(url: str) -> str:
    """The page's DOM after its scripts ran (virtual time: timers and the search's
    asynchronous steps run to the end without waiting in real time)."""
    res = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                          "--no-first-run", "--no-default-browser-check", "--virtual-time-budget=15000",
                          "--dump-dom", url], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def text_of(markup: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", markup)))


def test_the_site_is_static_and_offline(site):
    index = (site / "index.html").read_text(encoding="utf-8")
    assert (site / "search" / "search_index.js").read_text(encoding="utf-8").startswith("var __index = {")
    assert (site / "js" / "file_worker.js").is_file()
    # Nothing fetched from another host: no web fonts, no scripts or styles by URL.
    assert not re.search(r"<(?:script|link)[^>]+(?:src|href)=\"https?://", index)
    assert 'href="guides/sources.html"' in index  # links are files, not directories
    # Every plot bench/run.sh wrote is on the benchmarks page (scripts/mkdocs_hooks.py).
    benchmarks = (site / "benchmarks.html").read_text(encoding="utf-8")
    for png in sorted((ROOT / "bench" / "results").glob("*.png")):
        assert (site / "assets" / "results" / png.name).read_bytes() == png.read_bytes()
        assert f'src="assets/results/{png.name}"' in benchmarks, png.name


@needs_chromium
def test_the_search_finds_a_term_from_disk(site):
    page = dom((site / "index.html").as_uri() + "?q=Feistel")
    meta = re.search(r'class="md-search-result__meta">([^<]*)<', page)
    assert meta and re.match(r"\d+ matching document", meta.group(1)), (meta and meta.group(1), page[-2000:])
    results = re.findall(r'<a href="([^"]+)" class="md-search-result__link', page)
    assert any("architecture.html" in r for r in results), results


@needs_chromium
def test_the_api_page_renders_the_loader(site):
    page = dom((site / "api.html").as_uri())
    assert 'id="stoker.Loader"' in page
    text = text_of(page)
    assert "Batches from WebDataset-style tar shards" in text
    assert "decode_jpeg_rgb" in text and "set_io_options" in text
    # The docstrings' interactive examples are code (scripts/griffe_doctest.py), not text.
    assert re.search(r'<span class="gp">&gt;&gt;&gt; </span>', page)
