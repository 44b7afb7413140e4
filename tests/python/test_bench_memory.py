"""bench/common.py's process-tree memory: the suite's memory target is judged on
anonymous memory (Pss_Anon + Pss_Shmem), with mapped file pages (Pss_File) apart,
because PSS also counts page-cache pages of mapped shards that the kernel may drop.
Checked against what this test itself allocates and maps, and a forked child's."""
from __future__ import annotations

import mmap
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import common  # noqa: E402

MIB = 1 << 20
SIZE = 64 * MIB

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/smaps_rollup").exists() or "Pss_Anon:" not in Path("/proc/self/smaps_rollup").read_text(),
    reason="needs /proc/<pid>/smaps_rollup with the Pss_Anon/Pss_File split (Linux 5.13+)")


def test_anonymous_memory_counts_as_anon_not_file():
    before = common.tree_rollup()
    block = bytearray(SIZE)  # zero-filled by the allocator's fresh mapping: touch every page
    block[::4096] = b"\x01" * (SIZE // 4096)
    after = common.tree_rollup()
    assert after["anon"] - before["anon"] >= 0.9 * SIZE
    assert abs(after["file"] - before["file"]) < 0.25 * SIZE
    del block


def test_mapped_file_pages_count_as_file_not_anon(tmp_path):
    path = tmp_path / "shard.bin"
    path.write_bytes(os.urandom(SIZE))
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
        before = common.tree_rollup()
        total = sum(m[i] for i in range(0, SIZE, 4096))  # fault every page in
        after = common.tree_rollup()
    assert total == sum(path.read_bytes()[::4096])  # every page was read, as the file holds it
    assert after["file"] - before["file"] >= 0.9 * SIZE
    assert abs(after["anon"] - before["anon"]) < 0.25 * SIZE


def test_a_forked_childs_private_memory_is_in_the_tree_once():
    parent_alone = common.tree_rollup()
    r, w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own 64 MiB, then wait to be measured
        try:
            block = bytearray(SIZE)
            block[::4096] = b"\x02" * (SIZE // 4096)
            os.write(w, b"1")
            os.read(go_r, 1)
        finally:
            os._exit(0)
    try:
        assert os.read(r, 1) == b"1"
        with common.TreeSampler(0.01) as mem:
            tree = common.tree_rollup()
            child = common.tree_rollup(pid)
        assert tree["procs"] >= 2 and child["procs"] == 1
        assert child["anon"] >= 0.9 * SIZE
        # pages the child shares with the parent (copy-on-write) are shared fairly, not
        # counted twice: the tree grew by about the child's own block, not by a second parent
        assert tree["anon"] - parent_alone["anon"] < SIZE + 0.5 * parent_alone["anon"]
        assert mem.peak_anon >= tree["anon"] - 0.1 * SIZE
        assert mem.peak_anon >= mem.base_anon
        d = mem.as_dict()
        assert {"peak_anon", "base_anon", "peak_file", "base_file", "peak_pss", "peak_rss"} <= set(d)
    finally:
        os.write(go_w, b"1")
        os.waitpid(pid, 0)
        for fd in (r, w, go_r, go_w):
            os.close(fd)


def test_no_sampler_starts_no_thread_and_reports_no_memory():
    import threading

    before = {t.name for t in threading.enumerate()}
    with common.NoSampler() as mem:
        assert "tree-sampler" not in {t.name for t in threading.enumerate()} - before
    d = mem.as_dict()
    assert not any(k.startswith(("peak_", "base_")) for k in d), d
