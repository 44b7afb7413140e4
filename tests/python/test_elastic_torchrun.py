"""Elastic resume under torchrun (CPU, gloo): a job of W ranks saves its state
at several steps, then jobs of W' ranks restore each state and run the
epoch out, with a collective every step (a rank with fewer batches would hang
the job; the runs have timeouts). The reference is what the uninterrupted
W-rank job still delivered after each save point, recorded by the same job:
the new ranks deliver exactly those samples, each once, none of the ones
already consumed, in equal batch counts (up to the cut to whole, equal
batches that the plan reports)."""
from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import stoker_env

pytest.importorskip("torch.distributed")

BS = 3
SCRIPT = textwrap.dedent(
    """
    import json, pickle, sys
    from datetime import timedelta
    import torch, torch.distributed as dist
    import stoker

    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    mode, shards, out = sys.argv[1], sys.argv[2], sys.argv[3]
    rank = dist.get_rank()

    def make():  # rank and world size from the process group
        return stoker.Loader(shards, {"cls": stoker.scalar("int64")}, batch_size=%d, shuffle=True, seed=11,
                             output="numpy")

    def step():
        dist.all_reduce(torch.ones(1))  # every rank must reach every step

    if mode == "save":  # run the whole epoch; rank 0 saves the job's state after each point
        points = {int(p) for p in sys.argv[4].split(",")}
        ld, batches, states = make(), [], {}
        for i, b in enumerate(ld):
            batches.append(list(b["__key__"]))
            step()
            if i + 1 in points and rank == 0:
                states[i + 1] = ld.state_dict()
        json.dump(batches, open(f"{out}/batches{rank}.json", "w"))
        if rank == 0:
            pickle.dump(states, open(f"{out}/states.pkl", "wb"))
    else:  # restore every saved state on this world size and run each out
        res = {}
        for point, state in sorted(pickle.load(open(f"{out}/states.pkl", "rb")).items()):
            ld = make()
            ld.load_state_dict(state)
            keys, steps = [], 0
            for b in ld:
                keys += list(b["__key__"])
                step()
                steps += 1
            res[point] = {"keys": keys, "steps": steps}
        json.dump(res, open(f"{out}/restored{rank}.json", "w"))
    dist.destroy_process_group()
    """ % BS
)


def torchrun(tmp: Path, world: int, *args: str):
    import subprocess

    script = tmp / "elastic_rank.py"
    script.write_text(SCRIPT)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={world}",
           str(script), *args]
    proc = subprocess.run(cmd, env=stoker_env(), capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


@pytest.mark.parametrize("world,new_world,points", [(4, 2, "1,3"), (2, 3, "2,5")])
def test_torchrun_restore_on_another_world_size(tmp_path, vision_dir, world, new_world, points):
    d, samples = vision_dir  # 60 samples in 3 shards
    shards = str(d / "shard-{000000..000002}.tar")
    torchrun(tmp_path, world, "save", shards, str(tmp_path), points)
    batches = [json.loads((tmp_path / f"batches{r}.json").read_text()) for r in range(world)]
    assert len({len(b) for b in batches}) == 1  # the uninterrupted job: equal batches per rank
    torchrun(tmp_path, new_world, "restore", shards, str(tmp_path))
    restored = [json.loads((tmp_path / f"restored{r}.json").read_text()) for r in range(new_world)]
    for point in map(int, points.split(",")):
        done = {k for b in batches for k in sum(b[:point], [])}
        want = [k for b in batches for k in sum(b[point:], [])]
        got = [k for r in restored for k in r[str(point)]["keys"]]
        steps = [r[str(point)]["steps"] for r in restored]
        assert len(set(steps)) == 1, f"unequal batches per new rank after step {point}: {steps}"
        assert all(len(r[str(point)]["keys"]) == steps[0] * BS for r in restored)  # whole batches
        assert len(set(got)) == len(got), "a sample twice"
        assert not set(got) & done, "a sample consumed before the save delivered again"
        assert set(got) <= set(want)
        assert len(want) - len(got) < new_world * BS  # only the cut to equal whole batches
        assert len(got) > 0
