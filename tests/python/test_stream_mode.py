"""Stream mode (stream=True): tar shards with no index and no manifest read
front to back, as webdataset does. Checked against webdataset's own reader
(keys, urls, raw member bytes) and stoker's indexed mode (decoded arrays),
over local shards and over HTTP on loopback (nginx behind the fault proxy,
which counts the requests)."""
from __future__ import annotations

import collections
import gzip
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from contextlib import closing

import numpy as np
import pytest

import stoker
from stoker import _stoker

from conftest import jpeg_bytes, lightning_run, natural_image, stoker_env
from fault_proxy import FaultProxy
from nginx_server import NGINX, NginxServer

SHARDS, PER_SHARD = 6, 10
TOTAL = SHARDS * PER_SHARD


def fields():
    return {"jpg": stoker.image(16, resize="center_crop", layout="HWC"), "vec.npy": stoker.npy(),
            "cls": stoker.scalar("int64"), "txt": stoker.text(32)}


def npy_bytes(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Shards written by webdataset's TarWriter; no sidecars, no manifest."""
    import webdataset as wds

    root = tmp_path_factory.mktemp("stream")
    rng = np.random.default_rng(5)
    n = 0
    for s in range(SHARDS):
        with wds.TarWriter(str(root / f"shard-{s:06d}.tar")) as sink:
            for _ in range(PER_SHARD):
                sink.write({"__key__": f"d{n % 3}/s{n:04d}", "jpg": jpeg_bytes(natural_image(rng, 40, 32)),
                            "vec.npy": npy_bytes(rng.standard_normal(5).astype(np.float32)),
                            "cls": str(n).encode(), "txt": f"sample {n}".encode()})
                n += 1
    assert not list(root.glob("*.idx")) and not (root / "stoker-manifest.json").exists()
    return root


def urls(root) -> list[str]:
    return [str(root / f"shard-{s:06d}.tar") for s in range(SHARDS)]


def rows(loader, epochs=(0,)):
    """Every sample delivered, as (key, url, vec bytes, cls, txt, jpg bytes), epoch by epoch."""
    out = []
    for e in epochs:
        loader.set_epoch(e)
        for b in loader:
            for i, key in enumerate(b["__key__"]):
                out.append((key, b["__url__"][i], np.asarray(b["vec.npy"][i]).tobytes(), int(b["cls"][i]),
                            b["txt"][i], np.asarray(b["jpg"][i]).tobytes()))
    return out


def make(root, **kw):
    kw.setdefault("samples_per_epoch", TOTAL)
    return stoker.Loader(urls(root), fields(), batch_size=kw.pop("batch_size", 4), output=kw.pop("output", "numpy"),
                         stream=True, **kw)


def test_unshuffled_stream_is_webdatasets_and_decodes_as_the_indexed_mode(data):
    import webdataset as wds

    with closing(make(data, shuffle=False)) as ld:
        assert ld.settings["mode"] == "stream"
        assert ld.settings["stream"]["samples_per_epoch"] == TOTAL and ld.settings["stream"]["shuffle_buffer"] == 1
        assert ld.settings["order"].startswith("stream:")
        assert len(ld) == TOTAL // 4
        got = rows(ld)
        stats = ld._native.stats()  # the stages are recorded as in the indexed mode
        # (decodes include the next epoch's batches made ahead)
        assert stats["batches_delivered"] == TOTAL // 4 and stats["decode"]["items"] >= TOTAL
    want = [(s["__key__"], s["__url__"], np.load(io.BytesIO(s["vec.npy"])).tobytes(), int(s["cls"]),
             s["txt"].decode()) for s in wds.WebDataset(urls(data), shardshuffle=False)]
    assert [r[:5] for r in got] == want
    # The same decoders as the indexed mode: the same arrays, image included.
    with closing(stoker.Loader(urls(data), fields(), batch_size=4, output="numpy")) as indexed:
        assert indexed.settings["mode"] == "indexed"
        assert rows(indexed) == got


def test_two_ranks_shuffled_deliver_equal_batches_and_every_sample_once_per_pass(data):
    per_rank = []
    for rank in range(2):
        with closing(make(data, shuffle=True, seed=7, batch_size=5, rank=rank, world_size=2)) as ld:
            assert len(ld) == TOTAL // 10
            per_rank.append(rows(ld))
    assert len(per_rank[0]) == len(per_rank[1]) == TOTAL // 2
    keys = [r[0] for rank in per_rank for r in rank]
    assert sorted(keys) == sorted(f"d{n % 3}/s{n:04d}" for n in range(TOTAL))
    # Each rank reads whole shards: its samples come from 3 of the 6.
    assert all(len({r[1] for r in rank}) == SHARDS // 2 for rank in per_rank)
    assert not {r[1] for r in per_rank[0]} & {r[1] for r in per_rank[1]}
    # Shuffled: not the shard order.
    assert [r[0] for r in per_rank[0]] != sorted(r[0] for r in per_rank[0])


def test_the_stream_is_the_same_with_any_decode_threads(data):
    def run(threads):
        kw = dict(shuffle=True, seed=3, shuffle_buffer=7, decode_threads=threads, samples_per_epoch=40)
        with closing(make(data, **kw)) as ld:
            return rows(ld, epochs=(0, 1))

    one = run(1)
    assert one == run(2)
    assert len(one) == 80


def test_save_trace_has_the_indexed_modes_spans_and_thread_names(data, tmp_path):
    """The stream's reads, decodes and the consumer's waits are spans as in the
    indexed mode (tests/python/test_observe.py): a decode names its batch within
    the epoch and its slot; a read precedes its place in the shuffle (batch -1)."""
    def trace(**kw):
        with closing(make(data, shuffle=True, seed=3, shuffle_buffer=7, decode_threads=2, samples_per_epoch=40,
                          trace_spans=4096, **kw)) as ld:
            for e in (0, 1):
                ld.set_epoch(e)
                for _ in ld:
                    pass
            ld.save_trace(tmp_path / "trace.json")
        return json.loads((tmp_path / "trace.json").read_text())["traceEvents"]

    events = trace()
    spans = [e for e in events if e["ph"] == "X" and e.get("cat") == "stoker"]
    by_name = {n: [e for e in spans if e["name"] == n] for n in ("read", "decode", "wait")}
    threads = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    # Two epochs of 10 batches of 4, each (batch, slot) decoded once per epoch, and the
    # third epoch's first batches begun ahead (the stream goes on; prefetch 2 at most).
    decoded = collections.Counter((e["args"]["batch"], e["args"]["slot"]) for e in by_name["decode"])
    assert set(decoded) == {(b, s) for b in range(10) for s in range(4)}
    assert all(decoded[(b, s)] == 2 for b in range(2, 10) for s in range(4)), decoded
    assert all(2 <= decoded[(b, s)] <= 3 for b in range(2) for s in range(4)), decoded
    assert {threads[e["tid"]] for e in by_name["decode"]} <= {"decoder 0", "decoder 1"}
    # Each sample read is a span, but a shard's first, which the opening ahead reads (stream_run.h).
    assert len(by_name["read"]) >= 80 - 2 * SHARDS
    assert {threads[e["tid"]] for e in by_name["read"]} == {"reader 0"}
    assert all(e["args"]["batch"] == -1 for e in by_name["read"])
    assert [e["args"]["batch"] for e in by_name["wait"]][:10] == list(range(10))


def test_memory_budget_is_judged_as_in_the_indexed_mode(data):
    """A budget that cannot hold the batch buffers and the 16 MiB overhead is refused by
    both modes, naming the need; the stream's message says its samples are estimated at
    its first (there is no index to give the largest) and counts the shuffle buffer."""
    common = dict(batch_size=4, output="numpy", shuffle=True, seed=3, memory_budget=65536)
    with pytest.raises((ValueError, stoker.StokerError), match=r"memory_budget=65536 .*needs \d+ bytes"):
        stoker.Loader(urls(data), fields(), **common)
    with pytest.raises((ValueError, stoker.StokerError),
                       match=r"memory_budget=65536 .*needs \d+ bytes.*stream's first, \d+ bytes, and a shuffle "
                             r"buffer of 7"):
        stoker.Loader(urls(data), fields(), stream=True, samples_per_epoch=TOTAL, shuffle_buffer=7, **common)
    # The need grows with the shuffle buffer: a budget that fits 7 samples does not fit 7,000.
    fits = dict(common, memory_budget=24 << 20)
    with closing(stoker.Loader(urls(data), fields(), stream=True, samples_per_epoch=TOTAL, shuffle_buffer=7,
                               **fits)) as ld:
        assert len(rows(ld)) == TOTAL
    with pytest.raises((ValueError, stoker.StokerError), match=r"shuffle buffer of 7000"):
        stoker.Loader(urls(data), fields(), stream=True, samples_per_epoch=TOTAL, shuffle_buffer=7000, **fits)


def test_stream_is_tuned_by_default_and_a_knob_passed_stays_fixed(data):
    """The indexed mode's controller runs the stream too (its knobs: decode threads and
    prefetch; one reader, so io_depth 1 and no read-ahead). That a change mid-run leaves
    the stream as it was is tests/cpp/pipeline/tuned_run_test.cc's."""
    cores = len(os.sched_getaffinity(0))
    with closing(make(data, shuffle=True, seed=3, shuffle_buffer=7)) as ld:
        s = ld.settings
        assert (s["autotune"], s["fixed"], s["io_depth"], s["read_ahead_batches"]) == (True, [], 1, 0)
        assert s["decode_threads"] == cores and s["prefetch"] == 2 and s["changes"] == 0
        assert len(rows(ld)) == TOTAL
        assert ld.report()["tuning"]["changes"] == ld._native.tune_log()
    with closing(make(data, shuffle=True, seed=3, shuffle_buffer=7, decode_threads=1, prefetch=3)) as ld:
        s = ld.settings
        assert sorted(s["fixed"]) == ["decode_threads", "prefetch"]
        assert (s["decode_threads"], s["prefetch"]) == (1, 3)
    with closing(make(data, shuffle=True, seed=3, shuffle_buffer=7, autotune=False)) as ld:
        assert ld.settings["autotune"] is False


def test_epochs_continue_one_stream(data):
    import webdataset as wds

    order = [s["__key__"] for s in wds.WebDataset(urls(data), shardshuffle=False)]
    with closing(make(data, shuffle=False, samples_per_epoch=40)) as ld:
        got = [r[0] for r in rows(ld, epochs=(0, 1))]
    # Epoch 1 goes on where epoch 0 stopped, into the next pass.
    assert got == order[:40] + order[40:] + order[:20]


def test_lightning_epochs_continue_the_stream_and_resume_mid_epoch(data, tmp_path):
    """A stream driven by Lightning as users run it (shuffled, defaults, no set_epoch): its 3
    epochs are the stream's first 3 * samples_per_epoch samples, and a fit resumed from a
    mid-epoch checkpoint trains on exactly the steps the whole fit had left."""
    kw = dict(shuffle=True, seed=7, samples_per_epoch=24)
    with closing(make(data, **kw)) as ld:
        stream = [r[0] for r in rows(ld, epochs=(0, 1, 2))]
    ckpt = tmp_path / "mid.ckpt"
    with closing(make(data, output="torch", **kw)) as ld:
        whole = lightning_run(ld, max_epochs=3, save_at=8, save_to=ckpt)  # step 8: batch 2 of epoch 1
    assert [e for e, _ in whole] == [0] * 6 + [1] * 6 + [2] * 6
    assert [k for _, ks in whole for k in ks] == stream
    with closing(make(data, output="torch", **kw)) as ld:
        resumed = lightning_run(ld, max_epochs=3, ckpt_path=str(ckpt))
    assert resumed == whole[8:]


def test_state_dict_mid_epoch_resumes_the_uninterrupted_stream(data):
    kw = dict(shuffle=True, seed=11, shuffle_buffer=9, samples_per_epoch=40)
    with closing(make(data, **kw)) as ld:
        whole = rows(ld, epochs=(0, 1))
    with closing(make(data, **kw)) as ld:
        ld.set_epoch(1)
        it = iter(ld)
        head = [next(it) for _ in range(3)]
        state = ld.state_dict()
    assert [k for b in head for k in b["__key__"]] == [r[0] for r in whole[40:52]]
    with closing(make(data, **kw)) as fresh:
        fresh.load_state_dict(state)
        rest = []
        for b in fresh:
            rest += [(k, b["__url__"][i], np.asarray(b["vec.npy"][i]).tobytes(), int(b["cls"][i]), b["txt"][i],
                      np.asarray(b["jpg"][i]).tobytes()) for i, k in enumerate(b["__key__"])]
    assert rest == whole[52:]
    # A state saved by another stream (another seed) is refused.
    with closing(make(data, **{**kw, "seed": 12})) as other, pytest.raises(ValueError, match="seed"):
        other.load_state_dict(state)


def test_a_state_in_a_later_pass_resumes_from_that_pass_start(data):
    """Each pass starts with an empty shuffle buffer, so a state records the
    pass its next batch lies in and the pass's first sample, and a restore
    replays from there instead of from the stream's start. Epochs of 40 of
    the 60 samples: epoch 2's third batch (sample 88) lies in pass 1, which
    begins at sample 60. The rest equals the uninterrupted stream, and so
    does a state without the pass (replayed from the stream's start)."""
    kw = dict(shuffle=True, seed=3, shuffle_buffer=7, samples_per_epoch=40)
    with closing(make(data, **kw)) as ld:
        whole = rows(ld, epochs=(0, 1, 2))
    with closing(make(data, **kw)) as ld:
        ld.set_epoch(2)
        it = iter(ld)
        for _ in range(2):
            next(it)
        state = ld.state_dict()
    native = state["stoker"]
    assert (native["epoch"], native["next_batch"], native["pass"], native["pass_start"]) == (2, 2, 1, 60)
    # A state of a build before passes were recorded (and before the buffer ramped: with
    # 7 samples it never did) replays from the stream's start.
    older = {"stoker": {k: v for k, v in native.items() if k not in ("pass", "pass_start", "shuffle_initial")}}
    for saved in (state, older):
        with closing(make(data, **kw)) as fresh:
            fresh.load_state_dict(saved)
            assert rows(fresh, epochs=(2,)) == whole[88:120]
    with closing(make(data, **kw)) as fresh, pytest.raises(ValueError, match="pass_start"):
        fresh.load_state_dict({"stoker": dict(native, pass_start=100)})


def test_a_state_saved_while_the_buffer_ramps_resumes_the_uninterrupted_stream(tmp_path):
    """A buffer of 150 lets its first sample out once 100 are held and grows to 150 as it goes
    (webdataset's ramp). A state saved three batches in, with the buffer still growing, resumes
    the uninterrupted stream; each pass delivers every sample once. A state saved before the
    buffer ramped (no "shuffle_initial": its first sample out once 150 were held) is refused."""
    keys = []
    for s in range(4):
        with tarfile.open(tmp_path / f"t-{s}.tar", "w", format=tarfile.USTAR_FORMAT) as tar:
            for i in range(80):
                key = f"t{s}{i:03d}"
                keys.append(key)
                info = tarfile.TarInfo(f"{key}.cls")
                info.size = len(str(i).encode())
                tar.addfile(info, io.BytesIO(str(i).encode()))
    shards = [str(tmp_path / f"t-{s}.tar") for s in range(4)]

    def run():
        return stoker.Loader(shards, {"cls": stoker.scalar("int64")}, batch_size=16, output="numpy", stream=True,
                             samples_per_epoch=320, shuffle=True, seed=5, shuffle_buffer=150)

    def delivered(ld, epochs):
        out = []
        for e in epochs:
            ld.set_epoch(e)
            out += [k for b in ld for k in b["__key__"]]
        return out

    with closing(run()) as ld:
        whole = delivered(ld, (0, 1))
        assert ld.settings["order"].startswith("stream: shards permuted each pass, then a shuffle buffer of 150 "
                                               "samples (first out once 100 are held)")
    assert sorted(whole[:320]) == sorted(keys) and sorted(whole[320:]) == sorted(keys)
    with closing(run()) as ld:
        it = iter(ld)
        for _ in range(3):
            next(it)
        state = ld.state_dict()
    assert state["stoker"]["shuffle_initial"] == 100
    with closing(run()) as fresh:
        fresh.load_state_dict(state)
        assert delivered(fresh, (0, 1)) == whole[48:]
    before_ramp = {"stoker": {k: v for k, v in state["stoker"].items() if k != "shuffle_initial"}}
    with closing(run()) as fresh, pytest.raises(ValueError, match=r"let its first sample out once 150 were held; "
                                                               r"this one's does once 100 are"):
        fresh.load_state_dict(before_ramp)


def test_gzipped_shards_stream_the_same_samples(data, tmp_path):
    for u in urls(data):
        with open(u, "rb") as src, gzip.open(tmp_path / (os.path.basename(u) + ".gz"), "wb") as dst:
            shutil.copyfileobj(src, dst)
    kw = dict(shuffle=True, seed=2, shuffle_buffer=5, samples_per_epoch=TOTAL)
    with closing(make(data, **kw)) as ld:
        want = [r[:5] for r in rows(ld)]
    gz = [str(tmp_path / f"shard-{s:06d}.tar.gz") for s in range(SHARDS)]
    with closing(stoker.Loader(gz, fields(), batch_size=4, output="numpy", stream=True, **kw)) as ld:
        got = [r[:5] for r in rows(ld)]
    assert [r[0] for r in got] == [r[0] for r in want]
    assert [r[2:] for r in got] == [r[2:] for r in want]


def test_stream_needs_samples_per_epoch(data):
    with pytest.raises(ValueError, match="samples_per_epoch.*with_epoch"):
        stoker.Loader(urls(data), fields(), batch_size=4, stream=True)
    with pytest.raises(ValueError, match="stream=True"):
        stoker.Loader(urls(data), fields(), batch_size=4, samples_per_epoch=40)
    with pytest.raises(ValueError, match="7 ranks"):
        stoker.Loader(urls(data), fields(), batch_size=4, stream=True, samples_per_epoch=40, rank=0, world_size=7)


def test_a_stream_goes_to_the_device(data):
    """device= with a stream: each batch is copied to the device as soon as it
    is complete, as in the indexed mode (here the late CPU copy engine,
    device="cpu-late", which checks by checksum that no buffer is rewritten
    while its copy is in flight), and the batches equal the host stream's.
    decode="gpu" with a stream: tests/python/test_stream_device.py."""
    kw = dict(batch_size=4, output="numpy", stream=True, samples_per_epoch=TOTAL, seed=3)
    with closing(stoker.Loader(urls(data), fields(), **kw)) as ld:
        want = [{k: np.array(v) for k, v in b.items()} for b in ld]
    with closing(stoker.Loader(urls(data), fields(), device="cpu-late", _late_copy_ms=5,
                               **{**kw, "output": "torch"})) as ld:
        got = [{k: v.clone().numpy() if hasattr(v, "clone") else np.array(v) for k, v in b.items()} for b in ld]
        copies = ld.report()["h2d"]
    assert len(got) == len(want) == TOTAL // 4
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        for k in w:
            np.testing.assert_array_equal(g[k], w[k], err_msg=k)
    assert copies["copies"] == len(want) and copies["overwrites"] == 0, copies
    # Issued early, by the decoder that completed the batch, never at delivery (no slot was refilled).
    assert copies["early"] >= len(want) and copies["at_delivery"] == 0, copies


def with_refills(order, bad, batch_size=4):
    """The keys a skipping stream delivers: `order` cut into batches, each bad slot taking the
    batch's next good slot after it, wrapping round."""
    out = []
    for b in range(0, len(order), batch_size):
        keys = order[b:b + batch_size]
        for slot in range(len(keys)):
            good = slot
            while keys[good] in bad:
                good = (good + 1) % len(keys)
            out.append(keys[good])
    return out


def resumed(make_loader, after: int):
    """A loader's state after `after` batches, restored in a fresh one: (its skips as restored,
    the keys it delivers, its skips at the end)."""
    with closing(make_loader()) as ld:
        it = iter(ld)
        [next(it) for _ in range(after)]
        state = ld.state_dict()
    with closing(make_loader()) as fresh:
        fresh.load_state_dict(state)
        restored = fresh.skips
        keys = [r[0] for r in rows(fresh)]
        return restored, keys, fresh.skips


@pytest.fixture(scope="module")
def bad_data(tmp_path_factory):
    """Two shards of 10 by webdataset's TarWriter, four samples bad in three ways: a truncated
    JPEG, an NPY with a wrong header, no "cls" member. Returns (root, rows written, bad keys)."""
    import webdataset as wds

    root = tmp_path_factory.mktemp("stream-bad")
    rng = np.random.default_rng(9)
    written, bad = {}, set()
    for s in range(2):
        with wds.TarWriter(str(root / f"shard-{s:06d}.tar")) as sink:
            for i in range(10):
                n = s * 10 + i
                key = f"s{n:04d}"
                vec = rng.standard_normal(5).astype(np.float32)
                sample = {"__key__": key, "jpg": jpeg_bytes(natural_image(rng, 40, 32)), "vec.npy": npy_bytes(vec),
                          "cls": str(n).encode(), "txt": f"sample {n}".encode()}
                if n in (2, 13):
                    sample["jpg"] = sample["jpg"][:60]
                elif n == 3:
                    sample["vec.npy"] = npy_bytes(np.zeros(7, np.float32))
                elif n == 17:
                    del sample["cls"]
                if n in (2, 3, 13, 17):
                    bad.add(key)
                sink.write(sample)
                written[key] = (vec.tobytes(), n, f"sample {n}")
    return root, written, bad


def test_skip_repeats_a_good_sample_of_the_batch_in_a_bad_ones_slot(bad_data, caplog):
    import webdataset as wds

    root, written, bad = bad_data
    shards = [str(root / f"shard-{s:06d}.tar") for s in range(2)]
    # The stream's order, from webdataset's reader; each batch of 4 with its bad slots taking the
    # next good slot of the batch, wrapping round.
    want = with_refills([s["__key__"] for s in wds.WebDataset(shards, shardshuffle=False)], bad)

    def run(**kw):
        return stoker.Loader(shards, fields(), batch_size=4, output="numpy", stream=True, samples_per_epoch=20,
                             shuffle=False, on_error="skip", **kw)

    with caplog.at_level("WARNING", logger="stoker"), closing(run()) as ld:
        got = rows(ld)
        assert ld.skips == {"skipped": 4, "refilled": 4, "seen": 20}
    assert [r[0] for r in got] == want
    for key, url, vec, cls, txt, _ in got:  # each slot holds what was written under its key
        assert (vec, cls, txt) == written[key] and url.endswith(f"shard-{written[key][1] // 10:06d}.tar")
    logged = "\n".join(r.getMessage() for r in caplog.records)
    # The offsets are the shard's, as tarfile gives them: a member's data, a sample's first header.
    at = {}
    for u in shards:
        with tarfile.open(u) as t:
            at.update({m.name: (m.offset_data, m.offset) for m in t.getmembers()})
    for key, cause in (("s0002", rf"shard-000000\.tar: member 's0002\.jpg' at offset {at['s0002.jpg'][0]}: JPEG"),
                       ("s0003", rf"shard-000000\.tar: member 's0003\.vec\.npy' at offset {at['s0003.vec.npy'][0]}: "
                                 r"array is float32\(7,\), expected float32\(5,\)"),
                       ("s0013", rf"shard-000001\.tar: member 's0013\.jpg' at offset {at['s0013.jpg'][0]}: JPEG"),
                       ("s0017", rf"shard-000001\.tar: sample 's0017' at offset {at['s0017.jpg'][1]} has no member "
                                 "for field 'cls'")):
        assert re.search(rf"skipped sample \S*shard-00000\d\.tar:{key} .*{cause}", logged), (key, logged)

    # Resumed after two batches (past the first bad samples): the rest of the uninterrupted run, the counts going on.
    assert resumed(run, 2) == ({"skipped": 2, "refilled": 2, "seen": 8}, want[8:],
                               {"skipped": 4, "refilled": 4, "seen": 20})

    # A budget turns the skips into an error naming it; a batch with no good sample cannot be filled.
    with closing(run(max_skips=1)) as ld, pytest.raises(RuntimeError, match=r"budget exceeded: 2 samples skipped, "
                                                                            r"more than max_skips=1; the last: .*s0003"):
        rows(ld)
    with closing(stoker.Loader(shards, fields(), batch_size=1, output="numpy", stream=True, samples_per_epoch=20,
                               shuffle=False, on_error="skip")) as ld:
        with pytest.raises(RuntimeError, match=r"every sample of batch 2 failed.*s0002\.jpg"):
            rows(ld)
    # Without skip, the batch raises its lowest bad slot's error (slot 2 of 2 and 3).
    with closing(stoker.Loader(shards, fields(), batch_size=4, output="numpy", stream=True, samples_per_epoch=20,
                               shuffle=False)) as ld:
        with pytest.raises(RuntimeError, match=r"member 's0002\.jpg' at offset"):
            rows(ld)


def test_skip_leaves_a_broken_shard_where_it_breaks_and_goes_on(bad_data, tmp_path, caplog):
    import webdataset as wds

    root, _, bad = bad_data
    for s in range(2):
        shutil.copy(root / f"shard-{s:06d}.tar", tmp_path)
    # Shard 2: ten good samples, cut inside the data of s0025's image (its first member);
    # shard 3: no tar at all.
    with wds.TarWriter(str(tmp_path / "shard-000002.tar")) as sink:
        for n in range(20, 30):
            sink.write({"__key__": f"s{n:04d}", "jpg": jpeg_bytes(natural_image(np.random.default_rng(n), 40, 32)),
                        "vec.npy": npy_bytes(np.zeros(5, np.float32)), "cls": str(n).encode(),
                        "txt": f"sample {n}".encode()})
    with tarfile.open(tmp_path / "shard-000002.tar") as t:
        cut = t.getmember("s0025.jpg")
    with open(tmp_path / "shard-000002.tar", "r+b") as f:
        f.truncate(cut.offset_data + 100)
    (tmp_path / "shard-000003.tar").write_bytes(b"not a tar " * 200)
    shards = [str(tmp_path / f"shard-{s:06d}.tar") for s in range(4)]

    # Pass 0 is shards 0 and 1, then s0020..s0024 (s0025 is where shard 2 breaks), then nothing of
    # shard 3; pass 1 starts again at shard 0. 28 samples: 7 batches of 4, the last one in pass 1.
    order = [s["__key__"] for s in wds.WebDataset(shards[:2], shardshuffle=False)]
    order += [f"s{n:04d}" for n in range(20, 25)] + order[:3]
    want = with_refills(order, bad)

    def run():
        return stoker.Loader(shards, fields(), batch_size=4, output="numpy", stream=True, samples_per_epoch=28,
                             shuffle=False, on_error="skip")

    with caplog.at_level("WARNING", logger="stoker"), closing(run()) as ld:
        assert [r[0] for r in rows(ld)] == want
        # 4 bad samples in pass 0, s0002 again in pass 1, and the two shards left early.
        assert ld.skips == {"skipped": 7, "refilled": 5, "seen": 28}
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert re.search(rf"skipped the rest of shard \S*shard-000002\.tar \(epoch 0, batch 6\): DataLoss: "
                     rf"\S*shard-000002\.tar: member 's0025\.jpg' at offset {cut.offset}: archive truncated.*"
                     r"\(the rest of the shard is skipped\)", logged), logged
    assert re.search(r"skipped the rest of shard \S*shard-000003\.tar \(epoch 0, batch 6\): .*shard-000003\.tar",
                     logged), logged

    # Resumed in the middle: the same stream on, shards left again where they broke.
    assert resumed(run, 3) == ({"skipped": 2, "refilled": 2, "seen": 12}, want[12:],
                               {"skipped": 7, "refilled": 5, "seen": 28})

    # Without skip the stream ends at the break, as before. A rank's first shard teaches the layout, so
    # when it is broken the loader is not made, skip or not.
    with closing(stoker.Loader([shards[2]], fields(), batch_size=4, output="numpy", stream=True,
                               samples_per_epoch=8, shuffle=False)) as ld:
        it = iter(ld)
        assert list(next(it)["__key__"]) == ["s0020", "s0021", "s0022", "s0023"]
        with pytest.raises(RuntimeError, match="s0025.jpg.*archive truncated"):
            next(it)
    with pytest.raises(RuntimeError, match=r"shard-000003\.tar: header at offset 0: bad header checksum"):
        stoker.Loader([shards[0], shards[3]], fields(), batch_size=4, output="numpy", stream=True,
                      samples_per_epoch=40, shuffle=False, on_error="skip", rank=1, world_size=2)


def test_skip_ends_the_stream_at_a_pass_whose_shards_all_broke(data, tmp_path):
    """Skipping leaves broken shards, but a pass in which none of a rank's shards gives a sample
    ends the stream with an error naming the last one left, rather than reading on forever."""
    good = tmp_path / "good"
    good.mkdir()
    for u in urls(data)[:4]:
        shutil.copy(u, good)
    shards = [str(good / f"shard-{s:06d}.tar") for s in range(4)]

    def run(paths, seed, **kw):  # rank 1 of 2: 2 shards (20 samples) a pass, an epoch a pass
        return stoker.Loader(paths, fields(), batch_size=4, output="numpy", stream=True, samples_per_epoch=40,
                             shuffle=True, seed=seed, rank=1, world_size=2, **kw)

    # A seed whose pass 1 gives rank 1 the two shards its pass 0 did not (seen from __url__).
    for seed in range(50):
        with closing(run(shards, seed)) as ld:
            got = rows(ld, epochs=(0, 1))
        first, second = {r[1] for r in got[:20]}, {r[1] for r in got[20:]}
        if not first & second:
            break
    else:
        pytest.fail("no seed in 50 gives rank 1 disjoint shards in passes 0 and 1")
    broken = tmp_path / "broken"
    broken.mkdir()
    for u in shards:
        (broken / os.path.basename(u)).write_bytes(b"not a tar " * 200 if u in second else open(u, "rb").read())
    with closing(run([str(broken / os.path.basename(u)) for u in shards], seed, on_error="skip")) as ld:
        assert [r[0] for r in rows(ld)] == [r[0] for r in got[:20]]  # pass 0 as before
        ld.set_epoch(1)
        with pytest.raises(RuntimeError, match=r"rank 1's shards of pass 1 hold no samples; the last shard left: "
                                               r".*shard-00000\d\.tar: header at offset 0: bad header checksum") as e:
            next(iter(ld))
    assert any(os.path.basename(u) in str(e.value) for u in second), e.value


def test_a_truncated_shard_names_shard_member_and_offset(data, tmp_path):
    bad = tmp_path / "bad"
    bad.mkdir()
    for u in urls(data):
        shutil.copy(u, bad)
    victim = bad / "shard-000001.tar"
    with tarfile.open(victim) as t:  # cut inside the data of the shard's 6th sample's image
        cut = next(m for m in t.getmembers() if m.name.endswith(".jpg") and "s0015" in m.name)
    with open(victim, "r+b") as f:
        f.truncate(cut.offset_data + 100)
    with closing(stoker.Loader(str(bad / "shard-{000000..000005}.tar"), fields(), batch_size=4, output="numpy",
                               stream=True, samples_per_epoch=TOTAL)) as ld:
        it = iter(ld)
        for _ in range(PER_SHARD // 4):  # shard 0's whole batches come first
            next(it)
        where = rf"shard-000001\.tar: member 'd0/s0015.jpg' at offset {cut.offset}: archive truncated"
        with pytest.raises(RuntimeError, match=where):
            for _ in it:
                pass


@pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed (scripts/setup.sh)")
def test_over_http_the_first_batch_reads_only_the_first_shards(tmp_path):
    import webdataset as wds

    rng = np.random.default_rng(1)
    shards = 12
    for s in range(shards):
        with wds.TarWriter(str(tmp_path / f"shard-{s:06d}.tar")) as sink:
            for i in range(16):
                sink.write({"__key__": f"s{s:02d}{i:02d}", "jpg": jpeg_bytes(natural_image(rng, 40, 32)),
                            "vec.npy": npy_bytes(np.zeros(5, np.float32)), "cls": b"1", "txt": b"t"})
    server = NginxServer(tmp_path)
    proxy = FaultProxy(server.port)
    _stoker.set_io_options(attempts=5, timeout_ms=5000, backoff_ms=5, backoff_max_ms=50, s3_endpoint="",
                           cache_dir="", cache_bytes=0)
    try:
        source = f"{proxy.url}/shard-{{000000..{shards - 1:06d}}}.tar"
        with closing(stoker.Loader(source, fields(), batch_size=4, output="numpy", stream=True,
                                   samples_per_epoch=16 * shards, prefetch=1)) as ld:
            first = next(iter(ld))
            with proxy.lock:
                tars = {p for p in proxy.gets if p.endswith(".tar")}
                requests = proxy.requests
        assert list(first["__key__"]) == ["s0000", "s0001", "s0002", "s0003"]
        # The stream runs at most the pool's batches ahead (8 samples of 16):
        # the first shard, and at most the next one opened ahead once the
        # first batch was filled, of 12; no index was looked for.
        assert "/shard-000000.tar" in tars and tars <= {"/shard-000000.tar", "/shard-000001.tar"}, proxy.gets
        # One GET: the shard's first 1 MiB holds it all, and the loader's
        # probe of the first sample is where the stream goes on from.
        assert proxy.gets["/shard-000000.tar"] == 1, proxy.gets
        assert requests <= 4, proxy.gets  # with each shard's HEAD (size and ETag pinned at open)
        assert not any(p.endswith(".idx") or p.endswith(".json") for p in proxy.gets), proxy.gets
    finally:
        proxy.close()
        server.close()


@pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed (scripts/setup.sh)")
def test_over_http_shards_of_several_windows_stream_as_local_ones(tmp_path):
    """Shards of ~4 MB with members of 300 KB (through the 1 MiB read window)
    and 700 KB (read straight into the sample): over HTTP the stream equals
    the local one, two passes."""
    import webdataset as wds

    rng = np.random.default_rng(2)
    pads = {}
    for s in range(4):
        with wds.TarWriter(str(tmp_path / f"big-{s:06d}.tar")) as sink:
            for i in range(8):
                pad = rng.integers(0, 256, 300_000 if i % 2 else 700_000, dtype=np.uint8).tobytes()
                pads[f"b{s}{i}"] = pad
                sink.write({"__key__": f"b{s}{i}", "pad": pad, "vec.npy": npy_bytes(rng.standard_normal(5)),
                            "cls": str(s * 8 + i).encode()})
    big = {"vec.npy": stoker.npy(), "cls": stoker.scalar("int64"), "pad": stoker.raw(700_000)}
    server = NginxServer(tmp_path)
    proxy = FaultProxy(server.port)
    _stoker.set_io_options(attempts=5, timeout_ms=5000, backoff_ms=5, backoff_max_ms=50, s3_endpoint="",
                           cache_dir="", cache_bytes=0)

    def stream(prefix):
        kw = dict(batch_size=4, output="numpy", stream=True, samples_per_epoch=32, shuffle=True, seed=4,
                  shuffle_buffer=6)
        with closing(stoker.Loader(f"{prefix}/big-{{000000..000003}}.tar", big, **kw)) as ld:
            out = []
            for e in range(2):
                ld.set_epoch(e)
                for b in ld:
                    out += [(k, np.asarray(b["vec.npy"][i]).tobytes(), int(b["cls"][i]),
                             np.asarray(b["pad"][i][:int(b["pad.len"][i])]).tobytes())
                            for i, k in enumerate(b["__key__"])]
            return out

    try:
        local = stream(str(tmp_path))
        assert stream(proxy.url) == local
        assert sorted(r[2] for r in local[:32]) == list(range(32))
        assert all(r[3] == pads[r[0]] for r in local)  # the members' bytes, whole
        assert sum(proxy.gets.values()) >= 8  # several ranged GETs per shard
    finally:
        proxy.close()
        server.close()


@pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed (scripts/setup.sh)")
def test_over_http_skip_leaves_a_missing_and_a_truncated_shard_and_goes_on(tmp_path, caplog):
    """on_error="skip" over HTTP: a shard the server does not have (404) and one cut inside a
    member are left where they break, as local ones are; the stream delivers the rest."""
    import webdataset as wds

    rng = np.random.default_rng(3)
    for s in (0, 2, 3):
        with wds.TarWriter(str(tmp_path / f"shard-{s:06d}.tar")) as sink:
            for i in range(8):
                sink.write({"__key__": f"s{s}{i}", "jpg": jpeg_bytes(natural_image(rng, 40, 32)),
                            "vec.npy": npy_bytes(np.zeros(5, np.float32)), "cls": str(i).encode(), "txt": b"t"})
    with tarfile.open(tmp_path / "shard-000002.tar") as t:
        cut = t.getmember("s24.jpg")
    with open(tmp_path / "shard-000002.tar", "r+b") as f:
        f.truncate(cut.offset_data + 100)  # shard 2 holds s20..s23, then breaks in s24's image
    server = NginxServer(tmp_path)  # shard-000001.tar is not there: 404
    _stoker.set_io_options(attempts=2, timeout_ms=5000, backoff_ms=5, backoff_max_ms=50, s3_endpoint="",
                           cache_dir="", cache_bytes=0)
    want = [f"s0{i}" for i in range(8)] + [f"s2{i}" for i in range(4)] + [f"s3{i}" for i in range(8)]
    try:
        with caplog.at_level("WARNING", logger="stoker"), \
                closing(stoker.Loader(f"http://127.0.0.1:{server.port}/shard-{{000000..000003}}.tar", fields(),
                                      batch_size=4, output="numpy", stream=True, samples_per_epoch=20,
                                      shuffle=False, on_error="skip")) as ld:
            assert [r[0] for r in rows(ld)] == want
            assert ld.skips == {"skipped": 2, "refilled": 0, "seen": 20}
    finally:
        server.close()
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert re.search(r"skipped the rest of shard http://\S*/shard-000001\.tar .*404", logged), logged
    assert re.search(rf"skipped the rest of shard http://\S*/shard-000002\.tar .*member 's24\.jpg' at offset "
                     rf"{cut.offset}: archive truncated", logged), logged


CLOSE_IN_BACKOFF = """
import json, os, sys, time
import stoker
from stoker import _stoker
url, local = sys.argv[1], sys.argv[2]
threads = lambda: len(os.listdir("/proc/self/task"))
# Every retry waits 10-20 s: only a cancelled back-off lets the stream stop soon.
_stoker.set_io_options(attempts=50, timeout_ms=5000, backoff_ms=20000, backoff_max_ms=20000, s3_endpoint="",
                       cache_dir="", cache_bytes=0)
kw = dict(output="numpy", batch_size=4, decode_threads=2, observe=False, rank=0, world_size=1, stream=True,
          samples_per_epoch=60)
# A first iteration leaves a thread of the package's (as an indexed loader's does): counted before.
warm = stoker.Loader(local, {"cls": stoker.scalar("int64")}, **kw)
next(iter(warm))
warm.close()
before = threads()
loader = stoker.Loader(url, {"cls": stoker.scalar("int64")}, **kw)
it = iter(loader)  # kept: a dropped iterator stops the run
next(it)  # the first shard passed; the next one's open meets the 503s
deadline = time.monotonic() + 30
while _stoker.io_counters()["throttled"] < 1 and time.monotonic() < deadline:
    time.sleep(0.01)
throttled = _stoker.io_counters()["throttled"]
t0 = time.monotonic()
loader.close()
took = time.monotonic() - t0
sent = _stoker.io_counters()["requests"]
time.sleep(1.0)
print(json.dumps({"took": took, "throttled": throttled, "threads_before": before, "threads": threads(),
                  "sent": sent, "sent_later": _stoker.io_counters()["requests"]}))
"""


@pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed (scripts/setup.sh)")
def test_over_http_close_during_retry_backoff_returns_promptly(data, tmp_path):
    """A stream closed while its next shard's open waits in a long retry
    back-off returns at once (io/cancel.h), leaves no thread and sends no
    request afterwards. In a child process: its threads are all ours."""
    server = NginxServer(data)
    # The first shard's HEAD and GET pass; every request after is a 503.
    proxy = FaultProxy(server.port, script=["pass"] * 2 + ["status:503"] * 100000, methods=("GET", "HEAD"))
    script = tmp_path / "close_in_backoff.py"
    script.write_text(CLOSE_IN_BACKOFF)
    try:
        r = subprocess.run([sys.executable, str(script), f"{proxy.url}/shard-{{000000..000005}}.tar",
                            str(data / "shard-{000000..000005}.tar")],
                           capture_output=True, text=True, timeout=120, env=stoker_env())
    finally:
        proxy.close()
        server.close()
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["throttled"] >= 1, out
    assert out["took"] < 5.0, out  # a retry's back-off alone is >= 10 s
    assert out["threads"] == out["threads_before"], out
    assert out["sent_later"] == out["sent"], out
