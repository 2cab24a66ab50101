"""The rate-limit operations against real servers: one server, a Redis Cluster and Sentinel.

Every worker has a store of its own and an injected clock, so windows are hit on purpose,
never by the wall clock."""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Sequence
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier

import pytest
import redis

from slicecount.config import Settings
from slicecount.errors import ConfigurationError
from slicecount.store import Store
from slicecount.throttle import operations as throttling
from slicecount.throttle.decision import Counts, Decision, Strategy, decide, window_of
from slicecount.throttle.limits import Limit, parse_limits

T0 = 1_700_000_000  # T0 - 20 is a multiple of 60, T0 - 800 of 3600
TEN = parse_limits("10/second")
WINDOWS = 10
THREADS = 8
PROCESSES = 2
TRIES = 5  # asks per worker and window: 50 asks for 10 places
IDENTITY = "user}{1"  # a brace in it must not break the hash tag on the cluster


def hit(
    store: Store,
    limits: Sequence[Limit],
    identity: str,
    strategy: str = "fixed",
    *,
    cost: int = 1,
    now: float | None = None,
) -> Decision:
    """The throttle's hit, run on ``store`` (as the limiter runs it)."""
    return store.run(throttling.hit(store.context, limits, identity, strategy, cost=cost, now=now))


def claim(store: Store, limit: Limit, identity: str, want: int) -> int:
    return store.run(throttling.claim(store.context, limit, identity, want))


def give_back(store: Store, limit: Limit, identity: str, window: int, n: int) -> int:
    return store.run(throttling.give_back(store.context, limit, identity, window, n))


def hammer(url: str, strategy: Strategy, start: Barrier | None = None) -> list[int]:
    """Hits admitted per window by one worker: TRIES asks in each of WINDOWS windows, all
    workers entering each window together (its counter lives about a second of real time)."""
    now = [0.0]
    admitted = [0] * WINDOWS
    with Store(Settings(redis_url=url), clock=lambda: now[0]) as store:
        for k in range(WINDOWS):
            if start is not None:
                start.wait(60)
            for j in range(TRIES):
                now[0] = T0 + k + (j + 0.5) / (TRIES + 1)
                admitted[k] += hit(store, TEN, IDENTITY, strategy).allowed
    return admitted


def _process(url: str, strategy: Strategy, start: Barrier, out: Queue[list[int]]) -> None:
    out.put(hammer(url, strategy, start))


def hammer_everywhere(url: str, strategy: Strategy) -> list[int]:
    """Admitted per window by THREADS threads and PROCESSES processes at once."""
    context = multiprocessing.get_context("spawn")  # fresh processes, as app workers are
    out: Queue[list[int]] = context.Queue()
    start = context.Barrier(THREADS + PROCESSES)
    processes = [
        context.Process(target=_process, args=(url, strategy, start, out)) for _ in range(PROCESSES)
    ]
    for process in processes:
        process.start()
    found: list[list[int]] = []
    threads = [
        threading.Thread(target=lambda: found.append(hammer(url, strategy, start)))
        for _ in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    found += [out.get(timeout=120) for _ in processes]
    for process in processes:
        process.join(60)
        assert process.exitcode == 0
    assert len(found) == THREADS + PROCESSES
    return [sum(worker[k] for worker in found) for k in range(WINDOWS)]


@pytest.mark.slow
@pytest.mark.topologies
def test_each_fixed_window_admits_exactly_the_limit_whoever_asks(redis_url: str) -> None:
    assert (THREADS + PROCESSES) * TRIES > 10 * 4  # far more asks than places
    assert hammer_everywhere(redis_url, "fixed") == [10] * WINDOWS


@pytest.mark.slow
@pytest.mark.topologies
def test_sliding_windows_never_admit_past_the_limit(redis_url: str) -> None:
    per_window = hammer_everywhere(redis_url, "sliding")
    assert per_window[0] == 10  # nothing before it: the fixed window's count
    assert all(0 < n <= 10 for n in per_window), per_window


@pytest.mark.topologies
@pytest.mark.parametrize("strategy", ["sliding", "fixed"])
def test_redis_decides_as_the_pure_math_does(settings: Settings, strategy: Strategy) -> None:
    # a steady flood, then a burst late in a window, then a flood again: hit by hit, the
    # script's test and windows.decide agree (the same doubles, in the same order)
    limits = parse_limits("7/2 seconds; 20/10 seconds; 1000/hour")
    times = [T0 + i / 50 for i in range(300)] + [T0 + 7.999] * 5
    times += [T0 + 8 + i / 100 for i in range(300)]
    now = [0.0]
    counts: dict[tuple[int, int], int] = {}  # (limit, window) -> admitted
    refusers = set()
    with Store(settings, clock=lambda: now[0]) as store:
        for t in times:
            now[0] = t
            windows = [window_of(limit, t) for limit in limits]
            seen = [
                Counts(counts.get((i, w - 1), 0) if strategy == "sliding" else 0,
                       counts.get((i, w), 0))
                for i, w in enumerate(windows)
            ]  # fmt: skip
            expected = decide(limits, strategy, t, seen)
            assert hit(store, limits, "steady", strategy) == expected, t
            for i, w in enumerate(windows):
                counts[i, w] = counts.get((i, w), 0) + expected.allowed
            if not expected.allowed:
                refusers.add(expected.limit)
    assert refusers == set(limits[:2])  # each of the two short limits refused some


@pytest.mark.topologies
def test_every_limit_must_admit_and_a_refusal_counts_nowhere(
    settings: Settings, redis_client: redis.Redis
) -> None:
    hour, second = parse_limits("1000/hour; 5/second")
    now = [T0 + 0.1]
    with Store(settings, clock=lambda: now[0]) as store:
        for k in range(3):
            now[0] = T0 + k + 0.1
            decisions = [hit(store, (hour, second), "u") for _ in range(8)]
            assert [d.allowed for d in decisions] == [True] * 5 + [False] * 3
            assert {d.limit for d in decisions[4:]} == {second}
            assert decisions[4].remaining == 0 and decisions[0].remaining == 4
        hour_key = store.keys.throttle("u", 1000, 3600, int(T0 // 3600))
        assert redis_client.get(hour_key) == "15"  # the 9 refused hits left no trace
        # near the hour's end the hour decides
        redis_client.set(hour_key, 999)
        now[0] = T0 + 3.5
        last, refused = hit(store, (hour, second), "u"), hit(store, (hour, second), "u")
        assert (last.allowed, last.limit, last.remaining) == (True, hour, 0)
        assert (refused.allowed, refused.limit) == (False, hour)
        assert refused.retry_after == (int(T0 // 3600) + 1) * 3600 - int(T0 + 3.5)
        assert redis_client.get(store.keys.throttle("u", 5, 1, T0 + 3)) == "1"


@pytest.mark.topologies
def test_counters_expire_by_themselves(settings: Settings, redis_client: redis.Redis) -> None:
    minute = Limit(5, 60, "5/minute")
    now = [T0 + 40 + 15.0]  # 15 s into a minute
    with Store(settings, clock=lambda: now[0]) as store:
        hit(store, [minute], "fixed")
        hit(store, [minute], "sliding", "sliding")
        claim(store, minute, "claimed", 2)
        window = int(now[0] // 60)
        fixed = redis_client.pttl(store.keys.throttle("fixed", 5, 60, window))
        sliding = redis_client.pttl(store.keys.throttle("sliding", 5, 60, window))
        claimed = redis_client.pttl(store.keys.throttle("claimed", 5, 60, window))
    # to the window's end (45 s), plus one for sliding (read as "previous" then), plus 1 s grace
    assert 45_000 < fixed <= 46_000
    assert 105_000 < sliding <= 106_000
    assert 45_000 < claimed <= 46_000
    assert not redis_client.exists(store.keys.throttle("sliding", 5, 60, window - 1))


@pytest.mark.topologies
def test_claims_never_pass_the_limit_and_give_back_only_what_exists(
    settings: Settings, redis_client: redis.Redis
) -> None:
    limit = Limit(10, 60, "10/minute")
    now = [T0 + 20.5]
    window = int(now[0] // 60)
    with Store(settings, clock=lambda: now[0]) as store:
        key = store.keys.throttle(IDENTITY, 10, 60, window)
        assert [claim(store, limit, IDENTITY, 4) for _ in range(4)] == [4, 4, 2, 0]
        assert redis_client.get(key) == "10"
        assert give_back(store, limit, IDENTITY, window, 3) == 3
        assert redis_client.get(key) == "7"
        assert claim(store, limit, IDENTITY, 5) == 3
        assert give_back(store, limit, IDENTITY, window, 50) == 10  # never below zero
        assert redis_client.get(key) == "0"
        assert give_back(store, limit, IDENTITY, window - 1, 5) == 0  # gone: nothing to return
        assert not redis_client.exists(store.keys.throttle(IDENTITY, 10, 60, window - 1))
        assert give_back(store, limit, IDENTITY, window, 0) == 0
        # hits and claims share the window's counter
        assert claim(store, limit, IDENTITY, 9) == 9
        assert hit(store, [limit], IDENTITY).allowed
        assert not hit(store, [limit], IDENTITY).allowed
        assert claim(store, limit, IDENTITY, 1) == 0


def test_bad_arguments_raise_before_any_round_trip() -> None:
    # a server that does not exist: an argument check that sent anything would fail otherwise
    with Store.from_url("redis://127.0.0.1:1/0", socket_timeout=0.5) as store:
        cases: list[tuple[Callable[[], object], str]] = [
            (lambda: hit(store, [], "u"), "non-empty sequence of Limit"),
            (lambda: hit(store, "10/second", "u"), "non-empty sequence of Limit"),  # type: ignore[arg-type]
            (lambda: hit(store, ["10/second"], "u"), "must be Limit objects"),  # type: ignore[list-item]
            (lambda: hit(store, parse_limits("1/second") * 2, "u"), "'1/second' is given twice"),
            (lambda: hit(store, TEN, 5), "identity must be a string, got 5"),  # type: ignore[arg-type]
            (lambda: hit(store, TEN, "u", "moving"), "unknown throttle strategy 'moving'"),
            (lambda: hit(store, TEN, "u", cost=11), r"cost must be an integer 1 \.\. 10.* got 11"),
            (lambda: hit(store, TEN, "u", cost=0), "got 0"),
            (lambda: hit(store, TEN, "u", cost=True), "got True"),
            (lambda: hit(store, TEN, "u", now=-1), "now must be an epoch time"),
            (lambda: claim(store, TEN[0], "u", 0), "tokens wanted must be an integer >= 1, got 0"),
            (lambda: give_back(store, TEN[0], "u", 1.5, 1), "give_back needs a window index"),  # type: ignore[arg-type]
            (lambda: give_back(store, TEN[0], "u", 1, -1), "give_back needs"),
        ]
        for call, message in cases:
            with pytest.raises(ConfigurationError, match=message):
                call()


def test_a_cost_counts_as_that_many_hits(store: Store, redis_client: redis.Redis) -> None:
    decisions = [hit(store, TEN, "c", cost=cost, now=T0 + 0.5) for cost in (4, 4, 4, 2, 1)]
    assert [(d.allowed, d.remaining) for d in decisions] == [
        (True, 6), (True, 2), (False, 2), (True, 0), (False, 0)
    ]  # fmt: skip
    assert redis_client.get(store.keys.throttle("c", 10, 1, T0)) == "10"


def test_a_lost_script_is_loaded_again(store: Store, redis_client: redis.Redis) -> None:
    assert hit(store, TEN, "u", now=T0).allowed
    redis_client.script_flush()
    assert hit(store, TEN, "u", now=T0).remaining == 8
