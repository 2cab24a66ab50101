"""Sweeps on every schedule users run (issue 22): ``--once`` from cron at any minute, a daemon's
first pass and three cleaners racing forget the counters whose slices all lie past retention,
on one server and on a 3-master cluster; none sweeps a precision twice in a sweep period."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict

import pytest
import redis
from click.testing import CliRunner, Result

from slicecount.cleaner import Cleaner, PassStats
from slicecount.cleaner.schedule import pass_index, pass_start, sweep_every
from slicecount.cli import main
from slicecount.config import DEFAULT_PRECISIONS as PRECISIONS
from slicecount.config import Settings
from slicecount.core.slices import oldest_kept, slice_start
from slicecount.operations.trimming import claim_sweep, cleaner_records
from slicecount.store import Store

pytestmark = [
    pytest.mark.topologies("standalone", "cluster"),
    pytest.mark.layouts("book"),  # the book's sweeps (the blocks layout's walk: test_compaction)
]

NOW = 1_700_006_400  # a multiple of 86400
AT = NOW + 1234.5  # 20 min 34.5 s past an hour: no sweep falls on it by the pass number
DEAD = [f"gone.r{i}" for i in range(200)]  # a route that stopped, a metric renamed
DEAD_TIMES = [NOW - 1000 * 86400 - k * 3600 for k in range(3)]  # 1 000 days old
LIVE = [f"live.r{i}" for i in range(20)]
# the last 100 s, and 50 to 60 minutes ago (past retention at 1 s and 5 s, inside it at 60 s
# and coarser): no slice lies within 19 s of a cutoff, so a CLI's start-up takes none away
LIVE_TIMES = [int(AT) - k for k in range(0, 100, 3)] + [
    int(AT) - 3000 - k for k in range(0, 600, 60)
]


@pytest.fixture
def populated(store: Store) -> Store:
    store.apply(
        {name: dict.fromkeys(DEAD_TIMES, 1) for name in DEAD}
        | {name: dict.fromkeys(LIVE_TIMES, 2) for name in LIVE}
    )
    assert all(store.series(name, 1) == [name] for name in DEAD[:3])
    return store


def dead_left(store: Store, client: redis.Redis) -> tuple[list[str], list[str]]:
    """The dead counters' hashes and registry members still in Redis (every shard)."""
    hashes = [str(k) for k in client.scan_iter(match="*count:*gone.r*", count=1000)]
    members = [
        str(member)
        for registry in store.keys.registries()
        for member in client.zrange(registry, 0, -1)
        if "gone.r" in str(member)
    ]
    return hashes, members


def assert_forgotten_and_live_intact(store: Store, client: redis.Redis, at: float) -> None:
    assert dead_left(store, client) == ([], [])
    for precision in store.settings.precisions:
        assert store.series(DEAD[0], precision) == []
        floor = oldest_kept(precision, 120, at)
        want: Counter[int] = Counter()
        for second in LIVE_TIMES:
            if slice_start(second, precision) >= floor:
                want[slice_start(second, precision)] += 2
        assert want, precision
        for name in LIVE:
            assert dict(store.get(name, precision)) == dict(want), (name, precision)


def cleaner_command(url: str, *options: str) -> list[str]:
    return [sys.executable, "-m", "slicecount.cleaner", "--redis-url", url, "--layout", "book",
            *options]  # fmt: skip


def clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("SLICECOUNT_")}


@pytest.mark.slow
def test_once_from_cron_at_any_minute_forgets_dead_counters(
    populated: Store, redis_client: redis.Redis, redis_url: str
) -> None:
    done = subprocess.run(
        cleaner_command(redis_url, "--once", "--now", str(AT)),
        capture_output=True, text=True, env=clean_env(), timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "swept [1, 5, 60, 300, 3600, 18000, 86400]" in done.stderr
    assert_forgotten_and_live_intact(populated, redis_client, AT)


def test_a_daemons_first_pass_forgets_dead_counters(
    populated: Store, redis_client: redis.Redis
) -> None:
    stats = Cleaner(populated, clock=lambda: AT).run_once()  # a daemon's pass, not --once
    assert stats is not None and not stats.interrupted
    # the schedule makes 1, 5 and 60 s due at 20:34; the rest are swept, none on record
    assert stats.swept == list(populated.settings.precisions)
    assert stats.removed == len(DEAD) * 7
    assert_forgotten_and_live_intact(populated, redis_client, AT)


@pytest.mark.slow
def test_the_daemon_command_forgets_dead_counters_at_its_first_pass(
    populated: Store, redis_client: redis.Redis, redis_url: str
) -> None:
    daemon = subprocess.Popen(
        cleaner_command(redis_url, "--now", str(AT), "--interval", "60"),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=clean_env(),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while dead_left(populated, redis_client) != ([], []):
            assert daemon.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=30) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
        daemon.communicate()
    assert_forgotten_and_live_intact(populated, redis_client, AT)


@pytest.mark.topologies("standalone")
def test_a_sweep_in_progress_is_left_to_its_cleaner(
    populated: Store, redis_client: redis.Redis
) -> None:
    # "other" sweeps 1 s slices now
    assert populated.run(claim_sweep(populated.context, 1, None, "other", 60_000))
    stats = Cleaner(populated, clock=lambda: AT, owner="b").run_once()
    assert stats is not None and stats.swept == [5, 60, 300, 3600, 18000, 86400]
    assert 1 in stats.precisions  # trimmed as scheduled, by name
    _, members = dead_left(populated, redis_client)
    assert {m for m in members if m.startswith("1:")} == {f"1:{name}" for name in DEAD}


@pytest.mark.topologies("standalone")
def test_an_interrupted_sweep_is_not_recorded_and_the_next_pass_sweeps(
    populated: Store, redis_client: redis.Redis
) -> None:
    stopped = Cleaner(populated, clock=lambda: AT, owner="c")
    stopped.stop()  # SIGTERM before the first chunk: the sweep of 1 s slices is interrupted
    interrupted = stopped.run_once()
    assert interrupted is not None and interrupted.interrupted
    assert interrupted.precisions == [1] and interrupted.swept == []
    # neither its cutoff nor its sweep
    assert populated.run(cleaner_records(populated.context)) == ({}, {})
    # its claim was given up: the next pass sweeps it
    after = Cleaner(populated, clock=lambda: AT + 60, owner="d").run_once()
    assert after is not None and after.swept == list(populated.settings.precisions)
    assert_forgotten_and_live_intact(populated, redis_client, AT + 60)


def assert_sweeps_a_period_apart(sweeps: dict[int, list[int]], period: float) -> None:
    for precision, starts in sweeps.items():
        starts = sorted(starts)
        gaps = [b - a for a, b in itertools.pairwise(starts)]
        assert all(gap >= sweep_every(precision, period) for gap in gaps), (precision, starts)


def test_a_daemon_sweeps_once_per_period(populated: Store, redis_client: redis.Redis) -> None:
    """Passes every 5 minutes for 3 h 15 min after a first one at 20:34: a precision of up
    to an hour is swept at the first pass and an hour after each sweep, a coarser one once."""
    clock = [AT]
    cleaner = Cleaner(populated, clock=lambda: clock[0])
    first = pass_start(pass_index(AT, 60), 60)
    sweeps: dict[int, list[int]] = defaultdict(list)  # precision -> passes that swept it
    for step in range(40):
        clock[0] = AT + 300 * step
        stats = cleaner.run_once()
        assert stats is not None
        for precision in stats.swept:
            sweeps[precision].append(pass_start(stats.index, 60) - first)
    hourly = [0, 3600, 7200, 10800]
    assert {p: sweeps[p] for p in (1, 5, 60, 300, 3600)} == dict.fromkeys(
        (1, 5, 60, 300, 3600), hourly
    )
    assert sweeps[18000] == sweeps[86400] == [0]
    assert_sweeps_a_period_apart(sweeps, 3600)
    # the figures say so too (each pass counts the precisions it swept)
    series = dict(populated.get("slicecount.cleaner.sweeps", 3600))
    assert sum(series.values()) == sum(len(s) for s in sweeps.values()) == 4 * 5 + 2
    assert dead_left(populated, redis_client) == ([], [])


@pytest.mark.slow
def test_once_from_cron_sweeps_once_per_period(
    populated: Store, redis_client: redis.Redis, redis_url: str
) -> None:
    """An hourly-ish CronJob every 20 minutes from 20:34: the first run sweeps everything, the
    run an hour later the precisions of up to an hour, the others none (counted in the
    ``slicecount.cleaner.sweeps`` series each run writes)."""
    for k in range(5):
        done = subprocess.run(
            cleaner_command(redis_url, "--once", "--now", str(AT + 1200 * k)),
            capture_output=True, text=True, env=clean_env(), timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    per_run = dict(populated.get("slicecount.cleaner.sweeps", 60))
    minute = slice_start(AT, 60)
    assert per_run == {minute: 7, minute + 3600: 5}
    assert dead_left(populated, redis_client) == ([], [])


@pytest.mark.topologies("standalone")
def test_the_sweep_period_options_and_the_deprecated_sweep_every(
    populated: Store, redis_url: str
) -> None:
    def cleaner(at: float, *options: str) -> Result:
        args = ["cleaner", "--redis-url", redis_url, "--layout", "book", "--once", "--now", str(at),
                *options]  # fmt: skip
        return CliRunner().invoke(main, args)

    def swept_at() -> dict[int, int]:
        return populated.run(cleaner_records(populated.context))[1]

    first = pass_start(pass_index(AT, 60), 60)
    assert cleaner(AT).exit_code == 0 and swept_at() == dict.fromkeys(PRECISIONS, first)
    # a sweep every 2 passes of 30 s: a period of 60 s, so 1, 5 and 60 s slices are swept
    # again a minute later (the others once per slice); the option says it is deprecated
    old = cleaner(AT + 60, "--sweep-every", "2", "--interval", "30")
    assert old.exit_code == 0 and "deprecated" in old.stderr
    second = pass_start(pass_index(AT + 60, 30), 30)  # 20:35:30
    assert swept_at() == dict.fromkeys(PRECISIONS, first) | dict.fromkeys((1, 5, 60), second)
    assert cleaner(AT + 120).exit_code == 0  # the default period: nothing due yet
    assert swept_at()[1] == second
    assert cleaner(AT + 240, "--sweep-period", "120").exit_code == 0
    assert swept_at()[1] == first + 240 and swept_at()[300] == first
    both = cleaner(AT + 300, "--sweep-period", "60", "--sweep-every", "2")
    assert both.exit_code == 2 and "not both" in both.stderr
    bad = cleaner(AT + 300, "--sweep-period", "0")
    assert bad.exit_code == 2 and "--sweep-period" in bad.stderr
    with pytest.warns(DeprecationWarning, match="sweep_period"):
        assert Cleaner(populated, interval=30, sweep_every=4).sweep_period == 120
    assert Cleaner(populated).sweep_period == 3600


RACE_SPEED = 600.0
"""Simulated seconds per wall second: 3 s of wall time are 30 minutes of passes."""


@pytest.mark.slow
def test_three_cleaners_racing_sweep_once_per_period(
    populated: Store, redis_client: redis.Redis, settings: Settings
) -> None:
    """Three cleaners (own store, own owner) on a clock running 600x, a pass every minute and
    a sweep period of 10 minutes: while one sweeps, the others take the next passes and must
    leave its sweep alone; every sweep of a precision lies a period after the one before."""
    start_real = time.monotonic()
    frozen: list[float] = []

    def clock() -> float:
        return frozen[0] if frozen else AT + (time.monotonic() - start_real) * RACE_SPEED

    done = threading.Event()
    passes: list[PassStats] = []
    lock = threading.Lock()

    def cleaner_loop(owner: str) -> None:
        with Store(settings) as store:
            cleaner = Cleaner(store, clock=clock, owner=owner, sweep_period=600)
            while not done.is_set():
                stats = cleaner.run_once()
                if stats is not None:
                    with lock:
                        passes.append(stats)
                time.sleep(0.002)

    threads = [threading.Thread(target=cleaner_loop, args=(f"c{k}",)) for k in range(3)]
    for thread in threads:
        thread.start()
    # 3 s at least (30 minutes: three sweep periods), and a dozen passes (a loaded machine
    # makes a cluster's passes slow, not fewer: the clock runs on)
    while time.monotonic() - start_real < 60:
        with lock:
            if len(passes) >= 12 and time.monotonic() - start_real >= 3:
                break
        time.sleep(0.05)
    frozen.append(clock())
    done.set()
    for thread in threads:
        thread.join(timeout=120)
    sweeps: dict[int, list[int]] = defaultdict(list)
    for stats in passes:
        for precision in stats.swept:
            sweeps[precision].append(pass_start(stats.index, 60))
    assert len({stats.index for stats in passes}) == len(passes)  # one cleaner per pass
    assert len(passes) >= 12, len(passes)
    assert set(sweeps) == set(settings.precisions)  # each swept, by one cleaner or another
    assert_sweeps_a_period_apart(sweeps, 600)
    assert len(sweeps[1]) >= 2, sweeps  # the race lasted more than a period
    assert dead_left(populated, redis_client) == ([], [])
    for precision in settings.precisions:  # nothing inside retention was lost
        floor = oldest_kept(precision, 120, frozen[0])
        want = {slice_start(s, precision) for s in LIVE_TIMES if slice_start(s, precision) >= floor}
        for name in LIVE[:3]:
            assert want <= {start for start, _ in populated.get(name, precision)}
