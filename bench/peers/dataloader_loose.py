"""torch DataLoader, map-style Dataset over the loose files (ImageFolder-like): the layout
users start from (num_workers)."""
from __future__ import annotations

from .samples import LooseImages, VisionSample


def dl_loose(w: dict, files: list[tuple[str, int]], workers: int):
    import torch

    ds = LooseImages(files, VisionSample(w["name"], w["size"], w["resize"]))

    def make():
        return torch.utils.data.DataLoader(ds, batch_size=w["batch"], num_workers=workers, shuffle=False,
                                           drop_last=True)

    return make

