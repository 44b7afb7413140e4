"""Workload A measured two ways beside each other (issue #8): the suite's way (a fresh
loader per epoch, steady rate from its first batch: bench/suite.py run_epoch) and a
continuous one (one loader, 10 epochs back to back, all samples after the first batch
over all time after it), each with STOKER_MMAP=1 (mapped shards, the default) and
STOKER_MMAP=0 (pread), alternated, with numpy memcpy on 2 threads (the suite's limit)
measured between rounds. The suite's 12-batch epochs of fresh loaders carry per-loader
start-up (first fills of the batch buffers, the observer's first batches) inside their
steady window; the continuous figure is the engine's steady state.
    PYTHONPATH=python python bench/a_two_ways.py   # after bench/run.sh made bench/data/A-n768-seed0
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers  # noqa: E402
import suite  # noqa: E402
import vision  # noqa: E402

w = suite.WORKLOADS["A"]
data = suite.prepare(w, w["quick_count"])
shards = data["shards"]
bps = 256 * 256 * 4 + 64 * 16 * 16 * 2 + 16
res: dict = {}
mc = []
for r in range(int(os.environ.get("REPS", "4"))):
    for m in ("1", "0") if r % 2 == 0 else ("0", "1"):
        os.environ["STOKER_MMAP"] = m
        x = vision.run_epoch(peers.stoker_loader(w, shards, 2, 2), "x.npy")
        res.setdefault(("fresh loader per epoch (the suite's)", m), []).append(x["steady_rate"])
        loader = peers.stoker_loader(w, shards, 2, 2)()
        n, t0 = 0, None
        for e in range(10):
            loader.set_epoch(e)
            for b in loader:
                if t0 is None:
                    t0 = time.perf_counter()
                    continue
                n += b["x.npy"].shape[0]
        res.setdefault(("one loader, 10 epochs", m), []).append(n / (time.perf_counter() - t0))
        loader.close()
    mc.append(suite.memcpy_bandwidth(2, 3)["GB_per_s"]["median"])
limit = statistics.median(mc)
print(f"memcpy 2 threads: median {limit:.1f} GB/s {[round(v, 1) for v in mc]}")
for (how, m), v in res.items():
    med = statistics.median(v)
    print(f"{how:<38} STOKER_MMAP={m}: {med:9,.0f} samples/s [{min(v):,.0f}-{max(v):,.0f}]"
          f" = {med * bps / 1e9:.2f} GB/s = {med * bps / 1e9 / limit:.2f}x memcpy")
