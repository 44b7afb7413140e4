"""Field specs: what each member of a sample turns into in a batch.

Each helper returns a native ``FieldSpec``; the member it reads is the key of
the ``fields`` dict given to :class:`stoker.Loader`.
"""
from __future__ import annotations

from typing import Sequence

from . import _stoker

_RESIZE = {
    "none": _stoker.ResizeMode.none,
    "stretch": _stoker.ResizeMode.stretch,
    "center_crop": _stoker.ResizeMode.center_crop,
    "longest": _stoker.ResizeMode.longest,
    "random_resized_crop": _stoker.ResizeMode.random_resized_crop,
}


def image_spec(
    size: int | Sequence[int] | None = None,
    *,
    resize: str = "center_crop",
    layout: str = "CHW",
    random_hflip: bool = False,
    scale: Sequence[float] = (0.08, 1.0),
    ratio: Sequence[float] = (3 / 4, 4 / 3),
    dtype: str = "uint8",
    normalize: bool = False,
    mean: Sequence[float] = (0.485, 0.456, 0.406),
    std: Sequence[float] = (0.229, 0.224, 0.225),
    resample: str = "bilinear",
    resize_to: int | None = None,
    decode: str = "cpu",
    channels: int = 3,
    max_pixels: int = 1 << 20,
) -> _stoker.ImageSpec:
    """The native ImageSpec for :func:`image`'s arguments."""
    spec = _stoker.ImageSpec()
    if channels not in (1, 3, 4):
        raise ValueError(f"channels must be 1, 3 or 4 (Pillow's 'L', 'RGB', 'RGBA'), not {channels!r}")
    spec.channels = int(channels)
    if size is None:
        if resize == "none":  # variable size: each image as stored, a list of arrays per batch
            if dtype != "uint8" or normalize or random_hflip:
                raise ValueError("variable-size images (size=None, resize='none') are uint8, without "
                                 "normalize or random_hflip")
            spec.variable = True
            spec.max_pixels = int(max_pixels)
        size = 224
    if isinstance(size, int):
        spec.height = spec.width = size
    else:
        spec.height, spec.width = (int(x) for x in size)
    if resize not in _RESIZE:
        raise ValueError(f"resize must be one of {sorted(_RESIZE)}, not {resize!r}")
    spec.mode = _RESIZE[resize]
    if resample not in ("bilinear", "bicubic", "box"):
        raise ValueError(f"resample must be 'bilinear', 'bicubic' or 'box', not {resample!r}")
    spec.resample = getattr(_stoker.Resample, resample)
    spec.resize_to = 0 if resize_to is None else int(resize_to)
    if layout not in ("CHW", "HWC"):
        raise ValueError(f"layout must be 'CHW' or 'HWC', not {layout!r}")
    spec.chw = layout == "CHW"
    spec.random_hflip = random_hflip
    spec.scale = tuple(scale)
    spec.ratio = tuple(ratio)
    if dtype not in ("uint8", "float32"):
        raise ValueError(f"dtype must be 'uint8' or 'float32', not {dtype!r}")
    spec.pixel = getattr(_stoker.PixelType, dtype)
    spec.normalize = normalize
    spec.mean = tuple(mean)
    spec.std = tuple(std)
    if decode not in ("auto", "cpu", "gpu"):
        raise ValueError(f"decode must be 'auto', 'cpu' or 'gpu', not {decode!r}")
    if decode != "cpu" and (channels != 3 or spec.variable):
        raise ValueError("channels 1 and 4 and variable-size images decode on the CPU only (decode='cpu')")
    if channels == 4 and resize != "none":
        raise ValueError("channels=4 takes no resize (resize='none'): Pillow resizes RGBA premultiplied, "
                         "which stoker does not")
    spec.decode = getattr(_stoker.ImageDecode, decode)
    return spec


def image(
    size: int | Sequence[int] | None = None,
    *,
    resize: str = "center_crop",
    layout: str = "CHW",
    random_hflip: bool = False,
    scale: Sequence[float] = (0.08, 1.0),
    ratio: Sequence[float] = (3 / 4, 4 / 3),
    dtype: str = "uint8",
    normalize: bool = False,
    mean: Sequence[float] = (0.485, 0.456, 0.406),
    std: Sequence[float] = (0.229, 0.224, 0.225),
    resample: str = "bilinear",
    resize_to: int | None = None,
    decode: str = "cpu",
    channels: int = 3,
    max_pixels: int = 1 << 20,
) -> _stoker.FieldSpec:
    """A JPEG, PNG or WebP member decoded, resized/cropped/flipped, as [B, C, H, W] (or HWC).

    ``size`` is the output's (H, W), or one int for a square; left out, 224.
    With ``resize="none"`` and ``size=(H, W)`` every image must be that size;
    with ``resize="none"`` and ``size=None`` images keep their own sizes: the
    batch holds a list of B uint8 arrays, (C, h, w) or (h, w, C), each at most
    ``max_pixels`` pixels (the batch buffer holds B x max_pixels x C bytes;
    a larger image is an error naming it).

    ``channels``: 3 (RGB, the default), 1 or 4: the pixels of Pillow's
    ``convert("RGB")``, ``convert("L")`` or ``convert("RGBA")`` (as
    webdataset's "l8"/"rgb8"/"rgba8" decodes give them). 1 is the luma of
    the RGB result (exact for any image at full size, and for gray images
    through every resize; a color image resized then converted differs
    from Pillow's convert-then-resize by rounding); normalize uses mean[0]
    and std[0]. 4 takes no resize (``resize="none"``); its alpha is not
    normalized.

    Each mode gives the pixels of the torchvision recipe it stands for, on
    Pillow images (``resample`` "bilinear", the default, or "bicubic": Pillow's
    antialiased filter, the same mapping of output to source pixels):
    "center_crop": Resize(resize_to) + CenterCrop(size); resize_to=None is the
    smallest that covers size (Resize(224) + CenterCrop(224)); 256 gives the
    ImageNet eval recipe Resize(256) + CenterCrop(224). "stretch":
    Resize((h, w)). "longest": longer side to size, zero padded bottom/right
    (SAM). "random_resized_crop": RandomResizedCrop(size, scale, ratio), drawn
    from the sample's seed. "none": as stored. resample="box" is the older,
    faster libyuv box-filter path (approximate geometry and filter).
    dtype "float32" with normalize=True gives (x/255 - mean) / std.

    decode: where JPEGs decode. "cpu" (default): the CPU decoders. "auto":
    with ``device="cuda"``, on the GPU (nvJPEG, its hardware engine where the
    GPU has one) and the CPU decoders at once, each batch split by their
    measured rates (``loader.settings["gpu_decode"]`` says how and why);
    elsewhere on the CPU. "gpu": every JPEG the GPU decoder takes. The crop
    boxes, flips and order are the same either way, the pixels within a level
    (nvJPEG's chroma upsampling); what the GPU cannot decode (progressive on
    the engine, CMYK, 12-bit, PNG) decodes on the CPU, counted in
    ``report()["gpu_decode"]["fallbacks"]``.
    GPU decode needs libnvjpeg (``pip install nvidia-nvjpeg``) and a stoker
    built with nvcc; it is opt-in until it has fed a whole training run.
    """
    f = _stoker.FieldSpec()
    f.kind = _stoker.FieldKind.image
    # The keywords are spelled out (not **kwargs) so help(), inspect.signature
    # and editors show them, and a wrong one is a TypeError naming image().
    f.image = image_spec(
        size, resize=resize, layout=layout, random_hflip=random_hflip, scale=scale,
        ratio=ratio, dtype=dtype, normalize=normalize, mean=mean, std=std,
        resample=resample, resize_to=resize_to, decode=decode, channels=channels, max_pixels=max_pixels)
    return f


def npy() -> _stoker.FieldSpec:
    """A .npy member: [B, *shape] with the dtype stored in the file."""
    f = _stoker.FieldSpec()
    f.kind = _stoker.FieldKind.npy
    return f


def npz() -> _stoker.FieldSpec:
    """A .npz member: a dict of [B, *shape] arrays, one per array in the archive."""
    f = _stoker.FieldSpec()
    f.kind = _stoker.FieldKind.npz
    return f


def scalar(dtype: str = "int64") -> _stoker.FieldSpec:
    """A text member holding one number (a class label): [B]."""
    f = _stoker.FieldSpec()
    f.kind = _stoker.FieldKind.scalar
    f.dtype = dtype
    return f


def raw(max_bytes: int) -> _stoker.FieldSpec:
    """Raw member bytes: [B, max_bytes] uint8, zero padded, plus '<field>.len'."""
    f = _stoker.FieldSpec()
    f.kind = _stoker.FieldKind.bytes
    f.max_bytes = int(max_bytes)
    return f


def text(max_bytes: int = 4096) -> _stoker.FieldSpec:
    """A UTF-8 text member (a caption): a list of ``str`` per batch.

    Checked to be UTF-8 in C++ (an error names shard, member and byte offset
    otherwise). Each sample's bytes occupy a fixed slot of ``max_bytes`` in the
    batch buffer; a longer member is an error naming it.
    """
    f = raw(max_bytes)
    f.kind = _stoker.FieldKind.text
    return f


def json(max_bytes: int = 65536) -> _stoker.FieldSpec:
    """A JSON member (metadata): a list of parsed objects per batch.

    Validated (UTF-8, one JSON value) in C++ on the decode threads; the
    Python objects are built once per batch with :func:`json.loads` on each
    sample's string. ``max_bytes`` as in :func:`text`.
    """
    f = raw(max_bytes)
    f.kind = _stoker.FieldKind.json
    return f


def msgpack(max_bytes: int = 65536) -> _stoker.FieldSpec:
    """A msgpack member (webdataset's ".mp"/".msg"; name the field as the
    member is named, e.g. "msgpack" or "mp"): a list of parsed objects per batch.

    Checked in C++ on the decode threads to be one value that
    ``msgpack.unpackb`` parses (webdataset's call: str as UTF-8, map keys str
    or bytes), so a bad member is an error naming shard, member and byte
    offset; the objects are built once per batch with ``msgpack.unpackb``
    (``pip install msgpack``). ``max_bytes`` as in :func:`text`.
    """
    f = raw(max_bytes)
    f.kind = _stoker.FieldKind.msgpack
    return f


def pickle(max_bytes: int = 1 << 20, *, allow_unsafe: bool = False) -> _stoker.FieldSpec:
    """A pickle member (".pkl", ".pickle", ".pyd"; torch's ".pth" is a pickle
    too): a list of ``pickle.loads`` objects per batch.

    Unpickling runs whatever code the data names: a shard from anyone you do
    not trust can take over the process. So it is refused unless you pass
    ``allow_unsafe=True``, saying that you trust every shard this field reads.
    The bytes are copied in C++; ``pickle.loads`` runs once per sample when
    the batch is handed over (".pth" members: ``torch.load(BytesIO(b),
    weights_only=False)`` on the list is the same risk, left to you through
    :func:`raw`). ``max_bytes`` as in :func:`text`.
    """
    if allow_unsafe is not True:
        raise ValueError("stoker.pickle() unpickles member bytes, and unpickling data can execute arbitrary code "
                         "(anyone who wrote a shard can run commands in this process); pass "
                         "stoker.pickle(allow_unsafe=True) only if you trust every shard it reads, or store the "
                         "field as json/msgpack/npy instead")
    f = raw(max_bytes)
    f.kind = _stoker.FieldKind.pickle
    return f
