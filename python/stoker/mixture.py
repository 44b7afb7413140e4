"""stoker.mix: several sources in one Loader, each drawn by its weight.

The order is the engine's (src/pipeline/mix_order.h): a pure function of
(seed, epoch, weights, the sources' sizes) that every rank cuts as it cuts
one dataset. Here we only check and carry the user's description.
"""
from __future__ import annotations

import math
import os
from typing import Any, Mapping

from . import _stoker

_LAW = {"sample": _stoker.MixLaw.sample, "proportion": _stoker.MixLaw.proportion,
        "stop_at_first": _stoker.MixLaw.stop_at_first}


class Mixture:
    """Sources by name, each with a weight, and the law that makes an epoch of
    them; pass it to :class:`stoker.Loader` as its sources. Made by :func:`mix`."""

    def __init__(self, sources: Mapping[str, Any], samples_per_epoch: int | None, law: str | None,
                 one_source_per_batch: bool = False) -> None:
        if not isinstance(sources, Mapping) or not sources:
            raise ValueError("stoker.mix takes a dict {name: (source, weight)} of at least one source")
        if law is not None and law not in _LAW:
            raise ValueError(f"law must be one of {sorted(_LAW)}, not {law!r}")
        self.names: list[str] = []
        self.sources: list[str] = []
        self.weights: list[float] = []
        given = []  # which sources were given a weight
        for name, entry in sources.items():
            if isinstance(entry, (str, os.PathLike)):
                source, weight = entry, None
            elif isinstance(entry, tuple) and len(entry) == 2:
                source, weight = entry
            else:
                raise ValueError(f"source {name!r}: give (source, weight) or, with law='proportion', the source "
                                 f"alone, not {entry!r}")
            if not isinstance(source, (str, os.PathLike)):
                raise ValueError(f"source {name!r}: one source string per name (a pattern such as "
                                 f"'a-{{000..009}}.tar', a manifest, a folder), not {source!r}")
            given.append(weight is not None)
            if weight is None:
                if law not in ("proportion", None):
                    raise ValueError(f"source {name!r} has no weight; weights are needed unless law='proportion'")
                weight = 1.0
            weight = float(weight)
            if not math.isfinite(weight) or weight < 0:
                raise ValueError(f"source {name!r} has weight {weight}; a weight is a number >= 0")
            self.names.append(str(name))
            self.sources.append(os.fspath(source))
            self.weights.append(weight)
        if law is None and any(given) and not all(given):
            raise ValueError("give every source a weight, or none (then each is drawn by its size: law='proportion')")
        self._weighted = all(given)
        if not self._weighted and samples_per_epoch is not None:
            raise ValueError("samples_per_epoch draws by weight: give each source a weight")
        if sum(self.weights) <= 0:
            raise ValueError("every source of the mixture has weight 0")
        if samples_per_epoch is not None and int(samples_per_epoch) < 1:
            raise ValueError(f"samples_per_epoch must be at least 1, not {samples_per_epoch}")
        if samples_per_epoch is not None and law not in (None, "sample"):
            raise ValueError(f"samples_per_epoch is law 'sample''s epoch length; law {law!r} sets its own")
        if one_source_per_batch and (law not in (None, "sample") or samples_per_epoch is None):
            raise ValueError("one_source_per_batch needs law 'sample' and samples_per_epoch (a multiple of "
                             "batch_size x world_size)")
        self.samples_per_epoch = samples_per_epoch
        self.law = law
        self.one_source_per_batch = bool(one_source_per_batch)

    def options(self, partition: str, batch_size: int = 1, world_size: int = 1) -> Any:
        """The engine's MixOptions. Without a law: 'proportion' (each sample
        of each source once an epoch) where no weights are given or under
        partition='exact' (without samples_per_epoch), else 'sample'."""
        exact = partition == "exact" and self.samples_per_epoch is None
        law = self.law or ("proportion" if not self._weighted or exact else "sample")
        m = _stoker.MixOptions()
        m.names = self.names
        m.weights = self.weights
        m.law = _LAW[law]
        m.samples_per_epoch = int(self.samples_per_epoch or 0)
        if self.one_source_per_batch:
            if law != "sample":
                raise ValueError("one_source_per_batch needs law 'sample'")
            if m.samples_per_epoch % (batch_size * world_size):
                raise ValueError(f"one_source_per_batch: samples_per_epoch {m.samples_per_epoch} must be a multiple "
                                 f"of batch_size x world_size ({batch_size} x {world_size}), so every rank's batches "
                                 "fall on whole runs of one source")
            m.one_source_per_batch = True
        return m

    def __repr__(self) -> str:
        parts = ", ".join(f"{n!r}: ({s!r}, {w})" for n, s, w in zip(self.names, self.sources, self.weights))
        return f"stoker.mix({{{parts}}}, samples_per_epoch={self.samples_per_epoch}, law={self.law!r})"


def mix(sources: Mapping[str, Any], *, samples_per_epoch: int | None = None, law: str | None = None,
        one_source_per_batch: bool = False) -> Mixture:
    """Several sources in one loader, each drawn by its weight::

        stoker.Loader(stoker.mix({"laion": ("laion-{000..099}.tar", 0.7),
                                  "coco": ("coco-{00..09}.tar", 0.3)}),
                      fields=..., batch_size=64, shuffle=True)

    Each value is ``(source, weight)``, or the source alone for every one
    (then each is drawn by its size, law ``"proportion"``): a source string as ``stoker.Loader``
    takes one (tar shards with their indexes or a manifest, Parquet files,
    an image folder; all Parquet or none). The law makes the epoch:

    * ``"sample"`` (the default): an epoch is ``samples_per_epoch`` draws
      (default: the sources' total), each source's share its weight over the
      sum; a source draws its samples without replacement within a pass of
      its own, and one that runs out starts its next pass, freshly shuffled,
      so passes run on across epochs;
    * ``"proportion"``: the weights are the sources' sizes (given weights are
      ignored): an epoch is one pass of every source, each sample once. The
      default under ``partition="exact"``, for evaluation;
    * ``"stop_at_first"``: each epoch starts a fresh pass of every source and
      ends before the first would run out (webdataset's ``RandomMix`` with
      ``longest=False``).

    Batches are mixed: with ``shuffle=True`` a batch's share of a source is
    within a sample or two of weight x batch_size (stratified, not a binomial
    draw) and its draws sit in random slots. Each batch names each sample's
    source in ``__source__`` beside ``__key__`` and ``__url__``.
    ``one_source_per_batch=True`` (law ``"sample"``, ``samples_per_epoch`` a
    multiple of batch_size x world_size) makes every batch one source's (the
    batches' sources drawn by weight), as multi-task training and
    aspect-ratio buckets want; the state
    and ``report()["mix"]`` carry each source's draws, pass and delivered
    counts; ``settings["order"]`` states the law. A state restored with
    other weights draws by them from the next batch (docs/guides/user-code.md, "Mixtures").
    A skipped sample (``on_error="skip"``) is refilled from its own source."""
    return Mixture(sources, samples_per_epoch, law, one_source_per_batch)
