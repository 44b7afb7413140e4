"""webdataset's member conventions, against webdataset's own decode of the same
shards (written with webdataset's TarWriter) and Pillow's: ".gz" members
gunzipped before their decoder, image channels, variable-size images, msgpack
and the pickle opt-in."""
from __future__ import annotations

import gzip
import io
from pathlib import Path

import numpy as np
import pytest

import stoker


def _write(path: Path, samples: list[dict]) -> Path:
    import webdataset as wds

    with wds.TarWriter(str(path)) as sink:
        for s in samples:
            sink.write(s)
    return path


def _write_raw(path: Path, members: dict[str, bytes]) -> Path:
    """A tar of the members' bytes as given (webdataset's TarWriter gzips a
    ".gz" member itself, so damaged gzip is written with tarfile)."""
    import tarfile

    with tarfile.open(path, "w") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def _load_all(path: Path, fields: dict, batch_size: int = 2) -> dict:
    """Every sample of a one-shard loader, by key, in webdataset's naming."""
    out: dict = {}
    for batch in stoker.Loader(str(path), fields, batch_size=batch_size, output="numpy", drop_last=False):
        for i, key in enumerate(batch["__key__"]):
            out[key] = {name: value[i] if not isinstance(value, dict) else {k: v[i] for k, v in value.items()}
                        for name, value in batch.items() if not name.startswith("__")}
    return out


def _wds(path: Path, *decode) -> dict:
    import webdataset as wds

    return {s["__key__"]: s for s in wds.WebDataset(str(path), shardshuffle=False).decode(*decode)}


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


# --- .gz members ------------------------------------------------------------


@pytest.fixture
def gz_shard(tmp_path) -> Path:
    # webdataset's TarWriter gzips the bytes of a member whose name ends in ".gz".
    rng = np.random.default_rng(0)
    samples = []
    for i in range(5):
        text = f"caption {i} caf\u00e9 " * (i * 50 + 1)
        samples.append({
            "__key__": f"{i:06d}",
            "txt.gz": text.encode(),
            "json.gz": f'{{"i": {i}, "tags": ["a", "b"], "s": "{text[:20]}"}}'.encode(),
            "npy.gz": _npy(rng.standard_normal((3, 4)).astype(np.float32)),
            "cls.gz": f"{i * 7}\n".encode(),
        })
    return _write(tmp_path / "gz-000000.tar", samples)


def test_gz_members_equal_webdataset(gz_shard):
    got = _load_all(gz_shard, {"txt.gz": stoker.text(), "json.gz": stoker.json(), "npy.gz": stoker.npy(),
                               "cls.gz": stoker.scalar()})
    ref = _wds(gz_shard)
    assert set(got) == set(ref)
    for key, want in ref.items():
        assert got[key]["txt.gz"] == want["txt.gz"]
        assert got[key]["json.gz"] == want["json.gz"]
        np.testing.assert_array_equal(got[key]["npy.gz"], want["npy.gz"])
        assert got[key]["npy.gz"].dtype == want["npy.gz"].dtype
        assert int(got[key]["cls.gz"]) == want["cls.gz"]


def test_gz_image_and_raw_and_npz(tmp_path):
    from PIL import Image

    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)
    png = io.BytesIO()
    Image.fromarray(pixels).save(png, "PNG")
    npz = io.BytesIO()
    np.savez(npz, a=np.arange(6, dtype=np.int16).reshape(2, 3))
    p = _write(tmp_path / "gzi-000000.tar", [{"__key__": "k", "png.gz": png.getvalue(), "bin.gz": b"\x00\x01raw",
                                               "npz.gz": npz.getvalue()}])
    with open(p, "rb") as f:  # the writer did gzip them
        assert f.read().count(b"\x1f\x8b") >= 3
    got = _load_all(p, {"png.gz": stoker.image((20, 30), resize="none", layout="HWC"),
                        "bin.gz": stoker.raw(16), "npz.gz": stoker.npz()}, batch_size=1)["k"]
    ref = _wds(p, "rgb8")["k"]
    np.testing.assert_array_equal(got["png.gz"], ref["png.gz"])
    # raw() of a .gz member is its gunzipped bytes, as webdataset's decode leaves them.
    assert bytes(got["bin.gz"][:int(got["bin.gz.len"])]) == ref["bin.gz"] == b"\x00\x01raw"
    np.testing.assert_array_equal(got["npz.gz"]["a"], ref["npz.gz"]["a"])


def test_gz_concatenated_and_padded_members_equal_webdataset(tmp_path):
    """`cat a.gz b.gz` with zero padding: gzip.GzipFile (webdataset's gzfilter) reads the concatenation."""
    data = gzip.compress("first half, ".encode()) + b"\0" * 5 + gzip.compress("second half".encode()) + b"\0" * 2
    p = _write_raw(tmp_path / "cat-000000.tar", {"k0.txt.gz": data})
    got = _load_all(p, {"txt.gz": stoker.text()}, batch_size=1)
    assert got["k0"]["txt.gz"] == _wds(p)["k0"]["txt.gz"] == "first half, second half"


def test_gz_past_max_bytes_names_member(tmp_path):
    p = _write(tmp_path / "big-000000.tar", [{"__key__": "k0", "txt.gz": b"x" * 5000}])
    with pytest.raises(stoker.StokerError, match=r"k0\.txt\.gz.*at offset \d+.*limit of 4096"):
        list(stoker.Loader(str(p), {"txt.gz": stoker.text(max_bytes=4096)}, batch_size=1))


def test_gz_damaged_names_member(tmp_path):
    good = gzip.compress(b"hello " * 100)
    p = _write_raw(tmp_path / "bad-000000.tar", {"k0.txt.gz": good, "k1.txt.gz": good[:-9]})
    with pytest.raises(stoker.StokerError, match=r"k1\.txt\.gz.*at offset \d+.*corrupt or truncated"):
        list(stoker.Loader(str(p), {"txt.gz": stoker.text()}, batch_size=1))
    p = _write_raw(tmp_path / "plain-000000.tar", {"k0.txt.gz": b"not gzipped"})
    with pytest.raises(stoker.StokerError, match=r"k0\.txt\.gz.*not gzip"):
        list(stoker.Loader(str(p), {"txt.gz": stoker.text()}, batch_size=1))


# --- image channels ---------------------------------------------------------


def _every_image(rng) -> dict[str, bytes]:
    """Every PNG mode Pillow reads, WebP with and without alpha (test_formats'
    set), and JPEG color and gray."""
    from PIL import Image
    from test_formats import H, W, _images, _pil_bytes

    out = _images(rng)
    rgb = rng.integers(0, 256, (H, W, 3), dtype=np.uint8)
    out["jpeg-rgb"] = _pil_bytes(Image.fromarray(rgb), "JPEG", quality=90)
    out["jpeg-l"] = _pil_bytes(Image.fromarray(rgb).convert("L"), "JPEG", quality=90)
    return out


@pytest.fixture(scope="module")
def image_shard(tmp_path_factory):
    rng = np.random.default_rng(11)
    images = _every_image(rng)
    d = tmp_path_factory.mktemp("channels")
    samples = [{"__key__": name, "img": data} for name, data in sorted(images.items())]
    return _write(d / "img-000000.tar", samples), images


@pytest.mark.parametrize("channels,mode", [(1, "L"), (3, "RGB"), (4, "RGBA")])
def test_channels_equal_pillow_convert(image_shard, channels, mode):
    from PIL import Image
    from test_formats import H, W

    path, images = image_shard
    got = _load_all(path, {"img": stoker.image((H, W), resize="none", layout="HWC", channels=channels)}, batch_size=4)
    checked = 0
    for name, data in images.items():
        ref = np.asarray(Image.open(io.BytesIO(data)).convert(mode))
        if channels == 1:
            ref = ref[:, :, None]
        assert got[name]["img"].shape == (H, W, channels)
        np.testing.assert_array_equal(got[name]["img"], ref, err_msg=name)
        checked += 1
    assert checked == len(images) == 18  # 16 PNG/WebP kinds and 2 JPEG


def test_channels_equal_webdataset_l8_rgba8(image_shard):
    from test_formats import H, W

    path, images = image_shard
    got_l = _load_all(path, {"img": stoker.image((H, W), resize="none", layout="HWC", channels=1)}, batch_size=4)
    got_rgba = _load_all(path, {"img": stoker.image((H, W), resize="none", layout="HWC", channels=4)}, batch_size=4)
    import webdataset as wds

    # webdataset picks the decoder by extension: each image under its codec's.
    l8, rgba8 = wds.Decoder([wds.imagehandler("l8")]), wds.Decoder([wds.imagehandler("rgba8")])
    for name, data in images.items():
        ext = name.split("-")[0].replace("jpeg", "jpg")
        np.testing.assert_array_equal(got_l[name]["img"][:, :, 0], l8({ext: data})[ext], err_msg=name)
        np.testing.assert_array_equal(got_rgba[name]["img"], rgba8({ext: data})[ext], err_msg=name)


def test_channels_layout_and_float(image_shard):
    from test_formats import H, W

    path, _ = image_shard
    hwc = _load_all(path, {"img": stoker.image((H, W), resize="none", layout="HWC", channels=4)}, batch_size=4)
    chw = _load_all(path, {"img": stoker.image((H, W), resize="none", channels=4)}, batch_size=4)
    mean, std = (0.5, 0.4, 0.3), (0.2, 0.25, 0.3)
    gray = _load_all(path, {"img": stoker.image((H, W), resize="none", channels=1, dtype="float32", normalize=True,
                                                mean=mean, std=std)}, batch_size=4)
    gray8 = _load_all(path, {"img": stoker.image((H, W), resize="none", channels=1)}, batch_size=4)
    for name in hwc:
        np.testing.assert_array_equal(chw[name]["img"], hwc[name]["img"].transpose(2, 0, 1))
        assert gray[name]["img"].shape == (1, H, W) and gray[name]["img"].dtype == np.float32
        want = (gray8[name]["img"].astype(np.float32) / np.float32(255) - np.float32(mean[0])) * (np.float32(1) / np.float32(std[0]))
        np.testing.assert_allclose(gray[name]["img"], want, rtol=0, atol=1e-6)


def test_gray_resized_equals_pillow(image_shard):
    """channels=1 through a resize: a gray image's is Pillow's L image resized
    (bit for bit); any image's is Pillow's convert("L") of the RGB output."""
    from PIL import Image

    path, images = image_shard
    size = (24, 40)
    spec = dict(resize="stretch", layout="HWC")
    got1 = _load_all(path, {"img": stoker.image(size, channels=1, **spec)}, batch_size=4)
    got3 = _load_all(path, {"img": stoker.image(size, **spec)}, batch_size=4)
    for name, data in images.items():
        np.testing.assert_array_equal(got1[name]["img"][:, :, 0],
                                      np.asarray(Image.fromarray(got3[name]["img"]).convert("L")), err_msg=name)
    for name in ("png-l", "jpeg-l", "png-1"):
        ref = np.asarray(Image.open(io.BytesIO(images[name])).convert("L").resize(size[::-1], Image.BILINEAR))
        np.testing.assert_array_equal(got1[name]["img"][:, :, 0], ref, err_msg=name)


def test_channels_refused_where_unsupported():
    with pytest.raises(ValueError, match="channels must be 1, 3 or 4"):
        stoker.image(224, channels=2)
    with pytest.raises(ValueError, match="channels=4 takes no resize"):
        stoker.image(224, channels=4)
    with pytest.raises(ValueError, match="CPU only"):
        stoker.image(224, channels=1, decode="gpu")


# --- variable-size images ---------------------------------------------------


@pytest.fixture(scope="module")
def sized_shard(tmp_path_factory):
    from PIL import Image

    rng = np.random.default_rng(5)
    d = tmp_path_factory.mktemp("sized")
    samples, images = [], {}
    for i, (h, w) in enumerate([(17, 31), (40, 12), (1, 1), (64, 48), (23, 23)]):
        pixels = rng.integers(0, 256, (h, w, 4), dtype=np.uint8)
        img = Image.fromarray(pixels, "RGBA")
        if i % 3 == 0:
            img = img.convert("L")
        buf = io.BytesIO()
        if i == 4:
            img.convert("RGB").save(buf, "JPEG", quality=85)
        else:
            img.save(buf, "PNG")
        ext = "jpg" if i == 4 else "png"
        images[f"{i:03d}"] = (ext, buf.getvalue())
        samples.append({"__key__": f"{i:03d}", ext: buf.getvalue()})
    # One field name for every sample: the codec is sniffed from the bytes.
    samples = [{"__key__": s["__key__"], "img": next(v for k, v in s.items() if k != "__key__")} for s in samples]
    return _write(d / "sized-000000.tar", samples), images


@pytest.mark.parametrize("channels", [1, 3, 4])
@pytest.mark.parametrize("layout", ["HWC", "CHW"])
def test_variable_size_equals_webdataset(sized_shard, channels, layout):
    import webdataset as wds

    path, images = sized_shard
    spec = {1: "l8", 3: "rgb8", 4: "rgba8"}[channels]
    decode = wds.Decoder([wds.imagehandler(spec)])
    for batch_size in (2, 5):
        loader = stoker.Loader(str(path), {"img": stoker.image(None, resize="none", layout=layout, channels=channels)},
                               batch_size=batch_size, output="numpy", drop_last=False)
        seen = 0
        for batch in loader:
            assert isinstance(batch["img"], list) and len(batch["img"]) == len(batch["__key__"])
            assert "img.shape" not in batch
            for key, got in zip(batch["__key__"], batch["img"]):
                ext, data = images[key]
                ref = decode({ext: data})[ext]
                if channels == 1:
                    ref = ref[:, :, None]
                if layout == "CHW":
                    ref = ref.transpose(2, 0, 1)
                assert got.dtype == np.uint8 and got.shape == ref.shape, (key, got.shape, ref.shape)
                np.testing.assert_array_equal(got, ref, err_msg=key)
                seen += 1
        assert seen == len(images)


def test_variable_size_torch_output(sized_shard):
    import torch

    path, images = sized_shard
    batch = next(iter(stoker.Loader(str(path), {"img": stoker.image(None, resize="none")}, batch_size=5)))
    assert all(isinstance(t, torch.Tensor) and t.dtype == torch.uint8 and t.shape[0] == 3 for t in batch["img"])
    assert {tuple(t.shape[1:]) for t in batch["img"]} == {(17, 31), (40, 12), (1, 1), (64, 48), (23, 23)}


def test_variable_size_past_max_pixels_names_member(sized_shard):
    path, _ = sized_shard
    with pytest.raises(stoker.StokerError, match=r"003\.img.*at offset \d+.*48x64, more than max_pixels 1000"):
        list(stoker.Loader(str(path), {"img": stoker.image(None, resize="none", max_pixels=1000)}, batch_size=1))


# --- msgpack ----------------------------------------------------------------


def _msgpack_cases() -> dict[str, bytes]:
    """Valid and invalid msgpack: stoker must accept exactly what msgpack.unpackb accepts."""
    import msgpack

    good = [None, True, False, 0, 127, 128, -1, -32, -33, 255, 65535, 2**32, 2**63, -(2**63), 1.5, float("inf"),
            "", "é日本🐈", "x" * 40, "y" * 300, "z" * 70000, b"", b"\x00" * 300, [], [1, [2, [3, {}]]],
            {"a": 1, b"b": [None]}, {"k" * 20: list(range(20))}, msgpack.ExtType(5, b"abc"),
            msgpack.ExtType(7, b"0123456789abcdef"), msgpack.ExtType(3, b"q" * 300),
            msgpack.Timestamp(1, 5), msgpack.Timestamp(2**34 + 1, 7), msgpack.Timestamp(100)]
    cases = {f"good{i}": msgpack.packb(v, use_single_float=(i % 2 == 0)) for i, v in enumerate(good)}
    cases["good-f32"] = msgpack.packb(0.25, use_single_float=True)
    cases["good-deep"] = msgpack.packb([[[[[[[[1]]]]]]]])
    bad = {
        "c1": b"\xc1",
        "empty": b"",
        "extra": msgpack.packb(1) + msgpack.packb(2),
        "truncated-str": msgpack.packb("hello")[:-1],
        "truncated-array": msgpack.packb([1, 2, 3])[:-1],
        "truncated-len": b"\xda\x00",
        "bad-utf8": b"\xa2\xff\xfe",
        "surrogate": b"\xa3\xed\xa0\x80",
        "int-key": msgpack.packb({1: 2}),
        "array-key": b"\x81\x91\x01\x02",
        "nil-key": b"\x81\xc0\x01",
        "ts-bad-len": b"\xd5\xff\x00\x01",
        "ts96-bad-ns": b"\xc7\x0c\xff" + (10**9).to_bytes(4, "big") + b"\x00" * 8,
        "ts64-bad-ns": b"\xd7\xff" + ((10**9) << 34).to_bytes(8, "big"),
        "huge-array": b"\xdd\xff\xff\xff\xff\x01",
        "huge-map": b"\xdf\x7f\xff\xff\xff",
        "ext-truncated": b"\xc7\x05\x01abc",
    }
    cases.update({f"bad-{k}": v for k, v in bad.items()})
    return cases


def test_msgpack_check_accepts_what_msgpack_accepts(tmp_path):
    import msgpack

    cases = _msgpack_cases()
    for name, data in cases.items():
        try:
            want = msgpack.unpackb(data)
            ok = True
        except Exception:  # noqa: BLE001 - any refusal counts: ExtraData, ValueError, UnicodeDecodeError, ...
            ok = False
        p = _write(tmp_path / f"{name}-000000.tar", [{"__key__": "k0", "msgpack": data}])
        loader = stoker.Loader(str(p), {"msgpack": stoker.msgpack(max_bytes=1 << 17)}, batch_size=1, output="numpy")
        if ok:
            got = next(iter(loader))["msgpack"][0]
            assert got == want, name
            assert ok == name.startswith("good"), name
        else:
            assert name.startswith("bad"), name
            with pytest.raises(stoker.StokerError, match=r"k0\.msgpack.*at offset \d+.*not valid msgpack at byte"):
                list(loader)


def test_msgpack_members_equal_webdataset(tmp_path):
    import msgpack

    samples = [{"__key__": f"{i:03d}", "mp": msgpack.packb({"i": i, "box": [i, 2.5, None], "name": f"n{i}"}),
                "msg.gz": msgpack.packb([i] * i)} for i in range(7)]
    p = _write(tmp_path / "mp-000000.tar", samples)
    got = _load_all(p, {"mp": stoker.msgpack(), "msg.gz": stoker.msgpack()}, batch_size=3)
    ref = _wds(p)
    assert set(got) == set(ref)
    for key, want in ref.items():
        assert got[key]["mp"] == want["mp"]
        assert got[key]["msg.gz"] == want["msg.gz"]


# --- pickle -----------------------------------------------------------------


def test_pickle_refused_without_opt_in():
    with pytest.raises(ValueError, match="arbitrary code"):
        stoker.pickle()
    with pytest.raises(ValueError, match="allow_unsafe=True"):
        stoker.pickle(allow_unsafe="yes")


def test_pickle_and_pth_with_opt_in_equal_webdataset(tmp_path):
    import pickle

    import torch

    samples = []
    for i in range(4):
        buf = io.BytesIO()
        torch.save({"w": torch.arange(i + 2, dtype=torch.float32)}, buf)
        samples.append({"__key__": f"{i:03d}", "pyd": pickle.dumps({"i": i, "t": (i, "x"), "a": np.arange(i)}),
                        "pth": buf.getvalue()})
    p = _write(tmp_path / "pk-000000.tar", samples)
    got = _load_all(p, {"pyd": stoker.pickle(allow_unsafe=True), "pth": stoker.pickle(allow_unsafe=True)},
                    batch_size=3)
    ref = _wds(p)
    for key, want in ref.items():
        assert got[key]["pyd"]["i"] == want["pyd"]["i"] and got[key]["pyd"]["t"] == want["pyd"]["t"]
        np.testing.assert_array_equal(got[key]["pyd"]["a"], want["pyd"]["a"])
        assert torch.equal(got[key]["pth"]["w"], want["pth"]["w"])


def test_new_specs_pickle_by_value():
    import pickle

    spec = stoker.image(None, resize="none", layout="HWC", channels=4, max_pixels=77)
    copy = pickle.loads(pickle.dumps(spec))
    assert (copy.image.channels, copy.image.variable, copy.image.max_pixels, copy.image.chw) == (4, True, 77, False)
    for spec in (stoker.msgpack(99), stoker.pickle(88, allow_unsafe=True)):
        copy = pickle.loads(pickle.dumps(spec))
        assert (copy.kind, copy.max_bytes) == (spec.kind, spec.max_bytes)
