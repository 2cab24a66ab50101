"""Fixtures: a real redis-server per session (flushed before each test), stores bound to it.

A test marked ``topologies`` runs three times: on that server, on a Redis Cluster (3 masters,
a replica each) and behind Sentinel (a primary, a replica, 3 Sentinels); the last two are
``slow``. Such a test reaches Redis only through ``settings``/``store``/``redis_url`` (and
``redis_client`` for commands that name keys the store's ``keys`` built: on a cluster the keys
carry a shard's hash tag)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import redis

from slicecount.config import DEFAULT_LAYOUT, LAYOUTS, Settings
from slicecount.embedded import EmbeddedRedis
from slicecount.errors import StartupError
from slicecount.store import Store
from tests.tls import Certificates, TlsRedis, make_certificates
from tests.topologies import ClusterGroup, Existing, SentinelGroup

Group = ClusterGroup | SentinelGroup | Existing

TOPOLOGIES = [
    "standalone",
    pytest.param("cluster", marks=pytest.mark.slow),
    pytest.param("sentinel", marks=pytest.mark.slow),
]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("topologies")
    if marker and "topology" in metafunc.fixturenames:
        # ``@pytest.mark.topologies("standalone")`` narrows a module's mark for one test
        chosen = [t for t in TOPOLOGIES if not marker.args or _name(t) in marker.args]
        metafunc.parametrize("topology", chosen, indirect=True)
    layouts = metafunc.definition.get_closest_marker("layouts")
    if layouts and "layout" in metafunc.fixturenames:
        # ``@pytest.mark.layouts("book")`` pins a test of the book's mechanics to its layout;
        # ``@pytest.mark.layouts("book", "blocks")`` runs a behaviour both layouts must have
        metafunc.parametrize("layout", list(layouts.args or LAYOUTS), indirect=True)


LONGEST_FIRST = (
    "tests/test_compaction_failover.py", "tests/workers/test_celery.py", "tests/workers/test_rq.py"
)  # fmt: skip
"""Modules whose tests take minutes, mostly waiting on servers and worker processes (a
failover, 400 recycled Celery children): run first, so that
the other pytest-xdist workers share the rest meanwhile instead of waiting for them at the
end (the order is the same in every worker: xdist requires it)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST_FIRST))  # stable


def _name(topology: object) -> str:
    return str(getattr(topology, "values", [topology])[0])


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture(scope="session")
def tls_certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """A CA, a server certificate for 127.0.0.1 and a client certificate (openssl)."""
    return make_certificates(tmp_path_factory.mktemp("tls"))


def _tls_server(certs: Certificates, client_certificates: bool) -> TlsRedis:
    server = TlsRedis(certs, client_certificates=client_certificates)
    try:
        return server.start()
    except StartupError as exc:
        server.close()
        pytest.skip(f"this redis-server cannot serve TLS (--tls-port): {exc}")


@pytest.fixture(scope="session")
def tls_redis(tls_certificates: Certificates) -> Iterator[TlsRedis]:
    """Managed Redis: TLS only, the CA enough for a client, a password, a restricted ACL user."""
    server = _tls_server(tls_certificates, client_certificates=False)
    yield server
    server.close()


@pytest.fixture(scope="session")
def mtls_redis(tls_certificates: Certificates) -> Iterator[TlsRedis]:
    """The same, asking every client for a certificate its CA signed."""
    server = _tls_server(tls_certificates, client_certificates=True)
    yield server
    server.close()


@pytest.fixture(scope="session")
def spawned_cluster() -> Iterator[ClusterGroup]:
    """Started by the first test that needs it, shared by the session's tests after it."""
    with ClusterGroup() as started:
        yield started


@pytest.fixture(scope="session")
def spawned_sentinels() -> Iterator[SentinelGroup]:
    with SentinelGroup() as started:
        yield started


@pytest.fixture(scope="session")
def cluster_group(request: pytest.FixtureRequest) -> Group:
    """The cluster the ``topologies`` tests run on: SLICECOUNT_TEST_CLUSTER_URL's if set
    (the tests flush it), else the spawned one."""
    url = os.environ.get("SLICECOUNT_TEST_CLUSTER_URL")
    return Existing(url) if url else request.getfixturevalue("spawned_cluster")


@pytest.fixture(scope="session")
def sentinel_group(request: pytest.FixtureRequest) -> Group:
    url = os.environ.get("SLICECOUNT_TEST_SENTINEL_URL")
    return Existing(url) if url else request.getfixturevalue("spawned_sentinels")


@pytest.fixture
def topology(request: pytest.FixtureRequest) -> str:
    """standalone, unless the test is marked ``topologies``."""
    return str(getattr(request, "param", "standalone"))


@pytest.fixture
def redis_url(topology: str, request: pytest.FixtureRequest) -> str:
    """The URL of the test's topology, its data flushed."""
    return flushed_url(topology, request)


def flushed_url(topology: str, request: pytest.FixtureRequest) -> str:
    """The URL of a topology's session servers, emptied (for fixtures of any scope)."""
    if topology == "standalone":
        server: EmbeddedRedis = request.getfixturevalue("redis_server")
        with redis.Redis.from_url(server.url) as client:
            client.flushall()
        return server.url
    group: Group = request.getfixturevalue(f"{topology}_group")
    group.flush()
    return group.url


@pytest.fixture
def redis_client(
    redis_url: str, topology: str, request: pytest.FixtureRequest
) -> Iterator[redis.Redis]:
    """A raw client for checks and set-up (on a cluster, one that follows the slots)."""
    client: redis.Redis
    if topology == "standalone":
        client = redis.Redis.from_url(redis_url, decode_responses=True)
    else:
        client = request.getfixturevalue(f"{topology}_group").client()
    yield client
    client.close()


@pytest.fixture
def layout(request: pytest.FixtureRequest) -> str:
    """The default layout, unless the test is marked ``layouts``."""
    return str(getattr(request, "param", DEFAULT_LAYOUT))


@pytest.fixture
def settings(redis_url: str, layout: str) -> Settings:
    return Settings(redis_url=redis_url, layout=layout)


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    with Store(settings) as store:
        yield store


@pytest.fixture
def private_redis() -> Iterator[EmbeddedRedis]:
    """A server of the test's own, free to be stopped and restarted."""
    with EmbeddedRedis() as server:
        yield server
