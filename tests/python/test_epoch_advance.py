"""Epochs advance by themselves (issue 19): loops that never call set_epoch
(Lightning, Accelerate, HF Trainer, most hand-written ones) get a new shuffle
on every iter() after an epoch was used up, as torch's DataLoader(shuffle=True)
does. Every order is checked against a fresh loader told set_epoch(e), the
independent reference; the Lightning tests drive its real Trainer."""
from __future__ import annotations

import numpy as np
import pytest

import stoker
from conftest import lightning_run, wait_ready

SAMPLES = 56  # 60 samples in batches of 8, drop_last


def make(vision_dir, output="numpy", **kw):
    d, _ = vision_dir
    kw.setdefault("drop_last", True)  # whole batches: the epochs' arithmetic below counts 7 of 8
    return stoker.Loader(str(d / "shard-{000000..000002}.tar"), {"cls": stoker.scalar("int64")},
                         batch_size=8, shuffle=True, seed=3, output=output, observe=False, **kw)


def keys(batches) -> list[str]:
    return [k for b in batches for k in b["__key__"]]


def reference(vision_dir, epoch) -> list[str]:
    loader = make(vision_dir)
    loader.set_epoch(epoch)
    try:
        return keys(loader)
    finally:
        loader.close()


@pytest.fixture(scope="module")
def orders(vision_dir) -> list[list[str]]:
    return [reference(vision_dir, e) for e in range(4)]


def test_plain_loop_gives_a_new_epoch_each_time(vision_dir, orders):
    loader = make(vision_dir)
    got = [keys(loader)]
    wait_ready(loader)  # epoch 1 is prepared while nobody asks ...
    carried = loader._native.stats()["batches_carried"]
    got += [keys(loader), keys(loader)]
    assert loader._native.stats()["batches_carried"] > carried  # ... and the advance kept it: no stall
    assert loader.epoch == 2
    loader.close()
    for e, order in enumerate(got):
        assert len(order) == len(set(order)) == SAMPLES  # each exactly once
        assert order == orders[e]
    assert got[0] != got[1] != got[2] != got[0]


def test_set_epoch_still_selects_the_epoch(vision_dir, orders):
    loader = make(vision_dir)
    keys(loader), keys(loader)  # epochs 0 and 1 by themselves
    loader.set_epoch(0)
    assert keys(loader) == orders[0]
    assert keys(loader) == orders[1]  # advances from the chosen epoch
    loader.set_epoch(1)  # the epoch just used up, chosen again: replayed, not advanced
    assert keys(loader) == orders[1]
    # The explicit loop is unchanged.
    for e in range(3):
        loader.set_epoch(e)
        assert keys(loader) == orders[e]
    loader.close()


def test_a_broken_off_epoch_restarts_from_its_start(vision_dir, orders):
    loader = make(vision_dir)
    keys(loader)
    for i, _ in enumerate(loader):  # epoch 1, broken off: not used up
        if i == 2:
            break
    assert loader.epoch == 1
    assert keys(loader) == orders[1]
    assert keys(loader) == orders[2]
    loader.close()


def test_state_mid_epoch_after_an_advance_resumes_exactly(vision_dir, orders):
    loader = make(vision_dir)
    keys(loader)
    it = iter(loader)
    head = keys([next(it) for _ in range(3)])
    state = loader.state_dict()
    assert (state["stoker"]["epoch"], state["stoker"]["next_batch"]) == (1, 3)
    loader.close()
    other = make(vision_dir)
    other.load_state_dict(state)
    rest = keys(other)
    assert head + rest == orders[1]
    assert keys(other) == orders[2]  # the resumed epoch was used up: the next one follows
    other.close()


def test_state_at_an_epochs_end_begins_the_next(vision_dir, orders):
    loader = make(vision_dir)
    keys(loader)
    state = loader.state_dict()
    loader.close()
    plain = make(vision_dir)
    plain.load_state_dict(state)
    assert keys(plain) == orders[1]
    plain.close()
    explicit = make(vision_dir)  # set_epoch(loader.epoch) keeps the resume: epoch 0 has nothing left
    explicit.load_state_dict(state)
    got = []
    for e in range(explicit.epoch, 2):
        explicit.set_epoch(e)
        got.append(keys(explicit))
    assert got == [[], orders[1]]
    explicit.close()


def test_token_loader_never_repeats_or_empties_an_epoch_silently(tmp_path):
    """A TokenLoader's run is megatron's, sized by num_samples: a broken-off
    iteration continues, and a pass past the run's end raises with the fix
    instead of an empty epoch or a replay (test_token_contracts.py has the rest)."""
    rng = np.random.default_rng(0)
    stoker.write_megatron(tmp_path / "c", [rng.integers(0, 1000, size=int(rng.integers(5, 200))) for _ in range(60)])
    loader = stoker.TokenLoader(str(tmp_path / "c"), seq_len=32, batch_size=4, seed=1, num_samples=80,
                                cache_dir=tmp_path / "idx", output="numpy", observe=False)
    whole = [b["__index__"].copy() for b in loader]
    loader.set_epoch(0)
    head = []
    for b in loader:  # broken off: a new iter() continues, as megatron's sampler would
        head.append(b["__index__"].copy())
        if len(head) == 3:
            break
    tail = [b["__index__"].copy() for b in loader]
    np.testing.assert_array_equal(np.concatenate(head + tail), np.concatenate(whole))
    with pytest.raises(stoker.StokerError, match="num_samples"):
        list(loader)  # no silent empty epoch
    with pytest.raises(stoker.StokerError):
        loader.set_epoch(1)  # the run has one epoch: no silent replay
    loader.close()


# -- through PyTorch Lightning's real Trainer ----------------------------------
def test_lightning_epochs_differ(vision_dir, orders):
    loader = make(vision_dir, output="torch")
    steps = lightning_run(loader, max_epochs=3)
    loader.close()
    per_epoch = [[k for e, ks in steps if e == epoch for k in ks] for epoch in range(3)]
    assert per_epoch == orders[:3]  # each exactly once, each a new shuffle


def test_lightning_mid_epoch_resume(vision_dir, tmp_path):
    ckpt = tmp_path / "mid.ckpt"
    first = make(vision_dir, output="torch")
    whole = lightning_run(first, max_epochs=3, save_at=10, save_to=ckpt)  # step 10: batch 3 of epoch 1
    first.close()
    second = make(vision_dir, output="torch")
    resumed = lightning_run(second, max_epochs=3, ckpt_path=str(ckpt))
    second.close()
    assert len(whole) == 21
    assert resumed == whole[10:]
