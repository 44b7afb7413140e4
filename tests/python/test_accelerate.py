"""Hugging Face Accelerate as a real client (accelerate==1.15.0, CPU).

``Accelerator.prepare`` wraps only torch DataLoaders (and models, optimizers,
schedulers); any other object it returns as it is (``_prepare_one``), so a
stoker.Loader passes through unwrapped: it shards by rank itself (from the
process group Accelerate starts, else torchrun's environment) and yields
its own batches. Like Lightning, Accelerate's loops never call set_epoch: a
new iter() must begin a new shuffle. Its checkpoints hold the loader through
``register_for_checkpointing`` (state_dict / load_state_dict), so a mid-epoch
resume through ``save_state`` / ``load_state`` must continue exactly. The
reference is the dataset's own keys (each epoch exactly once) and the
uninterrupted epoch of an identical loader."""
from __future__ import annotations

import pytest

import stoker

accelerate = pytest.importorskip("accelerate")


def make(vision_dir) -> stoker.Loader:
    d, _ = vision_dir  # 60 samples in 3 shards
    return stoker.Loader(str(d / "shard-{000000..000002}.tar"), {"cls": stoker.scalar("int64")}, batch_size=8,
                         shuffle=True, seed=4, drop_last=False, timeout=30)


def test_prepare_passes_the_loader_through_and_epochs_reshuffle(vision_dir):
    accelerator = accelerate.Accelerator(cpu=True)
    loader = make(vision_dir)
    prepared = accelerator.prepare(loader)
    assert prepared is loader  # not a DataLoader: Accelerate leaves it as it is
    orders = []
    for _ in range(3):  # Accelerate's own loop shape: no set_epoch
        keys = [k for batch in prepared for k in batch["__key__"]]
        assert sorted(keys) == sorted(set(keys)) and len(keys) == 60, "an epoch not exactly once"
        orders.append(keys)
    assert loader.epoch == 2
    assert orders[0] != orders[1] and orders[1] != orders[2] and orders[0] != orders[2]
    assert sorted(orders[0]) == sorted(orders[1]) == sorted(orders[2])


def test_mid_epoch_resume_through_save_state(vision_dir, tmp_path):
    want = [k for batch in make(vision_dir) for k in batch["__key__"]]

    accelerator = accelerate.Accelerator(cpu=True)
    loader = accelerator.prepare(make(vision_dir))
    accelerator.register_for_checkpointing(loader)
    it = iter(loader)
    first = [k for _ in range(3) for k in next(it)["__key__"]]
    accelerator.save_state(str(tmp_path / "ckpt"))
    del it

    resumed_accelerator = accelerate.Accelerator(cpu=True)
    resumed = resumed_accelerator.prepare(make(vision_dir))
    resumed_accelerator.register_for_checkpointing(resumed)
    resumed_accelerator.load_state(str(tmp_path / "ckpt"))
    rest = [k for batch in resumed for k in batch["__key__"]]
    assert first + rest == want
    # The epoch after the resumed one is a new shuffle, each sample once.
    after = [k for batch in resumed for k in batch["__key__"]]
    assert sorted(after) == sorted(want) and after != want
