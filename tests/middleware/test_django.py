"""The Django middleware in process, on a generated site (``django_site``): route labels, ORM
queries, errors, the ``SLICECOUNT`` setting, the limit decorator on a class-based view, and
Django's test clients (WSGI and ASGI) counted once a response is read. The same site under
gunicorn and uvicorn: ``test_django_servers.py``."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from slicecount.embedded import EmbeddedRedis
from slicecount.recording import default
from slicecount.store import Store
from tests.middleware import django_site
from tests.middleware.helpers import by_label, total, totals

django = pytest.importorskip("django")

from django.core.exceptions import ImproperlyConfigured  # noqa: E402
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse  # noqa: E402
from django.test import AsyncClient, Client, override_settings  # noqa: E402

from slicecount.middleware.django import SliceCountMiddleware, template  # noqa: E402

LABELLED = [(m, p, r, s) for m, p, r, s in django_site.ROUTES]


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory, redis_server: EmbeddedRedis) -> Path:
    """The generated site, set up in this process (once: Django's settings are global)."""
    root = django_site.make_site(tmp_path_factory.mktemp("django"))
    os.environ["SLICECOUNT_TEST_SITE_REDIS_URL"] = redis_server.url
    os.environ["DJANGO_SETTINGS_MODULE"] = f"{django_site.PROJECT}.settings"
    sys.path.insert(0, str(root))
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0, interactive=False)
    return root


@pytest.fixture
def counted(site: Path, store: Store) -> Iterator[Store]:
    """A flushed store, and the process-wide Recorder the site's ``SLICECOUNT`` configures
    dropped after the test (it is the site's, not the other tests')."""
    yield store
    if default._recorder is not None:
        default._recorder.close(timeout=1)
    default._recorder = None


def flush() -> None:
    assert default.get_recorder().flush()


def counts_by_request(store: Store) -> Counter[tuple[str, str, int]]:
    got: Counter[tuple[str, str, int]] = Counter()
    for series_id, n in totals(store, "http.requests").items():
        labels = dict(part.split("=", 1) for part in series_id[len("http.requests{") : -1]
                      .replace('"', "").split(","))  # fmt: skip
        got[(labels["method"], labels["route"], int(labels["status"]))] += n
    return got


def test_the_test_client_counts_each_request_under_its_route_template(counted: Store) -> None:
    client = Client(raise_request_exception=False)
    for method, path, _, status in LABELLED:
        response = client.generic(method, path)
        assert response.status_code == status, (path, response.content[:200])
    flush()  # counted as the test client returned: nothing closed or read by hand
    assert counts_by_request(counted) == Counter(
        (method, route, status) for method, _, route, status in LABELLED
    )
    labels = by_label(counted, "http.requests", "route")
    assert not any("7" in label or "blue" in label for label in labels)  # no raw path values


def test_the_async_client_runs_the_middleware_on_the_event_loop(counted: Store) -> None:
    async def run() -> None:
        client = AsyncClient(raise_request_exception=False)
        for method, path, _, status in LABELLED:
            response = await client.generic(method, path)
            assert response.status_code == status, path

    asyncio.run(run())
    flush()
    assert counts_by_request(counted) == Counter(
        (method, route, status) for method, _, route, status in LABELLED
    )


def test_every_orm_query_of_a_request_is_counted(counted: Store) -> None:
    client = Client()
    for _ in range(4):
        assert client.get("/queries/").status_code == 200
    flush()
    assert by_label(counted, "db.queries", "operation") == {"SELECT": 12}
    assert total(counted, "db.query.duration.bucket") == 12
    # http.request.queries: 4 requests, each in the bucket of 3 queries, the sum 12 in units
    assert by_label(counted, "http.request.queries.bucket", "le", route="/queries/") == {"3": 4}
    assert total(counted, "http.request.queries.sum_us", route="/queries/") == 12_000_000


def test_a_queries_own_execute_wrapper_is_left_in_place(counted: Store) -> None:
    """Django pops the last wrapper when a ``with connection.execute_wrapper(w)`` block ends:
    ours, put on when the connection opened inside that block, must not be the one popped."""
    from django.contrib.auth.models import User
    from django.db import connection

    assert Client().get("/health").status_code == 200  # the site's middleware loaded
    connection.close()
    seen: list[str] = []

    def mine(execute: Any, sql: str, *args: Any) -> Any:
        seen.append(sql)
        return execute(sql, *args)

    with connection.execute_wrapper(mine):
        User.objects.count()  # opens the connection: ours goes first, outermost
    User.objects.count()
    assert len(seen) == 1 and mine not in connection.execute_wrappers
    flush()
    assert by_label(counted, "db.queries", "operation") == {"SELECT": 2}


def test_the_limit_decorator_on_a_class_based_view_answers_429(counted: Store) -> None:
    client = Client()
    statuses = [client.get("/limited/").status_code for _ in range(7)]
    assert statuses == [200] * 5 + [429] * 2
    refused = client.get("/limited/")
    assert refused.status_code == 429 and int(refused["Retry-After"]) >= 1
    assert refused["RateLimit-Limit"] == "5"
    flush()
    assert by_label(counted, "http.requests", "status", route="/limited/") == {"200": 5, "429": 3}
    assert total(counted, "http.throttled") == 3


def test_the_limit_decorator_on_an_async_view_answers_429_on_the_event_loop(counted: Store) -> None:
    from slicecount.middleware.throttle import default_limiter

    async def run() -> list[int]:
        client = AsyncClient()
        statuses = [(await client.get("/limited-async/")).status_code for _ in range(4)]
        await default_limiter().aclose()  # its connections belong to this loop: closed with it
        return statuses

    assert asyncio.run(run()) == [200, 200, 429, 429]
    flush()
    assert by_label(counted, "http.requests", "status", route="/limited-async/") == {
        "200": 2,
        "429": 2,
    }


def test_a_streaming_response_is_counted_when_the_server_closes_it(counted: Store) -> None:
    from slicecount.recording.recorder import Recorder

    store = Store(counted.settings)
    recorder = Recorder(store, flush_interval=3600)
    chunks = iter([b"a", b"b"])

    def view(request: HttpRequest) -> StreamingHttpResponse:
        return StreamingHttpResponse(chunks)

    with override_settings(SLICECOUNT={"recorder": recorder}):
        middleware = SliceCountMiddleware(view)
    response = middleware(_request("/stream"))
    assert b"".join(response) == b"ab" and recorder.pending == 0
    response.close()
    response.close()  # a second close counts nothing more
    assert recorder.flush()
    assert total(store, "http.requests") == 1
    recorder.close()
    store.close()


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"flush_interval": -1}, "SLICECOUNT['flush_interval']"),
        ({"layout": "bricks"}, "SLICECOUNT['layout']"),
        ({"exclude_paths": ["health"]}, "SLICECOUNT['exclude_paths']"),
        ({"limits": "many/minute"}, "SLICECOUNT['limits']"),
        ({"track_queries": True, "buckets": [2, 1]}, "SLICECOUNT['buckets']"),
        ({"flush_intreval": 1}, "SLICECOUNT['flush_intreval']"),
    ],
)
def test_a_bad_setting_is_improperly_configured_naming_its_key(
    site: Path, given: dict[str, Any], named: str
) -> None:
    with override_settings(SLICECOUNT=given), pytest.raises(ImproperlyConfigured) as raised:
        SliceCountMiddleware(lambda request: HttpResponse())
    assert str(raised.value).startswith(named), raised.value


def test_settings_configure_the_process_wide_recorder_and_the_environment_fills_in(
    counted: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLICECOUNT_PREFIX", "site:")  # not in the dict: the environment's
    url = os.environ["SLICECOUNT_TEST_SITE_REDIS_URL"]
    with override_settings(SLICECOUNT={"redis_url": url, "flush_interval": 2}):
        first = SliceCountMiddleware(lambda request: HttpResponse())
        again = SliceCountMiddleware(lambda request: HttpResponse())
    recorder = default.get_recorder()
    assert first.counter.source.fixed is recorder is again.counter.source.fixed  # one Recorder
    assert recorder.store.settings.prefix == "site:" and recorder.flush_interval == 2


def test_a_celery_worker_of_the_site_takes_the_same_settings(site: Path) -> None:
    from slicecount.middleware.django import configured_settings

    url = os.environ["SLICECOUNT_TEST_SITE_REDIS_URL"]
    with override_settings(SLICECOUNT={"redis_url": url, "prefix": "shop:", "labels": {}}):
        settings = configured_settings()
    assert settings is not None and settings.redis_url == url and settings.prefix == "shop:"
    with override_settings(SLICECOUNT={"track_queries": True}):  # no settings: the environment's
        assert configured_settings() is None


def test_route_templates() -> None:
    assert template("users/<int:id>/") == "/users/<int:id>/"
    assert template("^articles/(?P<y>[0-9]{4})/$") == "/articles/(?P<y>[0-9]{4})/$"
    assert template("fr/about/", "fr", i18n=True) == "/<language>/about/"
    assert template("fr/about/", "fr", i18n=False) == "/fr/about/"
    assert template("about/", "en", i18n=True) == "/about/"  # the default language, unprefixed
    assert template("") == "/"


def _request(path: str) -> HttpRequest:
    request = HttpRequest()
    request.method, request.path, request.path_info = "GET", path, path
    request.META = {"REMOTE_ADDR": "127.0.0.1"}
    return request


def test_a_traced_request_keeps_its_trace_as_an_exemplar(counted: Store) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider().get_tracer("tests")
    header = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    Client().get("/users/7/", HTTP_TRACEPARENT=header)  # a sync view, traced by its header
    other = "00-0af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01"
    asyncio.run(AsyncClient().get("/async/", headers={"traceparent": other}))  # an async one
    with tracer.start_as_current_span("request") as span:  # a span around the request
        Client().get("/queries/")
        ids = span.get_span_context()
    Client().get("/api/items/blue-mug/", HTTP_TRACEPARENT=header[:-1] + "0")  # not sampled
    flush()
    series = counted.series("http.request.duration.bucket", 60)
    found = counted.exemplars(series, 0, 4_102_444_800)
    by_route = {
        dict(p.split("=", 1) for p in s[s.index("{") + 1 : -1].replace('"', "").split(","))[
            "route"
        ]: [dict(e.labels) for e in kept]
        for s, kept in found.items()
    }
    assert by_route == {
        "/users/<int:id>/": [
            {"trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "b7ad6b7169203331"}
        ],
        "/async/": [
            {"trace_id": "0af7651916cd43dd8448eb211c80319c", "span_id": "c7ad6b7169203331"}
        ],
        "/queries/": [{"trace_id": f"{ids.trace_id:032x}", "span_id": f"{ids.span_id:016x}"}],
    }
