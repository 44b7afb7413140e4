"""Peers side by side at scale (issue 31): a rank's memory and its time to the first
batch, stoker against Mosaic Streaming and webdataset, on the same dataset.

The dataset is bench/scale_memory.py's: tar shards of 10,000 tiny samples (a 16-byte
.bin member and a .cls label), written once under --dir (/tmp/stoker-scale, reused read
only). Every loader reads them as rank 0 of 8, shuffle on, batch 64, in its own process:

    stoker, shards      stoker.Loader("<dir>/scale-{00000..NNNNN}.tar", {"cls": scalar int64}, batch_size=64,
                        shuffle=True, rank=0, world_size=8, output="numpy", observe=False): no sidecars, so
                        it scans the tar headers
    stoker, .idx        the same over hard links of the shards with `stoker index` sidecars
    stoker, manifest    the stoker-manifest.json `stoker index` writes beside those links, as the source
                        (a build whose `stoker index` writes none: "not available in this build")
    stoker, stream      the plain shards in stream mode (stream=True, samples_per_epoch=N, the default
                        shuffle buffer of 1,000 samples): each shard read front to back, nothing counted
    Mosaic Streaming    MDSWriter's copy (columns bin: bytes, cls: int; one MDS shard per tar shard) read
                        by StreamingDataset(local=, shuffle=True, shuffle_algo="py1e", shuffle_seed=0,
                        batch_size=64) in a DataLoader(batch_size=64, num_workers=0); rank 0 of 8 from
                        RANK=0 WORLD_SIZE=8 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 and torch's fake process group
                        (rank 0, world 8): with WORLD_SIZE > 1 it initializes torch.distributed itself
                        (env://, a rendezvous the absent ranks never reach) unless it is initialized, and
                        with LOCAL_WORLD_SIZE=8 its shared-memory barrier waits for the other 7 local ranks.
                        Alone on its node, rank 0 is its node's leader and does what rank 0 of a node of 8
                        does, the whole epoch's partition included
    webdataset          wds.WebDataset(the same pattern, shardshuffle=<shards>, nodesplitter=split_by_node,
                        seed=0).shuffle(1000).decode().to_tuple("bin", "cls").batched(64), iterated in the
                        process (streaming); rank 0 of 8 from RANK=0 WORLD_SIZE=8, as split_by_node reads them

Each measurement is a fresh process: VmRSS after the imports, before the loader is made;
VmRSS after the first batch (growth = the difference) and VmHWM (peak = the high-water
mark less the same start); the seconds from the constructor's call to the first batch.
--reps rounds on a hot page cache (every file read once first), the loaders' order
reversed every other round, medians. Then one cold pass: each loader's files are dropped
from the page cache (posix_fadvise DONTNEED, file by file) and the pages of them resident
when the first batch arrives are counted (mincore): the bytes it read from the files to
get there, the kernel's read-ahead around each read included.

    bash bench/run.sh --scale [--quick] [--sizes 200000,2000000] [--reps 3]

--quick is 200k samples only. Writes bench/results/<UTC>-scale.{json,md} (--out STEM).
The MDS copy and the indexed links are written once per size under --work
(default <dir>-bench). --per-shard makes small shards for the tests (a --dir of its own).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import common  # noqa: E402

BATCH, RANK, WORLD, SEED, SHUFFLE_BUFFER = 64, 0, 8, 0, 1000
STEADY_BATCHES = 100  # 6,400 samples: a 1,000-sample shuffle buffer that fills as it goes is full
MANIFEST = "stoker-manifest.json"
CHILD_TIMEOUT_S = 300
LOADERS = ("stoker, shards", "stoker, .idx", "stoker, manifest", "stoker, stream", "Mosaic Streaming", "webdataset")
STOKERS = LOADERS[:4]
LOADER_IDS = dict(zip(("stoker", "stoker-idx", "stoker-manifest", "stoker-stream", "mosaic", "webdataset"),
                      LOADERS))  # --only
PEERS = ("Mosaic Streaming", "webdataset")


# -- the page cache: dropping a file's pages and counting those resident -------------------------

def drop_cached(paths) -> None:
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fdatasync(fd)  # dirty pages (a file just written) are not dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_ahead_kb(path) -> int | None:
    """The kernel's read-ahead of the block device holding path (a partition's is its disk's)."""
    st = os.stat(path)
    dev = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    for q in (dev / "queue/read_ahead_kb", dev / "../queue/read_ahead_kb"):
        try:
            return int(q.read_text())
        except (OSError, ValueError):
            continue
    return None


def warm(paths) -> None:
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while f.read(8 << 20):
                pass


# -- one measurement, in a fresh process -------------------------------------------------------

def _status_mb() -> dict:
    """VmRSS, VmHWM and VmRSS's parts: RssAnon (memory the kernel cannot drop), RssFile
    (mapped file pages: a mapped shard's page-cache pages, touched by this process) and
    RssShmem (shared memory: Mosaic keeps its state there)."""
    out = {}
    for line in open("/proc/self/status"):
        key = line.split(":", 1)[0]
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem"):
            out[key] = int(line.split()[1]) / 1024
    return out


def _code_pages_mb() -> float:
    """Resident pages of mapped shared libraries (*.so, *.so.N): code, loaded once per node and
    shared by its ranks, that a native loader first touches during its first batch where a
    Python one ran its code at import. Their copy-on-write pages (a library's written data) are
    anonymous and left out: RssAnon counts them. The rest of RssFile is data: mapped shard pages."""
    kb, code, rss = 0, False, 0
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split(None, 5)
            if "-" in head[0] and len(head) >= 5:  # a mapping's first line: range perms offset dev inode [path]
                path = head[5].strip() if len(head) > 5 else ""
                code = re.search(r"\.so(\.|$)", Path(path).name) is not None
            elif code and head[0] == "Rss:":
                rss = int(head[1])
            elif code and head[0] == "Anonymous:":
                kb += rss - int(head[1])
    return kb / 1024


def child(spec: dict) -> dict:
    """Import, measure, make the loader, take the first batch, measure again."""
    kind = spec["kind"]
    if kind == "stoker":
        import numpy as np
        import stoker

        before, code_before = _status_mb(), _code_pages_mb()
        t0 = time.monotonic()
        stream = {"stream": True, "samples_per_epoch": spec["samples"]} if spec.get("stream") else {}
        loader = stoker.Loader(spec["source"], {"cls": stoker.scalar("int64")}, batch_size=BATCH, shuffle=True,
                               seed=SEED, rank=RANK, world_size=WORLD, output="numpy", observe=False, **stream)
        batches = iter(loader)
        batch = next(batches)
        t1 = time.monotonic()
        labels = np.asarray(batch["cls"])
    elif kind == "mosaic":
        import numpy as np
        import torch

        from peers.mosaic_streaming import streaming_base

        import torch.distributed as dist
        from torch.testing._internal.distributed.fake_pg import FakeStore

        base, util = streaming_base()
        # With WORLD_SIZE > 1 Mosaic joins torch.distributed, initializing it from the environment
        # (a rendezvous the 7 absent ranks never reach) unless it is initialized: torch's fake
        # process group is a world of 8 in which this process is rank 0 and collectives (its
        # barriers) return at once.
        dist.init_process_group(backend="fake", rank=RANK, world_size=WORLD, store=FakeStore())
        util.clean_stale_shared_memory()  # a killed run's shared memory would block this one
        before, code_before = _status_mb(), _code_pages_mb()
        t0 = time.monotonic()
        ds = base.StreamingDataset(local=spec["source"], shuffle=True, shuffle_algo="py1e", shuffle_seed=SEED,
                                   batch_size=BATCH)
        loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=0)
        batches = iter(loader)
        batch = next(batches)
        t1 = time.monotonic()
        labels = np.asarray(batch["cls"])
    elif kind == "webdataset":
        import numpy as np
        import webdataset as wds

        before, code_before = _status_mb(), _code_pages_mb()
        t0 = time.monotonic()
        loader = (wds.WebDataset(spec["source"], shardshuffle=spec["shards"], nodesplitter=wds.split_by_node,
                                 seed=SEED, empty_check=False)
                  .shuffle(SHUFFLE_BUFFER).decode().to_tuple("bin", "cls").batched(BATCH))
        batches = iter(loader)
        batch = next(batches)
        t1 = time.monotonic()
        labels = np.asarray(batch[1])
    else:
        raise ValueError(f"unknown loader kind {kind!r}")
    after = _status_mb()
    code_growth = _code_pages_mb() - code_before
    # The same after STEADY_BATCHES (or the rank's epoch, if shorter): a shuffle buffer that
    # fills as it goes (webdataset's, stoker stream's) is full by then.
    taken = 1
    for _ in range(STEADY_BATCHES - 1):
        try:
            next(batches)
        except StopIteration:
            break
        taken += 1
    steady = _status_mb()
    out = {"rss_before_mb": before["VmRSS"], "rss_growth_mb": after["VmRSS"] - before["VmRSS"],
           "peak_growth_mb": max(0.0, after["VmHWM"] - before["VmRSS"]),
           "anon_growth_mb": after["RssAnon"] - before["RssAnon"],
           "file_growth_mb": after["RssFile"] - before["RssFile"],
           "code_growth_mb": code_growth, "data_file_growth_mb": after["RssFile"] - before["RssFile"] - code_growth,
           "shmem_growth_mb": after["RssShmem"] - before["RssShmem"],
           "steady_batches": taken, "steady_anon_growth_mb": steady["RssAnon"] - before["RssAnon"],
           "steady_peak_growth_mb": max(0.0, steady["VmHWM"] - before["VmRSS"]),
           "first_batch_s": t1 - t0, "batch_rows": int(labels.shape[0]),
           "labels_in_range": bool(((labels >= 0) & (labels < 1000)).all())}
    if spec.get("count_files"):
        out["resident_bytes"] = common.resident_bytes(spec["count_files"])
    return out


def run_child(spec: dict, env: dict) -> dict:
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(spec)],
                              capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, env={**os.environ, **env})
    except subprocess.TimeoutExpired:
        return {"error": f"no first batch in {CHILD_TIMEOUT_S} s (killed)"}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {proc.returncode}: {tail[:300]}"}
    return json.loads(lines[-1])


# -- the datasets: the tar shards, their indexed links, the MDS copy ------------------------------

def stoker_binary() -> str:
    import stoker._cli as cli

    return cli.binary()


def index_links(shards: list[str], work: Path, n: int) -> tuple[Path, list[str]]:
    """Hard links of the shards in a folder of their own, with `stoker index` run over
    them (again whenever the stoker command changed: a newer one may write a manifest)."""
    d = work / f"stoker-n{n}"
    d.mkdir(parents=True, exist_ok=True)
    links = []
    for p in shards:
        link = d / Path(p).name
        if not link.exists():
            os.link(p, link)
        links.append(str(link))
    binary = stoker_binary()
    st = os.stat(binary)
    stamp = f"{binary} {st.st_size} {st.st_mtime_ns}\n"
    marker = d / ".indexed-by"
    if not (marker.exists() and marker.read_text() == stamp and all(Path(s + ".idx").exists() for s in links)):
        (d / MANIFEST).unlink(missing_ok=True)
        subprocess.run([binary, "index", "--quiet", *links], check=True, capture_output=True)
        marker.write_text(stamp)
    return d, links


def mds_copy(shards: list[str], per_shard: int, work: Path, n: int) -> Path:
    """The same samples (same bytes, same order) written by Mosaic's own MDSWriter, an MDS
    shard per tar shard, under <work>/mds-n<N>; written once (a .done marker)."""
    from peers.mosaic_streaming import streaming_base

    d = work / f"mds-n{n}"
    if (d / ".done").exists():
        return d
    base, _ = streaming_base()
    import shutil

    shutil.rmtree(d, ignore_errors=True)
    t0 = time.monotonic()
    with base.MDSWriter(out=str(d), columns={"bin": "bytes", "cls": "int"}, size_limit=None) as out:
        for path in shards:
            sample = {}
            with tarfile.open(path) as tar:
                for member in tar:
                    sample[member.name.rsplit(".", 1)[1]] = tar.extractfile(member).read()
                    if len(sample) == 2:
                        out.write({"bin": sample["bin"], "cls": int(sample["cls"])})
                        sample = {}
            # cut the shard where the tar shard ends, as write() does at size_limit
            out.flush_shard()
            out._reset_cache()
    counts = [s["samples"] for s in json.loads((d / "index.json").read_text())["shards"]]
    if counts != [per_shard] * len(shards):
        raise RuntimeError(f"{d}: MDS shards of {counts[:4]}... samples, expected {per_shard} each")
    (d / ".done").write_text("")
    print(f"  MDS copy of {n:,} samples written in {time.monotonic() - t0:.0f} s: {d}", flush=True)
    return d


def files_under(d: Path, suffixes) -> list[str]:
    return sorted(str(p) for p in d.iterdir() if p.is_file() and p.name.endswith(suffixes))


def pattern(root: Path, count: int) -> str:
    return str(root / f"scale-{{00000..{count - 1:05d}}}.tar") if count > 1 else str(root / "scale-00000.tar")


def datasets(root: Path, work: Path, n: int, per_shard: int, only) -> dict:
    """Per loader: the child's spec and env, and the files it may read; or why it cannot run."""
    import scale_memory

    shards = scale_memory.shards_for(root, n, per_shard)
    count = len(shards)
    out = {}
    out["stoker, shards"] = {"spec": {"kind": "stoker", "source": pattern(root, count)}, "env": {}, "files": shards}
    if count >= WORLD:
        out["stoker, stream"] = {"spec": {"kind": "stoker", "source": pattern(root, count), "stream": True,
                                          "samples": n}, "env": {}, "files": shards}
    else:  # each rank streams whole shards of its own
        out["stoker, stream"] = {"unavailable": f"stream mode needs a shard per rank: {count} shards for {WORLD}"}
    try:
        linked, links = index_links(shards, work, n)
        idx = [s + ".idx" for s in links]
        out["stoker, .idx"] = {"spec": {"kind": "stoker", "source": pattern(linked, count)}, "env": {},
                               "files": links + idx}
        if (linked / MANIFEST).exists():
            out["stoker, manifest"] = {"spec": {"kind": "stoker", "source": str(linked / MANIFEST)}, "env": {},
                                       "files": links + idx + [str(linked / MANIFEST)]}
        else:
            out["stoker, manifest"] = {"unavailable": f"not available in this build: `stoker index` wrote no "
                                                      f"{MANIFEST} beside the shards"}
    except subprocess.CalledProcessError as e:
        why = f"`stoker index` failed: {(e.stderr or b'').decode(errors='replace').strip()[-300:]}"
        out["stoker, .idx"] = out["stoker, manifest"] = {"unavailable": why}
    try:
        mds = mds_copy(shards, per_shard, work, n)
        out["Mosaic Streaming"] = {"spec": {"kind": "mosaic", "source": str(mds)},
                                   "env": {"RANK": str(RANK), "WORLD_SIZE": str(WORLD), "LOCAL_RANK": "0",
                                           "LOCAL_WORLD_SIZE": "1"},
                                   "files": files_under(mds, (".mds", ".json"))}
    except Exception as e:  # noqa: BLE001 - a peer that cannot run is a row with its reason
        out["Mosaic Streaming"] = {"unavailable": f"{type(e).__name__}: {str(e)[:300]}"}
    try:
        import webdataset  # noqa: F401

        out["webdataset"] = {"spec": {"kind": "webdataset", "source": pattern(root, count), "shards": count},
                             "env": {"RANK": str(RANK), "WORLD_SIZE": str(WORLD)}, "files": shards}
    except ImportError as e:
        out["webdataset"] = {"unavailable": f"webdataset is not installed: {e}"}
    return {k: v for k, v in out.items() if only is None or k in only}


# -- the run -----------------------------------------------------------------------------------

def median_range(values):
    return [statistics.median(values), min(values), max(values)] if values else None


def measure_size(n: int, loaders: dict, reps: int, cold: bool) -> dict:
    runnable = [name for name, d in loaders.items() if "spec" in d]
    every_file = sorted({f for name in runnable for f in loaders[name]["files"]})
    t0 = time.monotonic()
    warm(every_file)
    print(f"  hot page cache: {len(every_file)} files read ({time.monotonic() - t0:.1f} s)", flush=True)
    runs = {name: [] for name in runnable}
    for rep in range(reps):
        order = runnable if rep % 2 == 0 else runnable[::-1]
        for name in order:
            r = run_child(loaders[name]["spec"], loaders[name]["env"])
            r["rep"] = rep
            runs[name].append(r)
            if "error" in r:
                print(f"  {name}: {r['error']}", flush=True)
            else:
                print(f"  rep {rep} {name:<18} growth {r['rss_growth_mb']:8.1f} MB  peak {r['peak_growth_mb']:8.1f} MB"
                      f"  first batch {r['first_batch_s']:6.2f} s", flush=True)
    cold_runs = {}
    if cold:
        for name in runnable:
            files = loaders[name]["files"]
            drop_cached(files)
            left = common.resident_bytes(files)
            r = run_child({**loaders[name]["spec"], "count_files": files}, loaders[name]["env"])
            if "error" not in r:
                r["resident_before_bytes"] = left
                r["read_bytes"] = r["resident_bytes"] - left
                total = sum(map(os.path.getsize, files))
                print(f"  cold {name:<18} read {r['read_bytes'] / 1e6:9.1f} MB of {total / 1e6:,.0f}"
                      f"  first batch {r['first_batch_s']:6.2f} s", flush=True)
            else:
                print(f"  cold {name}: {r['error']}", flush=True)
            cold_runs[name] = r
    rows = {}
    for name, d in loaders.items():
        if "unavailable" in d:
            rows[name] = {"unavailable": d["unavailable"]}
            continue
        ok = [r for r in runs[name] if "error" not in r]
        errors = [r["error"] for r in runs[name] if "error" in r]
        row = {"source": d["spec"]["source"], "env": d["env"],
               "dataset_bytes": sum(os.path.getsize(f) for f in d["files"]), "files": len(d["files"]),
               "runs": runs[name]}
        if not ok:
            row["unavailable"] = f"every run failed: {errors[0]}"
        else:
            row.update(rss_growth_mb=median_range([r["rss_growth_mb"] for r in ok]),
                       peak_growth_mb=median_range([r["peak_growth_mb"] for r in ok]),
                       anon_growth_mb=median_range([r["anon_growth_mb"] for r in ok]),
                       file_growth_mb=median_range([r["file_growth_mb"] for r in ok]),
                       code_growth_mb=median_range([r["code_growth_mb"] for r in ok]),
                       data_file_growth_mb=median_range([r["data_file_growth_mb"] for r in ok]),
                       steady_anon_growth_mb=median_range([r["steady_anon_growth_mb"] for r in ok]),
                       steady_batches=min(r["steady_batches"] for r in ok),
                       first_batch_s=median_range([r["first_batch_s"] for r in ok]),
                       rss_before_mb=statistics.median(r["rss_before_mb"] for r in ok),
                       batch_ok=all(r["batch_rows"] == BATCH and r["labels_in_range"] for r in ok),
                       errors=errors)
        c = cold_runs.get(name)
        if c is not None:
            row["cold"] = c
            if "error" not in c:
                row["read_bytes_before_first_batch"] = c["read_bytes"]
                row["cold_first_batch_s"] = c["first_batch_s"]
        rows[name] = row
    return rows


def ratios(rows: dict) -> dict:
    """stoker / peer for each stoker variant that ran and each peer that ran (medians)."""
    out = {}
    for s in STOKERS:
        for p in PEERS:
            a, b = rows.get(s, {}), rows.get(p, {})
            if "rss_growth_mb" not in a or "rss_growth_mb" not in b:
                continue
            r = {}
            for key in ("rss_growth_mb", "anon_growth_mb", "steady_anon_growth_mb", "peak_growth_mb", "first_batch_s"):
                r[key] = a[key][0] / b[key][0] if b[key][0] > 0 else None
            if "read_bytes_before_first_batch" in a and "read_bytes_before_first_batch" in b:
                rb = b["read_bytes_before_first_batch"]
                r["read_bytes"] = a["read_bytes_before_first_batch"] / rb if rb > 0 else None
            out[f"{s} / {p}"] = r
    return out


def targets(results: dict) -> list[dict]:
    """Issue 31's, for every stoker source that ran: lower than both peers in RSS growth
    (and its anonymous part apart) and in time to the first batch; at 2M samples an RSS
    growth <= 150 MB (the anonymous part too), and the smallest size's within 20% of it
    (|g(small) - g(2M)| <= 0.2 g(2M))."""
    out = []
    stokers = STOKERS
    for n, res in results.items():
        rows = res["loaders"]
        for s in (s for s in stokers if "rss_growth_mb" in rows.get(s, {})):
            for p in PEERS:
                if "rss_growth_mb" not in rows.get(p, {}):
                    out.append({"size": n, "target": f"{s}: below {p}", "result": "n/a",
                                "why": rows.get(p, {}).get("unavailable")})
                    continue
                steady = f"anonymous RSS growth after {rows[s]['steady_batches']} batches"
                for key, what in (("rss_growth_mb", "RSS growth"), ("anon_growth_mb", "anonymous RSS growth"),
                                  ("steady_anon_growth_mb", steady), ("first_batch_s", "time to first batch")):
                    a, b = rows[s][key][0], rows[p][key][0]
                    out.append({"size": n, "target": f"{s}: {what} below {p}'s", "stoker": a, "peer": b,
                                "result": "PASS" if a < b else "MISS"})
    big_n, small_n = 2_000_000, min(results)
    if big_n in results:
        for s in stokers:
            big = results[big_n]["loaders"].get(s, {})
            if "rss_growth_mb" not in big:
                continue
            g = big["rss_growth_mb"][0]
            out.append({"size": big_n, "target": f"{s}: RSS growth <= 150 MB at 2M", "stoker": g,
                        "result": "PASS" if g <= 150 else "MISS"})
            a = big["anon_growth_mb"][0]
            out.append({"size": big_n, "target": f"{s}: anonymous RSS growth <= 150 MB at 2M", "stoker": a,
                        "result": "PASS" if a <= 150 else "MISS"})
            small = results[small_n]["loaders"].get(s, {})
            if small_n != big_n and "rss_growth_mb" in small:
                g0 = small["rss_growth_mb"][0]
                out.append({"size": big_n, "target": f"{s}: RSS growth at {small_n:,} within 20% of 2M's",
                            "stoker": g0, "peer": g, "result": "PASS" if abs(g0 - g) <= 0.2 * g else "MISS"})
    return out


def fmt_range(t, digits=1):
    if t is None:
        return "–"
    return f"**{t[0]:,.{digits}f}** ({t[1]:,.{digits}f}–{t[2]:,.{digits}f})"


def write(payload: dict, stem: Path) -> None:
    stem.parent.mkdir(parents=True, exist_ok=True)
    Path(str(stem) + ".json").write_text(json.dumps(payload, indent=1, default=str))
    m = payload["machine"]
    lines = ["# Peers at scale: a rank's memory and time to the first batch (issue 31)", "",
             f"`{payload['command']}`, {m['utc']}, {m.get('cpu_count')} cores ({m.get('cpu_model')}), "
             f"{payload['elapsed_s']:.0f} s. Rank 0 of 8, shuffle on, batch 64, tiny samples (16-byte .bin + .cls), "
             f"{payload['per_shard']:,} per shard; a fresh process per measurement; medians of {payload['reps']} "
             f"hot-cache rounds (min–max), order reversed every other round.", "",
             f"**Shared machine**: the 2 cores ran other engineers' builds and tests meanwhile (load average "
             f"{payload['loadavg_start']} at the start, {payload['loadavg_end']} at the end), so the seconds are "
             f"noisy; memory does not depend on it.", "",
             "Growth = VmRSS after the first batch less VmRSS after the imports (the last column: torch's "
             "included for the peers, which import it), split into its anonymous part (RssAnon: what the kernel "
             "cannot drop) and mapped file pages (RssFile), these split again into shard pages (data files in the "
             "page cache that the process touched through a mapping, which the kernel may drop and read again) and "
             "code pages (shared libraries, *.so: a native loader's code is paged in as its first batch runs it, "
             "where a Python loader's ran at import; one copy per node, shared by its ranks); peak = VmHWM less "
             "the same start. Anon after N batches: RssAnon's growth again after N batches in all (100, or the "
             "rank's epoch if shorter): a shuffle buffer that fills as it goes is full by then. "
             "Read = bytes of the loader's files in the page cache at its first batch, from a cold cache "
             "(posix_fadvise DONTNEED per file; mincore), the kernel's read-ahead included (read_ahead_kb "
             f"{m.get('read_ahead_kb')} on this disk: a read into a mapped or sequentially read file brings up to that "
             "much around it); one cold run each.", ""]
    for n, res in payload["results"].items():
        lines += [f"## {int(n):,} samples ({res['shards']} shards)", "",
                  "| loader | RSS growth MB | anon MB | shard pages MB | code pages MB | anon after N batches MB (N) | "
                  "peak growth MB | first batch s (hot) | read before first batch MB (of) | first batch s (cold) | "
                  "RSS after imports MB |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for name, row in res["loaders"].items():
            if "rss_growth_mb" not in row:
                lines.append(f"| {name} | {row.get('unavailable', 'did not run')} | | | | | | | | | |")
                continue
            read = row.get("read_bytes_before_first_batch")
            read_s = f"{read / 1e6:,.1f} ({row['dataset_bytes'] / 1e6:,.0f})" if read is not None else \
                row.get("cold", {}).get("error", "–")
            cold_s = f"{row['cold_first_batch_s']:.2f}" if "cold_first_batch_s" in row else "–"
            lines.append(f"| {name} | {fmt_range(row['rss_growth_mb'])} | {row['anon_growth_mb'][0]:,.1f} | "
                         f"{row['data_file_growth_mb'][0]:,.1f} | {row['code_growth_mb'][0]:,.1f} | "
                         f"{row['steady_anon_growth_mb'][0]:,.1f} ({row['steady_batches']}) | "
                         f"{fmt_range(row['peak_growth_mb'])} | "
                         f"{fmt_range(row['first_batch_s'], 2)} | {read_s} | {cold_s} | {row['rss_before_mb']:,.0f} |")
        if res["ratios"]:
            lines += ["", "| stoker / peer (medians) | RSS growth | anon growth | anon after N batches | peak growth | "
                          "first batch | read |",
                      "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
            f = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731
            for k, r in res["ratios"].items():
                lines.append(f"| {k} | {f(r['rss_growth_mb'])} | {f(r['anon_growth_mb'])} | "
                             f"{f(r['steady_anon_growth_mb'])} | {f(r['peak_growth_mb'])} | "
                             f"{f(r['first_batch_s'])} | "
                             f"{f(r.get('read_bytes'))} |")
        lines.append("")
    if payload["targets"]:
        lines += ["## Targets (issue 31)", ""]
        for t in payload["targets"]:
            if t["result"] == "n/a":
                lines.append(f"- {t['size']:,}: {t['target']}: n/a ({t.get('why')})")
            elif "peer" in t:
                lines.append(f"- {t['size']:,}: {t['target']}: {t['stoker']:,.2f} vs {t['peer']:,.2f} "
                             f"→ {t['result']}")
            else:
                lines.append(f"- {t['size']:,}: {t['target']}: {t['stoker']:,.1f} → {t['result']}")
        lines.append("")
    lines += ["## How each loader was told", ""]
    for line in payload["how"]:
        lines.append(f"- {line}")
    Path(str(stem) + ".md").write_text("\n".join(lines) + "\n")


HOW = [
    "stoker: `stoker.Loader(source, {\"cls\": stoker.scalar(\"int64\")}, batch_size=64, shuffle=True, seed=0, rank=0, "
    "world_size=8, output=\"numpy\", observe=False)`; source = the brace pattern of the plain shards (no sidecars: it "
    "scans the tar headers), the pattern of hard links with `stoker index` sidecars, or their stoker-manifest.json.",
    "Mosaic Streaming: MDSWriter copy (bin: bytes, cls: int, an MDS shard per tar shard); `StreamingDataset(local=, "
    "shuffle=True, shuffle_algo=\"py1e\", shuffle_seed=0, batch_size=64)` in "
    "`DataLoader(batch_size=64, num_workers=0)`; "
    "RANK=0 WORLD_SIZE=8 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 in the environment and torch's fake process group "
    "(`init_process_group(backend=\"fake\", rank=0, world_size=8, store=FakeStore())`, from "
    "torch.testing._internal.distributed.fake_pg): with WORLD_SIZE > 1 and torch.distributed not initialized, "
    "StreamingDataset initializes it itself (env:// rendezvous, which the 7 absent ranks never join); its one "
    "collective, a barrier, returns at once in the fake group. LOCAL_WORLD_SIZE=8 would hang: its shared-memory "
    "barrier waits for the 7 other ranks of the node. Alone on its node, rank 0 is the node's local leader and "
    "computes the epoch's partition for every rank, as rank 0 of a node of 8 does; its default "
    "num_canonical_nodes then follows 8 nodes (py1e: num_canonical_nodes = nodes).",
    "webdataset: `wds.WebDataset(pattern, shardshuffle=<shards>, nodesplitter=wds.split_by_node, seed=0)"
    ".shuffle(1000).decode().to_tuple(\"bin\", \"cls\").batched(64)` iterated in the process (streaming, no "
    "index); RANK=0 WORLD_SIZE=8 in the environment, which split_by_node reads.",
    "Before its first batch, webdataset opens the first of its shards (every 8th of the list, in shuffled order) "
    "and fills its shuffle buffer's first 100 samples: it never learns the dataset's size, and its first batch "
    "comes from that one shard. Mosaic reads index.json (each shard's count) and computes the epoch's py1e "
    "partition of every sample for every rank (its peak), then reads the samples of its first batch. stoker "
    "counts every shard's samples (tar headers, sidecars or the manifest), plans the rank's shuffled epoch and "
    "reads the batch.",
    "No DataLoader workers anywhere: every loader's memory is in the one process measured (stoker's own threads "
    "included). /proc/self/io is not used for the bytes: read_bytes needs the cache dropped machine-wide, and "
    "rchar misses what stoker reads through mmap.",
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", action="store_true", help=argparse.SUPPRESS)  # run.sh passes its flag through
    ap.add_argument("--quick", action="store_true", help="200k samples only")
    ap.add_argument("--sizes", default=None, help="comma list of sample counts (default 200000,2000000)")
    ap.add_argument("--reps", type=int, default=None, help="hot-cache rounds (default 3, --quick 2)")
    ap.add_argument("--dir", default="/tmp/stoker-scale",
                    help="the tar shards (bench/scale_memory.py's; written if missing)")
    ap.add_argument("--work", default=None, help="the MDS copies and indexed links (default <dir>-bench)")
    ap.add_argument("--per-shard", type=int, default=None,
                    help="samples per tar shard (default 10000; a --dir of its own per shard size)")
    ap.add_argument("--only", default=None, help="comma list of loaders: " + ",".join(LOADER_IDS))
    ap.add_argument("--no-cold", action="store_true", help="skip the cold pass (bytes read)")
    ap.add_argument("--out", default=None, help="output stem (default bench/results/<UTC>-scale)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(json.loads(args.child))), flush=True)
        return 0
    import scale_memory

    per_shard = args.per_shard or scale_memory.PER_SHARD
    sizes = [int(s) for s in (args.sizes or ("200000" if args.quick else "200000,2000000")).split(",")]
    reps = args.reps or (2 if args.quick else 3)
    root = Path(args.dir)
    work = Path(args.work) if args.work else root.with_name(root.name + "-bench")
    only = None if args.only is None else {s.strip() for s in args.only.split(",")}
    if only is not None and not only <= set(LOADER_IDS):
        ap.error(f"--only: unknown loaders {sorted(only - set(LOADER_IDS))}; known: {','.join(LOADER_IDS)}")
    only = None if only is None else {LOADER_IDS[i] for i in only}
    info = common.machine_info(["stoker", "numpy"])
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("webdataset", "mosaicml-streaming", "torch"):  # not imported here: torch takes seconds
        try:
            info["versions"][dist] = version(dist)
        except PackageNotFoundError as e:
            info["versions"][dist] = f"unavailable: not installed ({e})"
    info["stoker_binary"] = stoker_binary()
    loadavg_start = common.load_average()
    print(f"scale bench {info['utc']}: sizes {sizes}, {reps} rounds, rank {RANK} of {WORLD}, batch {BATCH}; "
          f"load average {loadavg_start}", flush=True)
    root.mkdir(parents=True, exist_ok=True)
    info["read_ahead_kb"] = read_ahead_kb(root)
    t0 = time.monotonic()
    results = {}
    for n in sizes:
        print(f"{n:,} samples: preparing", flush=True)
        loaders = datasets(root, work, n, per_shard, only)
        rows = measure_size(n, loaders, reps, not args.no_cold)
        results[n] = {"shards": (n + per_shard - 1) // per_shard, "loaders": rows, "ratios": ratios(rows)}
    cmd = " ".join(["bash bench/run.sh --scale", *(a for a in sys.argv[1:] if a != "--scale")])
    payload = {"benchmark": "scale", "command": cmd, "machine": info, "elapsed_s": time.monotonic() - t0,
               "loadavg_start": loadavg_start, "loadavg_end": common.load_average(), "quick": args.quick,
               "sizes": sizes, "reps": reps, "per_shard": per_shard, "batch": BATCH, "rank": RANK, "world_size": WORLD,
               "results": results, "targets": targets(results), "how": HOW}
    stamp = time.strftime("%Y-%m-%dT%H%MZ", time.gmtime())
    stem = Path(args.out) if args.out else common.RESULTS_DIR / f"{stamp}-scale"
    write(payload, stem)
    print(f"wrote {stem}.json, .md", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
