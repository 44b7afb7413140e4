"""The dataset manifest (stoker-manifest.json) that `stoker index` and
`stoker pack` write: each shard's sample count against webdataset's own reader
(samples counted per __url__), its size against the file system, its sample
byte ranges against Python's tarfile; the flags that move or skip it; and a
corrupt manifest's message through `stoker inspect`.

Shards are written by webdataset's TarWriter, loose files by this test: the
manifest is judged by independent writers and readers.
"""
import collections
import json
import os
import subprocess
import tarfile
from pathlib import Path

import numpy as np
import pytest

from conftest import stoker_bin

wds = pytest.importorskip("webdataset")
STOKER = stoker_bin()
pytestmark = pytest.mark.skipif(STOKER is None, reason="stoker binary not found: set STOKER_BIN or build build/cli/stoker")

PER_SHARD = [7, 12, 1, 5]  # unequal, so a count moved to another shard is caught


def run(*args, ok=True):
    proc = subprocess.run([STOKER, *map(str, args)], capture_output=True, text=True, timeout=60)
    if ok:
        assert proc.returncode == 0, f"stoker {' '.join(map(str, args))} failed:\n{proc.stderr}"
    return proc


def write_shards(directory: Path, per_shard=PER_SHARD, seed=0):
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    n = 0
    for s, count in enumerate(per_shard):
        with wds.TarWriter(str(directory / f"part-{s:06d}.tar")) as sink:
            for _ in range(count):
                sink.write({"__key__": f"k{n:05d}", "bin": rng.bytes(int(rng.integers(1, 3000))),
                            "cls": str(n % 10).encode(), "txt": "caption %d" % n})
                n += 1
    return sorted(directory.glob("*.tar"))


def wds_counts(shards):
    """Samples per shard as webdataset's own reader groups them."""
    counts = collections.Counter()
    for sample in wds.WebDataset([str(p) for p in shards], shardshuffle=False, empty_check=False):
        counts[sample["__url__"]] += 1
    return [counts[str(p)] for p in shards]


def wds_key(name):
    """webdataset's key: the member path up to the first dot of its basename."""
    folder, _, base = name.rpartition("/")
    return folder + "/" * bool(folder) + base.split(".")[0]


def tar_sample_bytes(shard, key_of=wds_key):
    """(sum, max) over the shard's samples of end - begin: the first member's
    header through the last member's data, as tarfile lays them out."""
    ranges = {}
    with tarfile.open(shard) as tar:
        for m in tar.getmembers():
            begin, end = ranges.get(key_of(m.name), (m.offset, 0))
            ranges[key_of(m.name)] = (begin, m.offset_data + m.size)
    sizes = [end - begin for begin, end in ranges.values()]
    return sum(sizes), max(sizes)


def check_manifest(manifest_path, shards, key_rule="webdataset"):
    doc = json.loads(Path(manifest_path).read_text())
    assert doc["format"] == "stoker-manifest" and doc["version"] == 1 and doc["key_rule"] == key_rule
    folder = Path(manifest_path).parent
    assert [folder / e["path"] for e in doc["shards"]] == shards
    counts = wds_counts(shards)
    assert [e["samples"] for e in doc["shards"]] == counts
    assert doc["samples"] == sum(counts)
    assert [e["bytes"] for e in doc["shards"]] == [os.path.getsize(p) for p in shards]
    assert [(e["sample_bytes"], e["max_sample_bytes"]) for e in doc["shards"]] == [tar_sample_bytes(p) for p in shards]
    return doc


def test_index_of_a_folder_writes_its_manifest(tmp_path):
    shards = write_shards(tmp_path / "data")
    (tmp_path / "data" / "notes.txt").write_text("not a shard")
    proc = run("index", tmp_path / "data")
    assert "stoker-manifest.json: 4 shards, 25 samples" in proc.stdout
    assert all(Path(str(p) + ".idx").exists() for p in shards)
    doc = check_manifest(tmp_path / "data" / "stoker-manifest.json", shards)
    assert [e["samples"] for e in doc["shards"]] == PER_SHARD
    # The shards named one by one give the same file.
    text = (tmp_path / "data" / "stoker-manifest.json").read_text()
    run("index", "-q", *shards)
    assert (tmp_path / "data" / "stoker-manifest.json").read_text() == text


def test_pack_writes_the_manifest_of_what_it_packed(tmp_path):
    rng = np.random.default_rng(1)
    src = tmp_path / "src"
    for c in ("cat", "dog", "eel"):
        (src / c).mkdir(parents=True)
        for i in range(9):
            (src / c / f"{c}{i}.jpg").write_bytes(rng.bytes(int(rng.integers(500, 4000))))
    run("pack", src, tmp_path / "out" / "pets", "--shard-size", "20KB", "-q")
    shards = sorted((tmp_path / "out").glob("pets-*.tar"))
    assert len(shards) >= 3
    check_manifest(tmp_path / "out" / "stoker-manifest.json", shards)
    # SA-1B style pairs pack under the underscore rule: one sample per id,
    # where webdataset's rule (and reader) would see two.
    sa = tmp_path / "sa"
    sa.mkdir()
    for i in range(1, 7):
        (sa / f"sa_{i}.jpg").write_bytes(rng.bytes(900))
        (sa / f"sa_{i}_features.npz").write_bytes(rng.bytes(700))
    run("pack", sa, tmp_path / "sa_out" / "sa", "-q")
    doc = json.loads((tmp_path / "sa_out" / "stoker-manifest.json").read_text())
    shard = tmp_path / "sa_out" / "sa-000000.tar"
    assert doc["key_rule"] == "underscore" and doc["samples"] == 6 == wds_counts([shard])[0] // 2
    assert doc["shards"][0]["sample_bytes"] == tar_sample_bytes(shard, lambda n: "_".join(n.split("_")[:2]).split(".")[0])[0]


def test_manifest_flags(tmp_path):
    shards = write_shards(tmp_path / "data")
    run("index", "-q", "--no-manifest", tmp_path / "data")
    assert not (tmp_path / "data" / "stoker-manifest.json").exists()
    # Elsewhere: shards outside its folder are listed by absolute path.
    (tmp_path / "lists").mkdir()
    run("index", "-q", "--manifest", tmp_path / "lists" / "all.json", *shards)
    doc = json.loads((tmp_path / "lists" / "all.json").read_text())
    assert [e["path"] for e in doc["shards"]] == [str(p) for p in shards]
    proc = run("index", "--manifest", "x.json", "--no-manifest", shards[0], ok=False)
    assert proc.returncode != 0 and "excludes" in proc.stderr.lower()
    # Shards of two folders have no default place; a manifest there lists them by path.
    other = write_shards(tmp_path / "other", per_shard=[2], seed=5)
    proc = run("index", shards[0], other[0])
    assert "no dataset manifest written: the shards are in several folders" in proc.stderr
    assert not (tmp_path / "other" / "stoker-manifest.json").exists()
    run("index", "-q", "--manifest", tmp_path / "data" / "two.json", shards[0], other[0])
    doc = json.loads((tmp_path / "data" / "two.json").read_text())
    assert [e["path"] for e in doc["shards"]] == [shards[0].name, str(other[0])]
    assert [e["samples"] for e in doc["shards"]] == [PER_SHARD[0], 2]


def test_the_folders_manifest_is_updated_not_replaced(tmp_path):
    shards = write_shards(tmp_path / "data")
    path = tmp_path / "data" / "stoker-manifest.json"
    # Shards indexed one at a time, in any order, give the manifest of them all.
    for p in (shards[2], shards[0], shards[3], shards[1]):
        proc = run("index", p)
    assert "stoker-manifest.json: 4 shards (3 kept from before), 25 samples" in proc.stdout, proc.stdout
    one_by_one = path.read_text()
    path.unlink()
    run("index", "-q", tmp_path / "data")
    assert path.read_text() == one_by_one
    # A shard that is gone is dropped.
    for p in shards[1:]:
        p.unlink()
    run("index", "-q", shards[0])
    assert [e["path"] for e in json.loads(path.read_text())["shards"]] == [shards[0].name]


def test_pack_updates_its_folders_manifest(tmp_path):
    rng = np.random.default_rng(2)
    src = tmp_path / "src"
    for c in ("a", "b"):
        (src / c).mkdir(parents=True)
        for i in range(8):
            (src / c / f"{i}.jpg").write_bytes(rng.bytes(3000))
    out = tmp_path / "out"
    run("pack", src, out / "big", "--shard-size", "10KB", "-q")
    run("pack", src, out / "big-other", "--shard-size", "1MB", "-q")
    manifest = out / "stoker-manifest.json"
    listed = lambda: [e["path"] for e in json.loads(manifest.read_text())["shards"]]
    big = sorted(p.name for p in out.glob("big-0*.tar"))
    assert len(big) > 1 and listed() == big + ["big-other-000000.tar"]
    # The same prefix again in fewer shards: the earlier run's leftovers are
    # not listed; another prefix that begins alike stays.
    run("pack", src, out / "big", "--shard-size", "1MB", "-q")
    assert listed() == ["big-000000.tar", "big-other-000000.tar"]
    check_manifest(manifest, [out / "big-000000.tar", out / "big-other-000000.tar"])
    # SA-1B pairs (the underscore rule) into the same folder: left as it was, with a warning.
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "sa_1.jpg").write_bytes(b"x" * 10)
    (sa / "sa_1_features.npz").write_bytes(b"y" * 10)
    before = manifest.read_text()
    proc = run("pack", sa, out / "sa", "-q")
    assert "is left as it was" in proc.stderr and "key rule webdataset" in proc.stderr, proc.stderr
    assert manifest.read_text() == before


def corrupt(doc, path, edit):
    doc = json.loads(json.dumps(doc))
    edit(doc)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("edit, says", [
    (lambda d: d["shards"][1].update(samples=-1), "shards[1] 'part-000001.tar': \"samples\" is negative (-1), not a count"),
    (lambda d: d["shards"][2].pop("bytes"), "shards[2] 'part-000002.tar': \"bytes\" is missing"),
    (lambda d: d["shards"][3].update(samples=2 ** 32), "\"samples\" is 4294967296, over the most 4294967295"),
    (lambda d: d["shards"].append(dict(d["shards"][0])), "shards[4] 'part-000000.tar' is listed twice (also shards[0])"),
    (lambda d: d.update(samples=d["samples"] + 1), "\"samples\" is 26 but the shards hold 25"),
    (lambda d: d.update(format="webdataset"), "\"format\" is 'webdataset', not 'stoker-manifest'"),
    (lambda d: d.update(version=9), "manifest version 9, this build reads 1"),
    (lambda d: d.update(key_rule="dots"), "\"key_rule\""),
])
def test_a_corrupt_manifest_is_named_with_its_entry(tmp_path, edit, says):
    write_shards(tmp_path / "data")
    run("index", "-q", tmp_path / "data")
    path = tmp_path / "data" / "stoker-manifest.json"
    out = json.loads(run("inspect", path, "--json").stdout)
    assert out["num_shards"] == 4 and out["num_samples"] == sum(PER_SHARD)
    bad = corrupt(json.loads(path.read_text()), tmp_path / "data" / "bad.json", edit)
    proc = run("inspect", bad, ok=False)
    assert proc.returncode == 1
    assert str(bad) in proc.stderr and says in proc.stderr, proc.stderr


def test_a_cut_manifest_is_invalid_json(tmp_path):
    write_shards(tmp_path / "data")
    run("index", "-q", tmp_path / "data")
    text = (tmp_path / "data" / "stoker-manifest.json").read_text()
    cut = tmp_path / "data" / "cut.json"
    cut.write_text(text[: len(text) // 2])
    proc = run("inspect", cut, ok=False)
    assert proc.returncode == 1 and str(cut) in proc.stderr and "invalid JSON" in proc.stderr, proc.stderr
