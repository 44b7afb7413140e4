"""Hugging Face `datasets`: the Parquet it wrote itself (parquet_files.hub_parquet: the
Hub's image struct), loaded into its Arrow cache (Dataset.from_parquet, memory-mapped),
the recipe through with_transform (the Image feature decodes to PIL, the transform
crops), a torch DataLoader with workers. `datasets` implements __getitems__, so the
DataLoader fetches a batch's rows in one call and the transform runs once per batch."""
from __future__ import annotations

from .base import Peer, VData


class BatchTransform:
    """with_transform's function: {"image": [PIL], "label": [int]} -> tensors per row."""

    def __init__(self, recipe: str, size: int) -> None:
        from .recipes import PillowRecipe

        self.fn = PillowRecipe(recipe, size)

    def __call__(self, batch: dict) -> dict:
        return {"image": [self.fn(im) for im in batch["image"]], "label": batch["label"]}


class HFDatasets(Peer):
    name, title, reads = "hf_datasets", "HF datasets + DataLoader", "Parquet written by `datasets` (Arrow cache)"
    image_key = "image"
    grid = [3, 2, 4]
    requires = ("datasets", "torch")

    def setting_text(self, s) -> str:
        return f"num_workers={s}"

    def prepare(self, v: VData) -> None:
        from .parquet_files import hub_parquet, offline_hf_env

        offline_hf_env(v)
        import datasets

        files = hub_parquet(v)
        # the Arrow cache build happens here, once, not in an epoch
        self.ds = datasets.Dataset.from_parquet([str(p) for p in files], split="train")
        if len(self.ds) != v.count:
            raise RuntimeError(f"datasets read {len(self.ds)} rows from {len(files)} files, expected {v.count}")

    def loader(self, v: VData, recipe: str, workers: int):
        import torch

        from .recipes import TRAIN

        ds = self.ds.with_transform(BatchTransform(recipe, v.size))

        def make():
            g = torch.Generator()
            g.manual_seed(0)
            return torch.utils.data.DataLoader(ds, batch_size=v.batch, shuffle=recipe == TRAIN, generator=g,
                                               num_workers=workers, drop_last=True)

        return make
