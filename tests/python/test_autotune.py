"""The online controller from Python: under a scripted slow storage (the
engine's bandwidth cap) it changes settings mid-epoch, each change is logged
once and reported, and the stream stays what a fixed-setting run gives; a
value the user passes stays fixed; autotune=False keeps the start."""
from __future__ import annotations

import hashlib
import json
import logging

import numpy as np
import pytest

import stoker
from stoker.report import write_report
from html import escape as html_escape
from conftest import write_vision_shards

FIELDS = {"jpg": stoker.image(32), "cls": stoker.scalar("int64")}


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("autotune")
    write_vision_shards(d, shards=4, per_shard=32, seed=3)
    return str(d / "shard-{000000..000003}.tar")


def stream(loader, epochs: int = 1) -> list[tuple]:
    """Every batch of `epochs` epochs as (keys, index, a digest of its pixels and labels)."""
    out = []
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for batch in loader:
            digest = hashlib.sha256(batch["jpg"].numpy().tobytes() + batch["cls"].numpy().tobytes()).hexdigest()
            out.append((tuple(batch["__key__"]), tuple(batch["__index__"].tolist()), digest))
    return out


def test_settings_say_what_is_in_effect_and_which_knobs_the_user_fixed(shards):
    auto = stoker.Loader(shards, FIELDS, batch_size=8)
    s = auto.settings
    assert s["autotune"] is True and s["fixed"] == []
    assert s["io_depth"] == 4 and s["prefetch"] == 2 and s["decode_threads"] >= 1 and s["changes"] == 0
    given = stoker.Loader(shards, FIELDS, batch_size=8, io_depth=3, prefetch=5, decode_threads=1)
    s = given.settings
    assert sorted(s["fixed"]) == ["decode_threads", "io_depth", "prefetch"]
    assert (s["io_depth"], s["prefetch"], s["decode_threads"]) == (3, 5, 1)
    off = stoker.Loader(shards, FIELDS, batch_size=8, autotune=False)
    assert off.settings["autotune"] is False
    for loader in (auto, given, off):
        loader.close()


def test_changes_mid_epoch_leave_the_stream_identical_and_are_logged_once(shards, caplog, tmp_path):
    # ~1 MB of samples at 600 KB/s: reads wait on the cap, decoders idle,
    # the loop waits: the controller tries more reads in flight (and, as the
    # cap holds, more prefetch), each mid-epoch.
    cap = 600_000
    reference = stoker.Loader(shards, FIELDS, batch_size=4, shuffle=True, seed=1, autotune=False,
                              max_read_bytes_per_s=cap)
    expected = stream(reference, 2)
    assert reference.settings["changes"] == 0
    reference.close()
    # Independent of both runs: the plan's order is a permutation of the dataset.
    for e in (expected[:32], expected[32:]):
        assert sorted(i for _, idx, _ in e for i in idx) == list(range(128))
    assert expected[:32] != expected[32:]  # two epochs, two orders

    caplog.set_level(logging.INFO, logger="stoker")
    jsonl = tmp_path / "run.jsonl"
    tuned = stoker.Loader(shards, FIELDS, batch_size=4, shuffle=True, seed=1, max_read_bytes_per_s=cap,
                          jsonl=jsonl, trace_spans=1000)
    got = stream(tuned, 2)
    changes = tuned._native.tune_log()
    assert changes, "the controller changed nothing under a capped storage"
    assert any(c["knob"] == "io_depth" for c in changes)
    assert got == expected
    assert 1 <= tuned.settings["io_depth"] <= 16  # the local ceiling
    assert "reads wait" in changes[0]["reason"] and "readers busy" in changes[0]["reason"]

    report = tuned.report()
    assert report["tuning"]["changes"] == changes
    assert report["tuning"]["settings"]["io_depth"] == tuned.settings["io_depth"]
    tuned.save_trace(tmp_path / "trace.json")
    tuned.close()
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("stoker: ") and " \u2192 " in r.getMessage()]
    assert logged == ["stoker: " + c["line"] for c in changes]  # once each, in order
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [r["line"] for r in records if r["type"] == "tune"] == [c["line"] for c in changes]
    html = write_report(jsonl, tmp_path / "report.html").read_text()
    assert all(html.count(html_escape(c["line"])) == 1 for c in changes)
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert [e["name"] for e in trace["traceEvents"] if e.get("cat") == "autotune"] == [c["line"] for c in changes]


def test_a_value_the_user_passes_stays_fixed(shards):
    loader = stoker.Loader(shards, FIELDS, batch_size=4, shuffle=True, seed=1, io_depth=4,
                           max_read_bytes_per_s=600_000)
    stream(loader)
    assert all(c["knob"] != "io_depth" for c in loader._native.tune_log())
    assert loader.settings["io_depth"] == 4 and "io_depth" in loader.settings["fixed"]
    loader.close()


def test_autotune_off_changes_nothing(shards):
    loader = stoker.Loader(shards, FIELDS, batch_size=4, autotune=False, max_read_bytes_per_s=600_000)
    stream(loader)
    assert loader._native.tune_log() == []
    loader.close()
