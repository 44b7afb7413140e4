"""TokenLoader's contracts as LLM training loops meet them (issue 48): epochs
that never repeat or come back empty silently, a state that refuses another
run, a .bin that does not match its .idx, a dataset with no sample, and the
dataset of each sample of a blend. References: megatron-core 0.16.1's
GPTDataset / BlendedDataset (order, dataset_index, dataset_id) built by its
own builder, its IndexedDatasetBuilder for the files, and megatron's
pretraining sampler written out (consecutive global batches, rank r's slice)."""
from __future__ import annotations

import inspect
import json
import logging
import subprocess

import numpy as np
import pytest
import torch

import stoker

from conftest import stoker_bin
# megatron-core's references, as test_tokens.py sets them up (its process
# group fixture too).
from test_tokens import IndexedDatasetBuilder, megatron_corpus, megatron_datasets, process_group  # noqa: F401

def megatron_dataset(prefixes, weights, seed, seq_len, num_samples, cache, split="100,0,0"):
    return megatron_datasets(prefixes, weights, seed, seq_len, num_samples, split, cache, vocab=30000)


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("token_contracts")
    for name, docs, seed in [("a", 120, 0), ("b", 80, 1), ("c", 60, 2)]:
        megatron_corpus(root / name, docs, 30000, np.uint16, seed, longest=300)
    return root


def sampler_batches(total: int, micro: int, world: int, rank: int) -> list[np.ndarray]:
    """megatron's MegatronPretrainingSampler (drop_last): rank r's slice of each global batch."""
    g = micro * world
    return [np.arange(s, s + g)[rank * micro:(rank + 1) * micro] for s in range(0, total - g + 1, g)]


def indices(batches) -> list[np.ndarray]:
    return [np.asarray(b["__index__"]).copy() for b in batches]


KW = dict(seq_len=32, seed=5, num_samples=400, output="numpy", observe=False)


def single(corpora, tmp_path, **kw):
    return stoker.TokenLoader(str(corpora / "a"), batch_size=4, cache_dir=tmp_path / "idx", **{**KW, **kw})


# -- 1. loops that run epochs --------------------------------------------------------

def test_one_epoch_run_refuses_a_second_pass_of_either_loop(corpora, tmp_path, process_group):
    ref = megatron_dataset([corpora / "a"], None, 5, 32, 400, tmp_path / "m")
    want = sampler_batches(len(ref), 4, 1, 0)
    loader = single(corpora, tmp_path)
    assert len(loader) == len(want)
    got = indices(loader)
    assert len(got) == len(want) and all(np.array_equal(a, b) for a, b in zip(got, want))
    # Lightning's loop: a new iter() for the next epoch, no set_epoch. Today: [] with no word.
    with pytest.raises(stoker.StokerError, match=r"used up.*num_samples.*epochs="):
        iter(loader)
    # HF Trainer's loop: set_epoch(1) after len() batches. Today: epoch 0 again, in the same order.
    with pytest.raises(stoker.StokerError, match=r"set_epoch\(1\).*epochs=N"):
        loader.set_epoch(1)
    # A replay is said: set_epoch(0) is epoch 0 from its start, on purpose.
    loader.set_epoch(0)
    again = indices(loader)
    assert len(again) == len(want) and all(np.array_equal(a, b) for a, b in zip(again, want))
    loader.close()


def test_epochs_cut_the_run_for_lightnings_and_hfs_loops(corpora, tmp_path, process_group):
    ref = megatron_dataset([corpora / "a"], None, 5, 32, 400, tmp_path / "m")
    want = sampler_batches(len(ref), 4, 1, 0)
    per = len(want) // 3
    epochs = [want[e * per:(e + 1) * per] for e in range(3)]
    # Lightning-style: iter() after iter(), each the next epoch of len() batches.
    lightning = single(corpora, tmp_path, epochs=3)
    assert len(lightning) == per
    for e in range(3):
        assert lightning.epoch == e
        got = indices(lightning)
        assert len(got) == per and all(np.array_equal(a, b) for a, b in zip(got, epochs[e])), e
    with pytest.raises(stoker.StokerError, match="used up"):
        iter(lightning)
    assert lightning.epoch == 3
    # HF-style: set_epoch(e), then len() batches.
    hf = single(corpora, tmp_path, epochs=3)
    for e in (0, 1, 2, 1):
        hf.set_epoch(e)
        got = [b for _, b in zip(range(len(hf)), hf)]
        assert all(np.array_equal(a, b) for a, b in zip(indices(got), epochs[e])), e
    # A break keeps the place: the next iter() is the rest of that epoch.
    hf.set_epoch(0)
    head = []
    for b in hf:
        head.append(np.asarray(b["__index__"]).copy())
        if len(head) == 2:
            break
    rest = indices(hf)
    assert all(np.array_equal(a, b) for a, b in zip(head + rest, epochs[0])) and len(head + rest) == per
    lightning.close()
    hf.close()


def test_iter_docstring_is_the_token_loaders_own():
    doc = inspect.getdoc(stoker.TokenLoader.__iter__)
    assert "advance by themselves" not in doc and "used up" in doc
    assert "len()" in inspect.getdoc(stoker.TokenLoader) and "epochs" in inspect.getdoc(stoker.TokenLoader)


def test_len_is_stable_across_load_state_dict_and_the_rest_is_delivered(corpora, tmp_path):
    first = single(corpora, tmp_path, epochs=2)
    n = len(first)
    it = iter(first)
    for _ in range(5):
        next(it)
    state = first.state_dict()
    assert state["stoker"]["consumed_samples"] == 20 and state["stoker"]["epoch"] == 0
    rest = indices(it)
    second = single(corpora, tmp_path, epochs=2)
    second.load_state_dict(state)
    assert len(second) == n  # today 263 -> 243 style: the rest, not the epoch
    for e in range(second.epoch, 2):  # HF's resume loop: set_epoch of the restored epoch keeps the resume
        second.set_epoch(e)
        got = indices(second)
        if e == 0:
            assert len(got) == n - 5 and all(np.array_equal(a, b) for a, b in zip(got, rest))
        else:
            assert len(got) == n and int(got[0][0]) == n * 4
    started = single(corpora, tmp_path, consumed_samples=20)
    assert len(started) == len(single(corpora, tmp_path))
    first.close()
    second.close()


class _Module:
    """A tiny Lightning module that records the samples of each step."""

    @staticmethod
    def make(steps):
        L = pytest.importorskip("lightning.pytorch")

        class Module(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.zeros(1))

            def training_step(self, batch, batch_idx):
                steps.append((self.current_epoch, batch["__index__"].tolist()))
                return (self.w - batch["tokens"].float().mean()).pow(2).sum()

            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.01)

        return L, Module()


def test_lightnings_trainer_takes_each_sample_once(corpora, tmp_path, process_group):
    ref = megatron_dataset([corpora / "a"], None, 5, 32, 400, tmp_path / "m")
    want = sampler_batches(len(ref), 4, 1, 0)
    steps: list = []
    L, module = _Module.make(steps)
    loader = single(corpora, tmp_path, epochs=3, output="torch")
    trainer = L.Trainer(max_epochs=3, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(module, train_dataloaders=loader)
    per = len(loader)
    assert [e for e, _ in steps] == [e for e in range(3) for _ in range(per)]
    assert [s for _, s in steps] == [w.tolist() for w in want[:3 * per]]
    # The same Trainer asked for a 4th epoch of a 3-epoch run: said, not an empty epoch.
    steps.clear()
    L, module = _Module.make(steps)
    loader = single(corpora, tmp_path, epochs=3, output="torch")
    trainer = L.Trainer(max_epochs=4, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    with pytest.raises(stoker.StokerError, match="used up"):
        trainer.fit(module, train_dataloaders=loader)
    assert len(steps) == 3 * per


def test_bad_epochs_are_refused(corpora, tmp_path):
    with pytest.raises(ValueError, match="epochs"):
        single(corpora, tmp_path, epochs=0)
    with pytest.raises(ValueError, match="exact"):
        single(corpora, tmp_path, epochs=2, partition="exact")


# -- 2. a state of another run ------------------------------------------------------------

BLEND_KW = dict(seq_len=32, seed=21, num_samples=600, output="numpy", observe=False)


def blend(corpora, tmp_path, weights, names=("a", "b", "c"), **kw):
    return stoker.TokenLoader([str(corpora / n) for n in names], weights=weights, batch_size=4,
                              cache_dir=tmp_path / "idx", **{**BLEND_KW, **kw})


def saved_state(loader, batches=11):
    it = iter(loader)
    for _ in range(batches):
        next(it)
    return loader.state_dict()


@pytest.mark.parametrize("change,words", [
    (dict(weights=[0.2, 0.3, 0.5]), ["weights: saved [0.5, 0.3, 0.2]", "reweight=True"]),
    (dict(names=("a", "c", "b")), ["dataset 1", "name='b'", "name='c'", "sequences=80"]),
    (dict(seq_len=48), ["seq_len: saved 32, this loader 48"]),
    (dict(num_samples=900), ["num_samples: saved 600, this loader 900"]),
    (dict(split="90,10,0"), ["dataset 0", "documents_in_split", "'100,0,0' vs '90,10,0'"]),
    (dict(add_extra_token=False), ["add_extra_token"]),
])
def test_a_state_of_another_run_is_refused_naming_the_difference(corpora, tmp_path, change, words):
    state = saved_state(blend(corpora, tmp_path, [0.5, 0.3, 0.2]))
    kw = dict(change)
    weights = kw.pop("weights", [0.5, 0.3, 0.2])
    other = blend(corpora, tmp_path, weights, **kw)
    with pytest.raises(stoker.StokerError) as err:
        other.load_state_dict(state)
    for w in words:
        assert w in str(err.value), str(err.value)
    assert "another run" in str(err.value)


def test_a_state_is_refused_for_another_file_of_the_same_name(corpora, tmp_path):
    megatron_corpus(tmp_path / "a", 120, 30000, np.uint16, 99, longest=300)  # another corpus named "a"
    state = saved_state(single(corpora, tmp_path))
    other = stoker.TokenLoader(str(tmp_path / "a"), batch_size=4, cache_dir=tmp_path / "idx2", **KW)
    with pytest.raises(stoker.StokerError, match=r"dataset 0: saved .*bin_bytes"):
        other.load_state_dict(state)
    # A copy of the same files elsewhere resumes (names and sizes, not paths).
    copy = tmp_path / "copy"
    copy.mkdir()
    for ext in (".bin", ".idx"):
        (copy / ("a" + ext)).write_bytes((corpora / ("a" + ext)).read_bytes())
    moved = stoker.TokenLoader(str(copy / "a"), batch_size=4, cache_dir=tmp_path / "idx3", **KW)
    moved.load_state_dict(state)
    assert moved.consumed_samples == state["stoker"]["consumed_samples"]


def test_reweight_continues_the_new_blend_from_the_resume_point(corpora, tmp_path, process_group, caplog):
    prefixes = [corpora / n for n in ("a", "b", "c")]
    state = saved_state(blend(corpora, tmp_path, [0.5, 0.3, 0.2]))
    consumed = state["stoker"]["consumed_samples"]
    new = blend(corpora, tmp_path, [0.2, 0.3, 0.5])
    with caplog.at_level(logging.WARNING, logger="stoker"):
        new.load_state_dict(state, reweight=True)
    assert "reweighted blend" in caplog.text
    ref = megatron_dataset(prefixes, [0.2, 0.3, 0.5], 21, 32, 600, tmp_path / "m")
    batches = list(new)
    idx = np.concatenate([b["__index__"] for b in batches])
    assert int(idx[0]) == consumed
    np.testing.assert_array_equal(idx, np.arange(consumed, consumed + len(idx)))
    np.testing.assert_array_equal(np.concatenate([b["dataset_id"] for b in batches]), ref.dataset_index[idx])
    for k in (0, 1, len(idx) - 1):
        np.testing.assert_array_equal(np.concatenate([b["tokens"] for b in batches])[k],
                                      ref[int(idx[k])]["tokens"].numpy())


# -- 3. files that cannot be what they say ---------------------------------------------------

def test_a_bin_of_another_dtype_is_refused_naming_both(tmp_path):
    docs = megatron_corpus(tmp_path / "u16", 30, 30000, np.uint16, 4, longest=300)
    builder = IndexedDatasetBuilder(str(tmp_path / "i32.bin"), dtype=np.int32)  # the same documents as int32
    for d in docs:
        builder.add_item(torch.from_numpy(d))
        builder.end_document()
    builder.finalize(str(tmp_path / "i32.idx"))
    (tmp_path / "u16.bin").write_bytes((tmp_path / "i32.bin").read_bytes())  # int32 .bin beside a uint16 .idx
    for opener in (lambda: stoker.MegatronDataset.open(str(tmp_path / "u16")),
                   lambda: stoker.TokenLoader(str(tmp_path / "u16"), seq_len=16, batch_size=2,
                                              cache_dir=tmp_path / "c")):
        with pytest.raises(stoker.StokerError) as err:
            opener()
        message = str(err.value)
        for w in ("u16.bin", "u16.idx", "dtype uint16", "written as int32", "Pair each .bin"):
            assert w in message, message


def test_a_dataset_with_no_sample_at_seq_len_is_refused(tmp_path, process_group):
    megatron_corpus(tmp_path / "small", 3, 1000, np.uint16, 5, longest=12)
    ref = megatron_dataset([tmp_path / "small"], None, 1, 64, None, tmp_path / "m")
    assert len(ref) == 0  # megatron's own GPTDataset: empty, and a loader over it ends at once
    with pytest.raises(stoker.StokerError, match=r"small: no sample at seq_len 64.*num_samples"):
        stoker.TokenLoader(str(tmp_path / "small"), seq_len=64, batch_size=2, cache_dir=tmp_path / "c")
    # Samples, but not one global batch of them: no batch is said, not 0 of them.
    megatron_corpus(tmp_path / "few", 10, 1000, np.uint16, 6, longest=20)
    few = megatron_dataset([tmp_path / "few"], None, 1, 16, None, tmp_path / "m")
    assert 0 < len(few) < 64
    with pytest.raises(stoker.StokerError, match=r"fewer than one global batch of 64 \(batch_size 32 x world_size 2"):
        stoker.TokenLoader(str(tmp_path / "few"), seq_len=16, batch_size=32, rank=0, world_size=2,
                           cache_dir=tmp_path / "c")


@pytest.mark.parametrize("docs,words", [([], "no documents"), ([[], np.zeros(0, np.int64)], "2 documents, all empty")])
def test_writing_nothing_is_refused_where_it_happens(tmp_path, docs, words):
    with pytest.raises(ValueError, match=words) as err:
        stoker.write_megatron(tmp_path / "empty", docs)
    assert "empty" in str(err.value)
    with pytest.raises(ValueError, match=words):
        w = stoker._stoker.MegatronWriter.create(str(tmp_path / "raw"), "uint16")
        for d in docs:
            w.add(np.asarray(d, dtype=np.int64))
        w.finish()
    assert not list(tmp_path.glob("*.idx")) and not list(tmp_path.glob("*.bin"))


def _binary():
    binary = stoker_bin()
    if binary is None:
        pytest.fail("no stoker binary: set STOKER_BIN")
    return binary


def test_pack_tokens_of_nothing_fails_naming_the_output(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    run = subprocess.run([_binary(), "pack-tokens", tmp_path / "empty.jsonl", "-o", tmp_path / "out", "-q"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    assert "out" in run.stderr and "no documents" in run.stderr, run.stderr
    assert not (tmp_path / "out.idx").exists() and not (tmp_path / "out.bin").exists()


# -- 4. a blend's datasets, seen ------------------------------------------------------------------

@pytest.mark.parametrize("world", [1, 2])
def test_blend_batches_carry_megatrons_dataset_id(corpora, tmp_path, process_group, world):
    prefixes = [corpora / n for n in ("a", "b", "c")]
    ref = megatron_dataset(prefixes, [0.5, 0.3, 0.2], 21, 32, 600, tmp_path / "m")
    seen = []
    for rank in range(world):
        loader = blend(corpora, tmp_path, [0.5, 0.3, 0.2], rank=rank, world_size=world, output="torch")
        for b, want in zip(loader, sampler_batches(len(ref), 4, world, rank)):
            np.testing.assert_array_equal(b["__index__"].numpy(), want)
            assert b["dataset_id"].dtype == torch.int64
            np.testing.assert_array_equal(b["dataset_id"].numpy(), ref.dataset_index[want])
            seen.extend(zip(want.tolist(), b["dataset_id"].tolist()))
    for i, d in seen[::37]:
        assert ref[i]["dataset_id"] == d  # the sample as BlendedDataset hands it out
    assert sorted(seen)[-1][0] < len(ref)


def test_per_dataset_counts_in_state_report_and_datasets(corpora, tmp_path, process_group):
    prefixes = [corpora / n for n in ("a", "b", "c")]
    ref = megatron_dataset(prefixes, [0.5, 0.3, 0.2], 21, 32, 600, tmp_path / "m")
    loader = blend(corpora, tmp_path, [0.5, 0.3, 0.2], observe=True)
    state = saved_state(loader, 13)
    consumed = state["stoker"]["consumed_samples"]
    want = np.bincount(ref.dataset_index[:consumed], minlength=3).tolist()
    assert state["stoker"]["dataset_consumed"] == want
    report = loader.report()
    assert [d["consumed"] for d in report["datasets"]] == want
    assert [d["path"] for d in loader.datasets] == [str(p) for p in prefixes]
    np.testing.assert_allclose([d["weight"] for d in loader.datasets], [0.5, 0.3, 0.2])
    assert loader.plan.num_shards == 3  # the blend reads three .bin files
    json.dumps(state)  # a state stays JSON
    # A single dataset: no dataset_id (GPTDataset has none); its count is the position.
    plain = single(corpora, tmp_path)
    batch = next(iter(plain))
    assert "dataset_id" not in batch
    assert plain.plan.num_shards == 1
    assert plain.state_dict()["stoker"]["dataset_consumed"] == [4]
    plain.close()
    loader.close()
