"""NVIDIA DALI CPU pipeline (device_id=None): fn.readers.webdataset -> fn.decoders.image(cpu)
-> fn.resize(antialias) -> crop -> CHW; V only."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .base import Unavailable


def dali_status() -> str | None:
    """None when a DALI CPU pipeline builds and runs here, else why not."""
    try:
        import nvidia.dali.fn as fn
        from nvidia.dali import pipeline_def

        @pipeline_def(batch_size=2, num_threads=1, device_id=None)
        def probe():
            return fn.random.uniform(range=[0, 1])

        p = probe()
        p.build()
        p.run()
        return None
    except Exception as e:  # noqa: BLE001
        return f"{type(e).__name__}: {str(e)[:300]}"


def dali_pipeline(w: dict, shards: list[Path], threads: int, count: int):
    """DALI on the CPU (device_id=None): webdataset reader, CPU image decoder, antialiased
    resize, crop/pad, CHW; each epoch a fresh pipeline (its build is in time to first batch)."""
    why = dali_status()
    if why is not None:
        raise Unavailable(f"DALI CPU pipeline does not run here: {why}")
    if w["name"] != "V":
        raise Unavailable("not run on this workload: DALI's graph has no NPZ/NPY-in-tar decoder "
                          "(fn.readers.numpy reads loose .npy files only); a python_function "
                          "stage would not be DALI's own path")
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types
    import torch
    from nvidia.dali import pipeline_def

    size = w["size"]

    @pipeline_def(batch_size=w["batch"], num_threads=threads, device_id=None, prefetch_queue_depth=2)
    def pipe():
        jpg, cls = fn.readers.webdataset(paths=[str(p) for p in shards], ext=["jpg", "cls"], name="reader",
                                         random_shuffle=False, missing_component_behavior="error")
        img = fn.decoders.image(jpg, device="cpu", output_type=types.RGB)
        img = fn.resize(img, resize_shorter=size, antialias=True, interp_type=types.INTERP_LINEAR)
        img = fn.crop(img, crop=(size, size), out_of_bounds_policy="trim_to_shape")
        img = fn.transpose(img, perm=[2, 0, 1])
        return img, cls

    batches = count // w["batch"]

    class Epoch:
        def __iter__(self):
            p = pipe()
            p.build()
            try:
                for _ in range(batches):
                    img, cls = p.run()
                    x = torch.from_numpy(img.as_array())
                    y = torch.tensor([int(np.asarray(c).tobytes()) for c in cls])
                    yield x, y
            finally:
                del p

    return Epoch
