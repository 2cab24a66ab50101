"""Mistakes in the settings fail when the app is instrumented, naming the bad value, not at
its first request (when the traffic is already being lost)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from flask import Flask
from starlette.applications import Starlette

from slicecount.config import Settings
from slicecount.errors import ConfigurationError
from slicecount.middleware.asgi import SliceCountMiddleware as ASGIMiddleware
from slicecount.middleware.flask import SliceCount
from slicecount.middleware.sqlalchemy import instrument_sqlalchemy
from slicecount.middleware.starlette import SliceCountMiddleware as StarletteMiddleware
from slicecount.middleware.wsgi import SliceCountMiddleware as WSGIMiddleware
from slicecount.recording import default


@pytest.fixture
def no_default() -> Iterator[None]:
    """No process-wide Recorder yet (as in a fresh process), and none left behind."""

    def reset() -> None:
        if default._recorder is not None:
            default._recorder.close(timeout=0.5)
        default._recorder = None
        default._broken = False

    reset()
    yield
    reset()


def _wsgi_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    start_response("200 OK", [])
    return [b"ok"]


SHELLS: dict[str, Callable[..., object]] = {
    "flask": lambda **options: SliceCount(Flask(__name__), **options),
    "starlette": lambda **options: StarletteMiddleware(Starlette(), **options),
    "asgi": lambda **options: ASGIMiddleware(Starlette(), **options),
    "wsgi": lambda **options: WSGIMiddleware(_wsgi_app, **options),
}


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("localhost:6379", "redis URL 'localhost:6379' has no scheme: write e.g. redis://"),
        ("redis://127.0.0.1:6379/0?socket_timout=1", "unexpected keyword argument 'socket_timout'"),
        ("redis://127.0.0.1:port/0", "Port could not be cast to integer value as 'port'"),
    ],
)  # fmt: skip
def test_a_bad_url_in_the_environment_fails_when_the_app_is_wrapped(
    no_default: None, monkeypatch: pytest.MonkeyPatch, shell: str, url: str, message: str
) -> None:
    monkeypatch.setenv("SLICECOUNT_REDIS_URL", url)
    with pytest.raises(ConfigurationError) as raised:
        SHELLS[shell]()
    assert message in str(raised.value) and repr(url) in str(raised.value)


def test_a_bad_url_option_in_settings_fails_when_the_app_is_wrapped(no_default: None) -> None:
    settings = Settings(redis_url="redis://127.0.0.1:6379/0?socket_timout=1")  # a typo
    for build in SHELLS.values():
        with pytest.raises(ConfigurationError, match="socket_timout"):
            build(settings=settings)


def test_the_sqlalchemy_hook_checks_the_environment_too(
    no_default: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sqlalchemy import create_engine

    monkeypatch.setenv("SLICECOUNT_REDIS_URL", "localhost:6379")
    with pytest.raises(ConfigurationError, match="has no scheme"):
        instrument_sqlalchemy(create_engine("sqlite://"))


def test_a_sound_environment_wraps_and_the_default_follows_configure(
    no_default: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLICECOUNT_REDIS_URL", "redis://127.0.0.1:1/0")  # nobody there: fine
    middleware = StarletteMiddleware(Starlette())
    built = default._recorder
    assert built is not None and middleware.counter.source.get() is built
    replaced = default.configure(Settings(redis_url="redis://127.0.0.1:2/0"))
    assert middleware.counter.source.get() is replaced  # configure() after start-up still wins
