#!/usr/bin/env python3
"""Two suite runs side by side: does the suite reproduce its own table within noise?

    python3 bench/compare.py bench/results/A.json bench/results/B.json

Per workload and loader: samples/s medians and stoker's per-round ratio in each run, the
change, and whether the second run's median lies inside the first run's min–max (and vice
versa) — the protocol's "a difference smaller than the spread is noise". Markdown out.
"""
import json
import sys


def main(a_path: str, b_path: str) -> int:
    a, b = (json.load(open(p)) for p in (a_path, b_path))
    print(f"| workload | loader | run 1 samples/s | run 2 samples/s | Δ | stoker × run 1 | stoker × run 2 | within spread |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |")
    bw = {w["workload"]: w for w in b["workloads"]}
    for wa in a["workloads"]:
        wb = bw.get(wa["workload"])
        if not wb:
            continue
        for kind, ra in wa["analysis"]["rows"].items():
            rb = wb["analysis"]["rows"].get(kind)
            if not rb:
                continue
            x, y = ra["rate"], rb["rate"]
            inside = (x["min"] <= y["median"] <= x["max"]) or (y["min"] <= x["median"] <= y["max"])
            sa = f"{ra['stoker_x']['median']:.2f}" if "stoker_x" in ra else "—"
            sb = f"{rb['stoker_x']['median']:.2f}" if "stoker_x" in rb else "—"
            print(f"| {wa['workload']} | {ra['loader']} ({ra['setting']} / {rb['setting']}) | {x['median']:,.0f} | "
                  f"{y['median']:,.0f} | {100 * (y['median'] / x['median'] - 1):+.1f}% | {sa} | {sb} | "
                  f"{'yes' if inside else 'no'} |")
    print()
    print("| workload | target | run 1 | run 2 |")
    print("| --- | --- | --- | --- |")
    tb = {(t["workload"], t["target"]): t for t in b["targets"]}
    for t in a["targets"]:
        u = tb.get((t["workload"], t["target"]))
        fmt = lambda t: "n/a" if t is None or t["value"] is None else f"{t['value']['median']:.3f} {t['verdict']}"  # noqa: E731
        print(f"| {t['workload']} | {t['target']} | {fmt(t)} | {fmt(u)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
