"""stoker over the peers' Parquet: the file `datasets` wrote for HFDatasets (the Hub's
image struct {bytes, path} + an int label), same images as the tar shards.

The hook for "stoker reads the peer's format where it can": Parquet sources come with
the engine's Parquet support (issue #20, another branch). Whether this stoker has it is
found out at run time by building a Loader on the file; when it refuses, the row says
why (not run: ...) and the suite goes on. The target it feeds: stoker over Parquet within
0.9x of stoker over tar for the same images.
"""
from __future__ import annotations

from .base import Peer, Unavailable, VData
from .stoker_tar import recipe_fields


class StokerParquet(Peer):
    name, title, reads = "stoker_parquet", "stoker.Loader, Parquet", "Parquet written by `datasets` (image struct)"
    image_key = "image"
    grid = [(2, 2), (3, 2)]
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

        try:  # does this stoker read Parquet? (the constructor opens and checks the sources)
            make().close()
        except Exception as e:  # noqa: BLE001 - any refusal is the reason for the row
            raise Unavailable(f"this stoker build does not read Parquet ({type(e).__name__}: {str(e)[:160]}); "
                              "the row runs once Parquet sources land (branch parquet)") from e
        return make
