"""The Settings every ``slicecount`` command shares, as options: each defaults to its
``SLICECOUNT_*`` variable, and with no Redis named at all a running ``slicecount demo``'s is
read. The commands themselves are ``commands``."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

from slicecount.config import ENV_PREFIX, Settings
from slicecount.demo import state as demo_state
from slicecount.errors import SlicecountError, extra_imports

with extra_imports("cli", "the slicecount command"):
    import click


SETTINGS_OPTIONS = ("redis_url", "prefix", "layout", "precisions", "retention", "shards")
"""Settings given as options; each defaults to its SLICECOUNT_* variable, e.g. --redis-url to
SLICECOUNT_REDIS_URL."""


def settings_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The Settings every command shares, as options that default to ``SLICECOUNT_*``."""
    options = [
        click.option(
            "--redis-url", help="redis://, rediss:// or unix:// URL [SLICECOUNT_REDIS_URL]"
        ),
        click.option("--prefix", help="key prefix [SLICECOUNT_PREFIX]"),
        click.option("--layout", help="how counts are kept: book or blocks [SLICECOUNT_LAYOUT]"),
        click.option(
            "--precisions", help="slice lengths in seconds, e.g. 1,5,60 [SLICECOUNT_PRECISIONS]"
        ),
        click.option(
            "--retention", help="slices kept: 120, or 1=300,60=1440 [SLICECOUNT_RETENTION]"
        ),
        click.option("--shards", type=int, help="registry shards [SLICECOUNT_SHARDS]"),
    ]

    @functools.wraps(command)
    def wrapper(**kwargs: Any) -> Any:
        given = {k: kwargs.pop(k) for k in SETTINGS_OPTIONS}
        if "token" in kwargs:
            given["token"] = kwargs.pop("token")
        if given["redis_url"] is None and not os.environ.get(ENV_PREFIX + "REDIS_URL"):
            given["redis_url"] = demo_redis_url()
        try:
            settings = Settings.from_env(**given)
        except SlicecountError as exc:
            raise click.BadParameter(str(exc)) from None
        return command(settings=settings, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def demo_redis_url() -> str | None:
    """The Redis of a ``slicecount demo`` running now, said on stderr, else None."""
    running = demo_state.running()
    if running is None:
        return None
    click.echo(
        f"reading the running demo's redis {running.redis_url} (pid {running.pid}); "
        "--redis-url or SLICECOUNT_REDIS_URL to choose another",
        err=True,
    )
    return running.redis_url
