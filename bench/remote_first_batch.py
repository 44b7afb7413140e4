"""Time to the first batch over HTTP, from a dataset manifest against the
shards themselves (issue 31): nginx on loopback behind the fault proxy
(tests/python/fault_proxy.py) adding --latency seconds per request, tiny
JPEG samples in --shards shards with `stoker index` sidecars and manifest.
Each measurement in a fresh process (the HTTP client pins each object it
opens for the process, so a second loader would find them opened), after a
warm-up loader over a local shard: the seconds from constructing
stoker.Loader(shuffle=True, defaults) to its first batch, the requests the
proxy saw by then (the read-ahead of the batches after it included), and how
many shards' indexes they read.

    python bench/remote_first_batch.py [--shards 20,200] [--latency 0.05] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests/python"))


def dataset(root: Path, shards: int) -> Path:
    from conftest import stoker_bin, stoker_env, write_vision_shards

    d = root / f"first-batch-{shards}"
    if not (d / "stoker-manifest.json").exists():
        write_vision_shards(d, shards=shards, per_shard=16, size=(40, 30), seed=5)
        subprocess.run([stoker_bin(), "index", "-q", str(d)], check=True, env=stoker_env())
    return d


def one(directory: str, source: str, latency: float) -> dict:
    """In this process: the loader from `source` (relative to the served folder)."""
    import stoker
    from stoker import _stoker
    from fault_proxy import FaultProxy
    from nginx_server import NginxServer

    root = Path(directory)
    warm = stoker.Loader(str(root / "shard-000000.tar"), {"cls": stoker.scalar("int64")}, batch_size=4,
                         output="numpy")
    next(iter(warm))
    warm.close()
    server = NginxServer(root)
    proxy = FaultProxy(server.port, latency=latency)
    _stoker.set_io_options(attempts=5, timeout_ms=5000, backoff_ms=5, backoff_max_ms=50, s3_endpoint="",
                           cache_dir="", cache_bytes=0)
    try:
        t = time.monotonic()
        ld = stoker.Loader(f"{proxy.url}/{source}", {"jpg": stoker.image(32, resize="center_crop", layout="HWC"),
                                                     "cls": stoker.scalar("int64")},
                           batch_size=64, shuffle=True, seed=1, output="numpy")
        next(iter(ld))
        seconds = time.monotonic() - t
        with proxy.lock:
            requests, gets = proxy.requests, dict(proxy.gets)
        ld.close()
    finally:
        proxy.close()
        server.close()
    return {"seconds": seconds, "requests": requests,
            "indexes_read": sum(1 for p in gets if p.endswith(".idx")),
            "shards_read": sum(1 for p in gets if p.endswith(".tar"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shards", default="20,200")
    ap.add_argument("--latency", type=float, default=0.05)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "stoker-first-batch"))
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # DIR SOURCE: a measurement, in this process
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], args.latency)))
        return
    print(f"first batch over HTTP at +{args.latency * 1000:.0f} ms a request, batch 64, shuffle=True, defaults; "
          f"median of {args.rounds} fresh processes")
    print(f"{'shards':>7}  {'source':<10} {'first batch s':>14} {'requests':>9} {'indexes read':>13}")
    for n in (int(s) for s in args.shards.split(",")):
        d = dataset(Path(args.dir), n)
        for label, source in (("manifest", "stoker-manifest.json"),
                              ("shards", f"shard-{{000000..{n - 1:06d}}}.tar")):
            runs = [json.loads(subprocess.run([sys.executable, __file__, "--latency", str(args.latency), "--one",
                                               str(d), source], check=True, capture_output=True,
                                              text=True).stdout.strip().splitlines()[-1])
                    for _ in range(args.rounds)]
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(f"{n:>7}  {label:<10} {med['seconds']:>14.2f} {med['requests']:>9.0f} "
                  f"{med['indexes_read']:>13.0f}")


if __name__ == "__main__":
    main()
