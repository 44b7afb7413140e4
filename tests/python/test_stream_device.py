"""Stream mode (stream=True) on the batches' device, proven on CPU: a stream
runs the indexed mode's engine after a sample's bytes, so its batches take the
early device copy and GPU decode as the indexed mode's do. device="cpu-late"
(tests only) stands a CPU copy engine for the copy stream (it checks by
checksum that no pool slot is rewritten while its copy is in flight) and a
stand-in for nvJPEG (device/gpu_decoder.h). Each case compares the stream with
the same stream on the host, decoded on the CPU, byte for byte, two epochs
along the stream; where pixels are compared, Pillow (decode and antialiased
bilinear resize) is the reference. On a GPU: tests/python/test_cuda.py and
tests/python/test_gpu_decode_device.py run the indexed mode."""
from __future__ import annotations

import io
from contextlib import closing

import numpy as np
import pytest
import torch
import webdataset as wds
from PIL import Image

import stoker
from conftest import jpeg_bytes, natural_image, npz_bytes

SHARDS, PER_SHARD, BATCH = 3, 12, 4
TOTAL = SHARDS * PER_SHARD
SIZE = (40, 56)  # (height, width) of the decoded images


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Pillow JPEGs of several sizes and subsamplings, an npz and the sample's number;
    sample 7's JPEG is a progressive one (the GPU decoder refuses it: the CPU decodes it).
    Returns (shard paths, number -> JPEG bytes)."""
    root = tmp_path_factory.mktemp("stream-device")
    rng = np.random.default_rng(11)
    jpgs = {}
    for s in range(SHARDS):
        with wds.TarWriter(str(root / f"shard-{s:06d}.tar")) as sink:
            for i in range(s * PER_SHARD, (s + 1) * PER_SHARD):
                w, h = 90 + 7 * (i % 5), 70 + 5 * (i % 3)
                jpgs[i] = jpeg_bytes(natural_image(rng, w, h), subsampling=i % 3, progressive=i == 7)
                sink.write({"__key__": f"s{i:04d}", "jpg": jpgs[i],
                            "features.npz": npz_bytes({"f": rng.standard_normal(6).astype(np.float32)}),
                            "cls": str(i).encode()})
    return [str(root / f"shard-{s:06d}.tar") for s in range(SHARDS)], jpgs


def fields(decode="cpu", resize="stretch"):
    return {"jpg": stoker.image(SIZE, resize=resize, layout="HWC", decode=decode),
            "features.npz": stoker.npz(), "cls": stoker.scalar("int64")}


def stream(shards, device="cpu", decode="cpu", resize="stretch", **kw):
    return stoker.Loader(shards, fields(decode, resize), batch_size=BATCH, stream=True, samples_per_epoch=TOTAL,
                         shuffle=True, shuffle_buffer=8, seed=4, decode_threads=2, device=device,
                         _late_copy_ms=2, **kw)


def epochs(loader, n=2) -> list[dict]:
    """Every batch of `n` epochs along the stream, each array as a numpy copy."""
    out = []
    with closing(loader):
        for epoch in range(n):
            loader.set_epoch(epoch)
            for b in loader:
                flat = {}
                for k, v in b.items():
                    for name, t in (v.items() if isinstance(v, dict) else [(k, v)]):
                        if isinstance(t, torch.Tensor):
                            flat[name] = t.clone().numpy()
                out.append(flat)
        report = loader.report()
    return out, report


def assert_same(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want) == 2 * TOTAL // BATCH
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for k in w:
            np.testing.assert_array_equal(g[k], w[k], err_msg=k)


def pillow(jpg: bytes) -> np.ndarray:
    """The reference: Pillow's decode and antialiased bilinear resize (what resize="stretch" is)."""
    return np.asarray(Image.open(io.BytesIO(jpg)).convert("RGB").resize(SIZE[::-1], Image.BILINEAR))


def test_a_streams_device_copy_is_issued_early_and_equals_the_host_stream(data):
    shards, jpgs = data
    want, _ = epochs(stream(shards))
    got, report = epochs(stream(shards, device="cpu-late", prefetch=2))
    assert_same(got, want)
    h2d = report["h2d"]
    assert h2d["overwrites"] == 0, "a pool slot was rewritten while its copy was in flight"
    # Every batch's copy issued by the decoder that completed it, none at delivery (as the indexed mode's).
    assert h2d["early"] >= len(want) and h2d["at_delivery"] == 0, h2d
    assert 0 < h2d["device_buffers_peak"] <= 2 + 1  # prefetch and the batch in use
    for b in got:  # the pixels are Pillow's
        for slot, n in enumerate(b["cls"]):
            np.testing.assert_array_equal(b["jpg"][slot], pillow(jpgs[int(n)]), err_msg=f"sample {n}")


@pytest.mark.parametrize("decode", ["gpu", "auto"])
def test_a_stream_decodes_on_the_device_as_the_host_stream_on_the_cpu(data, decode):
    shards, jpgs = data
    want, _ = epochs(stream(shards))
    got, report = epochs(stream(shards, device="cpu-late", decode=decode))
    assert_same(got, want)
    for b in got:
        for slot, n in enumerate(b["cls"]):
            np.testing.assert_array_equal(b["jpg"][slot], pillow(jpgs[int(n)]), err_msg=f"sample {n}")
    gpu = report["gpu_decode"]
    assert gpu["decoder"] == "stand-in"
    assert report["h2d"]["overwrites"] == 0 and report["h2d"]["early"] >= len(want)
    if decode == "gpu":
        assert gpu["share"] == 1.0 and gpu["gpu_images"] >= 2 * (TOTAL - 1)
        assert gpu["fallbacks"].get("progressive", 0) >= 2  # sample 7, once an epoch
    else:
        assert gpu["gpu_images"] + gpu["cpu_images"] >= 2 * TOTAL and gpu["why"]


def test_a_streams_skipped_sample_repeats_a_neighbours_gpu_pixels(data, tmp_path):
    """on_error="skip" in a stream: a corrupt JPEG's slot repeats the batch's next good slot,
    whose JPEG was staged for the GPU decoder: it gets that slot's decoded pixels."""
    shards, jpgs = data
    corrupt = str(tmp_path / "corrupt.tar")
    rng = np.random.default_rng(3)
    with wds.TarWriter(corrupt) as sink:
        for i in range(100, 100 + PER_SHARD):
            jpgs[i] = jpeg_bytes(natural_image(rng, 80, 64))
            jpg = jpgs[i][:700] if i == 105 else jpgs[i]  # cut inside the scan
            sink.write({"__key__": f"s{i:04d}", "jpg": jpg,
                        "features.npz": npz_bytes({"f": np.zeros(6, np.float32)}), "cls": str(i).encode()})
    sources = shards[:2] + [corrupt]
    cpu = stream(sources, on_error="skip")
    want, _ = epochs(cpu)
    gpu = stream(sources, device="cpu-late", decode="gpu", on_error="skip")
    got, report = epochs(gpu)
    assert_same(got, want)
    assert gpu.skips["skipped"] == cpu.skips["skipped"] == 2  # once an epoch
    repeated = 0
    for b in got:
        for slot, n in enumerate(b["cls"]):
            np.testing.assert_array_equal(b["jpg"][slot], pillow(jpgs[int(n)]), err_msg=f"sample {n}")
        repeated += len(b["cls"]) - len(set(b["cls"].tolist()))
    assert repeated == 2
    assert report["h2d"]["at_delivery"] >= 2  # the repaired batches, copied after the repeat
