"""URLs as users have them, against servers on loopback started here
(tests/python/url_server.py): a query string taken literally (a signed CDN
link, a presigned URL), redirects followed without carrying credentials to
another host, the Hugging Face Hub's hf:// URLs (resolve paths, redirects to
its CDN, the tree API, HF_TOKEN), a loader's own HTTP headers, schemes that
are not read, and a token that never appears in an error, a log line or a
report. Each stream is compared with the same shards read from local files."""
from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import stoker
from stoker import _stoker

from conftest import stoker_bin, stoker_env, write_vision_shards
from url_server import UrlServer

SHARDS = "shard-{000000..000002}.tar"
NAMES = [f"shard-{i:06d}.tar" for i in range(3)]
TOKEN = "tok-5ecret-Q9"
HF_TOKEN = "hf_s3cretHubT0ken"
FIELDS = lambda: {  # noqa: E731 - fresh specs per loader
    "jpg": stoker.image(48, resize="center_crop", layout="HWC"),
    "features.npz": stoker.npz(),
    "cls": stoker.scalar("int64"),
}


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    """Fast retries, and the process defaults taken afresh from the
    environment (HF_ENDPOINT, HF_TOKEN set by a test) and forgotten after."""
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", "/nonexistent")  # no token file of the machine's
    _stoker.reset_io_options()
    _stoker.set_io_options(attempts=6, timeout_ms=3000, backoff_ms=5, backoff_max_ms=20, cache_dir="")
    yield
    _stoker.reset_io_options()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Three shards with .idx sidecars (written by `stoker index`), one more
    with a corrupt JPEG and no sidecar, and the Hub's layout (data/...)."""
    root = tmp_path_factory.mktemp("urls")
    write_vision_shards(root, shards=3, per_shard=12, seed=11)
    subprocess.run([stoker_bin(), "index", "-q", *(str(root / n) for n in NAMES)], check=True, env=stoker_env())
    (root / "data").mkdir()
    for n in NAMES:
        (root / "data" / n).write_bytes((root / n).read_bytes())
        (root / "data" / (n + ".idx")).write_bytes((root / (n + ".idx")).read_bytes())
    bad = root / "bad"
    write_vision_shards(bad, shards=1, per_shard=6, seed=12)
    raw = bytearray((bad / NAMES[0]).read_bytes())
    at = raw.find(b"\xff\xd8\xff")  # the first JPEG's start: its markers broken
    raw[at + 2:at + 400] = b"\x00" * 398
    (bad / NAMES[0]).write_bytes(bytes(raw))
    return root


def stream(sources, **kw):
    """The loader's epoch as [(keys, {name: array copy})] per batch."""
    kw.setdefault("batch_size", 6)
    kw.setdefault("drop_last", False)
    loader = stoker.Loader(sources, FIELDS(), output="numpy", shuffle=False, io_depth=4, decode_threads=2, **kw)
    out = []
    try:
        for b in loader:
            keys = list(b["__key__"])  # webdataset's keys: the same over any URL
            arrays = {}
            for name, v in b.items():
                if name in ("__key__", "__url__"):  # __url__: the shard as given, a URL here and a path there
                    continue
                for sub, a in (v.items() if isinstance(v, dict) else [("", v)]):
                    arrays[f"{name}/{sub}"] = np.array(a)
            out.append((keys, arrays))
    finally:
        loader.close()
    return out


def assert_same(a, b):
    assert len(a) == len(b) and a
    for (ka, xa), (kb, xb) in zip(a, b):
        assert ka == kb
        assert xa.keys() == xb.keys()
        for name in xa:
            assert xa[name].tobytes() == xb[name].tobytes(), name


@pytest.fixture(scope="module")
def local(data):
    return stream(str(data / SHARDS))


def shard_gets(server, suffix=".tar"):
    return [r for r in server.received("GET") if r["path"].endswith(suffix)]


# --- redirects ---------------------------------------------------------------


def test_redirects_are_followed_and_credentials_stay_with_their_host(data, local):
    """A resolve-style path answers 302: shard 0 to another path of the same
    server, shards 1 and 2 (and their sidecars) to another port, as the Hub's
    CDN. The loader's Authorization goes to the first server only; ranged
    GETs go to the final location directly, and sidecars are used."""
    with UrlServer(data) as cdn:
        def redirect(path, query):
            if "/resolve/main/" not in path:
                return None
            name = path.rsplit("/", 1)[1]
            if name.startswith(NAMES[0]):
                return f"/files/{name}"  # a relative Location, same host
            return f"{cdn.url}/{name}?sig=cdn-signature-7&expires=9"

        with UrlServer(data, redirect=redirect, bearer="api-key-1", bearer_prefix="/org/") as hub:
            # The same-host target: /files/X, the shard itself.
            (data / "files").mkdir(exist_ok=True)
            for n in (NAMES[0], NAMES[0] + ".idx"):
                target = data / "files" / n
                if not target.exists():
                    target.symlink_to(data / n)
            got = stream(f"{hub.url}/org/ds/resolve/main/{SHARDS}",
                         http_headers={"Authorization": "Bearer api-key-1"})
            assert_same(got, local)
            hub_reqs, cdn_reqs = hub.received(), cdn.received()

    assert cdn_reqs, "nothing reached the other port"
    assert all("authorization" not in r["headers"] for r in cdn_reqs), "Authorization sent to another host"
    # The redirected shards' sidecars were read at the CDN; no shard was scanned.
    assert {r["path"] for r in cdn_reqs if r["path"].endswith(".idx")} == {f"/{n}.idx" for n in NAMES[1:]}
    assert all(r["query"] == "sig=cdn-signature-7&expires=9" for r in cdn_reqs)
    ranged = [r for r in cdn_reqs if r["method"] == "GET" and r["path"].endswith(".tar")]
    assert ranged and all(r["headers"].get("range", "").startswith("bytes=") for r in ranged)
    # Same host: the relative redirect's target was read with ranges too,
    # and kept the header (its own origin).
    same = [r for r in hub_reqs if r["path"].startswith("/files/") and r["method"] == "GET"
            and r["path"].endswith(".tar")]
    assert same and all(r["headers"].get("range") for r in same)
    assert all(r["headers"].get("authorization") == "Bearer api-key-1" for r in same)
    # The resolve path is asked once per object (the HEAD, the sidecar), not per read.
    resolves = [r for r in hub_reqs if "/resolve/" in r["path"] and r["path"].endswith(".tar")]
    assert len(resolves) <= 3 * 2, [(r["method"], r["path"]) for r in resolves]
    assert len(ranged) > len([r for r in resolves if r["path"].endswith(NAMES[1]) or r["path"].endswith(NAMES[2])])


def test_s3_signing_stays_with_the_endpoint_a_redirect_leaves(data, local, monkeypatch):
    """An S3-compatible endpoint that redirects its objects to another port:
    the endpoint gets SigV4-signed requests with the session token, the
    other port neither a signature nor the token."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3tkey")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "sessi0n-t0ken")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    with UrlServer(data) as other:
        redirect = lambda path, q: f"{other.url}/{path.rsplit('/', 1)[1]}" if path.startswith("/bkt/") else None  # noqa: E731
        with UrlServer(data, redirect=redirect) as endpoint:
            got = stream(f"s3://bkt/{SHARDS}", s3_endpoint=endpoint.url)
            signed_reqs, other_reqs = endpoint.received(), other.received()
    assert_same(got, local)
    assert signed_reqs and all(r["headers"].get("authorization", "").startswith("AWS4-HMAC-SHA256")
                               and r["headers"].get("x-amz-security-token") == "sessi0n-t0ken" for r in signed_reqs)
    assert other_reqs
    for r in other_reqs:
        assert not any(h in r["headers"] for h in ("authorization", "x-amz-security-token", "x-amz-date")), r


def test_an_expired_location_is_resolved_again(data, local):
    """The CDN's signed link stops working mid-epoch (403): each object is
    resolved again from its own URL, once, and the epoch goes on."""
    sig = {"now": "v1"}
    with UrlServer(data, token="v1") as cdn:
        def redirect(path, query):
            return f"{cdn.url}{path.replace('/resolve', '')}?token={sig['now']}" if path.startswith("/resolve/") else None

        with UrlServer(data, redirect=redirect) as hub:
            loader = stoker.Loader(f"{hub.url}/resolve/{SHARDS}", FIELDS(), output="numpy", batch_size=6,
                                   shuffle=False, drop_last=False, io_depth=1, decode_threads=1, prefetch=1,
                                   read_ahead_batches=0, coalesce_bytes=0)
            it = iter(loader)
            first = [next(it)["__key__"]]
            resolves_before = len([r for r in hub.received() if r["path"].startswith("/resolve/")])
            cdn.token = sig["now"] = "v2"  # the old links are refused from here on
            rest = [b["__key__"] for b in it]
            loader.close()
            refused = [r for r in cdn.received() if r["status"] == 403]
            resolves_after = len([r for r in hub.received() if r["path"].startswith("/resolve/")])
            hub_if_match = [r for r in hub.received() if "if-match" in r["headers"]]
            cdn_reqs = cdn.received()
    keys = [k.rsplit(":", 1)[-1].rsplit("/", 1)[-1] for batch in first + rest for k in batch]
    assert keys == [k for batch_keys, _ in local for k in batch_keys]
    assert refused and resolves_after > resolves_before
    # If-Match goes where the object is, never to the URL that redirects.
    assert hub_if_match == [] and any("if-match" in r["headers"] for r in cdn_reqs)
    assert any(r["query"] == "token=v2" for r in cdn_reqs)


def test_a_redirect_loop_is_an_error_not_a_hang(data):
    with UrlServer(data, redirect=lambda path, q: path + "x") as server:
        with pytest.raises(stoker.StokerError, match="more than 5 redirects"):
            stoker.Loader(f"{server.url}/{NAMES[0]}", FIELDS(), batch_size=4)


# --- a token in the query ----------------------------------------------------


@pytest.fixture(scope="module")
def signed(data):
    with UrlServer(data, token=TOKEN) as server:
        yield server


def test_a_signed_url_loads_with_its_sidecar(data, signed, local):
    got = stream(f"{signed.url}/{SHARDS}?token={TOKEN}")
    assert_same(got, local)
    sidecars = {r["path"] for r in shard_gets(signed, ".idx") if r["query"] == f"token={TOKEN}"}
    assert sidecars == {f"/{n}.idx" for n in NAMES}
    # The sidecars were found: shards were read by ranges, never scanned whole.
    assert all(r["headers"].get("range") for r in shard_gets(signed))


def test_a_signed_url_loads_from_a_shard_list(data, signed, local, tmp_path):
    listing = tmp_path / "shards.txt"
    listing.write_text("".join(f"{signed.url}/{n}?token={TOKEN}\n" for n in NAMES))
    assert_same(stream(str(listing)), local)


def test_a_query_is_no_glob(signed):
    with pytest.raises(ValueError, match="HTTP has no listing") as e:
        stoker.Loader(f"{signed.url}/shard-*.tar?token={TOKEN}", FIELDS(), batch_size=4)
    assert TOKEN not in str(e.value)


def token_free(*texts):
    for text in texts:
        assert TOKEN not in str(text), text


def test_a_wrong_token_fails_without_showing_it(data, signed, caplog, capfd):
    wrong = TOKEN[::-1]
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(stoker.StokerError) as e:
            stoker.Loader(f"{signed.url}/{NAMES[0]}?token={wrong}", FIELDS(), batch_size=4)
    message = str(e.value)
    assert "HTTP 403" in message and f"{signed.url}/{NAMES[0]}?token=" in message
    assert wrong not in message
    out, err = capfd.readouterr()
    assert wrong not in out + err + caplog.text


def test_an_outage_and_its_logs_never_show_the_token(data, signed, local, caplog, capfd):
    _stoker.set_io_options(attempts=0, retry_deadline_s=20, backoff_ms=5, backoff_max_ms=20)
    loader = stoker.Loader(f"{signed.url}/{SHARDS}?token={TOKEN}", FIELDS(), output="numpy", batch_size=6,
                           shuffle=False, drop_last=False, io_depth=2, decode_threads=1)
    with caplog.at_level(logging.DEBUG):
        signed.fail_next(4, 503)
        batches = list(loader)
        report = loader.report()
        stats = loader._native.stats()
        loader.close()
    assert sum(len(b["__key__"]) for b in batches) == 36
    assert _stoker.io_counters()["throttled"] > 0
    out, err = capfd.readouterr()
    assert "HTTP 503" in err  # the outage was logged, the URL with it
    token_free(out, err, caplog.text, report, stats, _stoker.io_counters(), loader.state_dict())

    # Past the budget: the error names the URL, without the token.
    _stoker.set_io_options(attempts=2)
    loader = stoker.Loader(f"{signed.url}/{SHARDS}?token={TOKEN}", FIELDS(), output="numpy", batch_size=6,
                           shuffle=False, io_depth=2, decode_threads=1)
    signed.fail_next(1000, 503)
    try:
        with pytest.raises(stoker.StokerError) as e:
            list(loader)
        report = loader.report()
    finally:
        signed.fail_next(0)
        loader.close()
    assert "HTTP 503" in str(e.value) and "?token=" in str(e.value)
    out, err = capfd.readouterr()
    token_free(e.value, out, err, caplog.text, report)


def test_a_corrupt_member_is_reported_without_the_token(data, caplog, capfd):
    with UrlServer(data / "bad", token=TOKEN) as server:
        url = f"{server.url}/{NAMES[0]}?token={TOKEN}"
        with pytest.raises(stoker.StokerError) as e:
            stream(url)
        assert "jpg" in str(e.value) and f"{NAMES[0]}?token=" in str(e.value)
        with caplog.at_level(logging.WARNING):
            loader = stoker.Loader(url, FIELDS(), output="numpy", batch_size=3, on_error="skip")
            n = sum(len(b["__key__"]) for b in loader)
            report = loader.report()
            loader.close()
    assert n == 6 and report["skips"]["skipped"] == 1
    assert "skipped sample" in caplog.text
    out, err = capfd.readouterr()
    token_free(e.value, caplog.text, out, err, report)


def test_the_command_indexes_a_signed_url_and_keeps_its_token_to_itself(data, signed, tmp_path):
    out = tmp_path / "idx"
    out.mkdir()
    cmd = [stoker_bin(), "index", "-q", "-o", str(out)]
    proc = subprocess.run(cmd + [f"{signed.url}/{NAMES[0]}?token={TOKEN}"], capture_output=True, text=True,
                          env=stoker_env())
    assert proc.returncode == 0, proc.stderr
    # Named from the path, not the query; the manifest, to upload beside the
    # shards, lists them by name: the token is in neither.
    assert sorted(p.name for p in out.iterdir()) == [NAMES[0] + ".idx", "stoker-manifest.json"]
    assert (out / (NAMES[0] + ".idx")).read_bytes() == (data / (NAMES[0] + ".idx")).read_bytes()
    manifest = (out / "stoker-manifest.json").read_text()
    assert TOKEN not in manifest
    assert [(e["path"], e["bytes"]) for e in json.loads(manifest)["shards"]] == [(NAMES[0], (data / NAMES[0]).stat().st_size)]
    wrong = TOKEN[::-1]
    proc = subprocess.run(cmd + ["--io-attempts", "1", f"{signed.url}/{NAMES[1]}?token={wrong}"],
                          capture_output=True, text=True, env=stoker_env())
    assert proc.returncode == 1 and "HTTP 403" in proc.stderr, proc.stderr
    assert wrong not in proc.stdout + proc.stderr


# --- a loader's own headers ---------------------------------------------------


def test_http_headers_reach_the_shards_host(data, local):
    with UrlServer(data, bearer="k-42") as server:
        with pytest.raises(stoker.StokerError, match="HTTP 401"):
            stoker.Loader(f"{server.url}/{SHARDS}", FIELDS(), batch_size=4)
        got = stream(f"{server.url}/{SHARDS}", http_headers={"Authorization": "Bearer k-42"})
    assert_same(got, local)
    with pytest.raises(ValueError, match="header name"):
        stoker.Loader(f"{server.url}/{SHARDS}", FIELDS(), batch_size=4, http_headers={"Bad:Name": "x"})


# --- the Hugging Face Hub ----------------------------------------------------


@pytest.fixture()
def hub(data, monkeypatch):
    """The Hub's resolve paths on one port (token required), redirecting to
    its CDN on another, whose links are signed for GET only (no HEAD); the
    tree API lists the repository, two entries a page."""
    with UrlServer(data, get_only=True) as cdn:
        def redirect(path, query):
            prefix = "/datasets/org/name/resolve/main/"
            if path.startswith(prefix):
                return f"{cdn.url}/{path[len(prefix):]}?X-Amz-Signature=cdn{len(path)}"
            return None

        with UrlServer(data, redirect=redirect, bearer=HF_TOKEN, bearer_prefix="/", page_size=2) as server:
            monkeypatch.setenv("HF_ENDPOINT", server.url)
            monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
            _stoker.reset_io_options()
            _stoker.set_io_options(attempts=6, timeout_ms=3000, backoff_ms=5, backoff_max_ms=20)
            yield server, cdn


@pytest.mark.parametrize("pattern", ["data/" + SHARDS, "data/*.tar", "data/shard-00000?.tar"])
def test_hf_datasets_are_read_through_the_hub(hub, pattern, local):
    server, cdn = hub
    got = stream(f"hf://datasets/org/name/{pattern}")
    assert_same(got, local)
    assert {r["path"] for r in shard_gets(cdn, ".idx")} == {f"/data/{n}.idx" for n in NAMES}
    assert all("authorization" not in r["headers"] for r in cdn.received()), "HF_TOKEN sent to the CDN"
    # Its links refuse a HEAD: each object's size came from a one-byte ranged GET.
    assert {r["path"] for r in cdn.received("HEAD") if r["status"] == 403} == {f"/data/{n}" for n in NAMES}
    assert {r["path"] for r in cdn.received("GET") if r["headers"].get("range") == "bytes=0-0"} == \
        {f"/data/{n}" for n in NAMES}
    assert all(r["headers"].get("authorization") == f"Bearer {HF_TOKEN}" for r in server.received())
    if "*" in pattern or "?" in pattern:  # listed through the tree API, page after page
        assert len([r for r in server.received() if r["path"].startswith("/api/")]) >= 3


def test_hf_without_its_token_is_refused_with_the_hub_named(hub, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    _stoker.reset_io_options()
    with pytest.raises(stoker.StokerError, match="HTTP 401") as e:
        stoker.Loader("hf://datasets/org/name/data/" + SHARDS, FIELDS(), batch_size=4)
    assert "hf://datasets/org/name/data/shard-000000.tar" in str(e.value)
    assert "hf_wrong" not in str(e.value)


# --- schemes -----------------------------------------------------------------


@pytest.mark.parametrize("url", ["gs://bucket/shard-000.tar", "az://c/shard.tar", "ftp://h/x-{0..1}.tar"])
def test_unread_schemes_say_which_are_read(url, tmp_path):
    with pytest.raises(ValueError, match=r"http://, https://, s3:// and hf://") as e:
        stoker.Loader(url, FIELDS(), batch_size=4)
    if url.startswith("gs://"):
        assert 's3_endpoint="https://storage.googleapis.com"' in str(e.value) and "HMAC" in str(e.value)
    listing = tmp_path / "list.txt"
    listing.write_text(url + "\n")
    with pytest.raises(ValueError, match="stoker does not read"):
        stoker.Loader(str(listing), FIELDS(), batch_size=4)


# --- exit ----------------------------------------------------------------------


def test_a_script_ending_with_a_remote_loader_open_exits_quietly(data, signed):
    """Two shards over HTTP, one batch, no close(): the interpreter's exit
    frees every native object, so nothing is printed (nanobind names any
    instance left alive: "leaked N instances")."""
    script = textwrap.dedent(f"""
        import stoker
        loader = stoker.Loader("{signed.url}/shard-{{000000..000001}}.tar?token={TOKEN}",
                               {{"jpg": stoker.image(32), "cls": stoker.scalar("int64")}}, batch_size=4)
        batch = next(iter(loader))
        assert len(batch["__key__"]) == 4
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=stoker_env())
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "", proc.stderr
