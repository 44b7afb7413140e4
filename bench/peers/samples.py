"""The per-sample work of the Python peers (picklable: DataLoader workers fork), and a
streaming reader of the tar shards in webdataset's key rule for peers with no tar reader."""
from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import numpy as np

import vision  # the Pillow paths of the first benchmark: the peers' decode+resize


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

