"""Elastic resume: a state saved by W ranks restores on W' ranks and the new
ranks deliver exactly the samples the uninterrupted W-rank run would still
have delivered, each once, in equal batch counts (up to the cut to whole,
equal batches, reported by the plan). Ranks are loaders given rank/world_size
explicitly in one process: the plan is a pure function of them, so this is
what torchrun ranks compute."""
from __future__ import annotations

import itertools

import pytest

import stoker

BS = 3


def loader(d, world, rank, **kw):
    return stoker.Loader(str(d / "shard-{000000..000002}.tar"), {"cls": stoker.scalar("int64")}, batch_size=BS,
                         shuffle=True, seed=11, rank=rank, world_size=world, output="numpy", **kw)


def keys(batches):
    return [k for b in batches for k in b["__key__"]]


def run_and_save(d, world, n):
    """Each of `world` ranks delivers n batches; returns (delivered keys, rank 0's state)."""
    delivered, state = [], None
    for r in range(world):
        ld = loader(d, world, r)
        it = iter(ld)
        delivered += keys(itertools.islice(it, n))
        if r == 0:
            state = ld.state_dict()
    return delivered, state


def uninterrupted_rest(d, world, n):
    return [k for r in range(world) for k in keys(list(loader(d, world, r))[n:])]


@pytest.mark.parametrize("world,new_world,step", [(4, 2, 2), (2, 3, 1), (4, 2, 0), (2, 4, 4), (3, 2, 3)])
def test_restore_on_another_world_size_delivers_the_rest_once(vision_dir, world, new_world, step):
    d, samples = vision_dir
    done, state = run_and_save(d, world, step)
    want = uninterrupted_rest(d, world, step)
    got, counts = [], []
    for r in range(new_world):
        ld = loader(d, new_world, r)
        ld.load_state_dict(state)
        ks = keys(list(ld))
        counts.append(len(ks))
        got += ks
    assert len(set(counts)) == 1, f"unequal batches per new rank: {counts}"
    assert len(set(got)) == len(got), "a sample twice"
    assert set(got) <= set(want) and not set(got) & set(done)
    assert len(want) - len(got) < new_world * BS  # only the cut to equal whole batches


def test_a_resumed_epoch_can_resume_again(vision_dir):
    d, _ = vision_dir
    done1, state1 = run_and_save(d, 4, 1)  # 4 ranks, 1 batch each
    done2, state2 = [], None
    for r in range(2):  # 2 ranks resume, deliver 2 batches, save
        ld = loader(d, 2, r)
        ld.load_state_dict(state1)
        done2 += keys(itertools.islice(iter(ld), 2))
        if r == 0:
            state2 = ld.state_dict()
    assert "elastic" in state2["stoker"]
    rest = []
    for r in range(3):
        ld = loader(d, 3, r)
        ld.load_state_dict(state2)
        rest += keys(list(ld))
    allk = done1 + done2 + rest
    assert len(set(allk)) == len(allk)
    assert set(allk) <= set(uninterrupted_rest(d, 4, 0))
