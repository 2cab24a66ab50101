"""The ``slicecount`` command line. Only this module configures logging."""

from __future__ import annotations

import logging
import random
import time

import click

from slicecount.embedded import EmbeddedRedis
from slicecount.recorder import Recorder
from slicecount.store import Store

DEMO_ROUTES = (("GET", "/", 0.55), ("GET", "/users/{id}", 0.3), ("POST", "/orders", 0.15))
"""(method, route, share of traffic) of the demo's synthetic requests."""


@click.group()
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
def main(verbose: int) -> None:
    """slicecount: counters over time in Redis, at seven precisions at once."""
    level = logging.WARNING - 10 * verbose
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@main.command()
@click.option("--seconds", default=60, show_default=True, help="Synthetic traffic to record.")
@click.option("--rate", default=200, show_default=True, help="Mean requests per second.")
@click.option("--seed", default=None, type=int, help="Random seed, for a reproducible run.")
def demo(seconds: int, rate: int, seed: int | None) -> None:
    """Record synthetic traffic into a private Redis and print what reads back."""
    rng = random.Random(seed)
    with EmbeddedRedis() as server:
        click.echo(f"embedded redis-server on {server.url}")
        store = Store.from_url(server.url)
        recorder = Recorder(store)
        end = int(time.time())
        start = end - seconds + 1
        expected = 0
        for second in range(start, end + 1):
            for _ in range(rng.randint(rate // 2, rate * 3 // 2)):
                method, route = _pick_route(rng)
                status = "500" if rng.random() < 0.02 else "200"
                labels = {"method": method, "route": route, "status": status}
                recorder.add("http.requests", 1, labels, now=second + rng.random())
                expected += 1
        recorder.close()
        click.echo(f"recorded {expected} requests over {seconds} s through a Recorder\n")
        for precision in store.settings.precisions:
            _print_precision(store, precision, start, end)
        store.close()


def _pick_route(rng: random.Random) -> tuple[str, str]:
    roll = rng.random()
    for method, route, share in DEMO_ROUTES:
        if roll < share:
            return method, route
        roll -= share
    return DEMO_ROUTES[-1][0], DEMO_ROUTES[-1][1]


def _print_precision(store: Store, precision: int, start: int, end: int) -> None:
    series_ids = store.series("http.requests", precision)
    columns = store.read(series_ids, precision, start, end)
    first = start - start % precision
    totals = [sum(v or 0 for v in values) for values in zip(*columns.values(), strict=True)]
    shown = [(first + i * precision, total) for i, total in enumerate(totals) if total]
    click.echo(
        f"precision {precision:>6} s: {len(series_ids)} series, {len(shown)} slices, "
        f"sum {sum(totals)}"
    )
    for slice_start, total in shown[-6:]:
        stamp = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(slice_start))
        click.echo(f"    {stamp}  {total:>7}")
