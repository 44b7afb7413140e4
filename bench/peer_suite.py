"""The peers section: V's eval and train recipes on every peer, each at its best on its
own format, beside stoker, in one run (issue #20).

    bash bench/run.sh --peers            # 3,072 V images, each peer's grid, 3 measured rounds
    bash bench/run.sh --peers --quick    # 768 images, the first grid point each, 3 rounds
    # --only litdata,ray  runs those peers (and stoker) only

Per recipe (recipes.py: eval = Resize+CenterCrop 224, in order; train = RandomResizedCrop
224 + flip, each loader shuffling its own way), in ONE process on the same V images
(each peer's format written once from them, bench/peers/*.py): a warm-up epoch and then
one epoch per grid point for every peer (the best kept and named); then measured
rounds alternating the bests (order reversed every other round). "stoker x" is the median
of per-round ratios stoker-over-tar / that loader, both figures seconds apart. A peer
that cannot install, prepare or run is a row with its reason. Writes
bench/results/<UTC stamp>-peers.{json,md}; exits 0 whatever the speed.
"""
from __future__ import annotations

import statistics
import traceback
from pathlib import Path

import common
import peers
import vision
from peers.recipes import EVAL, RECIPES, TRAIN

STOKER = "stoker_tar"
# The figure every row is ranked and compared by: samples over the seconds from building
# the loader to its last batch. Not the steady rate (first batch to last) of the other
# sections: Ray Data runs most of an epoch before its first batch, so its steady rate is
# no rate at all, and each epoch's start (worker start, plan execution) is what users pay.
RATE = "epoch_rate"
TARGET_X = 2.0        # the issue: stoker >= 2x each peer's best
PARQUET_VS_TAR = 0.9  # stoker over Parquet within 0.9x of stoker over tar


class Images:
    """A peer's loader as the epoch timer sees it: batches of (images,), close() passed on."""

    def __init__(self, peer: peers.Peer, loader) -> None:
        self.peer, self.loader = peer, loader

    def __iter__(self):
        for batch in self.loader:
            yield (self.peer.images(batch),)

    def close(self) -> None:
        if hasattr(self.loader, "close"):
            self.loader.close()


def epoch(peer: peers.Peer, make, v: peers.VData) -> dict:
    peer.start()
    try:
        res = vision.run_epoch(lambda: Images(peer, make()), 0)
    finally:
        peer.stop()
    if res["samples"] != v.count:
        res["warning"] = f"delivered {res['samples']} samples, expected {v.count}"
        print(f"    WARNING {peer.name}: {res['warning']}", flush=True)
    return res


def _fail(e: BaseException) -> str:
    if isinstance(e, peers.Unavailable):
        return str(e)
    return f"failed: {type(e).__name__}: {str(e)[:300]}"


def run_recipe(recipe: str, ready: list, v: peers.VData, quick: bool, reps: int, unavailable: dict) -> dict:
    res = {"recipe": recipe, "what": RECIPES[recipe], "grid": {}, "best": {}, "runs": {},
           "unavailable": dict(unavailable)}
    makes = {}
    print(f"\n  -- V {recipe}: {RECIPES[recipe]} --", flush=True)
    for p in ready:
        grid = p.grid[:1] if quick else p.grid
        try:
            ms = {s: p.loader(v, recipe, s) for s in grid}
            epoch(p, ms[grid[0]], v)  # warm-up, discarded
            rates = {}
            for s in grid if len(grid) > 1 else []:
                rates[s] = epoch(p, ms[s], v)[RATE]
                print(f"    tune {p.title:<38} {p.setting_text(s):<40} {rates[s]:8,.0f} samples/s", flush=True)
            best = max(rates, key=rates.get) if rates else grid[0]
            res["best"][p.name] = p.setting_text(best)
            res["grid"][p.name] = {p.setting_text(s): r for s, r in rates.items()}
            makes[p.name] = ms[best]
        except Exception as e:  # noqa: BLE001 - a peer that fails is a row with the reason, not a crash
            res["unavailable"][p.name] = _fail(e)
            print(f"    {p.title}: not run: {res['unavailable'][p.name]}", flush=True)
            if not isinstance(e, peers.Unavailable):
                print(traceback.format_exc()[-800:], flush=True)
    running = [p for p in ready if p.name in makes]
    res["runs"] = {p.name: [] for p in running}
    for r in range(1, reps + 1):
        order = running if r % 2 else list(reversed(running))
        for p in order:
            if p.name in res["unavailable"]:
                continue
            try:
                x = epoch(p, makes[p.name], v)
            except Exception as e:  # noqa: BLE001
                res["unavailable"][p.name] = _fail(e)
                res["runs"].pop(p.name, None)
                continue
            x["round"] = r
            res["runs"][p.name].append(x)
            print(f"    round {r} {p.title:<38} {x[RATE]:8,.0f} samples/s (steady {x['steady_rate']:,.0f})  others' CPU "
                  f"{x['other_cpu_cores']:.2f}", flush=True)
    return res


def _paired(a: list, b: list, key: str = RATE) -> dict | None:
    by_round = {x["round"]: x[key] for x in b}
    ratios = [x[key] / by_round[x["round"]] for x in a if by_round.get(x["round"])]
    return common.summarize(ratios).as_dict() if ratios else None


def analyse(res: dict, titles: dict) -> None:
    rows, targets = {}, []
    stoker = res["runs"].get(STOKER)
    for name, runs in res["runs"].items():
        if not runs:
            continue
        row = {"loader": titles[name], "setting": res["best"][name],
               "rate": common.summarize([x[RATE] for x in runs]).as_dict(),
               "steady": common.summarize([x["steady_rate"] for x in runs]).as_dict(),
               "ttfb_s": statistics.median(x["ttfb_s"] for x in runs),
               "cpu_ms_per_sample": 1e3 * statistics.median(x["cpu_s"] / max(1, x["samples"]) for x in runs),
               "others_cpu": statistics.median(x["other_cpu_cores"] for x in runs)}
        if stoker and name != STOKER:
            row["stoker_x"] = _paired(stoker, runs)
            row["stoker_x_steady"] = _paired(stoker, runs, "steady_rate")
        rows[name] = row
    for name, row in rows.items():
        x = row.get("stoker_x")
        if name == STOKER or x is None:
            continue
        if name == "stoker_parquet":
            v = {k: 1 / x[k] for k in ("median", "max", "min")}  # parquet / tar
            v["min"], v["max"] = v["max"], v["min"]
            targets.append({"target": f"V {res['recipe']}: stoker over Parquet ≥ {PARQUET_VS_TAR}× stoker over tar",
                            "value": v, "verdict": "PASS" if v["median"] >= PARQUET_VS_TAR else "MISS"})
        else:
            targets.append({"target": f"V {res['recipe']}: stoker ≥ {TARGET_X:g}× {row['loader']} (its best)",
                            "value": x, "verdict": "PASS" if x["median"] >= TARGET_X else "MISS"})
    for name, why in res["unavailable"].items():
        if name != "stoker_parquet":
            targets.append({"target": f"V {res['recipe']}: stoker ≥ {TARGET_X:g}× {titles[name]}", "value": None,
                            "verdict": "NOT RUN", "note": why})
    res["rows"], res["targets"] = rows, targets


def main(args, w: dict, data: dict) -> dict:
    v = peers.VData(dir=Path(data["dir"]), shards=[Path(p) for p in data["shards"]], loose=data["loose"],
                    count=data["count"], batch=w["batch"], size=w["size"])
    rows = peers.recipe_peers()
    only = set(args.only.split(",")) if getattr(args, "only", None) else None
    if only:
        rows = [p for p in rows if p.name in only or p.name == STOKER]
    titles = {p.name: p.title for p in rows}
    reads = {p.name: p.reads for p in rows}
    unavailable, ready = {}, []
    common.hot_cache(v.shards)
    print(f"\n== peers: V {v.count} images, batch {v.batch}; writing each peer's format (once) ==", flush=True)
    for p in rows:
        try:
            p.check()
            p.prepare(v)
            ready.append(p)
        except Exception as e:  # noqa: BLE001
            unavailable[p.name] = _fail(e)
            print(f"  {p.title}: not run: {unavailable[p.name]}", flush=True)
            if not isinstance(e, peers.Unavailable):
                print(traceback.format_exc()[-800:], flush=True)
    reps = 3
    recipes = {}
    try:
        for recipe in (EVAL, TRAIN):
            recipes[recipe] = run_recipe(recipe, ready, v, args.quick, reps, unavailable)
            analyse(recipes[recipe], titles)
    finally:
        for p in rows:
            try:
                p.close()
            except Exception:  # noqa: BLE001
                pass
    return {"benchmark": "peers", "count": v.count, "batch": v.batch, "quick": args.quick, "reps": reps,
            "data": {"dir": str(v.dir), "shards": len(v.shards), "made": v.made}, "titles": titles, "reads": reads,
            "recipes": recipes, "targets": [t for r in recipes.values() for t in r["targets"]]}


def _rate(d: dict, digits: int = 0) -> str:
    return f"{d['median']:,.{digits}f} [{d['min']:,.{digits}f}–{d['max']:,.{digits}f}]"


def markdown(payload: dict) -> str:
    m = payload["machine"]
    lines = [f"# stoker vs the peers, V eval and train — {m['utc']}", "",
             f"`{payload['command']}` on {m['hostname']}: {m['cpu_count']} cores ({m['cpu_model']}), Python "
             f"{m['python']}, commit {m['git_commit']}; {payload['elapsed_s']:.0f} s. Load average at start "
             f"{m['loadavg_start']}, end {m['loadavg_end']}.", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()), "",
             f"{payload['count']} V images (ImageNet-like JPEG 500×375 q90), batch {payload['batch']}, 224×224 uint8 "
             "CHW, hot page cache. samples/s: median [min–max] of the measured rounds, samples over the seconds from "
             "building the loader to its last batch (every epoch's start included: Ray Data runs most of an epoch "
             "before its first batch, so a first-to-last-batch rate means nothing for it); steady: first batch to "
             "last. **stoker ×**: median [min–max] of per-round ratios stoker over tar / this loader. CPU: "
             "user+sys of the process tree per sample. others' CPU: cores other processes used meanwhile."
             + (" **Quick**: each loader at the first point of its grid, not tuned." if payload["quick"] else
                " Each loader tuned over its grid (one epoch a point), the best kept."), ""]
    for r in payload["recipes"].values():
        lines += [f"## V {r['recipe']}: {r['what']}", "",
                  "| loader (winning setting) | reads | samples/s | stoker × | steady samples/s | stoker × steady | ttfb s "
                  "| CPU ms/sample | others' CPU |", "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for name, row in r["rows"].items():
            x = row.get("stoker_x")
            lines.append(f"| {row['loader']} ({row['setting']}) | {payload['reads'][name]} | {_rate(row['rate'])} | "
                         + (f"{_rate(x, 2)}" if x else "—")
                         + f" | {_rate(row['steady'])} | "
                         + (f"{_rate(row['stoker_x_steady'], 2)}" if row.get("stoker_x_steady") else "—")
                         + f" | {row['ttfb_s']:.2f} | {row['cpu_ms_per_sample']:.2f} | {row['others_cpu']:.2f} |")
        for name, why in r["unavailable"].items():
            lines.append(f"| {payload['titles'][name]}: **not run** — {why} | {payload['reads'][name]} | | | | | | | |")
        grid = [f"{payload['titles'][n]}: " + ", ".join(f"{s} {v:,.0f}" for s, v in g.items())
                for n, g in r["grid"].items() if g]
        if grid:
            lines += ["", "Tuning grid (one epoch each, samples/s): " + "; ".join(grid) + "."]
        lines.append("")
    lines += ["## Targets", "", "| target | value median [min–max] | verdict |", "| --- | ---: | --- |"]
    for t in payload["targets"]:
        v = t["value"]
        vs = "n/a" if v is None else f"{v['median']:.2f} [{v['min']:.2f}–{v['max']:.2f}]"
        lines.append(f"| {t['target']}{' (' + t['note'] + ')' if t.get('note') else ''} | {vs} | **{t['verdict']}** |")
    lines += ["", "Formats written: " + "; ".join(f"{k}: {v}" for k, v in payload["data"]["made"].items()) + ".", ""]
    return "\n".join(lines)
