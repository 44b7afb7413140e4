"""NVIDIA Megatron-Energon: the suite's WebDataset shards after `energon prepare`
(non-interactive: split all train, ImageClassificationSample with image <- jpg,
label <- cls), read by get_val_dataset (eval: in order, no shuffle) or
get_train_dataset (train: its shard-slice shuffle + a 1,000-sample buffer), a task
encoder whose decoder hands PIL images to the recipe, and energon's get_loader with
WorkerConfig(num_workers). The shards are hard links in the peer's folder, so
energon's .nv-meta never lands in the suite's data."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .base import Peer, VData, build_once


def task_encoder(recipe: str, size: int):
    from megatron.energon import DefaultTaskEncoder, ImageClassificationSample
    from megatron.energon.flavors.webdataset.sample_decoder import SampleDecoder

    from .recipes import PillowRecipe

    fn = PillowRecipe(recipe, size)

    class Encoder(DefaultTaskEncoder):
        decoder = SampleDecoder(image_decode="pil")

        def encode_sample(self, sample):
            return ImageClassificationSample.derive_from(sample, image=fn(sample.image), label=sample.label)

    return Encoder()


class Energon(Peer):
    name, title, reads = "energon", "Megatron-Energon get_loader", "WebDataset shards + `energon prepare` index"
    grid = [3, 2, 4]
    requires = ("megatron.energon", "torch")

    def setting_text(self, s) -> str:
        return f"num_workers={s}"

    def images(self, batch):
        return batch.image

    def prepare(self, v: VData) -> None:
        def write(d: Path) -> str:
            for p in v.shards:
                try:
                    os.link(p, d / p.name)
                except OSError:
                    os.symlink(p, d / p.name)
            cmd = [sys.executable, "-m", "megatron.energon.cli.main", "prepare", str(d), "--non-interactive",
                   "--split-ratio", "1,0,0", "--sample-type", "ImageClassificationSample",
                   "--field-map", json.dumps({"image": "jpg", "label": "cls"}), "--num-workers", "2",
                   "--no-progress"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                raise RuntimeError(f"energon prepare failed ({r.returncode}): {(r.stderr or r.stdout)[-400:]}")
            return "energon prepare --non-interactive --split-ratio 1,0,0 --sample-type ImageClassificationSample " \
                   "--field-map '{\"image\": \"jpg\", \"label\": \"cls\"}' (hard links to the tar shards)"

        v.made[self.name] = build_once(v.peer_dir(self.name), write)
        self.dir = v.peer_dir(self.name)

    def loader(self, v: VData, recipe: str, workers: int):
        from megatron.energon import WorkerConfig, get_loader, get_train_dataset, get_val_dataset

        from .recipes import TRAIN

        # The dataset (its index, shard slices, task encoder) is built once per grid point, as a
        # job builds it once; each epoch is a fresh get_loader over it (its workers start there).
        wc = WorkerConfig(rank=0, world_size=1, num_workers=workers)
        te = task_encoder(recipe, v.size)
        if recipe == TRAIN:
            ds = get_train_dataset(self.dir, worker_config=wc, batch_size=v.batch, batch_drop_last=True,
                                   shuffle_buffer_size=1000, max_samples_per_sequence=100, repeat=False,
                                   task_encoder=te)
        else:
            ds = get_val_dataset(self.dir, split_part="train", worker_config=wc, batch_size=v.batch,
                                 batch_drop_last=True, task_encoder=te)

        def make():
            return get_loader(ds)

        return make
