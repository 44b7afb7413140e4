"""Shared pieces of stoker's side-by-side benchmarks (see ../shared/BENCHMARKS.md).

- ``TreeSampler``: peak memory summed over this process and all its descendants
  (DataLoader workers), read from /proc/<pid>/smaps_rollup by a thread every
  ~50 ms: RSS, PSS, and PSS split into anonymous memory (Pss_Anon + Pss_Shmem:
  what the kernel cannot drop, the figure memory targets are judged on) and
  file-mapped pages (Pss_File: mapped shards and libraries, page cache the
  kernel may drop and reread).
- ``cpu_seconds``: user+sys of this process's whole tree: itself, its live
  descendants (DataLoader's persistent workers, a Ray runtime's raylets and
  worker processes) and every process reaped within it.
- ``hot_cache``: read files once so a run measures a hot page cache.
- ``Stats`` / ``summarize``: median and min-max of repeated measurements.
- ``machine_info``, ``write_json``, ``table``: reporting.

Benchmarks are not tests: nothing here fails on speed.
"""
from __future__ import annotations

import ctypes
import datetime as _dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"


# -- process-tree memory ------------------------------------------------------

def _children(pid: int) -> list[int]:
    """Direct children of pid, from /proc/<pid>/task/*/children (no psutil needed)."""
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    out.extend(int(x) for x in f.read().split())
            except OSError:
                pass
    except OSError:
        pass
    return out


def process_tree(pid: int | None = None) -> list[int]:
    """pid and all its descendants."""
    root = os.getpid() if pid is None else pid
    seen, stack = [], [root]
    while stack:
        p = stack.pop()
        seen.append(p)
        stack.extend(_children(p))
    return seen


# smaps_rollup fields summed over the tree. Pss_Anon + Pss_Shmem is the memory the tree
# owns that the kernel cannot drop (shmem: a DataLoader's batches cross from its workers
# in shared memory); Pss_File is mapped files (shards stoker maps, libraries), page-cache
# pages the kernel drops under pressure and rereads: reported apart, never judged on.
ROLLUP_FIELDS = {"Rss:": "rss", "Pss:": "pss", "Pss_Anon:": "pss_anon", "Pss_Shmem:": "pss_shmem",
                 "Pss_File:": "pss_file"}


def _rollup(pid: int) -> dict[str, int]:
    """Rss, Pss, Pss_Anon, Pss_Shmem, Pss_File of one process in bytes; zeros if it is gone.
    Kernels before 5.13 lack the Pss_* split: there anon and file read 0."""
    out = dict.fromkeys(ROLLUP_FIELDS.values(), 0)
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key = ROLLUP_FIELDS.get(line.split(None, 1)[0]) if line.strip() else None
                if key:
                    out[key] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return out


def tree_rollup(pid: int | None = None) -> dict[str, int]:
    """The tree's memory, bytes: rss, pss, anon (Pss_Anon + Pss_Shmem), file (Pss_File), procs."""
    pids = process_tree(pid)
    total = dict.fromkeys(ROLLUP_FIELDS.values(), 0)
    for p in pids:
        for k, v in _rollup(p).items():
            total[k] += v
    return {"rss": total["rss"], "pss": total["pss"], "anon": total["pss_anon"] + total["pss_shmem"],
            "file": total["pss_file"], "procs": len(pids)}


def tree_memory(pid: int | None = None) -> tuple[int, int, int]:
    """(RSS, PSS, processes) summed over the process tree, bytes."""
    t = tree_rollup(pid)
    return t["rss"], t["pss"], t["procs"]


MEMORY_KINDS = ("rss", "pss", "anon", "file")


class TreeSampler:
    """Samples the tree's memory every `interval` s on a thread; keeps the peaks.

    with TreeSampler() as mem: run()
    mem.peak_rss, mem.peak_pss, mem.peak_anon, mem.peak_file, the same with base_ (just
    before), mem.max_procs. Each peak is that figure's own maximum over the samples.
    """

    def __init__(self, interval: float = 0.05, deferred: bool = False) -> None:
        self.interval = interval
        # deferred: the thread starts at begin(), not at the block's start (the base is taken
        # at the start either way): vision.run_epoch begins it at the first batch, since its
        # reads of /proc (smaps of every process: CPU, the GIL, each process's mm lock) landed
        # on the loader being measured and lengthened its time to first batch (S: 93-128 ms
        # with the sampler against 71-87 without, alternated in one process)
        self.deferred = deferred
        for k in MEMORY_KINDS:
            setattr(self, "base_" + k, 0)
            setattr(self, "peak_" + k, 0)
        self.max_procs = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        t = tree_rollup()
        for k in MEMORY_KINDS:
            setattr(self, "peak_" + k, max(getattr(self, "peak_" + k), t[k]))
        self.max_procs = max(self.max_procs, t["procs"])
        self.samples += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def as_dict(self) -> dict:
        """base_*/peak_* of every figure, max_procs, mem_samples: for a result row."""
        out = {p + k: getattr(self, p + k) for k in MEMORY_KINDS for p in ("base_", "peak_")}
        out.update(max_procs=self.max_procs, mem_samples=self.samples)
        return out

    def __enter__(self) -> "TreeSampler":
        t = tree_rollup()
        for k in MEMORY_KINDS:
            setattr(self, "base_" + k, t[k])
            setattr(self, "peak_" + k, t[k])
        if not self.deferred:
            self.begin()
        return self

    def begin(self) -> None:
        """Starts sampling (once)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="tree-sampler", daemon=True)
            self._thread.start()

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()


class NoSampler(TreeSampler):
    """A TreeSampler that samples nothing (no thread): for runs whose figures are not memory
    and that a sampler thread would disturb (vision.run_epoch(memory=False)); a result row
    then has no memory figures."""

    def __enter__(self) -> "NoSampler":
        return self

    def begin(self) -> None:
        pass

    def as_dict(self) -> dict:
        return {"max_procs": 0, "mem_samples": 0}

    def __exit__(self, *exc) -> None:
        pass


_TICK = os.sysconf("SC_CLK_TCK")


def _own_cpu(pid: int) -> tuple[tuple[int, int], float] | None:
    """((pid, start time), utime+stime in seconds) of pid from /proc/<pid>/stat, or None
    when it is gone. The start time tells a reused pid from the process it replaced."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (pid, int(fields[19])), (int(fields[11]) + int(fields[12])) / _TICK


class _TreeCpu:
    """The CPU this process's tree has used since the first reading: each process's own
    user+sys, read every 0.1 s by a thread and at each reading, summed over every process
    seen (its last reading less its first; one born later counts from 0). A worker that
    exits is kept at its last reading, so the sum never goes back, and a process's CPU is
    never counted twice (its reaper's cutime is not read). Lost: the last 0.1 s of a
    process that exits, and processes that live less than that."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._first: dict = {}
        self._last: dict = {}
        self._started = False

    def _poll(self) -> None:
        with self._lock:
            initial = not self._started
            self._started = True
            for pid in process_tree():
                read = _own_cpu(pid)
                if read is None:
                    continue
                key, cpu = read
                self._first.setdefault(key, cpu if initial else 0.0)
                self._last[key] = cpu

    def _run(self) -> None:
        while True:
            time.sleep(0.1)
            self._poll()

    def seconds(self) -> float:
        if not self._started:
            self._poll()
            threading.Thread(target=self._run, name="tree-cpu", daemon=True).start()
        self._poll()
        with self._lock:
            return sum(self._last[k] - self._first[k] for k in self._last)


_tree_cpu = _TreeCpu()


def cpu_seconds() -> float:
    """user+sys CPU of this process's whole tree (itself, DataLoader's persistent workers,
    a Ray runtime's raylets and worker processes) since the first call: the difference of
    two calls is the tree's CPU between them (see _TreeCpu). os.times() would leave out
    workers that live across both calls until they are reaped."""
    return _tree_cpu.seconds()


def system_busy_seconds() -> float:
    """CPU-seconds all processes on the machine have been busy (from /proc/stat), for the
    share of the machine used by OTHER processes during a run: busy delta - our cpu delta."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return float("nan")
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


# -- page cache -----------------------------------------------------------------

def batches_of(loader, n: int):
    """n batches of a stoker loader, over as many epochs as it takes (set_epoch 0, 1, ...)."""
    epoch = 0
    while True:
        loader.set_epoch(epoch)
        for b in loader:
            yield b
            n -= 1
            if n == 0:
                return
        epoch += 1


def hot_cache(paths: Iterable[os.PathLike | str]) -> int:
    """Reads every file once (hot page cache for what follows); returns bytes read."""
    total = 0
    for p in paths:
        with open(p, "rb", buffering=0) as f:
            while True:
                chunk = f.read(1 << 22)
                if not chunk:
                    break
                total += len(chunk)
    return total


# -- statistics -------------------------------------------------------------------

@dataclass
class Stats:
    median: float
    lo: float
    hi: float
    values: list[float] = field(default_factory=list)

    def fmt(self, digits: int = 0) -> str:
        return f"{self.median:,.{digits}f} [{self.lo:,.{digits}f}–{self.hi:,.{digits}f}]"

    def as_dict(self) -> dict:
        return {"median": self.median, "min": self.lo, "max": self.hi, "values": self.values}


def resident_bytes(paths) -> int | None:
    """Bytes of the files in the page cache (fincore), None if it cannot be told."""
    exe = shutil.which("fincore")
    if exe:
        try:
            r = subprocess.run([exe, "--bytes", "--noheadings", "--output", "RES", *map(str, paths)],
                               capture_output=True, text=True, timeout=60)
            if r.returncode == 0:
                return sum(int(x) for x in r.stdout.split())
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
    return _mincore_bytes(paths)


def _mincore_bytes(paths) -> int | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                              ctypes.c_long]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
        page = os.sysconf("SC_PAGE_SIZE")
        total = 0
        for p in paths:
            size = os.path.getsize(p)
            if not size:
                continue
            fd = os.open(p, os.O_RDONLY)
            try:
                addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
                if addr in (None, ctypes.c_void_p(-1).value):
                    return None
                n = (size + page - 1) // page
                vec = ctypes.create_string_buffer(n)
                if libc.mincore(addr, size, vec) != 0:
                    libc.munmap(addr, size)
                    return None
                total += sum(b & 1 for b in vec.raw) * page
                libc.munmap(addr, size)
            finally:
                os.close(fd)
        return total
    except Exception:  # noqa: BLE001
        return None


def summarize(values: Sequence[float]) -> Stats:
    v = list(values)
    return Stats(statistics.median(v), min(v), max(v), v)


def timed_rate(fn, items: int, reps: int, warmup: int = 1) -> Stats:
    """items/s of fn() over `reps` measured calls after `warmup` discarded ones."""
    for _ in range(warmup):
        fn()
    rates = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        rates.append(items / (time.perf_counter() - t0))
    return summarize(rates)


# -- reporting -----------------------------------------------------------------------

def mib(n: float) -> float:
    return n / (1 << 20)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip()
    except Exception:  # noqa: BLE001 - informational only
        return ""


def machine_info(packages: Sequence[str] = ()) -> dict:
    info = {
        "utc": utc_now(),
        "hostname": platform.node(),
        "cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": _cpu_model(),
        "mem_total_gib": round(_mem_total() / (1 << 30), 1),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "git_commit": _git_commit(),
        "versions": {},
    }
    for name in packages:
        try:
            import importlib

            mod = importlib.import_module(name)
            info["versions"][name] = getattr(mod, "__version__", "?")
        except Exception as e:  # noqa: BLE001
            info["versions"][name] = f"unavailable: {e}"
    return info


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def write_json(name: str, payload: dict, out: str | os.PathLike | None = None) -> Path:
    """bench/results/<name>-<UTC date-time>.json unless `out` names a path."""
    if out is None:
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        path = RESULTS_DIR / f"{name}-{stamp}.json"
    else:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=False) + "\n")
    return path


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[bool] | None = None) -> str:
    """A plain-text table with aligned columns (first column left, others right by default)."""
    cols = len(headers)
    right = right or [i > 0 for i in range(cols)]
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) if rows else len(str(h))
              for i, h in enumerate(headers)]

    def line(cells):
        return "  ".join(str(c).rjust(w) if r else str(c).ljust(w) for c, w, r in zip(cells, widths, right)).rstrip()

    sep = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), sep, *(line(r) for r in rows)])
