"""Samples are named as the ecosystem names them (pipeline/sample_keys.h):
tar shards give webdataset's own ``__key__`` and ``__url__`` (compared with
``wds.WebDataset`` on shards whose members sit in sub-directories), an image
folder gives each file's path under the root (the keys ``stoker pack`` writes
for that folder, so a packed folder gives the same keys), Parquet the named
key column or ``file:row``. Inside stoker a sample stays named by its shard
and key together: skip records keep that."""
from __future__ import annotations

import logging
import subprocess
from pathlib import Path

import numpy as np
import pytest

import stoker
from conftest import stoker_bin, write_tar


@pytest.fixture(scope="module")
def nested_shards(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("keys")
    # Sub-directories, a dot in a directory name, a field with a dot in it,
    # and one key in both shards (keys need not be unique across shards).
    write_tar(d / "s-0.tar", [("train/a/000000.cls", b"0"), ("train/a/000000.txt", b"zero"),
                              ("train/b/000001.cls", b"1"), ("train/b/000001.txt", b"one"),
                              ("v1.2/000002.cls", b"2"), ("v1.2/000002.txt", b"two")])
    write_tar(d / "s-1.tar", [("000003.cls", b"3"), ("000003.txt", b"three"),
                              ("train/a/000000.cls", b"4"), ("train/a/000000.txt", b"again")])
    return d


def test_tar_keys_and_urls_equal_webdatasets(nested_shards):
    wds = pytest.importorskip("webdataset")
    url = f"{nested_shards}/s-{{0..1}}.tar"
    ref = [(s["__key__"], s["__url__"], int(s["cls"])) for s in wds.WebDataset(url, shardshuffle=False)]
    loader = stoker.Loader(url, {"cls": stoker.scalar("int64")}, batch_size=2, drop_last=False, output="numpy")
    got = []
    for b in loader:
        assert len(b["__url__"]) == len(b["__key__"]) == len(b["cls"])
        got += list(zip(b["__key__"], b["__url__"], b["cls"].tolist()))
    assert got == ref
    assert [k for k, _, _ in got] == ["train/a/000000", "train/b/000001", "v1.2/000002", "000003",
                                      "train/a/000000"]
    assert {u for _, u, _ in got} == {f"{nested_shards}/s-0.tar", f"{nested_shards}/s-1.tar"}


def test_keys_false_leaves_both_out(nested_shards):
    b = next(iter(stoker.Loader(str(nested_shards / "s-0.tar"), {"cls": stoker.scalar("int64")}, batch_size=2,
                                keys=False, output="numpy")))
    assert "__key__" not in b and "__url__" not in b


def test_skip_records_keep_the_shard_with_the_key(tmp_path, caplog):
    # The same key in two shards, one of them bad: the record names which.
    write_tar(tmp_path / "s-0.tar", [("d/000000.cls", b"0"), ("d/000001.cls", b"1")])
    write_tar(tmp_path / "s-1.tar", [("d/000000.cls", b"not a number"), ("d/000001.cls", b"3")])
    loader = stoker.Loader(f"{tmp_path}/s-{{0..1}}.tar", {"cls": stoker.scalar("int64")}, batch_size=1,
                           on_error="skip", output="numpy")
    with caplog.at_level(logging.WARNING, logger="stoker"):
        keys = [(b["__url__"][0], b["__key__"][0]) for b in loader]
    assert (f"{tmp_path}/s-1.tar", "d/000000") not in keys and len(keys) == 4  # refilled
    assert (f"{tmp_path}/s-0.tar", "d/000000") in keys
    skipped = [r.getMessage() for r in caplog.records if "skipped sample" in r.getMessage()]
    assert len(skipped) == 1 and skipped[0].startswith(f"skipped sample {tmp_path}/s-1.tar:d/000000 "), skipped


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    from PIL import Image

    root = tmp_path_factory.mktemp("folder") / "train"
    rng = np.random.default_rng(2)
    for rel in ["cat/001.jpg", "cat/002.JPEG", "dog/001.png", "dog/10.jpg"]:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        fmt = "PNG" if rel.endswith("png") else "JPEG"
        Image.fromarray(rng.integers(0, 256, (8, 6, 3), dtype=np.uint8)).save(p, format=fmt)
    return root


def test_image_folder_keys_are_paths_under_the_root(folder):
    loader = stoker.Loader(str(folder), {"cls": stoker.scalar()}, batch_size=4, drop_last=False, output="numpy")
    b = next(iter(loader))
    assert b["__key__"] == ["cat/001", "cat/002", "dog/001", "dog/10"]
    assert b["__url__"] == [str(folder / p) for p in ["cat/001.jpg", "cat/002.JPEG", "dog/001.png", "dog/10.jpg"]]


def test_a_packed_folder_gives_the_same_keys(tmp_path, folder):
    binary = stoker_bin()
    if binary is None:
        pytest.skip("no `stoker` command built (STOKER_BIN unset, none installed)")
    subprocess.run([binary, "pack", str(folder), str(tmp_path / "packed"), "--quiet"], check=True, timeout=60)
    fields = {"cls": stoker.scalar("int64")}
    packed = {(k, int(c)) for b in stoker.Loader(str(tmp_path / "packed-000000.tar"), fields, batch_size=4,
                                                 drop_last=False, output="numpy")
              for k, c in zip(b["__key__"], b["cls"])}
    loose = {(k, int(c)) for b in stoker.Loader(str(folder), fields, batch_size=4, drop_last=False, output="numpy")
             for k, c in zip(b["__key__"], b["cls"])}
    assert packed == loose == {("cat/001", 0), ("cat/002", 0), ("dog/001", 1), ("dog/10", 1)}


@pytest.fixture(scope="module")
def parquet_files(tmp_path_factory) -> list[Path]:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    d = tmp_path_factory.mktemp("pq")
    paths = []
    for f in range(2):
        ids = [f"img-{f}-{i:02d}" for i in range(5)]
        table = pa.table({"id": pa.array(ids), "n": pa.array([100 * f + i for i in range(5)], pa.int64()),
                          "label": pa.array([i % 3 for i in range(5)], pa.int64())})
        path = d / f"part-{f}.parquet"
        pq.write_table(table, str(path), row_group_size=2)
        paths.append(path)
    return paths


def parquet_keys(paths, **kw):
    loader = stoker.Loader([str(p) for p in paths], {"label": stoker.scalar("int64")}, batch_size=3,
                           drop_last=False, output="numpy", **kw)
    keys, urls = [], []
    for b in loader:
        keys += b["__key__"]
        urls += b["__url__"]
    return keys, urls


def test_parquet_keys_from_the_key_column(parquet_files):
    keys, urls = parquet_keys(parquet_files, key_column="id")
    assert keys == [f"img-{f}-{i:02d}" for f in range(2) for i in range(5)]
    assert urls == [str(p) for p in parquet_files for _ in range(5)]
    # A number column gives its decimal text; shuffled, each row keeps its own key.
    keys, _ = parquet_keys(parquet_files, key_column="n", shuffle=True, seed=3)
    assert sorted(keys, key=int) == [str(100 * f + i) for f in range(2) for i in range(5)]


def test_parquet_keys_default_to_file_and_row(parquet_files):
    keys, urls = parquet_keys(parquet_files)
    assert keys == [f"{p}:{i}" for p in parquet_files for i in range(5)]
    assert urls == [str(p) for p in parquet_files for _ in range(5)]


def test_key_column_errors_name_the_column(parquet_files, nested_shards):
    with pytest.raises(Exception, match="missing_col"):
        parquet_keys(parquet_files, key_column="missing_col")
    with pytest.raises(ValueError, match="key_column='id'.*not Parquet"):
        stoker.Loader(str(nested_shards / "s-0.tar"), {"cls": stoker.scalar("int64")}, batch_size=2,
                      key_column="id")


def test_a_packed_class_tree_keeps_its_class_names(tmp_path):
    # `stoker pack` of class folders writes PREFIX.classes.json; a Loader over the shards
    # (a glob, a brace list or the manifest) has the folder's classes and labels, in
    # torchvision ImageFolder's order (byte order: "c10" before "c2", "Cat" before "b ird").
    from PIL import Image

    binary = stoker_bin()
    if binary is None:
        pytest.skip("no `stoker` command built (STOKER_BIN unset, none installed)")
    root = tmp_path / "train"
    rng = np.random.default_rng(4)
    for cls in ["c2", "c10", "Cat", "b ird"]:
        for i in range(3):
            p = root / cls / f"{i}.png"
            p.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(rng.integers(0, 256, (6, 5, 3), dtype=np.uint8)).save(p)
    torchvision_classes = sorted(e.name for e in root.iterdir() if e.is_dir())  # find_classes
    out = tmp_path / "out"
    subprocess.run([binary, "pack", str(root), str(out / "train"), "--shard-size", "2KB", "--quiet"],
                   check=True, timeout=60)
    shards = sorted(out.glob("train-*.tar"))
    assert len(shards) > 1
    fields = {"cls": stoker.scalar("int64")}

    def read(source):
        loader = stoker.Loader(source, fields, batch_size=5, drop_last=False, output="numpy")
        return loader.classes, {(k, int(c)) for b in loader for k, c in zip(b["__key__"], b["cls"])}

    folder_classes, folder_labels = read(str(root))
    assert folder_classes == torchvision_classes == ["Cat", "b ird", "c10", "c2"]
    assert {k.split("/")[0]: folder_classes[c] for k, c in folder_labels} == {c: c for c in folder_classes}
    for source in (str(out / "train-*.tar"), f"{out}/train-{{000000..{len(shards) - 1:06d}}}.tar",
                   [str(s) for s in shards], str(out / "stoker-manifest.json")):
        assert read(source) == (folder_classes, folder_labels), source
    # Shards of no class tree have none; a later pack of another layout removes the file.
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "a.txt").write_text("x")
    subprocess.run([binary, "pack", str(tmp_path / "flat"), str(out / "train"), "--quiet"], check=True, timeout=60)
    assert not (out / "train.classes.json").exists()
    assert stoker.Loader(str(out / "train-000000.tar"), {"txt": stoker.text()}, batch_size=1).classes is None
