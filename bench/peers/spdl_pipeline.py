"""SPDL PipelineBuilder: tar source -> thread-pool decode -> aggregate -> collate (its own
FFmpeg image decode when spdl.io works here, else Pillow in its threads)."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from .base import Unavailable
from .samples import VisionSample, iter_tar_samples


_SPDL_DECODE: dict = {}


def spdl_decode_status() -> str | None:
    """None when spdl.io's own (FFmpeg) image decode works here, else why not."""
    if "status" not in _SPDL_DECODE:
        try:
            import spdl.io
            from PIL import Image

            buf = io.BytesIO()
            Image.new("RGB", (32, 24), (10, 20, 30)).save(buf, "JPEG")
            a = spdl.io.to_numpy(spdl.io.load_image(buf.getvalue(), filter_desc=spdl.io.get_video_filter_desc(
                scale_width=16, scale_height=16, scale_mode="crop", scale_algo="bilinear", pix_fmt="rgb24")))
            _SPDL_DECODE["status"] = None if a.shape == (16, 16, 3) else f"unexpected shape {a.shape}"
        except Exception as e:  # noqa: BLE001
            _SPDL_DECODE["status"] = f"{type(e).__name__}: {str(e)[:300]}"
    return _SPDL_DECODE["status"]


def spdl_pipeline(w: dict, shards: list[Path], threads: int, decoder: str = "ffmpeg"):
    """SPDL's pipeline: a source thread streams samples out of the shards, `threads`
    concurrent decode tasks on its thread pool, aggregate(batch), collate to torch.
    decoder "ffmpeg": spdl.io.load_image (its own decode + swscale bilinear resize);
    "pillow": the DataLoader's Pillow function inside SPDL's threads."""
    try:
        import spdl.io
        import spdl.pipeline
        import torch
    except Exception as e:  # noqa: BLE001
        raise Unavailable(f"import spdl failed: {e}") from e
    own = decoder == "ffmpeg" and spdl_decode_status() is None
    if decoder == "ffmpeg" and not own:
        raise Unavailable(f"spdl.io's image decode does not load here: {spdl_decode_status()}")
    pil = VisionSample(w["name"], w["size"], w["resize"])
    if own:
        if w["resize"] == "center_crop":
            desc = spdl.io.get_video_filter_desc(scale_width=w["size"], scale_height=w["size"], scale_mode="crop",
                                                 scale_algo="bilinear", pix_fmt="rgb24")
        else:  # longest side to size, padded to a square (FFmpeg pads centred: same work)
            desc = spdl.io.get_video_filter_desc(scale_width=w["size"], scale_height=w["size"], scale_mode="pad",
                                                 scale_algo="bilinear", pix_fmt="rgb24")

        def image(data: bytes):
            return torch.from_numpy(spdl.io.to_numpy(spdl.io.load_image(data, filter_desc=desc))).permute(2, 0, 1)
    else:
        image = pil.image

    def decode(item):
        _, m = item
        img = image(m["jpg"])
        if w["name"] == "V":
            return img, int(m["cls"])
        with np.load(io.BytesIO(m["features.npz"])) as z:
            return img, {k: torch.from_numpy(z[k]) for k in z.files}

    def collate(items):
        imgs = torch.stack([x[0] for x in items])
        if w["name"] == "V":
            return imgs, torch.tensor([x[1] for x in items])
        return imgs, {k: torch.stack([x[1][k] for x in items]) for k in items[0][1]}

    class Epoch:
        def __iter__(self):
            pipe = (spdl.pipeline.PipelineBuilder()
                    .add_source(iter_tar_samples(shards))
                    .pipe(decode, concurrency=threads)
                    .aggregate(w["batch"], drop_last=True)
                    .pipe(collate)
                    .add_sink(2)
                    .build(num_threads=threads + 1))
            with pipe.auto_stop():
                yield from pipe.get_iterator(timeout=600)

    return Epoch, ("spdl.io.load_image (FFmpeg decode + swscale bilinear)" if own else
                   "Pillow in SPDL's threads")

