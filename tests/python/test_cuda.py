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
    "jpg": stoker.image(64, resize="center_crop"),
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
    for c, g in zip(cpu, gpu):
        assert g["__key__"] == c["__key__"]
        for name in ("jpg", "cls"):
            assert g[name].device.type == "cuda"
            assert torch.equal(g[name].cpu(), c[name])
        for name, arr in c["features.npz"].items():
            np.testing.assert_array_equal(g["features.npz"][name].cpu().numpy(), arr.numpy())
    report = loader.report()
    assert report["window"]["h2d_mean_s"] > 0  # CUDA events resolved, not left at 0
    loader.close()
