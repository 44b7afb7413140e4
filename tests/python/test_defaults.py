"""Defaults that never give wrong data silently (issue 44): the last batch
kept in one process as torch's DataLoader keeps it, one pass at a time per
loader, and DataLoader habits answered with stoker's equivalent.

The references are torch's own DataLoader (its defaults, its batch counts)
and the keys webdataset's writer put in the shards."""
from __future__ import annotations

import logging
import threading

import pytest

import stoker
from conftest import write_vision_shards


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("defaults")
    samples = write_vision_shards(d, shards=5, per_shard=50, size=(40, 32))  # 250 samples, 40 wide and 32 high
    return str(d / "shard-{000000..000004}.tar"), sorted(samples)


def fields():
    return {"cls": stoker.scalar("int64")}


def test_one_process_keeps_the_last_batch_as_torch_does(shards):
    import torch

    pattern, keys = shards
    loader = stoker.Loader(pattern, fields(), batch_size=64, output="numpy", rank=0, world_size=1)
    sizes = [len(b["__key__"]) for b in loader]
    # torch's DataLoader over the same 250 items with its defaults.
    reference = [len(b) for b in torch.utils.data.DataLoader(list(range(len(keys))), batch_size=64)]
    assert sizes == reference == [64, 64, 64, 58]
    assert len(loader) == len(reference)
    assert loader.plan.dropped_samples == 0


def test_ranks_keep_equal_full_batches_and_say_what_is_left_out(shards, caplog):
    pattern, keys = shards
    counts = []
    for rank in range(2):
        loader = stoker.Loader(pattern, fields(), batch_size=64, output="numpy", rank=rank, world_size=2)
        with caplog.at_level(logging.WARNING, logger="stoker"):
            caplog.clear()
            sizes = [len(b["__key__"]) for b in loader]
            first = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
            caplog.clear()
            list(loader)  # the second epoch says nothing more
            again = [r.getMessage() for r in caplog.records if "left out" in r.getMessage()]
        counts.append(sizes)
        # 125 a rank: one full batch of 64, 2 x 61 left out, said once, with the fix.
        assert sizes == [64]
        assert len(first) == 1 and "122 of the dataset's 250 samples" in first[0], first
        assert "partition='exact'" in first[0]
        assert again == []
    assert counts[0] == counts[1]


def test_exact_partition_says_nothing_is_left_out(shards, caplog):
    pattern, keys = shards
    got = []
    with caplog.at_level(logging.WARNING, logger="stoker"):
        for rank in range(2):
            loader = stoker.Loader(pattern, fields(), batch_size=64, output="numpy", rank=rank, world_size=2,
                                   partition="exact")
            got += [k for b in loader for k in b["__key__"]]
    assert sorted(k.split("/")[-1] for k in got) == keys
    assert not [r for r in caplog.records if "left out" in r.getMessage()]


def test_a_second_thread_iterating_at_once_is_refused_before_any_batch(shards):
    pattern, keys = shards
    loader = stoker.Loader(pattern, fields(), batch_size=8, output="numpy")
    mine = iter(loader)
    first = next(mine)
    errors, delivered = [], []

    def other():
        try:
            for b in loader:
                delivered.append(b)
        except RuntimeError as e:
            errors.append(str(e))

    t = threading.Thread(target=other, name="second-consumer")
    t.start()
    t.join(60)
    assert not t.is_alive()
    assert delivered == [] and len(errors) == 1, (len(delivered), errors)
    assert "already being iterated by MainThread" in errors[0] and "one pass at a time" in errors[0]
    # This pass goes on undisturbed: every sample once.
    got = list(first["__key__"]) + [k for b in mine for k in b["__key__"]]
    assert len(got) == len(set(got)) == len(keys)


def test_two_threads_one_after_the_other_each_get_a_whole_epoch(shards):
    pattern, keys = shards
    loader = stoker.Loader(pattern, fields(), batch_size=8, output="numpy")
    results = []

    def consume():
        results.append([k for b in loader for k in b["__key__"]])

    for _ in range(2):
        t = threading.Thread(target=consume)
        t.start()
        t.join(60)
    assert [len(r) for r in results] == [len(keys), len(keys)]
    assert all(len(set(r)) == len(keys) for r in results)


def test_an_iterator_superseded_in_its_own_thread_raises_instead_of_sharing(shards):
    pattern, keys = shards
    loader = stoker.Loader(pattern, fields(), batch_size=8, output="numpy")
    old = iter(loader)
    next(old)
    new = iter(loader)  # starts over in the same thread: allowed
    with pytest.raises(RuntimeError, match="superseded"):
        next(old)
    assert sum(len(b["__key__"]) for b in new) == len(keys)


@pytest.mark.parametrize("keyword, says", [
    ("num_workers", "decode_threads="),
    ("persistent_workers", "nothing to set"),
    ("prefetch_factor", "prefetch="),
    ("collate_fn", "assembled in place"),
    ("sampler", "shuffle="),
    ("worker_init_fn", "no worker processes"),
])
def test_dataloader_keywords_name_the_equivalent(shards, keyword, says):
    pattern, _ = shards
    with pytest.raises(TypeError, match=f"takes no {keyword}=") as e:
        stoker.Loader(pattern, fields(), batch_size=8, **{keyword: 4})
    assert says in str(e.value)


def test_a_positional_batch_size_says_it_is_a_keyword(shards):
    pattern, _ = shards
    with pytest.raises(TypeError, match="batch_size is a keyword"):
        stoker.Loader(pattern, fields(), 64)


def test_resize_none_is_decided_at_construction():
    # No size: each image as stored, a list per batch (issue 43; test_members.py
    # checks the pixels), decided here rather than failing at the first batch.
    spec = stoker.image(resize="none").image
    assert spec.variable and spec.max_pixels == 1 << 20
    fixed = stoker.image((24, 32), resize="none").image  # (H, W): every image that size
    assert (fixed.height, fixed.width, fixed.variable) == (24, 32, False)
    with pytest.raises(ValueError, match="uint8"):  # what a variable size cannot be, said at once
        stoker.image(resize="none", dtype="float32")


def test_an_image_of_another_size_under_resize_none_names_it_in_h_w(shards):
    pattern, _ = shards  # 40 wide, 32 high, but every third sample is 32 wide, 40 high
    loader = stoker.Loader(pattern, {"jpg": stoker.image((32, 40), resize="none")}, batch_size=8, output="numpy")
    with pytest.raises(stoker.StokerError) as e:
        list(loader)
    assert "size=(32, 40) (H, W)" in str(e.value) and "this one is (40, 32)" in str(e.value), e.value


@pytest.fixture(scope="module")
def img2dataset_folder(tmp_path_factory, shards):
    """The layout img2dataset writes: NNNNN.tar with NNNNN.parquet and
    NNNNN_stats.json beside each."""
    import json
    import shutil
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq

    src = Path(shards[0]).parent
    d = tmp_path_factory.mktemp("img2dataset")
    for i in range(2):
        shutil.copy(src / f"shard-{i:06d}.tar", d / f"{i:05d}.tar")
        pq.write_table(pa.table({"key": [f"{i:05d}"], "status": ["success"]}), d / f"{i:05d}.parquet")
        (d / f"{i:05d}_stats.json").write_text(json.dumps({"count": 50}))
    return d


def test_a_folder_of_shards_says_which_pattern_to_pass(img2dataset_folder):
    with pytest.raises(ValueError) as e:
        stoker.Loader(str(img2dataset_folder), fields(), batch_size=8)
    assert "is a folder of 2 tar shards" in str(e.value) and f"'{img2dataset_folder}/*.tar'" in str(e.value), e.value
    # The pattern it names reads every shard.
    loader = stoker.Loader(f"{img2dataset_folder}/*.tar", fields(), batch_size=8, output="numpy")
    assert sum(len(b["__key__"]) for b in loader) == 100


def test_a_glob_that_catches_the_files_beside_the_shards_names_them(img2dataset_folder):
    with pytest.raises(ValueError) as e:
        stoker.Loader(f"{img2dataset_folder}/*", fields(), batch_size=8)
    msg = str(e.value)
    assert "matches 2 tar shards and 4 other files" in msg and "00000.parquet" in msg, msg
    assert f"'{img2dataset_folder}/*.tar'" in msg


def test_a_flat_folder_of_images_points_to_the_layout_and_pack(tmp_path):
    import numpy as np
    from PIL import Image

    for i in range(3):
        Image.fromarray(np.full((8, 8, 3), i, np.uint8)).save(tmp_path / f"{i}.png")
    with pytest.raises(ValueError) as e:
        stoker.Loader(str(tmp_path), {"png": stoker.image(8)}, batch_size=2)
    assert "holds 3 images but no class sub-directories" in str(e.value) and "stoker pack" in str(e.value)


@pytest.fixture(scope="module")
def small_pngs(tmp_path_factory):
    """MNIST-like: 28x28 PNGs (Pillow-written), 40 samples in one shard."""
    import io

    import numpy as np
    import webdataset as wds
    from PIL import Image

    d = tmp_path_factory.mktemp("small_pngs")
    rng = np.random.default_rng(3)
    with wds.TarWriter(str(d / "mnist-000000.tar")) as sink:
        for i in range(40):
            buf = io.BytesIO()
            Image.fromarray(rng.integers(0, 256, (28, 28), dtype=np.uint8)).save(buf, format="PNG")
            sink.write({"__key__": f"m{i:03d}", "png": buf.getvalue(), "cls": str(i % 10).encode()})
    return str(d / "mnist-000000.tar"), Image.open(io.BytesIO(buf.getvalue())).size


def _upscale_lines(caplog, loader, epochs=2):
    with caplog.at_level(logging.WARNING, logger="stoker"):
        caplog.clear()
        for _ in range(epochs):
            for _ in loader:
                pass
        return [r.getMessage() for r in caplog.records if "scales its images up" in r.getMessage()]


def test_a_default_image_upscaling_small_pngs_warns_once_with_the_fix(small_pngs, caplog):
    pattern, (w, h) = small_pngs  # Pillow's size: (W, H)
    loader = stoker.Loader(pattern, {"png": stoker.image(), "cls": stoker.scalar()}, batch_size=16, output="numpy")
    lines = _upscale_lines(caplog, loader)
    assert len(lines) == 1, lines  # once over two epochs
    assert "'png'" in lines[0] and "size=(224, 224) (H, W), image()'s default" in lines[0], lines[0]
    assert f"e.g. ({h}, {w})" in lines[0] and f'image(({h}, {w}), resize="none")' in lines[0], lines[0]
    # The engine's counts: every image decoded (two epochs, and the next one's first batches
    # made ahead) was scaled up, the first of them Pillow's size.
    [counts] = loader.settings["image_upscales"]
    assert counts["images"] >= 80 and counts["upscaled"] == counts["images"], counts
    assert (counts["field"], counts["first_size"], counts["size"]) == ("png", (h, w), (224, 224))


def test_jpegs_smaller_than_the_output_warn_too(shards, caplog):
    pattern, _ = shards  # 40 wide, 32 high (every third 32 wide, 40 high): JPEG header sizes
    loader = stoker.Loader(pattern, {"jpg": stoker.image(64)}, batch_size=50, output="numpy")
    lines = _upscale_lines(caplog, loader, epochs=1)
    assert len(lines) == 1 and "'jpg'" in lines[0] and "size=(64, 64) (H, W)," in lines[0], lines
    assert "e.g. (32, 40)" in lines[0] or "e.g. (40, 32)" in lines[0], lines[0]


@pytest.mark.parametrize("spec", [lambda: stoker.image((28, 28), resize="none"), lambda: stoker.image(16),
                                  lambda: stoker.image(28), lambda: stoker.image(64, resize="random_resized_crop")])
def test_no_upscale_warning_where_the_images_keep_or_lose_size(small_pngs, caplog, spec):
    # resize="none", a smaller or equal size, and random_resized_crop (whose crops are scaled
    # up by design) say nothing.
    pattern, _ = small_pngs
    loader = stoker.Loader(pattern, {"png": spec()}, batch_size=16, output="numpy")
    assert _upscale_lines(caplog, loader, epochs=1) == []
