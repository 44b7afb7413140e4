"""One epoch cursor (issue 41): set_epoch, auto-advance and resume are written once
(python/stoker/epochs.py) and mean the same in every loader. The cursor's rules alone,
then the same calls on a Loader, a PackedLoader and a TokenLoader, each epoch checked
against a fresh loader told set_epoch(e) (the independent reference of epoch e's batches).
RayLoader's cursor is driven by test_ray_workers.py against a local loader."""
from __future__ import annotations

import numpy as np
import pytest

import stoker
from stoker.epochs import NEXT, RESUME, START, EpochCursor

from test_tokens import megatron_corpus


# -- the cursor's rules --------------------------------------------------------------------

def test_iterations_without_set_epoch_advance_once_an_epoch_is_used_up():
    cursor = EpochCursor()
    assert cursor.starts and cursor.begin(lambda: True) == START and cursor.epoch == 0  # the first is epoch 0
    assert cursor.begin(lambda: True) == NEXT and cursor.epoch == 1
    assert cursor.begin(lambda: False) == START and cursor.epoch == 1  # broken off: again from its start
    continuing = EpochCursor(continues=True)
    continuing.begin(lambda: False)
    assert continuing.begin(lambda: False) == RESUME and continuing.epoch == 0  # broken off: its rest
    assert continuing.begin(lambda: True) == NEXT and continuing.epoch == 1


def test_set_epoch_decides_over_the_advance_and_restarts_the_epoch_it_names():
    for continues in (False, True):
        cursor = EpochCursor(continues=continues)
        cursor.begin(lambda: True)
        asked = []
        assert cursor.set_epoch(0) and cursor.starts  # the epoch just used up, named again
        assert cursor.begin(lambda: asked.append(1) or True) == START and cursor.epoch == 0
        assert asked == []  # a set_epoch decides: whether the epoch was used up is not asked
        assert not cursor.starts
        cursor.set_epoch(5)
        assert cursor.epoch == 5 and cursor.begin(lambda: False) == START


def test_a_restored_epoch_is_resumed_and_set_epoch_of_it_keeps_the_resume():
    for continues in (False, True):
        cursor = EpochCursor(continues=continues)
        cursor.restored(3)
        assert cursor.resuming and not cursor.starts and cursor.epoch == 3
        assert not cursor.set_epoch(3)  # the loop `for e in range(loader.epoch, n): set_epoch(e)` resumes
        assert not cursor.set_epoch(3) and cursor.resuming
        assert cursor.begin(lambda: False) == RESUME and cursor.epoch == 3 and not cursor.resuming
        cursor.restored(3)
        assert cursor.set_epoch(2) and cursor.set_epoch(3)  # another epoch named first: the resume is given up
        assert cursor.begin(lambda: False) == START
        cursor.restored(3)  # a state saved at the end of epoch 3
        assert cursor.begin(lambda: True) == NEXT and cursor.epoch == 4


# -- the loaders ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sft(tmp_path_factory):
    root = tmp_path_factory.mktemp("epochs")
    megatron_corpus(root / "sft", 200, 1000, np.uint16, 3, longest=64)
    megatron_corpus(root / "tok", 120, 30000, np.uint16, 4, longest=300)
    return root


def vision(vision_dir):
    d, _ = vision_dir
    return lambda: stoker.Loader(str(d / "shard-{000000..000002}.tar"), {"cls": stoker.scalar("int64")},
                                 batch_size=8, shuffle=True, seed=3, drop_last=True, output="numpy", observe=False)


def packed(root):
    return lambda: stoker.PackedLoader(root / "sft", seq_len=64, batch_size=4, seed=9, output="numpy")


def tokens(root, tmp):
    return lambda: stoker.TokenLoader(str(root / "tok"), seq_len=32, batch_size=4, seed=5, num_samples=400,
                                      epochs=4, cache_dir=tmp / "idx", output="numpy", observe=False)


def batch_id(batch) -> bytes:
    """What a batch is: its keys (Loader), its sample ids (TokenLoader), its tokens (PackedLoader)."""
    if "__key__" in batch:
        return "|".join(batch["__key__"]).encode()
    if "__index__" in batch:
        return np.asarray(batch["__index__"]).tobytes()
    return np.asarray(batch["tokens"]).tobytes()


def take(loader, n=None) -> list[bytes]:
    """The next iteration's batches (its first n)."""
    out = []
    for batch in loader:
        out.append(batch_id(batch))
        if n is not None and len(out) == n:
            break
    return out


@pytest.fixture(params=["Loader", "PackedLoader", "TokenLoader"])
def make(request, vision_dir, sft, tmp_path):
    return {"Loader": lambda: vision(vision_dir), "PackedLoader": lambda: packed(sft),
            "TokenLoader": lambda: tokens(sft, tmp_path)}[request.param]()


def reference(make, epoch: int) -> list[bytes]:
    loader = make()
    loader.set_epoch(epoch)
    return take(loader)


def test_every_loader_keeps_the_same_epochs(make):
    epochs = [reference(make, e) for e in range(3)]
    assert epochs[0] != epochs[1] and all(len(e) == len(epochs[0]) > 3 for e in epochs)

    loader = make()
    assert take(loader) == epochs[0] and loader.epoch in (0, 1)  # TokenLoader's: the next batch's
    assert take(loader) == epochs[1]  # no set_epoch: the next epoch
    loader.set_epoch(1)  # the epoch just used up, named again: from its start
    assert loader.epoch == 1
    assert take(loader) == epochs[1]
    assert take(loader, 2) == epochs[2][:2]
    loader.set_epoch(2)  # named mid-epoch: from its start
    assert take(loader) == epochs[2]

    # A state saved mid-epoch, and set_epoch of its epoch, in a new loader: the rest of it.
    loader = make()
    loader.set_epoch(1)
    assert take(loader, 3) == epochs[1][:3]
    state = loader.state_dict()
    again = make()
    again.load_state_dict(state)
    assert again.epoch == 1
    again.set_epoch(1)
    assert take(again) == epochs[1][3:]
    assert take(again) == epochs[2]


def test_an_iteration_broken_off_is_begun_again_or_continued_as_each_loader_says(make):
    first = reference(make, 0)
    loader = make()
    assert take(loader, 2) == first[:2]
    again = take(loader)
    # A Loader's pass is an epoch: a new iter() starts it over (torch's DataLoader). A
    # TokenLoader's or a PackedLoader's run is consumed once: the rest of the epoch.
    assert again == (first if type(loader) is stoker.Loader else first[2:])


def test_packed_set_epoch_starts_the_epoch_it_is_in_again(sft):
    """PackedLoader.set_epoch(e) with e its current epoch used to do nothing: after a used-up
    epoch, the next iteration went on to e + 1; mid-epoch, it gave the rest."""
    make = packed(sft)
    want = reference(make, 0)
    loader = make()
    assert take(loader) == want
    loader.set_epoch(0)
    assert take(loader) == want and loader.epoch == 0
    take(loader, 3)
    loader.set_epoch(0)
    assert loader.state_dict()["packed"]["consumed_rows"] == 0  # a state saved now is the epoch's start
    assert take(loader) == want


def test_packed_set_epoch_during_an_iteration_ends_it(sft):
    make = packed(sft)
    want = reference(make, 0)
    loader = make()
    it = iter(loader)
    got = [batch_id(next(it)) for _ in range(2)]
    loader.set_epoch(0)
    assert [batch_id(b) for b in it] == [] and got == want[:2]
    assert take(loader) == want
