"""Golden behaviour, frozen before the engine is rebuilt (issue 41): every
saved-state shape that exists today, the batches each mode delivers, and a
stream kept whole in memory, checked against files in tests/python/golden/
written by today's code.

The data is made here, byte for byte the same on every machine: tar shards
whose members are written without a compressor or codec library (PNG images
with a stored zlib block, .npy arrays with a hand-written header, text), and
a Megatron .bin/.idx pair from stoker.write_megatron, all from one SHA-256
byte stream. PNG decodes exactly, so digests of decoded pixels hold across
decoder versions.

For each state shape (`STATES`):
  (a) a fresh loader run to the same point saves a state equal to the golden
      one (golden/<name>.state.json);
  (b) a fresh loader restoring the golden state delivers the rest of the
      epoch with the golden digest (golden/digests.json: the keys in order,
      and a SHA-256 over every batch's field names, dtypes, shapes and bytes).
Then every mode's epoch at decode_threads 1 and 4 through each CPU copy
engine ("cpu": none, "cpu-late": the device stage's CPU engine) has the
golden digest, and a stream held whole by list(loader) equals it too.

A difference means behaviour changed. When that is intended, regenerate
with `python tests/python/golden/make_golden.py` and say why in the commit.
"""
from __future__ import annotations

import copy
import hashlib
import io
import json
import struct
import tarfile
import zlib
from contextlib import closing
from pathlib import Path

import numpy as np
import pytest

import stoker

GOLDEN = Path(__file__).parent / "golden"
SHARDS, PER_SHARD = 4, 12
TOTAL = SHARDS * PER_SHARD
BATCH = 4
BAD = ("s0009", "s0030")  # on_error="skip": a cut PNG, an .npy with a broken header


# -- the data: the same bytes everywhere -----------------------------------------

class Bytes:
    """A deterministic byte stream: SHA-256 of (seed, counter) blocks."""

    def __init__(self, seed: str) -> None:
        self._seed = seed.encode()
        self._n = 0

    def take(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            out += hashlib.sha256(self._seed + self._n.to_bytes(8, "little")).digest()
            self._n += 1
        return out[:n]

    def below(self, top: int) -> int:
        return int.from_bytes(self.take(4), "little") % top


def png_bytes(pixels: np.ndarray) -> bytes:
    """An 8-bit RGB PNG whose IDAT is one stored (uncompressed) deflate block:
    no zlib compressor runs, so the file is the same on every machine."""
    h, w, _ = pixels.shape
    raw = b"".join(b"\x00" + pixels[y].tobytes() for y in range(h))
    deflate = b"\x01" + struct.pack("<HH", len(raw), len(raw) ^ 0xFFFF) + raw
    idat = b"\x78\x01" + deflate + struct.pack(">I", zlib.adler32(raw))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", idat) + chunk(b"IEND", b""))


def npy_bytes(a: np.ndarray) -> bytes:
    """NPY 1.0 with the header written here (not np.save's, which may change)."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }" % (a.dtype.str, a.shape[0])
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + a.tobytes()


def write_tar(path: Path, members: list[tuple[str, bytes]]) -> None:
    with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode, info.uname, info.gname = len(data), 0, 0o644, "", ""
            tf.addfile(info, io.BytesIO(data))


def write_shards(root: Path, bad: tuple[str, ...] = (), written: dict | None = None) -> list[str]:
    """SHARDS shards of PER_SHARD samples {png 8x8 RGB, vec.npy float32[3],
    cls}; the samples named in `bad` damaged (a cut PNG, then a broken .npy).
    `written` gets key -> (pixels, vec, cls) as written."""
    src = Bytes("stoker golden shards")
    root.mkdir(parents=True, exist_ok=True)
    paths = []
    n = 0
    damage = iter(range(len(bad)))
    for s in range(SHARDS):
        members = []
        for _ in range(PER_SHARD):
            key = f"s{n:04d}"
            pixels = np.frombuffer(src.take(8 * 8 * 3), np.uint8).reshape(8, 8, 3)
            vec = (np.frombuffer(src.take(3), np.uint8).astype(np.float32) - 128) / 16
            png, npy = png_bytes(pixels), npy_bytes(vec)
            if written is not None:
                written[key] = (pixels, vec, n)
            if key in bad:
                if next(damage) % 2 == 0:
                    png = png[:60]
                else:
                    npy = npy.replace(b"'descr'", b"'dascr'")
            members += [(f"{key}.png", png), (f"{key}.vec.npy", npy), (f"{key}.cls", str(n).encode())]
            n += 1
        path = root / f"shard-{s}.tar"
        write_tar(path, members)
        paths.append(str(path))
    return paths


def write_corpus(root: Path) -> str:
    src = Bytes("stoker golden tokens")
    docs = [np.array([src.below(1000) for _ in range(5 + src.below(36))], np.int64) for _ in range(30)]
    root.mkdir(parents=True, exist_ok=True)
    stoker.write_megatron(root / "corpus", docs)
    return str(root / "corpus")


def fields():
    return {"png": stoker.image(8, resize="none", layout="HWC"), "vec.npy": stoker.npy(),
            "cls": stoker.scalar("int64")}


# -- digests ----------------------------------------------------------------------

class Digest:
    """The keys in order and a SHA-256 over every batch's fields (name, dtype,
    shape, bytes, in name order) and keys and shard names."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.keys: list[str] = []
        self.batches = 0

    def add(self, batch: dict) -> None:
        self.batches += 1
        for name in sorted(batch):
            value = batch[name]
            if name == "__url__":
                value = [u.rsplit("/", 1)[-1] for u in value]
            if isinstance(value, list):
                self.h.update(json.dumps([name, value]).encode())
                if name == "__key__":
                    self.keys += value
                continue
            a = np.ascontiguousarray(value.numpy() if hasattr(value, "numpy") else value)
            self.h.update(json.dumps([name, a.dtype.str, list(a.shape)]).encode())
            self.h.update(a.tobytes())

    def result(self) -> dict:
        return {"batches": self.batches, "keys": self.keys, "sha256": self.h.hexdigest()}


def digest(batches) -> dict:
    d = Digest()
    for b in batches:
        d.add(b)
    return d.result()


# -- the state shapes ----------------------------------------------------------------
# Each: make(data) -> a fresh loader; run(loader, data) brings it to the saved
# point (mid-epoch unless said); the state saved there is the golden one.

def _loader(paths, **kw):
    kw.setdefault("batch_size", BATCH)
    kw.setdefault("rank", 0)  # given, so that no torch.distributed is imported to ask
    kw.setdefault("world_size", 1)
    return stoker.Loader(paths, fields(), output="numpy", observe=False, seed=3, **kw)


def _take(loader, n: int):
    """The iterator after n batches, still running: a state is saved inside the loop, as a checkpoint is
    (a loop broken off stops the run, and a stream's state then no longer knows where its pass began)."""
    it = iter(loader)
    for _ in range(n):
        next(it)
    return it


def _stream(paths, **kw):
    return _loader(paths, stream=True, **kw)


def _elastic_run(loader, data):
    """A 2-rank run saves after 3 batches; this loader (rank 0 of 3) restores that and takes 1."""
    with closing(_loader(data["shards"], shuffle=True, rank=0, world_size=2)) as old:
        _take(old, 3)
        state = old.state_dict()
    loader.load_state_dict(state)
    return _take(loader, 1)


def _tokens(data, **kw):
    return stoker.TokenLoader(data["corpus"], seq_len=16, batch_size=BATCH, seed=5, output="numpy", observe=False,
                              cache_dir=data["cache"], rank=0, world_size=1, **kw)


STATES = {
    # name: (make(data, **settings), run(loader, data) -> the live iterator)
    "indexed_plain": (lambda d, **kw: _loader(d["shards"], shuffle=True, **kw), lambda ld, d: _take(ld, 5)),
    "indexed_unshuffled": (lambda d, **kw: _loader(d["shards"], **kw), lambda ld, d: _take(ld, 5)),
    "indexed_block": (lambda d, **kw: _loader(d["shards"], shuffle=True, shuffle_block=4, **kw),
                      lambda ld, d: _take(ld, 5)),
    "indexed_window": (lambda d, **kw: _loader(d["shards"], shuffle=True, shuffle_window=2, **kw),
                       lambda ld, d: _take(ld, 5)),
    "indexed_elastic": (lambda d, **kw: _loader(d["shards"], shuffle=True, rank=0, world_size=3, **kw),
                        _elastic_run),
    # batch 10 held the first bad sample, batch 11 holds the second
    "indexed_skip": (lambda d, **kw: _loader(d["bad"], shuffle=True, on_error="skip", **kw),
                     lambda ld, d: _take(ld, 11)),
    "tokens": (lambda d, **kw: _tokens(d, **kw), lambda ld, d: _take(ld, 4)),
    # samples_per_epoch 40 of a 48-sample pass: epoch 1's batch 3 lies in pass 1
    # (batch 2, the pass's first, was delivered, so the run has recorded where pass 1 starts)
    "stream_pass": (lambda d, **kw: _stream(d["shards"], shuffle=True, shuffle_buffer=10, samples_per_epoch=40, **kw),
                    lambda ld, d: (list(ld), _take(ld, 3))[1]),
    "stream_unshuffled": (lambda d, **kw: _stream(d["shards"], samples_per_epoch=TOTAL, **kw),
                          lambda ld, d: _take(ld, 5)),
    # batch 5 held the first bad sample, batch 11 holds the second
    "stream_skip": (lambda d, **kw: _stream(d["bad"], shuffle=True, shuffle_buffer=10, samples_per_epoch=TOTAL,
                                            on_error="skip", **kw), lambda ld, d: _take(ld, 6)),
    # The states the epoch cursor makes: at an epoch's end (a restore then begins the next
    # epoch) and after set_epoch(2) before any batch (its start).
    "indexed_epoch_end": (lambda d, **kw: _loader(d["shards"], shuffle=True, **kw), lambda ld, d: list(ld)),
    "indexed_set_epoch": (lambda d, **kw: _loader(d["shards"], shuffle=True, **kw), lambda ld, d: ld.set_epoch(2)),
    # (40 of a 48-sample pass: the end lies inside pass 0, whatever the producer has reached)
    "stream_epoch_end": (lambda d, **kw: _stream(d["shards"], shuffle=True, shuffle_buffer=10, samples_per_epoch=40,
                                                 **kw), lambda ld, d: list(ld)),
    "stream_set_epoch": (lambda d, **kw: _stream(d["shards"], shuffle=True, shuffle_buffer=10, samples_per_epoch=40,
                                                 **kw), lambda ld, d: ld.set_epoch(2)),
}
# A state saved before stoker wrote "pass", "pass_start" and "shuffle_initial":
# stream_pass's, less those keys; it restores by replaying from the stream's start.
LEGACY = {"stream_legacy": ("stream_pass", ("pass", "pass_start", "shuffle_initial"))}


def make(name: str, data: dict, **settings):
    base = LEGACY[name][0] if name in LEGACY else name
    return STATES[base][0](data, **settings)


def saved_state(name: str, data: dict, **settings) -> dict:
    with closing(make(name, data, **settings)) as loader:
        live = STATES[name][1](loader, data)
        state = loader.state_dict()
        del live
        return state


def legacy_state(state: dict, drop) -> dict:
    state = copy.deepcopy(state)
    for key in drop:
        del state["stoker"][key]
    return state


def rest(name: str, data: dict, state: dict, **settings) -> dict:
    """The digest of what one iter() delivers after restoring `state`: the rest of its epoch (at an
    epoch's end, the whole next epoch)."""
    with closing(make(name, data, **settings)) as loader:
        loader.load_state_dict(state)
        return digest(iter(loader))


def epoch_loader(mode: str, data: dict, **kw):
    if mode == "stream":
        return _stream(data["shards"], shuffle=True, shuffle_buffer=10, samples_per_epoch=TOTAL, **kw)
    return _loader(data["shards"], shuffle=True, **kw)


def epoch_digest(mode: str, data: dict, **kw) -> dict:
    with closing(epoch_loader(mode, data, **kw)) as loader:
        got = digest(iter(loader))
        if kw.get("device") == "cpu-late":  # the copy engine copied every batch, none rewritten in flight
            h2d = loader._native.stats()["h2d"]
            assert h2d["copies"] == got["batches"] and h2d["overwrites"] == 0, h2d
        return got


def make_data(root: Path) -> dict:
    written: dict = {}
    return {"shards": write_shards(root / "good", written=written), "bad": write_shards(root / "bad", BAD),
            "corpus": write_corpus(root / "tokens"), "cache": str(root / "cache"), "written": written}


def load_golden(name: str):
    return json.loads((GOLDEN / name).read_text())


# -- the tests -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return make_data(tmp_path_factory.mktemp("golden"))


@pytest.mark.parametrize("name", sorted([*STATES, *LEGACY]))
def test_the_golden_state_is_saved_and_restores_to_the_golden_rest(data, name):
    golden = load_golden(f"{name}.state.json")
    if name in LEGACY:  # (a) as today's state, less the keys older versions did not write
        base, drop = LEGACY[name]
        assert golden == legacy_state(load_golden(f"{base}.state.json"), drop)
    else:  # (a) a loader run to the same point saves it
        assert saved_state(name, data) == golden
    # (b) restored, it delivers the golden rest of the epoch
    assert rest(name, data, golden) == load_golden("digests.json")[f"rest:{name}"]


def test_the_legacy_stream_state_continues_as_the_current_one():
    digests = load_golden("digests.json")
    assert digests["rest:stream_legacy"] == digests["rest:stream_pass"]


def test_the_golden_skip_state_holds_the_bad_samples():
    """The skip state saved its ledger: a sanity check that the golden data was damaged."""
    state = load_golden("indexed_skip.state.json")["stoker"]
    assert state["skip"]["skipped"] >= 1
    assert load_golden("stream_skip.state.json")["stoker"]["skip"]["skipped"] >= 1


@pytest.mark.parametrize("mode", ["indexed", "stream"])
def test_an_epoch_has_the_golden_digest_at_any_threads_and_cpu_copy_engine(data, mode):
    """decode_threads 1 and 4, each through no copy engine ("cpu") and the device
    stage's CPU copy engine ("cpu-late"): one epoch, the same batches."""
    want = load_golden("digests.json")[f"epoch:{mode}"]
    for decode_threads in (1, 4):
        for device in ("cpu", "cpu-late"):
            kw = dict(decode_threads=decode_threads, device=device)
            if device == "cpu-late":
                kw["_late_copy_ms"] = 1
            assert epoch_digest(mode, data, **kw) == want, kw


@pytest.mark.parametrize("mode", ["indexed", "stream"])
def test_every_batch_held_at_once_equals_the_iterated_epoch(data, mode):
    """list(loader): every buffer of the epoch alive at once, read after the last is made."""
    with closing(epoch_loader(mode, data, prefetch=2)) as loader:
        held = list(loader)
        assert len(held) == TOTAL // BATCH
        # every sample once, each as written (PNG decodes exactly): the golden digest is of the right data
        assert sorted(k for b in held for k in b["__key__"]) == sorted(data["written"])
        for b in held:
            for i, key in enumerate(b["__key__"]):
                pixels, vec, cls = data["written"][key]
                np.testing.assert_array_equal(b["png"][i], pixels, err_msg=key)
                np.testing.assert_array_equal(b["vec.npy"][i], vec, err_msg=key)
                assert b["cls"][i] == cls, key
        assert digest(held) == load_golden("digests.json")[f"epoch:{mode}"]
