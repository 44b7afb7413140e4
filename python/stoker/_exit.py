"""What a loader still open at interpreter exit gets: its native threads stopped.

Python runs atexit handlers after joining its non-daemon threads and before
tearing down modules. A loader still open then (a script that ends without
close(), or one that a daemon thread is still iterating) has native threads
reading and decoding; when no other thread is left they are stopped here,
so no std::thread runs on into the C++ runtime's teardown.

A daemon thread that is still inside a loader call at exit is frozen by the
interpreter, never unwound, so the objects its frames hold are never freed:
nanobind would then report them as leaked instances, a refcount bug that
isn't one. Only in that case are nanobind's leak warnings turned off; every
other exit keeps them, so a real leak still shows.
"""
from __future__ import annotations

import atexit
import threading
import weakref

from . import _stoker

_open: "weakref.WeakSet" = weakref.WeakSet()


def track(loader) -> None:
    """Called by every loader once its native engine exists."""
    _open.add(loader)


def _stop_open_loaders() -> None:
    others = [t for t in threading.enumerate() if t is not threading.current_thread() and t.is_alive()]
    if others:
        # Only daemon threads are left at this point, and one of them may be
        # inside a loader call: stopping a loader under it is not safe (a
        # loader is used by one thread at a time). Their loaders stay as they
        # are, and so do the objects they hold.
        if len(_open) > 0:
            _stoker.set_leak_warnings(False)
        return
    for loader in list(_open):
        native = getattr(loader, "_native", None)
        if native is not None:
            native.stop()


atexit.register(_stop_open_loaders)
