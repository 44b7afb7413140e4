"""The loaders the suite compares, each as a factory: ``make() -> iterable of batches``.

Every loader of a workload does the same work (same files, decode, output size and
dtype, batch size, no shuffle, its own collate included, no device copy); each peer
has a small grid of its own knobs, and the suite keeps its best (BENCHMARKS.md rule 3).

    stoker      stoker.Loader over the tar shards (decode_threads x io_depth)
    dl_wds      torch DataLoader over webdataset.WebDataset(shards), Pillow / numpy.load (num_workers)
    dl_loose    torch DataLoader, map-style Dataset over the loose files (ImageFolder-like) (num_workers)
    spdl        SPDL PipelineBuilder: tar source -> thread-pool decode -> aggregate -> collate
                (its own FFmpeg image decode when spdl.io works here, else Pillow in its threads)
    dali        NVIDIA DALI CPU pipeline: fn.readers.webdataset -> fn.decoders.image(cpu) -> fn.resize

A factory that cannot be built raises ``Unavailable(reason)``; the suite lists it.
"""
from __future__ import annotations

import io
import os
import tarfile
import warnings
from pathlib import Path

import numpy as np

import vision  # the Pillow paths of the first benchmark: the peers' decode+resize

warnings.filterwarnings("ignore", message="The given NumPy array is not writable")


class Unavailable(Exception):
    """A peer that cannot run here; the message is the reason the suite reports."""


# -- per-sample work of the Python peers (picklable: DataLoader workers fork) ------------------

class VisionSample:
    """bytes of one sample -> (CHW uint8 tensor, label | features dict): Pillow, antialiased."""

    def __init__(self, workload: str, size: int, resize: str) -> None:
        self.workload, self.size, self.resize = workload, size, resize

    def image(self, data: bytes):
        import torch

        hwc = vision.pil_center_crop(data, self.size) if self.resize == "center_crop" else \
            vision.pil_longest_padded(data, self.size)
        return torch.from_numpy(hwc).permute(2, 0, 1)

    def __call__(self, sample: dict):
        import torch

        if self.workload == "V":
            return self.image(sample["jpg"]), int(sample["cls"])
        if self.workload == "P":
            return self.image(sample["png"]), int(sample["cls"])
        if self.workload == "C":  # default_collate makes the captions a list of str
            return self.image(sample["jpg"]), sample["txt"].decode("utf-8")
        with np.load(io.BytesIO(sample["features.npz"])) as z:
            feats = {k: torch.from_numpy(z[k]) for k in z.files}
        return self.image(sample["jpg"]), feats


class ArraySample:
    """A: the NPY and NPZ members through numpy.load (what users write)."""

    def __call__(self, sample: dict):
        import torch

        x = torch.from_numpy(np.load(io.BytesIO(sample["x.npy"])))
        with np.load(io.BytesIO(sample["y.npz"])) as z:
            y = {k: torch.from_numpy(z[k]) for k in z.files}
        return x, y


class LooseImages:
    """Map-style Dataset over loose files (class folders): the layout users start from."""

    def __init__(self, files: list[tuple[str, int]], fn: VisionSample) -> None:
        self.files, self.fn = files, fn

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int):
        path, label = self.files[i]
        with open(path, "rb") as f:
            return self.fn.image(f.read()), label


# -- factories ---------------------------------------------------------------------------------

def stoker_loader(w: dict, shards: list[Path], decode_threads: int, io_depth: int, *, observe: bool = True,
                  record_stats: bool = True, resample: str | None = None, **extra):
    import stoker

    # resample=None: the default filter (Pillow-exact bilinear); "box": the older libyuv path
    img = {"resample": resample} if resample else {}
    if w["name"] == "A":
        fields = {"x.npy": stoker.npy(), "y.npz": stoker.npz()}
    elif w["name"] in ("P", "C"):
        fields = {"png": stoker.image(w["size"], resize=w["resize"], **img), "cls": stoker.scalar("int64")} \
            if w["name"] == "P" else {"jpg": stoker.image(w["size"], resize=w["resize"], **img), "txt": stoker.text()}
    else:
        fields = {"jpg": stoker.image(w["size"], resize=w["resize"], **img)}
        fields["cls" if w["name"] == "V" else "features.npz"] = stoker.scalar("int64") if w["name"] == "V" \
            else stoker.npz()
    kwargs = {}
    if not record_stats:
        kwargs = _no_record_stats_kwargs()

    def make():
        if not record_stats and "record_stats" not in kwargs:
            return _loader_without_recording(stoker, shards, fields, w, decode_threads, io_depth)
        kw = {"observe": observe, "shuffle": False, **kwargs, **extra}
        if kw["observe"]:
            kw["window"] = 100000
        if io_depth is not None:  # None: the loader's default (auto)
            kw["io_depth"] = io_depth
        return stoker.Loader([str(p) for p in shards], fields=fields, batch_size=w["batch"],
                             decode_threads=decode_threads, prefetch=2, output="torch", **kw)

    return make


def _no_record_stats_kwargs() -> dict:
    import inspect

    import stoker

    params = inspect.signature(stoker.Loader).parameters
    return {"record_stats": False, "observe": False} if "record_stats" in params else {}


def _loader_without_recording(stoker, shards, fields, w, decode_threads, io_depth):
    """stoker.Loader with LoaderOptions.record_stats = False (the Python API does not
    expose it yet): the options object the Loader builds is patched for this one call."""
    import stoker.loader as loader_mod

    real = loader_mod._stoker

    class _Opts:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def LoaderOptions():  # noqa: N802 - mirrors the native name
            o = real.LoaderOptions()
            o.record_stats = False
            return o

    loader_mod._stoker = _Opts()
    try:
        return stoker.Loader([str(p) for p in shards], fields=fields, batch_size=w["batch"], shuffle=False,
                             decode_threads=decode_threads, io_depth=io_depth, prefetch=2, output="torch",
                             observe=False)
    finally:
        loader_mod._stoker = real


def dl_wds(w: dict, shards: list[Path], workers: int):
    import torch
    import webdataset as wds

    fn = ArraySample() if w["name"] == "A" else VisionSample(w["name"], w["size"], w["resize"])

    def make():
        ds = wds.WebDataset([str(p) for p in shards], shardshuffle=False, empty_check=False).map(fn)
        return torch.utils.data.DataLoader(ds, batch_size=w["batch"], num_workers=workers, shuffle=False)

    return make


def dl_wds_shuffled(w: dict, shards: list, workers: int, buffer: int = 1000, seed: int = 0):
    """Shuffled training as webdataset documents it: shard shuffle, then a
    sample shuffle buffer (per DataLoader worker), then decode."""
    import torch
    import webdataset as wds

    fn = VisionSample(w["name"], w["size"], w["resize"])

    def make():
        ds = wds.WebDataset([str(p) for p in shards], shardshuffle=len(shards), empty_check=False,
                            seed=seed).shuffle(buffer).map(fn)
        # persistent workers: the next epoch does not pay their start again
        return torch.utils.data.DataLoader(ds, batch_size=w["batch"], num_workers=workers,
                                           persistent_workers=workers > 0)

    return make


def dl_loose(w: dict, files: list[tuple[str, int]], workers: int):
    import torch

    ds = LooseImages(files, VisionSample(w["name"], w["size"], w["resize"]))

    def make():
        return torch.utils.data.DataLoader(ds, batch_size=w["batch"], num_workers=workers, shuffle=False,
                                           drop_last=True)

    return make


def iter_tar_samples(shards: list[Path]):
    """(key, {ext: bytes}) of each sample, streaming the shards in order (webdataset's key rule)."""
    for path in shards:
        key, members = None, {}
        with tarfile.open(path, mode="r|") as tf:
            for m in tf:
                if not m.isfile():
                    continue
                name = os.path.basename(m.name)
                k, _, ext = name.partition(".")
                k = os.path.join(os.path.dirname(m.name), k)
                if k != key and members:
                    yield key, members
                    members = {}
                key = k
                members[ext] = tf.extractfile(m).read()
            if members:
                yield key, members


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
