"""Batches made on other machines: stoker's engine in Ray actors, beside the trainer's own.

    loader = stoker.Loader("data/shard-{000000..000031}.tar", fields=...,
                           batch_size=64, shuffle=True, seed=0,
                           workers=stoker.RayWorkers(count=4, num_cpus=8))

The rank's batches are dealt in cycles: each worker, and the trainer itself
unless ``local=0``, holds a share of consecutive places in every cycle, in
proportion to its CPUs (worker j of 4 with 8 CPUs each, and a trainer with 4:
a cycle of 9 batches, 1 for the trainer and 2 for each worker). Each is a
``stoker.Loader`` with the trainer's options and ``_batch_stride`` (the
cycle), ``_batch_offset`` and ``_batch_share``: the native engine plans the
rank's epoch as a local loader would and makes only its own batches
(pipeline/batch_stride.h), so no sample is read twice and a batch's bytes are
those the local loader would make (a sample's augmentation depends only on the
seed, the epoch and the sample). A worker's finished batch is returned whole,
a dict of numpy arrays: Ray puts the arrays in its object store out of band
(pickle protocol 5), with no per-sample pickling, and the worker's engine
counters ride along for ``report()``.

The trainer keeps ``prefetch`` batch requests in flight per worker and takes
the batches in order; it copies each worker's arrays out of the object store
(its pages are read-only there) into a tensor of its own, once. The trainer's
own share comes from its in-process loader, as a local loader's batches do.
With ``device="cuda"`` or ``pin_memory=True`` every batch, the trainer's
share's too, is copied into the pooled (page-locked) buffers of the
trainer's own engine instead, which copies it on to the device as the local
loader does (pipeline/device_stage.h).
A worker that dies (its actor killed, its process or node lost) is replaced
by a new actor with the same share, restored through the loader's own state
to the batch it owed; its batches are made again and the log names the
worker and how long the step waited. ``state_dict`` is the local loader's
format (the rank's epoch and next batch), so a state saved here resumes a
local loader and the other way round.

With ``on_error="skip"`` the refills must be the rank's (its whole partition
read again from its start, in the rank's batch order: pipeline/skip_refill.h),
which no share sees: each share leaves a bad sample's slot as it is and names
it, and the trainer's own engine, a loader that makes no batch
(``_batch_share=0``), receives every batch in order (``Loader::Receive``),
copies it into its pool, refills the slots and keeps the budget, in C++.

Why a loader of its own kind (``RayLoader``) behind ``stoker.Loader(...,
workers=...)``: every call it answers (iteration, epochs, state) is a few
lines over its shares' replies, not the engine's.
"""
from __future__ import annotations

import json
import logging
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

from . import _stoker
from .epochs import NEXT, RESUME, EpochCursor
from .loader import Loader, register_workers
from .options import _distributed_rank_world

_log = logging.getLogger("stoker")

_INSTALL = "stoker.RayWorkers needs Ray: pip install 'stoker[ray]'"

# Loader keywords that belong to the trainer's side (the observer, the
# output library, the device) or are set per worker here.
_TRAINER_ONLY = ("_late_copy_ms", "_gpu_standin_delay_us", "_gpu_standin_stall_after", "_gpu_standin_watchdog_ms",
                 "_batch_stride", "_batch_offset", "_batch_share",
                 "_leave_failed_slots", "workers")


def _import_ray():
    try:
        import ray
    except ImportError as e:
        raise ImportError(_INSTALL) from e
    return ray


class RayWorkers:
    """How many Ray actors make a loader's batches, what each may use, and
    how much the trainer decodes beside them.

    ``count`` actors, each reserving ``num_cpus`` CPUs of its node (Ray's
    scheduling); the engine inside sizes its defaults (decode threads, readers)
    to those CPUs, as for one of the node's local ranks (STOKER_LOCAL_RANKS,
    unless set). ``local``: the trainer's own CPUs that decode its share beside
    the workers; None (the default) counts those its engine would use (its
    affinity and quota, shared among the node's local ranks), 0 leaves all
    decoding to the workers. Batches are dealt in proportion to the CPUs.
    ``prefetch``: batch requests the trainer keeps in flight per worker (each
    worker's own engine also decodes ``prefetch`` batches ahead of its
    requests). ``max_restarts``: how many times the trainer replaces the actor
    of one worker that died before the loader raises. ``actor_options`` go to
    the actor's ``.options()`` (``resources``, ``scheduling_strategy``,
    ``runtime_env``...). Needs ``ray`` (``pip install 'stoker[ray]'``); the
    trainer connects to the cluster ``ray.init`` chose (or starts a local one
    as Ray does by itself).

    Self-sizing: with ``max_count`` (above ``count``) the loader asks Ray for
    one more worker when the trainer waited more than a tenth of its time over
    the last ``scale_every`` batches, up to ``max_count`` (Ray's autoscaler
    adds a node where none has room; a worker not placed within
    ``grow_timeout_s`` is given up, and the log says so). With ``min_count``
    (below ``count``) it hands one back when the trainer did not wait and the
    workers would keep up with one fewer, their decoders under three quarters
    busy. The deal changes between two batches; the stream stays the same.
    """

    def __init__(self, count: int = 1, *, num_cpus: float = 1, local: float | None = None, prefetch: int = 4,
                 max_restarts: int = 3, min_count: int | None = None, max_count: int | None = None,
                 scale_every: int = 32, grow_timeout_s: float = 60.0,
                 actor_options: Mapping[str, Any] | None = None) -> None:
        _import_ray()
        if int(count) < 1:
            raise ValueError(f"RayWorkers count must be at least 1, not {count!r}")
        if not num_cpus > 0:
            raise ValueError(f"RayWorkers num_cpus must be more than 0, not {num_cpus!r}")
        if local is not None and not local >= 0:
            raise ValueError(f"RayWorkers local must be None (the trainer's cores) or at least 0, not {local!r}")
        if int(prefetch) < 1:
            raise ValueError(f"RayWorkers prefetch must be at least 1, not {prefetch!r}")
        if int(max_restarts) < 0:
            raise ValueError(f"RayWorkers max_restarts must be at least 0, not {max_restarts!r}")
        self.min_count = int(count if min_count is None else min_count)
        self.max_count = int(count if max_count is None else max_count)
        if not 1 <= self.min_count <= int(count) <= self.max_count:
            raise ValueError(f"RayWorkers needs 1 <= min_count <= count <= max_count, not {self.min_count}, "
                             f"{count}, {self.max_count}")
        if int(scale_every) < 1:
            raise ValueError(f"RayWorkers scale_every must be at least 1 batch, not {scale_every!r}")
        self.scale_every = int(scale_every)
        self.grow_timeout_s = float(grow_timeout_s)
        self.count = int(count)
        self.num_cpus = num_cpus
        self.local = local
        self.prefetch = int(prefetch)
        self.max_restarts = int(max_restarts)
        self.actor_options = dict(actor_options or {})

    def __repr__(self) -> str:
        sizing = (f", min_count={self.min_count}, max_count={self.max_count}"
                  if (self.min_count, self.max_count) != (self.count, self.count) else "")
        return (f"RayWorkers(count={self.count}, num_cpus={self.num_cpus}, local={self.local}, "
                f"prefetch={self.prefetch}, max_restarts={self.max_restarts}{sizing})")


def _shares(local_cpus: float, num_cpus: float) -> tuple[int, int]:
    """The trainer's and each worker's places in a cycle, in the ratio of
    their CPUs, in small integers (a cycle stays short, so every share's
    batches come evenly through the epoch): 4 and 16 -> 1 and 4."""
    from fractions import Fraction

    ratio = Fraction(local_cpus / num_cpus).limit_denominator(8)
    return ratio.numerator, ratio.denominator


def _owed_local(next_batch: int, cycle: int, offset: int, share: int) -> int:
    """A share's own index of its first batch at or after the rank's batch
    `next_batch` (it makes the rank's batches whose place in each cycle of
    `cycle` batches is offset .. offset + share - 1)."""
    return next_batch // cycle * share + min(max(next_batch % cycle - offset, 0), share)


def _engine_stats(loader) -> dict:
    """A share's engine counters since its start, for the trainer's report()."""
    s = loader.engine.stats()
    return {"time_s": s["time_s"], "read_busy_s": s["read"]["busy_s"], "decode_busy_s": s["decode"]["busy_s"],
            "decode_threads": s["decode_threads"], "samples": s["decode"]["items"],
            "next_wait_s": s["consumer_wait_s"], "pool_wait_s": s["pool_wait_s"]}


def _engine_stages(stats: dict) -> dict:
    """A share's engine counters as the stages' shares of its time."""
    t = stats.get("time_s") or 0.0
    if not t:
        return {"read_busy": 0.0, "decode_busy": 0.0, "decode_threads": 0, "samples_per_s": 0.0,
                "line": "engine: no batch yet"}
    threads = max(1, stats["decode_threads"])
    out = {"read_busy": round(stats["read_busy_s"] / t, 3),
           "decode_busy": round(stats["decode_busy_s"] / (t * threads), 3), "decode_threads": threads,
           "samples_per_s": round(stats["samples"] / t, 1)}
    out["line"] = (f"engine: decoders {out['decode_busy']:.0%} busy ({threads} threads), reader "
                   f"{out['read_busy']:.0%}, {out['samples_per_s']:.0f} samples/s")
    return out


class _Worker:
    """The body of one Ray actor, or of the trainer's own share: a
    stoker.Loader making the rank's batches of its places in each cycle."""

    def open(self, sources, fields: dict, options: dict, cycle: int, offset: int, share: int,
             num_cpus: float | None, raw: bool = False) -> dict:
        """num_cpus: the actor's CPUs; None: the trainer's own share (output
        and defaults as the trainer's own loader's). raw: next() gives the
        engine's batch as it is, for the trainer's receiving loader to finish."""
        import math
        import os

        self._opened = (sources, fields, options, num_cpus, raw)
        self._raw = raw
        if num_cpus is not None:
            import ray

            # The engine's defaults count this actor's CPUs, not its node's: the
            # node is shared as among local ranks (core/cpu_share.h), so a 64-core
            # node with num_cpus=16 gives it 16 (a user's own setting stays).
            if "STOKER_LOCAL_RANKS" not in os.environ:
                os.environ["STOKER_LOCAL_RANKS"] = str(max(1, (os.cpu_count() or 1) // max(1, math.ceil(num_cpus))))
            node = ray.get_runtime_context().get_node_id()
            options = dict(options, output="numpy")
        else:
            node = "trainer"
        self._cycle, self._offset, self._share = cycle, offset, share
        self._remote = num_cpus is not None
        self._loader = Loader(sources, fields, observe=False, _batch_stride=cycle, _batch_offset=offset,
                              _batch_share=share, _leave_failed_slots=raw and options.get("on_error") == "skip",
                              **options)
        self._iter = None
        plan = self._loader.plan
        return {"batches": plan.batches, "rank_samples": plan.rank_samples,
                "dataset_samples": plan.dataset_samples, "dropped_samples": plan.dropped_samples,
                "padded_samples": plan.padded_samples, "num_shards": plan.num_shards,
                "classes": self._loader.classes, "state": self._loader.state_dict()["stoker"],
                "node": node, "pid": os.getpid(), "cores_from": self._loader.settings["cores_from"]}

    def start(self, epoch: int, state: dict | None) -> int:
        """Begin `epoch` at its start (state None: the run prepared ahead is
        kept) or at the rank's batch state["next_batch"], restored through the
        loader's own state (checked against this loader: seed, dataset, ...;
        an "elastic" list of stages: the rest of an epoch begun on other
        world sizes). Returns this share's batches in the epoch."""
        loader = self._loader
        self._iter = None  # until this start succeeds, next() refuses
        if state is not None:
            local = dict(state, epoch=int(epoch),
                         next_batch=_owed_local(int(state["next_batch"]), self._cycle, self._offset, self._share))
            loader.load_state_dict({"stoker": local})
        loader.set_epoch(int(epoch))
        self._iter = iter(loader)
        return len(loader)

    def next(self):
        """The next of this share's batches. From an actor: (numpy arrays,
        views of the engine's pooled buffer copied once into the object store
        as they are returned, with the ``__key__``/``__url__`` lists; the
        engine's counters). In the trainer: the batch, as its loader's.
        Raw (the trainer finishes each batch): the engine's item instead,
        (index, [(name, array)], keys, urls, [(slot, cause)]), whose last
        list names the slots on_error="skip" left for the trainer to refill."""
        if self._iter is None:
            raise RuntimeError("stoker: this Ray worker's epoch did not start (see the error of its start)")
        if self._raw:
            batch = self._loader.engine.next_raw()
            if batch is None:
                raise RuntimeError("stoker: a Ray worker was asked for a batch past its share of the epoch")
        else:
            batch = next(self._iter)
        return (batch, _engine_stats(self._loader)) if self._remote else batch

    def stats(self) -> dict:
        return _engine_stats(self._loader)

    def reshare(self, cycle: int, offset: int, share: int) -> dict:
        """A new deal (workers joined or left): the loader opened again for
        these places of a cycle; start() follows."""
        sources, fields, options, num_cpus, raw = self._opened
        self.close()
        return self.open(sources, fields, options, cycle, offset, share, num_cpus, raw)

    def ping(self) -> int:
        """Answers once the actor is placed and running."""
        import os

        return os.getpid()

    def close(self) -> None:
        self._iter = None
        self._loader.close()


def _decode_busy(now: dict, then: dict | None) -> float:
    """A worker's decoders' busy share between two of its counters (_engine_stats)."""
    if not now or not then:
        return 1.0  # not measured yet: counted as busy, so no worker is handed back on no evidence
    t = now["time_s"] - then["time_s"]
    if t <= 0:
        return 1.0
    return min(1.0, (now["decode_busy_s"] - then["decode_busy_s"]) / (t * max(1, now["decode_threads"])))


class _Window:
    """The trainer's waits over the batches since the last sizing decision,
    and each worker's engine counters when it began."""

    def __init__(self, slots=()) -> None:
        self.began = time.perf_counter()
        self.batches = 0
        self.wait_s = 0.0
        self.engine = {slot.name: dict(slot.engine) for slot in slots}


def _fetch(ray, ref):
    """A worker's reply moved to this node: (its value, when it was made,
    when it was here), perf_counter seconds; a fetch thread's work."""
    ray.wait([ref], fetch_local=False)  # made (or failed) on its node
    made = time.perf_counter()
    value = ray.get(ref)
    return value, made, time.perf_counter()


class _Slot:
    """One share of the cycle: a worker's actor and the batches asked of it,
    in its order, or the trainer's own loader (``local``)."""

    def __init__(self, name: str, offset: int, share: int) -> None:
        self.name = name       # "worker 2", or "trainer"
        self.offset = offset   # its first place in each cycle
        self.share = share     # its places in each cycle
        self.actor = None
        self.local: _Worker | None = None
        self.where = ""        # "node 1a2b3c4d, pid 4242", for the log
        self.node = ""         # the Ray node id its actor runs on ("trainer": in the trainer)
        self.cores_from = ""   # the CPUs its engine counts, and why (settings["cores_from"])
        self.pending: deque = deque()  # [rank batch b, ObjectRef, its fetch (a Future) or None], b ascending
        self.next_request = 0  # the rank batch the next request asks for
        self.restarts = 0
        self.batches = 0       # delivered from this share
        self.wait_s = 0.0      # the trainer waited for its batches (made, then moved here)
        self.move_s = 0.0      # its batches took to move to the trainer's node (mostly while steps ran)
        self.copy_s = 0.0      # copying its batches out of the object store
        self.bytes = 0         # the arrays' bytes moved
        self.lost_s = 0.0      # waits for its replacements
        self.engine: dict = {}  # its engine's counters, as of its latest batch (_engine_stats)


class RayLoader:
    """A loader whose batches are made by Ray actors and the trainer itself
    (``stoker.Loader(..., workers=stoker.RayWorkers(...))`` makes one; see the
    module's docstring). Iteration, ``set_epoch``, ``len``, ``plan``,
    ``state_dict`` / ``load_state_dict`` (states of other world sizes too),
    ``step``, ``to`` and ``close`` behave as stoker.Loader's; the stream is
    the local loader's, byte for byte. ``report()`` has the trainer's side
    (t_wait, the verdict), the move through the object store, and one line
    per share with its engine's stages. ``resize`` changes the workers between
    batches.

    ``on_error="skip"``, ``device`` and ``pin_memory`` behave as
    stoker.Loader's (``device="cuda"`` without CUDA raises its error before
    any actor starts). With any of them the trainer finishes every batch in
    its own engine (a loader that makes none itself, ``_batch_share=0``;
    ``Loader::Receive`` in C++), in the rank's batch order: the shares leave
    a bad sample's slot as it is and name it, and the trainer copies each
    batch into its pool (page-locked with ``pin_memory``), refills those
    slots from the rank's partition under the budget, as the local loader
    does at delivery (pipeline/skip_refill.h: a worker sees only its
    batches, so its refills would not be the rank's), and copies the batch
    on to the device. The refills' position, known-bad samples and counts
    are in ``state_dict``; ``skips`` and ``report()`` count them. With a
    device and no skip, the next batch is received (and its copy to the
    device issued) while the step runs, as the local loader's copy is; with
    skip, a batch is received when it is taken, since the refills' state a
    ``state_dict`` saves is that of the batches delivered."""

    def __init__(self, sources: str | Sequence[str], fields: Mapping[str, Any], *, batch_size: int,
                 workers: RayWorkers, output: str = "torch", observe: bool = True, device: str = "cpu",
                 pin_memory: bool = False, on_error: str = "raise", rank: int | None = None,
                 world_size: int | None = None, log_every: int | None = None, window: int = 50,
                 slow_factor: float = 5.0, slow_floor_s: float = 0.05, jsonl=None, trace_spans: int = 0,
                 **options: Any) -> None:
        ray = _import_ray()
        if not isinstance(workers, RayWorkers):
            raise TypeError(f"workers must be a stoker.RayWorkers, not {type(workers).__name__}")
        if output not in ("torch", "numpy"):
            raise ValueError(f"output must be 'torch' or 'numpy', not {output!r}")
        if not observe and (jsonl is not None or trace_spans):
            raise ValueError("jsonl and trace_spans need observe=True")
        if options.get("map") is not None or options.get("batch_map") is not None:
            raise ValueError("map= and batch_map= run on the loader's own decode threads: not with workers= (the "
                             "batches would come back without the map's lists); leave workers= out")
        device_tests = {k: options[k] for k in ("_late_copy_ms", "_gpu_standin_delay_us", "_gpu_standin_stall_after",
                                                "_gpu_standin_watchdog_ms") if k in options}
        for key in _TRAINER_ONLY:
            options.pop(key, None)
        if rank is None or world_size is None:  # resolved here: a worker's process has no torchrun environment
            env_rank, env_world = _distributed_rank_world()
            rank = env_rank if rank is None else rank
            world_size = env_world if world_size is None else world_size
        self._ray = ray
        self._workers = workers
        self._open_args = (sources, dict(fields),  # specs pickle by value
                           dict(options, batch_size=batch_size, rank=rank, world_size=world_size,
                                on_error=on_error))
        self._slots = []
        self._receiver = None
        if on_error == "skip" or str(device) != "cpu" or pin_memory:
            # The trainer's engine finishes every batch (the class docstring):
            # made first, so that device="cuda" without CUDA fails before any actor.
            self._receiver = Loader(sources, dict(fields), observe=False, output=output, device=device,
                                    pin_memory=pin_memory, _batch_share=0, **device_tests, **self._open_args[2])
        self._torch = None
        if output == "torch":
            import torch

            self._torch = torch
        # The cycle: the trainer's places first (its loader in this process
        # makes the epoch's first batch with no round trip), then each worker's.
        local_cpus = _stoker.cpu_share()["cores"] if workers.local is None else workers.local
        local_share, self._worker_share = _shares(local_cpus, workers.num_cpus)
        self._slots = [_Slot("trainer", 0, local_share)] if local_share else []
        self._slots += [_Slot(f"worker {j}", 0, self._worker_share) for j in range(workers.count)]
        self._deal()
        self._growing = None  # (actor, its ping, since, why): a worker asked of Ray, not yet placed
        self._window = _Window()
        self._sizing = workers.min_count < workers.max_count
        self._iterating = False  # an epoch's iteration has begun and not ended
        self._observer = None
        # Two batches move at once from the workers' nodes (_fetch_ahead).
        self._fetcher = ThreadPoolExecutor(max_workers=2, thread_name_prefix="stoker-ray-fetch")
        # With device copies (and no skip: see the class docstring), batch b + 1 is
        # taken on this one thread while the step on batch b runs (_take_due).
        self._ahead = None  # (b, its future)
        self._receiving = None
        if self._receiver is not None and self._receiver.engine.device != "cpu" and on_error != "skip":
            self._receiving = ThreadPoolExecutor(max_workers=1, thread_name_prefix="stoker-ray-receive")
        try:
            infos = self._get([self._spawn(slot) for slot in self._remote_slots()])
            if local_share:
                infos.insert(0, self._open_local(self._slots[0], output))
        except BaseException:
            self.close()
            raise
        self._batches = sum(i["batches"] for i in infos)  # this epoch's (the rank's, all shares together)
        self._stages = None  # this epoch's elastic stages: the rest of an epoch begun on other world sizes
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
        self._cursor = EpochCursor()  # the epoch of the next iter(), and how it begins (epochs.py)
        self._next = 0  # the rank's next batch in this epoch
        self._generation = 0
        if observe:  # the trainer's side: t_wait per batch, slow batches, the verdict (the shares' stages: report())
            from .observe import Observer

            self._observer = Observer(window=window, log_every=log_every, slow_factor=slow_factor,
                                      slow_floor_s=slow_floor_s, jsonl=jsonl, trace_events=trace_spans,
                                      source="stoker.Loader(workers=RayWorkers)",
                                      config={"batch_size": batch_size, "workers": repr(workers),
                                              "batches": self._batches, "cycle": self._cycle})
        _log.info("stoker: %d Ray workers%s make this loader's %d batches per epoch, in cycles of %d (%s)",
                  workers.count, " and the trainer" if local_share else "", self._batches, self._cycle,
                  "; ".join(f"{s.name}: {s.share} of each cycle, {s.where}, {s.cores_from}" for s in self._slots))

    # -- workers ------------------------------------------------------------
    def _deal(self) -> None:
        """Each share's places in the cycle, the trainer's first, in slot order."""
        offset = 0
        for slot in self._slots:
            slot.offset = offset
            offset += slot.share
        self._cycle = offset
        self._owner = [slot for slot in self._slots for _ in range(slot.share)]  # place in the cycle -> slot

    def _remote_slots(self) -> list[_Slot]:
        return [slot for slot in self._slots if slot.name != "trainer"]

    def _open_local(self, slot: _Slot, output: str) -> dict:
        """The trainer's own share: a loader in this process, as a local loader."""
        sources, fields, options = self._open_args
        slot.local = _Worker()
        info = slot.local.open(sources, fields, dict(options, output=output), self._cycle, slot.offset,
                               slot.share, None, self._receiver is not None)
        slot.where = f"this process, pid {info['pid']}"
        slot.node, slot.cores_from = "trainer", info["cores_from"]
        return info

    def _new_actor(self):
        w = self._workers
        return self._ray.remote(_Worker).options(num_cpus=w.num_cpus, max_restarts=0, **w.actor_options).remote()

    def _spawn(self, slot: _Slot, actor=None):
        """`actor` (a new one if None) for `slot`, opening its loader; returns the open's reference."""
        w = self._workers
        slot.actor = actor if actor is not None else self._new_actor()
        slot.pending.clear()
        sources, fields, options = self._open_args
        ref = slot.actor.open.remote(sources, fields, options, self._cycle, slot.offset, slot.share,
                                     w.num_cpus, self._receiver is not None)

        def where(info: dict) -> dict:
            slot.where = f"node {info['node'][:8]}, pid {info['pid']}"
            slot.cores_from = info["cores_from"]
            slot.node = info["node"]
            return info

        return _Opening(ref, where)

    def _reshare(self, slot: _Slot):
        """The slot's actor opens its loader again for its places in the new deal."""

        def where(info: dict) -> dict:
            slot.cores_from = info["cores_from"]
            return info

        slot.pending.clear()
        return _Opening(slot.actor.reshare.remote(self._cycle, slot.offset, slot.share), where)

    # -- self-sizing ------------------------------------------------------------
    def resize(self, count: int, why: str = "asked") -> None:
        """``count`` workers from the next batch on (at least 1): surplus
        actors end, new ones are asked of Ray and waited for, and every share
        is dealt its places again (the stream stays the local loader's)."""
        count = int(count)
        if count < 1:
            raise ValueError(f"a loader with workers= keeps at least 1 worker, not {count}")
        if count != len(self._remote_slots()):
            self._resize_to(count, None, why)

    def _resize_to(self, count: int, spare, why: str) -> None:
        self._drop_ahead()  # the shares are dealt again from self._next
        began = time.perf_counter()
        ray = self._ray
        remote = self._remote_slots()
        before = len(remote)
        for slot in remote[count:]:
            try:
                ray.kill(slot.actor, no_restart=True)
            except Exception:  # already gone
                pass
        trainer = [s for s in self._slots if s.local is not None]
        kept = remote[:count]
        new = [_Slot(f"worker {j}", 0, self._worker_share) for j in range(len(kept), count)]
        self._slots = trainer + kept + new
        self._deal()
        refs = [self._reshare(slot) for slot in kept]
        refs += [self._spawn(slot, spare if i == 0 else None) for i, slot in enumerate(new)]
        for slot in trainer:
            slot.local.reshare(self._cycle, slot.offset, slot.share)
        self._get(refs)
        if self._iterating:
            self._begin(self._next)
        self._window = _Window()
        _log.warning("stoker: %d Ray workers instead of %d from batch %d of epoch %d (%s); the batches are dealt "
                     "in cycles of %d; %.2f s to switch", count, before, self._next, self.epoch, why, self._cycle,
                     time.perf_counter() - began)

    def _autoscale(self) -> None:
        """Between two batches: asks Ray for a worker when the trainer waits,
        hands one back when the workers idle (RayWorkers min_count/max_count)."""
        w, ray = self._workers, self._ray
        count = len(self._remote_slots())
        if self._growing is not None:
            actor, ping, since, why = self._growing
            ready, _ = ray.wait([ping], timeout=0)
            if ready:
                self._growing = None
                try:
                    ray.get(ping)
                except Exception as e:  # it died before it was used: asked again after a window
                    _log.warning("stoker: the Ray worker asked for (%s) died before it joined: %s", why, e)
                    return
                self._resize_to(count + 1, actor, why)
            elif time.perf_counter() - since > w.grow_timeout_s:
                self._growing = None
                try:
                    ray.kill(actor, no_restart=True)
                except Exception:
                    pass
                _log.warning("stoker: Ray placed no worker of num_cpus=%s in %.0f s (%s); the loader keeps %d "
                             "workers", w.num_cpus, w.grow_timeout_s, why, count)
                self._window = _Window()
            return
        win = self._window
        if win.batches < w.scale_every:
            return
        span = time.perf_counter() - win.began
        waited = win.wait_s / span if span > 0 else 0.0
        busy = sum(_decode_busy(slot.engine, win.engine.get(slot.name)) for slot in self._remote_slots())
        self._window = _Window(self._remote_slots())
        if waited > 0.1 and count < w.max_count:
            why = (f"the trainer waited {waited:.0%} of the last {win.batches} batches' time, the workers' "
                   f"decoders {busy / count:.0%} busy")
            actor = self._new_actor()
            self._growing = (actor, actor.ping.remote(), time.perf_counter(), why)
            _log.info("stoker: asking Ray for Ray worker %d of at most %d: %s", count, w.max_count, why)
        elif waited < 0.02 and count > w.min_count and busy <= 0.75 * (count - 1):
            self._resize_to(count - 1, None, f"the trainer waited {waited:.0%} of the last {win.batches} batches' "
                                             f"time, the workers' decoders {busy / count:.0%} busy: "
                                             f"{count - 1} keep up")

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
        state = dict(self._state, epoch=self.epoch, next_batch=int(next_batch))
        if self._stages:  # this epoch is the rest of one begun on other world sizes
            state["elastic"] = [list(st) for st in self._stages]
        return state

    def _own_from(self, slot: _Slot, b: int) -> int:
        """The first of the slot's batches at or after the rank's batch b."""
        place = b % self._cycle
        if place < slot.offset:
            return b - place + slot.offset
        if place < slot.offset + slot.share:
            return b
        return b - place + self._cycle + slot.offset

    def _begin(self, next_batch: int) -> None:
        """Every share starts this epoch at the rank's batch `next_batch`."""
        state = None if next_batch == 0 and not self._stages else self._state_at(next_batch)
        starts = []
        remote = self._remote_slots()
        for slot in remote:
            slot.pending.clear()  # replies of an iteration broken off: not wanted
            starts.append(slot.actor.start.remote(self.epoch, state))
        counts = [slot.local.start(self.epoch, state) for slot in self._slots if slot.local is not None]
        # A state a worker's loader refuses (another dataset, seed...) raises
        # here, as the local loader's; a worker that died since is replaced.
        for slot, ref in zip(remote, starts):
            try:
                counts.append(self._get([ref])[0])
            except (self._ray.exceptions.RayActorError, self._ray.exceptions.ObjectLostError) as e:
                began = time.perf_counter()
                counts.append(self._replace(slot, self._own_from(slot, next_batch), e, request=False))
                _log.warning("stoker: the start of epoch %d waited %.2f s for Ray %s's replacement (%s)",
                             self.epoch, time.perf_counter() - began, slot.name, slot.where)
        self._batches = sum(counts)  # the rank's, all shares together (fewer in an epoch's elastic rest)
        for slot in remote:
            slot.next_request = self._own_from(slot, next_batch)
            self._request(slot)

    def _request(self, slot: _Slot) -> None:
        """Keeps `prefetch` of the slot's batches asked for (actor calls run in
        the order they are made, so replies come in the worker's order)."""
        while len(slot.pending) < self._workers.prefetch and slot.next_request < self._batches:
            slot.pending.append([slot.next_request, slot.actor.next.remote(), None])  # [b, ref, its fetch]
            slot.next_request = self._own_from(slot, slot.next_request + 1)

    def _replace(self, slot: _Slot, b: int, error: BaseException, request: bool = True) -> int:
        """A new actor for a worker that died, restored to the rank's batch b
        (the first it owed); its batches are asked for again (unless not
        `request`). Returns its batches in the epoch."""
        ray = self._ray
        if slot.restarts >= self._workers.max_restarts:
            raise RuntimeError(f"stoker: Ray {slot.name} ({slot.where}) died at batch {b} of epoch "
                               f"{self.epoch} after {slot.restarts} replacements (RayWorkers max_restarts="
                               f"{self._workers.max_restarts}): {type(error).__name__}: {error}") from error
        slot.restarts += 1
        old = slot.where
        try:
            ray.kill(slot.actor, no_restart=True)
        except Exception:  # already gone
            pass
        _log.warning("stoker: Ray %s (%s) died at batch %d of epoch %d (%s); a new actor makes its "
                     "batches again from batch %d", slot.name, old, b, self.epoch, type(error).__name__, b)
        self._get([self._spawn(slot)])
        batches = self._get([slot.actor.start.remote(self.epoch, self._state_at(b))])[0]
        slot.next_request = b
        if request:
            self._request(slot)
        return batches

    def _take_due(self, b: int):
        """The rank's batch b, taken ahead where it was (self._receiving); then
        the next one's taking begins, so its copy to the device is issued
        while the step on this one runs."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == b:
            pending = ahead[1].result()  # its error, if it failed, is this batch's
            batch = self._receiver.engine.deliver(pending)
        else:
            self._settle(ahead)
            batch = self._take(b)
        if self._receiving is not None and b + 1 < self._batches:
            self._ahead = (b + 1, self._receiving.submit(self._take, b + 1, True))
        return batch

    @staticmethod
    def _settle(ahead) -> None:
        """Waits for a taking ahead to end (its batch and error unwanted)."""
        if ahead is not None:
            try:
                ahead[1].result()
            except BaseException:  # noqa: BLE001 - the batch is not delivered: neither is its error
                pass

    def _drop_ahead(self) -> None:
        """Before the shares are begun again or the epoch changes: the batch
        taken ahead is dropped (its places are asked for again)."""
        ahead, self._ahead = getattr(self, "_ahead", None), None
        self._settle(ahead)

    def _take(self, b: int, ahead: bool = False):
        """The rank's batch b, from its share; a dead worker is replaced.
        `ahead`: received, not delivered (a native PendingDelivery)."""
        slot = self._owner[b % self._cycle]
        if slot.local is not None:
            began = time.perf_counter()
            batch = slot.local.next()
            slot.wait_s += time.perf_counter() - began
            slot.batches += 1
            return batch if self._receiver is None else self._finish(b, batch, None, ahead)
        ray = self._ray
        began = time.perf_counter()
        replaced = 0
        while True:
            self._fetch_ahead(b)
            pending_b, _, fetch = slot.pending[0]
            assert pending_b == b, (pending_b, b)
            try:
                batch, made_at, moved_at = fetch.result()
                break
            except ray.exceptions.RayTaskError as e:  # the worker's own error for this batch: delivered,
                slot.pending.popleft()                # as the local loader's
                self._request(slot)
                raise e.as_instanceof_cause() from None
            except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as e:
                self._replace(slot, b, e)
                replaced += 1
        slot.pending.popleft()
        self._request(slot)
        batch, slot.engine = batch
        now = time.perf_counter()
        slot.batches += 1
        if replaced:
            slot.lost_s += now - began
            _log.warning("stoker: batch %d of epoch %d waited %.2f s for Ray %s's replacement (%s)", b,
                         self.epoch, now - began, slot.name, slot.where)
        else:
            slot.wait_s += now - began
        slot.move_s += moved_at - made_at
        if self._receiver is not None:
            slot.bytes += sum(a.nbytes for _, a in batch[1])
            return self._finish(b, batch, slot, ahead)
        return self._deliver(batch, slot)

    def _fetch_ahead(self, b: int) -> None:
        """Moves the next `prefetch` batches from the workers' nodes to this
        one, in the order they are due, while the step runs: Ray moves an
        object only when it is asked for (ray.get), so a batch asked for only
        when due would wait for its move too."""
        for ahead in range(b, min(b + self._workers.prefetch, self._batches)):
            slot = self._owner[ahead % self._cycle]
            if slot.local is not None:
                continue
            for entry in slot.pending:
                if entry[0] == ahead and entry[2] is None:
                    entry[2] = self._fetcher.submit(_fetch, self._ray, entry[1])
                    break

    @property
    def actors(self) -> list:
        """The workers' Ray actor handles, worker j's at j (replacements included)."""
        return [slot.actor for slot in self._remote_slots()]

    @property
    def cores_from(self) -> list[str]:
        """The CPUs each worker's engine counts and why (its settings["cores_from"])."""
        return [slot.cores_from for slot in self._remote_slots()]

    @property
    def nodes(self) -> list[str]:
        """The Ray node id each worker's actor runs on, worker j's at j."""
        return [slot.node for slot in self._remote_slots()]

    @property
    def shares(self) -> dict:
        """The cycle of batches and each share's places in it: {"cycle": 3,
        "trainer": 1, "worker 0": 2}."""
        return {"cycle": self._cycle, **{slot.name: slot.share for slot in self._slots}}

    # -- epochs and length ------------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """As stoker.Loader.set_epoch."""
        self._drop_ahead()
        if self._cursor.set_epoch(epoch):
            self._next = 0
            self._stages = None

    @property
    def epoch(self) -> int:
        return self._cursor.epoch

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
        self._drop_ahead()  # the shares begin again at self._next
        how = self._cursor.begin(lambda: self._batches > 0 and self._next >= self._batches)
        if how == NEXT:
            self._stages = None
        if how != RESUME:
            self._next = 0
        self._generation += 1
        self._iterating = False  # until every share has begun
        self._start_receiver()
        self._begin(self._next)
        self._iterating = True
        return _RayEpochIterator(self, self._generation)

    def _finish(self, b: int, item: tuple, slot: _Slot | None = None, ahead: bool = False):
        """The rank's batch b, a share's engine item (its arrays read-only
        in the object store, or views of the trainer's share's buffer),
        finished by the receiving engine: copied into its pool, its failed
        slots refilled (on_error="skip"), copied to the device. `ahead`
        (no skip): the copy issued, the consumer's wait left to deliver()."""
        began = time.perf_counter()
        try:
            return self._receiver.engine.receive(b, item, ahead)
        finally:
            if slot is not None:
                slot.copy_s += time.perf_counter() - began

    def _start_receiver(self) -> None:
        """The receiving engine begins the epoch with this iteration: at its
        start, or where a restored state left it (its refills' position)."""
        receiver = self._receiver
        if receiver is None:
            return
        if self._next == 0 and not self._stages:
            receiver.engine.begin_epoch(self.epoch)
        else:  # it makes no batch: its own next batch is 0
            receiver.engine.restore(dict(self._state_at(self._next), next_batch=0))

    def _deliver(self, batch: dict, slot: _Slot) -> dict:
        """The object store's read-only arrays copied into arrays (tensors) of our own."""
        import numpy as np

        began = time.perf_counter()

        torch = self._torch

        def own(a):
            if isinstance(a, np.ndarray):
                slot.bytes += a.nbytes
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
        """The trainer's golden numbers and verdict (as stoker.Loader.report);
        ``transfer``: what came through Ray's object store (batches, their
        arrays' bytes, the seconds moving them to the trainer's node and
        copying them out); and ``workers``: one line per share, the trainer's
        own (``worker`` "trainer") and each worker's (``worker`` j): where it
        runs, its places in each cycle, the batches it delivered, the seconds
        the trainer waited for them (``wait_s``), they took to move to the
        trainer's node (``move_s``: moved ahead, mostly while steps ran) and
        to be copied out (``copy_s``), the waits for its replacements
        (``lost_s``, ``restarts``), and its engine's stages (``engine``:
        reader and decoder busy shares, decode threads, samples per second;
        as of its latest batch)."""
        if self._observer is None:
            raise RuntimeError("this loader was created with observe=False")
        report = self._observer.report()
        report["skips"] = self.skips
        if self._receiver is not None and self._receiver.engine.copies:
            report["h2d"] = self._receiver.engine.stats()["h2d"]  # the receiving engine's copies
        remote = self._remote_slots()
        moved = sum(s.batches for s in remote)
        nbytes, move_s, copy_s = (sum(getattr(s, a) for s in remote) for a in ("bytes", "move_s", "copy_s"))
        report["transfer"] = {
            "batches": moved, "bytes": nbytes, "bytes_per_batch": nbytes // moved if moved else 0,
            "move_s": round(move_s, 4), "copy_s": round(copy_s, 4),
            "line": (f"transfer: {moved} batches of {nbytes / max(1, moved) / 1e6:.1f} MB through the object "
                     f"store, moved in {move_s:.2f} s, copied out in {copy_s:.2f} s")}
        lines = []
        for s in self._slots:
            engine = _engine_stages(s.local.stats() if s.local is not None else s.engine)
            lines.append({
                "worker": "trainer" if s.local is not None else int(s.name.split()[1]), "where": s.where,
                "cores_from": s.cores_from, "share": s.share, "batches": s.batches, "wait_s": round(s.wait_s, 4),
                "move_s": round(s.move_s, 4), "copy_s": round(s.copy_s, 4), "lost_s": round(s.lost_s, 4),
                "restarts": s.restarts, "engine": engine,
                "line": (f"{s.name} ({s.where}): {s.batches} batches ({s.share} of each {self._cycle}), waited "
                         f"{s.wait_s:.2f} s, moved {s.move_s:.2f} s, copied {s.copy_s:.2f} s, {s.restarts} "
                         f"replacements ({s.lost_s:.2f} s); {engine['line']}")})
        report["workers"] = lines
        return report

    summary = report

    def save_trace(self, path) -> None:
        """The trainer's wait and step spans as a Chrome trace (needs trace_spans=N)."""
        if self._observer is None:
            raise RuntimeError("this loader was created with observe=False")
        self._observer.save_trace(path)

    @property
    def skips(self) -> dict:
        """on_error="skip": {"skipped", "refilled", "seen"} over the loader's life, as stoker.Loader's."""
        if self._receiver is None:
            return {"skipped": 0, "refilled": 0, "seen": 0}
        return self._receiver.skips

    # -- resumption ---------------------------------------------------------------
    def state_dict(self) -> dict:
        """The rank's position, in stoker.Loader's format (a local loader resumes it too)."""
        self._settle(self._ahead)  # kept: the iteration goes on with it
        state = self._state_at(self._next)
        receiver = self._receiver
        # the refills' position, counts
        if receiver is not None and receiver.engine.skips and not self._cursor.resuming:
            skip = receiver.engine.state()["skip"]
            if self._next == 0:  # the epoch has not begun: its refills start from the partition's start
                skip.update(reserve_cursor=0, known_bad=[])
            state["skip"] = skip
        return {"stoker": state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue with exactly the batches not yet delivered, in order (the
        workers check the state against their loaders when the iteration begins)."""
        self._drop_ahead()
        native = dict(state["stoker"])
        for key in ("epoch", "next_batch"):
            if not isinstance(native.get(key), int):
                raise ValueError(f"loader state lacks integer {key!r}")
        mine = self._state
        if int(native.get("world_size", mine["world_size"])) != mine["world_size"]:
            # Saved by another number of ranks: the rest of its epoch, cut for
            # these ranks (docs/guides/distributed.md, Elastic resume), is this epoch's plan for
            # every share. The stages before it say which part is left.
            stages = list(native.get("elastic") or []) + [[int(native["world_size"]), native["next_batch"]]]
            native = dict(native, rank=mine["rank"], world_size=mine["world_size"], next_batch=0, elastic=stages)
            native.pop("skip", None)  # the skip log names the old ranks' batches: it does not carry across
        elif not native.get("elastic") and not 0 <= native["next_batch"] <= self._batches:
            raise ValueError(f"loader state next_batch {native['next_batch']} is outside 0..{self._batches}")
        for key, value in mine.items():
            if key not in ("epoch", "next_batch", "skip") and key in native and native[key] != value:
                raise ValueError(f"loader state was saved with {key}={json.dumps(native[key])}, "
                                 f"this loader has {json.dumps(value)}")
        self._stages = native.pop("elastic", None) or None
        self._state = dict(mine, **{k: v for k, v in native.items() if k not in ("epoch", "next_batch")})
        self._cursor.restored(native["epoch"])
        self._next = native["next_batch"]
        if self._receiver is not None:  # its refills' state and counts now: the next epoch may begin from them
            self._receiver.engine.restore(dict(self._state_at(self._next), next_batch=0))

    def close(self) -> None:
        """Ends the workers' actors (their batches in flight are dropped);
        writes the observer's final summary."""
        ray = getattr(self, "_ray", None)
        self._drop_ahead()
        receiving, self._receiving = getattr(self, "_receiving", None), None
        if receiving is not None:
            receiving.shutdown(wait=True)
        observer, self._observer = getattr(self, "_observer", None), None
        if observer is not None:
            observer.close()
        receiver, self._receiver = getattr(self, "_receiver", None), None
        if receiver is not None:
            receiver.close()
        for slot in getattr(self, "_slots", []):
            if slot.local is not None:
                slot.local.close()
                slot.local = None
            if slot.actor is not None:
                try:
                    ray.kill(slot.actor, no_restart=True)
                except Exception:  # the cluster or the actor is gone already
                    pass
                slot.actor = None
            slot.pending.clear()
        self._slots = []
        growing, self._growing = getattr(self, "_growing", None), None
        if growing is not None:
            try:
                ray.kill(growing[0], no_restart=True)
            except Exception:
                pass
        fetcher = getattr(self, "_fetcher", None)
        if fetcher is not None:  # its threads end as the killed actors' replies fail
            fetcher.shutdown(wait=False, cancel_futures=True)

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
            if loader is not None and loader._generation == self._generation:
                loader._iterating = False
            if loader is not None and loader._observer is not None:
                loader._observer.end()  # the last batch's step ends now
            raise StopIteration
        if loader._sizing:
            loader._autoscale()
        b = loader._next
        loader._next += 1  # a failed batch counts as delivered, as the local loader's
        obs = loader._observer
        began = time.perf_counter()
        if obs is None:
            batch = loader._take_due(b)
        else:
            t0 = obs.request()
            batch = loader._take_due(b)
            obs.delivered(t0)
            receiver = loader._receiver
            if receiver is not None and receiver.engine.device != "cpu":  # device copies the step waited for
                exposed = receiver.engine.new_h2d_exposed()
                if exposed > 0:
                    obs.add_h2d(exposed)
        # The trainer's wait, for self-sizing; each share's first batch of an
        # epoch (its engine starting) is not what the workers' count changes.
        if b >= loader._cycle:
            loader._window.batches += 1
            loader._window.wait_s += time.perf_counter() - began
        else:
            loader._window.began += time.perf_counter() - began
        return batch


# Loader(..., workers=RayWorkers(...)) gives a RayLoader (loader.py does not import this module).
register_workers(RayWorkers, RayLoader)
