"""The main job on the built-in default dataset: an SA-1B-style distillation
loop (image + precomputed features per sample) fed by stoker.

    python3 examples/train_sa1b.py            # synthesizes data/sa1b on first run

It writes a small SA-1B-like dataset with `stoker synth` (real JPEGs plus NPZ
float16 features, packed into tar shards with sidecar indexes), then trains a
tiny student network for a few epochs. Each epoch's line is the library's own
judgement (`loader.report()` over the epoch, the step timed by `loader.step()`):
samples/s, efficiency t_compute / (t_wait + t_h2d + t_compute), the p99 wait,
and the verdict with the library's thresholds — "healthy" when the input keeps
up at efficiency ≥ 0.9, otherwise the stage that starves the step and the
change to make.
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
        window=args.count // args.batch_size,  # report() judges a whole epoch
        log_every=1 << 30,  # the per-epoch line below, not the rolling one
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
        samples = 0
        start = time.perf_counter()
        for batch in loader:
            with loader.step():  # the step's time is t_compute
                pred = model(batch["jpg"])
                loss = F.mse_loss(pred, batch["features.npz"]["embeddings"].float())
                opt.zero_grad()
                loss.backward()
                opt.step()
            samples += batch["jpg"].shape[0]
        wall = time.perf_counter() - start
        print(f"epoch {epoch}: {samples / wall:7.1f} samples/s  loss {loss.item():.4f}  "
              f"{judgement(loader.report())}", flush=True)


def judgement(report: dict) -> str:
    """One line from the library's report: its golden numbers and verdict."""
    window, verdict = report["window"], report["verdict"]
    line = (f"efficiency {window['efficiency']:.2f}  t_wait p99 {window['wait_p99_s'] * 1e3:.1f} ms  "
            f"t_compute {window['compute_mean_s'] * 1e3:.1f} ms/step")
    if verdict["healthy"]:
        return line + "  -> healthy: the input keeps up"
    return (line + f"  -> {verdict['bottleneck']}: {verdict['reason']}"
            f"\n    recommendation: {verdict['recommendation']}")

if __name__ == "__main__":
    main()
