"""shuffle=True over Parquet mixes rows whatever the files' row groups (issue 44).

A label-sorted table (as a `datasets` export of a class-sorted folder is)
written by pyarrow with one row group, with several, and over two files, read
with shuffle=True. Checked against independent references:
  (a) epochs differ, and none is file order;
  (b) the mean number of distinct labels per batch is at least 0.8x that of a
      uniform permutation, whose figure numpy computes here by drawing
      permutations;
  (c) every row exactly once per epoch, equal to what pyarrow reads.
Before the fix, a file of one row group came out in file order every epoch:
batches of one label, the same each epoch.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import stoker

ROWS, CLASSES, BATCH = 400, 8, 32
FIELDS = {"idx": stoker.scalar(), "label": stoker.scalar(), "text": stoker.text(64)}
# Layouts: (rows per file, row_group_size). A run of the mix holds up to 8
# row-group blocks, so each of these mixes as a uniform permutation would.
LAYOUTS = {
    "one_row_group": ([ROWS], ROWS),
    "eight_row_groups": ([ROWS], ROWS // 8),
    "two_files": ([ROWS // 2, ROWS // 2], ROWS // 8),
}


def write_sorted(directory, rows_per_file, row_group_size):
    """Label-sorted rows: label = idx * CLASSES // ROWS, across the files in order."""
    paths, start = [], 0
    for f, n in enumerate(rows_per_file):
        idx = np.arange(start, start + n, dtype=np.int64)
        table = pa.table({"idx": idx, "label": idx * CLASSES // ROWS,
                          "text": pa.array(np.char.add("row ", idx.astype(str)).tolist())})
        path = directory / f"sorted-{f}.parquet"
        pq.write_table(table, str(path), row_group_size=row_group_size)
        paths.append(str(path))
        start += n
    return paths


def distinct_per_batch(labels: np.ndarray) -> np.ndarray:
    """Distinct labels of each row of `labels` (..., batch)."""
    s = np.sort(labels, axis=-1)
    return (np.diff(s, axis=-1) != 0).sum(axis=-1) + 1


def uniform_expectation(labels: np.ndarray, batch: int, draws: int = 2000, seed: int = 0) -> float:
    """Mean distinct labels per full batch under uniform permutations of `labels`."""
    rng = np.random.default_rng(seed)
    perms = rng.permuted(np.tile(labels, (draws, 1)), axis=1)
    full = len(labels) // batch * batch
    return float(distinct_per_batch(perms[:, :full].reshape(draws, -1, batch)).mean())


def epoch(loader, e):
    """One epoch as arrays (idx, label, text), in delivery order."""
    loader.set_epoch(e)
    idx, label, text = [], [], []
    for b in loader:
        idx.append(np.asarray(b["idx"]))
        label.append(np.asarray(b["label"]))
        text.extend(b["text"])
    return np.concatenate(idx), np.concatenate(label), np.asarray(text, dtype=object)


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_shuffle_mixes_label_sorted_rows_like_a_uniform_permutation(tmp_path, layout):
    rows_per_file, group = LAYOUTS[layout]
    paths = write_sorted(tmp_path, rows_per_file, group)
    ref = pq.read_table(paths)  # pyarrow's own read: the rows every epoch must hold
    assert pq.ParquetFile(paths[0]).metadata.num_row_groups == rows_per_file[0] // group
    loader = stoker.Loader(paths, fields=FIELDS, batch_size=BATCH, shuffle=True, seed=11, drop_last=False,
                           output="numpy")
    orders, distinct = [], []
    for e in range(3):
        idx, label, text = epoch(loader, e)
        # (c) every row once, each field the row's own, as pyarrow reads it
        by_idx = np.argsort(idx, kind="stable")
        np.testing.assert_array_equal(idx[by_idx], ref["idx"].to_numpy())
        np.testing.assert_array_equal(label[by_idx], ref["label"].to_numpy())
        assert text[by_idx].tolist() == ref["text"].to_pylist()
        orders.append(idx)
        full = len(label) // BATCH * BATCH
        distinct.append(distinct_per_batch(label[:full].reshape(-1, BATCH)))
    # (a) epochs differ, none in file order
    assert not np.array_equal(orders[0], orders[1]) and not np.array_equal(orders[1], orders[2])
    assert not any(np.array_equal(o, np.sort(o)) for o in orders)
    # (b) distinct labels per batch against a uniform permutation's
    uniform = uniform_expectation(ref["label"].to_numpy(), BATCH)
    got = float(np.concatenate(distinct).mean())
    assert got >= 0.8 * uniform, f"{layout}: {got:.2f} distinct labels per batch, uniform {uniform:.2f}"
    # Every block in one run of the mix: settings say nothing is left to the layout.
    assert "write the rows shuffled" not in loader.settings["order"]


def test_the_order_says_where_the_layout_limits_the_mix(tmp_path):
    # 32 row groups of 25 rows: a batch draws from 8 of them, so a sorted file
    # mixes about 8 runs a batch; the order says so and how to fix it.
    paths = write_sorted(tmp_path, [800], 25)
    loader = stoker.Loader(paths, fields=FIELDS, batch_size=BATCH, shuffle=True, seed=1, output="numpy")
    order = loader.settings["order"]
    assert "8 blocks of row groups" in order and "write the rows shuffled" in order, order


def test_ranks_get_equal_batches_and_every_row_once(tmp_path):
    paths = write_sorted(tmp_path, [ROWS], ROWS)
    parts, batches = [], []
    for rank in range(3):
        loader = stoker.Loader(paths, fields=FIELDS, batch_size=BATCH, shuffle=True, seed=2, rank=rank,
                               world_size=3, partition="exact", output="numpy")
        idx, _, _ = epoch(loader, 1)
        parts.append(idx)
        batches.append(len(loader))
    assert len(set(batches)) == 1
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(ROWS))


def test_resume_mid_epoch_continues_the_mixed_order(tmp_path):
    paths = write_sorted(tmp_path, [ROWS], ROWS // 8)

    def make():
        return stoker.Loader(paths, fields=FIELDS, batch_size=BATCH, shuffle=True, seed=9, drop_last=False,
                             output="numpy")

    full, _, _ = epoch(make(), 2)
    first = make()
    first.set_epoch(2)
    it = iter(first)
    head = np.concatenate([np.asarray(next(it)["idx"]) for _ in range(4)])
    state = first.state_dict()
    del it, first
    rest = make()
    rest.load_state_dict(state)
    tail = np.concatenate([np.asarray(b["idx"]) for b in rest])
    np.testing.assert_array_equal(np.concatenate([head, tail]), full)


def test_a_memory_budget_lowers_the_mix_and_the_order_says_so(tmp_path):
    # Row groups of 256 rows of 16 KiB each (4 MiB decoded): the auto mix of 8
    # holds 9 more decoded than the reads need; a budget that cannot hold
    # them gets fewer rather than a refusal, still every row once.
    rng = np.random.default_rng(0)
    n = 2048
    blobs = [bytes(b) for b in rng.integers(0, 256, (n, 16384), dtype=np.uint8)]
    path = tmp_path / "big.parquet"
    pq.write_table(pa.table({"idx": np.arange(n), "blob": pa.array(blobs, pa.binary())}), str(path),
                   row_group_size=256)
    kw = dict(fields={"idx": stoker.scalar()}, batch_size=64, shuffle=True, drop_last=False, output="numpy",
              io_depth=2, decode_threads=1, prefetch=1)
    wide = stoker.Loader([str(path)], **kw)
    assert "every 8 consecutive blocks mixed" in wide.settings["order"]
    tight = stoker.Loader([str(path)], memory_budget=60 << 20, **kw)
    order = tight.settings["order"]
    assert "every 8 consecutive" not in order and "write the rows shuffled" in order, order
    idx = np.concatenate([np.asarray(b["idx"]) for b in tight])
    np.testing.assert_array_equal(np.sort(idx), np.arange(n))


def test_a_layout_that_limits_the_mix_is_said_once_with_the_fix(tmp_path, caplog):
    """More row groups than a run of the mix holds: the loader warns at
    construction, naming the fix; shuffle_mix=0 keeps rows in file order
    and says that too."""
    import logging

    path = tmp_path / "many.parquet"
    n = 32 * 16
    pq.write_table(pa.table({"label": np.repeat(np.arange(16), n // 16).astype(np.int64)}), path, row_group_size=16)
    with caplog.at_level(logging.WARNING, logger="stoker"):
        stoker.Loader(str(path), {"label": stoker.scalar("int64")}, batch_size=16, shuffle=True, output="numpy")
        stoker.Loader(str(path), {"label": stoker.scalar("int64")}, batch_size=16, shuffle=True, output="numpy",
                      shuffle_mix=0)
    lines = [r.getMessage() for r in caplog.records if "mixes these Parquet rows only in part" in r.getMessage()]
    assert len(lines) == 2, lines
    assert "write the rows shuffled" in lines[0] and "blocks of row groups" in lines[0], lines[0]
    assert "shuffle_mix 0" in lines[1], lines[1]
