"""Batches on a CUDA device: `loader.to(batch, "cuda")` delivers the CPU batch's
values, and the observer times the copy as t_h2d with CUDA events. Needs a GPU
(CI has none: every test here skips with its reason)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device on this machine (CI has none)", allow_module_level=True)

import stoker  # noqa: E402

FIELDS = lambda: {  # noqa: E731 - fresh specs per loader
    # decode="cpu": these tests compare bytes with the host loader; GPU decode has its own (test_gpu_decode_device.py)
    "jpg": stoker.image(64, resize="center_crop", decode="cpu"),
    "features.npz": stoker.npz(),
    "cls": stoker.scalar("int64"),
}


def test_epoch_on_gpu_equals_cpu_and_h2d_is_timed(vision_dir):
    d, _ = vision_dir
    pattern = str(d / "shard-{000000..000002}.tar")
    cpu = [{k: v.clone() if hasattr(v, "clone") else v for k, v in b.items()}
           for b in stoker.Loader(pattern, FIELDS(), batch_size=8)]
    loader = stoker.Loader(pattern, FIELDS(), batch_size=8)
    gpu = []
    for batch in loader:
        moved = loader.to(batch, "cuda")
        with loader.step():
            torch.cuda.synchronize()
        gpu.append(moved)
    assert len(gpu) == len(cpu)
    for c, g in zip(cpu, gpu, strict=True):
        assert g["__key__"] == c["__key__"]
        for name in ("jpg", "cls"):
            assert g[name].device.type == "cuda"
            assert torch.equal(g[name].cpu(), c[name])
        for name, arr in c["features.npz"].items():
            np.testing.assert_array_equal(g["features.npz"][name].cpu().numpy(), arr.numpy())
    report = loader.report()
    assert report["window"]["h2d_mean_s"] > 0  # CUDA events resolved, not left at 0
    loader.close()


def _host_epoch(pattern, **kw):
    return [{k: (v.clone() if hasattr(v, "clone") else
                 {m: a.clone() for m, a in v.items()} if isinstance(v, dict) else v) for k, v in b.items()}
            for b in stoker.Loader(pattern, FIELDS(), batch_size=8, **kw)]


@pytest.mark.parametrize("prefetch", [1, 3])
def test_device_cuda_epoch_equals_cpu_byte_for_byte(vision_dir, prefetch):
    """device="cuda": batches arrive as CUDA tensors equal to the CPU epoch;
    copies are timed from events, buffers pinned, device memory bounded."""
    d, _ = vision_dir
    pattern = str(d / "shard-{000000..000002}.tar")
    cpu = _host_epoch(pattern, shuffle=True, seed=4)
    loader = stoker.Loader(pattern, FIELDS(), batch_size=8, shuffle=True, seed=4, prefetch=prefetch, device="cuda")
    side = torch.cuda.Stream()
    got = []
    with torch.cuda.stream(side):  # the consumer's own stream is the one made to wait
        for batch in loader:
            got.append({k: (v.clone() if hasattr(v, "clone") else
                            {m: a.clone() for m, a in v.items()} if isinstance(v, dict) else v)
                        for k, v in batch.items()})
    torch.cuda.synchronize()
    assert len(got) == len(cpu)
    for c, g in zip(cpu, got, strict=True):
        assert g["__key__"] == c["__key__"]
        for name in ("jpg", "cls"):
            assert g[name].device.type == "cuda"
            assert torch.equal(g[name].cpu(), c[name])
        for name, arr in c["features.npz"].items():
            assert torch.equal(g["features.npz"][name].cpu(), arr)
    del got, batch
    h2d = loader.report()["h2d"]
    assert h2d["pinned_buffers"] == prefetch + 1
    assert h2d["device_buffers_peak"] <= prefetch + 1
    assert h2d["copies"] >= len(cpu) - 1 and h2d["copy_s"] > 0
    loader.close()


def test_token_loader_on_cuda_equals_cpu(tmp_path):
    import subprocess

    import numpy as np

    from conftest import stoker_bin

    np.save(tmp_path / "doc.npy", (np.arange(20000) % 50000).astype(np.int32))
    subprocess.run([stoker_bin(), "pack-tokens", str(tmp_path / "doc.npy"), "-o", str(tmp_path / "c")], check=True)
    kw = dict(seq_len=128, batch_size=4, seed=1, num_samples=100, cache_dir=str(tmp_path / "cache"),
              extras=("loss_mask", "position_ids"))
    cpu = [{k: v.clone() for k, v in b.items()} for b in stoker.TokenLoader(str(tmp_path / "c"), **kw)]
    gpu = [{k: v.clone() for k, v in b.items()} for b in stoker.TokenLoader(str(tmp_path / "c"), device="cuda", **kw)]
    assert len(cpu) == len(gpu) > 0
    for c, g in zip(cpu, gpu, strict=True):
        for k in c:
            assert g[k].device.type == "cuda", k
            assert torch.equal(g[k].cpu(), c[k]), k
