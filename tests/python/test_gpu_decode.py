"""Image fields decoded on the batches' device (stoker.image(decode=...)),
proven on CPU: device="cpu-late" (tests only) stands a CPU copy engine for the
copy stream and a stand-in for nvJPEG (device/gpu_decoder.h), which decodes
each staged JPEG whole with libjpeg-turbo and resizes it with the GPU
kernels' own per-pixel arithmetic. So in CI: decode="gpu" and "auto" give
decode="cpu"'s batches on Pillow-written JPEGs of every quality and
subsampling (same order, crops, flips; the same bytes, since at these sizes
the CPU path decodes at full scale too); a folder that mixes progressive,
CMYK, grayscale, PNG and corrupt files loads, the GPU's refusals counted by
reason in report() and the corrupt file handled by on_error as on the CPU;
the split and its reason show in settings. On a GPU:
tests/python/test_gpu_decode_device.py and bench/gpu_decode.py.
"""
from __future__ import annotations

import io

import numpy as np
import pytest
import torch
import webdataset as wds
from PIL import Image

import stoker
from conftest import jpeg_bytes, natural_image


def _write(path, samples: list[tuple[str, bytes]]) -> None:
    with wds.TarWriter(str(path)) as sink:
        for i, (ext, data) in enumerate(samples):
            sink.write({"__key__": f"{i:05d}", ext: data, "cls": str(i).encode()})


def _batches(shards, device, decode, **kw) -> list[dict]:
    loader = stoker.Loader(shards, fields={"jpg": stoker.image(kw.pop("size", 160), resize=kw.pop("resize",
                                                                "random_resized_crop"),
                                                               random_hflip=True, decode=decode,
                                                               dtype=kw.pop("dtype", "uint8")),
                                           "cls": stoker.scalar()},
                           batch_size=8, shuffle=True, seed=3, device=device, decode_threads=2, **kw)
    out = [{k: v.clone() for k, v in b.items() if isinstance(v, torch.Tensor)} for b in loader]
    return out, loader


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """Pillow JPEGs at qualities 50-100 and subsamplings 4:4:4, 4:2:2, 4:2:0."""
    rng = np.random.default_rng(0)
    samples = []
    for q in (50, 75, 90, 100):
        for sub in (0, 1, 2):
            for k in range(2):
                w, h = (200 + 17 * k, 150 + 9 * sub) if k else (150 + 9 * sub, 200)
                samples.append(("jpg", jpeg_bytes(natural_image(rng, w, h), quality=q, subsampling=sub)))
    path = tmp_path_factory.mktemp("graded") / "graded.tar"
    _write(path, samples)
    return [str(path)]


@pytest.mark.parametrize("resize", ["random_resized_crop", "center_crop", "longest"])
def test_gpu_decode_gives_the_cpu_paths_batches(graded, resize):
    cpu, _ = _batches(graded, "cpu", "cpu", resize=resize)
    gpu, loader = _batches(graded, "cpu-late", "gpu", resize=resize)
    assert len(gpu) == len(cpu) == 3
    for a, b in zip(cpu, gpu, strict=True):
        assert torch.equal(a["__index__"], b["__index__"])
        assert torch.equal(a["jpg"], b["jpg"])
    stats = loader.report()["gpu_decode"]
    assert stats["decoder"] == "stand-in"
    # >= 24: the next epoch's first batches are made ahead (epoch carry-over)
    assert stats["gpu_images"] >= 24 and stats["cpu_images"] == 0 and stats["fallbacks"] == {}
    assert loader.settings["gpu_decode"]["share"] == 1.0


def test_float_normalized_output_and_auto_split(graded):
    cpu, _ = _batches(graded, "cpu", "cpu", dtype="float32")
    auto, loader = _batches(graded, "cpu-late", "auto", dtype="float32")
    for a, b in zip(cpu, auto, strict=True):
        assert torch.equal(a["jpg"], b["jpg"])
    s = loader.settings["gpu_decode"]
    assert s["decoder"] == "stand-in" and 0 < s["share"] <= 1 and s["why"]
    stats = loader.report()["gpu_decode"]
    assert stats["gpu_images"] + stats["cpu_images"] >= 24


def test_a_gpu_decoder_that_stops_returning_costs_one_bounded_wait(graded, capfd):
    """The stand-in's second hardware batch never returns: the watchdog gives up on it, and
    every batch is still the CPU path's, once, in order; report(), settings and the log say so once."""
    cpu, _ = _batches(graded, "cpu", "cpu")
    gpu, loader = _batches(graded, "cpu-late", "gpu", _gpu_standin_stall_after=1, _gpu_standin_watchdog_ms=200)
    assert len(gpu) == len(cpu) == 3
    for a, b in zip(cpu, gpu, strict=True):
        assert torch.equal(a["__index__"], b["__index__"])
        assert torch.equal(a["jpg"], b["jpg"])
    stats = loader.report()["gpu_decode"]
    assert "did not return within" in stats["failed"]
    assert stats["gpu_images"] == 8 and stats["fallbacks"]["decoder_failed"] >= 8
    s = loader.settings["gpu_decode"]
    assert s["share"] == 0.0 and s["why"].startswith("GPU decoder off: stand-in: a hardware batch of 8 images")
    loader.close()
    assert capfd.readouterr().err.count("did not return within") == 1


def test_auto_on_a_cpu_device_is_the_cpu(graded):
    _, loader = _batches(graded, "cpu", "auto")
    assert "gpu_decode" not in loader.settings
    assert "gpu_decode" not in loader._native.stats()


def test_a_mixed_folder_loads_with_fallbacks_counted(tmp_path):
    rng = np.random.default_rng(1)
    px = lambda: natural_image(rng, 180, 140)  # noqa: E731
    png = io.BytesIO()
    Image.fromarray(px()).save(png, format="PNG")
    corrupt = jpeg_bytes(px())[:900]  # cut inside the scan
    samples = [("jpg", jpeg_bytes(px())) for _ in range(11)]
    samples[2] = ("jpg", jpeg_bytes(px(), progressive=True))
    samples[4] = ("jpg", jpeg_bytes(px(), mode="CMYK"))
    samples[6] = ("jpg", jpeg_bytes(px(), mode="L"))
    samples[8] = ("jpg", png.getvalue())
    samples[10] = ("jpg", corrupt)
    samples += [("jpg", jpeg_bytes(px())) for _ in range(5)]
    _write(tmp_path / "mixed.tar", samples)
    shards = [str(tmp_path / "mixed.tar")]
    cpu, cpu_loader = _batches(shards, "cpu", "cpu", on_error="skip")
    gpu, loader = _batches(shards, "cpu-late", "gpu", on_error="skip")
    assert [b["__index__"].tolist() for b in gpu] == [b["__index__"].tolist() for b in cpu]
    for a, b in zip(cpu, gpu, strict=True):
        assert torch.equal(a["jpg"], b["jpg"])
    assert loader.skips["skipped"] == cpu_loader.skips["skipped"] == 1
    fallbacks = loader.report()["gpu_decode"]["fallbacks"]
    # Each once an epoch (the next epoch's first batch is made ahead, so some twice).
    assert set(fallbacks) == {"progressive", "cmyk", "not_jpeg", "truncated"}
    # 16 less progressive, CMYK, PNG and the corrupt one (gray is taken); more: the next epoch's first batch, made ahead
    assert loader.report()["gpu_decode"]["gpu_images"] >= 12


def test_bad_decode_settings_say_what_is_wrong(graded):
    with pytest.raises(ValueError, match="decode must be"):
        stoker.image(224, decode="nvjpeg")
    with pytest.raises(ValueError, match='needs device="cuda"'):
        _batches(graded, "cpu", "gpu")


def test_gpu_decode_starts_with_a_deeper_prefetch(graded):
    """With GPU decode a batch waits for its slowest CPU image and then its turn
    on the decoder, so auto prefetch starts deeper (pipeline/tune_config.h:
    8 batches or 128 images, at most 16): on an H200 that took S from 600 to
    2,037 images/s. A prefetch the user sets, or the CPU path, is unchanged."""
    def prefetch(decode, batch_size, **kw):
        loader = stoker.Loader(graded, fields={"jpg": stoker.image(64, resize="center_crop", decode=decode)},
                               batch_size=batch_size, device="cpu-late", decode_threads=2, **kw)
        value = loader.settings["prefetch"]
        loader.close()
        return value

    assert prefetch("gpu", 8) == 16  # 128 images
    assert prefetch("gpu", 4) == 16  # at most 16 batches
    assert prefetch("auto", 24) == 8
    assert prefetch("gpu", 8, prefetch=3) == 3
    assert prefetch("cpu", 8) == 2
