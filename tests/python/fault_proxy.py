"""A fault-injecting HTTP/1.1 proxy on loopback, in front of a real server
(nginx, moto), for the remote-source tests and the benchmark.

Each request from a client is forwarded upstream and its response delivered,
or damaged, according to the proxy's script: a list of actions applied to
requests in arrival order (cycled), each one of

    "pass"            deliver as is
    "reset:N"         send the headers and N body bytes, then a TCP reset
    "short:N"         send the headers and N body bytes, then a clean close
    "status:503"      answer 503 (or any code) without asking upstream
    "stall:S"         wait S seconds (past the client's deadline), then close

A "pass" streams the response (os.splice) on an upstream connection kept per
client connection; a fault reads it whole on a connection of its own, then
cuts it. `latency` seconds are added to every request. Only requests whose method is in
`methods` consume script entries (default GET: bodies). Counters: requests,
faults, GETs per path and per (path, Range). Threads: one per client connection; the script index is under a lock.
"""
from __future__ import annotations

import collections
import fcntl
import os
import socket
import struct
import threading
import time


class FaultProxy:
    def __init__(self, upstream_port: int, script=None, latency: float = 0.0, methods=("GET",)):
        self.upstream_port = upstream_port
        self.script = list(script or ["pass"])
        self.latency = latency
        self.methods = set(methods)
        self.lock = threading.Lock()  # guards the counters and the script position
        self.requests = 0
        self.faults = 0
        self.gets = collections.Counter()  # path -> GET requests
        self.ranges = collections.Counter()  # (path, Range header or "") -> GET requests
        self.log = []  # (time.monotonic_ns() at receipt, method, path, Range header or "") of every request
        self._next = 0
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(128)
        self.port = self._sock.getsockname()[1]
        self._stop = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set(self, script=None, latency=None):
        with self.lock:
            if script is not None:
                self.script = list(script)
                self._next = 0
            if latency is not None:
                self.latency = latency

    def close(self):
        self._stop = True
        try:
            self._sock.close()
        except OSError:
            pass

    def _action(self, method: str, path: str = "", byte_range: str = "") -> str:
        with self.lock:
            self.requests += 1
            self.log.append((time.monotonic_ns(), method, path, byte_range))
            if method == "GET":
                self.gets[path] += 1
                self.ranges[(path, byte_range)] += 1
            if method not in self.methods:
                return "pass"
            a = self.script[self._next % len(self.script)]
            self._next += 1
            if a != "pass":
                self.faults += 1
            return a

    def _accept(self):
        while not self._stop:
            try:
                c, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    @staticmethod
    def _read_head(sock, buf: bytearray):
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            if not chunk:
                return None
            buf += chunk
        i = buf.index(b"\r\n\r\n") + 4
        head = bytes(buf[:i])
        del buf[:i]
        return head

    @staticmethod
    def _header(head: bytes, name: bytes):
        for line in head.split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == name:
                return v.strip()
        return None

    @staticmethod
    def _content_length(head: bytes):
        v = FaultProxy._header(head, b"content-length")
        return None if v is None else int(v)

    def _upstream(self, request: bytes, method: str):
        u = socket.create_connection(("127.0.0.1", self.upstream_port))
        try:
            u.sendall(request)
            buf = bytearray()
            head = self._read_head(u, buf)
            if head is None:
                return None, b""
            code = int(head.split(b" ", 2)[1])
            n = self._content_length(head)
            if method == "HEAD" or code in (204, 304):
                return head, b""
            if n is None:  # read to close
                while True:
                    chunk = u.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
                return head, bytes(buf)
            while len(buf) < n:
                chunk = u.recv(max(65536, n - len(buf)))
                if not chunk:
                    break
                buf += chunk
            return head, bytes(buf[:n])
        finally:
            u.close()

    def _relay(self, c: socket.socket, request: bytes, method: str, up: list) -> bool:
        """A "pass": the upstream response streamed to the client as it arrives,
        its body moved by os.splice (the bytes stay in the kernel), on an
        upstream connection kept for the client connection's next requests
        (`up`: [socket or None]), so the proxy adds its latency and little CPU
        on the machine it shares with the client under test. False when the
        client connection must close."""
        for _ in range(2):  # a kept connection the server closed meanwhile: once more on a new one
            fresh = up[0] is None
            if fresh:
                up[0] = socket.create_connection(("127.0.0.1", self.upstream_port))
            u = up[0]
            buf = bytearray()
            try:
                u.sendall(request)
                head = self._read_head(u, buf)
            except OSError:
                head = None
            if head is not None:
                break
            u.close()
            up[0] = None
            if fresh:
                return False
        else:
            return False
        try:
            code = int(head.split(b" ", 2)[1])
            n = self._content_length(head)
            keep = b"connection: close" not in head.lower()
            if method == "HEAD" or code in (204, 304):
                c.sendall(head)
            elif n is None:  # read to close, then deliver (not used by nginx or moto for GET)
                while True:
                    chunk = u.recv(65536)
                    if not chunk:
                        break
                    buf += chunk
                c.sendall(head + bytes(buf))
                keep = False
            else:
                first = bytes(buf[:n])
                c.sendall(head + first)
                _move(u, c, n - len(first))
        except BaseException:
            u.close()
            up[0] = None
            raise
        if not keep:
            u.close()
            up[0] = None
        return keep

    def _serve(self, c: socket.socket):
        buf = bytearray()
        up = [None]  # the upstream connection passed requests reuse
        try:
            while not self._stop:
                head = self._read_head(c, buf)
                if head is None:
                    return
                method = head.split(b" ", 1)[0].decode()
                n = self._content_length(head) or 0
                while len(buf) < n:
                    chunk = c.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                body = bytes(buf[:n])
                del buf[:n]
                action = self._action(method, head.split(b" ", 2)[1].decode(),
                                      (self._header(head, b"range") or b"").decode())
                if self.latency:
                    time.sleep(self.latency)
                kind, _, arg = action.partition(":")
                if kind == "status":
                    msg = b"injected fault\n"
                    c.sendall(b"HTTP/1.1 %d Injected\r\nContent-Length: %d\r\nContent-Type: text/plain\r\n\r\n"
                              % (int(arg), len(msg)) + (msg if method != "HEAD" else b""))
                    continue
                if kind == "stall":
                    time.sleep(float(arg))
                    return
                if kind == "pass":
                    if not self._relay(c, head + body, method, up):
                        return
                    continue
                rhead, rbody = self._upstream(head + body, method)
                if rhead is None:
                    return
                if kind in ("reset", "short"):
                    cut = min(int(arg), max(len(rbody) - 1, 0))
                    c.sendall(rhead + rbody[:cut])
                    if kind == "reset":
                        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    return
                c.sendall(rhead + rbody)
                if b"connection: close" in rhead.lower():
                    return
        except OSError:
            return
        finally:
            if up[0] is not None:
                up[0].close()
            c.close()


def _move(src: socket.socket, dst: socket.socket, n: int) -> None:
    """n bytes from src to dst: through a pipe with os.splice where there is one."""
    if n <= 0:
        return
    if not hasattr(os, "splice"):
        while n > 0:
            chunk = src.recv(min(n, 1 << 20))
            if not chunk:
                raise OSError("upstream closed mid-body")
            dst.sendall(chunk)
            n -= len(chunk)
        return
    r, w = os.pipe()
    try:
        try:
            fcntl.fcntl(w, 1031, 1 << 20)  # F_SETPIPE_SZ: up to 1 MiB a move
        except OSError:
            pass
        while n > 0:
            k = os.splice(src.fileno(), w, min(n, 1 << 20))
            if k == 0:
                raise OSError("upstream closed mid-body")
            n -= k
            while k > 0:
                k -= os.splice(r, dst.fileno(), k)
    finally:
        os.close(r)
        os.close(w)


if __name__ == "__main__":  # a standalone proxy (the benchmark runs it in its own process)
    import argparse
    import sys

    ap = argparse.ArgumentParser(description="fault-injecting HTTP proxy on 127.0.0.1")
    ap.add_argument("--upstream", type=int, required=True, help="upstream port on 127.0.0.1")
    ap.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    ap.add_argument("--script", default="pass", help="comma list of actions (see the module doc)")
    a = ap.parse_args()
    proxy = FaultProxy(a.upstream, script=a.script.split(","), latency=a.latency)
    print(proxy.port, flush=True)
    try:
        sys.stdin.read()  # runs until stdin closes
    finally:
        proxy.close()
