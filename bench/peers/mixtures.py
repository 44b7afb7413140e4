"""Mixtures on the peers' own formats (bench/mix.py, issue 42): the three V sources of
bench/mix.py written once each as Mosaic Streaming MDS shards (MDSWriter) and as litdata
chunks (litdata.optimize), then mixed by weight the way each project documents it (and
stoker's Parquet source written as the Hub writes Parquet, write_hub_parquet):

    Mosaic Streaming  StreamingDataset(streams=[Stream(local= | remote=, proportion=w), ...],
                      epoch_size=N, shuffle=True) in a torch DataLoader
    litdata           CombinedStreamingDataset([StreamingDataset(...), ...], weights=w,
                      iterate_over_all=False) in a StreamingDataLoader

Each source is written from its tar shards (samples.iter_tar_samples: the same JPEG bytes and
labels, in shard order) with the peer's own default shard size (64 MB), so a source is one
or a few shards. The HTTP source: neither package reads plain http:// (Mosaic's downloaders
are s3/gs/oci/azure/hf/dbfs..., litdata's s3/gs/r2/azure/hf), so each is given a small
downloader for http:// through its own extension point (Mosaic's DOWNLOADER_MAPPINGS, litdata's
register_downloader) that GETs a whole shard (or index.json) into the stream's local cache,
as their cloud downloaders do. The cache is emptied before every epoch, outside nothing:
the download is part of the epoch's time, as the other rows read over HTTP every epoch.
"""
from __future__ import annotations

import os
import shutil
import urllib.request
from pathlib import Path

from .base import build_once
from .samples import iter_tar_samples


def _get(url: str, local: str, timeout: float = 60) -> None:
    """GET url into local (a temporary name first, then renamed: readers never see a part)."""
    tmp = f"{local}.part.{os.getpid()}"
    os.makedirs(os.path.dirname(local) or ".", exist_ok=True)
    with urllib.request.urlopen(url, timeout=timeout) as r, open(tmp, "wb") as f:
        shutil.copyfileobj(r, f, 1 << 20)
    os.replace(tmp, local)


# -- Parquet, as the Hub serves it ------------------------------------------------------------

def write_hub_parquet(shards: list[Path], root: Path) -> str:
    """A source's tar shards as Parquet the way Hugging Face `datasets` writes a Hub dataset
    (Dataset.from_dict + cast_column("image", Image()) + to_parquet: an `image` struct {bytes,
    path} with the JPEG bytes embedded, and an int `label`), one file per shard, under root (once)."""
    def write(d: Path) -> str:
        os.environ.setdefault("HF_DATASETS_CACHE", str(d / "hf-cache"))
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import datasets

        datasets.disable_progress_bars()
        for i, shard in enumerate(shards):
            items = list(iter_tar_samples([shard]))
            ds = datasets.Dataset.from_dict({"image": [{"bytes": m["jpg"], "path": f"{k}.jpg"} for k, m in items],
                                             "label": [int(m["cls"]) for _, m in items]})
            ds.cast_column("image", datasets.Image()).to_parquet(str(d / f"train-{i:05d}-of-{len(shards):05d}.parquet"))
        shutil.rmtree(d / "hf-cache", ignore_errors=True)
        return (f"datasets {datasets.__version__}: Dataset.from_dict(image {{bytes, path}}, label)"
                f".cast_column('image', Image()).to_parquet(), one file per tar shard")

    return build_once(root, write)


# -- Mosaic Streaming -----------------------------------------------------------------------

def mosaic_http() -> None:
    """Teach Mosaic Streaming http:// remotes (its downloaders are chosen by URL scheme)."""
    from .mosaic_streaming import streaming_base

    streaming_base()
    from streaming.base.storage import download

    if "http" in download.DOWNLOADER_MAPPINGS:
        return

    class HTTPDownloader(download.CloudDownloader):
        @staticmethod
        def _client_identifier() -> str:
            return "http"

        def clean_up(self) -> None:
            pass

        def _download_file_impl(self, remote: str, local: str, timeout: float) -> None:
            _get(remote, local, timeout)

    download.DOWNLOADER_MAPPINGS["http"] = HTTPDownloader


def write_mds(sources: list[list[Path]], root: Path) -> str:
    """Each source's tar shards as MDS shards under root/s<i> (once; root/DONE says how)."""
    from .mosaic_streaming import streaming_base

    base, _ = streaming_base()

    def write(d: Path) -> str:
        for i, shards in enumerate(sources):
            with base.MDSWriter(out=str(d / f"s{i}"), columns={"jpg": "bytes", "cls": "int"},
                                size_limit=1 << 26) as out:
                for _, members in iter_tar_samples(shards):
                    out.write({"jpg": members["jpg"], "cls": int(members["cls"])})
        import streaming._version as ver

        return (f"mosaicml-streaming {ver.__version__} MDSWriter(columns jpg: bytes, cls: int, size_limit 64 MiB), "
                f"one folder per source")

    return build_once(root, write)


def mosaic_mix(root: Path, weights, remote: dict[int, str], total: int, batch: int, fn, setting, cache: Path):
    """make() -> a DataLoader over the mixture; remote maps a source to its http:// folder
    (read through a local cache emptied before each epoch), the others read in place."""
    import torch

    from .mosaic_streaming import streaming_base

    base, util = streaming_base()
    if remote:
        mosaic_http()

    class Dataset(base.StreamingDataset):
        def __getitem__(self, i):
            return fn(super().__getitem__(i))

    workers, prefetch = setting

    def make():
        util.clean_stale_shared_memory()  # a previous epoch's, which would block this one
        streams = []
        for i, w in enumerate(weights):
            if i in remote:
                shutil.rmtree(cache / f"s{i}", ignore_errors=True)
                streams.append(base.Stream(remote=remote[i], local=str(cache / f"s{i}"), proportion=w))
            else:
                streams.append(base.Stream(local=str(root / f"s{i}"), proportion=w))
        ds = Dataset(streams=streams, epoch_size=total, shuffle=True, shuffle_seed=0, batch_size=batch)
        return torch.utils.data.DataLoader(ds, batch_size=batch, num_workers=workers,
                                           prefetch_factor=prefetch if workers else None, drop_last=True)

    return make


# -- litdata --------------------------------------------------------------------------------

def litdata_http() -> None:
    """Teach litdata http:// input dirs (its downloaders are chosen by URL prefix)."""
    from litdata.streaming import downloader

    if "http://" in downloader._DOWNLOADERS:
        return

    class HTTPDownloader(downloader.Downloader):
        def download_file(self, remote_filepath: str, local_filepath: str) -> None:
            if not os.path.exists(local_filepath):
                _get(remote_filepath, local_filepath)
            self._notify_published(local_filepath)

    downloader.register_downloader("http://", HTTPDownloader)


def _tar_items(shard: str):
    """optimize()'s fn: one tar shard -> its samples, in order (module level: picklable)."""
    for _, members in iter_tar_samples([Path(shard)]):
        yield {"jpg": members["jpg"], "cls": int(members["cls"])}


def write_litdata(sources: list[list[Path]], root: Path) -> str:
    """Each source's tar shards as litdata chunks under root/s<i> (once)."""
    def write(d: Path) -> str:
        import multiprocessing

        import litdata

        # optimize() sets the process-wide start method and leaves it so (litdata_streaming.py)
        before = multiprocessing.get_start_method(allow_none=True)
        try:
            for i, shards in enumerate(sources):
                litdata.optimize(fn=_tar_items, inputs=[str(p) for p in shards], output_dir=str(d / f"s{i}"),
                                 chunk_bytes="64MB", num_workers=1, mode="overwrite", reorder_files=False,
                                 verbose=False, start_method="fork")
        finally:
            multiprocessing.set_start_method(before, force=True)
        return f"litdata {litdata.__version__} optimize(chunk_bytes='64MB') of (JPEG bytes, int label), one folder per source"

    return build_once(root, write)


class _Transform:
    def __init__(self, fn) -> None:
        self.fn = fn

    def __call__(self, sample: dict):
        return self.fn(sample)


def litdata_mix(root: Path, weights, remote: dict[int, str], batch: int, fn, setting, cache: Path):
    """make() -> a StreamingDataLoader over CombinedStreamingDataset(weights=...). With weights
    litdata stops at the first source exhausted (iterate_over_all=False), so an epoch is
    shorter than the data (a varying count: its rows are compared by rate)."""
    import litdata
    from litdata.streaming.resolver import Dir

    if remote:
        litdata_http()
    workers, prefetch = setting

    def make():
        parts = []
        for i in range(len(weights)):
            if i in remote:
                shutil.rmtree(cache / f"s{i}", ignore_errors=True)
                (cache / f"s{i}").mkdir(parents=True)
                where = Dir(path=str(cache / f"s{i}"), url=remote[i])
            else:
                where = str(root / f"s{i}")
            parts.append(litdata.StreamingDataset(where, shuffle=True, seed=0, transform=_Transform(fn)))
        mixed = litdata.CombinedStreamingDataset(parts, seed=0, weights=list(weights), iterate_over_all=False)
        return litdata.StreamingDataLoader(mixed, batch_size=batch, num_workers=workers,
                                           prefetch_factor=prefetch if workers else None)

    return make
