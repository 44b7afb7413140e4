"""Ray Data: the V images as Parquet written by pyarrow (parquet_files.arrow_parquet: a
binary jpg column, an int64 cls column, row groups of 64), ray.data.read_parquet ->
map_batches (the recipe on a numpy batch, in Ray's worker processes) ->
iter_torch_batches. Train: randomize_block_order() + a local shuffle buffer of 1,000
rows, the shuffle Ray's docs advise for training (random_shuffle() is a full all-to-all).

A Ray runtime (ray.init: seconds and a dozen processes, sized to the cores the suite has)
is brought up before each Ray epoch and shut down after it, outside the timing: users
pay its start once per job, and its idle daemons must not take CPU from the other
loaders' epochs. Each epoch executes the dataset plan afresh (in the timing). Knobs: map_batches' batch size and iter_torch_batches' prefetch_batches."""
from __future__ import annotations

import os

import numpy as np

from .base import Peer, VData


class BatchRecipe:
    """map_batches' function: {"jpg": bytes objects, "cls": int64} -> {"image": [B,3,H,W] uint8, "label"}."""

    def __init__(self, recipe: str, size: int) -> None:
        from .recipes import PillowRecipe

        self.fn = PillowRecipe(recipe, size)

    def __call__(self, batch: dict) -> dict:
        images = np.stack([self.fn.hwc(b) for b in batch["jpg"]]).transpose(0, 3, 1, 2)
        return {"image": np.ascontiguousarray(images), "label": batch["cls"]}


class RayData(Peer):
    name, title, reads = "ray", "Ray Data iter_torch_batches", "Parquet written by pyarrow (binary column)"
    image_key = "image"
    grid = [(64, 2), (16, 2), (64, 4)]
    requires = ("ray.data", "pyarrow", "torch")
    files: list = []

    def setting_text(self, s) -> str:
        return f"map_batches batch_size={s[0]} prefetch_batches={s[1]}"

    def prepare(self, v: VData) -> None:
        from .parquet_files import arrow_parquet

        self.files = [str(p) for p in arrow_parquet(v)]
        self.cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()

    def start(self) -> None:
        import ray

        if not ray.is_initialized():
            ray.init(num_cpus=self.cores, include_dashboard=False, log_to_driver=False, object_store_memory=1 << 30,
                     configure_logging=False)
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        # Start the worker processes and their imports (numpy, Pillow, torch, this module) with a
        # tiny job of the same plan: a job pays that once, not each epoch.
        if self.files:
            warm = ray.data.read_parquet(self.files[:1]).limit(2 * self.cores)
            warm = warm.map_batches(BatchRecipe("eval", 224), batch_size=1, batch_format="numpy")
            for _ in warm.iter_torch_batches(batch_size=2):
                pass

    def stop(self) -> None:
        self.close()

    def loader(self, v: VData, recipe: str, setting):
        import ray

        from .recipes import TRAIN

        map_batch, prefetch = setting
        files = self.files

        def make():
            ds = ray.data.read_parquet(files)
            if recipe == TRAIN:
                ds = ds.randomize_block_order(seed=0)
            ds = ds.map_batches(BatchRecipe(recipe, v.size), batch_size=map_batch, batch_format="numpy")
            return ds.iter_torch_batches(batch_size=v.batch, prefetch_batches=prefetch, drop_last=True,
                                         local_shuffle_buffer_size=1000 if recipe == TRAIN else None)

        return make

    def close(self) -> None:
        import ray

        if ray.is_initialized():
            ray.shutdown()
