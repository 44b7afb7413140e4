"""Every ```python and ```bash block of README.md and of every docs/ page runs as
written, so documentation that drifts from the code fails here.

How: each page's blocks run in order, the Python ones in one namespace per page (a
page tells a story: a block uses the loader an earlier one made), the bash ones in
`bash -euo pipefail` with `stoker` the installed command, each page in a directory
of its own that holds the `data/` the pages name, made small: 32 SA-1B-like shards
`data/sa1b-000000.tar` ..., Megatron corpora `data/corpus_text_document`, `data/a`,
`data/b`, `data/c`, an image folder `data/train/{cat,dog}`, the Hub's Parquet (what
`datasets` writes) served by the Hub stand-in of tests/python/url_server.py as
`hf://datasets/ORG/NAME/...`, the inputs of `stoker pack-tokens` (`docs/*.npy`,
`more.jsonl`, `web.jsonl`, `more.parquet`, a tokenizer `tok/`) and a run's record
`run.jsonl`. Nothing else is changed but:

* SUBSTITUTIONS: sizes and counts scaled down to that data (each must still
  occur in some block, so a stale one fails too);
* PRELUDE: the names the pages leave to the reader (`train_step`,
  `torch_dataloader`, and `shards`/`fields` for the `stoker.Loader(..., `
  that SUBSTITUTIONS fills in);
* SKIP: blocks that need what CI lacks (a cloud account, a GPU, a Ray cluster)
  or that run a suite of their own (the test command itself, the release, the
  bench), each with its reason. A skipped block is still checked to parse
  (`compile`, `bash -n`).

What a Python block shows as printed (`loader.settings   # {...}`, or a loop's
`for batch in loader:   # {"tokens": int64 [8, 2048], ...}`) is compared with
what the code gives: a literal's keys and value types, a schema's names,
dtypes, ranks and batch dimension (the `__index__`-style metadata
beside the fields is not shown; values that depend on the machine, such
as core counts, are not compared).

Checked by hand (2026-11-25): renaming "embeddings" in the first block, or
the Long runs block as it was before issue 22 (undefined `step`), fails here.
(2026-12-06, issue 47: a `stoker bench` flag misspelled on the CLI page fails here.)
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, jpeg_bytes, natural_image, npz_bytes, stoker_env, write_tar

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs").glob("*/*.md"))]

# A block whose text contains the key is skipped with the value as its reason.
SKIP = {
    "workers=stoker.RayWorkers(": "needs a Ray cluster (tests/python/test_ray_workers.py runs one on 127.0.0.1)",
    "s3://bucket/": "needs an S3 bucket and an HTTPS host (cloud account)",
    'device="cuda")': "needs a CUDA device (CI has none; tests/python/test_device.py runs the CPU engine)",
    "https://host/data/": "needs an HTTP host (tests/python/test_stream_mode.py streams from nginx on 127.0.0.1)",
    "bash scripts/test.sh": "runs the test command itself (.ci/run runs it; tests/python/test_demo.py runs the demo)",
    "pip install stoker": "installs from PyPI (scripts/setup.sh installs this checkout: pip install .)",
    "bash scripts/test_shuffled.sh": "runs a suite of its own (the test suite shuffled, the fuzzers, the release, "
                                     "the bench)",
    "mkdocs serve": "builds this site (scripts/test.sh runs mkdocs build --strict; test_docs_site.py opens it)",
}

# (old, new): applied to every block; each old must occur in some block.
SUBSTITUTIONS = [
    ("stoker.image(1024,", "stoker.image(96,"),              # small images: a 1024 canvas is just memory
    ("range(loader.epoch, 100)", "range(loader.epoch, 2)"),   # two epochs of the Long runs loop
    ("step % 1000 == 0", "step % 2 == 0"),                    # so the checkpoint is written
    ("num_samples=1_000_000", "num_samples=64"),              # token corpora of a few hundred tokens
    ("seq_len=2048", "seq_len=16"),
    ("stoker.Loader(..., ", "stoker.Loader(shards, fields, batch_size=8, key_rule=\"underscore\", "),
]

PRELUDE = """
import stoker
import torch
shards = "data/sa1b-{000000..000031}.tar"
fields = {"jpg": stoker.image(96, resize="longest"), "features.npz": stoker.npz()}
train_step = lambda batch: None
torch_dataloader = torch.utils.data.DataLoader(list(range(16)), batch_size=4)
"""

# Bash blocks: `stoker` is the installed command, run by this test's Python.
BASH_PRELUDE = f"""
stoker() {{ {sys.executable} -c 'import sys; from stoker._cli import main; main()' "$@"; }}
"""


def blocks(text: str) -> list[tuple[int, str, str]]:
    """(line number, language, code) of each ```python and ```bash block."""
    return [(text[:m.start()].count("\n") + 1, m.group(1), m.group(2))
            for m in re.finditer(r"^```(python|bash)\n(.*?)^```", text, re.S | re.M)]


def page_name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


BLOCKS = [(page_name(page), line, lang, code) for page in PAGES for line, lang, code in blocks(page.read_text())]


def make_data(root: Path) -> None:
    rng = np.random.default_rng(0)
    data = root / "data"
    data.mkdir()
    n = 0
    for s in range(32):  # two samples a shard: {id}.jpg + {id}_features.npz (key_rule="underscore")
        members = []
        for _ in range(2):
            n += 1
            members += [(f"sa_{n}.jpg", jpeg_bytes(natural_image(rng, 48, 32))),
                        (f"sa_{n}_features.npz", npz_bytes({
                            "embeddings": rng.standard_normal((4, 2, 2)).astype(np.float16),
                            "iou": rng.random(4).astype(np.float32)}))]
        write_tar(data / f"sa1b-{s:06d}.tar", members)
    import stoker

    for prefix in ("corpus_text_document", "a", "b", "c"):
        docs = [rng.integers(0, 1000, rng.integers(20, 60)) for _ in range(200)]
        stoker.write_megatron(data / prefix, docs)

    # An image folder: 32 JPEGs a class.
    for cls in ("cat", "dog"):
        (data / "train" / cls).mkdir(parents=True)
        for i in range(32):
            (data / "train" / cls / f"{i:06d}.jpg").write_bytes(jpeg_bytes(natural_image(rng, 40, 30)))

    # The Hub's Parquet, as `datasets` writes it: an Image() struct column and labels, two files.
    import datasets

    images = [jpeg_bytes(natural_image(rng, 40, 30)) for _ in range(128)]
    ds = datasets.Dataset.from_dict({"image": images, "label": [i % 3 for i in range(128)]})
    ds = ds.cast_column("image", datasets.Image())
    hub = root / "hub" / "data"
    hub.mkdir(parents=True)
    for f in range(2):
        ds.shard(2, f, contiguous=True).to_parquet(str(hub / f"train-{f:05d}-of-00002.parquet"))

    # stoker pack-tokens' inputs: token arrays, JSON lines of ids and of text, Parquet text, a tokenizer.
    (root / "docs").mkdir()
    for i in range(2):
        np.save(root / "docs" / f"part{i}.npy", rng.integers(0, 1000, 50).astype(np.int64))
    with open(root / "more.jsonl", "w") as f:
        for _ in range(5):
            f.write(json.dumps({"tokens": rng.integers(0, 1000, 30).tolist()}) + "\n")
    words = ["stoker", "loader", "shard", "token", "batch", "the", "a", "of"]
    texts = [" ".join(rng.choice(words, size=20)) for _ in range(40)]
    with open(root / "web.jsonl", "w") as f:
        for t in texts[:20]:
            f.write(json.dumps({"text": t}) + "\n")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"text": texts[20:]}), root / "more.parquet")
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    (root / "tok").mkdir()
    tok.save(str(root / "tok" / "tokenizer.json"))

    # A run's record, as Loader(..., jsonl=) writes it: `stoker report run.jsonl`.
    loader = stoker.Loader(str(data / "sa1b-{000000..000003}.tar"), {"jpg": stoker.image(32)}, batch_size=4,
                           key_rule="underscore", jsonl=str(root / "run.jsonl"))
    for _ in loader:
        pass
    loader.close()


def printed_claims(code: str) -> list[tuple[str, str]]:
    """(statement, comment) for each line whose trailing comment shows what
    it prints, with the comment's continuation lines joined."""
    claims: list[tuple[str, str]] = []
    lines = code.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\S.*?)\s+#\s*([\[{].*)$", line)
        if not m:
            continue
        comment = m.group(2)
        for more in lines[i + 1:]:
            c = re.match(r"^\s+#\s(.*)$", more)
            if not c:
                break
            comment += " " + c.group(1).strip()
        claims.append((m.group(1), comment))
    return claims


def same_form(actual, claimed, where: str) -> None:
    """actual has claimed's keys and value types, recursively (not its values)."""
    if isinstance(claimed, dict):
        assert isinstance(actual, dict), f"{where}: a dict is shown, the code gives {type(actual).__name__}"
        assert set(actual) == set(claimed), (
            f"{where}: keys shown {sorted(claimed)} != keys given {sorted(actual)}")
        for k in claimed:
            same_form(actual[k], claimed[k], f"{where}[{k!r}]")
    else:
        numbers = (int, float)
        ok = (type(actual) is type(claimed)
              or (type(claimed) in numbers and type(actual) in numbers and not isinstance(actual, bool)))
        assert ok, f"{where}: shown as {type(claimed).__name__}, given {type(actual).__name__} ({actual!r})"


def check_claim(statement: str, comment: str, namespace: dict, where: str) -> None:
    loop = re.match(r"for (\w+) in .*:$", statement)
    actual = namespace[loop.group(1)] if loop else eval(statement, namespace)
    try:
        claimed = ast.literal_eval(comment)
    except (ValueError, SyntaxError):
        schema = re.findall(r'"([\w.]+)": (\w+) \[([^\]]*)\]', comment)
        assert schema, f"{where}: cannot read what the comment shows: {comment}"
        given = sorted(k for k in actual if not k.startswith("__"))  # not __index__, __key__: metadata
        assert given == sorted(name for name, _, _ in schema), (
            f"{where}: fields shown {[n for n, _, _ in schema]} != fields given {given}")
        for name, dtype, dims in schema:
            dims = [int(d) for d in dims.split(",")]
            assert str(actual[name].dtype).endswith(dtype), f"{where}: {name} is {actual[name].dtype}, shown {dtype}"
            assert actual[name].ndim == len(dims) and actual[name].shape[0] == dims[0], (
                f"{where}: {name} has shape {tuple(actual[name].shape)}, shown {dims}")
        return
    same_form(actual, claimed, where)


def test_printed_claims_are_found():
    claims = [c for _, _, lang, code in BLOCKS if lang == "python" for c in printed_claims(code)]
    assert any(s == "loader.settings" for s, _ in claims), claims
    assert any(s.startswith("for batch in loader") for s, _ in claims), claims


def test_every_page_is_read_and_every_block_is_run_or_skipped_with_a_reason():
    names = {page for page, _, _, _ in BLOCKS}
    assert "README.md" in names and "docs/guides/cli.md" in names, names
    assert len(BLOCKS) >= 20
    assert any(lang == "bash" for _, _, lang, _ in BLOCKS)
    text = "\n".join(code for _, _, _, code in BLOCKS)
    for key in SKIP:
        assert key in text, f"SKIP key {key!r} is in no block any more: remove it"
    for old, _ in SUBSTITUTIONS:
        assert old in text, f"substitution {old!r} is in no block any more: update SUBSTITUTIONS"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("docs")
    make_data(root)
    return root


@pytest.fixture(scope="module")
def hub(workdir):
    """The Hugging Face Hub on loopback (tests/python/url_server.py): resolve URLs
    redirecting to a CDN, and the tree API that lists a glob; HF_ENDPOINT points
    hf:// URLs at it for this module."""
    from stoker import _stoker
    from url_server import UrlServer

    with UrlServer(workdir / "hub") as cdn:
        def redirect(path, query):
            m = re.match(r"/datasets/[^/]+/[^/]+/resolve/[^/]+/(.*)", path)
            return f"{cdn.url}/{m.group(1)}" if m else None

        with UrlServer(workdir / "hub", redirect=redirect) as server:
            saved = {k: os.environ.get(k) for k in ("HF_ENDPOINT", "HF_TOKEN", "HF_HOME")}
            os.environ.update(HF_ENDPOINT=server.url, HF_HOME=str(workdir / "hf_home"))
            os.environ.pop("HF_TOKEN", None)
            _stoker.reset_io_options()
            try:
                yield server
            finally:
                for k, v in saved.items():
                    if v is None:
                        os.environ.pop(k, None)
                    else:
                        os.environ[k] = v
                _stoker.reset_io_options()


@pytest.fixture(scope="module")
def page_dirs(workdir):
    """A directory per page, each with the data the pages name (linked, not copied)."""
    made: dict[str, Path] = {}

    def get(page: str) -> Path:
        if page not in made:
            d = workdir / "pages" / page.replace("/", "_")
            d.mkdir(parents=True)
            for name in ("data", "docs", "more.jsonl", "web.jsonl", "more.parquet", "tok", "run.jsonl"):
                (d / name).symlink_to(workdir / name)
            made[page] = d
        return made[page]

    return get


@pytest.fixture(scope="module")
def namespaces():
    """One namespace per page, begun with PRELUDE in the page's directory."""
    return {}


def skip_reason(code: str) -> str | None:
    return next((reason for key, reason in SKIP.items() if key in code), None)


def parses(lang: str, code: str, where: str) -> None:
    if lang == "python":
        compile(code, where, "exec")
    else:
        res = subprocess.run(["bash", "-n"], input=code, capture_output=True, text=True)
        assert res.returncode == 0, f"{where}: not bash: {res.stderr}"


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[f"{p}:{line}" for p, line, _, _ in BLOCKS])
def test_block_runs(index, namespaces, page_dirs, hub, monkeypatch):
    page, line, lang, code = BLOCKS[index]
    where = f"{page}:{line}"
    reason = skip_reason(code)
    if reason:
        parses(lang, code, where)
        pytest.skip(f"{where}: {reason}")
    for old, new in SUBSTITUTIONS:
        code = code.replace(old, new)
    here = page_dirs(page)
    monkeypatch.chdir(here)
    if lang == "bash":
        res = subprocess.run(["bash", "-euo", "pipefail", "-c", BASH_PRELUDE + code], cwd=here, env=stoker_env(),
                             capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, f"{where}: exit {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
        return
    if page not in namespaces:
        namespaces[page] = {"__name__": "docs"}
        exec(compile(PRELUDE, "<prelude>", "exec"), namespaces[page])
    namespace = namespaces[page]
    exec(compile(code, where, "exec"), namespace)
    for statement, comment in printed_claims(code):
        check_claim(statement, comment, namespace, f"{where}: {statement}")
