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
