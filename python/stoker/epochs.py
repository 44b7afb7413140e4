"""The epoch cursor every loader keeps (Loader, RayLoader, TokenLoader, PackedLoader):
which epoch the next iteration is, and whether it starts that epoch, continues it, or
begins the next one. Written once so that set_epoch, auto-advance and resume mean the
same in each; each loader moves its own position (the engine's run, a batch counter,
consumed samples) as the cursor says.

The rules, as the loaders' docstrings give them to the user:
- ``set_epoch(e)``: the next iteration is epoch e from its start, except that after a
  restore (``load_state_dict``; a TokenLoader's ``consumed_samples``), set_epoch of the
  restored epoch keeps the resume, so ``for e in range(loader.epoch, n):
  loader.set_epoch(e); for b in loader:`` continues exactly.
- ``iter()`` with no set_epoch since the last iter(), once every batch of the epoch was
  delivered: epoch + 1 from its start (torch's DataLoader reshuffles on every iter(); the
  loops of Lightning, Accelerate and HF Trainer rely on it).
- ``iter()`` after a restore: where the restored state stands.
- ``iter()`` after an iteration broken off mid-epoch: that epoch again from its start
  (Loader, RayLoader), or its rest (``continues=True``: TokenLoader and PackedLoader,
  whose runs are consumed once, as megatron's).

Not thread-safe: a loader's calls come from the thread that iterates it.
"""
from __future__ import annotations

from typing import Callable

# What an iteration does with the loader's position (EpochCursor.begin).
START = "start"  # the cursor's epoch from its start
NEXT = "next"  # the epoch after the one used up, from its start (the cursor's epoch is it now)
RESUME = "resume"  # where the position stands: a restored state, or the rest of a broken-off epoch


class EpochCursor:
    """The epoch of a loader's next iteration and how that iteration begins.

    >>> cursor = EpochCursor()
    >>> cursor.begin(used_up=lambda: False), cursor.epoch
    ('start', 0)
    >>> cursor.begin(used_up=lambda: True), cursor.epoch    # no set_epoch: the next epoch
    ('next', 1)
    """

    __slots__ = ("epoch", "_continues", "_chosen", "_resuming", "_starts")

    def __init__(self, *, continues: bool = False) -> None:
        self.epoch = 0
        self._continues = continues  # a broken-off epoch's next iteration: its rest (True) or its start
        self._chosen = True  # set_epoch (or the start) since the last iter(): no auto-advance
        self._resuming = False  # restored, with no iteration since: set_epoch of that epoch keeps it
        self._starts = True  # the next iteration starts `epoch` from its start (set_epoch moved there)

    @property
    def starts(self) -> bool:
        """The next iteration starts ``epoch`` from its start, and none has begun since
        it was chosen: a state saved now is that start."""
        return self._starts

    @property
    def resuming(self) -> bool:
        """Restored (``restored``) with no iteration since: the next one continues there."""
        return self._resuming

    def set_epoch(self, epoch: int) -> bool:
        """A loader's set_epoch(epoch). True where the next iteration starts ``epoch``
        from its start (the loader moves its position there, now or at iter()); False
        where it keeps a restored position (``epoch`` is the restored one)."""
        e = int(epoch)
        self._chosen = True
        if self._resuming and e == self.epoch:
            return False
        self.epoch = e
        self._resuming = False
        self._starts = True
        return True

    def begin(self, used_up: Callable[[], bool]) -> str:
        """A loader's iter(): START, NEXT or RESUME (the module's rules); ``epoch`` is
        then the iteration's. ``used_up()`` says whether every batch of ``epoch`` was
        delivered (asked only where no set_epoch since the last iter() decides)."""
        if not self._chosen and used_up():
            self.epoch += 1
            how = NEXT
        elif self._resuming or (self._continues and not self._starts):
            how = RESUME
        else:
            how = START
        self._chosen = self._resuming = self._starts = False
        return how

    def restored(self, epoch: int) -> None:
        """A state of ``epoch`` was restored: the next iteration continues it (or, if it
        was used up and no set_epoch intervenes, begins the next epoch)."""
        self.epoch = int(epoch)
        self._resuming = True
        self._chosen = False
        self._starts = False

    def __repr__(self) -> str:
        return (f"EpochCursor(epoch={self.epoch}, starts={self._starts}, resuming={self._resuming}, "
                f"chosen={self._chosen})")
