"""Writes the fuzzers' seed corpus: small valid inputs made by the peers'
own writers (tarfile, gzip, the zstd command, numpy, Pillow), so the fuzzers start from real
structure. The output is committed under tests/fuzz/corpus/<parser>/;
run again only to change the seeds:  python3 tests/fuzz/make_corpus.py tests/fuzz/corpus
"""
from __future__ import annotations

import gzip
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
from PIL import Image


def tar_bytes(members, fmt=tarfile.USTAR_FORMAT) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def npy_bytes(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a)
    return buf.getvalue()


def npz_bytes(arrays, compressed) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def jpeg_bytes(w, h, mode="RGB", quality=75, **kw) -> bytes:
    rng = np.random.default_rng(w * 31 + h)
    img = Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8)).convert(mode)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=quality, **kw)
    return buf.getvalue()


def main(out: Path) -> None:
    seeds = {
        "tar": {
            "ustar": tar_bytes([("a.jpg", b"x" * 10), ("a.cls", b"3"), ("b.jpg", b"y"), ("b.cls", b"4")]),
            "gnu_long": tar_bytes([("d/" + "n" * 120 + ".jpg", b"z" * 600), ("d/" + "n" * 120 + ".cls", b"1")],
                                  fmt=tarfile.GNU_FORMAT),
            "pax": tar_bytes([("p/" + "q" * 130 + ".npy", b"w" * 30), ("sa_1.jpg", b"j"),
                              ("sa_1_features.npz", b"f")], fmt=tarfile.PAX_FORMAT),
        },
        "sample_index": {
            "index": json.dumps({"format": "stoker-index", "version": 1, "shard_size": 10240,
                                 "key_rule": "webdataset",
                                 "samples": [["a", 0, 1034, [["jpg", "a.jpg", 512, 10], ["cls", "a.cls", 1536, 1]]],
                                             ["b", 2048, 3073, [["jpg", "b.jpg", 2560, 1]]]]}).encode(),
            # as `stoker index` writes it (keys sorted, no spaces): the form read by hand
            "written": json.dumps({"format": "stoker-index", "version": 1, "shard_size": 10240,
                                   "key_rule": "webdataset",
                                   "samples": [["a", 0, 1537, [["jpg", "a.jpg", 512, 10],
                                                               ["cls", "a.cls", 1536, 1]]],
                                               ["b", 2048, 3073, [["jpg", "x.jpg", 2560, 1]]]]},
                                  sort_keys=True, separators=(",", ":")).encode() + b"\n",
        },
        "dataset_manifest": {
            "manifest": json.dumps({"format": "stoker-manifest", "version": 1, "key_rule": "webdataset",
                                    "samples": 5, "shards": [
                                        {"path": "a-000000.tar", "bytes": 10240, "samples": 3,
                                         "sample_bytes": 3100, "max_sample_bytes": 1034},
                                        {"path": "http://h/b-000001.tar?t=1", "bytes": 4096, "samples": 2,
                                         "sample_bytes": 2048, "max_sample_bytes": 1024}]}).encode(),
        },
        "npy": {
            "f32": npy_bytes(np.arange(12, dtype=np.float32).reshape(3, 4)),
            "i64_be": npy_bytes(np.arange(5, dtype=">i8")),
            "f16_fortran": npy_bytes(np.asfortranarray(np.ones((2, 3), np.float16))),
            "bool": npy_bytes(np.array([True, False])),
            "scalar": npy_bytes(np.array(3.5)),
        },
        "zip": {
            "stored": npz_bytes({"a": np.arange(4, dtype=np.int32), "b": np.ones(2, np.float16)}, False),
            "deflated": npz_bytes({"emb": np.zeros((4, 8), np.float16)}, True),
        },
        "jpeg": {
            "rgb420": jpeg_bytes(24, 16),
            "gray": jpeg_bytes(16, 20, mode="L"),
            "rgb444": jpeg_bytes(17, 9, subsampling=0),
            "progressive": jpeg_bytes(20, 20, progressive=True),
            "cmyk": jpeg_bytes(8, 8, mode="CMYK"),
        },
    }
    shard = tar_bytes([(f"k{i}.txt", bytes(range(i, i + 200)) * 20) for i in range(6)])
    zstd = lambda b: subprocess.run(["zstd", "-q", "-c"], input=b, capture_output=True, check=True).stdout
    seeds["compressed"] = {
        "tar_gz": gzip.compress(shard, mtime=0),
        "fast": gzip.compress(shard, compresslevel=1, mtime=0),
        "two_members": gzip.compress(shard[:3000], mtime=0) + gzip.compress(shard[3000:], mtime=0),
        "tar_zst": zstd(shard),
        "two_frames": zstd(shard[:3000]) + zstd(shard[3000:]),
    }
    for parser, files in seeds.items():
        d = out / parser
        d.mkdir(parents=True, exist_ok=True)
        for name, data in files.items():
            (d / name).write_bytes(data)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
