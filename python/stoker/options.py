"""A Loader's keywords, taken by the part of the loader each one configures.

``stoker.Loader(...)`` takes every keyword in its own signature (so help(),
inspect.signature and editors show them all) and hands each to its part:

- ``SourceOptions``: what is read and how its samples are named;
- ``OrderOptions``: the order of the samples and the rank's share of it;
- ``DecodeOptions``: what happens to a sample once its bytes are read (the
  user's map, a batch_map, the skip policy);
- ``DeviceOptions``: where and as what a batch is delivered;
- ``TuningOptions``: the knobs the tuner moves and the bounds it keeps;
- ``ObserveOptions``: what is measured and logged;
- storage: ``loader.storage_options`` (the keywords of a remote store).

Each part checks its keywords, with the error messages users and tests know,
and fills its fields of the native ``LoaderOptions`` in ``fill``: a keyword's
meaning is written in one place. A check that is a choice among values runs
when the part is made; the rest run in ``fill`` (drop_last against the
partition, the device and its CUDA, the map). The Loader makes and fills the
parts in the order its checks have always run, so of several bad keywords a
call is told of the same one first (tests/python/test_options.py). None of
this module imports loader.py.
"""
from __future__ import annotations

import inspect
import json
import os
import re
from typing import Any, Callable, Mapping, Sequence

from . import _members, _parquet, _stoker
from .mixture import Mixture

_PARTITION = {"drop": _stoker.PartitionPolicy.drop, "pad": _stoker.PartitionPolicy.pad,
              "exact": _stoker.PartitionPolicy.exact}
_KEY_RULE = {"webdataset": _stoker.KeyRule.webdataset, "underscore": _stoker.KeyRule.underscore}
_ON_ERROR = {"raise": _stoker.OnError.raise_, "skip": _stoker.OnError.skip}


# -- source ---------------------------------------------------------------------------------
class SourceOptions:
    """What is read (``sources``: shards, a manifest, an image folder, Parquet files, or a
    ``stoker.mix``) and the fields of each sample, with how samples are named
    (``key_rule``, ``key_column``, ``keys``). After ``fill``: ``mixture`` (or None) and
    ``classes`` (an image folder's or packed shards' class names, else None)."""

    def __init__(self, sources: str | Sequence[str] | Mixture, fields: Mapping[str, Any], *,
                 key_rule: str = "webdataset", key_column: str | None = None, keys: bool = True) -> None:
        if key_rule not in _KEY_RULE:
            raise ValueError(f"key_rule must be one of {sorted(_KEY_RULE)}, not {key_rule!r}")
        self.sources = sources
        self.fields = fields
        self.key_rule = key_rule
        self.key_column = key_column
        self.keys = keys
        self.mixture: Mixture | None = sources if isinstance(sources, Mixture) else None
        self.classes: list[str] | None = None

    def fill(self, opt: "_stoker.LoaderOptions", order: "OrderOptions") -> None:
        sources = self.sources
        if self.mixture is not None:  # stoker.mix: one entry of sources per source (mixture.py)
            opt.mix = self.mixture.options(order.partition, int(order.batch_size), int(order.world_size))
            sources = self.mixture.sources
        single = isinstance(sources, (str, os.PathLike))
        opt.sources = [str(sources)] if single else [str(s) for s in sources]
        _parquet.prepare(opt.sources)  # a Parquet source: the plugin for the pyarrow installed
        # `classes`: a directory of class sub-directories is an image folder (C++
        # lists it with the same rule); packed shards have pack's list; a
        # mixture's sources each have their own (none here).
        if self.mixture is not None:
            self.classes = None
        elif len(opt.sources) == 1 and os.path.isdir(opt.sources[0]):
            self.classes = sorted(e.name for e in os.scandir(opt.sources[0]) if e.is_dir())
        else:
            self.classes = _packed_classes(opt.sources)
        # Copies: one spec object may serve several fields.
        opt.fields = [spec.named(name) for name, spec in self.fields.items()]
        opt.key_rule = _KEY_RULE[self.key_rule]
        opt.include_keys = self.keys
        opt.key_column = self.key_column or ""


_PACKED_SHARD = re.compile(r"(.*)-\d{6}\.tar")


def _packed_classes(sources: list[str]) -> list[str] | None:
    """The class names `stoker pack` of a class-folder tree wrote beside its shards
    (PREFIX.classes.json, src/cli/pack.cc), for local shards PREFIX-NNNNNN.tar or a
    manifest listing them. None where the shards are of no such run, come from runs that
    disagree, or are remote (one name list per dataset, read without the engine)."""
    paths: list[str] = []
    for source in sources:
        if "://" in source:
            return None
        if source.endswith(".json") and os.path.isfile(source):  # a dataset manifest
            try:
                with open(source, encoding="utf-8") as f:
                    entries = json.load(f).get("shards", [])
                base = os.path.dirname(source)
                paths += [p if os.path.isabs(p) or "://" in p else os.path.join(base, p)
                          for p in (e.get("path", "") for e in entries if isinstance(e, dict))]
            except (OSError, ValueError, AttributeError):
                return None  # the engine says what is wrong with it
        elif any(c in source for c in "*?[{"):
            try:
                paths += _stoker.expand_sources([source])
            except _stoker.StokerError:
                return None  # the engine says what is wrong with it
        else:
            paths.append(source)
    prefixes = set()
    for path in paths:
        m = _PACKED_SHARD.fullmatch(path)
        if not m:
            return None
        prefixes.add(m.group(1))
    names = None
    for prefix in sorted(prefixes):
        try:
            with open(prefix + ".classes.json", encoding="utf-8") as f:
                these = json.load(f)
        except (OSError, ValueError):
            return None
        if not (isinstance(these, list) and all(isinstance(n, str) for n in these)) or names not in (None, these):
            return None
        names = these
    return names


# -- order ----------------------------------------------------------------------------------
class OrderOptions:
    """The order of the samples: batches, shuffling (indexed, blocks, windows, Parquet
    mixes, or a stream's buffer), and the rank's share of each epoch (``partition``,
    ``rank``/``world_size``: torch.distributed's, else torchrun's environment, when left
    out). ``drop_last`` left out: True under DDP and for a stream, never with
    ``partition="exact"``. ``_batch_*``: which of the rank's batches this engine makes
    (one share of stoker.RayWorkers). ``rank``, ``world_size`` and ``drop_last`` are
    resolved by ``fill``, after the other parts' keywords were checked."""

    def __init__(self, *, batch_size: int, shuffle: bool = False, seed: int = 0, shuffle_buffer: int = 0,
                 shuffle_block: int | None = None, shuffle_window: int | None = None,
                 shuffle_mix: int | None = None, stream: bool = False, samples_per_epoch: int | None = None,
                 drop_last: bool | None = None, partition: str = "drop", rank: int | None = None,
                 world_size: int | None = None, _batch_stride: int = 1, _batch_offset: int = 0,
                 _batch_share: int = 1) -> None:
        if partition not in _PARTITION:
            raise ValueError(f"partition must be one of {sorted(_PARTITION)}, not {partition!r}")
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.shuffle_buffer = shuffle_buffer
        self.shuffle_block = shuffle_block
        self.shuffle_window = shuffle_window
        self.shuffle_mix = shuffle_mix
        self.stream = stream
        self.samples_per_epoch = samples_per_epoch
        self.drop_last = drop_last
        self.partition = partition
        self.rank = rank
        self.world_size = world_size
        self.batch_stride = _batch_stride
        self.batch_offset = _batch_offset
        self.batch_share = _batch_share

    def fill(self, opt: "_stoker.LoaderOptions") -> None:
        if self.drop_last and self.partition == "exact":
            raise ValueError("partition='exact' delivers every sample, so drop_last must be False (or left out)")
        if self.rank is None or self.world_size is None:
            env_rank, env_world = _distributed_rank_world()
            self.rank = env_rank if self.rank is None else self.rank
            self.world_size = env_world if self.world_size is None else self.world_size
        if self.drop_last is None:
            # One process keeps its short last batch, as torch's DataLoader
            # (drop_last=False). Ranks keep equal batch counts with full
            # batches; what that leaves out is said at the first epoch.
            # exact drops nothing, its last batches included.
            # A stream delivers samples_per_epoch // (world * batch) full batches.
            self.drop_last = self.partition != "exact" and (int(self.world_size) > 1 or bool(self.stream))
        opt.batch_size = self.batch_size
        opt.shuffle = self.shuffle
        opt.seed = self.seed
        opt.shuffle_buffer = self.shuffle_buffer
        opt.shuffle_block = -1 if self.shuffle_block is None else int(self.shuffle_block)
        opt.shuffle_window = -1 if self.shuffle_window is None else int(self.shuffle_window)
        opt.shuffle_mix = -1 if self.shuffle_mix is None else int(self.shuffle_mix)
        opt.stream = bool(self.stream)
        opt.samples_per_epoch = int(self.samples_per_epoch or 0)
        opt.drop_last = self.drop_last
        opt.partition = _PARTITION[self.partition]
        opt.rank = self.rank
        opt.world_size = self.world_size
        opt.batch_stride = int(self.batch_stride)
        opt.batch_offset = int(self.batch_offset)
        opt.batch_share = int(self.batch_share)


def _distributed_rank_world() -> tuple[int, int]:
    """rank and world size from torch.distributed, else torchrun's environment."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except ImportError:
        pass
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))


# -- decode ---------------------------------------------------------------------------------
class DecodeOptions:
    """What happens to a sample once its bytes are read: ``map`` (the user's function
    on each sample, on the decode threads), ``batch_map`` (on each assembled batch),
    and what a sample that fails becomes (``on_error``, with the skip budget
    ``max_skips`` / ``max_skip_fraction`` after ``skip_probation`` samples;
    ``_leave_failed_slots``: a RayWorkers share leaves them to the trainer). After
    ``fill``: ``map``, the native SampleMap (or None)."""

    def __init__(self, *, map: Callable | None = None, batch_map: Callable[[dict], dict] | None = None,
                 on_error: str = "raise", max_skips: int | None = None, max_skip_fraction: float | None = None,
                 skip_probation: int = 1000, _leave_failed_slots: bool = False) -> None:
        if on_error not in _ON_ERROR:
            raise ValueError(f"on_error must be one of {sorted(_ON_ERROR)}, not {on_error!r}")
        self.user_map = map
        self.batch_map = batch_map
        self.on_error = on_error
        self.max_skips = max_skips
        self.max_skip_fraction = max_skip_fraction
        self.skip_probation = skip_probation
        self.leave_failed_slots = _leave_failed_slots
        self.map: "_stoker.SampleMap | None" = None

    @property
    def skip(self) -> bool:
        return self.on_error == "skip"

    def fill(self, opt: "_stoker.LoaderOptions") -> None:
        """Raises where map or batch_map is not a function (after the device's checks, as always)."""
        opt.on_error = _ON_ERROR[self.on_error]
        opt.max_skips = int(self.max_skips or 0)
        opt.max_skip_fraction = float(self.max_skip_fraction or 0.0)
        opt.skip_probation = int(self.skip_probation)
        opt.leave_failed_slots = bool(self.leave_failed_slots)
        # map=: run by the decode threads on each sample (docs/guides/user-code.md, "Your own code").
        self.map = None if self.user_map is None else _sample_map(self.user_map)
        if self.map is not None:
            _stoker.set_sample_map(opt, self.map)
        if self.batch_map is not None and not callable(self.batch_map):
            raise TypeError(f"batch_map must be a function of the batch dict, not {type(self.batch_map).__name__}")


def _sample_map(fn: Callable) -> "_stoker.SampleMap":
    """The native map for ``map=fn``: called as fn(sample, rng) when fn takes
    two positional arguments, else fn(sample)."""
    if not callable(fn):
        raise TypeError(f"map must be a function of the sample, not {type(fn).__name__}")
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):  # a builtin without a signature: one argument
        params = []
    wants_rng = len(params) >= 2 or any(p.kind == p.VAR_POSITIONAL for p in params)
    return _stoker.SampleMap(fn, wants_rng)


# -- device ---------------------------------------------------------------------------------
class DeviceOptions:
    """Where and as what a batch is delivered: ``output`` (torch tensors or numpy
    arrays), ``device`` ("cpu", "cuda", "cuda:N"; "cpu-late" for tests) and
    ``pin_memory``. ``_late_copy_ms`` and ``_gpu_standin_*``: device="cpu-late"'s
    stand-ins (tests only). After ``fill``: ``device`` is the one in effect
    ("cuda" resolved to torch's current device)."""

    def __init__(self, *, device: str = "cpu", pin_memory: bool = False, output: str = "torch",
                 _late_copy_ms: int = 20, _gpu_standin_delay_us: int = 0, _gpu_standin_stall_after: int = -1,
                 _gpu_standin_watchdog_ms: int = 0) -> None:
        if output not in ("torch", "numpy"):
            raise ValueError(f"output must be 'torch' or 'numpy', not {output!r}")
        self.device = device
        self.pin_memory = pin_memory
        self.output = output
        self.late_copy_ms = _late_copy_ms
        self.gpu_standin_delay_us = _gpu_standin_delay_us
        self.gpu_standin_stall_after = _gpu_standin_stall_after
        self.gpu_standin_watchdog_ms = _gpu_standin_watchdog_ms

    def fill(self, opt: "_stoker.LoaderOptions", fields: Mapping[str, Any]) -> None:
        """Sets the device keywords on the native options. device="cuda" needs the CUDA
        runtime (raises, naming where it looked, where there is none), and fields that
        are arrays; pin_memory where there is none warns and has no effect, as torch's."""
        device, pin_memory = str(self.device), self.pin_memory
        if device.startswith("cuda"):
            if self.output != "torch":
                raise ValueError("device='cuda' delivers torch tensors: use output='torch'")
            try:  # the clear error, before any shard is opened
                _stoker.cuda_runtime(_cuda_lib_dirs())
            except _stoker.StokerError as e:
                err = _stoker.StokerError(f"device={device!r} needs CUDA: {e}")
                err.code = getattr(e, "code", "FailedPrecondition")
                raise err from None
            if device == "cuda":
                import torch

                device = f"cuda:{torch.cuda.current_device()}"
        elif device not in ("cpu", "cpu-late"):
            raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:N', not {device!r}")
        elif pin_memory:
            try:
                _stoker.cuda_runtime(_cuda_lib_dirs())
            except _stoker.StokerError as e:
                import warnings

                warnings.warn(f"pin_memory=True has no effect here: {e}", stacklevel=3)  # the loader's caller
        self.device = device
        opt.device = device
        opt.pin_memory = bool(pin_memory)
        opt.late_copy_ms = int(self.late_copy_ms)
        opt.gpu_standin_delay_us = int(self.gpu_standin_delay_us)
        opt.gpu_standin_stall_after = int(self.gpu_standin_stall_after)
        opt.gpu_standin_watchdog_ms = int(self.gpu_standin_watchdog_ms)
        if self.device.startswith("cuda") and any(_members.object_kind(s) or _members.is_variable_image(s)
                                                  for s in fields.values()):
            raise ValueError("text, json, msgpack and pickle fields are Python strings and objects, and "
                             "variable-size images lists of arrays: not with device='cuda'")


def _cuda_lib_dirs() -> list[str]:
    """Where a CUDA runtime may be besides the system's: torch's own lib
    directory and the nvidia-cuda-runtime wheel's (found without importing
    either)."""
    import importlib.util

    dirs = []
    # nvidia/cu13/lib: CUDA 13's wheels (nvidia-cuda-runtime, nvidia-nvjpeg) share one directory.
    for package, sub in (("torch", "lib"), ("nvidia.cuda_runtime", "lib"), ("nvidia", "cu13/lib"),
                         ("nvidia.nvjpeg", "lib")):
        try:
            spec = importlib.util.find_spec(package)
        except (ImportError, ValueError):
            spec = None
        for root in (spec.submodule_search_locations or []) if spec else []:
            dirs.append(os.path.join(root, sub))
    return dirs


# -- tuning ---------------------------------------------------------------------------------
class TuningOptions:
    """The knobs the tuner moves while the loader runs (``decode_threads``, ``io_depth``,
    ``read_ahead_batches``, ``prefetch``: None is tuned, a value stays fixed;
    ``autotune=False`` keeps the starting values), the reads' shape (``coalesce_bytes``,
    ``max_read_bytes_per_s``), and the bounds it works within (``memory_budget``,
    ``max_open_files``, ``index_cache_bytes``, ``timeout`` for one batch)."""

    def __init__(self, *, decode_threads: int | None = None, io_depth: int | None = None,
                 coalesce_bytes: int | None = None, read_ahead_batches: int | None = None,
                 max_read_bytes_per_s: int = 0, prefetch: int | None = None, autotune: bool = True,
                 timeout: float | None = None, max_open_files: int | None = None, memory_budget: int | None = None,
                 index_cache_bytes: int | None = None) -> None:
        self.decode_threads = decode_threads
        self.io_depth = io_depth
        self.coalesce_bytes = coalesce_bytes
        self.read_ahead_batches = read_ahead_batches
        self.max_read_bytes_per_s = max_read_bytes_per_s
        self.prefetch = prefetch
        self.autotune = autotune
        self.timeout = timeout
        self.max_open_files = max_open_files
        self.memory_budget = memory_budget
        self.index_cache_bytes = index_cache_bytes

    def fill(self, opt: "_stoker.LoaderOptions") -> None:
        opt.decode_threads = int(self.decode_threads or 0)
        opt.io_depth = -1 if self.io_depth is None else int(self.io_depth)
        opt.coalesce_bytes = -1 if self.coalesce_bytes is None else int(self.coalesce_bytes)
        opt.read_ahead_batches = -1 if self.read_ahead_batches is None else int(self.read_ahead_batches)
        opt.max_read_bytes_per_s = self.max_read_bytes_per_s
        opt.prefetch_batches = -1 if self.prefetch is None else int(self.prefetch)
        opt.autotune = bool(self.autotune)
        opt.timeout_ms = 0 if self.timeout is None else max(1, int(self.timeout * 1000))
        opt.max_open_files = int(self.max_open_files or 0)
        opt.memory_budget = int(self.memory_budget or 0)
        opt.index_cache_bytes = int(self.index_cache_bytes or 0)


# -- observe --------------------------------------------------------------------------------
class ObserveOptions:
    """What is measured and logged: the engine's counters (``record_stats``) and stage
    spans (``trace_spans``), and the observer (``observe``: each wait timed, slow
    batches logged with a cause, a summary every ``log_every`` batches over a
    ``window``; ``jsonl``: one record per batch). ``observer_args``: the observer's
    keywords, for Loader._attach."""

    def __init__(self, *, observe: bool = True, record_stats: bool = True, log_every: int | None = None,
                 window: int = 50, slow_factor: float = 5.0, slow_floor_s: float = 0.05,
                 jsonl: str | os.PathLike | None = None, trace_spans: int = 0) -> None:
        self.observe = observe
        self.record_stats = record_stats
        self.observer_args = dict(window=window, log_every=log_every, slow_factor=slow_factor,
                                  slow_floor_s=slow_floor_s, jsonl=jsonl, trace_spans=trace_spans)

    def fill(self, opt: "_stoker.LoaderOptions") -> None:
        opt.record_stats = self.record_stats
        opt.trace_spans = int(self.observer_args["trace_spans"])


# The parts, in the order a Loader makes them (each one's keywords: its __init__'s).
PARTS = (DeviceOptions, OrderOptions, DecodeOptions, SourceOptions, TuningOptions, ObserveOptions)
