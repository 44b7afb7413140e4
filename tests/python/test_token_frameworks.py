"""TokenLoader(output="hf") in the loops LLM teams run (issue 48, item 5): a
real ``transformers.Trainer`` trains a tiny GPT-2 from the loader with no
batch adapter, Lightning's Trainer and a plain loop do the same, and the
labels are checked against the model's own shift: the loss the model
computes equals a cross-entropy written here over its logits shifted by one
against megatron's labels. The batches' ids are megatron-core's GPTDataset
samples in its pretraining sampler's order (test_tokens' reference set-up);
under torchrun, each rank's are its slice of every global batch and DDP keeps
the two models equal."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import stoker

from conftest import stoker_env

from test_token_contracts import sampler_batches
from test_tokens import megatron_corpus, megatron_datasets, process_group  # noqa: F401

transformers = pytest.importorskip("transformers", reason="transformers is not installed (requirements-dev.txt)")

VOCAB = 256
SEQ = 32


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("token_frameworks")
    megatron_corpus(root / "t", 150, VOCAB, np.uint16, 7, longest=200)
    return root / "t"


@pytest.fixture(autouse=True)
def one_torch_thread():
    """A model this small runs fastest on one thread (the loader has its own)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def loader(corpus, tmp_path, **kw):
    args = dict(seq_len=SEQ, batch_size=4, seed=3, num_samples=160, output="hf", observe=False,
                cache_dir=tmp_path / "idx")
    return stoker.TokenLoader(str(corpus), **{**args, **kw})


def tiny_gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=SEQ, n_embd=32, n_layer=1, n_head=2,
                                     bos_token_id=0, eos_token_id=0, loss_type="ForCausalLM")
    return transformers.GPT2LMHeadModel(config)


def test_hf_batches_are_megatrons_tokens_unshifted(corpus, tmp_path, process_group):
    ref = megatron_datasets([corpus], None, 3, SEQ, 160, "100,0,0", tmp_path / "m", vocab=VOCAB)
    hf = loader(corpus, tmp_path)
    mega = loader(corpus, tmp_path, output="torch")
    for b, m, want in zip(hf, mega, sampler_batches(len(ref), 4, 1, 0)):
        assert set(b) == {"input_ids", "labels"}  # model(**batch) takes every key
        np.testing.assert_array_equal(hf.last_index.numpy(), want)
        tokens = np.stack([ref[int(i)]["tokens"].numpy() for i in want])
        labels = np.stack([ref[int(i)]["labels"].numpy() for i in want])
        np.testing.assert_array_equal(b["input_ids"].numpy(), tokens)
        np.testing.assert_array_equal(b["labels"].numpy(), tokens)  # unshifted: the model shifts
        # HF's shift of labels is megatron's labels, less the last position's target.
        np.testing.assert_array_equal(b["labels"][:, 1:].numpy(), labels[:, :-1])
        np.testing.assert_array_equal(m["labels"].numpy(), labels)
        assert b["labels"].data_ptr() != b["input_ids"].data_ptr()  # -100 edits leave input_ids alone
    with_pos = loader(corpus, tmp_path, extras=("position_ids",))
    b = next(iter(with_pos))
    assert set(b) == {"input_ids", "labels", "position_ids"}
    np.testing.assert_array_equal(b["position_ids"].numpy(), np.tile(np.arange(SEQ), (4, 1)))
    with pytest.raises(ValueError, match="loss_mask"):
        loader(corpus, tmp_path, extras=("loss_mask",))


def test_the_models_loss_is_megatrons_labels_under_its_own_shift(corpus, tmp_path):
    model = tiny_gpt2()
    mega = iter(loader(corpus, tmp_path, output="torch", num_samples=24))
    for batch in loader(corpus, tmp_path, num_samples=24):
        m = next(mega)
        out = model(**batch)
        # The reference: logits at t against megatron's label at t (the next
        # token), over the positions HF's convention carries (all but the last).
        manual = torch.nn.functional.cross_entropy(out.logits[:, :-1].reshape(-1, VOCAB),
                                                   m["labels"][:, :-1].reshape(-1))
        torch.testing.assert_close(out.loss, manual)
        # The obvious wrong mapping (megatron's labels as HF labels) trains two ahead: a different loss.
        two_ahead = model(input_ids=m["tokens"], labels=m["labels"]).loss
        assert not torch.isclose(two_ahead, out.loss)


def test_a_real_transformers_trainer_trains_from_the_loader(corpus, tmp_path, process_group):
    ref = megatron_datasets([corpus], None, 3, SEQ, 160, "100,0,0", tmp_path / "m", vocab=VOCAB)
    want = sampler_batches(len(ref), 4, 1, 0)
    data = loader(corpus, tmp_path)
    seen, losses = [], []

    class Trainer(transformers.Trainer):
        def get_train_dataloader(self):  # Trainer's documented hook for a loader of its own
            return data

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            seen.append(data.last_index.tolist())
            # The batch reaches the model as the loader made it: megatron's tokens, unshifted.
            np.testing.assert_array_equal(inputs["input_ids"].numpy(),
                                          np.stack([ref[i]["tokens"].numpy() for i in seen[-1]]))
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            losses.append(float(loss.detach()))
            return loss

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"), max_steps=6, per_device_train_batch_size=4, learning_rate=5e-3,
        use_cpu=True, report_to="none", save_strategy="no", logging_strategy="no", disable_tqdm=True)
    model = tiny_gpt2()
    before = [p.detach().clone() for p in model.parameters()]
    trainer = Trainer(model=model, args=args, train_dataset=[0])  # a placeholder: the loader feeds it
    result = trainer.train()
    assert result.global_step == 6
    assert seen == [w.tolist() for w in want[:6]]
    assert len(losses) == 6 and all(np.isfinite(losses))
    assert all(not torch.equal(a, b) for a, b in zip(before, model.parameters()))  # it trained


def test_lightning_and_a_plain_loop_train_from_the_loader(corpus, tmp_path):
    L = pytest.importorskip("lightning.pytorch", reason="lightning is not installed (requirements-dev.txt)")
    steps: list = []

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = tiny_gpt2()

        def training_step(self, batch, batch_idx):
            out = self.model(**batch)
            steps.append((batch["input_ids"].clone(), float(out.loss.detach())))
            return out.loss

        def configure_optimizers(self):
            return torch.optim.AdamW(self.parameters(), lr=5e-3)

    data = loader(corpus, tmp_path, num_samples=40)
    trainer = L.Trainer(max_epochs=1, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(Module(), train_dataloaders=data)
    assert len(steps) == len(data)

    # A plain loop over the same loader's batches: the same inputs, and the
    # same losses step for step (same model init, same optimizer).
    model = tiny_gpt2()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    plain = []
    for batch in loader(corpus, tmp_path, num_samples=40):
        loss = model(**batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        plain.append((batch["input_ids"].clone(), float(loss.detach())))
    assert len(plain) == len(steps)
    for (a, la), (b, lb) in zip(steps, plain):
        torch.testing.assert_close(a, b)
        assert la == pytest.approx(lb, rel=1e-4)


RANK_SCRIPT = textwrap.dedent("""
    import json, sys
    import torch, torch.distributed as dist, transformers
    import stoker

    prefix, cache, out = sys.argv[1:4]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(transformers.GPT2LMHeadModel(transformers.GPT2Config(
        vocab_size=%d, n_positions=%d, n_embd=32, n_layer=1, n_head=2, bos_token_id=0, eos_token_id=0,
        loss_type="ForCausalLM")))
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3)
    # rank and world_size from torchrun's environment
    loader = stoker.TokenLoader(prefix, seq_len=%d, batch_size=4, seed=3, num_samples=160, output="hf",
                                observe=False, cache_dir=cache)
    seen = []
    for step, batch in zip(range(4), loader):
        loss = model(**batch).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen.append({"index": loader.last_index.tolist(), "input_ids": batch["input_ids"].tolist(),
                     "loss": float(loss.detach())})
    checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
    json.dump({"seen": seen, "checksum": checksum}, open(f"{out}/rank{rank}.json", "w"))
    dist.destroy_process_group()
""") % (VOCAB, SEQ, SEQ)


def test_a_plain_torchrun_loop_takes_each_ranks_slice(corpus, tmp_path, process_group):
    ref = megatron_datasets([corpus], None, 3, SEQ, 160, "100,0,0", tmp_path / "m", vocab=VOCAB)
    script = tmp_path / "hf_rank.py"
    script.write_text(RANK_SCRIPT)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script),
           str(corpus), str(tmp_path / "idx"), str(tmp_path)]
    proc = subprocess.run(cmd, env=stoker_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    for r, res in enumerate(ranks):
        want = sampler_batches(len(ref), 4, 2, r)[:4]
        assert [s["index"] for s in res["seen"]] == [w.tolist() for w in want]
        for s, w in zip(res["seen"], want):
            assert s["input_ids"] == [ref[int(i)]["tokens"].tolist() for i in w]
    assert ranks[0]["checksum"] == pytest.approx(ranks[1]["checksum"], rel=1e-9)  # DDP: one model
