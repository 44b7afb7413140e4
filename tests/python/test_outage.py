"""A remote store that stops answering in mid-epoch, with default retry
settings: every request 503, then every connection reset, then a server that
accepts and sends nothing. The run must go on and deliver the stream of a
local run, the log must name the outage, and its slow batch must be blamed
on it. Permanent answers (403, 404) must fail at once.

Each phase lasts STOKER_OUTAGE_PHASE_S seconds (default 4, so CI stays fast);
`STOKER_OUTAGE_PHASE_S=20` is the issue's 60 s outage."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

import stoker
from stoker import _stoker

from conftest import stoker_env

from test_remote import (FIELDS, SHARDS, assert_same, batches_of, data, http_proxy, nginx,  # noqa: F401 - fixtures
                         stream)

PHASE_S = float(os.environ.get("STOKER_OUTAGE_PHASE_S", "4"))


@pytest.fixture(autouse=True)
def default_io_options():
    """The defaults a new process has (other test modules override them)."""
    _stoker.reset_io_options()
    yield


def run_outage(proxy, phases):
    """Plays (script, seconds) phases on the proxy, then lets everything pass."""
    for script, seconds in phases:
        proxy.set(script=script)
        time.sleep(seconds)
    proxy.set(script=["pass"])


def test_a_mid_epoch_outage_costs_time_not_the_run(data, http_proxy, capfd):
    root, _ = data
    # The remote default shuffle is blocks of 16 (docs/guides/shuffling.md, "Shuffle quality"): the same order locally.
    local = stream(str(root / "plain" / SHARDS), shuffle=True, seed=5, batch_size=2, shuffle_block=16)
    http_proxy.set(script=["pass"], latency=0)
    # batch 2, prefetch 1 and no read-ahead: most reads happen after the outage begins.
    loader = stoker.Loader(f"{http_proxy.url}/plain/{SHARDS}", FIELDS(), output="numpy", batch_size=2,
                           drop_last=False, shuffle=True, seed=5, io_depth=2, decode_threads=1, prefetch=1,
                           read_ahead_batches=0, slow_floor_s=1.0)
    it = iter(loader)
    got = batches_of_iter(it, 6)  # past the observer's min_history (5)
    outage = threading.Thread(target=run_outage, args=(http_proxy, [
        (["status:503"], PHASE_S), (["reset:0"], PHASE_S), (["stall:60"], PHASE_S)]))
    t0 = time.time()
    outage.start()
    try:
        got += batches_of_iter(it, None)
    finally:
        outage.join()
    elapsed = time.time() - t0
    assert_same(got, local)
    assert elapsed >= 2 * PHASE_S  # it did wait the outage out
    err = capfd.readouterr().err
    # The start line, unless a line was written in the 10 s before (then the
    # line every 10 s while it lasts): one of the two names the outage.
    assert ("stoker: remote fault, retrying for up to 120 s" in err
            or "stoker: remote storage failing for" in err), err
    assert "HTTP 503" in err, err
    assert "stoker: remote storage answers again after" in err, err
    slow = loader.report()["slow_batches"]
    outages = [s for s in slow if s["cause"] == "remote outage"]
    assert outages, slow
    assert "no remote request succeeded for" in outages[0]["line"], outages[0]


def batches_of_iter(it, n):
    """Up to n batches (all when None) of an iterator, as batches_of copies them."""
    out = []
    for b in it:
        out += batches_of([b])
        if n is not None and len(out) >= n:
            break
    return out


@pytest.mark.parametrize("status", [403, 404])
def test_permanent_answers_fail_at_once(data, http_proxy, status):
    if status == 403:
        http_proxy.set(script=["status:403"])
        url = f"{http_proxy.url}/indexed/{SHARDS}"  # the index sidecar's GET is refused
    else:
        http_proxy.set(script=["pass"])
        url = f"{http_proxy.url}/plain/missing-{{000000..000001}}.tar"
    t0 = time.time()
    try:
        with pytest.raises(stoker.StokerError) as e:
            list(stoker.Loader(url, FIELDS(), output="numpy", batch_size=4))
    finally:
        http_proxy.set(script=["pass"])
    # At once, not after the 120 s retry deadline (about 0.1 s here; 10 s
    # is room for a loaded machine and still far from a retry loop).
    assert time.time() - t0 < 10.0
    assert f"HTTP {status}" in str(e.value) and http_proxy.url in str(e.value), e.value


EXIT_AFTER_ERROR = """
import sys, stoker
loader = stoker.Loader(sys.argv[1], {"jpg": stoker.image(32), "cls": stoker.scalar()}, batch_size=2,
                       retry_deadline_s=1.5, prefetch=1)
it = iter(loader)
next(it)
print("first batch", flush=True)
for batch in it:  # the proxy answers 503 from here on: raises after the deadline, uncaught
    pass
"""


def test_an_uncaught_remote_error_exits_cleanly(data, http_proxy, tmp_path):
    """The interpreter's exit after an uncaught error in mid-retry frees every
    native object (no "nanobind: leaked N instances" at shutdown)."""
    http_proxy.set(script=["pass"], latency=0)
    script = tmp_path / "exit_after_error.py"
    script.write_text(EXIT_AFTER_ERROR)
    proc = subprocess.Popen([sys.executable, str(script), f"{http_proxy.url}/plain/{SHARDS}"], env=stoker_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "first batch"
        http_proxy.set(script=["status:503"])
        out, err = proc.communicate(timeout=60)
    finally:
        http_proxy.set(script=["pass"])
        proc.kill()
    assert proc.returncode == 1, err[-2000:]
    assert "stoker.StokerError" in err and "HTTP 503" in err, err[-2000:]
    assert "leaked" not in err, err[-2000:]
