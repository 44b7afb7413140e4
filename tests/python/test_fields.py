"""The field helpers show their keywords: help(), inspect.signature and editors
list them with defaults, and a wrong keyword names the helper the user called."""
from __future__ import annotations

import inspect

import pytest

import stoker
from stoker import fields


def test_image_signature_lists_every_keyword_with_its_default():
    params = inspect.signature(stoker.image).parameters
    spec_params = inspect.signature(stoker.image_spec).parameters
    # The same keywords, defaults and kinds as image_spec, which builds the native spec.
    assert list(params) == list(spec_params)
    for name, p in params.items():
        assert p.default == spec_params[name].default, name
        assert p.kind == spec_params[name].kind, name
    assert params["resize"].default == "center_crop"
    assert params["resize_to"].default is None
    assert "**" not in str(inspect.signature(stoker.image))


def test_image_wrong_keyword_names_image():
    with pytest.raises(TypeError, match=r"^image\(\) got an unexpected keyword argument 'resise'"):
        stoker.image(224, resise="stretch")


def test_image_keywords_reach_the_spec():
    f = stoker.image((128, 96), resize="random_resized_crop", layout="HWC", random_hflip=True,
                     scale=(0.5, 1.0), dtype="float32", normalize=True, resample="bicubic", resize_to=160)
    s = f.image
    assert (s.height, s.width) == (128, 96)
    assert s.mode == stoker._stoker.ResizeMode.random_resized_crop
    assert not s.chw and s.random_hflip and s.normalize
    assert tuple(s.scale) == pytest.approx((0.5, 1.0))
    assert s.pixel == stoker._stoker.PixelType.float32
    assert s.resample == stoker._stoker.Resample.bicubic
    assert s.resize_to == 160


@pytest.mark.parametrize("helper", [fields.image, fields.npy, fields.npz, fields.scalar, fields.raw,
                                    fields.text, fields.json])
def test_no_helper_hides_keywords_in_kwargs(helper):
    for p in inspect.signature(helper).parameters.values():
        assert p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL), helper.__name__


_IMAGE_ATTRS = ("height", "width", "mode", "chw", "random_hflip", "scale", "ratio", "resample", "resize_to", "pixel",
                "normalize", "mean", "std", "decode")


def _spec_values(spec) -> dict:
    values = {a: getattr(spec, a) for a in ("field", "kind", "dtype", "max_bytes")}
    values.update({f"image.{a}": tuple(v) if hasattr(v, "__len__") else v
                   for a in _IMAGE_ATTRS for v in [getattr(spec.image, a)]})
    return values


def test_every_helpers_spec_pickles_by_value(tmp_path):
    """Specs go to other processes (Ray actors, DataLoader workers, a spawned
    Lightning DataModule): each helper's spec comes back with every value, and
    a loader built from the copies delivers the originals' batch byte for byte."""
    import pickle

    import numpy as np

    from conftest import write_vision_shards

    specs = {"jpg": stoker.image((40, 24), resize="random_resized_crop", layout="HWC", random_hflip=True,
                                 scale=(0.5, 0.9), ratio=(0.8, 1.25), dtype="float32", normalize=True,
                                 mean=(0.1, 0.2, 0.3), std=(0.4, 0.5, 0.6), resample="bicubic"),
             "features.npz": stoker.npz(), "cls": stoker.scalar("int32")}
    others = [stoker.npy(), stoker.raw(77), stoker.text(99), stoker.json(123), stoker.image(32, resize_to=40),
              specs["cls"].named("label")]
    for spec in [*specs.values(), *others]:
        copy = pickle.loads(pickle.dumps(spec))
        assert type(copy) is type(spec) and copy is not spec
        assert _spec_values(copy) == _spec_values(spec)

    write_vision_shards(tmp_path, shards=1, per_shard=8, size=(48, 40))
    shards = sorted(str(p) for p in tmp_path.glob("shard-*.tar"))
    batches = []
    for fields_ in (specs, pickle.loads(pickle.dumps(specs))):
        loader = stoker.Loader(shards, fields=fields_, batch_size=8, shuffle=True, seed=3, output="numpy")
        batches.append(next(iter(loader)))
        loader.close()
    for name in ("jpg", "cls"):
        np.testing.assert_array_equal(batches[0][name], batches[1][name])
