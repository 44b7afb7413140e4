"""A Loader's keywords are taken by the parts they configure (issue 41,
python/stoker/options.py): every keyword of stoker.Loader belongs to exactly one
part (or to storage_options) with the same default; inspect.signature and help()
show them all; and each reaches its field of the native options as it always did,
checked against a table written here from the keywords' documented meaning (the
options are caught on their way to the engine, so no shard is read)."""
from __future__ import annotations

import inspect
import pydoc

import pytest

import stoker
import stoker.loader
from stoker import _stoker, options

ROLE = {"self", "sources", "fields", "workers"}  # the call's own, not an option


def own_keywords(fn) -> dict[str, object]:
    return {n: p.default for n, p in inspect.signature(fn).parameters.items() if n not in ROLE}


def test_every_keyword_belongs_to_one_part_with_its_default():
    loader = own_keywords(stoker.Loader.__init__)
    parts = [own_keywords(part.__init__) for part in options.PARTS] + [own_keywords(stoker.loader.storage_options)]
    taken: dict[str, object] = {}
    for part in parts:
        assert not set(part) & set(taken), f"a keyword in two parts: {set(part) & set(taken)}"
        taken.update(part)
    assert taken == loader  # each keyword once, with the Loader's default
    assert len(loader) > 50  # the signature was read


def test_signature_and_help_show_every_keyword():
    sig = inspect.signature(stoker.Loader)
    assert list(sig.parameters)[:3] == ["sources", "fields", "batch_size"]
    assert set(own_keywords(stoker.Loader.__init__)) | {"workers"} <= set(sig.parameters)
    assert "**" not in str(sig)  # not __new__'s (*args, workers=None, **kwargs)
    assert "skip_probation: 'int' = 1000" in pydoc.render_doc(stoker.Loader)
    assert "seq_len" in inspect.signature(stoker.TokenLoader).parameters  # a subclass: its own __init__'s


# keyword: (value, native field, the native value), from the Loader's docstring and the
# engine's LoaderOptions: None is auto (-1) or "none" (0) as each field says.
GIVEN = {
    "shuffle": (True, "shuffle", True),
    "seed": (7, "seed", 7),
    "shuffle_buffer": (100, "shuffle_buffer", 100),
    "shuffle_block": (4, "shuffle_block", 4),
    "shuffle_window": (2, "shuffle_window", 2),
    "shuffle_mix": (3, "shuffle_mix", 3),
    "drop_last": (False, "drop_last", False),
    "partition": ("pad", "partition", _stoker.PartitionPolicy.pad),
    "rank": (1, "rank", 1),
    "world_size": (3, "world_size", 3),
    "decode_threads": (3, "decode_threads", 3),
    "io_depth": (5, "io_depth", 5),
    "coalesce_bytes": (0, "coalesce_bytes", 0),
    "read_ahead_batches": (2, "read_ahead_batches", 2),
    "max_read_bytes_per_s": (1000, "max_read_bytes_per_s", 1000),
    "prefetch": (6, "prefetch_batches", 6),
    "autotune": (False, "autotune", False),
    "timeout": (2.5, "timeout_ms", 2500),
    "key_rule": ("underscore", "key_rule", _stoker.KeyRule.underscore),
    "key_column": ("id", "key_column", "id"),
    "keys": (False, "include_keys", False),
    "record_stats": (False, "record_stats", False),
    "trace_spans": (64, "trace_spans", 64),
    "on_error": ("skip", "on_error", _stoker.OnError.skip),
    "max_skips": (9, "max_skips", 9),
    "max_skip_fraction": (0.25, "max_skip_fraction", 0.25),
    "skip_probation": (10, "skip_probation", 10),
    "max_open_files": (16, "max_open_files", 16),
    "memory_budget": (1 << 30, "memory_budget", 1 << 30),
    "index_cache_bytes": (4096, "index_cache_bytes", 4096),
    "device": ("cpu-late", "device", "cpu-late"),
    "pin_memory": (False, "pin_memory", False),
    "_late_copy_ms": (5, "late_copy_ms", 5),
    "_gpu_standin_delay_us": (30, "gpu_standin_delay_us", 30),
    "_gpu_standin_stall_after": (2, "gpu_standin_stall_after", 2),
    "_gpu_standin_watchdog_ms": (100, "gpu_standin_watchdog_ms", 100),
    "_batch_stride": (3, "batch_stride", 3),
    "_batch_offset": (1, "batch_offset", 1),
    "_batch_share": (2, "batch_share", 2),
    "_leave_failed_slots": (True, "leave_failed_slots", True),
    "stream": (True, "stream", True),
    "samples_per_epoch": (64, "samples_per_epoch", 64),
}
# What else a keyword changes: ranks and a stream keep full batches (drop_last left out).
ALSO = {"world_size": {"drop_last": True}, "stream": {"drop_last": True}}
# Left out: the native value of each field (None: auto or none; one process, not a stream).
DEFAULT = {
    "batch_size": 8, "shuffle": False, "seed": 0, "shuffle_buffer": 0, "shuffle_block": -1, "shuffle_window": -1,
    "shuffle_mix": -1, "stream": False, "samples_per_epoch": 0, "drop_last": False,
    "partition": _stoker.PartitionPolicy.drop, "rank": 0, "world_size": 1, "decode_threads": 0, "io_depth": -1,
    "coalesce_bytes": -1, "read_ahead_batches": -1, "max_read_bytes_per_s": 0, "prefetch_batches": -1,
    "autotune": True, "timeout_ms": 0, "key_rule": _stoker.KeyRule.webdataset, "include_keys": True,
    "key_column": "", "record_stats": True, "trace_spans": 0, "on_error": _stoker.OnError.raise_, "max_skips": 0,
    "max_skip_fraction": 0.0, "skip_probation": 1000, "max_open_files": 0, "memory_budget": 0,
    "index_cache_bytes": 0, "device": "cpu", "pin_memory": False, "late_copy_ms": 20, "gpu_standin_delay_us": 0,
    "gpu_standin_stall_after": -1, "gpu_standin_watchdog_ms": 0, "batch_stride": 1, "batch_offset": 0,
    "batch_share": 1, "leave_failed_slots": False,
}


class Caught(Exception):
    pass


@pytest.fixture
def native_options(monkeypatch):
    """stoker.Loader(...) -> the LoaderOptions it hands the engine (the engine is not made)."""
    real = stoker.loader._stoker

    class Engine:
        @staticmethod
        def create(opt):
            raise Caught(opt)

    class Native:
        NativeLoader = Engine

        def __getattr__(self, name):
            return getattr(real, name)

    monkeypatch.setattr(stoker.loader, "_stoker", Native())
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)

    def made(**kw):
        with pytest.raises(Caught) as caught:
            stoker.Loader("data/shard-000000.tar", {"cls": stoker.scalar("int64")}, batch_size=8, **kw)
        return caught.value.args[0]

    return made


def test_each_keyword_reaches_its_native_field(native_options):
    opt = native_options()
    assert {name: getattr(opt, name) for name in DEFAULT} == DEFAULT
    assert opt.sources == ["data/shard-000000.tar"] and [f.field for f in opt.fields] == ["cls"]
    for keyword, (value, field, native) in GIVEN.items():
        opt = native_options(**{keyword: value})
        assert {name: getattr(opt, name) for name in DEFAULT} == {**DEFAULT, field: native,
                                                                  **ALSO.get(keyword, {})}, keyword
    assert native_options(world_size=2).drop_last  # ranks keep full batches
    assert native_options(stream=True, samples_per_epoch=64).drop_last  # so does a stream
    assert not native_options(world_size=2, partition="exact").drop_last  # exact drops nothing
    opt = native_options(s3_endpoint="http://127.0.0.1:9", region="eu-west-9", retry_deadline_s=3)
    assert (opt.storage.s3_endpoint, opt.storage.region, opt.storage.retry_deadline_ms) == \
        ("http://127.0.0.1:9", "eu-west-9", 3000)


@pytest.mark.parametrize("kw, error, match", [
    (dict(output="jax"), ValueError, r"output must be 'torch' or 'numpy', not 'jax'"),
    (dict(partition="even"), ValueError, r"partition must be one of \['drop', 'exact', 'pad'\], not 'even'"),
    (dict(on_error="ignore"), ValueError, r"on_error must be one of \['raise', 'skip'\], not 'ignore'"),
    (dict(key_rule="dots"), ValueError, r"key_rule must be one of \['underscore', 'webdataset'\], not 'dots'"),
    (dict(partition="exact", drop_last=True), ValueError, r"partition='exact' delivers every sample"),
    (dict(device="tpu"), ValueError, r"device must be 'cpu', 'cuda' or 'cuda:N', not 'tpu'"),
    (dict(map=3), TypeError, r"map must be a function of the sample, not int"),
    (dict(batch_map="x"), TypeError, r"batch_map must be a function of the batch dict, not str"),
    (dict(http_headers={"a:b": "c"}), ValueError, r"http_headers: 'a:b' is not a header name"),
])
def test_each_part_refuses_its_bad_keywords_before_the_engine_is_made(native_options, kw, error, match):
    with pytest.raises(error, match=match):
        native_options(**kw)


# The order Loader.__init__ has always checked its keywords in: of several bad ones,
# the first of these is the one a call is told of.
CHECKED = [
    (dict(output="jax"), "output must"),
    (dict(partition="even"), "partition must"),
    (dict(on_error="ignore"), "on_error must"),
    (dict(key_rule="dots"), "key_rule must"),
    (dict(partition="exact", drop_last=True), "partition='exact' delivers"),
    (dict(http_headers={"a:b": "c"}), "http_headers:"),
    (dict(device="tpu"), "device must"),
    (dict(map=3), "map must"),
    (dict(batch_map="x"), "batch_map must"),
]


def test_of_several_bad_keywords_the_same_one_is_told_first(native_options):
    for i, (_, told) in enumerate(CHECKED):
        kw: dict = {}
        for bad, _ in reversed(CHECKED[i:]):
            kw.update(bad)  # the earlier check's value wins a keyword two checks share (partition)
        with pytest.raises((ValueError, TypeError), match=told):
            native_options(**kw)
