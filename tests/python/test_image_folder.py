"""An ImageFolder tree (class sub-directories) loaded without packing:
the (path, label) set and order follow torchvision.datasets.ImageFolder's
rules, reproduced here from torchvision/datasets/folder.py (find_classes,
make_dataset: sorted class names, sorted(os.walk(followlinks=True)), sorted
file names, case-insensitive IMG_EXTENSIONS); pixels equal Pillow's."""
from __future__ import annotations

import io
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import stoker

IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def torchvision_samples(directory: str) -> tuple[list[str], list[tuple[str, int]]]:
    classes = sorted(entry.name for entry in os.scandir(directory) if entry.is_dir())
    class_to_idx = {c: i for i, c in enumerate(classes)}
    instances = []
    for target_class in sorted(class_to_idx):
        target_dir = os.path.join(directory, target_class)
        for root, _, fnames in sorted(os.walk(target_dir, followlinks=True)):
            for fname in sorted(fnames):
                path = os.path.join(root, fname)
                if path.lower().endswith(IMG_EXTENSIONS):
                    instances.append((path, class_to_idx[target_class]))
    return classes, instances


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("imagefolder") / "train"
    rng = np.random.default_rng(5)
    layout = {
        "dog": ["b.jpg", "a.PNG", "sub/z.webp", "sub/deeper/c.jpeg", "sub-x/y.jpg", "notes.txt", ".hidden.jpg"],
        "Cat": ["1.png", "10.png", "2.png"],
        "cat": ["x.JPG"],
        "b ird": ["only.webp", "sub/nested.png"],
    }
    for cls, files in layout.items():
        for f in files:
            p = root / cls / f
            p.parent.mkdir(parents=True, exist_ok=True)
            if f.endswith(".txt"):
                p.write_text("not an image")
                continue
            img = Image.fromarray(rng.integers(0, 256, (12, 10, 3), dtype=np.uint8))
            fmt = {"jpg": "JPEG", "jpeg": "JPEG", "png": "PNG", "webp": "WEBP"}[f.rsplit(".", 1)[1].lower()]
            img.save(p, format=fmt, **({"lossless": True} if fmt == "WEBP" else {}))
    (root / "stray.jpg").write_bytes(b"top-level files are not samples")
    return root


def test_order_labels_and_pixels_match_imagefolder(tree):
    classes, ref = torchvision_samples(str(tree))
    loader = stoker.Loader(str(tree) + "/", {"image": stoker.image((12, 10), resize="none", layout="HWC"),
                                             "cls": stoker.scalar()}, batch_size=3, drop_last=False,
                           output="numpy")
    assert loader.classes == classes == ["Cat", "b ird", "cat", "dog"]
    got = []
    for batch in loader:
        for i, (key, path) in enumerate(zip(batch["__key__"], batch["__url__"])):
            # The key: the path under the root, the name cut at its first dot.
            rel = os.path.relpath(path, tree)
            assert key == os.path.join(os.path.dirname(rel), os.path.basename(rel).split(".")[0] or
                                       "." + os.path.basename(rel).split(".")[1]), (key, path)
            got.append((path, int(batch["cls"][i])))
            want = np.asarray(Image.open(path).convert("RGB"))
            np.testing.assert_array_equal(batch["image"][i], want, err_msg=path)
    assert got == ref  # same set, same order (unshuffled), every sample once
    assert loader.plan.dataset_samples == len(ref)


def test_shuffled_epoch_is_a_permutation(tree):
    _, ref = torchvision_samples(str(tree))
    loader = stoker.Loader(str(tree), {"image": stoker.image(8), "cls": stoker.scalar()},
                           batch_size=4, drop_last=False, shuffle=True, seed=1, output="numpy")
    for epoch in range(2):
        loader.set_epoch(epoch)
        seen = [(u, int(c)) for b in loader for u, c in zip(b["__url__"], b["cls"])]
        assert sorted(seen) == sorted(ref) and len(seen) == len(ref)


def test_jpg_field_reads_JPEG_members_as_webdataset_does(tmp_path):
    # ImageNet's own naming (.JPEG): webdataset lowercases the suffix and decodes
    # jpg and jpeg alike, so fields={"jpg": ...} reads them, in a folder and in a
    # shard; "png" reads ".PNG" the same way.
    import tarfile

    rng = np.random.default_rng(3)
    (tmp_path / "train" / "n01").mkdir(parents=True)
    tars = {ext: tarfile.open(tmp_path / f"{ext}-000000.tar", "w") for ext in ("JPEG", "PNG")}
    for ext, fmt in (("JPEG", "JPEG"), ("PNG", "PNG")):
        for i in range(2):
            buf = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (12, 10, 3), dtype=np.uint8)).save(buf, format=fmt)
            if ext == "JPEG":
                (tmp_path / "train" / "n01" / f"x{i}.JPEG").write_bytes(buf.getvalue())
            info = tarfile.TarInfo(f"x{i}.{ext}")
            info.size = len(buf.getvalue())
            tars[ext].addfile(info, io.BytesIO(buf.getvalue()))
    for t in tars.values():
        t.close()

    def read(source, field):
        spec = stoker.image((12, 10), resize="none", layout="HWC")
        return np.concatenate([b[field] for b in stoker.Loader(source, {field: spec}, batch_size=2,
                                                               drop_last=False, output="numpy")])

    folder = str(tmp_path / "train")
    want = read(folder, "image")
    np.testing.assert_array_equal(read(folder, "jpg"), want)
    np.testing.assert_array_equal(read(str(tmp_path / "JPEG-000000.tar"), "jpg"), want)
    pngs = read(str(tmp_path / "PNG-000000.tar"), "png")
    for i in range(2):
        with tarfile.open(tmp_path / "PNG-000000.tar") as t:
            ref = np.asarray(Image.open(t.extractfile(f"x{i}.PNG")).convert("RGB"))
        np.testing.assert_array_equal(pngs[i], ref)


def test_undecodable_extension_is_named(tmp_path):
    (tmp_path / "a").mkdir()
    Image.new("RGB", (4, 4)).save(tmp_path / "a" / "x.bmp")
    with pytest.raises(ValueError, match=r"x\.bmp.*not decoded by stoker"):
        stoker.Loader(str(tmp_path), {"image": stoker.image(4)}, batch_size=1)


def test_empty_class_is_an_error(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    Image.new("RGB", (4, 4)).save(tmp_path / "a" / "x.png")
    with pytest.raises(stoker.StokerError, match="class 'b' has no image"):
        stoker.Loader(str(tmp_path), {"image": stoker.image(4)}, batch_size=1)


def _cli(*args) -> subprocess.CompletedProcess:
    from conftest import stoker_bin

    exe = stoker_bin()
    if exe is None:
        pytest.skip("no stoker command built")
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, check=True, timeout=120)


def test_cli_inspect_and_bench_take_a_folder(tree):
    """`stoker inspect/bench data/train/`: the same classes, labels and sample
    count as torchvision's ImageFolder, fields inferred as image + cls."""
    classes, instances = torchvision_samples(str(tree))
    out = json.loads(_cli("inspect", tree, "--json", "-n", 100).stdout)
    assert [c["name"] for c in out["classes"]] == classes
    assert [c["label"] for c in out["classes"]] == list(range(len(classes)))
    assert out["num_samples"] == len(instances)
    assert [(s["path"], s["label"]) for s in out["samples"]] == instances
    proc = _cli("bench", tree, "--batch-size", 2, "--epochs", 1, "--json")
    assert "inferred: -f image:image:224 -f cls:scalar (an image folder)" in proc.stderr
    assert json.loads(proc.stdout)["dataset_samples"] == len(instances)


def test_tables_past_the_index_bound_stay_held(tree):
    # An image folder's (and a Parquet file's) index tables cannot be loaded
    # again by path: whatever index_cache_bytes says, every one stays.
    _, ref = torchvision_samples(str(tree))
    loader = stoker.Loader(str(tree), {"image": stoker.image(8), "cls": stoker.scalar()}, batch_size=4,
                           drop_last=False, shuffle=False, output="numpy", index_cache_bytes=1)
    seen = [(u, int(c)) for b in loader for u, c in zip(b["__url__"], b["cls"])]
    assert sorted(seen) == sorted(ref)
    assert loader.settings["index"]["max_bytes"] == 0 and loader.settings["index"]["loads"] == 0
