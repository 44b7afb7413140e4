"""Workload V, shuffled training read over HTTP: nginx on loopback serving
bench/data/V, behind the fault proxy (tests/python/fault_proxy.py, its own
process) adding 20 ms, and a second one adding 100 ms, per request. In one
process, on the same files, alternated A B C D per repetition:

    stoker local          shuffle=True, defaults (a global permutation: shuffle_block auto = 1)
    stoker http+20ms      shuffle=True, defaults (block shuffle: shuffle_block auto = 16, io_depth auto = 16)
    stoker http+100ms     the same
    DataLoader+wds        pipe:curl over the +20 ms URLs, shard shuffle + a 1000-sample shuffle buffer,
                          num_workers 2/3/4 (best kept)

then, once each (not --quick): shuffle=True as before the block shuffle
(shuffle_block=1: one GET per sample, io_depth 4 and 16), and a sweep of
shuffle_block x io_depth at both latencies (how the auto values were chosen).
The shuffle's quality is measured on the key streams (include_keys) of
2 epochs, against the global permutation: see shuffle_quality().
Writes bench/results/<UTC>-remote.{json,md}.

    bash bench/run.sh --remote [--quick]
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests/python"))
import peers  # noqa: E402
import vision  # noqa: E402
from nginx_server import NginxServer  # noqa: E402

LATENCIES = (0.020, 0.100)
DL_WORKERS = (2, 3, 4)


class Servers:
    """nginx (root = the data dir) + one latency proxy per latency, each in its own process."""

    def __init__(self, root: Path, latencies):
        self.nginx = NginxServer(root, workers=2, connections=1024, sendfile=True)
        port = self.nginx.port
        self.proxies, self.url = {}, {}
        for latency in latencies:
            proxy = subprocess.Popen([sys.executable, str(ROOT / "tests/python/fault_proxy.py"), "--upstream",
                                      str(port), "--latency", str(latency)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
            self.proxies[latency] = proxy
            self.url[latency] = f"http://127.0.0.1:{int(proxy.stdout.readline())}"

    def close(self):
        for proxy in self.proxies.values():
            proxy.stdin.close()
            proxy.wait(timeout=10)
        self.nginx.close()


# -- shuffle quality, from key streams ----------------------------------------------------------

def _name(url: str, key: str) -> str:
    """"<dir or URL>/shard.tar", key -> "shard.tar:key" (the same sample over any storage)."""
    return f"{url.rsplit('/', 1)[-1]}:{key}"


def stoker_keys(shards, batch: int, epochs: int, **kw) -> list[list[list[str]]]:
    """Per epoch, the batches' keys of a stoker.Loader reading only 'cls' (no decode)."""
    import stoker

    ld = stoker.Loader([str(p) for p in shards], fields={"cls": stoker.scalar("int64")}, batch_size=batch,
                       output="numpy", observe=False, **kw)
    out = []
    for e in range(epochs):
        ld.set_epoch(e)
        out.append([[_name(u, k) for u, k in zip(b["__url__"], b["__key__"])] for b in ld])
    ld.close()
    return out


def wds_keys(shards, batch: int, epochs: int, buffer: int = 1000) -> list[list[list[str]]]:
    """webdataset's shuffle (shard shuffle + sample buffer), one process, keys only."""
    import webdataset as wds

    ds = wds.WebDataset([str(p) for p in shards], shardshuffle=len(shards), empty_check=False,
                        seed=0).shuffle(buffer)
    out = []
    for _ in range(epochs):
        names = [f"{Path(s['__url__']).name}:{s['__key__']}" for s in ds]
        out.append([names[i:i + batch] for i in range(0, len(names) - batch + 1, batch)])
    return out


def shuffle_quality(epochs: list[list[list[str]]], canonical: list[str]) -> dict:
    """Three honest measures of one order (2 epochs), each with the value a
    global permutation has in expectation:
      shards_per_batch   distinct shards in a batch (global: ~min(batch, shards));
      runs_per_batch     maximal runs of consecutive samples of one shard in a batch:
                         the coalesced GETs it costs (global: ~batch);
      pair_distance      mean |source index difference| over pairs of samples of one
                         batch, divided by N/3, a global permutation's expectation (1.0);
      pairs_again        fraction of the pairs sharing a batch in epoch e that share one
                         again in epoch e+1 (global: (batch-1)/(N-1))."""
    index = {k: i for i, k in enumerate(canonical)}
    shard = {k: k.split(":")[0] for k in canonical}
    n = len(canonical)
    shards_pb, runs_pb, dist = [], [], []
    for b in epochs[0]:
        g = np.array([index[k] for k in b])
        shards_pb.append(len({shard[k] for k in b}))
        runs_pb.append(1 + sum(1 for a, c, ka, kc in zip(g, g[1:], b, b[1:]) if c != a + 1 or shard[ka] != shard[kc]))
        d = np.abs(g[:, None] - g[None, :])
        dist.append(d.sum() / (len(g) * (len(g) - 1)))
    again = []
    for e in range(len(epochs) - 1):
        batch_of = {k: i for i, b in enumerate(epochs[e + 1]) for k in b}
        same = total = 0
        for b in epochs[e]:
            ids = [batch_of.get(k, -1 - j) for j, k in enumerate(b)]
            _, counts = np.unique(ids, return_counts=True)
            same += int((counts * (counts - 1) // 2).sum())
            total += len(b) * (len(b) - 1) // 2
        again.append(same / total)
    batch = len(epochs[0][0])
    return {"shards_per_batch": float(np.mean(shards_pb)), "runs_per_batch": float(np.mean(runs_pb)),
            "pair_distance": float(np.mean(dist) / (n / 3)), "pairs_again": float(np.mean(again)),
            "pairs_again_global": (batch - 1) / (n - 1)}


# -- the run ----------------------------------------------------------------------------------------

EPOCHS = 2  # per loader, as training runs: a stoker loader's second epoch starts while the first ends


class Epochs:
    """`epochs` passes over one loader (set_epoch between them where it has one)."""

    def __init__(self, loader, epochs: int):
        self.loader, self.epochs = loader, epochs

    def __iter__(self):
        for e in range(self.epochs):
            if hasattr(self.loader, "set_epoch"):
                self.loader.set_epoch(e)
            yield from self.loader

    def close(self):
        if hasattr(self.loader, "close"):
            self.loader.close()


def epochs_of(make, epochs: int = EPOCHS):
    return lambda: Epochs(make(), epochs)


def main(args, w: dict, data: dict, stoker_bin: str) -> dict:
    shards = [Path(p) for p in data["shards"]]
    if not all(Path(str(p) + ".idx").exists() for p in shards):  # sidecars: one GET per shard to index
        subprocess.run([stoker_bin, "index", "-q", *map(str, shards)], check=True)
    srv = Servers(Path(data["dir"]), LATENCIES)
    runs = []
    reps = int(os.environ.get("STOKER_BENCH_REPS", 3 if args.quick else 5))
    try:
        urls = {lat: [f"{srv.url[lat]}/{p.name}" for p in shards] for lat in LATENCIES}

        def run(name, setting, make, rep=None):
            key = "cls" if name.startswith("reads-only") else "jpg" if name.startswith(("stoker", "sweep")) else 0
            # No memory sampler thread here: the tuner of a loader left to its defaults would
            # count its CPU as the training step's and give up a decoder (vision.run_epoch).
            r = vision.run_epoch(epochs_of(make), key, memory=False)
            r.update(loader=name, setting=setting, rep=rep)
            print(f"  {name:<30} {setting:<34} {r['epoch_rate']:8.0f} samples/s  ({r['samples']} in "
                  f"{r['seconds']:.1f} s, other processes {r['other_cpu_cores']:.2f} cores)", flush=True)
            runs.append(r)
            return r

        def dl_best_workers():
            rows = [r for r in runs if r["loader"].startswith("DataLoader")]
            return int(max(rows, key=lambda r: r["epoch_rate"])["setting"].rsplit(" ", 1)[1])

        def stoker_default(srcs, seed, io_depth=None, **kw):  # shuffle=True, every other knob left to the loader
            return peers.stoker_loader(w, srcs, 0, io_depth, shuffle=True, seed=seed, **kw)

        # Warm-up, not recorded: the process's first loader pays one-time costs.
        vision.run_epoch(stoker_default(shards[:1], 0), "jpg", memory=False)
        vision.run_epoch(stoker_default(urls[LATENCIES[0]][:1], 0), "jpg", memory=False)
        for rep in range(reps):
            run("stoker local", "shuffle=True, defaults", stoker_default(shards, rep), rep)
            for lat in LATENCIES:
                run(f"stoker http+{lat * 1000:.0f}ms", "shuffle=True, defaults", stoker_default(urls[lat], rep), rep)
            # The peer's grid in the first repetition, then its best setting so far.
            grid = [3] if args.quick else DL_WORKERS if rep == 0 else [dl_best_workers()]
            for workers in grid:
                run("DataLoader+wds http+20ms", f"pipe:curl, shardshuffle+shuffle(1000), workers {workers}",
                    peers.dl_wds_shuffled(w, [f"pipe:curl -s {u}" for u in urls[LATENCIES[0]]], workers, seed=rep),
                    rep)
        # The storage path's ceiling (BENCHMARKS.md rule 5): the same orders with
        # only 'cls' decoded, each read still fetching its samples' whole bytes.
        # Over HTTP it is the loopback proxy's (Python, on these same cores) bandwidth.
        run("reads-only local", "shuffle=True, defaults", _reads_only(w, shards))
        for lat in LATENCIES:
            run(f"reads-only http+{lat * 1000:.0f}ms", "shuffle=True, defaults", _reads_only(w, urls[lat]))
        if not args.quick:
            # As before the block shuffle: one GET per sample, the old default io_depth.
            run("stoker http+20ms", "shuffle_block=1, io_depth 4 (before)",
                stoker_default(urls[0.020], 0, shuffle_block=1, io_depth=4))
            # How the auto values were chosen: the block at the auto io_depth, and
            # the io_depth at the block of 16, at +100 ms (where latency binds).
            for block in (4, 8, 32):
                run("sweep http+100ms", f"shuffle_block={block}, io_depth auto",
                    stoker_default(urls[0.100], 0, shuffle_block=block))
            for depth in (8, 16):
                run("sweep http+100ms", f"shuffle_block=16, io_depth {depth}",
                    stoker_default(urls[0.100], 0, io_depth=depth))
    finally:
        srv.close()

    def med(name, setting=None):
        rates = [r["epoch_rate"] for r in runs if r["loader"] == name and r["rep"] is not None and
                 (setting is None or r["setting"] == setting)]
        return statistics.median(rates), min(rates), max(rates)

    local = med("stoker local")
    http = {lat: med(f"stoker http+{lat * 1000:.0f}ms", "shuffle=True, defaults") for lat in LATENCIES}
    dl_rows = [r for r in runs if r["loader"] == "DataLoader+wds http+20ms"]
    dl_setting = max(dl_rows, key=lambda r: r["epoch_rate"])["setting"]
    dl = med("DataLoader+wds http+20ms", dl_setting)
    # Ratios per repetition (side by side), then their median.
    # Other processes' CPU (bench/common.py's gauge) moves these figures more
    # than anything measured: the machine is shared. A repetition is "quiet"
    # when no row of it had more than QUIET cores of others (an HTTP row's
    # gauge includes its own proxy and nginx, ~0.15 cores).
    QUIET = 0.35

    def ratio(a_name, b_name, key="epoch_rate", quiet=False):
        out = []
        for rep in range(reps):
            a = [r for r in runs if r["loader"] == a_name and r["rep"] == rep
                 and r["setting"] == "shuffle=True, defaults"]
            b = [r for r in runs if r["loader"] == b_name and r["rep"] == rep]  # the best of the rep
            if not (a and b):
                continue
            best = max(b, key=lambda r: r[key])
            if quiet and max(a[0]["other_cpu_cores"], best["other_cpu_cores"]) > QUIET:
                continue
            out.append(a[0][key] / best[key])
        return (statistics.median(out), min(out), max(out), len(out)) if out else None

    summary = {
        "latencies_s": list(LATENCIES),
        "repetitions": reps,
        "median_samples_per_s": {"stoker local": local[0], **{f"stoker http+{lat * 1000:.0f}ms": http[lat][0]
                                                              for lat in LATENCIES},
                                 "DataLoader+wds http+20ms": dl[0]},
        "dl_wds_best": dl_setting,
        "reads_only_samples_per_s": {r["loader"]: r["steady_rate"] for r in runs
                                     if r["loader"].startswith("reads-only")},
        "http20_over_local": ratio("stoker http+20ms", "stoker local"),
        "http100_over_local": ratio("stoker http+100ms", "stoker local"),
        "http20_over_dl_wds": ratio("stoker http+20ms", "DataLoader+wds http+20ms"),
        # first batch to last: the start (index, probe, first round trips) left out
        "http20_over_local_steady": ratio("stoker http+20ms", "stoker local", "steady_rate"),
        "http100_over_local_steady": ratio("stoker http+100ms", "stoker local", "steady_rate"),
        "http20_over_local_quiet": ratio("stoker http+20ms", "stoker local", quiet=True),
        "http100_over_local_quiet": ratio("stoker http+100ms", "stoker local", quiet=True),
        "quiet_cores": QUIET,
    }
    s = summary
    print("  storage ceiling, reads only (steady samples/s): " +
          ", ".join(f"{k[11:]} {v:.0f}" for k, v in summary["reads_only_samples_per_s"].items()))
    print(f"  shuffle=True, defaults, median of {reps} (min-max of the per-repetition ratios):")
    print(f"  stoker HTTP+20ms / stoker local: {s['http20_over_local'][0]:.2f} ({s['http20_over_local'][1]:.2f}-"
          f"{s['http20_over_local'][2]:.2f}) target >= 0.90 {'PASS' if s['http20_over_local'][0] >= 0.9 else 'MISS'}")
    print(f"  stoker HTTP+100ms / stoker local: {s['http100_over_local'][0]:.2f} ({s['http100_over_local'][1]:.2f}-"
          f"{s['http100_over_local'][2]:.2f}) target >= 0.80 {'PASS' if s['http100_over_local'][0] >= 0.8 else 'MISS'}")
    fmt = lambda t: "no quiet repetition" if t is None else f"{t[0]:.2f} ({t[1]:.2f}-{t[2]:.2f}, {t[3]} reps)"  # noqa: E731
    print(f"  steady state (first batch to last): HTTP+20ms / local {fmt(s['http20_over_local_steady'])}, "
          f"HTTP+100ms / local {fmt(s['http100_over_local_steady'])}")
    print(f"  quiet repetitions only (others <= {QUIET} cores in each row): HTTP+20ms / local "
          f"{fmt(s['http20_over_local_quiet'])}, HTTP+100ms / local {fmt(s['http100_over_local_quiet'])}")
    print(f"  stoker HTTP+20ms / DataLoader+wds HTTP+20ms (best: {dl_setting}): {s['http20_over_dl_wds'][0]:.2f}x "
          f"({s['http20_over_dl_wds'][1]:.2f}-{s['http20_over_dl_wds'][2]:.2f}) target >= 3 "
          f"{'PASS' if s['http20_over_dl_wds'][0] >= 3 else 'MISS'}")

    # Quality: the HTTP default's order equals the local order with the same
    # shuffle_block (tests/python/test_block_shuffle.py), so local key streams serve.
    canonical = [k for b in stoker_keys(shards, w["batch"], 1, shuffle=False, drop_last=False)[0] for k in b]
    quality = {}
    for label, keys in [("global permutation (shuffle_block=1)", stoker_keys(shards, w["batch"], 2, shuffle=True,
                                                                            shuffle_block=1)),
                        *[(f"block shuffle, shuffle_block={b}" + (" (remote default)" if b == 16 else ""),
                           stoker_keys(shards, w["batch"], 2, shuffle=True, shuffle_block=b))
                          for b in (4, 8, 16, 32, 64)],
                        ("webdataset shardshuffle + shuffle(1000), one process", wds_keys(shards, w["batch"], 2))]:
        quality[label] = shuffle_quality(keys, canonical)
    summary["quality"] = quality
    print(f"  shuffle quality (batch {w['batch']}, {len(canonical)} samples in {len(shards)} shards; 2 epochs):")
    print(f"    {'order':<56} shards/batch runs/batch pair dist/(N/3) pairs again")
    for label, q in quality.items():
        print(f"    {label:<56} {q['shards_per_batch']:12.1f} {q['runs_per_batch']:10.1f} {q['pair_distance']:16.2f} "
              f"{q['pairs_again']:11.3f}")
    expect = quality[next(iter(quality))]["pairs_again_global"]
    print(f"    (a global permutation's pairs-again expectation: {expect:.3f})")
    return {"workload": "V-http-shuffled", "count": data["count"], "runs": runs, "summary": summary}


def _reads_only(w: dict, sources):
    def make():
        import stoker

        return stoker.Loader([str(p) for p in sources], fields={"cls": stoker.scalar("int64")}, batch_size=w["batch"],
                             shuffle=True, output="torch", observe=False)
    return make


def write(payload: dict, stem: Path):
    stem.parent.mkdir(parents=True, exist_ok=True)
    Path(str(stem) + ".json").write_text(json.dumps(payload, indent=1, default=str))
    s = payload["summary"]
    lines = ["# V shuffled (shuffle=True) over HTTP (nginx on loopback, +20 / +100 ms per request by the proxy)", "",
             "Shared, noisy machine: compare the ratios of this one run, not absolute rates.", "",
             f"`{payload.get('command', '')}`, {payload['count']} samples, {s['repetitions']} alternated repetitions.",
             "",
             "| loader | setting | rep | samples/s (epoch) | samples/s (steady) | first batch (s) | other processes (cores) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in payload["runs"]:
        lines.append(f"| {r['loader']} | {r['setting']} | {'' if r['rep'] is None else r['rep']} | "
                     f"{r['epoch_rate']:.0f} | {r['steady_rate']:.0f} | {r['ttfb_s']:.2f} | {r['other_cpu_cores']:.2f} |")
    f = lambda t: f"**{t[0]:.2f}** ({t[1]:.2f}-{t[2]:.2f})"  # noqa: E731
    g = lambda t: "n/a (no quiet repetition)" if t is None else f"{t[0]:.2f} ({t[1]:.2f}-{t[2]:.2f}, {t[3]} reps)"  # noqa: E731
    lines += ["", f"Medians of per-repetition ratios (min-max), defaults with shuffle=True: "
              f"HTTP+20ms / local {f(s['http20_over_local'])} (target >= 0.90); "
              f"HTTP+100ms / local {f(s['http100_over_local'])} (target >= 0.80); "
              f"HTTP+20ms / DataLoader+webdataset HTTP+20ms ({s['dl_wds_best']}) {f(s['http20_over_dl_wds'])} "
              f"(target >= 3). Steady state (first batch to last): HTTP+20ms / local "
              f"{g(s['http20_over_local_steady'])}, HTTP+100ms / local {g(s['http100_over_local_steady'])}. "
              f"Quiet repetitions only (others <= {s['quiet_cores']} cores in each row): HTTP+20ms / local "
              f"{g(s['http20_over_local_quiet'])}, HTTP+100ms / local {g(s['http100_over_local_quiet'])}.", "",
              "| order | shards/batch | runs/batch | pair distance / (N/3) | pairs again next epoch |",
              "| --- | ---: | ---: | ---: | ---: |"]
    for label, q in s["quality"].items():
        lines.append(f"| {label} | {q['shards_per_batch']:.1f} | {q['runs_per_batch']:.1f} | "
                     f"{q['pair_distance']:.2f} | {q['pairs_again']:.3f} |")
    Path(str(stem) + ".md").write_text("\n".join(lines) + "\n")
