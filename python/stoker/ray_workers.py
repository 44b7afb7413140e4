"""Batches made on other machines: stoker's engine in Ray actors.

    loader = stoker.Loader("data/shard-{000000..000031}.tar", fields=...,
                           batch_size=64, shuffle=True, seed=0,
                           workers=stoker.RayWorkers(count=4, num_cpus=8))

Worker j of N is a Ray actor that runs a ``stoker.Loader`` with the
trainer's options and ``_batch_stride=N, _batch_offset=j``: the native
engine plans the rank's epoch as a local loader would and makes only the
batches b with b % N == j (pipeline/batch_stride.h), so no sample is read
twice and a batch's bytes are those the local loader would make (a sample's
augmentation depends only on the seed, the epoch and the sample). A finished
batch is returned whole, a dict of numpy arrays: Ray puts the arrays in its
object store out of band (pickle protocol 5), with no per-sample pickling.

The trainer keeps ``prefetch`` batch requests in flight per worker and takes
batch b from worker b % N, in order; it copies each array out of the object
store (its pages are read-only there) into a tensor of its own. A worker
that dies (its actor killed, its process or node lost) is replaced by a new
actor with the same offset, restored through the loader's own state to the
batch it owed; its batches are made again and the log names the worker and
how long the step waited. ``state_dict`` is the local loader's format (the
rank's epoch and next batch), so a state saved here resumes a local loader
and the other way round.

Why a loader of its own kind (``RayLoader``) behind ``stoker.Loader(...,
workers=...)``: the trainer builds no native loader (it would read and
decode epoch 0 at once), and every call it answers (iteration, epochs,
state) is a few lines over the workers' replies, not the engine's.
"""
from __future__ import annotations

import json
import logging
import time
from collections import deque
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

_log = logging.getLogger("stoker")

_INSTALL = "stoker.RayWorkers needs Ray: pip install 'stoker[ray]'"

# Loader keywords that belong to the trainer's side (the observer, the
# output library, the device) or are set per worker here.
_TRAINER_ONLY = ("_late_copy_ms", "_gpu_standin_delay_us", "_batch_stride", "_batch_offset", "workers")


def _import_ray():
    try:
        import ray
    except ImportError as e:
        raise ImportError(_INSTALL) from e
    return ray


class RayWorkers:
    """How many Ray actors make a loader's batches, and what each may use.

    ``count`` actors, each reserving ``num_cpus`` CPUs of its node (Ray's
    scheduling); the engine inside sizes its defaults (decode threads, readers)
    to those CPUs, as for one of the node's local ranks (STOKER_LOCAL_RANKS,
    unless set). ``prefetch``:
    batch requests the trainer keeps in flight per worker (each worker's own
    engine also decodes ``prefetch`` batches ahead of its requests).
    ``max_restarts``: how many times the trainer replaces the actor of one
    worker that died before the loader raises. ``actor_options`` go to the
    actor's ``.options()`` (``resources``, ``scheduling_strategy``,
    ``runtime_env``...). Needs ``ray`` (``pip install 'stoker[ray]'``); the
    trainer connects to the cluster ``ray.init`` chose (or starts a local one
    as Ray does by itself).
    """

    def __init__(self, count: int = 1, *, num_cpus: float = 1, prefetch: int = 4, max_restarts: int = 3,
                 actor_options: Mapping[str, Any] | None = None) -> None:
        _import_ray()
        if int(count) < 1:
            raise ValueError(f"RayWorkers count must be at least 1, not {count!r}")
        if int(prefetch) < 1:
            raise ValueError(f"RayWorkers prefetch must be at least 1, not {prefetch!r}")
        if int(max_restarts) < 0:
            raise ValueError(f"RayWorkers max_restarts must be at least 0, not {max_restarts!r}")
        self.count = int(count)
        self.num_cpus = num_cpus
        self.prefetch = int(prefetch)
        self.max_restarts = int(max_restarts)
        self.actor_options = dict(actor_options or {})

    def __repr__(self) -> str:
        return (f"RayWorkers(count={self.count}, num_cpus={self.num_cpus}, prefetch={self.prefetch}, "
                f"max_restarts={self.max_restarts})")


def _plain_fields(fields: Mapping[str, Any]) -> dict:
    """Field specs as plain values (the native specs do not pickle)."""
    from . import _stoker

    plain = {}
    for name, spec in fields.items():
        if not isinstance(spec, _stoker.FieldSpec):
            raise TypeError(f"fields[{name!r}] is not a field spec (stoker.image(), stoker.npy(), ...)")
        image = spec.image
        plain[name] = {
            "field": spec.field, "kind": spec.kind, "dtype": spec.dtype, "max_bytes": spec.max_bytes,
            "image": {a: getattr(image, a) for a in ("height", "width", "mode", "chw", "random_hflip", "scale",
                                                     "ratio", "resample", "resize_to", "pixel", "normalize",
                                                     "mean", "std", "decode")},
        }
    return plain


def _native_fields(plain: Mapping[str, dict]) -> dict:
    from . import _stoker

    fields = {}
    for name, p in plain.items():
        spec = _stoker.FieldSpec()
        spec.field, spec.kind, spec.dtype, spec.max_bytes = p["field"], p["kind"], p["dtype"], p["max_bytes"]
        image = _stoker.ImageSpec()
        for attr, value in p["image"].items():
            setattr(image, attr, value)
        spec.image = image
        fields[name] = spec
    return fields


def _owed_local(next_batch: int, stride: int, offset: int) -> int:
    """Worker `offset`'s own index of its first batch at or after the rank's
    batch `next_batch` (it makes the rank's batches offset, offset + stride, ...)."""
    return max(0, (next_batch - offset + stride - 1) // stride)


class _Worker:
    """The body of one Ray actor: a stoker.Loader making every stride-th batch."""

    def open(self, sources, plain_fields: dict, options: dict, stride: int, offset: int, num_cpus: float) -> dict:
        import math
        import os

        import ray

        from .loader import Loader

        # The engine's defaults count this actor's CPUs, not its node's: the
        # node is shared as among local ranks (core/cpu_share.h), so a 64-core
        # node with num_cpus=16 gives it 16 (a user's own setting stays).
        if "STOKER_LOCAL_RANKS" not in os.environ:
            os.environ["STOKER_LOCAL_RANKS"] = str(max(1, (os.cpu_count() or 1) // max(1, math.ceil(num_cpus))))

        self._stride, self._offset = stride, offset
        self._loader = Loader(sources, _native_fields(plain_fields), output="numpy", observe=False,
                              _batch_stride=stride, _batch_offset=offset, **options)
        self._iter = None
        plan = self._loader.plan
        return {"batches": plan.batches, "rank_samples": plan.rank_samples,
                "dataset_samples": plan.dataset_samples, "dropped_samples": plan.dropped_samples,
                "padded_samples": plan.padded_samples, "num_shards": plan.num_shards,
                "classes": self._loader.classes, "state": self._loader.state_dict()["stoker"],
                "node": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                "cores_from": self._loader.settings["cores_from"]}

    def start(self, epoch: int, state: dict | None) -> int:
        """Begin `epoch` at its start (state None: the run prepared ahead is
        kept) or at the rank's batch state["next_batch"], restored through the
        loader's own state (checked against this loader: seed, dataset, ...)."""
        loader = self._loader
        self._iter = None  # until this start succeeds, next() refuses
        if state is not None:
            local = dict(state, epoch=int(epoch),
                         next_batch=_owed_local(int(state["next_batch"]), self._stride, self._offset))
            loader.load_state_dict({"stoker": local})
        loader.set_epoch(int(epoch))
        self._iter = iter(loader)
        return epoch

    def next(self) -> dict:
        """The next of this worker's batches: numpy arrays (views of the
        engine's pooled buffer, copied once into the object store as they are
        returned) and the ``__key__``/``__url__`` lists."""
        if self._iter is None:
            raise RuntimeError("stoker: this Ray worker's epoch did not start (see the error of its start)")
        return next(self._iter)


class _Slot:
    """One worker's actor and the batches asked of it, in its order."""

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.actor = None
        self.where = ""        # "node 1a2b3c4d, pid 4242", for the log
        self.node = ""         # the Ray node id its actor runs on
        self.cores_from = ""   # the CPUs its engine counts, and why (settings["cores_from"])
        self.pending: deque = deque()  # (rank batch b, ObjectRef), b ascending by stride
        self.next_request = 0  # the rank batch the next request asks for
        self.restarts = 0
        self.batches = 0       # delivered from this worker
        self.wait_s = 0.0      # the trainer waited on its replies (decode not done, or the move)
        self.copy_s = 0.0      # copying its batches out of the object store
        self.lost_s = 0.0      # waits for its replacements


class RayLoader:
    """A loader whose batches are made by Ray actors (``stoker.Loader(...,
    workers=stoker.RayWorkers(...))`` makes one; see the module's docstring).
    Iteration, ``set_epoch``, ``len``, ``plan``, ``state_dict`` /
    ``load_state_dict``, ``step``, ``to`` and ``close`` behave as
    stoker.Loader's; the stream is the local loader's, byte for byte.
    ``report()`` has the trainer's side (t_wait, the verdict) and one line per
    worker, not yet the workers' engine stages. Not yet: the device stage
    (``device="cuda"`` / ``pin_memory``: copy with ``.to()``),
    ``on_error="skip"``, and states saved on another number of ranks."""

    def __init__(self, sources: str | Sequence[str], fields: Mapping[str, Any], *, batch_size: int,
                 workers: RayWorkers, output: str = "torch", observe: bool = True, device: str = "cpu",
                 pin_memory: bool = False, on_error: str = "raise", rank: int | None = None,
                 world_size: int | None = None, log_every: int | None = None, window: int = 50,
                 slow_factor: float = 5.0, slow_floor_s: float = 0.05, jsonl=None, trace_spans: int = 0,
                 **options: Any) -> None:
        ray = _import_ray()
        from .loader import _distributed_rank_world

        if not isinstance(workers, RayWorkers):
            raise TypeError(f"workers must be a stoker.RayWorkers, not {type(workers).__name__}")
        if output not in ("torch", "numpy"):
            raise ValueError(f"output must be 'torch' or 'numpy', not {output!r}")
        if str(device) != "cpu" or pin_memory:
            raise ValueError("workers= delivers host batches: device='cuda' and pin_memory are not built for it "
                             "yet; copy with batch[k].to('cuda', non_blocking=True)")
        if on_error != "raise":
            raise ValueError("workers= supports on_error='raise' only for now: a refill must come from the rank's "
                             "partition, which a worker does not hold")
        if not observe and (jsonl is not None or trace_spans):
            raise ValueError("jsonl and trace_spans need observe=True")
        for key in _TRAINER_ONLY:
            options.pop(key, None)
        if rank is None or world_size is None:  # resolved here: a worker's process has no torchrun environment
            env_rank, env_world = _distributed_rank_world()
            rank = env_rank if rank is None else rank
            world_size = env_world if world_size is None else world_size
        self._ray = ray
        self._workers = workers
        self._open_args = (sources, _plain_fields(fields),
                           dict(options, batch_size=batch_size, rank=rank, world_size=world_size,
                                on_error=on_error))
        self._torch = None
        if output == "torch":
            import torch

            self._torch = torch
        self._slots = [_Slot(j) for j in range(workers.count)]
        self._observer = None
        try:
            infos = self._get([self._spawn(slot) for slot in self._slots])
        except BaseException:
            self.close()
            raise
        self._batches = sum(i["batches"] for i in infos)
        first = infos[0]
        self._plan = SimpleNamespace(
            dataset_samples=first["dataset_samples"], rank_samples=sum(i["rank_samples"] for i in infos),
            dropped_samples=first["dropped_samples"], padded_samples=first["padded_samples"],
            batches=self._batches, num_shards=first["num_shards"])
        self._classes = first["classes"]
        # The rank's state at the start (seed, dataset, partition...): what a
        # state of this loader carries besides its epoch and next batch.
        self._state = dict(first["state"], epoch=0, next_batch=0)
        self._state.pop("elastic", None)
        self._epoch = 0
        self._next = 0  # the rank's next batch in this epoch
        self._resuming = False
        self._epoch_chosen = True
        self._generation = 0
        if observe:  # the trainer's side: t_wait per batch, slow batches, the verdict (no engine stages here)
            from .observe import Observer

            self._observer = Observer(window=window, log_every=log_every, slow_factor=slow_factor,
                                      slow_floor_s=slow_floor_s, jsonl=jsonl, trace_events=trace_spans,
                                      source="stoker.Loader(workers=RayWorkers)",
                                      config={"batch_size": batch_size, "workers": repr(workers),
                                              "batches": self._batches})
        _log.info("stoker: %d Ray workers make this loader's %d batches per epoch (%s)", workers.count,
                  self._batches, "; ".join(f"worker {s.offset}: {s.where}, {s.cores_from}" for s in self._slots))

    # -- workers ------------------------------------------------------------
    def _spawn(self, slot: _Slot):
        """A new actor for `slot`, opening its loader; returns the open's reference."""
        ray = self._ray
        w = self._workers
        cls = ray.remote(_Worker).options(num_cpus=w.num_cpus, max_restarts=0, **w.actor_options)
        slot.actor = cls.remote()
        slot.pending.clear()
        sources, plain_fields, options = self._open_args
        ref = slot.actor.open.remote(sources, plain_fields, options, w.count, slot.offset, w.num_cpus)

        def where(info: dict) -> dict:
            slot.where = f"node {info['node'][:8]}, pid {info['pid']}"
            slot.cores_from = info["cores_from"]
            slot.node = info["node"]
            return info

        return _Opening(ref, where)

    def _get(self, refs):
        """ray.get, with a worker's own exception (a StokerError, a ValueError)
        raised as itself."""
        ray = self._ray
        opening = [r for r in refs if isinstance(r, _Opening)]
        try:
            values = ray.get([r.ref if isinstance(r, _Opening) else r for r in refs])
        except ray.exceptions.RayTaskError as e:
            raise e.as_instanceof_cause() from None
        if opening:
            values = [r.then(v) if isinstance(r, _Opening) else v for r, v in zip(refs, values)]
        return values

    def _state_at(self, next_batch: int) -> dict:
        return dict(self._state, epoch=self._epoch, next_batch=int(next_batch))

    def _begin(self, next_batch: int) -> None:
        """Every worker starts this epoch at the rank's batch `next_batch`."""
        state = None if next_batch == 0 else self._state_at(next_batch)
        starts = []
        for slot in self._slots:
            slot.pending.clear()  # replies of an iteration broken off: not wanted
            starts.append(slot.actor.start.remote(self._epoch, state))
            # The first batch at or after next_batch that is this worker's.
            slot.next_request = next_batch + (slot.offset - next_batch) % len(self._slots)
            self._request(slot)
        # A state a worker's loader refuses (another dataset, seed...) raises
        # here, as the local loader's; a worker that died since is replaced.
        for slot, ref in zip(self._slots, starts):
            try:
                self._get([ref])
            except (self._ray.exceptions.RayActorError, self._ray.exceptions.ObjectLostError) as e:
                began = time.perf_counter()
                self._replace(slot, next_batch + (slot.offset - next_batch) % len(self._slots), e)
                _log.warning("stoker: the start of epoch %d waited %.2f s for Ray worker %d's replacement (%s)",
                             self._epoch, time.perf_counter() - began, slot.offset, slot.where)

    def _request(self, slot: _Slot) -> None:
        """Keeps `prefetch` of the slot's batches asked for (actor calls run in
        the order they are made, so replies come in the worker's order)."""
        while len(slot.pending) < self._workers.prefetch and slot.next_request < self._batches:
            slot.pending.append((slot.next_request, slot.actor.next.remote()))
            slot.next_request += len(self._slots)

    def _replace(self, slot: _Slot, b: int, error: BaseException) -> None:
        """A new actor for a worker that died, restored to the rank's batch b
        (the first it owed); its batches are asked for again."""
        ray = self._ray
        if slot.restarts >= self._workers.max_restarts:
            raise RuntimeError(f"stoker: Ray worker {slot.offset} ({slot.where}) died at batch {b} of epoch "
                               f"{self._epoch} after {slot.restarts} replacements (RayWorkers max_restarts="
                               f"{self._workers.max_restarts}): {type(error).__name__}: {error}") from error
        slot.restarts += 1
        old = slot.where
        try:
            ray.kill(slot.actor, no_restart=True)
        except Exception:  # already gone
            pass
        _log.warning("stoker: Ray worker %d (%s) died at batch %d of epoch %d (%s); a new actor makes its "
                     "batches again from batch %d", slot.offset, old, b, self._epoch, type(error).__name__, b)
        self._get([self._spawn(slot)])
        self._get([slot.actor.start.remote(self._epoch, self._state_at(b))])
        slot.next_request = b
        self._request(slot)

    def _take(self, b: int):
        """The rank's batch b, from its worker; a dead worker is replaced."""
        ray = self._ray
        slot = self._slots[b % len(self._slots)]
        began = time.perf_counter()
        replaced = 0
        while True:
            pending_b, ref = slot.pending[0]
            assert pending_b == b, (pending_b, b)
            try:
                batch = self._get([ref])[0]
                break
            except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as e:
                self._replace(slot, b, e)
                replaced += 1
            except BaseException:  # the worker's own error for this batch: delivered, as the local loader's
                slot.pending.popleft()
                self._request(slot)
                raise
        slot.pending.popleft()
        self._request(slot)
        waited = time.perf_counter() - began
        slot.batches += 1
        if replaced:
            slot.lost_s += waited
        else:
            slot.wait_s += waited
        if replaced:
            _log.warning("stoker: batch %d of epoch %d waited %.2f s for Ray worker %d's replacement (%s)", b,
                         self._epoch, time.perf_counter() - began, slot.offset, slot.where)
        return batch

    @property
    def actors(self) -> list:
        """The workers' Ray actor handles, worker j's at j (replacements included)."""
        return [slot.actor for slot in self._slots]

    @property
    def cores_from(self) -> list[str]:
        """The CPUs each worker's engine counts and why (its settings["cores_from"])."""
        return [slot.cores_from for slot in self._slots]

    @property
    def nodes(self) -> list[str]:
        """The Ray node id each worker's actor runs on, worker j's at j."""
        return [slot.node for slot in self._slots]

    # -- epochs and length ------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """As stoker.Loader.set_epoch."""
        self._epoch_chosen = True
        if self._resuming and int(epoch) == self._epoch:
            return
        self._epoch = int(epoch)
        self._next = 0
        self._resuming = False

    @property
    def epoch(self) -> int:
        return self._epoch

    def __len__(self) -> int:
        """Batches per epoch on this rank (equal on every rank)."""
        return self._batches

    @property
    def plan(self):
        """Samples in the dataset, on this rank, dropped and padded; batches (the rank's, all workers together)."""
        return self._plan

    @property
    def classes(self) -> list[str] | None:
        return self._classes

    def __iter__(self):
        """One pass over an epoch, as stoker.Loader's (an iter() after a
        used-up epoch without set_epoch begins the next)."""
        if not self._slots:
            raise RuntimeError("this loader was closed")
        if not self._epoch_chosen and self._batches > 0 and self._next >= self._batches:
            self._epoch += 1
            self._next = 0
        elif not self._resuming:
            self._next = 0
        self._epoch_chosen = False
        self._resuming = False
        self._generation += 1
        self._begin(self._next)
        return _RayEpochIterator(self, self._generation)

    def _deliver(self, batch: dict, slot: _Slot) -> dict:
        """The object store's read-only arrays copied into arrays (tensors) of our own."""
        import numpy as np

        began = time.perf_counter()

        torch = self._torch

        def own(a):
            if isinstance(a, np.ndarray):
                a = np.array(a, copy=True)
                return torch.from_numpy(a) if torch is not None else a
            if isinstance(a, dict):  # an NPZ field's members
                return {k: own(v) for k, v in a.items()}
            return a

        out = {k: own(v) for k, v in batch.items()}
        slot.copy_s += time.perf_counter() - began
        return out

    # -- observing --------------------------------------------------------------------
    @property
    def observer(self):
        return self._observer

    def step(self):
        """``with loader.step(): train(batch)``: as stoker.Loader.step."""
        import contextlib

        return contextlib.nullcontext() if self._observer is None else self._observer.step()

    def to(self, batch, device, non_blocking: bool = True):
        """Copies a batch's tensors to ``device``, timed as t_h2d."""
        from .observe import to_device

        return to_device(batch, device, non_blocking=non_blocking, observer=self._observer)

    def report(self) -> dict:
        """The trainer's golden numbers and verdict (as stoker.Loader.report,
        without the engine's stages, which run in the workers), and
        ``workers``: one line per worker: where it runs, the batches it
        delivered, the seconds the trainer waited on its replies (``wait_s``),
        spent copying them out of the object store (``copy_s``) and waited for
        its replacements (``lost_s``, ``restarts``)."""
        if self._observer is None:
            raise RuntimeError("this loader was created with observe=False")
        report = self._observer.report()
        report["workers"] = [
            {"worker": s.offset, "where": s.where, "cores_from": s.cores_from, "batches": s.batches,
             "wait_s": round(s.wait_s, 4), "copy_s": round(s.copy_s, 4), "lost_s": round(s.lost_s, 4),
             "restarts": s.restarts,
             "line": (f"worker {s.offset} ({s.where}): {s.batches} batches, waited {s.wait_s:.2f} s, "
                      f"copied {s.copy_s:.2f} s, {s.restarts} replacements ({s.lost_s:.2f} s)")}
            for s in self._slots]
        return report

    summary = report

    def save_trace(self, path) -> None:
        """The trainer's wait and step spans as a Chrome trace (needs trace_spans=N)."""
        if self._observer is None:
            raise RuntimeError("this loader was created with observe=False")
        self._observer.save_trace(path)

    # -- resumption ---------------------------------------------------------------
    def state_dict(self) -> dict:
        """The rank's position, in stoker.Loader's format (a local loader resumes it too)."""
        return {"stoker": self._state_at(self._next)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue with exactly the batches not yet delivered, in order (the
        workers check the state against their loaders when the iteration begins)."""
        native = dict(state["stoker"])
        if native.get("elastic") or int(native.get("world_size", self._state["world_size"])) != \
                self._state["world_size"]:
            raise ValueError("workers= cannot resume a state saved on another number of ranks yet "
                             "(elastic resume): resume it with a local stoker.Loader")
        for key in ("epoch", "next_batch"):
            if not isinstance(native.get(key), int):
                raise ValueError(f"loader state lacks integer {key!r}")
        if not 0 <= native["next_batch"] <= self._batches:
            raise ValueError(f"loader state next_batch {native['next_batch']} is outside 0..{self._batches}")
        mine = {k: v for k, v in self._state.items() if k not in ("epoch", "next_batch", "skip")}
        for key, value in mine.items():
            if key in native and native[key] != value:
                raise ValueError(f"loader state was saved with {key}={json.dumps(native[key])}, "
                                 f"this loader has {json.dumps(value)}")
        self._state = dict(self._state, **{k: v for k, v in native.items() if k not in ("epoch", "next_batch")})
        self._epoch = native["epoch"]
        self._next = native["next_batch"]
        self._resuming = True
        self._epoch_chosen = False

    def close(self) -> None:
        """Ends the workers' actors (their batches in flight are dropped);
        writes the observer's final summary."""
        ray = getattr(self, "_ray", None)
        observer, self._observer = getattr(self, "_observer", None), None
        if observer is not None:
            observer.close()
        for slot in getattr(self, "_slots", []):
            if slot.actor is not None:
                try:
                    ray.kill(slot.actor, no_restart=True)
                except Exception:  # the cluster or the actor is gone already
                    pass
                slot.actor = None
            slot.pending.clear()
        self._slots = []

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class _Opening:
    """An actor's open() reference and what to do with its reply."""

    def __init__(self, ref, then) -> None:
        self.ref = ref
        self.then = then


class _RayEpochIterator:
    """One pass over an epoch; a failed batch raises and the iterator stays
    usable (the next call yields the batch after it), as stoker.Loader's."""

    def __init__(self, loader: RayLoader, generation: int) -> None:
        self._loader = loader
        self._generation = generation

    def __iter__(self) -> "_RayEpochIterator":
        return self

    def __next__(self) -> dict:
        loader = self._loader
        if loader is None or loader._generation != self._generation or loader._next >= loader._batches:
            self._loader = None
            if loader is not None and loader._observer is not None:
                loader._observer.end()  # the last batch's step ends now
            raise StopIteration
        b = loader._next
        loader._next += 1  # a failed batch counts as delivered, as the local loader's
        slot = loader._slots[b % len(loader._slots)]
        obs = loader._observer
        if obs is None:
            return loader._deliver(loader._take(b), slot)
        t0 = obs.request()
        batch = loader._deliver(loader._take(b), slot)
        obs.delivered(t0)
        return batch
