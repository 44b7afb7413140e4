#!/usr/bin/env python3
"""Interop fixtures for tests/cpp/formats/interop_test.cc.

Python's tarfile and numpy are the reference encoders/decoders here:

    python3 tests/cpp/formats/make_fixtures.py generate DIR
    STOKER_FIXTURES=DIR build/formats/test_formats_interop_test
    python3 tests/cpp/formats/make_fixtures.py verify DIR

`generate` writes tars (GNU, pax, ustar formats, long names and links) and npz
files (np.savez, np.savez_compressed) plus expected.json describing them. The
C++ test checks its readers against expected.json and writes
stoker_written.{tar,npz}; `verify` reads those back with tarfile and numpy.
"""
import io
import json
import os
import sys
import tarfile

import numpy as np


def arrays():
    rng = np.random.default_rng(7)
    return {
        "f32": rng.standard_normal((3, 5)).astype(np.float32),
        "i64_be": np.arange(-6, 6, dtype=">i8").reshape(3, 4),
        "f64_fortran": np.asfortranarray(rng.standard_normal((2, 3, 4))),
        "u16_be_fortran": np.asfortranarray(np.arange(30, dtype=">u2").reshape(5, 6)),
        "bool": np.array([True, False, True]),
        "c64": (np.arange(4) + 1j * np.arange(4)).astype(np.complex64),
        "c128_be": (np.arange(3) - 2j).astype(">c16"),
        "f16": np.linspace(-2, 2, 7).astype(np.float16),
        "u8": np.arange(256, dtype=np.uint8).reshape(16, 16),
        "i8": np.array([-128, 0, 127], dtype=np.int8),
        "scalar": np.array(3.25),
        "empty": np.zeros((0, 4), dtype=np.int32),
    }


def tar_members():
    long_dir = "d" * 120
    return [
        ("sa_1.jpg", b"\xff\xd8jpeg-bytes"),
        ("sa_1_features.npz", b"PK-not-really" * 50),
        (long_dir + "/" + "n" * 150 + ".seg.png", b"long name payload"),
        ("x" * 99 + ".cls", b"7"),
        ("p" * 130 + "/leaf.txt", b"ustar splits this name into prefix and name"),
        ("unicod\u00e9/\u00fcber.txt", b"utf-8 name"),
        ("empty.bin", b""),
        ("big.bin", bytes(range(256)) * 300),
    ]


def write_tar(path, fmt):
    with tarfile.open(path, "w", format=fmt) as tf:
        d = tarfile.TarInfo("somedir")
        d.type = tarfile.DIRTYPE
        tf.addfile(d)
        link = tarfile.TarInfo("a-link")
        link.type = tarfile.SYMTYPE
        link.linkname = "l" * 180
        if fmt != tarfile.USTAR_FORMAT:
            tf.addfile(link)
        for name, data in tar_members():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            try:
                tf.addfile(info, io.BytesIO(data))
            except ValueError:  # a name ustar cannot hold
                assert fmt == tarfile.USTAR_FORMAT


def describe_tar(path):
    with tarfile.open(path) as tf:
        return [[m.name, m.size, tf.extractfile(m).read().hex()] for m in tf.getmembers() if m.isreg()]


def describe_npz(path):
    out = []
    with np.load(path) as z:
        for key in z.files:
            a = z[key]
            native = np.ascontiguousarray(a).astype(a.dtype.newbyteorder("="), copy=False)
            out.append([key + ".npy", native.dtype.name, list(a.shape), native.tobytes().hex()])
    return out


def generate(d):
    os.makedirs(d, exist_ok=True)
    expected = {"tars": {}, "npz": {}}
    for fname, fmt in [("gnu.tar", tarfile.GNU_FORMAT), ("pax.tar", tarfile.PAX_FORMAT),
                       ("ustar.tar", tarfile.USTAR_FORMAT)]:
        write_tar(os.path.join(d, fname), fmt)
        expected["tars"][fname] = describe_tar(os.path.join(d, fname))
    np.savez(os.path.join(d, "savez.npz"), **arrays())
    np.savez_compressed(os.path.join(d, "savez_compressed.npz"), **arrays())
    for fname in ("savez.npz", "savez_compressed.npz"):
        expected["npz"][fname] = describe_npz(os.path.join(d, fname))
    with open(os.path.join(d, "expected.json"), "w") as f:
        json.dump(expected, f)
    print(f"wrote fixtures to {d}")


def verify(d):
    ref = arrays()
    with np.load(os.path.join(d, "stoker_written.npz")) as z:
        assert sorted(z.files) == sorted(ref), (z.files, list(ref))
        for key, want in ref.items():
            got = z[key]
            assert got.dtype == want.dtype.newbyteorder("="), (key, got.dtype, want.dtype)
            assert got.shape == want.shape and np.array_equal(got, want), key
    import zipfile
    with zipfile.ZipFile(os.path.join(d, "stoker_written.npz")) as zf:
        assert zf.testzip() is None
        methods = {i.compress_type for i in zf.infolist()}
        assert methods == {zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED}, methods
    want = {name: data for name, data in tar_members()}
    with tarfile.open(os.path.join(d, "stoker_written.tar")) as tf:
        got = {m.name: tf.extractfile(m).read() for m in tf.getmembers()}
    assert got == want, sorted(got)
    print("numpy.load, zipfile and tarfile read stoker's output: OK")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("generate", "verify"):
        sys.exit(__doc__)
    (generate if sys.argv[1] == "generate" else verify)(sys.argv[2])
