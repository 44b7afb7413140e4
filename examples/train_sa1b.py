"""The main job on the built-in default dataset: an SA-1B-style distillation
loop (image + precomputed features per sample) fed by stoker.

    python3 examples/train_sa1b.py            # synthesizes data/sa1b on first run

It writes a small SA-1B-like dataset with `stoker synth` (real JPEGs plus NPZ
float16 features, packed into tar shards with sidecar indexes), then trains a
tiny student network for a few epochs and prints, per epoch, samples/s and the
three numbers that say whether input keeps up: t_wait (the step waited for
data), t_compute (the step itself) and their ratio.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import stoker
from stoker import _cli


def ensure_dataset(root: Path, count: int) -> str:
    shards = sorted(root.glob("sa1b-*.tar"))
    if not shards:
        root.mkdir(parents=True, exist_ok=True)
        print(f"synthesizing {count} SA-1B-like samples into {root} ...", flush=True)
        subprocess.run([_cli.binary(), "synth", str(root), "--kind", "sa1b", "--count", str(count),
                        "--layout", "shards", "--shard-size", "32MB"], check=True)
        shards = sorted(root.glob("sa1b-*.tar"))
    return str(root / "sa1b-*.tar")


class Student(torch.nn.Module):
    """Maps a downsampled image to the teacher's feature grid."""

    def __init__(self, channels: int, grid: int) -> None:
        super().__init__()
        self.grid = grid
        self.net = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(32, channels, 3, stride=2, padding=1))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        x = F.interpolate(images, size=(self.grid * 4, self.grid * 4), mode="area")
        return self.net(x)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data/sa1b", help="dataset folder (made if missing)")
    ap.add_argument("--count", type=int, default=256, help="samples to synthesize")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--size", type=int, default=1024, help="longer image side after resize")
    ap.add_argument("--decode-threads", type=int, default=None, help="unset: tuned while it runs")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))
    shards = ensure_dataset(Path(args.data), args.count)
    loader = stoker.Loader(
        shards,
        fields={
            "jpg": stoker.image(args.size, resize="longest", dtype="float32", normalize=True),
            "features.npz": stoker.npz(),
        },
        batch_size=args.batch_size, shuffle=True, seed=0, key_rule="underscore",
        decode_threads=args.decode_threads,
    )
    plan = loader.plan
    print(f"{plan.dataset_samples} samples in {plan.num_shards} shard(s); {len(loader)} batches/epoch "
          f"of {args.batch_size}; dropped {plan.dropped_samples}")

    probe = next(iter(loader))
    teacher = probe["features.npz"]["embeddings"]
    model = Student(teacher.shape[1], teacher.shape[-1])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    del probe, teacher

    for epoch in range(args.epochs):
        loader.set_epoch(epoch)
        t_wait = t_compute = 0.0
        waits = []
        samples = 0
        start = time.perf_counter()
        mark = start
        for batch in loader:
            got = time.perf_counter()
            waits.append(got - mark)
            pred = model(batch["jpg"])
            loss = F.mse_loss(pred, batch["features.npz"]["embeddings"].float())
            opt.zero_grad()
            loss.backward()
            opt.step()
            mark = time.perf_counter()
            t_compute += mark - got
            samples += batch["jpg"].shape[0]
        wall = time.perf_counter() - start
        t_wait = sum(waits)
        verdict = "input keeps up" if t_wait < t_compute else "INPUT-BOUND"
        print(f"epoch {epoch}: {samples / wall:7.1f} samples/s  loss {loss.item():.4f}  "
              f"t_wait {t_wait:6.2f}s (max {max(waits) * 1e3:6.1f} ms)  t_compute {t_compute:6.2f}s  "
              f"-> {verdict}", flush=True)


if __name__ == "__main__":
    main()
