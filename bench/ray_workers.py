#!/usr/bin/env python3
"""Ray workers for a trainer held to one core, side by side in one run (issue 27).

This 2-core machine is cut in two, as a trainer node beside a CPU node: a
ray.cluster_utils.Cluster whose head node (the trainer's: its raylet, its
object store, the trainer process) is held to core 0 and whose one worker
node (its raylet and the actors it starts) is held to core 1, by CPU
affinity set as each is started (as taskset does). Over the bench's V shards
(vision.py's data: ~500x375 JPEG q90), the V train recipe (RandomResizedCrop
224 + flip, uint8 CHW, batch 64, shuffled, defaults otherwise), each round
measures one epoch of each, in turn:

  alone     stoker.Loader in the trainer, on its one core
  workers   stoker.Loader(..., workers=stoker.RayWorkers(count=1, num_cpus=1)):
            one worker on the CPU node and the trainer's own share beside it
            (the default, local=None: its one core), batches dealt 1:1
  remote    the same with local=0: the trainer decodes nothing and every batch
            comes from the worker through the object store
  ray_data  Ray Data on the same cluster (both nodes' CPUs): read_parquet ->
            map_batches (the recipe, Pillow) -> iter_torch_batches, the peers
            suite's Ray Data (bench/peers/ray_data.py) over the same images as
            Parquet (row groups of 64); its rounds come after stoker's (what
            it leaves on the nodes slowed the loaders after it)

samples/s over the epoch, its first batch included; each loader is built
before its epoch and closed after it (the CPU node's one CPU is held by a
worker's actor while it lives); round 0 is a warm-up. Printed: medians over --rounds and the
per-round ratios the issue asks for: capacity = workers/alone (>= 1.6),
overhead = remote/alone (>= 0.9), peer = workers/ray_data (>= 3), and the
bytes moved per batch against the batch's own.

    PYTHONPATH=python python3 bench/ray_workers.py [--count 4608] [--rounds 3] [--quick] [--out FILE]
    bash bench/run.sh --ray [--quick]   # writes bench/results/<UTC>-ray.md
"""
from __future__ import annotations

import argparse
import io
import logging
import os
import statistics
import sys
import tarfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vision  # noqa: E402

BATCH = 64
TARGETS = {"capacity": 1.6, "overhead": 0.9, "peer": 3.0}


def epoch_rate(loader, epoch: int) -> tuple[float, int]:
    """samples/s over one epoch, and the bytes of its last batch's arrays."""
    if hasattr(loader, "set_epoch"):
        loader.set_epoch(epoch)
    t0 = time.perf_counter()
    n = nbytes = 0
    for batch in loader:
        n += len(batch["cls"] if "cls" in batch else batch["label"])
        nbytes = sum(v.nbytes for v in batch.values() if hasattr(v, "nbytes"))
    return n / (time.perf_counter() - t0), nbytes


def parquet_of(shards: list[str], out: Path) -> list[str]:
    """The shards' samples as Parquet for Ray Data (jpg binary, cls int64, row groups of 64), once."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    out.mkdir(parents=True, exist_ok=True)
    files = []
    for shard in shards:
        path = out / (Path(shard).stem + ".parquet")
        files.append(str(path))
        if path.exists():
            continue
        samples: dict[str, dict] = {}
        with tarfile.open(shard) as tar:
            for m in tar:
                if m.isfile():
                    key, ext = m.name.split(".", 1)
                    samples.setdefault(key, {})[ext] = tar.extractfile(m).read()
        rows = [s for s in samples.values() if "jpg" in s]
        table = pa.table({"jpg": pa.array([s["jpg"] for s in rows], pa.binary()),
                          "cls": pa.array([int(s["cls"]) for s in rows], pa.int64())})
        pq.write_table(table, path.with_suffix(".tmp"), row_group_size=BATCH)
        os.replace(path.with_suffix(".tmp"), path)
    return files


def ray_data_epochs(files: list[str], seed: int):
    """An iterable of one Ray Data epoch, as the peers suite runs it (train: shuffled blocks + a local buffer)."""
    import ray

    from peers.ray_data import BatchRecipe
    from peers.recipes import TRAIN

    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    ctx.print_on_execution_start = False

    def make(epoch: int):
        ds = ray.data.read_parquet(files).randomize_block_order(seed=seed + epoch)
        ds = ds.map_batches(BatchRecipe(TRAIN, 224), batch_size=BATCH, batch_format="numpy")
        return ds.iter_torch_batches(batch_size=BATCH, prefetch_batches=2, drop_last=True,
                                     local_shuffle_buffer_size=1000)

    return make


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=4608)  # epochs of ~4 s: 1,536 gave rounds apart by a third
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--no-ray-data", action="store_true", help="skip the Ray Data peer")
    ap.add_argument("--quick", action="store_true", help="1 round after the warm-up, no Ray Data")
    ap.add_argument("--out", default=None, help="write the table here (bench/run.sh --ray: bench/results/<UTC>-ray.md)")
    ap.add_argument("--data", default=os.environ.get("STOKER_BENCH_DATA", "/tmp/stoker-bench/vision"))
    args = ap.parse_args()
    if args.quick:
        args.rounds, args.no_ray_data = 1, True
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    if len(os.sched_getaffinity(0)) < 2:
        sys.exit("needs 2 cores: one for the trainer, one for the worker node")
    trainer_core, worker_core = sorted(os.sched_getaffinity(0))[:2]

    import ray
    from ray.cluster_utils import Cluster

    import stoker

    shards, how = vision.prepare_data(Path(args.data), "V", args.count, 0, "auto")
    shards = [str(p) for p in shards]
    files = [] if args.no_ray_data else parquet_of(shards, Path(args.data) / "ray-parquet")
    options = dict(fields={"jpg": stoker.image(224, resize="random_resized_crop", random_hflip=True),
                           "cls": stoker.scalar()}, batch_size=BATCH, shuffle=True, seed=0)

    os.environ["PYTHONPATH"] = os.pathsep.join([str(Path(stoker.__file__).resolve().parents[1]),
                                                str(Path(__file__).resolve().parent),
                                                os.environ.get("PYTHONPATH", "")])
    # Each node's processes inherit the affinity they are started with.
    os.sched_setaffinity(0, {trainer_core})
    cluster = Cluster(initialize_head=True,
                      head_node_args=dict(num_cpus=1, resources={"trainer": 1}, include_dashboard=False,
                                          object_store_memory=1 << 30))
    os.sched_setaffinity(0, {worker_core})
    cluster.add_node(num_cpus=1, resources={"cpu_node": 1}, object_store_memory=1 << 30)
    os.sched_setaffinity(0, {trainer_core})
    ray.init(address=cluster.address, logging_level=logging.WARNING, log_to_driver=False)
    on_cpu_node = {"resources": {"cpu_node": 0.01}}  # the worker goes to the CPU node, not the trainer's
    # One loader at a time, built before its epoch (outside the timing) and
    # closed after it: the CPU node has one CPU, which a worker's actor holds
    # while it lives and Ray Data's tasks need.
    makers = {  # stoker's loaders, measured in turn each round
        "alone": lambda: stoker.Loader(shards, **options),
        "workers": lambda: stoker.Loader(shards, workers=stoker.RayWorkers(1, num_cpus=1, actor_options=on_cpu_node),
                                         **options),
        "remote": lambda: stoker.Loader(shards, workers=stoker.RayWorkers(1, num_cpus=1, local=0,
                                                                          actor_options=on_cpu_node), **options),
    }
    rows, nbytes, shares, transfer, lines = [], {}, {}, {}, []
    try:
        for r in range(args.rounds + 1):
            row = {}
            for name, make in makers.items():
                loader = make()
                try:
                    row[name], nbytes[name] = epoch_rate(loader, r)
                    if name == "workers":
                        shares = loader.shares
                        lines = [w["line"] for w in loader.report()["workers"]]
                    if name == "remote":
                        transfer = loader.report()["transfer"]
                finally:
                    loader.close()
            ratios = {"capacity": row["workers"] / row["alone"], "overhead": row["remote"] / row["alone"]}
            print(f"  round {r}{' (warm-up)' if r == 0 else ''}: "
                  + ", ".join(f"{k} {v:.0f}" for k, v in row.items()) + " samples/s; "
                  + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()), flush=True)
            for line in lines:
                print(f"    {line}")
            if r:
                rows.append({**row, **ratios})
        # Ray Data last, in rounds of its own: the processes and blocks it
        # leaves on the nodes slowed the stoker loaders after it (by up to a
        # third, in rounds that alternated).
        if files:
            make = ray_data_epochs(files, 0)
            for r in range(args.rounds + 1):
                rate, _ = epoch_rate(make(r), r)
                print(f"  Ray Data round {r}{' (warm-up)' if r == 0 else ''}: {rate:.0f} samples/s", flush=True)
                if r:
                    rows[r - 1]["ray_data"] = rate
                    rows[r - 1]["peer"] = rows[r - 1]["workers"] / rate
    finally:
        ray.shutdown()
        cluster.shutdown()
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    spread = {k: (min(r[k] for r in rows), max(r[k] for r in rows)) for k in rows[0]}
    out = [f"# Ray workers for a trainer held to one core (issue 27), {time.strftime('%Y-%m-%dT%H%MZ', time.gmtime())}",
           "", f"Command: `bash bench/run.sh --ray{' --quick' if args.quick else ''}` (bench/ray_workers.py). "
           f"V train recipe (RandomResizedCrop 224 + flip, uint8 CHW), {args.count} samples, batch {BATCH}, "
           f"shuffled, defaults; trainer node on core {trainer_core}, worker node on core {worker_core}; "
           f"samples/s over whole epochs, medians of {args.rounds} rounds [min-max]; data: {how['generator']}; "
           f"ray {ray.__version__}; load before: {load}.", "",
           "| loader | samples/s |", "| --- | --- |"]
    titles = {"alone": "stoker.Loader, the trainer alone on its core",
              "workers": "stoker + RayWorkers(1, num_cpus=1): the trainer's share and one worker",
              "remote": "stoker + RayWorkers(1, num_cpus=1, local=0): every batch from the worker",
              "ray_data": "Ray Data read_parquet -> map_batches -> iter_torch_batches, both nodes"}
    for name, title in titles.items():
        if name in med:
            out.append(f"| {title} | {med[name]:,.0f} [{spread[name][0]:,.0f}-{spread[name][1]:,.0f}] |")
    out += ["", "| target | ratio | verdict |", "| --- | --- | --- |"]
    names = {"capacity": "capacity: workers / alone", "overhead": "overhead: remote / alone",
             "peer": "peer: workers / Ray Data"}
    for k, target in TARGETS.items():
        if k in med:
            verdict = "PASS" if med[k] >= target else "MISS"
            out.append(f"| {names[k]} >= {target:g} | {med[k]:.2f} [{spread[k][0]:.2f}-{spread[k][1]:.2f}] | "
                       f"**{verdict}** |")
    out += ["", f"Shares of each cycle (workers): {shares}. Through the object store (remote, last round): "
            f"{transfer['batches']} batches of {transfer['bytes_per_batch']:,} bytes, each moved once; a batch's "
            f"own arrays: {nbytes['alone']:,} bytes; {transfer['move_s']:.2f} s moving (ahead of the steps), "
            f"{transfer['copy_s']:.2f} s copying out."]
    text = "\n".join(out) + "\n"
    print("\n" + text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")

if __name__ == "__main__":
    main()
