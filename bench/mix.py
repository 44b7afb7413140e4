"""Mixtures (issue 42): three sources by 0.5 / 0.3 / 0.2, shuffled, image 224
(workload V's shards: ~500x375 JPEG -> 224 center crop, batch 64), in one
process, alternated per round (round 0 a discarded warm-up, median of --reps):

    stoker one source     stoker.Loader over every tar shard, shuffle=True (the same data unmixed)
    stoker mix local      stoker.mix of the three sources, local: two of tar shards and the
                          third as Parquet, written from its shards the way the Hub writes
                          (`datasets`: an image struct {bytes, path} and a label; its columns
                          named onto the loader's fields by stoker.Source(members=))
    stoker mix +http      the same, the second source over HTTP (nginx + a 20 ms/request proxy),
                          its shards with their sidecar indexes (`stoker index`) beside them
    stoker mix stream     stream=True: the three sources' tar shards (the second over the same
                          HTTP) read front to back as webdataset does, no index read, each
                          source an endless stream of its own (compared with RandomMix)
    wds RandomMix         webdataset.RandomMix of three WebDatasets of the tar shards (the second
                          over pipe:curl +20 ms), shard shuffle + a 1000-sample buffer each,
                          Pillow decode, in a torch DataLoader, num_workers 2 (the issue's baseline)
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
(samples/s, first batch to last) and the time to the first batch, from the rounds, and the
peak RSS of the process tree (DataLoader workers included) from one more epoch of the row
alone in a fresh process (as bench/suite.py measures memory). The rounds sample no memory:
a sampler reading /proc every 50 ms in the bench's process cost stoker's local mixture 18% of
its rate before any peer ran and 40% once Mosaic and litdata had run in that process (2,036
and 1,446-1,479 samples/s against 2,431-2,491 without it, the same epochs alternated;
bench/sampler_cost.py, bench/results/2026-12-07T0246Z-sampler-cost.md). Ratios are medians
of per-round ratios. The peers read the third source in
their own formats, made from its tar shards (webdataset: the tar shards themselves). A peer
that is not installed (requirements-bench.txt) or fails is a row with its reason. Writes
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
STOKER_STREAM = "stoker mix stream +http (tar x3)"
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


def stoker_mix(sources: list[tuple[str, dict | None]], total: int, stream: bool = False):
    """sources: (source string, the members its fields are read from) per source, by WEIGHTS;
    stream: stream=True (no index read: each source an endless stream of its own)."""
    import stoker

    def make():
        mixture = stoker.mix({f"s{i}": stoker.Source(src, w, members=members)
                              for i, ((src, members), w) in enumerate(zip(sources, WEIGHTS))},
                             samples_per_epoch=total)
        return stoker.Loader(mixture, fields={"jpg": stoker.image(224, resize="center_crop"), "cls": stoker.scalar()},
                             batch_size=64, shuffle=True, seed=0, observe=False, stream=stream)
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


HUB_COLUMNS = {"jpg": "image", "cls": "label"}  # the loader's fields from the Hub layout's columns


def stoker_and_wds_rows(shards: list[Path], parts: list[list[Path]], parquet: Path, base: str, count: int) -> dict:
    """The rows that need no peer format: {title: make}."""
    hub = (f"{parquet}/*.parquet", HUB_COLUMNS)
    local = [(brace(parts[0]), None), (brace(parts[1]), None), hub]
    http = [local[0], (brace(parts[1], base), None), hub]
    wds_urls = [[str(p) for p in parts[0]], [f"pipe:curl -s {base}/{p.name}" for p in parts[1]],
                [str(p) for p in parts[2]]]
    tar_http = [local[0], http[1], (brace(parts[2]), None)]  # a stream reads tar: the third source's shards
    return {"stoker one source": stoker_one(shards), "stoker mix local": stoker_mix(local, count),
            STOKER_HTTP: stoker_mix(http, count), STOKER_STREAM: stoker_mix(tar_http, count, stream=True),
            WDS: wds_mix(wds_urls)}


def prepare(quick: bool) -> tuple[int, list[Path], list[list[Path]], Path, Path]:
    """count, the V shards, their three sources, the data folder and the third source as Parquet."""
    w = vision.WORKLOADS["V"]
    count = w["quick_count"] if quick else w["count"]
    shards, data = vision.prepare_data(HERE / "data", "V", count, 0, "auto")
    parts = split(shards)
    data_dir = Path(data["dir"])
    parquet = data_dir / "mix-peers" / "parquet"
    mixtures.write_hub_parquet(parts[2], parquet)
    return count, shards, parts, data_dir, parquet


def memory_child(row: str, setting, base: str, quick: bool) -> dict:
    """One epoch of a row alone in a fresh process: the peak RSS of its process tree."""
    import subprocess

    from suite import stoker_child_env  # the child imports this stoker (installed or in-tree)

    spec = json.dumps({"row": row, "setting": setting, "base": base, "quick": quick})
    r = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", spec], capture_output=True,
                       text=True, timeout=600, env=stoker_child_env())
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-400:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def child_main(spec: str) -> int:
    s = json.loads(spec)
    count, shards, parts, data_dir, parquet = prepare(s["quick"])
    if s["row"] in (MOSAIC, LITDATA):
        makers, unavailable, _ = peer_makers(parts, data_dir, s["base"], count)
        if s["row"] in unavailable:
            raise SystemExit(unavailable[s["row"]])
        make = makers[s["row"]][tuple(s["setting"])]
    else:
        make = stoker_and_wds_rows(shards, parts, parquet, s["base"], count)[s["row"]]
    res = vision.run_epoch(make, "jpg", interval=0.02)
    print(json.dumps({k: res[k] for k in ("peak_rss", "base_rss", "max_procs", "mem_samples", "samples")}))
    return 0


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
    ap.add_argument("--child", help=argparse.SUPPRESS)  # memory_child's fresh process
    args = ap.parse_args(argv)
    if args.child:
        return child_main(args.child)
    reps = args.reps or (2 if args.quick else 3)
    count, shards, parts, data_dir, parquet = prepare(args.quick)
    # stoker at its best over HTTP: the shards' sidecar indexes beside them (`stoker index`,
    # as docs/guides/stream.md advises), so no shard is read whole to count its samples first.
    import subprocess

    import stoker._cli

    subprocess.run([stoker._cli.binary(), "index", "--quiet", "--no-manifest", *map(str, shards)], check=True)
    servers = Servers(data_dir, [LATENCY])
    best, grid, unavailable, made, memory, chosen = {}, {}, {}, {}, {}, {}
    made["stoker's Parquet source"] = (parquet / "DONE").read_text().strip()
    try:
        base = servers.url[LATENCY]
        rows = stoker_and_wds_rows(shards, parts, parquet, base, count)
        makers, unavailable, made_peers = peer_makers(parts, data_dir, base, count)
        made.update(made_peers)
        for title, by_setting in makers.items():
            try:
                vision.run_epoch(by_setting[PEER_GRID[0]], 0, memory=False)  # warm-up (page cache, imports)
                rates = {}
                for s, make in by_setting.items():
                    res = vision.run_epoch(make, 0, memory=False)
                    rates[s] = res["steady_rate"]
                    print(f"  tune {title} {setting_text(s)}: {res['steady_rate']:.0f} samples/s "
                          f"({res['samples']} samples, first batch {res['ttfb_s']:.2f} s)", flush=True)
                s = max(rates, key=rates.get)
                best[title], grid[title] = setting_text(s), {setting_text(k): v for k, v in rates.items()}
                chosen[title] = list(s)
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
                    res = vision.run_epoch(make, "jpg", memory=False)
                except Exception as e:  # noqa: BLE001
                    unavailable[name] = f"failed in round {r}: {type(e).__name__}: {str(e)[:300]}"
                    print(f"  {name}: not run: {unavailable[name]}", flush=True)
                    continue
                res["round"] = r
                if r > 0:
                    results[name].append(res)
                print(f"  round {r} {name}: {res['steady_rate']:.0f} samples/s, first batch {res['ttfb_s']:.2f} s, "
                      f"{res['samples']} samples, others' CPU {res['other_cpu_cores']:.2f} cores", flush=True)
        for name in rows:
            if name not in unavailable:
                memory[name] = memory_child(name, chosen.get(name), base, args.quick)
                print(f"  memory {name}: {memory[name]}", flush=True)
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
              "| loader | setting | samples/s | first batch s | peak RSS MB (alone) | samples/epoch | others' CPU cores |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    def rss(name) -> str:
        m = memory.get(name, {})
        return f"{m['peak_rss'] / 2**20:.0f}" if "peak_rss" in m else "?"

    for name in results:
        setting = best.get(name, "num_workers=2" if name == WDS else "defaults")
        lines.append(f"| {name} | {setting} | {med(name, 'steady_rate'):.0f} | {med(name, 'ttfb_s'):.2f} | "
                     f"{rss(name)} | {med(name, 'samples'):.0f} | {med(name, 'other_cpu_cores'):.2f} |")
    for name, why in unavailable.items():
        lines.append(f"| {name} | not run: {why} | | | | | |")
    lines.append("")
    if "stoker mix local" in results and "stoker one source" in results:
        lines.append(f"- mixture / one source (local): {ratio('stoker mix local', 'stoker one source'):.2f}x "
                     "(target >= 0.95x)")
    if STOKER_STREAM in results and WDS in results:  # both streams of the three sources' tar shards
        xs = ratios(STOKER_STREAM, WDS)
        x = statistics.median(xs)
        lines.append(f"- {STOKER_STREAM} / {WDS}: {x:.2f}x (rounds {min(xs):.2f}-{max(xs):.2f}; target >= "
                     f"{TARGET_X:g}x: {'PASS' if x >= TARGET_X else 'MISS'}); first batch "
                     f"{med(STOKER_STREAM, 'ttfb_s'):.2f} s against {med(WDS, 'ttfb_s'):.2f} s, peak RSS "
                     f"{rss(STOKER_STREAM)} against {rss(WDS)} MB")
    for peer in (WDS, MOSAIC, LITDATA):
        if STOKER_HTTP in results and peer in results:
            xs, qs = ratios(STOKER_HTTP, peer), ratios(STOKER_HTTP, peer, quiet=True)
            x = statistics.median(xs)
            quiet = (f"quiet rounds {statistics.median(qs):.2f}x ({len(qs)})" if qs else "no quiet round")
            lines.append(f"- {STOKER_HTTP} / {peer}: {x:.2f}x (rounds {min(xs):.2f}-{max(xs):.2f}; {quiet}; "
                         f"target >= {TARGET_X:g}x: {'PASS' if x >= TARGET_X else 'MISS'}); "
                         f"first batch {med(STOKER_HTTP, 'ttfb_s'):.2f} s "
                         f"against {med(peer, 'ttfb_s'):.2f} s, peak RSS {rss(STOKER_HTTP)} against {rss(peer)} MB")
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
               "best": best, "grid": grid, "unavailable": unavailable, "made": made, "runs": results,
               "memory": memory}
    out.with_suffix(".json").write_text(json.dumps(vision.to_jsonable(payload), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
