"""partition="exact", the evaluation split: every sample of the epoch exactly
once across the ranks, every rank the same number of steps, a rank's last
batch short or empty (0 rows, still a batch). The reference is the shards
this file writes with Python's tarfile: their keys and labels, and the sum a
single process computes over them. The torchrun job (gloo, 3 and 4 ranks,
103 samples: no rank count divides them) all-reduces every step."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import stoker
from conftest import stoker_env

N = 103  # 3 * 34 + 1 = 4 * 25 + 3: neither 3 nor 4 ranks divide it


def label(i: int) -> int:
    return (i * 37) % 101


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> str:
    """103 samples "k<i>.cls" = label(i) in shards of 40, 40 and 23."""
    d = tmp_path_factory.mktemp("exact")
    bounds = [0, 40, 80, N]
    for s in range(3):
        with tarfile.open(d / f"part-{s}.tar", "w") as tar:
            for i in range(bounds[s], bounds[s + 1]):
                data = f"{label(i)}\n".encode()
                info = tarfile.TarInfo(f"k{i:03d}.cls")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return str(d / "part-{0..2}.tar")


def member(key: str) -> int:
    """The sample number in a "k042" key."""
    return int(key[1:])


def ranks(shards: str, world: int, batch_size: int, **kw) -> list[stoker.Loader]:
    return [stoker.Loader(shards, {"cls": stoker.scalar("int64")}, batch_size=batch_size, shuffle=True, seed=5,
                          partition="exact", rank=r, world_size=world, timeout=30, **kw) for r in range(world)]


@pytest.mark.parametrize("world,batch_size", [(3, 8), (4, 8), (2, 8), (5, 64), (7, 4), (110, 1)])
def test_every_sample_once_in_equal_steps(shards, world, batch_size):
    loaders = ranks(shards, world, batch_size)
    seen, steps = [], set()
    for ld in loaders:
        batches = list(ld)
        steps.add(len(batches))
        assert len(batches) == len(ld)
        rows = [len(b["__key__"]) for b in batches]
        assert all(r == batch_size for r in rows[:-1]), rows  # only the last batch is short
        for b in batches:
            assert b["cls"].shape == (len(b["__key__"]),)
            seen += [member(k) for k in b["__key__"]]
            assert b["cls"].tolist() == [label(member(k)) for k in b["__key__"]]
        assert ld.plan.dropped_samples == 0 and ld.plan.padded_samples == 0
    assert len(steps) == 1, f"ranks took different numbers of steps: {steps}"
    assert sorted(seen) == list(range(N))


def test_an_empty_last_batch_is_a_batch_of_zero_rows(shards):
    # 103 over 4 ranks in batches of 5: shares of 26, 26, 26 and 25, so 6
    # steps each, the last with 1, 1, 1 and 0 rows.
    loaders = ranks(shards, 4, 5)
    last = [list(ld)[-1] for ld in loaders]
    assert [len(b["__key__"]) for b in last] == [1, 1, 1, 0]
    empty = last[3]
    assert empty["cls"].shape == (0,)
    assert empty["cls"].dtype == last[0]["cls"].dtype
    assert empty["cls"].sum().item() == 0  # an all-reduce of it adds nothing


def test_numpy_output_and_images_keep_their_sample_shape(vision_dir):
    d, _ = vision_dir  # 60 samples: over 7 ranks in batches of 4, ranks 4-6 end with an empty batch
    ld = stoker.Loader(str(d / "shard-{000000..000002}.tar"), {"jpg": stoker.image(32)}, batch_size=4,
                       partition="exact", rank=6, world_size=7, output="numpy")
    batches = list(ld)
    assert [b["jpg"].shape[0] for b in batches] == [4, 4, 0]
    assert batches[-1]["jpg"].shape[1:] == batches[0]["jpg"].shape[1:]


def test_resume_mid_epoch_continues_exactly(shards):
    whole = [k for b in ranks(shards, 4, 5)[3] for k in b["__key__"]]
    ld = ranks(shards, 4, 5)[3]
    it = iter(ld)
    first = [k for _ in range(3) for k in next(it)["__key__"]]
    state = ld.state_dict()
    assert state["stoker"]["partition"] == "exact"
    resumed = ranks(shards, 4, 5)[3]
    resumed.load_state_dict(state)
    rest = [k for b in resumed for k in b["__key__"]]
    assert first + rest == whole


def test_drop_last_is_refused_and_the_default_is_off(shards):
    with pytest.raises(ValueError, match="drop_last"):
        ranks(shards, 3, 8, drop_last=True)
    assert len(ranks(shards, 3, 8)[0]) == 5  # 35 samples in batches of 8: the short one kept


@pytest.mark.parametrize("world", [3, 4])
def test_token_loader_exact_takes_the_partial_last_global_batch(tmp_path, world):
    import numpy as np

    rng = np.random.default_rng(1)
    stoker.write_megatron(tmp_path / "c", [rng.integers(0, 900, size=int(rng.integers(5, 90))) for _ in range(60)])

    def token_loader(rank, w, bs, partition):
        return stoker.TokenLoader(tmp_path / "c", seq_len=16, batch_size=bs, seed=2, rank=rank, world_size=w,
                                  partition=partition, output="numpy", cache_dir=tmp_path / "cache")

    # The reference: one rank, one sample per batch, every sample (nothing can be left over).
    whole = {int(b["__index__"][0]): b["tokens"][0] for b in token_loader(0, 1, 1, "drop")}
    total = len(whole)
    assert total % (3 * world) != 0
    seen, steps = {}, set()
    for r in range(world):
        batches = list(token_loader(r, world, 3, "exact"))
        steps.add(len(batches))
        for b in batches:
            for idx, tokens in zip(b["__index__"].tolist(), b["tokens"]):
                assert idx not in seen, f"sample {idx} twice"
                seen[idx] = tokens
    assert len(steps) == 1, steps
    assert sorted(seen) == sorted(whole)
    assert all(np.array_equal(seen[i], whole[i]) for i in whole)
    # megatron's drop_last: whole global batches only, one step fewer.
    dropped = list(token_loader(0, world, 3, "drop"))
    assert len(dropped) == steps.pop() - 1 == total // (3 * world)


def torchrun(tmp: Path, world: int, shards: str, batch_size: int) -> list[list[dict]]:
    script = Path(__file__).with_name("exact_eval_rank.py")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world}",
           str(script), shards, str(tmp), str(batch_size)]
    proc = subprocess.run(cmd, env=stoker_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads((tmp / f"rank{r}.json").read_text()) for r in range(world)]


@pytest.mark.parametrize("world", [3, 4])
def test_torchrun_evaluation_sums_to_the_single_process_metric(tmp_path, shards, world):
    per_rank = torchrun(tmp_path, world, shards, 8)
    # The single-process metric, from the labels written (and from one stoker rank).
    want_sum, want_count = float(sum(label(i) for i in range(N))), float(N)
    single = ranks(shards, 1, 8)[0]
    assert float(sum(b["cls"].sum().item() for b in single)) == want_sum
    orders = []
    for epoch in range(2):
        results = [r[epoch] for r in per_rank]
        assert {r["epoch"] for r in results} == {epoch}
        steps = {len(r["rows"]) for r in results}
        assert len(steps) == 1, f"epoch {epoch}: ranks took {steps} steps"
        keys = [member(k) for r in results for k in r["keys"]]
        assert sorted(keys) == list(range(N)), f"epoch {epoch}: not every sample exactly once"
        assert sum(sum(r["rows"]) for r in results) == N
        for r in results:  # every rank saw the same all-reduced totals
            assert r["label_sum"] == want_sum
            assert r["count"] == want_count
        orders.append(keys)
    assert orders[0] != orders[1], "the second epoch did not reshuffle"
