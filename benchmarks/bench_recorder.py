"""Recorder.add() rate and flush time, beside book-style Store.incr() per event, in one run.

    python benchmarks/bench_recorder.py [--adds 1000000] [--series 10000] [--rounds 5] [--json]

Targets (issue 2): >= 1 000 000 adds/s on one thread; one flush of 10 000 distinct series
<= 0.5 s. Numbers are medians of several rounds; the machine is shared, so compare ratios.
"""

from __future__ import annotations

import argparse
import statistics
import time

from figures import Figure, emit, json_flag  # beside this file (python puts it on sys.path)
from slicecount import Recorder, Store
from slicecount.embedded import EmbeddedRedis

T0 = 1_700_000_000


def add_rate(recorder: Recorder, adds: int, labelled: bool) -> float:
    add = recorder.add
    labels = {"method": "GET", "route": "/users/{id}", "status": "200"}
    started = time.perf_counter()
    if labelled:
        for _ in range(adds):
            add("http.requests", 1, labels)
    else:
        for _ in range(adds):
            add("hits")
    elapsed = time.perf_counter() - started
    recorder.flush()
    return adds / elapsed


def flush_seconds(recorder: Recorder, series: int) -> float:
    for i in range(series):
        recorder.add("bench.flush", 1, {"i": i}, now=T0)
    started = time.perf_counter()
    ok = recorder.flush()
    elapsed = time.perf_counter() - started
    assert ok, "flush failed"
    return elapsed


def incr_rate(store: Store, events: int) -> float:
    started = time.perf_counter()
    for _ in range(events):
        store.incr("book.hits")
    return events / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adds", type=int, default=1_000_000)
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--incr-events", type=int, default=5_000)
    parser.add_argument("--rounds", type=int, default=5)
    json_flag(parser)
    args = parser.parse_args()

    with EmbeddedRedis() as server, Store.from_url(server.url) as store:
        recorder = Recorder(store, flush_interval=3600, max_series_per_metric=args.series)
        plain, labelled, flushes, incrs = [], [], [], []
        for _ in range(args.rounds):
            plain.append(add_rate(recorder, args.adds, labelled=False))
            labelled.append(add_rate(recorder, args.adds, labelled=True))
            flushes.append(flush_seconds(recorder, args.series))
            incrs.append(incr_rate(store, args.incr_events))
        recorder.close()

    add_plain, add_labelled = statistics.median(plain), statistics.median(labelled)
    flush, incr = statistics.median(flushes), statistics.median(incrs)
    print(f"Recorder.add() unlabelled   {add_plain:>12,.0f} adds/s  (target >= 1,000,000)")
    print(f"Recorder.add() 3 labels     {add_labelled:>12,.0f} adds/s")
    print(f"Store.incr() (book style)   {incr:>12,.0f} events/s, one MULTI/EXEC round trip each")
    print(
        f"  add() is {add_plain / incr:,.0f}x (unlabelled) / {add_labelled / incr:,.0f}x "
        "(labelled) the per-event rate of the book's update_counter"
    )
    print(
        f"flush of {args.series:,} distinct series {flush:>8.3f} s  (target <= 0.5 s); "
        f"book style would take {args.series / incr:.2f} s for one event each"
    )
    if args.json:
        emit("recorder", [
            Figure("add_unlabelled", "Recorder.add() unlabelled", add_plain, "adds/s", "higher"),
            Figure("add_labelled", "Recorder.add() 3 labels", add_labelled, "adds/s", "higher"),
            Figure("flush", f"flush of {args.series:,} series", flush, "s", "lower"),
            Figure("incr", "Store.incr() (book style)", incr, "events/s", "higher"),
        ])  # fmt: skip


if __name__ == "__main__":
    main()
