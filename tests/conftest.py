"""Fixtures: a real redis-server per session (flushed before each test), stores bound to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from slicecount.config import Settings
from slicecount.embedded import EmbeddedRedis
from slicecount.store import Store


@pytest.fixture(scope="session")
def redis_server() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as server:
        yield server


@pytest.fixture
def redis_client(redis_server: EmbeddedRedis) -> Iterator[redis.Redis]:
    """A raw client for checks and set-up; flushed before each test."""
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def settings(redis_client: redis.Redis, redis_server: EmbeddedRedis) -> Settings:
    return Settings(redis_url=redis_server.url)


@pytest.fixture
def store(settings: Settings) -> Iterator[Store]:
    with Store(settings) as store:
        yield store


@pytest.fixture
def private_redis() -> Iterator[EmbeddedRedis]:
    """A server of the test's own, free to be stopped and restarted."""
    with EmbeddedRedis() as server:
        yield server
