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
        "stop_at_first": _stoker.MixLaw.stop_at_first, "counts": _stoker.MixLaw.counts}


_KEY_RULES = ("webdataset", "underscore")


class Source:
    """One source of a :func:`mix`, with what is its own: its weight, the
    member names it gives the loader's fields, and its key rule::

        stoker.mix({"laion": stoker.Source("laion-{000..099}.tar", 0.7),
                    "coco": stoker.Source("coco-{00..09}.tar", 0.3, members={"jpg": "jpeg", "cls": "label.cls"})})

    ``members`` maps a field of the loader (a key of its ``fields``) to the
    member field that holds it in this source, so sources that name their
    members differently fill one schema (a field it does not name is read
    from the member of its own name). ``key_rule`` is this source's
    (``"webdataset"`` or ``"underscore"``; default: the loader's)."""

    def __init__(self, source: str | os.PathLike, weight: float | None = None, *,
                 members: Mapping[str, str] | None = None, key_rule: str | None = None) -> None:
        if not isinstance(source, (str, os.PathLike)):
            raise ValueError(f"stoker.Source takes one source string (a pattern such as 'a-{{000..009}}.tar', a "
                             f"manifest, a folder), not {source!r}")
        members = dict(members or {})
        for field, member in members.items():
            if not isinstance(field, str) or not isinstance(member, str) or not field or not member:
                raise ValueError(f"stoker.Source members maps a field name to a member name, not {field!r}: {member!r}")
        if key_rule is not None and key_rule not in _KEY_RULES:
            raise ValueError(f"key_rule must be one of {list(_KEY_RULES)}, not {key_rule!r}")
        self.source, self.weight, self.members, self.key_rule = os.fspath(source), weight, members, key_rule

    def __repr__(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in (("members", self.members), ("key_rule", self.key_rule)) if v)
        return f"stoker.Source({self.source!r}, {self.weight!r}{extra})"


class Mixture:
    """Sources by name, each with a weight, and the law that makes an epoch of
    them; pass it to :class:`stoker.Loader` as its sources. Made by :func:`mix`."""

    def __init__(self, sources: Mapping[str, Any], samples_per_epoch: int | None, law: str | None,
                 one_source_per_batch: bool = False, repeat: Mapping[str, float] | None = None,
                 choose: Mapping[str, int] | None = None) -> None:
        if not isinstance(sources, Mapping) or not sources:
            raise ValueError("stoker.mix takes a dict {name: (source, weight)} of at least one source")
        if law is not None and law not in _LAW:
            raise ValueError(f"law must be one of {sorted(_LAW)}, not {law!r}")
        if repeat or choose:
            if law not in (None, "counts"):
                raise ValueError(f"repeat= and choose= set each source's draws an epoch (law 'counts'), not law {law!r}")
            law = "counts"
        self.names: list[str] = []
        self.sources: list[str] = []
        self.weights: list[float] = []
        self.members: list[list[tuple[str, str]]] = []
        self.key_rules: list[str | None] = []
        given = []  # which sources were given a weight
        for name, entry in sources.items():
            members, key_rule = {}, None
            if isinstance(entry, Source):
                source, weight, members, key_rule = entry.source, entry.weight, entry.members, entry.key_rule
            elif isinstance(entry, (str, os.PathLike)):
                source, weight = entry, None
            elif isinstance(entry, tuple) and len(entry) == 2:
                source, weight = entry
            else:
                raise ValueError(f"source {name!r}: give (source, weight), a stoker.Source or, with law='proportion', "
                                 f"the source alone, not {entry!r}")
            if not isinstance(source, (str, os.PathLike)):
                raise ValueError(f"source {name!r}: one source string per name (a pattern such as "
                                 f"'a-{{000..009}}.tar', a manifest, a folder), not {source!r}")
            given.append(weight is not None)
            if law == "counts" and weight is not None:
                raise ValueError(f"source {name!r}: under repeat=/choose= (law 'counts') give the source alone; "
                                 "its draws an epoch are its repeat (default 1) or its choose")
            if weight is None:
                if law not in ("proportion", "counts", None):
                    raise ValueError(f"source {name!r} has no weight; weights are needed unless law='proportion'")
                weight = 1.0
            weight = float(weight)
            if not math.isfinite(weight) or weight < 0:
                raise ValueError(f"source {name!r} has weight {weight}; a weight is a number >= 0")
            self.names.append(str(name))
            self.sources.append(os.fspath(source))
            self.weights.append(weight)
            self.members.append(sorted(members.items()))
            self.key_rules.append(key_rule)
        if law is None and any(given) and not all(given):
            raise ValueError("give every source a weight, or none (then each is drawn by its size: law='proportion')")
        self._weighted = all(given)
        if not self._weighted and samples_per_epoch is not None and law != "counts":
            raise ValueError("samples_per_epoch draws by weight: give each source a weight")
        if sum(self.weights) <= 0:
            raise ValueError("every source of the mixture has weight 0")
        if samples_per_epoch is not None and int(samples_per_epoch) < 1:
            raise ValueError(f"samples_per_epoch must be at least 1, not {samples_per_epoch}")
        self.repeat, self.choose = self._counts(repeat or {}, choose or {}) if law == "counts" else ([], [])
        if samples_per_epoch is not None and law not in (None, "sample"):
            raise ValueError(f"samples_per_epoch is law 'sample''s epoch length; law {law!r} sets its own")
        if one_source_per_batch and (law not in (None, "sample") or samples_per_epoch is None):
            raise ValueError("one_source_per_batch needs law 'sample' and samples_per_epoch (a multiple of "
                             "batch_size x world_size)")
        self.samples_per_epoch = samples_per_epoch
        self.law = law
        self.one_source_per_batch = bool(one_source_per_batch)

    def _counts(self, repeat: Mapping[str, float], choose: Mapping[str, int]) -> tuple[list[float], list[int]]:
        """Each source's repeat (default 1) and choose (-1: none), in source order."""
        for given, what in ((repeat, "repeat"), (choose, "choose")):
            unknown = sorted(set(given) - set(self.names))
            if unknown:
                raise ValueError(f"{what}= names {unknown}, which are not sources of the mixture {self.names}")
        both = sorted(set(repeat) & set(choose))
        if both:
            raise ValueError(f"sources {both} have both a repeat and a choose; give each one or the other")
        repeats, chooses = [], []
        for name in self.names:
            r = float(repeat.get(name, 1.0))
            if not math.isfinite(r) or r < 0:
                raise ValueError(f"source {name!r} has repeat {r}; a repeat is a number >= 0 (passes an epoch)")
            c = choose.get(name)
            if c is not None and (isinstance(c, bool) or not isinstance(c, int) or c < 0):
                raise ValueError(f"source {name!r} has choose {c!r}; a choose is a whole number of samples >= 0")
            repeats.append(r)
            chooses.append(-1 if c is None else c)
        return repeats, chooses

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
        if law == "counts":
            m.weights, m.choose = self.repeat, self.choose
        m.samples_per_epoch = int(self.samples_per_epoch or 0)
        if any(self.members):
            m.members = self.members
        if any(self.key_rules):
            m.key_rules = [r or "" for r in self.key_rules]  # "": the loader's
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
        if self.law == "counts":
            parts = ", ".join(f"{n!r}: {s!r}" for n, s in zip(self.names, self.sources))
            repeat = {n: r for n, r, c in zip(self.names, self.repeat, self.choose) if c < 0}
            choose = {n: c for n, c in zip(self.names, self.choose) if c >= 0}
            return f"stoker.mix({{{parts}}}, repeat={repeat}, choose={choose})"
        parts = ", ".join(f"{n!r}: ({s!r}, {w})" for n, s, w in zip(self.names, self.sources, self.weights))
        return f"stoker.mix({{{parts}}}, samples_per_epoch={self.samples_per_epoch}, law={self.law!r})"


def mix(sources: Mapping[str, Any], *, samples_per_epoch: int | None = None, law: str | None = None,
        one_source_per_batch: bool = False, repeat: Mapping[str, float] | None = None,
        choose: Mapping[str, int] | None = None) -> Mixture:
    """Several sources in one loader, each drawn by its weight::

        stoker.Loader(stoker.mix({"laion": ("laion-{000..099}.tar", 0.7),
                                  "coco": ("coco-{00..09}.tar", 0.3)}),
                      fields=..., batch_size=64, shuffle=True)

    Each value is ``(source, weight)``, or the source alone for every one
    (then each is drawn by its size, law ``"proportion"``): a source string as ``stoker.Loader``
    takes one (tar shards with their indexes or a manifest, Parquet files,
    an image folder; Parquet beside tar too, each source's passes in its own
    order as a loader of it alone picks it). The law makes the epoch:

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
      ``longest=False``);
    * ``"counts"`` (Mosaic Streaming's ``repeat`` / ``choose``, implied by
      ``repeat=`` or ``choose=``, each a dict by source name; give the
      sources alone): each source draws exactly ``choose`` samples an epoch,
      or ``repeat`` times its size (default 1, fractions allowed), and the
      epoch is their sum; a source's passes run on across epochs as under
      ``"sample"``, so ``choose`` below its size takes a fresh part of its
      pass each epoch::

          stoker.mix({"laion": "laion-{000..099}.tar", "coco": "coco-{00..09}.tar"},
                     choose={"laion": 100_000}, repeat={"coco": 2})

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
    return Mixture(sources, samples_per_epoch, law, one_source_per_batch, repeat, choose)
