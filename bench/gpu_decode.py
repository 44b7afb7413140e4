#!/usr/bin/env python3
"""GPU JPEG decode (issue 26): the "Done means" figures, side by side in one run on
one CUDA machine, each printed against its target with PASS/MISS. Never fails on
speed; a part that errors prints its traceback and the others still run.

  a. V (ImageNet-like JPEGs from `stoker synth --kind imagenet`, ~500x375),
     RandomResizedCrop + flip 224, batch 256, the loader alone, images/s:
       stoker decode="auto"  >= 2x  stoker decode="cpu"            (same machine, same round)
       stoker decode="auto"  >= 3x  torchvision: decode_jpeg(list, device="cuda") + per-image
                                    v2.RandomResizedCrop(224) + RandomHorizontalFlip on the GPU,
                                    over the same JPEG bytes held in memory (no DataLoader)
  b. S (SA-1B-like 2250x1500 JPEGs + an NPZ feature member, `stoker synth --kind sa1b`),
     longest side 1024 (zero padded), batch 8, images/s:
       stoker decode="auto"  >= 4x  stoker decode="cpu"
       stoker decode="auto"  >= 5x  DataLoader(num_workers=the job's cores, pin_memory=True)
                                    over webdataset, Pillow decode + the same resize
                                    (bench/vision.py's PeerSample), batches moved to the GPU
  c. CPU seconds per image (getrusage RUSAGE_SELF user+sys over the timed window / images),
     on V and on S:  auto <= 0.4x cpu
  d. ResNet-18 (bf16 autocast, batch 256, channels_last, SGD) fed by stoker decode="auto"
     on V: steps/s >= 0.95x the same steps on one fixed batch already on the device.
  Stall (--parts Stall, not in the default parts): S with decode="gpu", prefetch 16, 200
     batches, --stall-runs loaders one after another. On an H200 nvJPEG's hardware decoder
     stopped returning here in 6 of 6 runs (docs/guides/gpu.md, "JPEG decode on the GPU"); stoker's own
     watchdog now turns it off instead (report()["gpu_decode"]["failed"], counted as a stall),
     and with --watchdog a run that still hangs leaves its stacks.

--watchdog S: if the run has not ended S seconds after it began, it prints every thread's
Python stack and, where gdb or cuda-gdb is on the PATH, every thread's native stack, records
the stall (which part, how long) in the JSON and exits 3, so a stall is a record, not a
timeout with nothing in it.

Each configuration is timed after warm-up batches (excluded), between
torch.cuda.synchronize() calls, in --rounds rounds that alternate the
configurations (A B C A B C ...); a ratio is the median of per-round ratios.
After each stoker run the loader's settings["gpu_decode"] (decoder, GPU share,
why) and report()["gpu_decode"] (images per decoder, fallbacks) are printed.
The JSON (--out) is rewritten after every part, so a run cut short keeps what it measured.

    PYTHONPATH=python python3 bench/gpu_decode.py --out /tmp/gpu_decode.json   # ~2-3 min on an H200
    PYTHONPATH=python python3 bench/gpu_decode.py --dry                        # no GPU: tiny, device="cpu"

--dry proves the script on a machine without a GPU: tiny counts, device="cpu",
torchvision decoding on the CPU; where the installed stoker has no decode=
keyword yet, both stoker rows run the CPU path (said so in the output).
"""
from __future__ import annotations

import argparse
import gc
import inspect
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import vision  # noqa: E402  (stoker_bin, PeerSample: the DataLoader peer's decode + resize)

# workload -> data and loop sizes; "dry" overrides for --dry (no GPU, seconds on 2 cores)
WORKLOADS = {
    "V": dict(kind="imagenet", image_size=None, count=4096, shards=16, batch=256, warm=10, measure=80,
              dry=dict(count=96, shards=4, batch=16, warm=1, measure=4)),
    "S": dict(kind="sa1b", image_size="2250x1500", count=256, shards=32, batch=8, warm=8, measure=96,
              dry=dict(count=16, shards=4, batch=4, warm=1, measure=3, image_size="600x400")),
}
RESNET = dict(batch=256, warm=15, steps=100, dry=dict(batch=16, warm=1, steps=2))
TARGETS = {  # name -> (threshold, "ge" | "le", what)
    "V auto/cpu": (2.0, "ge", "stoker auto vs stoker cpu, V images/s"),
    "V auto/torchvision": (3.0, "ge", "stoker auto vs torchvision decode_jpeg(cuda) + v2 per image, V images/s"),
    # DALI's mixed decoder is the strongest peer: stoker should at least match it (no issue sets more).
    "V auto/DALI": (1.0, "ge", "stoker auto vs DALI decoders.image_random_crop(mixed) + resize + flip, V images/s"),
    "S auto/cpu": (4.0, "ge", "stoker auto vs stoker cpu, S images/s"),
    "S auto/DataLoader": (5.0, "ge", "stoker auto vs DataLoader (1 worker per core, pinned), S images/s"),
    "V cpu-s/image auto/cpu": (0.4, "le", "CPU seconds per image, auto vs cpu, V"),
    "S cpu-s/image auto/cpu": (0.4, "le", "CPU seconds per image, auto vs cpu, S"),
    "ResNet-18 fed/fixed": (0.95, "ge", "ResNet-18 steps/s fed by stoker auto vs on one fixed device batch"),
}


# -- small helpers ------------------------------------------------------------------------------

def cpu_seconds_self() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def job_cores() -> int:
    """The CPUs this process may use (affinity, cgroup quota: stoker's count), which on a
    container can be fewer than os.cpu_count(): one DataLoader worker per core."""
    try:
        import stoker

        return int(stoker._stoker.cpu_share()["cores"])
    except Exception:  # noqa: BLE001
        return len(os.sched_getaffinity(0))


def gpu_decode_stats(loader) -> dict | None:
    """report()["gpu_decode"] (images per decoder, fallbacks), else the engine's own stats."""
    stats = loader.report().get("gpu_decode")
    if stats is None:
        stats = loader._native.stats().get("gpu_decode")
    return stats


def verdict(name: str, value: float | None) -> str:
    threshold, how, _ = TARGETS[name]
    if value is None or value != value:
        return "n/a"
    ok = value >= threshold if how == "ge" else value <= threshold
    return "PASS" if ok else "MISS"


def median_ratio(a: list[float], b: list[float]) -> dict | None:
    """Median [min-max] of per-round ratios a[r] / b[r]."""
    ratios = [x / y for x, y in zip(a, b) if y]
    if not ratios:
        return None
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios), "values": ratios}


class Run:
    """What the run knows: device, stoker's abilities, results; the JSON is
    rewritten after each part."""

    def __init__(self, args) -> None:
        import torch

        self.args = args
        self.torch = torch
        self.dry = args.dry
        self.cuda = not args.dry
        self.device = "cuda" if self.cuda else "cpu"
        self.t0 = time.perf_counter()
        import stoker

        self.stoker = stoker
        self.has_decode = "decode" in inspect.signature(stoker.image).parameters
        self.payload = {"benchmark": "gpu_decode", "command": " ".join(sys.argv), "dry": self.dry,
                        "has_decode_keyword": self.has_decode, "figures": {}, "parts": {}, "errors": {}}

    def size(self, workload: str) -> dict:
        w = {k: v for k, v in WORKLOADS[workload].items() if k != "dry"}
        if self.dry:
            w.update(WORKLOADS[workload]["dry"])
        return w

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def out_of_time(self) -> bool:
        return self.elapsed() > self.args.budget

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def figure(self, name: str, ratio: dict | None, detail: str) -> None:
        threshold, how, what = TARGETS[name]
        value = None if ratio is None else ratio["median"]
        v = "not judged (dry)" if self.dry else verdict(name, value)
        sign = ">=" if how == "ge" else "<="
        shown = "n/a" if value is None else f"{value:.2f}x [{ratio['min']:.2f}-{ratio['max']:.2f}]"
        print(f"  {name:<26} {shown:<22} {v}  (target {sign} {threshold}x: {what}; {detail})", flush=True)
        self.payload["figures"][name] = {"ratio": ratio, "target": threshold, "how": how, "verdict": v,
                                         "what": what, "detail": detail}
        self.save()

    def save(self) -> None:
        self.payload["elapsed_s"] = self.elapsed()
        common.write_json("gpu_decode", self.payload, self.args.out)

    def image_field(self, size: int, resize: str, decode: str, **kw):
        if self.has_decode:
            return self.stoker.image(size, resize=resize, decode=decode, **kw)
        return self.stoker.image(size, resize=resize, **kw)  # today's CPU path, whatever `decode` says


# -- data -------------------------------------------------------------------------------------

def _synth_loose(binary: str, kind: str, count: int, seed: int, image_size: str | None, scratch: Path):
    """(key, {ext: bytes}) in index order from `stoker synth --layout loose`."""
    cmd = [binary, "synth", str(scratch), "--kind", kind, "--count", str(count), "--seed", str(seed),
           "--layout", "loose", "-q"]
    if image_size:
        cmd += ["--image-size", image_size]
    subprocess.run(cmd, check=True, timeout=300)
    if kind == "imagenet":
        files = {int(p.stem.rsplit("_", 1)[1]): p for p in scratch.rglob("*.JPEG")}
        for i in sorted(files):
            p = files[i]
            yield p.stem, {"jpg": p.read_bytes(), "cls": str(int(p.parent.name[1:])).encode()}
    else:
        for i in range(1, count + 1):
            yield f"sa_{i}", {"jpg": (scratch / f"sa_{i}.jpg").read_bytes(),
                              "features.npz": (scratch / f"sa_{i}_features.npz").read_bytes()}


def _pillow_sample(job: tuple) -> tuple[str, dict]:
    """Fallback generator (no `stoker synth`): one sample made with numpy + Pillow q90."""
    from PIL import Image

    kind, i, w, h = job
    rng = np.random.default_rng(i)
    buf = io.BytesIO()
    Image.fromarray(vision._natural_image(rng, w, h)).save(buf, format="JPEG", quality=90)
    if kind == "imagenet":
        return f"n{i % 10:08d}_{i + 1}", {"jpg": buf.getvalue(), "cls": str(i % 10).encode()}
    npz = io.BytesIO()
    np.savez(npz, embeddings=rng.standard_normal((256, 64, 64)).astype(np.float16),
             iou=rng.random(4).astype(np.float32))
    return f"sa_{i + 1}", {"jpg": buf.getvalue(), "features.npz": npz.getvalue()}


def _pillow_samples(kind: str, count: int, image_size: str | None):
    """Distinct images for the first min(count, 64) samples, then those bytes again
    (decode costs the same), made on every core."""
    from multiprocessing import Pool

    w, h = (int(x) for x in (image_size or "500x375").split("x"))
    distinct = min(count, 64)
    jobs = [(kind, i, *((h, w) if kind == "imagenet" and i % 5 == 4 else (w, h))) for i in range(distinct)]
    with Pool(os.cpu_count()) as pool:
        made = pool.map(_pillow_sample, jobs)
    for i in range(count):
        key, members = made[i % distinct]
        yield (key if i < distinct else f"{key}_r{i}"), members


def prepare(root: Path, workload: str, w: dict) -> list[str]:
    """w["shards"] tar shards of w["count"] samples (webdataset's TarWriter); reused when complete."""
    import webdataset as wds

    d = root / f"{workload}-{w['kind']}-{w['count']}-{w['image_size'] or 'default'}-{w['shards']}"
    shards = [d / f"shard-{s:06d}.tar" for s in range(w["shards"])]
    if (d / "DONE").exists() and all(p.exists() for p in shards):
        return [str(p) for p in shards]
    d.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    binary = vision.stoker_bin()
    if binary and vision._synth_works(binary):
        samples = _synth_loose(binary, w["kind"], w["count"], 0, w["image_size"], d / "loose")
        how = f"stoker synth --kind {w['kind']} --count {w['count']} --seed 0" + \
              (f" --image-size {w['image_size']}" if w["image_size"] else "")
    else:
        samples = _pillow_samples(w["kind"], w["count"], w["image_size"])
        how = "numpy + Pillow q90 (no `stoker synth` here), 64 distinct images repeated"
    it = iter(samples)
    per_shard = w["count"] // w["shards"]
    for path in shards:
        with wds.TarWriter(str(path)) as sink:
            for _ in range(per_shard):
                key, members = next(it)
                sink.write({"__key__": key, **members})
    shutil.rmtree(d / "loose", ignore_errors=True)
    (d / "DONE").write_text(how + "\n")
    print(f"  {workload}: wrote {len(shards)} shards of {per_shard} in {time.perf_counter() - t0:.1f} s: {how}",
          flush=True)
    return [str(p) for p in shards]


def jpeg_members(shards: list[str]) -> list[bytes]:
    out = []
    for path in shards:
        with tarfile.open(path) as tf:
            for m in tf:
                if m.name.endswith(".jpg"):
                    out.append(tf.extractfile(m).read())
    return out


# -- the timed paths ------------------------------------------------------------------------------

def stoker_run(run: Run, shards: list[str], fields: dict, w: dict, label: str, **options) -> dict:
    """Images/s and CPU s/image of a stoker Loader (defaults, plus `options`) over w["measure"]
    batches after w["warm"]."""
    loader = run.stoker.Loader(shards, fields, batch_size=w["batch"], shuffle=True, seed=0, device=run.device,
                               **options)
    it = common.batches_of(loader, w["warm"] + w["measure"])
    for _ in range(w["warm"]):
        b = next(it)
        del b
    run.sync()
    c0, t0 = cpu_seconds_self(), time.perf_counter()
    n = 0
    for b in it:
        n += w["batch"]
        del b
    run.sync()
    t1, c1 = time.perf_counter(), cpu_seconds_self()
    settings = loader.settings
    res = {"rate": n / (t1 - t0), "seconds": t1 - t0, "images": n, "cpu_s_per_image": (c1 - c0) / n,
           "gpu_decode_settings": settings.get("gpu_decode"),
           "gpu_decode_report": gpu_decode_stats(loader),
           "decode_threads": settings.get("decode_threads"), "prefetch": settings.get("prefetch")}
    loader.close()
    del loader, it
    gc.collect()
    print(f"    {label:<34} {res['rate']:9,.0f} images/s  CPU {res['cpu_s_per_image'] * 1e3:6.2f} ms/image  "
          f"decode_threads {res['decode_threads']}  gpu_decode {res['gpu_decode_settings']}  "
          f"report {res['gpu_decode_report']}", flush=True)
    return res


def torchvision_run(run: Run, jpegs: list, w: dict) -> dict:
    """torchvision's batched decode_jpeg on the device, then v2 RandomResizedCrop(224) +
    RandomHorizontalFlip per image (Python per image, as users write it), stacked."""
    import torchvision
    from torchvision.io import ImageReadMode, decode_jpeg
    from torchvision.transforms import v2

    torch = run.torch
    crop, flip = v2.RandomResizedCrop(224, antialias=True), v2.RandomHorizontalFlip()
    batch, n_jpegs = w["batch"], len(jpegs)
    position = 0

    def decoded():
        nonlocal position
        chunk = [jpegs[(position + k) % n_jpegs] for k in range(batch)]
        position += batch
        return decode_jpeg(chunk, mode=ImageReadMode.RGB, device=run.device)

    def one_batch():
        return torch.stack([flip(crop(x)) for x in decoded()])

    def rate_of(fn) -> float:
        for _ in range(w["warm"]):
            fn()
        run.sync()
        t0 = time.perf_counter()
        for _ in range(w["measure"]):
            fn()
        run.sync()
        return w["measure"] * batch / (time.perf_counter() - t0)

    assert one_batch().shape == (batch, 3, 224, 224)
    res = {"rate": rate_of(one_batch), "decode_only_rate": rate_of(decoded), "torchvision": torchvision.__version__}
    print(f"    {'torchvision decode_jpeg + v2':<34} {res['rate']:9,.0f} images/s   (decode_jpeg alone, "
          f"no transform, for context: {res['decode_only_rate']:,.0f} images/s)", flush=True)
    return res


def dataloader_run(run: Run, shards: list[str], w: dict) -> dict:
    """torch DataLoader over webdataset (one worker per core, pinned memory), Pillow decode +
    longest side 1024 zero padded (vision.PeerSample), each batch moved to the device.
    Three passes over the shards; the first is the warm-up (workers starting)."""
    import torch
    import webdataset as wds

    workers = job_cores()
    if run.dry:
        workers = min(workers, 2)
    passes = 3
    ds = wds.WebDataset(shards, shardshuffle=False, empty_check=False).repeat(passes).map(vision.PeerSample("S"))
    dl = torch.utils.data.DataLoader(ds, batch_size=w["batch"], num_workers=workers, pin_memory=run.cuda)
    per_pass = (w["count"] // w["batch"])
    n = i = 0
    t0 = None
    for images, feats in dl:
        images = images.to(run.device, non_blocking=True)
        feats = {k: v.to(run.device, non_blocking=True) for k, v in feats.items()}
        i += 1
        if i == per_pass:  # the first pass done: time the rest
            run.sync()
            t0 = time.perf_counter()
        elif t0 is not None:
            n += images.shape[0]
        del images, feats
    run.sync()
    t1 = time.perf_counter()
    del dl
    gc.collect()
    res = {"rate": n / (t1 - t0), "seconds": t1 - t0, "images": n, "workers": workers}
    print(f"    {f'DataLoader {workers} workers, pinned':<34} {res['rate']:9,.0f} images/s", flush=True)
    return res


# -- the parts ------------------------------------------------------------------------------------

def part_v(run: Run, root: Path) -> None:
    w = run.size("V")
    shards = prepare(root, "V", w)
    common.hot_cache(shards)
    torch = run.torch
    jpegs = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in jpeg_members(shards)]
    print(f"  V: {len(jpegs)} JPEGs, mean {np.mean([j.numel() for j in jpegs]) / 1e3:.1f} KB; batch {w['batch']}, "
          f"{w['warm']} warm-up + {w['measure']} timed batches per run", flush=True)

    def fields(decode):
        return {"jpg": run.image_field(224, "random_resized_crop", decode, random_hflip=True),
                "cls": run.stoker.scalar("int64")}

    rows = {"auto": [], "cpu": [], "torchvision": [], "dali": []}
    jpeg_bytes = [bytes(j.numpy()) for j in jpegs]
    for r in range(run.args.rounds):
        if r and run.out_of_time():
            print("  (time budget: fewer rounds)", flush=True)
            break
        print(f"   round {r}", flush=True)
        rows["auto"].append(stoker_run(run, shards, fields("auto"), w, 'stoker decode="auto"'))
        rows["cpu"].append(stoker_run(run, shards, fields("cpu"), w, 'stoker decode="cpu"'))
        try:
            rows["torchvision"].append(torchvision_run(run, jpegs, w))
        except Exception:  # noqa: BLE001 - the stoker figures stand on their own
            run.payload["errors"]["V torchvision"] = traceback.format_exc()
            print(traceback.format_exc(), flush=True)
        try:  # bench/dali_mixed.py: DALI's wheel is carried to the GPU machine (bench/README.md)
            from dali_mixed import dali_rate

            res = dali_rate(jpeg_bytes, w["batch"], w["warm"], w["measure"], device="mixed", threads=job_cores())
            assert res["shape"] == (w["batch"], 3, 224, 224), res
            print(f"    {'DALI image_random_crop(mixed)':<34} {res['rate']:9,.0f} images/s  (DALI {res['dali']}, "
                  f"{res['threads']} threads)", flush=True)
            rows["dali"].append(res)
        except Exception:  # noqa: BLE001 - DALI absent or failing: the other figures stand
            run.payload["errors"]["V DALI"] = traceback.format_exc()
            print(traceback.format_exc(), flush=True)
        run.payload["parts"]["V"] = rows
        run.save()
    rate = lambda k: [x["rate"] for x in rows[k]]  # noqa: E731
    cpu = lambda k: [x["cpu_s_per_image"] for x in rows[k]]  # noqa: E731
    med = lambda v: statistics.median(v) if v else float("nan")  # noqa: E731
    run.figure("V auto/cpu", median_ratio(rate("auto"), rate("cpu")),
               f"{med(rate('auto')):,.0f} vs {med(rate('cpu')):,.0f} images/s")
    run.figure("V auto/torchvision", median_ratio(rate("auto"), rate("torchvision")),
               f"{med(rate('auto')):,.0f} vs {med(rate('torchvision')):,.0f} images/s")
    if rows["dali"]:
        run.figure("V auto/DALI", median_ratio(rate("auto"), rate("dali")),
                   f"{med(rate('auto')):,.0f} vs {med(rate('dali')):,.0f} images/s")
    run.figure("V cpu-s/image auto/cpu", median_ratio(cpu("auto"), cpu("cpu")),
               f"{med(cpu('auto')) * 1e3:.3f} vs {med(cpu('cpu')) * 1e3:.3f} ms/image")


def part_s(run: Run, root: Path) -> None:
    w = run.size("S")
    shards = prepare(root, "S", w)
    common.hot_cache(shards)
    print(f"  S: {w['count']} samples ({w['image_size']} JPEG + NPZ) in {len(shards)} shards; batch {w['batch']}, "
          f"{w['warm']} warm-up + {w['measure']} timed batches per run", flush=True)

    def fields(decode):
        return {"jpg": run.image_field(1024, "longest", decode), "features.npz": run.stoker.npz()}

    rows = {"auto": [], "cpu": [], "dataloader": []}
    for r in range(run.args.rounds):
        if r and run.out_of_time():
            print("  (time budget: fewer rounds)", flush=True)
            break
        print(f"   round {r}", flush=True)
        rows["auto"].append(stoker_run(run, shards, fields("auto"), w, 'stoker decode="auto"'))
        rows["cpu"].append(stoker_run(run, shards, fields("cpu"), w, 'stoker decode="cpu"'))
        try:
            rows["dataloader"].append(dataloader_run(run, shards, w))
        except Exception:  # noqa: BLE001
            run.payload["errors"]["S DataLoader"] = traceback.format_exc()
            print(traceback.format_exc(), flush=True)
        run.payload["parts"]["S"] = rows
        run.save()
    rate = lambda k: [x["rate"] for x in rows[k]]  # noqa: E731
    cpu = lambda k: [x["cpu_s_per_image"] for x in rows[k]]  # noqa: E731
    med = lambda v: statistics.median(v) if v else float("nan")  # noqa: E731
    run.figure("S auto/cpu", median_ratio(rate("auto"), rate("cpu")),
               f"{med(rate('auto')):,.0f} vs {med(rate('cpu')):,.0f} images/s")
    run.figure("S auto/DataLoader", median_ratio(rate("auto"), rate("dataloader")),
               f"{med(rate('auto')):,.0f} vs {med(rate('dataloader')):,.0f} images/s")
    run.figure("S cpu-s/image auto/cpu", median_ratio(cpu("auto"), cpu("cpu")),
               f"{med(cpu('auto')) * 1e3:.2f} vs {med(cpu('cpu')) * 1e3:.2f} ms/image")


def part_stall(run: Run, root: Path) -> None:
    """S with every image on the GPU decoder and 16 batches in flight: where the stall was seen.
    --stall-runs loaders one after another in this process (as a job's epochs). A run whose
    report()["gpu_decode"] has "failed" is a stall the watchdog caught (issue 46: the hardware
    decoder is then off for the process, so the later runs decode on the CPU and do not count)."""
    w = dict(run.size("S"), measure=200)
    shards = prepare(root, "S", w)
    decode = "gpu" if run.cuda else "auto"  # --dry: the CPU path (decode="gpu" needs device="cuda")
    fields = {"jpg": run.image_field(1024, "longest", decode), "features.npz": run.stoker.npz()}
    runs, stalls = [], 0
    for k in range(run.args.stall_runs):
        res = stoker_run(run, shards, fields, w, f'run {k + 1}: stoker decode="{decode}", prefetch 16', prefetch=16)
        failed = (res.get("gpu_decode_report") or {}).get("failed")
        res["stalled"] = bool(failed)
        runs.append(res)
        run.payload["parts"]["Stall"] = {"runs": runs, "stalls": stalls + bool(failed)}
        run.save()
        if failed:
            stalls += 1
            print(f"  STALL in run {k + 1}: {failed}", flush=True)
            break  # the decoder is off for this process: the later runs would be the CPU's
    print(f"  Stall: {stalls} stall(s) in {len(runs)} run(s) of {run.args.stall_runs} "
          f"(median {statistics.median(r['rate'] for r in runs):,.0f} images/s)", flush=True)
    run.payload["parts"]["Stall"] = {"runs": runs, "stalls": stalls, "of": run.args.stall_runs}


def start_watchdog(run: Run, seconds: float) -> None:
    """After `seconds`, the stacks of a stalled run, then exit 3 (see --watchdog)."""
    import faulthandler
    import threading

    def fire():
        part = run.payload.get("current_part")
        print(f"\n==== WATCHDOG: the run has not ended after {seconds:.0f} s (in part {part}) ====", flush=True)
        run.payload["errors"]["stall"] = f"watchdog after {seconds:.0f} s, in part {part}"
        run.save()
        faulthandler.dump_traceback(all_threads=True)
        gdb = shutil.which("gdb") or shutil.which("cuda-gdb")
        if gdb:
            subprocess.run([gdb, "-batch", "-p", str(os.getpid()), "-ex", "thread apply all bt 16"],
                           timeout=60, check=False)
        else:
            print("(no gdb or cuda-gdb on the PATH: Python stacks only)", flush=True)
        sys.stdout.flush()
        os._exit(3)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def part_resnet(run: Run, root: Path) -> None:
    import torch.nn.functional as F
    import torchvision

    torch = run.torch
    w = run.size("V")
    shards = prepare(root, "V", w)
    cfg = {k: v for k, v in RESNET.items() if k != "dry"}
    if run.dry:
        cfg.update(RESNET["dry"])
    batch = cfg["batch"]
    dev = torch.device(run.device)
    torch.backends.cudnn.benchmark = True
    model = torchvision.models.resnet18(num_classes=1000).to(dev).to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    mean = torch.tensor([0.485, 0.456, 0.406], device=dev).view(1, 3, 1, 1) * 255
    std = torch.tensor([0.229, 0.224, 0.225], device=dev).view(1, 3, 1, 1) * 255

    def step(images, labels):
        x = ((images.float() - mean) / std).contiguous(memory_format=torch.channels_last)
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def fields():
        return {"jpg": run.image_field(224, "random_resized_crop", "auto", random_hflip=True),
                "cls": run.stoker.scalar("int64")}

    def fixed_batch_rate() -> float:
        loader = run.stoker.Loader(shards, fields(), batch_size=batch, shuffle=True, seed=1, device=run.device)
        b = next(iter(loader))
        images, labels = b["jpg"].clone(), b["cls"].clone()
        del b
        loader.close()
        for _ in range(cfg["warm"]):
            step(images, labels)
        run.sync()
        t0 = time.perf_counter()
        for _ in range(cfg["steps"]):
            step(images, labels)
        run.sync()
        return cfg["steps"] * batch / (time.perf_counter() - t0)

    def fed_rate() -> tuple[float, dict]:
        loader = run.stoker.Loader(shards, fields(), batch_size=batch, shuffle=True, seed=2, device=run.device)
        it = common.batches_of(loader, cfg["warm"] + cfg["steps"])
        for _ in range(cfg["warm"]):
            b = next(it)
            step(b["jpg"], b["cls"])
            del b
        run.sync()
        t0 = time.perf_counter()
        for b in it:
            step(b["jpg"], b["cls"])
            del b
        run.sync()
        rate = cfg["steps"] * batch / (time.perf_counter() - t0)
        info = {"gpu_decode_settings": loader.settings.get("gpu_decode"),
                "gpu_decode_report": gpu_decode_stats(loader),
                "decode_threads": loader.settings.get("decode_threads")}
        loader.close()
        return rate, info

    print(f"  ResNet-18 bf16 channels_last SGD, batch {batch}: {cfg['warm']} warm-up + {cfg['steps']} timed steps",
          flush=True)
    fixed, fed = [], []
    for r in range(max(2, run.args.rounds - 1)):
        if r and run.out_of_time():
            print("  (time budget: fewer rounds)", flush=True)
            break
        fixed.append(fixed_batch_rate())
        rate, info = fed_rate()
        fed.append(rate)
        print(f"   round {r}: fixed device batch {fixed[-1]:9,.0f} images/s   fed by stoker auto {rate:9,.0f} "
              f"images/s  gpu_decode {info['gpu_decode_settings']}  report {info['gpu_decode_report']}  "
              f"decode_threads {info['decode_threads']}", flush=True)
        run.payload["parts"]["ResNet-18"] = {"fixed": fixed, "fed": fed, "last_fed_info": info}
        run.save()
    run.figure("ResNet-18 fed/fixed", median_ratio(fed, fixed),
               f"{statistics.median(fed):,.0f} vs {statistics.median(fixed):,.0f} images/s")


# -- main --------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="JSON path (default bench/results/gpu_decode-<UTC>.json)")
    ap.add_argument("--dry", action="store_true", help="no GPU: tiny counts on device='cpu' (proves the script)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds per part (default 3)")
    ap.add_argument("--budget", type=float, default=200.0,
                    help="seconds after which no new round starts (each part keeps at least one)")
    ap.add_argument("--parts", default="V,S,ResNet", help="comma list of V, S, ResNet, Stall")
    ap.add_argument("--stall-runs", type=int, default=1, help="Stall part: loaders one after another (issue 46: 20)")
    ap.add_argument("--watchdog", type=float, default=0,
                    help="seconds: a run not ended by then prints its stacks and exits 3 (0: off)")
    ap.add_argument("--data", default=os.environ.get("STOKER_BENCH_DATA", "/tmp/stoker-bench/gpu_decode"))
    args = ap.parse_args(argv)
    if args.out is None:  # one file for the run, rewritten after each part
        args.out = str(common.RESULTS_DIR / f"gpu_decode-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json")

    import torch

    if not args.dry and not torch.cuda.is_available():
        print("no CUDA device here: run with --dry to prove the script on the CPU (no figure is judged)")
        return 0
    run = Run(args)
    info = common.machine_info(["stoker", "torch", "torchvision", "webdataset", "PIL", "numpy"])
    info["gpu"] = torch.cuda.get_device_name() if run.cuda else None
    run.payload["machine"] = info
    info["job_cores"] = job_cores()
    print(f"gpu_decode bench {info['utc']}: {info['gpu'] or 'no GPU (--dry)'}, os.cpu_count() {os.cpu_count()}, "
          f"job's cores {info['job_cores']} ({info['cpu_model']}), versions {info['versions']}", flush=True)
    if not run.has_decode:
        print("NOTE: this stoker's image() has no decode= keyword: every stoker row is its CPU path", flush=True)
    root = Path(args.data) / ("dry" if args.dry else "full")
    parts = {"V": part_v, "S": part_s, "ResNet": part_resnet, "Stall": part_stall}
    if args.watchdog > 0:
        start_watchdog(run, args.watchdog)
    for name in args.parts.split(","):
        name = name.strip()
        run.payload["current_part"] = name
        print(f"\n== {name} ({run.elapsed():.0f} s in) ==", flush=True)
        if run.out_of_time():
            print(f"  skipped: past the time budget of {args.budget:.0f} s", flush=True)
            run.payload["errors"][name] = "skipped: time budget"
            continue
        try:
            parts[name](run, root)
        except Exception:  # noqa: BLE001 - the other parts still run; the traceback is the finding
            run.payload["errors"][name] = traceback.format_exc()
            print(traceback.format_exc(), flush=True)
        run.save()
    print(f"\n==== targets ({run.elapsed():.0f} s) ====")
    for name, f in run.payload["figures"].items():
        r = f["ratio"]
        shown = "n/a" if r is None else f"{r['median']:.2f}x"
        print(f"  {name:<26} {shown:>8}  {f['verdict']}  (target {'>=' if f['how'] == 'ge' else '<='} "
              f"{f['target']}x)")
    missing = [n for n in TARGETS if n not in run.payload["figures"]]
    if missing:
        print(f"  not measured: {', '.join(missing)} (part not run, or it failed: see above)")
    run.save()
    print(f"JSON: {args.out}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # noqa: BLE001 - never fails: the traceback is the report
        traceback.print_exc()
        sys.exit(0)
