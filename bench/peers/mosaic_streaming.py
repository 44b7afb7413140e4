"""Mosaic Streaming (mosaicml-streaming): the V images written by MDSWriter (columns jpg:
bytes, cls: int), read by streaming.StreamingDataset (local=, no remote) in a torch
DataLoader with workers; __getitem__ runs the recipe. Train: its own shuffle
(shuffle_algo py1e, default block size).

`import streaming` runs the package's __init__, which imports streaming.vision and so
torchvision; torchvision's PyPI wheel is a CUDA build that does not load beside the CPU
torch pinned here, and no reader used here needs it. So the package is entered without its
__init__ (its own submodules, unchanged)."""
from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

from .base import Peer, Unavailable, VData, build_once


def streaming_base():
    """streaming.base (MDSWriter, StreamingDataset, util), without streaming/__init__.py."""
    if "streaming.base" not in sys.modules:
        try:
            import streaming  # noqa: F401 - the normal way, where torchvision loads
        except Exception:  # noqa: BLE001
            spec = importlib.util.find_spec("streaming")
            if spec is None or not spec.submodule_search_locations:
                raise Unavailable("mosaicml-streaming is not installed (requirements-bench.txt)") from None
            pkg = types.ModuleType("streaming")
            pkg.__path__ = list(spec.submodule_search_locations)
            pkg.__spec__ = spec  # so importlib.util.find_spec("streaming") still answers after this
            sys.modules["streaming"] = pkg
    import streaming.base as base
    import streaming.base.util as util

    return base, util


class MosaicStreaming(Peer):
    name, title, reads = "mosaic", "Mosaic StreamingDataset + DataLoader", "MDS shards (MDSWriter)"
    grid = [(3, 2), (2, 2), (3, 4)]

    def setting_text(self, s) -> str:
        return f"num_workers={s[0]} prefetch_factor={s[1]}"

    def check(self) -> None:
        try:
            streaming_base()
        except Unavailable:
            raise
        except Exception as e:  # noqa: BLE001
            raise Unavailable(f"import streaming.base failed: {type(e).__name__}: {str(e)[:200]}") from e

    def prepare(self, v: VData) -> None:
        base, _ = streaming_base()

        def write(d: Path) -> str:
            with base.MDSWriter(out=str(d / "mds"), columns={"jpg": "bytes", "cls": "int"},
                                size_limit=1 << 26) as out:
                for path, label in v.loose:
                    out.write({"jpg": Path(path).read_bytes(), "cls": int(label)})
            import streaming._version as ver

            return f"mosaicml-streaming {ver.__version__} MDSWriter(columns jpg: bytes, cls: int, size_limit 64 MiB)"

        v.made[self.name] = build_once(v.peer_dir(self.name), write)
        self.dir = v.peer_dir(self.name) / "mds"

    def loader(self, v: VData, recipe: str, setting):
        import torch

        from .recipes import TRAIN, PillowRecipe

        base, util = streaming_base()
        fn = PillowRecipe(recipe, v.size)

        class Dataset(base.StreamingDataset):
            def __getitem__(self, i):
                s = super().__getitem__(i)
                return fn(s["jpg"]), s["cls"]

        workers, prefetch = setting
        d = str(self.dir)

        def make():
            # a previous epoch's shared memory (its StreamingDataset is gone) would block this one
            util.clean_stale_shared_memory()
            ds = Dataset(local=d, shuffle=recipe == TRAIN, shuffle_seed=0, batch_size=v.batch)
            return torch.utils.data.DataLoader(ds, batch_size=v.batch, num_workers=workers,
                                               prefetch_factor=prefetch if workers else None, drop_last=True)

        return make
