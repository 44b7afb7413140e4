#!/usr/bin/env python3
"""map= benchmark (issue 43): V with the user's own per-sample function, stoker
vs torch DataLoader + webdataset running the same function, side by side.

Data: V-like shards (500x375 JPEG q90, 20% portrait, an int label) plus a
caption per sample (`txt`), written once with webdataset's TarWriter under
bench/data/. Both loaders decode the JPEG to a 224 center crop (stoker in
C++; the peer with Pillow, antialiased, as bench/vision.py's peer), then run
one of two maps on each sample:

  realistic  random flip + brightness jitter + normalize of the 224 crop in
             numpy (float32 CHW), and the caption tokenized by a real BPE
             tokenizer from PyPI (`tokenizers`, trained here on the captions:
             no download), padded to 32 ids; rng from the sample
  python     about 50 us of pure Python (a loop) on the label: what a map
             that never releases the GIL costs

stoker runs the map on its decode threads (map=fn(sample, rng)); the peer
runs it in each DataLoader worker after its decode (num_workers over
{1, 2, 3}; the best is compared). Rounds alternate the configurations; the
median of --reps rounds after a discarded warm-up is reported, ratios as
medians of per-round ratios of the steady rates (first batch to last, as
bench/vision.py); the whole epoch's rate, start-up included, is beside them.
Exits 0 whatever the speed.

    bash bench/run.sh --map            # ~4 min on 2 cores
    bash bench/run.sh --map --quick    # smaller, ~1 min
"""
from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import vision  # noqa: E402

SIZE, BATCH, SHARDS, TOKENS = 224, 64, 6, 32
WORDS = ("a photo of the small large red green dog cat bird car tree house river mountain person "
         "on in under near with two three old new bright dark street field beach").split()
MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1)
STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1)


def prepare(root: Path, count: int) -> list[Path]:
    """V-like samples with a caption each, in SHARDS shards (once; reused)."""
    import webdataset as wds

    d = root / f"map-{count}"
    shards = [d / f"shard-{s:06d}.tar" for s in range(SHARDS)]
    if (d / "DONE").exists() and all(p.exists() for p in shards):
        return shards
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    it = vision._python_samples("imagenet", count, seed=0)
    for path in shards:
        with wds.TarWriter(str(path)) as sink:
            for _ in range(count // SHARDS):
                key, members = next(it)
                caption = " ".join(rng.choice(WORDS, size=int(rng.integers(6, 20))))
                sink.write({"__key__": key, **members, "txt": caption.encode()})
    (d / "DONE").write_text("vision._python_samples + captions\n")
    return shards


def make_tokenizer(shards: list[Path]):
    """A BPE tokenizer trained on the captions with `tokenizers` (Hugging Face's Rust library)."""
    import tarfile

    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    captions = []
    for p in shards:
        with tarfile.open(p) as tar:
            captions += [tar.extractfile(m).read().decode() for m in tar.getmembers() if m.name.endswith(".txt")]
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(captions, trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]", "[PAD]"]))
    tok.enable_padding(length=TOKENS, pad_id=tok.token_to_id("[PAD]"))
    tok.enable_truncation(TOKENS)
    return tok


class Realistic:
    """The realistic map, one object for both loaders (picklable for DataLoader workers)."""

    def __init__(self, tokenizer_json: str) -> None:
        self.tokenizer_json = tokenizer_json
        self._tok = None

    def __call__(self, sample: dict, rng: np.random.Generator) -> dict:
        if self._tok is None:
            from tokenizers import Tokenizer

            self._tok = Tokenizer.from_str(self.tokenizer_json)
        img = sample["jpg"]  # CHW uint8 224x224
        if rng.random() < 0.5:
            img = img[:, :, ::-1]
        x = img.astype(np.float32)
        x *= np.float32(rng.uniform(0.8, 1.2) / 255.0)
        x -= MEAN
        x /= STD
        ids = np.asarray(self._tok.encode(sample["txt"]).ids, np.int64)
        return {"jpg": x, "tokens": ids, "cls": sample["cls"]}


def pure_python(sample: dict, rng: np.random.Generator) -> dict:
    total = 0
    for i in range(1200):  # ~50 us of Python on this machine (measured by main())
        total += i ^ 3
    return {"jpg": sample["jpg"], "cls": np.int64(int(sample["cls"]) + (total & 0))}


class PeerSample:
    """A DataLoader worker's sample: Pillow 224 center crop (CHW), then the map with the sample's own rng."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def __call__(self, sample: dict):
        import torch

        chw = np.ascontiguousarray(vision.pil_center_crop(sample["jpg"], SIZE).transpose(2, 0, 1))
        seed = int.from_bytes(sample["__key__"].encode()[-8:].rjust(8, b"\0"), "little")
        out = self.fn({"jpg": chw, "cls": np.int64(int(sample["cls"])), "txt": sample["txt"].decode()},
                      np.random.default_rng(seed))
        return {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in out.items()}


def stoker_factory(shards, fn, threads):
    import stoker

    fields = {"jpg": stoker.image(SIZE, resize="center_crop"), "cls": stoker.scalar("int64"), "txt": stoker.text()}

    def make():
        return stoker.Loader([str(p) for p in shards], fields=fields, batch_size=BATCH, map=fn,
                             decode_threads=threads, output="torch", observe=False)
    return make


def peer_factory(shards, fn, workers):
    import torch
    import webdataset as wds

    def make():
        ds = wds.WebDataset([str(p) for p in shards], shardshuffle=False, empty_check=False).map(PeerSample(fn))
        return torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=workers)
    return make


def epoch_rates(make) -> tuple[float, float]:
    """(steady, whole): samples/s from the first batch to the last, and over
    the whole epoch with the loader's start (DataLoader: worker start-up)."""
    t0 = time.perf_counter()
    n = n_first = 0
    t_first = None
    loader = make()
    for batch in loader:
        n += batch["jpg"].shape[0]
        if t_first is None:
            t_first, n_first = time.perf_counter(), n
    t_last = time.perf_counter()
    if hasattr(loader, "close"):
        loader.close()
    return (n - n_first) / (t_last - t_first), n / (t_last - t0)


def python_map_us() -> float:
    sample = {"jpg": np.zeros((3, SIZE, SIZE), np.uint8), "cls": np.int64(1)}
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for _ in range(2000):
        pure_python(sample, rng)
    return (time.perf_counter() - t0) / 2000 * 1e6


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", message="This DataLoader will create")  # w=3 on 2 cores is on purpose
    count = 768 if args.quick else 1536
    reps = args.reps or (2 if args.quick else 3)
    cores = len(os.sched_getaffinity(0))
    shards = prepare(Path(__file__).resolve().parent / "data", count)
    tok = make_tokenizer(shards)
    maps = {"realistic": Realistic(tok.to_str()), "python": pure_python}
    configs = []
    for name, fn in maps.items():
        configs.append((name, "stoker", stoker_factory(shards, fn, cores)))
        for w in (1, 2, 3):
            configs.append((name, f"dataloader w={w}", peer_factory(shards, fn, w)))
    rates: dict[tuple[str, str], list[float]] = {}  # steady samples/s per round
    whole: dict[tuple[str, str], list[float]] = {}  # over the whole epoch, start-up included
    for r in range(reps + 1):  # round 0: warm-up, discarded
        for name, who, make in configs:
            steady, all_in = epoch_rates(make)
            if r > 0:
                rates.setdefault((name, who), []).append(steady)
                whole.setdefault((name, who), []).append(all_in)
        print(f"  round {r}/{reps} done", flush=True)
    rows, result = [], {"machine": common.machine_info(["torch", "webdataset", "tokenizers", "numpy"]),
                        "samples": count, "cores": cores, "python_map_us": python_map_us(),
                        "load_average": common.load_average(), "maps": {}}
    for name in maps:
        best = max((w for n, w in rates if n == name and w != "stoker"),
                   key=lambda w: statistics.median(rates[(name, w)]))
        ratios = [s / p for s, p in zip(rates[(name, "stoker")], rates[(name, best)])]
        result["maps"][name] = {"best_peer": best, "ratio_median": statistics.median(ratios),
                                "steady": {w: rates[(name, w)] for n, w in rates if n == name},
                                "whole_epoch": {w: whole[(name, w)] for n, w in whole if n == name}}
        for n, w in rates:
            if n == name:
                rows.append([name, w, f"{statistics.median(rates[(n, w)]):.0f}",
                             f"{statistics.median(whole[(n, w)]):.0f}"])
        rows.append([name, f"stoker / {best}", f"{statistics.median(ratios):.2f}x", ""])
    text = (f"map= bench: {count} V samples (224 center crop + caption), batch {BATCH}, {cores} cores, "
            f"{reps} rounds; python map {result['python_map_us']:.0f} us/sample alone; load average "
            f"{result['load_average']} (others' work on this machine)\n" +
            common.table(["map", "loader", "samples/s steady (median)", "whole epoch"], rows))
    print(text)
    out = common.write_json("map", result, args.out)
    out.with_suffix(".md").write_text(text + "\n")
    print(f"wrote {out} and {out.with_suffix('.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
