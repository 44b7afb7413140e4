"""A slow batch's cause, on runs whose answer is known (issue 44, item 5):
a machine busy with other processes is CPU contention, not a slow stage; a
batch that was ready when asked for is not the loader's slow batch; a run
with nothing wrong blames no stage. (A throttled reader, a slow decoder and a
slow consumer are test_observe.py's.)

The busy machine is made, not hoped for: spinning processes, 2 a core,
started after the rolling median has settled, against a loader whose
threads run at nice 19, so they get a sliver of the cores and the next
batches wait many times the median."""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import stoker
from conftest import jpeg_bytes, natural_image, stoker_env

STAGE_CAUSES = ("storage stall", "decode-bound", "cold page cache", "prefetch drained", "unknown")


@pytest.fixture(scope="module")
def shard(tmp_path_factory) -> str:
    """96 samples of 640x480 JPEGs: a few ms of decode each."""
    import webdataset as wds

    d = tmp_path_factory.mktemp("slow_causes")
    rng = np.random.default_rng(11)
    images = [jpeg_bytes(natural_image(rng, 640, 480), quality=95) for _ in range(4)]
    with wds.TarWriter(str(d / "shard-000000.tar")) as sink:
        for n in range(96):
            sink.write({"__key__": f"c{n:05d}", "jpg": images[n % 4], "cls": b"1"})
    return str(d / "shard-000000.tar")


def fields():
    return {"jpg": stoker.image(256), "cls": stoker.scalar("int64")}


def spinners(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


BUSY_CHILD = """
import itertools, json, os, sys, threading
import stoker
loader = stoker.Loader(sys.argv[1], {"jpg": stoker.image(256), "cls": stoker.scalar("int64")}, batch_size=4,
                       output="numpy", decode_threads=2, io_depth=2, prefetch=1, autotune=False,
                       slow_factor=3.0, slow_floor_s=0.05)
it = iter(loader)
for _ in itertools.islice(it, 8):  # the rolling median, before the machine is taken
    pass
print("ready", flush=True)
sys.stdin.readline()  # the spinners run
# The loader's threads go to nice 19; this thread, the consumer, stays at the
# default, so it asks for each batch on time and the wait is the loader's.
me = threading.get_native_id()
for tid in os.listdir("/proc/self/task"):
    if int(tid) != me:
        os.setpriority(os.PRIO_PROCESS, int(tid), 19)
for _ in itertools.islice(it, 8):  # past the batch or two made before they took the cores
    pass
print(json.dumps(loader.report()["slow_batches"]), flush=True)
"""


def test_a_machine_busy_with_other_processes_is_cpu_contention(shard):
    # The loader's threads run at nice 19, the spinners at the default: its
    # threads get under 1% of a core each, so its batches wait a hundred times
    # the median it set before the spinners began, whatever the machine's
    # speed. (At nice 10 for the whole process, the consumer starved as much as
    # the loader and rarely waited: one batch over the floor, or none.)
    child = subprocess.Popen([sys.executable, "-c", BUSY_CHILD, shard], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, env=stoker_env())
    procs = []
    try:
        assert child.stdout.readline().strip() == "ready"
        procs = spinners(2 * (os.cpu_count() or 1))
        time.sleep(0.3)  # the spinners hold the cores
        child.stdin.write("go\n")
        child.stdin.flush()
        out, _ = child.communicate(timeout=300)
    finally:
        stop(procs)
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0
    slow = json.loads(out.strip().splitlines()[-1])
    causes = [s["cause"] for s in slow]
    assert slow, "no batch was slow while spinners held the cores"
    assert all(c == "cpu contention" for c in causes), [s["line"] for s in slow]
    assert "other processes taking" in slow[0]["line"], slow[0]["line"]


def test_a_batch_ready_at_the_request_is_not_blamed_on_a_stage(shard):
    """The consumer's own process holds the CPU: another Python thread keeps
    the GIL in long stretches, so a request for a batch that is already
    ready still waits. Whatever slow batches that gives name no stage."""
    loader = stoker.Loader(shard, fields(), batch_size=4, output="numpy", decode_threads=1, prefetch=4,
                           autotune=False, slow_factor=3.0, slow_floor_s=0.08)
    stop_flag = threading.Event()

    def hog():  # holds the GIL in long pure-Python runs (sys.setswitchinterval below)
        while not stop_flag.is_set():
            sum(i * i for i in range(200_000))

    it = iter(loader)
    for _ in itertools.islice(it, 8):
        time.sleep(0.05)  # the pipeline fills up: batches are ready when asked for
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.2)
    t = threading.Thread(target=hog)
    t.start()
    try:
        for _ in it:
            time.sleep(0.05)
    finally:
        stop_flag.set()
        t.join()
        sys.setswitchinterval(old)
    slow = loader.report()["slow_batches"]
    loader.close()
    assert not [s for s in slow if s["cause"] in STAGE_CAUSES], [s["line"] for s in slow]


def test_nothing_wrong_blames_no_stage(shard):
    loader = stoker.Loader(shard, fields(), batch_size=4, output="numpy", prefetch=4)
    it = iter(loader)
    for _ in it:
        with loader.step():
            time.sleep(0.02)  # a step longer than a batch's decode
    report = loader.report()
    loader.close()
    # A quiet machine shows no slow batch; a shared one may, and then it
    # names the machine or the consumer, never a stage that was not short.
    assert not [s for s in report["slow_batches"] if s["cause"] in STAGE_CAUSES], \
        [s["line"] for s in report["slow_batches"]]
