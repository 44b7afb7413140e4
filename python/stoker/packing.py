"""Packed SFT rows: whole documents of a Megatron ``.bin``/``.idx`` pair placed
into fixed-length rows, as Grain's packing does, batched for training.

The plan (which documents share a row) is first-fit or best-fit decreasing,
computed in C++ over the document lengths (pipeline/sequence_packing.h); a
batch's rows are filled in C++ too: tokens, next-token labels within each
document, position ids restarting at each document, segment ids, the
document boundaries of the flattened batch (``cu_seqlens`` for varlen
attention) and the loss mask from each document's prompt span. Python only
chooses which rows form a batch (one numpy permutation per epoch); the next
batch is filled on a thread while the current one trains.
"""
from __future__ import annotations

import os
from typing import Any, Iterator, Mapping, Sequence

from . import _stoker
from .epochs import RESUME, EpochCursor
from .options import _distributed_rank_world

PackedRows = _stoker.PackedRows
plan_packing = _stoker.plan_packing


class PackedLoader:
    """Batches of packed rows from one Megatron dataset (one document per sequence).

    >>> loader = stoker.PackedLoader("data/sft", seq_len=2048, batch_size=8,
    ...     prompt_lengths=prompts)     # int per document: its prompt's tokens
    >>> for batch in loader:
    ...     batch["tokens"], batch["labels"], batch["loss_mask"]    # [8, 2048]
    ...     batch["position_ids"], batch["segment_ids"]             # [8, 2048]
    ...     batch["cu_seqlens"], batch["max_seqlen"]                # varlen attention

    ``labels[t]`` is token t + 1 of t's document (0 where the document ends,
    and on padding); ``loss_mask[t]`` is 1 where that label is a response
    token: at or after the document's prompt (``prompt_lengths``; none: every
    token is a response). ``cu_seqlens`` (int32) are the boundaries of the
    batch flattened to ``B * seq_len`` tokens: one segment per document and
    one per row's padding tail. ``algorithm`` is "first_fit" (first-fit
    decreasing) or "best_fit" (best-fit decreasing); a document longer than
    ``seq_len`` is an error unless ``truncate=True`` (its first ``seq_len``
    tokens). ``padding_fraction`` is the share of row tokens that are padding.

    ``output="hf"`` gives Hugging Face's convention instead: ``input_ids``,
    ``labels`` unshifted with -100 wherever no loss is taken (a document's
    first token, prompt tokens, padding: the model's own shift then trains
    exactly ``loss_mask``), ``position_ids`` (restarting per document, which
    flash-attention 2 models read as document boundaries) and
    ``attention_mask`` (0 on padding). A model with plain causal attention
    still attends across the documents of a row: use ``cu_seqlens`` or
    ``position_ids`` with a varlen kernel to keep them apart.

    The rows of an epoch are the plan's rows in a seeded order (``shuffle``;
    ``seed + epoch``), cut into global batches of ``batch_size * world_size``;
    rank r takes its slice of each; a partial last global batch is dropped.
    Each ``iter()`` continues where the last stopped and an epoch's end moves
    to the next epoch; ``set_epoch(e)`` starts epoch e, the current one too
    (after ``load_state_dict``, set_epoch of the restored epoch keeps the
    resume), as the other loaders' set_epoch. ``state_dict()`` holds
    the epoch, the rows consumed and what the rows are made of (the dataset's
    name and sizes, seq_len, algorithm, truncate, the prompts' digest, seed);
    ``load_state_dict`` refuses another run's state, naming what differs, and
    continues at the next row, exactly.
    """

    def __init__(self, path: str | os.PathLike, *, seq_len: int, batch_size: int,
                 algorithm: str = "first_fit", prompt_lengths: Sequence[int] | None = None,
                 truncate: bool = False, pad_id: int = 0, shuffle: bool = True, seed: int = 0,
                 rank: int | None = None, world_size: int | None = None, output: str = "torch") -> None:
        import numpy as np

        if output not in ("torch", "numpy", "hf"):
            raise ValueError(f"output must be 'torch', 'numpy' or 'hf', not {output!r}")
        self._hf = output == "hf"
        if rank is None or world_size is None:
            env_rank, env_world = _distributed_rank_world()
            rank = env_rank if rank is None else rank
            world_size = env_world if world_size is None else world_size
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside world_size {world_size}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, not {batch_size}")
        prompts = None if prompt_lengths is None else np.ascontiguousarray(prompt_lengths, dtype=np.int64)
        self._rows = PackedRows.create(str(path), int(seq_len), algorithm, prompts, bool(truncate), int(pad_id))
        self._batch = int(batch_size)
        self._rank, self._world = int(rank), int(world_size)
        self._global = self._batch * self._world
        self._shuffle, self._seed = bool(shuffle), int(seed)
        # The epoch of the next iter() (epochs.py): an iteration broken off is continued.
        self._cursor = EpochCursor(continues=True)
        self._next = 0  # global batches of the epoch consumed
        self._torch = None
        if output in ("torch", "hf"):
            import torch

            self._torch = torch
        if len(self) == 0:
            raise _stoker.StokerError(
                f"{path}: {self._rows.num_rows} packed rows of seq_len {seq_len}, fewer than one global batch of "
                f"{self._global} (batch_size {batch_size} x world_size {world_size}): no batch would be delivered")
        data = _stoker.MegatronDataset.open(str(path))
        self._fingerprint = {
            "name": str(path).rstrip("/").rsplit("/", 1)[-1], "dtype": data.dtype, "sequences": len(data),
            "bin_bytes": int(data.bin_bytes), "seq_len": int(seq_len), "algorithm": algorithm,
            "truncate": bool(truncate), "pad_id": int(pad_id), "shuffle": self._shuffle, "seed": self._seed,
            "rows": int(self._rows.num_rows),
            "prompts": None if prompts is None else _digest(prompts.tobytes()),
        }

    @property
    def rows(self) -> PackedRows:
        """The plan and the C++ filler (``num_rows``, ``row_offsets``, ``documents``, ``fill``)."""
        return self._rows

    @property
    def padding_fraction(self) -> float:
        return float(self._rows.padding_fraction)

    @property
    def epoch(self) -> int:
        return self._cursor.epoch

    def __len__(self) -> int:
        """Batches per epoch on this rank (equal on every rank)."""
        return int(self._rows.num_rows) // self._global

    def set_epoch(self, epoch: int) -> None:
        """The next iteration is epoch ``epoch`` from its start (the restored
        epoch after load_state_dict keeps the resume)."""
        if self._cursor.set_epoch(epoch):
            self._next = 0

    def _order(self, epoch: int):
        import numpy as np

        n = int(self._rows.num_rows)
        if not self._shuffle:
            return np.arange(n, dtype=np.int64)
        return np.random.default_rng([self._seed, epoch]).permutation(n).astype(np.int64)

    def __iter__(self) -> Iterator[dict]:
        if self._cursor.begin(lambda: self._next >= len(self)) != RESUME:
            self._next = 0
        return self._batches(self._cursor.epoch)

    def _batches(self, epoch: int) -> Iterator[dict]:
        """The rest of `epoch` from self._next."""
        from concurrent.futures import ThreadPoolExecutor

        cursor = self._cursor
        order = self._order(epoch)

        def fill(k: int):
            start = k * self._global + self._rank * self._batch
            return self._rows.fill(order[start:start + self._batch])  # C++, the GIL released

        # The next batch fills on a thread while this one trains.
        with ThreadPoolExecutor(1, thread_name_prefix="stoker-packed") as pool:
            ahead = pool.submit(fill, self._next) if self._next < len(self) else None
            # A set_epoch since this iteration began ends it (the next iter() follows it).
            while ahead is not None and cursor.epoch == epoch and not cursor.starts:
                batch = ahead.result()
                k = self._next + 1
                ahead = pool.submit(fill, k) if k < len(self) else None
                self._next = k
                yield self._convert(batch)

    def _convert(self, batch: dict) -> dict:
        torch = self._torch
        if torch is None:
            return batch
        batch = {k: (torch.from_numpy(v) if hasattr(v, "dtype") else v) for k, v in batch.items()}
        if not self._hf:
            return batch
        # Hugging Face's convention: labels unshifted (the model shifts), -100 where no loss
        # is taken: label t + 1 is trained exactly where megatron's loss_mask[t] is 1.
        tokens = batch["tokens"]
        labels = torch.full_like(tokens, -100)
        labels[:, 1:] = torch.where(batch["loss_mask"][:, :-1] > 0, tokens[:, 1:], -100)
        return {"input_ids": tokens, "labels": labels, "position_ids": batch["position_ids"],
                "attention_mask": (batch["segment_ids"] > 0).long()}

    def state_dict(self) -> dict:
        return {"packed": {"epoch": self._cursor.epoch, "consumed_rows": self._next * self._global,
                           "rows": self._fingerprint}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        saved = state["packed"]
        theirs, ours = saved.get("rows") or {}, self._fingerprint
        diffs = [f"{k}: saved {theirs.get(k)!r}, this loader {ours[k]!r}" for k in ours if theirs.get(k) != ours[k]]
        if diffs:
            raise _stoker.StokerError("PackedLoader state was saved for other rows: " + "; ".join(diffs))
        consumed = int(saved["consumed_rows"])
        if consumed % self._global:
            raise _stoker.StokerError(f"PackedLoader state: consumed_rows {consumed} is not a whole number of global "
                                      f"batches of {self._global} (batch_size x world_size differ from the run's)")
        self._cursor.restored(saved["epoch"])
        self._next = consumed // self._global


def _digest(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()[:16]
