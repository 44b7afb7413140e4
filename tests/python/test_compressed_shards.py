"""Compressed shards (.tar.gz, .tar.zst): read in place through
io/gzip_reader's access points and io/zstd_reader's frame starts. Shuffled reads jump across many points and must give the same
samples, in the same order, as the uncompressed shard; pixels equal Pillow's
and strings what webdataset yields from the .tar.gz itself; a truncated or
corrupt stream fails at construction naming the file, the offsets and the
member it cuts. (test_formats.py runs its PNG/WebP/text/JSON checks over a
gzipped copy too.)"""
from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import stoker

SIDE = 160  # noise images: ~60 KB each, so a shard spans several 1 MiB access points


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> dict:
    """Two TarWriter shards of noise PNG/WebP + caption + metadata, each as
    .tar, as .tar.gz (one gzip member), as .tar.gz of two members split
    inside a sample (as `cat a.gz b.gz` or pigz -i would make), and as
    .tar.zst in one frame and in many."""
    import webdataset as wds

    if shutil.which("zstd") is None:
        pytest.skip("the zstd command (Debian package zstd) writes the .tar.zst inputs")

    rng = np.random.default_rng(11)
    d = tmp_path_factory.mktemp("gz")
    out = {"tar": [], "gz": [], "gz2": [], "zst": [], "zst_frames": [], "samples": {}}
    for s in range(2):
        tar = d / f"noise-{s:06d}.tar"
        with wds.TarWriter(str(tar)) as sink:
            for i in range(48):
                mode = ["RGB", "L", "RGBA", "P"][i % 4]
                img = Image.fromarray(rng.integers(0, 256, (SIDE, SIDE, 3), dtype=np.uint8)).convert(mode)
                buf = io.BytesIO()
                img.save(buf, format="WEBP" if i % 9 == 4 else "PNG", **({"lossless": True} if i % 9 == 4 else {}))
                key = f"s{s}-{i:04d}"
                sample = {"__key__": key, "img": buf.getvalue(), "txt": f"caption {key} ✓".encode(),
                          "json": json.dumps({"i": i, "mode": mode}).encode()}
                sink.write(sample)
                out["samples"][key] = sample
        raw = tar.read_bytes()
        gz = d / f"noise-{s:06d}.tar.gz"
        gz.write_bytes(gzip.compress(raw, compresslevel=6))
        gz2 = d / "two-members" / f"noise-{s:06d}.tar.gz"
        gz2.parent.mkdir(exist_ok=True)
        cut = len(raw) // 2 + 777
        gz2.write_bytes(gzip.compress(raw[:cut], compresslevel=1) + gzip.compress(raw[cut:], compresslevel=9))
        # zstd by its own command: one frame; and 256 KiB chunks as frames of their own.
        zst = d / f"noise-{s:06d}.tar.zst"
        zst.write_bytes(subprocess.run(["zstd", "-q", "-c", "-3", str(tar)], capture_output=True, check=True).stdout)
        frames = d / "frames" / f"noise-{s:06d}.tar.zst"
        frames.parent.mkdir(exist_ok=True)
        frames.write_bytes(b"".join(subprocess.run(["zstd", "-q", "-c"], input=raw[i:i + (256 << 10)],
                                                   capture_output=True, check=True).stdout
                                    for i in range(0, len(raw), 256 << 10)))
        out["tar"].append(str(tar))
        out["gz"].append(str(gz))
        out["gz2"].append(str(gz2))
        out["zst"].append(str(zst))
        out["zst_frames"].append(str(frames))
    assert len(raw) > 2 << 20  # three access points or more per shard
    return out


FIELDS = {"img": stoker.image((SIDE, SIDE), resize="none", layout="HWC"), "txt": stoker.text(), "json": stoker.json()}


def _epoch(paths, **kw):
    loader = stoker.Loader(paths, FIELDS, batch_size=5, output="numpy", drop_last=False, **kw)
    keys, rows = [], {}
    for batch in loader:
        for i, key in enumerate(batch["__key__"]):
            k = key.split(":")[-1]
            keys.append(k)
            rows[k] = {name: batch[name][i] for name in FIELDS}
    return keys, rows


@pytest.mark.parametrize("kind", ["gz", "gz2", "zst", "zst_frames"])
def test_shuffled_gz_equals_tar_and_pillow(shards, kind):
    tar_keys, tar_rows = _epoch(shards["tar"], shuffle=True, seed=3, decode_threads=2)
    keys, rows = _epoch(shards[kind], shuffle=True, seed=3, decode_threads=2)
    assert keys == tar_keys  # same samples, same order: the shuffle is the dataset's, not the codec's
    assert sorted(keys) == sorted(shards["samples"])  # each once
    for key, sample in shards["samples"].items():
        ref = np.asarray(Image.open(io.BytesIO(sample["img"])).convert("RGB"))
        np.testing.assert_array_equal(rows[key]["img"], ref, err_msg=key)
        np.testing.assert_array_equal(rows[key]["img"], tar_rows[key]["img"], err_msg=key)
        assert rows[key]["txt"] == tar_rows[key]["txt"]


def test_gz_strings_equal_webdataset(shards):
    import webdataset as wds

    _, rows = _epoch(shards["gz"])
    ref = {s["__key__"]: s for s in wds.WebDataset(shards["gz"], shardshuffle=False).decode()}
    assert set(ref) == set(rows)
    for key, sample in ref.items():
        assert rows[key]["txt"] == sample["txt"]
        assert rows[key]["json"] == sample["json"]


def test_gz_state_restore_resumes_exactly(shards):
    loader = stoker.Loader(shards["gz"], FIELDS, batch_size=4, shuffle=True, seed=5, output="numpy")
    it = iter(loader)
    first = [k for _ in range(3) for k in next(it)["__key__"]]
    state = loader.state_dict()
    rest = [k for b in it for k in b["__key__"]]
    again = stoker.Loader(shards["gz"], FIELDS, batch_size=4, shuffle=True, seed=5, output="numpy")
    again.load_state_dict(state)
    assert [k for b in again for k in b["__key__"]] == rest
    assert len(set(first) | set(rest)) == len(first) + len(rest)


def test_truncated_gz_names_file_offset_and_member(shards, tmp_path):
    data = Path(shards["gz"][0]).read_bytes()
    bad = tmp_path / "cut-000000.tar.gz"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(stoker.StokerError) as e:
        stoker.Loader(str(bad), FIELDS, batch_size=2)
    msg = str(e.value)
    assert "cut-000000.tar.gz: gzip stream truncated" in msg, msg
    assert f"compressed offset {len(data) // 2}" in msg, msg
    assert "member 's0-" in msg, msg


def test_corrupt_gz_is_an_error(shards, tmp_path):
    data = bytearray(Path(shards["gz"][0]).read_bytes())
    mid = len(data) // 2
    data[mid:mid + 32] = bytes(b ^ 0xA5 for b in data[mid:mid + 32])
    bad = tmp_path / "flip-000000.tar.gz"
    bad.write_bytes(bytes(data))
    with pytest.raises(stoker.StokerError, match=r"flip-000000\.tar\.gz: gzip data corrupt \(.*\) at compressed offset \d+"):
        stoker.Loader(str(bad), FIELDS, batch_size=2)


def test_gz_crc_mismatch_is_an_error(shards, tmp_path):
    data = bytearray(Path(shards["gz"][0]).read_bytes())
    data[-8] ^= 0x01  # the CRC-32 in the trailer: every byte decodes, the check fails
    bad = tmp_path / "crc-000000.tar.gz"
    bad.write_bytes(bytes(data))
    with pytest.raises(stoker.StokerError, match="incorrect data check"):
        stoker.Loader(str(bad), FIELDS, batch_size=2)


def test_cli_inspect_index_and_bench_read_gz(shards):
    """inspect lists the .tar.gz's members as the .tar's (uncompressed offsets),
    infers its fields; index writes a sidecar the loader accepts; bench runs."""
    import subprocess

    from conftest import stoker_bin

    exe = stoker_bin()
    if exe is None:
        pytest.skip("no stoker command built")

    def cli(*args):
        return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, check=True, timeout=120)

    tar = json.loads(cli("inspect", shards["tar"][0], "--json", "-n", 100).stdout)
    gz = json.loads(cli("inspect", shards["gz"][0], "--json", "-n", 100).stdout)
    assert gz.pop("compression") == "gzip" and tar.pop("compression") == "none"
    tar.pop("shard"), gz.pop("shard")
    assert gz == tar
    assert "inferred  -f img:image:224" in cli("inspect", shards["gz2"][0]).stdout
    cli("index", shards["gz"][1])
    idx = json.loads(Path(shards["gz"][1] + ".idx").read_text())
    assert idx["shard_size"] == Path(shards["tar"][1]).stat().st_size  # the uncompressed size the reader reports
    _, rows = _epoch([shards["gz"][1]])  # through the sidecar
    assert len(rows) == 48
    out = json.loads(cli("bench", *shards["gz"], "-f", "img:image:64", "--batch-size", 8, "--epochs", 1, "--json").stdout)
    assert out["dataset_samples"] == 96


def test_truncated_zst_names_file_offset_and_member(shards, tmp_path):
    data = Path(shards["zst"][0]).read_bytes()
    bad = tmp_path / "cut-000000.tar.zst"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(stoker.StokerError) as e:
        stoker.Loader(str(bad), FIELDS, batch_size=2)
    msg = str(e.value)
    assert "cut-000000.tar.zst: zstd stream truncated" in msg and "member 's0-" in msg, msg
