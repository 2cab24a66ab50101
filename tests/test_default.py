from __future__ import annotations

from collections.abc import Iterator

import pytest

import slicecount
from slicecount.embedded import EmbeddedRedis
from slicecount.recording import default
from slicecount.store import Store


def _reset() -> None:
    if default._recorder is not None:
        default._recorder.close(timeout=0.5)
    default._recorder = None
    default._broken = False


@pytest.fixture
def clean_default() -> Iterator[None]:
    _reset()
    yield
    _reset()


def test_event_uses_a_recorder_configured_from_the_environment(
    clean_default: None, store: Store, redis_server: EmbeddedRedis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLICECOUNT_REDIS_URL", redis_server.url)
    monkeypatch.setenv("SLICECOUNT_PREFIX", "env:")
    slicecount.event("signups", plan="pro")
    slicecount.event("signups", 2, plan="pro")
    slicecount.event("signups", name="label-called-name", n=3)  # labels may be named name or n
    recorder = slicecount.get_recorder()
    assert recorder.store.settings.prefix == "env:"
    assert recorder.flush()
    with Store(store.settings.with_changes(prefix="env:")) as env_store:
        assert sum(n for _, n in env_store.get("signups", 60, {"plan": "pro"})) == 3
        assert len(env_store.series("signups", 60)) == 2


def test_configure_replaces_and_flushes_the_previous_recorder(
    clean_default: None, store: Store
) -> None:
    first = slicecount.configure(store.settings)
    slicecount.event("swap")
    second = slicecount.configure(store.settings, prefix="b:")
    assert first is not second and first.pending == 0
    assert sum(n for _, n in store.get("swap", 60)) == 1
    assert slicecount.get_recorder() is second


def test_bad_environment_disables_events_without_raising(
    clean_default: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SLICECOUNT_PRECISIONS", "1,1")
    slicecount.event("x")
    slicecount.event("x")
    assert caplog.text.count("slicecount.event is disabled") == 1
    assert "duplicate precision 1" in caplog.text
