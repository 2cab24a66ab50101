"""The process around the Recorders: fork, exit and ``close_all``.

The hooks register with the first Recorder, so importing slicecount changes nothing in the host
process. After ``fork()`` every Recorder of the child starts empty (the parent's buffer is the
parent's to write, and its flusher thread does not exist in the child); at interpreter exit
every Recorder that still holds counts writes them (in a ``multiprocessing`` child too, which
skips atexit). ``Live`` is the fork half for any kind of object (the throttle's limiters too).
"""

from __future__ import annotations

import atexit
import os
import weakref
from collections.abc import Callable, Iterator
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class Live(Generic[T]):
    """The live objects of one kind in this process (weakly held), each reset by ``reset`` in
    a forked child. The fork hook registers with the first object, not at import."""

    def __init__(self, reset: Callable[[T], None]) -> None:
        self._objects: weakref.WeakSet[T] = weakref.WeakSet()
        self._reset = reset
        self._hooked = False

    def add(self, thing: T) -> bool:
        """Remember ``thing``; True the first time (when the fork hook registered)."""
        self._objects.add(thing)
        if self._hooked:
            return False
        self._hooked = True
        os.register_at_fork(after_in_child=self._after_fork)
        return True

    def __iter__(self) -> Iterator[T]:
        return iter(list(self._objects))  # a copy: a member may go while the caller walks

    def _after_fork(self) -> None:
        for thing in self:
            self._reset(thing)


class Buffered(Protocol):
    gave_up: bool  # its last close() could not write everything (Redis away)

    def reset(self) -> None: ...
    def has_unwritten(self) -> bool: ...
    def close(self, timeout: float | None = None) -> bool: ...
    def flush_within(self, timeout: float | None = None) -> bool: ...


_live: Live[Buffered] = Live(lambda recorder: recorder.reset())


def track(recorder: Buffered) -> None:
    """Remember a Recorder for ``close_all``, fork and exit (registering the hooks once)."""
    if _live.add(recorder):
        atexit.register(_close_at_exit)
        from multiprocessing import util

        util.register_after_fork(_children, _finalize_in_child)


def close_all(timeout: float | None = None) -> bool:
    """Flush and stop every Recorder of this process (gunicorn ``worker_exit``, shutdown
    hooks), each trying for ``timeout`` seconds (default: its ``close_timeout`` setting)."""
    return all([recorder.close(timeout) for recorder in _live])


def flush_all(timeout: float | None = None) -> bool:
    """Write what every Recorder of this process holds, each trying for ``timeout`` seconds
    (default: its ``close_timeout``), and leave them running: for an end the process cannot
    hook otherwise (an event loop closing under a server that re-raises its signal)."""
    return all([recorder.flush_within(timeout) for recorder in _live])


class _Children:
    """Owner of the multiprocessing hook (it keeps only a weak reference to one)."""


_children = _Children()


def _finalize_in_child(_: object) -> None:
    # A multiprocessing child leaves through os._exit, past atexit; its finalizers run first.
    # (Registered here, after multiprocessing cleared the ones the parent had.)
    from multiprocessing import util

    util.Finalize(None, _close_at_exit, exitpriority=10)


def _close_at_exit() -> None:
    for recorder in _live:
        # one that gave up already (worker_exit's close_all) has said what it lost: trying
        # again would only hold the exit up by another close_timeout
        if recorder.has_unwritten() and not recorder.gave_up:
            recorder.close()
