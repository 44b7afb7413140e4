"""The observer: the three golden numbers per batch, slow batches with a cause,
a bottleneck verdict, logs, a JSON-lines record and a Chrome trace.

Two users:

* ``stoker.Loader`` (observing by default): each batch's wait is timed around
  the native ``next()``, and two stage snapshots taken around it give the
  evidence a slow batch's cause is read from.
* ``stoker.profile(iterable)``: wraps any iterable (a torch ``DataLoader``) and
  times the same way; without stage evidence the cause comes from timing.

The arithmetic (rolling statistics, slow-batch judgement, causes, verdict) is
``stoker._stoker.BatchMonitor`` in C++; this module times, logs and writes.
Per batch that is two ``perf_counter`` calls, two native snapshots and one
native call: a few microseconds, so it stays on.

Timing model, one batch i:

    request i ──t_wait──▶ delivered i ──(t_h2d) ── step (t_compute) ──▶ request i+1

``t_compute`` is what ``with observer.step():`` measured when the loop uses
it, else the time from delivery to the next request (less any ``t_h2d``
measured in between). A batch's record is complete, and written, at the
next request.

Not thread-safe: one observer belongs to the loop that consumes the batches.
"""
from __future__ import annotations

import collections
import contextlib
import json
import logging
import os
import time
from typing import Any, Iterable, Iterator

from . import _stoker

logger = logging.getLogger("stoker")

_perf = time.perf_counter


class Observer:
    """Times a training loop's batches and feeds a native BatchMonitor.

    window: batches in the rolling statistics; log_every: batches between
    summary lines (default: the window); slow_factor / slow_floor_s: a batch
    is slow when its wait exceeds both slow_factor × the rolling median and
    the floor; jsonl: a path (or open text file) for one JSON record per
    batch plus slow batches, summaries and the final verdict; trace_events:
    keep this many Python-side spans (wait, step, h2d) for a Chrome trace.
    """

    def __init__(
        self,
        *,
        window: int = 50,
        log_every: int | None = None,
        slow_factor: float = 5.0,
        slow_floor_s: float = 0.05,
        min_history: int = 5,
        jsonl: str | os.PathLike | Any | None = None,
        trace_events: int = 0,
        source: str = "iterable",
        config: dict | None = None,
        log: logging.Logger | None = None,
        advise=None,
        source_names: list[str] | None = None,
    ) -> None:
        # source_names: a mixture's sources, so a storage-bound wait names the slow one.
        self.monitor = _stoker.BatchMonitor(
            window=window, slow_factor=slow_factor, slow_floor_s=slow_floor_s, min_history=min_history,
            source_names=list(source_names or []),
        )
        self.log_every = int(log_every or window)
        if self.log_every < 1:
            raise ValueError("log_every must be >= 1")
        self.source = source
        self.config = dict(config or {})
        self._log = log or logger
        self._own_file = False
        self._jsonl = None
        if jsonl is not None:
            if hasattr(jsonl, "write"):
                self._jsonl = jsonl
            else:
                self._jsonl = open(jsonl, "w", buffering=1 << 16)
                self._own_file = True
        self._origin = _perf()          # JSON times are seconds since this
        self._spans = collections.deque(maxlen=trace_events) if trace_events > 0 else None
        self._delivered_at: float | None = None  # the open batch, if any
        self._request_at = 0.0
        self._steps_used = False         # a step() was ever used: compute is measured, not inferred
        self._step_begin: float | None = None
        self._h2d_open = 0.0             # wall-timed h2d of the open batch
        self._h2d_in_step = 0.0
        self._pending_events: list = []  # CUDA (start, end) events of the open batch
        self._cycle_before = None        # previous request's snapshot (JSON stage utilisation)
        self._cycle = None               # stage utilisation over the latest request-to-request cycle
        self._advise = advise            # (verdict dict) -> recommendation text, e.g. a DataLoader's
        self._closed = False
        self.slow_batches: list[dict] = []
        self.tune_changes: list[dict] = []  # the engine's setting changes (pipeline/autotune.h)
        self._write({"type": "meta", "source": source, "window": window, "log_every": self.log_every,
                     "slow_factor": slow_factor, "slow_floor_s": slow_floor_s, "config": self.config,
                     "unix_time": time.time()})

    # -- the batch cycle -------------------------------------------------------
    def request(self) -> float:
        """The loop asks for a batch: closes the open one; returns the time."""
        t = _perf()
        if self._delivered_at is not None:
            self._close_batch(t)
        self._request_at = t
        return t

    def delivered(self, t_request: float, before=None, after=None) -> dict | None:
        """The batch asked for at ``t_request`` arrived now. ``before`` and
        ``after`` are stage snapshots taken around the wait (evidence)."""
        t = _perf()
        wait = t - t_request
        if before is not None:
            slow = self.monitor.on_wait(wait, before, after)
        else:
            slow = self.monitor.on_wait(wait)
        if self._spans is not None:
            self._spans.append(("wait", t_request, t, self.monitor.batches - 1))
        if self._jsonl is not None and before is not None:
            self._cycle = (_stoker.stage_evidence(self._cycle_before, before)
                           if self._cycle_before is not None else None)
            self._cycle_before = before
        if slow is not None:
            self.slow_batches.append(slow)
            self._log.warning(slow["line"])
            self._write({"type": "slow", "t": t - self._origin, **slow})
        self._delivered_at = t
        return slow

    def tuned(self, change: dict) -> None:
        """The engine's controller changed a setting: logged once (INFO), kept
        for ``report()``, the JSON-lines record and the trace."""
        self.tune_changes.append(change)
        self._log.info("stoker: %s", change["line"])
        self._write({"type": "tune", "t": _perf() - self._origin, **change})

    def end(self) -> None:
        """The iterable ran out (or the loop stopped): close the open batch now."""
        if self._delivered_at is not None:
            self._close_batch(_perf())

    def _close_batch(self, t: float) -> None:
        mon = self.monitor
        h2d = self._h2d_open + self._resolve_events()
        if h2d > 0:
            mon.on_h2d(h2d)
        if not self._steps_used:
            mon.on_compute(max(0.0, t - self._delivered_at - h2d))
            if self._spans is not None:
                self._spans.append(("step (inferred)", self._delivered_at, t, mon.batches - 1))
        self._delivered_at = None
        self._h2d_open = 0.0
        if self._jsonl is not None:
            record = mon.latest()
            record["type"] = "batch"
            record["t"] = self._request_at - self._origin
            if self._cycle is not None:
                record["cycle"] = self._cycle
            self._write(record)
        if mon.batches % self.log_every == 0:
            self._summary()

    def _summary(self) -> None:
        line = self.monitor.summary_line()
        self._log.info(line)
        if self._jsonl is not None:
            self._write({"type": "summary", "batch": self.monitor.batches - 1, "line": line,
                         **self.monitor.stats()})

    # -- step and device copy ---------------------------------------------------
    @contextlib.contextmanager
    def step(self):
        """``with observer.step(): ...`` around the training step: its time
        is t_compute of the latest batch (less device copies inside it)."""
        self._steps_used = True
        begin = _perf()
        self._h2d_in_step = 0.0
        try:
            yield
        finally:
            end = _perf()
            self.monitor.on_compute(max(0.0, end - begin - self._h2d_in_step))
            self._h2d_in_step = 0.0
            if self._spans is not None:
                self._spans.append(("step", begin, end, self.monitor.batches - 1))

    def add_h2d(self, seconds: float, begin: float | None = None) -> None:
        """A device copy of the latest batch took ``seconds`` (wall)."""
        self._h2d_open += seconds
        self._h2d_in_step += seconds
        if self._spans is not None and begin is not None:
            self._spans.append(("h2d", begin, begin + seconds, self.monitor.batches - 1))

    def add_h2d_events(self, start, end) -> None:
        """CUDA events around an asynchronous copy; resolved when the batch
        closes (by then the step has used the data, so no sync stalls)."""
        self._pending_events.append((start, end))

    def _resolve_events(self) -> float:
        if not self._pending_events:
            return 0.0
        total = 0.0
        for start, end in self._pending_events:
            end.synchronize()
            total += start.elapsed_time(end) * 1e-3
        self._pending_events.clear()
        return total

    # -- results ---------------------------------------------------------------
    def verdict(self) -> dict:
        """The bottleneck over the window, its evidence and the recommended change."""
        verdict = self.monitor.diagnose()
        if self._advise is not None:
            verdict["recommendation"] = self._advise(verdict)
        return verdict

    def report(self) -> dict:
        """The golden numbers over the window, totals since the start, the
        verdict and the slow batches so far."""
        return {
            "window": self.monitor.stats(),
            "totals": self.monitor.totals(),
            "verdict": self.verdict(),
            "summary": self.monitor.summary_line(),
            "slow_batches": list(self.slow_batches),
            "config": dict(self.config),
        }

    def python_trace_events(self, origin: float, pid: int = 1, tid: int = 1000) -> list[dict]:
        """Python-side spans as Chrome trace events, ``ts`` in µs since ``origin``
        (a perf_counter value: the engine recorder's start when merging)."""
        # Setting changes as instant events on the engine's clock (time_s is
        # since the engine's recorder started, which is the merged origin).
        changes = [{"name": c["line"], "cat": "autotune", "ph": "i", "s": "g", "pid": pid, "tid": tid,
                    "ts": c["time_s"] * 1e6, "args": {k: c[k] for k in ("knob", "from", "to", "reason")}}
                   for c in self.tune_changes]
        if self._spans is None:
            return changes
        events = [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid,
                   "args": {"name": "python consumer"}}] + changes
        for name, begin, end, batch in self._spans:
            events.append({"name": name, "cat": "python", "ph": "X", "pid": pid, "tid": tid,
                           "ts": (begin - origin) * 1e6, "dur": max(0.0, end - begin) * 1e6,
                           "args": {"batch": batch}})
        return events

    def save_trace(self, path: str | os.PathLike, engine_json: str | None = None,
                   engine_origin: float | None = None) -> None:
        """Writes a Chrome trace (Perfetto, chrome://tracing): the engine's
        stage spans, if given, merged with the Python-side spans."""
        trace = json.loads(engine_json) if engine_json else {"displayTimeUnit": "ms", "traceEvents": []}
        origin = engine_origin if engine_origin is not None else self._origin
        trace.setdefault("traceEvents", []).extend(self.python_trace_events(origin))
        with open(path, "w") as f:
            json.dump(trace, f)

    def close(self) -> None:
        """Writes the final summary and verdict; closes the JSON-lines file."""
        if self._closed:
            return
        self._closed = True
        self.end()  # a loop that broke out early leaves its last batch open
        if self.monitor.batches and self.monitor.batches % self.log_every:
            self._summary()
        if self.monitor.batches:
            verdict = self.verdict()
            self._log.info("stoker verdict: %s — %s. Recommended: %s", verdict["bottleneck"],
                           verdict["reason"], verdict["recommendation"])
            self._write({"type": "verdict", **verdict, "totals": self.monitor.totals(),
                         "window_stats": self.monitor.stats()})
        if self._jsonl is not None:
            if self._own_file:
                self._jsonl.close()
            else:
                self._jsonl.flush()
            self._jsonl = None

    def _write(self, record: dict) -> None:
        if self._jsonl is not None:
            self._jsonl.write(json.dumps(record) + "\n")


# -- device copy ------------------------------------------------------------------

def _map_tensors(obj, fn):
    if hasattr(obj, "to") and hasattr(obj, "device"):
        return fn(obj)
    if isinstance(obj, dict):
        return {k: _map_tensors(v, fn) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)) and not (obj and isinstance(obj[0], str)):
        return type(obj)(_map_tensors(v, fn) for v in obj)
    return obj


def to_device(batch, device, non_blocking: bool = True, observer: Observer | None = None):
    """Copies every tensor of ``batch`` (dicts, lists, tuples nested) to
    ``device`` and records the copy as t_h2d on ``observer``.

    CUDA: timed with CUDA events on the current stream, resolved at the next
    batch request, so a ``non_blocking`` copy is not made synchronous by the
    measuring. Other devices: wall time. A CPU target is not a copy: the
    batch comes back as it is and t_h2d stays 0.
    """
    import torch

    dev = torch.device(device)
    if dev.type == "cpu":
        return batch
    if dev.type == "cuda" and torch.cuda.is_available():
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        out = _map_tensors(batch, lambda t: t.to(dev, non_blocking=non_blocking))
        end.record()
        if observer is not None:
            observer.add_h2d_events(start, end)
        return out
    begin = _perf()
    out = _map_tensors(batch, lambda t: t.to(dev, non_blocking=non_blocking))
    if observer is not None:
        observer.add_h2d(_perf() - begin, begin)
    return out


# -- any iterable -------------------------------------------------------------------

def _dataloader_config(iterable) -> dict:
    """What a torch DataLoader says about itself, cheaply (attributes only)."""
    config = {"type": type(iterable).__name__}
    for name in ("num_workers", "prefetch_factor", "batch_size", "pin_memory", "persistent_workers"):
        if hasattr(iterable, name):
            value = getattr(iterable, name)
            if isinstance(value, (int, float, bool, str)) or value is None:
                config[name] = value
    return config


def _dataloader_advice(config: dict, verdict: dict) -> str:
    """Recommendation text for an input-bound torch DataLoader, from its settings."""
    if verdict.get("bottleneck") not in ("input", "unknown"):
        return verdict.get("recommendation", "")
    workers = config.get("num_workers")
    tips = []
    if workers == 0:
        # The job's CPUs, not the machine's: its mask, cgroup quota and local ranks.
        share = _stoker.cpu_share()
        tips.append("num_workers=0 loads every batch in the training process, between steps: "
                    f"raise num_workers (this process may use {share['cores_from']})")
    elif isinstance(workers, int):
        tips.append(f"raise num_workers (now {workers}) while cores are free")
        if config.get("prefetch_factor") is not None:
            tips.append(f"raise prefetch_factor (now {config['prefetch_factor']}) to absorb stalls")
        if not config.get("persistent_workers"):
            tips.append("set persistent_workers=True so workers survive the epoch boundary")
    if not tips:
        return verdict.get("recommendation", "")
    return "; ".join(tips) + "; or load with stoker.Loader to see which stage is short"


class profile:
    """Wraps any iterable (a torch DataLoader) and yields its items unchanged,
    timing each wait and each step into the same golden numbers, slow-batch
    lines and verdict as stoker.Loader — to diagnose the loader you have.

    >>> prof = stoker.profile(torch_loader, log_every=50, jsonl="run.jsonl")
    >>> for batch in prof:
    ...     with prof.step():
    ...         train(batch)
    >>> prof.report()["verdict"]["bottleneck"]     # "input", "consumer", ...

    Iterating again starts a new pass over the iterable with the same monitor.
    """

    def __init__(self, iterable: Iterable, *, log_every: int = 50, jsonl=None, window: int = 50,
                 slow_factor: float = 5.0, slow_floor_s: float = 0.05, min_history: int = 5,
                 trace_events: int = 0) -> None:
        self.iterable = iterable
        self.config = _dataloader_config(iterable)
        self.observer = Observer(window=window, log_every=log_every, slow_factor=slow_factor,
                                 slow_floor_s=slow_floor_s, min_history=min_history, jsonl=jsonl,
                                 trace_events=trace_events, source=f"profile({self.config['type']})",
                                 config=self.config,
                                 advise=lambda verdict: _dataloader_advice(self.config, verdict))

    def __len__(self) -> int:
        return len(self.iterable)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator:
        obs = self.observer
        it = iter(self.iterable)
        while True:
            t0 = obs.request()
            try:
                item = next(it)
            except StopIteration:
                obs.end()
                return
            obs.delivered(t0)
            yield item

    def step(self):
        """``with prof.step(): ...``: time the training step (t_compute)."""
        return self.observer.step()

    def to(self, batch, device, non_blocking: bool = True):
        """Copies a batch to ``device``, timed as t_h2d."""
        return to_device(batch, device, non_blocking=non_blocking, observer=self.observer)

    def report(self) -> dict:
        """Golden numbers, totals, verdict (with advice from the DataLoader's settings)."""
        return self.observer.report()

    summary = report

    def save_trace(self, path) -> None:
        self.observer.save_trace(path)

    def close(self) -> None:
        self.observer.close()

    def __enter__(self) -> "profile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
