"""PNG, WebP, text and JSON members in webdataset shards, against the peers:
pixels against Pillow's Image.open(...).convert("RGB"), strings and objects
against what webdataset itself yields for the same shards."""
from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, features

import stoker

W, H = 37, 23  # odd sizes: no accidental alignment


def _png_raw(arr: np.ndarray, bit_depth: int, color_type: int) -> bytes:
    """A PNG Pillow cannot write (16-bit RGB/RGBA/LA, 2-bit gray), encoded by hand."""
    h, w = arr.shape[:2]
    if bit_depth == 16:
        rows = [arr[y].astype(">u2").tobytes() for y in range(h)]
    elif bit_depth < 8:
        per = 8 // bit_depth
        rows = []
        for y in range(h):
            row = bytearray()
            for x0 in range(0, w, per):
                byte = 0
                for k in range(per):
                    v = int(arr[y, x0 + k]) if x0 + k < w else 0
                    byte |= v << (8 - bit_depth * (k + 1))
                row.append(byte)
            rows.append(bytes(row))
    else:
        rows = [arr[y].tobytes() for y in range(h)]
    raw = b"".join(b"\x00" + r for r in rows)

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))

    ihdr = struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def _pil_bytes(img: Image.Image, fmt: str, **kw) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **kw)
    return buf.getvalue()


def _images(rng) -> dict[str, bytes]:
    """name -> encoded image, every PNG mode Pillow reads and the WebP kinds."""
    rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    rgb[:, : W // 2] = np.linspace(0, 255, W // 2, dtype=np.uint8)[None, :, None]  # smooth part for lossy codecs
    alpha = rng.integers(0, 256, (H, W), dtype=np.uint8)
    base = Image.fromarray(rgb)
    rgba = Image.fromarray(np.dstack([rgb, alpha]), "RGBA")
    out = {
        "png-rgb": _pil_bytes(base, "PNG"),
        "png-rgba": _pil_bytes(rgba, "PNG"),
        "png-l": _pil_bytes(base.convert("L"), "PNG"),
        "png-la": _pil_bytes(rgba.convert("LA"), "PNG"),
        "png-p": _pil_bytes(base.convert("P", palette=Image.Palette.ADAPTIVE, colors=200), "PNG"),
        "png-p-trns": _pil_bytes(base.convert("P", palette=Image.Palette.ADAPTIVE, colors=16), "PNG",
                                 transparency=3, bits=4),
        "png-1": _pil_bytes(base.convert("1"), "PNG"),
        "png-i16": _pil_bytes(Image.fromarray(rng.integers(0, 600, (H, W)).astype(np.uint16)), "PNG"),
        "png-rgb16": _png_raw(rng.integers(0, 65536, (H, W, 3)).astype(np.uint16), 16, 2),
        "png-rgba16": _png_raw(rng.integers(0, 65536, (H, W, 4)).astype(np.uint16), 16, 6),
        "png-la16": _png_raw(rng.integers(0, 65536, (H, W, 2)).astype(np.uint16), 16, 4),
        "png-g2": _png_raw(rng.integers(0, 4, (H, W)).astype(np.uint8), 2, 0),
        "webp-lossless": _pil_bytes(base, "WEBP", lossless=True),
        "webp-lossless-alpha": _pil_bytes(rgba, "WEBP", lossless=True),
        "webp-lossy": _pil_bytes(base, "WEBP", quality=80),
        "webp-lossy-alpha": _pil_bytes(rgba, "WEBP", quality=80),
    }
    return out


CAPTIONS = ["a cat on a mat", "ünïcödé — 日本語 🐈", "", "line one\nline two", "  spaced  "]


@pytest.fixture(scope="module")
def formats_tar(tmp_path_factory) -> tuple[Path, dict]:
    import webdataset as wds

    rng = np.random.default_rng(7)
    d = tmp_path_factory.mktemp("formats")
    images = _images(rng)
    samples = {}
    with wds.TarWriter(str(d / "mixed-000000.tar")) as sink:
        for i, (name, data) in enumerate(sorted(images.items())):
            ext = "png" if name.startswith("png") else "webp"
            sample = {
                "__key__": f"{i:03d}-{name}",
                "img": data,  # one field for every codec: chosen by content, not name
                ext: data,
                "txt": CAPTIONS[i % len(CAPTIONS)].encode(),
                "json": json.dumps({"i": i, "name": name, "tags": ["x", None, 1.5], "u": "é"}).encode(),
                "cls": str(i).encode(),
            }
            sink.write(sample)
            samples[sample["__key__"]] = sample
    return d / "mixed-000000.tar", samples


@pytest.fixture(scope="module", params=["tar", "tar.gz"])
def formats_shard(request, formats_tar) -> tuple[Path, dict]:
    """The TarWriter shard as written, and a gzipped copy of it (read by the
    same tests: pixels equal Pillow's, strings equal what webdataset yields)."""
    import gzip

    path, samples = formats_tar
    if request.param == "tar":
        return path, samples
    gz = path.with_name(path.name + ".gz")
    if not gz.exists():
        gz.write_bytes(gzip.compress(path.read_bytes()))
    return gz, samples


def _load_all(path, fields, **kw):
    kw.setdefault("batch_size", 4)
    loader = stoker.Loader(str(path), fields, output="numpy", drop_last=False, **kw)
    out = {}
    for batch in loader:
        for i, key in enumerate(batch["__key__"]):
            out[key.split(":")[-1]] = {name: batch[name][i] for name in fields}
    return out


def _pillow_rgb(data: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def test_png_and_webp_pixels_equal_pillow(formats_shard):
    path, samples = formats_shard
    got = _load_all(path, {"img": stoker.image((H, W), resize="none", layout="HWC")})
    assert set(got) == set(samples)
    lossy_gap = {}
    for key, sample in samples.items():
        ref = _pillow_rgb(sample["img"])
        mine = got[key]["img"]
        assert mine.shape == ref.shape == (H, W, 3), key
        if "lossy" in key:
            lossy_gap[key] = int(np.abs(mine.astype(int) - ref).max())
        else:
            np.testing.assert_array_equal(mine, ref, err_msg=key)
    # Lossy WebP: exact when stoker's libwebp is Pillow's version; Debian
    # bookworm has 1.2.4, Pillow's wheel bundles its own (see docs/guides/fields.md).
    same = features.version("webp") == _webp_version()
    print("lossy WebP max |stoker - Pillow|:", lossy_gap, "libwebp", _webp_version(), "Pillow's", features.version("webp"))
    for key, gap in lossy_gap.items():
        assert gap == 0 if same else gap <= 3, (key, gap, features.version("webp"))


def _webp_version() -> str:
    import ctypes
    import ctypes.util

    lib = ctypes.CDLL(ctypes.util.find_library("webp") or "libwebp.so.7")
    v = lib.WebPGetDecoderVersion()
    return f"{v >> 16}.{(v >> 8) & 255}.{v & 255}"


def test_resized_png_and_webp_close_to_pillow(tmp_path):
    """Resized PNG/WebP take JPEG's geometry and resize: on a smooth image the
    result is close to Pillow's bilinear resize of the same pixels."""
    import webdataset as wds

    from conftest import natural_image

    rng = np.random.default_rng(3)
    pixels = natural_image(rng, 160, 120)
    encoded = {"png": _pil_bytes(Image.fromarray(pixels), "PNG"),
               "webp": _pil_bytes(Image.fromarray(pixels), "WEBP", lossless=True)}
    p = tmp_path / "smooth-000000.tar"
    with wds.TarWriter(str(p)) as sink:
        for k, data in encoded.items():
            sink.write({"__key__": k, "img": data})
    got = _load_all(p, {"img": stoker.image((24, 32), resize="stretch", layout="HWC")})
    ref = np.asarray(Image.fromarray(pixels).resize((32, 24), Image.BILINEAR)).astype(int)
    for k in encoded:
        assert got[k]["img"].shape == (24, 32, 3)
        diff = np.abs(got[k]["img"].astype(int) - ref)
        assert diff.mean() < 2.0 and diff.max() < 24, (k, diff.mean(), diff.max())
    np.testing.assert_array_equal(got["png"]["img"], got["webp"]["img"])  # same pixels, same path


def test_text_and_json_equal_webdataset(formats_shard):
    import webdataset as wds

    path, samples = formats_shard
    got = _load_all(path, {"txt": stoker.text(), "json": stoker.json(), "cls": stoker.scalar()}, batch_size=3)
    ref = {s["__key__"]: s for s in wds.WebDataset(str(path), shardshuffle=False).decode()}
    assert set(got) == set(ref)
    for key, sample in ref.items():
        assert isinstance(got[key]["txt"], str)
        assert got[key]["txt"] == sample["txt"]
        assert got[key]["json"] == sample["json"]


def test_text_batch_is_list_of_str(formats_shard):
    path, _ = formats_shard
    loader = stoker.Loader(str(path), {"txt": stoker.text(), "json": stoker.json()}, batch_size=4, output="torch")
    batch = next(iter(loader))
    assert isinstance(batch["txt"], list) and len(batch["txt"]) == 4
    assert all(isinstance(s, str) for s in batch["txt"])
    assert all(isinstance(o, dict) for o in batch["json"])
    assert "txt.len" not in batch and "json.len" not in batch


def _one_sample_shard(tmp_path, members: dict) -> Path:
    import webdataset as wds

    p = tmp_path / "bad-000000.tar"
    with wds.TarWriter(str(p)) as sink:
        sink.write({"__key__": "k0", **members})
    return p


def test_invalid_utf8_names_member(tmp_path):
    p = _one_sample_shard(tmp_path, {"txt": b"ok \xff\xfe bad"})
    with pytest.raises(stoker.StokerError, match=r"k0\.txt.*UTF-8 at byte 3"):
        list(stoker.Loader(str(p), {"txt": stoker.text()}, batch_size=1))


def test_invalid_json_names_member(tmp_path):
    p = _one_sample_shard(tmp_path, {"json": b"{\"a\": 1,}"})
    with pytest.raises(stoker.StokerError, match=r"k0\.json.*not valid JSON"):
        list(stoker.Loader(str(p), {"json": stoker.json()}, batch_size=1))


def test_text_longer_than_slot_is_an_error(tmp_path):
    p = _one_sample_shard(tmp_path, {"txt": b"x" * 100})
    with pytest.raises(stoker.StokerError, match="exceed max_bytes 10"):
        list(stoker.Loader(str(p), {"txt": stoker.text(max_bytes=10)}, batch_size=1))


def test_corrupt_png_names_member(tmp_path):
    data = _pil_bytes(Image.new("RGB", (8, 8)), "PNG")
    p = _one_sample_shard(tmp_path, {"png": data[:40]})
    with pytest.raises(stoker.StokerError, match=r"k0\.png.*PNG"):
        list(stoker.Loader(str(p), {"png": stoker.image(8, resize="none")}, batch_size=1))


def _png_every_filter(arr: np.ndarray, color_type: int, plte: bytes = b"") -> bytes:
    """An 8-bit PNG whose row y uses filter y % 5 (None, Sub, Up, Average,
    Paeth), filtered here by the specification's rules; Pillow's encoder
    picks its own filters, so this is what reaches every unfilter path."""
    h, w = arr.shape[:2]
    bpp = 1 if arr.ndim == 2 else arr.shape[2]
    rows = [arr[y].astype(np.int32).reshape(-1) for y in range(h)]
    out = bytearray()
    for y, cur in enumerate(rows):
        prev = rows[y - 1] if y else np.zeros_like(cur)
        a = np.concatenate([np.zeros(bpp, np.int32), cur[:-bpp]])
        c = np.concatenate([np.zeros(bpp, np.int32), prev[:-bpp]])
        f = y % 5
        if f == 0:
            pred = np.zeros_like(cur)
        elif f == 1:
            pred = a
        elif f == 2:
            pred = prev
        elif f == 3:
            pred = (a + prev) // 2
        else:
            p = a + prev - c
            pa, pb, pc = np.abs(p - a), np.abs(p - prev), np.abs(p - c)
            pred = np.where((pa <= pb) & (pa <= pc), a, np.where(pb <= pc, prev, c))
        out.append(f)
        out += ((cur - pred) % 256).astype(np.uint8).tobytes()

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))

    ihdr = struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0)
    idat = zlib.compress(bytes(out))
    # Split over several IDAT chunks, as encoders write them.
    parts = [chunk(b"IDAT", idat[i:i + 100]) for i in range(0, len(idat), 100)]
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + (chunk(b"PLTE", plte) if plte else b"")
            + b"".join(parts) + chunk(b"IEND", b""))


@pytest.mark.parametrize("color_type", [0, 2, 3, 6])
def test_png_every_filter_type_equals_pillow(tmp_path, color_type):
    rng = np.random.default_rng(color_type)
    chans = {0: 0, 2: 3, 3: 0, 6: 4}[color_type]
    shape = (H, W, chans) if chans else (H, W)
    arr = rng.integers(0, 256 if color_type != 3 else 40, shape).astype(np.uint8)
    plte = rng.integers(0, 256, 40 * 3).astype(np.uint8).tobytes() if color_type == 3 else b""
    data = _png_every_filter(arr, color_type, plte)
    p = _one_sample_shard(tmp_path, {"png": data})
    got = _load_all(p, {"png": stoker.image((H, W), resize="none", layout="HWC")}, batch_size=1)["k0"]["png"]
    np.testing.assert_array_equal(got, _pillow_rgb(data))
