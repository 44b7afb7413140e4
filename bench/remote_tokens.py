"""Megatron token windows read over HTTP: a synthetic .bin/.idx (6,000
documents of 50-3,000 tokens) served by nginx on loopback behind the fault
proxy (tests/python/fault_proxy.py) adding 20 ms per request, against the
same files memory-mapped. TokenLoader, seq_len 2048, batch 8, 400 samples
after the first batch, at each io_depth given (default: auto and 2, the old
default). Prints samples/s per row; run alone on a quiet machine.

    python3 bench/remote_tokens.py [--latency 0.02] [--io-depth auto,2,16]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests/python"))
import stoker  # noqa: E402
from stoker import _stoker  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402
from nginx_server import NginxServer  # noqa: E402


def write_tokens(prefix: str) -> None:
    rng = np.random.default_rng(1)
    w = _stoker.MegatronWriter.create(prefix, "uint16")
    for _ in range(6000):
        w.add(rng.integers(0, 60000, size=int(rng.integers(50, 3000))).astype(np.int64))
    w.finish()


def rate(path: str, io_depth, cache: str) -> float:
    loader = stoker.TokenLoader(path, seq_len=2048, batch_size=8, io_depth=io_depth, output="numpy",
                                cache_dir=cache, observe=False)
    it = iter(loader)
    next(it)
    t0, n = time.perf_counter(), 0
    for batch in it:
        n += len(batch["tokens"])
        if n >= 400:
            break
    return n / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency", type=float, default=0.02)
    ap.add_argument("--io-depth", default="auto,2")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        write_tokens(str(data / "tok"))
        nginx = NginxServer(data)
        proxy = FaultProxy(nginx.port, latency=a.latency)
        try:
            for depth in a.io_depth.split(","):
                io_depth = None if depth == "auto" else int(depth)
                local = rate(str(data / "tok"), io_depth, f"{tmp}/cache")
                remote = rate(f"{proxy.url}/tok", io_depth, f"{tmp}/cache")
                print(f"io_depth {depth:>4}: local {local:9.0f} samples/s   http+{a.latency * 1e3:.0f}ms "
                      f"{remote:6.0f} samples/s", flush=True)
        finally:
            proxy.close()
            nginx.close()


if __name__ == "__main__":
    main()
