"""The batch values of fields that are not fixed-shape arrays, built once per
batch from the buffer C++ filled: text, JSON, msgpack and pickle members (a
[B, max_bytes] slot plus "<field>.len") become lists of Python objects, and
variable-size images (a [B, max_pixels * C] slot plus "<field>.shape") lists
of arrays. One bytes copy or view per batch, then a slice per sample; no
Python touches a pixel."""
from __future__ import annotations

import io
import json
import pickle

from . import _stoker

_OBJECT_KINDS = {
    _stoker.FieldKind.text: "text",
    _stoker.FieldKind.json: "json",
    _stoker.FieldKind.msgpack: "msgpack",
    _stoker.FieldKind.pickle: "pickle",
}


def object_kind(spec) -> str | None:
    """"text", "json", "msgpack" or "pickle" for a field whose batch value is
    a list of Python objects, else None."""
    return _OBJECT_KINDS.get(spec.kind)


def is_variable_image(spec) -> bool:
    return spec.kind == _stoker.FieldKind.image and spec.image.variable


def _unpickle(b: bytes):
    # torch.save writes a zip archive (".pth"); plain pickles start with the protocol opcode.
    if b[:2] == b"PK":
        import torch

        return torch.load(io.BytesIO(b), weights_only=False)
    return pickle.loads(b)


def objects(kind: str, data, lengths) -> list:
    """One batch's slots as a list of str or parsed objects (text and JSON were
    checked to be UTF-8 / JSON in C++, msgpack to be what msgpack.unpackb parses)."""
    width = data.shape[1]
    raw = data.tobytes()
    chunks = [raw[i * width:i * width + int(n)] for i, n in enumerate(lengths.tolist())]
    if kind == "text":
        return [c.decode("utf-8") for c in chunks]
    if kind == "json":
        return [json.loads(c.decode("utf-8")) for c in chunks]
    if kind == "msgpack":
        import msgpack

        return [msgpack.unpackb(c) for c in chunks]
    return [_unpickle(c) for c in chunks]


def image_list(data, shapes, convert) -> list:
    """A variable-size image field's batch: sample i is the first prod(shape)
    bytes of its slot, viewed with its own shape (views of the batch buffer;
    `convert` as for every other array)."""
    out = []
    for i, shape in enumerate(shapes.tolist()):
        n = shape[0] * shape[1] * shape[2]
        out.append(convert(data[i, :n].reshape(shape)))
    return out
