"""The ``slicecount`` group and its commands. Only this module configures logging; the options
every command shares (its Settings) are ``options``."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from slicecount.cli.options import settings_options
from slicecount.config import Settings
from slicecount.config.topology import redact
from slicecount.errors import ConfigurationError, MissingExtra, SlicecountError, extra_imports
from slicecount.store import Store

with extra_imports("cli", "the slicecount command"):
    import click


class Commands(click.Group):
    """The commands; a ``SlicecountError`` any of them lets out (Redis unreachable, a refusal)
    is one line on stderr and exit status 1, not a traceback nor a usage error."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except SlicecountError as exc:
            click.echo(f"error: {exc}", err=True)
            ctx.exit(1)


@click.group(cls=Commands)
@click.version_option(
    package_name="slicecount", prog_name="slicecount", message="%(prog)s %(version)s"
)
@click.option("-v", "--verbose", count=True, help="More log output (-vv for debug).")
def main(verbose: int) -> None:
    """slicecount: counters over time in Redis, at seven precisions at once."""
    level = logging.INFO - 10 * verbose
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@main.command()
@settings_options
@click.option("--token", help="require this bearer token / basic password [SLICECOUNT_TOKEN]")
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--port", default=8080, show_default=True, help="port to listen on")
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="worker processes (each gets every option)",
)
def datasource(settings: Settings, host: str, port: int, workers: int) -> None:
    """Serve the Grafana JSON datasource (simpod-json-datasource or SimpleJSON)."""
    try:
        from slicecount.datasource.serving import serve
    except ModuleNotFoundError as exc:
        raise click.ClickException(
            str(MissingExtra("datasource", exc, "slicecount datasource"))
        ) from None
    from slicecount.config.request_limits import Limits
    from slicecount.datasource.auth import open_warning

    try:
        limits = Limits.from_env(os.environ)
    except SlicecountError as exc:
        raise click.BadParameter(str(exc)) from None
    click.echo(
        f"slicecount datasource on http://{host}:{port}/ reading {redact(settings.redis_url)}"
    )
    if not settings.token:
        click.echo(f"warning: {open_warning(f'http://{host}:{port}/')}", err=True)
    serve(settings, limits, host, port, workers)


@main.command()
@settings_options
@click.argument("text")
@click.option("--tag", "tags", multiple=True, help="a tag (repeat for several), e.g. deploy")
@click.option("--title", default="", help="short title (default: the first line of TEXT)")
@click.option("--time", "when", type=float, default=None, help="epoch seconds (default: now)")
@click.option("--end", type=float, default=None, help="epoch seconds the event ended")
def annotate(
    settings: Settings,
    text: str,
    tags: tuple[str, ...],
    title: str,
    when: float | None,
    end: float | None,
) -> None:
    """Record an annotation (a deploy marker...) that Grafana panels show."""
    with Store(settings) as store:
        try:
            annotation = store.annotate(text, tags, when, end, title)
        except SlicecountError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
    click.echo(f"annotation {annotation['id']} at {annotation['time']} ms: {annotation['title']}")


@main.command()
@settings_options
@click.option(
    "--from",
    "shards_before",
    type=int,
    required=True,
    help="the shard count the counters were written with (the configured --shards is the new one)",
)
def reshard(settings: Settings, shards_before: int) -> None:
    """Move the counters written with another shard count to the configured one, exactly
    once (safe to rerun, and beside writers); run again if some were written meanwhile."""
    from slicecount.cleaner.reshard import reshard as move

    with Store(settings) as store:
        try:
            report = move(store, shards_before)
        except SlicecountError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
    click.echo(
        f"moved {report.counters} counters ({report.slices} slices) and {report.annotations} "
        f"annotations from {shards_before} shards to {settings.shards}"
        + (f"; {report.left} slices were written meanwhile: run again" if report.left else "")
    )


@main.command()
@settings_options
@click.option("--interval", default=60.0, show_default=True, help="seconds between passes")
@click.option("--once", is_flag=True, help="one pass with every precision due, then exit (cron)")
@click.option("--now", "now", type=float, default=None, help="trim as if the clock read EPOCH")
@click.option(
    "--sweep-period",
    type=float,
    default=None,
    help="seconds between two sweeps "
    "(the pass that lists every hash) [SLICECOUNT_SWEEP_PERIOD, 3600]",
)
@click.option(
    "--sweep-every",
    type=int,
    default=None,
    deprecated="use --sweep-period SECONDS",
    help="a sweep every N passes: --sweep-period N x --interval",
)
def cleaner(
    settings: Settings,
    interval: float,
    once: bool,
    now: float | None,
    sweep_period: float | None,
    sweep_every: int | None,
) -> None:
    """Trim samples past retention and forget emptied counters (a sidecar daemon)."""
    from slicecount.cleaner import Cleaner

    if sweep_every is not None:
        if sweep_period is not None:
            raise click.UsageError("give --sweep-period or --sweep-every, not both")
        if sweep_every < 1:
            raise click.BadParameter(f"must be >= 1, got {sweep_every}", param_hint="--sweep-every")
        sweep_period = sweep_every * interval
    if sweep_period is not None:
        try:
            settings = settings.with_changes(sweep_period=sweep_period)
        except SlicecountError as exc:
            raise click.BadParameter(str(exc), param_hint="--sweep-period") from None
    clock: Callable[[], float] = time.time
    if now is not None:  # pinned at start, then advancing with the real clock
        offset = now - time.time()
        clock = lambda: time.time() + offset  # noqa: E731
    store = Store(settings)
    worker = Cleaner(store, interval, clock=clock, writers_clock=time.time)
    signals = []

    def on_signal(signum: int, frame: object) -> None:
        signals.append(signum)
        if len(signals) > 1:  # a second signal: stop now
            raise SystemExit(1)
        logging.getLogger("slicecount.cleaner").info("signal %d: finishing the chunk", signum)
        worker.stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        if once:
            try:
                worker.run_once(every_precision=True)
            except SlicecountError as exc:
                click.echo(f"error: {exc}", err=True)
                sys.exit(1)
        else:
            worker.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        store.close()


@main.command()
@settings_options
@click.argument("name")
@click.option("--precision", default=60, show_default=True, help="slice length in seconds")
@click.option("--by", default=None, help="sum the series per value of this label")
@click.option("--since", default="10m", show_default=True, help="how far back: 30s, 10m, 2h, 1d")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def show(
    settings: Settings, name: str, precision: int, by: str | None, since: str, as_json: bool
) -> None:
    """A metric's recent counts per series (or per label value) with a sparkline each."""
    import json

    from slicecount import show as view

    try:
        span = view.parse_span(since)
        settings.check_precision(precision)
    except ConfigurationError as exc:
        raise click.UsageError(str(exc)) from None
    with Store(settings) as store:  # Redis unreachable: one line, status 1 (Commands)
        end = time.time()
        starts, rows = view.collect(store, name, precision, end - span, end, by)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "name": name,
                    "precision": precision,
                    "by": by,
                    "start": starts[0],
                    "series": [
                        {
                            "key": r.key,
                            "total": r.total,
                            "values": [[t, v] for t, v in zip(starts, r.values, strict=True)],
                        }
                        for r in rows
                    ],
                }
            )
        )
        return
    if not rows:
        click.echo(f"no series of {name!r} at precision {precision} s")
        return
    click.echo(f"{name} per {precision} s slice, last {since}")
    click.echo(view.table(rows, by or "series"))


@main.command()
@click.option("--duration", type=float, default=None, help="stop by itself after SECONDS")
@click.option("--port", default=8080, show_default=True, help="the datasource's port")
@click.option("--rate", default=40.0, show_default=True, help="requests per second sent")
@click.option("--seed", default=None, type=int, help="random seed of the traffic")
@click.option(
    "--synthetic",
    is_flag=True,
    help="instead: record 60 s of synthetic counters "
    "through a Recorder and print what reads back at each precision",
)
def demo(duration: float | None, port: int, rate: float, seed: int | None, synthetic: bool) -> None:
    """The whole stack on this machine: Redis, example apps, traffic, cleaner, datasource."""
    try:
        if synthetic:
            from slicecount.examples.synthetic import synthetic as record

            record(60, 200, seed, click.echo)
            return
        from slicecount.demo.stack import Demo

        stack = Demo(port=port, rate=rate, seed=seed)  # a missing dependency, a port in use
    except SlicecountError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    # The services run in sessions of their own: a terminal's Ctrl-C (or a hang-up) reaches
    # only this process, which stops them in order; a second one kills what still runs.
    hurry = threading.Event()
    stopping = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        if not stopping.is_set():
            raise KeyboardInterrupt
        if not hurry.is_set():
            click.echo("killing what still runs: its counts may be lost", err=True)
        hurry.set()

    previous = {
        s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }
    failed = False
    try:
        click.echo("starting the slicecount demo ...")
        stack.start(click.echo)
        click.echo(
            "traffic running; Ctrl-C stops everything"
            if duration is None
            else f"traffic running for {duration:g} s; Ctrl-C stops everything"
        )
        stack.run(duration if duration is not None else 10 * 365 * 86400.0, click.echo)
    except KeyboardInterrupt:
        pass
    except SlicecountError as exc:
        click.echo(f"error: {exc}", err=True)
        failed = True
    finally:
        stopping.set()
        click.echo(
            "stopping: traffic, the apps (writing their last counts), the cleaner and "
            "the datasource, redis last ..."
        )
        stopped = stack.stop(hurry)
        for sig, handler in previous.items():  # the caller's again (a test, an embedding)
            signal.signal(sig, handler)
    if failed or stopped.lost:
        click.echo(stopped.report(), err=True)
        sys.exit(1)
    click.echo(stopped.report())
