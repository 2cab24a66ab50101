"""Exemplars in Redis: written with the counts (a chunk sent again changes nothing), the last
of every (bucket series, minute) kept, the bound (oldest out first), the cleaner's retention,
every topology and both layouts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from slicecount.cleaner import Cleaner
from slicecount.config import Settings
from slicecount.core.exemplars import Exemplar, trace_labels
from slicecount.core.series import encode
from slicecount.operations.batches import Batch, Operation
from slicecount.operations.chunking import prepare
from slicecount.recording.exemplar_buffer import Exemplars, exemplars
from slicecount.recording.losses import REJECTED_METRIC
from slicecount.recording.recorder import Recorder
from slicecount.store import Store

T0 = 1_700_006_400  # a whole minute (and day)
ROUTES = ("/a", "/b")


def ids(n: int) -> tuple[str, str]:
    """A trace id and a span id, distinct for every ``n``."""
    return f"{n + 1:032x}", f"{n + 1:016x}"


def bucket(route: str, le: str) -> str:
    labels = {"le": le, "method": "GET", "route": route}
    return encode("http.request.duration.bucket", labels)


class Clock:
    """The recorders' clock: an observation moves it to its time (a count's time may lie at
    most ``max_future`` ahead of it)."""

    def __init__(self) -> None:
        self.now = float(T0)

    def __call__(self) -> float:
        return self.now


CLOCK = Clock()


@pytest.fixture
def recorder(store: Store) -> Iterator[Recorder]:
    CLOCK.now = T0
    recorder = Recorder(store, flush_interval=3600, clock=CLOCK)
    yield recorder
    recorder.close()


def observe(recorder: Recorder, route: str, value: float, n: int, at: float) -> None:
    CLOCK.now = max(CLOCK.now, at)
    trace_id, span_id = ids(n)
    labels = {"method": "GET", "route": route}
    exemplar = {"trace_id": trace_id, "span_id": span_id}
    recorder.observe("http.request.duration", value, labels, exemplar=exemplar, now=at)


@pytest.mark.topologies
@pytest.mark.layouts("book", "blocks")
def test_the_last_exemplar_of_every_minute_and_bucket_is_kept(
    store: Store, recorder: Recorder
) -> None:
    sent: dict[tuple[str, int], tuple[int, float, float]] = {}  # (series, minute) -> last
    n = 0
    for minute in range(3):
        for second in (1, 17, 33, 59):  # a flush after each: later ones replace in Redis
            at = T0 + minute * 60 + second + 0.25
            for route in ROUTES:
                for value in (0.003, 0.02 + minute / 1000):  # buckets 0.005 and 0.025
                    observe(recorder, route, value, n, at)
                    le = "0.005" if value < 0.005 else "0.025"
                    sent[(bucket(route, le), minute)] = (n, value, at)
                    n += 1
            assert recorder.flush()
    found = store.exemplars([s for s, _ in sent], T0, T0 + 180)
    assert {s for s, _ in sent} == set(found)
    for series_id, kept in found.items():
        assert len(kept) == 3  # one a minute
        for minute, exemplar in enumerate(kept):
            number, value, at = sent[(series_id, minute)]
            assert exemplar == Exemplar(trace_labels(*ids(number)), value, at)
    # a range asks for what lies inside it, to the millisecond
    one = bucket("/a", "0.025")
    assert [e.time for e in store.exemplars([one], T0 + 60, T0 + 119.25)[one]] == [T0 + 119.25]
    assert store.exemplars([one], T0 + 119.251, T0 + 120) == {}
    # and the counts went in as well: 24 observations a route and minute
    assert sum(n for _, n in store.get("http.request.duration.bucket", 60, {
        "le": "0.025", "method": "GET", "route": "/a"})) == 12  # fmt: skip


@pytest.mark.topologies
def test_a_chunk_sent_again_writes_neither_counts_nor_exemplars_twice(store: Store) -> None:
    series_id = bucket("/a", "0.005")
    exemplar = Exemplar(trace_labels(*ids(1)), 0.004, T0 + 1.5)
    (chunk,), _, _ = prepare(store.context, {T0 + 1: {series_id: 1}}, [(series_id, exemplar)])
    first = store.write_chunk(chunk, "w", 1)
    again = store.write_chunk(chunk, "w", 1)  # the first reply was "lost": sent again as it is
    assert first == (False, 0, 0) and again == (True, 0, 0)
    assert store.get("http.request.duration.bucket", 1, {
        "le": "0.005", "method": "GET", "route": "/a"}) == [(T0 + 1, 1)]  # fmt: skip
    assert store.exemplars([series_id], T0, T0 + 60) == {series_id: [exemplar]}


def test_past_the_bound_the_oldest_minutes_go_first(
    redis_url: str, redis_client: redis.Redis
) -> None:
    CLOCK.now = T0
    with Store(Settings(redis_url=redis_url, max_exemplars=50)) as store:
        recorder = Recorder(store, flush_interval=3600, clock=CLOCK)
        for minute in range(80):  # 80 minutes of one bucket, 20 a flush
            observe(recorder, "/a", 0.001, minute, T0 + minute * 60)
            if minute % 20 == 19:
                assert recorder.flush()
        recorder.close()
        series_id = bucket("/a", "0.005")
        kept = store.exemplars([series_id], T0, T0 + 3600 * 2)[series_id]
    assert redis_client.zcard(store.keys.exemplars()) == 50
    assert [e.time for e in kept] == [T0 + minute * 60 for minute in range(30, 80)]


@pytest.mark.slow
def test_the_default_bound_holds_past_100_000(
    store: Store, redis_client: redis.Redis, recorder: Recorder
) -> None:
    """100 bucket series x 1 002 minutes: 100 200 exemplars, the 200 oldest dropped."""
    assert store.settings.max_exemplars == 100_000
    routes = [f"/r{i}" for i in range(100)]
    for minute in range(1002):
        for i, route in enumerate(routes):
            observe(recorder, route, 0.001, minute * 100 + i, T0 + minute * 60 + 0.5)
        if minute % 100 == 99 or minute == 1001:
            assert recorder.flush()
    key = store.keys.exemplars()
    assert redis_client.zcard(key) == 100_000
    first = str(redis_client.zrange(key, 0, 0)[0])
    assert first.startswith(f"{T0 // 60 + 2:010d}:")  # minutes 0 and 1 went, all of them
    found = store.exemplars([bucket(r, "0.005") for r in routes], T0, T0 + 1002 * 60)
    assert sum(len(kept) for kept in found.values()) == 100_000


@pytest.mark.layouts("book", "blocks")
def test_the_cleaner_keeps_exemplars_within_retention(
    store: Store, redis_client: redis.Redis, recorder: Recorder
) -> None:
    retention = store.settings.exemplar_retention
    now = T0 + retention + 3600
    for minute in range(120):  # two hours: the first one past retention at ``now``
        observe(recorder, "/a", 0.001, minute, T0 + minute * 60 + 30)
    assert recorder.flush()
    key = store.keys.exemplars()
    assert 0 < redis_client.ttl(key) <= retention  # a set nobody writes to goes by itself
    stats = Cleaner(store, clock=lambda: now, writers_clock=lambda: T0 + 7200).run_once()
    assert stats is not None and stats.exemplars == 60
    series_id = bucket("/a", "0.005")
    kept = store.exemplars([series_id], T0, now)[series_id]
    assert [e.time for e in kept] == [T0 + minute * 60 + 30 for minute in range(60, 120)]
    again = Cleaner(store, clock=lambda: now + 60, writers_clock=lambda: T0 + 7200).run_once()
    assert again is not None and again.exemplars == 1


def test_the_cleaner_takes_a_long_backlog_in_bounded_steps(
    store: Store, redis_client: redis.Redis, recorder: Recorder
) -> None:
    from slicecount.operations import trimming

    for minute in range(5000):
        observe(recorder, "/a", 0.001, minute, T0 + minute * 60)
    assert recorder.flush()
    sent: list[int] = []
    operation = trimming.trim_exemplars(store.context, T0 + 4999 * 60)
    reply: list[Any] | None = None
    while True:  # driven by hand, to see each command's reach
        try:
            batch = next(operation) if reply is None else operation.send(reply)
        except StopIteration as done:
            removed = done.value
            break
        reply = store.run(relay(batch))
        first = batch.commands[0]
        if isinstance(first, tuple) and first[0] == "ZREMRANGEBYLEX":
            sent.append(int(reply[0]))
    assert removed == 4999 and sent == [2000, 2000, 999]
    assert redis_client.zcard(store.keys.exemplars()) == 1


def relay(batch: Batch) -> Operation[list[Any]]:
    replies = yield batch
    return replies


def test_with_max_exemplars_0_none_is_kept(redis_url: str, redis_client: redis.Redis) -> None:
    with Store(Settings(redis_url=redis_url, max_exemplars=0)) as store:
        recorder = Recorder(store, flush_interval=3600)
        assert not recorder.keeps_exemplars
        observe(recorder, "/a", 0.001, 1, T0)
        assert recorder.flush()
        recorder.close()
        assert store.exemplars([bucket("/a", "0.005")], T0, T0 + 60) == {}
    assert redis_client.exists("exemplars:") == 0
    assert redis_client.zcard("known:") > 0  # the counts went in


def test_observe_counts_and_refuses_what_it_cannot_keep(store: Store, recorder: Recorder) -> None:
    recorder.observe("job.duration", 2, {"queue": "mail"}, now=T0)
    recorder.observe("job.duration", 0.2, {"queue": "mail"}, exemplar={"trace_id": "x"}, now=T0)
    recorder.observe("job.duration", float("nan"), {"queue": "mail"}, now=T0)
    recorder.observe("job.duration", "3", {"queue": "mail"}, now=T0)  # type: ignore[arg-type]
    recorder.observe("job.duration", 1.0, exemplar={"bad name": "x"}, now=T0)
    recorder.observe("job duration", 1.0, now=T0)
    assert recorder.flush()
    labels = {"queue": "mail"}
    buckets = {
        s: sum(n for _, n in store.get("job.duration.bucket", 60, {**labels, "le": le}))
        for s, le in (("2.5", "2.5"), ("0.25", "0.25"))
    }
    assert buckets == {"2.5": 1, "0.25": 1}
    assert store.get("job.duration.sum_us", 60, labels) == [(T0, 2_200_000)]
    found = store.exemplars([encode("job.duration.bucket", {**labels, "le": "0.25"})], T0, T0)
    assert [e.labels for kept in found.values() for e in kept] == [(("trace_id", "x"),)]
    rejected = {
        reason: sum(n for _, n in store.get(REJECTED_METRIC, 60, {"reason": reason}))
        for reason in ("not_a_count", "invalid_label", "invalid_name")
    }
    assert rejected == {"not_a_count": 2, "invalid_label": 1, "invalid_name": 1}


def test_the_buffer_keeps_the_last_of_a_minute_and_its_bound() -> None:
    waiting = Exemplars(2)
    waiting.add("a", trace_labels(*ids(1)), 0.1, T0 + 1)
    waiting.add("a", trace_labels(*ids(2)), 0.2, T0 + 59)  # same minute: replaces
    waiting.add("b", b"00-" + b"1" * 32 + b"-" + b"2" * 16 + b"-01", 0.3, T0 + 2)
    waiting.add("a", b"not a header at all, but sampled by its flags ............1", 0.4, T0 + 60)
    assert len(waiting) == 2  # the oldest, a's first minute, went past the bound
    taken = exemplars(waiting.take())
    assert taken == [("b", Exemplar(trace_labels("1" * 32, "2" * 16), 0.3, T0 + 2))]
    assert len(waiting) == 0


def test_observations_from_threads_keep_one_exemplar_a_minute(
    store: Store, recorder: Recorder
) -> None:
    def observe_many(k: int) -> None:
        for i in range(200):
            observe(recorder, "/a", 0.001, k * 1000 + i, T0 + (i % 3) * 60 + k)

    threads = [threading.Thread(target=observe_many, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert recorder.flush()
    series_id = bucket("/a", "0.005")
    kept = store.exemplars([series_id], T0, T0 + 180)[series_id]
    assert sorted(int(e.time - T0) // 60 for e in kept) == [0, 1, 2]
