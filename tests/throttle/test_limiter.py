"""The Limiter against real servers: verdicts, the deadline with Redis stopped or paused
(SIGSTOP), fail-open and fail-closed, the errors counted, the asyncio twin, the local quota."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager

import pytest

from slicecount.config import Settings
from slicecount.embedded import EmbeddedRedis
from slicecount.errors import ConfigurationError
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from slicecount.throttle import Limiter, Verdict, parse_limits
from slicecount.throttle.limiter import ERRORS

T0 = 1_700_000_000
TEN = parse_limits("10/second")
DEADLINE = 0.1  # checks against a healthy Redis must pass within it on a loaded CI host
BOUND = 1.0  # generous: what a check may take with Redis away (a few deadlines, plus a loaded CI)
EASY = 1.0  # the deadline of tests about something else (a loaded machine may take 5 ms)


class Clock:
    """A clock the test moves (shared by every thread of a limiter)."""

    def __init__(self, now: float = T0 + 0.5) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def recorder(store: Store) -> Iterator[Recorder]:
    with Recorder(store) as recorder:
        yield recorder


def errors_counted(recorder: Recorder) -> int:
    recorder.flush()
    return sum(n for _, n in recorder.store.get(ERRORS, 86400))


@contextmanager
def paused(server: EmbeddedRedis) -> Iterator[None]:
    """The server frozen by SIGSTOP: it accepts connections (the kernel does) and never
    answers, like a Redis stuck in a long command or a swapping host."""
    pid = server.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def timed(call: Callable[[], Verdict]) -> tuple[Verdict, float]:
    start = time.perf_counter()
    verdict = call()
    return verdict, time.perf_counter() - start


@pytest.mark.topologies
def test_verdicts_pass_then_429(settings: Settings, recorder: Recorder) -> None:
    with Limiter(settings, clock=Clock(), recorder=recorder, deadline=EASY) as limiter:
        verdicts = [limiter.check(TEN, "client") for _ in range(12)]
    assert [v.status for v in verdicts] == [None] * 10 + [429] * 2
    assert [v.allowed for v in verdicts] == [True] * 10 + [False] * 2
    first, last = verdicts[0].decision, verdicts[-1].decision
    assert first is not None and (first.remaining, first.reset, first.retry_after) == (9, 0.5, 0)
    assert last is not None and (last.allowed, last.retry_after) == (False, 1)
    assert errors_counted(recorder) == 0


def test_the_sliding_strategy(settings: Settings, recorder: Recorder) -> None:
    clock = Clock(T0 + 0.5)
    with Limiter(
        settings, strategy="sliding", clock=clock, recorder=recorder, deadline=EASY
    ) as limiter:
        assert sum(limiter.check(TEN, "c").allowed for _ in range(15)) == 10
        clock.now = T0 + 1.5  # half the previous window still counts: 5 places
        assert sum(limiter.check(TEN, "c").allowed for _ in range(15)) == 5


def test_bad_arguments_raise_even_with_redis_away(recorder: Recorder) -> None:
    settings = Settings(redis_url="redis://127.0.0.1:1/0")
    with Limiter(settings, recorder=recorder) as limiter:
        with pytest.raises(ConfigurationError, match="non-empty sequence of Limit"):
            limiter.check([], "c")
        with pytest.raises(ConfigurationError, match="identity must be a string, got None"):
            limiter.check(TEN, None)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="given twice"):
            asyncio.run(limiter.check_async(TEN * 2, "c"))
    assert errors_counted(recorder) == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"deadline": 0}, "deadline must be a positive number of seconds, got 0"),
        ({"deadline": "fast"}, "deadline must be a positive number of seconds, got 'fast'"),
        ({"strategy": "leaky"}, "unknown throttle strategy 'leaky'"),
        ({"local_quota": 0}, "local_quota must be an integer >= 1, got 0"),
        ({"local_quota": 2.5}, "got 2.5"),
        ({"local_quota": 10, "strategy": "sliding"}, "local_quota works with the fixed window"),
    ],
)
def test_bad_options_are_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        Limiter(Settings(), **options)  # type: ignore[arg-type]


def test_redis_stopped_fails_open_and_counts_each_check(
    private_redis: EmbeddedRedis, recorder: Recorder
) -> None:
    settings = Settings(redis_url=private_redis.url)
    with Limiter(settings, deadline=DEADLINE, recorder=recorder, clock=Clock()) as limiter:
        assert limiter.check(TEN, "c").decision is not None
        private_redis.stop()
        verdicts = [timed(lambda: limiter.check(TEN, "c")) for _ in range(5)]
        assert all(v == Verdict(None, None) and v.allowed for v, _ in verdicts)
        assert max(took for _, took in verdicts) < BOUND
        assert errors_counted(recorder) == 5
        private_redis.start()
        back = limiter.check(TEN, "c")  # a restarted, empty server: counting again
        assert back.decision is not None and back.decision.remaining == 9
    assert errors_counted(recorder) == 5


def test_redis_stopped_fails_closed_with_503(
    private_redis: EmbeddedRedis, recorder: Recorder
) -> None:
    private_redis.stop()
    settings = Settings(redis_url=private_redis.url)
    with Limiter(settings, deadline=DEADLINE, fail_closed=True, recorder=recorder) as limiter:
        verdict = limiter.check(TEN, "c")
        assert verdict == Verdict(None, 503) and not verdict.allowed
        assert asyncio.run(limiter.check_async(TEN, "c")) == Verdict(None, 503)
    assert errors_counted(recorder) == 2


def test_errors_go_to_the_process_wide_recorder_by_default(
    recorder: Recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("slicecount.recording.default._recorder", recorder)
    with Limiter(Settings(redis_url="redis://127.0.0.1:1/0"), deadline=DEADLINE) as limiter:
        assert limiter.check(TEN, "c") == Verdict(None, None)
    assert errors_counted(recorder) == 1


@pytest.mark.slow
def test_redis_paused_costs_about_the_deadline(
    private_redis: EmbeddedRedis, recorder: Recorder
) -> None:
    settings = Settings(redis_url=private_redis.url)
    fresh = Limiter(settings, deadline=DEADLINE, recorder=recorder)  # no connection yet
    with Limiter(settings, deadline=DEADLINE, recorder=recorder) as limiter:
        assert limiter.check(TEN, "c").allowed  # a pooled connection to the server
        with paused(private_redis):
            verdicts = [timed(lambda: limiter.check(TEN, "c")) for _ in range(3)]
            verdicts.append(timed(lambda: fresh.check(TEN, "c")))
            closed = Limiter(settings, deadline=DEADLINE, fail_closed=True, recorder=recorder)
            verdicts.append(timed(lambda: closed.check(TEN, "c")))
        assert [v.status for v, _ in verdicts] == [None] * 4 + [503]
        assert all(v.decision is None for v, _ in verdicts)
        assert all(DEADLINE * 0.9 <= took < BOUND for _, took in verdicts), verdicts
        assert limiter.check(TEN, "c").decision is not None  # answers again once resumed
    fresh.close()
    closed.close()
    assert errors_counted(recorder) == 5


def test_the_async_check_never_blocks_the_loop(
    private_redis: EmbeddedRedis, recorder: Recorder
) -> None:
    settings = Settings(redis_url=private_redis.url)
    limiter = Limiter(settings, deadline=DEADLINE, recorder=recorder, clock=Clock())

    async def ticking(during: Callable[[], Awaitable[list[Verdict]]]) -> tuple[list[Verdict], int]:
        ticks = 0
        done = asyncio.ensure_future(during())
        while not done.done():
            await asyncio.sleep(0.001)
            ticks += 1
        return done.result(), ticks

    async def scenario() -> None:
        first = await limiter.check_async(TEN, "c")
        assert first.decision is not None and first.decision.remaining == 9
        with paused(private_redis):
            start = time.perf_counter()
            verdicts, ticks = await ticking(
                lambda: asyncio.gather(*(limiter.check_async(TEN, f"c{i}") for i in range(20)))
            )
            took = time.perf_counter() - start
        assert verdicts == [Verdict(None, None)] * 20
        assert took < BOUND and ticks >= 5  # the loop ran on while the checks waited
        after = await limiter.check_async(TEN, "c")
        assert after.decision is not None
        await limiter.aclose()

    asyncio.run(scenario())
    assert errors_counted(recorder) == 20


def test_async_verdicts_and_failing_closed(
    private_redis: EmbeddedRedis, recorder: Recorder
) -> None:
    settings = Settings(redis_url=private_redis.url)

    async def scenario() -> None:
        limiter = Limiter(
            settings, deadline=DEADLINE, fail_closed=True, recorder=recorder, clock=Clock()
        )
        verdicts = [await limiter.check_async(TEN, "c") for _ in range(11)]
        assert [v.status for v in verdicts] == [None] * 10 + [429]
        private_redis.stop()
        start = time.perf_counter()
        assert await limiter.check_async(TEN, "c") == Verdict(None, 503)
        assert time.perf_counter() - start < BOUND
        await limiter.aclose()

    asyncio.run(scenario())
    assert errors_counted(recorder) == 1


# -- the local quota ---------------------------------------------------------------------------


def run_windows(limiters: list[Limiter], threads_each: int, clock: Clock, windows: int = 10,
                tries: int = 8) -> list[int]:  # fmt: skip
    """Admitted per window of 10/second: every limiter shares ``clock`` and is asked ``tries``
    times per window by each of its threads; all threads enter each window together."""
    admitted = [0] * windows
    lock = threading.Lock()
    window = [0]

    def advance() -> None:
        clock.now = T0 + window[0] + 0.5
        window[0] += 1

    start = threading.Barrier(len(limiters) * threads_each, action=advance)

    def work(limiter: Limiter) -> None:
        for k in range(windows):
            start.wait(60)
            passed = sum(limiter.check(TEN, "hot").allowed for _ in range(tries))
            with lock:
                admitted[k] += passed

    threads = [
        threading.Thread(target=work, args=(limiter,))
        for limiter in limiters
        for _ in range(threads_each)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return admitted


@pytest.mark.topologies
def test_local_quota_in_one_process_admits_exactly_the_limit(
    settings: Settings, recorder: Recorder
) -> None:
    clock = Clock()
    with Limiter(settings, local_quota=3, clock=clock, recorder=recorder, deadline=EASY) as limiter:
        assert run_windows([limiter], threads_each=6, clock=clock) == [10] * 10
    assert errors_counted(recorder) == 0


@pytest.mark.topologies
def test_local_quota_over_processes_never_passes_the_limit(
    settings: Settings, recorder: Recorder
) -> None:
    # four limiters stand for four processes: nothing shared but Redis
    clock = Clock()
    limiters = [
        Limiter(settings, local_quota=3, clock=clock, recorder=recorder, deadline=EASY)
        for _ in range(4)
    ]
    try:
        per_window = run_windows(limiters, threads_each=3, clock=clock)
    finally:
        for limiter in limiters:
            limiter.close()
    # every limiter asks more than the window holds, so every token granted is spent: exact
    assert per_window == [10] * 10


def test_tokens_held_unspent_are_refused_to_the_others(
    settings: Settings, recorder: Recorder
) -> None:
    # the undershoot bound: a process holding N tokens and asked once keeps N - 1 of them
    clock = Clock()
    quiet, busy, late = (
        Limiter(settings, local_quota=3, clock=clock, recorder=recorder, deadline=EASY)
        for _ in "abc"
    )
    assert quiet.check(TEN, "c").allowed
    assert sum(busy.check(TEN, "c").allowed for _ in range(20)) == 10 - 3
    quiet.close()  # its two unspent tokens go back
    # busy found the window spent: it refuses without asking until the window ends
    assert sum(busy.check(TEN, "c").allowed for _ in range(20)) == 0
    assert sum(late.check(TEN, "c").allowed for _ in range(20)) == 2  # a newcomer has them
    busy.close()
    late.close()


def test_local_quota_spends_without_round_trips_and_gives_back(
    private_redis: EmbeddedRedis, recorder: Recorder
) -> None:
    settings = Settings(redis_url=private_redis.url)
    clock = Clock(T0 + 0.5)
    store = Store(settings)
    key = store.keys.throttle("c", 10, 1, T0)
    limiter = Limiter(settings, local_quota=4, clock=clock, recorder=recorder, deadline=DEADLINE)
    assert limiter.check(TEN, "c").allowed
    assert store.client.get(key) == "4"  # one claim of four
    with paused(private_redis):  # the three tokens held need no Redis
        verdicts = [timed(lambda: limiter.check(TEN, "c")) for _ in range(3)]
        assert all(v.allowed and v.decision is not None for v, _ in verdicts)
        assert all(took < DEADLINE for _, took in verdicts)
        assert errors_counted(recorder) == 0
        # the next one must claim: Redis is paused, so it fails open
        assert limiter.check(TEN, "c") == Verdict(None, None)
    assert errors_counted(recorder) == 1
    # (the claim that timed out may have been applied when Redis woke up: it was in flight,
    # on a connection of its own that Redis may read after this test's GET, unless given a
    # moment: on a loaded machine it read 4, then the claim made it 8)
    time.sleep(0.2)
    taken = int(str(store.client.get(key)))
    assert taken in (4, 8)
    assert sum(limiter.check(TEN, "c").allowed for _ in range(12)) == 10 - taken
    assert store.client.get(key) == "10"
    with paused(private_redis):  # the window is spent: refused without asking Redis
        refused, took = timed(lambda: limiter.check(TEN, "c"))
        assert refused.status == 429 and took < DEADLINE
    clock.now = T0 + 1.5
    assert limiter.check(TEN, "c").allowed
    assert store.client.get(store.keys.throttle("c", 10, 1, T0 + 1)) == "4"
    limiter.close()  # the three tokens left go back
    assert store.client.get(store.keys.throttle("c", 10, 1, T0 + 1)) == "1"
    store.close()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # 3.12+ warns on fork with threads
def test_a_forked_child_claims_its_own_tokens(settings: Settings, recorder: Recorder) -> None:
    store = Store(settings)
    key = store.keys.throttle("c", 10, 1, T0)
    with Limiter(
        settings, local_quota=4, clock=Clock(), recorder=recorder, deadline=EASY
    ) as limiter:
        assert limiter.check(TEN, "c").allowed  # the parent holds three tokens
        pid = os.fork()
        if pid == 0:  # the child: the parent's tokens are not its to spend
            code = 0 if limiter.check(TEN, "c").allowed and store.client.get(key) == "8" else 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert limiter.check(TEN, "c").allowed and store.client.get(key) == "8"
    store.close()


def test_close_gives_back_from_the_async_side(settings: Settings, recorder: Recorder) -> None:
    store = Store(settings)
    key = store.keys.throttle("c", 10, 1, T0)

    async def scenario() -> None:
        limiter = Limiter(settings, local_quota=5, clock=Clock(), recorder=recorder, deadline=EASY)
        assert (await limiter.check_async(TEN, "c")).allowed
        assert store.client.get(key) == "5"
        await limiter.aclose()
        assert store.client.get(key) == "1"

    asyncio.run(scenario())
    store.close()
