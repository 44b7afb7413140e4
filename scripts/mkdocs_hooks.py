"""MkDocs hooks (mkdocs.yml `hooks:`): what the site needs to open from disk and
to show the benchmark plots.

* The benchmark plots: `bench/run.sh` writes its PNGs to `bench/results/`,
  outside `docs/`. Every one is added to the site as `assets/results/NAME.png`,
  and a page's link to it by its path in the repository
  (`../bench/results/NAME.png` from `docs/benchmarks.md`) is pointed there, so
  the same Markdown shows the plot on GitHub and on the site. The benchmarks page
  ends with every plot there that it does not embed already, newest first, so a
  run's plot is on the site as soon as `bench/run.sh` wrote it.
* Search from `file://`: Material's search reads `search/search_index.js`
  (a script, which a page opened from disk may load) instead of fetching
  `search_index.json` (which it may not) when the page's protocol is `file:`.
  Material's offline plugin writes that file but also loads a shim for its
  search worker from a CDN; this writes the file itself, and
  `docs/js/file_worker.js` (a polyfill in mkdocs.yml) runs the worker in a
  hidden frame, since a page from disk cannot start a Web Worker.
"""
from __future__ import annotations

import os
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SITE_RESULTS = "assets/results"

# A Markdown link or image whose target is a path into bench/results (any number of ../).
_RESULTS_LINK = re.compile(r"\]\(((?:\.\./)+)bench/results/([A-Za-z0-9_.:-]+\.png)\)")
_RESULTS_LINK_NAME = re.compile(r"\]\((?:\.\./)+bench/results/([A-Za-z0-9_.:-]+\.png)\)")


def on_files(files, config):
    for png in sorted(RESULTS.glob("*.png")):
        files.append(File.generated(config, f"{SITE_RESULTS}/{png.name}", abs_src_path=str(png)))
    return files


def on_page_markdown(markdown, page, config, files):
    here = posixpath.dirname(page.file.src_uri)

    def to_site(m: re.Match) -> str:
        target = f"{SITE_RESULTS}/{m.group(2)}"
        if files.get_file_from_path(target) is None:
            return m.group(0)  # no such plot: left as written, so the link check names it
        return f"]({posixpath.relpath(target, here or '.')})"

    if page.file.src_uri == "benchmarks.md":
        shown = set(_RESULTS_LINK_NAME.findall(markdown))
        rest = [png.name for png in sorted(RESULTS.glob("*.png"), reverse=True) if png.name not in shown]
        if rest:
            markdown += "\n\n## Every plot in bench/results\n\nThe plots `bench/run.sh` wrote that this page does not show above, newest first:\n"
            for name in rest:
                markdown += f"\n![{name}](../bench/results/{name})\n"
    return _RESULTS_LINK.sub(to_site, markdown)


def on_post_build(config):
    index = os.path.join(config.site_dir, "search", "search_index.json")
    if not os.path.isfile(index):
        return
    with open(index, encoding="utf-8") as f:
        data = f.read()
    with open(os.path.join(config.site_dir, "search", "search_index.js"), "w", encoding="utf-8") as f:
        f.write(f"var __index = {data}")
