"""litdata (Lightning): the V images through litdata.optimize() into its chunk format
(the JPEG bytes stored as they are, the label as an int), read by StreamingDataset
(transform= runs the recipe) and StreamingDataLoader with workers. Train shuffles with
litdata's own shuffle (chunk order + within-chunk intervals)."""
from __future__ import annotations

from pathlib import Path

from .base import Peer, VData, build_once


def _item(entry):
    """optimize()'s fn: one (path, label) -> the stored sample (module level: picklable)."""
    path, label = entry
    return {"jpg": Path(path).read_bytes(), "cls": int(label)}


class Transform:
    def __init__(self, recipe: str, size: int) -> None:
        from .recipes import PillowRecipe

        self.fn = PillowRecipe(recipe, size)

    def __call__(self, sample: dict):
        return self.fn(sample["jpg"]), sample["cls"]


class Litdata(Peer):
    name, title, reads = "litdata", "litdata StreamingDataLoader", "litdata.optimize() chunks"
    grid = [(3, 2), (2, 2), (3, 4)]
    requires = ("litdata", "torch")

    def setting_text(self, s) -> str:
        return f"num_workers={s[0]} prefetch_factor={s[1]}"

    def prepare(self, v: VData) -> None:
        def write(d: Path) -> str:
            import multiprocessing

            import litdata

            # optimize() sets the process-wide start method (spawn by default) and leaves it so:
            # every later DataLoader would then spawn its workers (importing torch each epoch).
            before = multiprocessing.get_start_method(allow_none=True)
            try:
                litdata.optimize(fn=_item, inputs=list(v.loose), output_dir=str(d / "chunks"), chunk_bytes="64MB",
                                 num_workers=1, mode="overwrite", reorder_files=False, verbose=False,
                                 start_method="fork")
            finally:
                multiprocessing.set_start_method(before, force=True)
            return f"litdata {litdata.__version__} optimize(chunk_bytes='64MB') of (JPEG bytes, int label)"

        v.made[self.name] = build_once(v.peer_dir(self.name), write)
        self.dir = v.peer_dir(self.name) / "chunks"

    def loader(self, v: VData, recipe: str, setting):
        import litdata

        from .recipes import TRAIN

        workers, prefetch = setting
        d = str(self.dir)

        def make():
            ds = litdata.StreamingDataset(d, shuffle=recipe == TRAIN, seed=0, drop_last=True,
                                          transform=Transform(recipe, v.size))
            return litdata.StreamingDataLoader(ds, batch_size=v.batch, num_workers=workers,
                                               prefetch_factor=prefetch if workers else None, drop_last=True)

        return make
