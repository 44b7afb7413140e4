"""What every loader of the peers section (bench/run.sh --peers) provides.

A peer is one file under bench/peers/ with one subclass of ``Peer``: it writes the V
images once in its own format (``prepare``), then makes loaders for a recipe
(``loader``): ``make() -> iterable of batches``, each batch (images [B, 3, 224, 224]
uint8, labels [B]) or a dict holding them under ``image_key``. The driver
(bench/peer_suite.py) tunes each peer over its own ``grid``, keeps its best, and
alternates the bests in measured rounds. A peer that cannot be installed, prepared or
run raises ``Unavailable(reason)``: it is reported as a row with the reason, never
dropped in silence.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable


class Unavailable(Exception):
    """A peer that cannot run here; the message is the reason the suite reports."""


@dataclass
class VData:
    """The V images every peer converts: the suite's tar shards (12, webdataset.TarWriter)
    and the loose JPEG files they were packed from, in the same (index) order."""
    dir: Path                      # the workload's folder under bench/data/
    shards: list[Path]
    loose: list[tuple[str, int]]   # (path, label) in shard order
    count: int
    batch: int = 64
    size: int = 224
    made: dict = field(default_factory=dict)  # peer name -> how its format was written

    def peer_dir(self, name: str) -> Path:
        return self.dir / "peers" / name


class Peer:
    name = ""           # key in the results
    title = ""          # the row's label
    reads = ""          # what it reads, for the table
    image_key: object = 0  # where a batch holds its images (tuple index or dict key)
    grid: list = []     # its own knobs; the first point is the quick mode's
    requires: tuple = ()  # modules that must import; else Unavailable names the missing one

    def setting_text(self, setting) -> str:
        return str(setting)

    def images(self, batch):
        """The batch's image tensor (its first dimension counts the samples)."""
        return batch[self.image_key]

    def check(self) -> None:
        import importlib

        for m in self.requires:
            try:
                importlib.import_module(m)
            except Exception as e:  # noqa: BLE001 - a broken install is a reason too
                raise Unavailable(f"import {m} failed: {type(e).__name__}: {str(e)[:200]} "
                                  "(bench/run.sh installs requirements-bench.txt)") from e

    def prepare(self, v: VData) -> None:
        """Write the V images in this peer's own format (once; reused by later runs)."""

    def loader(self, v: VData, recipe: str, setting) -> Callable:
        raise NotImplementedError

    def start(self) -> None:
        """Before each of its epochs, outside the timing: bring up a runtime it needs."""

    def stop(self) -> None:
        """After each of its epochs, outside the timing: take that runtime down, so it uses
        no CPU while the other loaders are measured."""

    def close(self) -> None:
        """Release what the peer holds at the end of the section."""


def build_once(d: Path, write: Callable[[Path], str]) -> str:
    """Run write(d) unless d/DONE exists; write returns how the data was made (kept in DONE)."""
    done = d / "DONE"
    if not done.exists():
        t0 = time.perf_counter()
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
        how = write(d)
        done.write_text(how + "\n")
        print(f"  made {d.name} in {time.perf_counter() - t0:.0f} s: {how}", flush=True)
    return done.read_text().strip()
