"""Pixels and arrays against the independent references: Pillow's JPEG decode
(exact at full size) and antialiased resize (exact too), and
numpy's .npy/.npz loader (bit for bit, every dtype, both byte orders, C and
Fortran order, stored and deflated)."""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

import stoker
from conftest import natural_image


def pillow_jpeg(pixels, quality=90, subsampling=2, mode=None, progressive=False) -> bytes:
    img = Image.fromarray(pixels)
    if mode:
        img = img.convert(mode)
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=quality, subsampling=subsampling, progressive=progressive)
    return buf.getvalue()


CASES = {
    "420": dict(subsampling=2),
    "422": dict(subsampling=1),
    "444": dict(subsampling=0),
    "progressive": dict(progressive=True),
    "gray": dict(mode="L"),
    "cmyk": dict(mode="CMYK", subsampling=0),
    # Layouts TurboJPEG 2.1 cannot classify at its header (C at 2x2 or 2x1,
    # M/Y/K at 1x1): decoded through stoker's libjpeg fallback.
    "cmyk420": dict(mode="CMYK", subsampling=2),
    "cmyk422": dict(mode="CMYK", subsampling=1),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_full_decode_equals_pillow_exactly(case):
    rng = np.random.default_rng(1)
    data = pillow_jpeg(natural_image(rng, 131, 97), **CASES[case])  # odd sizes: partial MCUs
    ref = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    got = stoker.decode_jpeg_rgb(data)
    assert got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("case", ["420", "gray", "cmyk", "cmyk420"])
def test_decode_into_out_equals_fresh_array(case):
    rng = np.random.default_rng(6)
    data = pillow_jpeg(natural_image(rng, 131, 97), **CASES[case])
    want = stoker.decode_jpeg_rgb(data)
    out = np.full((97, 131, 3), 7, np.uint8)
    got = stoker.decode_jpeg_rgb(data, out=out)
    assert got is out
    np.testing.assert_array_equal(out, want)


def test_decode_into_wrong_out_raises_value_error_naming_the_shape():
    rng = np.random.default_rng(7)
    data = pillow_jpeg(natural_image(rng, 131, 97))
    read_only = np.empty((97, 131, 3), np.uint8)
    read_only.setflags(write=False)
    bad = [np.empty((131, 97, 3), np.uint8), np.empty((97, 131, 4), np.uint8), np.empty((3, 97, 131), np.uint8),
           np.empty((97, 131, 3), np.float32), np.empty((97, 131, 3), np.int8),
           np.asfortranarray(np.empty((97, 131, 3), np.uint8)), np.empty((97, 262, 3), np.uint8)[:, ::2],
           read_only, [[0] * 3] * 4]
    for out in bad:
        with pytest.raises(ValueError, match=r"\(97, 131, 3\)"):
            stoker.decode_jpeg_rgb(data, out=out)
    with pytest.raises(stoker.StokerError):  # a broken file is still the decoder's error
        stoker.decode_jpeg_rgb(data[:100], out=np.empty((97, 131, 3), np.uint8))


@pytest.mark.parametrize("case", sorted(CASES))
def test_loader_field_without_resize_equals_pillow(tmp_path, case):
    import webdataset as wds

    rng = np.random.default_rng(2)
    jpgs = [pillow_jpeg(natural_image(rng, 64, 48), **CASES[case]) for _ in range(4)]
    with wds.TarWriter(str(tmp_path / "x.tar")) as sink:
        for i, j in enumerate(jpgs):
            sink.write({"__key__": f"{i}", "jpg": j})
    loader = stoker.Loader(str(tmp_path / "x.tar"), {"jpg": stoker.image((48, 64), resize="none", layout="HWC")},
                           batch_size=4, output="numpy")
    batch = next(iter(loader))
    for i, j in enumerate(jpgs):
        np.testing.assert_array_equal(batch["jpg"][i], np.asarray(Image.open(io.BytesIO(j)).convert("RGB")))


# Resize is Pillow's antialiased BILINEAR itself (its fixed-point
# arithmetic, computed for the output's rows and columns only): the same
# pixels, bit for bit, for enlargements and reductions alike. (The libyuv
# box path, resample="box", is the approximate one; it is not tested here.)
@pytest.mark.parametrize("size,src", [((224, 224), (500, 375)), ((1024, 1024), (1500, 1000)), ((96, 96), (375, 500)),
                                      ((224, 224), (1500, 1000))])
def test_resize_equals_pillow_antialiased(size, src):
    rng = np.random.default_rng(3)
    data = pillow_jpeg(natural_image(rng, *src))
    spec = stoker.image_spec(size, resize="stretch", layout="HWC")
    got = stoker.decode_jpeg(data, spec)
    ref = np.asarray(Image.open(io.BytesIO(data)).convert("RGB").resize(size[::-1], Image.BILINEAR))
    np.testing.assert_array_equal(got, ref)


def test_float_normalize_matches_formula():
    rng = np.random.default_rng(4)
    data = pillow_jpeg(natural_image(rng, 80, 60))
    u8 = stoker.decode_jpeg(data, stoker.image_spec(32, layout="CHW"))
    f32 = stoker.decode_jpeg(data, stoker.image_spec(32, layout="CHW", dtype="float32", normalize=True))
    mean = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
    std = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
    np.testing.assert_allclose(f32, (u8 / 255.0 - mean) / std, atol=1e-5)


DTYPES = ["bool", "u1", "i1", "<u2", ">i2", "<u4", ">i4", "<u8", ">i8", "<f2", ">f2", "<f4", ">f8", "<c8", ">c16"]


def test_npy_and_npz_every_dtype_bit_for_bit(tmp_path):
    import webdataset as wds

    rng = np.random.default_rng(5)

    def array(dt, order):
        a = (rng.standard_normal((3, 4, 5)) * 100).astype(np.dtype(dt))
        if np.dtype(dt).kind == "c":
            a = a + 1j * a[::-1]
        return np.asfortranarray(a) if order == "F" else a

    samples = []
    for i in range(3):
        arrays = {f"a_{dt.strip('<>')}_{'be' if dt.startswith('>') else 'le'}_{o}": array(dt, o)
                  for dt in DTYPES for o in "CF"}
        npy = io.BytesIO()
        np.save(npy, array(">f8", "F"))
        stored, deflated = io.BytesIO(), io.BytesIO()
        np.savez(stored, **arrays)
        np.savez_compressed(deflated, **arrays)
        samples.append({"__key__": f"s{i}", "x.npy": npy.getvalue(), "plain.npz": stored.getvalue(),
                        "packed.npz": deflated.getvalue()})
    with wds.TarWriter(str(tmp_path / "arr.tar")) as sink:
        for s in samples:
            sink.write(s)
    loader = stoker.Loader(str(tmp_path / "arr.tar"),
                           {"x.npy": stoker.npy(), "plain.npz": stoker.npz(), "packed.npz": stoker.npz()},
                           batch_size=3, output="numpy")
    batch = next(iter(loader))
    for i, s in enumerate(samples):
        ref = np.load(io.BytesIO(s["x.npy"]))
        assert batch["x.npy"][i].dtype == ref.dtype.newbyteorder("=")
        np.testing.assert_array_equal(batch["x.npy"][i], ref)
        for field in ("plain.npz", "packed.npz"):
            ref = np.load(io.BytesIO(s[field]))
            assert set(batch[field]) == set(ref.files)
            for name in ref.files:
                got = batch[field][name][i]
                want = ref[name]
                assert got.dtype == want.dtype.newbyteorder("="), name
                assert got.flags.c_contiguous
                assert got.tobytes() == np.ascontiguousarray(want.astype(want.dtype.newbyteorder("="))).tobytes(), name


@pytest.mark.parametrize("w,h", [(500, 375), (131, 97), (375, 500)])
def test_plane_path_without_scaling_matches_pillow(w, h):
    """The fast path (YCbCr planes -> crop -> resize -> RGB) at the image's own
    size keeps every pixel where it is. A window taken from the MCU-padded
    plane (375 rows padded to 376) once resized 376 rows onto 375 and drifted
    the picture by a row from top to bottom (mean error 0.5-0.7 here, 3+ on
    textured photos)."""
    rng = np.random.default_rng(6)
    data = pillow_jpeg(natural_image(rng, w, h))
    ref = np.asarray(Image.open(io.BytesIO(data)).convert("RGB")).astype(np.float32)
    got = stoker.decode_jpeg(data, stoker.image_spec((h, w), resize="stretch", layout="HWC")).astype(np.float32)
    np.testing.assert_array_equal(got, ref)  # at its own size: the full decode, exactly
