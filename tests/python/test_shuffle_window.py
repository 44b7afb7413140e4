"""shuffle_window=K (src/pipeline/planner.h), through the real loader over
real tar shards: every sample exactly once per epoch, K shards at a time (a
shard's samples all delivered before the next window's shards begin), the
same order for the same seed, a new one each epoch, and the same order cut
among any number of ranks."""
from __future__ import annotations

import tarfile
from io import BytesIO

import numpy as np
import pytest

import stoker

SIZES = [10, 7, 13, 5, 9, 12, 4]  # samples per shard, uneven
TOTAL = sum(SIZES)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Tar shards whose sample n has member "id" = n, written by Python's tarfile."""
    root = tmp_path_factory.mktemp("window")
    paths, n = [], 0
    for s, size in enumerate(SIZES):
        path = root / f"shard-{s:02d}.tar"
        with tarfile.open(path, "w") as tar:
            for _ in range(size):
                data = str(n).encode()
                info = tarfile.TarInfo(f"sample{n:04d}.id")
                info.size = len(data)
                tar.addfile(info, BytesIO(data))
                n += 1
        paths.append(str(path))
    return paths


def shard_of(sample: int) -> int:
    return int(np.searchsorted(np.cumsum(SIZES), sample, side="right"))


def order(paths, epoch=0, world_size=1, rank=0, seed=3, **kw):
    ld = stoker.Loader(paths, {"id": stoker.scalar("int64")}, batch_size=4, shuffle=True, seed=seed,
                       partition="exact", rank=rank, world_size=world_size, output="numpy", decode_threads=2,
                       observe=False, **kw)
    try:
        ld.set_epoch(epoch)
        return [int(i) for b in ld for i in np.asarray(b["id"])]
    finally:
        ld.close()


def most_shards_open(ids) -> int:
    """Shards begun and not finished, at most, walking the order."""
    left, open_, most = list(SIZES), set(), 0
    for i in ids:
        s = shard_of(i)
        open_.add(s)
        most = max(most, len(open_))
        left[s] -= 1
        if left[s] == 0:
            open_.discard(s)
    return most


def test_every_sample_once_per_epoch_two_shards_at_a_time(shards):
    for epoch in (0, 1):
        ids = order(shards, epoch, shuffle_window=2)
        assert sorted(ids) == list(range(TOTAL)), f"epoch {epoch}: each sample exactly once"
        assert most_shards_open(ids) <= 2, "a window's shards are read to their end before the next begin"
    assert order(shards, 0, shuffle_window=2) != order(shards, 1, shuffle_window=2), "a new order each epoch"
    # The whole-dataset permutation has many shards open at once.
    assert most_shards_open(order(shards, 0, shuffle_window=0)) > 2


def test_same_seed_same_order_on_any_world_size(shards):
    one = order(shards, 1, shuffle_window=2)
    assert order(shards, 1, shuffle_window=2) == one
    assert order(shards, 1, shuffle_window=2, seed=4) != one
    # Two ranks cut the same order: their parts, in rank order, are the world-1 order.
    two = [order(shards, 1, world_size=2, rank=r, shuffle_window=2) for r in range(2)]
    assert two[0] + two[1] == one
    assert sorted(two[0] + two[1]) == list(range(TOTAL))


def test_the_option_is_shown_and_checked(shards):
    ld = stoker.Loader(shards, {"id": stoker.scalar("int64")}, batch_size=4, shuffle=True, shuffle_window=3,
                       observe=False)
    assert ld._native.options.shuffle_window == 3
    ld.close()
    ld = stoker.Loader(shards, {"id": stoker.scalar("int64")}, batch_size=4, shuffle=True, observe=False)
    assert ld._native.options.shuffle_window == 0  # auto: the index tables fit, so the whole dataset
    assert ld.settings["order"] == "samples permuted over the whole dataset"
    ld.close()
    with pytest.raises(ValueError, match="shuffle_window"):
        order(shards, shuffle_window=-2)


def test_a_state_resumes_its_window_and_refuses_another(shards):
    def loader(window):
        return stoker.Loader(shards, {"id": stoker.scalar("int64")}, batch_size=4, shuffle=True, seed=3,
                             shuffle_window=window, partition="exact", output="numpy", observe=False)

    whole = order(shards, shuffle_window=2)
    ld = loader(2)
    it = iter(ld)
    head = [int(i) for _ in range(3) for i in np.asarray(next(it)["id"])]
    state = ld.state_dict()
    ld.close()
    again = loader(2)
    again.load_state_dict(state)
    assert head + [int(i) for b in again for i in np.asarray(b["id"])] == whole
    again.close()
    other = loader(3)
    with pytest.raises(ValueError, match="saved with shuffle_window=2, this loader has 3"):
        other.load_state_dict(state)
    other.close()
