"""The loaders the suite compares, one file each (bench/README.md).

The V/S/A/P/C workloads (bench/suite.py) call factories ``make() -> iterable of batches``;
every loader of a workload does the same work (same files, decode, output size and
dtype, batch size, no shuffle, its own collate included, no device copy):

    stoker_tar.py             stoker.Loader over the tar shards (decode_threads x io_depth)
    dataloader_webdataset.py  torch DataLoader over webdataset.WebDataset(shards) (num_workers)
    dataloader_loose.py       torch DataLoader, map-style Dataset over the loose files (num_workers)
    spdl_pipeline.py          SPDL PipelineBuilder: tar source -> thread-pool decode -> collate
    dali_cpu.py               NVIDIA DALI CPU pipeline: webdataset reader -> CPU decode -> resize

The peers section (bench/run.sh --peers, bench/peer_suite.py) runs V's eval and train
recipes (recipes.py) on every peer in its own format, each a ``base.Peer``:

    stoker_tar.py        StokerTar: stoker over its own tar shards (the rows' subject)
    stoker_parquet.py    StokerParquet: stoker over the Parquet `datasets` wrote (when this stoker reads Parquet)
    dataloader_webdataset.py  DataLoaderWebdataset: DataLoader + webdataset over the same shards
    litdata_streaming.py Litdata: litdata.optimize() chunks, StreamingDataset + StreamingDataLoader
    mosaic_streaming.py  MosaicStreaming: MDSWriter shards, streaming.StreamingDataset in a DataLoader
    hf_datasets.py       HFDatasets: Parquet written by `datasets`, with_transform, DataLoader workers
    ray_data.py          RayData: read_parquet, map_batches, iter_torch_batches
    megatron_energon.py  Energon: `energon prepare`d WebDataset shards, get_loader

bench/mix.py's mixtures on the peers' own formats (Mosaic streams with proportions, litdata's
CombinedStreamingDataset with weights, a source over http://) are in mixtures.py.

A loader that cannot be built raises ``Unavailable(reason)``; the suite lists it.
"""
from __future__ import annotations

import warnings

from .base import Peer, Unavailable, VData
from .dali_cpu import dali_pipeline, dali_status
from .dataloader_loose import dl_loose
from .dataloader_webdataset import dl_wds, dl_wds_shuffled
from .samples import ArraySample, LooseImages, VisionSample, iter_tar_samples
from .spdl_pipeline import spdl_decode_status, spdl_pipeline
from .stoker_tar import stoker_loader

__all__ = ["Peer", "Unavailable", "VData", "ArraySample", "LooseImages", "VisionSample", "iter_tar_samples",
           "stoker_loader", "dl_wds", "dl_wds_shuffled", "dl_loose", "spdl_pipeline", "spdl_decode_status",
           "dali_pipeline", "dali_status", "recipe_peers"]

warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
# torch's advice against more workers than cores: the grids try 3 and 4 on purpose
warnings.filterwarnings("ignore", message="This DataLoader will create")


def recipe_peers() -> list[Peer]:
    """The peers section's rows, stoker first (every ratio is stoker over tar / that row)."""
    from .dataloader_webdataset import DataLoaderWebdataset
    from .hf_datasets import HFDatasets
    from .litdata_streaming import Litdata
    from .megatron_energon import Energon
    from .mosaic_streaming import MosaicStreaming
    from .ray_data import RayData
    from .stoker_parquet import StokerParquet
    from .stoker_tar import StokerTar

    return [StokerTar(), StokerParquet(), DataLoaderWebdataset(), Litdata(), MosaicStreaming(), HFDatasets(),
            RayData(), Energon()]
