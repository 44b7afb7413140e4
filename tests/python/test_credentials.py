"""The AWS credential chain (src/io/aws_credentials.h) against real servers on
loopback, started and stopped here: moto's server (S3 and STS) behind
tests/python/s3_auth_proxy.py, which checks what moto does not (each S3
request's SigV4 signature against the keys actually issued, their session
token, their expiry: S3's 400 ExpiredToken), and
tests/python/aws_metadata_server.py (IMDSv2 and the container endpoint)
issuing keys that expire every few seconds.

- web identity (AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN ->
  AssumeRoleWithWebIdentity), a profile's role_arn + source_profile
  (AssumeRole signed with the source's keys) and credential_process each read
  the shards from S3 and deliver the local-file stream, signed with the keys
  that source issued;
- a configured source that fails is an error naming it, not unsigned reads;
- the soak: keys from instance metadata or the container endpoint expire
  every STOKER_CRED_TTL_S (6) seconds while epochs are read for
  STOKER_CRED_SOAK_S (20) seconds in all: no request fails, the keys are
  fetched again a few times, far fewer than the S3 requests. The issue's long
  form: STOKER_CRED_SOAK_S=180 STOKER_CRED_TTL_S=60;
- keys the store refuses before their stated expiry (ExpiredToken) are
  invalidated and fetched anew, the request signed again;
- the stoker CLI reads s3:// under a web identity role;
- nothing configured (instance metadata probed at a closed port): resolving
  stays under 3 s and requests go unsigned.
"""
from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

import stoker
from stoker import _stoker

from aws_metadata_server import AwsMetadataServer
from conftest import stoker_bin, stoker_env, write_vision_shards
from nginx_server import free_port
from s3_auth_proxy import S3AuthProxy
from test_remote import FIELDS, assert_same, batches_of, io_options

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")

SHARDS = "shard-{000000..000002}.tar"
ROLE = "arn:aws:iam::123456789012:role/trainer"
SOAK_S = float(os.environ.get("STOKER_CRED_SOAK_S", "20"))
TTL_S = float(os.environ.get("STOKER_CRED_TTL_S", "6"))
CHAIN_VARS = [
    "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
    "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL_S3", "STOKER_S3_ENDPOINT", "AWS_DEFAULT_REGION",
]


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    root = tmp_path_factory.mktemp("creds")
    write_vision_shards(root, shards=3, per_shard=12, seed=11)
    return root


@pytest.fixture(scope="module")
def local(shards):
    return stream(str(shards / SHARDS))


@pytest.fixture(scope="module")
def store(shards):
    """moto (S3 + STS) behind the authenticating proxy; bucket 'data' holds the shards."""
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        kw = dict(endpoint_url=f"http://127.0.0.1:{port}", region_name="us-east-1",
                  aws_access_key_id="admin", aws_secret_access_key="admin")
        s3 = boto3.client("s3", **kw)
        s3.create_bucket(Bucket="data")
        for p in sorted(shards.glob("*.tar")):  # public-read: moto serves anonymous GETs (the unsigned test)
            s3.upload_file(str(p), "data", p.name, ExtraArgs={"ACL": "public-read"})
        iam = boto3.client("iam", **kw)
        iam.create_user(UserName="base")
        base = iam.create_access_key(UserName="base")["AccessKey"]
        proxy = S3AuthProxy(port)
        proxy.base_key = (base["AccessKeyId"], base["SecretAccessKey"])
        proxy.register(*proxy.base_key)  # long-term keys of the source profile
        yield proxy
        proxy.close()
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def clean_chain(monkeypatch, tmp_path):
    """No AWS setting of the machine leaks in; instance metadata is off unless a test turns it on."""
    for name in CHAIN_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def stream(sources, **kw):
    loader = stoker.Loader(sources, FIELDS(), output="numpy", batch_size=8, drop_last=False, shuffle=False,
                           io_depth=4, decode_threads=2, **kw)
    return batches_of(loader)


def read_s3(store):
    io_options(attempts=6, timeout_ms=5000, s3_endpoint=store.url)
    return stream(f"s3://data/{SHARDS}")


class Counts:
    """The proxy's counters since construction."""

    def __init__(self, store):
        self.store = store
        self.before = self.now()

    def now(self):
        s = self.store
        with s.lock:
            return dict(signed=s.s3_signed, unsigned=s.s3_unsigned, rejected=s.rejected, expired=s.expired,
                        sts=s.sts_calls, keys=set(k for k, n in s.keys_used.items() if n))

    def delta(self):
        a, b = self.before, self.now()
        out = {k: b[k] - a[k] for k in ("signed", "unsigned", "rejected", "expired", "sts")}
        out["new_keys"] = b["keys"] - a["keys"]
        return out


def test_web_identity_role(store, local, tmp_path, monkeypatch):
    (tmp_path / "token").write_text("eyJhbGciOiJSUzI1NiJ9.test-oidc-token.sig\n")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(tmp_path / "token"))
    monkeypatch.setenv("AWS_ROLE_ARN", ROLE)
    monkeypatch.setenv("AWS_ROLE_SESSION_NAME", "pytest")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", store.url)
    c = Counts(store)
    assert_same(read_s3(store), local)
    d = c.delta()
    assert d["sts"] == 1  # one AssumeRoleWithWebIdentity, shared by every reader
    assert d["signed"] > 0 and d["unsigned"] == 0 and d["rejected"] == 0, store.refusals[-5:]
    assert len(d["new_keys"]) == 1 and next(iter(d["new_keys"])).startswith("ASIA")


def test_profile_role_with_source_profile(store, local, tmp_path, monkeypatch):
    key, secret = store.base_key
    (tmp_path / "credentials").write_text(f"[base]\naws_access_key_id = {key}\naws_secret_access_key = {secret}\n")
    (tmp_path / "config").write_text(f"[profile trainer]\nrole_arn = {ROLE}\nsource_profile = base\n"
                                     f"role_session_name = pytest\nregion = us-east-1\n")
    monkeypatch.setenv("AWS_PROFILE", "trainer")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", store.url)
    c = Counts(store)
    assert_same(read_s3(store), local)
    d = c.delta()
    # AssumeRole was signed with the base keys (the proxy checked the
    # signature); the reads with the role's keys, never the base ones.
    assert d["sts"] == 1 and d["rejected"] == 0, store.refusals[-5:]
    assert d["signed"] > 0 and d["unsigned"] == 0
    assert len(d["new_keys"]) == 1 and key not in d["new_keys"]


def test_credential_process(store, local, tmp_path, monkeypatch):
    creds = {"Version": 1, "AccessKeyId": "ASIAPROCESS0001", "SecretAccessKey": "process-secret",
             "SessionToken": "process-token", "Expiration": "2199-01-01T00:00:00Z"}
    store.register(creds["AccessKeyId"], creds["SecretAccessKey"], creds["SessionToken"])
    (tmp_path / "creds.json").write_text(json.dumps(creds))
    (tmp_path / "config").write_text(f"[profile proc]\ncredential_process = cat {tmp_path / 'creds.json'}\n")
    monkeypatch.setenv("AWS_PROFILE", "proc")
    c = Counts(store)
    assert_same(read_s3(store), local)
    d = c.delta()
    assert d["new_keys"] == {"ASIAPROCESS0001"} and d["rejected"] == 0 and d["unsigned"] == 0


def test_a_failing_source_is_an_error_that_names_it(store, tmp_path, monkeypatch):
    (tmp_path / "config").write_text("[profile broken]\ncredential_process = echo vault is sealed >&2; exit 2\n")
    monkeypatch.setenv("AWS_PROFILE", "broken")
    c = Counts(store)
    with pytest.raises(Exception) as e:
        read_s3(store)
    msg = str(e.value)
    assert "profile 'broken'" in msg and "credential_process" in msg and "vault is sealed" in msg, msg
    assert c.delta()["unsigned"] == 0  # never fell back to unsigned reads
    monkeypatch.setenv("AWS_PROFILE", "absent")
    with pytest.raises(Exception, match="AWS profile 'absent'"):
        read_s3(store)
    monkeypatch.delenv("AWS_PROFILE")
    (tmp_path / "token").write_text("oidc-token")
    monkeypatch.setenv("AWS_WEB_IDENTITY_TOKEN_FILE", str(tmp_path / "token"))
    monkeypatch.setenv("AWS_ROLE_ARN", ROLE + "-forbidden")
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", store.url)
    store.deny_roles.add(ROLE + "-forbidden")
    with pytest.raises(Exception) as e:
        read_s3(store)
    msg = str(e.value)
    assert f"web identity (role {ROLE}-forbidden" in msg and "AccessDenied" in msg, msg
    assert c.delta()["unsigned"] == 0


@pytest.mark.parametrize("endpoint", ["instance metadata", "container"])
def test_expiring_credentials_are_refreshed_while_reading(endpoint, store, local, monkeypatch):
    meta = AwsMetadataServer(ttl=TTL_S, on_issue=store.register)
    try:
        if endpoint == "container":
            monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", meta.url + meta.container_path)
            monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", meta.container_token)
        else:
            monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
            monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", meta.url)
        io_options(attempts=6, timeout_ms=5000, s3_endpoint=store.url)
        c = Counts(store)
        failures = _stoker.io_counters()["failures"]
        loader = stoker.Loader(f"s3://data/{SHARDS}", FIELDS(), output="numpy", batch_size=8, drop_last=False,
                               shuffle=False, io_depth=4, decode_threads=2)
        duration = SOAK_S / 2  # two endpoints share the soak
        t0 = time.monotonic()
        epochs = 0
        while time.monotonic() - t0 < duration:
            assert_same(batches_of(loader), local)
            epochs += 1
        loader.close()
        d = c.delta()
    finally:
        meta.close()
    assert _stoker.io_counters()["failures"] == failures
    assert d["unsigned"] == 0 and d["signed"] > 0
    # Replaced a quarter of their lifetime ahead of expiry: a request reaches
    # the store with expired keys only if delayed past the last eighth (a
    # straggler on a loaded machine, then retried with fresh keys); without
    # refresh ahead every rotation costs about io_depth refusals.
    assert d["rejected"] == d["expired"] <= 2, store.refusals[-5:]
    # Fetched again before each expiry (every ~3/4 of the lifetime): more than
    # once, about duration / (0.75 ttl) times, far fewer than the requests.
    assert meta.issued >= 2
    gaps = [b - a for a, b in zip(meta.issue_times, meta.issue_times[1:])]
    # Ahead of expiry, not per request: the expired-key count above says
    # "ahead"; here, no two fetches closer than a quarter of the lifetime
    # (a refresh per request would be milliseconds apart). No upper bound on
    # a gap: a loaded machine may simply send no request for a while.
    assert all(g > 0.25 * TTL_S for g in gaps), gaps
    assert meta.issued <= duration / (0.75 * TTL_S) + 3, (meta.issued, duration)
    assert meta.issued * 10 < d["signed"], (meta.issued, d)
    assert len(d["new_keys"]) == meta.issued  # every issued key signed something
    print(f"{endpoint}: {epochs} epochs in {duration:.0f} s, {d['signed']} S3 requests, "
          f"{meta.issued} credential fetches, {d['expired']} ExpiredToken answers retried")


def test_keys_refused_before_their_expiry_are_fetched_anew(store, local, monkeypatch):
    """The store refuses keys 2 s after issue although they claim an hour:
    each refusal (400 ExpiredToken) invalidates them, and the request is
    signed again with keys fetched anew; nothing fails."""
    meta = AwsMetadataServer(ttl=3600, on_issue=lambda k, s, t, e: store.register(k, s, t, time.time() + 2))
    try:
        monkeypatch.setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", meta.url + meta.container_path)
        monkeypatch.setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", meta.container_token)
        io_options(attempts=6, timeout_ms=5000, s3_endpoint=store.url)
        c = Counts(store)
        failures = _stoker.io_counters()["failures"]
        loader = stoker.Loader(f"s3://data/{SHARDS}", FIELDS(), output="numpy", batch_size=8, drop_last=False,
                               shuffle=False, io_depth=4, decode_threads=2)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5:
            assert_same(batches_of(loader), local)
        loader.close()
        d = c.delta()
    finally:
        meta.close()
    assert _stoker.io_counters()["failures"] == failures
    assert d["expired"] > 0 and d["rejected"] == d["expired"]
    assert 2 <= meta.issued <= 8, meta.issued  # one fetch per revocation, not one per refused request


@pytest.mark.skipif(not stoker_bin(), reason="the stoker command is not built")
def test_cli_inspect_under_a_web_identity_role(store, tmp_path, monkeypatch):
    (tmp_path / "token").write_text("oidc-token-for-cli")
    env = stoker_env()
    env.update(AWS_WEB_IDENTITY_TOKEN_FILE=str(tmp_path / "token"), AWS_ROLE_ARN=ROLE,
               AWS_ENDPOINT_URL_STS=store.url)
    c = Counts(store)
    out = subprocess.run([stoker_bin(), "inspect", "--json", "--s3-endpoint", store.url, "s3://data/shard-000000.tar"],
                         capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["num_samples"] == 12
    d = c.delta()
    assert d["sts"] == 1 and d["signed"] > 0 and d["unsigned"] == 0 and d["rejected"] == 0


def test_nothing_configured_probes_fast_and_reads_unsigned(store, local, monkeypatch):
    monkeypatch.delenv("AWS_EC2_METADATA_DISABLED")
    monkeypatch.setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", f"http://127.0.0.1:{free_port()}")  # closed
    store.require_signed = False  # a public bucket
    try:
        c = Counts(store)
        t0 = time.monotonic()
        got = read_s3(store)
        elapsed = time.monotonic() - t0
    finally:
        store.require_signed = True
    assert_same(got, local)
    d = c.delta()
    assert d["unsigned"] > 0 and d["signed"] == 0
    # A closed metadata port is refused at once (about 0.1 s here); a probe
    # that waited out its timeouts would take the 1 s connect timeout per
    # attempt, several times over. 10 s: room for a loaded machine.
    assert elapsed < 10, elapsed
