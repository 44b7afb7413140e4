"""`stoker doctor` against a known answer.

The doctor measures per-sample costs and derives a configuration from them
without searching. These tests check its answer's form and the diagnoses with
a known answer (storage throttled through --max-read-mbps to a fiftieth of
what decode does must read as storage); others check the text layout and the
loose-folder mode. How fast its pick runs against a grid it never saw is a
benchmark: `bash bench/run.sh --doctor` (bench/doctor_grid.py).

The binary: conftest.stoker_bin() ($STOKER_BIN, the package's, a build tree's).
"""
from __future__ import annotations

import json
import subprocess

import pytest

from conftest import stoker_bin

STOKER = stoker_bin()
FIELDS = ["-f", "jpg:image:224", "-f", "cls:scalar:int64"]
BATCH = 32


def _has_doctor() -> bool:
    if STOKER is None:
        return False
    return subprocess.run([STOKER, "doctor", "--help"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _has_doctor(), reason="no stoker binary with the doctor subcommand")


def run(*args, timeout=120) -> str:
    proc = subprocess.run([STOKER, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"stoker {' '.join(map(str, args))} failed:\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def imagenet(tmp_path_factory):
    d = tmp_path_factory.mktemp("doctor")
    # ImageNet-like JPEGs at the real size (decode cost matters here), a few
    # hundred so an epoch takes a fraction of a second.
    run("synth", d, "--kind", "imagenet", "--count", 480, "--layout", "shards", "--shard-size", "4MB", "--quiet")
    shards = sorted(d.glob("imagenet-*.tar"))
    assert len(shards) >= 2
    return shards


def bench_rate(shards, io_depth, decode_threads, prefetch, epochs=3) -> float:
    out = run("bench", *shards, *FIELDS, "-b", BATCH, "--io-depth", io_depth, "--decode-threads", decode_threads,
              "--prefetch", prefetch, "--epochs", epochs, "--json")
    report = json.loads(out)
    # Epoch 0 warms up (shard opens, first fill); the rest are measured.
    later = report["epochs"][1:]
    return sum(e["samples"] for e in later) / sum(e["seconds"] for e in later)


def test_recommendation_fits_what_the_doctor_measured(imagenet):
    """The doctor's answer is complete and consistent with its own
    measurements. Whether its pick is as fast as the best hand setting is a
    speed claim: `bash bench/run.sh --doctor` measures it against a grid."""
    # A step no input pipeline here can meet: the doctor must maximise throughput.
    doc = json.loads(run("doctor", *imagenet, *FIELDS, "-b", BATCH, "--step-ms", 1, "--run-seconds", 1.5, "--json"))
    verdict, rec = doc["verdict"], doc["recommended"]
    assert verdict["step_met"] is False
    assert verdict["required_samples_per_s"] == pytest.approx(BATCH / 1e-3)
    assert verdict["bottleneck"] in ("decode", "storage", "consumer", "cpu"), verdict["reason"]
    assert doc["prediction"]["limit"] in ("decode", "storage"), doc["prediction"]
    assert doc["page_cache"]["fits_in_memory"] is True
    assert 0 <= doc["page_cache"]["resident_before"] <= 1
    assert doc["decode"]["s_per_sample_per_core"] > 0
    assert doc["storage"]["sequential"]["bytes_per_s"] > 0 and doc["storage"]["random"]["reads"] > 0
    assert doc["index"]["sidecars"] == len(imagenet)
    assert rec["io_depth"] >= 1 and rec["decode_threads"] >= 1 and rec["prefetch_batches"] >= 1, rec


def test_throttled_storage_is_diagnosed_as_storage(imagenet):
    # 2 MB/s of ~22 KB samples is ~90 samples/s, far below what decode does.
    doc = json.loads(run("doctor", *imagenet, *FIELDS, "-b", 8, "--step-ms", 10, "--max-read-mbps", 2,
                         "--run-seconds", 1, "--json"))
    assert doc["verdict"]["bottleneck"] == "storage", doc["verdict"]["reason"]
    assert doc["prediction"]["limit"] == "storage"
    assert doc["default_run"]["bottleneck"] == "storage", doc["default_run"]["reason"]
    assert doc["verdict"]["step_met"] is False
    assert doc["storage"]["max_read_bytes_per_s"] == 2_000_000
    # The cores it counts are this process's share, with where they came from (core/cpu_share.h).
    assert doc["machine"]["cores_from"].startswith(f"{doc['machine']['cores']} core"), doc["machine"]
    # Measured throughput is held near the cap: bytes/s over sample bytes.
    cap_rate = 2e6 / doc["dataset"]["sample_bytes"]
    assert doc["verdict"]["measured_samples_per_s"] < 1.5 * cap_rate


def test_easy_step_is_met_and_text_output_leads_with_the_verdict(imagenet):
    # 8 samples per second: any configuration keeps up, one decoder is enough.
    text = run("doctor", *imagenet, *FIELDS, "-b", 8, "--step-ms", 1000, "--run-seconds", 0.5, "--budget-mb", 64)
    lines = text.splitlines()
    assert lines[0].startswith("verdict: INPUT KEEPS UP"), text
    assert "headroom" in lines[0] and "NOT met" not in lines[0]
    assert lines[1].startswith("recommend: --io-depth ") and "--decode-threads 1 " in lines[1], text
    assert lines[2].startswith("memory:") and "64.00 MB budget" in lines[2], text
    for label in ("page cache", "storage", "cores", "decode", "index", "predicted", "run defaults",
                  "run recommend"):
        assert any(line.startswith(label) for line in lines), (label, text)


def test_loose_folder_is_measured_and_packing_suggested(tmp_path):
    run("synth", tmp_path / "loose", "--kind", "imagenet", "--count", 60, "--image-size", "160x120", "--quiet")
    doc = json.loads(run("doctor", tmp_path / "loose", *FIELDS, "--json"))
    assert doc["verdict"]["layout"] == "loose"
    assert doc["verdict"]["suggest"].startswith("stoker pack ")
    assert doc["dataset"]["files"] == 60
    whole = doc["storage"]["whole_files"]
    assert whole["reads"] == 60 and whole["bytes"] == doc["dataset"]["bytes"]
