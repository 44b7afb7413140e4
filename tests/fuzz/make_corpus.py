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
import struct
import tarfile
import zlib
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


def png_bytes(w, h, mode, **kw) -> bytes:
    rng = np.random.default_rng(w * 17 + h)
    # a smooth picture plus noise: Pillow's adaptive filter then picks all five
    # filter types (Paeth for most rows), as on a photograph
    y, x = np.mgrid[0:h, 0:w]
    base = np.stack([x * 7 + y * 3, x * 2 + y * 9, (x ^ y) * 5], axis=-1)
    rgb = ((base + rng.integers(0, 12, base.shape)) % 256).astype(np.uint8)
    img = Image.fromarray(rgb)
    if mode.startswith("P"):  # "P": 64 colours, an 8-bit palette; "P4": 16, written 4-bit
        img = img.quantize(16 if mode == "P4" else 64)
    elif mode != "RGB":
        img = img.convert(mode)
    buf = io.BytesIO()
    img.save(buf, format="PNG", **kw)
    return buf.getvalue()


def png_chunks(data: bytes) -> list:
    chunks, off = [], 8
    while off < len(data):
        n = struct.unpack(">I", data[off:off + 4])[0]
        chunks.append((data[off + 4:off + 8], data[off + 8:off + 8 + n]))
        off += 12 + n
    return chunks


def png_join(chunks) -> bytes:
    out = bytearray(b"\x89PNG\r\n\x1a\n")
    for kind, body in chunks:
        out += struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    return bytes(out)


def png_split_idat(data: bytes, parts: int) -> bytes:
    """The same image with its zlib stream cut over several IDAT chunks."""
    chunks = []
    for kind, body in png_chunks(data):
        if kind == b"IDAT":
            step = -(-len(body) // parts)
            chunks += [(b"IDAT", body[i:i + step]) for i in range(0, len(body), step)]
        else:
            chunks.append((kind, body))
    return png_join(chunks)


def megatron_bytes(lengths, docs, code=8, bin_bytes=None) -> bytes:
    """A .idx as megatron-core 0.16.1's writer lays it out (indexed_dataset.py),
    after the fuzz target's 4-byte .bin size (bin_bytes: a .bin of another size,
    which Open refuses)."""
    item = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 8: 2}[code]
    pointers = np.concatenate([[0], np.cumsum(np.asarray(lengths, np.int64) * item)[:-1]]).astype(np.int64)
    idx = (b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", code) +
           struct.pack("<Q", len(lengths)) + struct.pack("<Q", len(docs)) +
           np.asarray(lengths, np.int32).tobytes() + pointers.tobytes() + np.asarray(docs, np.int64).tobytes())
    # the top bit: the target sizes the .bin as the .idx needs
    return struct.pack("<I", 1 << 31 if bin_bytes is None else bin_bytes) + idx


def _text_info():
    from PIL import PngImagePlugin
    info = PngImagePlugin.PngInfo()
    info.add_text("comment", "a tEXt chunk before the image data")
    return info


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
    rgb = png_bytes(20, 12, "RGB")
    seeds["png_fast"] = {
        "rgb": rgb,
        "rgba": png_bytes(9, 7, "RGBA"),
        "gray": png_bytes(11, 5, "L"),
        "palette": png_bytes(13, 6, "P"),
        "palette_trns": png_bytes(6, 6, "P", transparency=0),
        "palette4": png_bytes(7, 3, "P4"),  # 4-bit: the fast path declines it
        "rgb_text": png_bytes(5, 4, "RGB", pnginfo=_text_info()),
        "rgb_three_idat": png_split_idat(rgb, 3),
        "gray16": png_bytes(4, 4, "I;16"),  # 16-bit: the fast path declines it
        # the target's third form: 2 bytes (colour type, width - 1) and filtered rows
        "scanlines_rgb_paeth": bytes([1, 15]) + b"".join(
            bytes([4]) + np.random.default_rng(y).integers(0, 256, 48, dtype=np.uint8).tobytes() for y in range(6)),
        "scanlines_rgba_all_filters": bytes([3, 7]) + b"".join(
            bytes([y % 5]) + np.random.default_rng(9 + y).integers(0, 256, 32, dtype=np.uint8).tobytes()
            for y in range(10)),
    }
    seeds["megatron_index"] = {
        "u16": megatron_bytes([5, 0, 12, 3], [0, 1, 3, 4]),
        "i32": megatron_bytes([7, 2], [0, 2], code=4),
        "u16_sized": megatron_bytes([5, 0, 12, 3], [0, 1, 3, 4], bin_bytes=40),  # the size given, as needed
        "u8_spare_bin": megatron_bytes([4], [0, 1], code=1, bin_bytes=64),  # refused: 60 bytes past the last
        "empty": megatron_bytes([], [0]),
    }
    seeds["text_check"] = {
        "caption": "a cat on a mat, caf\u00e9 \u65e5\u672c \U0001f408\n".encode(),
        "object": json.dumps({"caption": "x", "tags": ["a", "\u00e9"], "n": -1.5e-3, "ok": True,
                              "none": None, "nested": {"k": [[], {}]}}).encode(),
        "escapes": b'["\\u00e9\\ud83d\\ude00\\n\\t\\"\\\\\\/", 0, 10E+2]',
        "number": b" 3 ",
        "bad_utf8": b"ok \xed\xa0\x80 \xf4\x90\x80\x80 \xc0\xaf",
    }
    import msgpack

    seeds["msgpack_check"] = {
        "map": msgpack.packb({"a": [1, 2.5, None, True], b"b": {"c": "\u00e9"}}),
        "timestamp": msgpack.packb(msgpack.Timestamp(5, 7)),
        "ext": msgpack.packb(msgpack.ExtType(3, b"xyz")),
        "wide": msgpack.packb(["x" * 40, b"y" * 300, 2**40, -2**20, 0.25]),
        "int_key": b"\x81\x01\x02",  # refused: strict_map_key
    }
    # gzip_member: the first byte is the limit in KiB.
    seeds["gzip_member"] = {
        "one": b"\x04" + gzip.compress(b"hello world " * 50, mtime=0),
        "two_padded": b"\x10" + gzip.compress(b"a" * 3000, mtime=0) + b"\0\0" + gzip.compress(b"bc", mtime=0),
        "past_limit": b"\x00" + gzip.compress(b"x" * 2000, mtime=0),
        "empty": b"\x01" + gzip.compress(b"", mtime=0),
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
