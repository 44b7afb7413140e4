"""Where a stoker loader's time to first batch goes (bench/suite.py's target:
first batch <= 1.3x one batch's decode on all cores), on V, S, P or A (the data
folder's name says which: bench/data/V-..., S-..., P-... or A-...).

Runs the suite's sequence for that workload (construct the Loader, iterate one epoch, close)
with the engine's stage spans on, and splits the first batch into: time to
the first read (construction: shard indexes, probe, layout, threads), batch
0's decode wall time and its decoders' busy time per thread, against a steady
batch (batch 6), and the hand-over to Python. Medians over the rounds after a
discarded warm-up. Timestamps share one clock (CLOCK_MONOTONIC: Python's
monotonic_ns and the engine's steady_clock).

    PYTHONPATH=python python bench/first_batch.py bench/data/V-n768-seed0 [rounds]
    PYTHONPATH=python python bench/first_batch.py bench/data/A-n768-seed0 [rounds]
    PYTHONPATH=python python bench/first_batch.py bench/data/S-n384-seed0 [rounds]
"""
from __future__ import annotations

import collections
import gc
import glob
import json
import statistics
import sys
import time
from pathlib import Path

import torch  # noqa: F401 - the loader hands out torch tensors, as in the suite

import stoker
from stoker import _stoker


WORKLOADS = {  # the suite's fields (bench/peers/stoker_tar.py), the member the batch is counted on, batch size
    "V": (lambda: {"jpg": stoker.image(224, resize="center_crop"), "cls": stoker.scalar("int64")}, "jpg", 64),
    "S": (lambda: {"jpg": stoker.image(1024, resize="longest"), "features.npz": stoker.npz()}, "jpg", 8),
    "P": (lambda: {"png": stoker.image(224, resize="center_crop"), "cls": stoker.scalar("int64")}, "png", 64),
    "A": (lambda: {"x.npy": stoker.npy(), "y.npz": stoker.npz()}, "x.npy", 64),
}


def one_round(shards: list[str], workload: str = "V") -> dict:
    make_fields, key, batch_size = WORKLOADS[workload]
    fields = make_fields()
    gc.collect()
    t0 = time.monotonic_ns()
    loader = stoker.Loader(shards, fields=fields, batch_size=batch_size, shuffle=False, decode_threads=2, io_depth=2,
                           prefetch=2, output="torch", window=100000, trace_spans=100000)
    origin = time.monotonic_ns() - int(_stoker.stage_snapshot(loader._native).time_s * 1e9)  # the engine's t=0
    n = n_first = 0
    t_first = None
    for b in loader:
        n += b[key].shape[0]
        if t_first is None:
            t_first, n_first = time.monotonic_ns(), n
        del b
    t_last = time.monotonic_ns()
    spans = json.loads(loader._native.trace_json())["traceEvents"]
    loader.close()
    at = lambda us: origin + int(us * 1000)  # noqa: E731 - engine microseconds -> our nanoseconds
    by_batch, seen = collections.defaultdict(list), set()
    for e in sorted((e for e in spans if e.get("name") == "decode" and at(e["ts"]) < t_last), key=lambda e: e["ts"]):
        key = (e["args"]["batch"], e["args"]["slot"])
        if key not in seen:  # the next epoch's batch of the same number, prepared ahead, comes later
            seen.add(key)
            by_batch[key[0]].append(e)

    def batch(b):
        es = by_batch[b]
        begin, end = min(at(e["ts"]) for e in es), max(at(e["ts"] + e["dur"]) for e in es)
        return begin, end, sum(e["dur"] for e in es) / 1e3 / 2

    s0, f0, busy0 = batch(0)
    s6, f6, busy6 = batch(6)
    steady = (n - n_first) / ((t_last - t_first) / 1e9)
    first_read = min(at(e["ts"]) for e in spans if e.get("name") == "read")
    ms = lambda ns: ns / 1e6  # noqa: E731
    return {"ratio": (t_first - t0) / 1e9 * steady / batch_size, "ttfb_ms": ms(t_first - t0),
            "batch_ms": batch_size * 1e3 / steady,
            "to_first_read_ms": ms(first_read - t0), "to_first_decode_ms": ms(s0 - t0),
            "b0_wall_ms": ms(f0 - s0), "b0_busy_per_thread_ms": busy0,
            "b6_wall_ms": ms(f6 - s6), "b6_busy_per_thread_ms": busy6, "handover_ms": ms(t_first - f0)}


def main() -> int:
    shards = sorted(glob.glob(sys.argv[1] + "/*.tar"))
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    workload = Path(sys.argv[1].rstrip("/")).name[0]
    rows = [one_round(shards, workload) for _ in range(rounds + 1)][1:]
    for r in rows:
        print(" ".join(f"{k}={v:.2f}" for k, v in r.items()))
    print("median", " ".join(f"{k}={statistics.median(r[k] for r in rows):.2f}" for k in rows[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
