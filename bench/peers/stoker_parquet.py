"""stoker over the peers' Parquet: the file `datasets` wrote for HFDatasets (the Hub's
image struct {bytes, path} + an int label), same images as the tar shards.

"stoker reads the peer's format where it can": the same engine over Parquet sources
(formats/parquet_file.h), tuned over the tar row's grid. A file it cannot read is a row
that says why (not run: ...) and the suite goes on. The target it feeds: stoker over
Parquet within 0.9x of stoker over tar for the same images.
"""
from __future__ import annotations

from .base import Peer, Unavailable, VData
from .stoker_tar import recipe_fields


class StokerParquet(Peer):
    name, title, reads = "stoker_parquet", "stoker.Loader, Parquet", "Parquet written by `datasets` (image struct)"
    image_key = "image"
    grid = [(2, 2), (3, 2), (2, 4)]  # stoker_tar's
    requires = ("stoker",)

    def setting_text(self, s) -> str:
        return f"decode_threads={s[0]} io_depth={s[1]}"

    def prepare(self, v: VData) -> None:
        from .parquet_files import hub_parquet

        self.files = hub_parquet(v)

    def loader(self, v: VData, recipe: str, setting):
        import stoker

        from .recipes import TRAIN

        fields = recipe_fields(recipe, v.size, "image", "label")
        threads, io_depth = setting
        files = [str(p) for p in self.files]

        def make():
            return stoker.Loader(files, fields=fields, batch_size=v.batch, shuffle=recipe == TRAIN, seed=0,
                                 decode_threads=threads, io_depth=io_depth, prefetch=2, output="torch",
                                 observe=False)

        try:  # the constructor opens the files and reads a first row
            make().close()
        except Exception as e:  # noqa: BLE001 - any refusal is the reason for the row
            raise Unavailable(f"stoker cannot read this Parquet ({type(e).__name__}: {str(e)[:200]})") from e
        return make
