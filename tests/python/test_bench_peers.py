"""The peers section's writers and readers (bench/peers/) on a tiny V set: each peer's own
format, written by its own tool and read back through its own loader, gives every sample
once with its own image and label — the recipe's pixels from the peer equal the recipe run
on the source JPEG file, and each label is the one written beside that file. The train
recipe's crop box keeps torchvision's RandomResizedCrop bounds and the flip/crop it draws. A peer whose
package is not installed here is skipped (bench/run.sh installs requirements-bench.txt);
Ray Data is left to the bench (a runtime start costs more than this whole file)."""
from __future__ import annotations

import importlib.util
import math
import random
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from conftest import jpeg_bytes, natural_image

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

torch = pytest.importorskip("torch")
wds = pytest.importorskip("webdataset")

import peers  # noqa: E402
from peers.recipes import EVAL, TRAIN, PillowRecipe, random_resized_box  # noqa: E402

COUNT, SHARDS, BATCH, SIZE = 16, 2, 4, 32


@pytest.fixture(scope="module")
def vdata(tmp_path_factory) -> peers.VData:
    d = tmp_path_factory.mktemp("v")
    rng = np.random.default_rng(5)
    loose = []
    for i in range(COUNT):
        w, h = (int(rng.integers(40, 90)), int(rng.integers(40, 90)))
        p = d / "loose" / f"n{i % 3:02d}" / f"img_{i:04d}.JPEG"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(jpeg_bytes(natural_image(rng, w, h)))
        loose.append((str(p), i % 3 + 10 * i))
    shards = []
    per = COUNT // SHARDS
    for s in range(SHARDS):
        path = d / f"shard-{s:06d}.tar"
        with wds.TarWriter(str(path)) as sink:
            for p, label in loose[s * per:(s + 1) * per]:
                sink.write({"__key__": Path(p).stem, "jpg": Path(p).read_bytes(), "cls": str(label).encode()})
        shards.append(path)
    return peers.VData(dir=d, shards=shards, loose=loose, count=COUNT, batch=BATCH, size=SIZE)


def expected(v: peers.VData):
    fn = PillowRecipe(EVAL, SIZE)
    return torch.stack([fn(Path(p).read_bytes()) for p, _ in v.loose]), [label for _, label in v.loose]


def read_all(peer: peers.Peer, make):
    images, labels = [], []
    for batch in make():
        images.append(peer.images(batch))
        lab = batch[1] if isinstance(batch, (tuple, list)) else (batch["label"] if isinstance(batch, dict)
                                                                  else batch.label)
        labels += [int(x) for x in lab]
    return torch.cat(images), labels


def needs(*modules):
    missing = [m for m in modules if importlib.util.find_spec(m.split(".")[0]) is None]
    return pytest.mark.skipif(bool(missing), reason=f"not installed: {missing} (requirements-bench.txt)")


def peer_cases():
    from peers.dataloader_webdataset import DataLoaderWebdataset
    from peers.hf_datasets import HFDatasets
    from peers.litdata_streaming import Litdata
    from peers.megatron_energon import Energon
    from peers.mosaic_streaming import MosaicStreaming

    return [pytest.param(DataLoaderWebdataset, 0, id="dl_wds"),
            pytest.param(Litdata, (0, None), id="litdata", marks=needs("litdata")),
            pytest.param(MosaicStreaming, (0, None), id="mosaic", marks=needs("streaming")),
            pytest.param(HFDatasets, 0, id="hf_datasets", marks=needs("datasets")),
            pytest.param(Energon, 0, id="energon", marks=needs("megatron.energon"))]


@pytest.mark.parametrize("cls,setting", peer_cases())
def test_peer_format_gives_back_every_image_and_label(vdata, cls, setting):
    peer = cls()
    try:
        peer.check()
    except peers.Unavailable as e:
        pytest.skip(str(e))
    peer.prepare(vdata)
    want_images, want_labels = expected(vdata)
    images, labels = read_all(peer, peer.loader(vdata, EVAL, setting))
    assert images.shape == (COUNT, 3, SIZE, SIZE) and images.dtype == torch.uint8
    if labels == want_labels:  # in order
        assert torch.equal(images, want_images)
    else:  # a reader free to interleave its shards: the same samples, each with its own label
        assert sorted(labels) == sorted(want_labels)
        by_label = dict(zip(want_labels, want_images))
        for img, label in zip(images, labels):
            assert torch.equal(img, by_label[label]), label
    # train: every sample exactly once, shuffled its own way
    images, labels = read_all(peer, peer.loader(vdata, TRAIN, setting))
    assert sorted(labels) == sorted(want_labels)
    assert images.shape == (COUNT, 3, SIZE, SIZE)


def test_random_resized_box_stays_in_torchvisions_bounds():
    rng = random.Random(3)
    in_range = 0
    for i in range(2000):
        w, h = rng.randint(20, 900), rng.randint(20, 900)
        left, top, cw, ch = random_resized_box(w, h, rng)
        assert 0 <= left and left + cw <= w and 0 <= top and top + ch <= h and cw > 0 and ch > 0
        area, aspect = cw * ch / (w * h), cw / ch
        if 0.08 * 0.9 <= area <= 1.0 and 3 / 4 * 0.9 <= aspect <= 4 / 3 * 1.1:
            in_range += 1
    assert in_range > 1900  # the rest: the central fallback after 10 tries (thin images), as torchvision's
    # a 1000x10 strip: no draw fits, the fallback crop has the bound ratio 4/3
    assert random_resized_box(1000, 10, rng) == ((1000 - 13) // 2, 0, 13, 10)


def test_train_recipe_is_a_flipped_or_plain_crop_of_the_source():
    src = natural_image(np.random.default_rng(2), 80, 60)
    data = jpeg_bytes(src)
    random.seed(11)
    box = random_resized_box(80, 60, random)
    flip = random.random() < 0.5
    random.seed(11)
    got = PillowRecipe(TRAIN, 24).hwc(data)
    im = Image.open(__import__("io").BytesIO(data)).convert("RGB")
    want = im.resize((24, 24), Image.BILINEAR, box=(box[0], box[1], box[0] + box[2], box[1] + box[3]))
    want = np.asarray(want.transpose(Image.FLIP_LEFT_RIGHT) if flip else want)
    assert np.array_equal(got, want)
    # eval: torchvision's Resize(24) (80x60 -> 32x24) + CenterCrop(24), on average the same pixels
    tv = np.asarray(im.resize((32, 24), Image.BILINEAR).crop((4, 0, 28, 24)))
    assert math.isclose(PillowRecipe(EVAL, 24).hwc(data).mean(), tv.mean(), rel_tol=0.05)


class _Label:
    """A mixture peer's per-sample work in these tests: the label alone (no decode)."""

    def __call__(self, sample: dict):
        return int(sample["cls"])


@pytest.fixture(scope="module")
def mix_sources(tmp_path_factory):
    """Three sources of 24, 12 and 12 samples (labels 1000*source + i), each in two tar shards,
    and an HTTP server on their folder (bench/mix.py's second source is read over HTTP)."""
    import functools
    import http.server
    import threading

    d = tmp_path_factory.mktemp("mix")
    rng = np.random.default_rng(7)
    jpeg = jpeg_bytes(natural_image(rng, 48, 40))
    sources = []
    for s, n in enumerate((24, 12, 12)):
        shards = []
        for k in range(2):
            path = d / f"src{s}-{k:06d}.tar"
            with wds.TarWriter(str(path)) as sink:
                for i in range(k * n // 2, (k + 1) * n // 2):
                    sink.write({"__key__": f"s{s}_{i:04d}", "jpg": jpeg, "cls": str(1000 * s + i).encode()})
            shards.append(path)
        sources.append(shards)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(d))
    handler.log_message = lambda *a, **k: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield d, sources, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.mark.parametrize("peer", [pytest.param("mosaic", marks=needs("streaming")),
                                  pytest.param("litdata", marks=needs("litdata"))])
def test_peer_mixture_reads_each_source_by_its_weight(mix_sources, peer):
    """bench/mix.py's Mosaic and litdata rows: each source in the peer's format, the second
    read over HTTP into a cache, mixed by (0.5, 0.3, 0.2): Mosaic's proportions give each
    source its exact share of the epoch; litdata's weights stop at the first source exhausted,
    each source's samples at most once."""
    from peers import mixtures

    d, sources, url = mix_sources
    weights, total = (0.5, 0.3, 0.2), 40
    root, cache = d / peer, d / "cache" / peer
    if peer == "mosaic":
        mixtures.write_mds(sources, root)
        make = mixtures.mosaic_mix(root, weights, {1: f"{url}/{peer}/s1"}, total, BATCH, _Label(), (0, None), cache)
    else:
        mixtures.write_litdata(sources, root)
        make = mixtures.litdata_mix(root, weights, {1: f"{url}/{peer}/s1"}, BATCH, _Label(), (0, None), cache)
    labels = [int(x) for batch in make() for x in batch]
    assert any(cache.joinpath("s1").iterdir()), "the HTTP source was not downloaded into its cache"
    by_source = {s: [x % 1000 for x in labels if x // 1000 == s] for s in range(3)}
    assert set(labels) <= {1000 * s + i for s, n in enumerate((24, 12, 12)) for i in range(n)}
    if peer == "mosaic":
        assert len(labels) == total
        assert [len(by_source[s]) for s in range(3)] == [20, 12, 8]
        assert len(set(by_source[0])) == 20 and len(set(by_source[2])) == 8  # drawn without repeats
    else:
        assert 0 < len(labels) <= total + 24
        for s in range(3):
            assert by_source[s] and len(set(by_source[s])) == len(by_source[s]), s
