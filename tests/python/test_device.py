"""device= on Loader and TokenLoader, proven on CPU (no GPU in CI).

device="cpu-late" (tests only) runs the device stage with a CPU copy engine
that completes each copy late and checks by checksum that the pool slot it
copies was not rewritten while in flight: the stream must equal the host
loader's (device="cpu"), no slot may be reused early, device buffers stay
within prefetch + 1, copies are timed (hidden vs exposed) and shown in
report(), and a loader dropped with copies in flight returns promptly.
device="cuda" where there is no CUDA (this image has a CUDA runtime in
/usr/local/cuda but no GPU; other machines have neither) raises saying so.
The GPU proof (an epoch equal on the device, copy bandwidth, hidden waits)
awaits a device: tests/python/test_cuda.py and issue 21.
"""
from __future__ import annotations

import time

import numpy as np
import pytest
import torch

import stoker

FIELDS = lambda: {  # noqa: E731 - fresh specs per loader
    "jpg": stoker.image(32, resize="center_crop"),
    "features.npz": stoker.npz(),
    "cls": stoker.scalar("int64"),
}


def _flat(batch) -> dict:
    out = {}
    for name, value in batch.items():
        if isinstance(value, dict):
            out.update({f"{name}/{k}": v.clone() for k, v in value.items()})
        elif isinstance(value, torch.Tensor):
            out[name] = value.clone()
        else:
            out[name] = value
    return out


def _epochs(loader, epochs=2) -> list[list[dict]]:
    out = []
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        out.append([_flat(b) for b in loader])
    return out


def _equal(a: list[list[dict]], b: list[list[dict]]) -> None:
    assert len(a) == len(b)
    for ea, eb in zip(a, b, strict=True):
        assert len(ea) == len(eb)
        for ba, bb in zip(ea, eb, strict=True):
            assert ba.keys() == bb.keys()
            for k in ba:
                if isinstance(ba[k], torch.Tensor):
                    assert torch.equal(ba[k], bb[k]), k
                else:
                    assert ba[k] == bb[k], k


def test_late_copies_give_the_host_stream_and_reuse_no_slot_in_flight(vision_dir):
    d, _ = vision_dir
    pattern = str(d / "shard-{000000..000002}.tar")
    kw = dict(batch_size=8, shuffle=True, seed=3, decode_threads=2)
    expected = _epochs(stoker.Loader(pattern, FIELDS(), **kw))
    for prefetch in (1, 3):
        loader = stoker.Loader(pattern, FIELDS(), prefetch=prefetch, device="cpu-late", _late_copy_ms=10, **kw)
        _equal(_epochs(loader), expected)
        # A loop that drops batches unread: their copies are in flight when released.
        loader.set_epoch(2)
        for _ in loader:
            pass
        report = loader.report()
        h2d = report["h2d"]
        assert h2d["overwrites"] == 0, "a pool slot was rewritten while its copy was in flight"
        assert h2d["copies"] >= 2 * len(expected[0])
        assert 0 < h2d["device_buffers_peak"] <= prefetch + 1
        assert h2d["copy_s"] > 0 and 0 <= h2d["exposed_s"] <= h2d["copy_s"]
        assert h2d["hidden_s"] == pytest.approx(h2d["copy_s"] - h2d["exposed_s"])
        assert report["window"]["h2d_mean_s"] > 0  # the exposed part reached the observer as t_h2d
        loader.close()


def test_token_loader_late_copies_equal_host(tmp_path):
    tokens = np.arange(5000, dtype=np.int32) % 997
    np.save(tmp_path / "doc.npy", tokens)
    import subprocess

    from conftest import stoker_bin

    subprocess.run([stoker_bin(), "pack-tokens", str(tmp_path / "doc.npy"), "-o", str(tmp_path / "corpus")],
                   check=True, capture_output=True)
    kw = dict(seq_len=64, batch_size=4, seed=1, num_samples=60, cache_dir=str(tmp_path / "cache"))
    host = [{k: v.clone() for k, v in b.items()} for b in stoker.TokenLoader(str(tmp_path / "corpus"), **kw)]
    late = stoker.TokenLoader(str(tmp_path / "corpus"), device="cpu-late", _late_copy_ms=5, **kw)
    got = [{k: v.clone() for k, v in b.items()} for b in late]
    assert len(got) == len(host) > 0
    for a, b in zip(got, host, strict=True):
        assert torch.equal(a["tokens"], b["tokens"]) and torch.equal(a["labels"], b["labels"])
    assert late.report()["h2d"]["overwrites"] == 0
    late.close()


def test_dropping_a_loader_with_copies_in_flight_is_prompt(vision_dir):
    d, _ = vision_dir
    loader = stoker.Loader(str(d / "shard-{000000..000002}.tar"), FIELDS(), batch_size=4, prefetch=4,
                           device="cpu-late", _late_copy_ms=500)
    it = iter(loader)
    next(it)  # waits for its own copy; the next batches' copies are in flight now
    begin = time.perf_counter()
    del it
    loader.close()
    del loader
    assert time.perf_counter() - begin < 2.0


def _has_cuda_device() -> bool:
    return torch.cuda.is_available()


@pytest.mark.skipif(_has_cuda_device(), reason="this machine has a CUDA device")
def test_cuda_without_cuda_is_a_clear_error(vision_dir, tmp_path, monkeypatch):
    d, _ = vision_dir
    pattern = str(d / "shard-{000000..000002}.tar")
    with pytest.raises(stoker.StokerError, match=r"device='cuda' needs CUDA: .*(no CUDA runtime \(libcudart\) found|"
                                                 r"libcudart.* reports no usable CUDA device)") as err:
        stoker.Loader(pattern, FIELDS(), batch_size=8, device="cuda")
    assert err.value.code == "FailedPrecondition"
    with pytest.raises(stoker.StokerError, match="device='cuda:1' needs CUDA"):
        stoker.TokenLoader(str(tmp_path / "never-opened"), seq_len=8, batch_size=2, device="cuda:1")
    with pytest.raises(ValueError, match="device must be 'cpu', 'cuda' or 'cuda:N'"):
        stoker.Loader(pattern, FIELDS(), batch_size=8, device="gpu")
    # pin_memory without CUDA: a warning, and the loader works unpinned (as torch's).
    with pytest.warns(UserWarning, match="pin_memory=True has no effect here"):
        loader = stoker.Loader(pattern, FIELDS(), batch_size=8, pin_memory=True)
    assert len(list(loader)) == len(loader)
    assert loader.report()["h2d"]["pinned_buffers"] == 0
    loader.close()  # now: err's traceback holds this frame in a cycle, so the loader outlives the test until gc


def test_cuda_error_names_where_it_looked(vision_dir):
    # A fresh process (the runtime is loaded once per process): $STOKER_CUDART,
    # when set, is the only place looked, and there is none there.
    import subprocess
    import sys

    from conftest import stoker_env

    d, _ = vision_dir
    code = ("import stoker\n"
            "try:\n"
            f"    stoker.Loader({str(d / 'shard-{000000..000002}.tar')!r}, {{'cls': stoker.scalar()}}, batch_size=8,"
            " device='cuda')\n"
            "except stoker.StokerError as e:\n"
            "    print(e)\n")
    env = stoker_env()
    env["STOKER_CUDART"] = "/nonexistent/libcudart.so.12"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "device='cuda' needs CUDA: no CUDA runtime (libcudart) found" in out.stdout, out.stdout
    assert "/nonexistent/libcudart.so.12 (" in out.stdout, out.stdout
