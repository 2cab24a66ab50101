"""What every framework shell shares around the pure mapping (``mapping``): where counts go,
the per-request state, and the keyword options (defined once here, taken by every shell).

Not pure: this is where a Recorder is given, built from Settings, or looked up as the process
default. Counting never raises into the host app; failures are logged once per shell.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from contextvars import ContextVar, Token
from typing import TypedDict, cast

from slicecount.config import Settings
from slicecount.core.exemplars import Trace
from slicecount.core.histogram import DEFAULT_COUNT_BUCKETS, DEFAULT_DURATION_BUCKETS
from slicecount.core.series import LabelValue
from slicecount.middleware.mapping import UNIQUE_CLIENTS_METRIC, RequestMapping
from slicecount.middleware.throttle import Throttle
from slicecount.recording import traces
from slicecount.recording.recorder import Recorder
from slicecount.recording.source import RecorderSource
from slicecount.store import Store
from slicecount.throttle.clients import KeyFunction, Peer, client_address

logger = logging.getLogger("slicecount")


class CountingOptions(TypedDict, total=False):
    """The keyword options of the counting; ``RequestCounter`` holds their defaults."""

    recorder: Recorder | None
    settings: Settings | None
    exclude_paths: Iterable[str]
    labels: Mapping[str, LabelValue] | None
    buckets: Iterable[float]
    query_buckets: Iterable[float]
    track_queries: bool
    unique_clients: KeyFunction | bool | None
    exemplars: bool


class Options(CountingOptions, total=False):
    """The keyword options of every request shell: the counting's and the throttle's."""

    limits: str | Mapping[str, str] | None
    exempt: Iterable[str]
    throttle: Throttle | None


def reusable(options: Options) -> Options:
    """A copy whose iterables can be read again (one Flask extension, several apps); an
    unknown option is refused now, not when an app is instrumented later."""
    unknown = sorted(options.keys() - Options.__optional_keys__)
    if unknown:
        raise TypeError(f"unexpected keyword arguments {unknown}")
    copy = options.copy()
    if "exempt" in copy and not isinstance(copy["exempt"], str):  # (a str: refused later)
        copy["exempt"] = tuple(copy["exempt"])
    if "exclude_paths" in copy:
        copy["exclude_paths"] = tuple(copy["exclude_paths"])
    if "buckets" in copy:
        copy["buckets"] = tuple(copy["buckets"])
    if "query_buckets" in copy:
        copy["query_buckets"] = tuple(copy["query_buckets"])
    return copy


def split_options(options: Options) -> tuple[Throttle | None, CountingOptions]:
    """(the throttle: a ``Throttle`` given, one built from ``limits=`` and ``exempt=``, or
    None without limits; the counting's options)."""
    counting = options.copy()
    throttle = counting.pop("throttle", None)
    limits = counting.pop("limits", None)
    exempt = counting.pop("exempt", ())
    rest = cast(CountingOptions, counting)
    if throttle is not None:
        if limits is not None or exempt:
            raise TypeError("give limits= and exempt= to the Throttle, not beside throttle=")
        return throttle, rest
    if limits is None:
        if exempt:
            raise TypeError("exempt= without limits= limits nothing")
        return None, rest
    from slicecount.throttle.limiter import Limiter

    # the Redis the shell counts in: its settings, its recorder's, else the environment's
    recorder = options.get("recorder")
    settings = options.get("settings") or (recorder.store.settings if recorder else None)
    if recorder is None and settings is not None:
        # one Recorder on ``settings`` for the requests, the throttle's http.throttled and the
        # limiter's errors (alone, those two would count into the environment's Redis)
        recorder = rest["recorder"] = Recorder(Store(settings))
    limiter = Limiter(settings, recorder=recorder) if settings is not None else None
    return Throttle(limits, exempt=exempt, recorder=recorder, limiter=limiter), rest


class RequestScope:
    """Per-request state that code deeper in the stack (the SQLAlchemy hook) adds to."""

    __slots__ = ("queries",)

    def __init__(self) -> None:
        self.queries = 0


current_request: ContextVar[RequestScope | None] = ContextVar("slicecount_request", default=None)
"""The request being served in this context, if a middleware with ``track_queries`` is
around it."""


class InFlight:
    """A request between its start and ``RequestCounter.end()``; shells subclass it to keep
    their own per-request state in the same (single) allocation."""

    __slots__ = ("scope", "started", "token")

    def __init__(self, track_queries: bool) -> None:
        if track_queries:  # a contextvar only when this middleware reports queries
            self.scope: RequestScope | None = RequestScope()
            self.token: Token[RequestScope | None] | None = current_request.set(self.scope)
        else:
            self.scope = self.token = None
        self.started = time.perf_counter()

    def leave(self) -> None:
        """The request's context ends: statements run later are not its (once; harmless from
        another context, such as a server thread closing the body)."""
        token = self.token
        if token is not None:
            self.token = None
            try:
                current_request.reset(token)
            except ValueError:
                pass


class RequestCounter:
    """What a request shell holds: the pure mapping, where its counts go, and whether it
    reports queries per request. The one place the options are read."""

    def __init__(
        self,
        *,
        recorder: Recorder | None = None,
        settings: Settings | None = None,
        exclude_paths: Iterable[str] = (),
        labels: Mapping[str, LabelValue] | None = None,
        buckets: Iterable[float] = DEFAULT_DURATION_BUCKETS,
        query_buckets: Iterable[float] = DEFAULT_COUNT_BUCKETS,
        track_queries: bool = False,
        unique_clients: KeyFunction | bool | None = None,
        exemplars: bool = True,
    ) -> None:
        self.source = RecorderSource(recorder, settings)
        if unique_clients is True:
            unique_clients = client_address
        elif unique_clients is not None and unique_clients is not False:
            if not callable(unique_clients):
                raise TypeError(
                    "unique_clients= takes True (the client address) or a function of a Peer, "
                    f"got {unique_clients!r}"
                )
        self.unique_key: KeyFunction | None = unique_clients or None
        self.mapping = RequestMapping(
            self.source.namer(),
            buckets=buckets,
            query_buckets=query_buckets,
            labels=labels,
            exclude_paths=exclude_paths,
        )
        self.source.watch(self.mapping.forget)
        self.excluded = self.mapping.excluded
        self.track_queries = track_queries
        self.exemplars = exemplars
        """Whether a traced request's duration keeps an exemplar (the shells look for the
        trace only then)."""
        if exemplars:
            traces.prepare()
        self._warned = False

    def end(
        self,
        inflight: InFlight,
        method: str,
        route: str | None,
        status: int,
        peer: Peer | None = None,
        trace: Trace | None = None,
    ) -> None:
        """Count a finished request (and, with ``unique_clients``, its client: ``peer``;
        ``trace``: its trace, kept with its duration as an exemplar). Never raises."""
        seconds = time.perf_counter() - inflight.started
        queries = None
        scope = inflight.scope
        if scope is not None:
            inflight.leave()
            queries = scope.queries
        recorder = self.source.fixed or self.source.get()
        if recorder is None:
            return
        try:
            entries = self.mapping.entries(method, route, status, seconds, queries)
            if trace is None:
                recorder.add_ids(entries)
            else:  # the duration's bucket is the second entry (mapping.DURATION_BUCKET)
                recorder.add_ids(entries, None, (entries[1][0], trace, seconds))
            if self.unique_key is not None and peer is not None:
                client = self.unique_key(peer)
                if client is not None:
                    labels = self.mapping.client_labels(route)
                    recorder.add_unique(UNIQUE_CLIENTS_METRIC, client, labels)
        except Exception as exc:  # never let counting reach the request
            recorder.refuse(exc)
            if not self._warned:
                self._warned = True
                logger.exception("slicecount could not record a request: %s", exc)
