"""A credential endpoint on loopback for the credential-chain tests: one
http.server that speaks both EC2's instance metadata service (IMDSv2: a PUT
for a session token, then the role name and the role's credentials, each GET
carrying the token) and the ECS/EKS container endpoint (a GET whose
Authorization header must carry the configured token).

Every credentials document it hands out is fresh keys that expire `ttl`
seconds later; `on_issue(key, secret, token, expires)` tells the store's side
(tests/python/s3_auth_proxy.py) about them, so it can refuse them once they
have expired. Counters: `issued` (credential documents served) and their `issue_times`,
`requests`.
Threads: one per connection (ThreadingHTTPServer); counters under a lock.
"""
from __future__ import annotations

import datetime
import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROLE = "stoker-test-role"


class AwsMetadataServer:
    def __init__(self, ttl: float, on_issue=None, container_path: str = "/v2/credentials/task",
                 container_token: str = "container-secret"):
        self.ttl = ttl
        self.on_issue = on_issue or (lambda *a: None)
        self.container_path = container_path
        self.container_token = container_token
        self.lock = threading.Lock()  # guards the counters and the session tokens
        self.issued = 0
        self.issue_times: list[float] = []  # time.monotonic() of each document
        self.requests = 0
        self.refused = 0
        self._imds_tokens: set[str] = set()
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

            def _send(self, code: int, body: bytes = b"", content_type="text/plain"):
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_PUT(self):
                outer._count()
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                if self.path != "/latest/api/token" or not self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    return self._send(400)
                token = secrets.token_urlsafe(24)
                with outer.lock:
                    outer._imds_tokens.add(token)
                self._send(200, token.encode())

            def do_GET(self):
                outer._count()
                if self.path == outer.container_path:
                    if self.headers.get("Authorization") != outer.container_token:
                        return outer._refuse(self, 401)
                    return self._send(200, outer._document(), "application/json")
                prefix = "/latest/meta-data/iam/security-credentials/"
                if not self.path.startswith(prefix):
                    return self._send(404)
                with outer.lock:
                    ok = self.headers.get("X-aws-ec2-metadata-token") in outer._imds_tokens
                if not ok:
                    return outer._refuse(self, 401)
                rest = self.path[len(prefix):]
                if rest == "":
                    return self._send(200, ROLE.encode())
                if rest == ROLE:
                    return self._send(200, outer._document(), "application/json")
                return self._send(404)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _count(self):
        with self.lock:
            self.requests += 1

    def _refuse(self, handler, code):
        with self.lock:
            self.refused += 1
        handler._send(code)

    def _document(self) -> bytes:
        now = datetime.datetime.now(datetime.timezone.utc)
        expires = now + datetime.timedelta(seconds=self.ttl)
        key = "ASIA" + secrets.token_hex(8).upper()
        secret, token = secrets.token_urlsafe(30), secrets.token_urlsafe(60)
        self.on_issue(key, secret, token, expires.timestamp())
        with self.lock:
            self.issued += 1
            self.issue_times.append(time.monotonic())
        return json.dumps({
            "Code": "Success", "LastUpdated": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "Type": "AWS-HMAC",
            "AccessKeyId": key, "SecretAccessKey": secret, "Token": token,
            "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        }).encode()

    def close(self):
        self._server.shutdown()
        self._server.server_close()
