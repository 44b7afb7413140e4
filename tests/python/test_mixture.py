"""stoker.mix: several sources in one Loader by weight (issue 42).

Each source's bytes are checked against webdataset's reader (tar) and
pyarrow (Parquet); shares against binomial bounds of the weights; passes,
ranks, the exact partition and resume against the sources' own sample sets.
"""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import stoker
from conftest import write_tar
from mixture_samples import drain, rows, write_tar_source
from url_server import UrlServer

FIELDS = {"bin": stoker.raw(64)}


def write_parquet_source(directory: Path, files: int, rows: int, seed: int) -> dict:
    """Parquet files with columns key, bin; returns key -> bytes as pyarrow reads them back."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        keys = [f"pq{f}_{i:04d}" for i in range(rows)]
        blobs = [rng.integers(0, 256, int(rng.integers(8, 64)), np.uint8).tobytes() for _ in range(rows)]
        pq.write_table(pa.table({"key": keys, "bin": blobs}), directory / f"part-{f}.parquet", row_group_size=16)
    ref = {}
    for f in range(files):
        t = pq.read_table(directory / f"part-{f}.parquet")
        ref.update(zip(t.column("key").to_pylist(), t.column("bin").to_pylist()))
    return ref


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("mix")
    a = write_tar_source(root / "a", "a", shards=3, per_shard=40, seed=1)    # 120 samples
    b = write_tar_source(root / "b", "b", shards=2, per_shard=35, seed=2)    # 70
    c = write_tar_source(root / "c", "c", shards=1, per_shard=30, seed=3)    # 30
    return root, {"a": (str(root / "a" / "a-{00..02}.tar"), a), "b": (str(root / "b" / "b-{00..01}.tar"), b),
                  "c": (str(root / "c" / "c-00.tar"), c)}


def make(srcs, weights, **kw):
    spec = {name: (srcs[name][0], w) for name, w in weights.items()}
    law = kw.pop("law", None)
    spe = kw.pop("samples_per_epoch", None)
    one = kw.pop("one_source_per_batch", False)
    kw.setdefault("output", "numpy")
    kw.setdefault("observe", False)
    return stoker.Loader(stoker.mix(spec, samples_per_epoch=spe, law=law, one_source_per_batch=one), FIELDS, **kw)


def check_bytes(got, srcs):
    for source, key, data in got:
        assert data == srcs[source][1][key], f"{source}/{key}: bytes differ from the reference reader's"


def test_shares_within_binomial_bounds_and_bytes(sources):
    _, srcs = sources
    weights = {"a": 0.5, "b": 0.3, "c": 0.2}
    loader = make(srcs, weights, batch_size=20, shuffle=True, seed=7, samples_per_epoch=2000)
    got = drain(loader)
    assert len(got) == 2000
    check_bytes(got, srcs)
    counts = Counter(s for s, _, _ in got)
    n = len(got)
    for name, w in weights.items():
        bound = 4 * math.sqrt(n * w * (1 - w))  # 4 sigma of a binomial draw of n
        assert abs(counts[name] - n * w) <= bound, (name, counts[name], n * w)
    # Within each batch too: a batch of 20 holds about 10/6/4.
    per_batch = [Counter(s for s, _, _ in got[i:i + 20]) for i in range(0, n, 20)]
    for name, w in weights.items():
        assert all(abs(c[name] - 20 * w) <= 3 for c in per_batch)
    # The order is the words of settings.
    order = loader.settings["order"]
    assert "mixture of 3 sources, law sample" in order and "2000 samples an epoch" in order


def check_passes(got, srcs, batch_size):
    """At each batch's end, each source has delivered exactly draws [0, c) of
    its stream (a batch's positions are one block, permuted among its slots):
    c // N whole passes and c % N samples of the next, none twice."""
    seen = {name: Counter() for name in srcs}
    for i in range(0, len(got), batch_size):
        for s, k, _ in got[i:i + batch_size]:
            seen[s][k] += 1
        for name, count in seen.items():
            n = len(srcs[name][1])
            c = sum(count.values())
            assert set(count) <= set(srcs[name][1])
            high = [k for k in srcs[name][1] if count[k] == c // n + 1]
            assert len(high) == c % n and all(count[k] in (c // n, c // n + 1) for k in srcs[name][1]), \
                f"{name} after batch {i // batch_size}: {c} draws are not whole passes and part of one"


def test_each_source_once_per_own_pass(sources):
    _, srcs = sources
    # 0.2 of 2000 = 400 draws of c (30 samples): 13 full passes and a part.
    loader = make(srcs, {"a": 0.5, "b": 0.3, "c": 0.2}, batch_size=20, shuffle=True, seed=3,
                  samples_per_epoch=2000)
    got = drain(loader)
    check_passes(got, srcs, 20)
    # A new pass is freshly shuffled: pass 0 and pass 1 of c come in other orders.
    c = [k for s, k, _ in got if s == "c"]
    assert c[:30] != c[30:60]
    state = loader.state_dict()["stoker"]["mix"]
    assert state["law"] == "sample" and state["names"] == ["a", "b", "c"]
    # The passes run on into the next epoch: epoch 1 continues each source's stream.
    got1 = drain(loader, epoch=1)
    check_passes(got + got1, srcs, 20)
    state1 = loader.state_dict()["stoker"]["mix"]
    assert state1["drawn_before_epoch"] == [sum(1 for s, _, _ in got if s == n) for n in ("a", "b", "c")]
    assert state1["pass"] == [d // n for d, n in zip(state1["drawn_before_epoch"], state1["samples"])]


def test_parquet_mixture_against_pyarrow(tmp_path):
    p1 = write_parquet_source(tmp_path / "p1", files=2, rows=48, seed=4)
    p2 = write_parquet_source(tmp_path / "p2", files=1, rows=40, seed=5)
    mixture = stoker.mix({"p1": (str(tmp_path / "p1" / "*.parquet"), 0.6),
                          "p2": (str(tmp_path / "p2" / "*.parquet"), 0.4)}, samples_per_epoch=400)
    loader = stoker.Loader(mixture, {"bin": stoker.raw(64)}, batch_size=16, shuffle=True, seed=1,
                           key_column="key", output="numpy", observe=False)
    got = drain(loader)
    ref = {"p1": p1, "p2": p2}
    for source, key, data in got:
        assert data == ref[source][key]
    counts = Counter(s for s, _, _ in got)
    assert abs(counts["p1"] - 240) <= 4 * math.sqrt(400 * 0.24)


def write_underscore_source(directory: Path, shards: int, per_shard: int, seed: int) -> dict:
    """Tar shards whose samples are '{key}.cls' and '{key}_blob.bin' (one
    sample under the underscore key rule, two under webdataset's), written
    with tarfile; returns key -> the blob's bytes as tarfile reads them back."""
    import tarfile

    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for s in range(shards):
        members = []
        for i in range(per_shard):
            key = f"u{s}_{i:04d}"
            blob = rng.integers(0, 256, int(rng.integers(8, 64)), np.uint8).tobytes()
            members += [(f"{key}.cls", str(i % 7).encode()), (f"{key}_blob.bin", blob)]
        write_tar(directory / f"u-{s}.tar", members)
    ref = {}
    for s in range(shards):
        with tarfile.open(directory / f"u-{s}.tar") as tar:
            for member in tar.getmembers():
                if member.name.endswith("_blob.bin"):
                    ref[member.name[: -len("_blob.bin")]] = tar.extractfile(member).read()
    return ref


def test_each_source_its_own_member_names_and_key_rule(sources, tmp_path):
    """One schema from sources that name it differently: 'bin' is member
    'bin' of a, and member 'blob.bin' of a source grouped by the underscore
    key rule; each sample's bytes are its own reader's (webdataset, tarfile)."""
    _, srcs = sources
    under = write_underscore_source(tmp_path / "u", shards=2, per_shard=25, seed=8)
    # u first: the layout is taught by its first sample, through its own names.
    mixture = stoker.mix({"u": stoker.Source(str(tmp_path / "u" / "u-{0..1}.tar"), 0.5, members={"bin": "blob.bin"},
                                             key_rule="underscore"),
                          "a": (srcs["a"][0], 0.5)}, law="proportion")
    loader = stoker.Loader(mixture, FIELDS, batch_size=10, shuffle=True, seed=2, output="numpy", observe=False)
    got = drain(loader)
    assert Counter(s for s, _, _ in got) == {"a": 120, "u": 50}
    ref = {"a": srcs["a"][1], "u": under}
    for source, key, data in got:
        assert data == ref[source][key], (source, key)
    assert sorted(k for s, k, _ in got if s == "u") == sorted(under)
    # The same source under webdataset's rule is two samples a key, and a '{key}_blob' has no 'blob.bin'.
    wrong = stoker.mix({"a": (srcs["a"][0], 0.5),
                        "u": stoker.Source(str(tmp_path / "u" / "u-{0..1}.tar"), 0.5, members={"bin": "blob.bin"})})
    with pytest.raises(Exception, match=r"has no member for field 'bin' \(member 'blob.bin' in its source\)"):
        drain(stoker.Loader(wrong, FIELDS, batch_size=10, shuffle=True, seed=2, output="numpy", observe=False))
    with pytest.raises(Exception, match="source 'u' reads field 'jpg' from member 'blob.bin', but the loader has no "
                                        "field 'jpg'"):
        stoker.Loader(stoker.mix({"u": stoker.Source(str(tmp_path / "u" / "u-0.tar"), 1, members={"jpg": "blob.bin"})}),
                      FIELDS, batch_size=10, observe=False)
    with pytest.raises(ValueError, match="key_rule must be one of"):
        stoker.Source("x.tar", 1, key_rule="dots")


def test_parquet_sources_with_their_own_column_names(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    p1 = write_parquet_source(tmp_path / "p1", files=1, rows=40, seed=4)
    (tmp_path / "p2").mkdir()
    t = pq.read_table(tmp_path / "p1" / "part-0.parquet")
    renamed = pa.table({"id": [f"r{k}" for k in t.column("key").to_pylist()], "payload": t.column("bin")})
    pq.write_table(renamed, tmp_path / "p2" / "part-0.parquet", row_group_size=8)
    p2 = dict(zip(renamed.column("id").to_pylist(), pq.read_table(tmp_path / "p2" / "part-0.parquet")
                  .column("payload").to_pylist()))
    mixture = stoker.mix({"p1": str(tmp_path / "p1" / "*.parquet"),
                          "p2": stoker.Source(str(tmp_path / "p2" / "*.parquet"), members={"bin": "payload",
                                                                                          "key": "id"})})
    loader = stoker.Loader(mixture, {"bin": stoker.raw(64)}, batch_size=8, shuffle=True, seed=1,
                           key_column="key", output="numpy", observe=False)
    got = drain(loader)
    assert Counter(s for s, _, _ in got) == {"p1": 40, "p2": 40}
    ref = {"p1": p1, "p2": p2}
    for source, key, data in got:
        assert data == ref[source][key], (source, key)


def test_parquet_beside_tar_in_one_mixture(sources, tmp_path):
    """A Parquet source and tar sources in one loader: each read as its kind
    is, bytes as pyarrow and webdataset's reader give them; each source's
    passes in its own unit (the Parquet files' row groups mixed, the local
    tar's single samples); a mid-epoch resume gives the exact rest; and law
    proportion over 2 ranks with partition exact gives every sample once."""
    _, srcs = sources
    p = write_parquet_source(tmp_path / "p", files=2, rows=40, seed=6)  # row groups of 16
    both = {"a": srcs["a"], "c": srcs["c"], "p": (str(tmp_path / "p" / "*.parquet"), p)}
    weights = {"a": 0.5, "c": 0.2, "p": 0.3}

    def loader(**kw):
        kw.setdefault("shuffle", True)
        kw.setdefault("seed", 5)
        law = kw.pop("law", None)
        spe = kw.pop("samples_per_epoch", None)
        w = weights if law is None else {name: None for name in weights}
        spec = {name: both[name][0] if w[name] is None else (both[name][0], w[name]) for name in both}
        return stoker.Loader(stoker.mix(spec, samples_per_epoch=spe, law=law), FIELDS, key_column="key",
                             output="numpy", observe=False, **kw)

    first = loader(batch_size=20, samples_per_epoch=1000)
    order = first.settings["order"]
    assert "a: samples permuted over the whole dataset" in order, order
    assert "p: blocks of 16 samples (the samples of every 8 consecutive blocks mixed)" in order, order
    it = iter(first)
    head = [r for _ in range(13) for r in rows(next(it))]
    state = first.state_dict()
    whole = drain(loader(batch_size=20, samples_per_epoch=1000))
    assert len(whole) == 1000
    check_bytes(whole, both)
    check_passes(whole, both, 20)
    counts = Counter(s for s, _, _ in whole)
    for name, w in weights.items():
        assert abs(counts[name] - 1000 * w) <= 4 * math.sqrt(1000 * w * (1 - w)), (name, counts[name])
    # The Parquet rows of a batch come from several row groups, not one run of a file.
    groups = [{(k.split("_")[0], int(k.split("_")[1]) // 16) for s, k, _ in whole[i:i + 20] if s == "p"}
              for i in range(0, 1000, 20)]
    assert sum(len(g) for g in groups) / len(groups) > 2, groups
    resumed = loader(batch_size=20, samples_per_epoch=1000)
    resumed.load_state_dict(state)
    assert head + drain(resumed) == whole
    # The same loader-wide unit (the Parquet source's 16), other units per source: refused, not another order.
    with pytest.raises(Exception, match=r"sources' shuffle_blocks \[1,1,16\], this loader's are \[16,16,16\]"):
        loader(batch_size=20, samples_per_epoch=1000, shuffle_block=16).load_state_dict(state)
    # Law proportion, 2 ranks, partition exact: every sample of every source once.
    got = []
    for rank in range(2):
        got.extend(drain(loader(batch_size=8, law="proportion", rank=rank, world_size=2, partition="exact")))
    check_bytes(got, both)
    assert sorted((s, k) for s, k, _ in got) == sorted((name, k) for name in both for k in both[name][1])


def test_resume_mid_epoch_equals_uninterrupted(sources):
    _, srcs = sources
    kw = dict(batch_size=10, shuffle=True, seed=11, samples_per_epoch=600)
    weights = {"a": 0.6, "b": 0.3, "c": 0.1}
    whole = drain(make(srcs, weights, **kw))
    first = make(srcs, weights, **kw)
    it = iter(first)
    head = []
    for _ in range(17):
        head.extend(rows(next(it)))
    state = first.state_dict()
    assert sum(state["stoker"]["mix"]["delivered"]) == 170
    resumed = make(srcs, weights, **kw)
    resumed.load_state_dict(state)
    assert head + drain(resumed) == whole


def test_weights_changed_mid_epoch_take_effect_from_the_next_batch(sources, caplog):
    _, srcs = sources
    kw = dict(batch_size=10, shuffle=True, seed=11, samples_per_epoch=600)
    w1, w2 = {"a": 0.6, "b": 0.3, "c": 0.1}, {"a": 0.1, "b": 0.3, "c": 0.6}
    first = make(srcs, w1, **kw)
    it = iter(first)
    for _ in range(17):
        next(it)
    state = first.state_dict()
    changed = make(srcs, w2, **kw)
    with caplog.at_level("WARNING", logger="stoker"):
        changed.load_state_dict(state)
    said = [r.getMessage() for r in caplog.records if "changed in the middle of epoch 0" in r.getMessage()]
    assert len(said) == 1 and "left out of this epoch" in said[0], said  # what the change leaves out
    assert len(changed) == 60 - 17
    rest = drain(changed)
    assert len(rest) == 430
    check_bytes(rest, srcs)
    counts = Counter(s for s, _, _ in rest)
    for name, w in w2.items():  # the new shares from the next batch on
        assert abs(counts[name] - 430 * w) <= 4 * math.sqrt(430 * w * (1 - w)), (name, counts)
    # Each source starts a fresh pass at the change: whole passes and part of one from there.
    check_passes(rest, srcs, 10)
    # The same restore twice gives the same batches (a pure function of the state and the weights).
    again = make(srcs, w2, **kw)
    again.load_state_dict(state)
    assert drain(again) == rest
    # Saved again in the middle of the changed epoch, it resumes exactly; the next epoch goes on
    # from each source's draws after the change.
    mid = make(srcs, w2, **kw)
    mid.load_state_dict(state)
    it = iter(mid)
    part = []
    for _ in range(20):
        part.extend(rows(next(it)))
    state2 = mid.state_dict()
    assert state2["stoker"]["mix"]["segment"]["weights"] == [0.6, 0.3, 0.1]
    later = make(srcs, w2, **kw)
    later.load_state_dict(state2)
    assert part + drain(later) == rest
    after = drain(later, epoch=1)
    check_passes(rest + after, srcs, 10)
    with pytest.raises(Exception, match="once already"):
        make(srcs, w1, **kw).load_state_dict(state2)


def test_weights_changed_at_an_epoch_boundary_keep_every_pass_whole(sources, caplog):
    _, srcs = sources
    kw = dict(batch_size=10, shuffle=True, seed=12, samples_per_epoch=600)
    first = make(srcs, {"a": 0.6, "b": 0.3, "c": 0.1}, **kw)
    epoch0 = drain(first)
    state = first.state_dict()
    changed = make(srcs, {"a": 0.2, "b": 0.2, "c": 0.6}, **kw)
    with caplog.at_level("WARNING", logger="stoker"):
        changed.load_state_dict(state)
    assert not [r for r in caplog.records if "changed in the middle" in r.getMessage()]  # nothing left out
    epoch1 = drain(changed, epoch=1)
    assert Counter(s for s, _, _ in epoch1)["c"] >= 600 * 0.6 - 3
    check_passes(epoch0 + epoch1, srcs, 10)  # no pass cut: the new weights' stream goes on


@pytest.mark.parametrize("world", [2, 3])
def test_ranks_equal_batches_and_exact_partition(sources, world):
    _, srcs = sources
    weights = {"a": 1, "b": 1, "c": 1}
    counts = [len(make(srcs, weights, batch_size=8, shuffle=True, seed=2, rank=r, world_size=world,
                       samples_per_epoch=500)) for r in range(world)]
    assert len(set(counts)) == 1
    # partition="exact" (law proportion by default): every sample of every source exactly once.
    got = []
    nb = set()
    for r in range(world):
        loader = make(srcs, weights, batch_size=8, shuffle=True, seed=2, rank=r, world_size=world,
                      partition="exact")
        nb.add(len(loader))
        got.extend(drain(loader))
    assert len(nb) == 1
    check_bytes(got, srcs)
    every = sorted((name, k) for name in srcs for k in srcs[name][1])
    assert sorted((s, k) for s, k, _ in got) == every


def test_stop_at_first(sources):
    _, srcs = sources
    loader = make(srcs, {"a": 0.5, "b": 0.5}, batch_size=10, shuffle=True, seed=5, law="stop_at_first")
    got = drain(loader)
    b = [k for s, k, _ in got if s == "b"]
    a = [k for s, k, _ in got if s == "a"]
    # The epoch ends before b (70 samples at weight 0.5) would run out: all of b once, about as many of a.
    assert sorted(b) == sorted(srcs["b"][1])
    assert abs(len(a) - 70) <= 2 and len(set(a)) == len(a)
    check_bytes(got, srcs)


def counts_loader(srcs, choose, repeat, **kw):
    spec = {name: srcs[name][0] for name in ("a", "b", "c")}
    return stoker.Loader(stoker.mix(spec, choose=choose, repeat=repeat), FIELDS, output="numpy", observe=False,
                         **kw)


def test_repeat_and_choose_give_each_source_its_exact_count_an_epoch(sources):
    """Mosaic Streaming's law: a choose of 50 of a's 120, b twice (140), c
    once (30) is exactly that of each source every epoch, its passes running
    on across epochs, every sample's bytes webdataset's."""
    _, srcs = sources
    loader = counts_loader(srcs, {"a": 50}, {"b": 2}, batch_size=20, shuffle=True, seed=13)
    order = loader.settings["order"]
    assert "law counts, 220 samples an epoch" in order, order
    assert "a choose 50 of 120 samples" in order and "b repeat 2 = 140 of 70 samples" in order, order
    assert "c repeat 1 = 30 of 30 samples" in order, order
    got = []
    for epoch in range(3):
        rows_of_epoch = drain(loader, epoch)
        assert Counter(s for s, _, _ in rows_of_epoch) == {"a": 50, "b": 140, "c": 30}, epoch
        got.extend(rows_of_epoch)
    check_bytes(got, srcs)
    check_passes(got, srcs, 20)  # a: 150 draws over 3 epochs = one pass and 30 of the next, none twice
    assert loader.state_dict()["stoker"]["mix"]["law"] == "counts"


def test_repeat_and_choose_resume_mid_epoch_and_refuse_other_counts(sources):
    _, srcs = sources
    kw = dict(batch_size=10, shuffle=True, seed=17)
    whole = drain(counts_loader(srcs, {"a": 45}, {"c": 0.5}, **kw), 1)
    first = counts_loader(srcs, {"a": 45}, {"c": 0.5}, **kw)
    first.set_epoch(1)
    it = iter(first)
    head = []
    for _ in range(7):
        head.extend(rows(next(it)))
    state = first.state_dict()
    assert state["stoker"]["mix"]["choose"] == [45, -1, -1]
    resumed = counts_loader(srcs, {"a": 45}, {"c": 0.5}, **kw)
    resumed.load_state_dict(state)
    assert head + drain(resumed) == whole
    other = counts_loader(srcs, {"a": 40, "c": 20}, {}, **kw)  # the same 130 an epoch, drawn otherwise
    with pytest.raises(Exception, match=r"saved with repeat .* and choose \[45,-1,-1\].*restore with the saved ones"):
        other.load_state_dict(state)


def test_repeat_and_choose_arguments(sources):
    _, srcs = sources
    with pytest.raises(ValueError, match="give the source alone"):
        stoker.mix({"a": (srcs["a"][0], 0.5)}, repeat={"a": 2})
    with pytest.raises(ValueError, match="both a repeat and a choose"):
        stoker.mix({"a": srcs["a"][0]}, repeat={"a": 2}, choose={"a": 3})
    with pytest.raises(ValueError, match=r"names \['z'\], which are not sources"):
        stoker.mix({"a": srcs["a"][0]}, choose={"z": 3})
    with pytest.raises(ValueError, match="a choose is a whole number"):
        stoker.mix({"a": srcs["a"][0]}, choose={"a": 2.5})
    with pytest.raises(ValueError, match="not law 'sample'"):
        stoker.mix({"a": srcs["a"][0]}, choose={"a": 3}, law="sample")
    with pytest.raises(ValueError, match="sets its own"):
        stoker.mix({"a": srcs["a"][0]}, choose={"a": 3}, samples_per_epoch=10)
    with pytest.raises(Exception, match="holds no samples"):
        stoker.Loader(stoker.mix({"a": srcs["a"][0]}, choose={"a": 0}), FIELDS, batch_size=4, observe=False)


def test_the_verdict_names_the_slow_source(sources):
    """One source over HTTP behind a proxy that delays every request by
    60 ms, beside local shards: the readers' seconds by source (report's
    mix.read) fall mostly on it, and the storage-bound verdict names it."""
    from fault_proxy import FaultProxy

    root, srcs = sources
    with UrlServer(root / "b") as server:
        proxy = FaultProxy(server.port, latency=0.06)
        try:
            web = f"{proxy.url}/b-{{00..01}}.tar"
            mixture = stoker.mix({"local": (srcs["a"][0], 0.5), "web": (web, 0.5)}, samples_per_epoch=160)
            loader = stoker.Loader(mixture, FIELDS, batch_size=8, shuffle=True, seed=4, io_depth=1,
                                   autotune=False, output="numpy", log_every=1000)
            got = drain(loader)
            report = loader.report()
            loader.close()
        finally:
            proxy.close()
    assert len(got) == 160
    reads = report["mix"]["read"]
    assert [r["items"] > 0 for r in reads] == [True, True], reads
    busy = [r["busy_s"] for r in reads]
    assert busy[1] > 0.5 * sum(busy), reads  # each web read waits 60 ms; a local one a page-cache copy
    verdict = report["verdict"]
    assert verdict["bottleneck"] == "storage", verdict
    assert "source 'web' took" in verdict["reason"] and "source 'web' took" in verdict["recommendation"], verdict


def test_missing_source_is_named(sources, tmp_path):
    _, srcs = sources
    root = tmp_path / "www"
    root.mkdir()
    with UrlServer(root) as server:
        url = f"http://127.0.0.1:{server.port}/gone-{{0..1}}.tar"
        with pytest.raises(Exception, match=r"source 'web' of the mixture.*(404|not found|Not Found)"):
            stoker.Loader(stoker.mix({"a": (srcs["a"][0], 0.5), "web": (url, 0.5)}), FIELDS, batch_size=4,
                          retry_deadline_s=1.0, observe=False)


def test_bad_arguments(sources):
    _, srcs = sources
    with pytest.raises(ValueError, match="no weight"):
        stoker.mix({"a": srcs["a"][0]}, law="sample")
    with pytest.raises(ValueError, match=">= 0"):
        stoker.mix({"a": (srcs["a"][0], -1)})
    with pytest.raises(ValueError, match="every source a weight, or none"):
        stoker.mix({"a": (srcs["a"][0], 1), "b": srcs["b"][0]})
    with pytest.raises(ValueError, match="give each source a weight"):
        stoker.mix({"a": srcs["a"][0], "b": srcs["b"][0]}, samples_per_epoch=10)
    # No weights: each source by its size, one pass of each an epoch.
    loader = stoker.Loader(stoker.mix({"a": srcs["a"][0], "b": srcs["b"][0]}), FIELDS, batch_size=10,
                           output="numpy", observe=False)
    assert "law proportion, 190 samples an epoch" in loader.settings["order"]


def test_bad_member_is_named_with_its_source(sources, tmp_path):
    import webdataset as wds

    _, srcs = sources
    with wds.TarWriter(str(tmp_path / "bad-00.tar")) as sink:
        for i in range(8):  # one member longer than the field's 64 bytes: an error naming it
            sink.write({"__key__": f"bad{i}", "bin": bytes(200 if i == 5 else 10)})
    loader = stoker.Loader(stoker.mix({"a": (srcs["a"][0], 0.5), "bad": (str(tmp_path / "bad-00.tar"), 0.5)}),
                           FIELDS, batch_size=8, output="numpy", observe=False)
    with pytest.raises(Exception, match=r"source 'bad' of the mixture: .*bad-00\.tar.*bad5"):
        drain(loader)


def test_image_folder_http_and_local_tar_in_one_exact_mixture(tmp_path):
    """Three kinds of source (an image folder, tar shards over HTTP, local tar shards) under
    law proportion and partition exact: every sample of every source once, bytes and labels as
    the files, webdataset's reader and torchvision's ImageFolder order give them."""
    import webdataset as wds

    from conftest import jpeg_bytes, natural_image, write_vision_shards

    rng = np.random.default_rng(9)
    folder = tmp_path / "folder"
    files = {}
    for label, cls in enumerate(["cat", "dog"]):  # sorted class names: ImageFolder's labels
        (folder / cls).mkdir(parents=True)
        for i in range(5):
            data = jpeg_bytes(natural_image(rng, 40, 30))
            (folder / cls / f"{i:06d}.jpg").write_bytes(data)
            files[f"{cls}/{i:06d}"] = (data, label)
    write_vision_shards(tmp_path / "web", shards=2, per_shard=6, seed=1)
    write_vision_shards(tmp_path / "local", shards=1, per_shard=7, seed=2)

    def tar_ref(directory, n):
        ref = {}
        for s in wds.WebDataset(str(directory / f"shard-{{000000..{n - 1:06d}}}.tar"), shardshuffle=False):
            ref[s["__key__"]] = (s["jpg"], int(s["cls"]))
        return ref

    refs = {"folder": files, "web": tar_ref(tmp_path / "web", 2), "local": tar_ref(tmp_path / "local", 1)}
    fields = {"jpg": stoker.raw(1 << 16), "cls": stoker.scalar()}
    with UrlServer(tmp_path / "web") as server:
        mixture = stoker.mix({"folder": str(folder),
                              "web": f"http://127.0.0.1:{server.port}/shard-{{000000..000001}}.tar",
                              "local": str(tmp_path / "local" / "shard-000000.tar")})
        got = []
        for rank in range(2):
            loader = stoker.Loader(mixture, fields, batch_size=4, shuffle=True, seed=3, rank=rank, world_size=2,
                                   partition="exact", output="numpy", observe=False)
            assert "law proportion" in loader.settings["order"]
            for batch in loader:
                for i, (source, key) in enumerate(zip(batch["__source__"], batch["__key__"])):
                    got.append((source, key, bytes(batch["jpg"][i, : int(batch["jpg.len"][i])]),
                                int(batch["cls"][i])))
    assert sorted((s, k) for s, k, _, _ in got) == sorted((s, k) for s in refs for k in refs[s])
    for source, key, data, label in got:
        assert (data, label) == refs[source][key], f"{source}/{key}"


def test_skip_refills_from_the_bad_samples_own_source(sources, tmp_path):
    import webdataset as wds

    _, srcs = sources
    bad = {}
    with wds.TarWriter(str(tmp_path / "bad-00.tar")) as sink:
        for i in range(20):  # samples 3 and 11 longer than the field's 64 bytes: skipped
            data = bytes([i]) * (200 if i in (3, 11) else 10)
            sink.write({"__key__": f"bad{i:02d}", "bin": data})
            bad[f"bad{i:02d}"] = data
    loader = stoker.Loader(stoker.mix({"a": (srcs["a"][0], 0.5), "bad": (str(tmp_path / "bad-00.tar"), 0.5)},
                                      samples_per_epoch=80),
                           FIELDS, batch_size=8, shuffle=True, seed=4, on_error="skip", output="numpy",
                           observe=False)
    got = drain(loader)
    # Two bad samples, each drawn once in each of the epoch's two passes of 'bad': four slots refilled.
    assert loader.skips["skipped"] == 2 and loader.skips["refilled"] == 4
    counts = Counter(s for s, _, _ in got)
    assert counts["bad"] == 40 and counts["a"] == 40  # shares kept: each refill came from 'bad'
    refs = {"a": srcs["a"][1], "bad": bad}
    for source, key, data in got:
        assert key not in ("bad03", "bad11") and data == refs[source][key]


def test_a_remote_manifest_in_a_mixture(sources, tmp_path):
    """One source a stoker-manifest.json over HTTP (its shards' counts, no shard read before the
    first batch's), one local tar: every sample of both once, bytes as webdataset reads them."""
    import shutil
    import subprocess

    from conftest import stoker_bin, stoker_env

    root, srcs = sources
    web = tmp_path / "web"
    shutil.copytree(root / "b", web)
    subprocess.run([stoker_bin(), "index", "-q", str(web)], check=True, env=stoker_env())
    assert (web / "stoker-manifest.json").exists()
    with UrlServer(web) as server:
        mixture = stoker.mix({"c": srcs["c"][0], "b": f"http://127.0.0.1:{server.port}/stoker-manifest.json"})
        loader = stoker.Loader(mixture, FIELDS, batch_size=8, shuffle=True, seed=1, partition="exact",
                               output="numpy", observe=False)
        assert "b: the manifest" in loader.settings["index"]["from"]
        got = drain(loader)
    check_bytes(got, srcs)
    assert sorted((s, k) for s, k, _ in got) == sorted((n, k) for n in ("b", "c") for k in srcs[n][1])


@pytest.mark.parametrize("world", [1, 2])
def test_one_source_per_batch(sources, world):
    _, srcs = sources
    weights = {"a": 0.5, "b": 0.3, "c": 0.2}
    got_batches = []
    for rank in range(world):
        loader = make(srcs, weights, batch_size=8, shuffle=True, seed=6, rank=rank, world_size=world,
                      samples_per_epoch=1600, one_source_per_batch=True)
        assert "one source per batch" in loader.settings["order"]
        batches = [rows(b) for b in loader]
        assert len(batches) == 200 // world
        got_batches += batches
    assert all(len({s for s, _, _ in b}) == 1 for b in got_batches)
    n = len(got_batches)
    counts = Counter(b[0][0] for b in got_batches)
    for name, w in weights.items():  # batches' sources by weight
        assert abs(counts[name] - n * w) <= 4 * math.sqrt(n * w * (1 - w)), counts
    flat = [r for b in got_batches for r in b]
    check_bytes(flat, srcs)
    if world == 1:
        check_passes(flat, srcs, 8)
    with pytest.raises(ValueError, match="multiple"):
        make(srcs, weights, batch_size=8, samples_per_epoch=1604, one_source_per_batch=True)


def test_report_names_each_sources_counts(sources):
    _, srcs = sources
    loader = make(srcs, {"a": 0.5, "b": 0.5}, batch_size=10, shuffle=True, seed=1, samples_per_epoch=100,
                  observe=True)
    got = drain(loader)
    mix = loader.report()["mix"]
    assert mix["names"] == ["a", "b"] and mix["law"] == "sample"
    assert mix["delivered"] == [sum(1 for s, _, _ in got if s == n) for n in ("a", "b")]
    assert mix["samples"] == [120, 70] and mix["pass"] == [0, 0]


def test_a_remote_source_reads_its_draws_in_runs_and_ahead(sources):
    """A mixture's batch holds each source's draws in random slots, draws that
    are runs of the source's pass (blocks of 16 over remote shards). Read by
    shard and sample, a remote source costs a GET per run, not one per sample
    (the proxy counts them), and its reads go ahead of the batches' buffers
    though the first source is local. Bytes as webdataset reads them."""
    from fault_proxy import FaultProxy

    root, srcs = sources
    with UrlServer(root / "b") as server:
        proxy = FaultProxy(server.port)
        try:
            web = f"{proxy.url}/b-{{00..01}}.tar"
            mixture = stoker.mix({"local": (srcs["a"][0], 0.5), "web": (web, 0.5)}, samples_per_epoch=140)
            loader = stoker.Loader(mixture, FIELDS, batch_size=32, shuffle=True, seed=5, output="numpy",
                                   observe=False)
            ahead = loader.settings["read_ahead_batches"]
            indexed = sum(proxy.gets.values())  # the shards' offsets, read while the loader was made
            got = []
            for batch in loader:
                got.extend((("b" if s == "web" else "a"), k, d) for s, k, d in rows(batch))
            gets = sum(proxy.gets.values()) - indexed
            loader.close()
        finally:
            proxy.close()
    assert len(got) == 140
    check_bytes(got, srcs)
    draws = sum(1 for s, _, _ in got if s == "b")
    assert draws >= 50, draws
    assert ahead > 0, ahead
    assert 0 < gets <= draws // 3, (gets, draws)  # a GET per sample before: gets == draws
