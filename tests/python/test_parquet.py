"""Parquet sources against independent writers and readers: files written by
Hugging Face `datasets` (the Hub's Image() struct {bytes, path}) and by pyarrow
directly (a binary column, numbers, strings, fixed-size lists), read by
stoker and compared with what pyarrow reads back and with Pillow's decode
(full size, exact) and torchvision's recipe (center crop, the tolerance of
test_torchvision_fidelity.py)."""
from __future__ import annotations

import io
import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import stoker
from conftest import jpeg_bytes, natural_image, stoker_env
from test_torchvision_fidelity import diff_stats, reference


def hf_dataset_files(directory, n=40, files=2, same_size=False, seed=0):
    """Parquet written by `datasets` itself: Image() column, labels, captions."""
    import datasets

    rng = np.random.default_rng(seed)
    images, labels, captions = [], [], []
    for i in range(n):
        w, h = (64, 48) if same_size or i % 3 else (50, 70)
        images.append(jpeg_bytes(natural_image(rng, w, h)))
        labels.append(i % 7)
        captions.append(f"picture {i}: ünïcode ✓")
    ds = datasets.Dataset.from_dict({"image": images, "label": labels, "caption": captions})
    ds = ds.cast_column("image", datasets.Image())
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for f in range(files):
        path = directory / f"train-{f:05d}-of-{files:05d}.parquet"
        ds.shard(files, f, contiguous=True).to_parquet(str(path))
        paths.append(path)
    return paths, images, labels, captions


def pyarrow_files(directory, n=45, files=3, row_group_size=7, seed=1):
    """Parquet written by pyarrow: binary JPEGs, int64, float32, string, fixed-size list."""
    rng = np.random.default_rng(seed)
    cols = {
        "jpg": [jpeg_bytes(natural_image(rng, 40, 30)) for _ in range(n)],
        "cls": np.arange(n, dtype=np.int64) * 1000003,
        "score": rng.standard_normal(n).astype(np.float32),
        "text": [f"row {i}" for i in range(n)],
        "emb": rng.standard_normal((n, 4)).astype(np.float32),
    }
    directory.mkdir(parents=True, exist_ok=True)
    per = n // files
    paths = []
    for f in range(files):
        s = slice(f * per, (f + 1) * per)
        table = pa.table({
            "jpg": pa.array(cols["jpg"][s], pa.binary()),
            "cls": pa.array(cols["cls"][s]),
            "score": pa.array(cols["score"][s]),
            "text": pa.array(cols["text"][s]),
            "emb": pa.FixedSizeListArray.from_arrays(pa.array(cols["emb"][s].ravel()), 4),
        })
        path = directory / f"part-{f}.parquet"
        pq.write_table(table, str(path), row_group_size=row_group_size)
        paths.append(path)
    return paths, cols


@pytest.fixture(scope="module")
def hf_files(tmp_path_factory):
    return hf_dataset_files(tmp_path_factory.mktemp("hf"))


@pytest.fixture(scope="module")
def pa_files(tmp_path_factory):
    return pyarrow_files(tmp_path_factory.mktemp("pa"))


def collect(loader, fields):
    out = {f: [] for f in fields}
    for batch in loader:
        for f in fields:
            v = batch[f]
            out[f].extend(v if isinstance(v, list) else list(np.asarray(v)))
    return out


def row_of(key: str) -> int:
    return int(key.rsplit(":", 1)[1])


def test_datasets_image_struct_full_size_equals_pillow(tmp_path):
    paths, images, labels, captions = hf_dataset_files(tmp_path / "hf", n=12, same_size=True)
    # The file really holds the Hub's struct, as datasets wrote it.
    assert pq.read_schema(paths[0]).field("image").type == pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    loader = stoker.Loader(str(tmp_path / "hf" / "train-*.parquet"),
                           fields={"image": stoker.image((48, 64), resize="none", layout="HWC"),
                                   "label": stoker.scalar(), "caption": stoker.text()},
                           batch_size=5, drop_last=False, output="numpy")
    got = collect(loader, ["image", "label", "caption", "__key__"])
    assert len(got["image"]) == 12
    for i in range(12):
        ref = np.asarray(Image.open(io.BytesIO(images[i])).convert("RGB"))
        np.testing.assert_array_equal(got["image"][i], ref)
        assert int(got["label"][i]) == labels[i]
        assert got["caption"][i] == captions[i]
    # Keys name the file and the row within it.
    assert got["__key__"][7] == f"{paths[1]}:1"


def test_image_struct_by_path_reads_the_file(tmp_path):
    """`datasets` built from file paths stores {bytes: null, path}: stoker reads the file, as
    datasets' Image() does; a relative path is taken from the Parquet file's directory; a
    missing file is an error naming the path, the row and the column."""
    import datasets

    rng = np.random.default_rng(3)
    (tmp_path / "img").mkdir()
    images = [jpeg_bytes(natural_image(rng, 40, 30)) for _ in range(6)]
    for i, data in enumerate(images):
        (tmp_path / "img" / f"{i}.jpg").write_bytes(data)
    ds = datasets.Dataset.from_dict({"image": [str(tmp_path / "img" / f"{i}.jpg") for i in range(6)],
                                     "label": list(range(6))}).cast_column("image", datasets.Image())
    by_datasets = tmp_path / "absolute.parquet"
    ds.to_parquet(str(by_datasets))
    assert pq.read_table(by_datasets).column("image")[0].as_py()["bytes"] is None  # paths, as datasets wrote them
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    relative = tmp_path / "relative.parquet"
    pq.write_table(pa.table({"image": pa.array([{"bytes": None, "path": f"img/{i}.jpg"} for i in range(6)],
                                               image_type), "label": pa.array(range(6), pa.int64())}), relative)
    fields = {"image": stoker.image((30, 40), resize="none", layout="HWC"), "label": stoker.scalar()}
    for path in (by_datasets, relative):
        got = collect(stoker.Loader(str(path), fields=fields, batch_size=4, drop_last=False, output="numpy"),
                      ["image", "label"])
        assert [int(x) for x in got["label"]] == list(range(6))
        for i, data in enumerate(images):
            np.testing.assert_array_equal(got["image"][i], np.asarray(Image.open(io.BytesIO(data)).convert("RGB")))
    (tmp_path / "img" / "4.jpg").unlink()
    with pytest.raises(stoker.StokerError, match=r"relative.parquet: row 4 \(row group 0\) column 'image'.*"
                                                 r"'path' 'img/4.jpg'.*4.jpg"):
        list(stoker.Loader(str(relative), fields=fields, batch_size=2, output="numpy"))


def test_datasets_center_crop_equals_torchvision(hf_files):
    paths, images, labels, _ = hf_files
    spec = dict(size=32, resize="center_crop")
    loader = stoker.Loader([str(p) for p in paths], fields={"image": stoker.image(layout="HWC", **spec),
                                                            "label": stoker.scalar()},
                           batch_size=8, drop_last=False, output="numpy")
    got = collect(loader, ["image", "label"])
    assert [int(x) for x in got["label"]] == labels
    for i, data in enumerate(images):
        mean, p999 = diff_stats(got["image"][i], reference(data, spec))
        assert mean <= 0.3 and p999 <= 1, (i, mean, p999)


def test_pyarrow_columns_equal_what_pyarrow_reads(pa_files):
    paths, cols = pa_files
    assert pq.ParquetFile(paths[0]).metadata.num_row_groups == 3  # 15 rows in groups of 7
    loader = stoker.Loader([str(p) for p in paths],
                           fields={"jpg": stoker.image((30, 40), resize="none", layout="HWC"),
                                   "cls": stoker.scalar("int64"), "score": stoker.scalar("float32"),
                                   "text": stoker.text(), "emb": stoker.npy()},
                           batch_size=4, drop_last=False, output="numpy")
    got = collect(loader, ["jpg", "cls", "score", "text", "emb"])
    n = len(cols["text"])
    assert len(got["cls"]) == n
    back = pa.concat_tables([pq.read_table(p) for p in paths])  # pyarrow's own reading
    np.testing.assert_array_equal(np.array(got["cls"]), back["cls"].to_numpy())
    np.testing.assert_array_equal(np.array(got["score"], np.float32), back["score"].to_numpy())  # bit for bit
    assert got["text"] == back["text"].to_pylist()
    np.testing.assert_array_equal(np.stack(got["emb"]), np.stack(back["emb"].to_numpy(zero_copy_only=False)))
    for i in range(n):
        ref = np.asarray(Image.open(io.BytesIO(back["jpg"][i].as_py())).convert("RGB"))
        np.testing.assert_array_equal(got["jpg"][i], ref)


def test_parquet_pixels_equal_the_same_images_from_tar(tmp_path, hf_files):
    import webdataset as wds

    paths, images, _, _ = hf_files
    with wds.TarWriter(str(tmp_path / "same.tar")) as sink:
        for i, data in enumerate(images):
            sink.write({"__key__": f"k{i:04d}", "jpg": data})
    fields = {"image": stoker.image(24)}
    a = collect(stoker.Loader([str(p) for p in paths], fields=fields, batch_size=8, drop_last=False,
                              output="numpy"), ["image"])["image"]
    b = collect(stoker.Loader(str(tmp_path / "same.tar"), fields={"jpg": stoker.image(24)}, batch_size=8,
                              drop_last=False, output="numpy"), ["jpg"])["jpg"]
    np.testing.assert_array_equal(np.stack(a), np.stack(b))


@pytest.mark.parametrize("shuffle_block", [None, 1])  # auto: row groups' rows; 1: every row alone
def test_shuffled_epochs_exactly_once(pa_files, shuffle_block):
    paths, cols = pa_files
    kw = {} if shuffle_block is None else {"shuffle_block": shuffle_block}
    loader = stoker.Loader([str(p) for p in paths], fields={"cls": stoker.scalar()}, batch_size=4,
                           drop_last=False, shuffle=True, seed=3, output="numpy", **kw)
    orders = []
    for epoch in range(3):
        loader.set_epoch(epoch)
        got = collect(loader, ["cls", "__key__"])
        assert sorted(int(x) for x in got["cls"]) == sorted(int(x) for x in cols["cls"])  # each row once
        # The value is the row's own: key (file:row) and label agree.
        for key, value in zip(got["__key__"], got["cls"]):
            f = [str(p) for p in paths].index(key.rsplit(":", 1)[0])
            assert int(value) == cols["cls"][f * 15 + row_of(key)]
        orders.append([int(x) for x in got["cls"]])
    assert orders[0] != orders[1] != orders[2]
    assert orders[0] != sorted(orders[0])


def test_partition_across_ranks_is_exactly_once(pa_files):
    paths, cols = pa_files
    seen = []
    for rank in range(3):
        loader = stoker.Loader([str(p) for p in paths], fields={"cls": stoker.scalar()}, batch_size=5,
                               shuffle=True, seed=1, rank=rank, world_size=3, output="numpy")
        seen += [int(x) for x in collect(loader, ["cls"])["cls"]]
    assert sorted(seen) == sorted(int(x) for x in cols["cls"])


RESUMER = """
import json, sys
import numpy as np
import stoker
paths, state = json.loads(sys.argv[1]), sys.argv[2]
loader = stoker.Loader(paths, fields={"cls": stoker.scalar(), "jpg": stoker.image(16)}, batch_size=4,
                       shuffle=True, seed=7, output="numpy")
loader.load_state_dict(json.loads(state))
print(json.dumps([[int(x) for x in b["cls"]] + [int(np.asarray(b["jpg"], np.int64).sum())] for b in loader]))
"""


def test_resume_in_a_new_process_is_exact(pa_files, tmp_path):
    paths, _ = pa_files
    paths = [str(p) for p in paths]
    fields = {"cls": stoker.scalar(), "jpg": stoker.image(16)}
    full = [[int(x) for x in b["cls"]] + [int(np.asarray(b["jpg"], np.int64).sum())]
            for b in stoker.Loader(paths, fields=fields, batch_size=4, shuffle=True, seed=7, output="numpy")]
    first = stoker.Loader(paths, fields=fields, batch_size=4, shuffle=True, seed=7, output="numpy")
    it = iter(first)
    for _ in range(4):
        next(it)
    state = first.state_dict()
    del it, first
    script = tmp_path / "resumer.py"
    script.write_text(RESUMER)
    proc = subprocess.run([sys.executable, str(script), json.dumps(paths), json.dumps(state)], env=stoker_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == full[4:]


def test_truncated_file_fails_naming_file_and_offset(pa_files, tmp_path):
    paths, _ = pa_files
    data = paths[0].read_bytes()
    bad = tmp_path / "cut.parquet"
    bad.write_bytes(data[: len(data) // 2])
    with pytest.raises(stoker.StokerError) as err:
        stoker.Loader([str(paths[1]), str(bad)], fields={"cls": stoker.scalar()}, batch_size=4)
    msg = str(err.value)
    assert str(bad) in msg and f"offset {len(data) // 2 - 4}" in msg, msg


def test_missing_column_and_unsupported_type_are_named(pa_files, tmp_path):
    paths, _ = pa_files
    with pytest.raises(stoker.StokerError, match=r"has no column 'label' \(it has: jpg, cls, score, text, emb\)"):
        stoker.Loader(str(paths[0]), fields={"label": stoker.scalar()}, batch_size=4)
    nested = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"m": pa.array([{"a": 1}], pa.struct([("a", pa.int64())]))}), str(nested))
    with pytest.raises(ValueError, match=r"row 0 \(row group 0\) column 'm'.*struct<a: int64>"):  # InvalidArgument
        stoker.Loader(str(nested), fields={"m": stoker.scalar()}, batch_size=1)
    nulls = tmp_path / "nulls.parquet"
    pq.write_table(pa.table({"x": pa.array([1, None, 3], pa.int64())}), str(nulls))
    loader = stoker.Loader(str(nulls), fields={"x": stoker.scalar()}, batch_size=1, output="numpy")
    with pytest.raises(stoker.StokerError, match=r"nulls.parquet: row 1 \(row group 0\) column 'x': value is null"):
        list(loader)


def test_over_http_from_nginx_equals_local(hf_files):
    """Ranged reads of the footer and column chunks through stoker's HTTP reader."""
    from nginx_server import NginxServer

    paths, images, labels, captions = hf_files
    fields = {"image": stoker.image(24), "label": stoker.scalar(), "caption": stoker.text()}
    local = collect(stoker.Loader([str(p) for p in paths], fields=fields, batch_size=8, shuffle=True, seed=5,
                                  output="numpy"), ["image", "label", "caption"])
    with NginxServer(paths[0].parent) as server:
        urls = [f"{server.url}/{p.name}" for p in paths]
        loader = stoker.Loader(urls, fields=fields, batch_size=8, shuffle=True, seed=5, output="numpy")
        remote = collect(loader, ["image", "label", "caption", "__key__"])
    assert remote["__key__"][0].startswith(server.url)
    assert [int(x) for x in remote["label"]] == [int(x) for x in local["label"]]
    assert remote["caption"] == local["caption"]
    np.testing.assert_array_equal(np.stack(remote["image"]), np.stack(local["image"]))
    assert sorted(remote["caption"]) == sorted(captions)  # every row once (40 rows, batches of 8)
    # Each row's values are its own, though rows are read in runs (one request per run).
    for key, label in zip(remote["__key__"], remote["label"]):
        f = [p.name for p in paths].index(key.rsplit(":", 1)[0].rsplit("/", 1)[1])
        assert int(label) == labels[f * 20 + row_of(key)]


def test_cli_inspect_reads_parquet(hf_files):
    from conftest import stoker_bin

    paths, *_ = hf_files
    out = subprocess.run([stoker_bin(), "inspect", str(paths[0]), "--json"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    md = pq.ParquetFile(paths[0]).metadata
    assert info["num_rows"] == md.num_rows and info["num_row_groups"] == md.num_row_groups
    columns = {c["name"]: c for c in info["columns"]}
    assert columns["image"]["field"] == "image" and columns["label"]["field"] == "scalar"
    assert columns["caption"]["field"] == "text"
    assert info["inferred_flags"] == ["-f", "image:image:224", "-f", "label:scalar", "-f", "caption:text"]
    text = subprocess.run([stoker_bin(), "inspect", str(paths[0])], capture_output=True, text=True, timeout=60)
    assert text.returncode == 0 and f"rows      {md.num_rows} in {md.num_row_groups} row groups" in text.stdout


def test_corrupt_image_names_row_and_column_or_is_skipped(tmp_path):
    rng = np.random.default_rng(4)
    jpgs = [jpeg_bytes(natural_image(rng, 40, 30)) for _ in range(12)]
    jpgs[5] = jpgs[5][:200]  # a cut JPEG in row 5
    path = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"jpg": pa.array(jpgs, pa.binary()), "cls": pa.array(range(12))}), str(path),
                   row_group_size=4)
    fields = {"jpg": stoker.image(16), "cls": stoker.scalar()}
    with pytest.raises(stoker.StokerError, match=r"bad.parquet: row 5 \(row group 1\) column 'jpg'"):
        list(stoker.Loader(str(path), fields=fields, batch_size=4, output="numpy"))
    loader = stoker.Loader(str(path), fields=fields, batch_size=4, on_error="skip", output="numpy")
    got = [int(x) for b in loader for x in b["cls"]]
    assert len(got) == 12 and 5 not in got and sorted(set(got)) == [i for i in range(12) if i != 5]


def test_cli_bench_and_doctor_read_parquet_without_flags(hf_files):
    """The fields come from the footer, as inspect infers them; one sample per row."""
    from conftest import stoker_bin

    paths, images, *_ = hf_files
    files = [str(p) for p in paths]
    bench = subprocess.run([stoker_bin(), "bench", *files, "-b", "8", "--epochs", "1", "--shuffle", "--json"],
                           capture_output=True, text=True, timeout=120)
    assert bench.returncode == 0, bench.stderr
    assert "inferred: -f image:image:224 -f label:scalar -f caption:text" in bench.stderr
    assert json.loads(bench.stdout)["epochs"][0]["samples"] == len(images)
    doctor = subprocess.run([stoker_bin(), "doctor", *files, "-b", "8", "--run-seconds", "0.5", "--json"],
                            capture_output=True, text=True, timeout=300)
    assert doctor.returncode == 0, doctor.stderr
    doc = json.loads(doctor.stdout)
    assert doc["recommended"]["decode_threads"] >= 1 and doc["verdict"]["bottleneck"]
