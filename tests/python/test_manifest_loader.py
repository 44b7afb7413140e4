"""A loader given a dataset manifest (issue 31): `stoker index` writes
stoker-manifest.json beside the shards; a loader given it plans from the
manifest's counts and opens a shard only when its reads reach it. Checked
against the same loader given the shards themselves (the stream must be the
same), over local files and over HTTP (nginx behind fault_proxy.py, which
counts the requests)."""
from __future__ import annotations

import collections
import json
import os
import shutil
import subprocess
import time

import numpy as np
import pytest

import stoker
from stoker import _stoker

from conftest import stoker_bin, stoker_env, write_vision_shards
from fault_proxy import FaultProxy
from nginx_server import NGINX, NginxServer

SHARDS, PER_SHARD = 24, 16
PATTERN = "shard-{000000..000023}.tar"
FIELDS = lambda: {"jpg": stoker.image(16, resize="center_crop", layout="HWC"), "cls": stoker.scalar("int64")}  # noqa: E731


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("manifest-loader")
    write_vision_shards(root, shards=SHARDS, per_shard=PER_SHARD, size=(40, 30), seed=6)
    subprocess.run([stoker_bin(), "index", "-q", str(root)], check=True, env=stoker_env())
    assert (root / "stoker-manifest.json").exists()
    return root


def stream(source, epochs=2, **kw):
    kw.setdefault("shuffle", True)
    ld = stoker.Loader(source, FIELDS(), batch_size=16, output="numpy", decode_threads=2, seed=3, **kw)
    out = []
    for e in range(epochs):
        ld.set_epoch(e)
        out += [([k for k in b["__key__"]], np.asarray(b["jpg"]).tobytes(), np.asarray(b["cls"]).tolist())
                for b in ld]
    settings = ld.settings
    ld.close()
    return out, settings


def test_a_manifest_gives_the_stream_of_its_shards(data):
    from_manifest, settings = stream(str(data / "stoker-manifest.json"))
    from_shards, shard_settings = stream(str(data / PATTERN))
    assert from_manifest == from_shards
    assert settings["index"]["from"] == f"the manifest {data / 'stoker-manifest.json'}"
    assert shard_settings["index"]["from"] == f"{SHARDS} index sidecars"
    # Ranks cut the manifest's order as they cut the shards'.
    for rank in range(3):
        assert (stream(str(data / "stoker-manifest.json"), epochs=1, rank=rank, world_size=3)[0] ==
                stream(str(data / PATTERN), epochs=1, rank=rank, world_size=3)[0])


def test_a_stale_manifest_is_named_when_its_shard_is_read(data, tmp_path):
    for name in os.listdir(data):
        shutil.copy(data / name, tmp_path / name)
    manifest = json.loads((tmp_path / "stoker-manifest.json").read_text())
    manifest["shards"][5]["samples"] += 1
    manifest["samples"] += 1
    (tmp_path / "stoker-manifest.json").write_text(json.dumps(manifest))
    ld = stoker.Loader(str(tmp_path / "stoker-manifest.json"), FIELDS(), batch_size=16, output="numpy")
    with pytest.raises(stoker.StokerError, match=r"shard-000005\.tar changed since the loader planned its samples: "
                                                 rf"{PER_SHARD + 1} samples"):
        for _ in ld:
            pass
    ld.close()


def test_a_manifest_is_the_only_source_and_keeps_its_key_rule(data):
    with pytest.raises(ValueError, match="is the loader.s only source"):
        stoker.Loader([str(data / "stoker-manifest.json"), str(data / "shard-000000.tar")], FIELDS(), batch_size=4)
    with pytest.raises(ValueError, match="another key rule"):
        stoker.Loader(str(data / "stoker-manifest.json"), FIELDS(), batch_size=4, key_rule="underscore")


@pytest.mark.skipif(not os.path.exists(NGINX), reason="nginx is not installed (scripts/setup.sh)")
def test_over_http_a_manifest_reads_only_the_shards_it_reaches(data):
    server = NginxServer(data)
    proxy = FaultProxy(server.port)
    _stoker.set_io_options(attempts=5, timeout_ms=5000, backoff_ms=5, backoff_max_ms=50, s3_endpoint="",
                           cache_dir="", cache_bytes=0)
    try:
        # Windows of 2 shards, one batch ahead: the first batch's reads are all that run.
        kw = dict(shuffle=True, shuffle_window=2, prefetch=1, read_ahead_batches=1, seed=3)
        ld = stoker.Loader(f"{proxy.url}/stoker-manifest.json", FIELDS(), batch_size=16, output="numpy", **kw)
        first = next(iter(ld))
        with proxy.lock:
            gets = dict(proxy.gets)
        ld.close()
        assert gets.get("/stoker-manifest.json") == 1
        sidecars = {p[:-len(".idx")] for p in gets if p.endswith(".idx")}
        shards = {p for p in gets if p.endswith(".tar")}
        # Only the shards being read had their index read: the first batch's,
        # and those of the batch read ahead, two windows of 2 at most, of 24.
        assert {"/" + u.rsplit("/", 1)[-1] for u in first["__url__"]} <= shards <= sidecars
        assert len(sidecars) <= 4, gets
        # The shards given directly: every shard's index is read before the first batch.
        proxy.gets.clear()
        ld = stoker.Loader(f"{proxy.url}/{PATTERN}", FIELDS(), batch_size=16, output="numpy", **kw)
        assert next(iter(ld))["__key__"] == first["__key__"]
        with proxy.lock:
            sidecars = {p for p in proxy.gets if p.endswith(".idx")}
        ld.close()
        assert len(sidecars) == SHARDS
    finally:
        proxy.close()
        server.close()


def test_over_http_the_first_batch_costs_only_its_own_requests_with_defaults(data):
    """Defaults, shuffled, over HTTP from the manifest (issue 31: the first
    batch after at most 3 shards' bytes plus the manifest, in at most 10
    requests): the run's first batch is begun alone, so by the time it
    arrives only the manifest, its shards' indexes and its own byte ranges
    were asked for; the reads ahead start once it is delivered. "By the time
    it arrives" is the engine's delivery (the end of its wait span, on the
    monotonic clock the proxy stamps requests with), not the moment Python
    looks: on one busy core the reads ahead may go out in between."""
    server = NginxServer(data)
    proxy = FaultProxy(server.port)
    _stoker.set_io_options(attempts=5, timeout_ms=5000, backoff_ms=5, backoff_max_ms=50, s3_endpoint="",
                           cache_dir="", cache_bytes=0)
    try:
        ld = stoker.Loader(f"{proxy.url}/stoker-manifest.json", FIELDS(), batch_size=16, output="numpy",
                           shuffle=True, seed=3, trace_spans=4096)
        # The engine's clock origin on the monotonic clock (its trace is in microseconds from it).
        before_ns = time.monotonic_ns()
        since_s = _stoker.stage_snapshot(ld._native).time_s
        origin_ns = (before_ns + time.monotonic_ns()) // 2 - round(since_s * 1e9)
        it = iter(ld)
        first = next(it)
        wait = next(e for e in json.loads(ld._native.trace_json())["traceEvents"]
                    if e.get("name") == "wait" and e["args"]["batch"] == 0)
        delivered_ns = origin_ns + round((wait["ts"] + wait["dur"]) * 1e3)
        with proxy.lock:
            log = [entry for entry in proxy.log if entry[0] < delivered_ns]
        requests = len(log)
        ranges = collections.Counter((p, r) for _, m, p, r in log if m == "GET")
        rest = [next(it) for _ in range(len(ld) - 1)]  # the rest of the epoch still comes
        ld.close()
        shards = {p for p, _ in ranges if p.endswith(".tar")}
        assert {"/" + u.rsplit("/", 1)[-1] for u in first["__url__"]} == shards
        assert len(shards) <= 3, ranges
        assert all(r for p, r in ranges if p.endswith(".tar")), ranges  # byte ranges, no whole shard
        assert requests <= 10, ranges
        assert len(rest) == len(ld) - 1 and len({k for b in [first, *rest] for k in b["__key__"]}) == 16 * len(ld)
    finally:
        proxy.close()
        server.close()
