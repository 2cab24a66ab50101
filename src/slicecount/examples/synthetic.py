"""``slicecount demo --synthetic``: a minute of synthetic requests recorded through a Recorder
into a private redis-server, then what reads back at each precision (every sum must match)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from slicecount.embedded import EmbeddedRedis
from slicecount.recording.recorder import Recorder
from slicecount.store import Store

DEMO_ROUTES = (("GET", "/", 0.55), ("GET", "/users/{id}", 0.3), ("POST", "/orders", 0.15))
"""(method, route, share of traffic) of the demo's synthetic requests."""
ERROR_SHARE = 0.02
"""Share of the synthetic requests answered with a 500."""

Echo = Callable[[str], None]


def synthetic(
    seconds: int = 60, rate: int = 200, seed: int | None = None, echo: Echo = print
) -> int:
    """Record ``seconds`` of about ``rate`` requests a second (ending now) and print the sums
    read back at each precision; returns how many requests were recorded."""
    rng = random.Random(seed)
    with EmbeddedRedis() as server:
        echo(f"embedded redis-server on {server.url}")
        with Store.from_url(server.url) as store:
            recorder = Recorder(store)
            end = int(time.time())
            start = end - seconds + 1
            expected = 0
            for second in range(start, end + 1):
                for _ in range(rng.randint(rate // 2, rate * 3 // 2)):
                    method, route = pick_route(rng)
                    status = "500" if rng.random() < ERROR_SHARE else "200"
                    labels = {"method": method, "route": route, "status": status}
                    recorder.add("http.requests", 1, labels, now=second + rng.random())
                    expected += 1
            recorder.close()
            echo(f"recorded {expected} requests over {seconds} s through a Recorder\n")
            for precision in store.settings.precisions:
                print_precision(store, precision, start, end, echo)
    return expected


def pick_route(rng: random.Random) -> tuple[str, str]:
    """A (method, route) drawn with the shares of DEMO_ROUTES."""
    roll = rng.random()
    for method, route, share in DEMO_ROUTES:
        if roll < share:
            return method, route
        roll -= share
    return DEMO_ROUTES[-1][0], DEMO_ROUTES[-1][1]


def print_precision(store: Store, precision: int, start: int, end: int, echo: Echo) -> None:
    """One precision's series, slices and sum, then its last six non-empty slices."""
    series_ids = store.series("http.requests", precision)
    columns = store.read(series_ids, precision, start, end)
    first = start - start % precision
    totals = [sum(v or 0 for v in values) for values in zip(*columns.values(), strict=True)]
    shown = [(first + i * precision, total) for i, total in enumerate(totals) if total]
    echo(
        f"precision {precision:>6} s: {len(series_ids)} series, {len(shown)} slices, "
        f"sum {sum(totals)}"
    )
    for slice_start, total in shown[-6:]:
        stamp = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(slice_start))
        echo(f"    {stamp}  {total:>7}")
