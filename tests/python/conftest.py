"""Test datasets, written with the peers' own tools (webdataset's TarWriter,
Pillow's JPEG encoder, numpy's savez) so every check against stoker compares
with an independent writer and reader."""
from __future__ import annotations

import io
import os
import shutil
import subprocess
import tarfile
import time
import weakref
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]


def natural_image(rng: np.random.Generator, width: int, height: int) -> np.ndarray:
    """Smooth gradients and soft shapes with mild noise: resize behaves as on photos."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    img = np.empty((height, width, 3), np.float32)
    for c in range(3):
        a, b, p = rng.uniform(-1, 1, 3)
        img[..., c] = 128 + 60 * np.sin(a * x / 40 + p) * np.cos(b * y / 50)
    for _ in range(6):
        cx, cy = rng.uniform(0, width), rng.uniform(0, height)
        rx, ry = rng.uniform(10, width / 3), rng.uniform(10, height / 3)
        d = ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2
        mask = np.clip(1.5 - d, 0, 1)[..., None]
        img = img * (1 - mask) + rng.uniform(0, 255, 3) * mask
    img += rng.normal(0, 3, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def jpeg_bytes(pixels: np.ndarray, quality: int = 90, mode: str | None = None, subsampling: int = -1,
               progressive: bool = False) -> bytes:
    """Pillow's JPEG of `pixels` (subsampling -1: Pillow's default)."""
    buf = io.BytesIO()
    img = Image.fromarray(pixels)
    if mode:
        img = img.convert(mode)
    img.save(buf, format="JPEG", quality=quality, subsampling=subsampling, progressive=progressive)
    return buf.getvalue()


def npz_bytes(arrays: dict, compressed: bool = False) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


def write_vision_shards(directory: Path, shards: int, per_shard: int, size=(96, 72), seed=0,
                        compressed=False) -> dict:
    """Shards of {jpg, features.npz, cls}; returns key -> the sample's source dict."""
    import webdataset as wds

    rng = np.random.default_rng(seed)
    samples = {}
    directory.mkdir(parents=True, exist_ok=True)
    n = 0
    for s in range(shards):
        with wds.TarWriter(str(directory / f"shard-{s:06d}.tar")) as sink:
            for _ in range(per_shard):
                key = f"s{n:05d}"
                w, h = size if n % 3 else size[::-1]
                sample = {
                    "__key__": key,
                    "jpg": jpeg_bytes(natural_image(rng, w, h)),
                    "features.npz": npz_bytes(
                        {"emb": rng.standard_normal((4, 8)).astype(np.float16),
                         "iou": rng.random(3).astype(np.float32)}, compressed=compressed),
                    "cls": str(n % 10).encode(),
                }
                sink.write(sample)
                samples[key] = sample
                n += 1
    return samples


def _close_loaders_since(before) -> None:
    """Stops every loader made since `before` (a test's own, even one an
    exception's traceback keeps alive), then collects, so the next test
    starts with no native thread, descriptor or buffer of this one's."""
    import gc

    from stoker import _exit

    for loader in [x for x in list(_exit._open) if x not in before]:
        try:
            loader.close()
        except Exception:  # a loader whose construction failed half-way has nothing to close
            pass
    gc.collect()


@pytest.fixture(autouse=True)
def _isolated_test():
    """Each test leaves the process as it found it: its loaders closed and
    collected, and the process-wide I/O options (``set_io_options``) as they
    were before it, so no test depends on which ran before it (a shuffled
    order runs with `bash scripts/test_shuffled.sh`). Loaders and options of
    module fixtures, made before this runs, are kept for the module's other
    tests."""
    from stoker import _exit, _stoker

    before = weakref.WeakSet(_exit._open)  # by identity, and no reused id() taken for an old loader
    options = _stoker.io_options()
    yield
    _close_loaders_since(before)
    if _stoker.io_options() != options:
        _restore_io_options(options)


@pytest.fixture(autouse=True, scope="module")
def _isolated_module():
    """A module's fixtures may set process-wide I/O options for all its
    tests: they end with the module."""
    from stoker import _exit, _stoker

    before = weakref.WeakSet(_exit._open)
    yield
    _close_loaders_since(before)
    _stoker.reset_io_options()


def _restore_io_options(options: dict) -> None:
    from stoker import _stoker

    _stoker.reset_io_options()
    if _stoker.io_options() != options:  # they were set, not the environment's
        _stoker.set_io_options(**options)


@pytest.fixture(scope="session")
def vision_dir(tmp_path_factory) -> tuple[Path, dict]:
    d = tmp_path_factory.mktemp("vision")
    return d, write_vision_shards(d, shards=3, per_shard=20)


def write_tar(path: Path, members: list[tuple[str, bytes]]) -> None:
    """A tar of (member name, bytes), in order, written by Python's tarfile."""
    with tarfile.open(path, "w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def stoker_env() -> dict:
    """The environment for a child Python that must import the same stoker as
    this process (the installed package in CI, the source tree in development)."""
    import stoker

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(stoker.__file__).resolve().parents[1]),
                                         env.get("PYTHONPATH", "")])
    return env


def stoker_bin() -> str | None:
    """The native `stoker` command: $STOKER_BIN, the installed package's, or a build tree's."""
    if os.environ.get("STOKER_BIN"):
        return os.environ["STOKER_BIN"]
    try:
        from stoker import _cli

        if os.path.exists(_cli.binary()):
            return _cli.binary()
    except ImportError:
        pass
    for candidate in (ROOT / "build" / "cli" / "stoker", ROOT / "build" / "main" / "stoker"):
        if candidate.exists():
            return str(candidate)
    return shutil.which("stoker")


class OthersCpu:
    """The share of this process's CPUs that other processes kept busy while the block
    ran: /proc/stat's busy time over the affinity CPUs, less this process's own CPU, over
    the wall time; an independent reading of what the engine's contention verdict sees.

        with OthersCpu() as others:
            ...
        others.share  # 0..1
    """

    @staticmethod
    def _busy(cpus) -> float:
        busy = 0
        with open("/proc/stat") as f:
            for line in f:
                name, *fields = line.split()
                if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
                    v = [int(x) for x in fields]
                    busy += sum(v) - v[3] - v[4]  # all but idle and iowait
        return busy / os.sysconf("SC_CLK_TCK")

    def __enter__(self) -> "OthersCpu":
        self.cpus = os.sched_getaffinity(0)
        t = os.times()
        self._t0, self._busy0, self._own0 = time.monotonic(), self._busy(self.cpus), t.user + t.system
        return self

    def __exit__(self, *exc) -> None:
        t = os.times()
        wall = max(1e-3, time.monotonic() - self._t0)
        others = self._busy(self.cpus) - self._busy0 - (t.user + t.system - self._own0)
        self.share = max(0.0, min(1.0, others / (wall * len(self.cpus))))


def wait_ready(loader, at_least=1, timeout=60.0) -> dict:
    """Polls the engine until `at_least` batches are ready with no request
    pending (a loader that reads ahead: early start, the next epoch prepared)."""
    deadline = time.monotonic() + timeout
    while True:
        s = loader._native.stats()
        if s["batches_ready"] >= at_least or time.monotonic() > deadline:
            return s
        time.sleep(0.01)


def lightning_run(loader, max_epochs, ckpt_path=None, save_at=None, save_to=None):
    """Fits a tiny module; returns [(epoch, keys)] per training step."""
    L = pytest.importorskip("lightning.pytorch")
    import torch

    steps = []

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def training_step(self, batch, batch_idx):
            steps.append((self.current_epoch, list(batch["__key__"])))
            return (self.w - batch["cls"].float().mean()).pow(2).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    class SaveAt(L.Callback):
        def on_train_batch_end(self, trainer, *args):
            if trainer.global_step == save_at:
                trainer.save_checkpoint(save_to)

    trainer = L.Trainer(max_epochs=max_epochs, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[SaveAt()] if save_at is not None else [])
    trainer.fit(Module(), train_dataloaders=loader, ckpt_path=ckpt_path)
    return steps


def pytest_collection_modifyitems(items):
    """test_docs_blocks.py runs each page's blocks in one namespace, a story
    told in order (a block uses the loader an earlier one made): under a
    shuffled run (pytest-randomly reorders before this hook) they keep the
    pages' order, in the places the shuffle gave the module."""
    where = [i for i, item in enumerate(items) if item.path.name == "test_docs_blocks.py"]
    story = sorted((items[i] for i in where),
                   key=lambda item: (item.location[1], getattr(item, "callspec", None) and item.callspec.params["index"]
                                     or 0))
    for i, item in zip(where, story):
        items[i] = item


# -- skips are seen -----------------------------------------------------------
# A skip passes unseen unless its reason is on this list: a missing server,
# browser or binary would otherwise drop whole files silently. Each entry is a
# reason that a CPU machine set up by scripts/setup.sh is expected to give.
ALLOWED_SKIPS = (
    "CUDA device",  # CI and this machine have no GPU; bench/device_*.sh runs those on one
    "root reads files whatever their mode",  # a permission test that root cannot fail
    "needs taskset and 2 CPUs",  # a run pinned to one core (taskset -c 0 scripts/test_shuffled.sh)
    "on Python 3.13",  # ray has no 3.13 wheel (requirements-dev.txt)
    "torchvision does not load against the pinned torch",  # test_torchvision_real.py says why none can
    # The bench's peers (litdata, Mosaic Streaming, Megatron-Energon) are installed by
    # bench/run.sh, not scripts/setup.sh: their format tests run after a bench run.
    "(requirements-bench.txt",
    "bench/run.sh installs requirements-bench.txt)",
    # Blocks of README.md and docs/ that need a remote host; each names the test that runs the
    # same on loopback (tests/python/test_docs_blocks.py SKIP).
    "needs a Ray cluster (tests/python/test_ray_workers.py",
    "needs an S3 bucket and an HTTPS host",
    "needs an HTTP host (tests/python/test_stream_mode.py",
    # ... and those that run a command of their own, each checked to parse.
    "runs the test command itself (.ci/run runs it",
    "installs from PyPI (scripts/setup.sh installs this checkout",
    "runs a suite of its own (the test suite shuffled",
    "builds this site (scripts/test.sh runs mkdocs build --strict",
)
_unexpected_skips: list[str] = []


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if not any(allowed in reason for allowed in ALLOWED_SKIPS):
            _unexpected_skips.append(f"{report.nodeid}: {reason}")


def pytest_sessionfinish(session, exitstatus):
    # scripts/test.sh sets STOKER_STRICT_SKIPS: the whole suite fails on one;
    # a developer's run of a few files only lists them.
    if _unexpected_skips and exitstatus == 0 and os.environ.get("STOKER_STRICT_SKIPS") == "1":
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter):
    if _unexpected_skips:
        terminalreporter.section("skips outside the allow-list (tests/python/conftest.py ALLOWED_SKIPS)", red=True)
        for line in _unexpected_skips:
            terminalreporter.line(line)
