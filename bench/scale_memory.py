"""Per-rank memory against dataset size (issue 31): the resident memory a
stoker.Loader adds by its first batch, rank 0 of 8, shuffle=True, over local
tar shards of 10,000 tiny samples each (a 16-byte .bin member and a .cls
member, written by Python's tarfile). A loader whose cost is set by its shards
and read-ahead grows little with the sample count; one that plans or indexes
every sample grows with it.

Each measurement runs in a fresh process: RSS (VmRSS) after `import stoker`
and the shard list, then after the first batch; the growth is the difference,
and the peak growth is the high-water mark (VmHWM) less the same start.
The shards are written once under --dir (4 GB for 2M samples; the tar format
pads each member to 1 KiB) and reused; the first --samples/10,000 of them make
each dataset.

    python bench/scale_memory.py [--sizes 200000,1000000,2000000] [--dir /tmp/stoker-scale] [--index]

--index measures shards with `.idx` sidecars (`stoker index`, written once
beside hard links of the shards in <dir>-idx): the loader then reads the
sidecars instead of scanning the tar headers.
"""
from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

PER_SHARD = 10_000


def write_shard(path: str, shard: int, per_shard: int = PER_SHARD) -> None:
    if os.path.exists(path):
        return
    tmp = path + ".part"
    with tarfile.open(tmp, "w", format=tarfile.USTAR_FORMAT) as tar:
        for i in range(per_shard):
            key = f"{shard:05d}{i:06d}"
            for ext, data in (("bin", os.urandom(16)), ("cls", str(i % 1000).encode())):
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                info.mtime = 0
                tar.addfile(info, io.BytesIO(data))
    os.replace(tmp, path)


def shards_for(root: Path, samples: int, per_shard: int = PER_SHARD) -> list[str]:
    """The first ceil(samples / per_shard) shards under root, written where missing
    (bench/scale.py's tests ask for small shards; a folder holds one shard size)."""
    n = (samples + per_shard - 1) // per_shard
    root.mkdir(parents=True, exist_ok=True)
    paths = [str(root / f"scale-{s:05d}.tar") for s in range(n)]
    if not all(os.path.exists(p) for p in paths):
        with ProcessPoolExecutor(max_workers=2) as pool:
            list(pool.map(write_shard, paths, range(n), [per_shard] * n))
    return paths


CHILD = r"""
import json, sys
def rss_mb(field="VmRSS:"):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1]) / 1024
import stoker
shards = json.loads(sys.argv[1])
before = rss_mb()
import time
t0 = time.monotonic()
loader = stoker.Loader(shards, fields={"cls": stoker.scalar("int64")}, batch_size=64, shuffle=True, rank=0,
                       world_size=8, output="numpy", observe=False)
batch = next(iter(loader))
t1 = time.monotonic()
after = rss_mb()
print(json.dumps({"rss_before_mb": before, "rss_growth_mb": after - before, "peak_growth_mb": rss_mb("VmHWM:") - before,
                  "first_batch_s": t1 - t0}))
loader.close()
"""


def measure(shards: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(shards)], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="200000,1000000,2000000")
    ap.add_argument("--dir", default="/tmp/stoker-scale")
    ap.add_argument("--index", action="store_true", help="write .idx sidecars with `stoker index` first")
    ap.add_argument("--reps", type=int, default=1)
    args = ap.parse_args()
    root = Path(args.dir)
    sizes = [int(s) for s in args.sizes.split(",")]
    t0 = time.monotonic()
    shards_for(root, max(sizes))
    print(f"shards ready under {root} ({time.monotonic() - t0:.0f} s)", flush=True)
    if args.index:
        # Sidecars beside hard links of the same shards, in a directory of
        # their own: the plain runs keep scanning the tar headers.
        import stoker._cli as cli

        indexed = root.with_name(root.name + "-idx")
        indexed.mkdir(exist_ok=True)
        for p in shards_for(root, max(sizes)):
            link = indexed / Path(p).name
            if not link.exists():
                os.link(p, link)
            if not Path(str(link) + ".idx").exists():
                subprocess.run([cli.binary(), "index", str(link)], check=True, capture_output=True)
        root = indexed
    import stoker

    print(f"stoker {getattr(stoker, '__version__', '?')} from {os.path.dirname(stoker.__file__)}")
    print(f"{'samples':>10} {'shards':>7} {'RSS growth MB':>14} {'per sample B':>13} {'peak growth MB':>15} "
          f"{'first batch s':>14}")
    for n in sizes:
        shards = shards_for(root, n)
        runs = [measure(shards) for _ in range(args.reps)]
        growth = min(r["rss_growth_mb"] for r in runs)
        peak = min(r["peak_growth_mb"] for r in runs)
        first = min(r["first_batch_s"] for r in runs)
        print(f"{n:>10,} {len(shards):>7} {growth:>14.1f} {growth * 2**20 / n:>13.0f} {peak:>15.1f} {first:>14.2f}",
              flush=True)


if __name__ == "__main__":
    main()
