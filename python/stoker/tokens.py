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
import math
import os
from typing import Any, Iterator, Mapping, Sequence

from . import _stoker
from .epochs import START, EpochCursor
from .loader import Loader, _EpochIterator, _log, storage_options
from .options import DeviceOptions, ObserveOptions, TuningOptions, _distributed_rank_world

MegatronDataset = _stoker.MegatronDataset


def write_megatron(prefix: str | os.PathLike, documents, dtype: str | None = None) -> str:
    """Writes documents (sequences of token ids) as ``prefix.bin``/``prefix.idx``.

    ``dtype`` defaults to megatron's choice for the largest id: uint16 below
    65500, else int32. Returns the dtype written. No documents, or only empty
    ones, is a ValueError here (naming the prefix), not at the first load:
    such a pair has no sample at any ``seq_len``."""
    import numpy as np

    docs = [np.ascontiguousarray(d, dtype=np.int64) for d in documents]
    if not any(d.size for d in docs):
        raise ValueError(f"write_megatron({str(prefix)!r}): " + (
            f"{len(docs)} documents, all empty" if docs else "no documents were given")
            + ": a megatron dataset needs at least one token; nothing was written")
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
    (a BlendedDataset of ``num_samples``). A blend's batches also hold
    ``dataset_id`` (int64 [B]: the index into ``paths`` of each sample, as
    megatron's BlendedDataset tags it); ``datasets`` and ``report()`` give the
    samples each dataset gave the run so far. ``batch_size`` is megatron's
    micro batch; rank r of world_size gets its part of each global batch of
    ``batch_size * world_size`` samples. ``consumed_samples`` starts there (the
    number megatron checkpoints); ``state_dict()`` / ``load_state_dict()``
    carry it. A partial last global batch is dropped, as megatron trains;
    ``partition="exact"`` (evaluation) delivers it too, as megatron's sampler
    does with drop_last=False: rank r's slice of it, short or empty (0 rows),
    one more step on every rank. ``extras`` may hold "loss_mask" and
    "position_ids" (as megatron's GPTDataset makes them without reset_* or
    eod_mask_loss).

    The run and its epochs. The run is megatron's: the samples of the
    dataset (``num_samples`` sizes it; GPTDataset shuffles as many passes over
    the documents as that needs into its order), consumed once, in order.
    ``epochs`` (default 1) cuts that run into equal epochs for loops that
    count epochs: epoch e is the run's global batches [e * len, (e + 1) * len).
    ``len()`` is the batches of one epoch on this rank (equal on every rank):
    the run's whole global batches // epochs, counted from sample 0, so it
    does not change with ``consumed_samples`` or ``load_state_dict``; an
    iteration that starts mid-epoch yields the rest of that epoch. (Batches
    left over by the division, fewer than ``epochs``, are not delivered, and
    a warning says so.)
    Each ``iter()`` continues where the last one stopped: after a break, the
    rest of the epoch; after an epoch's end, the next epoch (Lightning's loop
    without set_epoch). ``set_epoch(e)`` makes the next iteration epoch e from
    its start (HF Trainer's loop), except that after ``load_state_dict`` (or
    with ``consumed_samples``) set_epoch of the restored epoch keeps the
    resume. Nothing repeats silently: an ``iter()`` after the last epoch
    raises StokerError, and so does set_epoch(e) for an epoch the run does
    not have (e >= epochs), each naming the fix: size the run by
    ``num_samples`` (or stop at max_steps), or pass ``epochs``; replaying an
    epoch takes an explicit set_epoch.

    ``output="hf"`` delivers Hugging Face's convention for causal LMs:
    ``{"input_ids": int64 [B, seq_len], "labels": int64 [B, seq_len]}``
    where ``input_ids`` are megatron's ``tokens`` and ``labels`` are the same
    ids, unshifted (a copy): HF models shift labels themselves (logits at t
    predict labels[t + 1]), so ``model(**batch).loss`` trains what megatron's
    ``tokens``/``labels`` do, less the last position's target (megatron's
    ``labels[:, -1]``, the extra token), which HF's convention has no place
    for. Windows are never padded, so no ``attention_mask`` (HF's default is
    all ones); ``extras=("position_ids",)`` adds ``position_ids``. Nothing
    else is in the batch (``model(**batch)`` takes every key):
    ``last_index`` / ``last_dataset_id`` hold the last batch's ``__index__``
    and ``dataset_id``. Torch tensors, so a ``transformers.Trainer`` (whose
    ``get_train_dataloader`` returns the loader), a Lightning module or a
    plain loop feed it to the model as it is.

    ``state_dict()`` holds what the run is over (each dataset's name, dtype,
    sizes; weights, seq_len, split, num_samples, add_extra_token) and the
    samples consumed per dataset; ``load_state_dict`` refuses a state of
    another run, naming what differs. ``load_state_dict(state,
    reweight=True)`` accepts new blend weights on purpose (see there).
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
        epochs: int = 1,
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
        if output not in ("torch", "numpy", "hf"):
            raise ValueError(f"output must be 'torch', 'numpy' or 'hf', not {output!r}")
        self._hf = output == "hf"
        if self._hf:
            output = "torch"
            if "loss_mask" in extras:
                raise ValueError("output='hf' marks untrained labels -100 (Hugging Face's convention) and every "
                                 "label of a token window is trained: drop 'loss_mask' from extras")
        if partition not in ("drop", "exact"):
            raise ValueError(f"partition must be 'drop' or 'exact' for token windows, not {partition!r}")
        unknown = set(extras) - {"loss_mask", "position_ids"}
        if unknown:
            raise ValueError(f"unknown extras {sorted(unknown)}; choose from loss_mask, position_ids")
        epochs = int(epochs)
        if epochs < 1:
            raise ValueError(f"epochs must be at least 1, not {epochs}")
        if epochs > 1 and partition == "exact":
            raise ValueError("partition='exact' (evaluation) delivers the run whole, with its partial last global "
                             "batch: it is one epoch, so epochs must be 1")
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
        opt.storage = storage_options(s3_endpoint=s3_endpoint, profile=profile, region=region,
                                      retry_deadline_s=retry_deadline_s, http_headers=http_headers)
        opt.include_keys = False
        # The parts a Loader's keywords fill too (options.py). io_depth auto: one per core (at most
        # 4) local, 16 for a URL; prefetch auto: 8, then tuned.
        TuningOptions(io_depth=io_depth, prefetch=prefetch, autotune=autotune, timeout=timeout).fill(opt)
        observing = ObserveOptions(observe=observe, record_stats=record_stats, log_every=log_every, window=window,
                                   slow_factor=slow_factor, slow_floor_s=slow_floor_s, jsonl=jsonl,
                                   trace_spans=trace_spans)
        observing.fill(opt)
        delivery = DeviceOptions(device=device, pin_memory=pin_memory, output=output, _late_copy_ms=_late_copy_ms)
        delivery.fill(opt, {})
        device = delivery.device

        self._native = _stoker.NativeLoader.create(opt)
        self._npz_fields = set()
        self._skip = False  # token windows have no bad samples to skip
        self._run_setup(topt, opt.storage, epochs, int(batch_size) * int(world_size), int(batch_size),
                        partition == "exact", num_samples)
        # The epoch of the next iter() (epochs.py). A run is consumed once: an iteration broken
        # off is continued, and consumed_samples is a restored position (set_epoch keeps it).
        self._cursor = EpochCursor(continues=True)
        self._cursor.restored(self._epoch_of(self._position()))
        self._classes = None
        self._generation = 0
        self._seq_len = int(seq_len)
        self._extra_token = bool(add_extra_token)
        self._extras = tuple(extras)
        self._cached: dict[str, Any] = {}
        self._last_index = self._last_dataset_id = None  # output="hf": the last batch's, kept out of the batch
        self._attach(output, observe, device=device, source="stoker.TokenLoader",
                     config={"batch_size": batch_size, **self._start_settings(),
                             "seq_len": seq_len, "batches": self._epoch_batches, "epochs": epochs},
                     **observing.observer_args)

    # -- the run, its epochs and what it is over ---------------------------------
    def _run_setup(self, topt, storage, epochs: int, global_batch: int, micro: int, exact: bool,
                   num_samples: int | None) -> None:
        """The run's size in epochs and batches, its fingerprint, and for a
        blend the dataset of each sample (computed in C++)."""
        total = int(self._native.plan.dataset_samples)
        self._samples = total
        self._global = global_batch
        self._exact = exact
        self._epochs = epochs
        run_batches = -(-total // global_batch) if exact else total // global_batch
        self._epoch_batches = run_batches // epochs
        self._paths = list(topt.paths)
        where = self._paths[0] if len(self._paths) == 1 else f"the blend of {len(self._paths)} datasets"
        if self._epoch_batches == 0:
            raise _stoker.StokerError(
                f"{where}: the run holds {total} samples (seq_len {topt.seq_len}, num_samples={num_samples}), "
                f"fewer than {'one global batch' if epochs == 1 else f'epochs={epochs} global batches'} of "
                f"{global_batch} (batch_size {micro} x world_size {global_batch // micro}): no batch would be "
                f"delivered. Pass a larger num_samples, a smaller batch_size"
                + (" or fewer epochs" if epochs > 1 else " or partition='exact'"))
        left_over = run_batches - self._epoch_batches * epochs
        if left_over:
            _log.warning("stoker.TokenLoader: epochs=%d of %d batches each leave the run's last %d global batches "
                         "(%d samples) undelivered", epochs, self._epoch_batches, left_over,
                         left_over * global_batch)
        self._weights = None
        self._dataset_index = None  # int16 [samples]: BlendedDataset.dataset_index
        if topt.weights:
            self._weights = [float(w) for w in _stoker.blend_sizes(list(topt.weights), topt.num_samples)[0]]
            self._dataset_index = _stoker.blend_dataset_index(list(topt.weights), topt.num_samples)
            if len(self._dataset_index) != total:
                raise _stoker.StokerError(f"the blend's index has {len(self._dataset_index)} samples, the loader "
                                          f"{total} (an internal mismatch)")
        self._fingerprint = {
            "datasets": [dict(name=_name(p), **_stoker.megatron_summary(p, storage)) for p in self._paths],
            "weights": self._weights,
            "num_samples": None if topt.num_samples < 0 else int(topt.num_samples),
            "seq_len": int(topt.seq_len),
            "add_extra_token": bool(topt.add_extra_token),
            "split": topt.split,
            "split_index": int(topt.split_index),
        }
        for entry in self._fingerprint["datasets"]:
            entry["documents_in_split"] = list(_stoker.split_range(topt.split, int(topt.split_index),
                                                                   int(entry["sequences"])))

    def _run_end(self) -> int:
        """The global sample where the last epoch ends."""
        return self._samples if self._exact else self._epochs * self._epoch_batches * self._global

    def _epoch_span(self, epoch: int) -> tuple[int, int]:
        start = epoch * self._epoch_batches * self._global
        return start, (self._run_end() if epoch == self._epochs - 1 else start + self._epoch_batches * self._global)

    def _epoch_of(self, position: int) -> int:
        """The epoch that global sample `position` lies in; ``epochs`` once the run is used up."""
        if position >= self._run_end():
            return self._epochs
        return min(position // (self._epoch_batches * self._global), self._epochs - 1)

    def _position(self) -> int:
        return int(json.loads(self._native.state())["consumed_samples"])

    def _move_to(self, position: int) -> None:
        native = json.loads(self._native.state())
        native["consumed_samples"] = int(position)
        self._native.restore(json.dumps(native))

    def _used_up_message(self) -> str:
        return (f"TokenLoader: the run is used up: its {self._epochs} epoch(s) of {len(self)} batches "
                f"({self._samples} samples at seq_len {self._fingerprint['seq_len']}, num_samples="
                f"{self._fingerprint['num_samples']}) were delivered, and another pass would repeat samples "
                f"megatron gives once. Size the run by num_samples for the steps you train (or stop at "
                f"max_steps); pass epochs=N to cut it into N epochs for a loop that counts epochs; or call "
                f"set_epoch(e) to replay epoch e on purpose")

    def set_epoch(self, epoch: int) -> None:
        """The next iteration is epoch ``epoch`` from its start: the run's
        global batches [epoch * len, (epoch + 1) * len). After load_state_dict
        (or with consumed_samples), set_epoch of the restored epoch keeps the
        resume, so ``for e in range(loader.epoch, n): loader.set_epoch(e)``
        continues exactly. An epoch the run does not have (e >= epochs) is a
        StokerError naming the fix."""
        e = int(epoch)
        if e < 0 or e >= self._epochs:
            raise _stoker.StokerError(
                f"TokenLoader.set_epoch({e}): the run has {self._epochs} epoch(s) of {len(self)} batches "
                f"(epochs={self._epochs}; {self._samples} samples, num_samples={self._fingerprint['num_samples']}); "
                f"epoch {e} would repeat samples megatron gives once. Pass epochs=N (N > {e}) to cut the run into "
                f"N epochs, or size the run by num_samples / max_steps")
        self._cursor.set_epoch(e)  # the position moves at iter()

    @property
    def epoch(self) -> int:
        """The epoch the next batch belongs to (``epochs`` once the run is used up)."""
        return self._cursor.epoch if self._cursor.starts else self._epoch_of(self._position())

    def __len__(self) -> int:
        """Batches per epoch on this rank: the run's whole global batches (from
        sample 0) // epochs. The same on every rank and after load_state_dict."""
        return self._epoch_batches

    def __iter__(self) -> Iterator[dict]:
        """The rest of the current epoch (all of it after set_epoch or an
        epoch's end); StokerError once the run is used up."""
        position = self._position()
        if not self._cursor.starts and self._epoch_of(position) >= self._epochs:
            raise _stoker.StokerError(self._used_up_message())
        # Used up: the position is past the epoch last begun, at the next one's start.
        if self._cursor.begin(lambda: self._epoch_of(position) > self._cursor.epoch) == START:
            start = self._epoch_span(self._cursor.epoch)[0]
            if position != start:
                self._move_to(start)
                position = start
        epoch = self._cursor.epoch  # else the position's: the rest of an epoch, or the next one whole
        end = self._epoch_span(epoch)[1]
        left = self._native.plan.batches
        if not self._exact:
            left = min(left, max(0, (end - position) // self._global))
        self._generation += 1
        return _TokenEpochIterator(self, self._generation, left)

    # -- datasets ------------------------------------------------------------------
    def _dataset_counts(self, consumed: int) -> list[int]:
        """Samples each dataset gave the run's first `consumed` samples (all ranks)."""
        import numpy as np

        if self._dataset_index is None:
            return [int(consumed)]
        ids = self._dataset_index[:max(0, int(consumed))]
        return [int(c) for c in np.bincount(ids, minlength=len(self._paths))]

    @property
    def datasets(self) -> list[dict]:
        """Per dataset of the run: ``path``, ``weight`` (as the blend
        normalizes it; 1.0 alone) and ``consumed``: the samples it gave the
        run so far, all ranks together (megatron's BlendedDataset counts)."""
        counts = self._dataset_counts(self._state_position())
        weights = self._weights or [1.0]
        return [{"path": p, "weight": w, "consumed": c} for p, w, c in zip(self._paths, weights, counts)]

    def report(self) -> dict:
        """Loader.report(), with ``datasets`` (see the property)."""
        report = super().report()
        report["datasets"] = self.datasets
        return report

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

    def _hf_dict(self, window, index, dataset_id) -> dict:
        """Hugging Face's convention: ``input_ids`` are megatron's tokens,
        ``labels`` the same ids unshifted (the model shifts them), nothing a
        causal LM's forward does not take."""
        tokens = window[:, :-1] if self._extra_token else window
        batch = {"input_ids": tokens, "labels": tokens.clone()}
        if "position_ids" in self._extras:
            batch["position_ids"] = self._extra("position_ids", window.shape[0])
        self._last_index, self._last_dataset_id = index, dataset_id
        return batch

    def _to_dict(self, item) -> dict:
        _, arrays, *_ = item  # (index, arrays, keys, urls, failed slots)
        convert = self._convert
        window = None
        index = None
        dataset_id = None
        for name, array in arrays:
            if name == "tokens":
                window = convert(array)
            elif name == "__index__":
                index = convert(array)
            elif name == "dataset_id":  # a blend's: written by the C++ reader beside each window
                dataset_id = convert(array)
        if self._hf:
            return self._hf_dict(window, index, dataset_id)
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
        if dataset_id is not None:
            batch["dataset_id"] = dataset_id
        return batch

    @property
    def last_index(self):
        """output="hf": the global sample ids (``__index__``) of the batch
        delivered last (a Hugging Face batch holds only what the model's
        forward takes, so they are kept here)."""
        return self._last_index

    @property
    def last_dataset_id(self):
        """output="hf" over a blend: the ``dataset_id`` of the batch delivered last."""
        return self._last_dataset_id

    @property
    def consumed_samples(self) -> int:
        """Global samples consumed by all ranks so far (megatron's count)."""
        return self._position()

    def _state_position(self) -> int:
        """Where a state saved now resumes: the start of a chosen epoch, else the position."""
        return self._epoch_span(self._cursor.epoch)[0] if self._cursor.starts else self._position()

    def state_dict(self) -> dict:
        """Where the run stands (``consumed_samples``), the epoch it is in,
        the samples each dataset gave so far (``dataset_consumed``) and what
        the run is over (``tokens``: each dataset's name, dtype and sizes,
        the blend's weights, num_samples, seq_len, add_extra_token, split)."""
        native = json.loads(self._native.state())
        native["consumed_samples"] = position = self._state_position()
        native["epoch"] = self._epoch_of(position)
        native["dataset_consumed"] = self._dataset_counts(position)
        native["tokens"] = self._fingerprint
        return {"stoker": native}

    def load_state_dict(self, state: Mapping[str, Any], *, reweight: bool = False) -> None:
        """Continue at the state's ``consumed_samples``. A state of another run
        (another dataset, its size or dtype, other weights, num_samples,
        seq_len, split or add_extra_token) is a StokerError naming each
        difference. ``reweight=True`` accepts other blend weights on purpose,
        as megatron resumes when its blend's weights change: the new blend's
        order from the state's consumed_samples on (so each dataset continues
        at the sample the new weights reach there, not where the old ones
        left it: a warning names each dataset's shift)."""
        native = dict(state["stoker"])
        saved = native.get("tokens")
        if saved is not None:
            diffs = _fingerprint_diffs(saved, self._fingerprint, reweight)
            if diffs:
                fix = ("build the loader as the state's run was built to resume it"
                       + ("" if reweight or saved.get("weights") == self._fingerprint["weights"] else
                          "; to change the blend's weights from the resume point on, "
                          "load_state_dict(state, reweight=True)"))
                raise _stoker.StokerError("TokenLoader state was saved for another run: " + "; ".join(diffs)
                                          + ". To continue, " + fix)
            if reweight and saved.get("weights") != self._fingerprint["weights"]:
                native["dataset_samples"] = self._samples  # the new blend's size
                consumed = int(native["consumed_samples"])
                if consumed > self._samples:
                    raise _stoker.StokerError(
                        f"TokenLoader state: consumed_samples {consumed} is past the new blend's {self._samples} "
                        f"samples: pass a larger num_samples")
                old = native.get("dataset_consumed") or []
                new = self._dataset_counts(consumed)
                for path, was, now in zip(self._paths, old, new):
                    if was != now:
                        _log.warning("stoker.TokenLoader: reweighted blend: %s gave %d samples under the saved "
                                     "weights and continues at its sample %d under the new ones (%d %s)", path,
                                     was, now, abs(now - was), "skipped" if now > was else "to be repeated")
        self._native.restore(json.dumps(native))
        self._cursor.restored(self._epoch_of(self._position()))


def _name(prefix: str) -> str:
    """A dataset's name in a state: its file name, so a copy elsewhere resumes
    (a URL's query, which a signature changes, left out)."""
    path = str(prefix).split("?", 1)[0].rstrip("/")
    return path.rsplit("/", 1)[-1]


def _fingerprint_diffs(saved: Mapping[str, Any], mine: Mapping[str, Any], reweight: bool) -> list[str]:
    """What differs between a saved run and this loader's, in words."""
    diffs = []
    for key in ("num_samples", "seq_len", "add_extra_token", "split_index"):
        if saved.get(key) != mine[key]:
            diffs.append(f"{key}: saved {saved.get(key)!r}, this loader {mine[key]!r}")
    theirs, ours = saved.get("datasets") or [], mine["datasets"]
    if len(theirs) != len(ours):
        diffs.append(f"datasets: saved {[d.get('name') for d in theirs]}, this loader {[d['name'] for d in ours]}")
    else:
        for i, (a, b) in enumerate(zip(theirs, ours)):
            fields = [k for k in ("name", "dtype", "sequences", "documents", "bin_bytes", "documents_in_split")
                      if a.get(k) != b[k]]
            if fields:
                diffs.append(f"dataset {i}: saved " + ", ".join(f"{k}={a.get(k)!r}" for k in fields)
                             + "; this loader " + ", ".join(f"{k}={b[k]!r}" for k in fields)
                             + (" (split " + repr(saved.get("split")) + " vs " + repr(mine["split"]) + ")"
                                if "documents_in_split" in fields else ""))
    w_saved, w_mine = saved.get("weights"), mine["weights"]
    same = (w_saved is None) == (w_mine is None) and (
        w_saved is None or (len(w_saved) == len(w_mine)
                            and all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(w_saved, w_mine))))
    if not same and not (reweight and w_saved is not None and w_mine is not None and len(w_saved) == len(w_mine)):
        diffs.append(f"weights: saved {w_saved}, this loader {w_mine}")
    return diffs


class _TokenEpochIterator(_EpochIterator):
    """One epoch of a TokenLoader: `left` batches, then the end. The native
    run goes on past it (the next epoch's batches are the run's next ones),
    so the next iter() takes them as prepared."""

    def __init__(self, loader: TokenLoader, generation: int, left: int) -> None:
        super().__init__(loader, generation)
        self._left = left

    def __next__(self) -> dict:
        if self._loader is not None and self._left <= 0:
            self._loader = None
            raise StopIteration
        self._left -= 1
        return super().__next__()
