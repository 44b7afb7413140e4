"""Sources and batches of stoker.mix tests (test_mixture.py, test_mixture_stream.py):
tar sources of samples {bin} with webdataset's reading of them as the reference,
and a mixed batch's (source, key, bytes) rows."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def write_tar_source(directory: Path, prefix: str, shards: int, per_shard: int, seed: int) -> dict:
    """Tar shards of samples {bin}; returns key -> bytes as webdataset's reader reads them back."""
    import webdataset as wds

    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for s in range(shards):
        with wds.TarWriter(str(directory / f"{prefix}-{s:02d}.tar")) as sink:
            for i in range(per_shard):
                key = f"{prefix}{s:02d}_{i:04d}"
                sink.write({"__key__": key, "bin": rng.integers(0, 256, int(rng.integers(8, 64)), np.uint8).tobytes()})
    ref = {}
    for sample in wds.WebDataset(str(directory / f"{prefix}-{{00..{shards - 1:02d}}}.tar"), shardshuffle=False):
        ref[sample["__key__"]] = sample["bin"]
    return ref


def rows(batch):
    """(source, key, bytes) of each sample of a batch."""
    data, lengths = batch["bin"], batch["bin.len"]
    return [(s, k, bytes(data[i, : int(lengths[i])])) for i, (s, k) in enumerate(zip(batch["__source__"],
                                                                                      batch["__key__"]))]


def drain(loader, epoch=None):
    """The rows of an epoch (set_epoch(epoch) first where given)."""
    if epoch is not None:
        loader.set_epoch(epoch)
    out = []
    for batch in loader:
        out.extend(rows(batch))
    return out
