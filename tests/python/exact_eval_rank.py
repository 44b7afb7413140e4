"""One rank of the exact-split evaluation job that test_exact_partition.py
starts under torchrun (CPU, gloo): two epochs of a Loader with
partition="exact" and no set_epoch, an all-reduce of (sum of labels, rows)
every step, as an evaluation loop sums a metric over ranks. A rank whose
batch is empty still takes its step, so a rank that ran out first would hang
the job (the process group and the test time out instead).

argv: shards, output directory, batch size. Writes rank<r>.json: per epoch
the keys this rank saw, the rows of each of its batches, and the all-reduced
totals."""
from __future__ import annotations

import json
import sys
from datetime import timedelta

import torch
import torch.distributed as dist

import stoker


def main() -> None:
    shards, out, batch_size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    dist.init_process_group("gloo", timeout=timedelta(seconds=30))
    rank = dist.get_rank()
    # rank and world size come from the process group
    loader = stoker.Loader(shards, {"cls": stoker.scalar("int64")}, batch_size=batch_size, shuffle=True, seed=3,
                           partition="exact", timeout=30)
    epochs = []
    for _ in range(2):  # the second iter() begins epoch 1 by itself
        keys, rows = [], []
        total = torch.zeros(2, dtype=torch.float64)
        for batch in loader:
            labels = batch["cls"]
            keys += batch["__key__"]
            rows.append(int(labels.shape[0]))
            step = torch.stack([labels.sum().to(torch.float64), torch.tensor(float(labels.shape[0]))])
            dist.all_reduce(step)
            total += step
        epochs.append({"epoch": loader.epoch, "keys": keys, "rows": rows, "label_sum": total[0].item(),
                       "count": total[1].item()})
    with open(f"{out}/rank{rank}.json", "w") as f:
        json.dump(epochs, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
