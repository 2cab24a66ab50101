"""The Redis Cluster fixture itself: it comes up, a redis-py cluster client reaches all three
masters through it, and killing a master hands its slots to the replica."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from redis.cluster import ClusterNode, RedisCluster

from tests.topologies import ClusterGroup

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def group() -> Iterator[ClusterGroup]:
    with ClusterGroup() as started:
        yield started


def cluster_client(group: ClusterGroup) -> RedisCluster:
    seeds = [ClusterNode("127.0.0.1", port) for port in group.seeds]  # type: ignore[no-untyped-call]
    return RedisCluster(startup_nodes=seeds, decode_responses=True)


def test_the_cluster_comes_up(group: ClusterGroup) -> None:
    masters = sorted(node.port for node in group.masters())
    assert len(masters) == 3 and masters == group.seeds
    assert group.url == "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in masters)
    view = group.view(masters[0])
    assert sum(last - first + 1 for n in view for first, last in n.slots) == 16384
    replicated = Counter(n.master_id for n in view if n.master_id is not None)
    assert sorted(n.id for n in view if n.port in masters) == sorted(replicated)
    assert set(replicated.values()) == {1}


def test_a_cluster_client_reaches_every_master(group: ClusterGroup) -> None:
    keys = {group.master_of(key).port: key for key in (f"key-{i}" for i in range(100))}
    assert sorted(keys) == group.seeds
    with cluster_client(group) as client:
        for port, key in keys.items():
            before = group.commandstats(port).get("set", 0)
            assert client.set(key, port)
            assert client.get(key) == str(port)
            assert group.commandstats(port)["set"] == before + 1


def test_killing_a_master_promotes_its_replica() -> None:
    with ClusterGroup() as fresh, cluster_client(fresh) as client:
        assert client.set("moving", "before")
        old = fresh.master_of("moving")
        promoted = fresh.kill_master_of("moving")
        assert not old.running
        assert fresh.master_of("moving") is promoted
        assert sorted(m.port for m in fresh.masters()) == sorted(
            [*(p for p in fresh.seeds if p != old.port), promoted.port]
        )
        before = fresh.commandstats(promoted.port).get("set", 0)
        assert client.set("moving", "after")  # after a refused connection and a refresh
        assert client.get("moving") == "after"
        assert fresh.commandstats(promoted.port)["set"] == before + 1
