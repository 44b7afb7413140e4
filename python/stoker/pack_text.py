"""`stoker pack-tokens --tokenizer PATH`: text (JSON lines or Parquet) into a
Megatron ``.bin``/``.idx`` pair, tokenized by a Hugging Face tokenizer.

Why this runs in Python and not in the C++ command: the tokenizers people
train and ship (``tokenizer.json``, a transformers tokenizer folder) are Hugging
Face's ``tokenizers``, a Rust library with no C or C++ API. Re-implementing
its pre-tokenizers, normalizers and BPE/Unigram/WordPiece models in C++ would
be a second tokenizer that must agree with the first id for id. So the
pieces that carry the work run where they are native and release the GIL:

- reading: pyarrow's JSON-lines reader and Parquet reader (C++, threads);
- tokenizing: ``Tokenizer.encode_batch_fast`` (Rust, its own thread pool over
  each batch of documents);
- writing: stoker's C++ ``MegatronWriter`` (``add_documents``: one call per
  batch), the writer the C++ command uses, so the files are the same bytes.

Reading the next batch overlaps tokenizing this one (a reader thread). A
transformers folder without ``tokenizer.json`` (a "slow" Python tokenizer)
is tokenized by ``AutoTokenizer`` in the same batches, at Python speed.
"""
from __future__ import annotations

import argparse
import itertools
import os
import queue
import sys
import threading
import time
from typing import Iterator, Sequence

from . import _stoker

_BATCH_DOCS = 2048
_BLOCK_BYTES = 16 << 20


def load_tokenizer(path: str):
    """(encode(list[str]) -> list[list[int]], vocab size, eod id or None)."""
    file = path if os.path.isfile(path) else os.path.join(path, "tokenizer.json")
    if os.path.isfile(file):
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(file)
        eod = _eod_of(tok)

        def encode(texts):
            return [e.ids for e in tok.encode_batch_fast(texts, add_special_tokens=False)]

        return encode, tok.get_vocab_size(with_added_tokens=True), eod
    if not os.path.isdir(path):
        raise FileNotFoundError(f"--tokenizer {path}: neither a tokenizers JSON file nor a folder")
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)

    def encode(texts):
        return tok(texts, add_special_tokens=False)["input_ids"]

    return encode, len(tok), tok.eos_token_id


def _eod_of(tok) -> int | None:
    for name in ("<|endoftext|>", "</s>", "<eos>", "[SEP]", "<|end_of_text|>"):
        i = tok.token_to_id(name)
        if i is not None:
            return i
    return None


def _texts(path: str, keys: Sequence[str]) -> Iterator[tuple[list[list[str]], int]]:
    """Batches of texts from one input (a list per key) and the input bytes they came from."""
    if path.endswith(".parquet"):
        import pyarrow.parquet as pq

        f = pq.ParquetFile(path)
        for key in keys:
            if key not in f.schema_arrow.names:
                raise ValueError(f"{path}: no column '{key}' (columns: {f.schema_arrow.names}); pass --key")
        size = os.path.getsize(path)
        rows = max(1, f.metadata.num_rows)
        for batch in f.iter_batches(batch_size=_BATCH_DOCS, columns=list(keys)):
            yield [batch.column(k).to_pylist() for k in keys], size * batch.num_rows // rows
        return
    import pyarrow as pa
    import pyarrow.json as pj

    # Blocks of whole lines, each parsed by pyarrow's C++ JSON reader (on its
    # threads): a large file streams, and the bytes done are exact.
    opts = pj.ReadOptions(block_size=64 << 20, use_threads=True)
    with open(path, "rb") as f:
        carry = b""
        while True:
            block = f.read(_BLOCK_BYTES)
            data = carry + block
            if not block:
                cut = len(data)
            else:
                cut = data.rfind(b"\n") + 1
                if cut == 0:
                    carry = data
                    continue
            chunk, carry = data[:cut], data[cut:]
            if chunk.strip():
                try:
                    table = pj.read_json(pa.BufferReader(chunk), read_options=opts)
                except pa.ArrowInvalid as e:
                    raise ValueError(f"{path}: near byte {f.tell() - len(data)}: not JSON lines: {e}") from None
                for key in keys:
                    if key not in table.column_names:
                        raise ValueError(f"{path}: the JSON lines have no field '{key}' (fields: "
                                         f"{table.column_names}); pass --key")
                columns = [table.column(k).to_pylist() for k in keys]
                n = len(columns[0])
                for i in range(0, n, _BATCH_DOCS):
                    part = [c[i:i + _BATCH_DOCS] for c in columns]
                    yield part, len(chunk) * len(part[0]) // n
            if not block:
                return


class _Progress:
    """One rewritten line on a terminal (else a line per 10 s) to stderr."""

    def __init__(self, total_bytes: int, quiet: bool) -> None:
        self.total, self.quiet = total_bytes, quiet
        self.tty = sys.stderr.isatty()
        self.start = self.last = time.perf_counter()
        self.bytes = self.docs = self.tokens = 0

    def add(self, docs: int, tokens: int, nbytes: int) -> None:
        self.docs += docs
        self.tokens += tokens
        self.bytes += nbytes
        now = time.perf_counter()
        if not self.quiet and now - self.last >= (0.5 if self.tty else 10.0):
            self.last = now
            self._print(False)

    def _print(self, final: bool) -> None:
        s = max(1e-9, time.perf_counter() - self.start)
        pct = f"{100 * min(self.bytes, self.total) / self.total:5.1f}% " if self.total else ""
        line = (f"pack-tokens {pct}{self.docs} documents, {self.tokens} tokens, {self.tokens / s:,.0f} tokens/s, "
                f"{self.bytes / s / 1e6:.1f} MB/s")
        sys.stderr.write(("\r" + line + ("\n" if final else "")) if self.tty else line + "\n")
        sys.stderr.flush()

    def finish(self) -> None:
        if not self.quiet:
            self._print(True)


def pack_text(inputs: Sequence[str], output: str, tokenizer: str, key: str = "text", append_eod: bool = False,
              quiet: bool = True, prompt_key: str | None = None) -> dict:
    """Tokenizes every input's texts and writes ``output.bin``/``.idx``;
    returns the counts and the tokens/s. With ``prompt_key`` (SFT data) a
    document is the prompt's ids then the response's (``key``), each
    tokenized on its own so the boundary is exact, and ``output.prompts.npy``
    holds each document's prompt length (int64): ``PackedLoader``'s
    ``prompt_lengths``."""
    import numpy as np

    for p in inputs:
        if not os.path.isfile(p):
            raise FileNotFoundError(f"{p}: no such input")
        if not p.endswith((".jsonl", ".json", ".parquet")):
            raise ValueError(f"{p}: --tokenizer reads text from .jsonl/.json or .parquet files")
    encode, vocab, eod = load_tokenizer(tokenizer)
    if append_eod and eod is None:
        raise ValueError(f"--append-eod: the tokenizer {tokenizer} has no end-of-document token "
                         f"(<|endoftext|>, </s>, <eos>, [SEP]) to append")
    dtype = "uint16" if vocab < 65500 else "int32"  # megatron's DType.optimal_dtype
    writer = _stoker.MegatronWriter.create(output, dtype)
    progress = _Progress(sum(os.path.getsize(p) for p in inputs), quiet)
    start = time.perf_counter()

    # A reader thread keeps the next batch of texts ready (pyarrow releases the GIL).
    ready: queue.Queue = queue.Queue(maxsize=2)

    def read() -> None:
        try:
            for p in inputs:
                for item in _texts(p, keys):
                    ready.put(item)
        except BaseException as e:  # handed to the writer's thread, raised there
            ready.put(e)
        ready.put(None)

    keys = [key] if prompt_key is None else [prompt_key, key]
    prompts: list = []
    threading.Thread(target=read, daemon=True, name="stoker-pack-text").start()
    docs = 0
    while True:
        item = ready.get()
        if item is None:
            break
        if isinstance(item, BaseException):
            raise item
        columns, nbytes = item
        for k, texts in zip(keys, columns):
            if any(t is None for t in texts):
                raise ValueError(f"document {docs + [t is None for t in texts].index(True)}: '{k}' is null")
        ids = encode(columns[-1])
        if prompt_key is not None:
            asked = encode(columns[0])
            prompts.append(np.fromiter(map(len, asked), dtype=np.int64, count=len(asked)))
            ids = list(map(list.__add__, asked, ids))
        if append_eod:
            ids = [d + [eod] for d in ids]
        # map/chain iterate in C: no Python-level loop over tokens.
        lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
        flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
        writer.add_documents(flat, lengths)
        docs += len(ids)
        progress.add(len(ids), int(lengths.sum()), nbytes)
    writer.finish()
    if prompt_key is not None:
        np.save(output + ".prompts.npy", np.concatenate(prompts) if prompts else np.zeros(0, np.int64))
    progress.finish()
    seconds = time.perf_counter() - start
    return {"documents": docs, "tokens": progress.tokens, "dtype": dtype, "seconds": seconds,
            "tokens_per_s": progress.tokens / max(seconds, 1e-9)}


def main(argv: Sequence[str]) -> int:
    ap = argparse.ArgumentParser(prog="stoker pack-tokens", description="Tokenize text (JSON lines, Parquet) into "
                                 "a Megatron .bin/.idx pair with a Hugging Face tokenizer")
    ap.add_argument("inputs", nargs="+", metavar="INPUT")
    ap.add_argument("-o", "--output", required=True, help="output prefix (PREFIX.bin, PREFIX.idx)")
    ap.add_argument("--tokenizer", required=True, help="a tokenizers JSON file or a transformers tokenizer folder")
    ap.add_argument("--key", default="text", help="the JSON field or Parquet column holding the text")
    ap.add_argument("--prompt-key", default=None, help="SFT: the field or column of each document's prompt; "
                    "the document is prompt + response (--key), and PREFIX.prompts.npy gets the prompt lengths")
    ap.add_argument("--append-eod", action="store_true", help="end each document with the end-of-document token")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress, no summary")
    a = ap.parse_args(list(argv))
    try:
        r = pack_text(a.inputs, a.output, a.tokenizer, a.key, a.append_eod, a.quiet, a.prompt_key)
    except (ValueError, FileNotFoundError, _stoker.StokerError) as e:
        print(f"stoker pack-tokens: {e}", file=sys.stderr)
        return 1
    if not a.quiet:
        print(f"{a.output}.{{bin,idx}}: {r['documents']} documents, {r['tokens']} tokens, {r['dtype']}, "
              f"{r['seconds']:.2f} s ({r['tokens_per_s']:,.0f} tokens/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
