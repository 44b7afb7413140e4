"""The Loader end to end against independent references: Pillow's decode,
numpy's loader, webdataset's writer and reader."""
from __future__ import annotations

import gc
import io

import numpy as np
import pytest
from PIL import Image

import stoker

FIELDS = lambda: {  # noqa: E731 - fresh specs per loader
    "jpg": stoker.image(64, resize="center_crop", layout="HWC"),
    "features.npz": stoker.npz(),
    "cls": stoker.scalar("int64"),
}


def make(vision_dir, **kw):
    d, _ = vision_dir
    kw.setdefault("batch_size", 8)
    return stoker.Loader(str(d / "shard-{000000..000002}.tar"), FIELDS(), output="numpy", **kw)


def keys_of(loader) -> list[str]:
    return [k.split(":")[-1] for b in loader for k in b["__key__"]]


def test_arrays_and_labels_match_numpy_bit_for_bit(vision_dir):
    _, samples = vision_dir
    loader = make(vision_dir, drop_last=False)
    seen = 0
    for batch in loader:
        for i, key in enumerate(batch["__key__"]):
            ref = np.load(io.BytesIO(samples[key.split(":")[-1]]["features.npz"]))
            for name in ("emb", "iou"):
                got = batch["features.npz"][name][i]
                assert got.dtype == ref[name].dtype
                np.testing.assert_array_equal(got, ref[name])
            assert batch["cls"][i] == int(samples[key.split(":")[-1]]["cls"])
            seen += 1
    assert seen == len(samples)


def test_images_match_pillow_exactly(vision_dir):
    """The default image() is torchvision's Resize(64) + CenterCrop(64) on
    Pillow: the same pixels, bit for bit (docs/guides/fields.md, "Pixels")."""
    _, samples = vision_dir
    loader = make(vision_dir)
    batch = next(iter(loader))
    for i, key in enumerate(batch["__key__"]):
        img = Image.open(io.BytesIO(samples[key.split(":")[-1]]["jpg"])).convert("RGB")
        w, h = img.size
        s = 64 / min(w, h)
        img = img.resize((round(w * s), round(h * s)), Image.BILINEAR)
        left, top = (img.size[0] - 64) // 2, (img.size[1] - 64) // 2
        ref = np.asarray(img.crop((left, top, left + 64, top + 64)), np.float32)
        np.testing.assert_array_equal(batch["jpg"][i].astype(np.float32), ref, err_msg=key)


def test_every_sample_exactly_once_and_order_independent_of_threads(vision_dir):
    _, samples = vision_dir
    orders = []
    for threads in (1, 2, 8):
        loader = make(vision_dir, shuffle=True, seed=3, decode_threads=threads, io_depth=threads,
                      drop_last=False)
        loader.set_epoch(5)
        orders.append(keys_of(loader))
    assert orders[0] == orders[1] == orders[2]
    assert sorted(orders[0]) == sorted(samples)
    other = make(vision_dir, shuffle=True, seed=3, drop_last=False)
    other.set_epoch(6)
    assert keys_of(other) != orders[0]


def test_drop_last_and_len(vision_dir):
    loader = make(vision_dir, batch_size=7, drop_last=True)
    assert len(loader) == 60 // 7
    assert sum(1 for _ in loader) == 60 // 7
    assert loader.plan.dropped_samples == 60 % 7


def test_plan_reads_as_its_fields(vision_dir):
    # print(loader.plan) shows the numbers, not <PlanInfo object at 0x...>.
    p = make(vision_dir, batch_size=7, drop_last=True).plan
    assert repr(p) == (f"PlanInfo(dataset_samples=60, rank_samples={p.rank_samples}, batches={60 // 7}, "
                       f"dropped_samples={60 % 7}, padded_samples=0, num_shards=3)")


def test_torch_output_is_zero_copy_and_buffers_are_not_recycled_under_a_live_view(vision_dir):
    import torch

    d, _ = vision_dir
    loader = stoker.Loader(str(d / "shard-*.tar"), FIELDS(), batch_size=4, prefetch=1)
    it = iter(loader)
    first = next(it)
    kept = first["jpg"].clone()
    held = first["jpg"]  # still viewing the first buffer
    del first
    for _ in range(6):  # far more batches than the pool holds
        later = next(it)
        assert isinstance(later["jpg"], torch.Tensor)
    assert torch.equal(held, kept), "a buffer was reused while a tensor still viewed it"


def test_list_of_all_batches_does_not_deadlock(vision_dir):
    batches = list(make(vision_dir, prefetch=1))
    assert len(batches) == -(-60 // 8)  # the short last batch kept (one process)
    assert len({b["__index__"][0] for b in batches}) == len(batches)


def test_state_restore_continues_exactly(vision_dir):
    full = make(vision_dir, shuffle=True, seed=1)
    full.set_epoch(2)
    want = [list(b["__key__"]) for b in full]
    first = make(vision_dir, shuffle=True, seed=1)
    first.set_epoch(2)
    it = iter(first)
    got = [list(next(it)["__key__"]) for _ in range(3)]
    state = first.state_dict()
    del it, first
    resumed = make(vision_dir, shuffle=True, seed=1)
    resumed.load_state_dict(state)
    got += [list(b["__key__"]) for b in resumed]
    assert got == want


def native_threads() -> int:
    import os

    return len(os.listdir(f"/proc/{os.getpid()}/task"))


def test_breaking_out_stops_native_threads_promptly(vision_dir):
    import time

    gc.collect()  # no earlier loader's threads in the count
    base = native_threads()
    loader = make(vision_dir, decode_threads=4, io_depth=4)
    for i, _ in enumerate(loader):
        assert native_threads() >= base + 9  # scheduler + 4 readers + 4 decoders
        if i == 1:
            break
    t0 = time.perf_counter()
    gc.collect()
    assert native_threads() == base  # the loader is alive; its threads are not
    # Promptly: about 0.1 s (docs/guides/shuffling.md, Long runs: "Shutdown"); the bound is for a loaded 2-core machine.
    assert time.perf_counter() - t0 < 5.0
    assert sum(1 for _ in loader) == len(loader)  # and it can run a whole epoch again


def test_native_threads_end_when_loader_is_deleted(vision_dir):
    gc.collect()
    base = native_threads()
    loader = make(vision_dir, decode_threads=4, io_depth=4)
    it = iter(loader)
    next(it)
    assert native_threads() > base
    del it, loader
    gc.collect()
    assert native_threads() == base


def test_webdataset_reads_the_same_shards(vision_dir):
    """webdataset's own reader and stoker agree on keys and members."""
    import webdataset as wds

    d, samples = vision_dir
    ds = wds.WebDataset(str(d / "shard-{000000..000002}.tar"), shardshuffle=False)
    wds_keys = [s["__key__"] for s in ds]
    assert wds_keys == keys_of(make(vision_dir, drop_last=False, batch_size=1))


def test_read_bandwidth_limit_is_respected(vision_dir):
    """Readers never exceed max_read_bytes_per_s (beyond the 0.1 s burst)."""
    import time

    rate = 400_000
    loader = make(vision_dir, max_read_bytes_per_s=rate, drop_last=False)
    start = time.perf_counter()
    assert sum(1 for _ in loader) == len(loader)
    elapsed = time.perf_counter() - start
    read = loader._native.stats()["read"]["bytes"]
    assert elapsed >= (read - rate / 10) / rate * 0.95, (read, elapsed)


def test_memory_does_not_grow_with_epochs(vision_dir):
    """Bounded memory: after a warm-up epoch, five more epochs add no resident memory
    beyond noise (every buffer is pooled; nothing accumulates per batch or epoch)."""
    import psutil

    proc = psutil.Process()
    loader = make(vision_dir, shuffle=True, decode_threads=2)
    for epoch in range(2):
        loader.set_epoch(epoch)
        for _ in loader:
            pass
    warm = proc.memory_info().rss
    for epoch in range(2, 8):
        loader.set_epoch(epoch)
        for _ in loader:
            pass
    grown = proc.memory_info().rss - warm
    assert grown < 4 * 2**20, f"RSS grew {grown / 2**20:.1f} MiB over 6 epochs"


def test_gil_is_released_while_waiting_and_creating(vision_dir):
    """A Python thread keeps running while the loader is created and while
    next() waits on slow (throttled) reads: no call holds the GIL while blocked."""
    import threading
    import time

    ticks = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    try:
        loader = make(vision_dir, max_read_bytes_per_s=300_000, drop_last=False)
        start_ticks, start = ticks[0], time.perf_counter()
        for _ in loader:
            pass
        elapsed = time.perf_counter() - start
    finally:
        stop.set()
        t.join()
    # A held GIL would freeze the spinner for the whole throttled epoch.
    assert elapsed > 0.5
    # The spinner runs at most once a millisecond; on a quiet machine it
    # reaches about half that. A held GIL leaves it only the moments between
    # batches (a few ticks each): 3% of the ideal rate tells the two apart
    # with room for a loaded 2-core machine.
    assert ticks[0] - start_ticks > 0.03 * elapsed / 0.001, (ticks[0] - start_ticks, elapsed)


def test_timeout_names_the_batch_and_what_is_in_flight(vision_dir):
    """A wait longer than `timeout` fails with DeadlineExceeded instead of hanging
    (storage made very slow on purpose); the loader stays usable."""
    loader = make(vision_dir, max_read_bytes_per_s=20_000, timeout=0.3)
    it = iter(loader)
    with pytest.raises(stoker.StokerError) as e:
        next(it)
    assert e.value.code == "DeadlineExceeded"
    assert "batch 0 not ready after 300 ms" in str(e.value)
    del it
    fast = make(vision_dir, timeout=30)
    assert sum(1 for _ in fast) == len(fast)


def test_one_spec_object_may_serve_two_fields(tmp_path):
    import webdataset as wds

    with wds.TarWriter(str(tmp_path / "two.tar")) as sink:
        for i in range(4):
            sink.write({"__key__": f"k{i}", "a.cls": str(i).encode(), "b.cls": str(10 + i).encode()})
    label = stoker.scalar("int64")
    loader = stoker.Loader(str(tmp_path / "two.tar"), {"a.cls": label, "b.cls": label}, batch_size=4, output="numpy")
    batch = next(iter(loader))
    assert list(batch["a.cls"]) == [0, 1, 2, 3] and list(batch["b.cls"]) == [10, 11, 12, 13]


def test_a_shard_list_names_shards_relative_to_itself(vision_dir, tmp_path):
    """A .txt list: an absolute path as it is, a relative one from the list's own directory
    (not the working directory); the loader reads what the paths themselves give."""
    d, _ = vision_dir
    listing = d / "lists" / "train.txt"
    listing.parent.mkdir(exist_ok=True)
    listing.write_text(f"# shards\n../shard-000000.tar\n{d / 'shard-000001.tar'}\n")
    direct = [str(d / "shard-000000.tar"), str(d / "shard-000001.tar")]
    got = [(k, u) for b in stoker.Loader(str(listing), FIELDS(), batch_size=8, output="numpy")
           for k, u in zip(b["__key__"], b["__url__"])]
    want = [(k, u) for b in stoker.Loader(direct, FIELDS(), batch_size=8, output="numpy")
            for k, u in zip(b["__key__"], b["__url__"])]
    assert [k for k, _ in got] == [k for k, _ in want] and got
    assert got[0][1] == str(d / "lists" / ".." / "shard-000000.tar")
