"""Token datasets: Megatron ``.bin``/``.idx`` pairs, batched by the one engine.

Sample ``i`` of a :class:`TokenLoader` is ``GPTDataset[i]`` of megatron-core
0.16.1 for the same files, seed, ``seq_len``, split, ``num_samples`` and
``add_extra_token`` (or ``BlendedDataset[i]`` when ``weights`` are given);
ranks take their micro-batches of each global batch as megatron's pretraining
sampler hands them out. Everything per sample runs in C++ (index build,
window copy into a pooled ``[B, seq_len + 1]`` int64 buffer); ``tokens`` and
``labels`` are two views of that buffer.
"""
from __future__ import annotations

import json
import os
from typing import Any, Iterator, Mapping, Sequence

from . import _stoker
from .loader import Loader, _EpochIterator, _device_options, _distributed_rank_world, storage_options

MegatronDataset = _stoker.MegatronDataset


def write_megatron(prefix: str | os.PathLike, documents, dtype: str | None = None) -> str:
    """Writes documents (sequences of token ids) as ``prefix.bin``/``prefix.idx``.

    ``dtype`` defaults to megatron's choice for the largest id: uint16 below
    65500, else int32. Returns the dtype written."""
    import numpy as np

    docs = [np.ascontiguousarray(d, dtype=np.int64) for d in documents]
    if dtype is None:
        top = max((int(d.max()) for d in docs if d.size), default=0)
        dtype = "uint16" if top + 1 < 65500 else "int32"
    writer = _stoker.MegatronWriter.create(str(prefix), dtype)
    for d in docs:
        writer.add(d)
    writer.finish()
    return dtype


class TokenLoader(Loader):
    """Batches of token windows from Megatron indexed datasets.

    >>> loader = stoker.TokenLoader("data/corpus_text_document", seq_len=2048,
    ...     batch_size=8, seed=1234, num_samples=100_000)
    >>> for batch in loader:          # {"tokens": int64 [8, 2048], "labels": int64 [8, 2048]}
    ...     train(batch)
    >>> loader.state_dict()            # {"stoker": {"consumed_samples": ..., ...}}

    ``paths`` is one prefix (a plain GPTDataset) or several with ``weights``
    (a BlendedDataset of ``num_samples``). ``batch_size`` is megatron's micro
    batch; rank r of world_size gets its part of each global batch of
    ``batch_size * world_size`` samples. ``consumed_samples`` starts there (the
    number megatron checkpoints); ``state_dict()`` / ``load_state_dict()``
    carry it. A partial last global batch is dropped, as megatron trains;
    ``partition="exact"`` (evaluation) delivers it too, as megatron's sampler
    does with drop_last=False: rank r's slice of it, short or empty (0 rows),
    one more step on every rank. ``extras`` may hold "loss_mask" and
    "position_ids" (as megatron's GPTDataset makes them without reset_* or
    eod_mask_loss).
    One pass over the samples per iteration sequence: iterating again after the
    end yields nothing until ``set_epoch`` restarts at ``consumed_samples``.
    Unlike :class:`Loader`, epochs do not advance by themselves: the one pass
    already holds megatron's epochs (GPTDataset shuffles as many as
    ``num_samples`` needs into its indices), so a second pass would repeat
    samples megatron never repeats and break ``consumed_samples`` as the
    position. A new iter() continues where the last one stopped (also after
    a break), so a loop such as Lightning's with several epochs takes each
    sample once and then gets empty epochs: size the run by ``num_samples``
    (or max_steps), as megatron does.
    """

    def __init__(
        self,
        paths: str | os.PathLike | Sequence[str | os.PathLike],
        *,
        seq_len: int,
        batch_size: int,
        weights: Sequence[float] | None = None,
        seed: int = 1234,
        num_samples: int | None = None,
        split: str = "100,0,0",
        split_index: int = 0,
        add_extra_token: bool = True,
        consumed_samples: int = 0,
        cache_dir: str | os.PathLike | None = None,
        extras: Sequence[str] = (),
        rank: int | None = None,
        world_size: int | None = None,
        partition: str = "drop",
        io_depth: int | None = None,
        s3_endpoint: str | None = None,
        profile: str | None = None,
        region: str | None = None,
        retry_deadline_s: float | None = None,
        http_headers: Mapping[str, str] | None = None,
        prefetch: int | None = None,
        autotune: bool = True,
        timeout: float | None = None,
        output: str = "torch",
        record_stats: bool = True,
        observe: bool = True,
        log_every: int | None = None,
        window: int = 50,
        slow_factor: float = 5.0,
        slow_floor_s: float = 0.05,
        jsonl: str | os.PathLike | None = None,
        trace_spans: int = 0,
        device: str = "cpu",
        pin_memory: bool = False,
        _late_copy_ms: int = 20,  # device="cpu-late" (tests only)
    ) -> None:
        if output not in ("torch", "numpy"):
            raise ValueError(f"output must be 'torch' or 'numpy', not {output!r}")
        if partition not in ("drop", "exact"):
            raise ValueError(f"partition must be 'drop' or 'exact' for token windows, not {partition!r}")
        unknown = set(extras) - {"loss_mask", "position_ids"}
        if unknown:
            raise ValueError(f"unknown extras {sorted(unknown)}; choose from loss_mask, position_ids")
        if rank is None or world_size is None:
            env_rank, env_world = _distributed_rank_world()
            rank = env_rank if rank is None else rank
            world_size = env_world if world_size is None else world_size
        single = isinstance(paths, (str, os.PathLike))
        topt = _stoker.TokenOptions()
        topt.paths = [str(paths)] if single else [str(p) for p in paths]
        topt.weights = [] if weights is None else [float(w) for w in weights]
        topt.seq_len = int(seq_len)
        topt.num_samples = -1 if num_samples is None else int(num_samples)
        topt.split = split
        topt.split_index = int(split_index)
        topt.add_extra_token = bool(add_extra_token)
        topt.cache_dir = "" if cache_dir is None else str(cache_dir)
        topt.consumed_samples = int(consumed_samples)

        opt = _stoker.LoaderOptions()
        opt.tokens = topt
        opt.batch_size = batch_size
        opt.seed = seed
        opt.rank = rank
        opt.world_size = world_size
        opt.partition = _stoker.PartitionPolicy.exact if partition == "exact" else _stoker.PartitionPolicy.drop
        opt.drop_last = partition != "exact"
        opt.io_depth = -1 if io_depth is None else io_depth  # auto: one per core (at most 4) local, 16 for a URL
        opt.storage = storage_options(s3_endpoint=s3_endpoint, profile=profile, region=region,
                                      retry_deadline_s=retry_deadline_s, http_headers=http_headers)
        opt.prefetch_batches = -1 if prefetch is None else int(prefetch)  # auto: 8, then tuned
        opt.autotune = bool(autotune)
        opt.timeout_ms = 0 if timeout is None else max(1, int(timeout * 1000))
        opt.include_keys = False
        opt.record_stats = record_stats
        opt.trace_spans = int(trace_spans)
        device = _device_options(opt, device, pin_memory, output, _late_copy_ms)

        self._native = _stoker.NativeLoader.create(opt)
        self._npz_fields = set()
        self._epoch = 0
        self._resuming = True  # iteration continues from the current position
        self._pending_start = False  # Loader.state_dict: consumed_samples already says where a run starts
        self._skip = False  # token windows have no bad samples to skip
        self._classes = None
        self._generation = 0
        self._seq_len = int(seq_len)
        self._extra_token = bool(add_extra_token)
        self._extras = tuple(extras)
        self._cached: dict[str, Any] = {}
        self._attach(output, observe, device=device, source="stoker.TokenLoader",
                     config={"batch_size": batch_size, **self._start_settings(),
                             "seq_len": seq_len, "batches": self._native.plan.batches},
                     window=window, log_every=log_every, slow_factor=slow_factor, slow_floor_s=slow_floor_s,
                     jsonl=jsonl, trace_spans=trace_spans)

    def set_epoch(self, epoch: int) -> None:
        """Restart at ``consumed_samples`` (the token order spans megatron's
        epochs already; this only rewinds, and nothing advances by itself)."""
        self._epoch = int(epoch)
        self._resuming = False

    def __iter__(self) -> Iterator[dict]:
        if not self._resuming:
            self._native.set_epoch(self._epoch)
        self._resuming = True
        self._generation += 1
        return _EpochIterator(self, self._generation)

    def _extra(self, name: str, batch_size: int):
        key = (name, batch_size)
        if key not in self._cached:
            import numpy as np

            if name == "loss_mask":
                value = np.ones((batch_size, self._seq_len), dtype=np.float32)
            else:
                value = np.tile(np.arange(self._seq_len, dtype=np.int64), (batch_size, 1))
            value = self._torch.from_numpy(value) if self._torch is not None else value
            self._cached[key] = value.to(self._device) if self._device.startswith("cuda") else value
        value = self._cached[key]
        return value.clone() if name == "loss_mask" and self._torch is not None else value

    def _to_dict(self, item) -> dict:
        _, arrays, *_ = item  # (index, arrays, keys, urls, failed slots)
        convert = self._convert
        window = None
        index = None
        for name, array in arrays:
            if name == "tokens":
                window = convert(array)
            elif name == "__index__":
                index = convert(array)
        if self._extra_token:
            batch = {"tokens": window[:, :-1], "labels": window[:, 1:]}
        else:
            tokens = window
            if self._torch is not None:
                labels = self._torch.roll(tokens, -1, dims=1)
            else:
                import numpy as np

                labels = np.roll(tokens, -1, axis=1)
            labels[:, -1] = 0  # megatron: the pad id, then pad ids become 0
            batch = {"tokens": tokens, "labels": labels}
        for name in self._extras:
            batch[name] = self._extra(name, window.shape[0])
        if not self._extra_token and "loss_mask" in batch:
            batch["loss_mask"][:, -1] = 0
        batch["__index__"] = index
        return batch

    @property
    def consumed_samples(self) -> int:
        """Global samples consumed by all ranks so far (megatron's count)."""
        return int(json.loads(self._native.state())["consumed_samples"])

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue at the state's ``consumed_samples``."""
        self._native.restore(json.dumps(state["stoker"]))
        self._resuming = True
