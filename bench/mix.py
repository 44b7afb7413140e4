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
    Mosaic streams        Mosaic Streaming: the three sources as MDS shards (MDSWriter), one
                          StreamingDataset(streams=[Stream(..., proportion=w)], epoch_size=N,
                          shuffle=True), the second Stream's remote= over the same +20 ms HTTP
                          (peers/mixtures.py), Pillow decode, in a torch DataLoader
    litdata Combined      litdata: the three sources through optimize(), CombinedStreamingDataset
                          (weights=w, iterate_over_all=False: it stops at the first source
                          exhausted, so its epoch is shorter), the second over +20 ms HTTP, in a
                          StreamingDataLoader

Mosaic and litdata each run at their best setting: after a warm-up epoch, one epoch per
point of their grid (num_workers x prefetch_factor, the peers section's grid) and the
fastest kept, then measured in the rounds beside the others. Each row: the steady rate
(samples/s, first batch to last), the time to the first batch, and the peak RSS of the
process tree (DataLoader workers included). Ratios are medians of per-round ratios. The
issue's Parquet source is not in the mix: a mixture's sources are all tar (and image
folders) or all Parquet (the engine reads one kind). A peer that is not installed
(requirements-bench.txt) or fails is a row with its reason. Writes
bench/results/<UTC>-mix.{json,md}.

    bash bench/run.sh --mix [--quick] [--reps N] [--note "how quiet the machine was"]
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
import peers  # noqa: E402
import vision  # noqa: E402
from peers import mixtures  # noqa: E402
from remote import Servers  # noqa: E402

WEIGHTS = (0.5, 0.3, 0.2)
LATENCY = 0.020
BATCH = 64
PEER_GRID = [(3, 2), (2, 2), (3, 4)]  # (num_workers, prefetch_factor): bench/peers' grid for both
TARGET_X = 2.0
QUIET = 0.35  # cores of other processes beside a row at most, for a "quiet" round (as bench/remote.py)
STOKER_HTTP = "stoker mix +http"
WDS = "wds RandomMix +http (DataLoader, 2 workers)"
MOSAIC = "Mosaic streams +http (DataLoader)"
LITDATA = "litdata Combined +http (StreamingDataLoader)"


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


def peer_makers(parts: list[list[Path]], data_dir: Path, base: str, count: int) -> tuple[dict, dict, dict]:
    """Mosaic's and litdata's mixtures, each a {setting: make}, their formats written once
    under the data folder (served by nginx: the second source's URL is base/<its folder>);
    a peer that cannot be installed or prepared is in the second dict with its reason."""
    makers, unavailable, made = {}, {}, {}
    fn = vision.PeerSample("V")
    work = data_dir / "mix-peers"
    for name, title in (("mosaic", MOSAIC), ("litdata", LITDATA)):
        try:
            if name == "mosaic":
                from peers.mosaic_streaming import MosaicStreaming

                MosaicStreaming().check()
                made[title] = mixtures.write_mds(parts, work / "mosaic")
                root = work / "mosaic"
                makers[title] = {s: mixtures.mosaic_mix(root, WEIGHTS, {1: f"{base}/mix-peers/mosaic/s1"}, count,
                                                        BATCH, fn, s, work / "cache" / "mosaic") for s in PEER_GRID}
            else:
                from peers.litdata_streaming import Litdata

                Litdata().check()
                made[title] = mixtures.write_litdata(parts, work / "litdata")
                root = work / "litdata"
                makers[title] = {s: mixtures.litdata_mix(root, WEIGHTS, {1: f"{base}/mix-peers/litdata/s1"}, BATCH,
                                                         fn, s, work / "cache" / "litdata") for s in PEER_GRID}
        except Exception as e:  # noqa: BLE001 - a peer that cannot run is a row with the reason
            unavailable[title] = str(e) if isinstance(e, peers.Unavailable) else f"{type(e).__name__}: {str(e)[:300]}"
            print(f"  {title}: not run: {unavailable[title]}", flush=True)
    return makers, unavailable, made


def setting_text(s) -> str:
    return f"num_workers={s[0]} prefetch_factor={s[1]}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--note", default="", help="how quiet the machine was, written into the results")
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
    best, grid, unavailable, made = {}, {}, {}, {}
    try:
        base = servers.url[LATENCY]
        local_sources = [brace(p) for p in parts]
        http_sources = [local_sources[0], brace(parts[1], base), local_sources[2]]
        wds_urls = [[str(p) for p in parts[0]], [f"pipe:curl -s {base}/{p.name}" for p in parts[1]],
                    [str(p) for p in parts[2]]]
        rows = {
            "stoker one source": stoker_one(shards),
            "stoker mix local": stoker_mix(local_sources, count),
            STOKER_HTTP: stoker_mix(http_sources, count),
            WDS: wds_mix(wds_urls),
        }
        makers, unavailable, made = peer_makers(parts, Path(data["dir"]), base, count)
        for title, by_setting in makers.items():
            try:
                vision.run_epoch(by_setting[PEER_GRID[0]], 0)  # warm-up (page cache, imports), discarded
                rates = {}
                for s, make in by_setting.items():
                    res = vision.run_epoch(make, 0)
                    rates[s] = res["steady_rate"]
                    print(f"  tune {title} {setting_text(s)}: {res['steady_rate']:.0f} samples/s "
                          f"({res['samples']} samples, first batch {res['ttfb_s']:.2f} s)", flush=True)
                s = max(rates, key=rates.get)
                best[title], grid[title] = setting_text(s), {setting_text(k): v for k, v in rates.items()}
                rows[title] = by_setting[s]
            except Exception as e:  # noqa: BLE001
                unavailable[title] = f"failed: {type(e).__name__}: {str(e)[:300]}"
                print(f"  {title}: not run: {unavailable[title]}", flush=True)
        results: dict[str, list[dict]] = {k: [] for k in rows}
        for r in range(reps + 1):
            order = list(rows.items()) if r % 2 == 0 else list(reversed(rows.items()))  # no row always last
            for name, make in order:
                if name in unavailable:
                    continue
                try:
                    res = vision.run_epoch(make, "jpg")
                except Exception as e:  # noqa: BLE001
                    unavailable[name] = f"failed in round {r}: {type(e).__name__}: {str(e)[:300]}"
                    print(f"  {name}: not run: {unavailable[name]}", flush=True)
                    continue
                res["round"] = r
                if r > 0:
                    results[name].append(res)
                print(f"  round {r} {name}: {res['steady_rate']:.0f} samples/s, first batch {res['ttfb_s']:.2f} s, "
                      f"peak RSS {res.get('peak_rss', float('nan')) / 2**20:.0f} MB, {res['samples']} samples, "
                      f"others' CPU {res['other_cpu_cores']:.2f} cores", flush=True)
    finally:
        servers.close()
    results = {k: v for k, v in results.items() if k not in unavailable and v}

    def med(name, key):
        return statistics.median(x[key] for x in results[name])

    def ratios(a, b, quiet=False):
        """Per-round ratios of a's rate over b's; quiet: only rounds where neither row had more
        than QUIET cores of other processes beside it (the machine is shared)."""
        by_round = {y["round"]: y for y in results[b]}
        return [x["steady_rate"] / by_round[x["round"]]["steady_rate"] for x in results[a] if x["round"] in by_round
                and (not quiet or max(x["other_cpu_cores"], by_round[x["round"]]["other_cpu_cores"]) <= QUIET)]

    def ratio(a, b):
        return statistics.median(ratios(a, b))

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [f"# Mixtures, V shards ({count} samples, 3 sources by {WEIGHTS}), {when}", ""]
    if args.note:
        lines += [f"Machine: {args.note}", ""]
    lines += [f"{reps} measured rounds (round 0 a discarded warm-up), rows alternated (the order reversed every "
              f"other round); figures are medians; a ratio's rounds are the min-max of its per-round ratios, its "
              f"quiet rounds those where neither row had more than {QUIET} cores of other processes beside it.", "",
              "| loader | setting | samples/s | first batch s | peak RSS MB | samples/epoch | others' CPU cores |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for name in results:
        setting = best.get(name, "num_workers=2" if name == WDS else "defaults")
        lines.append(f"| {name} | {setting} | {med(name, 'steady_rate'):.0f} | {med(name, 'ttfb_s'):.2f} | "
                     f"{med(name, 'peak_rss') / 2**20:.0f} | {med(name, 'samples'):.0f} | "
                     f"{med(name, 'other_cpu_cores'):.2f} |")
    for name, why in unavailable.items():
        lines.append(f"| {name} | not run: {why} | | | | | |")
    lines.append("")
    if "stoker mix local" in results and "stoker one source" in results:
        lines.append(f"- mixture / one source (local): {ratio('stoker mix local', 'stoker one source'):.2f}x "
                     "(target >= 0.95x)")
    for peer in (WDS, MOSAIC, LITDATA):
        if STOKER_HTTP in results and peer in results:
            xs, qs = ratios(STOKER_HTTP, peer), ratios(STOKER_HTTP, peer, quiet=True)
            x = statistics.median(xs)
            quiet = (f"quiet rounds {statistics.median(qs):.2f}x ({len(qs)})" if qs else "no quiet round")
            lines.append(f"- {STOKER_HTTP} / {peer}: {x:.2f}x (rounds {min(xs):.2f}-{max(xs):.2f}; {quiet}; "
                         f"target >= {TARGET_X:g}x: {'PASS' if x >= TARGET_X else 'MISS'}); "
                         f"first batch {med(STOKER_HTTP, 'ttfb_s'):.2f} s "
                         f"against {med(peer, 'ttfb_s'):.2f} s, peak RSS {med(STOKER_HTTP, 'peak_rss') / 2**20:.0f} "
                         f"against {med(peer, 'peak_rss') / 2**20:.0f} MB")
        elif peer in unavailable:
            lines.append(f"- {STOKER_HTTP} / {peer}: not measured ({unavailable[peer]})")
    if grid:
        lines += ["", "Peer grids (one epoch each after a warm-up, steady samples/s; the best kept):"]
        for name, g in grid.items():
            lines.append(f"- {name}: " + ", ".join(f"{k}: {v:.0f}" for k, v in g.items()))
    if made:
        lines += ["", "Peer formats:"] + [f"- {name}: {how}" for name, how in made.items()]
    text = "\n".join(lines)
    print(text)
    out = ROOT / "bench/results" / f"{time.strftime('%Y-%m-%dT%H%MZ', time.gmtime())}-mix"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(text + "\n")
    payload = {"count": count, "weights": WEIGHTS, "latency_s": LATENCY, "reps": reps, "note": args.note,
               "best": best, "grid": grid, "unavailable": unavailable, "made": made, "runs": results}
    out.with_suffix(".json").write_text(json.dumps(vision.to_jsonable(payload), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
