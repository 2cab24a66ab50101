"""The process-wide default Recorder behind ``slicecount.event()``, configured from Settings."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from slicecount.config import Settings
from slicecount.recorder import Recorder
from slicecount.series import LabelValue
from slicecount.store import Store

logger = logging.getLogger("slicecount")

_lock = threading.Lock()
_recorder: Recorder | None = None
_broken = False


def configure(settings: Settings | None = None, **overrides: Any) -> Recorder:
    """Replace the default Recorder (the previous one is flushed and closed).

    With no arguments the settings come from the ``SLICECOUNT_*`` environment; keyword
    arguments are Settings fields and win over the environment.
    """
    global _recorder, _broken
    if settings is None:
        settings = Settings.from_env(**overrides)
    elif overrides:
        settings = settings.with_changes(**overrides)
    new = Recorder(Store(settings))
    with _lock:
        old, _recorder, _broken = _recorder, new, False
    if old is not None:
        old.close()
    return new


def get_recorder() -> Recorder:
    """The default Recorder, created from the environment on first use."""
    recorder = _recorder
    if recorder is not None:
        return recorder
    with _lock:
        if _recorder is None:
            return _create_locked()
        return _recorder


def _create_locked() -> Recorder:
    global _recorder
    _recorder = Recorder(Store(Settings.from_env()))
    return _recorder


def event(name: str, n: int = 1, /, **labels: LabelValue) -> None:
    """Count ``n`` occurrences of an application event now, e.g.
    ``slicecount.event("signups", plan="pro")``. Never raises, never waits on the network."""
    global _broken
    recorder = _recorder
    if recorder is None:
        if _broken:
            return
        try:
            recorder = get_recorder()
        except Exception as exc:  # bad SLICECOUNT_* settings must not break the app's request
            _broken = True
            logger.error("slicecount.event is disabled: %s", exc)
            return
    recorder.add(name, n, labels or None)


def annotate(
    text: str,
    tags: Sequence[str] = (),
    when: float | None = None,
    end: float | None = None,
    title: str = "",
) -> dict[str, Any]:
    """Record an annotation (deploy marker...) through the default Recorder's store, now.

    Unlike ``event()`` this writes at once and raises ``StoreError`` if Redis is unreachable:
    it is meant for deploy scripts, which want to know.
    """
    return get_recorder().store.annotate(text, tags, when, end, title)
