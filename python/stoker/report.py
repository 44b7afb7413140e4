"""``stoker report RUN.jsonl -o report.html``: one self-contained HTML page
from an observer's JSON-lines record.

The page is static: inline SVG drawn here, inline CSS, no script and nothing
fetched, so it opens offline, in a CI artifact viewer, or attached to a bug.
Plots: t_wait per batch with slow batches marked (and t_compute for scale),
the wait-time histogram (log-spaced bins: waits span µs to s), stage
utilisation over time (from the per-batch stage evidence; absent for a
wrapped iterable), and the verdict with the golden numbers.
"""
from __future__ import annotations

import argparse
import html
import json
import math
import sys
from pathlib import Path
from typing import Iterable

W, H = 860, 260          # plot size in px
ML, MR, MT, MB = 64, 16, 30, 44  # margins: left, right, top, bottom


def load(path: str | Path) -> dict:
    """Reads a run: its meta, batches, slow batches, setting changes, summaries and verdict."""
    run = {"meta": {}, "batches": [], "slow": [], "summaries": [], "tune": [], "verdict": None}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from None
            kind = rec.get("type")
            if kind == "meta":
                run["meta"] = rec
            elif kind == "batch":
                run["batches"].append(rec)
            elif kind == "slow":
                run["slow"].append(rec)
            elif kind == "tune":  # a setting the engine's controller changed
                run["tune"].append(rec)
            elif kind == "summary":
                run["summaries"].append(rec)
            elif kind == "verdict":
                run["verdict"] = rec
    return run


def _esc(x) -> str:
    return html.escape(str(x), quote=True)


def _nice_ticks(lo: float, hi: float, n: int = 5, integer: bool = False) -> list[float]:
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = min((m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw), default=mag * 10)
    if integer:
        step = max(1, math.ceil(step))  # batch numbers: no "2.5"
    start = math.ceil(lo / step) * step
    ticks = []
    t = start
    while t <= hi + 1e-9 * step:
        ticks.append(round(t, 10))
        t += step
    return ticks


def _fmt(v: float) -> str:
    return f"{v:g}" if abs(v) < 1e5 else f"{v:.3g}"


def _axes(x_label: str, y_label: str, xt: Iterable[tuple[float, str]], yt: Iterable[tuple[float, str]]) -> str:
    """Axis lines, ticks and labels; tick positions are already in px."""
    out = [f'<line class="axis" x1="{ML}" y1="{H - MB}" x2="{W - MR}" y2="{H - MB}"/>',
           f'<line class="axis" x1="{ML}" y1="{MT}" x2="{ML}" y2="{H - MB}"/>']
    for x, label in xt:
        out.append(f'<line class="tick" x1="{x:.1f}" y1="{H - MB}" x2="{x:.1f}" y2="{H - MB + 4}"/>'
                   f'<text class="tick-label" x="{x:.1f}" y="{H - MB + 16}" text-anchor="middle">{_esc(label)}</text>')
    for y, label in yt:
        out.append(f'<line class="grid" x1="{ML}" y1="{y:.1f}" x2="{W - MR}" y2="{y:.1f}"/>'
                   f'<text class="tick-label" x="{ML - 6}" y="{y + 4:.1f}" text-anchor="end">{_esc(label)}</text>')
    out.append(f'<text class="axis-label" x="{(ML + W - MR) / 2}" y="{H - 6}" text-anchor="middle">{_esc(x_label)}</text>')
    out.append(f'<text class="axis-label" transform="translate(14,{(MT + H - MB) / 2}) rotate(-90)" '
               f'text-anchor="middle">{_esc(y_label)}</text>')
    return "".join(out)


def _svg(id_: str, title: str, body: str) -> str:
    return (f'<svg id="{id_}" class="plot" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
            f'xmlns="http://www.w3.org/2000/svg" role="img" aria-label="{_esc(title)}">'
            f'<title>{_esc(title)}</title>{body}</svg>')


def wait_plot(batches: list[dict], slow: list[dict]) -> str:
    """t_wait (and t_compute) per batch; a red marker on each slow batch."""
    n = len(batches)
    xs = [b["batch"] for b in batches]
    waits = [b["wait_s"] * 1e3 for b in batches]
    computes = [b.get("compute_s", 0) * 1e3 for b in batches]
    x0, x1 = (min(xs), max(xs)) if xs else (0, 1)
    x1 = x1 if x1 > x0 else x0 + 1
    ymax = max(waits + computes + [1e-3]) * 1.08
    px = lambda x: ML + (x - x0) / (x1 - x0) * (W - ML - MR)  # noqa: E731
    py = lambda y: H - MB - y / ymax * (H - MT - MB)  # noqa: E731
    body = [_axes("batch", "t_wait (ms)",
                  [(px(t), _fmt(t)) for t in _nice_ticks(x0, x1, integer=True) if x0 <= t <= x1],
                  [(py(t), _fmt(t)) for t in _nice_ticks(0, ymax) if t <= ymax])]
    if n:
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, computes))
        body.append(f'<polyline class="series compute" fill="none" stroke="#7a7a7a" stroke-dasharray="4 3" '
                    f'points="{pts}"/>')
        pts = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in zip(xs, waits))
        body.append(f'<polyline class="series wait" fill="none" stroke="#1f5fbf" stroke-width="1.5" points="{pts}"/>')
    by_batch = {b["batch"]: b for b in batches}
    for s in slow:
        b = s["batch"]
        y = s["wait_s"] * 1e3
        x = px(b) if b in by_batch or x0 <= b <= x1 else px(x1)
        body.append(f'<circle class="slow-marker" cx="{x:.1f}" cy="{py(y):.1f}" r="5" fill="none" stroke="#d62728" '
                    f'stroke-width="2"><title>{_esc(s.get("line", ""))}</title></circle>')
    body.append(f'<g class="legend"><line x1="{W - 250}" y1="12" x2="{W - 230}" y2="12" stroke="#1f5fbf" '
                f'stroke-width="1.5"/><text x="{W - 226}" y="16">t_wait</text>'
                f'<line x1="{W - 180}" y1="12" x2="{W - 160}" y2="12" stroke="#7a7a7a" '
                f'stroke-dasharray="4 3"/><text x="{W - 156}" y="16">t_compute</text>'
                f'<circle cx="{W - 80}" cy="12" r="4" fill="none" stroke="#d62728" stroke-width="2"/>'
                f'<text x="{W - 72}" y="16">slow</text></g>')
    return _svg("wait-plot", "t_wait per batch", "".join(body))


def histogram(waits_s: list[float], bins_per_decade: int = 4) -> tuple[list[tuple[float, float, int]], str]:
    """Log-spaced bins over the waits (ms) and the SVG; returns (bins, svg)."""
    ms = [max(w * 1e3, 1e-3) for w in waits_s]
    if not ms:
        return [], _svg("wait-histogram", "t_wait histogram", _axes("t_wait (ms, log scale)", "batches", [], []))
    lo = math.floor(math.log10(min(ms)) * bins_per_decade) / bins_per_decade
    hi = math.ceil(math.log10(max(ms)) * bins_per_decade) / bins_per_decade
    if hi <= lo:
        hi = lo + 1 / bins_per_decade
    nb = round((hi - lo) * bins_per_decade)
    counts = [0] * nb
    for v in ms:
        i = min(nb - 1, int((math.log10(v) - lo) * bins_per_decade))
        counts[i] += 1
    bins = [(10 ** (lo + i / bins_per_decade), 10 ** (lo + (i + 1) / bins_per_decade), c) for i, c in enumerate(counts)]
    cmax = max(counts) * 1.1
    bw = (W - ML - MR) / nb
    py = lambda c: H - MB - c / cmax * (H - MT - MB)  # noqa: E731
    decades = range(math.ceil(lo), math.floor(hi) + 1)
    xt = [(ML + (d - lo) * bins_per_decade * bw, _fmt(10.0 ** d)) for d in decades]
    body = [_axes("t_wait (ms, log scale)", "batches", xt,
                  [(py(t), _fmt(t)) for t in _nice_ticks(0, cmax) if t <= cmax])]
    for i, (a, b, c) in enumerate(bins):
        if c == 0:
            continue
        body.append(f'<rect class="hist-bar" x="{ML + i * bw + 1:.1f}" y="{py(c):.1f}" width="{bw - 2:.1f}" '
                    f'height="{H - MB - py(c):.1f}" fill="#1f5fbf"><title>{a:.3g}–{b:.3g} ms: {c}</title></rect>')
    return bins, _svg("wait-histogram", "t_wait histogram", "".join(body))


def utilisation_plot(batches: list[dict]) -> str:
    """Read and decode utilisation per batch (request-to-request cycle when
    recorded, else the wait window), 0–100%."""
    pts_r, pts_d = [], []
    for b in batches:
        ev = b.get("cycle") or b.get("stages")
        if ev:
            pts_r.append((b["batch"], ev["read_util"] * 100))
            pts_d.append((b["batch"], ev["decode_util"] * 100))
    if not pts_r:
        return ('<p class="no-evidence" id="utilisation-plot">No stage evidence in this run (a wrapped iterable '
                'gives timing only): stage utilisation is not plotted.</p>')
    x0 = min(x for x, _ in pts_r)
    x1 = max(x for x, _ in pts_r)
    x1 = x1 if x1 > x0 else x0 + 1
    px = lambda x: ML + (x - x0) / (x1 - x0) * (W - ML - MR)  # noqa: E731
    py = lambda y: H - MB - y / 105 * (H - MT - MB)  # noqa: E731
    body = [_axes("batch", "utilisation (%)", [(px(t), _fmt(t)) for t in _nice_ticks(x0, x1, integer=True) if x0 <= t <= x1],
                  [(py(t), f"{t:g}") for t in (0, 25, 50, 75, 100)])]
    for cls, pts, color in (("read", pts_r, "#2ca02c"), ("decode", pts_d, "#ff7f0e")):
        body.append(f'<polyline class="series util-{cls}" fill="none" stroke="{color}" stroke-width="1.5" points="'
                    + " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts) + '"/>')
    body.append(f'<g class="legend"><line x1="{W - 200}" y1="12" x2="{W - 180}" y2="12" stroke="#2ca02c" '
                f'stroke-width="1.5"/><text x="{W - 176}" y="16">read</text>'
                f'<line x1="{W - 120}" y1="12" x2="{W - 100}" y2="12" stroke="#ff7f0e" '
                f'stroke-width="1.5"/><text x="{W - 96}" y="16">decode</text></g>')
    return _svg("utilisation-plot", "stage utilisation per batch", "".join(body))


def _numbers_table(stats: dict, totals: dict | None) -> str:
    rows = [("batches in window", stats.get("batches")),
            ("t_wait mean", f'{stats.get("wait_mean_s", 0) * 1e3:.1f} ms'),
            ("t_wait std", f'{stats.get("wait_std_s", 0) * 1e3:.1f} ms'),
            ("t_wait p50 / p95 / p99", " / ".join(f'{stats.get(k, 0) * 1e3:.1f}' for k in
                                                  ("wait_p50_s", "wait_p95_s", "wait_p99_s")) + " ms"),
            ("t_wait min / max", f'{stats.get("wait_min_s", 0) * 1e3:.1f} / {stats.get("wait_max_s", 0) * 1e3:.1f} ms'),
            ("t_h2d mean", f'{stats.get("h2d_mean_s", 0) * 1e3:.1f} ms'),
            ("t_compute mean", f'{stats.get("compute_mean_s", 0) * 1e3:.1f} ms'),
            ("pipeline efficiency", f'{stats.get("efficiency", 0) * 100:.1f}%'),
            ("t_wait + t_h2d < t_compute", "yes" if stats.get("keeps_up") else "no")]
    if totals:
        rows += [("batches (whole run)", totals.get("batches")),
                 ("slow batches (whole run)", totals.get("slow_batches")),
                 ("efficiency (whole run)", f'{totals.get("efficiency", 0) * 100:.1f}%')]
    return ('<table class="numbers">' + "".join(f"<tr><th>{_esc(k)}</th><td>{_esc(v)}</td></tr>" for k, v in rows)
            + "</table>")


def _fallback_stats(batches: list[dict]) -> dict:
    """Golden numbers from the raw records when the run wrote no verdict
    (it was killed): the last window's worth of batches."""
    tail = batches[-50:]
    if not tail:
        return {}
    w = [b["wait_s"] for b in tail]
    c = sum(b.get("compute_s", 0) for b in tail)
    h = sum(b.get("h2d_s", 0) for b in tail)
    mean = sum(w) / len(w)
    s = sorted(w)
    pct = lambda q: s[int(q * (len(s) - 1))]  # noqa: E731 - nearest rank is enough here
    return {"batches": len(tail), "wait_mean_s": mean,
            "wait_std_s": math.sqrt(sum((x - mean) ** 2 for x in w) / len(w)),
            "wait_min_s": s[0], "wait_max_s": s[-1], "wait_p50_s": pct(0.5), "wait_p95_s": pct(0.95),
            "wait_p99_s": pct(0.99), "h2d_mean_s": h / len(tail), "compute_mean_s": c / len(tail),
            "efficiency": c / (sum(w) + h + c) if sum(w) + h + c > 0 else 0, "keeps_up": sum(w) + h < c}


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:900px;color:#222}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px}
.meta{color:#666} .verdict{border-left:6px solid #d62728;background:#fdf3f3;padding:10px 14px}
.verdict.healthy{border-color:#2ca02c;background:#f2faf2}
.verdict .bottleneck{font-size:18px;font-weight:600}
table{border-collapse:collapse} th,td{padding:3px 10px;border-bottom:1px solid #eee;text-align:left}
.plot text{font-size:11px;fill:#444} .axis{stroke:#333} .tick{stroke:#333} .grid{stroke:#eee}
.axis-label{font-size:12px;fill:#222} code,.slow-lines{font-family:ui-monospace,monospace;font-size:12px}
.slow-lines{white-space:pre-wrap;background:#f7f7f7;padding:8px}
"""


def render(run: dict, source: str = "") -> str:
    batches, slow = run["batches"], run["slow"]
    verdict = run["verdict"] or {}
    stats = verdict.get("window_stats") or (run["summaries"][-1] if run["summaries"] else _fallback_stats(batches))
    meta = run["meta"]
    healthy = bool(verdict.get("healthy"))
    bottleneck = verdict.get("bottleneck", "unknown (the run wrote no verdict)")
    _, hist_svg = histogram([b["wait_s"] for b in batches])
    config = meta.get("config") or {}
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>stoker report — {_esc(Path(source).name or 'run')}</title><style>{_CSS}</style></head><body>",
        f"<h1>stoker report</h1><p class='meta'>{_esc(source)} · source: {_esc(meta.get('source', '?'))} · "
        f"{len(batches)} batches · {len(slow)} slow · config: "
        f"<code>{_esc(json.dumps(config))}</code></p>",
        # The CPUs the loader's defaults counted, and why (core/cpu_share.h).
        (f"<p class='meta' id='cores'>Cores: {_esc(config['cores_from'])}</p>" if config.get("cores_from") else ""),
        f"<div id='verdict' class='verdict{' healthy' if healthy else ''}'>"
        f"<div class='bottleneck'>Bottleneck: <span id='bottleneck'>{_esc(bottleneck)}</span>"
        f"{' (healthy: the input keeps up)' if healthy else ''}</div>"
        f"<p id='reason'>{_esc(verdict.get('reason', ''))}</p>"
        f"<p id='recommendation'><b>Recommended:</b> {_esc(verdict.get('recommendation', ''))}</p></div>",
        "<h2>Golden numbers</h2>", _numbers_table(stats, verdict.get("totals")),
        "<h2>t_wait per batch</h2>", wait_plot(batches, slow),
        "<h2>Wait-time histogram</h2>", hist_svg,
        "<h2>Stage utilisation</h2>", utilisation_plot(batches),
        f"<h2>Slow batches ({len(slow)})</h2>",
        "<div class='slow-lines' id='slow-lines'>" + ("\n".join(_esc(s.get("line", "")) for s in slow) or "none")
        + "</div>",
        f"<h2>Settings changed while it ran ({len(run.get('tune', []))})</h2>",
        "<div class='slow-lines' id='tuning'>"
        + ("\n".join(f"{t.get('time_s', 0):7.2f} s  {_esc(t.get('line', ''))}" for t in run.get("tune", []))
           or "none") + "</div>",
        "<h2>Summaries</h2><div class='slow-lines' id='summaries'>"
        + ("\n".join(_esc(s.get("line", "")) for s in run["summaries"]) or "none") + "</div>",
        "</body></html>",
    ]
    return "".join(parts)


def write_report(jsonl: str | Path, out: str | Path) -> Path:
    run = load(jsonl)
    out = Path(out)
    out.write_text(render(run, str(jsonl)), encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="stoker report",
                                description="A self-contained HTML report from an observer's JSON-lines record.")
    p.add_argument("jsonl", help="the run's JSON lines (Loader(..., jsonl=PATH) or stoker.profile(..., jsonl=PATH))")
    p.add_argument("-o", "--output", default=None, help="the HTML page to write (default: RUN.html)")
    args = p.parse_args(argv)
    out = args.output or str(Path(args.jsonl).with_suffix(".html"))
    try:
        write_report(args.jsonl, out)
    except (OSError, ValueError) as e:
        print(f"stoker report: {e}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
