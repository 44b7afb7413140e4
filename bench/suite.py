#!/usr/bin/env python3
"""stoker's benchmark suite: stoker vs the peers vs the physical limits, in one run.

    bash bench/run.sh            # installs the peers (requirements-bench.txt), then this; < 15 min on 2 cores
    bash bench/run.sh --quick    # V and A, small data, no tuning grid: < 2 min

Protocol: ../shared/BENCHMARKS.md. Per workload, in ONE process, on the SAME files
(bench/data/, made once with fixed seeds by `stoker synth`, hot page cache):

  limits   decode: single-thread TurboJPEG full decode x cores (the ceiling), beside
           stoker's and Pillow's decode+resize; memcpy (numpy, 512 MB, 1 and all threads);
           tar parse (`stoker index`, Python tarfile); sequential read of the shards from
           the page cache (hot) and after posix_fadvise(DONTNEED) (cold, residency checked
           with fincore)
  tuning   every grid point of every loader for one epoch after a warm-up epoch; each
           loader's best setting is kept and named
  rounds   the best of each loader, alternated (A B C ... A B C ...), >= 3 measured rounds;
           ratios are medians of per-round ratios (both figures seconds apart)
  t_wait   one epoch per loader with a simulated step (sleep = 0.8 x its own batch time):
           t_wait p50/p99/max and slow batches from stoker's observer (stoker.profile)
  memory   one epoch per loader in a fresh child process: peak RSS, PSS, anonymous memory
           (Pss_Anon + Pss_Shmem; the target's figure) and file-mapped pages (Pss_File, apart)
           of the whole process tree (workers included) from /proc/*/smaps_rollup
  overhead stoker with stage recording + observer on vs off, alternated pairs (issue 3)

Writes bench/results/<UTC stamp>.json, .md and .png; prints PASS/MISS per target; exits 0
unless it crashes (a benchmark, not a test).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import peers  # noqa: E402
import vision  # noqa: E402

DATA_DIR = common.BENCH_DIR / "data"
QUIET_CORES = 0.25  # a measurement is quiet when other processes used less than this many cores

WORKLOADS = {
    "V": dict(name="V", kind="imagenet", label="V ImageNet-like 500x375 q90 -> 224 center crop, batch 64",
              count=3072, quick_count=768, shards=12, batch=64, size=224, resize="center_crop",
              limit_images=384, quick_limit_images=128),
    "S": dict(name="S", kind="sa1b", label="S SA-1B-like 1500x1000 q90 + NPZ float16 -> 1024 longest, batch 8",
              count=384, quick_count=96, shards=12, batch=8, size=1024, resize="longest",
              limit_images=32, quick_limit_images=16),
    "P": dict(name="P", kind="png", label="P PNG: ImageNet-like 500x375 RGB PNG (Pillow) + cls -> 224 center crop, batch 64",
              count=1536, quick_count=384, shards=12, batch=64, size=224, resize="center_crop"),
    "C": dict(name="C", kind="caption",
              label="C image-caption: ImageNet-like 500x375 q90 JPEG + .txt caption -> 224 center crop + list[str], batch 64",
              count=3072, quick_count=768, shards=12, batch=64, size=224, resize="center_crop"),
    "A": dict(name="A", kind="arrays", label="A arrays: NPY float32 256x256 (256 KiB) + NPZ float16, batch 64",
              count=6144, quick_count=768, shards=12, batch=64),
}
# counts: whole batches for every DataLoader worker count in the grids (12 shards split 2/3/4 ways)

GRIDS = {  # loader -> list of settings; the first is the quick mode's
    "V": {"stoker": [(2, 2), (3, 2), (2, 4)], "dl_wds": [2, 3, 4], "dl_loose": [2, 3, 4], "spdl": [(3, "ffmpeg"), (2, "ffmpeg"), (4, "ffmpeg"), (3, "pillow")],
          "dali": [2, 3]},
    "S": {"stoker": [(2, 2), (3, 2), (2, 4)], "dl_wds": [2, 3, 4], "spdl": [(3, "ffmpeg"), (2, "ffmpeg"), (3, "pillow")],
          "dali": [2]},
    "A": {"stoker": [(2, 2), (2, 4), (1, 2)], "dl_wds": [0, 1, 2]},
    "P": {"stoker": [(2, 2), (3, 2)], "dl_wds": [2, 3, 4]},
    "C": {"stoker": [(2, 2), (3, 2)], "dl_wds": [2, 3, 4]},
}
QUICK_GRIDS = {"V": {"stoker": [(2, 2)], "dl_wds": [3], "dl_loose": [3], "spdl": [(3, "ffmpeg")], "dali": [2]},
               "S": {"stoker": [(2, 2)], "dl_wds": [3], "spdl": [(3, "ffmpeg")], "dali": [2]},
               "A": {"stoker": [(2, 2)], "dl_wds": [0]},
               "P": {"stoker": [(2, 2)], "dl_wds": [3]}, "C": {"stoker": [(2, 2)], "dl_wds": [3]}}
NAMES = {"stoker": "stoker.Loader", "dl_wds": "DataLoader + webdataset", "dl_loose": "DataLoader, loose files",
         "spdl": "SPDL pipeline", "dali": "DALI CPU pipeline", "stoker_norec": "stoker, recording off",
         "stoker_rec": "stoker, recording on", "stoker_box": "stoker, resample='box'"}
NOT_AVAILABLE = {
    "T": "T (tokens): run on its own with `bash bench/run.sh --workloads T` (bench/tokens.py)",
}


def setting_text(kind: str, s) -> str:
    if kind.startswith("stoker"):
        return f"decode_threads={s[0]} io_depth={s[1]}"
    if kind.startswith("dl"):
        return f"num_workers={s}"
    if kind == "spdl":
        return f"threads={s[0]} decode={s[1]}"
    return f"threads={s}"


# -- data ------------------------------------------------------------------------------------------

def stoker_bin() -> str:
    b = vision.stoker_bin()
    if not b:
        raise SystemExit("the stoker command is missing: build it (cmake --build build/py --target stoker)")
    return b


def _pack(d: Path, shards: int, samples) -> list[Path]:
    import webdataset as wds

    samples = list(samples)
    per = len(samples) // shards
    paths = [d / f"shard-{s:06d}.tar" for s in range(shards)]
    for s, path in enumerate(paths):
        with wds.TarWriter(str(path)) as sink:
            for key, members in samples[s * per:(s + 1) * per]:
                sink.write({"__key__": key, **members})
    return paths


def prepare(w: dict, count: int, seed: int = 0) -> dict:
    """The workload's shards (and loose files), made once under bench/data/ and reused."""
    d = DATA_DIR / f"{w['name']}-n{count}-seed{seed}"
    done = d / "DONE"
    shards = [d / f"shard-{s:06d}.tar" for s in range(w["shards"])]
    out = {"dir": str(d), "shards": shards, "count": count, "loose": []}
    if not (done.exists() and all(p.exists() for p in shards)):
        t0 = time.perf_counter()
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        if w["kind"] == "arrays":
            rng = np.random.default_rng(seed)

            def samples():
                for i in range(count):
                    x = io_npy(rng.standard_normal((256, 256), dtype=np.float32))
                    buf = __import__("io").BytesIO()
                    np.savez(buf, emb=rng.standard_normal((64, 16, 16)).astype(np.float16),
                             iou=rng.random(4).astype(np.float32))
                    yield f"a_{i:06d}", {"x.npy": x, "y.npz": buf.getvalue()}

            _pack(d, w["shards"], samples())
            how = f"numpy default_rng({seed}) (stoker synth makes no array-only samples), webdataset.TarWriter"
        elif w["kind"] in ("png", "caption"):
            # V's images, re-encoded losslessly as PNG (P) or kept as JPEG with a caption (C).
            loose = d / "loose"
            subprocess.run([stoker_bin(), "synth", str(loose), "--kind", "imagenet", "--count", str(count),
                            "--seed", str(seed), "--layout", "loose", "-q"], check=True)
            _pack(d, w["shards"], _format_samples(w, loose))
            how = (f"stoker synth {loose} --kind imagenet --count {count} --seed {seed} --layout loose; "
                   + ("re-encoded by Pillow as PNG (RGB, default compression)" if w["kind"] == "png"
                      else "JPEG + a generated UTF-8 caption (40-200 bytes)") + ", packed by webdataset.TarWriter")
        else:
            loose = d / "loose"
            subprocess.run([stoker_bin(), "synth", str(loose), "--kind", w["kind"], "--count", str(count),
                            "--seed", str(seed), "--layout", "loose", "-q"], check=True)
            _pack(d, w["shards"], _loose_samples(w, loose, count))
            how = (f"stoker synth {loose} --kind {w['kind']} --count {count} --seed {seed} --layout loose; "
                   "packed in index order by webdataset.TarWriter")
        done.write_text(how + "\n")
        print(f"  made {d.name} in {time.perf_counter() - t0:.0f} s: {how}", flush=True)
    out["generator"] = done.read_text().strip()
    if w["kind"] == "imagenet":
        out["loose"] = _loose_files(d / "loose")
    return out


def io_npy(a: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _loose_files(loose: Path) -> list[tuple[str, int]]:
    files = {}
    for p in loose.rglob("*.JPEG"):
        files[int(p.stem.rsplit("_", 1)[1])] = (str(p), int(p.parent.name[1:]))
    return [files[i] for i in sorted(files)]


def _loose_samples(w: dict, loose: Path, count: int):
    if w["kind"] == "imagenet":
        for path, cls in _loose_files(loose):
            p = Path(path)
            yield p.stem, {"jpg": p.read_bytes(), "cls": str(cls).encode()}
    else:
        for i in range(1, count + 1):
            yield f"sa_{i}", {"jpg": (loose / f"sa_{i}.jpg").read_bytes(),
                              "features.npz": (loose / f"sa_{i}_features.npz").read_bytes()}


def _format_samples(w: dict, loose: Path):
    import io as _io

    from PIL import Image

    rng = np.random.default_rng(1)
    words = ["a", "photo", "of", "the", "dog", "cat", "on", "grass", "near", "café", "bridge", "at", "dusk",
             "small", "red", "blue", "über", "street", "with", "people", "日本"]
    for path, cls in _loose_files(loose):
        p = Path(path)
        if w["kind"] == "png":
            buf = _io.BytesIO()
            Image.open(p).convert("RGB").save(buf, format="PNG")
            yield p.stem, {"png": buf.getvalue(), "cls": str(cls).encode()}
        else:
            caption = " ".join(rng.choice(words, int(rng.integers(8, 40))))
            yield p.stem, {"jpg": p.read_bytes(), "txt": caption.encode()}


# -- limits ----------------------------------------------------------------------------------------

def _gauge(fn, items: float) -> dict:
    c0, b0 = common.cpu_seconds(), common.system_busy_seconds()
    t0 = time.perf_counter()
    fn()
    t1 = time.perf_counter()
    c1, b1 = common.cpu_seconds(), common.system_busy_seconds()
    return {"rate": items / (t1 - t0), "seconds": t1 - t0,
            "other_cpu_cores": max(0.0, ((b1 - b0) - (c1 - c0)) / (t1 - t0))}


def decode_paths(w: dict, jpegs: list[bytes], cores: int, pool: ThreadPoolExecutor) -> tuple[list, str]:
    """(key, label, fn) of the decode paths timed in every round; the first is THE limit."""
    import io

    import stoker
    from PIL import Image

    spec = stoker.image_spec(w["size"], resize=w["resize"])
    box = stoker.image_spec(w["size"], resize=w["resize"], resample="box")
    # one output array per image, made outside the timed loop, when the binding takes out=
    outs = []
    for b in jpegs:
        im = Image.open(io.BytesIO(b))
        outs.append(np.empty((im.size[1], im.size[0], 3), np.uint8))
    try:
        stoker.decode_jpeg_rgb(jpegs[0], out=outs[0])
        into = True
    except TypeError:
        into = False
    note = "decodes into a preallocated array (decode_jpeg_rgb(out=))" if into else \
        "decode_jpeg_rgb allocates its output per call (no out= in this build): the ceiling is understated ~14-40%"
    if into:
        items = list(zip(jpegs, outs))

        def rgb_fn(item):
            return stoker.decode_jpeg_rgb(item[0], out=item[1])
    else:
        items = jpegs
        rgb_fn = stoker.decode_jpeg_rgb
    chunks = [items[i::cores] for i in range(cores)]
    pil = vision.pil_transform(w["name"]) if w["name"] in ("V", "S") else None

    def loop(fn, xs):
        return lambda: [fn(x) for x in xs]

    def threads(fn, parts):
        return lambda: list(pool.map(lambda c: [fn(x) for x in c], parts))

    jchunks = [jpegs[i::cores] for i in range(cores)]
    paths = [
        ("turbojpeg_1t", f"TurboJPEG full RGB decode, 1 thread ({'out=' if into else 'allocating'})",
         loop(rgb_fn, items)),
        ("stoker_decode_resize_1t", f"stoker.decode_jpeg ({w['resize']} {w['size']}, bilinear: torchvision's pixels), 1 thread",
         loop(lambda b: stoker.decode_jpeg(b, spec), jpegs)),
        ("stoker_box_1t", f"stoker.decode_jpeg ({w['resize']} {w['size']}, resample='box': the old libyuv path), 1 thread",
         loop(lambda b: stoker.decode_jpeg(b, box), jpegs)),
        ("pillow_1t", "Pillow decode + antialiased resize (the DataLoader's path), 1 thread", loop(pil, jpegs)),
        (f"turbojpeg_{cores}t", f"TurboJPEG full RGB decode, {cores} threads (do the cores scale?)",
         threads(rgb_fn, chunks)),
        (f"stoker_decode_resize_{cores}t", f"stoker.decode_jpeg, {cores} threads",
         threads(lambda b: stoker.decode_jpeg(b, spec), jchunks)),
    ]
    return paths, note


def memcpy_bandwidth(threads: int, reps: int, mb: int = 512) -> dict:
    src = np.ones(mb << 20, np.uint8)
    dst = np.empty_like(src)
    parts = np.array_split(np.arange(src.size), threads)
    bounds = [(p[0], p[-1] + 1) for p in parts]
    pool = ThreadPoolExecutor(threads)

    def copy():
        if threads == 1:
            np.copyto(dst, src)
        else:
            list(pool.map(lambda b: np.copyto(dst[b[0]:b[1]], src[b[0]:b[1]]), bounds))

    copy()
    runs = [_gauge(copy, src.nbytes / 1e9) for _ in range(reps)]
    pool.shutdown()
    return {"GB_per_s": common.summarize([r["rate"] for r in runs]).as_dict(),
            "other_cpu_cores": statistics.median(r["other_cpu_cores"] for r in runs)}


def drop_cache(paths) -> None:
    """posix_fadvise(DONTNEED) on each file, after fdatasync: dirty pages (a file just
    written) are not dropped otherwise."""
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            try:
                os.fdatasync(fd)
            except OSError:
                pass
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def read_bandwidth(shards: list[Path], reps: int) -> dict:
    total = sum(p.stat().st_size for p in shards)
    common.hot_cache(shards)
    hot = [_gauge(lambda: common.hot_cache(shards), total / 1e9) for _ in range(reps)]
    cold, residency = [], []
    for _ in range(reps):
        before = common.resident_bytes(shards)
        drop_cache(shards)
        after = common.resident_bytes(shards)
        if after is not None and after >= 0.05 * total:
            drop_cache(shards)  # once more
            after = common.resident_bytes(shards)
        ok = after is not None and after < 0.05 * total
        residency.append({"before": before, "after_drop": after, "dropped": ok})
        x = _gauge(lambda: common.hot_cache(shards), total / 1e9)
        if ok:
            cold.append(x)
    dropped = len(cold) == reps
    # No drop worked (pages mapped by some process, e.g. a loader's idle mappings): no cold figure.
    cold = cold or [{"rate": float("nan"), "other_cpu_cores": float("nan")}]
    common.hot_cache(shards)  # hot again for the loaders
    return {"bytes": total,
            "hot_GB_per_s": common.summarize([r["rate"] for r in hot]).as_dict(),
            "cold_GB_per_s": common.summarize([r["rate"] for r in cold]).as_dict(),
            "cold_drop_worked": dropped, "residency": residency,
            "other_cpu_cores": statistics.median(r["other_cpu_cores"] for r in hot)}


def tar_parse(shards: list[Path], reps: int) -> dict:
    """Members/s listing the shards with no decode: `stoker index` (hard links in a scratch
    folder, so the loaders' shards get no sidecar) and Python's tarfile."""
    scratch = shards[0].parent / "index-scan"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    links = []
    for p in shards:
        q = scratch / p.name
        try:
            os.link(p, q)
        except OSError:
            os.symlink(p, q)
        links.append(q)
    members = 0
    for p in shards:
        with tarfile.open(p) as tf:
            members += len(tf.getmembers())
    exe = stoker_bin()

    def stoker_index():
        for f in scratch.glob("*.idx"):
            f.unlink()
        subprocess.run([exe, "index", "-q", "--key-rule", "webdataset", *map(str, links)], check=True)

    def py_tarfile():
        for p in shards:
            with tarfile.open(p) as tf:
                tf.getmembers()

    out = {"members": members}
    for name, fn in (("stoker_index", stoker_index), ("python_tarfile", py_tarfile)):
        fn()
        runs = [_gauge(fn, members) for _ in range(reps)]
        out[name + "_members_per_s"] = common.summarize([r["rate"] for r in runs]).as_dict()
    shutil.rmtree(scratch, ignore_errors=True)
    return out


# -- loaders -----------------------------------------------------------------------------------------

def factory(w: dict, data: dict, kind: str, setting):
    """make() -> an iterable of batches, or raises peers.Unavailable."""
    shards = data["shards"]
    if kind == "stoker":
        return peers.stoker_loader(w, shards, *setting)
    if kind == "stoker_norec":
        return peers.stoker_loader(w, shards, *setting, observe=False, record_stats=False, autotune=False)
    if kind == "stoker_rec":  # the overhead pair's "on": as stoker_norec but for the recording
        return peers.stoker_loader(w, shards, *setting, autotune=False)
    if kind == "stoker_box":
        return peers.stoker_loader(w, shards, *setting, resample="box")
    if kind == "dl_wds":
        return peers.dl_wds(w, shards, setting)
    if kind == "dl_loose":
        return peers.dl_loose(w, data["loose"], setting)
    if kind == "spdl":
        epoch, how = peers.spdl_pipeline(w, shards, *setting)
        data.setdefault("spdl_decode", {})[setting_text(kind, setting)] = how
        return epoch
    if kind == "dali":
        return peers.dali_pipeline(w, shards, setting, data["count"])
    raise ValueError(kind)


def image_key(w: dict, kind: str):
    if kind.startswith("stoker"):
        return {"A": "x.npy", "P": "png"}.get(w["name"], "jpg")
    return 0


def epoch(w, data, kind, setting) -> dict:
    res = vision.run_epoch(factory(w, data, kind, setting), image_key(w, kind))
    if res["samples"] != data["count"]:
        res["warning"] = f"delivered {res['samples']} samples, expected {data['count']}"
        print(f"    WARNING {kind} {setting}: {res['warning']}", flush=True)
    return res


def alternated_pairs(w, data, kind_a: str, kind_b: str, setting, pairs: int) -> tuple[list, list]:
    """Epochs of two loaders in pairs, A B, B A, ...: neither always goes first."""
    a, b = [], []
    for i in range(pairs):
        for kind, dst in (((kind_a, a), (kind_b, b)) if i % 2 == 0 else ((kind_b, b), (kind_a, a))):
            dst.append(epoch(w, data, kind, setting))
    return a, b


def twait_epoch(w, data, kind, setting, step_s: float) -> dict:
    """One epoch with a simulated step (sleep) per batch; t_wait measured by stoker.profile
    from the second batch on (the first is time to first batch, reported apart)."""
    import stoker

    loader = factory(w, data, kind, setting)()
    it = iter(loader)
    t0 = time.perf_counter()
    next(it)
    ttfb = time.perf_counter() - t0
    prof = stoker.profile(it, window=100000, log_every=100000)
    n = 1
    for _ in prof:
        time.sleep(step_s)
        n += 1
    rep = prof.report()
    # The next epoch's first batch after a slow consumer's last step (2.5x the 0.8x step, i.e.
    # 2x the loader's batch time): how long it waits at the epoch start (the usual
    # set_epoch(e + 1); a DataLoader starts its workers again here).
    time.sleep(1.5 * step_s)
    if hasattr(loader, "set_epoch"):
        loader.set_epoch(1)
    it2 = iter(loader)
    t0 = time.perf_counter()
    next(it2)
    next_epoch_wait = time.perf_counter() - t0
    del it2
    own = None
    if kind == "stoker" and getattr(loader, "observer", None) is not None:
        r2 = loader.report()
        own = {"slow_batches": r2["totals"]["slow_batches"], "verdict": r2["verdict"].get("bottleneck"),
               "slow": [s.get("line") for s in r2["slow_batches"][:5]]}
    del it
    if hasattr(loader, "close"):
        loader.close()
    del loader
    gc.collect()
    win = rep["window"]
    return {"step_s": step_s, "batches": n, "ttfb_s": ttfb, "wait_p50_s": win["wait_p50_s"],
            "wait_p99_s": win["wait_p99_s"], "wait_max_s": win["wait_max_s"],
            "slow_batches": rep["totals"]["slow_batches"], "keeps_up": win.get("keeps_up"),
            "efficiency": win.get("efficiency"), "stoker_observer": own, "next_epoch_wait_s": next_epoch_wait}


def stoker_child_env() -> dict:
    """A child process imports the same stoker as this one (installed or in-tree)."""
    import stoker

    here = str(Path(stoker.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}


def memory_child(wname: str, count: int, kind: str, setting) -> dict:
    """One epoch in a fresh process: the whole tree's peak RSS/PSS, no other peer loaded."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child",
           json.dumps({"w": wname, "count": count, "kind": kind, "setting": setting})]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                       env=stoker_child_env())
    if r.returncode != 0:
        return {"error": r.stderr.strip()[-400:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def child_main(spec: str) -> int:
    s = json.loads(spec)
    w = WORKLOADS[s["w"]]
    setting = tuple(s["setting"]) if isinstance(s["setting"], list) else s["setting"]
    import torch  # noqa: F401 - every loader hands out torch tensors

    data = prepare(w, s["count"])
    make = factory(w, data, s["kind"], setting)
    gc.collect()
    # Sampled every 5 ms, over fresh epochs (each loader built anew) until 1 s has passed: a
    # quick A epoch takes ~20 ms, shorter than the in-process runs' 50 ms interval, and a
    # single epoch's peak was then the process before its loader existed.
    runs, t_end = [], time.perf_counter() + 1.0
    while not runs or time.perf_counter() < t_end:
        runs.append(vision.run_epoch(make, image_key(w, s["kind"]), interval=0.005))
    res = {k: runs[0][k] for k in ("samples", "steady_rate", "ttfb_s")}
    for m in common.MEMORY_KINDS:
        res["peak_" + m] = max(r["peak_" + m] for r in runs)
        res["base_" + m] = runs[0]["base_" + m]  # the process before its first loader
    res.update(max_procs=max(r["max_procs"] for r in runs), epochs=len(runs),
               mem_samples=sum(r["mem_samples"] for r in runs))
    print(json.dumps(res))
    return 0


# -- one workload --------------------------------------------------------------------------------------

def bench_workload(wname: str, args, cores: int) -> dict:
    w = WORKLOADS[wname]
    count = w["quick_count"] if args.quick else w["count"]
    grids = {k: list(v) for k, v in (QUICK_GRIDS if args.quick else GRIDS)[wname].items()}
    if "spdl" in grids and peers.spdl_decode_status():  # no FFmpeg libraries: Pillow in SPDL's threads
        grids["spdl"] = [s for s in grids["spdl"] if s[1] == "pillow"] or [(3, "pillow")]
    print(f"\n== {w['label']}: {count} samples ==", flush=True)
    data = prepare(w, count)
    shards = data["shards"]
    res = {"workload": wname, "label": w["label"], "count": count, "batch": w["batch"],
           "data": {"dir": data["dir"], "generator": data["generator"], "shards": len(shards),
                    "shard_bytes": sum(p.stat().st_size for p in shards)},
           "unavailable": {}, "grid": {}, "best": {}, "runs": {}, "limit_runs": {}, "limits": {}}
    reps = 3
    # limits that need no alternation with the loaders
    print("  limits: read bandwidth (hot, cold), tar parse" + (", memcpy" if wname == "A" else ""), flush=True)
    res["limits"]["read"] = read_bandwidth(shards, reps)
    res["limits"]["tar_parse"] = tar_parse(shards, reps)
    if wname == "A":
        res["limits"]["memcpy_1t"] = memcpy_bandwidth(1, reps + 2)
        res["limits"][f"memcpy_{cores}t"] = memcpy_bandwidth(cores, reps + 2)
        res["bytes_per_sample"] = 256 * 256 * 4 + 64 * 16 * 16 * 2 + 4 * 4
    common.hot_cache(shards)
    pool = ThreadPoolExecutor(cores)
    paths = []
    if wname in ("V", "S"):
        jpegs = vision.read_jpegs(shards, w["quick_limit_images"] if args.quick else w["limit_images"])
        res["data"]["jpegs"] = vision.describe_jpegs(jpegs)
        paths, note = decode_paths(w, jpegs, cores, pool)
        res["limits"]["decode_note"] = note
        res["same_output"] = vision.check_same_output(wname, jpegs)
        print(f"  mean JPEG {res['data']['jpegs']['mean_bytes'] / 1e3:.1f} KB; decode limit {note}", flush=True)
    res["limit_runs"] = {k: [] for k, _, _ in paths}
    res["limit_labels"] = {k: lab for k, lab, _ in paths}

    # which loaders can run here
    kinds = []
    for kind, grid in grids.items():
        try:
            factory(w, data, kind, grid[0])
            kinds.append(kind)
        except peers.Unavailable as e:
            res["unavailable"][kind] = str(e)
            print(f"  {NAMES[kind]}: not run: {e}", flush=True)
    if wname == "A":
        for k in ("spdl", "dali", "dl_loose"):
            res["unavailable"][k] = "not run on A: the issue's A peer is numpy.load through a DataLoader"
    if wname == "S":
        res["unavailable"].setdefault("dl_loose", "not run on S (the loose-file baseline is measured on V)")
    if wname in ("V", "S") and peers.spdl_decode_status():
        res["spdl_ffmpeg"] = peers.spdl_decode_status()

    # tuning: a warm-up epoch per loader, then each grid point once; keep the best
    for kind in kinds:
        grid = grids[kind]
        try:
            epoch(w, data, kind, grid[0])  # warm-up, discarded
            if len(grid) == 1:
                res["best"][kind] = grid[0]
                res["grid"][kind] = {setting_text(kind, grid[0]): None}
                continue
            rates = {}
            for s in grid:
                r = epoch(w, data, kind, s)
                rates[s] = r["steady_rate"]
                print(f"    tune {NAMES[kind]:<26} {setting_text(kind, s):<30} {r['steady_rate']:9,.0f} samples/s"
                      f"  others' CPU {r['other_cpu_cores']:.2f}", flush=True)
            res["best"][kind] = max(rates, key=rates.get)
            res["grid"][kind] = {setting_text(kind, s): v for s, v in rates.items()}
        except Exception as e:  # noqa: BLE001 - a peer that fails is reported, not fatal
            res["unavailable"][kind] = f"failed: {type(e).__name__}: {str(e)[:300]}"
            print(f"  {NAMES[kind]}: FAILED: {traceback.format_exc()[-600:]}", flush=True)
    kinds = [k for k in kinds if k in res["best"]]
    res["runs"] = {k: [] for k in kinds}

    for _, _, fn in paths:  # warm-up pass of each limit path (discarded)
        fn()
    # measured rounds: limits and loaders alternated
    for r in range(1, reps + 1):
        for key, _, fn in paths:
            x = _gauge(fn, len(jpegs))
            x["round"] = r
            res["limit_runs"][key].append(x)
        order = kinds if r % 2 else list(reversed(kinds))  # A B C, C B A: no loader always follows another
        for kind in order:
            x = epoch(w, data, kind, res["best"][kind])
            x["round"] = r
            res["runs"][kind].append(x)
            print(f"    round {r} {NAMES[kind]:<26} {x['steady_rate']:9,.0f} samples/s  ttfb {x['ttfb_s']:.2f} s"
                  f"  others' CPU {x['other_cpu_cores']:.2f}", flush=True)
        if wname == "A":  # the divisor in the same round: memcpy moves with the machine's state
            m = memcpy_bandwidth(cores, 3)
            res.setdefault("memcpy_rounds", []).append({"round": r, "GB_per_s": m["GB_per_s"]["median"],
                                                        "other_cpu_cores": m["other_cpu_cores"]})
            print(f"    round {r} {'memcpy, ' + str(cores) + ' threads':<26} {m['GB_per_s']['median']:9.1f} GB/s"
                  f"  others' CPU {m['other_cpu_cores']:.2f}", flush=True)
        if paths:
            lim = res["limit_runs"][paths[0][0]][-1]
            print(f"    round {r} {'decode limit, 1 thread':<26} {lim['rate']:9,.0f} images/s"
                  f"  others' CPU {lim['other_cpu_cores']:.2f}", flush=True)

    # t_wait with a simulated step: 0.8 x the loader's own batch time
    res["twait"] = {}
    for kind in kinds:
        rate = statistics.median(x["steady_rate"] for x in res["runs"][kind])
        step = 0.8 * w["batch"] / rate
        try:
            res["twait"][kind] = twait_epoch(w, data, kind, res["best"][kind], step)
        except Exception as e:  # noqa: BLE001
            res["twait"][kind] = {"error": f"{type(e).__name__}: {e}"}

    # recording overhead (issue 3): stoker with its recorder + observer on vs both off
    if "stoker" in kinds and wname == "V":  # V: epochs long enough to resolve 2%
        # Both with autotune=False: recording off also stops the controller (it reads the
        # recorder), so with it on the pair would compare two configurations, not the recording.
        # 8 pairs in --quick: its epochs are 12 batches, and 3 pairs could not resolve 2%.
        on, off = alternated_pairs(w, data, "stoker_rec", "stoker_norec", res["best"]["stoker"],
                                   8 if args.quick else 6)
        ratios = [b["steady_rate"] / a["steady_rate"] - 1 for a, b in zip(on, off)]
        # The process's CPU seconds for the same epoch, on / off - 1: what recording costs in
        # work, which other processes on the machine do not move as they move the rate.
        cpu = [a["cpu_s"] / b["cpu_s"] - 1 for a, b in zip(on, off)]
        res["recording_overhead"] = {
            "on": common.summarize([x["steady_rate"] for x in on]).as_dict(),
            "off": common.summarize([x["steady_rate"] for x in off]).as_dict(),
            "overhead": common.summarize(ratios).as_dict(),
            "cpu_overhead": common.summarize(cpu).as_dict(),
            "other_cpu_cores": statistics.median(x["other_cpu_cores"] for x in on + off),
            "how": "on = stoker.Loader(observe=True, window=100000, autotune=False); off = the same with "
                   "observe=False, record_stats=False; overhead = median over alternated pairs of off/on - 1 "
                   "(steady rate); cpu_overhead = median of on/off - 1 (process CPU seconds of the epoch)"}
        print(f"  recording overhead: {100 * statistics.median(ratios):+.1f}% "
              f"[{100 * min(ratios):+.1f}..{100 * max(ratios):+.1f}], CPU {100 * statistics.median(cpu):+.1f}% "
              f"[{100 * min(cpu):+.1f}..{100 * max(cpu):+.1f}]", flush=True)

    # issue 8's "V throughput no lower than today's": the loader with its default (torchvision-
    # exact) resize against the same loader with the older box path, alternated pairs
    if "stoker" in kinds and wname == "V":
        exact, box = alternated_pairs(w, data, "stoker", "stoker_box", res["best"]["stoker"],
                                      3 if args.quick else 6)
        ratios = [a["steady_rate"] / b["steady_rate"] for a, b in zip(exact, box)]
        res["exact_vs_box"] = {
            "exact": common.summarize([x["steady_rate"] for x in exact]).as_dict(),
            "box": common.summarize([x["steady_rate"] for x in box]).as_dict(),
            "ratio": common.summarize(ratios).as_dict(),
            "other_cpu_cores": statistics.median(x["other_cpu_cores"] for x in exact + box),
            "how": "stoker.Loader at the tuned setting, default image spec vs resample='box'; "
                   "ratio = median over alternated pairs of exact/box"}
        print(f"  loader exact / box: {statistics.median(ratios):.3f} "
              f"[{min(ratios):.3f}..{max(ratios):.3f}]", flush=True)

    # memory of the whole process tree, each loader alone in a fresh process
    res["memory"] = {}
    mem_kinds = [k for k in kinds if not args.quick or k in ("stoker", "dl_wds")]
    for kind in mem_kinds:
        s = res["best"][kind]
        res["memory"][kind] = memory_child(wname, count, kind, list(s) if isinstance(s, tuple) else s)
    pool.shutdown()
    res["best"] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in res["best"].items()}
    res["best_text"] = {k: setting_text(k, v) for k, v in res["best"].items()}
    return res


# -- figures and targets --------------------------------------------------------------------------------

def _paired(a: list[dict], b: list[dict], ka="steady_rate", kb="steady_rate", scale=1.0, invert=False):
    bb = {x["round"]: x for x in b}
    vals = [(x[ka] / (bb[x["round"]][kb] * scale)) for x in a if x["round"] in bb]
    if invert:
        vals = [1 / v for v in vals]
    return common.summarize(vals) if vals else None


def analyse(res: dict, cores: int) -> dict:
    wname, runs, lr = res["workload"], res["runs"], res["limit_runs"]
    out = {"rows": {}, "targets": []}
    limit_rows = []
    lim_runs = None
    if "turbojpeg_1t" in lr:
        lim_runs = [{"round": x["round"], "steady_rate": x["rate"] * cores} for x in lr["turbojpeg_1t"]]
        out["limit_rate"] = statistics.median(x["steady_rate"] for x in lim_runs)
        out["limit_what"] = f"TurboJPEG 1-thread full decode × {cores} cores"
        for k, v in lr.items():
            st = common.summarize([x["rate"] for x in v])
            limit_rows.append({"what": res["limit_labels"][k], "value": st.as_dict(), "unit": "images/s",
                               "others_cpu": statistics.median(x["other_cpu_cores"] for x in v)})
    elif wname == "A":
        # Output ÷ memcpy per round: each round's loader epoch over the memcpy measured in that round.
        mr = res.get("memcpy_rounds") or [{"round": x["round"], "GB_per_s": res["limits"][f"memcpy_{cores}t"]
                                           ["GB_per_s"]["median"]} for x in runs.get("stoker", [])]
        lim_runs = [{"round": x["round"], "steady_rate": x["GB_per_s"] * 1e9 / res["bytes_per_sample"]} for x in mr]
        m = common.summarize([x["GB_per_s"] for x in mr])
        out["memcpy_GB_per_s"] = m.as_dict()
        out["limit_rate"] = m.median * 1e9 / res["bytes_per_sample"]
        out["limit_what"] = (f"memcpy {cores} threads {m.fmt(1)} GB/s ÷ {res['bytes_per_sample'] / 1e3:.0f} KB/sample"
                             " (measured in every round)")
    L = res["limits"]
    limit_rows += [
        {"what": "sequential read, page cache (hot)", "value": L["read"]["hot_GB_per_s"], "unit": "GB/s",
         "others_cpu": L["read"]["other_cpu_cores"]},
        {"what": "sequential read after POSIX_FADV_DONTNEED (cold)"
                 + ("" if L["read"]["cold_drop_worked"] else " — the drop did not empty the page cache every time: only the reps where it did"),
         "value": L["read"]["cold_GB_per_s"], "unit": "GB/s", "others_cpu": L["read"]["other_cpu_cores"]},
        {"what": "tar parse, `stoker index` (no decode)", "value": L["tar_parse"]["stoker_index_members_per_s"],
         "unit": "members/s", "others_cpu": None},
        {"what": "tar parse, Python tarfile", "value": L["tar_parse"]["python_tarfile_members_per_s"],
         "unit": "members/s", "others_cpu": None},
    ]
    for k in ("memcpy_1t", f"memcpy_{cores}t"):
        if k in L:
            limit_rows.append({"what": f"memcpy 512 MB, numpy, {k.split('_')[1][:-1]} thread(s)",
                               "value": L[k]["GB_per_s"], "unit": "GB/s", "others_cpu": L[k]["other_cpu_cores"]})
    out["limit_rows"] = limit_rows

    dl = "dl_wds" if "dl_wds" in runs else None
    for kind, rr in runs.items():
        st = common.summarize([x["steady_rate"] for x in rr])
        row = {"loader": NAMES[kind], "kind": kind, "setting": res["best_text"][kind],
               "grid": res["grid"].get(kind), "rate": st.as_dict(),
               "quiet_rounds": sum(x["other_cpu_cores"] < QUIET_CORES for x in rr),
               "ttfb_s": statistics.median(x["ttfb_s"] for x in rr),
               "cpu_ms_per_sample": statistics.median(1e3 * x["cpu_s"] / x["samples"] for x in rr),
               "others_cpu": statistics.median(x["other_cpu_cores"] for x in rr),
               "inproc_peak_rss": max(x["peak_rss"] for x in rr), "inproc_peak_pss": max(x["peak_pss"] for x in rr)}
        if kind != "stoker" and "stoker" in runs:
            p = _paired(runs["stoker"], rr)
            row["stoker_x"] = p.as_dict()
        if lim_runs is not None:
            row["x_limit"] = _paired(rr, lim_runs).as_dict()
        elif "limit_rate" in out:
            row["x_limit"] = common.summarize([x["steady_rate"] / out["limit_rate"] for x in rr]).as_dict()
        mem = res["memory"].get(kind, {})
        if "peak_pss" in mem:
            for m in common.MEMORY_KINDS:
                row["peak_" + m], row["base_" + m] = mem["peak_" + m], mem["base_" + m]
            row["procs"] = mem["max_procs"]
        tw = res["twait"].get(kind, {})
        if "wait_p50_s" in tw:
            row["twait"] = tw
        out["rows"][kind] = row

    def target(name, value, goal, le=False, note=""):
        if value is None:
            out["targets"].append({"workload": wname, "target": name, "value": None, "goal": goal,
                                   "verdict": "n/a", "note": note})
            return
        ok = value["median"] <= goal if le else value["median"] >= goal
        out["targets"].append({"workload": wname, "target": name, "value": value, "goal": goal,
                               "verdict": "PASS" if ok else "MISS", "note": note})

    rows = out["rows"]
    if "stoker" in runs:
        if wname in ("P", "C"):
            target("≥ 2× DataLoader (webdataset, Pillow, its best num_workers)",
                   rows.get("dl_wds", {}).get("stoker_x"), 2.0)
        if wname in ("V", "S"):
            target("≥ 2× DataLoader (webdataset, Pillow, its best num_workers)",
                   rows.get("dl_wds", {}).get("stoker_x"), 2.0)
            if "dl_loose" in rows:
                target("≥ 2× DataLoader over loose files (its best num_workers)", rows["dl_loose"]["stoker_x"], 2.0)
            target("≥ 1.3× SPDL (its best threads)", rows.get("spdl", {}).get("stoker_x"), 1.3,
                   note="" if "spdl" in rows else res["unavailable"].get("spdl", ""))
            target(f"≥ 0.8 × decode limit ({out['limit_what']})", rows["stoker"].get("x_limit"), 0.8,
                   note=res["limits"].get("decode_note", ""))
            if "stoker_box_1t" in lr and "stoker_decode_resize_1t" in lr:
                by_round = {x["round"]: x["rate"] for x in lr["stoker_box_1t"]}
                r = [x["rate"] / by_round[x["round"]] for x in lr["stoker_decode_resize_1t"] if x["round"] in by_round]
                target("torchvision-exact bilinear decode+resize ≥ 0.95× the old box path (1 thread, same rounds)",
                       common.summarize(r).as_dict() if r else None, 0.95)
            if "exact_vs_box" in res:
                target("V throughput with torchvision-exact pixels ≥ 0.95× the box path's (stoker.Loader, "
                       "alternated pairs)", res["exact_vs_box"]["ratio"], 0.95)
            so = res.get("same_output", {}).get("paths", {}).get("stoker (default: bilinear)")
            if so:
                v = so["mean_abs_diff"]
                target("fidelity: mean |diff| vs the torchvision recipe ≤ 1.0 level",
                       {"median": v, "min": v, "max": v}, 1.0, le=True,
                       note=f"p99.9 {so['p999_abs_diff']:.0f} (≤ 8), max {so['max_abs_diff']}")
        if wname == "A":
            target("≥ 5× numpy.load through a DataLoader (best num_workers incl. 0)",
                   rows.get("dl_wds", {}).get("stoker_x"), 5.0)
            xl = rows["stoker"].get("x_limit")
            bps = res["bytes_per_sample"]
            out_gbs = common.summarize([x["steady_rate"] * bps / 1e9 for x in runs["stoker"]])
            mc = out["memcpy_GB_per_s"]
            if xl is not None:  # the figure with what it was divided by, in the JSON too
                xl = {**xl, "output_GB_per_s": out_gbs.as_dict(), "memcpy_GB_per_s": mc}
            target("≥ 0.5 × memcpy bandwidth (output bytes/s ÷ memcpy all threads, per round)", xl, 0.5,
                   note=f"stoker output {out_gbs.fmt(2)} GB/s ÷ memcpy ({cores} threads, numpy 512 MB, same round) "
                        f"{mc['median']:.1f} [{mc['min']:.1f}–{mc['max']:.1f}] GB/s")
        # First batch at once: time to first batch (from constructing the loader) over the time one
        # batch takes on all the loader's threads, i.e. batch ÷ the same epoch's steady rate.
        fb = [x["ttfb_s"] * x["steady_rate"] / res["batch"] for x in runs["stoker"]
              if x["steady_rate"] == x["steady_rate"] and x["steady_rate"] > 0]
        if fb:
            st = common.summarize(fb).as_dict()
            rows["stoker"]["ttfb_x_batch"] = st
            note = f"stoker ttfb {1e3 * rows['stoker']['ttfb_s']:.0f} ms"
            if dl:
                note += f" vs {NAMES[dl]} {1e3 * rows[dl]['ttfb_s']:.0f} ms"
            target("first batch ≤ 1.3× one batch's decode on all cores (ttfb × steady rate ÷ batch, same epoch)",
                   st, 1.3, le=True, note=note)
        tw = rows["stoker"].get("twait", {})
        if "next_epoch_wait_s" in tw:
            # No stall at epoch starts: after a last step of 2x the loader's batch time, the next
            # epoch's first batch's wait over one batch's time.
            batch_s = res["batch"] / rows["stoker"]["rate"]["median"]
            v = tw["next_epoch_wait_s"] / batch_s
            note = f"stoker {1e3 * tw['next_epoch_wait_s']:.1f} ms, one batch {1e3 * batch_s:.0f} ms"
            if dl and "next_epoch_wait_s" in rows[dl].get("twait", {}):
                note += f"; {NAMES[dl]} {1e3 * rows[dl]['twait']['next_epoch_wait_s']:.0f} ms"
            target("next epoch's first batch waits ≤ 0.1× one batch's time (last step 2× a batch, set_epoch(e + 1))",
                   {"median": v, "min": v, "max": v}, 0.1, le=True, note=note)
        if dl:
            t = _paired(runs["stoker"], runs[dl], "ttfb_s", "ttfb_s")
            target("time to first batch ≤ 0.1× the DataLoader's", t.as_dict() if t else None, 0.1, le=True)
            if "peak_anon" in rows["stoker"] and "peak_anon" in rows[dl]:
                # Judged on anonymous memory (Pss_Anon + Pss_Shmem: what the kernel cannot drop);
                # PSS also counts mapped shard pages, page cache the kernel drops and rereads.
                st, pd = rows["stoker"], rows[dl]
                v = st["peak_anon"] / pd["peak_anon"]
                out["memory"] = {k: {m: r[p + m] for m in common.MEMORY_KINDS for p in ("peak_", "base_")}
                                 for k, r in (("stoker", st), (dl, pd))}
                target("peak anonymous memory of the process tree (Pss_Anon + Pss_Shmem) ≤ 0.5× the DataLoader's",
                       {"median": v, "min": v, "max": v}, 0.5, le=True,
                       note=f"stoker {common.mib(st['peak_anon']):,.0f} MiB vs {common.mib(pd['peak_anon']):,.0f} MiB "
                            f"({common.mib(st['peak_anon'] - st['base_anon']):+,.0f} vs "
                            f"{common.mib(pd['peak_anon'] - pd['base_anon']):+,.0f} over the process's start); "
                            f"file-mapped apart (Pss_File: shards, libraries; droppable page cache): stoker "
                            f"{common.mib(st['peak_file']):,.0f} MiB vs {common.mib(pd['peak_file']):,.0f} MiB; "
                            "each loader alone in a fresh process; both trees hold Python + torch")
                v = rows["stoker"]["peak_pss"] / rows[dl]["peak_pss"]
                target("(context) peak PSS of the process tree, file-mapped pages included",
                       {"median": v, "min": v, "max": v}, 0.5, le=True,
                       note=f"stoker {common.mib(st['peak_pss']):,.0f} MiB vs {common.mib(pd['peak_pss']):,.0f} MiB")
                a = st["peak_anon"] - st["base_anon"]
                b = pd["peak_anon"] - pd["base_anon"]
                v = a / b if b > 0 else float("nan")
                target("(context) peak anonymous memory above the process's own start (Python + torch + imports)",
                       {"median": v, "min": v, "max": v}, 0.5, le=True,
                       note=f"stoker +{common.mib(a):,.0f} MiB vs DataLoader +{common.mib(b):,.0f} MiB: the loaders' "
                            f"own memory; the start, {common.mib(st['base_anon']):,.0f} MiB, is in both totals")
                a = rows["stoker"]["peak_pss"] - rows["stoker"]["base_pss"]
                b = rows[dl]["peak_pss"] - rows[dl]["base_pss"]
                v = a / b if b > 0 else float("nan")
                out["pss_above_base"] = {"stoker": a, dl: b}
                target("(context) peak PSS above the process's own start (Python + torch + imports)",
                       {"median": v, "min": v, "max": v}, 0.5, le=True,
                       note=f"stoker +{common.mib(a):,.0f} MiB vs DataLoader +{common.mib(b):,.0f} MiB")
        if "recording_overhead" in res:
            o = res["recording_overhead"]["overhead"]
            target("recording overhead (observer + stage recorder on vs off) < 2%",
                   {"median": abs(o["median"]), "min": o["min"], "max": o["max"]}, 0.02, le=True,
                   note="value = |median of off/on − 1| over alternated pairs; min/max signed")
            if "cpu_overhead" in res["recording_overhead"]:
                c = res["recording_overhead"]["cpu_overhead"]
                target("(context) recording overhead in the process's CPU seconds < 2%",
                       {"median": abs(c["median"]), "min": c["min"], "max": c["max"]}, 0.02, le=True,
                       note="value = |median of on/off − 1| of the epoch's CPU seconds; min/max signed")
    return out


# -- output ------------------------------------------------------------------------------------------------

def fmt_rate(d, digits=0):
    return f"{d['median']:,.{digits}f} [{d['min']:,.{digits}f}–{d['max']:,.{digits}f}]"


def markdown(payload: dict) -> str:
    m = payload["machine"]
    lines = [f"# stoker benchmark suite — {m['utc']}", "",
             f"`{payload['command']}` on {m['hostname']}: {m['cpu_count']} cores ({m['cpu_model']}), "
             f"{m['mem_total_gib']} GiB, Linux {m['kernel']}, Python {m['python']}, commit {m['git_commit']}; "
             f"{payload['elapsed_s']:.0f} s. Load average at start {m['loadavg_start']}, end {m['loadavg_end']}.",
             "", "Versions: " + ", ".join(f"{k} {v}" for k, v in m["versions"].items()), "",
             "samples/s: median [min–max] of the measured rounds (steady rate, first batch to last; hot page cache). "
             "**stoker ×**: median of per-round ratios stoker / this loader. **×limit**: per-round ratio to the "
             "workload's limit. CPU: user+sys of the process tree per sample. Peak RSS/PSS: whole process tree "
             "(workers included), each loader alone in a fresh process; PSS split into **anon** (Pss_Anon + "
             "Pss_Shmem: memory the kernel cannot drop, what the memory target is judged on) and **file-mapped** "
             "(Pss_File: mapped shards and libraries, page cache the kernel may drop). t_wait: with a simulated step of 0.8× the "
             "loader's own batch time, from the 2nd batch on. others' CPU: cores other processes used meanwhile "
             "(noise gauge; quiet < 0.25).", ""]
    for wl in payload["workloads"]:
        a = wl["analysis"]
        d = wl["data"]
        jp = d.get("jpegs")
        lines += [f"## {wl['label']}", "",
                  f"{wl['count']} samples in {d['shards']} shards ({d['shard_bytes'] / 1e6:,.0f} MB)"
                  + (f", mean JPEG {jp['mean_bytes'] / 1e3:.1f} KB" if jp else "")
                  + f"; {d['generator']}.", ""]
        lines += ["| loader (winning setting) | samples/s | stoker × | ×limit | CPU ms/sample | peak RSS MiB | "
                  "peak PSS MiB | peak anon MiB | file-mapped MiB | ttfb s | t_wait p50 / p99 ms (step ms) | slow | others' CPU |",
                  "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for kind, r in a["rows"].items():
            tw = r.get("twait")
            lines.append(
                f"| {r['loader']} ({r['setting']}) | {fmt_rate(r['rate'])} | "
                + (f"{r['stoker_x']['median']:.2f} [{r['stoker_x']['min']:.2f}–{r['stoker_x']['max']:.2f}]"
                   if "stoker_x" in r else "—")
                + f" | {r['x_limit']['median'] if 'x_limit' in r else float('nan'):.2f} | {r['cpu_ms_per_sample']:.2f} | "
                + (f"{common.mib(r['peak_rss']):,.0f} | {common.mib(r['peak_pss']):,.0f} | "
                   f"{common.mib(r['peak_anon']):,.0f} | {common.mib(r['peak_file']):,.0f}" if "peak_anon" in r
                   else "– | – | – | –")
                + f" | {r['ttfb_s']:.3f} | "
                + (f"{1e3 * tw['wait_p50_s']:.2f} / {1e3 * tw['wait_p99_s']:.1f} ({1e3 * tw['step_s']:.0f})"
                   f" | {tw['slow_batches']}" if tw else "– | –")
                + f" | {r['others_cpu']:.2f} |")
        if "recording_overhead" in wl:
            o = wl["recording_overhead"]
            lines.append(f"| stoker, recording off (vs on: {fmt_rate(o['on'])}) | {fmt_rate(o['off'])} | "
                         f"overhead {100 * o['overhead']['median']:+.1f}% [{100 * o['overhead']['min']:+.1f}…"
                         f"{100 * o['overhead']['max']:+.1f}]"
                         + (f", CPU {100 * o['cpu_overhead']['median']:+.1f}% [{100 * o['cpu_overhead']['min']:+.1f}…"
                            f"{100 * o['cpu_overhead']['max']:+.1f}]" if "cpu_overhead" in o else "")
                         + f" | | | | | | | | | | {o['other_cpu_cores']:.2f} |")
        if "exact_vs_box" in wl:
            o = wl["exact_vs_box"]
            lines.append(f"| stoker, resample='box' (vs default, exact: {fmt_rate(o['exact'])}) | {fmt_rate(o['box'])} | "
                         f"exact ÷ box {o['ratio']['median']:.3f} [{o['ratio']['min']:.3f}…{o['ratio']['max']:.3f}]"
                         f" | | | | | | | | | | {o['other_cpu_cores']:.2f} |")
        for kind, why in wl["unavailable"].items():
            lines.append(f"| {NAMES.get(kind, kind)}: **not run** — {why} | | | | | | | | | | | | |")
        lines += ["", f"Limit: {a.get('limit_what', 'n/a')} = {a.get('limit_rate', float('nan')):,.0f} samples/s.",
                  ""]
        lines += ["| limit | median [min–max] | others' CPU |", "| --- | ---: | ---: |"]
        for lr in a["limit_rows"]:
            digits = 2 if lr["unit"] == "GB/s" else 0
            oc = "" if lr["others_cpu"] is None else f"{lr['others_cpu']:.2f}"
            lines.append(f"| {lr['what']} | {fmt_rate(lr['value'], digits)} {lr['unit']} | {oc} |")
        grid_bits = []
        for kind, g in wl["grid"].items():
            if g and any(v is not None for v in g.values()):
                grid_bits.append(f"{NAMES[kind]}: " + ", ".join(f"{s} {v:,.0f}" for s, v in g.items()))
        if grid_bits:
            lines += ["", "Tuning grid (one epoch each, samples/s): " + "; ".join(grid_bits) + "."]
        if wl.get("same_output"):
            so = wl["same_output"]
            lines += ["", f"Fidelity vs the torchvision recipe ({so['recipe']}, Pillow BILINEAR) over "
                          f"{so['images']} images, |diff| in levels:", "",
                      "| path | mean | p99.9 | max |", "| --- | ---: | ---: | ---: |"]
            for name, d in so["paths"].items():
                lines.append(f"| {name} | {d['mean_abs_diff']:.2f} | {d['p999_abs_diff']:.0f} | {d['max_abs_diff']} |")
        if wl["data"].get("spdl_decode"):
            lines += ["", "SPDL decode: " + "; ".join(f"{k}: {v}" for k, v in wl["data"]["spdl_decode"].items())
                      + (f" (spdl.io FFmpeg decode: {wl['spdl_ffmpeg']})" if wl.get("spdl_ffmpeg") else "") + "."]
        lines.append("")
    lines += ["## Targets", "", "| workload | target | value median [min–max] | verdict |", "| --- | --- | ---: | --- |"]
    for t in payload["targets"]:
        v = t["value"]
        vs = "n/a" if v is None else f"{v['median']:.3f} [{v['min']:.3f}–{v['max']:.3f}]"
        lines.append(f"| {t['workload']} | {t['target']}{' (' + t['note'] + ')' if t['note'] else ''} | {vs} | "
                     f"**{t['verdict']}** |")
    lines += ["", "Not available: " + "; ".join(NOT_AVAILABLE.values()) + ".", ""]
    return "\n".join(lines)


def plot(payload: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wls = payload["workloads"]
    fig, axes = plt.subplots(1, len(wls), figsize=(4.6 * len(wls), 4.2), squeeze=False)
    colors = {"stoker": "#d9480f", "dl_wds": "#1c7ed6", "dl_loose": "#74c0fc", "spdl": "#37b24d", "dali": "#76b900"}
    for ax, wl in zip(axes[0], wls):
        rows = wl["analysis"]["rows"]
        names = list(rows)
        med = [rows[k]["rate"]["median"] for k in names]
        lo = [rows[k]["rate"]["median"] - rows[k]["rate"]["min"] for k in names]
        hi = [rows[k]["rate"]["max"] - rows[k]["rate"]["median"] for k in names]
        ax.bar(range(len(names)), med, yerr=[lo, hi], color=[colors.get(k, "#888") for k in names], capsize=3)
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels([NAMES[k].replace(" + ", "\n+ ").replace(", ", ",\n").replace(" pipeline", "")
                            for k in names], fontsize=7)
        lim = wl["analysis"].get("limit_rate")
        if lim:
            ax.axhline(lim, color="k", ls="--", lw=1)
            ax.text(len(names) - 0.5, lim, "limit: " + wl["analysis"]["limit_what"], ha="right", va="bottom",
                    fontsize=6)
        for i, k in enumerate(names):
            if "stoker_x" in rows[k]:
                ax.text(i, med[i] + hi[i], f"stoker {rows[k]['stoker_x']['median']:.1f}×", ha="center", va="bottom",
                        fontsize=7)
        ax.set_title(wl["label"].split(",")[0] if len(wl["label"]) > 40 else wl["label"], fontsize=8)
        ax.set_ylabel("samples/s (median, min–max)")
        if lim:
            ax.set_ylim(0, max(max(m + h for m, h in zip(med, hi)), lim) * 1.15)
    fig.suptitle(f"stoker vs peers, {payload['machine']['cpu_count']} cores, hot cache — {payload['machine']['utc']}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def to_jsonable(x):
    if isinstance(x, common.Stats):
        return x.as_dict()
    if isinstance(x, Path):
        return str(x)
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    return x


def peers_main(args) -> int:
    """run.sh --peers: each peer on its own format, V eval and train (bench/peer_suite.py)."""
    import peer_suite

    w = WORKLOADS["V"]
    info = common.machine_info(["stoker", "torch", "webdataset", "PIL", "numpy", "litdata",
                                "datasets", "pyarrow", "ray", "megatron.energon"])
    info["loadavg_start"] = common.load_average()
    t0 = time.perf_counter()
    data = prepare(w, w["quick_count"] if args.quick else w["count"])
    payload = peer_suite.main(args, w, data)
    info["loadavg_end"] = common.load_average()
    payload.update(command="bash bench/run.sh " + " ".join(sys.argv[1:]), machine=info,
                   elapsed_s=time.perf_counter() - t0)
    payload = to_jsonable(payload)
    stem = Path(args.out) if args.out else common.RESULTS_DIR / (time.strftime("%Y-%m-%dT%H%MZ", time.gmtime())
                                                                  + ("-peers-quick" if args.quick else "-peers"))
    stem.parent.mkdir(parents=True, exist_ok=True)
    Path(str(stem) + ".json").write_text(json.dumps(payload, indent=1) + "\n")
    md = peer_suite.markdown(payload)
    Path(str(stem) + ".md").write_text(md)
    print("\n" + md)
    print(f"wrote {stem}.json, .md ({payload['elapsed_s']:.0f} s)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="V and A, small data, fixed settings: < 2 min")
    ap.add_argument("--workloads", default=None,
                    help="comma list of V,S,A,P,C (default V,S,A; --quick V,A); T alone runs the token workload (bench/tokens.py)")
    ap.add_argument("--out", default=None, help="output stem (default bench/results/<UTC stamp>)")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--remote", action="store_true", help="only V over HTTP (nginx + 20 ms proxy): bench/remote.py")
    ap.add_argument("--peers", action="store_true",
                    help="only V eval + train recipes vs litdata, Mosaic, HF datasets, Ray Data, Energon: bench/peer_suite.py")
    ap.add_argument("--only", default=None, help="with --peers: comma list of peer names (stoker always runs)")
    args = ap.parse_args(argv)
    if args.child:
        return child_main(args.child)
    if args.remote:
        import remote

        w = WORKLOADS["V"]
        data = prepare(w, w["quick_count"] if args.quick else w["count"])
        payload = remote.main(args, w, data, stoker_bin())
        payload["command"] = "bash bench/run.sh " + " ".join(sys.argv[1:])
        stem = Path(args.out) if args.out else common.RESULTS_DIR / (time.strftime("%Y-%m-%dT%H%MZ", time.gmtime()) + "-remote")
        remote.write(payload, stem)
        print(f"wrote {stem}.json, .md")
        return 0
    if args.peers:
        return peers_main(args)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workloads = (args.workloads or ("V,A" if args.quick else "V,S,A")).split(",")
    if "T" in workloads:
        import tokens

        if workloads != ["T"]:
            print("T runs on its own: bench/run.sh --workloads T", flush=True)
        return tokens.main(["--out", args.out] if args.out else [])
    import torch

    info = common.machine_info(["stoker", "torch", "webdataset", "PIL", "numpy", "spdl.io", "nvidia.dali"])
    info["loadavg_start"] = common.load_average()
    stamp = time.strftime("%Y-%m-%dT%H%MZ", time.gmtime())
    print(f"stoker benchmark suite {info['utc']}: {cores} cores ({info['cpu_model']}), torch {torch.__version__}, "
          f"load average {info['loadavg_start']}", flush=True)
    t0 = time.perf_counter()
    results = []
    for wname in workloads:
        res = bench_workload(wname.strip(), args, cores)
        res["analysis"] = analyse(res, cores)
        results.append(res)
    info["loadavg_end"] = common.load_average()
    cmd = "bash bench/run.sh" + (" " + " ".join(sys.argv[1:]) if len(sys.argv) > 1 else "")
    payload = {"benchmark": "suite", "command": cmd, "machine": info, "elapsed_s": time.perf_counter() - t0,
               "quick": args.quick, "workloads": results,
               "targets": [t for r in results for t in r["analysis"]["targets"]],
               "not_available": NOT_AVAILABLE}
    payload = to_jsonable(payload)
    stem = Path(args.out) if args.out else common.RESULTS_DIR / (stamp + ("-quick" if args.quick else ""))
    stem.parent.mkdir(parents=True, exist_ok=True)
    Path(str(stem) + ".json").write_text(json.dumps(payload, indent=1) + "\n")
    md = markdown(payload)
    Path(str(stem) + ".md").write_text(md + f"\n![plot]({stem.name}.png)\n")
    try:
        plot(payload, Path(str(stem) + ".png"))
    except Exception as e:  # noqa: BLE001 - the figures still stand without the picture
        print(f"plot failed: {e}", flush=True)
    print("\n" + md)
    print(f"wrote {stem}.json, .md, .png ({payload['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
