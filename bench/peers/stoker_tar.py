"""stoker.Loader over the tar shards: the suite's subject (decode_threads x io_depth)."""
from __future__ import annotations

from pathlib import Path

from .base import Peer, VData


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



def recipe_fields(recipe: str, size: int, image_name: str, label_name: str) -> dict:
    """stoker's fields for a V recipe (recipes.py): the same pixels the Pillow peers compute."""
    import stoker

    from .recipes import EVAL

    img = stoker.image(size, resize="center_crop") if recipe == EVAL else \
        stoker.image(size, resize="random_resized_crop", random_hflip=True)
    return {image_name: img, label_name: stoker.scalar("int64")}


class StokerTar(Peer):
    """stoker over its own format: the suite's 12 tar shards. Train shuffles globally
    (shuffle=True, stoker's default training order); eval reads in order."""
    name, title, reads = "stoker_tar", "stoker.Loader", "tar shards (webdataset layout)"
    image_key = "jpg"
    grid = [(2, 2), (3, 2), (2, 4)]
    requires = ("stoker",)

    def setting_text(self, s) -> str:
        return f"decode_threads={s[0]} io_depth={s[1]}"

    def loader(self, v: VData, recipe: str, setting):
        import stoker

        from .recipes import TRAIN

        fields = recipe_fields(recipe, v.size, "jpg", "cls")
        threads, io_depth = setting

        def make():
            return stoker.Loader([str(p) for p in v.shards], fields=fields, batch_size=v.batch,
                                 shuffle=recipe == TRAIN, seed=0, decode_threads=threads, io_depth=io_depth,
                                 prefetch=2, output="torch", observe=False)

        return make
