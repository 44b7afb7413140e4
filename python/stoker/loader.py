"""The Loader a training loop iterates: torch glue around the native engine.

Everything per sample happens in C++; here we only turn each batch's numpy
views (zero-copy, into a pooled buffer) into torch tensors and regroup NPZ
arrays into dicts: a constant amount of Python per batch.
"""
from __future__ import annotations

import json
import os
from typing import Any, Iterator, Mapping, Sequence

from . import _stoker

_PARTITION = {"drop": _stoker.PartitionPolicy.drop, "pad": _stoker.PartitionPolicy.pad}
_KEY_RULE = {"webdataset": _stoker.KeyRule.webdataset, "underscore": _stoker.KeyRule.underscore}


def _distributed_rank_world() -> tuple[int, int]:
    """rank and world size from torch.distributed, else torchrun's environment."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


class Loader:
    """Batches from WebDataset-style tar shards.

    >>> loader = stoker.Loader("data/shard-{000000..000031}.tar",
    ...     fields={"jpg": stoker.image(224), "cls": stoker.scalar("int64")},
    ...     batch_size=64, shuffle=True, seed=0)
    >>> for epoch in range(10):
    ...     loader.set_epoch(epoch)
    ...     for batch in loader: ...   # {"jpg": uint8 [64,3,224,224], "cls": [64], ...}

    Batches are views into pooled memory: a buffer is reused only after every
    tensor that views it is gone. Keep a batch past the next step only if you
    mean to (the pool then lends an extra buffer rather than deadlock).
    """

    def __init__(
        self,
        sources: str | Sequence[str],
        fields: Mapping[str, Any],
        *,
        batch_size: int,
        shuffle: bool = False,
        seed: int = 0,
        shuffle_buffer: int = 0,
        drop_last: bool = True,
        partition: str = "drop",
        rank: int | None = None,
        world_size: int | None = None,
        decode_threads: int = 0,
        io_depth: int = 4,
        max_read_bytes_per_s: int = 0,
        prefetch: int = 2,
        key_rule: str = "webdataset",
        output: str = "torch",
        keys: bool = True,
    ) -> None:
        if output not in ("torch", "numpy"):
            raise ValueError(f"output must be 'torch' or 'numpy', not {output!r}")
        if partition not in _PARTITION:
            raise ValueError(f"partition must be one of {sorted(_PARTITION)}, not {partition!r}")
        if key_rule not in _KEY_RULE:
            raise ValueError(f"key_rule must be one of {sorted(_KEY_RULE)}, not {key_rule!r}")
        if rank is None or world_size is None:
            env_rank, env_world = _distributed_rank_world()
            rank = env_rank if rank is None else rank
            world_size = env_world if world_size is None else world_size

        opt = _stoker.LoaderOptions()
        opt.sources = [sources] if isinstance(sources, (str, os.PathLike)) else [str(s) for s in sources]
        opt.sources = [str(s) for s in opt.sources]
        specs = []
        for name, spec in fields.items():
            spec.field = name
            specs.append(spec)
        opt.fields = specs
        opt.batch_size = batch_size
        opt.shuffle = shuffle
        opt.seed = seed
        opt.shuffle_buffer = shuffle_buffer
        opt.drop_last = drop_last
        opt.partition = _PARTITION[partition]
        opt.rank = rank
        opt.world_size = world_size
        opt.decode_threads = decode_threads
        opt.io_depth = io_depth
        opt.max_read_bytes_per_s = max_read_bytes_per_s
        opt.prefetch_batches = prefetch
        opt.key_rule = _KEY_RULE[key_rule]
        opt.include_keys = keys

        self._native = _stoker.NativeLoader.create(opt)
        self._npz_fields = {name for name, spec in fields.items() if spec.kind == _stoker.FieldKind.npz}
        self._epoch = 0
        self._resuming = False
        self._generation = 0  # which iterator owns the native run
        self._torch = None
        if output == "torch":
            import torch

            self._torch = torch

    # -- epochs and length -------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next iteration follows."""
        self._epoch = int(epoch)
        self._resuming = False

    @property
    def epoch(self) -> int:
        return self._epoch

    def __len__(self) -> int:
        """Batches per epoch on this rank (equal on every rank)."""
        return self._native.plan.batches

    @property
    def plan(self) -> "_stoker.PlanInfo":
        """Samples in the dataset, on this rank, dropped and padded; batches."""
        return self._native.plan

    # -- iteration ----------------------------------------------------------
    def __iter__(self) -> Iterator[dict]:
        if not self._resuming:
            self._native.set_epoch(self._epoch)
        self._resuming = False
        self._generation += 1
        return _EpochIterator(self, self._generation)

    def _to_dict(self, item) -> dict:
        _, arrays, keys = item
        convert = self._torch.from_numpy if self._torch is not None else (lambda a: a)
        batch: dict[str, Any] = {}
        for name, array in arrays:
            field, _, member = name.partition("/")
            if field in self._npz_fields and member:
                batch.setdefault(field, {})[member] = convert(array)
            else:
                batch[name] = convert(array)
        if keys:
            batch["__key__"] = keys
        return batch

    # -- resumption ---------------------------------------------------------
    def state_dict(self) -> dict:
        """Where this rank stands: restore it in a new process to continue."""
        return {"stoker": json.loads(self._native.state())}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue with exactly the batches not yet delivered, in order."""
        native = state["stoker"]
        self._native.restore(json.dumps(native))
        self._epoch = int(native["epoch"])
        self._resuming = True

    def close(self) -> None:
        """Stop all threads now (also done when the loader is garbage collected)."""
        self._native.stop()


class _EpochIterator:
    """One pass over an epoch. A failed batch raises from __next__ and the
    iterator stays usable: the next call yields the batch after it. Dropping
    the iterator (breaking out of a loop) stops every native thread."""

    def __init__(self, loader: Loader, generation: int) -> None:
        self._loader = loader
        self._generation = generation

    def __iter__(self) -> "_EpochIterator":
        return self

    def __next__(self) -> dict:
        if self._loader is None:
            raise StopIteration
        item = self._loader._native.next()
        if item is None:
            self._stop()
            raise StopIteration
        return self._loader._to_dict(item)

    def _stop(self) -> None:
        loader, self._loader = self._loader, None
        if loader is not None and loader._generation == self._generation:
            loader._native.stop()

    def __del__(self) -> None:
        if getattr(self, "_loader", None) is not None:
            self._stop()
