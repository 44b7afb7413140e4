"""Token datasets against megatron-core 0.16.1 itself: its IndexedDatasetBuilder
writes the corpora, its IndexedDataset reads what stoker writes, and its
GPTDataset / BlendedDataset (built by its own BlendedMegatronDatasetBuilder on
a one-rank gloo group) are the reference for every sample stoker delivers."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import stoker

warnings.filterwarnings("ignore")
from megatron.core.datasets import helpers_cpp  # noqa: E402,F401  (setup installs the compiled helpers)
from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder  # noqa: E402
from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig  # noqa: E402
from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


class Tokenizer:
    """What GPTDataset asks of a tokenizer."""

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self.eod = 0
        self.pad = -1
        self.unique_identifiers = {"class": "Tokenizer", "vocab_size": vocab_size}


def megatron_corpus(prefix: Path, docs: int, vocab: int, dtype, seed: int, longest: int = 400) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    builder = IndexedDatasetBuilder(str(prefix) + ".bin", dtype=dtype)
    out = []
    for _ in range(docs):
        doc = rng.integers(0, vocab, size=int(rng.integers(1, longest)))
        out.append(doc)
        builder.add_item(torch.from_numpy(doc))
        builder.end_document()
    builder.finalize(str(prefix) + ".idx")
    return out


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokens")
    made = {}
    for name, docs, vocab, dtype, seed in [("u16", 300, 50000, np.uint16, 0), ("i32", 120, 200000, np.int32, 1),
                                           ("b1", 150, 30000, np.uint16, 2), ("b2", 90, 30000, np.uint16, 3)]:
        made[name] = (root / name, megatron_corpus(root / name, docs, vocab, dtype, seed))
    return root, made


@pytest.fixture(scope="module")
def process_group():
    import torch.distributed as dist

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
        dist.init_process_group("gloo", rank=0, world_size=1)
        yield
        dist.destroy_process_group()
    else:
        yield


def megatron_datasets(prefixes, weights, seed, seq_len, num_samples, split, cache, vocab=50000):
    config = GPTDatasetConfig(
        random_seed=seed, sequence_length=seq_len, blend=([str(p) for p in prefixes], weights), split=split,
        tokenizer=Tokenizer(vocab), reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
        create_attention_mask=False, path_to_cache=str(cache), mmap_bin_files=True)
    sizes = [num_samples, None, None] if weights is None else [num_samples, 0, 0]
    return BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True, config).build()[0]


def stoker_samples(paths, **kw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    loader = stoker.TokenLoader(paths, batch_size=8, output="numpy", observe=False, **kw)
    tokens, labels, index = [], [], []
    for batch in loader:
        tokens.append(np.array(batch["tokens"]))
        labels.append(np.array(batch["labels"]))
        index.append(np.array(batch["__index__"]))
    return np.concatenate(tokens), np.concatenate(labels), np.concatenate(index)


# -- reader and writer --------------------------------------------------------

@pytest.mark.parametrize("name", ["u16", "i32"])
def test_reads_megatron_written_files(corpora, name):
    prefix, docs = corpora[1][name]
    data = stoker.MegatronDataset.open(str(prefix))
    ref = IndexedDataset(str(prefix))
    assert data.dtype == {"u16": "uint16", "i32": "int32"}[name]
    assert len(data) == len(docs)
    np.testing.assert_array_equal(data.sequence_lengths, ref.sequence_lengths)
    np.testing.assert_array_equal(data.sequence_pointers, ref.index.sequence_pointers)
    np.testing.assert_array_equal(data.document_indices, ref.document_indices)
    for i, doc in enumerate(docs):
        np.testing.assert_array_equal(data.get(i), doc)


def test_megatron_reads_what_stoker_writes(tmp_path):
    rng = np.random.default_rng(5)
    for vocab, dtype in [(1000, "uint16"), (100000, "int32")]:
        docs = [rng.integers(0, vocab, size=int(rng.integers(0, 50))) for _ in range(40)]
        prefix = tmp_path / f"w{vocab}"
        assert stoker.write_megatron(prefix, docs) == dtype
        ref = IndexedDataset(str(prefix))
        assert ref.index.dtype == np.dtype(dtype)
        assert len(ref) == len(docs)
        for i, doc in enumerate(docs):
            np.testing.assert_array_equal(ref[i], doc)


def _binary():
    for candidate in (os.environ.get("STOKER_BIN"), shutil.which("stoker"), REPO / "build" / "cli" / "stoker"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return str(Path(stoker.__file__).parent / "bin" / "stoker")


def test_pack_tokens_cli_and_inspect(tmp_path):
    rng = np.random.default_rng(6)
    docs = [rng.integers(0, 70000, size=int(rng.integers(1, 30))) for _ in range(12)]
    np.save(tmp_path / "a.npy", docs[0].astype(np.int32))
    np.save(tmp_path / "b.npy", docs[1].astype(np.int64))
    with open(tmp_path / "c.jsonl", "w") as f:
        for i, d in enumerate(docs[2:]):
            f.write(json.dumps({"tokens": d.tolist()} if i % 2 else d.tolist()) + "\n")
    out = tmp_path / "packed"
    subprocess.run([_binary(), "pack-tokens", tmp_path / "a.npy", tmp_path / "b.npy", tmp_path / "c.jsonl",
                    "-o", out, "-q"], check=True, timeout=60)
    ref = IndexedDataset(str(out))
    assert ref.index.dtype == np.int32  # ids above 65499 need int32
    assert len(ref) == len(docs)
    for i, doc in enumerate(docs):
        np.testing.assert_array_equal(ref[i], doc)
    info = json.loads(subprocess.run([_binary(), "inspect", f"{out}.idx", "--json"], check=True,
                                     capture_output=True, text=True, timeout=60).stdout)
    assert info["documents"] == len(docs) and info["tokens"] == sum(map(len, docs)) and info["dtype"] == "int32"


@pytest.mark.parametrize("damage,words", [
    (lambda idx, binp: idx.write_bytes(b"XX" + idx.read_bytes()[2:]), ["a.idx", "magic", "offset 0"]),
    (lambda idx, binp: idx.write_bytes(idx.read_bytes()[:9] + b"\x02" + idx.read_bytes()[10:]),
     ["version", "offset 9"]),
    (lambda idx, binp: idx.write_bytes(idx.read_bytes()[:17] + b"\x63" + idx.read_bytes()[18:]),
     ["dtype", "offset 17", "unknown dtype code 99"]),
    (lambda idx, binp: idx.write_bytes(idx.read_bytes()[:-3]), ["truncated", "document_indices"]),
    (lambda idx, binp: binp.write_bytes(binp.read_bytes()[:10]), ["sequence_pointers", "past the end", "a.bin"]),
])
def test_corrupt_pairs_are_refused_with_file_field_offset(tmp_path, damage, words):
    stoker.write_megatron(tmp_path / "a", [np.arange(10), np.arange(20)])
    damage(tmp_path / "a.idx", tmp_path / "a.bin")
    with pytest.raises(stoker.StokerError) as err:
        stoker.MegatronDataset.open(str(tmp_path / "a"))
    for w in words:
        assert w in str(err.value), str(err.value)
    with pytest.raises(stoker.StokerError):
        stoker.TokenLoader(str(tmp_path / "a"), seq_len=4, batch_size=2)


# -- indices and samples --------------------------------------------------------

@pytest.mark.parametrize("n,seed", [(1, 0), (2, 3), (10, 0), (1000, 42), (65537, 1234), (100003, 2**32 - 1)])
def test_shuffle_is_numpys(n, seed):
    a = np.arange(n)
    np.random.RandomState(seed).shuffle(a)
    np.testing.assert_array_equal(stoker._stoker.numpy_shuffled_arange(n, seed), a)


@pytest.mark.parametrize("seed,seq_len,num_samples,split", [
    (1234, 64, 500, "969,30,1"),      # within one epoch
    (7, 128, 1500, "100,0,0"),        # 3 epochs, final epoch separated (< 80% of one)
    (99, 32, 5000, "98,2,0"),         # 3 epochs, final epoch shuffled with the rest
    (5, 2048, 60, "100,0,0"),         # long windows: many documents per sample, many epochs
])
def test_samples_equal_gptdataset(corpora, process_group, tmp_path, seed, seq_len, num_samples, split):
    prefix, _ = corpora[1]["u16"]
    ref = megatron_datasets([prefix], None, seed, seq_len, num_samples, split, tmp_path / "mcache")
    tokens, labels, index = stoker_samples(str(prefix), seq_len=seq_len, seed=seed, num_samples=num_samples,
                                           split=split, cache_dir=tmp_path / "scache")
    assert len(tokens) == len(ref) // 8 * 8 and len(tokens) >= num_samples // 8 * 8
    np.testing.assert_array_equal(index, np.arange(len(tokens)))
    for i in range(len(tokens)):
        sample = ref[i]
        np.testing.assert_array_equal(tokens[i], sample["tokens"].numpy(), err_msg=f"sample {i}")
        np.testing.assert_array_equal(labels[i], sample["labels"].numpy(), err_msg=f"sample {i}")
    # The indices themselves, as megatron cached them.
    indexed = IndexedDataset(str(prefix))  # held: its __del__ unmaps what sequence_lengths views
    doc, smp, shf = stoker._stoker.gpt_indices(
        np.array(indexed.sequence_lengths), *stoker._stoker.split_range(split, 0, 300), seq_len, num_samples, seed)
    np.testing.assert_array_equal(doc, ref.document_index)
    np.testing.assert_array_equal(smp, ref.sample_index)
    np.testing.assert_array_equal(shf, ref.shuffle_index)
    assert list((tmp_path / "scache").glob("*-gpt.idx.bin"))  # built once, cached


def test_int32_corpus_equals_gptdataset(corpora, process_group, tmp_path):
    prefix, _ = corpora[1]["i32"]
    ref = megatron_datasets([prefix], None, 11, 100, 700, "100,0,0", tmp_path / "mcache")
    tokens, labels, _ = stoker_samples(str(prefix), seq_len=100, seed=11, num_samples=700,
                                       cache_dir=tmp_path / "scache")
    for i in range(len(tokens)):
        np.testing.assert_array_equal(tokens[i], ref[i]["tokens"].numpy())
        np.testing.assert_array_equal(labels[i], ref[i]["labels"].numpy())


def test_blend_of_three_equals_blendeddataset(corpora, process_group, tmp_path):
    prefixes = [corpora[1][n][0] for n in ("u16", "b1", "b2")]
    weights = [0.5, 0.3, 0.2]
    ref = megatron_datasets(prefixes, weights, 21, 64, 1200, "100,0,0", tmp_path / "mcache")
    assert type(ref).__name__ == "BlendedDataset"
    tokens, labels, _ = stoker_samples([str(p) for p in prefixes], weights=weights, seq_len=64, seed=21,
                                       num_samples=1200, cache_dir=tmp_path / "scache")
    assert len(tokens) == len(ref) // 8 * 8
    di, dsi = stoker._stoker.blending_indices(stoker._stoker.blend_sizes(weights, 1200)[0], len(ref))
    np.testing.assert_array_equal(di, ref.dataset_index)
    np.testing.assert_array_equal(dsi, ref.dataset_sample_index)
    for i in range(len(tokens)):
        sample = ref[i]
        np.testing.assert_array_equal(tokens[i], sample["tokens"].numpy(), err_msg=f"sample {i}")
        np.testing.assert_array_equal(labels[i], sample["labels"].numpy(), err_msg=f"sample {i}")


# -- batches, ranks, resumption ---------------------------------------------------

def test_ranks_follow_megatrons_pretraining_sampler(corpora, tmp_path):
    prefix, _ = corpora[1]["u16"]
    kw = dict(seq_len=64, seed=3, num_samples=400, cache_dir=tmp_path / "c")
    _, _, whole = stoker_samples(str(prefix), **kw)
    total = len(stoker.TokenLoader(str(prefix), batch_size=1, output="numpy", observe=False, **kw))
    mbs, world = 4, 3
    for rank in range(world):
        loader = stoker.TokenLoader(str(prefix), batch_size=mbs, rank=rank, world_size=world, output="numpy",
                                    observe=False, **kw)
        got = [np.array(b["__index__"]) for b in loader]
        # MegatronPretrainingSampler: batches of mbs*world consecutive indices, rank r's slice of each.
        # Written out here because the class is Megatron-LM's (megatron/training/datasets/data_samplers.py),
        # not megatron-core's: the 0.16.1 wheel has no sampler, and Megatron-LM is not on PyPI.
        want = [np.arange(g, g + mbs * world)[rank * mbs:(rank + 1) * mbs]
                for g in range(0, total - mbs * world + 1, mbs * world)]
        assert len(got) == len(want) == len(loader)
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    assert whole.shape[0] == total // 8 * 8


def test_batch_shapes_extras_and_observer(corpora, tmp_path):
    prefix, _ = corpora[1]["u16"]
    loader = stoker.TokenLoader(str(prefix), seq_len=64, batch_size=4, seed=1, num_samples=100,
                                extras=("loss_mask", "position_ids"), cache_dir=tmp_path / "c")
    batch = next(iter(loader))
    assert batch["tokens"].dtype == torch.int64 and batch["tokens"].shape == (4, 64)
    assert batch["labels"].shape == (4, 64)
    assert torch.equal(batch["tokens"][:, 1:], batch["labels"][:, :-1])
    assert batch["loss_mask"].shape == (4, 64) and bool((batch["loss_mask"] == 1).all())
    assert torch.equal(batch["position_ids"][0], torch.arange(64))
    for _ in loader:
        pass
    report = loader.report()
    assert report["totals"]["batches"] == len(loader)


def test_resume_from_consumed_samples_in_a_new_process(corpora, tmp_path):
    prefix, _ = corpora[1]["u16"]
    kw = dict(seq_len=64, seed=9, num_samples=600, cache_dir=str(tmp_path / "c"))
    loader = stoker.TokenLoader(str(prefix), batch_size=4, output="numpy", observe=False, **kw)
    it = iter(loader)
    for _ in range(5):
        next(it)
    state = loader.state_dict()
    assert state["stoker"]["consumed_samples"] == 20 == loader.consumed_samples
    rest = [np.array(b["tokens"]) for b in it]
    code = (
        "import json, sys, numpy as np, stoker\n"
        f"kw = {kw!r}\n"
        f"a = stoker.TokenLoader({str(prefix)!r}, batch_size=4, output='numpy', observe=False,"
        " consumed_samples=20, **kw)\n"
        f"b = stoker.TokenLoader({str(prefix)!r}, batch_size=4, output='numpy', observe=False, **kw)\n"
        f"b.load_state_dict({state!r})\n"
        "xs = [np.array(t['tokens']) for t in a]; ys = [np.array(t['tokens']) for t in b]\n"
        "np.save(sys.argv[1], np.stack(xs)); np.save(sys.argv[2], np.stack(ys))\n"
    )
    subprocess.run([sys.executable, "-c", code, tmp_path / "a.npy", tmp_path / "b.npy"], check=True, timeout=120)
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), np.stack(rest))
    np.testing.assert_array_equal(np.load(tmp_path / "b.npy"), np.stack(rest))
