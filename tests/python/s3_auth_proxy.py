"""An authenticating reverse proxy on loopback in front of moto's server, for
the credential-chain tests: it does what moto's S3 does not.

moto accepts any signature unless INITIAL_NO_AUTH_ACTION_COUNT turns IAM
checks on, and then it checks every call, the unsigned STS
AssumeRoleWithWebIdentity included (no Authorization header: an error), and
never the expiry of temporary credentials (moto/iam/access_control.py
compares the key, the session token and the signature only). So the store's
side of these tests is this proxy:

- STS calls (a form POST whose Action is AssumeRole*) go to moto (a signed
  one, AssumeRole, only when its signature checks out as below); the
  Credentials of each answer are recorded as issued, valid until their
  Expiration; roles in `deny_roles` are refused (403 AccessDenied).
  `register()` records keys issued elsewhere (the metadata
  server, the IAM user of a source profile).
- every other request (S3) must be SigV4-signed with recorded keys: the
  signature is recomputed with the recorded secret (403
  SignatureDoesNotMatch), the x-amz-security-token must be the one issued
  with the key (400 InvalidToken), and keys past their expiry get S3's
  400 ExpiredToken; an unknown key is 403 InvalidAccessKeyId. With
  `require_signed=False` unsigned requests pass (public buckets).
Counters: `s3_signed`, `s3_unsigned`, `expired` (ExpiredToken answers),
`rejected` (all refusals), `sts_calls`, `keys_used`.
Threads: one per client connection (ThreadingHTTPServer), a fresh upstream
connection per request; state under a lock.
"""
from __future__ import annotations

import collections
import datetime
import hashlib
import hmac
import http.client
import re
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


def _error(code: str, message: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{message}</Message>'
            f"<RequestId>stoker-test</RequestId></Error>").encode()


def _iso(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


class S3AuthProxy:
    def __init__(self, upstream_port: int, require_signed: bool = True):
        self.upstream_port = upstream_port
        self.require_signed = require_signed
        self.deny_roles: set[str] = set()  # STS refuses to let anyone assume these (AccessDenied)
        self.lock = threading.Lock()  # guards everything below
        self.creds: dict[str, tuple[str, str, float]] = {}  # key -> (secret, token, expires)
        self.s3_signed = 0
        self.s3_unsigned = 0
        self.expired = 0
        self.rejected = 0
        self.sts_calls = 0
        self.keys_used = collections.Counter()
        self.refusals: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def handle(self):
                try:
                    super().handle()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away (a loader closed mid-transfer)

            def _reply(self, code: int, headers: list, body: bytes):
                self.send_response(code)
                for k, v in headers:
                    if k.lower() not in HOP and k.lower() != "content-length":
                        self.send_header(k, v)
                length = next((v for k, v in headers if k.lower() == "content-length"), None)
                self.send_header("Content-Length", length if self.command == "HEAD" and length else str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _handle(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                form = {}
                if self.command == "POST" and b"Action=" in body:
                    form = dict(urllib.parse.parse_qsl(body.decode()))
                if form.get("Action", "").startswith("AssumeRole"):
                    # AssumeRole is signed with the source's keys: checked as S3 requests are.
                    refusal = self.headers.get("Authorization") and outer._check(self, body, sts=True)
                    if form.get("RoleArn") in outer.deny_roles:
                        refusal = (403, "AccessDenied", f"Not authorized to perform sts:{form['Action']}")
                    if refusal:
                        with outer.lock:
                            outer.rejected += 1
                            outer.refusals.append(f"STS {form['Action']}: {refusal[1]}")
                        return self._reply(refusal[0], [("Content-Type", "text/xml")],
                                           b"<ErrorResponse>" + _error(*refusal[1:]) + b"</ErrorResponse>")
                    code, headers, answer = outer._forward(self, body)
                    outer._record_sts(code, answer)
                    return self._reply(code, headers, answer)
                refusal = outer._check(self, body)
                if refusal:
                    status, code, message = refusal
                    with outer.lock:
                        outer.rejected += 1
                        outer.expired += code == "ExpiredToken"
                        outer.refusals.append(f"{self.command} {self.path}: {code}")
                    return self._reply(status, [("Content-Type", "application/xml")],
                                       b"" if self.command == "HEAD" else _error(code, message))
                self._reply(*outer._forward(self, body))

            do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def register(self, key: str, secret: str, token: str = "", expires: float = float("inf")):
        with self.lock:
            self.creds[key] = (secret, token, expires)

    def _forward(self, h, body: bytes):
        conn = http.client.HTTPConnection("127.0.0.1", self.upstream_port, timeout=30)
        try:
            headers = {k: v for k, v in h.headers.items() if k.lower() not in HOP}
            conn.request(h.command, h.path, body=body or None, headers=headers)
            r = conn.getresponse()
            data = r.read()
            return r.status, r.getheaders(), data
        finally:
            conn.close()

    def _record_sts(self, code: int, answer: bytes):
        with self.lock:
            self.sts_calls += 1
        if code != 200:
            return
        text = answer.decode()
        field = lambda name: re.search(f"<{name}>(.*?)</{name}>", text, re.S).group(1)  # noqa: E731
        self.register(field("AccessKeyId"), field("SecretAccessKey"), field("SessionToken"), _iso(field("Expiration")))

    def _check(self, h, body: bytes, sts: bool = False):
        """None when the request may pass; else (HTTP status, S3 error code, message)."""
        auth = h.headers.get("Authorization")
        if not auth:
            with self.lock:
                self.s3_unsigned += 1
            return (403, "AccessDenied", "Anonymous access is denied") if self.require_signed else None
        m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/([^,]+), *SignedHeaders=([^,]+), *Signature=(\w+)", auth)
        if not m:
            return 400, "AuthorizationHeaderMalformed", auth
        key, scope, signed, signature = m.groups()
        with self.lock:
            known = self.creds.get(key)
        if known is None:
            return 403, "InvalidAccessKeyId", f"unknown key {key}"
        secret, token, expires = known
        if (h.headers.get("x-amz-security-token") or "") != token:
            return 400, "InvalidToken", "The provided token is malformed or otherwise invalid."
        if time.time() >= expires:
            return 400, "ExpiredToken", "The provided token has expired."
        if signature != self._signature(h, body, secret, scope, signed):
            return 403, "SignatureDoesNotMatch", "The request signature we calculated does not match"
        if sts:
            return None
        with self.lock:
            self.s3_signed += 1
            self.keys_used[key] += 1
        return None

    @staticmethod
    def _signature(h, body: bytes, secret: str, scope: str, signed: str) -> str:
        """SigV4 recomputed from the request as received (path and query as sent)."""
        path, _, query = h.path.partition("?")
        pairs = sorted(p if "=" in p else p + "=" for p in query.split("&") if p)
        canonical_headers = "".join(
            f"{name}:{' '.join((h.headers.get(name) or '').split())}\n" for name in signed.split(";"))
        payload = h.headers.get("x-amz-content-sha256") or hashlib.sha256(body).hexdigest()
        request = "\n".join([h.command, path, "&".join(pairs), canonical_headers, signed, payload])
        date = h.headers.get("x-amz-date")
        to_sign = "\n".join(["AWS4-HMAC-SHA256", date, scope, hashlib.sha256(request.encode()).hexdigest()])
        k = ("AWS4" + secret).encode()
        for part in scope.split("/"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        return hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()

    def close(self):
        self._server.shutdown()
        self._server.server_close()
