"""Batches made by Ray actors (stoker.RayWorkers, python/stoker/ray_workers.py)
on a real multi-node Ray cluster on this machine (ray.cluster_utils.Cluster:
a head that takes no work and two worker nodes of one CPU each, separate
raylets, so every batch is made on another node and comes through Ray's
object store). The reference is stoker.Loader in this process: with the same
seed, the Ray loader's stream must be the local loader's byte for byte, with
a worker killed or its node removed in mid-epoch, and resumed from a state taken
in mid-epoch; under torchrun (2 ranks, gloo) each rank's stream is its local one.
Over shards with corrupt samples, on_error="skip" gives the local skip
loader's stream, counts, state and budget errors (the trainer's engine refills
the slots the workers leave), and device="cpu-late" (the device stage on a CPU
copy engine) copies every batch through the trainer's pool.
No mocks: the actors run the engine, Ray moves the batches.

The strided plan itself (a worker makes every N-th batch of the rank) is
also checked without Ray, through local loaders with _batch_stride.
The cluster is module-scoped (about 5 s to start); the whole file runs in
about 45 s on 2 cores, the torchrun test 8-12 s of it.
"""
from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import tarfile
import textwrap
import time

from types import SimpleNamespace

import numpy as np
import pytest

import stoker
from conftest import jpeg_bytes, natural_image, npz_bytes, stoker_env, write_vision_shards

BATCH = 8
EPOCHS = 3


def _options(shards) -> dict:
    # 60 samples in batches of 8, the last short (drop_last=False): 8 batches
    # per epoch, so 2 workers own 4 each and the short batch is worker 1's.
    return dict(fields={"jpg": stoker.image(24, resize="random_resized_crop", random_hflip=True),
                        "features.npz": stoker.npz(), "cls": stoker.scalar()},
                batch_size=BATCH, shuffle=True, seed=5, drop_last=False, decode_threads=1, autotune=False)


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    d = tmp_path_factory.mktemp("ray_vision")
    write_vision_shards(d, shards=3, per_shard=20, size=(40, 32))
    return sorted(str(p) for p in d.glob("shard-*.tar"))


def _flat(batch: dict) -> dict:
    """A batch as comparable values: each array's dtype, shape and bytes; the key lists."""
    out = {}
    for name, value in batch.items():
        if isinstance(value, dict):
            for member, array in value.items():
                out[f"{name}/{member}"] = _flat({"a": array})["a"]
        elif isinstance(value, list):
            out[name] = list(value)
        else:
            a = np.asarray(value)
            out[name] = (str(a.dtype), a.shape, a.tobytes())
    return out


def _stream(loader, epochs=range(EPOCHS), after=None) -> list:
    """(epoch, batch) of whole epochs; `after(epoch, i, loader)` runs after each batch."""
    got = []
    for epoch in epochs:
        loader.set_epoch(epoch)
        for i, batch in enumerate(loader):
            got.append((epoch, _flat(batch)))
            if after is not None:
                after(epoch, i, loader)
    return got


def _state_after(loader, epoch: int, batches: int) -> dict:
    """The loader's state after `batches` batches of `epoch`; the loader is closed."""
    try:
        loader.set_epoch(epoch)
        it = iter(loader)
        for _ in range(batches):
            next(it)
        return loader.state_dict()
    finally:
        loader.close()


@pytest.fixture(scope="module")
def local_stream(shards):
    loader = stoker.Loader(shards, **_options(shards))
    try:
        stream = _stream(loader)
    finally:
        loader.close()
    assert len(stream) == EPOCHS * 8
    assert len(stream[-1][1]["__key__"]) == 60 % BATCH  # the short last batch is in the comparison
    return stream


# -- without Ray: the strided plan through local loaders ----------------------------


def test_strided_local_loaders_interleave_to_the_whole_stream(shards, local_stream):
    """Loader j of N (_batch_stride=N, _batch_offset=j) makes the rank's batches
    j, j + N, ... and nothing else, byte for byte."""
    for n in (2, 3):
        parts = []
        for j in range(n):
            loader = stoker.Loader(shards, _batch_stride=n, _batch_offset=j, **_options(shards))
            parts.append(_stream(loader))
            assert len(loader) == len(range(j, 8, n))
            loader.close()
        per_epoch = [len(range(j, 8, n)) for j in range(n)]
        merged = [parts[b % n][epoch * per_epoch[b % n] + b // n] for epoch in range(EPOCHS) for b in range(8)]
        assert merged == local_stream, f"stride {n}"


def test_shared_local_loaders_interleave_to_the_whole_stream(shards, local_stream):
    """Unequal shares of cycles of 5 batches (2, 1 and 2 places): each loader
    makes its places' batches, which interleave to the rank's stream."""
    shares, parts, offset = (2, 1, 2), [], 0
    for share in shares:
        loader = stoker.Loader(shards, _batch_stride=5, _batch_offset=offset, _batch_share=share,
                               **_options(shards))
        parts.append([b for _, b in _stream(loader)])
        offset += share
        loader.close()
    owner = [j for j, share in enumerate(shares) for _ in range(share)]
    merged = [parts[owner[b % 5]].pop(0) for _ in range(EPOCHS) for b in range(8)]
    assert merged == [b for _, b in local_stream]


def test_strided_loader_refuses_bad_offsets(shards):
    with pytest.raises(ValueError, match="batch_offset 2 and batch_share 1 must lie in the cycle"):
        stoker.Loader(shards, _batch_stride=2, _batch_offset=2, **_options(shards))
    with pytest.raises(ValueError, match="batch_share must be at least 0"):
        stoker.Loader(shards, _batch_stride=2, _batch_share=-1, **_options(shards))
    with pytest.raises(ValueError, match="on_error=skip with batch_stride > batch_share needs leave_failed_slots"):
        stoker.Loader(shards, _batch_stride=2, on_error="skip", **_options(shards))


# -- on_error="skip" over shares: corrupt samples, refilled by the receiving loader --------


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    """60 samples in 3 shards, 4 of them bad: a cut JPEG, a broken NPY header
    inside the NPZ, a sample without its cls, another cut JPEG."""
    d = tmp_path_factory.mktemp("ray_damaged")
    rng = np.random.default_rng(7)
    samples = [{"__key__": f"d{i:04d}", "jpg": jpeg_bytes(natural_image(rng, 40, 32)),
                "features.npz": npz_bytes({"emb": rng.standard_normal((4, 8)).astype(np.float16)}),
                "cls": str(i % 10).encode()} for i in range(60)]
    samples[5]["jpg"] = samples[5]["jpg"][:150] + b"\x00" * 40
    npz = bytearray(samples[23]["features.npz"])
    j = npz.find(b"'descr'")
    npz[j:j + 7] = b"'dascr'"
    samples[23]["features.npz"] = bytes(npz)
    del samples[38]["cls"]
    samples[47]["jpg"] = samples[47]["jpg"][:200]
    for s in range(3):
        with tarfile.open(d / f"shard-{s}.tar", "w", format=tarfile.USTAR_FORMAT) as tf:
            for sample in samples[s * 20:(s + 1) * 20]:
                for field, data in sample.items():
                    if field != "__key__":
                        info = tarfile.TarInfo(f"{sample['__key__']}.{field}")
                        info.size = len(data)
                        tf.addfile(info, io.BytesIO(data))
    return sorted(str(p) for p in d.glob("shard-*.tar"))


def _skip_options(shards, **kw) -> dict:
    return dict(_options(shards), on_error="skip", **kw)


def _with_skips(loader, epochs=range(2), after=None) -> tuple:
    """The stream of `epochs` and the skip counts after each epoch; `after(epoch, i, loader)` runs after each batch."""
    got, counts = [], []
    for epoch in epochs:
        loader.set_epoch(epoch)
        for i, b in enumerate(loader):
            got.append((epoch, _flat(b)))
            if after is not None:
                after(epoch, i, loader)
        counts.append(dict(loader.skips))
    return got, counts


@pytest.fixture(scope="module")
def skip_stream(damaged):
    loader = stoker.Loader(damaged, **_skip_options(damaged))
    try:
        got, counts = _with_skips(loader)
    finally:
        loader.close()
    assert counts[-1]["skipped"] == 8 and counts[-1]["refilled"] >= 8  # 4 bad samples, met in each epoch
    return got, counts


@pytest.mark.parametrize("device", ["cpu", "cpu-late"])
def test_shares_leave_failed_slots_and_a_receiving_loader_refills_them(damaged, skip_stream, device):
    """Without Ray: two loaders of alternate batches (_batch_stride=2) leave
    the bad samples' slots and name them; a loader of none (_batch_share=0)
    receives every batch in order and refills them: the local stream, the
    local counts; through its device stage too (refilled, then copied)."""
    parts = [stoker.Loader(damaged, _batch_stride=2, _batch_offset=j, _leave_failed_slots=True, output="numpy",
                           **_skip_options(damaged)) for j in range(2)]
    receiver = stoker.Loader(damaged, _batch_share=0, device=device, _late_copy_ms=1, **_skip_options(damaged))
    try:
        assert len(receiver) == 0
        got, counts, left = [], [], 0
        for epoch in range(2):
            receiver._native.set_epoch(epoch)
            for p in parts:
                p._native.set_epoch(epoch)
            for b in range(8):
                item = parts[b % 2]._native.next(0)
                left += len(item[4])
                assert all(isinstance(slot, int) and ".tar" in cause for slot, cause in item[4]), item[4]
                got.append((epoch, _flat(receiver._to_dict(receiver._native.receive(b, *item[1:])))))
            counts.append(dict(receiver.skips))
        assert left == 8  # each bad sample's own slot, once an epoch
        assert parts[0].skips == parts[1].skips == {"skipped": 0, "refilled": 0, "seen": 0}
        assert (got, counts) == skip_stream
        if device == "cpu-late":
            h2d = receiver._native.stats()["h2d"]
            assert h2d["copies"] == 16 and h2d["overwrites"] == 0, h2d
    finally:
        receiver.close()
        for p in parts:
            p.close()


def test_without_ray_the_error_says_how_to_install_it():
    # A child Python where `import ray` fails, as where it is not installed.
    code = ("import sys; sys.modules['ray'] = None\n"
            "import stoker\n"
            "try:\n    stoker.RayWorkers(count=2)\n"
            "except ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], env=stoker_env(), capture_output=True, text=True,
                         timeout=120)
    assert "pip install 'stoker[ray]'" in out.stdout, out.stdout + out.stderr


# -- on a Ray cluster ------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'stoker[ray]'); "
                                             "scripts/setup.sh installs it where a wheel exists")
    from ray.cluster_utils import Cluster

    # The raylets start from this environment: their workers import this stoker.
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = stoker_env()["PYTHONPATH"]
    node = dict(object_store_memory=80 << 20)
    # A node removed is declared dead after 3 missed health checks 0.2 s apart
    # (Ray's default waits 5 of 3 s), so the node test takes a second, not 15.
    health = {"health_check_initial_delay_ms": 0, "health_check_period_ms": 200, "health_check_failure_threshold": 3}
    c = Cluster(initialize_head=True, head_node_args=dict(node, num_cpus=0, include_dashboard=False,
                                                          _system_config=health))
    try:
        nodes = [c.add_node(num_cpus=1, **node) for _ in range(2)]
        ray.init(address=c.address, logging_level=logging.WARNING, log_to_driver=False)
        yield SimpleNamespace(ray=ray, cluster=c, nodes=nodes, node_options=node)
    finally:
        ray.shutdown()
        c.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _ray_loader(shards, count, prefetch=4, local=0):
    # Half a CPU each: three workers fit on the two nodes, and a replacement
    # beside them. local=0: every batch from a worker, unless a test says.
    return stoker.Loader(shards, workers=stoker.RayWorkers(count=count, num_cpus=0.5, prefetch=prefetch,
                                                           local=local), **_options(shards))


@pytest.mark.parametrize("count", [1, 2, 3])
def test_stream_equals_the_local_loaders(ray_cluster, shards, local_stream, count):
    loader = _ray_loader(shards, count)
    try:
        assert isinstance(loader, stoker.RayLoader)
        assert len(loader) == 8
        assert loader.plan.rank_samples == 60
        workers = {n.node_id for n in ray_cluster.nodes}  # every batch is made on a worker node, not the head
        assert len(loader.nodes) == count and set(loader.nodes) <= workers
        assert ray_cluster.cluster.head_node.node_id not in loader.nodes
        # Each engine counts its actor's CPUs (half of one: 1 core), not the node's.
        assert all(c.startswith("1 core") and "STOKER_LOCAL_RANKS" in c for c in loader.cores_from), loader.cores_from
        got = _stream(loader)
        assert len(got) == len(local_stream)
        assert got == local_stream
        report = loader.report()  # the trainer's waits, and one line per worker
        assert report["totals"]["batches"] == len(local_stream)
        assert [w["worker"] for w in report["workers"]] == list(range(count))
        assert sum(w["batches"] for w in report["workers"]) == len(local_stream)
        assert all(w["line"].startswith(f"worker {w['worker']} (node ") for w in report["workers"])
        # Each worker's engine stages, as of its latest batch: it decoded every sample it made.
        assert all(w["engine"]["decode_threads"] == 1 and 0 < w["engine"]["decode_busy"] <= 1
                   for w in report["workers"]), report["workers"]
        # Every batch crossed the object store once, with its own arrays' bytes and no more.
        moved = sum(a[2].__len__() for _, b in local_stream for k, a in b.items() if isinstance(a, tuple))
        assert report["transfer"]["batches"] == len(local_stream)
        assert report["transfer"]["bytes"] == moved
        assert isinstance(loader.state_dict()["stoker"]["next_batch"], int)
    finally:
        loader.close()


def test_the_trainer_decodes_its_share_beside_its_workers(ray_cluster, shards, local_stream):
    """local=1 CPU beside 2 workers of half a CPU: cycles of 4 batches, 2 made
    by the trainer's own engine and 1 by each worker; the stream is the local
    loader's, and report() has the trainer's line and its engine's stages."""
    loader = _ray_loader(shards, 2, local=1)
    try:
        assert loader.shares == {"cycle": 4, "trainer": 2, "worker 0": 1, "worker 1": 1}
        assert _stream(loader) == local_stream
        workers = loader.report()["workers"]
        assert [w["worker"] for w in workers] == ["trainer", 0, 1]
        # Of each epoch's 8 batches, the trainer made places 0, 1 of both cycles.
        assert [w["batches"] for w in workers] == [4 * EPOCHS, 2 * EPOCHS, 2 * EPOCHS]
        assert workers[0]["line"].startswith("trainer (this process") and workers[0]["move_s"] == 0
        assert workers[0]["engine"]["samples_per_s"] > 0
        assert loader.report()["transfer"]["batches"] == 4 * EPOCHS
    finally:
        loader.close()


def test_a_state_taken_with_the_trainers_share_resumes_on_other_shares(ray_cluster, shards, local_stream):
    """Taken after 5 batches with the trainer's share (cycle 4), restored by
    one worker alone and the trainer (cycle 3: 2 and 1): the rest, in order."""
    state = _state_after(_ray_loader(shards, 2, local=1), 1, 5)
    resumed = stoker.Loader(shards, workers=stoker.RayWorkers(count=1, num_cpus=1, local=2), **_options(shards))
    try:
        assert resumed.shares == {"cycle": 3, "trainer": 2, "worker 0": 1}
        resumed.load_state_dict(state)
        got = _stream(resumed, epochs=range(resumed.epoch, EPOCHS))
    finally:
        resumed.close()
    assert got == local_stream[8 + 5:]


def test_workers_join_and_leave_between_batches_and_the_stream_stays(ray_cluster, shards, local_stream, caplog):
    """resize() in mid-epoch (1 -> 3 workers after batch 2 of epoch 0, 3 -> 2
    after batch 5 of epoch 1, beside the trainer's share): every share is
    dealt its places again from the next batch, and nothing is lost or repeated."""
    loader = _ray_loader(shards, 1, local=0.5)

    def resize(epoch, i, loader):
        if (epoch, i) == (0, 2):
            loader.resize(3)
        elif (epoch, i) == (1, 5):
            loader.resize(2)

    try:
        with caplog.at_level(logging.WARNING, logger="stoker"):
            got = _stream(loader, after=resize)
        assert got == local_stream
        assert loader.shares == {"cycle": 3, "trainer": 1, "worker 0": 1, "worker 1": 1}
        lines = [r.getMessage() for r in caplog.records]
        assert any("3 Ray workers instead of 1 from batch 3 of epoch 0" in line for line in lines), lines
        assert any("2 Ray workers instead of 3 from batch 6 of epoch 1" in line for line in lines), lines
        with pytest.raises(ValueError, match="at least 1 worker"):
            loader.resize(0)
    finally:
        loader.close()


def test_the_loader_asks_for_a_worker_while_the_trainer_waits(ray_cluster, shards, local_stream, caplog):
    """A trainer that computes nothing waits on one worker: after a window of
    4 batches the loader asks Ray for a second (max_count=2), which joins, and
    the log says why; the stream is the local loader's."""
    loader = stoker.Loader(shards, workers=stoker.RayWorkers(1, num_cpus=0.5, local=0, max_count=2, scale_every=4),
                           **_options(shards))

    def placed(epoch, i, loader):
        # An actor starts in a second or two, the epochs here take less: the
        # step waits once for the asked-for worker, so it joins before the end.
        if loader._growing is not None:
            ray_cluster.ray.get(loader._growing[1], timeout=120)

    try:
        with caplog.at_level(logging.INFO, logger="stoker"):
            got = _stream(loader, after=placed)
        assert got == local_stream
        assert len(loader.actors) == 2
        lines = [r.getMessage() for r in caplog.records]
        assert any("asking Ray for Ray worker 1 of at most 2: the trainer waited" in line for line in lines), lines
        assert any("2 Ray workers instead of 1" in line for line in lines), lines
    finally:
        loader.close()


def test_idle_workers_are_handed_back(ray_cluster, shards, local_stream, caplog):
    """Steps of 100 ms against workers that make a batch in a few: after a
    window the workers are mostly idle, so one of the two is handed back
    (min_count=1); the stream is the local loader's. (With 50 ms steps, the
    suite on 6 pytest workers on 2 cores made batches wait up to 0.16 s in
    every window, and no worker was handed back.)"""
    import time

    loader = stoker.Loader(shards, workers=stoker.RayWorkers(2, num_cpus=0.5, local=0, min_count=1, scale_every=4),
                           **_options(shards))
    try:
        with caplog.at_level(logging.WARNING, logger="stoker"):
            got = _stream(loader, after=lambda *_: time.sleep(0.1))
        assert got == local_stream
        assert len(loader.actors) == 1
        lines = [r.getMessage() for r in caplog.records]
        assert any("1 Ray workers instead of 2" in line and "1 keep up" in line for line in lines), lines
    finally:
        loader.close()


def test_a_worker_ray_cannot_place_is_given_up(ray_cluster, shards, local_stream, caplog):
    """Both nodes' CPUs are taken by two workers of one CPU: the third asked
    for is never placed, so it is given up after grow_timeout_s, the log says
    so, and the two go on."""
    loader = stoker.Loader(shards, workers=stoker.RayWorkers(2, num_cpus=1, local=0, max_count=3, scale_every=2,
                                                             grow_timeout_s=0.0), **_options(shards))
    try:
        with caplog.at_level(logging.WARNING, logger="stoker"):
            got = _stream(loader)
        assert got == local_stream
        assert len(loader.actors) == 2
        assert any("Ray placed no worker of num_cpus=1" in r.getMessage() for r in caplog.records), caplog.text
    finally:
        loader.close()


def test_shares_follow_the_cpus_in_short_cycles():
    from stoker.ray_workers import _owed_local, _shares

    assert _shares(1, 1) == (1, 1)
    assert _shares(4, 16) == (1, 4)
    assert _shares(12, 16) == (3, 4)
    assert _shares(0, 2) == (0, 1)
    assert _shares(2, 0.5) == (4, 1)
    # A share's own index of the rank's batch b, against counting its places one by one.
    for cycle, offset, share in [(4, 0, 2), (4, 2, 1), (4, 3, 1), (9, 1, 4), (1, 0, 1)]:
        own = [b for b in range(40) if offset <= b % cycle < offset + share]
        for b in range(41):
            assert _owed_local(b, cycle, offset, share) == sum(1 for x in own if x < b), (cycle, offset, share, b)


def test_a_worker_killed_in_mid_epoch_is_replaced_and_nothing_is_lost(ray_cluster, shards, local_stream, caplog):
    # One request in flight per worker: when worker 1 is killed it still owes
    # batches not yet asked of it, so the death is met in mid-epoch.
    loader = _ray_loader(shards, 2, prefetch=1)
    killed = []

    def kill(epoch, i, loader):
        if epoch == 0 and i == 2:  # worker 1 still owes batches 3, 5, 7
            killed.append(loader.actors[1])
            ray_cluster.ray.kill(loader.actors[1], no_restart=True)

    try:
        with caplog.at_level(logging.WARNING, logger="stoker"):
            got = _stream(loader, after=kill)
        assert killed and loader.actors[1] is not killed[0]  # a new actor took its place
        assert got == local_stream  # nothing lost, nothing repeated, same bytes
        lines = [r.getMessage() for r in caplog.records if "Ray worker 1" in r.getMessage()]
        assert any("died" in line and "of epoch 0" in line for line in lines), caplog.text
        assert any("waited" in line and " s " in line for line in lines), caplog.text
        assert [w["restarts"] for w in loader.report()["workers"]] == [0, 1]
    finally:
        loader.close()


def test_resumes_a_state_taken_in_mid_epoch(ray_cluster, shards, local_stream):
    """A state taken after 3 batches of epoch 0 by a loader of 2 workers, restored
    by one of 1 worker and by a local loader: both deliver the rest, in order."""
    state = _state_after(_ray_loader(shards, 2), 0, 3)
    assert state["stoker"]["epoch"] == 0 and state["stoker"]["next_batch"] == 3
    rest = local_stream[3:]

    resumed = _ray_loader(shards, 1)
    try:
        resumed.load_state_dict(state)
        got = _stream(resumed, epochs=range(resumed.epoch, EPOCHS))
    finally:
        resumed.close()
    assert got == rest

    local = stoker.Loader(shards, **_options(shards))  # the same format: a local loader continues it too
    try:
        local.load_state_dict(state)
        assert _stream(local, epochs=range(local.epoch, EPOCHS)) == rest
    finally:
        local.close()


def test_a_state_saved_on_two_ranks_resumes_on_one_with_workers(ray_cluster, shards):
    """Elastic resume: rank 0 of 2 saved after 2 batches of epoch 1; a loader
    of 1 rank with the trainer's share and a worker delivers the rest of that
    epoch and the next, as a local loader of 1 rank resumed from the same
    state does; a state taken in mid-rest resumes (with a worker replaced)."""
    state = _state_after(stoker.Loader(shards, rank=0, world_size=2, **_options(shards)), 1, 2)
    assert state["stoker"]["world_size"] == 2

    local = stoker.Loader(shards, rank=0, world_size=1, **_options(shards))
    local.load_state_dict(state)
    want = _stream(local, epochs=range(1, EPOCHS))
    local.close()
    assert 0 < len(want) < 2 * 8  # the rest of epoch 1 (less than a whole epoch), then epoch 2

    ray_loader = stoker.Loader(shards, rank=0, world_size=1, workers=stoker.RayWorkers(1, num_cpus=0.5, local=1),
                               **_options(shards))
    try:
        ray_loader.load_state_dict(state)
        assert _stream(ray_loader, epochs=range(ray_loader.epoch, EPOCHS)) == want
        # Again, stopped after 1 batch of the rest: its state carries the stages, and resumes.
        ray_loader.load_state_dict(state)
        ray_loader.set_epoch(1)
        first = next(iter(ray_loader))
        middle = ray_loader.state_dict()
        assert middle["stoker"]["elastic"] == [[2, 2]] and middle["stoker"]["next_batch"] == 1
        ray_loader.load_state_dict(middle)
        ray_cluster.ray.kill(ray_loader.actors[0], no_restart=True)  # its replacement starts from the stages too
        rest = _stream(ray_loader, epochs=range(ray_loader.epoch, EPOCHS))
        assert [(1, _flat(first))] + rest == want
    finally:
        ray_loader.close()


def test_a_workers_error_is_raised_as_the_local_loaders(ray_cluster, shards, tmp_path):
    """A source no worker can open: the trainer raises the error the local
    loader raises (its type and its message naming the file), not Ray's wrapper."""
    missing = str(tmp_path / "missing-000000.tar")
    with pytest.raises(Exception) as local:
        stoker.Loader([missing], **_options(shards))
    with pytest.raises(type(local.value)) as remote:
        _ray_loader([missing], 1)
    assert missing in str(remote.value) and str(local.value) in str(remote.value)

def test_a_received_batch_unlike_the_layout_is_refused_by_name(shards):
    """receive() checks what it copies: the batch's index, each array's name
    and size against the layout, the keys' count; the error names them."""
    part = stoker.Loader(shards, _batch_stride=2, output="numpy", **_options(shards))
    receiver = stoker.Loader(shards, _batch_share=0, **_options(shards))
    try:
        _, arrays, keys, urls, failures = part._native.next(0)
        with pytest.raises(ValueError, match="received batch 8 is outside this epoch's 8 batches"):
            receiver._native.receive(8, arrays, keys, urls, failures)
        with pytest.raises(ValueError, match=f"has array 'jpg' of {arrays[0][1].nbytes // 2} bytes where this "
                                             f"loader's has 'jpg' of {arrays[0][1].nbytes}"):
            receiver._native.receive(0, [("jpg", arrays[0][1][:4])] + arrays[1:], keys, urls, failures)
        with pytest.raises(ValueError, match=f"has {len(arrays) - 1} arrays, this loader's batches {len(arrays)}"):
            receiver._native.receive(0, arrays[1:], keys, urls, failures)
        with pytest.raises(ValueError, match="has 7 keys for 8 samples"):
            receiver._native.receive(0, arrays, keys[1:], urls[1:], failures)
        with pytest.raises(stoker.StokerError, match="a named cause"):  # on_error="raise": a failed slot is the error
            receiver._native.receive(0, arrays, keys, urls, [(3, "a named cause")])
        done = receiver._to_dict(receiver._native.receive(0, arrays, keys, urls, failures))
        assert _flat(done) == _flat(part._to_dict((0, arrays, keys, urls, failures)))
    finally:
        receiver.close()
        part.close()


def test_skip_with_workers_is_the_local_skip_stream(ray_cluster, damaged, skip_stream, caplog):
    """on_error="skip" with 2 workers and the trainer's share (cycles of 3),
    1 worker from batch 6 of epoch 1 on: the shares leave the bad samples'
    slots, the trainer refills them in the rank's batch order. Over 2
    epochs: the local loader's bytes, counts and skip log."""
    loader = stoker.Loader(damaged, workers=stoker.RayWorkers(count=2, num_cpus=0.5, local=0.5),
                           **_skip_options(damaged))

    def shrink(epoch, i, loader):
        if (epoch, i) == (1, 5):
            loader.resize(1)  # every share opened again for its new places; the refills go on

    try:
        assert loader.shares == {"cycle": 3, "trainer": 1, "worker 0": 1, "worker 1": 1}
        with caplog.at_level(logging.WARNING, logger="stoker"):
            assert _with_skips(loader, after=shrink) == skip_stream
        assert loader.shares == {"cycle": 2, "trainer": 1, "worker 0": 1}
        logged = [r.getMessage() for r in caplog.records if "skipped sample" in r.getMessage()]
        assert len(logged) == 8 and all(".tar" in line for line in logged), logged
        assert loader.report()["skips"] == skip_stream[1][-1]
    finally:
        loader.close()


def test_skip_state_in_mid_epoch_is_the_local_loaders_and_resumes(ray_cluster, damaged, skip_stream):
    """A state taken after 5 batches of epoch 1 with workers equals the local
    loader's at that point (the refills' position, known-bad samples and
    counts included); one worker resumes it with the rest of the stream."""
    def after_epoch_0(loader):
        loader.set_epoch(0)
        for _ in loader:
            pass
        return loader

    state = _state_after(after_epoch_0(stoker.Loader(
        damaged, workers=stoker.RayWorkers(count=2, num_cpus=0.5, local=0), **_skip_options(damaged))), 1, 5)
    assert state == _state_after(after_epoch_0(stoker.Loader(damaged, **_skip_options(damaged))), 1, 5)
    assert state["stoker"]["skip"]["skipped"] > 4  # epoch 1 met a bad sample before batch 5
    resumed = stoker.Loader(damaged, workers=stoker.RayWorkers(count=1, num_cpus=0.5, local=0),
                            **_skip_options(damaged))
    try:
        resumed.load_state_dict(state)
        got = [(1, _flat(b)) for b in resumed]
        assert got == skip_stream[0][8 + 5:]
        assert resumed.skips == skip_stream[1][-1]
        # A state at epoch 0's end: the next iteration begins epoch 1 with that state's counts.
        local = stoker.Loader(damaged, **_skip_options(damaged))
        resumed.load_state_dict(_state_after(local, 0, 8))
        assert [(1, _flat(b)) for b in resumed] == skip_stream[0][8:]
        assert resumed.skips == skip_stream[1][-1]
    finally:
        resumed.close()


def test_skip_state_of_two_ranks_resumes_on_one_with_workers(ray_cluster, damaged):
    """Elastic resume with on_error="skip": rank 0 of 2 saved after 2 batches
    of epoch 1; with a worker and the trainer's share, 1 rank continues as
    the local loader of 1 rank does (the rest of the epoch is the refills'
    reserve; the old ranks' skip state does not carry across)."""
    state = _state_after(stoker.Loader(damaged, rank=0, world_size=2, **_skip_options(damaged)), 1, 2)
    local = stoker.Loader(damaged, rank=0, world_size=1, **_skip_options(damaged))
    local.load_state_dict(state)
    want = _with_skips(local, epochs=range(1, 2))
    local.close()
    assert want[1][-1]["skipped"] > 0  # the rest met a bad sample
    loader = stoker.Loader(damaged, rank=0, world_size=1, workers=stoker.RayWorkers(1, num_cpus=0.5, local=0.5),
                           **_skip_options(damaged))
    try:
        loader.load_state_dict(state)
        assert _with_skips(loader, epochs=range(1, 2)) == want
    finally:
        loader.close()


@pytest.mark.parametrize("budget", [dict(max_skips=2), dict(max_skip_fraction=0.03, skip_probation=16)])
def test_skip_budget_errors_are_the_local_loaders(ray_cluster, damaged, budget):
    """Over budget, the batch that tips it raises the local loader's error
    (same batch, same message) and so does each after it."""
    def outcomes(loader) -> list:
        out = []
        try:
            for epoch in range(2):
                loader.set_epoch(epoch)
                it = iter(loader)
                for _ in range(len(loader)):
                    try:
                        out.append(_flat(next(it))["__key__"])
                    except stoker.StokerError as e:
                        out.append((type(e).__name__, str(e)))
        finally:
            loader.close()
        return out

    want = outcomes(stoker.Loader(damaged, **_skip_options(damaged, **budget)))
    assert any(isinstance(o, tuple) and "budget exceeded" in o[1] for o in want), want
    got = outcomes(stoker.Loader(damaged, workers=stoker.RayWorkers(count=1, num_cpus=0.5, local=0),
                                 **_skip_options(damaged, **budget)))
    assert got == want

# -- the device stage: every batch copied into the trainer's pool and on to the device ---------


def test_device_stage_copies_every_batch_as_the_local_loaders(ray_cluster, shards, local_stream):
    """device="cpu-late" (tests only: the device stage with a CPU copy engine
    that completes each copy late and checks its bytes were not overwritten
    meanwhile): each batch, the trainer's share's and the worker's, is copied
    into the trainer's pool and on through the stage; the local loader's
    stream, one copy per batch, none overwritten."""
    loader = stoker.Loader(shards, workers=stoker.RayWorkers(count=1, num_cpus=0.5, local=0.5), device="cpu-late",
                           _late_copy_ms=2, **_options(shards))
    try:
        assert _stream(loader, epochs=range(1)) == local_stream[:8]
        h2d = loader.report()["h2d"]
        assert h2d["copies"] == 8 and h2d["overwrites"] == 0, h2d
    finally:
        loader.close()


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a CUDA device")
def test_cuda_without_cuda_is_the_local_loaders_error(ray_cluster, shards, local_stream):
    """device="cuda" where there is none: the local loader's error (the
    trainer's engine is made before any actor); pin_memory=True: its
    warning, and host batches unpinned, the local stream."""
    with pytest.raises(stoker.StokerError) as local:
        stoker.Loader(shards, device="cuda", **_options(shards))
    with pytest.raises(stoker.StokerError) as remote:
        stoker.Loader(shards, workers=stoker.RayWorkers(count=1, num_cpus=0.5, local=0), device="cuda",
                      **_options(shards))
    assert str(remote.value) == str(local.value) and "device='cuda' needs CUDA" in str(remote.value)
    with pytest.warns(UserWarning, match="pin_memory=True has no effect here"):
        loader = stoker.Loader(shards, workers=stoker.RayWorkers(count=1, num_cpus=0.5, local=0), pin_memory=True,
                               **_options(shards))
    try:
        assert _stream(loader, epochs=range(1)) == local_stream[:8]
        assert loader.report()["h2d"]["pinned_buffers"] == 0
    finally:
        loader.close()


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="no CUDA device on this machine")
def test_cuda_batches_from_workers_are_the_local_loaders(ray_cluster, shards, local_stream):
    """device="cuda": CUDA tensors, each batch copied from the trainer's
    pinned pool; their bytes are the local loader's."""
    loader = stoker.Loader(shards, workers=stoker.RayWorkers(count=1, num_cpus=0.5, local=0.5), device="cuda",
                           **_options(shards))
    try:
        loader.set_epoch(0)
        got = []
        for batch in loader:
            assert batch["jpg"].is_cuda
            got.append((0, _flat({k: (v.cpu() if hasattr(v, "cpu") else
                                      {m: a.cpu() for m, a in v.items()} if isinstance(v, dict) else v)
                                  for k, v in batch.items()})))
        assert got == local_stream[:8]
        assert loader.report()["h2d"]["copies"] == 8
    finally:
        loader.close()

# A batch's digest, the same in the test and in each torchrun rank: every
# array's name, dtype, shape and bytes, and the key lists.
DIGEST = textwrap.dedent("""
    import hashlib
    import numpy as np

    def digest(batch):
        h = hashlib.sha1()
        for name in sorted(batch):
            value = batch[name]
            items = sorted(value.items()) if isinstance(value, dict) else [("", value)]
            for member, v in items:
                h.update(f"{name}/{member}".encode())
                if isinstance(v, list):
                    h.update(repr(v).encode())
                else:
                    a = np.asarray(v)
                    h.update(f"{a.dtype}{a.shape}".encode())
                    h.update(a.tobytes())
        return h.hexdigest()
""")
_digest_ns: dict = {}
exec(DIGEST, _digest_ns)
digest = _digest_ns["digest"]

RANK_SCRIPT = DIGEST + textwrap.dedent("""
    import json, logging, sys
    from datetime import timedelta
    import ray, torch, torch.distributed as dist
    import stoker

    dist.init_process_group("gloo", timeout=timedelta(seconds=120))
    address, out, shards, epochs = sys.argv[1], sys.argv[2], sys.argv[3:-1], int(sys.argv[-1])
    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    fields = {"jpg": stoker.image(24, resize="random_resized_crop", random_hflip=True),
              "features.npz": stoker.npz(), "cls": stoker.scalar()}
    loader = stoker.Loader(shards, fields, batch_size=8, shuffle=True, seed=5, drop_last=False, decode_threads=1,
                           autotune=False, workers=stoker.RayWorkers(count=1, num_cpus=0.5))
    got = []
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for batch in loader:
            got.append([epoch, batch["__key__"], digest(batch)])
            dist.all_reduce(torch.ones(1))  # every rank must reach every step
    loader.close()
    with open(f"{out}/rank{dist.get_rank()}.json", "w") as f:
        json.dump(got, f)
    dist.destroy_process_group()
""")


def test_torchrun_two_ranks_each_with_a_worker_deliver_their_share_once(ray_cluster, shards, tmp_path):
    """torchrun with 2 CPU ranks (gloo, a collective every step), each rank's
    loader with its own Ray worker on the cluster: each rank's stream is the
    local loader's of that rank, and every sample comes once per epoch."""
    pytest.importorskip("torch.distributed")
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(script),
           ray_cluster.cluster.address, str(tmp_path), *shards, str(EPOCHS)]
    proc = subprocess.run(cmd, env=stoker_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for epoch in range(EPOCHS):
        keys = []
        for rank in range(2):
            got = [g for g in json.loads((tmp_path / f"rank{rank}.json").read_text()) if g[0] == epoch]
            local = stoker.Loader(shards, rank=rank, world_size=2, **_options(shards))
            local.set_epoch(epoch)
            want = [[epoch, b["__key__"], digest(b)] for b in local]
            local.close()
            assert got == want, f"rank {rank}, epoch {epoch}"
            keys += [k for g in got for k in g[1]]
        assert sorted(keys) == sorted(set(keys)) and len(keys) == 60  # 30 each: every sample once

def test_a_worker_node_removed_in_mid_epoch_is_survived(ray_cluster, shards, local_stream, caplog):
    """The node of worker 1 is removed (its raylet and every process on it
    killed): the trainer replaces the worker on the node left and the stream
    is still the local loader's. Last in the file: it adds a node back."""
    c = ray_cluster.cluster
    loader = _ray_loader(shards, 2, prefetch=1)
    removed = []

    def remove(epoch, i, loader):
        if epoch == 0 and i == 2:
            victim = next(n for n in ray_cluster.nodes if n.node_id == loader.nodes[1])
            c.remove_node(victim, allow_graceful=False)
            removed.append(victim.node_id)

    try:
        with caplog.at_level(logging.WARNING, logger="stoker"):
            got = _stream(loader, after=remove)
        assert removed and removed[0] not in loader.nodes
        assert got == local_stream
        assert any("Ray worker 1" in r.getMessage() and "died" in r.getMessage() for r in caplog.records), caplog.text
    finally:
        loader.close()
        ray_cluster.nodes = [n for n in ray_cluster.nodes if n.node_id not in removed]
        for _ in removed:
            ray_cluster.nodes.append(c.add_node(num_cpus=1, **ray_cluster.node_options))


def test_with_a_device_the_next_batch_is_received_while_the_step_runs(ray_cluster, shards, local_stream):
    """device="cpu-late" with copies that complete 20 ms after they are
    issued, and steps of 60 ms: batch b + 1 is received, and its copy
    issued, while the step on batch b runs, so the copies the steps wait for
    are the first batch's, not each one's (received when taken, all 8 were
    waited for: 0.141 s of 0.141). A state_dict in mid-epoch keeps the batch
    taken ahead; the stream is the local loader's."""
    loader = stoker.Loader(shards, workers=stoker.RayWorkers(count=1, num_cpus=0.5, local=0.5), device="cpu-late",
                           _late_copy_ms=20, **_options(shards))
    try:
        states = []

        def step(epoch, i, loader):
            time.sleep(0.06)
            if i == 3:
                states.append(loader.state_dict())

        assert _stream(loader, epochs=range(1), after=step) == local_stream[:8]
        h2d = loader.report()["h2d"]
        assert h2d["copies"] == 8 and h2d["overwrites"] == 0, h2d
        assert h2d["exposed_s"] < 0.5 * h2d["copy_s"], h2d  # about one copy of 8 waited for
        assert states[0]["stoker"]["next_batch"] == 4
    finally:
        loader.close()
