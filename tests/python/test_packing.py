"""Packed SFT rows (issue 48, item 6): the C++ plan against first-fit and
best-fit decreasing written here in plain Python; every row's tokens,
labels, position ids, segment ids, cu_seqlens and prompt loss mask against
megatron-core's IndexedDataset reading the same files; ranks disjoint and
equal to one process; resume exact; another run's state refused; padding
against Grain's FirstFitPackIterDataset on the same documents."""
from __future__ import annotations

import numpy as np
import pytest

import stoker

from test_tokens import IndexedDataset, megatron_corpus

SEQ = 64


@pytest.fixture(scope="module")
def sft(tmp_path_factory):
    root = tmp_path_factory.mktemp("packing")
    docs = megatron_corpus(root / "sft", 300, 1000, np.uint16, 11, longest=SEQ)
    rng = np.random.default_rng(4)
    prompts = np.array([rng.integers(0, len(d) + 1) for d in docs], dtype=np.int64)
    return root / "sft", docs, prompts


def first_fit_decreasing(lengths, seq_len):
    """The textbook algorithm, by scanning: longest first (ties by index), each into the first row with room."""
    rows, room = [], []
    for d in sorted(range(len(lengths)), key=lambda d: (-lengths[d], d)):
        if lengths[d] == 0:
            continue
        for r in range(len(rows)):
            if room[r] >= lengths[d]:
                rows[r].append(d)
                room[r] -= lengths[d]
                break
        else:
            rows.append([d])
            room.append(seq_len - lengths[d])
    return rows


def best_fit_decreasing(lengths, seq_len):
    rows, room = [], []
    for d in sorted(range(len(lengths)), key=lambda d: (-lengths[d], d)):
        if lengths[d] == 0:
            continue
        fits = [(room[r], r) for r in range(len(rows)) if room[r] >= lengths[d]]
        if fits:
            r = min(fits)[1]
            rows[r].append(d)
            room[r] -= lengths[d]
        else:
            rows.append([d])
            room.append(seq_len - lengths[d])
    return rows


def csr(offsets, documents):
    return [documents[offsets[r]:offsets[r + 1]].tolist() for r in range(len(offsets) - 1)]


@pytest.mark.parametrize("algorithm,reference", [("first_fit", first_fit_decreasing),
                                                 ("best_fit", best_fit_decreasing)])
def test_plan_is_the_textbook_algorithm(algorithm, reference):
    rng = np.random.default_rng(0)
    for n, seq in [(1, 8), (50, 16), (400, 100), (300, 2048)]:
        lengths = rng.integers(0, seq + 1, size=n).astype(np.int64)
        offsets, documents = stoker.plan_packing(lengths, seq, algorithm)
        assert csr(offsets, documents) == reference(lengths.tolist(), seq)
    with pytest.raises(ValueError, match="document 1 holds 9 tokens.*truncate"):
        stoker.plan_packing(np.array([3, 9], dtype=np.int64), 8)
    offsets, documents = stoker.plan_packing(np.array([3, 9], dtype=np.int64), 8, truncate=True)
    assert csr(offsets, documents) == [[1], [0]]
    with pytest.raises(ValueError, match="first_fit or best_fit"):
        stoker.plan_packing(np.array([3], dtype=np.int64), 8, "next_fit")


@pytest.mark.parametrize("algorithm", ["first_fit", "best_fit"])
def test_rows_hold_megatrons_documents_with_their_positions_and_prompt_mask(sft, algorithm):
    prefix, docs, prompts = sft
    ref = IndexedDataset(str(prefix))
    loader = stoker.PackedLoader(prefix, seq_len=SEQ, batch_size=8, algorithm=algorithm, prompt_lengths=prompts,
                                 shuffle=False, output="numpy", pad_id=7)
    placed = []
    for batch in loader:
        flat_bounds = [0]
        for r in range(8):
            row_docs = batch["documents"][batch["document_offsets"][r]:batch["document_offsets"][r + 1]]
            at = 0
            for seg, d in enumerate(row_docs, 1):
                tokens = np.asarray(ref[int(d)], dtype=np.int64)
                n = len(tokens)
                s = slice(at, at + n)
                np.testing.assert_array_equal(batch["tokens"][r, s], tokens)
                np.testing.assert_array_equal(batch["position_ids"][r, s], np.arange(n))
                assert (batch["segment_ids"][r, s] == seg).all()
                np.testing.assert_array_equal(batch["labels"][r, at:at + n - 1], tokens[1:])
                assert batch["labels"][r, at + n - 1] == 0  # no next token in this document
                # The loss is on predicting response tokens: label t is token t + 1, trained when t + 1 >= prompt.
                want = np.array([1.0 if t + 1 >= prompts[d] and t + 1 < n else 0.0 for t in range(n)])
                np.testing.assert_array_equal(batch["loss_mask"][r, s], want)
                at += n
                flat_bounds.append(r * SEQ + at)
            assert (batch["tokens"][r, at:] == 7).all() and (batch["loss_mask"][r, at:] == 0).all()
            assert (batch["segment_ids"][r, at:] == 0).all()
            if at < SEQ:
                flat_bounds.append((r + 1) * SEQ)  # the padding tail is a segment of its own
            placed.extend(int(d) for d in row_docs)
        np.testing.assert_array_equal(batch["cu_seqlens"], flat_bounds)
        assert batch["cu_seqlens"].dtype == np.int32
        assert batch["max_seqlen"] == max(np.diff(flat_bounds))
    # Every document once, in whole batches' rows (the partial last global batch dropped).
    covered = set(loader.rows.documents[:loader.rows.row_offsets[len(loader) * 8]].tolist())
    assert sorted(placed) == sorted(covered) and len(placed) == len(set(placed))
    lengths = np.array([len(d) for d in docs])
    assert loader.padding_fraction == pytest.approx(1 - lengths.sum() / (loader.rows.num_rows * SEQ))


def test_ranks_split_each_global_batch_and_resume_is_exact(sft):
    prefix, _, prompts = sft
    kw = dict(seq_len=SEQ, batch_size=3, prompt_lengths=prompts, seed=9, output="numpy")
    one = [b["tokens"].copy() for b in stoker.PackedLoader(prefix, **{**kw, "batch_size": 6})]
    ranks = [[b["tokens"].copy() for b in stoker.PackedLoader(prefix, rank=r, world_size=2, **kw)] for r in (0, 1)]
    assert len(ranks[0]) == len(ranks[1]) == len(one)
    for whole, a, b in zip(one, *ranks):
        np.testing.assert_array_equal(whole, np.concatenate([a, b]))
    # Epoch 1 is another order of the same rows.
    loader = stoker.PackedLoader(prefix, **kw)
    first = [b["tokens"].copy() for b in loader]
    second = [b["tokens"].copy() for b in loader]
    assert loader.epoch == 1 and len(second) == len(first)
    assert not all(np.array_equal(a, b) for a, b in zip(first, second))
    # Stop mid-epoch 1, resume in a new loader: the same batches.
    loader = stoker.PackedLoader(prefix, **kw)
    list(loader)
    it = iter(loader)
    for _ in range(5):
        next(it)
    state = loader.state_dict()
    again = stoker.PackedLoader(prefix, **kw)
    again.load_state_dict(state)
    rest = [b["tokens"].copy() for b in again]
    assert len(rest) == len(second) - 5
    for a, b in zip(rest, second[5:]):
        np.testing.assert_array_equal(a, b)
    # Another run's state: refused, naming what differs.
    other = stoker.PackedLoader(prefix, **{**kw, "algorithm": "best_fit"})
    with pytest.raises(stoker.StokerError, match="algorithm: saved 'first_fit'"):
        other.load_state_dict(state)
    other = stoker.PackedLoader(prefix, **{**kw, "prompt_lengths": prompts * 0})
    with pytest.raises(stoker.StokerError, match="prompts"):
        other.load_state_dict(state)


def test_bad_prompts_and_too_few_rows_are_refused(sft):
    prefix, docs, prompts = sft
    with pytest.raises(ValueError, match="prompt lengths for 300 documents"):
        stoker.PackedLoader(prefix, seq_len=SEQ, batch_size=2, prompt_lengths=prompts[:-1])
    bad = prompts.copy()
    bad[3] = len(docs[3]) + 1
    with pytest.raises(ValueError, match="document 3: prompt length"):
        stoker.PackedLoader(prefix, seq_len=SEQ, batch_size=2, prompt_lengths=bad)
    with pytest.raises(stoker.StokerError, match="fewer than one global batch"):
        stoker.PackedLoader(prefix, seq_len=SEQ, batch_size=10_000)
    with pytest.raises(ValueError, match="more than a row"):
        stoker.PackedLoader(prefix, seq_len=8, batch_size=2)


def test_padding_against_grains_first_fit(sft, capsys):
    grain = pytest.importorskip("grain", reason="grain is not installed (requirements-dev.txt)")
    prefix, docs, _ = sft
    rows = stoker.PackedLoader(prefix, seq_len=SEQ, batch_size=1, output="numpy").rows
    best = stoker.PackedLoader(prefix, seq_len=SEQ, batch_size=1, algorithm="best_fit", output="numpy").rows
    tokens = sum(len(d) for d in docs)
    results = {}
    for bins in (8, 64):
        ds = grain.MapDataset.source([{"tokens": d.astype(np.int32)} for d in docs]).to_iter_dataset()
        packed = grain.experimental.FirstFitPackIterDataset(ds, length_struct={"tokens": SEQ},
                                                           num_packing_bins=bins, shuffle_bins=False)
        out = [p for p in packed]
        # Grain marks each row's documents by segment ids (0 = padding): the same tokens, packed.
        assert sum(int((p["tokens_segment_ids"] > 0).sum()) for p in out) == tokens
        results[bins] = 1 - tokens / (len(out) * SEQ)
    with capsys.disabled():
        print(f"\npadding fraction, {len(docs)} documents into rows of {SEQ}: stoker first-fit decreasing "
              f"{rows.padding_fraction:.4f}, best-fit decreasing {best.padding_fraction:.4f}; grain "
              f"FirstFitPackIterDataset 8 bins {results[8]:.4f}, 64 bins {results[64]:.4f}")
    assert rows.padding_fraction <= min(results.values())
    assert best.padding_fraction <= min(results.values())


def test_hf_output_trains_the_prompt_mask_under_the_models_own_shift(sft):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (requirements-dev.txt)")
    import torch

    prefix, _, prompts = sft
    kw = dict(seq_len=SEQ, batch_size=4, prompt_lengths=prompts, seed=2)
    hf = stoker.PackedLoader(prefix, output="hf", **kw)
    mega = stoker.PackedLoader(prefix, output="torch", **kw)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=1000, n_positions=SEQ, n_embd=32, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0,
        loss_type="ForCausalLM"))
    for _, b, m in zip(range(3), hf, mega):
        assert set(b) == {"input_ids", "labels", "position_ids", "attention_mask"}
        torch.testing.assert_close(b["input_ids"], m["tokens"])
        out = model(**b)
        # The reference: megatron's labels and loss_mask, over the model's logits unshifted.
        logits = out.logits.reshape(-1, 1000)
        mask = m["loss_mask"].reshape(-1) > 0
        manual = torch.nn.functional.cross_entropy(logits[mask], m["labels"].reshape(-1)[mask])
        torch.testing.assert_close(out.loss, manual)
        assert (b["attention_mask"] == (m["segment_ids"] > 0)).all()
