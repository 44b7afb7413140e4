"""An HTTP/1.1 file server on loopback that answers as the servers users'
URLs point at do, for tests/python/test_urls.py:

- files under `root` with HEAD, ranged GETs (206, Content-Range), a strong
  ETag and Content-Length, as nginx or a CDN serves them;
- `token`: a file is served only when the query carries token=<token> (a
  signed CDN link), else 403;
- `redirect(path, query) -> location or None`: a 302 to another path or
  another server (the Hub's resolve URLs, S3's region redirects);
- `bearer`: requests for paths under `bearer_prefix` need
  "Authorization: Bearer <bearer>", else 401 (the Hub's private repositories);
- the Hub's tree API: GET /api/datasets/ORG/NAME/tree/REV[/DIR]?recursive=true
  lists `root`'s files under DIR as JSON, `page_size` entries a page, the next
  page named in a Link header;
- `fail_next(n, code)`: the next n file GETs answer `code` (an outage);
- `get_only`: a HEAD is refused (403), as by a link presigned for GET.

Every request is recorded (method, path, query, headers, status) so a test can check
what each server received, the Authorization header above all. Threads: one
per connection (ThreadingHTTPServer); the records and the fault counter are
under a lock; close() ends every connection and joins its thread.
"""
from __future__ import annotations

import json
import os
import socket
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class UrlServer:
    def __init__(self, root: Path, token: str | None = None, redirect=None, bearer: str | None = None,
                 bearer_prefix: str = "/", page_size: int = 1000, get_only: bool = False):
        self.root = Path(root)
        self.get_only = get_only
        self.token = token
        self.redirect = redirect
        self.bearer = bearer
        self.bearer_prefix = bearer_prefix
        self.page_size = page_size
        self.lock = threading.Lock()  # guards requests, _fail and _connections
        self.requests: list[dict] = []
        self._connections: set = set()  # open client sockets: closed by close()
        self._closing = False
        self._fail = (0, 503)
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):  # quiet
                pass

            def setup(self):
                super().setup()
                with server.lock:
                    server._connections.add(self.connection)
                    if server._closing:  # accepted as close() began: cut at once
                        self.connection.shutdown(socket.SHUT_RDWR)

            def finish(self):
                with server.lock:
                    server._connections.discard(self.connection)
                super().finish()

            def do_HEAD(self):
                server._handle(self, head=True)

            def do_GET(self):
                server._handle(self, head=False)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A client keeps its connections open (libcurl's cache): close() cuts
        # them, then joins each connection's thread, so none outlives the server.
        self._httpd.daemon_threads = False
        self._httpd.block_on_close = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def fail_next(self, n: int, code: int = 503) -> None:
        with self.lock:
            self._fail = (n, code)

    def received(self, method: str | None = None) -> list[dict]:
        with self.lock:
            return [r for r in self.requests if method is None or r["method"] == method]

    def close(self) -> None:
        self._httpd.shutdown()
        with self.lock:
            self._closing = True
            connections = list(self._connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()
        self._thread.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # --- the answers -----------------------------------------------------

    @staticmethod
    def _send(h, code: int, body: bytes = b"", headers=(), head: bool = False) -> None:
        h.record["status"] = code
        h.send_response(code)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head and body:
            h.wfile.write(body)

    def _handle(self, h, head: bool) -> None:
        parsed = urllib.parse.urlsplit(h.path)
        path, query = urllib.parse.unquote(parsed.path), urllib.parse.parse_qs(parsed.query)
        h.record = {"method": h.command, "path": path, "query": parsed.query,
                    "headers": {k.lower(): v for k, v in h.headers.items()}, "status": None}
        with self.lock:
            self.requests.append(h.record)
        if self.bearer is not None and path.startswith(self.bearer_prefix):
            if h.headers.get("Authorization") != f"Bearer {self.bearer}":
                return self._send(h, 401, b"Invalid credentials\n", head=head)
        if path.startswith("/api/"):
            return self._tree(h, path, query, head)
        if self.redirect is not None:
            to = self.redirect(path, parsed.query)
            if to is not None:
                return self._send(h, 302, b"Found\n", [("Location", to)], head=head)
        if self.get_only and head:  # a link signed for GET (an S3 presigned URL)
            return self._send(h, 403, b"<Error><Code>SignatureDoesNotMatch</Code></Error>", head=head)
        if self.token is not None and query.get("token") != [self.token]:
            return self._send(h, 403, b"<Error><Code>AccessDenied</Code></Error>", head=head)
        file = (self.root / path.lstrip("/")).resolve()
        if not str(file).startswith(str(self.root.resolve())) or not file.is_file():
            return self._send(h, 404, b"not found\n", head=head)
        if not head:
            with self.lock:
                n, code = self._fail
                if n > 0:
                    self._fail = (n - 1, code)
            if n > 0:
                return self._send(h, code, b"busy\n", [("Retry-After", "0")])
        data = file.read_bytes()
        etag = f'"{len(data):x}-{int(file.stat().st_mtime_ns):x}"'
        rng = h.headers.get("Range")
        if rng and rng.startswith("bytes="):
            first, _, last = rng[6:].partition("-")
            a, b = int(first), min(int(last) if last else len(data) - 1, len(data) - 1)
            return self._send(h, 206, data[a:b + 1],
                              [("ETag", etag), ("Content-Range", f"bytes {a}-{b}/{len(data)}")], head=head)
        return self._send(h, 200, data, [("ETag", etag)], head=head)

    def _tree(self, h, path: str, query: dict, head: bool) -> None:
        # /api/datasets/ORG/NAME/tree/REV[/DIR]
        parts = path.split("/")
        if len(parts) < 7 or parts[2] != "datasets" or parts[5] != "tree":
            return self._send(h, 404, b"{}", head=head)
        directory = "/".join(parts[7:])
        base = self.root / directory
        entries = []
        for dirpath, dirnames, filenames in os.walk(base):
            for d in sorted(dirnames):
                entries.append({"type": "directory", "path": os.path.relpath(os.path.join(dirpath, d), self.root)})
            for f in sorted(filenames):
                full = os.path.join(dirpath, f)
                entries.append({"type": "file", "path": os.path.relpath(full, self.root),
                                "size": os.path.getsize(full)})
        cursor = int(query.get("cursor", ["0"])[0])
        page = entries[cursor:cursor + self.page_size]
        headers = [("Content-Type", "application/json")]
        if cursor + self.page_size < len(entries):
            nxt = f"{self.url}{urllib.parse.quote(path)}?recursive=true&cursor={cursor + self.page_size}"
            headers.append(("Link", f'<{nxt}>; rel="next"'))
        self._send(h, 200, json.dumps(page).encode(), headers, head=head)
