"""Every flushed count arrives exactly once, whatever happens to the replies (real servers)."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Iterator

import pytest
import redis

from slicecount.config import Settings
from slicecount.embedded import EmbeddedRedis
from slicecount.recording.recorder import Recorder
from slicecount.store import Store
from tests.faults import CuttingProxy

PAUSE = 1.5
"""Seconds Redis stays stopped: five times the store's socket timeout."""


def totals(store: Store, name: str, label: str) -> dict[int, dict[str, int]]:
    """precision -> label value -> total count."""
    out: dict[int, dict[str, int]] = {}
    for precision in store.settings.precisions:
        per: dict[str, int] = {}
        for series_id in store.series(name, precision):
            value = series_id.split(f'{label}="')[1].split('"')[0]
            per[value] = sum(n for _, n in store.get(name, precision, {label: value}))
        out[precision] = per
    return out


@pytest.fixture
def paused_redis(private_redis: EmbeddedRedis) -> Iterator[EmbeddedRedis]:
    yield private_redis
    if private_redis.pid is not None:
        os.kill(private_redis.pid, signal.SIGCONT)  # never leave a stopped server behind


def pause(server: EmbeddedRedis, seconds: float) -> None:
    assert server.pid is not None
    os.kill(server.pid, signal.SIGSTOP)
    time.sleep(seconds)
    os.kill(server.pid, signal.SIGCONT)


@pytest.mark.slow
def test_a_paused_redis_never_doubles_a_count_from_threads(paused_redis: EmbeddedRedis) -> None:
    settings = Settings(redis_url=paused_redis.url, socket_timeout=0.3)
    recorders = [Recorder(Store(settings), flush_interval=0.05, max_backoff=0.2) for _ in range(3)]
    sent = [0, 0, 0]
    stop = threading.Event()

    def work(k: int) -> None:
        while not stop.is_set():
            for _ in range(20):
                recorders[k].add("paused", 1, {"writer": k})
                sent[k] += 1
            time.sleep(0.005)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    pause(paused_redis, PAUSE)
    time.sleep(0.8)
    stop.set()
    for thread in threads:
        thread.join()
    assert all(recorder.close(timeout=10) for recorder in recorders)

    expected = {str(k): sent[k] for k in range(3)}
    with Store(settings) as store:
        assert all(per == expected for per in totals(store, "paused", "writer").values())


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # 3.12+ warns on fork with threads
def test_a_paused_redis_never_doubles_a_count_from_forked_processes(
    paused_redis: EmbeddedRedis,
) -> None:
    settings = Settings(redis_url=paused_redis.url, socket_timeout=0.3)
    per_process, children = 2000, []
    for k in range(3):
        pid = os.fork()
        if pid == 0:  # a worker: its own Recorder, events spread over ~2.5 s
            code = 1
            try:
                recorder = Recorder(Store(settings), flush_interval=0.05, max_backoff=0.2)
                for i in range(per_process):
                    recorder.add("forked", 1, {"writer": k})
                    if i % 20 == 0:
                        time.sleep(0.025)
                code = 0 if recorder.close(timeout=10) else 2
            finally:
                os._exit(code)
        children.append(pid)
    time.sleep(0.5)
    pause(paused_redis, PAUSE)
    for pid in children:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    with Store(settings) as store:
        expected = {str(k): per_process for k in range(3)}
        assert all(per == expected for per in totals(store, "forked", "writer").values())


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["book", "blocks"])
def test_a_reply_lost_after_redis_applied_the_write_is_resolved_once(
    private_redis: EmbeddedRedis, layout: str
) -> None:
    with CuttingProxy(private_redis.port) as proxy:
        store = Store(Settings(redis_url=proxy.url, socket_timeout=1.0, layout=layout))
        recorder = Recorder(store, flush_interval=3600)
        recorder.add("warm")  # the server learns the script: the cut reply is the write's
        assert recorder.flush()
        for i in range(500):
            recorder.add("cut", 1 + i % 3, {"i": i % 50})
        proxy.cut_next_reply(skip=1)  # the WATCH round trip passes, the transaction's reply not
        assert recorder.flush() is False  # applied by Redis, but the client cannot know
        assert proxy.cuts == 1 and recorder.in_doubt == 1
        recorder.add("cut", 1000, {"i": 0})  # meanwhile, more counts buffer
        assert recorder.flush() is True  # sent again, unchanged: Redis says it had it
        assert recorder.duplicates == 1 and recorder.in_doubt == 0
        recorder.close()
        expected = {str(i): sum(1 + j % 3 for j in range(i, 500, 50)) for i in range(50)}
        expected["0"] += 1000
        assert all(per == expected for per in totals(store, "cut", "i").values())
        store.close()


@pytest.mark.slow
def test_connections_killed_while_big_batches_are_in_flight_lose_and_double_nothing(
    private_redis: EmbeddedRedis,
) -> None:
    # the book's layout: 7 increments a series make batches big enough for the kills to catch
    # in flight (the blocks layout's lost replies: test_a_reply_lost_after_redis_applied...)
    settings = Settings(redis_url=private_redis.url, socket_timeout=2.0, layout="book")
    store = Store(settings)
    recorder = Recorder(store, flush_interval=3600, max_series_per_metric=20_000)
    killer = redis.Redis.from_url(private_redis.url)
    kills = 0
    stop = threading.Event()

    def kill() -> None:  # at random moments: mid-request, mid-script, mid-reply
        nonlocal kills
        rng = random.Random(7)
        while not stop.is_set() and kills < 40:
            time.sleep(rng.uniform(0.01, 0.12))
            try:
                kills += int(killer.client_kill_filter(_type="normal", skipme=True))
            except redis.RedisError:
                continue  # a busy server (a big script running): try again

    thread = threading.Thread(target=kill)
    thread.start()
    rounds, series, failures = 4, 10_000, 0
    try:
        for r in range(rounds):
            for i in range(series):
                recorder.add("killed", 1 + r, {"i": i})
            deadline = time.monotonic() + 30
            while not recorder.flush():
                failures += 1
                assert time.monotonic() < deadline, "never got through"
    finally:
        stop.set()
        thread.join()
        killer.close()
    recorder.close()
    print(f"{kills} kills, {failures} failed flushes, {recorder.duplicates} duplicates")
    assert kills > 0 and failures > 0  # the faults happened
    # the check reads 10 000 x 600 slices at once: not under the test's short socket timeout
    with Store(settings.with_changes(socket_timeout=5.0)) as check:
        for precision in (1, 60, 86400):
            ids = check.series("killed", precision)
            assert len(ids) == series
            now = time.time()
            read = check.read(ids, precision, now - 600, now)
            per_series = {sid: sum(n or 0 for n in counts) for sid, counts in read.items()}
            assert set(per_series.values()) == {sum(range(1, rounds + 1))}, precision
    store.close()


@pytest.mark.layouts("book", "blocks")
def test_a_numbered_chunk_sent_twice_is_applied_once(
    store: Store, redis_client: redis.Redis
) -> None:
    from slicecount.operations.chunking import prepare

    keys = store.keys  # a key of "clash" taken by a string: the book's 60 s hash, or its open hash
    clash = keys.counter(60, "clash") if store.settings.layout == "book" else keys.open("clash")
    redis_client.set(clash, "not a hash")
    chunks, _, _ = prepare(store.context, {1_700_000_000: {"clash": 1, "fine": 1}})
    first = store.write_chunk(chunks[0], "w", 1)
    again = store.write_chunk(chunks[0], "w", 1)  # the reply of the first was "lost"
    assert first == (False, 1, 0) and again == (True, 0, 0)
    assert sum(n for _, n in store.get("fine", 60)) == 1  # applied once
    assert redis_client.get("writer:w") == "1" and redis_client.ttl("writer:w") == -1


def test_the_cleaner_forgets_writers_quiet_for_a_week(
    store: Store, redis_client: redis.Redis
) -> None:
    from slicecount.cleaner import Cleaner
    from slicecount.operations.writing import WRITER_MEMORY

    now = time.time()
    redis_client.mset({"writer:old": 5, "writer:new": 9})
    redis_client.zadd("writers:", {"old": int(now - WRITER_MEMORY - 10), "new": int(now)})
    stats = Cleaner(store).run_once(every_precision=True)
    assert stats is not None and stats.writers == 1
    assert redis_client.zrange("writers:", 0, -1) == ["new"]
    assert redis_client.keys("writer:*") == ["writer:new"]


def test_a_refused_watch_leaves_no_watch_behind_on_the_pool(
    store: Store, redis_client: redis.Redis
) -> None:
    from slicecount.errors import StoreError
    from slicecount.operations.chunking import prepare

    redis_client.hset("writer:bad", "x", "1")  # not a writer's number: WRONGTYPE on GET
    redis_client.set("writer:odd", "seven")
    chunks, _, _ = prepare(store.context, {1_700_000_000: {"w": 1}})
    for writer in ("bad", "odd"):
        with pytest.raises(StoreError) as refused:
            store.write_chunk(chunks[0], writer, 1)
        assert refused.value.permanent
        # the watched keys change: a WATCH left on the pooled connection would drop the next
        redis_client.hset("writer:bad", "y", "2")
        redis_client.set("writer:odd", "eight")
        assert store.apply({"after": {1_700_000_000: 1}}) == 0  # the next transaction runs
    assert sum(n for _, n in store.get("after", 60)) == 2
