"""What recording costs, in work: V epochs of stoker.Loader with the observer and stage
recorder on (window=100000, as bench/suite.py's pair) and off (observe=False,
record_stats=False), both autotune=False, alternated epoch by epoch in one process.

Per epoch it takes the process's CPU seconds per batch (every thread: decoders, readers,
the consumer) and the consumer thread's own CPU per batch, from the first batch to the
last (construction and close left out, as the suite's steady rate leaves them out). CPU
seconds are what the recording adds; other processes on the machine stretch the wall
time but not them, so this resolves 1% on a shared machine where the rate does not.

    python3 bench/recording_overhead.py [--data bench/data/V-n3072-seed0] [--epochs 8] [--out FILE.md]

(bench/run.sh --quick makes bench/data/V-n768-seed0; the full suite V-n3072-seed0.)
Benchmarks are not tests: nothing here fails.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import stoker

MODES = {"on": dict(observe=True, window=100000), "off": dict(observe=False, record_stats=False)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(Path(__file__).parent / "data" / "V-n3072-seed0"))
    ap.add_argument("--epochs", type=int, default=8, help="epochs of each, alternated (on off, off on, ...)")
    ap.add_argument("--out", help="also write the result here (bench/results/<UTC>-recording.md)")
    a = ap.parse_args()
    shards = sorted(os.path.join(a.data, f) for f in os.listdir(a.data) if f.endswith(".tar"))
    fields = {"jpg": stoker.image(224, resize="center_crop"), "cls": stoker.scalar("int64")}
    res: dict[str, list] = {m: [] for m in MODES}
    for e in range(a.epochs):
        for m in (list(MODES) if e % 2 == 0 else list(MODES)[::-1]):
            loader = stoker.Loader(shards, fields, batch_size=64, shuffle=False, decode_threads=2, io_depth=2,
                                   prefetch=2, output="torch", autotune=False, **MODES[m])
            it = iter(loader)
            next(it)  # from the first batch on
            thread0, proc0, wall0, n = time.thread_time(), time.process_time(), time.perf_counter(), 0
            for _ in it:
                n += 1
            res[m].append(((time.process_time() - proc0) / n, (time.thread_time() - thread0) / n,
                           (time.perf_counter() - wall0) / n))
            loader.close()
            del it, loader
    pairs = [on[0] / off[0] - 1 for on, off in zip(res["on"], res["off"])]
    lines = [f"{len(shards)} shards of {a.data}, batch 64, decode_threads=2, io_depth=2, prefetch=2, "
             f"autotune=False; {a.epochs} epochs of each, alternated; {n + 1} batches an epoch"]
    for m in MODES:
        p, t, w = (statistics.median(x[i] for x in res[m]) for i in range(3))
        lines.append(f"{m}: process CPU {1e3 * p:.2f} ms/batch, consumer thread {1e6 * t:.0f} us/batch, "
                     f"wall {1e3 * w:.1f} ms/batch")
    lines.append(f"process CPU on/off - 1, per alternated pair: median {100 * statistics.median(pairs):+.1f}% "
                 f"[{100 * min(pairs):+.1f}..{100 * max(pairs):+.1f}]")
    lines.append(f"consumer thread on - off: {1e6 * (statistics.median(x[1] for x in res['on']) - statistics.median(x[1] for x in res['off'])):+.0f} us/batch")
    print("\n".join(lines))
    if a.out:
        cmd = " ".join(["python3", "bench/recording_overhead.py", *sys.argv[1:]])
        Path(a.out).write_text(f"# Recording overhead in CPU seconds\n\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
                               f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}\n\n`{cmd}`\n\n```\n"
                               + "\n".join(lines) + "\n```\n", encoding="utf-8")
        print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
