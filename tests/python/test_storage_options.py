"""Storage options belong to each loader: read from the environment when the
loader is made, overridden by keyword. Two loaders of one process read two
stores (two moto S3 servers, each its own process, holding different data
under the same bucket and keys, each behind tests/python/s3_auth_proxy.py
accepting only its own profile's keys), and a third reads nginx over plain
HTTP, interleaved, each stream equal to the local files it was uploaded from."""
from __future__ import annotations

import subprocess
import sys

import pytest

import stoker
from stoker import _stoker

from conftest import write_vision_shards
from s3_auth_proxy import S3AuthProxy
from nginx_server import free_port, wait_port
from test_remote import FIELDS, SHARDS, assert_same, batches_of, nginx, stream  # noqa: F401 - fixtures

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two datasets with the same shard names and different samples."""
    root = tmp_path_factory.mktemp("stores")
    write_vision_shards(root / "plain", shards=3, per_shard=20, seed=7)  # what nginx serves (test_remote's layout)
    write_vision_shards(root / "b", shards=3, per_shard=20, seed=11)
    return root, None


@pytest.fixture(scope="module")
def two_s3(data):
    root, _ = data
    servers, proxies, urls = [], [], []
    try:
        for name in ("plain", "b"):
            # A process each: moto's backends are global to a process, so two
            # servers in one would be one store.
            port = free_port()
            servers.append(subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_port(port)
            url = f"http://127.0.0.1:{port}"
            client = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="k",
                                  aws_secret_access_key="s")
            client.create_bucket(Bucket="data")
            for p in sorted((root / name).glob("*.tar")):
                client.upload_file(str(p), "data", f"train/{p.name}")
            proxy = S3AuthProxy(port)  # signed requests only, with this store's own key
            proxy.register(f"key-{name}", f"secret-{name}")
            proxies.append(proxy)
            urls.append(proxy.url)
        yield urls, proxies
    finally:
        for p in proxies:
            p.close()
        for s in servers:
            s.terminate()
            s.wait(timeout=10)


@pytest.fixture()
def keys(monkeypatch):
    _stoker.reset_io_options()  # other modules set process defaults: start from the environment
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    for v in ("STOKER_S3_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(v, raising=False)


def loader(sources, **kw):
    # shuffle_block=1: the order of the local stream (the remote default is blocks of 16).
    return stoker.Loader(sources, FIELDS(), output="numpy", batch_size=8, drop_last=False, shuffle=True, seed=3,
                         shuffle_block=1, decode_threads=1, **kw)


def test_two_loaders_read_two_stores_at_once(data, two_s3, nginx, keys, tmp_path, monkeypatch):
    root, _ = data
    (a_url, b_url), (a_proxy, b_proxy) = two_s3
    creds = tmp_path / "credentials"
    creds.write_text("[store-a]\naws_access_key_id = key-plain\naws_secret_access_key = secret-plain\n"
                     "[store-b]\naws_access_key_id = key-b\naws_secret_access_key = secret-b\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    # Keys in the environment too, this test's own, which both stores accept: a
    # loader that signed with them instead of its profile's would show here.
    # (Not the `keys` fixture's "k", which the module's other tests sign with:
    # a request of theirs that reaches a proxy late is theirs, not this test's.)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "key-env")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret-env")
    for proxy in (a_proxy, b_proxy):
        proxy.register("key-env", "secret-env")
    mine = {"key-plain", "key-b", "key-env"}
    rejected = (a_proxy.rejected, b_proxy.rejected)
    # The proxies serve the whole module: what this test signs with is what it adds.
    used_before = (a_proxy.keys_used.copy(), b_proxy.keys_used.copy())
    a = loader(f"s3://data/train/{SHARDS}", s3_endpoint=a_url, profile="store-a")
    b = loader(f"s3://data/train/{SHARDS}", s3_endpoint=b_url, profile="store-b")
    h = loader(f"http://127.0.0.1:{nginx}/plain/{SHARDS}")
    got = {"a": [], "b": [], "h": []}
    for xa, xb, xh in zip(a, b, h):  # interleaved: all three in flight together
        got["a"] += batches_of([xa])
        got["b"] += batches_of([xb])
        got["h"] += batches_of([xh])
    plain = stream(str(root / "plain" / SHARDS), shuffle=True, seed=3)
    assert_same(got["a"], plain)
    assert_same(got["h"], plain)
    assert_same(got["b"], stream(str(root / "b" / SHARDS), shuffle=True, seed=3))
    assert (a_proxy.rejected, b_proxy.rejected) == rejected  # each store saw only its own keys
    used = [set(proxy.keys_used - before) & mine for proxy, before in zip((a_proxy, b_proxy), used_before)]
    assert used == [{"key-plain"}, {"key-b"}]


def test_a_loader_reads_the_environment_when_it_is_made(data, two_s3, keys, monkeypatch):
    root, _ = data
    (a_url, b_url), (a_proxy, b_proxy) = two_s3
    a_proxy.register("k", "s")  # the keys of the `keys` fixture
    b_proxy.register("k", "s")
    monkeypatch.setenv("AWS_ENDPOINT_URL", a_url)
    first = batches_of(loader(f"s3://data/train/{SHARDS}"))
    monkeypatch.setenv("AWS_ENDPOINT_URL", b_url)  # after the first loader: the next one must see it
    second = batches_of(loader(f"s3://data/train/{SHARDS}"))
    assert_same(first, stream(str(root / "plain" / SHARDS), shuffle=True, seed=3))
    assert_same(second, stream(str(root / "b" / SHARDS), shuffle=True, seed=3))


def test_parquet_image_paths_are_read_with_the_loaders_own_settings(two_s3, keys, tmp_path, monkeypatch):
    """A local Parquet file whose image structs name objects in a store ({bytes: null,
    path: s3://...}, as `datasets` writes Image() columns built from paths): those objects
    are read with the loader's s3_endpoint and profile, as its shards are, not the
    environment's (which names no endpoint here)."""
    import io

    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from PIL import Image

    (_, b_url), (_, b_proxy) = two_s3
    rng = np.random.default_rng(5)
    pixels = [rng.integers(0, 256, (24, 32, 3), dtype=np.uint8) for _ in range(5)]
    moto = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{b_proxy.upstream_port}", region_name="us-east-1",
                        aws_access_key_id="k", aws_secret_access_key="s")  # moto itself, behind the proxy
    images = []
    for i, p in enumerate(pixels):
        buf = io.BytesIO()
        Image.fromarray(p).save(buf, format="JPEG", quality=90)
        images.append(buf.getvalue())
        moto.put_object(Bucket="data", Key=f"img/{i}.jpg", Body=images[-1])
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table({"image": pa.array([{"bytes": None, "path": f"s3://data/img/{i}.jpg"} for i in range(5)],
                                        image_type), "label": pa.array(range(5), pa.int64())})
    pq.write_table(table, tmp_path / "by_path.parquet")
    creds = tmp_path / "credentials"
    creds.write_text("[store-b]\naws_access_key_id = key-b\naws_secret_access_key = secret-b\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    used = b_proxy.keys_used["key-b"]
    fields = {"image": stoker.image((24, 32), resize="none", layout="HWC"), "label": stoker.scalar()}
    got = {"image": [], "label": []}
    for batch in stoker.Loader(str(tmp_path / "by_path.parquet"), fields=fields, batch_size=2, drop_last=False,
                               output="numpy", s3_endpoint=b_url, profile="store-b", retry_deadline_s=5):
        got["image"] += list(batch["image"])
        got["label"] += [int(x) for x in batch["label"]]
    assert got["label"] == list(range(5))
    for i, data in enumerate(images):
        np.testing.assert_array_equal(got["image"][i], np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))
    assert b_proxy.keys_used["key-b"] >= used + 5  # through the store's proxy, with the profile's keys
