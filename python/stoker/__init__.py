"""stoker: a C++ data-loading engine for deep-learning training.

    import stoker
    loader = stoker.Loader("data/sa1b-{000000..000031}.tar",
        fields={"jpg": stoker.image(1024, resize="longest"),
                "features.npz": stoker.npz()},
        batch_size=24, shuffle=True, seed=0, key_rule="underscore")
"""
from ._version import __version__  # generated from CMakeLists.txt's project version (pyproject.toml)
from ._stoker import StokerError, decode_jpeg, decode_jpeg_rgb, expand_sources
from .fields import image, image_spec, json, msgpack, npy, npz, pickle, raw, scalar, text
from .loader import Loader
from .mixture import Mixture, Source, mix
from .observe import Observer, profile, to_device
from .packing import PackedLoader, plan_packing
from .ray_workers import RayLoader, RayWorkers
from .tokens import MegatronDataset, TokenLoader, write_megatron

__all__ = [
    "Loader",
    "MegatronDataset",
    "Mixture",
    "Source",
    "TokenLoader",
    "PackedLoader",
    "plan_packing",
    "Observer",
    "RayLoader",
    "RayWorkers",
    "StokerError",
    "decode_jpeg",
    "decode_jpeg_rgb",
    "expand_sources",
    "image",
    "image_spec",
    "json",
    "mix",
    "msgpack",
    "npy",
    "npz",
    "pickle",
    "profile",
    "raw",
    "scalar",
    "text",
    "to_device",
    "write_megatron",
]
