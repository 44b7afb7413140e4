"""The on-device checks of issue 21, side by side in one run (needs a CUDA GPU;
NOT YET RUN: no device was lent while it was written).

1. Copy bandwidth: stoker's copy of a V batch (64x3x224x224 uint8) and of an S
   batch (8x3x1024x1024 uint8 + 8x256x64x64 float16) from its pinned pool, timed
   by its CUDA events, against a pinned cudaMemcpyAsync of the same bytes
   (torch: a pinned tensor's .to("cuda", non_blocking=True) on a side stream,
   timed by events). Target: stoker >= 0.9x.
2. Hidden copies: a 20 ms step on the GPU (torch.cuda._sleep) per batch; the
   step stream's wait for each batch (stoker: exposed time from its events;
   baseline: device="cpu" + .to("cuda", non_blocking=True) from today's
   pageable pool, timed by events around the copy on the step's stream).
   Target: stoker's p99 <= 1 ms.

    PYTHONPATH=python python bench/device_copy.py [--batches 200]

Prints medians (min-max over 3 repetitions) and PASS/MISS; never fails.
"""
from __future__ import annotations

import argparse
import io
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import stoker

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402  (batches_of)

SHAPES = {  # workload -> (batch, {member: (shape, dtype)})
    "V": (64, {"img.npy": ((3, 224, 224), np.uint8)}),
    "S": (8, {"img.npy": ((3, 1024, 1024), np.uint8), "feat.npy": ((256, 64, 64), np.float16)}),
}


def write_shard(path: Path, members: dict, n: int) -> None:
    rng = np.random.default_rng(0)
    with tarfile.open(path, "w") as tar:
        for i in range(n):
            for name, (shape, dtype) in members.items():
                buf = io.BytesIO()
                np.save(buf, rng.integers(0, 255, size=shape).astype(dtype))
                info = tarfile.TarInfo(f"{i:06d}.{name}")
                info.size = buf.tell()
                buf.seek(0)
                tar.addfile(info, buf)


def torch_pinned_copy_s(nbytes: int, reps: int = 20) -> float:
    host = torch.empty(nbytes, dtype=torch.uint8).pin_memory()
    side = torch.cuda.Stream()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(side):
            start.record()
            host.to("cuda", non_blocking=True)
            end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return statistics.median(times[2:])


def stoker_copy_s(shard: str, members: dict, batch: int, batches: int) -> tuple[float, int]:
    fields = {name: stoker.npy() for name in members}
    loader = stoker.Loader(shard, fields, batch_size=batch, device="cuda", keys=False, prefetch=2)
    for b in common.batches_of(loader, batches):
        del b
    torch.cuda.synchronize()
    h2d = loader._native.stats()["h2d"]
    loader.close()
    return h2d["copy_s"] / max(1, h2d["copies"]), h2d["bytes"] // max(1, h2d["copies"])


def sleep_cycles_for(seconds: float) -> int:
    cycles = 1_000_000
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    return int(cycles * seconds / (start.elapsed_time(end) * 1e-3))


def waits_with_step(shard: str, members: dict, batch: int, batches: int, mode: str, cycles: int) -> list[float]:
    fields = {name: stoker.npy() for name in members}
    waits = []
    if mode == "stoker":
        loader = stoker.Loader(shard, fields, batch_size=batch, device="cuda", keys=False, prefetch=2)
        seen = 0.0
        for i, b in enumerate(common.batches_of(loader, batches)):
            torch.cuda._sleep(cycles)  # the step, on the current stream, after its wait for the batch
            del b
            exposed = loader._native.stats()["h2d"]["exposed_s"]
            if i > 0:
                waits.append(exposed - seen)  # the copies completed since: one batch's, in steady state
            seen = exposed
    else:
        loader = stoker.Loader(shard, fields, batch_size=batch, keys=False, prefetch=2)
        for b in common.batches_of(loader, batches):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            moved = {k: v.to("cuda", non_blocking=True) for k, v in b.items() if isinstance(v, torch.Tensor)}
            end.record()
            torch.cuda._sleep(cycles)
            end.synchronize()
            waits.append(start.elapsed_time(end) * 1e-3)
            del moved
    torch.cuda.synchronize()
    loader.close()
    return waits[2:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=200)
    args = ap.parse_args()
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    cycles = sleep_cycles_for(0.020)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (batch, members) in SHAPES.items():
            shard = str(Path(tmp) / f"{name}.tar")
            write_shard(Path(shard), members, batch * 4)
            ratios = []
            for _ in range(3):
                per_copy, nbytes = stoker_copy_s(shard, members, batch, 40)
                ratios.append(torch_pinned_copy_s(nbytes) / per_copy)
            med = statistics.median(ratios)
            print(f"{name}: copy speed vs pinned cudaMemcpyAsync {med:.2f}x (min {min(ratios):.2f}, "
                  f"max {max(ratios):.2f})  {'PASS' if med >= 0.9 else 'MISS'} (target >= 0.9x)")
            for mode in ("stoker", "to(cuda, non_blocking)"):
                w = sorted(waits_with_step(shard, members, batch, args.batches, mode, cycles))
                p99 = w[min(len(w) - 1, int(0.99 * len(w)))]
                print(f"{name}: 20 ms GPU step, wait for the batch on the device [{mode}]: "
                      f"p50 {statistics.median(w) * 1e3:.2f} ms  p99 {p99 * 1e3:.2f} ms"
                      + (f"  {'PASS' if p99 <= 1e-3 else 'MISS'} (target p99 <= 1 ms)" if mode == "stoker" else ""))


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"({time.perf_counter() - start:.0f} s)")
