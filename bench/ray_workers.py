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
            Parquet (row groups of 64), at the best point of the peers suite's
            grid (map_batches batch size x prefetch_batches), chosen in the
            warm-up round where each point runs one epoch

samples/s over the epoch, its first batch included; each loader is built
before its epoch and closed after it (the CPU node's one CPU is held by a
worker's actor while it lives); round 0 is a warm-up, and the measured rounds
alternate the order (reversed every other round), so what one loader leaves
on the nodes weighs on each in turn. CPU ms/sample counts the whole process
tree (bench/common.py cpu_seconds): the trainer, both nodes' raylets, Ray's
worker processes and stoker's actors. Printed: medians over --rounds and the
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
import common  # noqa: E402
import vision  # noqa: E402

BATCH = 64
RAY_DATA_GRID = [(64, 2), (16, 2), (64, 4)]  # (map_batches batch size, prefetch_batches): peers/ray_data.py's
TARGETS = {"capacity": 1.6, "overhead": 0.9, "peer": 3.0}


def epoch_rate(loader, epoch: int) -> tuple[float, int, float]:
    """samples/s over one epoch, the bytes of its last batch's arrays, and the process
    tree's CPU per sample (ms)."""
    if hasattr(loader, "set_epoch"):
        loader.set_epoch(epoch)
    t0, c0 = time.perf_counter(), common.cpu_seconds()
    n = nbytes = 0
    for batch in loader:
        n += len(batch["cls"] if "cls" in batch else batch["label"])
        nbytes = sum(v.nbytes for v in batch.values() if hasattr(v, "nbytes"))
    return n / (time.perf_counter() - t0), nbytes, 1e3 * (common.cpu_seconds() - c0) / max(1, n)


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

    def make(epoch: int, setting: tuple[int, int]):
        map_batch, prefetch = setting
        ds = ray.data.read_parquet(files).randomize_block_order(seed=seed + epoch)
        ds = ds.map_batches(BatchRecipe(TRAIN, 224), batch_size=map_batch, batch_format="numpy")
        return ds.iter_torch_batches(batch_size=BATCH, prefetch_batches=prefetch, drop_last=True,
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
    rows, nbytes, cpu, shares, transfer, lines = [], {}, {}, {}, {}, []
    ray_data = ray_data_epochs(files, 0) if files else None
    ray_setting = RAY_DATA_GRID[0]

    def run_stoker(name: str, r: int) -> float:
        nonlocal shares, transfer, lines
        loader = makers[name]()
        try:
            rate, nbytes[name], cpu.setdefault(name, {})[r] = epoch_rate(loader, r)
            if name == "workers":
                shares = loader.shares
                lines = [w["line"] for w in loader.report()["workers"]]
            if name == "remote":
                transfer = loader.report()["transfer"]
        finally:
            loader.close()
        return rate

    try:
        for r in range(args.rounds + 1):
            row = {}
            names = list(makers) + (["ray_data"] if ray_data else [])
            if r % 2 == 0:  # alternate: what one loader leaves on the nodes weighs on each in turn
                names.reverse()
            for name in names:
                if name != "ray_data":
                    row[name] = run_stoker(name, r)
                elif r == 0:  # the warm-up tunes Ray Data: one epoch per grid point, the best kept
                    tried = {}
                    for setting in RAY_DATA_GRID:
                        tried[setting], _, _ = epoch_rate(ray_data(r, setting), r)
                        print(f"  Ray Data map_batches batch_size={setting[0]} prefetch_batches={setting[1]}: "
                              f"{tried[setting]:.0f} samples/s", flush=True)
                    ray_setting = max(tried, key=tried.get)
                    row[name] = tried[ray_setting]
                else:
                    row[name], _, cpu.setdefault(name, {})[r] = epoch_rate(ray_data(r, ray_setting), r)
            ratios = {"capacity": row["workers"] / row["alone"], "overhead": row["remote"] / row["alone"]}
            if "ray_data" in row:
                ratios["peer"] = row["workers"] / row["ray_data"]
            print(f"  round {r}{' (warm-up)' if r == 0 else ''}, in order {', '.join(names)}: "
                  + ", ".join(f"{k} {v:.0f}" for k, v in row.items()) + " samples/s; "
                  + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()), flush=True)
            for line in lines:
                print(f"    {line}")
            if r:
                rows.append({**row, **ratios})
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
           "| loader | samples/s | CPU ms/sample (process tree) |", "| --- | --- | --- |"]
    titles = {"alone": "stoker.Loader, the trainer alone on its core",
              "workers": "stoker + RayWorkers(1, num_cpus=1): the trainer's share and one worker",
              "remote": "stoker + RayWorkers(1, num_cpus=1, local=0): every batch from the worker",
              "ray_data": "Ray Data read_parquet -> map_batches -> iter_torch_batches, both nodes, "
                          f"map_batches batch_size={ray_setting[0]} prefetch_batches={ray_setting[1]} "
                          f"(best of {RAY_DATA_GRID} in the warm-up)"}
    for name, title in titles.items():
        if name in med:
            ms = statistics.median(v for k, v in cpu[name].items() if k > 0)
            out.append(f"| {title} | {med[name]:,.0f} [{spread[name][0]:,.0f}-{spread[name][1]:,.0f}] | {ms:.2f} |")
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
