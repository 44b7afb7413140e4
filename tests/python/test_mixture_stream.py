"""stoker.mix in stream mode (stream=True, issue 42): tar sources with no index
and no manifest, each an endless stream of its own, mixed by weight.

Each source's bytes are checked against webdataset's reader; shares against
binomial bounds of the weights; each source's passes against its own sample
set; ranks, resume and a source over HTTP (a loopback server) against the
uninterrupted local run.
"""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest

import stoker
from mixture_samples import drain, rows, write_tar_source
from url_server import UrlServer

FIELDS = {"bin": stoker.raw(64)}
PER_SHARD = 20


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("mixstream")
    a = write_tar_source(root / "a", "a", shards=4, per_shard=PER_SHARD, seed=1)  # 80 samples
    b = write_tar_source(root / "b", "b", shards=2, per_shard=PER_SHARD, seed=2)  # 40
    c = write_tar_source(root / "c", "c", shards=2, per_shard=PER_SHARD, seed=3)  # 40
    return root, {"a": (str(root / "a" / "a-{00..03}.tar"), a), "b": (str(root / "b" / "b-{00..01}.tar"), b),
                  "c": (str(root / "c" / "c-{00..01}.tar"), c)}


def make(srcs, weights, samples_per_epoch, **kw):
    one = kw.pop("one_source_per_batch", False)
    kw.setdefault("shuffle", True)
    kw.setdefault("seed", 3)
    kw.setdefault("shuffle_buffer", 16)
    kw.setdefault("observe", False)
    mixture = stoker.mix({name: (srcs[name][0], w) for name, w in weights.items()},
                         samples_per_epoch=samples_per_epoch if one else None, one_source_per_batch=one)
    return stoker.Loader(mixture, FIELDS, stream=True, samples_per_epoch=samples_per_epoch, output="numpy", **kw)


def check_bytes(got, srcs):
    for source, key, data in got:
        assert key.startswith(source), f"{key} delivered as source {source}"
        assert data == srcs[source][1][key], f"{source}/{key}: bytes differ from webdataset's reader"


def test_shares_bytes_and_each_source_once_per_pass_of_its_own(sources):
    _, srcs = sources
    weights = {"a": 0.5, "b": 0.3, "c": 0.2}
    loader = make(srcs, weights, 1000, batch_size=20)
    assert loader.settings["order"].startswith("stream: mixture of 3 sources by weight (a 0.5, b 0.3, c 0.2)")
    got = drain(loader)
    assert len(got) == 1000
    check_bytes(got, srcs)
    counts = Counter(s for s, _, _ in got)
    for name, w in weights.items():
        assert abs(counts[name] - 1000 * w) <= 4 * math.sqrt(1000 * w * (1 - w)), (name, counts[name])
    # Mixed within batches, near the weights (a stratified allocation, not a binomial draw).
    for i in range(0, 1000, 20):
        c = Counter(s for s, _, _ in got[i:i + 20])
        assert all(abs(c[name] - 20 * w) <= 3 for name, w in weights.items()), c
    # A source's draws are its stream's: every pass of its own holds each of its samples once.
    for name in weights:
        keys = [k for s, k, _ in got if s == name]
        n = len(srcs[name][1])
        for p in range(len(keys) // n):
            assert sorted(keys[p * n:(p + 1) * n]) == sorted(srcs[name][1]), f"{name} pass {p}"
        assert keys[:n] != keys[n:2 * n]  # each pass freshly shuffled


def test_two_ranks_equal_batches_and_their_passes_cover_each_source_once(sources):
    _, srcs = sources
    weights = {"a": 0.5, "b": 0.25, "c": 0.25}
    per_rank = [drain(make(srcs, weights, 640, batch_size=8, rank=r, world_size=2)) for r in range(2)]
    assert len(per_rank[0]) == len(per_rank[1]) == 320
    for got in per_rank:
        check_bytes(got, srcs)
    # Each rank reads every 2nd shard of a pass: the ranks' first passes together hold each sample once.
    for name in weights:
        n = len(srcs[name][1]) // 2
        first = [k for got in per_rank for k in [k for s, k, _ in got if s == name][:n]]
        assert sorted(first) == sorted(srcs[name][1]), name


def test_resume_mid_epoch_equals_uninterrupted(sources):
    _, srcs = sources
    weights = {"a": 0.6, "b": 0.3, "c": 0.1}
    whole = make(srcs, weights, 400, batch_size=10)
    epoch0, epoch1 = drain(whole), drain(whole, epoch=1)
    first = make(srcs, weights, 400, batch_size=10)
    drain(first)
    first.set_epoch(1)
    it = iter(first)
    head = [r for _ in range(23) for r in rows(next(it))]
    state = first.state_dict()
    assert len(state["stoker"]["source_passes"]) == 3
    resumed = make(srcs, weights, 400, batch_size=10)
    resumed.load_state_dict(state)
    assert head + drain(resumed) == epoch1
    assert epoch0 != epoch1
    # Other sources (as many shards, a source renamed): refused, not another order.
    renamed = {"a": srcs["a"], "b": srcs["b"], "d": srcs["c"]}
    with pytest.raises(Exception, match="restores onto the same sources"):
        make(renamed, {"a": 0.6, "b": 0.3, "d": 0.1}, 400, batch_size=10).load_state_dict(state)


def test_weights_changed_at_a_restore_take_effect_from_the_next_batch(sources):
    """Each source's stream is its own, whatever the weights: after a restore
    with other weights, every source goes on from its draws at the saved
    point, and the batches after it follow the new weights. The state then
    holds the change, so a later restore resumes that order exactly."""
    _, srcs = sources
    old, new = {"a": 0.6, "b": 0.3, "c": 0.1}, {"a": 0.1, "b": 0.2, "c": 0.7}
    first = make(srcs, old, 800, batch_size=10)
    it = iter(first)
    head = [r for _ in range(15) for r in rows(next(it))]
    state = first.state_dict()
    changed = make(srcs, new, 800, batch_size=10)
    changed.load_state_dict(state)
    it = iter(changed)
    middle = [r for _ in range(20) for r in rows(next(it))]
    again = changed.state_dict()
    rest = [r for batch in it for r in rows(batch)]
    assert len(head) + len(middle) + len(rest) == 800
    counts = Counter(s for s, _, _ in middle + rest)
    n = len(middle + rest)
    for name, w in new.items():
        assert abs(counts[name] - n * w) <= 4 * math.sqrt(n * w * (1 - w)), (name, counts[name], n * w)
    # Every source's draws are its stream's, in order, across the change.
    reference = drain(make(srcs, {"a": 1, "b": 1, "c": 1}, 2400, batch_size=10))
    for name in new:
        got = [k for s, k, _ in head + middle + rest if s == name]
        own = [k for s, k, _ in reference if s == name]
        assert got == own[:len(got)], name
    check_bytes(head + middle + rest, srcs)
    # The state after the change resumes it exactly, with the new weights as the loader's.
    later = make(srcs, new, 800, batch_size=10)
    later.load_state_dict(again)
    assert drain(later) == rest


def test_report_counts_each_sources_reads(sources):
    _, srcs = sources
    loader = make(srcs, {"a": 0.5, "b": 0.5}, 200, batch_size=10, observe=True)
    got = drain(loader)
    mix = loader.report()["mix"]
    assert mix["names"] == ["a", "b"] and mix["weights"] == [0.5, 0.5]
    reads = mix["read"]
    assert len(reads) == 2 and all(r["items"] > 0 for r in reads), reads
    # Every sample delivered was read from its source (more are read: the buffers fill ahead).
    for r, name in zip(reads, ("a", "b")):
        assert r["items"] >= sum(1 for s, _, _ in got if s == name), (name, r)


def test_one_source_per_batch(sources):
    _, srcs = sources
    loader = make(srcs, {"a": 0.5, "b": 0.5}, 400, batch_size=8, one_source_per_batch=True)
    batches = [rows(b) for b in loader]
    assert len(batches) == 50
    assert all(len({s for s, _, _ in b}) == 1 for b in batches)
    check_bytes([r for b in batches for r in b], srcs)


def test_a_source_over_http_streams_as_the_local_one(sources):
    root, srcs = sources
    local = drain(make(srcs, {"a": 0.5, "b": 0.5}, 200, batch_size=10))
    with UrlServer(root / "b") as server:
        web = {"a": srcs["a"], "b": (f"http://127.0.0.1:{server.port}/b-{{00..01}}.tar", srcs["b"][1])}
        loader = make(web, {"a": 0.5, "b": 0.5}, 200, batch_size=10)
        got = drain(loader)
        loader.close()
    assert got == local
    # A source that is not there is named with its source.
    with UrlServer(root / "b") as server:
        missing = {"a": srcs["a"], "gone": (f"http://127.0.0.1:{server.port}/gone-{{00..01}}.tar", {})}
        with pytest.raises(Exception, match=r"source 'gone' of the mixture.*gone-0[01]\.tar"):
            drain(make(missing, {"a": 0.5, "gone": 0.5}, 200, batch_size=10))


def test_a_broken_shard_is_named_with_its_source_or_left_with_skip(sources, tmp_path):
    """A source's truncated shard: an error naming the source, the shard and
    the offset; with on_error="skip" the source leaves that shard and the
    epoch keeps its batches."""
    import shutil

    _, srcs = sources
    broken = tmp_path / "b"
    shutil.copytree(Path(srcs["b"][0]).parent, broken)
    data = (broken / "b-01.tar").read_bytes()
    (broken / "b-01.tar").write_bytes(data[: len(data) // 2 + 100])
    mixed = {"a": srcs["a"], "b": (str(broken / "b-{00..01}.tar"), srcs["b"][1])}
    with pytest.raises(Exception, match=r"source 'b' of the mixture: .*b-01\.tar: header at offset \d+: archive truncated"):
        drain(make(mixed, {"a": 0.5, "b": 0.5}, 400, batch_size=10))
    loader = make(mixed, {"a": 0.5, "b": 0.5}, 400, batch_size=10, on_error="skip")
    got = drain(loader)
    assert len(got) == 400
    check_bytes(got, mixed)
    assert loader.skips["skipped"] >= 1


def test_refusals_name_what_to_change(sources):
    _, srcs = sources
    with pytest.raises(Exception, match="law \"proportion\" needs the sources' sizes"):
        stoker.Loader(stoker.mix({"a": srcs["a"][0], "b": srcs["b"][0]}), FIELDS, stream=True,
                      samples_per_epoch=100, batch_size=4, observe=False)
    unknown = stoker.mix({"a": stoker.Source(srcs["a"][0], 1, members={"nope": "bin"})})
    with pytest.raises(Exception, match="source 'a' reads field 'nope' from member 'bin', but the loader has no field"):
        stoker.Loader(unknown, FIELDS, stream=True, samples_per_epoch=100, batch_size=4, observe=False)
    with pytest.raises(Exception, match="source 'b' of the mixture has 2 shards for 3 ranks"):
        make(srcs, {"a": 0.5, "b": 0.5}, 300, batch_size=4, rank=0, world_size=3)
