"""Workload T: Megatron token windows, stoker vs megatron-core, side by side in one process.

    bash bench/run.sh --workloads T        # or: python bench/tokens.py [--tokens 2e8]

A uint16 corpus of >= 2e8 tokens (documents of lognormal length, ids < 50k) is
written once under bench/data/tokens/ by stoker's writer (megatron-core opens it:
tests/python/test_tokens.py). On the same files, seed 1234, seq_len 2048, batch 8:
  * index build, cold: stoker's C++ build vs megatron-core's GPTDataset build
    (both with an empty cache directory; megatron's through its own builder);
  * time to first batch on a cold index (loader created + first batch);
  * steady tokens/s: stoker.TokenLoader (observer on, torch tensors) vs megatron-core's
    GPTDataset in a torch DataLoader (attention mask off, num_workers 0/1/2, best kept);
  * stoker's output bytes/s (the int64 [8, 2049] buffers it fills) vs memcpy bandwidth;
  * then bench/pack_text.py: `pack-tokens --tokenizer` tokens/s vs megatron's
    tools/preprocess_data.py (with --megatron-lm or MEGATRON_LM), and stoker.PackedLoader's
    padding vs Grain's first-fit packing.
The corpus sits in the page cache (it was just written or read): this measures the
loader, not the disk. The machine is shared: ratios are taken in one run, side by side.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

DATA = common.BENCH_DIR / "data" / "tokens"
SEQ_LEN, BATCH, SEED = 2048, 8, 1234


def make_corpus(tokens: float) -> Path:
    import stoker

    prefix = DATA / f"corpus{int(tokens / 1e6)}M"
    if Path(str(prefix) + ".idx").exists():
        return prefix
    DATA.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    writer = stoker._stoker.MegatronWriter.create(str(prefix) + ".tmp", "uint16")
    written = 0
    while written < tokens:
        lengths = np.clip(rng.lognormal(6.5, 1.0, 4096).astype(np.int64), 1, 60000)
        ids = rng.integers(1, 50000, int(lengths.sum()), dtype=np.int64)
        for doc in np.split(ids, np.cumsum(lengths)[:-1]):
            writer.add(doc)
        written += int(lengths.sum())
    writer.finish()
    for ext in (".bin", ".idx"):
        os.replace(str(prefix) + ".tmp" + ext, str(prefix) + ext)
    return prefix


class Tokenizer:
    def __init__(self) -> None:
        self.vocab_size, self.eod, self.pad = 50000, 0, -1
        self.unique_identifiers = {"class": "Tokenizer"}


def megatron_dataset(prefix: Path, num_samples: int, cache: Path):
    warnings.filterwarnings("ignore")
    import torch.distributed as dist
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29611")
        dist.init_process_group("gloo", rank=0, world_size=1)
    config = GPTDatasetConfig(
        random_seed=SEED, sequence_length=SEQ_LEN, blend=([str(prefix)], None), split="100,0,0",
        tokenizer=Tokenizer(), reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
        create_attention_mask=False, path_to_cache=str(cache), mmap_bin_files=True)
    return BlendedMegatronDatasetBuilder(GPTDataset, [num_samples, None, None], lambda: True, config).build()[0]


def rate(make_iter, batches: int, seconds: float) -> dict:
    """Steady tokens/s over up to `batches` batches or `seconds`, after 5 warm-up batches;
    a loader that runs out starts over (make_iter), the restart counted in the time."""
    it = make_iter()

    def step():
        nonlocal it
        try:
            next(it)
        except StopIteration:
            it = make_iter()
            next(it)

    for _ in range(5):
        step()
    n, t0 = 0, time.perf_counter()
    while n < batches and time.perf_counter() - t0 < seconds:
        step()
        n += 1
    dt = time.perf_counter() - t0
    return {"batches": n, "seconds": dt, "tokens_per_s": n * BATCH * SEQ_LEN / dt,
            "out_bytes_per_s": n * BATCH * (SEQ_LEN + 1) * 8 / dt}


def run(tokens: float, seconds: float) -> dict:
    import torch
    import stoker

    res: dict = {"machine": common.machine_info(["stoker", "torch", "numpy", "megatron.core"])}
    res["machine"]["loadavg_start"] = common.load_average()
    prefix = make_corpus(tokens)
    data = stoker.MegatronDataset.open(str(prefix))
    total_tokens = int(np.asarray(data.sequence_lengths, dtype=np.int64).sum())
    common.hot_cache([str(prefix) + ".bin", str(prefix) + ".idx"])
    num_samples = int(total_tokens * 1.5) // SEQ_LEN  # 1.5 epochs: the separated-final-epoch path
    res["corpus"] = {"prefix": str(prefix), "tokens": total_tokens, "documents": len(data), "dtype": data.dtype,
                     "num_samples": num_samples}
    print(f"T: corpus {total_tokens / 1e6:.0f}M tokens, {len(data)} documents; num_samples {num_samples}", flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="stoker-bench-T-"))
    try:
        # cold index + first batch, stoker
        t0 = time.perf_counter()
        loader = stoker.TokenLoader(str(prefix), seq_len=SEQ_LEN, batch_size=BATCH, seed=SEED,
                                    num_samples=num_samples, cache_dir=tmp / "stoker")
        t_index = time.perf_counter() - t0
        it = iter(loader)
        next(it)
        t_first = time.perf_counter() - t0
        t0 = time.perf_counter()
        warm = stoker.TokenLoader(str(prefix), seq_len=SEQ_LEN, batch_size=BATCH, seed=SEED,
                                  num_samples=num_samples, cache_dir=tmp / "stoker")
        next(iter(warm))
        t_first_cached = time.perf_counter() - t0
        del warm
        # cold index + first batch, megatron-core
        t0 = time.perf_counter()
        ref = megatron_dataset(prefix, num_samples, tmp / "megatron")
        m_index = time.perf_counter() - t0
        dl = torch.utils.data.DataLoader(ref, batch_size=BATCH, shuffle=False, num_workers=0)
        next(iter(dl))
        m_first = time.perf_counter() - t0
        res["index"] = {"stoker_build_s": t_index, "megatron_build_s": m_index, "speedup": m_index / t_index,
                        "stoker_first_batch_cold_s": t_first, "stoker_first_batch_cached_s": t_first_cached,
                        "megatron_first_batch_cold_s": m_first}
        print(f"T: index build stoker {t_index:.2f} s, megatron-core {m_index:.2f} s; first batch (cold index) "
              f"stoker {t_first:.2f} s, megatron-core {m_first:.2f} s", flush=True)

        # same samples? a spot check on the first batch
        first = next(iter(stoker.TokenLoader(str(prefix), seq_len=SEQ_LEN, batch_size=BATCH, seed=SEED,
                                             num_samples=num_samples, cache_dir=tmp / "stoker", observe=False)))
        ref_batch = next(iter(dl))
        res["first_batch_equal"] = bool(torch.equal(first["tokens"], ref_batch["tokens"]) and
                                        torch.equal(first["labels"], ref_batch["labels"]))

        # steady throughput, side by side
        del it

        def stoker_iter():
            loader.set_epoch(0)
            return iter(loader)

        res["stoker"] = rate(stoker_iter, 10**9, seconds)
        res["stoker"]["report_t_wait_mean_s"] = loader.report().get("t_wait", {}).get("mean")
        print(f"T: stoker {res['stoker']['tokens_per_s'] / 1e6:.1f} M tokens/s", flush=True)
        runs = {}
        for workers in (0, 1, 2):
            dl = torch.utils.data.DataLoader(ref, batch_size=BATCH, shuffle=False, num_workers=workers,
                                             persistent_workers=False, prefetch_factor=4 if workers else None)
            runs[workers] = rate(lambda: iter(dl), 10**9, seconds)
            print(f"T: megatron-core DataLoader num_workers={workers}: "
                  f"{runs[workers]['tokens_per_s'] / 1e6:.2f} M tokens/s", flush=True)
            del dl
        best = max(runs, key=lambda w: runs[w]["tokens_per_s"])
        res["megatron"] = {"runs": {str(k): v for k, v in runs.items()}, "best_num_workers": best,
                           "tokens_per_s": runs[best]["tokens_per_s"]}
        res["speedup_tokens_per_s"] = res["stoker"]["tokens_per_s"] / runs[best]["tokens_per_s"]
        mem = {}
        for threads in (1, 2):
            src = np.ones(256 << 20, np.uint8)
            dst = np.empty_like(src)
            np.copyto(dst, src)
            best_gbs = 0.0
            for _ in range(3):
                t0 = time.perf_counter()
                if threads == 1:
                    np.copyto(dst, src)
                else:
                    from concurrent.futures import ThreadPoolExecutor

                    h = src.size // 2
                    with ThreadPoolExecutor(2) as pool:
                        list(pool.map(lambda s: np.copyto(dst[s], src[s]), [slice(0, h), slice(h, None)]))
                best_gbs = max(best_gbs, src.nbytes / (time.perf_counter() - t0))
            mem[threads] = best_gbs
        res["memcpy_bytes_per_s"] = {str(k): v for k, v in mem.items()}
        res["out_vs_memcpy"] = res["stoker"]["out_bytes_per_s"] / max(mem.values())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["machine"]["loadavg_end"] = common.load_average()
    return res


def markdown(res: dict) -> str:
    i, s, m = res["index"], res["stoker"], res["megatron"]
    mem = max(res["memcpy_bytes_per_s"].values())
    rows = [
        ("tokens/s, stoker TokenLoader", f"{s['tokens_per_s'] / 1e6:.1f} M"),
        (f"tokens/s, megatron-core GPTDataset + DataLoader (best: num_workers={m['best_num_workers']})",
         f"{m['tokens_per_s'] / 1e6:.2f} M"),
        ("speedup (target >= 5x)", f"{res['speedup_tokens_per_s']:.1f}x"),
        ("stoker output bytes/s (int64 [8, 2049])", f"{s['out_bytes_per_s'] / 1e9:.2f} GB/s"),
        ("memcpy bandwidth (best of 1 and 2 threads)", f"{mem / 1e9:.2f} GB/s"),
        ("output / memcpy (target >= 0.8x)", f"{res['out_vs_memcpy']:.2f}x"),
        ("index build, stoker (C++, cold cache)", f"{i['stoker_build_s']:.2f} s"),
        ("index build, megatron-core (cold cache)", f"{i['megatron_build_s']:.2f} s"),
        ("first batch, cold index: stoker / megatron-core", f"{i['stoker_first_batch_cold_s']:.2f} s / "
                                                            f"{i['megatron_first_batch_cold_s']:.2f} s"),
        ("first batch, cached index: stoker", f"{i['stoker_first_batch_cached_s']:.3f} s"),
        ("first batch identical to megatron-core's", str(res["first_batch_equal"])),
    ]
    c = res["corpus"]
    head = (f"Workload T: {c['tokens'] / 1e6:.0f}M uint16 tokens, {c['documents']} documents, seq_len {SEQ_LEN}, "
            f"batch {BATCH}, seed {SEED}, num_samples {c['num_samples']} (1.5 epochs); load average "
            f"{res['machine']['loadavg_start']} -> {res['machine']['loadavg_end']}")
    text = res.get("pack_text")
    if text and "error" not in text:
        import pack_text

        c2 = text["corpus"]
        rows += [(f"[{c2['documents']} text documents, {c2['bytes'] / 1e6:.0f} MB JSON lines, {c2.get('tokens')} "
                  f"tokens]", "")] + pack_text.rows(text)
    elif text:
        rows.append(("pack-tokens --tokenizer / packing", text["error"]))
    return head + "\n\n" + common.table(["measure", "value"], rows, [False, True])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=float, default=2e8, help="corpus size in tokens (default 2e8)")
    ap.add_argument("--seconds", type=float, default=10.0, help="steady-state seconds per loader")
    ap.add_argument("--text-docs", type=int, default=20000, help="pack-tokens --tokenizer corpus (documents)")
    ap.add_argument("--megatron-lm", default=None, help="a Megatron-LM checkout at core_v0.16.1 for "
                    "tools/preprocess_data.py (or MEGATRON_LM); without it that row says why it did not run")
    ap.add_argument("--no-text", action="store_true", help="skip the pack-tokens --tokenizer and packing rows")
    ap.add_argument("--out", default=None, help="output stem (default bench/results/<UTC stamp>-T)")
    args = ap.parse_args(argv)
    res = run(args.tokens, args.seconds)
    if not args.no_text:
        import pack_text  # text in, packed rows out: bench/pack_text.py

        try:
            res["pack_text"] = pack_text.run(args.text_docs, args.megatron_lm)
        except ImportError as e:  # tokenizers/transformers missing: say so, keep T's rows
            res["pack_text"] = {"error": f"not run: {e}"}
    res["command"] = "bash bench/run.sh --workloads T" if argv is None else "python bench/tokens.py"
    stem = Path(args.out) if args.out else common.RESULTS_DIR / (time.strftime("%Y-%m-%dT%H%MZ", time.gmtime()) + "-T")
    stem.parent.mkdir(parents=True, exist_ok=True)
    Path(str(stem) + ".json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    md = markdown(res)
    Path(str(stem) + ".md").write_text(md + "\n")
    print("\n" + md)
    print(f"wrote {stem}.json, .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
