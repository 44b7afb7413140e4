"""`stoker pack-tokens --tokenizer` (issue 48, item 6): text from JSON lines and
Parquet into a Megatron pair. References: a BPE trained here with Hugging
Face's tokenizers, each document encoded on its own (no batching), and
megatron-core's IndexedDataset reading the files; a transformers tokenizer
folder gives the same files as its tokenizer.json. (The byte comparison with
megatron's tools/preprocess_data.py, which megatron-core's wheel does not
ship, is in bench/pack_text.py.)"""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from test_tokens import IndexedDataset

tokenizers = pytest.importorskip("tokenizers", reason="tokenizers is not installed (requirements-dev.txt)")


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    root = tmp_path_factory.mktemp("pack_text")
    rng = np.random.default_rng(3)
    words = ["token", "loader", "Ünïcode", "😀", "megatron", "stoker", "a", "the", "\"q\"", "\\n", "x" * 30]
    docs = [" ".join(rng.choice(words, size=int(rng.integers(0, 60)))) for _ in range(700)]
    docs[5] = ""  # an empty document stays a document
    docs[6] = "line one\nline two\ttab"
    with open(root / "a.jsonl", "w") as f:
        for i, d in enumerate(docs[:400]):
            f.write(json.dumps({"id": i, "text": d}) + "\n")
            if i == 10:
                f.write("\n")  # a blank line is no document
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"body": docs[400:]}), root / "b.parquet", row_group_size=64)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(docs, trainers.BpeTrainer(vocab_size=400, special_tokens=["<|endoftext|>"],
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(root / "tokenizer.json"))
    return root, docs, tok


def stoker_cli(*args):
    # The `stoker` console script's entry: it routes --tokenizer to stoker/pack_text.py.
    return subprocess.run([sys.executable, "-c", "from stoker._cli import main; main()", *args],
                          capture_output=True, text=True, timeout=300)


def test_jsonl_and_parquet_text_become_megatron_documents(text, tmp_path):
    root, docs, tok = text
    eod = tok.token_to_id("<|endoftext|>")
    for name, inputs, want in [("j", [root / "a.jsonl"], docs[:400]), ("p", [root / "b.parquet"], docs[400:])]:
        key = ["--key", "body"] if name == "p" else []
        run = stoker_cli("pack-tokens", *map(str, inputs), "-o", str(tmp_path / name), "--tokenizer",
                         str(root / "tokenizer.json"), "--append-eod", *key)
        assert run.returncode == 0, run.stderr
        assert f"{len(want)} documents" in run.stdout and "tokens/s" in run.stdout
        assert "pack-tokens 100.0%" in run.stderr  # the progress line's last state
        ref = IndexedDataset(str(tmp_path / name))
        assert len(ref) == len(want)
        assert ref.index.dtype == np.uint16
        for i, d in enumerate(want):
            np.testing.assert_array_equal(ref[i], tok.encode(d, add_special_tokens=False).ids + [eod])
    # Both inputs in one run: the documents end to end, without EOD when not asked.
    run = stoker_cli("pack-tokens", str(root / "a.jsonl"), "-o", str(tmp_path / "n"), "--tokenizer",
                     str(root / "tokenizer.json"), "-q")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "" and run.stderr == ""
    ref = IndexedDataset(str(tmp_path / "n"))
    assert ref[6].tolist() == tok.encode(docs[6], add_special_tokens=False).ids


def test_a_transformers_folder_gives_the_same_files(text, tmp_path):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (requirements-dev.txt)")
    root, _, tok = text
    folder = tmp_path / "hf"
    transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(folder)
    for src, out in [(root / "tokenizer.json", "file"), (folder, "folder")]:
        run = stoker_cli("pack-tokens", str(root / "a.jsonl"), "-o", str(tmp_path / out), "--tokenizer", str(src),
                         "--append-eod", "-q")
        assert run.returncode == 0, run.stderr
    for ext in (".bin", ".idx"):
        assert (tmp_path / ("file" + ext)).read_bytes() == (tmp_path / ("folder" + ext)).read_bytes()


def test_bad_text_inputs_are_named(text, tmp_path):
    root, _, _ = text
    tok = str(root / "tokenizer.json")
    run = stoker_cli("pack-tokens", str(root / "a.jsonl"), "-o", str(tmp_path / "x"), "--tokenizer", tok,
                     "--key", "body")
    assert run.returncode == 1 and "a.jsonl" in run.stderr and "no field 'body'" in run.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"text": \n')
    run = stoker_cli("pack-tokens", str(bad), "-o", str(tmp_path / "x"), "--tokenizer", tok)
    assert run.returncode == 1 and "bad.jsonl" in run.stderr and "not JSON lines" in run.stderr
    run = stoker_cli("pack-tokens", str(root / "b.parquet"), "-o", str(tmp_path / "x"), "--tokenizer", tok)
    assert run.returncode == 1 and "no column 'text'" in run.stderr
    run = stoker_cli("pack-tokens", str(root / "a.jsonl"), "-o", str(tmp_path / "x"), "--tokenizer",
                     str(tmp_path / "nowhere"))
    assert run.returncode == 1 and "nowhere" in run.stderr


def test_sft_text_gives_documents_and_prompt_lengths_for_packing(text, tmp_path):
    import stoker

    root, docs, tok = text
    eod = tok.token_to_id("<|endoftext|>")
    pairs = [(docs[i], docs[i + 1]) for i in range(0, 200, 2)]
    with open(tmp_path / "sft.jsonl", "w") as f:
        for p, r in pairs:
            f.write(json.dumps({"prompt": p, "response": r}) + "\n")
    run = stoker_cli("pack-tokens", str(tmp_path / "sft.jsonl"), "-o", str(tmp_path / "sft"), "--tokenizer",
                     str(root / "tokenizer.json"), "--prompt-key", "prompt", "--key", "response", "--append-eod", "-q")
    assert run.returncode == 0, run.stderr
    ref = IndexedDataset(str(tmp_path / "sft"))
    prompts = np.load(tmp_path / "sft.prompts.npy")
    assert prompts.dtype == np.int64 and len(prompts) == len(ref) == len(pairs)
    for i, (p, r) in enumerate(pairs):
        asked = tok.encode(p, add_special_tokens=False).ids
        # Each part tokenized on its own: the boundary is where the prompt ends.
        assert ref[i].tolist() == asked + tok.encode(r, add_special_tokens=False).ids + [eod]
        assert prompts[i] == len(asked)
    loader = stoker.PackedLoader(tmp_path / "sft", seq_len=256, batch_size=2, prompt_lengths=prompts,
                                 truncate=True, output="numpy")
    assert len(loader) > 0 and next(iter(loader))["loss_mask"].sum() > 0
