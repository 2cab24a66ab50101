"""The process-wide default Recorder behind ``slicecount.event()``, configured from Settings."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from slicecount.config import Settings
from slicecount.core.histogram import DEFAULT_DURATION_BUCKETS
from slicecount.core.series import LabelValue
from slicecount.recording.recorder import Recorder
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


def current() -> Recorder | None:
    """The default Recorder if one was made (configured, or by a first use), else None."""
    return _recorder


def use(settings: Settings) -> Recorder:
    """The default Recorder on ``settings``: the current one when it was built on equal
    settings (a framework's configuration read again, by another app or a test client), else
    a new one (``configure``)."""
    current = _recorder
    if current is not None and current.store.settings == settings:
        return current
    return configure(settings)


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
    recorder = _recorder or _first_use("event")
    if recorder is not None:
        recorder.add(name, n, labels or None)


def _first_use(what: str) -> Recorder | None:
    """The default Recorder on first use, or None for good when the settings are bad (they
    must not break the app's request)."""
    global _broken
    if _broken:
        return None
    try:
        return get_recorder()
    except Exception as exc:
        _broken = True
        logger.error("slicecount.%s is disabled: %s", what, exc)
        return None


def unique(
    name: str, value: str, /, *, exact: bool = False, first_seen: bool = False, **labels: LabelValue
) -> None:
    """Note that ``value`` (a user id, a client, an API key...) was seen now in the unique
    series ``name``: each slice counts its distinct values, e.g.
    ``slicecount.unique("active.users", user_id, plan="pro")``. ``exact=True`` also lists them
    (up to ``unique_exact_cap`` per slice); ``first_seen=True`` also counts each value once per
    slice into the ordinary counter ``name``. Never raises, never waits on the network."""
    recorder = _recorder or _first_use("unique")
    if recorder is not None:
        recorder.add_unique(name, value, labels or None, exact=exact, first_seen=first_seen)


def observe(
    name: str,
    value: float,
    /,
    *,
    exemplar: Mapping[str, str] | None = None,
    buckets: Iterable[float] = DEFAULT_DURATION_BUCKETS,
    **labels: LabelValue,
) -> None:
    """Observe ``value`` now in the histogram ``name`` (a duration in seconds, a size...),
    e.g. ``slicecount.observe("job.duration", 2.5, queue="mail", exemplar={"trace_id": t,
    "span_id": s})``: its bucket counts, its sum, and the exemplar kept beside the bucket.
    Never raises, never waits on the network."""
    recorder = _recorder or _first_use("observe")
    if recorder is not None:
        recorder.observe(name, value, labels or None, exemplar=exemplar, buckets=buckets)


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
