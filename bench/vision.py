#!/usr/bin/env python3
"""Vision benchmark: stoker.Loader vs torch.utils.data.DataLoader, side by side in one run.

Measures, in ONE process over the SAME tar shards (hot page cache), following
../shared/BENCHMARKS.md:

  limits   single-thread TurboJPEG full-RGB decode (stoker.decode_jpeg_rgb) x cores,
           plus single-thread decode+resize (stoker.decode_jpeg), Pillow decode+resize,
           and the decode-only rate on all cores (does the machine scale?)
  stoker   stoker.Loader over the shards; decode_threads/io_depth over a small grid
  peer     torch DataLoader over webdataset.WebDataset(same shards), Pillow decode,
           the same antialiased resize/crop, CHW uint8, default collate;
           num_workers over {2, 3} (2 is the issue's baseline and always reported)
  memory   peak RSS and PSS summed over the process tree (parent + workers),
           sampled from /proc/<pid>/smaps_rollup every 50 ms, per configuration
  cpu      CPU-seconds per sample over the tree (os.times, workers are reaped)

Workloads:
  V  ImageNet-like: ~500x375 JPEG q90 (4:2:0, 20% portrait, 5% gray) + int label,
     shorter side to 224 then center crop 224x224, uint8 CHW, batch 64
  S  SA-1B-like: ~1500x1000 JPEG q90 + NPZ float16 features, longer side to 1024,
     zero padded to 1024x1024, uint8 CHW, batch 8

Each epoch (and each pass of a limit path over the in-memory JPEGs) is one
measurement; all of them run alternately within a round (A B C A B C ...),
round 0 is a discarded warm-up, and the median of --reps rounds is reported
with its min-max spread. Ratios are medians of per-round ratios (both figures
from the same round, seconds apart), which cancels most of a shared machine's
drift; "others' CPU" says how many cores other processes used meanwhile.
samples/s is the steady rate (first batch to last); the rate over the whole
epoch including start-up and the time to first batch are reported beside it.
A reference row runs the same loader from the `stoker bench` CLI (C++, no
Python per batch) to show what the Python layer costs. It prints PASS/MISS
against the issue's targets and never fails on speed.

    PYTHONPATH=python python3 bench/vision.py            # V and S, ~4 min on 2 cores
    PYTHONPATH=python python3 bench/vision.py --quick    # V only, small, < 1 min
"""
from __future__ import annotations

import argparse
import gc
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import warnings

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

# Pillow's arrays are read-only; torch.from_numpy warns once per worker. Nothing writes to them.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")

# -- workloads ----------------------------------------------------------------------

WORKLOADS = {
    "V": dict(kind="imagenet", count=4608, quick_count=1536, shards=12, batch=64, size=224,
              resize="center_crop", limit_images=512, quick_limit_images=256,
              label="V ImageNet-like 500x375 -> 224 center crop, batch 64"),
    "S": dict(kind="sa1b", count=384, quick_count=96, shards=12, batch=8, size=1024,
              resize="longest", limit_images=48, quick_limit_images=16,
              label="S SA-1B-like 1500x1000 + NPZ -> 1024 longest padded, batch 8"),
}
# count is a multiple of batch * 2 * 3 * shards/gcd so every DataLoader worker
# (2 or 3, one shard list each) ends on a whole batch: equal work, no partial batch.

STOKER_GRID = [(2, 1), (2, 2), (3, 2)]  # (decode_threads, io_depth)
PEER_WORKERS = [2, 3]
PEER_BASELINE_WORKERS = 2  # the issue's baseline
QUIET_CORES = 0.25  # a measurement is "quiet" when other processes used less CPU than this meanwhile


# -- data ---------------------------------------------------------------------------------

def stoker_bin() -> str | None:
    try:
        from stoker import _cli

        path = _cli.binary()
        if os.path.exists(path):
            return path
    except Exception:  # noqa: BLE001
        pass
    here = Path(__file__).resolve().parents[1]
    for cand in (here / "python" / "stoker" / "bin" / "stoker", here / "build" / "py" / "stoker"):
        if cand.exists():
            return str(cand)
    return shutil.which("stoker")


def _synth_works(binary: str | None) -> bool:
    if not binary:
        return False
    try:
        r = subprocess.run([binary, "synth", "--help"], capture_output=True, timeout=20)
        return r.returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def _natural_image(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """Fallback generator (as tests/python/conftest.py): gradients, soft shapes, mild noise."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    img = np.empty((height, width, 3), np.float32)
    for c in range(3):
        a, b, p = rng.uniform(-1, 1, 3)
        img[..., c] = 128 + 60 * np.sin(a * x / 40 + p) * np.cos(b * y / 50)
    for _ in range(6):
        cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        rx, ry = rng.uniform(10, width / 3), rng.uniform(10, height / 3)
        d = ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2
        mask = np.clip(1.5 - d, 0, 1)[..., None]
        img = img * (1 - mask) + rng.uniform(0, 255, 3) * mask
    img += rng.normal(0, 3, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def _python_samples(kind: str, count: int, seed: int):
    """(key, {ext: bytes}) in order, made with Pillow + numpy (fixed seed)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for i in range(count):
        if kind == "imagenet":
            w, h = (375, 500) if i % 5 == 4 else (500, 375)
        else:
            w, h = (1500, 1000)
        buf = io.BytesIO()
        Image.fromarray(_natural_image(rng, w, h)).save(buf, format="JPEG", quality=90)
        members = {"jpg": buf.getvalue()}
        if kind == "imagenet":
            members["cls"] = str(i % 10).encode()
        else:
            npz = io.BytesIO()
            np.savez(npz, embeddings=rng.standard_normal((64, 16, 16)).astype(np.float16),
                     iou=rng.random(4).astype(np.float32))
            members["features.npz"] = npz.getvalue()
        yield (f"n{i % 10:08d}_{i + 1}" if kind == "imagenet" else f"sa_{i + 1}"), members


def _synth_samples(binary: str, kind: str, count: int, seed: int, scratch: Path):
    """(key, {ext: bytes}) in index order, from `stoker synth --layout loose`."""
    if scratch.exists():
        shutil.rmtree(scratch)
    subprocess.run([binary, "synth", str(scratch), "--kind", kind, "--count", str(count), "--seed", str(seed),
                    "--layout", "loose", "-q"], check=True)
    if kind == "imagenet":
        files = {}
        for p in scratch.rglob("*.JPEG"):
            files[int(p.stem.rsplit("_", 1)[1])] = p
        for i in sorted(files):
            p = files[i]
            cls = int(p.parent.name[1:])
            yield p.stem, {"jpg": p.read_bytes(), "cls": str(cls).encode()}
    else:
        for i in range(1, count + 1):
            stem = scratch / f"sa_{i}"
            yield f"sa_{i}", {"jpg": stem.with_suffix(".jpg").read_bytes(),
                              "features.npz": (scratch / f"sa_{i}_features.npz").read_bytes()}


def prepare_data(root: Path, workload: str, count: int, seed: int, generator: str) -> tuple[list[Path], dict]:
    """Writes `shards` tar shards with webdataset's TarWriter (once; reused if complete)."""
    import webdataset as wds

    w = WORKLOADS[workload]
    d = root / f"{workload}-{count}-seed{seed}"
    done = d / "DONE"
    shards = [d / f"shard-{s:06d}.tar" for s in range(w["shards"])]
    if done.exists() and all(p.exists() for p in shards):
        return shards, {"dir": str(d), "generator": done.read_text().strip(), "reused": True}
    d.mkdir(parents=True, exist_ok=True)
    binary = stoker_bin()
    use_synth = generator == "synth" or (generator == "auto" and _synth_works(binary))
    t0 = time.perf_counter()
    if use_synth:
        samples = _synth_samples(binary, w["kind"], count, seed, d / "loose")
        how = f"stoker synth --kind {w['kind']} --count {count} --seed {seed} --layout loose, packed by webdataset.TarWriter"
    else:
        samples = _python_samples(w["kind"], count, seed)
        how = f"Pillow q90 + numpy (seed {seed}), packed by webdataset.TarWriter"
    per_shard = count // w["shards"]
    it = iter(samples)
    for path in shards:
        with wds.TarWriter(str(path)) as sink:
            for _ in range(per_shard):
                key, members = next(it)
                sink.write({"__key__": key, **members})
    if (d / "loose").exists():
        shutil.rmtree(d / "loose")
    done.write_text(how + "\n")
    print(f"  wrote {len(shards)} shards in {time.perf_counter() - t0:.1f} s: {how}", flush=True)
    return shards, {"dir": str(d), "generator": how, "reused": False}


def read_jpegs(shards: list[Path], limit: int) -> list[bytes]:
    """The first `limit` JPEG members, in shard order, as bytes in memory."""
    out: list[bytes] = []
    for path in shards:
        with tarfile.open(path) as tf:
            for m in tf:
                if m.name.endswith(".jpg"):
                    out.append(tf.extractfile(m).read())
                    if len(out) >= limit:
                        return out
    return out


def describe_jpegs(jpegs: list[bytes]) -> dict:
    from PIL import Image

    sizes, portrait, gray = [], 0, 0
    for b in jpegs:
        im = Image.open(io.BytesIO(b))
        w, h = im.size
        sizes.append(len(b))
        portrait += h > w
        gray += im.mode == "L"
    return {"images": len(jpegs), "mean_bytes": float(np.mean(sizes)), "portrait": portrait, "gray": gray,
            "first_size": list(Image.open(io.BytesIO(jpegs[0])).size)}


# -- the Pillow path (the peer's decode, also timed on one thread) ---------------------------

def pil_center_crop(data: bytes, size: int) -> np.ndarray:
    """Shorter side to `size`, center crop, antialiased bilinear: HWC uint8.

    Resizes only the centered square (Image.resize box=), which gives the same
    pixels as resize-then-crop up to rounding and costs less: the peer's best effort.
    """
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    if img.mode != "RGB":
        img = img.convert("RGB")
    w, h = img.size
    s = min(w, h)
    box = ((w - s) / 2, (h - s) / 2, (w + s) / 2, (h + s) / 2)
    return np.asarray(img.resize((size, size), Image.BILINEAR, box=box))


def pil_resize_then_crop(data: bytes, size: int) -> np.ndarray:
    """torchvision-style Resize(size) + CenterCrop(size) on a PIL image (for context)."""
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    if img.mode != "RGB":
        img = img.convert("RGB")
    w, h = img.size
    if w <= h:
        nw, nh = size, int(size * h / w)
    else:
        nw, nh = int(size * w / h), size
    img = img.resize((nw, nh), Image.BILINEAR)
    left, top = int(round((nw - size) / 2.0)), int(round((nh - size) / 2.0))
    return np.asarray(img.crop((left, top, left + size, top + size)))


def pil_longest_padded(data: bytes, size: int) -> np.ndarray:
    """Longer side to `size` (antialiased bilinear), zero padded bottom/right to size x size: HWC."""
    from PIL import Image

    img = Image.open(io.BytesIO(data))
    if img.mode != "RGB":
        img = img.convert("RGB")
    w, h = img.size
    scale = size / max(w, h)
    nw, nh = max(1, int(w * scale + 0.5)), max(1, int(h * scale + 0.5))  # SAM's ResizeLongestSide
    out = np.zeros((size, size, 3), np.uint8)
    out[:nh, :nw] = np.asarray(img.resize((nw, nh), Image.BILINEAR))
    return out


def pil_transform(workload: str):
    w = WORKLOADS[workload]
    return (lambda b: pil_center_crop(b, w["size"])) if w["resize"] == "center_crop" else \
        (lambda b: pil_longest_padded(b, w["size"]))


class PeerSample:
    """webdataset sample dict -> (CHW uint8 tensor, label or features): what each worker runs."""

    def __init__(self, workload: str) -> None:
        self.workload = workload
        self.size = WORKLOADS[workload]["size"]

    def __call__(self, sample: dict):
        import torch

        if self.workload == "V":
            hwc = pil_center_crop(sample["jpg"], self.size)
            return torch.from_numpy(hwc).permute(2, 0, 1), int(sample["cls"])
        hwc = pil_longest_padded(sample["jpg"], self.size)
        with np.load(io.BytesIO(sample["features.npz"])) as z:
            feats = {k: torch.from_numpy(z[k]) for k in z.files}
        return torch.from_numpy(hwc).permute(2, 0, 1), feats



# -- limits (single-image rates on bytes held in memory) ---------------------------------------

class Limits:
    """The decode paths timed on bytes in memory; each call of one is a measurement,
    so they run inside the same rounds as the loaders (alternated, same noise)."""

    def __init__(self, workload: str, jpegs: list[bytes], cores: int) -> None:
        import stoker

        w = WORKLOADS[workload]
        spec = stoker.image_spec(w["size"], resize=w["resize"])
        self.n = len(jpegs)
        self.pool = ThreadPoolExecutor(cores)
        chunks = [jpegs[i::cores] for i in range(cores)]

        def loop(fn):
            return lambda: [fn(b) for b in jpegs]

        def threads(fn):
            return lambda: list(self.pool.map(lambda c: [fn(b) for b in c], chunks))

        def stoker_resize(b):
            return stoker.decode_jpeg(b, spec)

        self.paths = [  # (key, label, fn); the first is THE limit
            ("turbojpeg_decode_rgb_1t", "TurboJPEG full RGB decode (stoker.decode_jpeg_rgb), 1 thread",
             loop(stoker.decode_jpeg_rgb)),
            ("stoker_decode_resize_1t", f"stoker.decode_jpeg {w['resize']} {w['size']}, 1 thread",
             loop(stoker_resize)),
            ("pillow_decode_resize_1t", "Pillow decode + antialiased resize (the peer's path), 1 thread",
             loop(pil_transform(workload))),
        ]
        if workload == "V":
            self.paths.append(("pillow_resize_then_crop_1t", "Pillow torchvision-style Resize+CenterCrop, 1 thread",
                               loop(lambda b: pil_resize_then_crop(b, w["size"]))))
        self.paths += [
            (f"turbojpeg_decode_rgb_{cores}t", f"TurboJPEG full RGB decode, {cores} threads (scaling check)",
             threads(stoker.decode_jpeg_rgb)),
            (f"stoker_decode_resize_{cores}t", f"stoker.decode_jpeg {w['resize']} {w['size']}, {cores} threads",
             threads(stoker_resize)),
        ]

    def run(self, fn) -> dict:
        c0, b0 = common.cpu_seconds(), common.system_busy_seconds()
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        c1, b1 = common.cpu_seconds(), common.system_busy_seconds()
        return {"rate": self.n / (t1 - t0), "seconds": t1 - t0,
                "other_cpu_cores": max(0.0, ((b1 - b0) - (c1 - c0)) / (t1 - t0))}

    def close(self) -> None:
        self.pool.shutdown()


def check_same_output(workload: str, jpegs: list[bytes]) -> dict:
    """Fidelity: each decode path vs the torchvision recipe the workload stands for
    (Resize(S)+CenterCrop(S), or SAM's longest side + pad, on Pillow BILINEAR):
    mean / p99.9 / max |diff| over a few images, per path."""
    import stoker

    w = WORKLOADS[workload]
    ref = (lambda b: pil_resize_then_crop(b, w["size"])) if w["resize"] == "center_crop" else \
        (lambda b: pil_longest_padded(b, w["size"]))
    paths = {
        "stoker (default: bilinear)": stoker.image_spec(w["size"], resize=w["resize"]),
        "stoker resample='box'": stoker.image_spec(w["size"], resize=w["resize"], resample="box"),
    }
    fns = {k: (lambda s: (lambda b: stoker.decode_jpeg(b, s).transpose(1, 2, 0)))(s) for k, s in paths.items()}
    fns["DataLoader peer (Pillow, resize of the crop box)"] = pil_transform(workload)
    out = {}
    for name, fn in fns.items():
        d = np.concatenate([np.abs(fn(b).astype(np.int16) - ref(b).astype(np.int16)).ravel() for b in jpegs[:16]])
        out[name] = {"mean_abs_diff": float(d.mean()), "p999_abs_diff": float(np.percentile(d, 99.9)),
                     "max_abs_diff": int(d.max())}
    first = out["stoker (default: bilinear)"]
    recipe = f"Resize({w['size']})+CenterCrop({w['size']})" if w["resize"] == "center_crop" else \
        f"longest side {w['size']} + zero pad (SAM)"
    return {"images": min(16, len(jpegs)), "recipe": recipe, "paths": out, **first}



# -- loader runs -------------------------------------------------------------------------------

def stoker_factory(workload: str, shards: list[Path], decode_threads: int, io_depth: int):
    import stoker

    w = WORKLOADS[workload]
    fields = {"jpg": stoker.image(w["size"], resize=w["resize"])}
    if workload == "V":
        fields["cls"] = stoker.scalar("int64")
    else:
        fields["features.npz"] = stoker.npz()

    def make():
        return stoker.Loader([str(p) for p in shards], fields=fields, batch_size=w["batch"], shuffle=False,
                             decode_threads=decode_threads, io_depth=io_depth, prefetch=2, output="torch")

    return make


def peer_factory(workload: str, shards: list[Path], workers: int):
    import torch
    import webdataset as wds

    w = WORKLOADS[workload]

    def make():
        ds = wds.WebDataset([str(p) for p in shards], shardshuffle=False, empty_check=False).map(PeerSample(workload))
        return torch.utils.data.DataLoader(ds, batch_size=w["batch"], num_workers=workers, shuffle=False)

    return make


def run_epoch(make, image_key, memory: bool = True, interval: float = 0.05) -> dict:
    """One epoch: build the loader, iterate, shut down. Times, samples, CPU and tree memory.

    memory=False: no sampler thread. Its reads of /proc (~0.1 core) are CPU this process
    spends outside the loader's threads, which a loader left to tune itself (autotune, no
    decode_threads given) takes for a training step's, and with a loop that waits nearly
    all the time it gives that step a core: decode_threads 2 -> 1 on 2 cores."""
    gc.collect()
    with (common.TreeSampler(interval, deferred=True) if memory else common.NoSampler()) as mem:
        c0 = common.cpu_seconds()
        b0 = common.system_busy_seconds()
        t0 = time.perf_counter()
        loader = make()
        it = iter(loader)
        n = n_first = 0
        t_first = None
        for batch in it:
            images = batch[image_key] if isinstance(batch, dict) else batch[0]
            n += images.shape[0]
            if t_first is None:
                t_first = time.perf_counter()
                n_first = n
                mem.begin()  # after the first batch: its time is the loader's alone
            del batch, images
        t_last = time.perf_counter()
        del it  # DataLoader: workers are joined (reaped) here; stoker: threads stopped
        if hasattr(loader, "close"):
            loader.close()
        del loader
        gc.collect()
        c1 = common.cpu_seconds()
        b1 = common.system_busy_seconds()
        t1 = time.perf_counter()
    steady = (n - n_first) / (t_last - t_first) if t_last > t_first else float("nan")
    return {
        "samples": n,
        "seconds": t_last - t0,
        "ttfb_s": t_first - t0,
        "steady_rate": steady,
        "epoch_rate": n / (t_last - t0),
        "cpu_s": c1 - c0,
        # cores' worth of CPU that OTHER processes used meanwhile: a noisy-neighbour gauge
        "other_cpu_cores": max(0.0, ((b1 - b0) - (c1 - c0)) / (t1 - t0)),
        **mem.as_dict(),  # base_/peak_ rss, pss, anon, file; max_procs, mem_samples
    }


def native_factory(workload: str, shards: list[Path], decode_threads: int, io_depth: int):
    """`stoker bench` (the C++ loader with no Python per batch), one epoch, as a child process."""
    w = WORKLOADS[workload]
    binary = stoker_bin()
    fields = [f"jpg:image:{w['size']}" + ("" if w["resize"] == "center_crop" else f":{w['resize']}")]
    fields.append("cls:scalar:int64" if workload == "V" else "features.npz:npz")
    cmd = [binary, "bench", *map(str, shards), "--key-rule", "webdataset", "-b", str(w["batch"]),
           "--decode-threads", str(decode_threads), "--io-depth", str(io_depth), "--prefetch", "2",
           "--epochs", "1", "--json"]
    for f in fields:
        cmd += ["-f", f]

    def run() -> dict:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"stoker bench failed: {r.stderr.strip()[-500:]}")
        e = json.loads(r.stdout)["epochs"][0]
        return {"samples": e["samples"], "seconds": e["seconds"], "ttfb_s": e["first_batch_s"],
                "first_batch_samples": w["batch"]}

    return run, " ".join(cmd)


def run_native(run) -> dict:
    """Like run_epoch for the CLI: times come from its JSON; CPU and memory from this side."""
    with common.TreeSampler(0.05) as mem:
        c0, b0 = common.cpu_seconds(), common.system_busy_seconds()
        t0 = time.perf_counter()
        r = run()
        t1 = time.perf_counter()
        c1, b1 = common.cpu_seconds(), common.system_busy_seconds()
    n, secs, ttfb = r["samples"], r["seconds"], r["ttfb_s"]
    return {
        "samples": n, "seconds": secs, "ttfb_s": ttfb,
        "steady_rate": (n - r["first_batch_samples"]) / (secs - ttfb),
        "epoch_rate": n / secs,
        "process_s": t1 - t0,
        "cpu_s": c1 - c0,
        "other_cpu_cores": max(0.0, ((b1 - b0) - (c1 - c0)) / (t1 - t0)),
        **mem.as_dict(),  # base_/peak_ rss, pss, anon, file; max_procs, mem_samples
    }


def bench_workload(workload: str, args, cores: int) -> dict:
    w = WORKLOADS[workload]
    count = args.count or (w["quick_count"] if args.quick else w["count"])
    limit_n = w["quick_limit_images"] if args.quick else w["limit_images"]
    print(f"\n== workload {w['label']}: {count} samples ==", flush=True)
    shards, data = prepare_data(Path(args.data), workload, count, args.seed, args.generator)
    data["shards"] = len(shards)
    data["count"] = count
    data["shard_bytes"] = common.hot_cache(shards)  # hot page cache from here on
    jpegs = read_jpegs(shards, limit_n)
    data["jpegs"] = describe_jpegs(jpegs)
    print(f"  data: {data['dir']} ({data['shard_bytes'] / 1e6:.0f} MB in {len(shards)} shards, "
          f"mean JPEG {data['jpegs']['mean_bytes'] / 1e3:.1f} KB, hot cache)", flush=True)
    same = check_same_output(workload, jpegs)
    print(f"  stoker vs Pillow output on {same['images']} images: mean |diff| {same['mean_abs_diff']:.2f}, "
          f"p99.9 {same['p999_abs_diff']:.0f}, max {same['max_abs_diff']} (uint8 levels)", flush=True)
    limits = Limits(workload, jpegs, cores)  # keeps the JPEG bytes (a few MB) for the whole run

    configs = []
    grid = [STOKER_GRID[1]] if args.quick else STOKER_GRID
    for dt, io_depth in grid:
        configs.append({"name": f"stoker decode_threads={dt} io_depth={io_depth}", "kind": "stoker",
                        "decode_threads": dt, "io_depth": io_depth,
                        "make": stoker_factory(workload, shards, dt, io_depth)})
    native_cmd = None
    if not args.no_native and stoker_bin():
        run, native_cmd = native_factory(workload, shards, *STOKER_GRID[1])
        configs.append({"name": f"(ref) stoker bench CLI, no Python, {STOKER_GRID[1][0]}/{STOKER_GRID[1][1]}",
                        "kind": "native", "decode_threads": STOKER_GRID[1][0], "io_depth": STOKER_GRID[1][1],
                        "run": run})
    if not args.no_peer:
        for nw in ([PEER_BASELINE_WORKERS] if args.quick else PEER_WORKERS):
            configs.append({"name": f"DataLoader num_workers={nw} (webdataset, Pillow)", "kind": "peer",
                            "workers": nw, "make": peer_factory(workload, shards, nw)})
    lim_runs = {key: [] for key, _, _ in limits.paths}
    runs = {c["name"]: [] for c in configs}
    rounds = 1 + args.reps
    print(f"  {len(limits.paths)} limit paths ({limits.n} images in memory) and {len(configs)} loader "
          f"configurations, alternating, x {rounds} rounds (round 0 is a discarded warm-up)", flush=True)
    for r in range(rounds):
        for key, label, fn in limits.paths:
            res = limits.run(fn)
            res["round"] = r
            lim_runs[key].append(res)
        lim0 = lim_runs[limits.paths[0][0]][-1]
        print(f"    round {r}{' (warm-up)' if r == 0 else ''}  {'decode limit, 1 thread':<52} "
              f"{lim0['rate']:8,.0f} images/s   others' CPU {lim0['other_cpu_cores']:.2f}", flush=True)
        for c in configs:
            if c["kind"] == "native":
                res = run_native(c["run"])
            else:
                res = run_epoch(c["make"], "jpg" if c["kind"] == "stoker" else 0)
            if res["samples"] != count:
                print(f"  WARNING: {c['name']} delivered {res['samples']} samples, expected {count}", flush=True)
            res["round"] = r
            runs[c["name"]].append(res)
            print(f"    round {r}{' (warm-up)' if r == 0 else ''}  {c['name']:<52} "
                  f"{res['steady_rate']:8,.0f} samples/s  ttfb {res['ttfb_s']:.2f} s  "
                  f"peak RSS {common.mib(res['peak_rss']):6,.0f} MiB  others' CPU {res['other_cpu_cores']:.2f}",
                  flush=True)
    limits.close()

    limit_summary = {}
    for key, label, _ in limits.paths:
        measured = [x for x in lim_runs[key] if x["round"] > 0]
        limit_summary[key] = {"label": label, "rate": common.summarize([x["rate"] for x in measured]),
                              "other_cpu_cores": common.summarize([x["other_cpu_cores"] for x in measured])}
    summary = {}
    for c in configs:
        measured = [x for x in runs[c["name"]] if x["round"] > 0]
        summary[c["name"]] = {
            "kind": c["kind"],
            "settings": {k: v for k, v in c.items() if k in ("decode_threads", "io_depth", "workers")},
            "steady_rate": common.summarize([x["steady_rate"] for x in measured]),
            "epoch_rate": common.summarize([x["epoch_rate"] for x in measured]),
            "ttfb_s": common.summarize([x["ttfb_s"] for x in measured]),
            "cpu_ms_per_sample": common.summarize([1e3 * x["cpu_s"] / x["samples"] for x in measured]),
            "other_cpu_cores": common.summarize([x["other_cpu_cores"] for x in measured]),
            "peak_rss": max(x["peak_rss"] for x in measured),
            "peak_pss": max(x["peak_pss"] for x in measured),
            "delta_rss": max(x["peak_rss"] - x["base_rss"] for x in measured),
            "delta_pss": max(x["peak_pss"] - x["base_pss"] for x in measured),
            # anonymous (Pss_Anon + Pss_Shmem) apart from mapped files (Pss_File): bench/common.py
            "peak_anon": max(x["peak_anon"] for x in measured),
            "delta_anon": max(x["peak_anon"] - x["base_anon"] for x in measured),
            "peak_file": max(x["peak_file"] for x in measured),
            "base_rss": min(x["base_rss"] for x in measured),
            "max_procs": max(x["max_procs"] for x in measured),
        }
    return {"workload": workload, "label": w["label"], "data": data, "same_output": same,
            "limit_runs": lim_runs, "limits": limit_summary, "runs": runs, "summary": summary,
            "native_command": native_cmd, "rounds": rounds}


# -- report -----------------------------------------------------------------------------------

def _quiet(x: dict) -> bool:
    return x["other_cpu_cores"] < QUIET_CORES


def _paired(a: list[dict], b: list[dict], key_a="steady_rate", key_b="steady_rate", scale_b=1.0,
            quiet=False):
    """median [min-max] over measured rounds of a[r] / (b[r] * scale_b): same round, adjacent in time.
    quiet: only rounds where both measurements were quiet (None if there are none)."""
    bb = {x["round"]: x for x in b if x["round"] > 0 and (not quiet or _quiet(x))}
    vals = [x[key_a] / (bb[x["round"]][key_b] * scale_b) for x in a
            if x["round"] in bb and (not quiet or _quiet(x))]
    return common.summarize(vals) if vals else None


def report(res: dict, cores: int) -> tuple[str, dict]:
    s, limits, runs, lim_runs = res["summary"], res["limits"], res["runs"], res["limit_runs"]
    limit_key = "turbojpeg_decode_rgb_1t"
    decode_1t = limits[limit_key]["rate"].median
    limit = decode_1t * cores
    stoker_cfgs = {k: v for k, v in s.items() if v["kind"] == "stoker"}
    peer_cfgs = {k: v for k, v in s.items() if v["kind"] == "peer"}
    best_stoker = max(stoker_cfgs, key=lambda k: stoker_cfgs[k]["steady_rate"].median)
    best_peer = max(peer_cfgs, key=lambda k: peer_cfgs[k]["steady_rate"].median) if peer_cfgs else None
    peer2 = next((k for k, v in peer_cfgs.items() if v["settings"].get("workers") == PEER_BASELINE_WORKERS), None)
    lim_as_rate = [{"round": x["round"], "steady_rate": x["rate"], "other_cpu_cores": x["other_cpu_cores"]}
                   for x in lim_runs[limit_key]]

    def quiet_median(name):
        q = [x["steady_rate"] for x in runs[name] if x["round"] > 0 and _quiet(x)]
        return f"{common.summarize(q).median:,.0f} ({len(q)})" if q else "– (0)"

    def ratio(name, other):
        return _paired(runs[name], runs[other]).median if other else float("nan")

    headers = ["configuration", "samples/s median [min–max]", "quiet (n)", "epoch/s", "ttfb s", "×DL best", "×DL 2w",
               "×limit", "peak RSS MiB (Δ)", "peak PSS MiB (Δ)", "peak anon MiB (Δ)", "file-mapped MiB",
               "CPU ms/sample", "others' CPU"]
    rows = []
    for name, v in s.items():
        mark = " *" if name in (best_stoker, best_peer) else ""
        rows.append([
            name + mark, v["steady_rate"].fmt(), quiet_median(name), f"{v['epoch_rate'].median:,.0f}", f"{v['ttfb_s'].median:.2f}",
            f"{ratio(name, best_peer):.2f}", f"{ratio(name, peer2):.2f}",
            f"{_paired(runs[name], lim_as_rate, scale_b=cores).median:.2f}",
            f"{common.mib(v['peak_rss']):,.0f} ({common.mib(v['delta_rss']):+,.0f})",
            f"{common.mib(v['peak_pss']):,.0f} ({common.mib(v['delta_pss']):+,.0f})",
            f"{common.mib(v['peak_anon']):,.0f} ({common.mib(v['delta_anon']):+,.0f})",
            f"{common.mib(v['peak_file']):,.0f}",
            f"{v['cpu_ms_per_sample'].median:.2f}",
            f"{v['other_cpu_cores'].median:.2f}",
        ])
    lim_rows = []
    for key, v in limits.items():
        as_rate = [{"round": x["round"], "steady_rate": x["rate"]} for x in lim_runs[key]]
        lim_rows.append([v["label"], v["rate"].fmt(), f"{_paired(as_rate, lim_as_rate, scale_b=cores).median:.2f}",
                         f"{v['other_cpu_cores'].median:.2f}"])
    r2 = _paired(runs[best_stoker], runs[peer2]) if peer2 else None
    rb = _paired(runs[best_stoker], runs[best_peer]) if best_peer else None
    rl = _paired(runs[best_stoker], lim_as_rate, scale_b=cores)
    q2 = _paired(runs[best_stoker], runs[peer2], quiet=True) if peer2 else None
    qb = _paired(runs[best_stoker], runs[best_peer], quiet=True) if best_peer else None
    ql = _paired(runs[best_stoker], lim_as_rate, scale_b=cores, quiet=True)
    verdict = lambda st, target: "n/a" if st is None else ("PASS" if st.median >= target else "MISS")  # noqa: E731
    targets = {
        "limit_images_per_s": limit,
        "best_stoker": best_stoker, "best_peer": best_peer, "peer_2_workers": peer2,
        "ratio_vs_dataloader_2_workers": r2, "ratio_vs_dataloader_best": rb, "fraction_of_decode_limit": rl,
        "target_2x_dataloader_2_workers": verdict(r2, 2.0),
        "target_2x_dataloader_best": verdict(rb, 2.0),
        "target_0.8_decode_limit": verdict(rl, 0.8),
        "quiet_rounds_only": {
            "ratio_vs_dataloader_2_workers": q2, "ratio_vs_dataloader_best": qb, "fraction_of_decode_limit": ql,
            "target_2x_dataloader_2_workers": verdict(q2, 2.0), "target_2x_dataloader_best": verdict(qb, 2.0),
            "target_0.8_decode_limit": verdict(ql, 0.8)},
    }
    nq = lambda st: 0 if st is None else len(st.values)  # noqa: E731
    fmt = lambda st, d=2: "n/a" if st is None else st.fmt(d)  # noqa: E731
    d = res["data"]
    lines = [
        f"### {res['label']} — {d['count']} samples in {d['shards']} shards, mean JPEG "
        f"{d['jpegs']['mean_bytes'] / 1e3:.1f} KB ({d['jpegs']['portrait']}/{d['jpegs']['images']} portrait, "
        f"{d['jpegs']['gray']} gray), hot cache, {res['rounds'] - 1} measured rounds",
        "",
        "Limits (JPEG bytes in memory; ×limit = per-round ratio to 1-thread decode-only × cores):",
        common.table(["path", "images/s median [min–max]", "×limit", "others' CPU"], lim_rows),
        f"decode limit = TurboJPEG 1-thread decode-only {decode_1t:,.0f}/s × {cores} cores = {limit:,.0f} images/s",
        "",
        "Loaders (samples/s = steady rate, first to last batch; epoch/s includes start-up; ratios are medians of",
        "per-round ratios to the other figure measured in the same round; * = best of its kind):",
        common.table(headers, rows),
        "",
        f"stoker best: {best_stoker}; DataLoader best: {best_peer}",
        "target (median of per-round ratios [min–max]; then the same over quiet rounds only, (n) rounds):",
        f"  ≥ 2× DataLoader, 2 workers (the issue's baseline): {fmt(r2)} → {targets['target_2x_dataloader_2_workers']}"
        f";  quiet: {fmt(q2)} ({nq(q2)}) → {verdict(q2, 2.0)}",
        f"  ≥ 2× DataLoader, best of its grid:                 {fmt(rb)} → {targets['target_2x_dataloader_best']}"
        f";  quiet: {fmt(qb)} ({nq(qb)}) → {verdict(qb, 2.0)}",
        f"  ≥ 0.8 × decode limit:                              {fmt(rl)} → {targets['target_0.8_decode_limit']}"
        f";  quiet: {fmt(ql)} ({nq(ql)}) → {verdict(ql, 0.8)}",
        f"stoker vs Pillow output: mean |diff| {res['same_output']['mean_abs_diff']:.2f}, "
        f"p99.9 {res['same_output']['p999_abs_diff']:.0f}, max {res['same_output']['max_abs_diff']} levels "
        f"over {res['same_output']['images']} images",
        f"others' CPU: cores used by OTHER processes on the machine meanwhile (noise gauge, median); "
        f"quiet = below {QUIET_CORES}.",
    ]
    return "\n".join(lines), targets


def to_jsonable(x):
    if isinstance(x, common.Stats):
        return x.as_dict()
    if isinstance(x, dict):
        return {k: to_jsonable(v) for k, v in x.items() if k != "make"}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    return x


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", default=None, help="comma list of V,S (default V,S; --quick: V)")
    ap.add_argument("--quick", action="store_true", help="small data, V only, best-guess grid: < 1 minute")
    ap.add_argument("--count", type=int, default=0, help="samples (default per workload; a multiple of batch*6*shards/6)")
    ap.add_argument("--reps", type=int, default=0,
                    help="measured rounds after the warm-up (default 5; --quick 3; at least 3)")
    ap.add_argument("--data", default=os.environ.get("STOKER_BENCH_DATA", "/tmp/stoker-bench/vision"),
                    help="where the shards are written (reused between runs)")
    ap.add_argument("--generator", choices=["auto", "synth", "python"], default="auto",
                    help="stoker synth if it works (auto), else Pillow in Python")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-peer", action="store_true", help="skip the DataLoader (stoker and limits only)")
    ap.add_argument("--no-native", action="store_true", help="skip the reference row from `stoker bench` (C++, no Python)")
    ap.add_argument("--out", default=None, help="JSON path (default bench/results/vision-<UTC>.json)")
    args = ap.parse_args(argv)
    args.reps = args.reps or (3 if args.quick else 5)
    workloads = (args.workloads or ("V" if args.quick else "V,S")).split(",")
    cores = os.cpu_count() or 1

    import stoker  # noqa: F401 - fail early with a clear error
    import torch

    info = common.machine_info(["stoker", "torch", "webdataset", "PIL", "numpy"])
    info["loadavg_start"] = common.load_average()
    print(f"vision benchmark {info['utc']} on {info['hostname']}: {cores} cores ({info['cpu_model']}), "
          f"{info['mem_total_gib']} GiB, torch {torch.__version__}, load average {info['loadavg_start']}",
          flush=True)
    t0 = time.perf_counter()
    results, texts, targets = [], [], {}
    for wl in workloads:
        res = bench_workload(wl.strip(), args, cores)
        text, tg = report(res, cores)
        res["targets"] = tg
        targets[wl] = tg
        results.append(res)
        texts.append(text)
    elapsed = time.perf_counter() - t0
    info["loadavg_end"] = common.load_average()
    cmd = "PYTHONPATH=python python3 bench/vision.py " + " ".join(sys.argv[1:] if argv is None else argv)
    print(f"\n==== results ({elapsed:.0f} s; `{cmd.strip()}`) ====\n")
    print("\n\n".join(texts))
    payload = {"benchmark": "vision", "command": cmd.strip(), "machine": info, "elapsed_s": elapsed,
               "args": {k: v for k, v in vars(args).items()}, "workloads": to_jsonable(results),
               "targets": to_jsonable(targets)}
    path = common.write_json("vision", payload, args.out)
    print(f"\nJSON: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
