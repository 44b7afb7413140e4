"""Remote sources against real servers on loopback, started and stopped here:
nginx (HTTP with ranges) and moto's S3 server (SigV4 requests, data uploaded
with boto3), each behind tests/python/fault_proxy.py. In every fault scenario
that stays within the retry budget the delivered stream must equal the
local-file stream byte for byte; past the budget the error must name the URL,
the status, the attempts and the elapsed time; nothing may hang."""
from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import stoker
from stoker import _stoker

from conftest import stoker_bin, stoker_env, wait_ready, write_vision_shards
from fault_proxy import FaultProxy
from nginx_server import NGINX, NginxServer, free_port
pytestmark = pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed (scripts/setup.sh)")

SHARDS = "shard-{000000..000002}.tar"
FIELDS = lambda: {  # noqa: E731 - fresh specs per loader
    "jpg": stoker.image(48, resize="center_crop", layout="HWC"),
    "features.npz": stoker.npz(),
    "cls": stoker.scalar("int64"),
}


def io_options(attempts=12, timeout_ms=3000, backoff_ms=5, backoff_max_ms=50, s3_endpoint="", cache_dir="",
               cache_bytes=0):
    _stoker.set_io_options(attempts=attempts, timeout_ms=timeout_ms, backoff_ms=backoff_ms,
                           backoff_max_ms=backoff_max_ms, s3_endpoint=s3_endpoint, cache_dir=str(cache_dir),
                           cache_bytes=cache_bytes)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("remote")
    samples = write_vision_shards(root / "plain", shards=3, per_shard=20, seed=7)
    shutil.copytree(root / "plain", root / "indexed")
    subprocess.run([stoker_bin(), "index", "-q", *sorted(str(p) for p in (root / "indexed").glob("*.tar"))],
                   check=True, env=stoker_env())
    return root, samples


@pytest.fixture(scope="module")
def nginx(data):
    root, _ = data
    with NginxServer(root) as server:
        yield server.port


@pytest.fixture(scope="module")
def http_proxy(nginx):
    p = FaultProxy(nginx)
    yield p
    p.close()


@pytest.fixture(scope="module")
def s3(data):
    pytest.importorskip("boto3")
    moto_server = pytest.importorskip("moto.server")
    import boto3

    root, _ = data
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    creds = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}
    old = {k: os.environ.get(k) for k in creds}
    os.environ.update(creds)
    try:
        client = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                              aws_access_key_id="testing", aws_secret_access_key="testing")
        client.create_bucket(Bucket="data")
        for p in sorted((root / "plain").glob("*.tar")):
            client.upload_file(str(p), "data", f"train/{p.name}")
        proxy = FaultProxy(port)
        yield proxy
        proxy.close()
    finally:
        server.stop()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def stream(sources, **kw):
    kw.setdefault("batch_size", 8)
    kw.setdefault("drop_last", False)
    # One order over local files and URLs (auto picks blocks for remote
    # shards; test_block_shuffle.py covers those): single samples, the most reads.
    kw.setdefault("shuffle_block", 1)
    loader = stoker.Loader(sources, FIELDS(), output="numpy", io_depth=4, decode_threads=2, **kw)
    return batches_of(loader)


def batches_of(loader):
    """The loader's next epoch as (keys, {array name: copy}) per batch."""
    out = []
    for b in loader:
        keys = [k.split(":")[-1] for k in b["__key__"]]
        arrays = {}
        for name, v in b.items():
            if name in ("__key__", "__url__"):  # the url differs between local and remote by design
                continue
            if isinstance(v, dict):
                for sub, a in v.items():
                    arrays[f"{name}/{sub}"] = np.array(a)
            else:
                arrays[name] = np.array(v)
        out.append((keys, arrays))
    return out


def assert_same(a, b):
    assert len(a) == len(b)
    for (ka, xa), (kb, xb) in zip(a, b):
        assert ka == kb
        assert xa.keys() == xb.keys()
        for name in xa:
            assert xa[name].dtype == xb[name].dtype
            assert xa[name].tobytes() == xb[name].tobytes(), name


@pytest.fixture(scope="module")
def local(data):
    root, _ = data
    return stream(str(root / "plain" / SHARDS), shuffle=True, seed=3)


@pytest.mark.parametrize("layout", ["plain", "indexed"])
def test_http_stream_equals_local(layout, data, http_proxy, local):
    io_options()
    http_proxy.set(script=["pass"], latency=0)
    got = stream(f"{http_proxy.url}/{layout}/{SHARDS}", shuffle=True, seed=3)
    assert_same(got, local)


FAULTS = {
    "resets mid-body": ["reset:3000", "pass", "pass", "reset:100", "pass", "pass"],
    "503 bursts": ["status:503", "status:503", "status:503", "pass", "pass", "status:429", "pass"],
    "short bodies": ["short:5000", "pass", "short:1", "pass", "pass"],
    "latency": ["pass"],
}


@pytest.mark.parametrize("scenario", sorted(FAULTS))
def test_http_faults_within_budget_deliver_the_local_stream(scenario, data, http_proxy, local):
    io_options(attempts=20)
    http_proxy.set(script=FAULTS[scenario], latency=0.01 if scenario == "latency" else 0)
    before = _stoker.io_counters()
    faults_before = http_proxy.faults
    got = stream(f"{http_proxy.url}/plain/{SHARDS}", shuffle=True, seed=3)
    after = _stoker.io_counters()
    http_proxy.set(script=["pass"], latency=0)
    assert_same(got, local)
    if scenario != "latency":
        assert http_proxy.faults > faults_before
        assert after["retries"] > before["retries"]
    assert after["failures"] == before["failures"]


@pytest.fixture(scope="module")
def local_in_order(data):
    root, _ = data
    return stream(str(root / "plain" / SHARDS), shuffle=False)


def shard_gets(proxy, layout):
    return sum(n for path, n in proxy.gets.items() if path.startswith(f"/{layout}/") and path.endswith(".tar"))


def shard_ranges(proxy, layout) -> dict:
    """(path, Range) -> GETs so far, of the layout's shards."""
    return {k: n for k, n in proxy.ranges.items() if k[0].startswith(f"/{layout}/") and k[0].endswith(".tar")}


def new_ranges(proxy, layout, before: dict) -> set:
    """The distinct byte ranges of the layout's shards asked for since `before`.
    Unshuffled, every epoch reads the same runs: the next epoch's first batches,
    prepared while this one ends (epoch carry-over), ask for ranges already counted."""
    return {k for k, n in shard_ranges(proxy, layout).items() if n > before.get(k, 0)}


@pytest.mark.parametrize("scenario", ["pass", "resets mid-body", "short bodies"])
def test_coalesced_runs_deliver_the_local_stream(scenario, data, http_proxy, local_in_order):
    """In stream order a batch's samples are neighbours in one shard: one
    ranged GET fetches each run (pipeline/read_runs.h), split into samples
    without a byte moved, faults inside a run resumed."""
    io_options(attempts=20)
    http_proxy.set(script=FAULTS.get(scenario, ["pass"]), latency=0)
    # Counted from before the loader exists: its reads begin as it is built.
    before = shard_ranges(http_proxy, "indexed")
    got = stream(f"{http_proxy.url}/indexed/{SHARDS}", shuffle=False)
    runs = new_ranges(http_proxy, "indexed", before)
    http_proxy.set(script=["pass"])
    assert_same(got, local_in_order)
    # 60 samples in 8 batches of 8 (the last short) over 3 shards of 20: at
    # most 10 runs (a batch split at a shard boundary), plus the probe read of
    # the first sample (the batch layout); retries resume at other offsets.
    if scenario == "pass":
        assert len(runs) <= 10 + 1, sorted(runs)


def test_coalescing_off_reads_one_sample_per_get(data, http_proxy, local_in_order):
    io_options()
    http_proxy.set(script=["pass"], latency=0)
    before, gets = shard_ranges(http_proxy, "indexed"), shard_gets(http_proxy, "indexed")
    got = stream(f"{http_proxy.url}/indexed/{SHARDS}", shuffle=False, coalesce_bytes=0)
    # One range per sample (the probe reads the first sample's, see above),
    # each asked for at least once.
    assert len(new_ranges(http_proxy, "indexed", before)) == 60
    assert shard_gets(http_proxy, "indexed") - gets >= 60 + 1
    assert_same(got, local_in_order)


def test_coalesced_runs_hide_latency(data, http_proxy, local_in_order):
    """With 50 ms per request, one GET per sample costs the 60 samples at
    least 60 * 50 ms / io_depth 4 = 0.75 s; coalesced runs need about 10 round trips."""
    io_options()
    http_proxy.set(script=["pass"], latency=0.05)
    try:
        t0 = time.perf_counter()
        got = stream(f"{http_proxy.url}/indexed/{SHARDS}", shuffle=False)
        coalesced = time.perf_counter() - t0
        t0 = time.perf_counter()
        stream(f"{http_proxy.url}/indexed/{SHARDS}", shuffle=False, coalesce_bytes=0)
        per_sample = time.perf_counter() - t0
    finally:
        http_proxy.set(script=["pass"], latency=0)
    assert_same(got, local_in_order)
    assert per_sample >= 0.75
    assert coalesced < per_sample, (coalesced, per_sample)


@pytest.mark.parametrize("ahead", [0, 1, 8])
def test_read_ahead_of_buffers_keeps_order_and_never_hangs(ahead, data, http_proxy, local_in_order):
    """Reads of batches whose buffers are not free yet park their bytes on the
    batch; a consumer that keeps every batch (the pool lends past capacity)
    still gets the local stream, in order, and nothing waits forever."""
    io_options()
    http_proxy.set(script=["pass", "reset:2000", "pass"], latency=0.01)
    try:
        loader = stoker.Loader(f"{http_proxy.url}/indexed/{SHARDS}", FIELDS(), output="numpy", batch_size=4,
                               drop_last=False, io_depth=3, decode_threads=2, prefetch=1, timeout=30,
                               read_ahead_batches=ahead)
        kept = list(loader)  # every buffer held at once
    finally:
        http_proxy.set(script=["pass"], latency=0)
    got = [k for b in kept for k in b["__key__"]]
    want = [k for keys, _ in local_in_order for k in keys]
    assert [k.split(":")[-1] for k in got] == want
    cls = np.concatenate([np.array(b["cls"]) for b in kept])
    assert cls.tobytes() == np.concatenate([a["cls"] for _, a in local_in_order]).tobytes()


def slow_batches_over_http(http_proxy, script):
    """A loader over HTTP whose 9th data GET meets `script`'s faults; the slow
    batches its observer reported, and the loader's stream."""
    io_options(attempts=8, backoff_ms=150, backoff_max_ms=300)
    # 4 GETs while the loader starts (3 sidecars, the probe), then one per batch.
    http_proxy.set(script=["pass"] * 12 + script + ["pass"] * 200, latency=0)
    try:
        loader = stoker.Loader(f"{http_proxy.url}/indexed/{SHARDS}", FIELDS(), output="numpy", batch_size=4,
                               io_depth=1, read_ahead_batches=0, decode_threads=1, prefetch=1, timeout=30)
        n = sum(len(b["__key__"]) for b in loader)
    finally:
        http_proxy.set(script=["pass"])
    return loader.report()["slow_batches"], n


@pytest.mark.parametrize("script,cause", [(["status:503"] * 3, "remote throttling"),
                                          (["reset:100", "short:10", "reset:1"], "remote retries")])
def test_a_slow_batch_from_remote_faults_is_named_so(data, http_proxy, script, cause):
    slow, n = slow_batches_over_http(http_proxy, script)
    assert n == 60
    named = [s for s in slow if s["cause"] == cause]
    assert named, slow
    assert "remote requests retried" in named[0]["line"] and "429/503" in named[0]["line"]
    assert named[0]["wait_s"] >= 0.15  # at least a backoff


def test_without_remote_faults_no_slow_batch_blames_them(data, http_proxy):
    slow, n = slow_batches_over_http(http_proxy, [])
    assert n == 60
    assert not [s for s in slow if s["cause"].startswith("remote")], slow


def test_stats_count_remote_requests_and_latency(data, http_proxy):
    io_options()
    http_proxy.set(script=["pass"], latency=0.02)
    try:
        loader = stoker.Loader(f"{http_proxy.url}/indexed/{SHARDS}", FIELDS(), output="numpy", batch_size=8)
        before = loader._native.stats()["remote"]
        list(loader)
        after = loader._native.stats()["remote"]
    finally:
        http_proxy.set(script=["pass"], latency=0)
    assert after["requests"] > before["requests"]
    grew = [a - b for a, b in zip(after["latency_ms_log2"], before["latency_ms_log2"])]
    # 20 ms added per request: none of them in the buckets under 16 ms
    assert sum(grew) > 0 and sum(grew[:5]) == 0, grew


def test_stall_past_the_deadline_is_retried_and_bounded(data, http_proxy, local):
    io_options(attempts=6, timeout_ms=400)
    http_proxy.set(script=["stall:5"] + ["pass"] * 9)
    t0 = time.time()
    got = stream(f"{http_proxy.url}/indexed/{SHARDS}", shuffle=True, seed=3)
    elapsed = time.time() - t0
    http_proxy.set(script=["pass"])
    assert_same(got, local)
    assert elapsed < 30  # a stall costs one deadline (0.4 s), never the stall's 5 s per read


def test_spent_budget_names_url_status_attempts_and_elapsed(data, http_proxy):
    io_options(attempts=3, timeout_ms=2000)
    http_proxy.set(script=["pass"])
    loader = stoker.Loader(f"{http_proxy.url}/indexed/{SHARDS}", FIELDS(), output="numpy", batch_size=8)
    http_proxy.set(script=["status:503"])
    t0 = time.time()
    try:
        with pytest.raises(Exception) as e:
            for _ in loader:
                pass
    finally:
        # The iterator stays usable after an error, so its run goes on reading
        # ahead; the exception's traceback keeps the loader alive past this
        # test: stop it here, or its GETs take the next test's scripted faults.
        loader.close()
        http_proxy.set(script=["pass"])
    msg = str(e.value)
    assert time.time() - t0 < 30
    assert f"{http_proxy.url}/indexed/shard-" in msg
    assert "HTTP 503" in msg and "3 attempts" in msg and " s;" in msg, msg


def test_skip_policy_counts_the_samples_it_could_not_fetch(data, http_proxy):
    gc.collect()  # no loader of an earlier test may send GETs that take this test's scripted faults
    io_options(attempts=2, timeout_ms=2000)
    http_proxy.set(script=["pass"])
    loader = stoker.Loader(f"{http_proxy.url}/indexed/{SHARDS}", FIELDS(), output="numpy", batch_size=8,
                           on_error="skip", io_depth=1, decode_threads=1)
    # Every 7th GET fails twice in a row (the whole budget of 2 attempts).
    http_proxy.set(script=["status:503", "status:503"] + ["pass"] * 12)
    try:
        n = sum(len(b["__key__"]) for b in loader)
    finally:
        http_proxy.set(script=["pass"])
    skips = loader.skips
    assert skips["skipped"] > 0
    assert n == 60  # refilled: every slot filled, the short last batch kept


def test_a_changed_object_is_never_mixed(data, http_proxy, tmp_path):
    io_options(attempts=3)
    root, _ = data
    (root / "mutable").mkdir(exist_ok=True)
    victim = root / "mutable" / "shard-000002.tar"
    saved = (root / "plain" / "shard-000002.tar").read_bytes()
    victim.write_bytes(saved)
    # The loader reads as soon as it is built: one GET per sample at ~4 KB/s
    # (~8.7 KB each) reads the first sample now and the second after ~2 s,
    # once the object below has changed.
    loader = stoker.Loader(f"{http_proxy.url}/mutable/shard-000002.tar", FIELDS(), output="numpy", batch_size=8,
                           io_depth=1, coalesce_bytes=0, max_read_bytes_per_s=4000)
    time.sleep(1.1)  # nginx's ETag holds the mtime in seconds
    victim.write_bytes(saved[:-1024] + b"\0" * 1024)  # same size, new version
    try:
        with pytest.raises(Exception) as e:
            for _ in loader:
                pass
    finally:
        loader.close()  # its run would go on reading ahead (see the test above)
    assert "changed" in str(e.value) and "shard-000002.tar" in str(e.value)


def test_s3_stream_equals_local_with_faults(data, s3, local):
    io_options(attempts=20, s3_endpoint=s3.url)
    s3.set(script=["pass", "reset:2000", "pass", "status:503", "pass", "short:10"])
    before = _stoker.io_counters()
    got = stream(f"s3://data/train/{SHARDS}", shuffle=True, seed=3)
    s3.set(script=["pass"])
    assert_same(got, local)
    assert _stoker.io_counters()["retries"] > before["retries"]


def test_s3_glob_lists_the_bucket(data, s3, local):
    io_options(s3_endpoint=s3.url)
    s3.set(script=["pass"])
    got = stream("s3://data/train/shard-*.tar", shuffle=True, seed=3)
    assert_same(got, local)
    with pytest.raises(Exception, match="matches no object"):
        stoker.Loader("s3://data/train/nothing-*.tar", FIELDS(), output="numpy", batch_size=8)


def test_s3_missing_object_is_not_found(data, s3):
    io_options(attempts=2, s3_endpoint=s3.url)
    with pytest.raises(Exception, match="s3://data/train/absent.tar"):
        stoker.Loader("s3://data/train/absent.tar", FIELDS(), output="numpy", batch_size=8)


def test_cli_inspect_reads_a_url(data, http_proxy):
    http_proxy.set(script=["pass"])
    out = subprocess.run([stoker_bin(), "inspect", "--json", f"{http_proxy.url}/plain/shard-000001.tar"],
                         check=True, capture_output=True, text=True, env=stoker_env(), timeout=60)
    info = json.loads(out.stdout)
    assert info["num_samples"] == 20


def test_cli_doctor_measures_a_remote_source(data, http_proxy):
    """doctor on URLs: latency with the proxy's 40 ms per request in it,
    bandwidth per reads in flight, and an io_depth above 1 (one request at a
    time leaves the link idle for the round trip)."""
    http_proxy.set(script=["pass"], latency=0.04)
    try:
        out = subprocess.run([stoker_bin(), "doctor", "--json", "--run-seconds", "1.2",
                              f"{http_proxy.url}/indexed/{SHARDS}"],
                             check=True, capture_output=True, text=True, env=stoker_env(), timeout=120)
    finally:
        http_proxy.set(script=["pass"], latency=0)
    rep = json.loads(out.stdout)
    assert rep["source"] == "remote" and rep["shards"] == 3
    assert 0.04 <= rep["latency_s"]["p50"] < 2.0
    depths = {b["io_depth"]: b["mb_per_s"] for b in rep["bandwidth"]}
    assert sorted(depths) == [1, 2, 4, 8, 16, 32] and all(v > 0 for v in depths.values())
    assert depths[8] > 2 * depths[1]  # latency-bound: concurrency pays
    assert rep["recommended"]["io_depth"] > 1
    assert rep["recommended"]["bdp_io_depth"] >= 1


def test_cli_storage_flags_before_or_after_the_subcommand(data, s3, tmp_path):
    """--s3-endpoint after the subcommand, --cache-dir before it: inspect and
    bench read s3:// URLs, and the cache fills."""
    s3.set(script=["pass"])
    env = {k: v for k, v in stoker_env().items() if k not in ("STOKER_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3",
                                                                "AWS_ENDPOINT_URL", "STOKER_CACHE_DIR")}
    out = subprocess.run([stoker_bin(), "inspect", "--json", "s3://data/train/shard-000001.tar",
                          "--s3-endpoint", s3.url], check=True, capture_output=True, text=True, env=env, timeout=60)
    assert json.loads(out.stdout)["num_samples"] == 20
    cache = tmp_path / "cache"
    out = subprocess.run([stoker_bin(), "--cache-dir", str(cache), "--s3-endpoint", s3.url, "bench", "--json",
                          "-f", "cls:scalar:int64", "-b", "4", f"s3://data/train/{SHARDS}"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert any(cache.rglob("*")), "nothing cached"


def test_loader_storage_keywords(data, s3, local, tmp_path):
    """s3_endpoint and cache_dir as Loader keywords: the s3:// stream equals
    the local one; they are that loader's own (the process defaults are
    untouched), and a second loader given the same cache is served from it."""
    io_options()  # no endpoint, no cache: the keywords alone must supply them
    storage = dict(s3_endpoint=s3.url, cache_dir=tmp_path / "c", cache_bytes=64 << 20)
    got = stream(f"s3://data/train/{SHARDS}", shuffle=True, seed=3, **storage)
    assert_same(got, local)
    assert _stoker.io_options()["cache_dir"] == "" and _stoker.io_options()["s3_endpoint"] == ""
    before = _stoker.io_counters()
    assert_same(stream(f"s3://data/train/{SHARDS}", shuffle=True, seed=3, **storage), local)
    after = _stoker.io_counters()
    assert after["cache_hits"] > before["cache_hits"] and after["bytes"] == before["bytes"]


def test_token_loader_reads_a_url(data, http_proxy):
    """A Megatron .bin/.idx pair over HTTP: the .idx fetched whole, token
    windows by ranged reads (resets retried); the stream equals the local one."""
    root, _ = data
    rng = np.random.default_rng(5)
    w = _stoker.MegatronWriter.create(str(root / "tok"), "uint16")
    for _ in range(40):
        w.add(rng.integers(0, 60000, size=int(rng.integers(5, 300))).astype(np.int64))
    w.finish()

    def tokens(prefix):
        loader = stoker.TokenLoader(prefix, seq_len=32, batch_size=8, seed=2, output="numpy", observe=False)
        return [(np.array(b["tokens"]), np.array(b["__index__"])) for b in loader]

    io_options(attempts=20)
    http_proxy.set(script=["pass", "pass", "reset:20", "pass", "short:7"])
    try:
        got = tokens(f"{http_proxy.url}/tok")
    finally:
        http_proxy.set(script=["pass"])
    want = tokens(str(root / "tok"))
    assert len(got) == len(want) > 0
    for (ta, ia), (tb, ib) in zip(got, want):
        assert ta.tobytes() == tb.tobytes() and ia.tobytes() == ib.tobytes()
    assert http_proxy.gets["/tok.idx"] >= 1 and http_proxy.gets["/tok.bin"] > len(want)
    assert not os.path.exists("http:"), "a local path made from the URL (the index cache)"


def test_cli_index_a_url_writes_the_sidecar_locally(data, http_proxy, tmp_path):
    root, _ = data
    http_proxy.set(script=["pass"])
    url = f"{http_proxy.url}/plain/shard-000001.tar"
    bad = subprocess.run([stoker_bin(), "index", url], capture_output=True, text=True, env=stoker_env(), timeout=60)
    assert bad.returncode != 0 and "--out-dir" in bad.stderr
    subprocess.run([stoker_bin(), "index", "-q", "-o", str(tmp_path), url], check=True, env=stoker_env(), timeout=60)
    # The same bytes as the sidecar `stoker index` writes beside the local shard.
    local = tmp_path / "local"
    local.mkdir()
    shutil.copy(root / "plain" / "shard-000001.tar", local)
    subprocess.run([stoker_bin(), "index", "-q", str(local / "shard-000001.tar")], check=True, env=stoker_env(),
                   timeout=60)
    assert (tmp_path / "shard-000001.tar.idx").read_bytes() == (local / "shard-000001.tar.idx").read_bytes()


# --- the local cache ---------------------------------------------------------

def test_cache_epoch_two_reads_no_remote_byte(data, http_proxy, local, tmp_path):
    io_options(cache_dir=tmp_path / "cache")
    http_proxy.set(script=["pass"])
    try:
        url = f"{http_proxy.url}/indexed/{SHARDS}"
        assert_same(stream(url, shuffle=True, seed=3), local)
        before = _stoker.io_counters()
        requests = http_proxy.requests
        assert_same(stream(url, shuffle=True, seed=3), local)  # a new loader: index and shards from the cache
        after = _stoker.io_counters()
        assert http_proxy.requests == requests
        assert after["requests"] == before["requests"] and after["bytes"] == before["bytes"]
        assert after["cache_hits"] >= before["cache_hits"] + 6  # 3 shards + 3 sidecars
    finally:
        io_options()


def test_cache_budget_and_lru_eviction_order(data, http_proxy, tmp_path):
    root, _ = data
    sizes = [p.stat().st_size for p in sorted((root / "plain").glob("*.tar"))]
    budget = sizes[0] + sizes[1] + sizes[2] // 2  # two shards fit, three do not
    cache = tmp_path / "cache"
    io_options(cache_dir=cache, cache_bytes=budget)
    http_proxy.set(script=["pass"])
    try:
        for i in (0, 1, 0, 2):  # 1 is now the least recently used
            time.sleep(0.02)
            stream(f"{http_proxy.url}/plain/shard-{i:06d}.tar")
        held = sum(p.stat().st_size for p in cache.glob("*.data"))
        assert held <= budget
        gets = dict(http_proxy.gets)
        stream(f"{http_proxy.url}/plain/shard-000000.tar")  # still cached
        stream(f"{http_proxy.url}/plain/shard-000002.tar")  # still cached
        assert {k: v for k, v in http_proxy.gets.items() if k.endswith(".tar")} == \
            {k: v for k, v in gets.items() if k.endswith(".tar")}
        stream(f"{http_proxy.url}/plain/shard-000001.tar")  # was evicted: fetched again
        assert http_proxy.gets["/plain/shard-000001.tar"] > gets.get("/plain/shard-000001.tar", 0)
    finally:
        io_options()


def test_corrupt_cache_entry_is_refetched(data, http_proxy, local, tmp_path):
    cache = tmp_path / "cache"
    io_options(cache_dir=cache)
    http_proxy.set(script=["pass"])
    try:
        url = f"{http_proxy.url}/indexed/{SHARDS}"
        stream(url, shuffle=True, seed=3)
        biggest = max(cache.glob("*.data"), key=lambda p: p.stat().st_size)
        raw = bytearray(biggest.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        biggest.write_bytes(bytes(raw))
        before = _stoker.io_counters()
        assert_same(stream(url, shuffle=True, seed=3), local)
        assert _stoker.io_counters()["cache_corrupt"] == before["cache_corrupt"] + 1
    finally:
        io_options()


CHILD = """
import sys, json, hashlib
from stoker import _stoker
import stoker
_stoker.set_io_options(attempts=12, timeout_ms=3000, backoff_ms=5, backoff_max_ms=50, s3_endpoint="",
                       cache_dir=sys.argv[2], cache_bytes=0)
fields = {"jpg": stoker.image(48, resize="center_crop", layout="HWC"), "cls": stoker.scalar("int64")}
h = hashlib.sha256()
for b in stoker.Loader(sys.argv[1], fields, output="numpy", batch_size=8, drop_last=False):
    h.update(b["jpg"].tobytes()); h.update(b["cls"].tobytes())
print(json.dumps({"digest": h.hexdigest(), "io": _stoker.io_counters()}))
"""


def test_two_processes_share_one_cache(data, http_proxy, tmp_path):
    cache = tmp_path / "cache"
    http_proxy.set(script=["pass"], latency=0.02)
    gets = dict(http_proxy.gets)
    url = f"{http_proxy.url}/plain/{SHARDS}"
    try:
        procs = [subprocess.Popen([os.sys.executable, "-c", CHILD, url, str(cache)], stdout=subprocess.PIPE,
                                  text=True, env=stoker_env()) for _ in range(2)]
        outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    finally:
        http_proxy.set(latency=0)
    assert all(p.returncode == 0 for p in procs)
    assert outs[0]["digest"] == outs[1]["digest"]
    assert sum(o["io"]["cache_misses"] for o in outs) == 3  # each shard fetched once, by one of them
    assert len(list(cache.glob("*.data"))) == 3
    assert not list(cache.glob("*.tmp.*"))


# -- early start and epoch carry-over over HTTP (src/pipeline/epoch_run.h) --------------------------------

def http_loader(http_proxy, **kw):
    kw.setdefault("batch_size", 8)
    kw.setdefault("shuffle_block", 1)  # as stream(): the local order
    kw.setdefault("drop_last", True)  # whole batches, as the comparisons below count them
    return stoker.Loader(f"{http_proxy.url}/indexed/{SHARDS}", FIELDS(), output="numpy", io_depth=4,
                         decode_threads=2, shuffle=True, seed=5, **kw)


def fresh_http_epoch(http_proxy, epoch):
    loader = http_loader(http_proxy)
    try:
        loader.set_epoch(epoch)
        return batches_of(loader)
    finally:
        loader.close()


def test_http_loader_starts_reading_as_it_is_built(data, http_proxy):
    io_options()
    http_proxy.set(script=["pass"], latency=0)
    loader = http_loader(http_proxy)
    try:
        assert wait_ready(loader)["batches_ready"] >= 1  # nobody asked yet
        loader.set_epoch(0)  # keeps the run
        got = batches_of(loader)
    finally:
        loader.close()
    assert_same(got, fresh_http_epoch(http_proxy, 0))
    root, _ = data
    assert_same(got, stream(str(root / "plain" / SHARDS), shuffle=True, seed=5, drop_last=True))


def test_http_carried_over_epoch_equals_a_fresh_loader(data, http_proxy):
    io_options()
    http_proxy.set(script=["pass", "reset:3000", "pass", "status:503"], latency=0.002)
    try:
        loader = http_loader(http_proxy)
        loader.set_epoch(0)
        batches_of(loader)
        assert wait_ready(loader)["batches_ready"] >= 1  # epoch 1 began while nobody asked
        loader.set_epoch(1)
        second = batches_of(loader)
        carried = loader._native.stats()["batches_carried"]
        loader.set_epoch(2)
        third = batches_of(loader)  # carried over again, from a carried-over epoch
        loader.close()
    finally:
        http_proxy.set(script=["pass"], latency=0)
    assert carried >= 1
    assert_same(second, fresh_http_epoch(http_proxy, 1))
    assert_same(third, fresh_http_epoch(http_proxy, 2))
    keys = sorted(k for ks, _ in second for k in ks)
    assert len(keys) == len(set(keys)) == 56  # exactly once (60 samples, batch 8, drop_last)


def test_http_another_epoch_drops_the_prepared_work(data, http_proxy):
    io_options()
    http_proxy.set(script=["pass"], latency=0)
    loader = http_loader(http_proxy)
    try:
        loader.set_epoch(0)
        batches_of(loader)
        wait_ready(loader)
        carried = loader._native.stats()["batches_carried"]
        loader.set_epoch(5)
        got5 = batches_of(loader)
        assert loader._native.stats()["batches_carried"] == carried  # epoch 1's batches were not used
        # And a restore drops it as well: the state of epoch 3's start.
        wait_ready(loader)  # epoch 6 is being prepared
        loader.set_epoch(3)
        state = loader.state_dict()
        loader.load_state_dict(state)
        got3 = batches_of(loader)
    finally:
        loader.close()
    assert_same(got5, fresh_http_epoch(http_proxy, 5))
    assert_same(got3, fresh_http_epoch(http_proxy, 3))


CLOSE_IN_BACKOFF = """
import json, os, sys, time
import stoker
from stoker import _stoker
url, scenario = sys.argv[1], sys.argv[2]
threads = lambda: len(os.listdir("/proc/self/task"))
# Every retry waits 10-20 s: only a cancelled back-off lets a run stop soon.
_stoker.set_io_options(attempts=50, timeout_ms=5000, backoff_ms=20000, backoff_max_ms=20000, s3_endpoint="",
                       cache_dir="", cache_bytes=0)
fields = {"jpg": stoker.image(48, resize="center_crop", layout="HWC"), "features.npz": stoker.npz(),
          "cls": stoker.scalar("int64")}
before = threads()
loader = stoker.Loader(url, fields, output="numpy", batch_size=8, io_depth=4, decode_threads=2, observe=False,
                       rank=0, world_size=1)  # no torch.distributed import (its threads are not ours)
deadline = time.monotonic() + 30
while _stoker.io_counters()["throttled"] < 2 and time.monotonic() < deadline:
    time.sleep(0.01)  # reads met the 503s: they wait in their back-off
throttled = _stoker.io_counters()["throttled"]
t0 = time.monotonic()
if scenario == "close":
    loader.close()
elif scenario == "set_epoch":  # another epoch: the run is replaced, its reads dropped
    loader.set_epoch(4)
    iter(loader)
    loader.close()
else:  # the loader dropped by the garbage collector
    del loader
took = time.monotonic() - t0
sent = _stoker.io_counters()["requests"]
time.sleep(1.0)
print(json.dumps({"took": took, "throttled": throttled, "threads_before": before, "threads": threads(),
                  "sent": sent, "sent_later": _stoker.io_counters()["requests"]}))
"""


@pytest.mark.parametrize("scenario", ["close", "set_epoch", "del"])
def test_http_close_during_retry_backoff_returns_promptly(scenario, data, http_proxy, tmp_path):
    """A loader dropped while its reads wait in a long retry back-off returns
    at once (the back-off is cut short, io/cancel.h), leaves no thread, and
    sends no request afterwards. In a child process: its threads are all ours."""
    # The loader's own start (3 sidecars, the probe) passes; every data GET after is a 503.
    http_proxy.set(script=["pass"] * 4 + ["status:503"] * 100000, latency=0)
    script = tmp_path / "close_in_backoff.py"
    script.write_text(CLOSE_IN_BACKOFF)
    try:
        r = subprocess.run([sys.executable, str(script), f"{http_proxy.url}/indexed/{SHARDS}", scenario],
                           capture_output=True, text=True, timeout=120, env=stoker_env())
    finally:
        http_proxy.set(script=["pass"], latency=0)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["throttled"] >= 2, out
    assert out["took"] < 5.0, out  # a retry's back-off alone is >= 10 s
    assert out["threads"] == out["threads_before"], out
    assert out["sent_later"] == out["sent"], out
