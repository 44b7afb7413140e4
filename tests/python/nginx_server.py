"""nginx on 127.0.0.1 serving a directory (HTTP/1.1, range requests), for the
remote-source tests and benchmarks: a real server, started in a temporary
prefix of its own and stopped by close() (or as a context manager).

    with NginxServer(root) as n:
        stoker.Loader(f"{n.url}/shard-{{000..003}}.tar", ...)
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float = 20.0) -> None:
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port}")


class NginxServer:
    # sendfile: off by default; behind the fault proxy it halved small ranged
    # reads here (token windows: 327 -> 172 samples/s), bench/remote.py sets it.
    def __init__(self, root: str | os.PathLike, workers: int = 1, connections: int = 256, sendfile: bool = False):
        self.prefix = Path(tempfile.mkdtemp(prefix="stoker-nginx-"))
        self.port = free_port()
        temp = "".join(f"{k}_temp_path {self.prefix}/{k};\n" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        user = "user root;" if os.geteuid() == 0 else ""  # else workers run as nobody: pytest's tmp is 0700
        (self.prefix / "nginx.conf").write_text(
            f"daemon off; worker_processes {workers}; pid {self.prefix}/nginx.pid; {user}\n"
            f"error_log {self.prefix}/error.log;\nevents {{ worker_connections {connections}; }}\n"
            f"http {{ access_log off; sendfile {'on' if sendfile else 'off'}; {temp}\n"
            f"  server {{ listen 127.0.0.1:{self.port}; root {root}; location / {{ }} }} }}\n")
        self._proc = subprocess.Popen([NGINX, "-e", f"{self.prefix}/error.log", "-p", str(self.prefix), "-c",
                                       str(self.prefix / "nginx.conf")])
        try:
            wait_port(self.port)
        except Exception:
            self.close()
            raise

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def close(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)
        shutil.rmtree(self.prefix, ignore_errors=True)

    def __enter__(self) -> "NginxServer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
