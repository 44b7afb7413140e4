"""torch DataLoader over webdataset.WebDataset(shards): Pillow / numpy.load in the workers
(num_workers), in order or shuffled as webdataset documents training."""
from __future__ import annotations

from pathlib import Path

from .base import Peer, VData
from .samples import ArraySample, VisionSample


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



class WdsRecipe:
    """webdataset sample dict -> (CHW tensor, label), picklable for any start method."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def __call__(self, s: dict):
        return self.fn(s["jpg"]), int(s["cls"])


class DataLoaderWebdataset(Peer):
    """The usual baseline on the same tar shards: webdataset in DataLoader workers, Pillow
    recipe. Train: shard shuffle + a 1,000-sample buffer, as webdataset documents it."""
    name, title, reads = "dl_wds", "DataLoader + webdataset", "tar shards"
    grid = [3, 2, 4]
    requires = ("webdataset", "torch")

    def setting_text(self, s) -> str:
        return f"num_workers={s}"

    def loader(self, v: VData, recipe: str, workers: int):
        import torch
        import webdataset as wds

        from .recipes import TRAIN, PillowRecipe

        sample = WdsRecipe(PillowRecipe(recipe, v.size))

        def make():
            ds = wds.WebDataset([str(p) for p in v.shards], empty_check=False,
                                shardshuffle=len(v.shards) if recipe == TRAIN else False, seed=0)
            if recipe == TRAIN:
                ds = ds.shuffle(1000)
            return torch.utils.data.DataLoader(ds.map(sample), batch_size=v.batch, num_workers=workers)

        return make
