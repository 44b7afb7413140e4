"""Writes JPEG fixtures with Pillow plus Pillow's own RGB decode of each.

Usage: python3 make_pillow_fixtures.py DIR
       STOKER_PILLOW_FIXTURE_DIR=DIR build/codecs/test_codecs_jpeg_test --gtest_filter=*PillowFixtures*
Each <name>.jpg gets <name>.rgb: raw HWC uint8 of Image.open(jpg).convert("RGB").
"""
import os
import sys

import numpy as np
from PIL import Image


def image(w, h, c, rng):
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([128 + 80 * np.sin(x / 17.0 + k) * np.cos(y / 23.0 - k) + x * 0.1 for k in range(c)], -1)
    return np.clip(a + rng.normal(0, 6, (h, w, c)), 0, 255).astype(np.uint8)


def main(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(0)
    cases = [("rgb420", 500, 375, dict(subsampling=2, quality=90)),
             ("rgb444", 333, 251, dict(subsampling=0, quality=95)),
             ("rgb422", 257, 199, dict(subsampling=1, quality=85)),
             ("prog420", 301, 207, dict(subsampling=2, quality=90, progressive=True))]
    for name, w, h, kw in cases:
        Image.fromarray(image(w, h, 3, rng)).save(os.path.join(out, name + ".jpg"), **kw)
    Image.fromarray(image(211, 97, 1, rng)[..., 0], "L").save(os.path.join(out, "gray.jpg"), quality=90)
    Image.fromarray(image(160, 120, 4, rng), "CMYK").save(os.path.join(out, "cmyk.jpg"), quality=90)
    # 4:2:0 and 4:2:2 CMYK: layouts TurboJPEG 2.1 cannot classify (libjpeg fallback).
    for name, ss in (("cmyk420", 2), ("cmyk422", 1)):
        Image.fromarray(image(131, 97, 4, rng), "CMYK").save(os.path.join(out, name + ".jpg"), quality=90,
                                                            subsampling=ss)
    for f in sorted(os.listdir(out)):
        if f.endswith(".jpg"):
            rgb = np.asarray(Image.open(os.path.join(out, f)).convert("RGB"))
            with open(os.path.join(out, f[:-4] + ".rgb"), "wb") as fh:
                fh.write(rgb.tobytes())


if __name__ == "__main__":
    main(sys.argv[1])
