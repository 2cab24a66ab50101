"""Redis URLs: what each names, decided once; bad ones refused naming the URL."""

from __future__ import annotations

import pytest

from slicecount.config import Settings
from slicecount.config.topology import parse_url, redact, scrub, secrets, without_options
from slicecount.errors import ConfigurationError
from slicecount.store.wire import cluster_arguments, sentinel_arguments


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


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pw1@127.0.0.1:1/0", "redis://:***@127.0.0.1:1/0"),
        ("rediss://app:p%40ss@h:6380/2?ssl_ca_certs=/ca.pem", "rediss://app:***@h:6380/2?ssl_ca_certs=/ca.pem"),
        ("redis://h/0?password=pw1&socket_timeout=1", "redis://h/0?password=***&socket_timeout=1"),
        ("unix://app:pw1@/run/redis.sock?db=1", "unix://app:***@/run/redis.sock?db=1"),
        ("unix:///run/redis.sock?db=1&password=pw1", "unix:///run/redis.sock?db=1&password=***"),
        ("redis+sentinel://:pw1@a:1,b:2/mymaster/0?sentinel_password=pw2&sentinel_username=w",
         "redis+sentinel://:***@a:1,b:2/mymaster/0?sentinel_password=***&sentinel_username=w"),
        ("rediss+cluster://u:pw1@a:7000,b:7001?ssl_password=pw2", "rediss+cluster://u:***@a:7000,b:7001?ssl_password=***"),
        ("redis://:pw/1?x@h:6379/0", "redis://:***@h:6379/0"),  # unencoded "/", "?": all hidden
        ("redis://app@h/0", "redis://app@h/0"),  # a user name alone is no secret
        ("redis://[::1", "redis://[::1"),  # malformed: shown, not refused
    ],
)  # fmt: skip
def test_redact_hides_every_password_and_keeps_the_rest(url: str, shown: str) -> None:
    assert redact(url) == shown
    for secret in secrets(url):
        assert secret not in shown.replace("***", "")
        assert scrub(f"failed at {url}: {secret}", url).count(secret) == 0


def test_secrets_as_written_and_decoded() -> None:
    assert set(secrets("rediss://app:p%40ss@h/0?sentinel_password=a+b")) == {
        "p%40ss", "p@ss", "a+b", "a b",
    }  # fmt: skip


def test_bad_urls_show_no_password() -> None:
    for url in ("mongodb://:pw1@h", "redis+cluster://:pw1@a:7000/3", "redis+sentinel://:pw1@h:x/s",
                "redis://:pw1@[::1/0", "redis+sentinel://:pw1@h/svc?retries=3"):  # fmt: skip
        with pytest.raises(ConfigurationError) as raised:
            sentinel_arguments(Settings(redis_url=url))
        assert "pw1" not in str(raised.value) and "***" in str(raised.value)


def test_tls_options_need_tls_and_reach_sentinel_and_cluster_clients() -> None:
    with pytest.raises(ConfigurationError, match=r"ssl_ca_certs in .* need TLS: use rediss://"):
        parse_url("redis://h/0?ssl_ca_certs=/ca.pem")
    with pytest.raises(ConfigurationError, match=r"use rediss\+cluster://"):
        parse_url("redis+cluster://h:7000?ssl_ca_certs=/ca.pem")
    tls = "ssl_ca_certs=/ca.pem&ssl_certfile=/c.pem&ssl_keyfile=/k.pem&ssl_cert_reqs=required"
    _, watchers, primary = sentinel_arguments(
        Settings(redis_url=f"rediss+sentinel://h/svc?{tls}&ssl_check_hostname=false")
    )
    for options in (watchers, primary):
        assert options["ssl"] is True and options["ssl_ca_certs"] == "/ca.pem"
        assert (options["ssl_certfile"], options["ssl_keyfile"]) == ("/c.pem", "/k.pem")
        assert (options["ssl_cert_reqs"], options["ssl_check_hostname"]) == ("required", False)
    _, options = cluster_arguments(Settings(redis_url=f"rediss+cluster://h:7000?{tls}"))
    assert options["ssl"] is True and options["ssl_ca_certs"] == "/ca.pem"
    with pytest.raises(ConfigurationError, match="ssl_cert_reqs='sometimes' is not valid"):
        cluster_arguments(Settings(redis_url="rediss+cluster://h:7000?ssl_cert_reqs=sometimes"))


def test_without_options_keeps_the_url_as_written() -> None:
    drop = frozenset({"socket_timeout"})
    assert without_options("unix:///run/r.sock?db=1&socket_timeout=3", drop) == (
        "unix:///run/r.sock?db=1"
    )
    assert without_options("rediss://h/0?socket_timeout=1", drop) == "rediss://h/0"
    assert without_options("rediss://h/0?ssl_ca_certs=/a/ca.pem", drop) == (
        "rediss://h/0?ssl_ca_certs=/a/ca.pem"
    )
