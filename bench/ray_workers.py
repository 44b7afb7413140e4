#!/usr/bin/env python3
"""Ray workers side by side with a local loader, in one run (issue 27, first figures).

On a ray.cluster_utils.Cluster on this machine (a head that takes no work and
one worker node of one CPU), over the bench's V shards (vision.py's data:
~500x375 JPEG q90 -> 224 center crop, uint8 CHW, batch 64), alternately:

  local  stoker.Loader in this process, decode_threads=1
  ray    stoker.Loader(..., workers=stoker.RayWorkers(count=1, num_cpus=1)),
         decode_threads=1: the batches are made by one actor on the worker node
         and come through Ray's object store

Each epoch is one measurement (samples/s over the epoch, its first batch
included); round 0 is a warm-up; the median of --rounds rounds is printed
with the ratio ray/local of each round. Neither side is held to a core
(taskset): on a 2-core machine this is what one decode thread delivers
either way, so the ratio is the cost of the transfer, not a capacity gain.

    PYTHONPATH=python python3 bench/ray_workers.py [--count 1536] [--rounds 3]
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vision  # noqa: E402


def epoch_rate(loader, epoch: int) -> float:
    loader.set_epoch(epoch)
    t0 = time.perf_counter()
    n = 0
    for batch in loader:
        n += batch["cls"].shape[0]
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=1536)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--data", default=os.environ.get("STOKER_BENCH_DATA", "/tmp/stoker-bench/vision"))
    args = ap.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    import stoker

    shards, how = vision.prepare_data(Path(args.data), "V", args.count, 0, "auto")
    shards = [str(p) for p in shards]
    options = dict(fields={"jpg": stoker.image(224), "cls": stoker.scalar()}, batch_size=64, shuffle=True, seed=0,
                   decode_threads=1, observe=False)

    os.environ["PYTHONPATH"] = os.pathsep.join([str(Path(stoker.__file__).resolve().parents[1]),
                                                os.environ.get("PYTHONPATH", "")])
    cluster = Cluster(initialize_head=True, head_node_args=dict(num_cpus=0, include_dashboard=False))
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, logging_level=logging.WARNING, log_to_driver=False)
    try:
        local = stoker.Loader(shards, **options)
        remote = stoker.Loader(shards, workers=stoker.RayWorkers(count=1, num_cpus=1), **options)
        rows = []
        for r in range(args.rounds + 1):
            a = epoch_rate(local, r)
            b = epoch_rate(remote, r)
            print(f"  round {r}{' (warm-up)' if r == 0 else ''}: local {a:.0f} samples/s, ray {b:.0f} samples/s, "
                  f"ratio {b / a:.2f}", flush=True)
            if r:
                rows.append((a, b, b / a))
        local.close()
        remote.close()
    finally:
        ray.shutdown()
        cluster.shutdown()
    med = [statistics.median(x) for x in zip(*rows)]
    print(f"V, {args.count} samples, batch 64, one decode thread each ({os.cpu_count()} cores, shared): "
          f"local {med[0]:.0f} samples/s, ray worker on another node {med[1]:.0f} samples/s, "
          f"ray/local {med[2]:.2f} (median of {args.rounds} rounds; data: {how['generator']})")


if __name__ == "__main__":
    main()
