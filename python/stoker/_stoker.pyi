"""stoker's native engine; use the `stoker` package, not this module."""

from collections.abc import Mapping, Sequence
import enum
from typing import Annotated, overload

import numpy
from numpy.typing import NDArray

from stoker import StokerError as StokerError


class ResizeMode(enum.Enum):
    none = 0

    stretch = 1

    center_crop = 2

    longest = 3

    random_resized_crop = 4

class PixelType(enum.Enum):
    uint8 = 0

    float32 = 1

class FieldKind(enum.Enum):
    image = 0

    npy = 1

    npz = 2

    scalar = 3

    bytes = 4

    text = 5

    json = 6

    msgpack = 7

    pickle = 8

class KeyRule(enum.Enum):
    webdataset = 0

    underscore = 1

class PartitionPolicy(enum.Enum):
    drop = 0

    pad = 1

    exact = 2

class OnError(enum.Enum):
    skip = 1

class ImageDecode(enum.Enum):
    auto = 0

    cpu = 1

    gpu = 2

class Resample(enum.Enum):
    bilinear = 0

    bicubic = 1

    box = 2

class ImageSpec:
    def __init__(self) -> None: ...

    @property
    def height(self) -> int: ...

    @height.setter
    def height(self, arg: int, /) -> None: ...

    @property
    def width(self) -> int: ...

    @width.setter
    def width(self, arg: int, /) -> None: ...

    @property
    def mode(self) -> ResizeMode: ...

    @mode.setter
    def mode(self, arg: ResizeMode, /) -> None: ...

    @property
    def chw(self) -> bool: ...

    @chw.setter
    def chw(self, arg: bool, /) -> None: ...

    @property
    def random_hflip(self) -> bool: ...

    @random_hflip.setter
    def random_hflip(self, arg: bool, /) -> None: ...

    @property
    def scale(self) -> list[float]: ...

    @scale.setter
    def scale(self, arg: Sequence[float], /) -> None: ...

    @property
    def ratio(self) -> list[float]: ...

    @ratio.setter
    def ratio(self, arg: Sequence[float], /) -> None: ...

    @property
    def resample(self) -> Resample: ...

    @resample.setter
    def resample(self, arg: Resample, /) -> None: ...

    @property
    def resize_to(self) -> int: ...

    @resize_to.setter
    def resize_to(self, arg: int, /) -> None: ...

    @property
    def pixel(self) -> PixelType: ...

    @pixel.setter
    def pixel(self, arg: PixelType, /) -> None: ...

    @property
    def normalize(self) -> bool: ...

    @normalize.setter
    def normalize(self, arg: bool, /) -> None: ...

    @property
    def mean(self) -> list[float]: ...

    @mean.setter
    def mean(self, arg: Sequence[float], /) -> None: ...

    @property
    def std(self) -> list[float]: ...

    @std.setter
    def std(self, arg: Sequence[float], /) -> None: ...

    @property
    def decode(self) -> ImageDecode: ...

    @decode.setter
    def decode(self, arg: ImageDecode, /) -> None: ...

    @property
    def channels(self) -> int: ...

    @channels.setter
    def channels(self, arg: int, /) -> None: ...

    @property
    def variable(self) -> bool: ...

    @variable.setter
    def variable(self, arg: bool, /) -> None: ...

    @property
    def max_pixels(self) -> int: ...

    @max_pixels.setter
    def max_pixels(self, arg: int, /) -> None: ...

    def output_shape(self) -> list[int]: ...

    def __getstate__(self) -> tuple[int, int, ResizeMode, bool, bool, list[float], list[float], Resample, int, PixelType, bool, list[float], list[float], ImageDecode, int, bool, int]: ...

    def __setstate__(self, arg: tuple[int, int, ResizeMode, bool, bool, Sequence[float], Sequence[float], Resample, int, PixelType, bool, Sequence[float], Sequence[float], ImageDecode, int, bool, int], /) -> None: ...

class FieldSpec:
    def __init__(self) -> None: ...

    @property
    def field(self) -> str: ...

    @field.setter
    def field(self, arg: str, /) -> None: ...

    @property
    def kind(self) -> FieldKind: ...

    @kind.setter
    def kind(self, arg: FieldKind, /) -> None: ...

    @property
    def image(self) -> ImageSpec: ...

    @image.setter
    def image(self, arg: ImageSpec, /) -> None: ...

    @property
    def dtype(self) -> str: ...

    @dtype.setter
    def dtype(self, arg: str, /) -> None: ...

    @property
    def max_bytes(self) -> int: ...

    @max_bytes.setter
    def max_bytes(self, arg: int, /) -> None: ...

    def named(self, field: str) -> FieldSpec:
        """A copy of this spec reading member `field`."""

    def __getstate__(self) -> tuple[str, FieldKind, ImageSpec, str, int]: ...

    def __setstate__(self, arg: tuple[str, FieldKind, ImageSpec, str, int], /) -> None: ...

class MixLaw(enum.Enum):
    sample = 0

    proportion = 1

    stop_at_first = 2

    counts = 3

class MixOptions:
    def __init__(self) -> None: ...

    @property
    def names(self) -> list[str]: ...

    @names.setter
    def names(self, arg: Sequence[str], /) -> None: ...

    @property
    def weights(self) -> list[float]: ...

    @weights.setter
    def weights(self, arg: Sequence[float], /) -> None: ...

    @property
    def choose(self) -> list[int]: ...

    @choose.setter
    def choose(self, arg: Sequence[int], /) -> None: ...

    @property
    def members(self) -> list[list[tuple[str, str]]]: ...

    @members.setter
    def members(self, arg: Sequence[Sequence[tuple[str, str]]], /) -> None: ...

    @property
    def key_rules(self) -> list[str]: ...

    @key_rules.setter
    def key_rules(self, arg: Sequence[str], /) -> None: ...

    @property
    def law(self) -> MixLaw: ...

    @law.setter
    def law(self, arg: MixLaw, /) -> None: ...

    @property
    def samples_per_epoch(self) -> int: ...

    @samples_per_epoch.setter
    def samples_per_epoch(self, arg: int, /) -> None: ...

    @property
    def one_source_per_batch(self) -> bool: ...

    @one_source_per_batch.setter
    def one_source_per_batch(self, arg: bool, /) -> None: ...

    @property
    def shards(self) -> list[int]: ...

class LoaderOptions:
    def __init__(self) -> None: ...

    @property
    def tokens(self) -> TokenOptions: ...

    @tokens.setter
    def tokens(self, arg: TokenOptions, /) -> None: ...

    @property
    def sources(self) -> list[str]: ...

    @sources.setter
    def sources(self, arg: Sequence[str], /) -> None: ...

    @property
    def fields(self) -> list[FieldSpec]: ...

    @fields.setter
    def fields(self, arg: Sequence[FieldSpec], /) -> None: ...

    @property
    def key_rule(self) -> KeyRule: ...

    @key_rule.setter
    def key_rule(self, arg: KeyRule, /) -> None: ...

    @property
    def mix(self) -> MixOptions: ...

    @mix.setter
    def mix(self, arg: MixOptions, /) -> None: ...

    @property
    def batch_size(self) -> int: ...

    @batch_size.setter
    def batch_size(self, arg: int, /) -> None: ...

    @property
    def drop_last(self) -> bool: ...

    @drop_last.setter
    def drop_last(self, arg: bool, /) -> None: ...

    @property
    def shuffle(self) -> bool: ...

    @shuffle.setter
    def shuffle(self, arg: bool, /) -> None: ...

    @property
    def seed(self) -> int: ...

    @seed.setter
    def seed(self, arg: int, /) -> None: ...

    @property
    def shuffle_buffer(self) -> int: ...

    @shuffle_buffer.setter
    def shuffle_buffer(self, arg: int, /) -> None: ...

    @property
    def stream(self) -> bool: ...

    @stream.setter
    def stream(self, arg: bool, /) -> None: ...

    @property
    def samples_per_epoch(self) -> int: ...

    @samples_per_epoch.setter
    def samples_per_epoch(self, arg: int, /) -> None: ...

    @property
    def shuffle_block(self) -> int: ...

    @shuffle_block.setter
    def shuffle_block(self, arg: int, /) -> None: ...

    @property
    def shuffle_window(self) -> int: ...

    @shuffle_window.setter
    def shuffle_window(self, arg: int, /) -> None: ...

    @property
    def shuffle_mix(self) -> int: ...

    @shuffle_mix.setter
    def shuffle_mix(self, arg: int, /) -> None: ...

    @property
    def rank(self) -> int: ...

    @rank.setter
    def rank(self, arg: int, /) -> None: ...

    @property
    def world_size(self) -> int: ...

    @world_size.setter
    def world_size(self, arg: int, /) -> None: ...

    @property
    def partition(self) -> PartitionPolicy: ...

    @partition.setter
    def partition(self, arg: PartitionPolicy, /) -> None: ...

    @property
    def decode_threads(self) -> int: ...

    @decode_threads.setter
    def decode_threads(self, arg: int, /) -> None: ...

    @property
    def io_depth(self) -> int: ...

    @io_depth.setter
    def io_depth(self, arg: int, /) -> None: ...

    @property
    def coalesce_bytes(self) -> int: ...

    @coalesce_bytes.setter
    def coalesce_bytes(self, arg: int, /) -> None: ...

    @property
    def read_ahead_batches(self) -> int: ...

    @read_ahead_batches.setter
    def read_ahead_batches(self, arg: int, /) -> None: ...

    @property
    def max_read_bytes_per_s(self) -> int: ...

    @max_read_bytes_per_s.setter
    def max_read_bytes_per_s(self, arg: int, /) -> None: ...

    @property
    def prefetch_batches(self) -> int: ...

    @prefetch_batches.setter
    def prefetch_batches(self, arg: int, /) -> None: ...

    @property
    def timeout_ms(self) -> int: ...

    @timeout_ms.setter
    def timeout_ms(self, arg: int, /) -> None: ...

    @property
    def include_keys(self) -> bool: ...

    @include_keys.setter
    def include_keys(self, arg: bool, /) -> None: ...

    @property
    def key_column(self) -> str: ...

    @key_column.setter
    def key_column(self, arg: str, /) -> None: ...

    @property
    def record_stats(self) -> bool: ...

    @record_stats.setter
    def record_stats(self, arg: bool, /) -> None: ...

    @property
    def trace_spans(self) -> int: ...

    @trace_spans.setter
    def trace_spans(self, arg: int, /) -> None: ...

    @property
    def on_error(self) -> OnError: ...

    @on_error.setter
    def on_error(self, arg: OnError, /) -> None: ...

    @property
    def max_skips(self) -> int: ...

    @max_skips.setter
    def max_skips(self, arg: int, /) -> None: ...

    @property
    def max_skip_fraction(self) -> float: ...

    @max_skip_fraction.setter
    def max_skip_fraction(self, arg: float, /) -> None: ...

    @property
    def skip_probation(self) -> int: ...

    @skip_probation.setter
    def skip_probation(self, arg: int, /) -> None: ...

    @property
    def max_open_files(self) -> int: ...

    @max_open_files.setter
    def max_open_files(self, arg: int, /) -> None: ...

    @property
    def memory_budget(self) -> int: ...

    @memory_budget.setter
    def memory_budget(self, arg: int, /) -> None: ...

    @property
    def index_cache_bytes(self) -> int: ...

    @index_cache_bytes.setter
    def index_cache_bytes(self, arg: int, /) -> None: ...

    @property
    def storage(self) -> StorageOptions | None: ...

    @storage.setter
    def storage(self, arg: StorageOptions | None, /) -> None: ...

    @property
    def device(self) -> str: ...

    @device.setter
    def device(self, arg: str, /) -> None: ...

    @property
    def pin_memory(self) -> bool: ...

    @pin_memory.setter
    def pin_memory(self, arg: bool, /) -> None: ...

    @property
    def late_copy_ms(self) -> int: ...

    @late_copy_ms.setter
    def late_copy_ms(self, arg: int, /) -> None: ...

    @property
    def gpu_standin_delay_us(self) -> int: ...

    @gpu_standin_delay_us.setter
    def gpu_standin_delay_us(self, arg: int, /) -> None: ...

    @property
    def gpu_standin_stall_after(self) -> int: ...

    @gpu_standin_stall_after.setter
    def gpu_standin_stall_after(self, arg: int, /) -> None: ...

    @property
    def gpu_standin_watchdog_ms(self) -> int: ...

    @gpu_standin_watchdog_ms.setter
    def gpu_standin_watchdog_ms(self, arg: int, /) -> None: ...

    @property
    def batch_stride(self) -> int: ...

    @batch_stride.setter
    def batch_stride(self, arg: int, /) -> None: ...

    @property
    def batch_offset(self) -> int: ...

    @batch_offset.setter
    def batch_offset(self, arg: int, /) -> None: ...

    @property
    def batch_share(self) -> int: ...

    @batch_share.setter
    def batch_share(self, arg: int, /) -> None: ...

    @property
    def leave_failed_slots(self) -> bool: ...

    @leave_failed_slots.setter
    def leave_failed_slots(self, arg: bool, /) -> None: ...

    @property
    def autotune(self) -> bool: ...

    @autotune.setter
    def autotune(self, arg: bool, /) -> None: ...

class PlanInfo:
    @property
    def dataset_samples(self) -> int: ...

    @property
    def rank_samples(self) -> int: ...

    @property
    def dropped_samples(self) -> int: ...

    @property
    def padded_samples(self) -> int: ...

    @property
    def batches(self) -> int: ...

    @property
    def num_shards(self) -> int: ...

    def __repr__(self) -> str: ...

class PendingDelivery:
    def deliver(self, stream: int = 0) -> object:
        """
        The batch as NativeLoader.next() returns it; `stream` waits for its copy first.
        """

class NativeLoader:
    @staticmethod
    def create(options: LoaderOptions) -> NativeLoader: ...

    def set_epoch(self, arg: int, /) -> None: ...

    def next(self, stream: int = 0) -> object:
        """
        The next batch as (index, [(name, array)], keys, urls, [(slot, cause)]), None at the epoch's end; the last list: slots left for the rank's refills (on_error='skip' with batch_stride). With device='cuda', `stream` (a cudaStream_t as an integer) is made to wait for its copy. keys are webdataset's __key__ (tar: the member path without its extension; image folder: the path under the root; Parquet: the key_column value, else 'file:row'); urls the shard or file each came from.
        """

    def receive(self, index: int, arrays: Sequence[tuple[str, Annotated[NDArray, dict(order='C', device='cpu', writable=False)]]], keys: Sequence[str], urls: Sequence[str], failures: Sequence[tuple[int, str]], stream: int = 0) -> object:
        """
        The rank's batch `index` of this epoch made by another share (its next() item's arrays, keys, urls and failed slots), finished here: copied into this loader's pool, its failed slots refilled (on_error='skip'), copied to the device; returned as next() returns a batch.
        """

    def receive_ahead(self, index: int, arrays: Sequence[tuple[str, Annotated[NDArray, dict(order='C', device='cpu', writable=False)]]], keys: Sequence[str], urls: Sequence[str], failures: Sequence[tuple[int, str]]) -> PendingDelivery:
        """
        receive() without the consumer's wait: the batch with its device copy issued, for deliver(stream) when its step takes it.
        """

    @property
    def plan(self) -> PlanInfo: ...

    @property
    def options(self) -> LoaderOptions: ...

    def stats(self) -> dict: ...

    def trace_json(self) -> str: ...

    def state(self) -> str: ...

    def restore(self, arg: str, /) -> None: ...

    def stop(self) -> None: ...

    def skips(self) -> dict: ...

    def take_skip_log(self) -> list: ...

    def open_shard_files(self) -> int: ...

    def sources_of(self, urls: Sequence[str]) -> list[str]:
        """
        A mixture: the source each of a batch's urls came from, by name; empty for one dataset.
        """

    def settings(self) -> dict: ...

    def tune_log(self) -> list: ...

    def take_tune_log(self) -> list: ...

def cuda_runtime(search_dirs: Sequence[str]) -> str:
    """
    Adds directories to the CUDA runtime's search (torch's lib, the nvidia-cuda-runtime wheel's) and returns the path of the runtime loaded; raises, naming what was looked for, where there is none or it sees no device.
    """

def expand_sources(arg: Sequence[str], /) -> list[str]: ...

def decode_jpeg_rgb(jpeg: bytes, out: object | None = None) -> object:
    """
    Full-size RGB decode (HWC uint8). With out= (a C-contiguous uint8 array of shape (h, w, 3)), decodes into it and returns it; a wrong shape or dtype raises ValueError.
    """

def plan_sample(spec: ImageSpec, width: int, height: int, seed: int = 0) -> dict:
    """
    Where sample `seed` of a width x height image comes from (for tests): crop (x, y, w, h) of the source, the size it is resized to, the output window (x, y, w, h) of the resized image, the flip.
    """

def decode_jpeg(jpeg: bytes, spec: ImageSpec, seed: int = 0) -> object:
    """Decode and transform one JPEG as a Loader field would."""

class RecorderSnapshot:
    @property
    def time_s(self) -> float: ...

    @property
    def h2d_exposed_s(self) -> float: ...

def stage_snapshot(loader: NativeLoader) -> RecorderSnapshot:
    """The loader's stage counters and gauges now, as an opaque snapshot."""

def cpu_share() -> dict:
    """
    The CPUs this process may use (core/cpu_share.h): cores, affinity, quota (0: none), local_ranks, pinned, and cores_from, the line that says where the number came from.
    """

def stage_evidence(before: RecorderSnapshot, after: RecorderSnapshot) -> dict:
    """Utilisation and gauges between two snapshots, as a dict."""

class BatchMonitor:
    def __init__(self, window: int = 50, slow_factor: float = 5.0, slow_floor_s: float = 0.05, min_history: int = 5, healthy_efficiency: float = 0.9, busy_threshold: float = 0.7, source_names: Sequence[str] = []) -> None: ...

    @overload
    def on_wait(self, wait_s: float) -> object: ...

    @overload
    def on_wait(self, wait_s: float, before: RecorderSnapshot, after: RecorderSnapshot) -> object: ...

    def on_h2d(self, seconds: float) -> None: ...

    def on_compute(self, seconds: float) -> None: ...

    def stats(self) -> dict: ...

    def totals(self) -> dict: ...

    def diagnose(self) -> dict: ...

    def summary_line(self) -> str: ...

    def latest(self) -> object: ...

    @property
    def window(self) -> int: ...

    @property
    def batches(self) -> int: ...

class TokenOptions:
    def __init__(self) -> None: ...

    @property
    def paths(self) -> list[str]: ...

    @paths.setter
    def paths(self, arg: Sequence[str], /) -> None: ...

    @property
    def weights(self) -> list[float]: ...

    @weights.setter
    def weights(self, arg: Sequence[float], /) -> None: ...

    @property
    def seq_len(self) -> int: ...

    @seq_len.setter
    def seq_len(self, arg: int, /) -> None: ...

    @property
    def num_samples(self) -> int: ...

    @num_samples.setter
    def num_samples(self, arg: int, /) -> None: ...

    @property
    def split(self) -> str: ...

    @split.setter
    def split(self, arg: str, /) -> None: ...

    @property
    def split_index(self) -> int: ...

    @split_index.setter
    def split_index(self, arg: int, /) -> None: ...

    @property
    def add_extra_token(self) -> bool: ...

    @add_extra_token.setter
    def add_extra_token(self, arg: bool, /) -> None: ...

    @property
    def cache_dir(self) -> str: ...

    @cache_dir.setter
    def cache_dir(self, arg: str, /) -> None: ...

    @property
    def consumed_samples(self) -> int: ...

    @consumed_samples.setter
    def consumed_samples(self, arg: int, /) -> None: ...

class MegatronDataset:
    @staticmethod
    def open(prefix: str) -> MegatronDataset: ...

    @property
    def dtype(self) -> str: ...

    @property
    def dtype_code(self) -> int: ...

    @property
    def bin_bytes(self) -> int: ...

    def __len__(self) -> int: ...

    @property
    def sequence_lengths(self) -> object: ...

    @property
    def sequence_pointers(self) -> object: ...

    @property
    def document_indices(self) -> object: ...

    def get(self, i: int) -> object:
        """Sequence i as int64."""

class MegatronWriter:
    @staticmethod
    def create(prefix: str, dtype: str) -> MegatronWriter: ...

    def add(self, arg: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], /) -> None: ...

    def add_documents(self, tokens: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], lengths: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)]) -> None:
        """Documents given as their tokens end to end and each one's length."""

    def finish(self) -> None: ...

def plan_packing(lengths: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)], seq_len: int, algorithm: str = 'first_fit', truncate: bool = False) -> tuple:
    """
    (row_offsets, documents): documents packed into rows of seq_len tokens, first-fit or best-fit decreasing; row r holds documents[row_offsets[r]:row_offsets[r + 1]].
    """

class PackedRows:
    @staticmethod
    def create(prefix: str, seq_len: int, algorithm: str = 'first_fit', prompt_lengths: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)] | None = None, truncate: bool = False, pad_id: int = 0) -> PackedRows: ...

    @property
    def num_rows(self) -> int: ...

    @property
    def seq_len(self) -> int: ...

    @property
    def tokens(self) -> int: ...

    @property
    def padding_fraction(self) -> float: ...

    @property
    def row_offsets(self) -> object: ...

    @property
    def documents(self) -> object: ...

    def fill(self, rows: Annotated[NDArray[numpy.int64], dict(shape=(None,), order='C', device='cpu', writable=False)]) -> dict:
        """The packed rows `rows` (int64 row numbers), filled in C++."""

def gpt_indices(sequence_lengths: Annotated[NDArray[numpy.int32], dict(shape=(None,), order='C', device='cpu', writable=False)], begin: int, end: int, seq_len: int, num_samples: int, seed: int, add_extra_token: bool = True) -> tuple:
    """
    (document_index, sample_index, shuffle_index) as megatron-core's GPTDataset builds them.
    """

def blending_indices(weights: Sequence[float], size: int) -> tuple: ...

def blend_dataset_index(weights: Sequence[float], num_samples: int) -> object:
    """
    The dataset of each sample of the blend TokenSource builds for (weights, num_samples): megatron's BlendedDataset.dataset_index.
    """

def megatron_summary(prefix: str, storage: StorageOptions) -> dict:
    """
    dtype, sequences, documents, idx_bytes, bin_bytes of a pair, from the .idx header and the sizes.
    """

def blend_sizes(weights: Sequence[float], size: int) -> tuple: ...

def numpy_shuffled_arange(n: int, seed: int) -> object:
    """
    numpy.random.RandomState(seed).shuffle(numpy.arange(n)), computed in C++.
    """

def split_range(split: str, which: int, num_elements: int) -> tuple[int, int]: ...

class StorageOptions:
    def __init__(self) -> None: ...

    @property
    def s3_endpoint(self) -> str: ...

    @s3_endpoint.setter
    def s3_endpoint(self, arg: str, /) -> None: ...

    @property
    def profile(self) -> str: ...

    @profile.setter
    def profile(self, arg: str, /) -> None: ...

    @property
    def region(self) -> str: ...

    @region.setter
    def region(self, arg: str, /) -> None: ...

    @property
    def retry_deadline_ms(self) -> int: ...

    @retry_deadline_ms.setter
    def retry_deadline_ms(self, arg: int, /) -> None: ...

    @property
    def attempts(self) -> int: ...

    @attempts.setter
    def attempts(self, arg: int, /) -> None: ...

    @property
    def timeout_ms(self) -> int: ...

    @timeout_ms.setter
    def timeout_ms(self, arg: int, /) -> None: ...

    @property
    def stall_ms(self) -> int: ...

    @stall_ms.setter
    def stall_ms(self, arg: int, /) -> None: ...

    @property
    def backoff_ms(self) -> int: ...

    @backoff_ms.setter
    def backoff_ms(self, arg: int, /) -> None: ...

    @property
    def backoff_max_ms(self) -> int: ...

    @backoff_max_ms.setter
    def backoff_max_ms(self, arg: int, /) -> None: ...

    @property
    def cache_dir(self) -> str: ...

    @cache_dir.setter
    def cache_dir(self, arg: str, /) -> None: ...

    @property
    def cache_bytes(self) -> int: ...

    @cache_bytes.setter
    def cache_bytes(self, arg: int, /) -> None: ...

    @property
    def http_headers(self) -> dict[str, str]: ...

    @http_headers.setter
    def http_headers(self, arg: Mapping[str, str], /) -> None: ...

    @property
    def hf_endpoint(self) -> str: ...

    @hf_endpoint.setter
    def hf_endpoint(self, arg: str, /) -> None: ...

    @property
    def hf_token(self) -> str: ...

    @hf_token.setter
    def hf_token(self, arg: str, /) -> None: ...

def redact_urls(text: str) -> str: ...

def default_storage_options() -> StorageOptions: ...

def set_io_options(*, attempts: int | None = None, timeout_ms: int | None = None, backoff_ms: int | None = None, backoff_max_ms: int | None = None, s3_endpoint: str | None = None, cache_dir: str | None = None, cache_bytes: int | None = None, retry_deadline_s: float | None = None, stall_ms: int | None = None) -> None: ...

def reset_io_options() -> None:
    """
    Forgets set_io_options: later loaders start from the environment again.
    """

def io_options() -> dict: ...

def io_counters() -> dict: ...

class SampleMap:
    """A Python function run on each sample by the decode threads."""

    def __init__(self, fn: object, wants_rng: bool) -> None: ...

    def collect(self, base: int, size: int) -> dict:
        """
        The values that are not batch arrays of the batch whose '__index__' array starts at `base`, as {key: list}, taken out of the map's table.
        """

    def outputs(self) -> list:
        """
        [(key, index of its array in a batch's arrays, or None for a list)], in the probe's order.
        """

    @property
    def has_objects(self) -> bool: ...

    def stats(self) -> dict:
        """
        {samples, gil_wait_s, call_s} since the start: taking and handing back the GIL, and the calls themselves.
        """

def set_sample_map(options: LoaderOptions, map: SampleMap) -> None:
    """Sets LoaderOptions' per-sample map."""

def set_leak_warnings(enabled: bool) -> None: ...
