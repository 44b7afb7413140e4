"""Mixtures (issue 42): three sources by 0.5 / 0.3 / 0.2, shuffled, image 224
(workload V's shards: ~500x375 JPEG -> 224 center crop, batch 64), in one
process, alternated per round (round 0 a discarded warm-up, median of --reps):

    stoker one source     stoker.Loader over every shard, shuffle=True (the same data unmixed)
    stoker mix local      stoker.mix of the shards cut into three local sources
    stoker mix +http      the same, the second source over HTTP (nginx + a 20 ms/request proxy),
                          its shards with their sidecar indexes (`stoker index`) beside them
    wds RandomMix         webdataset.RandomMix of three WebDatasets (the second over pipe:curl
                          +20 ms), shard shuffle + a 1000-sample buffer each, Pillow decode, in a
                          torch DataLoader, num_workers 2 (the issue's baseline)

Each row: the steady rate (samples/s, first batch to last), the time to the
first batch, and the peak RSS of the process tree. Ratios are medians of
per-round ratios. The issue's Parquet source is not in the mix: a mixture's
sources are all tar (and image folders) or all Parquet (the engine reads one
kind), and Mosaic Streaming and litdata run only where installed
(requirements-bench.txt). Writes bench/results/<UTC>-mix.{json,md}.

    bash bench/run.sh --mix [--quick]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests/python"))
import vision  # noqa: E402
from remote import Servers  # noqa: E402

WEIGHTS = (0.5, 0.3, 0.2)
LATENCY = 0.020


def split(shards: list[Path]) -> list[list[Path]]:
    """The shards cut into three sources of 1/2, 1/4 and 1/4 of them."""
    n = len(shards)
    a, b = n // 2, n // 2 + n // 4
    return [shards[:a], shards[a:b], shards[b:]]


def brace(paths: list[Path], base: str | None = None) -> str:
    """One source string for consecutive shard-NNNNNN.tar files (a brace range)."""
    first, last = paths[0].stem.split("-")[1], paths[-1].stem.split("-")[1]
    root = base if base is not None else str(paths[0].parent)
    return f"{root}/shard-{{{first}..{last}}}.tar"


def stoker_one(shards):
    import stoker

    def make():
        return stoker.Loader([str(p) for p in shards], fields={"jpg": stoker.image(224, resize="center_crop"),
                                                                "cls": stoker.scalar()},
                             batch_size=64, shuffle=True, seed=0, observe=False)
    return make


def stoker_mix(sources: list[str], total: int):
    import stoker

    def make():
        mixture = stoker.mix({f"s{i}": (src, w) for i, (src, w) in enumerate(zip(sources, WEIGHTS))},
                             samples_per_epoch=total)
        return stoker.Loader(mixture, fields={"jpg": stoker.image(224, resize="center_crop"), "cls": stoker.scalar()},
                             batch_size=64, shuffle=True, seed=0, observe=False)
    return make


def wds_mix(urls: list[list[str]], workers: int = 2):
    import torch
    import webdataset as wds

    fn = vision.PeerSample("V")

    def make():
        parts = [wds.WebDataset(u, shardshuffle=len(u), empty_check=False, seed=i).shuffle(1000).map(fn)
                 for i, u in enumerate(urls)]
        mixed = wds.RandomMix(parts, list(WEIGHTS), longest=True)
        return torch.utils.data.DataLoader(mixed, batch_size=64, num_workers=workers,
                                           persistent_workers=False)
    return make


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    args = ap.parse_args(argv)
    w = vision.WORKLOADS["V"]
    count = w["quick_count"] if args.quick else w["count"]
    reps = args.reps or (2 if args.quick else 3)
    shards, data = vision.prepare_data(HERE / "data", "V", count, 0, "auto")
    parts = split(shards)
    # stoker at its best over HTTP: the shards' sidecar indexes beside them (`stoker index`,
    # as docs/guides/stream.md advises), so no shard is read whole to count its samples first.
    import subprocess

    import stoker._cli

    subprocess.run([stoker._cli.binary(), "index", "--quiet", "--no-manifest", *map(str, shards)], check=True)
    servers = Servers(Path(data["dir"]), [LATENCY])
    try:
        base = servers.url[LATENCY]
        local_sources = [brace(p) for p in parts]
        http_sources = [local_sources[0], brace(parts[1], base), local_sources[2]]
        wds_urls = [[str(p) for p in parts[0]], [f"pipe:curl -s {base}/{p.name}" for p in parts[1]],
                    [str(p) for p in parts[2]]]
        rows = {
            "stoker one source": stoker_one(shards),
            "stoker mix local": stoker_mix(local_sources, count),
            "stoker mix +http": stoker_mix(http_sources, count),
            "wds RandomMix +http (DataLoader, 2 workers)": wds_mix(wds_urls),
        }
        results: dict[str, list[dict]] = {k: [] for k in rows}
        for r in range(reps + 1):
            for name, make in rows.items():
                res = vision.run_epoch(make, "jpg")
                if r > 0:
                    results[name].append(res)
                print(f"  round {r} {name}: {res['steady_rate']:.0f} samples/s, first batch {res['ttfb_s']:.2f} s, "
                      f"peak RSS {res.get('peak_rss', float('nan')) / 2**20:.0f} MB", flush=True)
    finally:
        servers.close()

    def med(name, key):
        return statistics.median(x[key] for x in results[name])

    def ratio(a, b):
        return statistics.median(x["steady_rate"] / y["steady_rate"] for x, y in zip(results[a], results[b]))

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"# Mixtures, V shards ({count} samples, 3 sources by {WEIGHTS}), {when}",
             "", "| loader | samples/s | first batch s | peak RSS MB |", "| --- | ---: | ---: | ---: |"]
    for name in rows:
        lines.append(f"| {name} | {med(name, 'steady_rate'):.0f} | {med(name, 'ttfb_s'):.2f} | "
                     f"{med(name, 'peak_rss') / 2**20:.0f} |")
    lines += ["",
              f"- mixture / one source (local): {ratio('stoker mix local', 'stoker one source'):.2f}x "
              "(target >= 0.95x)",
              f"- stoker mix +http / wds RandomMix +http: "
              f"{ratio('stoker mix +http', 'wds RandomMix +http (DataLoader, 2 workers)'):.2f}x (target >= 2x)"]
    text = "\n".join(lines)
    print(text)
    out = ROOT / "bench/results" / f"{time.strftime('%Y-%m-%dT%H%MZ', time.gmtime())}-mix"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(text + "\n")
    out.with_suffix(".json").write_text(json.dumps(vision.to_jsonable(results), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
