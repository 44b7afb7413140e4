"""Shuffle quality per source kind: distinct labels and sources per batch
against a uniform permutation of the same rows (issue 44).

A label-sorted dataset (as a class-sorted folder exported in order is) is
written as Parquet (several row-group layouts) and as tar shards (one class
per shard run), then read with shuffle=True in each order stoker offers. Per
batch it counts the distinct labels and the distinct sources (files or
shards) the batch holds; the reference is the same count over uniform
permutations of the same labels, drawn with numpy. A figure near 1.00x is a
batch as mixed as a uniform shuffle's; the layout's limit shows below it.
The mixture rows read the same shards as two sources of half the labels each
(stoker.mix, weights 0.5/0.5): mixed within batches, and one source per batch.

    python3 bench/shuffle_quality.py [--rows 4096 --classes 16 --batch 64 --epochs 3] [--out FILE.md]

With --out (bench/results/<UTC>-shuffle.md) the table is written there too, with the
command and the date, for docs/guides/shuffling.md to cite.

Benchmarks are not tests: nothing here fails. The tests keep the floors
(tests/python/test_parquet_shuffle.py, tests/cpp/pipeline/block_mix_test.cc).
"""
from __future__ import annotations

import argparse
import io
import re
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

import stoker


def distinct_per_batch(values: np.ndarray) -> np.ndarray:
    s = np.sort(values, axis=-1)
    return (np.diff(s, axis=-1) != 0).sum(axis=-1) + 1


def uniform(values: np.ndarray, batch: int, draws: int = 500, seed: int = 0) -> float:
    perms = np.random.default_rng(seed).permuted(np.tile(values, (draws, 1)), axis=1)
    full = len(values) // batch * batch
    return float(distinct_per_batch(perms[:, :full].reshape(draws, -1, batch)).mean())


def write_parquet(d: Path, label: np.ndarray, src_files: int, row_group: int, payload: int) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    d.mkdir(parents=True)
    paths = []
    for f, part in enumerate(np.array_split(np.arange(len(label)), src_files)):
        blob = np.zeros(payload, np.uint8).tobytes()
        table = pa.table({"cls": label[part], "src": np.full(len(part), f, np.int64),
                          "blob": pa.array([blob] * len(part), pa.binary())})
        path = d / f"part-{f}.parquet"
        pq.write_table(table, str(path), row_group_size=row_group)
        paths.append(str(path))
    return paths


def write_tar(d: Path, label: np.ndarray, shards: int) -> str:
    d.mkdir(parents=True)
    for s, part in enumerate(np.array_split(np.arange(len(label)), shards)):
        with tarfile.open(d / f"shard-{s:04d}.tar", "w") as tar:
            for i in part:
                for ext, text in (("cls", str(label[i])), ("src", str(s))):
                    data = text.encode()
                    info = tarfile.TarInfo(f"{i:08d}.{ext}")
                    info.size = len(data)
                    tar.addfile(info, io.BytesIO(data))
    return str(d / f"shard-{{0000..{shards - 1:04d}}}.tar")


def measure(make, batch: int, epochs: int) -> tuple[float, float, float]:
    """Mean distinct labels and sources per full batch over `epochs`, and seconds per epoch."""
    loader = make()
    labels, srcs, seconds = [], [], 0.0
    for e in range(epochs):
        loader.set_epoch(e)
        t = time.perf_counter()
        for b in loader:
            if len(b["cls"]) == batch:
                labels.append(np.asarray(b["cls"]))
                srcs.append(np.asarray(b["src"]))
        seconds += time.perf_counter() - t
    return (float(distinct_per_batch(np.stack(labels)).mean()), float(distinct_per_batch(np.stack(srcs)).mean()),
            seconds / epochs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--classes", type=int, default=16)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--payload", type=int, default=2048, help="bytes of a Parquet row's blob column")
    ap.add_argument("--out", help="also write the table to this file (bench/results/<UTC>-shuffle.md)")
    a = ap.parse_args()
    label = (np.arange(a.rows) * a.classes // a.rows).astype(np.int64)
    fields = {"cls": stoker.scalar(), "src": stoker.scalar()}
    common = dict(batch_size=a.batch, shuffle=True, seed=0, drop_last=False, output="numpy", observe=False)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        parquet = [  # (name, files, row group rows)
            ("1 file, 1 row group", 1, a.rows),
            ("1 file, 8 row groups", 1, a.rows // 8),
            ("1 file, 32 row groups", 1, a.rows // 32),
            ("8 files, 4 row groups each", 8, a.rows // 32),
        ]
        for k, (name, files, group) in enumerate(parquet):
            paths = write_parquet(tmp / f"pq{k}", label, files, group, a.payload)
            src = np.repeat(np.arange(files), [len(p) for p in np.array_split(label, files)])
            order = stoker.Loader(paths, fields=fields, **common).settings["order"].split(";")[0]
            # "blocks of 512 samples (the samples of every 8 consecutive blocks mixed) permuted ..."
            mix = re.search(r"every (\d+) consecutive", order)
            block = re.search(r"blocks of (\d+)", order)
            order = f"auto: blocks of {block[1] if block else 1}, mix {mix[1] if mix else 0}"
            rows.append(("parquet", name, order,
                         *measure(lambda: stoker.Loader(paths, fields=fields, **common), a.batch, a.epochs),
                         uniform(label, a.batch), uniform(src, a.batch)))
        shards = 16
        pattern = write_tar(tmp / "tar", label, shards)
        src = np.repeat(np.arange(shards), [len(p) for p in np.array_split(label, shards)])
        tar_orders = [
            ("shuffle_block=1 (local auto)", dict(shuffle_block=1)),
            ("shuffle_block=16 (remote auto)", dict(shuffle_block=16)),
            ("shuffle_window=4 shards", dict(shuffle_block=1, shuffle_window=4)),
            ("shuffle_buffer=1000 (indexed)", dict(shuffle_buffer=1000)),
            ("stream, buffer 1000 (default)", dict(stream=True, samples_per_epoch=a.rows, drop_last=True)),
            ("stream, buffer 100", dict(stream=True, samples_per_epoch=a.rows, shuffle_buffer=100, drop_last=True)),
        ]
        for name, kw in tar_orders:
            stats = measure(lambda kw=kw: stoker.Loader(pattern, fields=fields, **{**common, **kw}), a.batch, a.epochs)
            rows.append(("tar", f"{shards} shards", name, *stats, uniform(label, a.batch), uniform(src, a.batch)))
        # A mixture of the same shards as two sources (the first half of the labels, the
        # second), each weighted by its size, so a uniform shuffle of all rows is its reference.
        half = shards // 2
        sources = {"low": (pattern.replace(f"0000..{shards - 1:04d}", f"0000..{half - 1:04d}"), 0.5),
                   "high": (pattern.replace(f"0000..{shards - 1:04d}", f"{half:04d}..{shards - 1:04d}"), 0.5)}
        for name, kw in (("stoker.mix 0.5/0.5", {}), ("mix, one_source_per_batch", dict(one_source_per_batch=True))):
            stats = measure(lambda kw=kw: stoker.Loader(stoker.mix(sources, samples_per_epoch=a.rows, **kw),
                                                        fields=fields, **common), a.batch, a.epochs)
            rows.append(("mixture", f"2 sources x {half} shards", name, *stats, uniform(label, a.batch),
                         uniform(src, a.batch)))
    lines = [f"{a.rows} rows sorted by label, {a.classes} labels, batch {a.batch}, {a.epochs} epochs; "
             "distinct per full batch (x: of a uniform permutation's)"]
    head = ("source", "layout", "order", "labels", "x", "sources", "x", "s/epoch")
    widths = (8, 27, 31, 7, 6, 8, 6, 8)
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip())
    for kind, layout, order, lab, srcs, secs, u_lab, u_src in rows:
        cells = (kind, layout, order, f"{lab:.2f}", f"{lab / u_lab:.2f}", f"{srcs:.2f}", f"{srcs / u_src:.2f}",
                 f"{secs:.3f}")
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip())
    lines.append(f"uniform permutation: {uniform(label, a.batch):.2f} labels per batch")
    print("\n".join(lines))
    if a.out:
        import os
        import platform
        import sys
        cmd = " ".join(["python3", "bench/shuffle_quality.py", *sys.argv[1:]])
        Path(a.out).write_text(
            f"# Shuffle quality per source kind\n\n"
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, stoker {stoker.__version__}, "
            f"{platform.machine()}, {os.cpu_count()} CPUs\n\n`{cmd}`\n\n```\n" + "\n".join(lines) + "\n```\n",
            encoding="utf-8")
        print(f"wrote {a.out}")

if __name__ == "__main__":
    main()
