"""Shard indexes loaded as the reads reach them (src/pipeline/shard_index_cache.h,
issue 31): a loader whose shard tables do not fit in index_cache_bytes keeps
only what fits, loads a shard's table when its reads begin and drops the
least recently used, and still delivers every sample of webdataset's own
reading exactly once, in the order a loader holding every table delivers."""
from __future__ import annotations

import os

import numpy as np
import pytest
import webdataset as wds

import stoker

from conftest import write_vision_shards

SHARDS, PER_SHARD, BATCH = 8, 24, 8


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("index-cache")
    write_vision_shards(root, shards=SHARDS, per_shard=PER_SHARD, size=(40, 32), seed=3)
    return root


def pattern(root) -> str:
    return str(root / "shard-{000000..000007}.tar")


def stream(root, epochs=2, **kw) -> tuple[list[list[str]], list[list[int]], dict]:
    ld = stoker.Loader(pattern(root), {"cls": stoker.scalar("int64")}, batch_size=BATCH, output="numpy",
                       decode_threads=2, seed=4, **kw)
    keys, cls = [], []
    for e in range(epochs):
        ld.set_epoch(e)
        for b in ld:
            keys.append([k.split(":")[-1] for k in b["__key__"]])
            cls.append(np.asarray(b["cls"]).tolist())
    settings = ld.settings
    ld.close()
    return keys, cls, settings


def webdataset_samples(root) -> dict[str, int]:
    ds = wds.WebDataset(pattern(root), shardshuffle=False)
    return {s["__key__"]: int(s["cls"]) for s in ds}


def test_tables_past_the_bound_are_dropped_and_loaded_again_in_shard_order(data):
    # One byte: only the table in use is held, so each shard is loaded each epoch.
    keys, cls, settings = stream(data, index_cache_bytes=1)
    whole, whole_cls, whole_settings = stream(data)
    assert keys == whole and cls == whole_cls
    expected = webdataset_samples(data)
    per_epoch = len(keys) // 2
    for e in range(2):
        got = [k for ks in keys[e * per_epoch:(e + 1) * per_epoch] for k in ks]
        assert sorted(got) == sorted(expected)  # exactly once
        got_cls = [c for cs in cls[e * per_epoch:(e + 1) * per_epoch] for c in cs]
        assert got_cls == [expected[k] for k in got]
    index = settings["index"]
    assert index["shards"] == SHARDS and index["max_bytes"] == 1
    # The table in use (one shard's) is all that stays.
    assert 0 < index["held_bytes"] < whole_settings["index"]["held_bytes"] / (SHARDS - 1)
    assert index["loads"] >= 2 * SHARDS - 1  # every shard again in epoch 2 (the held one excepted)
    # With room for every table, each was loaded once, while the loader started.
    assert whole_settings["index"]["max_bytes"] == 0 and whole_settings["index"]["loads"] == 0


def test_a_global_permutation_keeps_every_table_whatever_the_bound(data):
    # Samples permuted over the whole dataset come back to every shard all the
    # time: dropping tables would load one per sample, so all are kept.
    keys, _, settings = stream(data, shuffle=True, shuffle_window=0, index_cache_bytes=1)
    whole, _, whole_settings = stream(data, shuffle=True)
    assert keys == whole
    assert settings["order"] == whole_settings["order"] == "samples permuted over the whole dataset"
    assert settings["index"]["max_bytes"] == 0
    assert settings["index"]["loads"] <= SHARDS  # each at most once


def test_a_shard_changed_after_planning_is_named(data, tmp_path):
    for name in os.listdir(data):
        os.link(data / name, tmp_path / name)
    ld = stoker.Loader(pattern(tmp_path), {"cls": stoker.scalar("int64")}, batch_size=BATCH, output="numpy",
                       decode_threads=1, index_cache_bytes=1)
    # Shard 5 rewritten with fewer samples once the loader has planned from its count.
    victim = tmp_path / "shard-000005.tar"
    part = tmp_path / "rewrite.part"
    with wds.TarWriter(str(part)) as sink:
        for i in range(PER_SHARD // 2):
            sink.write({"__key__": f"x{i:04d}", "cls": b"1"})
    os.replace(part, victim)
    with pytest.raises(RuntimeError, match=r"shard-000005\.tar changed since the loader planned"):
        for _ in ld:
            pass
    ld.close()


def test_tables_that_do_not_fit_make_the_auto_order_windows_of_shards(tmp_path):
    shards = 20
    write_vision_shards(tmp_path, shards=shards, per_shard=6, size=(40, 32), seed=8)
    source = str(tmp_path / "shard-{000000..000019}.tar")
    ld = stoker.Loader(source, {"cls": stoker.scalar("int64")}, batch_size=4, output="numpy", decode_threads=2,
                       shuffle=True, seed=2, index_cache_bytes=1)
    settings = ld.settings
    assert settings["order"].startswith("samples permuted within windows of 8 shards (auto: ")
    assert settings["index"]["max_bytes"] == 1
    assert ld._native.options.shuffle_window == 8
    expected = {s["__key__"]: s["__url__"] for s in wds.WebDataset(source, shardshuffle=False)}
    for epoch in range(2):
        ld.set_epoch(epoch)
        got = [(k.split(":")[-1], u) for b in ld for k, u in zip(b["__key__"], b["__url__"])]
        assert sorted(k for k, _ in got) == sorted(expected)  # exactly once
        # A window's 8 shards are read to their end before the next window's begin.
        first_seen = {}
        for i, (_, url) in enumerate(got):
            first_seen.setdefault(url, i)
        last_seen = {url: i for i, (_, url) in enumerate(got)}
        windows = sorted(first_seen, key=first_seen.get)
        for w in range(0, shards - 8, 8):
            assert max(last_seen[u] for u in windows[w:w + 8]) < min(first_seen[u] for u in windows[w + 8:w + 16])
    ld.close()
