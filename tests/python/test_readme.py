"""The README's ```python blocks run as written, so a README that drifts from the
code fails here.

How: every ```python block of README.md runs, in order, in one namespace, in a
temporary directory that holds the `data/` the README names (32 SA-1B-like
shards `data/sa1b-000000.tar` ..., Megatron corpora `data/corpus_text_document`,
`data/a`, `data/b`, `data/c`), made small. Nothing else is changed but:

* SUBSTITUTIONS: sizes and counts scaled down to that data (each must still
  occur in the README, so a stale one fails too);
* PRELUDE: the names the README leaves to the reader (`train_step`,
  `torch_dataloader`, and `shards`/`fields` for the `stoker.Loader(..., `
  that SUBSTITUTIONS fills in);
* SKIP: blocks that need a cloud account or a GPU, each with its reason.

What a block shows as printed (`loader.settings   # {...}`, or a loop's
`for batch in loader:   # {"tokens": int64 [8, 2048], ...}`) is compared with
what the code gives: a literal's keys and value types, a schema's names,
dtypes, ranks and batch dimension (the `__index__`-style metadata
beside the fields is not shown; values that depend on the machine, such
as core counts, are not compared).

Checked by hand (2026-11-25): renaming "embeddings" in the first block, or
the Long runs block as it was before issue 22 (undefined `step`), fails here.
"""
from __future__ import annotations

import ast
import io
import os
import re
import tarfile
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, jpeg_bytes, natural_image, npz_bytes

README = ROOT / "README.md"

# A block whose text contains the key is skipped with the value as its reason.
SKIP = {
    "workers=stoker.RayWorkers(": "needs a Ray cluster (tests/python/test_ray_workers.py runs one on 127.0.0.1)",
    "s3://bucket/": "needs an S3 bucket and an HTTPS host (cloud account)",
    'device="cuda")': "needs a CUDA device (CI has none; tests/python/test_device.py runs the CPU engine)",
    "https://host/data/": "needs an HTTP host (tests/python/test_stream_mode.py streams from nginx on 127.0.0.1)",
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


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, code) of each ```python block."""
    return [(text[:m.start()].count("\n") + 1, m.group(1))
            for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)]


def make_data(root: Path) -> None:
    rng = np.random.default_rng(0)
    data = root / "data"
    data.mkdir()
    n = 0
    for s in range(32):  # two samples a shard: {id}.jpg + {id}_features.npz (key_rule="underscore")
        with tarfile.open(data / f"sa1b-{s:06d}.tar", "w") as tar:
            for _ in range(2):
                n += 1
                for name, payload in ((f"sa_{n}.jpg", jpeg_bytes(natural_image(rng, 48, 32))),
                                      (f"sa_{n}_features.npz", npz_bytes({
                                          "embeddings": rng.standard_normal((4, 2, 2)).astype(np.float16),
                                          "iou": rng.random(4).astype(np.float32)}))):
                    info = tarfile.TarInfo(name)
                    info.size = len(payload)
                    tar.addfile(info, io.BytesIO(payload))
    import stoker

    for prefix in ("corpus_text_document", "a", "b", "c"):
        docs = [rng.integers(0, 1000, rng.integers(20, 60)) for _ in range(200)]
        stoker.write_megatron(data / prefix, docs)


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
    claims = [c for _, code in BLOCKS for c in printed_claims(code)]
    assert any(s == "loader.settings" for s, _ in claims), claims
    assert any(s.startswith("for batch in loader") for s, _ in claims), claims


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    root = tmp_path_factory.mktemp("readme")
    make_data(root)
    return root


BLOCKS = python_blocks(README.read_text())


def test_every_block_is_run_or_skipped_with_a_reason_and_substitutions_still_apply():
    assert len(BLOCKS) >= 5
    text = "\n".join(code for _, code in BLOCKS)
    for key in SKIP:
        assert key in text, f"SKIP key {key!r} no longer in the README"
    for old, _ in SUBSTITUTIONS:
        assert old in text, f"substitution {old!r} no longer in the README: update SUBSTITUTIONS"


@pytest.fixture(scope="module")
def namespace(workdir):
    ns: dict = {"__name__": "readme"}
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        exec(compile(PRELUDE, "<prelude>", "exec"), ns)
    finally:
        os.chdir(cwd)
    return ns


@pytest.mark.parametrize("line,code", BLOCKS, ids=[f"README.md:{line}" for line, _ in BLOCKS])
def test_block_runs(line, code, namespace, workdir, monkeypatch):
    for key, reason in SKIP.items():
        if key in code:
            pytest.skip(f"README.md:{line}: {reason}")
    for old, new in SUBSTITUTIONS:
        code = code.replace(old, new)
    monkeypatch.chdir(workdir)
    exec(compile(code, f"README.md:{line}", "exec"), namespace)
    for statement, comment in printed_claims(code):
        check_claim(statement, comment, namespace, f"README.md:{line}: {statement}")
