"""The Loader a training loop iterates: torch glue around the native engine.

Everything per sample happens in C++; here we only turn each batch's numpy
views (zero-copy, into a pooled buffer) into torch tensors and regroup NPZ
arrays into dicts: a constant amount of Python per batch.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import json
import logging
import os
import threading
import time
import weakref
from typing import Any, Callable, Iterator, Mapping, Sequence

from . import _exit, _members, _stoker
from .epochs import RESUME, EpochCursor
from .mixture import Mixture
from .observe import Observer, to_device
from .options import DecodeOptions, DeviceOptions, ObserveOptions, OrderOptions, SourceOptions, TuningOptions

_log = logging.getLogger("stoker")


def storage_options(*, s3_endpoint=None, profile=None, region=None, retry_deadline_s=None, cache_dir=None,
                    cache_bytes=None, http_headers=None) -> "_stoker.StorageOptions":
    """A loader's own storage options: the environment's now (STOKER_* /
    AWS_* / HF_*, or what ``set_io_options`` set for the process), overridden
    by the keywords given. Each loader keeps its own, so two loaders read two
    stores. ``http_headers`` go with every request for an http(s):// or
    hf:// shard, to the shard's own host only (never on through a redirect)."""
    o = _stoker.default_storage_options()
    if http_headers is not None:
        headers = dict(http_headers)
        for name, value in headers.items():
            if not isinstance(name, str) or not isinstance(value, str) or not name or any(
                    c in name + value for c in "\r\n") or ":" in name:
                raise ValueError(f"http_headers: {name!r} is not a header name with a one-line string value")
        o.http_headers = headers
    if s3_endpoint is not None:
        o.s3_endpoint = str(s3_endpoint)
    if profile is not None:
        o.profile = str(profile)
    if region is not None:
        o.region = str(region)
    if retry_deadline_s is not None:
        o.retry_deadline_ms = int(retry_deadline_s * 1000)
    if cache_dir is not None:
        o.cache_dir = str(cache_dir)
    if cache_bytes is not None:
        o.cache_bytes = int(cache_bytes)
    return o


# torch.utils.data.DataLoader's keywords that stoker has no use for, each
# with what stoker does instead: a user moving a DataLoader call over learns
# the equivalent rather than reading a bare TypeError.
_DATALOADER_KEYWORDS = {
    "num_workers": "stoker decodes on native threads in this process, not worker processes: decode_threads= "
                   "(default: tuned to the job's cores) and io_depth= (reads in flight) replace it; to use other "
                   "machines, workers=stoker.RayWorkers(count=N)",
    "persistent_workers": "stoker's threads live as long as the loader and carry over between epochs: "
                          "nothing to set",
    "prefetch_factor": "prefetch= counts whole batches ready ahead (default: tuned within memory_budget)",
    "collate_fn": "batches are assembled in place, one array per field (fields=); there is no per-sample "
                  "Python list to collate",
    "sampler": "the order is stoker's own: shuffle=, seed=, and rank=/world_size= with partition= under DDP",
    "batch_sampler": "the order is stoker's own: batch_size=, shuffle=, seed=, and rank=/world_size= with "
                     "partition= under DDP",
    "worker_init_fn": "there are no worker processes to initialize",
    "multiprocessing_context": "there are no worker processes",
    "generator": "seed= makes the order (a pure function of seed, epoch, rank and world size)",
    "pin_memory_device": "device='cuda:N' copies each batch to that GPU from page-locked buffers",
    "in_order": "batches always come in order",
}


def _refuse_dataloader_arguments(cls, args: tuple, kwargs: dict) -> None:
    """A TypeError naming stoker's equivalent of a DataLoader argument."""
    name = cls.__name__
    for key in kwargs:
        if key in _DATALOADER_KEYWORDS:
            raise TypeError(f"{name}() takes no {key}= (a torch DataLoader keyword): {_DATALOADER_KEYWORDS[key]}")
    if len(args) > 2 and isinstance(args[2], int) and not isinstance(args[2], bool):
        raise TypeError(f"{name}(sources, fields, batch_size=...): batch_size is a keyword, as every option "
                        f"after the fields is (got {args[2]!r} as a third positional argument)")


class _InitSignature:
    """A class's signature as its __init__ gives it (less self), for a class whose
    __new__ takes (*args, **kwargs) and would otherwise be what inspect shows."""

    def __get__(self, obj: Any, cls: type) -> inspect.Signature | None:
        if obj is not None:
            return None  # an instance: inspect goes on as it would
        sig = inspect.signature(cls.__init__)
        return sig.replace(parameters=list(sig.parameters.values())[1:])


def register_workers(kind: type, loader_class: type) -> None:
    """``stoker.Loader(..., workers=<a kind instance>)`` makes a ``loader_class`` instead
    (ray_workers.py registers RayLoader for stoker.RayWorkers as it is imported)."""
    Loader._worker_loaders[kind] = loader_class


class Loader:
    """Batches from WebDataset-style tar shards.

    >>> loader = stoker.Loader("data/shard-{000000..000031}.tar",
    ...     fields={"jpg": stoker.image(224), "cls": stoker.scalar("int64")},
    ...     batch_size=64, shuffle=True, seed=0)
    >>> for epoch in range(10):
    ...     loader.set_epoch(epoch)
    ...     for batch in loader: ...   # {"jpg": uint8 [64,3,224,224], "cls": [64], ...}

    Without set_epoch the same loop works too: an iter() after an epoch was
    iterated to its end begins the next epoch (a new shuffle), as torch's
    DataLoader does; ``state_dict`` holds the epoch.

    ``sources`` may be ``stoker.mix({name: (source, weight), ...})``: several
    sources drawn by weight in one loader, each sample named in
    ``__source__`` (docs/guides/user-code.md, "Mixtures").

    Batches are views into pooled memory: a buffer is reused only after every
    tensor that views it is gone. Keep a batch past the next step only if you
    mean to (the pool then lends an extra buffer rather than deadlock).

    ``map=fn`` runs your function on each sample on the decode threads
    (``fn(sample)``, or ``fn(sample, rng)`` with a numpy Generator seeded from
    the sample's seed), holding the GIL only for the call; the dict it returns
    is the sample (numpy arrays become batch arrays, other values lists).
    ``batch_map=fn`` runs on each assembled batch dict before it is returned.
    docs/guides/user-code.md, "Your own code: map= and batch_map=".

    Observing is on by default and costs a few microseconds per batch: each
    wait is timed with the stage snapshots around it, slow batches are logged
    (logging.getLogger("stoker"), WARNING) with a cause drawn from what the
    stages did, and a summary line every ``log_every`` batches (INFO).

    >>> for batch in loader:
    ...     batch = loader.to(batch, "cuda")      # t_h2d
    ...     with loader.step():                    # t_compute (else inferred)
    ...         train(batch)
    >>> loader.report()["verdict"]                # bottleneck + recommendation

    ``on_error="skip"`` drops a sample that cannot be read or decoded, logs it
    once (WARNING: shard, member, offset, cause) and refills its slot from the
    rank's partition (a repeat), so batches stay full and ranks equal;
    ``max_skips`` / ``max_skip_fraction`` (after ``skip_probation`` samples)
    turn too many skips into an error. ``loader.skips`` counts them.
    ``max_open_files`` bounds the shard descriptors kept open (default: a
    quarter of RLIMIT_NOFILE). ``memory_budget`` (bytes) bounds batch buffers,
    read buffers and decode scratch together: a configuration that cannot fit
    is refused at construction with the number it would need.
    ``index_cache_bytes`` bounds the shard index tables held (each sample's
    offsets) when they do not all fit (default 16 MiB, or an eighth of
    ``memory_budget``): a shard's table is loaded when the reads reach it and
    the least recently used are dropped; ``loader.settings["index"]`` says
    what is held.

    ``shuffle=True`` permutes every sample (``shuffle_block=1``) or, over
    remote shards by default (``shuffle_block=None``: auto), blocks of 16
    consecutive samples of a shard cut afresh each epoch, so a batch of 64 is
    about 5 ranged GETs instead of 64 (docs/guides/shuffling.md, "Shuffle quality").
    ``shuffle_block=N`` sets the block; ``shuffle_buffer=N`` streams instead.
    ``stream=True`` reads tar shards with no index and no manifest front to
    back, as webdataset does: nothing is counted before the first batch.
    It needs ``samples_per_epoch`` (webdataset's ``with_epoch``): every rank
    delivers ``samples_per_epoch // (world_size * batch_size)`` batches per
    epoch, cut from its one stream; shards are permuted each pass with
    ``shuffle`` and samples drawn from a buffer of ``shuffle_buffer`` (default
    1,000) samples (docs/guides/stream.md, "Stream mode").
    ``shuffle_window=K`` bounds the shards read at a time: the shards are
    permuted, taken K at a time, and the samples (or blocks) of each K shards
    permuted among themselves, so a rank reads about K shards at once and the
    order costs memory per shard, not per sample (``0``: one permutation of
    the whole dataset; ``None``: auto).
    Parquet is read a row group at a time, so its blocks are row groups, and
    ``shuffle_mix=M`` permutes the rows of each run of M blocks of the order
    among themselves, M row groups held decoded at once (``None``: auto, 8
    for Parquet, fewer where ``memory_budget`` cannot hold them; 0 for tar):
    a file of one row group is shuffled row by row. Where the layout still
    limits the mix (more row groups than a run holds), a warning says so
    once, with the fix (write the rows shuffled).

    Remote shards (``http://``, ``https://``, ``s3://``, ``hf://``): ``io_depth`` reads
    (default: 4 local; remote, the reads of 8 batches: 8 unshuffled, 40 for
    blocks of 16 in batches of 64, at most 64) run at once apart from
    decode; a batch's neighbouring samples in one shard are one ranged GET of
    up to ``coalesce_bytes`` (default 8 MiB; 0: one GET per sample), and the
    reads of ``read_ahead_batches`` batches (default: enough for ``io_depth``
    reads) start before a batch buffer is free for them.
    Storage options are the loader's own, read from the environment when it
    is made and overridden by keyword: ``s3_endpoint`` (an S3-compatible
    server, path-style; else STOKER_S3_ENDPOINT / AWS_ENDPOINT_URL_S3 /
    AWS_ENDPOINT_URL), ``profile`` and ``region`` (else the AWS SDKs' chain:
    environment, profiles, web identity, container, instance metadata),
    ``retry_deadline_s`` (how long one request retries transient faults,
    default 120 s, so an outage of a minute costs a minute, not the run),
    ``cache_dir`` and ``cache_bytes`` (a local LRU cache of remote objects),
    ``http_headers`` (sent to an http(s):// or hf:// shard's own host only,
    e.g. ``{"Authorization": "Bearer ..."}``). A URL's query is taken
    literally (braces and globs apply to its path) and never shown: errors,
    logs and ``report()`` print its values as ``…``. ``hf://datasets/ORG/NAME/PATH``
    reads a Hugging Face Hub dataset (HF_ENDPOINT, HF_TOKEN).

    Under DDP (``rank``/``world_size``, default: torch.distributed's, else
    torchrun's environment) every rank runs the same number of batches.
    ``partition`` says how: ``"drop"`` (default) gives each rank
    floor(N / world) samples and leaves the rest for the epoch, ``"pad"``
    ceil(N / world) with the shortfall repeated, both with full batches
    (under DDP ``drop_last`` defaults to True and drops each rank's short
    last batch; what that leaves out is logged once, at the first epoch).
    In one process ``drop_last`` defaults to False, as torch's DataLoader:
    the short last batch is kept. ``"exact"`` is for evaluation: every sample exactly once across
    the ranks, nothing dropped or repeated; ranks hold N // world samples
    (the first N % world ranks one more), so a rank's last batch may be
    short, or empty (every array 0 rows, ``__key__`` an empty list) where it
    has fewer samples. Each rank still takes every step, so a per-step
    all-reduce never waits forever; weight a metric by the batch's rows
    (``len(batch["__key__"])`` or any array's ``shape[0]``). ``drop_last``
    defaults to False with it (True would drop samples: refused).

    ``device="cuda"`` (or ``"cuda:N"``) delivers CUDA tensors: each batch's
    copy starts on a stream of the loader's own as soon as the batch is
    assembled, from page-locked pool buffers, and the current stream waits
    for it when the batch is handed over (no host sync); device memory holds
    ``prefetch + 1`` batches. ``pin_memory=True`` page-locks the host batch
    buffers (as torch's; no effect without CUDA). The CUDA runtime is found
    at run time (torch's, the nvidia-cuda-runtime wheel's, the system's);
    without one, ``device="cuda"`` raises saying so. ``device="cpu-late"``
    is for tests only: copies on a CPU engine that completes them late.

    No knob needs setting: ``io_depth``, ``read_ahead_batches``,
    ``decode_threads`` and ``prefetch`` left as None are tuned while the
    loader runs (``autotune=True``) from what the stages measure: reads in
    flight and read-ahead toward the bandwidth-delay product when reads wait
    and decoders idle, decode threads up to the cores the training step leaves
    free, prefetch within the memory budget. A value passed stays fixed;
    ``autotune=False`` keeps the starting values. Each change is logged once
    (INFO, ``io_depth 8 → 16: reads wait 21 ms each, ...``), is in
    ``report()["tuning"]``, the JSON-lines record and the trace;
    ``loader.settings`` says what is in effect. A change never alters which
    samples come, their order or their bytes.

    Each batch names its samples as webdataset does: ``__key__`` (tar: the
    member path without its extension, ``dir/000000``; image folder: the path
    under the root, ``cat/000001``; Parquet: the ``key_column`` value, else
    ``file:row``) and ``__url__`` (the shard or file each came from), lists
    like ``__key__``. ``keys=False`` leaves both out.

    ``workers=stoker.RayWorkers(count=N, ...)`` makes the batches in N Ray
    actors instead (each runs this engine on every N-th batch; the stream is
    this loader's, byte for byte): see :class:`stoker.RayWorkers`.

    ``observe=False`` turns it off; ``jsonl=path`` writes one record per batch
    (``stoker report path -o report.html``); ``trace_spans=N`` keeps the last N
    stage spans for ``save_trace(path)``.
    """

    _upscale_checks = 8  # batches at whose delivery the upscale counts are still read (_tell_upscale)
    # map=, batch_map= and a mixture (set in __init__; loaders built otherwise have none)
    _mixture: Mixture | None = None
    _map: Any = None
    _batch_map: Callable[[dict], dict] | None = None
    _batch_map_s = 0.0
    _map_outputs: list = []

    # workers=...: the loader class that makes batches elsewhere, registered by
    # its module (register_workers; ray_workers.py: RayLoader for stoker.RayWorkers),
    # so this module does not import it and the dependency points one way.
    _worker_loaders: dict[type, type] = {}

    # inspect.signature(stoker.Loader), help() and editors: __init__'s keywords, not __new__'s (*args, **kwargs).
    __signature__ = _InitSignature()

    def __new__(cls, *args, workers: Any = None, **kwargs):
        _refuse_dataloader_arguments(cls, args, kwargs)
        if workers is not None and cls is Loader:
            loader_class = Loader._worker_loaders.get(type(workers))
            if loader_class is None:
                raise TypeError(f"workers must be a stoker.RayWorkers, not {type(workers).__name__}")
            return loader_class(*args, workers=workers, **kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        sources: str | Sequence[str] | Mixture,
        fields: Mapping[str, Any],
        *,
        batch_size: int,
        shuffle: bool = False,
        seed: int = 0,
        shuffle_buffer: int = 0,
        shuffle_block: int | None = None,
        shuffle_window: int | None = None,
        shuffle_mix: int | None = None,
        stream: bool = False,
        samples_per_epoch: int | None = None,
        drop_last: bool | None = None,
        partition: str = "drop",
        rank: int | None = None,
        world_size: int | None = None,
        decode_threads: int | None = None,
        io_depth: int | None = None,
        coalesce_bytes: int | None = None,
        read_ahead_batches: int | None = None,
        s3_endpoint: str | None = None,
        profile: str | None = None,
        region: str | None = None,
        retry_deadline_s: float | None = None,
        cache_dir: str | os.PathLike | None = None,
        cache_bytes: int | None = None,
        http_headers: Mapping[str, str] | None = None,
        max_read_bytes_per_s: int = 0,
        prefetch: int | None = None,
        autotune: bool = True,
        timeout: float | None = None,
        key_rule: str = "webdataset",
        key_column: str | None = None,
        output: str = "torch",
        keys: bool = True,
        record_stats: bool = True,
        observe: bool = True,
        log_every: int | None = None,
        window: int = 50,
        slow_factor: float = 5.0,
        slow_floor_s: float = 0.05,
        jsonl: str | os.PathLike | None = None,
        trace_spans: int = 0,
        on_error: str = "raise",
        max_skips: int | None = None,
        max_skip_fraction: float | None = None,
        skip_probation: int = 1000,
        max_open_files: int | None = None,
        memory_budget: int | None = None,
        index_cache_bytes: int | None = None,
        device: str = "cpu",
        pin_memory: bool = False,
        _late_copy_ms: int = 20,  # device="cpu-late" (tests only): how late each copy completes
        _gpu_standin_delay_us: int = 0,  # device="cpu-late" (tests only): the stand-in GPU decoder's cost per image
        # device="cpu-late" (tests only): the stand-in's hardware batches after this many never
        # return (-1: all do), and its watchdog's least bound in ms (0: 2 s, as nvJPEG's).
        _gpu_standin_stall_after: int = -1,
        _gpu_standin_watchdog_ms: int = 0,
        # One of the workers of stoker.RayWorkers: only the rank's batches b
        # with _batch_offset <= b % _batch_stride < _batch_offset + _batch_share, in order.
        _batch_stride: int = 1,
        _batch_offset: int = 0,
        _batch_share: int = 1,
        # on_error="skip" in one of them: bad samples' slots left for the trainer's refills.
        _leave_failed_slots: bool = False,
        map: Callable | None = None,
        batch_map: Callable[[dict], dict] | None = None,
        workers: Any = None,
    ) -> None:
        if workers is not None:  # only a subclass gets here (__new__ hands stoker.Loader's to RayLoader)
            raise TypeError(f"workers= is for stoker.Loader itself, not {type(self).__name__}")
        # Each part of the loader takes its keywords and checks them (options.py); they are
        # made, then fill the native options, in the order the checks have always run (so a
        # call with several bad keywords is told of the same one first).
        delivery = DeviceOptions(device=device, pin_memory=pin_memory, output=output, _late_copy_ms=_late_copy_ms,
                                 _gpu_standin_delay_us=_gpu_standin_delay_us,
                                 _gpu_standin_stall_after=_gpu_standin_stall_after,
                                 _gpu_standin_watchdog_ms=_gpu_standin_watchdog_ms)
        ordering = OrderOptions(batch_size=batch_size, shuffle=shuffle, seed=seed, shuffle_buffer=shuffle_buffer,
                                shuffle_block=shuffle_block, shuffle_window=shuffle_window, shuffle_mix=shuffle_mix,
                                stream=stream, samples_per_epoch=samples_per_epoch, drop_last=drop_last,
                                partition=partition, rank=rank, world_size=world_size, _batch_stride=_batch_stride,
                                _batch_offset=_batch_offset, _batch_share=_batch_share)
        decoding = DecodeOptions(map=map, batch_map=batch_map, on_error=on_error, max_skips=max_skips,
                                 max_skip_fraction=max_skip_fraction, skip_probation=skip_probation,
                                 _leave_failed_slots=_leave_failed_slots)
        source = SourceOptions(sources, fields, key_rule=key_rule, key_column=key_column, keys=keys)
        tuning = TuningOptions(decode_threads=decode_threads, io_depth=io_depth, coalesce_bytes=coalesce_bytes,
                               read_ahead_batches=read_ahead_batches, max_read_bytes_per_s=max_read_bytes_per_s,
                               prefetch=prefetch, autotune=autotune, timeout=timeout, max_open_files=max_open_files,
                               memory_budget=memory_budget, index_cache_bytes=index_cache_bytes)
        observing = ObserveOptions(observe=observe, record_stats=record_stats, log_every=log_every, window=window,
                                   slow_factor=slow_factor, slow_floor_s=slow_floor_s, jsonl=jsonl,
                                   trace_spans=trace_spans)
        opt = _stoker.LoaderOptions()
        ordering.fill(opt)  # rank, world_size and drop_last resolved
        opt.storage = storage_options(s3_endpoint=s3_endpoint, profile=profile, region=region,
                                      retry_deadline_s=retry_deadline_s, cache_dir=cache_dir, cache_bytes=cache_bytes,
                                      http_headers=http_headers)
        source.fill(opt, ordering)
        tuning.fill(opt)
        observing.fill(opt)
        delivery.fill(opt, fields)
        decoding.fill(opt)
        device = delivery.device  # "cuda" resolved to torch's current device
        self._mixture, self._classes = source.mixture, source.classes
        self._skip = decoding.skip
        self._with_keys = keys
        self._map = decoding.map
        self._batch_map = batch_map
        self._batch_map_s = 0.0

        self._native = _stoker.NativeLoader.create(opt)
        self._map_outputs = self._map.outputs() if self._map is not None else []
        if self._map is not None and self._map.has_objects and device.startswith("cuda"):
            raise ValueError("the map returns values that are not numpy arrays (lists in the batch): "
                             f"{[k for k, i in self._map_outputs if i is None]}; not with device='cuda'")
        index = self._native.settings().get("index", {})
        if index.get("remote_read_whole"):
            # The reads a manifest saves, said where they happen (issue 31).
            _log.warning("stoker: %d remote shards have no index sidecar and were read whole to count their "
                         "samples before the first batch; `stoker index --out-dir DIR <shards>` writes the sidecars and "
                         "a stoker-manifest.json to upload beside them, and a loader given that manifest "
                         "reads no shard before its first batch's; or read them as webdataset does with "
                         "stream=True, samples_per_epoch=N (docs/guides/stream.md, \"Stream mode\")", index["remote_read_whole"])
        order = str(self._native.settings().get("order", ""))
        if "write the rows shuffled" in order:  # a layout that limits the mix (pipeline/planner.cc)
            _log.warning("stoker: shuffle=True mixes these Parquet rows only in part: %s", order)
        self._npz_fields = {name for name, spec in fields.items() if spec.kind == _stoker.FieldKind.npz}
        # text/json/msgpack/pickle: [B, max_bytes] + "<field>.len" in the buffer, a list here;
        # variable-size images: [B, max_pixels * C] + "<field>.shape", a list of arrays (_members.py).
        self._str_fields = {name: _members.object_kind(spec) for name, spec in fields.items()
                            if _members.object_kind(spec)}
        self._var_images = {name for name, spec in fields.items() if _members.is_variable_image(spec)}
        self._cursor = EpochCursor()  # the epoch of the next iter(), and how it begins (epochs.py)
        self._generation = 0  # which iterator owns the native run
        self._live: Any = None  # a weak reference to the iterator that owns the native run
        self._told_left_out = False
        self._attach(output, observe, device=device, source="stoker.Loader",
                     config={"batch_size": batch_size, **self._start_settings(),
                             "max_read_bytes_per_s": max_read_bytes_per_s,
                             "batches": self._native.plan.batches},
                     **observing.observer_args)
        if self._observer is not None and self._map is not None:
            self._observer._advise = self._map_advice  # a decode-bound verdict names the map

    def _attach(self, output: str, observe: bool, *, device: str, source: str, config: dict, window: int,
                log_every: int | None, slow_factor: float, slow_floor_s: float,
                jsonl: str | os.PathLike | None, trace_spans: int) -> None:
        """The observer (when ``observe``) and the output library, once the
        native loader exists; shared by every loader built on the engine."""
        _exit.track(self)
        self._observer: Observer | None = None
        self._engine_origin = 0.0
        if observe:
            self._observer = Observer(
                window=window, log_every=log_every, slow_factor=slow_factor, slow_floor_s=slow_floor_s,
                jsonl=jsonl, trace_events=trace_spans, source=source, config=config,
                source_names=self._mixture.names if self._mixture is not None else None)
            # Where the engine's trace clock starts, on Python's clock: the
            # two traces then merge on one time axis.
            t0 = time.perf_counter()
            since_start = _stoker.stage_snapshot(self._native).time_s
            self._engine_origin = (t0 + time.perf_counter()) / 2 - since_start
        elif jsonl is not None or trace_spans:
            raise ValueError("jsonl and trace_spans need observe=True")
        self._torch = None
        self._convert = lambda a: a  # numpy views as they are
        self._device = device
        self._stream = None  # () -> the current CUDA stream as an integer, for device="cuda"
        self._h2d_exposed = 0.0  # the engine's exposed copy time already given to the observer
        if output == "torch":
            import torch

            self._torch = torch
            # device="cuda": the arrays are CUDA tensors already (DLPack).
            self._convert = (lambda a: a) if device.startswith("cuda") else torch.from_numpy
            if device.startswith("cuda"):
                dev = torch.device(device)
                self._stream = lambda: torch.cuda.current_stream(dev).cuda_stream

    # -- epochs and length -------------------------------------------------
    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next iteration follows (without
        it, an iteration after a used-up epoch begins the next one: see
        ``__iter__``). After load_state_dict, set_epoch of the restored epoch
        keeps the resume, so
        ``for e in range(loader.epoch, n): loader.set_epoch(e); for b in loader:``
        continues exactly."""
        self._cursor.set_epoch(epoch)  # the engine moves at iter()

    @property
    def epoch(self) -> int:
        return self._cursor.epoch

    def __len__(self) -> int:
        """Batches per epoch on this rank (equal on every rank)."""
        return self._native.plan.batches

    @property
    def classes(self) -> list[str] | None:
        """An image folder's class names (label i is classes[i], torchvision's
        ImageFolder order), or those of local shards `stoker pack` wrote from one
        (PREFIX.classes.json beside them); None for other shards."""
        return self._classes

    @property
    def plan(self) -> "_stoker.PlanInfo":
        """Samples in the dataset, on this rank, dropped and padded; batches."""
        return self._native.plan

    # -- iteration ----------------------------------------------------------
    def __iter__(self) -> Iterator[dict]:
        """One pass over an epoch. Epochs advance by themselves, as
        torch's DataLoader(shuffle=True) reshuffles on every iter(), for loops
        that never call set_epoch (Lightning, Accelerate, HF Trainer): when
        every batch of the epoch was delivered (here or before the state that
        load_state_dict restored), this begins epoch + 1, with the batches
        the engine already prepared for it. set_epoch since then decides
        instead. An iteration broken off mid-epoch is not used up: a new one
        restarts that epoch from its start (after load_state_dict, continues
        at the restored batch)."""
        self._refuse_concurrent_iteration()
        self._tell_left_out()
        if self._cursor.begin(self._used_up) != RESUME:
            # The next epoch keeps the run's carried-over epoch; an epoch begun again starts over.
            self._native.set_epoch(self._cursor.epoch)
        self._generation += 1
        it = _EpochIterator(self, self._generation)
        self._live = weakref.ref(it)
        return it

    def _refuse_concurrent_iteration(self) -> None:
        """One pass at a time: a new iter() takes the native run over from
        the last one (which then raises if used), so a second thread
        iterating while another's pass is still open would share one run
        and see its batches twice. That is refused before it delivers
        anything; in one thread, a new iter() simply starts over."""
        live = self._live() if self._live is not None else None
        if live is None or live._loader is None or live._thread == threading.get_ident():
            return
        owner = next((t.name for t in threading.enumerate() if t.ident == live._thread), "a thread now ended")
        raise RuntimeError(
            f"{type(self).__name__} is already being iterated by {owner}: a loader delivers one pass at a time "
            "(two iterators at once would hand out the same batches twice). Give each consumer a loader of its "
            "own (with rank=/world_size= to split the data between them), or finish, break out of and drop "
            "the other iteration first.")

    def _tell_left_out(self) -> None:
        """Says once what the partition policy leaves out of every epoch, and how to keep it."""
        if self._told_left_out:
            return
        self._told_left_out = True
        plan = self._native.plan
        # dropped_samples: over all ranks, the partition's remainder and the
        # short last batches drop_last drops.
        if plan.dropped_samples > 0:
            _log.warning(
                "stoker: %d of the dataset's %d samples are left out of every epoch so that each of the %d ranks "
                "runs the same number of full batches (%d samples each); partition='exact' delivers every "
                "sample exactly once (short last batches), drop_last=False keeps each rank's short last batch",
                plan.dropped_samples, plan.dataset_samples, self._native.options.world_size, plan.rank_samples)

    def _used_up(self) -> bool:
        """Every batch of the current epoch was delivered (the engine's
        position, so a restored state at an epoch's end counts too)."""
        batches = self._native.plan.batches
        return batches > 0 and json.loads(self._native.state())["next_batch"] >= batches

    def _mapped_dict(self, arrays: list, keys: list, urls: list) -> dict:
        """A batch of the map's outputs: its arrays (in the batch's own
        arrays) and its other values as lists, taken from the map's table."""
        convert = self._convert
        index = next(a for name, a in arrays if name == "__index__")
        objects = (self._map.collect(index.__array_interface__["data"][0], len(index))
                   if self._map.has_objects else {})
        batch: dict[str, Any] = {key: objects[key] if i is None else convert(arrays[i][1])
                                 for key, i in self._map_outputs}
        batch["__index__"] = convert(index)
        self._add_keys(batch, keys, urls)
        return batch

    def _add_keys(self, batch: dict, keys: list, urls: list) -> None:
        """__key__ and __url__ (and a mixture's __source__) beside the arrays."""
        if self._with_keys:  # an empty batch (partition="exact") has an empty list
            batch["__key__"] = keys
            batch["__url__"] = urls
            if self._mixture is not None:
                batch["__source__"] = self._native.sources_of(urls)

    def _finish(self, item) -> dict:
        """The batch dict, after batch_map (timed) when there is one."""
        batch = self._to_dict(item)
        if self._batch_map is None:
            return batch
        t0 = time.perf_counter()
        batch = self._batch_map(batch)
        self._batch_map_s += time.perf_counter() - t0
        if not isinstance(batch, dict):
            raise TypeError(f"batch_map returned {type(batch).__name__}, not the batch dict")
        return batch

    def _to_dict(self, item) -> dict:
        _, arrays, keys, urls = item[:4]  # (index, arrays, keys, urls, failed slots)
        if self._map is not None:
            return self._mapped_dict(list(arrays), keys, urls)
        convert = self._convert
        batch: dict[str, Any] = {}
        if self._str_fields:
            arrays = list(arrays)
            lengths = {name[:-4]: array for name, array in arrays if name.endswith(".len")}
            for name, array in arrays:
                if name in self._str_fields:
                    batch[name] = _members.objects(self._str_fields[name], array, lengths[name])
            arrays = [(n, a) for n, a in arrays if n not in self._str_fields
                      and not (n.endswith(".len") and n[:-4] in self._str_fields)]
        if self._var_images:
            arrays = list(arrays)
            shapes = {name[:-6]: array for name, array in arrays if name.endswith(".shape")}
            for name, array in arrays:
                if name in self._var_images:
                    batch[name] = _members.image_list(array, shapes[name], convert)
            arrays = [(n, a) for n, a in arrays if n not in self._var_images
                      and not (n.endswith(".shape") and n[:-6] in self._var_images)]
        for name, array in arrays:
            field, _, member = name.partition("/")
            if field in self._npz_fields and member:
                batch.setdefault(field, {})[member] = convert(array)
            else:
                batch[name] = convert(array)
        self._add_keys(batch, keys, urls)
        return batch

    def _log_skips(self) -> None:
        for r in self._native.take_skip_log():
            if r["slot"] < 0:  # stream mode: a shard left early
                _log.warning("skipped the rest of shard %s (epoch %d, batch %d): %s",
                             r["key"], r["epoch"], r["batch"], r["cause"])
            else:
                _log.warning("skipped sample %s (epoch %d, batch %d, slot %d): %s",
                             r["key"], r["epoch"], r["batch"], r["slot"], r["cause"])

    @property
    def skips(self) -> dict:
        """on_error="skip": {"skipped", "refilled", "seen"} over the loader's life."""
        return self._native.skips()

    # -- resumption ---------------------------------------------------------
    def state_dict(self) -> dict:
        """Where this rank stands: restore it in a new process to continue.
        Valid at any point: before the first batch, mid-epoch, at an epoch's end,
        after set_epoch(e) (then it is the start of e)."""
        native = json.loads(self._native.state())
        if self._cursor.starts:
            native.update(epoch=self._cursor.epoch, next_batch=0)
            native.pop("elastic", None)  # a new epoch starts whole
            if "skip" in native:
                native["skip"].update(reserve_cursor=0, known_bad=[])
        return {"stoker": native}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue with exactly the batches not yet delivered, in order."""
        native = state["stoker"]
        self._native.restore(json.dumps(native))
        if self._mixture is not None:
            self._tell_mix_segment(native)
        self._cursor.restored(native["epoch"])  # a state at its epoch's end: the next iter() begins epoch + 1

    def _tell_mix_segment(self, saved: Mapping[str, Any]) -> None:
        """A restore whose weights changed a mixture mid-epoch leaves the interrupted
        passes' undelivered samples out of that epoch (docs/guides/user-code.md, Mixtures): said once, here."""
        now = json.loads(self._native.state()).get("mix", {})
        if "segment" in now and "segment" not in saved.get("mix", {}):
            _log.warning("stoker: the mixture's weights changed in the middle of epoch %d (saved %s, now %s): "
                         "the rest of it is drawn by the new weights, each source from a fresh pass, so the "
                         "samples its interrupted passes had not delivered are left out of this epoch; restore "
                         "a state saved at an epoch's end to keep every pass whole",
                         int(saved["epoch"]), saved["mix"]["weights"], now.get("weights"))

    @functools.cached_property
    def engine(self) -> "Engine":
        """The engine surface other loaders build on (RayLoader): see Engine. Made once:
        RayLoader's receiving engine reaches it for every batch."""
        return Engine(self)

    # -- observing -------------------------------------------------------------
    @property
    def observer(self) -> Observer | None:
        return self._observer

    def _start_settings(self) -> dict:
        s = self._native.settings()
        return {k: s[k] for k in ("io_depth", "read_ahead_batches", "decode_threads", "prefetch", "autotune",
                                  "cores_from")}

    @property
    def settings(self) -> dict:
        """The settings in effect now: io_depth, read_ahead_batches,
        decode_threads, prefetch, autotune, the knobs the user fixed
        (``fixed``), how many changes the controller made (``changes``), and
        the CPUs the defaults count (``cores``) with where that number came
        from (``cores_from``: "1 core: affinity 2, no quota, 2 local ranks
        (LOCAL_WORLD_SIZE)"). Where image fields decode on the GPU too
        (``stoker.image(decode=...)``), ``gpu_decode``: the decoder, the share
        of each batch's images it is sent now and why. ``order``: the epoch
        order in words ("samples permuted within windows of 64 shards (auto:
        ...)"); ``index``: the shard index tables held (``held_bytes``), their
        bound (``max_bytes``, 0: every table stays), the tables loaded since
        the start (``loads``) and the shards. ``mode``: "indexed", or
        "stream" (``stream=True``) with ``stream``: its ``samples_per_epoch``,
        ``shuffle_buffer`` (1: stream order) and why. ``image_upscales``: for each
        image field whose resize can scale up (not ``resize="none"`` or
        random_resized_crop), the ``images`` decoded so far, how many were
        ``upscaled``, the first such image's ``first_size`` and the output
        ``size``, both (H, W); most images upscaled is said once, at the first batch."""
        s = self._native.settings()
        s["changes"] = len(self._native.tune_log())
        return s

    def _tell_upscale(self) -> None:
        """Says once when an image field scales most of its images up (a default image()
        turns 28x28 PNGs into 224x224): the engine counts them as it decodes
        (pipeline/upscale_count.h); read at the first batches of the loader's life."""
        self._upscale_checks -= 1
        counted = False
        for u in self._native.settings().get("image_upscales", []):
            counted = counted or u["images"] > 0
            if u["upscaled"] * 2 <= u["images"]:
                continue
            self._upscale_checks = 0
            (h, w), (H, W) = u["first_size"], u["size"]
            _log.warning(
                "stoker: image field %r scales its images up: %d of the %d decoded so far are smaller than its "
                "output, size=(%d, %d) (H, W)%s, e.g. (%d, %d), and are resized up to it; to keep their size pass "
                "image((%d, %d), resize=\"none\") (every image must be that size), or a size nearer theirs",
                u["field"], u["upscaled"], u["images"], H, W,
                ", image()'s default" if (H, W) == (224, 224) else "", h, w, h, w)
        if counted:
            self._upscale_checks = 0  # decided on what the first batch held

    def _log_tuning(self) -> None:
        for change in self._native.take_tune_log():
            if self._observer is not None:
                self._observer.tuned(change)
            else:
                _log.info("stoker: %s", change["line"])

    def step(self):
        """``with loader.step(): train(batch)``: the step's time is t_compute of
        the latest batch. Without it t_compute is the time between requests."""
        if self._observer is None:
            return contextlib.nullcontext()
        return self._observer.step()

    def to(self, batch, device, non_blocking: bool = True):
        """Copies a batch's tensors to ``device``, timed as t_h2d (CUDA events
        on CUDA; a CPU target is no copy)."""
        return to_device(batch, device, non_blocking=non_blocking, observer=self._observer)

    def report(self) -> dict:
        """Golden numbers over the window (t_wait mean/std/p50/p95/p99/max,
        efficiency, keeps_up), totals, the bottleneck verdict with a
        recommended change, and the slow batches so far."""
        if self._observer is None:
            raise RuntimeError("this loader was created with observe=False")
        report = self._observer.report()
        report["skips"] = self._native.skips()
        if self._mixture is not None:  # each source's draws, pass and this rank's delivered samples
            report["mix"] = json.loads(self._native.state())["mix"]
            # and its reads: how many, their bytes and the readers' seconds in them (what names a slow source)
            report["mix"]["read"] = self._native.stats()["source_reads"]
        if self._device != "cpu" or self._native.options.pin_memory:
            # copy_s on the copy stream, split into exposed (the consumer waited) and hidden
            report["h2d"] = self._native.stats()["h2d"]
        if self._map is not None or self._batch_map is not None:
            report["map"] = self._map_report()
        if "gpu_decode" in self._native.stats():
            report["gpu_decode"] = self._native.stats()["gpu_decode"]
        self._log_tuning()
        report["tuning"] = {"settings": self.settings, "changes": self._native.tune_log()}
        return report

    summary = report

    def _map_advice(self, verdict: dict) -> str:
        """The verdict's recommendation, naming the user's map when decode is
        the bottleneck and the map is most of the decoders' time."""
        text = verdict.get("recommendation", "")
        if verdict.get("bottleneck") != "decode":
            return text
        m = self._map_report()
        if m.get("share_of_decode", 0.0) < 0.5:
            return text
        said = (f"your map= is {m['share_of_decode']:.0%} of the decoders' time ({m['per_sample_us']:.0f} us a "
                f"sample, {m['gil_wait_share']:.0%} of it waiting for the GIL): ")
        if m["gil_wait_share"] >= 0.25:
            return said + ("it is bound by the GIL, so more decode_threads will not help: move its work into "
                           "numpy/OpenCV/Pillow/tokenizers calls that release the GIL, or into batch_map= on "
                           "whole batches")
        return said + "make it cheaper, or " + text

    def _map_report(self) -> dict:
        """The user's functions as stages: the map's samples, busy time on the
        decode threads, time per sample, how much of it went to waiting for
        the GIL (gil_wait_share: other threads' Python holding it; near 0
        where the map's work releases it), its share of the decoders' busy
        time; batch_map's time in the consumer's thread."""
        out: dict[str, Any] = {"batch_map_s": self._batch_map_s}
        if self._map is None:
            return out
        stats = self._native.stats()
        native, own = stats["map"], self._map.stats()
        busy = float(native["busy_s"])
        samples = int(native["items"])
        decode_busy = float(stats["decode"]["busy_s"])
        out.update(samples=samples, busy_s=busy, per_sample_us=busy / samples * 1e6 if samples else 0.0,
                   call_s=own["call_s"], gil_wait_s=own["gil_wait_s"],
                   gil_wait_share=min(1.0, own["gil_wait_s"] / busy) if busy > 0 else 0.0,
                   share_of_decode=min(1.0, busy / decode_busy) if decode_busy > 0 else 0.0)
        return out

    def save_trace(self, path: str | os.PathLike) -> None:
        """A Chrome trace (Perfetto, chrome://tracing): the engine's stage spans
        (needs trace_spans=N) merged with the Python-side wait and step spans."""
        if self._observer is None:
            raise RuntimeError("this loader was created with observe=False")
        self._observer.save_trace(path, self._native.trace_json(), self._engine_origin)

    def close(self) -> None:
        """Stop all threads now (also done when the loader is garbage collected);
        writes the observer's final summary and verdict."""
        self._native.stop()
        if self._observer is not None:
            self._observer.close()


class Engine:
    """A Loader's engine, as other loaders build on it (``loader.engine``): RayLoader's
    shares make batches with it (``next_raw``), and its receiving engine finishes the
    shares' batches (``receive``). The one surface they use; nothing else of a Loader's
    insides is reached from outside this module."""

    def __init__(self, loader: Loader) -> None:
        self._loader = loader

    @property
    def device(self) -> str:
        return self._loader._device

    @property
    def copies(self) -> bool:
        """Its batches are copied by the engine (a device, or pinned memory)."""
        return self._loader._device != "cpu" or self._loader._native.options.pin_memory

    @property
    def skips(self) -> bool:
        return self._loader._skip

    def stats(self) -> dict:
        return self._loader._native.stats()

    def state(self) -> dict:
        return json.loads(self._loader._native.state())

    def restore(self, state: Mapping[str, Any]) -> None:
        self._loader._native.restore(json.dumps(dict(state)))

    def begin_epoch(self, epoch: int) -> None:
        self._loader._native.set_epoch(epoch)

    def next_raw(self):
        """The engine's next item as it is: (index, [(name, array)], keys, urls, failed slots)."""
        return self._loader._native.next(0)

    def _stream(self) -> int:
        return 0 if self._loader._stream is None else self._loader._stream()

    def receive(self, b: int, item: tuple, ahead: bool = False):
        """Batch b made elsewhere (a share's item), finished here: copied into this
        engine's pool, its failed slots refilled, copied to the device; the batch dict.
        ahead: the copy only issued; deliver() it later (see deliver)."""
        loader = self._loader
        _, arrays, keys, urls, failures = item
        if ahead:
            return loader._native.receive_ahead(b, arrays, keys, urls, failures)
        try:
            done = loader._native.receive(b, arrays, keys, urls, failures, self._stream())
        finally:  # also when the budget raises: the skips that tripped it are logged
            if loader._skip:
                loader._log_skips()
        return loader._to_dict(done)

    def deliver(self, pending) -> dict:
        """A batch receive(ahead=True) issued, once its copy is done: the batch dict."""
        return self._loader._to_dict(pending.deliver(self._stream()))

    def new_h2d_exposed(self) -> float:
        """Seconds of device copies the consumer waited for since the last call."""
        loader = self._loader
        exposed = _stoker.stage_snapshot(loader._native).h2d_exposed_s
        new = max(0.0, exposed - loader._h2d_exposed)
        loader._h2d_exposed = max(exposed, loader._h2d_exposed)
        return new


_snapshot = _stoker.stage_snapshot


def _native_next(loader: Loader):
    stream = 0 if loader._stream is None else loader._stream()
    if not loader._skip:
        return loader._native.next(stream)
    try:
        return loader._native.next(stream)
    finally:  # also when the budget raises: the skips that tripped it are logged
        loader._log_skips()


class _EpochIterator:
    """One pass over an epoch. A failed batch raises from __next__ and the
    iterator stays usable: the next call yields the batch after it. Dropping
    the iterator (breaking out of a loop) stops every native thread. At the
    epoch's natural end the threads keep going: they prepare the next epoch's
    first batches (kept by the next iter() or set_epoch(epoch + 1), dropped
    by any other epoch)."""

    def __init__(self, loader: Loader, generation: int) -> None:
        self._loader = loader
        self._generation = generation
        self._thread = threading.get_ident()  # the thread that began the pass

    def __iter__(self) -> "_EpochIterator":
        return self

    def __next__(self) -> dict:
        loader = self._loader
        if loader is None:
            raise StopIteration
        if loader._generation != self._generation:
            # A newer iter() owns the run: what this one would get is that pass's.
            self._loader = None
            raise RuntimeError("this iteration was superseded: iter() was called on the loader again, which "
                               "started a new pass; use the newest iterator (a loader delivers one pass at a time)")
        obs = loader._observer
        if obs is None:
            item = _native_next(loader)
            if item is None:
                self._loader = None
                raise StopIteration
            loader._log_tuning()
            if loader._upscale_checks > 0:
                loader._tell_upscale()
            return loader._finish(item)
        native = loader._native
        before = _snapshot(native)
        t0 = obs.request()
        item = _native_next(loader)
        if item is None:
            self._loader = None
            raise StopIteration
        batch = loader._finish(item)
        after = _snapshot(native)
        obs.delivered(t0, before, after)
        if after.h2d_exposed_s > loader._h2d_exposed:  # device copies the consumer waited for
            obs.add_h2d(after.h2d_exposed_s - loader._h2d_exposed)
            loader._h2d_exposed = after.h2d_exposed_s
        loader._log_tuning()
        if loader._upscale_checks > 0:
            loader._tell_upscale()
        return batch

    def _stop(self) -> None:
        loader, self._loader = self._loader, None
        if loader is not None and loader._generation == self._generation:
            loader._native.stop()

    def __del__(self) -> None:
        if getattr(self, "_loader", None) is not None:
            self._stop()
