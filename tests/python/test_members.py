"""webdataset's member conventions, against webdataset's own decode of the same
shards (written with webdataset's TarWriter): ".gz" members gunzipped before
their decoder."""
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
