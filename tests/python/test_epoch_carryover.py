"""The next epoch prepared while one ends (src/pipeline/epoch_run.h, "Epoch
boundaries"). Every check compares with a fresh loader at the same epoch, the
independent reference for determinism; the no-stall check waits for the
engine's own gauge (batches ready before the request), not for a clock."""
from __future__ import annotations

import time

import numpy as np
import pytest

import stoker
from conftest import jpeg_bytes, natural_image, wait_ready

FIELDS = lambda: {  # noqa: E731 - fresh specs per loader; random crops make every epoch's pixels differ
    "jpg": stoker.image(48, resize="random_resized_crop", random_hflip=True, layout="HWC"),
    "features.npz": stoker.npz(),
    "cls": stoker.scalar("int64"),
}


def make(vision_dir, **kw):
    d, _ = vision_dir
    kw.setdefault("batch_size", 8)
    kw.setdefault("shuffle", True)
    kw.setdefault("seed", 11)
    kw.setdefault("drop_last", True)  # whole batches: a carried-over batch is a full one
    return stoker.Loader(str(d / "shard-{000000..000002}.tar"), FIELDS(), output="numpy", **kw)


def copied(v):
    """A batch's arrays are views of a pooled buffer: copies let it go back."""
    if isinstance(v, dict):
        return {k: copied(x) for k, x in v.items()}
    return v.copy() if isinstance(v, np.ndarray) else v


def epoch_batches(loader, epoch) -> list[dict]:
    loader.set_epoch(epoch)
    return [copied(b) for b in loader]


def fresh(vision_dir, epoch, **kw) -> list[dict]:
    loader = make(vision_dir, **kw)
    try:
        return epoch_batches(loader, epoch)
    finally:
        loader.close()


def assert_same(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g["__key__"] == w["__key__"]
        np.testing.assert_array_equal(g["jpg"], w["jpg"])
        np.testing.assert_array_equal(g["cls"], w["cls"])
        for name in w["features.npz"]:
            np.testing.assert_array_equal(g["features.npz"][name], w["features.npz"][name])


def test_carried_over_epoch_equals_a_fresh_loader(vision_dir):
    loader = make(vision_dir, prefetch=2)
    first = epoch_batches(loader, 0)
    assert wait_ready(loader)["batches_ready"] >= 1  # epoch 1 began while nobody asked
    second = epoch_batches(loader, 1)
    assert loader._native.stats()["batches_carried"] >= 1
    third = epoch_batches(loader, 2)  # carried over again, from a carried-over epoch
    loader.close()
    assert_same(second, fresh(vision_dir, 1))
    assert_same(third, fresh(vision_dir, 2))
    assert [b["__key__"] for b in first] != [b["__key__"] for b in second]  # shuffled: epochs differ
    keys = sorted(k for b in second for k in b["__key__"])
    assert len(keys) == len(set(keys)) == 56  # exactly once (60 samples, batch 8, drop_last)


def test_another_epoch_drops_the_prepared_work(vision_dir):
    loader = make(vision_dir)
    epoch_batches(loader, 0)
    wait_ready(loader)
    carried = loader._native.stats()["batches_carried"]
    got5 = epoch_batches(loader, 5)
    assert loader._native.stats()["batches_carried"] == carried  # epoch 1's batches were not used
    wait_ready(loader)
    again5 = epoch_batches(loader, 5)  # the same epoch again: also a fresh start
    loader.close()
    want5 = fresh(vision_dir, 5)
    assert_same(got5, want5)
    assert_same(again5, want5)


def test_carry_over_mid_epoch_break_and_resume(vision_dir):
    loader = make(vision_dir)
    loader.set_epoch(0)
    for i, _ in enumerate(loader):  # break out early: the rest of epoch 0 is not delivered
        if i == 2:
            break
    assert_same(epoch_batches(loader, 1), fresh(vision_dir, 1))
    # State at an epoch's end with the next one being prepared resumes exactly.
    wait_ready(loader)
    loader.set_epoch(2)
    state = loader.state_dict()
    loader.close()
    other = make(vision_dir)
    other.load_state_dict(state)
    other.set_epoch(2)
    assert_same([copied(b) for b in other], fresh(vision_dir, 2))
    other.close()


def test_close_while_preparing_returns_promptly(vision_dir):
    loader = make(vision_dir, batch_size=4, prefetch=4)
    epoch_batches(loader, 0)
    t = time.monotonic()
    loader.close()
    assert time.monotonic() - t < 10


@pytest.fixture(scope="module")
def big_images(tmp_path_factory):
    """Large JPEGs, so that one batch takes a decode time far above the
    consumer's own overhead, even on a loaded 2-core machine."""
    import webdataset as wds

    d = tmp_path_factory.mktemp("big")
    rng = np.random.default_rng(5)
    imgs = [jpeg_bytes(natural_image(rng, 1600, 1200)) for _ in range(4)]
    with wds.TarWriter(str(d / "big.tar")) as sink:
        for i in range(24):
            sink.write({"__key__": f"b{i:03d}", "jpg": imgs[i % 4], "cls": str(i).encode()})
    return d / "big.tar"


def test_slow_consumer_never_waits_at_an_epoch_start(big_images):
    loader = stoker.Loader(str(big_images), {"jpg": stoker.image(512, resize="longest"),
                                             "cls": stoker.scalar("int64")},
                           batch_size=4, prefetch=2, output="numpy", observe=True, log_every=None)
    loader.set_epoch(0)
    for _ in loader:
        pass
    s = wait_ready(loader)
    assert s["batches_ready"] >= 1
    decode_per_batch = s["decode"]["busy_s"] / max(1, s["decode"]["items"]) * 4 / max(1, s["decode_threads"])
    loader.set_epoch(1)
    it = iter(loader)
    # The next epoch's first batch is ready before it is asked for: the
    # request waits for no read or decode, whatever the machine's load.
    assert loader._native.stats()["batches_ready"] >= 1
    t = time.perf_counter()
    next(it)
    wait = time.perf_counter() - t
    assert loader._native.stats()["batches_carried"] >= 1
    # The hand-over alone: far under what decoding a batch takes (tens of
    # ms here); 5x that is room for a loaded machine and still no decode.
    assert wait < 5 * decode_per_batch, (wait, decode_per_batch)
    for _ in it:
        pass
    loader.close()
