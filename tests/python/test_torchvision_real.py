"""stoker's image modes against torchvision itself, where a torchvision build
matching the installed torch imports (not with the pinned torch 2.13.0+cpu:
there test_torchvision_fidelity.py reproduces torchvision's arithmetic on
Pillow). This file checks both that stoker's pixels are torchvision's and that
the Pillow reproduction the CPU suite relies on is torchvision's, exactly.

Run on the GPU machine's image (torch 2.11 + torchvision 0.26, Pillow 12.3):
all pass; stoker equals torchvision exactly for every recipe above except
32 px outputs, decoded at a DCT scale (mean 0.22, p99.9 2 levels).
"""
from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

# Why this skips on the CPU machines: PyPI's torchvision 0.28.0 (the release
# that requires torch==2.13.0) is the CUDA build only, its _C.so links
# libtorch_cuda.so and libc10_cuda.so, which torch 2.13.0+cpu does not ship,
# so `import torchvision` fails in its meta registrations ("operator
# torchvision::nms does not exist"); 0.29.x require a newer torch. The +cpu
# builds are on PyTorch's own index, which these machines cannot reach, and
# PyPI has no torchvision source to build. Checked 2026-12-06.
tv = pytest.importorskip(
    "torchvision",
    reason="torchvision does not load against the pinned torch 2.13.0+cpu (PyPI's 0.28.0 is a CUDA build); "
           "test_torchvision_fidelity.py covers its arithmetic on Pillow")
import torch  # noqa: E402
from torchvision.transforms import InterpolationMode  # noqa: E402
from torchvision.transforms import functional as F  # noqa: E402
from torchvision.transforms import v2 as T  # noqa: E402  (v2 on PIL: the same kernels as v1)

import stoker  # noqa: E402
from stoker import _stoker  # noqa: E402
from test_torchvision_fidelity import (EDGE, PHOTOS, assert_faithful, diff_stats, photo,  # noqa: E402
                                       reference, stoker_hwc)

MODES = {"bilinear": InterpolationMode.BILINEAR, "bicubic": InterpolationMode.BICUBIC}


def pil(data: bytes) -> Image.Image:
    return Image.open(io.BytesIO(data)).convert("RGB")  # torchvision's pil_loader


def torchvision_recipe(data: bytes, spec_kw: dict, seed: int) -> np.ndarray:
    """HWC uint8 from torchvision's own transforms for stoker.image(**spec_kw)."""
    img = pil(data)
    size = spec_kw["size"]
    oh, ow = (size, size) if isinstance(size, int) else size
    interp = MODES[spec_kw.get("resample", "bilinear")]
    mode = spec_kw.get("resize", "center_crop")
    if mode == "center_crop":
        s = spec_kw.get("resize_to")
        if s is None:  # stoker's rule: the smallest Resize(S) whose output covers the crop
            s = min(oh, ow)
            while any(a < b for a, b in zip(F._compute_resized_output_size((img.size[1], img.size[0]), [s]),
                                            (oh, ow))):
                s += 1
        out = T.CenterCrop((oh, ow))(T.Resize(s, interpolation=interp)(img))
    elif mode == "stretch":
        out = T.Resize((oh, ow), interpolation=interp)(img)
    elif mode == "random_resized_crop":
        # stoker's sampled window (its own RNG), cut and resized by torchvision's resized_crop
        x, y, cw, ch = _stoker.plan_sample(stoker.image_spec(**spec_kw), img.size[0], img.size[1], seed)["crop"]
        out = F.resized_crop(img, y, x, ch, cw, [oh, ow], interpolation=interp)
    else:
        raise ValueError(mode)
    return np.asarray(out)


RECIPES = [
    dict(size=224), dict(size=97), dict(size=224, resize_to=256), dict(size=32),
    dict(size=224, resize="stretch"), dict(size=(200, 300), resize="stretch"),
    dict(size=224, resize="random_resized_crop"), dict(size=97, resize="random_resized_crop", scale=(0.5, 1.0)),
]


@pytest.mark.parametrize("name", sorted(PHOTOS))
@pytest.mark.parametrize("resample", sorted(MODES))
def test_photos_equal_torchvision_transforms(name, resample):
    data = photo(name)
    for recipe in RECIPES:
        kw = dict(recipe, resample=resample)
        want = torchvision_recipe(data, kw, seed=7)
        # the CPU suite's reproduction is torchvision's, pixel for pixel
        assert np.array_equal(reference(data, kw, seed=7), want), kw
        mean, p999 = diff_stats(stoker_hwc(data, kw, seed=7), want)
        assert mean <= 1.0 and p999 <= 8, (kw, mean, p999)


@pytest.mark.parametrize("case", sorted(EDGE))
def test_edge_cases_equal_torchvision_transforms(case):
    make, recipes = EDGE[case]
    data = make()
    for recipe in recipes:
        if recipe.get("resize") == "longest":
            continue  # SAM's ResizeLongestSide is not a torchvision transform
        for resample in sorted(MODES):
            kw = dict(recipe, resample=resample)
            want = torchvision_recipe(data, kw, seed=3)
            assert np.array_equal(reference(data, kw, seed=3), want), kw
            mean, p999 = diff_stats(stoker_hwc(data, kw, seed=3), want)
            assert mean <= 1.0 and p999 <= 8, (case, kw, mean, p999)


def test_random_resized_crop_params_distribution_is_torchvisions():
    """stoker's crop windows against torchvision's RandomResizedCrop.get_params itself."""
    width, height, n = 500, 375, 4000
    spec = stoker.image_spec(224, resize="random_resized_crop")
    ours = np.array([_stoker.plan_sample(spec, width, height, s)["crop"] for s in range(n)], np.float64)
    torch.manual_seed(0)
    img = Image.new("RGB", (width, height))
    theirs = []
    for _ in range(n):
        i, j, h, w = tv.transforms.RandomResizedCrop.get_params(img, [0.08, 1.0], [3 / 4, 4 / 3])
        theirs.append((j, i, w, h))
    theirs = np.array(theirs, np.float64)

    def stats(a):
        area = a[:, 2] * a[:, 3] / (width * height)
        logr = np.log(a[:, 2] / a[:, 3])
        cx = (a[:, 0] + a[:, 2] / 2) / width
        return np.array([area.mean(), area.std(), logr.mean(), logr.std(), cx.mean()])

    np.testing.assert_allclose(stats(ours), stats(theirs), atol=0.03)


def test_assert_faithful_still_holds_here():
    # the CPU suite's own check, run beside torchvision's installed Pillow
    assert_faithful(photo("600x450_420"), dict(size=224), exact=True)
