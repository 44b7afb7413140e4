"""Workload V read over HTTP: nginx on loopback serving bench/data/V, behind the
fault proxy (tests/python/fault_proxy.py, its own process) adding 20 ms per
request. In one process, on the same files: stoker over the URLs at several
io_depth (reads in flight; coalesced runs of a batch's samples, and one GET per
sample as before coalescing), DataLoader + webdataset over the same URLs
(`pipe:curl -s URL`) at each worker count, and stoker on the local files.
Writes bench/results/<UTC>-remote.{json,md}.

    bash bench/run.sh --remote [--quick]
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import peers  # noqa: E402
import vision  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(port: int):
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing on port {port}")


class Servers:
    """nginx (root = the data dir) + the latency proxy, both in their own processes."""

    def __init__(self, root: Path, latency: float):
        self.tmp = Path(tempfile.mkdtemp(prefix="stoker-bench-nginx-"))
        port = _free_port()
        user = "user root;" if os.geteuid() == 0 else ""
        temp = "".join(f"{k}_temp_path {self.tmp}/{k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        (self.tmp / "nginx.conf").write_text(
            f"daemon off; worker_processes 2; pid {self.tmp}/nginx.pid; {user}\nerror_log {self.tmp}/error.log;\n"
            f"events {{ worker_connections 1024; }}\nhttp {{ access_log off; sendfile on; {temp}\n"
            f"  server {{ listen 127.0.0.1:{port}; root {root}; location / {{ }} }} }}\n")
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.nginx = subprocess.Popen([nginx, "-e", f"{self.tmp}/error.log", "-p", str(self.tmp), "-c",
                                       str(self.tmp / "nginx.conf")])
        _wait(port)
        self.proxy = subprocess.Popen([sys.executable, str(ROOT / "tests/python/fault_proxy.py"), "--upstream",
                                       str(port), "--latency", str(latency)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
        self.port = int(self.proxy.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def close(self):
        self.proxy.stdin.close()
        self.proxy.wait(timeout=10)
        self.nginx.terminate()
        self.nginx.wait(timeout=10)
        shutil.rmtree(self.tmp, ignore_errors=True)


def main(args, w: dict, data: dict, stoker_bin: str) -> dict:
    shards = [Path(p) for p in data["shards"]]
    if not all(Path(str(p) + ".idx").exists() for p in shards):  # sidecars: one GET per shard to index
        subprocess.run([stoker_bin, "index", "-q", *map(str, shards)], check=True)
    latency = 0.020
    srv = Servers(Path(data["dir"]), latency)
    runs = []
    try:
        urls = [f"{srv.url}/{p.name}" for p in shards]

        def run(name, setting, make):
            r = vision.run_epoch(make, "cls" if name.startswith("reads-only") else
                                 "jpg" if name.startswith("stoker") else 0)
            r.update(loader=name, setting=setting)
            print(f"  {name:<28} {setting:<22} {r['epoch_rate']:8.0f} samples/s  ({r['samples']} in "
                  f"{r['seconds']:.1f} s, other processes {r['other_cpu_cores']:.2f} cores)", flush=True)
            runs.append(r)

        # Warm-up, not recorded: the process's first loader pays one-time costs
        # (imports, first pages) that would otherwise fall on whichever row runs first.
        vision.run_epoch(peers.stoker_loader(w, shards[:1], 2, 4), "jpg")
        run("stoker local", "threads 2, io_depth 4", peers.stoker_loader(w, shards, 2, 4))
        # As before coalescing and read-ahead (one ranged GET per sample, reads only
        # for batches with a buffer), for comparison in the same run.
        for depth in ([32] if args.quick else [16, 32]):
            run("stoker http per-sample GET", f"threads 2, io_depth {depth}",
                peers.stoker_loader(w, urls, 2, depth, coalesce_bytes=0, read_ahead_batches=0))
        for depth in ([4, 16] if args.quick else [2, 4, 8, 16]):
            run("stoker http+20ms", f"threads 2, io_depth {depth}", peers.stoker_loader(w, urls, 2, depth))
        # Reads alone: only the 'cls' field is decoded (each read still fetches the
        # sample's whole byte range), so the rate shows what the storage path
        # delivers when decode costs nothing -- the case where latency shows.
        for name, srcs, depth, co in (("reads-only local", shards, 4, None),
                                      ("reads-only http per-sample GET", urls, 32, 0),  # read-ahead off too
                                      ("reads-only http+20ms", urls, 8, None)):
            run(name, f"io_depth {depth}", _reads_only(w, srcs, depth, co))
        # Local again after the HTTP rows: the machine's load drifts during a run.
        run("stoker local", "threads 2, io_depth 4 (again)", peers.stoker_loader(w, shards, 2, 4))
        for workers in ([3] if args.quick else [2, 3, 4]):
            run("DataLoader+wds pipe:curl", f"workers {workers}",
                peers.dl_wds(w, [f"pipe:curl -s {u}" for u in urls], workers))
    finally:
        srv.close()
    best = lambda name: max((r for r in runs if r["loader"] == name), key=lambda r: r["epoch_rate"])  # noqa: E731
    local, http, dl = best("stoker local"), best("stoker http+20ms"), best("DataLoader+wds pipe:curl")
    ro = {n: best(n)["epoch_rate"] for n in ("reads-only local", "reads-only http per-sample GET",
                                             "reads-only http+20ms")}
    summary = {
        "latency_s": latency,
        "reads_only_samples_per_s": ro,
        "stoker_http_per_sample_over_local": best("stoker http per-sample GET")["epoch_rate"] / local["epoch_rate"],
        # Steady state (first batch to last: start-up round trips left out), best of each.
        "stoker_http_over_local_steady": max(r["steady_rate"] for r in runs if r["loader"] == "stoker http+20ms") /
        max(r["steady_rate"] for r in runs if r["loader"] == "stoker local"),
        "stoker_http_over_dl_wds": http["epoch_rate"] / dl["epoch_rate"],
        "stoker_http_over_local": http["epoch_rate"] / local["epoch_rate"],
        "best": {"local": local["setting"], "http": http["setting"], "dl_wds": dl["setting"]},
    }
    print(f"  stoker over HTTP / DataLoader+wds over HTTP: {summary['stoker_http_over_dl_wds']:.2f}x (target >= 2)")
    print(f"  stoker over HTTP / stoker local: {summary['stoker_http_over_local']:.2f} (target >= 0.90); "
          f"one GET per sample: {summary['stoker_http_per_sample_over_local']:.2f}; "
          f"steady state: {summary['stoker_http_over_local_steady']:.2f}")
    print(f"  reads only (samples/s): local {ro['reads-only local']:.0f}, HTTP one GET per sample "
          f"{ro['reads-only http per-sample GET']:.0f}, HTTP coalesced {ro['reads-only http+20ms']:.0f}")
    return {"workload": "V-http", "count": data["count"], "runs": runs, "summary": summary}


def _reads_only(w: dict, sources, io_depth: int, coalesce_bytes):
    def make():
        import stoker

        return stoker.Loader([str(p) for p in sources], fields={"cls": stoker.scalar("int64")}, batch_size=w["batch"],
                             shuffle=False, decode_threads=2, io_depth=io_depth, prefetch=2, output="torch",
                             observe=False, coalesce_bytes=coalesce_bytes,
                             read_ahead_batches=0 if coalesce_bytes == 0 else None)
    return make


def write(payload: dict, stem: Path):
    stem.parent.mkdir(parents=True, exist_ok=True)
    Path(str(stem) + ".json").write_text(json.dumps(payload, indent=1, default=str))
    s = payload["summary"]
    lines = [f"# V over HTTP (nginx on loopback, +{s['latency_s'] * 1000:.0f} ms per request by the proxy)", "",
             "Shared, noisy machine: compare the ratios of this one run, not absolute rates.", "",
             "| loader | setting | samples/s (epoch) | samples/s (steady) | first batch (s) | other processes (cores) |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for r in payload["runs"]:
        lines.append(f"| {r['loader']} | {r['setting']} | {r['epoch_rate']:.0f} | {r['steady_rate']:.0f} | "
                     f"{r['ttfb_s']:.2f} | {r['other_cpu_cores']:.2f} |")
    lines += ["", f"stoker HTTP / DataLoader+webdataset HTTP: **{s['stoker_http_over_dl_wds']:.2f}x** (target >= 2); "
              f"stoker HTTP / stoker local: **{s['stoker_http_over_local']:.2f}** (target >= 0.90); "
              f"one GET per sample (before coalescing): {s['stoker_http_per_sample_over_local']:.2f}; "
              f"steady state (first batch to last): {s['stoker_http_over_local_steady']:.2f}"]
    Path(str(stem) + ".md").write_text("\n".join(lines) + "\n")
