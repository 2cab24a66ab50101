"""The process around the Recorders: fork, exit and ``close_all``.

The hooks register with the first Recorder, so importing slicecount changes nothing in the host
process. After ``fork()`` every Recorder of the child starts empty (the parent's buffer is the
parent's to write, and its flusher thread does not exist in the child); at interpreter exit
every Recorder that still holds counts writes them (in a ``multiprocessing`` child too, which
skips atexit).
"""

from __future__ import annotations

import atexit
import os
import weakref
from typing import Protocol


class Buffered(Protocol):
    gave_up: bool  # its last close() could not write everything (Redis away)

    def reset(self) -> None: ...
    def has_unwritten(self) -> bool: ...
    def close(self, timeout: float | None = None) -> bool: ...


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
        from multiprocessing import util

        util.register_after_fork(_children, _finalize_in_child)


def close_all(timeout: float | None = None) -> bool:
    """Flush and stop every Recorder of this process (gunicorn ``worker_exit``, shutdown
    hooks), each trying for ``timeout`` seconds (default: its ``close_timeout`` setting)."""
    return all([recorder.close(timeout) for recorder in list(_live)])


def _reset_after_fork() -> None:
    for recorder in list(_live):
        recorder.reset()


class _Children:
    """Owner of the multiprocessing hook (it keeps only a weak reference to one)."""


_children = _Children()


def _finalize_in_child(_: object) -> None:
    # A multiprocessing child leaves through os._exit, past atexit; its finalizers run first.
    # (Registered here, after multiprocessing cleared the ones the parent had.)
    from multiprocessing import util

    util.Finalize(None, _close_at_exit, exitpriority=10)


def _close_at_exit() -> None:
    for recorder in list(_live):
        # one that gave up already (worker_exit's close_all) has said what it lost: trying
        # again would only hold the exit up by another close_timeout
        if recorder.has_unwritten() and not recorder.gave_up:
            recorder.close()
