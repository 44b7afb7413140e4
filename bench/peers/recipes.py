"""The two V recipes every Python peer runs per sample, with Pillow (what torchvision's
transforms do on PIL images, done the cheaper way: one resize of the needed box).

    eval   Resize(224) + CenterCrop(224), antialiased bilinear
    train  RandomResizedCrop(224, scale=(0.08, 1), ratio=(3/4, 4/3)) + RandomHorizontalFlip

stoker's rows ask for the same recipes (stoker.image(resize="center_crop") and
resize="random_resized_crop", random_hflip=True), so every row does equal work.
"""
from __future__ import annotations

import io
import math
import random

import numpy as np

EVAL, TRAIN = "eval", "train"
RECIPES = {EVAL: "Resize(224) + CenterCrop(224)", TRAIN: "RandomResizedCrop(224) + RandomHorizontalFlip"}


def random_resized_box(width: int, height: int, rng: random.Random, scale=(0.08, 1.0),
                       ratio=(3 / 4, 4 / 3)) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop.get_params: (left, top, w, h) of the crop."""
    area = width * height
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(*log_ratio))
        w = int(round(math.sqrt(target * aspect)))
        h = int(round(math.sqrt(target / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return rng.randint(0, width - w), rng.randint(0, height - h), w, h
    # fallback: a central crop at the nearest allowed ratio
    in_ratio = width / height
    if in_ratio < ratio[0]:
        w, h = width, int(round(width / ratio[0]))
    elif in_ratio > ratio[1]:
        w, h = int(round(height * ratio[1])), height
    else:
        w, h = width, height
    return (width - w) // 2, (height - h) // 2, w, h


class PillowRecipe:
    """JPEG bytes or a PIL image -> CHW uint8 torch tensor. Picklable (DataLoader workers,
    Ray tasks); the train recipe draws from Python's `random`, which the DataLoader seeds
    per worker."""

    def __init__(self, recipe: str, size: int = 224) -> None:
        if recipe not in RECIPES:
            raise ValueError(f"recipe {recipe!r}: one of {sorted(RECIPES)}")
        self.recipe, self.size = recipe, size

    def hwc(self, data) -> np.ndarray:
        from PIL import Image

        img = Image.open(io.BytesIO(data)) if isinstance(data, (bytes, bytearray, memoryview)) else data
        if img.mode != "RGB":
            img = img.convert("RGB")
        w, h = img.size
        if self.recipe == EVAL:
            s = min(w, h)
            box = ((w - s) / 2, (h - s) / 2, (w + s) / 2, (h + s) / 2)
            return np.asarray(img.resize((self.size, self.size), Image.BILINEAR, box=box))
        left, top, cw, ch = random_resized_box(w, h, random)
        out = img.resize((self.size, self.size), Image.BILINEAR, box=(left, top, left + cw, top + ch))
        if random.random() < 0.5:
            out = out.transpose(Image.FLIP_LEFT_RIGHT)
        return np.asarray(out)

    def __call__(self, data):
        import torch

        return torch.from_numpy(self.hwc(data)).permute(2, 0, 1)
