"""What the benches' memory sampler costs the loader it measures (why bench/mix.py times its
rounds without it): stoker's local mixture of bench/mix.py, one epoch with the sampler
(common.TreeSampler, /proc of the process tree every 50 ms) and one without, alternated,
before and after Mosaic Streaming and litdata ran an epoch in the same process.

    PYTHONPATH=... python bench/sampler_cost.py [--quick]

Prints one line per pair: samples/s with and without the sampler, the process's mappings
and the time of one /proc read of the tree. Writes bench/results/<UTC>-sampler-cost.md.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests/python"))
import common  # noqa: E402
import mix  # noqa: E402
import vision  # noqa: E402
from remote import Servers  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args(argv)
    count, shards, parts, data_dir, parquet = mix.prepare(args.quick)
    hub = (f"{parquet}/*.parquet", mix.HUB_COLUMNS)
    make = mix.stoker_mix([(mix.brace(parts[0]), None), (mix.brace(parts[1]), None), hub], count)
    lines = [f"# The memory sampler's cost to stoker's rate ({count} V samples, stoker mix local), "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}", "",
             "| when | with sampler samples/s | without samples/s | mappings | one tree read ms |",
             "| --- | ---: | ---: | ---: | ---: |"]

    def pair(when: str) -> None:
        a = vision.run_epoch(make, "jpg")
        b = vision.run_epoch(make, "jpg", memory=False)
        t = time.perf_counter()
        common.tree_rollup()
        read_ms = (time.perf_counter() - t) * 1000
        maps = sum(1 for _ in open("/proc/self/maps"))
        lines.append(f"| {when} | {a['steady_rate']:.0f} | {b['steady_rate']:.0f} | {maps} | {read_ms:.1f} |")
        print(lines[-1], flush=True)

    servers = Servers(data_dir, [mix.LATENCY])
    try:
        for _ in range(2):
            pair("before any peer")
        makers, unavailable, _ = mix.peer_makers(parts, data_dir, servers.url[mix.LATENCY], count)
        for title, by_setting in makers.items():
            vision.run_epoch(by_setting[mix.PEER_GRID[0]], 0, memory=False)
            for _ in range(2):
                pair(f"after {title}")
        for title, why in unavailable.items():
            lines.append(f"| {title} not run: {why} | | | | |")
    finally:
        servers.close()
    out = HERE / "results" / f"{time.strftime('%Y-%m-%dT%H%MZ', time.gmtime())}-sampler-cost.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
