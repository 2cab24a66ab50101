"""The process around the Recorders: fork, exit and ``close_all``.

The hooks register with the first Recorder, so importing slicecount changes nothing in the host
process. After ``fork()`` every Recorder of the child starts empty (the parent's buffer is the
parent's to write, and its flusher thread does not exist in the child); at interpreter exit
every Recorder that still holds counts writes them.
"""

from __future__ import annotations

import atexit
import os
import weakref
from typing import Protocol

CLOSE_TIMEOUT = 5.0
"""Seconds ``close()`` (and interpreter exit) keeps trying to write what is buffered."""


class Buffered(Protocol):
    def reset(self) -> None: ...
    def has_unwritten(self) -> bool: ...
    def close(self, timeout: float = CLOSE_TIMEOUT) -> bool: ...


_live: weakref.WeakSet[Buffered] = weakref.WeakSet()
_hooks_registered = False


def track(recorder: Buffered) -> None:
    """Remember a Recorder for ``close_all``, fork and exit (registering the hooks once)."""
    global _hooks_registered
    _live.add(recorder)
    if not _hooks_registered:
        _hooks_registered = True
        os.register_at_fork(after_in_child=_reset_after_fork)
        atexit.register(_close_at_exit)


def close_all(timeout: float = CLOSE_TIMEOUT) -> bool:
    """Flush and stop every Recorder of this process (gunicorn ``worker_exit``, shutdown hooks)."""
    return all([recorder.close(timeout) for recorder in list(_live)])


def _reset_after_fork() -> None:
    for recorder in list(_live):
        recorder.reset()


def _close_at_exit() -> None:
    for recorder in list(_live):
        if recorder.has_unwritten():
            recorder.close()
