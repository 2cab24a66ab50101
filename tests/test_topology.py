"""Redis URLs: what each names, decided once; bad ones refused naming the URL."""

from __future__ import annotations

import pytest

from slicecount.config import Settings
from slicecount.errors import ConfigurationError
from slicecount.topology import parse_url
from slicecount.wire import sentinel_arguments


@pytest.mark.parametrize(
    "url", ["redis://localhost:6379/0", "rediss://h:1/2", "unix:///tmp/redis.sock?db=1"]
)
def test_one_server(url: str) -> None:
    topology = parse_url(url)
    assert topology.kind == "standalone" and topology.url == url


def test_sentinel() -> None:
    topology = parse_url(
        "redis+sentinel://:s3cret@10.0.0.1:26379,10.0.0.2,[::1]:26380/mymaster/2"
        "?socket_timeout=0.5&sentinel_password=watch"
    )
    assert topology.kind == "sentinel"
    assert topology.nodes == (("10.0.0.1", 26379), ("10.0.0.2", 26379), ("::1", 26380))
    assert (topology.service, topology.db, topology.password) == ("mymaster", 2, "s3cret")
    assert topology.options == {"socket_timeout": "0.5", "sentinel_password": "watch"}
    nodes, watchers, primary = sentinel_arguments(Settings(redis_url=topology.url))
    assert nodes == [("10.0.0.1", 26379), ("10.0.0.2", 26379), ("::1", 26380)]
    assert watchers["password"] == "watch" and watchers["socket_timeout"] == 0.5
    assert primary["password"] == "s3cret" and primary["db"] == 2
    assert primary["socket_timeout"] == 0.5 and primary["protocol"] == 2
    tls = parse_url("rediss+sentinel://h/svc?db=3")
    assert tls.tls and tls.db == 3


def test_cluster() -> None:
    topology = parse_url("redis+cluster://a:7000,b:7001?password=x")
    assert topology.kind == "cluster"
    assert topology.nodes == (("a", 7000), ("b", 7001)) and topology.password == "x"


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        ("mongodb://h", "unknown redis URL scheme 'mongodb'"),
        ("redis+sentinel://h:26379", "names its service"),
        ("redis+sentinel://h:26379/svc/x", "database must be a number"),
        ("redis+sentinel://h:port/svc", "port must be a number"),
        ("redis+cluster://a:7000/3", "only database 0"),
        ("redis+sentinel:///svc", "no host"),
    ],
)
def test_bad_urls_name_the_problem(url: str, needle: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        parse_url(url)
    assert needle in str(raised.value) and (url in str(raised.value) or "mongodb" in needle)


def test_unknown_sentinel_option() -> None:
    with pytest.raises(ConfigurationError, match="unknown option 'retries'"):
        sentinel_arguments(Settings(redis_url="redis+sentinel://h/svc?retries=3"))
