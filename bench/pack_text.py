"""Text in, packed sequences out (issue 48, item 6), side by side on one corpus:

    python bench/pack_text.py [--docs 20000] [--megatron-lm DIR]   # also a part of bench/tokens.py (T)

* `stoker pack-tokens --tokenizer` (stoker/pack_text.py: pyarrow reads, Hugging Face
  tokenizers' batch encode on its Rust threads, stoker's C++ writer) against
  megatron's tools/preprocess_data.py (--workers = the cores, --append-eod) on the
  same JSON lines and the same tokenizer folder: tokens/s, and whether the two
  .bin/.idx pairs are byte-identical. megatron-core's wheel does not ship tools/:
  pass --megatron-lm (or MEGATRON_LM) naming a Megatron-LM checkout at tag
  core_v0.16.1. Its megatron/training/__init__.py imports the whole training stack
  (initialize -> triton, absent on a CPU machine); the run copies tools/ and
  megatron/{training,legacy} to a temporary directory and drops those two imports
  there. The tokenizing code path of preprocess_data.py is unchanged.
* The padding of stoker.PackedLoader's first-fit / best-fit decreasing rows against
  Grain's FirstFitPackIterDataset (8 and 64 bins) on the documents just written.
The corpus: synthetic words (Zipf), documents of 20-600 words, a byte-level BPE
trained on it (bench/data/pack_text/).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402

DATA = common.BENCH_DIR / "data" / "pack_text"
SEQ_LEN = 2048


def make_corpus(docs: int) -> tuple[Path, Path]:
    """(corpus.jsonl, tokenizer folder), made once."""
    corpus, folder = DATA / f"corpus{docs}.jsonl", DATA / "tokenizer"
    if corpus.exists() and (folder / "tokenizer.json").exists():
        return corpus, folder
    DATA.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    syll = ["ka", "to", "ri", "mon", "sel", "av", "qu", "ein", "dor", "pha", "lux", "ter", "ion", "ba", "ne", "sso"]
    words = ["".join(rng.choice(syll, size=rng.integers(1, 4))) for _ in range(3000)]
    p = 1 / np.arange(1, len(words) + 1)
    p /= p.sum()
    with open(str(corpus) + ".tmp", "w") as f:
        for i in range(docs):
            text = " ".join(rng.choice(words, size=int(rng.integers(20, 600)), p=p)) + "."
            f.write(json.dumps({"id": i, "text": text}) + "\n")
    os.replace(str(corpus) + ".tmp", corpus)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator((json.loads(line)["text"] for line in open(corpus)),
                            trainers.BpeTrainer(vocab_size=8000, special_tokens=["<|endoftext|>"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(folder)
    return corpus, folder


def megatron_tools(checkout: Path, into: Path) -> Path:
    """preprocess_data.py runnable beside the installed megatron-core (see the module docstring)."""
    for part in ("tools", "megatron/training", "megatron/legacy"):
        shutil.copytree(checkout / part, into / part)
    init = into / "megatron/training/__init__.py"
    init.write_text("".join(line for line in init.read_text().splitlines(keepends=True)
                            if "initialize" not in line and "from .training import" not in line))
    return into / "tools" / "preprocess_data.py"


def run(docs: int, megatron_lm: str | None) -> dict:
    import stoker
    from stoker.pack_text import pack_text

    corpus, folder = make_corpus(docs)
    cores = len(os.sched_getaffinity(0))
    res: dict = {"corpus": {"documents": docs, "bytes": corpus.stat().st_size, "file": str(corpus)},
                 "machine": {"cores": cores, "loadavg_start": common.load_average()}}
    tmp = Path(tempfile.mkdtemp(prefix="stoker-pack-text-"))
    try:
        r = pack_text([str(corpus)], str(tmp / "stoker"), str(folder), append_eod=True, quiet=True)
        res["stoker"] = r  # in this process: the tokenizer's load included, the interpreter's start not
        res["corpus"]["tokens"] = r["tokens"]
        # As a user runs it, a process of its own: the wall clock megatron's run is held against.
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "from stoker._cli import main; main()", "pack-tokens", str(corpus),
                        "-o", str(tmp / "stoker_cli"), "--tokenizer", str(folder), "--append-eod", "-q"], check=True)
        r["wall_s"] = time.perf_counter() - t0
        r["tokens_per_s_wall"] = r["tokens"] / r["wall_s"]
        checkout = megatron_lm or os.environ.get("MEGATRON_LM")
        if checkout and (Path(checkout) / "tools" / "preprocess_data.py").exists():
            script = megatron_tools(Path(checkout), tmp / "mlm")
            t0 = time.perf_counter()
            run_ = subprocess.run([sys.executable, str(script), "--input", str(corpus), "--output-prefix",
                                   str(tmp / "megatron"), "--tokenizer-type", "HuggingFaceTokenizer",
                                   "--tokenizer-model", str(folder), "--workers", str(cores), "--append-eod"],
                                  capture_output=True, text=True, cwd=tmp / "mlm")
            seconds = time.perf_counter() - t0
            if run_.returncode != 0:
                res["megatron"] = {"error": run_.stderr[-2000:]}
            else:
                same = all((tmp / f"stoker{e}").read_bytes() == (tmp / f"megatron_text_document{e}").read_bytes()
                           for e in (".bin", ".idx"))
                # Its own clock too (its last "Processed N documents (D docs/s, ...)": no start-up).
                import re

                last = re.findall(r"Processed (\d+) documents \(([\d.]+) docs/s", run_.stdout + run_.stderr)
                own = r["tokens"] * float(last[-1][1]) / int(last[-1][0]) if last else None
                res["megatron"] = {"seconds": seconds, "tokens_per_s": r["tokens"] / seconds,
                                   "tokens_per_s_own_clock": own, "workers": cores, "identical_files": same}
                res["speedup_tokens_per_s"] = r["tokens_per_s_wall"] / res["megatron"]["tokens_per_s"]
                if own:
                    res["speedup_own_clocks"] = r["tokens_per_s"] / own
        else:
            res["megatron"] = {"error": "not run: megatron-core's wheel ships no tools/preprocess_data.py; pass "
                                        "--megatron-lm or MEGATRON_LM (a Megatron-LM checkout at core_v0.16.1)"}
        # Packing: the documents just written, rows of SEQ_LEN.
        padding = {}
        for algo in ("first_fit", "best_fit"):
            rows = stoker.PackedLoader(str(tmp / "stoker"), seq_len=SEQ_LEN, batch_size=1, algorithm=algo,
                                       truncate=True, output="numpy").rows
            padding[f"stoker_{algo}"] = rows.padding_fraction
        try:
            import grain

            data = stoker.MegatronDataset.open(str(tmp / "stoker"))
            lengths = np.minimum(data.sequence_lengths, SEQ_LEN)
            tokens = int(lengths.sum())
            for bins in (8, 64):
                # Grain packs what it is given; lengths are what padding depends on, so each
                # document is given as its length in zeros (its tokens would pack the same).
                ds = grain.MapDataset.source([{"tokens": np.zeros(n, np.int32)} for n in lengths]).to_iter_dataset()
                packed = grain.experimental.FirstFitPackIterDataset(ds, length_struct={"tokens": SEQ_LEN},
                                                                   num_packing_bins=bins, shuffle_bins=False)
                n_rows = sum(1 for _ in packed)
                padding[f"grain_first_fit_{bins}_bins"] = 1 - tokens / (n_rows * SEQ_LEN)
        except ImportError:
            padding["grain"] = "not installed (requirements-dev.txt: grain)"
        res["padding"] = padding
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["machine"]["loadavg_end"] = common.load_average()
    return res


def rows(res: dict) -> list[tuple[str, str]]:
    s, m, pad = res["stoker"], res["megatron"], res["padding"]
    out = [("pack-tokens --tokenizer: tokens/s, stoker (process wall clock)", f"{s['tokens_per_s_wall'] / 1e3:,.0f} k"),
           ("  ... by its own clock (no interpreter start-up)", f"{s['tokens_per_s'] / 1e3:,.0f} k")]
    if "error" in m:
        out.append(("pack-tokens --tokenizer: megatron preprocess_data.py", m["error"].splitlines()[-1][:160]))
    else:
        out += [(f"pack-tokens --tokenizer: tokens/s, megatron preprocess_data.py (--workers {m['workers']}, wall)",
                 f"{m['tokens_per_s'] / 1e3:,.0f} k"),
                ("  ... by its own clock (no start-up)", f"{m['tokens_per_s_own_clock'] / 1e3:,.0f} k"
                 if m.get("tokens_per_s_own_clock") else "n/a"),
                ("pack-tokens --tokenizer: speedup (process wall clocks)", f"{res['speedup_tokens_per_s']:.1f}x"),
                ("pack-tokens --tokenizer: speedup (own clocks)", f"{res['speedup_own_clocks']:.1f}x"
                 if res.get("speedup_own_clocks") else "n/a"),
                ("pack-tokens --tokenizer: files byte-identical to preprocess_data.py's", str(m["identical_files"]))]
    for k, v in pad.items():
        out.append((f"packing padding, seq_len {SEQ_LEN}: {k}", f"{v:.4f}" if isinstance(v, float) else v))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", type=int, default=20000, help="documents in the corpus (default 20000, ~40 MB)")
    ap.add_argument("--megatron-lm", default=None, help="a Megatron-LM checkout at core_v0.16.1 (or MEGATRON_LM)")
    ap.add_argument("--out", default=None, help="output stem (default bench/results/<UTC stamp>-pack-text)")
    args = ap.parse_args(argv)
    res = run(args.docs, args.megatron_lm)
    res["command"] = "python bench/pack_text.py " + " ".join(argv if argv is not None else sys.argv[1:])
    c = res["corpus"]
    md = (f"{c['documents']} documents, {c['bytes'] / 1e6:.1f} MB of JSON lines, {c.get('tokens')} tokens; "
          f"{res['machine']['cores']} cores, load average {res['machine']['loadavg_start']} -> "
          f"{res['machine']['loadavg_end']}\n\n" + common.table(["measure", "value"], rows(res), [False, True]))
    stem = Path(args.out) if args.out else common.RESULTS_DIR / (
        time.strftime("%Y-%m-%dT%H%MZ", time.gmtime()) + "-pack-text")
    stem.parent.mkdir(parents=True, exist_ok=True)
    Path(str(stem) + ".json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    Path(str(stem) + ".md").write_text(md + "\n")
    print(md)
    print(f"wrote {stem}.json, .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
