"""NVIDIA DALI's GPU JPEG pipeline, the strongest peer of bench/gpu_decode.py's V part.

The pipeline DALI's own ResNet-50 example uses for training: encoded JPEGs in,
`fn.decoders.image_random_crop(device="mixed")` (nvJPEG, its hardware decoder where the
GPU has one, decoding only the random crop's region), `fn.resize` to 224x224,
`fn.crop_mirror_normalize` with a random flip to CHW uint8. DALI at its best: one
thread per job core, its default prefetch queue of 2 batches, the decoder's defaults
(hardware share `hw_decoder_load=0.65` of DALI 2.x). The JPEGs come from memory
(`fn.external_source`, batches of `batch` in a round-robin over the V members), as
torchvision's row gets them, so the figure is decode + crop + resize + flip.

    from dali_mixed import dali_rate
    rate = dali_rate(jpegs, batch=256, warm=5, measure=20, device="mixed", threads=16)

DALI's wheel (`nvidia-dali-cuda130` 2.4.0 from PyPI, with its dependencies) is not in
requirements-bench.txt: it is for a GPU machine. The machines lent to this project take
at most 64 MiB of carried files and have no registry, and the wheel alone is 199 MB, so
there gpu_decode.py prints why the DALI row is missing; on a GPU machine with a registry,
`pip install nvidia-dali-cuda130==2.4.0` first. `device="cpu"` runs the same pipeline on
the CPU, for a check of this file where no GPU is.
"""
from __future__ import annotations

import time

import numpy as np


def dali_rate(jpegs: list[bytes], batch: int, warm: int, measure: int, device: str = "mixed",
              threads: int = 4, device_id: int | None = 0) -> dict:
    """images/s of DALI's decode + RandomResizedCrop(224) + flip over `jpegs`; also the
    shape of one output batch, to check it is [batch, 3, 224, 224] uint8."""
    import nvidia.dali as dali
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types

    encoded = [np.frombuffer(b, dtype=np.uint8) for b in jpegs]
    position = 0

    def next_batch():
        nonlocal position
        out = [encoded[(position + k) % len(encoded)] for k in range(batch)]
        position += batch
        return out

    @dali.pipeline_def(batch_size=batch, num_threads=threads, device_id=device_id if device != "cpu" else None,
                       prefetch_queue_depth=2, seed=0)
    def pipeline():
        data = fn.external_source(source=next_batch, dtype=types.UINT8)
        images = fn.decoders.image_random_crop(data, device=device, output_type=types.RGB,
                                               random_area=[0.08, 1.0], random_aspect_ratio=[3 / 4, 4 / 3])
        images = fn.resize(images, resize_x=224, resize_y=224)
        return fn.crop_mirror_normalize(images, dtype=types.UINT8, output_layout="CHW",
                                        mirror=fn.random.coin_flip())

    pipe = pipeline()
    pipe.build()

    def one():
        (out,) = pipe.run()
        return out

    first = one()
    shape = tuple(first.as_tensor().shape()) if hasattr(first, "as_tensor") else None
    for _ in range(warm):
        one()
    t0 = time.perf_counter()
    for _ in range(measure):
        out = one()
    if device != "cpu":
        out.as_cpu()  # the last batch is on the host: every queued GPU batch has finished
    seconds = time.perf_counter() - t0
    del pipe
    return {"rate": measure * batch / seconds, "shape": shape, "device": device, "threads": threads,
            "dali": dali.__version__}
