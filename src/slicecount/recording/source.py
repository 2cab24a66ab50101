"""Where a shell's counts go: a Recorder given, one built from Settings, or the process default
looked up at each use. Shared by the request middleware, the query hooks and the task workers."""

from __future__ import annotations

import logging
from collections.abc import Callable

from slicecount.config import Settings
from slicecount.core.series import Labels
from slicecount.recording import default
from slicecount.recording.recorder import Recorder
from slicecount.store import Store

logger = logging.getLogger("slicecount")


class RecorderSource:
    """A fixed Recorder (given, or built from ``settings``), else the process default looked
    up at each use, so that ``slicecount.configure()`` after start-up still takes effect (it
    is built here all the same: ConfigurationError now, when the environment is bad).

    A core mapping built on ``namer()`` registers its ``forget`` with ``watch()``: when the
    default Recorder is replaced, ids the old one named are dropped and the new one admits
    them again (its cardinality guard sees them)."""

    __slots__ = ("_current", "_forgets", "_warned", "fixed")

    def __init__(self, recorder: Recorder | None = None, settings: Settings | None = None) -> None:
        if recorder is None and settings is not None:
            recorder = Recorder(Store(settings))
        elif recorder is None:  # built now: bad SLICECOUNT_* settings fail at start-up
            default.get_recorder()
        self.fixed = recorder
        self._current = recorder
        self._forgets: list[Callable[[], None]] = []
        self._warned = False

    def get(self) -> Recorder | None:
        """The Recorder to count into now; None (logged once) if the default cannot be built."""
        if self.fixed is not None:
            return self.fixed
        try:
            recorder = default.get_recorder()
        except Exception as exc:  # bad SLICECOUNT_* settings: count nothing, serve everything
            if not self._warned:
                self._warned = True
                logger.error("slicecount middleware records nothing: %s", exc)
            return None
        if recorder is not self._current:
            self._current = recorder
            for forget in self._forgets:
                forget()
        return recorder

    def namer(self) -> Callable[[str, Labels], str]:
        """The series namer for a core mapping: the fixed Recorder's, or one that follows the
        default (through ``get()``)."""
        return self.fixed.series_id if self.fixed is not None else self._series_id

    def watch(self, forget: Callable[[], None]) -> None:
        self._forgets.append(forget)

    def _series_id(self, name: str, labels: Labels) -> str:
        recorder = self._current or self.get()
        if recorder is None:
            raise LookupError("no Recorder to name series with")
        return recorder.series_id(name, labels)
