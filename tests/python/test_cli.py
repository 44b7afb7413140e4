"""End-to-end tests of the `stoker` command line: synth -> pack -> index/inspect/bench.

Each shard is checked against Python's own readers (tarfile, Pillow, numpy), so
the CLI is judged by what other tools see, not by stoker reading itself back.
The binary comes from $STOKER_BIN, else `stoker` on PATH, else build/cli/stoker.
"""
import io
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _find_binary():
    for candidate in (os.environ.get("STOKER_BIN"), shutil.which("stoker"), REPO / "build" / "cli" / "stoker"):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


STOKER = _find_binary()
pytestmark = pytest.mark.skipif(
    STOKER is None, reason="stoker binary not found: set STOKER_BIN or build build/cli/stoker"
)


def run(*args, ok=True):
    proc = subprocess.run([STOKER, *map(str, args)], capture_output=True, text=True, timeout=60)
    if ok:
        assert proc.returncode == 0, f"stoker {' '.join(map(str, args))} failed:\n{proc.stderr}"
    return proc


def read_index(path):
    """The sidecar as {key: (begin, end, {field: (name, offset, size)})}, in order."""
    doc = json.loads(Path(path).read_text())
    samples = {}
    for key, begin, end, members in doc["samples"]:
        samples[key] = (begin, end, {f: (name, off, size) for f, name, off, size in members})
    return doc, samples


def tar_members(path):
    with tarfile.open(path) as tar:
        return [(m.name, m.offset, m.offset_data, m.size) for m in tar.getmembers() if m.isfile()]


@pytest.fixture(scope="module")
def sa1b(tmp_path_factory):
    root = tmp_path_factory.mktemp("sa1b")
    loose = root / "loose"
    run("synth", loose, "--kind", "sa1b", "--count", 12, "--image-size", "160x120", "--seed", 7, "--quiet")
    run("pack", loose, root / "out" / "sa1b", "--shard-size", "150KB", "--quiet")
    return loose, sorted((root / "out").glob("sa1b-*.tar"))


def test_synth_sa1b_files(sa1b):
    np = pytest.importorskip("numpy")
    Image = pytest.importorskip("PIL.Image")
    loose, _ = sa1b
    names = sorted(p.name for p in loose.iterdir())
    assert names == sorted([f"sa_{i}.jpg" for i in range(1, 13)] + [f"sa_{i}_features.npz" for i in range(1, 13)])
    sizes = set()
    for i in range(1, 13):
        with Image.open(loose / f"sa_{i}.jpg") as im:
            im.load()
            assert im.format == "JPEG" and im.mode == "RGB"
            sizes.add(im.size)
            # Natural-looking content, not flat and not noise: a real spread of values.
            arr = np.asarray(im, dtype=np.float32)
            assert arr.std() > 10
            assert np.abs(np.diff(arr, axis=1)).mean() < 12
        with np.load(loose / f"sa_{i}_features.npz") as npz:
            assert npz["embeddings"].dtype == np.float16 and npz["embeddings"].shape == (64, 16, 16)
            assert npz["iou"].dtype == np.float16 and npz["iou"].shape == (4,)
            assert np.isfinite(npz["embeddings"].astype(np.float32)).all()
    assert sizes <= {(160, 120), (120, 160), (149, 126)}


def test_synth_is_deterministic(tmp_path, sa1b):
    loose, _ = sa1b
    run("synth", tmp_path, "--kind", "sa1b", "--count", 3, "--image-size", "160x120", "--seed", 7, "--quiet")
    for name in ("sa_1.jpg", "sa_3_features.npz"):
        assert (tmp_path / name).read_bytes() == (loose / name).read_bytes()
    run("synth", tmp_path / "other", "--kind", "sa1b", "--count", 1, "--image-size", "160x120", "--seed", 8, "-q")
    assert (tmp_path / "other" / "sa_1.jpg").read_bytes() != (loose / "sa_1.jpg").read_bytes()


def test_pack_sa1b_members_and_index(sa1b):
    loose, shards = sa1b
    assert len(shards) > 1, "150KB shards of ~40KB samples should roll over"
    seen = {}
    for shard in shards:
        members = tar_members(shard)
        data = shard.read_bytes()
        for name, _, off, size in members:
            assert name not in seen, f"{name} packed twice"
            seen[name] = data[off:off + size]
        doc, index = read_index(str(shard) + ".idx")
        assert doc["key_rule"] == "underscore" and doc["shard_size"] == len(data)
        by_name = {m[0]: m for m in members}
        assert len(index) == len(members) // 2
        for key, (begin, end, fields) in index.items():
            assert set(fields) == {"jpg", "features.npz"}
            assert fields["jpg"][0] == f"{key}.jpg" and fields["features.npz"][0] == f"{key}_features.npz"
            for name, off, size in fields.values():
                assert (by_name[name][2], by_name[name][3]) == (off, size)
                assert data[off:off + size] == (loose / name).read_bytes()
            assert begin == by_name[f"{key}.jpg"][1]
            assert end == max(off + size for _, off, size in fields.values())
    assert seen.keys() == {p.name for p in loose.iterdir()}
    for name, payload in seen.items():
        assert payload == (loose / name).read_bytes()
    # Natural order across shards: sa_1, sa_2, ..., sa_12.
    keys = [k for s in shards for k in read_index(str(s) + ".idx")[1]]
    assert keys == [f"sa_{i}" for i in range(1, 13)]


def test_pack_rename_wds(tmp_path, sa1b):
    loose, _ = sa1b
    run("pack", loose, tmp_path / "wds", "--rename-wds", "--quiet")
    names = [m[0] for m in tar_members(tmp_path / "wds-000000.tar")]
    assert names[:2] == ["sa_1.jpg", "sa_1.features.npz"]
    assert read_index(tmp_path / "wds-000000.tar.idx")[0]["key_rule"] == "webdataset"


def test_pack_imagenet_classes(tmp_path):
    Image = pytest.importorskip("PIL.Image")
    loose = tmp_path / "loose"
    run("synth", loose, "--kind", "imagenet", "--count", 20, "--image-size", "100x75", "--quiet")
    classes = sorted(p.name for p in loose.iterdir())
    assert classes == [f"n{c:08d}" for c in range(10)]
    run("pack", loose, tmp_path / "in", "--shuffle-seed", 3, "--quiet")
    shard = tmp_path / "in-000000.tar"
    modes = []
    with tarfile.open(shard) as tar:
        members = {m.name: tar.extractfile(m).read() for m in tar.getmembers()}
    assert len(members) == 40
    for cls_index, cls in enumerate(classes):
        for f in (loose / cls).iterdir():
            stem = f"{cls}/{f.name.split('.')[0]}"  # the key: the path under the root, as an image folder's
            assert members[f"{stem}.jpg"] == f.read_bytes()
            assert members[f"{stem}.cls"].decode() == str(cls_index)
            with Image.open(io.BytesIO(members[f"{stem}.jpg"])) as im:
                modes.append(im.mode)
    assert "L" in modes and "RGB" in modes  # a few grayscale images, as in ImageNet
    order = [m[0] for m in tar_members(shard)]
    assert order != sorted(order, key=lambda n: int(n.split("_")[-1].split(".")[0]))  # shuffled


def test_synth_shards_equals_loose_then_pack(tmp_path, sa1b):
    loose, shards = sa1b
    run("synth", tmp_path, "--kind", "sa1b", "--count", 12, "--image-size", "160x120", "--seed", 7,
        "--layout", "shards", "--shard-size", "150KB", "--quiet")
    made = sorted(tmp_path.glob("sa1b-*.tar"))
    assert [p.name for p in made] == [p.name for p in shards]
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir()), "scratch folder left behind"
    for a, b in zip(made, shards, strict=True):
        with tarfile.open(a) as ta, tarfile.open(b) as tb:
            assert [(m.name, ta.extractfile(m).read()) for m in ta] == [(m.name, tb.extractfile(m).read()) for m in tb]


def test_inspect_json_matches_tarfile(sa1b):
    _, shards = sa1b
    shard = shards[0]
    out = json.loads(run("inspect", shard, "--json", "--samples", 2).stdout)
    members = tar_members(shard)
    assert out["num_members"] == len(members)
    assert out["num_samples"] == len(members) // 2
    assert out["size_bytes"] == shard.stat().st_size
    jpgs = [m for m in members if m[0].endswith(".jpg")]
    assert out["fields"]["jpg"]["count"] == len(jpgs)
    assert out["fields"]["jpg"]["total_bytes"] == sum(m[3] for m in jpgs)
    assert out["fields"]["features.npz"]["total_bytes"] == sum(m[3] for m in members) - sum(m[3] for m in jpgs)
    assert len(out["samples"]) == 2
    listed = [(m["name"], m["offset"], m["size"]) for s in out["samples"] for m in s["members"]]
    assert listed == [(name, off, size) for name, _, off, size in members[:4]]
    text = run("inspect", shard).stdout
    assert "features.npz" in text and "sa_1" in text


def test_index_writes_what_pack_wrote(tmp_path, sa1b):
    _, shards = sa1b
    shard = tmp_path / shards[1].name
    shutil.copy(shards[1], shard)
    shutil.copy(str(shards[1]) + ".idx", str(shard) + ".packed")
    run("index", shard)
    packed = json.loads(Path(str(shard) + ".packed").read_text())
    indexed = json.loads(Path(str(shard) + ".idx").read_text())
    packed.pop("shard_path", None), indexed.pop("shard_path", None)  # written under another folder
    assert indexed == packed
    # An explicit rule that splits the SA-1B pairs gives twice the samples.
    run("index", shard, "--key-rule", "webdataset")
    assert len(read_index(str(shard) + ".idx")[1]) == 2 * len(packed["samples"])


def test_truncated_shard_is_reported(tmp_path, sa1b):
    _, shards = sa1b
    data = shards[0].read_bytes()
    shard = tmp_path / "cut.tar"
    shard.write_bytes(data[: len(data) // 3])
    proc = run("inspect", shard, ok=False)
    assert proc.returncode != 0
    assert str(shard) in proc.stderr and "offset" in proc.stderr, proc.stderr
    proc = run("index", shard, ok=False)
    assert proc.returncode != 0 and not Path(str(shard) + ".idx").exists()


def test_pack_unwritable_output(tmp_path, sa1b):
    loose, _ = sa1b
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("x")
    proc = run("pack", loose, blocker / "sub" / "x", ok=False)
    assert proc.returncode == 1
    assert str(blocker / "sub") in proc.stderr and "Not a directory" in proc.stderr, proc.stderr


def test_pack_disk_full_leaves_no_shard(tmp_path, sa1b):
    loose, _ = sa1b
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    out = tmp_path / "out"
    out.mkdir()
    # The second shard's temporary file is /dev/full: every write fails with ENOSPC.
    os.symlink("/dev/full", out / "x-000001.tar.tmp")
    proc = run("pack", loose, out / "x", "--shard-size", "150KB", "-q", ok=False)
    assert proc.returncode == 1
    assert "x-000001.tar.tmp" in proc.stderr and "No space left" in proc.stderr, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["x-000000.tar", "x-000000.tar.idx"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_pack_unreadable_file(tmp_path, sa1b):
    loose, _ = sa1b
    src = tmp_path / "src"
    shutil.copytree(loose, src)
    (src / "sa_9.jpg").chmod(0)
    proc = run("pack", src, tmp_path / "out" / "x", "-q", ok=False)
    assert proc.returncode == 1 and "sa_9.jpg" in proc.stderr
    assert not list((tmp_path / "out").glob("*.tar*"))


def test_bad_arguments(tmp_path, sa1b):
    loose, shards = sa1b
    proc = run("pack", loose, tmp_path / "x", "--shard-size", "12XB", ok=False)
    assert proc.returncode == 1 and "--shard-size" in proc.stderr
    proc = run("bench", shards[0], "--field", "jpg:picture:224", ok=False)
    assert proc.returncode == 1 and "jpg:picture:224" in proc.stderr


def test_bench_runs(sa1b):
    _, shards = sa1b
    pattern = str(shards[0].parent / "sa1b-*.tar")
    out = json.loads(run("bench", pattern, "--field", "jpg:image:64", "--field", "features.npz:npz",
                         "--batch-size", 4, "--epochs", 2, "--decode-threads", 2, "--json").stdout)
    assert out["dataset_samples"] == 12 and out["config"]["key_rule"] == "underscore"
    assert [e["samples"] for e in out["epochs"]] == [12, 12]
    assert out["total"]["samples_per_s"] > 0 and out["total"]["mb_per_s"] > 0


def test_bench_and_inspect_infer_fields(sa1b):
    """No -f: fields come from the first sample (image by content, .npz), and
    the command says what it inferred."""
    _, shards = sa1b
    pattern = str(shards[0].parent / "sa1b-*.tar")
    proc = run("bench", pattern, "--batch-size", 4, "--epochs", 1, "--json")
    assert "inferred: -f jpg:image:224 -f features.npz:npz" in proc.stderr
    assert json.loads(proc.stdout)["dataset_samples"] == 12
    assert "inferred  -f jpg:image:224 -f features.npz:npz" in run("inspect", shards[0]).stdout
    # --json carries the same flags, as argv words.
    out = json.loads(run("inspect", shards[0], "--json").stdout)
    assert out["inferred_flags"] == ["-f", "jpg:image:224", "-f", "features.npz:npz"]


def test_help_lists_report_and_the_native_binary_says_where_it_runs(tmp_path):
    # `stoker report` is Python (python/stoker/_cli.py runs it before the native binary);
    # the native help still lists it, and the binary called directly points there.
    assert "report" in run("--help").stdout
    proc = run("report", tmp_path / "run.jsonl", ok=False)
    assert proc.returncode == 1
    assert "A subcommand is required" not in proc.stderr
    assert "python -m stoker.report" in proc.stderr and "pip-installed" in proc.stderr


def test_help_names_the_command_and_the_defaults_the_loader_uses():
    # The usage line is the command's name, not the binary's path in site-packages.
    out = run("--help").stdout
    assert "Usage: stoker " in out, out[:300]
    assert STOKER not in out
    bench = run("bench", "--help").stdout
    assert "hardware thread" not in bench and "core of the job's share" in bench, bench
