"""The V images as Parquet, written the two ways users have them:

    hub_parquet    by Hugging Face `datasets` itself: Dataset.from_dict({"image": [{bytes,
                   path}], "label": ...}).cast_column("image", Image()).to_parquet(...) — the
                   Hub's layout, an `image` struct {bytes, path} with the bytes embedded
    arrow_parquet  by pyarrow directly: a binary `jpg` column and an int64 `cls` column

Both in 12 files, in the tar shards' order (file i holds shard i's samples), made once
under <V dir>/peers/ and reused.
"""
from __future__ import annotations

import os
from pathlib import Path

from .base import VData, build_once

FILES = 12


def offline_hf_env(v: VData) -> None:
    """`datasets` keeps its Arrow cache beside the data and never asks the Hub."""
    os.environ.setdefault("HF_DATASETS_CACHE", str(v.dir / "peers" / "hf-cache"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import datasets

    datasets.disable_progress_bars()


def _split(n: int, parts: int) -> list[range]:
    """parts consecutive ranges covering 0..n (sizes differ by one at most)."""
    bounds = [n * i // parts for i in range(parts + 1)]
    return [range(bounds[i], bounds[i + 1]) for i in range(parts)]


def hub_parquet(v: VData) -> list[Path]:
    d = v.peer_dir("parquet-datasets")

    def write(d: Path) -> str:
        offline_hf_env(v)
        import datasets

        # The bytes in the file, as the Hub serves them (push_to_hub embeds them; a Dataset
        # built from bare paths would write {bytes: None, path} and read the loose files).
        images = [{"bytes": Path(p).read_bytes(), "path": Path(p).name} for p, _ in v.loose]
        ds = datasets.Dataset.from_dict({"image": images, "label": [c for _, c in v.loose]})
        ds = ds.cast_column("image", datasets.Image())
        for i, rows in enumerate(_split(len(v.loose), FILES)):
            ds.select(rows).to_parquet(str(d / f"train-{i:05d}-of-{FILES:05d}.parquet"))
        return (f"datasets {datasets.__version__}: Dataset.from_dict({{bytes, path}}, labels).cast_column('image', "
                f"Image()).select(rows).to_parquet(), {FILES} files, the bytes embedded as on the Hub")

    v.made["parquet-datasets"] = build_once(d, write)
    return sorted(d.glob("train-*.parquet"))


def arrow_parquet(v: VData) -> list[Path]:
    d = v.peer_dir("parquet-pyarrow")

    def write(d: Path) -> str:
        import pyarrow as pa
        import pyarrow.parquet as pq

        for i, rows in enumerate(_split(len(v.loose), FILES)):
            jpg = [Path(v.loose[r][0]).read_bytes() for r in rows]
            cls = [v.loose[r][1] for r in rows]
            table = pa.table({"jpg": pa.array(jpg, pa.binary()), "cls": pa.array(cls, pa.int64())})
            pq.write_table(table, d / f"part-{i:05d}.parquet", row_group_size=64)
        return f"pyarrow {pa.__version__}: pq.write_table(jpg binary, cls int64), row groups of 64, {FILES} files"

    v.made["parquet-pyarrow"] = build_once(d, write)
    return sorted(d.glob("part-*.parquet"))
