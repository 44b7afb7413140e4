"""torchrun with 3 CPU ranks (gloo): equal batch counts per rank and an exact
partition of the dataset, with a collective every step as a real job has (a
rank with fewer batches would hang it; the run has a timeout)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import stoker_env

pytest.importorskip("torch.distributed")

RANK_SCRIPT = textwrap.dedent(
    """
    import json, sys
    from datetime import timedelta
    import torch, torch.distributed as dist
    import stoker

    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    shards, out, epoch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    loader = stoker.Loader(shards, {"cls": stoker.scalar("int64")}, batch_size=4,
                           shuffle=True, seed=11, drop_last=False, partition="pad")
    loader.set_epoch(epoch)
    keys, steps = [], 0
    for batch in loader:
        keys += batch["__key__"]
        t = torch.ones(1)
        dist.all_reduce(t)          # every rank must reach every step
        steps += 1
    with open(f"{out}/rank{dist.get_rank()}.json", "w") as f:
        json.dump({"keys": keys, "steps": steps, "len": len(loader),
                   "padded": loader.plan.padded_samples, "world": dist.get_world_size()}, f)
    dist.destroy_process_group()
    """
)


def run_ranks(tmp_path: Path, shards: str, epoch: int) -> list[dict]:
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    out = tmp_path / f"out{epoch}"
    out.mkdir()
    env = stoker_env()  # the ranks import the same stoker as this process
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=3",
           str(script), shards, str(out), str(epoch)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(3)]


def test_torchrun_three_ranks_partition_exactly(tmp_path, vision_dir):
    d, samples = vision_dir  # 60 samples: 20 per rank, batches of 4 with a short last one? 20/4 = 5
    shards = str(d / "shard-{000000..000002}.tar")
    ranks = run_ranks(tmp_path, shards, epoch=0)
    assert {r["world"] for r in ranks} == {3}
    assert len({r["steps"] for r in ranks}) == 1 and ranks[0]["steps"] == ranks[0]["len"] == 5
    keys = [k.split(":")[-1] for r in ranks for k in r["keys"]]
    assert sorted(keys) == sorted(samples)  # every sample once, across all ranks


def test_torchrun_uneven_dataset_pads_explicitly(tmp_path):
    """61 samples over 3 ranks: pad to 21 each, 2 repeats reported, all ranks equal."""
    import webdataset as wds

    with wds.TarWriter(str(tmp_path / "odd.tar")) as sink:
        for i in range(61):
            sink.write({"__key__": f"u{i:03d}", "cls": str(i).encode()})
    ranks = run_ranks(tmp_path, str(tmp_path / "odd.tar"), epoch=1)
    assert [r["steps"] for r in ranks] == [6, 6, 6]  # ceil(21 / 4)
    keys = [k.split(":")[-1] for r in ranks for k in r["keys"]]
    assert len(keys) == 63 and set(keys) == {f"u{i:03d}" for i in range(61)}
    assert sum(r["padded"] for r in ranks) == 2
