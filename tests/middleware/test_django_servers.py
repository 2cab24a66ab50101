"""The generated Django site (``django_site``) under gunicorn (3 workers) and uvicorn: every
request counted exactly under its route template, the 3-query view's queries, and the limit
decorator on a class-based view, checked after a graceful shutdown."""

from __future__ import annotations

import http.client
import os
from collections import Counter
from pathlib import Path

import pytest

from slicecount.embedded import EmbeddedRedis, listen
from slicecount.store import Store
from tests.middleware import django_site
from tests.middleware.helpers import by_label, total
from tests.middleware.test_servers import BIN, ROOT, load, run_server, stop_gracefully

pytest.importorskip("django")
pytestmark = pytest.mark.slow

ROUNDS = 40
"""Each route of the site this many times: enough for every worker to serve many of each."""


def plan(i: int) -> tuple[str, str, str, int]:
    return django_site.ROUTES[i % len(django_site.ROUTES)]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = django_site.make_site(tmp_path_factory.mktemp("django"))
    django_site.migrate(root, {**os.environ, **_env("redis://127.0.0.1:1/0", root)})
    return root


def _env(redis_url: str, root: Path) -> dict[str, str]:
    return {
        "SLICECOUNT_TEST_SITE_REDIS_URL": redis_url,
        "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(root)]),
        "DJANGO_SETTINGS_MODULE": f"{django_site.PROJECT}.settings",
    }


@pytest.mark.parametrize("server", ["gunicorn", "uvicorn"])
def test_a_django_site_counts_every_request_exactly(
    site: Path, tmp_path: Path, server: str
) -> None:
    sock = listen()
    port = sock.getsockname()[1]
    if server == "gunicorn":
        command = [
            str(BIN / "gunicorn"), "-w", "3", "-b", f"fd://{sock.fileno()}",
            "-c", str(ROOT / "examples" / "gunicorn.conf.py"), "--chdir", str(site),
            f"{django_site.PROJECT}.wsgi:application",
        ]  # fmt: skip
    else:
        command = [
            str(BIN / "python"), "-m", "uvicorn", f"{django_site.PROJECT}.asgi:application",
            "--fd", str(sock.fileno()), "--no-access-log", "--app-dir", str(site),
        ]  # fmt: skip
    with EmbeddedRedis() as redis:
        env = _env(redis.url, site)
        process = run_server(command, redis.url, sock, tmp_path, env, app_path=site)
        try:
            total_requests = ROUNDS * len(django_site.ROUTES)
            expected = load(port, plan, total_requests)
            limited = []
            for _ in range(7):  # the class-based view's limit: 5 a minute a client
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                connection.request("GET", "/limited/")
                response = connection.getresponse()
                response.read()
                limited.append(response.status)
                connection.close()
        finally:
            stop_gracefully(process)
        assert limited == [200] * 5 + [429] * 2
        with Store.from_url(redis.url) as store:
            for precision in store.settings.precisions:
                got: Counter[tuple[str, str, int]] = Counter()
                for (method, route, status), n in _requests(store, precision).items():
                    got[(method, route, status)] += n
                expected_all = expected + Counter({("GET", "/limited/", 200): 5,
                                                   ("GET", "/limited/", 429): 2})  # fmt: skip
                assert got == expected_all, precision
            queries = ROUNDS * sum(1 for r in django_site.ROUTES if r[1] == "/queries/")
            assert by_label(store, "db.queries", "operation") == {"SELECT": 3 * queries}
            assert total(store, "http.throttled") == 2


def _requests(store: Store, precision: int) -> Counter[tuple[str, str, int]]:
    from slicecount.core.series import parse

    got: Counter[tuple[str, str, int]] = Counter()
    for series_id in store.series("http.requests", precision):
        name, labels = parse(series_id)
        key = (labels["method"], labels["route"], int(labels["status"]))
        got[key] += sum(n for _, n in store.get(name, precision, labels))
    return got
