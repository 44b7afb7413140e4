"""No knobs: stoker with nothing set (the online controller on) against the best
of a grid of hand settings (autotune=False, each knob given), in six scenarios:

    a  V, local shards, hot page cache
    b  V, local, reads capped at 40 MB/s (the engine's max_read_bytes_per_s: a slow disk)
    c  V over HTTP, nginx on loopback behind the fault proxy adding 20 ms per request
    d  the same at +100 ms
    e  V, local, a training step that keeps one of the two cores busy (a spin of
       STEP_MS per batch in the loop's thread: the CPU the loader must leave alone)
    f  T, Megatron tokens (seq 2048, batch 8) from a memory-mapped corpus

Each loader runs EPOCHS epochs, shuffled; its rate is the last epoch's (samples/s),
so the auto loader's first epoch is where it converges. Per round the auto loader
and every grid point run once, alternated; the median of ROUNDS rounds is kept per
setting. PASS: auto >= 0.95 x the grid's best median, and its last change came
within max(2 s, 5% of an epoch) of its start. Each row names the settings the auto
loader ended on and the change lines that took it there.
Writes bench/results/<UTC>-autotune.{json,md}.

    bash bench/run.sh --autotune [--quick]       # --quick: 1 round, scenarios a, c, e, f
    STOKER_AUTOTUNE_SCENARIOS=a,c STOKER_BENCH_REPS=3 bash bench/run.sh --autotune   # a subset
"""
from __future__ import annotations

import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402

EPOCHS = 2
STEP_MS = 60.0  # scenario e: ~1,070 samples/s of batch 64, about what one core decodes: the step keeps a core busy
# Hand settings (12): decode threads x reads in flight x prefetch.
V_GRID = list(itertools.product((1, 2), (4, 16, 64), (2, 6)))
T_GRID = list(itertools.product((1, 2, 4, 8), (2, 4, 8)))


def _spin(ms: float) -> None:
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def measure(make, key: str, step_ms: float = 0.0) -> dict:
    """EPOCHS epochs of one loader; the last epoch's rate, the settings and changes."""
    loader = make()
    t_made = time.perf_counter()
    rates, epoch_s = [], []
    for epoch in range(EPOCHS):
        loader.set_epoch(epoch)
        n, t0 = 0, time.perf_counter()
        for batch in loader:
            n += batch[key].shape[0]
            if step_ms:
                _spin(step_ms)
            del batch
        epoch_s.append(time.perf_counter() - t0)
        rates.append(n / epoch_s[-1])
    changes = loader._native.tune_log()
    settings = loader.settings
    loader.close()
    return {"rate": rates[-1], "rates": rates, "epoch_s": epoch_s, "settings": settings,
            "changes": [c["line"] for c in changes],
            "converged_s": max((c["time_s"] for c in changes), default=0.0),
            "made_s": t_made}


def vision_make(w, sources, setting, **extra):
    import stoker

    fields = {"jpg": stoker.image(w["size"], resize=w["resize"]), "cls": stoker.scalar("int64")}
    knobs = {} if setting is None else dict(zip(("decode_threads", "io_depth", "prefetch"), setting),
                                                 autotune=False)
    return lambda: stoker.Loader([str(s) for s in sources], fields, batch_size=w["batch"], shuffle=True, seed=0,
                                 observe=False, **knobs, **extra)


def tokens_make(prefix, setting, num_samples):
    import stoker

    knobs = {} if setting is None else dict(zip(("io_depth", "prefetch"), setting), autotune=False)
    return lambda: stoker.TokenLoader(str(prefix), seq_len=2048, batch_size=8, seed=1234, num_samples=num_samples,
                                      output="numpy", observe=False, **knobs)


def scenario(name: str, label: str, make_for, grid, key: str, rounds: int, step_ms: float = 0.0) -> dict:
    runs: dict[str, list[dict]] = {}
    print(f"[{name}] {label}", flush=True)
    for r in range(rounds):
        for setting in [None, *grid]:  # auto first, then the grid, every round
            tag = "auto" if setting is None else str(setting)
            res = measure(make_for(setting), key, step_ms)
            runs.setdefault(tag, []).append(res)
            print(f"  round {r} {tag:<14} {res['rate']:9.0f}/s  epochs {[round(x) for x in res['rates']]}", flush=True)
    med = {tag: statistics.median(x["rate"] for x in rs) for tag, rs in runs.items()}
    best_tag = max((t for t in med if t != "auto"), key=med.get)
    auto_runs = runs["auto"]
    last = sorted(auto_runs, key=lambda x: x["rate"])[len(auto_runs) // 2]  # the median run's settings
    epoch_s = statistics.median(x["epoch_s"][0] for x in auto_runs)
    converged = max(x["converged_s"] for x in auto_runs)
    ratio = med["auto"] / med[best_tag]
    allowed = max(2.0, 0.05 * epoch_s)
    return {"name": name, "label": label, "auto": med["auto"], "best": med[best_tag], "best_setting": best_tag,
            "ratio": ratio, "spread": [min(x["rate"] for x in auto_runs), max(x["rate"] for x in auto_runs)],
            "converged_s": converged, "allowed_s": allowed, "epoch_s": epoch_s,
            "pass": ratio >= 0.95 and converged <= allowed,
            "settings": {k: last["settings"][k] for k in ("io_depth", "read_ahead_batches", "decode_threads", "prefetch")},
            "changes": last["changes"], "medians": med, "runs": runs}


def main(args, w: dict, data: dict, stoker_bin: str) -> dict:
    import subprocess

    import remote
    import tokens

    rounds = int(os.environ.get("STOKER_BENCH_REPS", 1 if args.quick else 3))
    shards = [Path(p) for p in data["shards"]]
    if not all(Path(str(p) + ".idx").exists() for p in shards):
        subprocess.run([stoker_bin, "index", "-q", *map(str, shards)], check=True)
    common.hot_cache(shards)
    wanted = set("acef") if args.quick else set("abcdef")
    if os.environ.get("STOKER_AUTOTUNE_SCENARIOS"):  # e.g. "a,c": a subset, for a short run
        wanted = set(os.environ["STOKER_AUTOTUNE_SCENARIOS"].replace(",", ""))
    rows = []
    local = lambda s: vision_make(w, shards, s)  # noqa: E731
    if "a" in wanted:
        rows.append(scenario("a", "V local, hot cache", local, V_GRID, "jpg", rounds))
    if "b" in wanted:
        capped = lambda s: vision_make(w, shards, s, max_read_bytes_per_s=40_000_000)  # noqa: E731
        rows.append(scenario("b", "V local, reads capped at 40 MB/s", capped, V_GRID, "jpg", rounds))
    lats = [lat for lat, tag in ((0.020, "c"), (0.100, "d")) if tag in wanted]
    if lats:
        srv = remote.Servers(Path(data["dir"]), lats)
        try:
            for lat, tag in ((0.020, "c"), (0.100, "d")):
                if tag not in wanted:
                    continue
                urls = [f"{srv.url[lat]}/{p.name}" for p in shards]
                over = lambda s, u=urls: vision_make(w, u, s)  # noqa: E731
                rows.append(scenario(tag, f"V over HTTP +{lat * 1000:.0f} ms per request", over, V_GRID, "jpg",
                                     rounds))
        finally:
            srv.close()
    if "e" in wanted:
        rows.append(scenario("e", f"V local, a step spinning {STEP_MS:.0f} ms per batch (one core busy)", local,
                             V_GRID, "jpg", rounds, step_ms=STEP_MS))
    if "f" in wanted:
        prefix = tokens.make_corpus(2e7)
        # ~0.6-1 s an epoch at 350k samples/s: several of the controller's windows, and
        # epochs long enough that a thread's wake-up is not the measurement (30k: 0.08 s)
        num = 200000 if args.quick else 300000
        rows.append(scenario("f", "T tokens, seq 2048, batch 8, memory-mapped", lambda s: tokens_make(prefix, s, num),
                             T_GRID, "tokens", rounds))
    for r in rows:
        for rs in r["runs"].values():
            for x in rs:
                x.pop("made_s", None)
    return {"rows": rows, "rounds": rounds, "epochs": EPOCHS, "machine": common.machine_info(),
            "load_average": common.load_average(), "workload": w["label"], "samples": data.get("count")}


def write(payload: dict, stem: Path) -> None:
    stem.parent.mkdir(parents=True, exist_ok=True)
    Path(str(stem) + ".json").write_text(json.dumps(payload, indent=1, default=str))
    lines = [f"# No knobs: autotune against the best of {len(V_GRID)} hand settings", "",
             f"`{payload.get('command', 'bash bench/run.sh --autotune')}` — {payload['rounds']} round(s), "
             f"{payload['epochs']} epochs per loader, last epoch's rate, medians; shared 2-core machine "
             f"(load average {payload['load_average']}).", "",
             "| scenario | auto samples/s | best hand setting | its samples/s | auto ÷ best | converged (allowed) | "
             "ended on | why |", "| --- | ---: | --- | ---: | ---: | --- | --- | --- |"]
    for r in payload["rows"]:
        s = r["settings"]
        ended = f"io {s['io_depth']}, ahead {s['read_ahead_batches']}, decoders {s['decode_threads']}, " \
                f"prefetch {s['prefetch']}"
        why = "; ".join(r["changes"]) or "no change: the start was right"
        lines.append(f"| {r['name']}: {r['label']} | {r['auto']:,.0f} | {r['best_setting']} | {r['best']:,.0f} | "
                     f"**{r['ratio']:.2f}** {'PASS' if r['pass'] else 'MISS'} | {r['converged_s']:.1f} s "
                     f"({r['allowed_s']:.1f} s) | {ended} | {why} |")
    lines += ["", "Grid: (decode_threads, io_depth, prefetch) for V, (io_depth, prefetch) for T, each with "
              "autotune=False."]
    Path(str(stem) + ".md").write_text("\n".join(lines) + "\n")


def cli(argv=None) -> int:
    import argparse

    import suite

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 round; scenarios a, c, e, f")
    ap.add_argument("--out", default=None, help="output stem (default bench/results/<UTC>-autotune)")
    args = ap.parse_args(argv)
    w = suite.WORKLOADS["V"]
    data = suite.prepare(w, w["count"])  # 48 batches an epoch: time for the controller to act
    payload = main(args, w, data, suite.stoker_bin())
    payload["command"] = "bash bench/run.sh --autotune" + (" --quick" if args.quick else "")
    stem = Path(args.out) if args.out else common.RESULTS_DIR / (time.strftime("%Y-%m-%dT%H%MZ", time.gmtime())
                                                                 + "-autotune")
    write(payload, stem)
    print(Path(str(stem) + ".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(cli())
