"""What a failover loses: Recorders writing through a master's SIGKILL, on a Redis Cluster and
behind Sentinel.

    python benchmarks/bench_failover.py [--runs 3] [--loads steady,loaded,stalled]
                                        [--stall 0.5] [--json]

Each run starts a fresh topology (tests/topologies.py): a 3-master cluster whose master of one
series is SIGKILLed, or a primary, its replica and 3 Sentinels whose primary is SIGKILLed; the
writers (tests.topologies.write_through_load: Recorder threads) write before, through and after
the failover, then flush until Redis answers. Per run: counts sent and stored, doubled (stored
past sent: must be 0, the exactly-once writer sequence), lost (sent - stored), the resent
chunks Redis had already applied (each one a count that would have doubled without the
sequence), and the replication state at the kill: how far the replica's processed offset was
behind the master's (bytes of the replication stream), and how much of that still sat in the
master's output buffer to the replica (omem: bytes no socket had taken yet, which die with
the master; the rest is in kernel buffers and still reaches the replica). On the cluster the
loss is split between the killed master's slots and the others'.

Redis replicates asynchronously: a write the old master acknowledged but had not yet sent its
replica is gone when the replica takes over, and the writer cannot know (the reply came). So
the loss is at most what the replica lacked at the kill: about one flush of that shard when
replication keeps up. Three loads:

- steady: write_through's defaults, as the tests run them: 4 writers, 10 series each, 50
  counts every 20 ms, flushes every 100 ms (~9 000 counts/s).
- loaded: 4 writers, 2 000 series each, counting without pause: the most one Python process
  makes. Flushes are due every 100 ms, but the counting threads hold the GIL, so a writer
  flushes about once a second, ~14 000 HINCRBY (~1.5 MB of replication stream) a flush.
- stalled: loaded, and the replica is SIGSTOPped for --stall seconds before the kill (and
  SIGCONTed right after it): a replica that fell behind (a busy or paused host, a slow link).
  On this machine's loopback the replica keeps up with any load the writers make, so this is
  how a real lag is made to happen.

No target but the invariant: nothing doubled. The losses are reported as they come.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import redis
from redis.crc import key_slot

from figures import Figure, emit, json_flag  # beside this file (python puts it on sys.path)
from slicecount.config import Settings
from slicecount.core.keys import KeySpace
from slicecount.core.series import encode
from slicecount.embedded import EmbeddedRedis

# tests.topologies spawns the topologies and the writers; it lives with the tests
sys.path.append(str(Path(__file__).resolve().parent.parent))
from tests.topologies import ClusterGroup, Load, SentinelGroup, Written, write_through_load

LOADED = Load(series=2000, adds=2000, pause=0.0, before=3.0, after=2.0)
LOADS = {"steady": Load(), "loaded": LOADED, "stalled": LOADED}


class Watch:
    """A master and its replica: offsets and the master's buffer to the replica."""

    def __init__(self, master: EmbeddedRedis, replica: EmbeddedRedis) -> None:
        self.master = redis.Redis(port=master.port, decode_responses=True)
        self.replica = redis.Redis(port=replica.port, decode_responses=True)
        self.replica_pid = replica.pid

    def replica_offset(self) -> int:
        return int(self.replica.info("replication")["slave_repl_offset"])

    def master_offset(self) -> int:
        return int(self.master.info("replication")["master_repl_offset"])

    def omem(self) -> int:
        """Bytes in the master's output buffer to its replica (not yet taken by the socket)."""
        return sum(int(c["omem"]) for c in self.master.client_list(_type="replica"))

    def drained(self, timeout: float = 2.0) -> int:
        """The replica's offset once it stops moving (its master dead: it read what reached
        it, a transaction cut short is dropped)."""
        deadline = time.monotonic() + timeout
        last, steady = self.replica_offset(), 0
        while steady < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
            now = self.replica_offset()
            steady = steady + 1 if now == last else 0
            last = now
        return last


@dataclass
class Strike:
    """The failover of one run: optionally stall the replica, look, kill, remember."""

    watch: Watch
    kill: Callable[[Callable[[], object]], object]  # SIGKILL, call its argument, wait
    stall: float  # seconds the replica is stopped before the kill; 0: no stall
    lag: int = 0  # bytes the master had written and the replica not processed, at the kill
    omem: int = 0  # of which still in the master's buffer to the replica
    missed: int = 0  # bytes the master had written that the replica never got (at least)
    failover_seconds: float = 0.0

    def __call__(self) -> None:
        watch, pid = self.watch, self.watch.replica_pid
        assert pid is not None
        switch, stopped = sys.getswitchinterval(), False
        try:
            if self.stall:
                done = watch.replica_offset()  # a stopped replica answers nothing
                os.kill(pid, signal.SIGSTOP)
                stopped = True
                time.sleep(self.stall)
            # the writer threads hold the GIL: look and kill without waiting 5 ms turns for it
            # (only now: short turns slow the writers down)
            sys.setswitchinterval(0.0001)
            if not stopped:
                done = watch.replica_offset()
            self.omem, written = watch.omem(), watch.master_offset()
            self.lag = written - done
            watch.master.close()  # before the kill: the master is about to die

            def then() -> None:
                nonlocal stopped
                sys.setswitchinterval(switch)
                if stopped:
                    os.kill(pid, signal.SIGCONT)
                    stopped = False
                self.missed = max(0, written - watch.drained())

            started = time.monotonic()
            self.kill(then)
            self.failover_seconds = time.monotonic() - started
        finally:
            sys.setswitchinterval(switch)
            if stopped:  # the kill failed: never leave the replica stopped
                os.kill(pid, signal.SIGCONT)
            watch.replica.close()


@dataclass(frozen=True)
class Run:
    written: Written
    strike: Strike
    killed: frozenset[str]  # the series ("w:i") the killed master held

    def sums(self, keys: frozenset[str] | None = None) -> tuple[int, int, int]:
        """(sent, lost, doubled) over ``keys`` (default: every series)."""
        lost = self.written.lost()
        chosen = lost if keys is None else keys
        sent = sum(self.written.sent[k] for k in chosen)
        return sent, sum(max(lost[k], 0) for k in chosen), sum(max(-lost[k], 0) for k in chosen)


def cluster_run(load: Load, stall: float) -> Run:
    with ClusterGroup() as group:
        keys = KeySpace("", Settings(redis_url=group.url).shards)
        victim = keys.counter(86400, encode("failover", {"w": 0, "i": 0}))
        master = group.master_of(victim)
        held = next(n for n in group.view(master.port) if n.port == master.port)
        watch = Watch(master, group.replica_of_master_of(victim))
        strike = Strike(watch, lambda then: group.kill_master_of(victim, then), stall)
        written = write_through_load(group.url, strike, load)
    killed = frozenset(
        key
        for key, series_id in written.ids.items()
        if held.owns(key_slot(keys.counter(86400, series_id).encode()))
    )
    return Run(written, strike, killed)


def sentinel_run(load: Load, stall: float) -> Run:
    with SentinelGroup() as group:
        strike = Strike(Watch(group.primary, group.replica), group.kill_primary, stall)
        written = write_through_load(group.url, strike, load)
    return Run(written, strike, frozenset(written.ids))


def one_flush(run: Run, writers: int) -> float:
    """Counts in one flush of every writer on the killed master's slots: the most a failover
    should lose while the replica keeps up."""
    return run.sums(run.killed)[0] / (run.written.flushes / writers)


def show(index: int, run: Run, writers: int, cluster: bool) -> None:
    sent, lost, doubled = run.sums()
    written, strike = run.written, run.strike
    line = (
        f"    run {index}: sent {sent:>9,}  stored {sum(written.stored.values()):>9,}  "
        f"doubled {doubled}  lost {lost:>6,}"
    )
    if cluster:
        on_killed = run.sums(run.killed)
        others = run.sums(frozenset(written.ids) - run.killed)
        line += (
            f" (killed master's slots {on_killed[1]:,} of {on_killed[0]:,}; others {others[1]:,})"
        )
    print(
        f"{line}\n      one flush of each writer there ~{one_flush(run, writers):,.0f} counts "
        f"({written.flushes / writers:.0f} flushes a "
        f"writer in {written.seconds:.1f} s); at the kill the replica was {strike.lag:,} B "
        f"behind ({strike.omem:,} B still in the master's buffer) and never got {strike.missed:,} "
        f"B; failover {strike.failover_seconds:.1f} s; resent chunks Redis had applied "
        f"{written.duplicates}; dropped by full buffers {written.dropped}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="failovers per topology and load")
    parser.add_argument("--loads", default=",".join(LOADS), help="comma-separated, of: %(default)s")
    parser.add_argument("--stall", type=float, default=0.5, help="seconds the replica stops")
    json_flag(parser)
    args = parser.parse_args()
    # the writers' "cannot write to redis, buffering" and "writes again" are expected here
    logging.getLogger("slicecount").setLevel(logging.ERROR)
    figures: list[Figure] = []
    for name in args.loads.split(","):
        load = LOADS[name]
        stall = args.stall if name == "stalled" else 0.0
        for topology, run_one in (("cluster", cluster_run), ("sentinel", sentinel_run)):
            print(f"{topology}, {name} load:", flush=True)
            runs = []
            for index in range(1, args.runs + 1):
                runs.append(run_one(load, stall))
                show(index, runs[-1], load.writers, topology == "cluster")
            lost = sum(run.sums()[1] for run in runs)
            doubled = sum(run.sums()[2] for run in runs)
            worst = max(run.sums()[1] / one_flush(run, load.writers) for run in runs)
            print(
                f"  {topology}, {name}: lost {lost:,} in {args.runs} failovers, doubled {doubled}; "
                f"the worst run lost {worst:.2f} of one flush of each writer"
            )
            for what, value in (("lost", lost), ("doubled", doubled)):
                key, label = f"{topology}_{name}_{what}", f"{topology}, {name} load: {what}"
                figures.append(Figure(key, label, value, "counts", "lower"))
    if args.json:
        emit("failover", figures)


if __name__ == "__main__":
    main()
