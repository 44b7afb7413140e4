"""Arrays read straight into their batch slots (src/pipeline/direct_arrays.h).

The reader predicts where each .npy's data and each stored .npz entry's data
lie and preads them into their slots; the decoder verifies the prediction. Every
test compares against numpy's own loader, including the cases where the
prediction must fail (byte order, Fortran order, a reordered archive, a changed
shape of the same size) and where the file is damaged (the error must stay).
Every test runs twice: local shards memory-mapped (the default, io/mapped_reader.h)
and read with pread (STOKER_MMAP=0)."""
import io
import os

import numpy as np
import pytest
import stoker
from conftest import npz_bytes


@pytest.fixture(autouse=True, params=["mmap", "pread"])
def read_path(request, monkeypatch):
    monkeypatch.setenv("STOKER_MMAP", "1" if request.param == "mmap" else "0")
    return request.param


def _npy(a: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def _write(path, samples):
    import webdataset as wds

    with wds.TarWriter(str(path)) as sink:
        for key, members in samples:
            sink.write({"__key__": key, **members})


def _load_all(path, fields, batch_size=2):
    loader = stoker.Loader([str(path)], fields=fields, batch_size=batch_size, drop_last=False,
                           decode_threads=2, io_depth=2, observe=False)
    return list(loader)


def _check(batches, refs, field):
    got = {}
    for b in batches:
        for i, key in enumerate(b["__key__"]):
            got[key.split(":")[-1]] = {k: v[i] for k, v in b[field].items()} if isinstance(b[field], dict) \
                else b[field][i]
    assert set(got) == set(refs)
    for key, ref in refs.items():
        if isinstance(ref, dict):
            for name, a in ref.items():
                np.testing.assert_array_equal(np.asarray(got[key][name]), a)
                assert np.asarray(got[key][name]).dtype == a.dtype.newbyteorder("=")
        else:
            np.testing.assert_array_equal(np.asarray(got[key]), ref)


def test_npy_plain_byteswapped_and_fortran_equal_numpy(tmp_path):
    rng = np.random.default_rng(1)
    samples, refs = [], {}
    for i in range(9):
        a = rng.standard_normal((6, 5)).astype(np.float32)
        stored = a.astype(">f4") if i % 3 == 1 else np.asfortranarray(a) if i % 3 == 2 else a
        data = _npy(stored)
        refs[f"k{i}"] = np.load(io.BytesIO(data))
        samples.append((f"k{i}", {"x.npy": data}))
    _write(tmp_path / "a.tar", samples)
    _check(_load_all(tmp_path / "a.tar", {"x.npy": stoker.npy()}), refs, "x.npy")


def test_npz_stored_compressed_and_reordered_equal_numpy(tmp_path):
    rng = np.random.default_rng(2)
    samples, refs = [], {}
    for i in range(10):
        arrays = {"emb": rng.standard_normal((4, 8)).astype(np.float16),
                  "box": rng.standard_normal((4, 8)).astype(np.float16)}
        if i % 3 == 1:  # same member size, entries swapped: every predicted offset is wrong
            arrays = {"box": arrays["box"], "emb": arrays["emb"]}
        data = npz_bytes(arrays, compressed=i % 3 == 2)
        with np.load(io.BytesIO(data)) as z:
            refs[f"k{i}"] = {name: z[name] for name in ("emb", "box")}
        samples.append((f"k{i}", {"y.npz": data}))
    _write(tmp_path / "z.tar", samples)
    _check(_load_all(tmp_path / "z.tar", {"y.npz": stoker.npz()}), refs, "y.npz")


def test_same_size_other_shape_is_still_an_error(tmp_path):
    first = _npy(np.zeros(256, np.float32))
    other = _npy(np.ones((16, 16), np.float32))
    assert len(first) == len(other)  # the prediction fires; the header check must refuse
    _write(tmp_path / "s.tar", [("a", {"x.npy": first}), ("b", {"x.npy": other})])
    with pytest.raises(Exception, match=r"expected float32\(256,\)"):
        _load_all(tmp_path / "s.tar", {"x.npy": stoker.npy()})


def test_damaged_stored_npz_data_fails_its_crc(tmp_path):
    good = npz_bytes({"v": np.arange(64, dtype=np.float32)})
    bad = bytearray(npz_bytes({"v": np.arange(64, dtype=np.float32) + 1}))
    at = bytes(bad).find(np.float32(10).tobytes())
    bad[at] ^= 0xFF  # a data byte, which the reader places straight into the slot
    _write(tmp_path / "c.tar", [("a", {"y.npz": good}), ("b", {"y.npz": bytes(bad)})])
    with pytest.raises(Exception, match="CRC-32"):
        _load_all(tmp_path / "c.tar", {"y.npz": stoker.npz()})


def test_direct_read_with_other_fields_in_the_sample(tmp_path):
    rng = np.random.default_rng(3)
    samples, refs = [], {}
    for i in range(7):
        a = rng.integers(0, 1000, (3, 7)).astype(np.int64)
        refs[f"k{i}"] = a
        samples.append((f"k{i}", {"cls": str(i).encode(), "x.npy": _npy(a), "txt": b"hello"}))
    _write(tmp_path / "m.tar", samples)
    batches = _load_all(tmp_path / "m.tar", {"cls": stoker.scalar("int64"), "x.npy": stoker.npy()}, batch_size=3)
    _check(batches, refs, "x.npy")


def test_shard_truncated_under_the_loader_is_a_clear_error(tmp_path, read_path):
    rng = np.random.default_rng(4)
    samples = [(f"k{i:03d}", {"x.npy": _npy(rng.standard_normal((128, 128)).astype(np.float32))}) for i in range(96)]
    path = tmp_path / "t.tar"
    _write(path, samples)
    loader = stoker.Loader([str(path)], fields={"x.npy": stoker.npy()}, batch_size=4, decode_threads=1,
                           io_depth=1, prefetch=1, observe=False)
    it = iter(loader)
    first = next(it)  # the shard is open (mapped) and being read
    np.testing.assert_array_equal(np.asarray(first["x.npy"][0]), np.load(io.BytesIO(samples[0][1]["x.npy"])))
    os.truncate(path, path.stat().st_size // 4)
    with pytest.raises(Exception, match=r"t\.tar.*offset"):
        for _ in it:
            pass
    loader.close()
